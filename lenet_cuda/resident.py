"""cuda/resident's host side: the LL protocol of resident.cu (see its header) and the kernel's
manners on a shared GPU.

A call: the host side is C (resident_host.c, built once by the system's C compiler through
harness.frameworks.cbuild, called through ctypes): one call writes the images into mapped host
memory as uint64 pairs {32-bit word of the value, the call's sequence number}, each one aligned
8-byte store (single-copy atomic on x86-64 and Armv8: the kernel, reading each pair with one 64-bit
load, sees a pair whole, old or new, and the sequence tells which; no store is ordered before
another, on x86 or beyond), spins on the answer's pairs, and copies their values out from the same
reads that showed their sequences. Python makes that one call, then copies the answer into the
array it returns. A kernel that has ended (idle as the call came) makes the C side return; the host
launches it again and waits again.

The wait's clock (the deadline) and the kernel's alive word are read every POLL_CHECK polls (in
resident_host.c), not every poll. Nothing waits forever: a call not answered within POLL_TIMEOUT_S
tells the kernel to quit; one that then ends raises RuntimeError (as the mapped and persistent
variants' waits do), one still running after QUIT_WAIT_S ends the process as hung
(harness.frameworks.gpu_fault). `stamps` (measure_resident's): the C side's clock at its entry,
the pairs written, the answer seen and copied.

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
    host()                          resident_host.c's library (ctypes), built once a process
    other_gpu_processes(bus_id)     pids of other processes with a context on the GPU, or None
"""

import ctypes
import os
import sys
import time
from functools import cache
from typing import Any

import numpy as np

from harness.base import GPU_PEERS_ENV
from harness.frameworks import cbuild, gpu_fault
from lenet_cuda import kernels

HOST_ALLOC_MAPPED = 2  # cudaHostAllocMapped
HOST_C = kernels.HERE / "resident_host.c"
ANSWERED, ENDED, TIMED_OUT = range(3)  # resident_host.c's RESIDENT_* answers
NVML_EVERY_S = 0.1  # while resident, another process is looked for at most this often
QUIT_WAIT_S = 1.0  # after a timeout: how long a kernel told to quit is given to end
POLL_TIMEOUT_S = 5.0  # a call not answered by then is a failed kernel, not a slow one (as model.py's)


class ResidentPlan:
    """Everything a call of batch size n needs, built once: the wire in mapped memory, its views."""

    def __init__(self, cp: Any, fn: Any, w: dict, dtype: str, n: int, variant: str = "resident"):
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
        self.stage = np.empty((n, 28, 28, 1), dtype)  # the images, cast to dtype: the C side's words
        self.answer = np.empty((n, 10), dtype)  # the C side copies the answer's values here
        address = [a.ctypes.data for a in (self.stage, self.x_pairs, self.out_pairs, self.answer, self.ctl)]
        self.wire = Wire(address[0], address[1], x_count, address[2], out_count, address[3], address[4],
                         0, 0)  # deadline_ns, seq: each call's
        self.wire_ref = ctypes.byref(self.wire)  # every call's one argument, made once
        named = {**w, "x_pairs": np.uint64(self.x_pairs.ctypes.data),
                 "out_pairs": np.uint64(self.out_pairs.ctypes.data), "ctl": np.uint64(self.ctl.ctypes.data)}
        self.launches = tuple((fn[k.kernel], (k.grid,), (k.block,),
                               tuple(named[a] if isinstance(a, str) else np.int32(a) for a in k.args))
                              for k in kernels.launches(variant, n))
        self.launched = 0  # kernels launched for this batch size


