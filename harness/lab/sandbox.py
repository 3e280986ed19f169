"""The grader's side of a lab worker (harness.lab.worker): start it in the sandbox
(harness.lab.bwrap) and its own cgroup (harness.lab.cgroup), ask with deadlines, stream images in
lockstep with the grader's own clocks around every call, trust no byte of its replies, and kill
it with everything it started.

Limits of every worker, references included (the same overhead for all):
- memory: the cgroup's limit (the kernel kills past it: out-of-memory), and on the CPU also
  RLIMIT_AS (an allocation past it raises MemoryError in the submission); on the GPU the CUDA
  driver maps far more address space than it uses, so there RLIMIT_AS is left off and the
  resident set is watched too;
- processes and threads: the cgroup's pids limit;
- CPU time: RLIMIT_CPU (SIGXCPU at the limit); wall time: the grader's deadline on everything it
  waits for (import_s for import + construction, wall_s for all of it), then SIGKILL;
- output: RLIMIT_FSIZE on every file it writes, its log included (SIGXFSZ past it); the log kept
  in --out is its first and last LOG_KEEP bytes, with the size noted.
Replies: JSON lines of at most MAX_LINE bytes, each an object of the expected shape; anything else
(garbage, a forged or out-of-order reply, a line too long, a time out of range) ends the worker
as `crashed` with the reason.
"""

import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from harness import ROOT
from harness.lab import bwrap, cgroup
from harness.lab.cgroup import Cgroup
from harness.lab.isolation import Isolation
from harness.machine import procenv

TICK_S = 0.25  # how often a long wait looks at the worker's memory
PIXELS = 28 * 28
CLASSES = 10
MAX_LINE = 64 << 10  # a reply line longer than this is not a reply
LOG_KEEP = 32 << 10  # bytes of the log kept from its start, and as many from its end
MAX_TIME_NS = 10 ** 12  # a reported call time beyond 1000 s is garbage
WORKER_ARGS = [b"-m", b"harness.lab.worker"]  # the worker's argv after the interpreter
STATUSES = ("import-error", "crashed", "wrong", "out-of-memory")  # what a worker may report
PASS_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
            "CUPY_CACHE_DIR", "NVIDIA_VISIBLE_DEVICES")


class Failure(Exception):
    """A submission's outcome other than ok: `status` is a leaderboard status."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def limiter(limits: dict, address_space: bool, group: Cgroup | None):
    """The child's set-up between fork and exec: rlimits and its cgroup. Only system calls on
    values computed here, in the parent (Python code between fork and exec must not allocate or
    lock). When the grader dies, bwrap's --die-with-parent takes the sandbox with it."""
    caps = [(resource.RLIMIT_CORE, (0, 0))]  # (kind, (soft, hard))
    if limits.get("cpu_s"):
        soft = int(limits["cpu_s"])
        caps.append((resource.RLIMIT_CPU, (soft, soft + 5)))  # soft: SIGXCPU, hard: SIGKILL
    if limits.get("memory_mb") and address_space:
        size = int(limits["memory_mb"]) << 20
        caps.append((resource.RLIMIT_AS, (size, size)))
    if limits.get("output_mb"):
        size = int(limits["output_mb"]) << 20
        caps.append((resource.RLIMIT_FSIZE, (size, size)))
    procs = [bytes(path) for path in group.procs_files()] if group is not None else []

    def apply():
        for kind, values in caps:
            resource.setrlimit(kind, values)
        cgroup.enter(procs)

    return apply


