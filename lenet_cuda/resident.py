"""cuda/resident's host side: the LL protocol of resident.cu (see its header) and the kernel's
manners on a shared GPU.

A call: the images go into mapped host memory as uint64 pairs {32-bit word of the value, the call's
sequence number}, made by one NumPy operation (bitwise or of the words with seq << 32) that stores
each pair with one aligned 8-byte store: single-copy atomic on x86-64 (an aligned quadword; the
wider vector stores NumPy may use are performed per quadword at least) and on Armv8 (a vector store
is single-copy atomic per element). So the kernel, reading each pair with one 64-bit load, sees a
pair whole, old or new, and the sequence tells which: no store needs to be ordered before another
(no go word stored last, no release fence), on x86 or beyond. The answer comes back the same way:
the host polls one pair's sequence (a memoryview read, no NumPy call), then copies the 10 W pairs at
once (each read whole by the same argument), checks every sequence in the copy and takes the values
from that same copy, never from a second read.

The loop's clock (the deadline) and the kernel's alive word are read every POLL_CHECK polls, not
every poll. Nothing waits forever: a call not answered within POLL_TIMEOUT_S raises RuntimeError (as the
mapped and persistent variants' waits do), after telling the kernel to quit.

Manners (issue 73): the kernel ends after kernels.IDLE_NS (200 µs) without a call, freeing its 8
SMs; it is not launched, nor kept, while another process has a compute context on the GPU (NVML's
nvmlDeviceGetComputeRunningProcesses, asked as a call starts, at most every NVML_EVERY_S: the first
call's launch included, and calls that find the kernel resident too, so a busy loop of calls does
not keep it against a newcomer for longer): then the call goes to the launched mapped path
(cuda/mapped, one kernel a call) and a resident kernel is told to quit. Where NVML cannot answer
(no nvidia-ml-py, no driver), nothing is known and the kernel runs resident. It is never a lab's
reference or a class's default (harness.lab).

    ResidentPlan                    one batch size's wire, views and launch arguments
    Resident(level)                 predict(images), close()
    other_gpu_processes(bus_id)     pids of other processes with a context on the GPU, or None
"""

import os
import sys
import time
from typing import Any

import numpy as np

from harness.base import GPU_PEERS_ENV
from lenet_cuda import kernels

HOST_ALLOC_MAPPED = 2  # cudaHostAllocMapped
POLL_CHECK = 1024  # polls between reads of the clock and of the kernel's alive word
NVML_EVERY_S = 0.1  # while resident, another process is looked for at most this often
QUIT_WAIT_S = 1.0  # after a timeout: how long a kernel told to quit is given to end
POLL_TIMEOUT_S = 5.0  # a call not answered by then is a failed kernel, not a slow one (as model.py's)


class ResidentPlan:
    """Everything a call of batch size n needs, built once: the wire in mapped memory, its views."""

    def __init__(self, cp: Any, fn: Any, w: dict, dtype: str, n: int):
        words = kernels.pair_words(dtype)
        shapes = kernels.resident_buffer_shapes(n)
        x_count, out_count = n * 784 * words, n * 10 * words  # pairs
        # the kernel's x, out and ctl: host memory it reads and writes across the bus
        self.pinned = tuple(cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(size, HOST_ALLOC_MAPPED), 0)
                            for size in (8 * x_count, 8 * out_count, 4 * shapes["ctl"][0]))
        self.x_pairs = np.frombuffer(self.pinned[0], np.uint64, x_count)  # (N * 784 * W,)
        self.out_pairs = np.frombuffer(self.pinned[1], np.uint64, out_count)  # (N * 10 * W,)
        self.ctl = np.frombuffer(self.pinned[2], np.uint32, 4)
        self.x_pairs[:] = 0  # sequence 0: no call's
        self.out_pairs[:] = 0
        self.ctl[:] = 0
        self.ctl_words = memoryview(self.pinned[2]).cast("B").cast("I")  # scalar reads without NumPy
        self.answer_seq = memoryview(self.pinned[1]).cast("B").cast("I")  # [2k + 1]: pair k's sequence
        self.last_seq_index = 2 * out_count - 1  # the last pair's sequence word
        self.stage = np.empty((n, 28, 28, 1), dtype)  # the images cast to dtype (when they are not)
        self.stage_words = self.stage.reshape(-1).view(np.uint32)  # (N * 784 * W,)
        self.snap = np.empty(out_count, np.uint64)  # one read of the answer's pairs
        self.snap_seqs = self.snap.view(np.uint32)[1::2]
        self.snap_words = self.snap.view(np.uint32)[0::2]
        self.shape, self.dtype = (n, 10), np.dtype(dtype)
        named = {**w, "x_pairs": np.uint64(self.x_pairs.ctypes.data),
                 "out_pairs": np.uint64(self.out_pairs.ctypes.data), "ctl": np.uint64(self.ctl.ctypes.data)}
        self.launches = tuple((fn[k.kernel], (k.grid,), (k.block,),
                               tuple(named[a] if isinstance(a, str) else np.int32(a) for a in k.args))
                              for k in kernels.launches("resident", n))
        self.launched = 0  # kernels launched for this batch size


