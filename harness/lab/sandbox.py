"""The grader's side of a lab worker (harness.lab.worker): start it under limits in a private
working directory, ask with deadlines, stream images in lockstep with the parent's own clock
around every call, kill its whole process group.

Limits of a submission's worker (none for references, which are trusted):
- memory: RLIMIT_AS on the CPU (an allocation past it raises MemoryError in the submission);
  on the GPU the CUDA driver maps far more address space than it uses, so there the parent
  watches the resident set (/proc/PID/status VmRSS) instead and kills past the limit;
- CPU time: RLIMIT_CPU (SIGXCPU at the limit);
- wall time: the parent's deadline on everything it waits for from this worker (import_s for
  import + construction, wall_s for all of it), then SIGKILL to the process group.
"""

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time

import numpy as np

from harness import ROOT
from harness.machine import procenv

TICK_S = 0.25  # how often a long wait looks at the worker's memory
PIXELS = 28 * 28
CLASSES = 10


class Failure(Exception):
    """A submission's outcome other than ok: `status` is a leaderboard status."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def limiter(memory_mb: int | None, cpu_s: float | None, address_space: bool):
    """The child's limits, set between fork and exec (resource.setrlimit in the child)."""

    def apply():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if cpu_s:
            soft = int(cpu_s)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))  # soft: SIGXCPU, hard: SIGKILL
        if memory_mb and address_space:
            limit = int(memory_mb) << 20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

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


class Sandbox:
    def __init__(self, label: str, env: dict, workdir, log_path, limits: dict | None = None,
                 device: str = "cpu"):
        self.label = label
        self.env = {**env, "PYTHONPATH": os.pathsep.join(
            [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])}
        self.workdir = str(workdir)
        self.log_path = log_path
        self.limits = limits or {}
        self.device = device
        self.proc = None
        self.buffer = b""
        self.busy_s = 0.0  # how long the grader has waited on this worker, all requests together
        self.killed_for = None

    # --- process ------------------------------------------------------------------------------
    def start(self):
        log = open(self.log_path, "ab")
        log.write(f"--- {self.label}: worker started {time.ctime()}\n".encode())
        log.flush()
        preexec = None
        if self.limits:
            preexec = limiter(self.limits.get("memory_mb"), self.limits.get("cpu_s"),
                              address_space=self.device == "cpu")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.lab.worker"], cwd=self.workdir, env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, preexec_fn=preexec,
            start_new_session=True,  # its own process group: killed whole, spared the terminal's ^C
        )
        log.close()

    def kill(self):
        if self.proc is None:
            return
        procenv.kill_group(self.proc)
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.write(self.proc.stdin.fileno(), b'{"op": "exit"}\n')
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def died(self) -> Failure:
        code = self.proc.wait()
        if self.killed_for:
            return Failure("out-of-memory", self.killed_for)
        if code == -signal.SIGXCPU:
            return Failure("timeout", f"CPU-time limit of {self.limits.get('cpu_s')} s exceeded "
                                      "(killed by SIGXCPU)")
        if code < 0 and -code in signal.valid_signals():
            return Failure("crashed", f"the worker was killed by {signal.Signals(-code).name}")
        return Failure("crashed", f"the worker exited with code {code}")

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
        if limit and self.device != "cpu" and rss_mb(self.proc.pid) > limit:
            self.killed_for = f"resident memory above the limit of {limit} MB; worker killed"
            self.kill()

    def _line(self, deadline, why) -> dict:
        while b"\n" not in self.buffer:
            self._fill(deadline, why)
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            raise Failure("crashed", f"the worker wrote something that is not a reply: "
                                     f"{line[:80]!r}") from None

    def _exact(self, n, deadline, why) -> bytes:
        while len(self.buffer) < n:
            self._fill(deadline, why)
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _send(self, data: bytes):
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.proc.stdin.fileno(), view):]
        except (BrokenPipeError, OSError):
            raise self.died() from None

    def _checked(self, reply: dict) -> dict:
        if not reply.get("ok"):
            raise Failure(reply.get("status", "crashed"), reply.get("reason") or "no reason given")
        return reply

    # --- requests -----------------------------------------------------------------------------
    def request(self, message: dict, timeout: float, what: str = "request") -> dict:
        if self.proc is None:
            self.start()
        started = time.monotonic()
        try:
            deadline, why = self._deadline(timeout, what)
            self._send((json.dumps(message) + "\n").encode())
            return self._checked(self._line(deadline, why))
        finally:
            self.busy_s += time.monotonic() - started

    def gate(self, images: int, batch: int, timeout: float) -> np.ndarray:
        """The probabilities of the first `images` test images, (images, 10) float32."""
        started = time.monotonic()
        try:
            deadline, why = self._deadline(timeout, "gate")
            self._send((json.dumps({"op": "gate", "images": images, "batch": batch}) + "\n").encode())
            self._checked(self._line(deadline, why))
            raw = self._exact(images * CLASSES * 4, deadline, why)
            return np.frombuffer(raw, dtype="<f4").reshape(images, CLASSES)
        finally:
            self.busy_s += time.monotonic() - started

    def stream(self, images: np.ndarray, timeout: float) -> dict:
        """Time one chunk of calls: images (K, B, 28, 28) uint8, one call per (B, 28, 28), sent
        only after the previous answer. Returns per call the worker's own times, the parent's round
        trips (send -> answer, ns), the worker's CPU time over each round trip (all its threads,
        from the kernel: a submission cannot change it) and the answers (K, B, 10)."""
        calls, batch = images.shape[:2]
        answer = 8 + batch * CLASSES * 4
        times, trips, cpu = [0] * calls, [0] * calls, [0] * calls
        clock = cpu_clock(self.proc.pid)
        out = np.empty((calls, batch, CLASSES), dtype=np.float32)
        started = time.monotonic()
        try:
            deadline, why = self._deadline(timeout, "timing")
            self._send((json.dumps({"op": "stream", "calls": calls, "batch": batch}) + "\n").encode())
            self._checked(self._line(deadline, why))  # ready: its garbage collected, clocks may start
            for i in range(calls):
                pixels = np.ascontiguousarray(images[i], dtype=np.uint8).tobytes()
                try:
                    c0 = time.clock_gettime_ns(clock)
                except OSError:  # the process is gone
                    raise self.died() from None
                t0 = time.perf_counter_ns()
                self._send(pixels)
                head = self._exact(8, deadline, why)
                times[i] = int.from_bytes(head, "little", signed=True)
                if times[i] < 0:  # the call failed; its error line follows
                    self._checked(self._line(deadline, why))
                    raise Failure("crashed", "a timed call failed without a reason")
                frame = self._exact(answer - 8, deadline, why)
                trips[i] = time.perf_counter_ns() - t0
                try:
                    cpu[i] = time.clock_gettime_ns(clock) - c0
                except OSError:
                    raise self.died() from None
                out[i] = np.frombuffer(frame, dtype="<f4").reshape(batch, CLASSES)
            self.watch_memory()
            if self.killed_for:
                raise Failure("out-of-memory", self.killed_for)
            return {"times_ns": times, "trips_ns": trips, "cpu_ns": cpu, "outputs": out}
        finally:
            self.busy_s += time.monotonic() - started