def cpu_clock(pid: int) -> int:
    """The clock id of another process's CPU time (clock_getcpuclockid: all its threads, in ns,
    precise even while it runs): Linux's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)."""
    return ((~pid) << 3) | 2


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def worker_pid(pid: int, timeout: float = 10.0) -> int | None:
    """The worker process under bwrap (`pid`): bwrap -> its init (pid 1 of the namespace) -> the
    worker (pid 2), found by /proc before any student code runs (it has no children yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = pid
        while True:
            try:
                children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
                if Path(f"/proc/{current}/cmdline").read_bytes().split(b"\0")[1:3] == WORKER_ARGS:
                    return current
            except OSError:
                return None
            if not children:
                break
            current = int(children[0])
        time.sleep(0.002)
    return None


def capped_log(source: Path, target: Path) -> None:
    """Copy a worker's log, keeping its first and last LOG_KEEP bytes and noting what was cut."""
    try:
        size = source.stat().st_size
    except OSError:
        return
    with open(source, "rb") as f, open(target, "ab") as out:
        if size <= 2 * LOG_KEEP:
            out.write(f.read())
            return
        out.write(f.read(LOG_KEEP))
        out.write(f"\n[... {size - 2 * LOG_KEEP} bytes cut: the log was {size} bytes ...]\n".encode())
        f.seek(size - LOG_KEEP)
        out.write(f.read(LOG_KEEP))


def safe_label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:60]