class Resident:
    """The resident kernel's calls for a CudaLeNet(variant="resident") `level`."""

    def __init__(self, level: Any):
        self.level = level
        self.plans: dict[int, ResidentPlan] = {}
        self.serving: ResidentPlan | None = None  # the plan whose kernel may be resident
        self.seq = 0
        self.fallback: Any = None  # a CudaLeNet(variant="mapped"), built when first needed
        self.fallback_calls = 0
        self.nvml_due = 0.0  # time.monotonic() when NVML is asked next
        self.others: list[int] = []  # the other processes NVML named last
        self.bus_id = None
        # pids of other processes on this GPU, or None where NVML cannot tell (tests replace it)
        self.gpu_processes = other_gpu_processes

    def plan(self, n: int) -> ResidentPlan:
        if n not in self.plans:
            lv = self.level
            self.plans[n] = ResidentPlan(lv.cp, lv.fn, lv.w, lv.dtype, n)
        return self.plans[n]

    def predict(self, images: np.ndarray) -> np.ndarray:
        p = self.plans.get(len(images)) or self.plan(len(images))
        if time.monotonic() >= self.nvml_due and self.shared_with_others():
            return self.predict_launched(images)
        self.seq = self.seq % 0xFFFFFFFF + 1  # 1 .. 2**32 - 1: 0 is no call's
        seq = self.seq
        if images.dtype == p.dtype and images.flags.c_contiguous:
            words = images.reshape(-1).view(np.uint32)
        else:
            np.copyto(p.stage, images)  # (N, 28, 28, 1) cast to the dtype
            words = p.stage_words
        np.bitwise_or(words, np.uint64(seq << 32), out=p.x_pairs)  # every pair one 8-byte store
        if self.serving is not p:
            if self.serving is not None:  # the other batch size's kernel: end it now
                self.serving.ctl[kernels.RESIDENT_QUIT] = 1
            self.serving = p
        if p.ctl_words[kernels.RESIDENT_ALIVE] == 0:
            self.launch(p, seq)
        return self.wait(p, seq)

    def wait(self, p: ResidentPlan, seq: int) -> np.ndarray:
        """Spin until every answer pair carries seq; relaunch a kernel that ended without serving
        the call (idle as the call came); RuntimeError after POLL_TIMEOUT_S."""
        answer, last, ctl = p.answer_seq, p.last_seq_index, p.ctl_words
        deadline = None
        polls = 0
        while True:
            while answer[last] != seq:
                polls += 1
                if polls % POLL_CHECK == 0:
                    if deadline is None:
                        deadline = time.monotonic() + POLL_TIMEOUT_S
                    elif time.monotonic() > deadline:
                        self.timed_out(p, seq)
                    if ctl[kernels.RESIDENT_ALIVE] == 0:
                        self.launch(p, seq)
            np.copyto(p.snap, p.out_pairs)  # one read of every pair; values from this copy only
            if (p.snap_seqs == seq).all():
                return p.snap_words.copy().view(p.dtype).reshape(p.shape)
            polls += 1  # the last pair came before another: read again

    def timed_out(self, p: ResidentPlan, seq: int) -> None:
        """RuntimeError; the kernel told to quit, and its error raised where it ended with one. A
        kernel stuck elsewhere than its poll is not waited for (no synchronize that never returns)."""
        p.ctl[kernels.RESIDENT_QUIT] = 1  # a kernel that still polls ends at its next quit check
        stream, end = self.level.stream, time.monotonic() + QUIT_WAIT_S
        while not getattr(stream, "done", True) and time.monotonic() < end:
            time.sleep(0.001)
        if getattr(stream, "done", True):
            stream.synchronize()  # raises the kernel's error, if it had one
        raise RuntimeError(f"lenet_resident did not answer call {seq} in {POLL_TIMEOUT_S:g} s "
                           f"(alive {int(p.ctl[kernels.RESIDENT_ALIVE])}, "
                           f"served {int(p.ctl[kernels.RESIDENT_SERVED])})"
                           + ("" if getattr(stream, "done", True) else
                              f"; told to quit, it had not ended {QUIT_WAIT_S:g} s later"))

    def launch(self, p: ResidentPlan, seq: int) -> None:
        """Launch the resident kernel for call seq on the level's stream (after any ending one)."""
        p.ctl[kernels.RESIDENT_NEXT] = seq
        p.ctl[kernels.RESIDENT_QUIT] = 0
        p.ctl[kernels.RESIDENT_ALIVE] = 1  # the kernel stores 0 as it ends
        with self.level.stream:
            for fn, grid, block, args in p.launches:
                fn(grid, block, args)
        p.launched += 1

    def shared_with_others(self) -> bool:
        """Ask NVML (now due): another process on the GPU ends the resident kernel and sends this
        call down the launched path."""
        self.nvml_due = time.monotonic() + NVML_EVERY_S
        if self.bus_id is None:
            self.bus_id = str(getattr(self.level.cp.cuda.Device(), "pci_bus_id", ""))
        others = self.gpu_processes(self.bus_id)
        was, self.others = self.others, list(others or [])
        if not self.others:
            return False
        if not was:  # said once an episode: a timing of these calls is mapped's, not resident's
            print(f"cuda/resident: other processes on the GPU (pids {self.others}): calls go to the launched "
                  "mapped path until they leave", file=sys.stderr)
        for p in self.plans.values():
            p.ctl[kernels.RESIDENT_QUIT] = 1  # ends at its next quit check (every 64 polls)
        self.serving = None
        return True

    def predict_launched(self, images: np.ndarray) -> np.ndarray:
        """The call on cuda/mapped's launched kernel (one launch a call, nothing resident)."""
        if self.fallback is None:
            lv = self.level
            self.fallback = type(lv)(lv.weights_path, device=lv.device, variant="mapped", dtype=lv.dtype)
        self.fallback_calls += 1
        return self.fallback.predict(images)

    def close(self) -> None:
        for p in self.plans.values():
            p.ctl[kernels.RESIDENT_QUIT] = 1  # a resident kernel ends at its next quit check
        if self.fallback is not None:
            self.fallback.close()
            self.fallback = None