class Resident:
    """The resident kernel's calls for a CudaLeNet(variant="resident" or "resident_rows") `level`."""

    def __init__(self, level: Any):
        self.level = level
        self.plans: dict[int, ResidentPlan] = {}
        self.serving: ResidentPlan | None = None  # the plan whose kernel may be resident
        self.seq = 0
        self.fallback: Any = None  # a CudaLeNet(variant="mapped"), built when first needed
        self.fallback_calls = 0
        self.nvml_due = 0.0  # time.monotonic() when NVML is asked next
        self.others: list[int] = []  # the other processes NVML named last
        self.bus_id: str | None = None
        # pids of other processes on this GPU, or None where NVML cannot tell (tests replace it)
        self.gpu_processes = other_gpu_processes
        self.host = host()  # resident_host.c (Unavailable where no C compiler builds it)
        self.stamps: Any = None  # measure_resident: a ctypes (c_int64 * 4) the C side stamps

    def plan(self, n: int) -> ResidentPlan:
        if n not in self.plans:
            lv = self.level
            self.plans[n] = ResidentPlan(lv.cp, lv.fn, lv.w, lv.dtype, n, lv.variant)
        return self.plans[n]

    def predict(self, images: np.ndarray) -> np.ndarray:
        p = self.plans.get(len(images)) or self.plan(len(images))
        if time.monotonic() >= self.nvml_due and self.shared_with_others():
            return self.predict_launched(images)
        self.seq = self.seq % 0xFFFFFFFF + 1  # 1 .. 2**32 - 1: 0 is no call's
        p.stage[...] = images  # (N, 28, 28, 1) cast to the dtype: the words the C side sends
        wire = p.wire
        wire.seq = self.seq
        wire.deadline_ns = time.monotonic_ns() + int(POLL_TIMEOUT_S * 1e9)
        if self.serving is not p:
            if self.serving is not None:  # the other batch size's kernel: end it now
                self.serving.ctl[kernels.RESIDENT_QUIT] = 1
            self.serving = p
        if p.ctl_words[kernels.RESIDENT_ALIVE] != 0:  # the common call: one C call
            status = self.host.resident_call(p.wire_ref, self.stamps)
        else:  # the pairs first: a launched kernel may serve them at once
            self.host.resident_write(p.wire_ref)
            status = ENDED
        while status == ENDED:  # ended (idle as the call came) or not launched: launch, wait again
            self.launch(p, wire.seq)
            status = self.host.resident_wait(p.wire_ref, None)
        if status == TIMED_OUT:
            self.timed_out(p, wire.seq)
        return p.answer.copy()

    def timed_out(self, p: ResidentPlan, seq: int) -> None:
        """The kernel told to quit and given QUIT_WAIT_S to end, polled (no synchronize that never
        returns); still running then, the process ends as hung, and a sticky error ends it as a fault
        (harness.frameworks.gpu_fault: no memory is freed under a running kernel). Ended clean: a
        RuntimeError saying what the kernel's words were."""
        p.ctl[kernels.RESIDENT_QUIT] = 1  # a kernel that still polls ends at its next quit check
        kernel = kernels.KERNELS[self.level.variant][0]
        said = (f"{kernel} did not answer call {seq} in {POLL_TIMEOUT_S:g} s "
                f"(alive {int(p.ctl[kernels.RESIDENT_ALIVE])}, served {int(p.ctl[kernels.RESIDENT_SERVED])})")
        gpu_fault.drain(self.level.stream, QUIT_WAIT_S, f"cuda/{self.level.variant} ({self.level.dtype}): "
                        f"{said}; told to quit")
        raise RuntimeError(said)

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


class Wire(ctypes.Structure):
    """resident_host.c's struct resident_wire, field for field (a test reads the C)."""

    _fields_ = [("words", ctypes.c_void_p), ("x", ctypes.c_void_p), ("x_count", ctypes.c_int64),
                ("out", ctypes.c_void_p), ("out_count", ctypes.c_int64), ("answer", ctypes.c_void_p),
                ("ctl", ctypes.c_void_p), ("deadline_ns", ctypes.c_int64), ("seq", ctypes.c_uint32)]


@cache
def host() -> ctypes.CDLL:
    """resident_host.c, built once (cached on disk by its text) and loaded once a process. No
    argtypes: every argument is a ctypes object already (byref(wire), a stamps array or None), so a
    call converts nothing."""
    lib = cbuild.shared_library(HOST_C.read_text(), "resident_host", "cuda")
    lib.resident_write.restype = None
    return lib


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