class Sandbox:
    def __init__(self, label: str, env: dict, scratch: Path, isolation: Isolation, slot: int = 0,
                 limits: dict | None = None, device: str = "cpu", submission: Path | None = None,
                 packages=(), weights: str = ""):
        self.label = label
        self.env = env
        self.scratch = Path(scratch)
        self.isolation = isolation
        self.slot = slot
        self.limits = limits or {}
        self.device = device
        self.submission = submission
        self.packages = tuple(packages)
        self.weights = weights
        self.log_path = self.scratch / f"{safe_label(label)}.log"
        self.proc = None
        self.pid = None  # the worker's own pid (under bwrap), for its CPU clock and memory
        self.group = None
        self.buffer = b""
        self.busy_s = 0.0  # how long the grader has waited on this worker, all requests together
        self.killed_for = None
        self.start_s = None  # how long starting the sandbox took

    # --- process ------------------------------------------------------------------------------
    def worker_env(self) -> dict:
        env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
        env.update(self.env)
        env.update({"HOME": "/tmp", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTHONNOUSERSITE": "1", "MPLCONFIGDIR": "/tmp",
                    "CUPY_CACHE_DIR": "/tmp/cupy"})  # CuPy's kernel cache: private, gone with the worker
        uid = self.isolation.uid(self.slot)
        if uid is not None:
            env["LENET_LAB_UID"] = f"{uid}:{uid}"
        return env

    def start(self):
        t0 = time.perf_counter()
        iso = self.isolation
        if iso.cgroups:
            self.group = Cgroup(f"{os.getpid()}-{self.slot}-{safe_label(self.label)}",
                                self.limits.get("memory_mb"), self.limits.get("pids"))
        argv = [sys.executable, "-m", "harness.lab.worker"]
        if iso.bwrap:
            argv = bwrap.command(iso.bwrap, self.submission, argv, self.weights, self.packages,
                                 gpu=self.device == "gpu")
            env, cwd = self.worker_env(), "/"
        else:  # --no-sandbox: the grader's own user and environment
            env = {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join(
                [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
            cwd = str(self.submission or self.scratch)
        with open(self.log_path, "ab") as log:
            log.write(f"--- {self.label}: worker started {time.ctime()}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                preexec_fn=limiter(self.limits, self.device == "cpu", self.group),
                start_new_session=True,  # its own process group: killed whole, spared the terminal's ^C
            )
        os.set_blocking(self.proc.stdin.fileno(), False)  # _send waits with a deadline instead
        self.pid = worker_pid(self.proc.pid) if iso.bwrap else self.proc.pid
        self.start_s = time.perf_counter() - t0

    def submission_path(self) -> str:
        return bwrap.SUBMISSION_DIR if self.isolation.bwrap else str(self.submission)

    def cpu_ns(self) -> int:
        """CPU time of the worker: its cgroup's (every thread and process) or its own process's."""
        if self.group is not None:
            return self.group.cpu_ns()
        try:
            return time.clock_gettime_ns(cpu_clock(self.pid or self.proc.pid))
        except OSError:  # the process is gone
            raise self.died() from None

    def kill(self):
        if self.proc is None:
            return
        procenv.kill_group(self.proc)  # bwrap; --die-with-parent takes the worker and its namespace
        if self.pid and self.pid != self.proc.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.group is not None:
            self.group.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def stop(self):
        """Ask it to exit, then kill whatever is left (a detached daemon, a fork bomb)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.write(self.proc.stdin.fileno(), b'{"op": "exit"}\n')
                self.proc.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self.group is not None:
            self.group.remove()
            self.group = None

    def died(self) -> Failure:
        code = self.proc.wait()
        if self.group is not None and self.group.oom_kills():
            return Failure("out-of-memory", f"past the memory limit of {self.limits.get('memory_mb')} MB "
                                            "(killed by the kernel for its cgroup)")
        if self.killed_for:
            return Failure("out-of-memory", self.killed_for)
        if self.isolation.bwrap and code > 128:  # bwrap reports a child killed by signal N as 128 + N
            code = -(code - 128)
        if code == -signal.SIGXCPU:
            return Failure("timeout", f"CPU-time limit of {self.limits.get('cpu_s')} s exceeded "
                                      "(killed by SIGXCPU)")
        if code == -signal.SIGXFSZ or self.output_full():  # Python ignores SIGXFSZ: writes fail
            return Failure("crashed", f"wrote more than the output limit of {self.limits.get('output_mb')} "
                                      "MB to one file or to its log")
        if code < 0 and -code in signal.valid_signals():
            return Failure("crashed", f"the worker was killed by {signal.Signals(-code).name}")
        return Failure("crashed", f"the worker exited with code {code}")

    def output_full(self) -> bool:
        limit = self.limits.get("output_mb")
        try:
            return bool(limit) and self.log_path.stat().st_size >= int(limit) << 20
        except OSError:
            return False

    # --- waiting ------------------------------------------------------------------------------
    def _deadline(self, timeout: float, what: str) -> tuple[float, str]:
        wall = self.limits.get("wall_s")
        if wall is not None and wall - self.busy_s < timeout:
            return time.monotonic() + max(0.0, wall - self.busy_s), f"wall-time limit of {wall:g} s"
        return time.monotonic() + timeout, f"{what} limit of {timeout:g} s"

    def _fill(self, deadline: float, why: str) -> None:
        fd = self.proc.stdout.fileno()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise Failure("timeout", f"no answer within the {why}; worker killed")
            ready, _, _ = select.select([fd], [], [], min(remaining, TICK_S))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise self.died()
                self.buffer += chunk
                return
            self.watch_memory()

    def watch_memory(self):
        limit = self.limits.get("memory_mb")
        if limit and self.device != "cpu" and rss_mb(self.pid or self.proc.pid) > limit:
            self.killed_for = f"resident memory above the limit of {limit} MB; worker killed"
            self.kill()

    def garbage(self, what: str, data: bytes) -> Failure:
        self.kill()
        return Failure("crashed", f"the worker wrote {what}, not a reply: {data[:80]!r}")

    def _line(self, deadline, why) -> dict:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise self.garbage(f"more than {MAX_LINE} bytes without a newline", self.buffer)
            self._fill(deadline, why)
        line, _, self.buffer = self.buffer.partition(b"\n")
        if len(line) > MAX_LINE:
            raise self.garbage(f"a line of {len(line)} bytes", line)
        try:
            reply = json.loads(line)
        except ValueError:
            raise self.garbage("something that is not JSON", line) from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise self.garbage("a JSON value that is not a reply object", line)
        return reply

    def _exact(self, n, deadline, why) -> bytes:
        while len(self.buffer) < n:
            self._fill(deadline, why)
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _send(self, data: bytes, deadline: float, why: str):
        """Write to the worker without ever blocking past the deadline: a worker that stops
        reading (a patched protocol) cannot stall the grader on a full pipe."""
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[os.write(fd, view):]
                    continue
                except BlockingIOError:  # the pipe is full: wait until it drains, or the deadline
                    pass
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise Failure("timeout", f"the worker stopped reading its input ({why}); worker killed")
                select.select([], [fd], [], min(remaining, TICK_S))
        except (BrokenPipeError, OSError, ValueError):
            raise self.died() from None

    def _checked(self, reply: dict, expect: dict) -> dict:
        """An error reply becomes its Failure; an ok reply must carry `expect`'s keys with values
        of those types (or those exact values): anything else is a forgery or garbage."""
        if not reply["ok"]:
            status, reason = reply.get("status"), reply.get("reason")
            status = status if status in STATUSES else "crashed"
            return_reason = reason[:500] if isinstance(reason, str) and reason else "no reason given"
            self.kill()
            raise Failure(status, return_reason)
        for key, want in expect.items():
            value = reply.get(key)
            ok = (isinstance(value, want) and not isinstance(value, bool)) if isinstance(want, type) \
                else value == want
            if not ok:
                raise self.garbage(f"a reply whose {key!r} is {value!r:.40}", json.dumps(reply).encode())
        return reply

    # --- requests -----------------------------------------------------------------------------
    def request(self, message: dict, timeout: float, what: str = "request", expect=None) -> dict:
        if self.proc is None:
            self.start()
        started = time.monotonic()
        try:
            deadline, why = self._deadline(timeout, what)
            self._send((json.dumps(message) + "\n").encode(), deadline, why)
            return self._checked(self._line(deadline, why), expect or {})
        finally:
            self.busy_s += time.monotonic() - started

    def load(self, message: dict, timeout: float) -> dict:
        reply = self.request(message, timeout, "import",
                             {"class": str, "import_ns": int, "load_ns": int})
        reply["class"] = reply["class"][:200]
        return reply

    def gate(self, images_u8: np.ndarray, batch: int, timeout: float) -> np.ndarray:
        """The worker's probabilities of these (N, 28, 28) uint8 images, (N, 10) float32."""
        images = len(images_u8)
        started = time.monotonic()
        try:
            deadline, why = self._deadline(timeout, "gate")
            self._send((json.dumps({"op": "gate", "images": images, "batch": batch}) + "\n").encode(),
                       deadline, why)
            self._send(np.ascontiguousarray(images_u8, dtype=np.uint8).tobytes(), deadline, why)
            self._checked(self._line(deadline, why), {"rows": images})
            raw = self._exact(images * CLASSES * 4, deadline, why)
            return np.frombuffer(raw, dtype="<f4").reshape(images, CLASSES)
        finally:
            self.busy_s += time.monotonic() - started

    def stream(self, images: np.ndarray, timeout: float) -> dict:
        """Time one chunk of calls: images (K, B, 28, 28) uint8, one call per (B, 28, 28), sent
        only after the previous answer. Returns per call the worker's own times, the grader's round
        trips (send -> answer, ns), the worker's CPU time over each round trip (its cgroup: every
        thread and process; a submission cannot change it) and the answers (K, B, 10)."""
        calls, batch = images.shape[:2]
        answer = 8 + batch * CLASSES * 4
        times, trips, cpu = [0] * calls, [0] * calls, [0] * calls
        out = np.empty((calls, batch, CLASSES), dtype=np.float32)
        started = time.monotonic()
        try:
            deadline, why = self._deadline(timeout, "timing")
            self._send((json.dumps({"op": "stream", "calls": calls, "batch": batch}) + "\n").encode(),
                       deadline, why)
            self._checked(self._line(deadline, why), {"ready": True})  # clocks may start
            for i in range(calls):
                pixels = np.ascontiguousarray(images[i], dtype=np.uint8).tobytes()
                c0 = self.cpu_ns()
                t0 = time.perf_counter_ns()
                self._send(pixels, deadline, why)
                head = self._exact(8, deadline, why)
                times[i] = int.from_bytes(head, "little", signed=True)
                if times[i] == -1:  # the call failed; its error line follows
                    self._checked(self._line(deadline, why), {})
                    raise self.garbage("a failed call followed by an ok reply", b"")
                if not 0 <= times[i] < MAX_TIME_NS:
                    raise self.garbage(f"a call time of {times[i]} ns", head)
                frame = self._exact(answer - 8, deadline, why)
                trips[i] = time.perf_counter_ns() - t0
                cpu[i] = self.cpu_ns() - c0
                out[i] = np.frombuffer(frame, dtype="<f4").reshape(batch, CLASSES)
            self.watch_memory()
            if self.killed_for:
                raise Failure("out-of-memory", self.killed_for)
            return {"times_ns": times, "trips_ns": trips, "cpu_ns": cpu, "outputs": out}
        finally:
            self.busy_s += time.monotonic() - started