_NVML: dict = {}  # pynvml, initialised once per process ({"module": pynvml} or {"error": why})


def other_gpu_processes(bus_id: str) -> list[int] | None:
    """The pids NVML lists with a compute context on the GPU at PCI bus_id, this process left out;
    None where NVML cannot say. In a container NVML may list the host's pids, where this process's
    own is not found: then one listed process is taken to be this one."""
    if "module" not in _NVML and "error" not in _NVML:
        try:
            import pynvml

            pynvml.nvmlInit()
            _NVML["module"] = pynvml
        except Exception as exc:  # no nvidia-ml-py, no driver: nothing known
            _NVML["error"] = f"{type(exc).__name__}: {exc}"
    nvml = _NVML.get("module")
    if nvml is None:
        return None
    try:
        handle = (nvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id
                  else nvml.nvmlDeviceGetHandleByIndex(0))
        pids = [int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    except Exception:
        return None
    peers = run_peers()  # the harness's runner's other workers wait their turn: not strangers
    return others_than_me([p for p in pids if p not in peers], os.getpid())


def run_peers() -> set[int]:
    """The pids the harness's runner lists as its own workers (base.GPU_PEERS_ENV); none outside a run."""
    path = os.environ.get(GPU_PEERS_ENV)
    if not path:
        return set()
    try:
        with open(path) as f:
            return {int(word) for word in f.read().split() if word.isdigit()}
    except OSError:
        return set()


def others_than_me(pids: list[int], me: int) -> list[int]:
    """pids without this process: without `me` where it is listed, else without one entry (a pid
    namespace hides our own; we hold a context, so one of them is ours)."""
    if me in pids:
        return [p for p in pids if p != me]
    return sorted(pids)[1:] if pids else []
