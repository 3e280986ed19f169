"""A lab worker's box: its process in the sandbox (harness.lab.box.walls.bwrap), its own cgroup
(harness.lab.box.walls.cgroup) and its limits (harness.lab.box.proc.limits); started, counted, watched, and
killed with everything it started. What goes through its pipes is harness.lab.box.sandbox's business.

    Box(label, env, scratch, isolation, slot, limits, device, space, packages, weights)
      .start() -> Popen         the worker, its stdin and stdout the grader's
      .cpu_ns()                 its CPU time: its cgroup's (every thread and process) or its own
      .watch_memory()           on the GPU: kill it when its resident memory is past the limit
      .sample_memory(), .memory()   its peak memory, read from outside (harness.lab.box.proc.peak):
                                the grader samples it at each exchange; .memory() before .stop()
      .died() -> Failure        why it ended (out-of-memory, timeout, crashed), once it has
                                (harness.lab.box.proc.death reads it)
      .kill(), .stop(ask)       kill it and everything it started (never raising); ask it to exit first
      .note(line)               a line of the grader's in its log
      .submission_path()        its folder as the worker sees it
    safe_label(text)            a label as a file name
"""

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

from harness.errors import Failure
from harness.lab.box.proc import death, launch, peak
from harness.lab.box.proc.limits import Limits, limiter
from harness.lab.box.walls import bwrap, procfs, slurmstep
from harness.lab.box.walls.cgroup import Cgroup
from harness.lab.box.walls.disk import Space
from harness.lab.box.walls.isolation import Isolation
from harness.machine import procenv
from harness.measure import channel


def safe_label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:60]


class Box:
    """One worker's process, its cgroup and its log (the module's docstring)."""

    def __init__(self, label: str, env: dict, scratch: Path, isolation: Isolation, slot: int = 0,
                 limits: Limits | None = None, device: str = "cpu", space: Space | None = None,
                 packages: Iterable[str] = (), weights: str = "") -> None:
        self.label = label
        self.env = env
        self.scratch = Path(scratch)
        self.isolation = isolation
        self.slot = slot
        self.limits = limits or Limits()
        self.device = device
        self.space = space
        self.packages = tuple(packages)
        self.weights = weights
        self.log_path = self.scratch / f"{safe_label(label)}.log"
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None  # the worker's own pid (under bwrap), for its CPU clock and memory
        self.pidfd: int | None = None  # and a pidfd of it: a signal never reaches a reused pid
        self.group: Cgroup | None = None
        self.killed_for: str | None = None
        self.start_s: float | None = None  # how long starting the sandbox took
        self.peak_seen: int | None = None  # the largest VmHWM the grader read of it (no cgroup peak)
        self.sampling = False  # whether the peak is sampled from /proc (no cgroup peak file)
        self.step_pid: int | None = None  # a Slurm step's first process (bwrap), and its pidfd
        self.step_pidfd: int | None = None
        self.counter: slurmstep.StepCounter | None = None  # the step's cgroup's CPU counter

    def start(self) -> subprocess.Popen:
        t0 = time.perf_counter()
        iso = self.isolation
        if iso.cgroups:
            self.group = Cgroup(f"{os.getpid()}-{self.slot}-{safe_label(self.label)}",
                                self.limits.memory_mb, self.limits.pids)
        how = launch.launch(iso, self.space, self.env, self.scratch, self.slot, self.device, self.packages,
                            self.weights)
        if iso.steps:
            return self._start_step(how, t0)
        try:
            with open(self.log_path, "ab") as log:
                line = f"--- {self.label}: worker started {time.ctime()}\n"
                log.write(line.encode(errors="backslashreplace"))
                log.flush()
                self.proc = subprocess.Popen(
                    how.argv, cwd=how.cwd, env=how.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=log,
                    preexec_fn=limiter(self.limits, self.device == "cpu", self.group), pass_fds=how.fds,
                    start_new_session=True,  # its own process group: killed whole, spared the terminal's ^C
                )
        finally:
            for fd in how.fds:
                os.close(fd)
        self.pid = procfs.worker_pid(self.proc.pid) if iso.bwrap else self.proc.pid
        self.pidfd = procfs.pidfd(self.pid)
        self.sampling = self.group is None or self.group.peak_bytes() is None
        self.start_s = time.perf_counter() - t0
        return self.proc

    def _start_step(self, how: launch.Launch, t0: float) -> subprocess.Popen:
        """The worker as a Slurm job step of its own (harness.lab.box.walls.slurmstep): its pipes and
        log handed to the step's relay, which applies the limits and execs bwrap; its CPU time is
        the step's cgroup's."""
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"--- {self.label}: worker started {time.ctime()} (a Slurm step)\n"
                          .encode(errors="backslashreplace"))
                log.flush()
                step = slurmstep.Step(safe_label(f"{os.getpid()}-{self.slot}"), self.scratch)
                fds = {0: to_r, 1: from_w, 2: log.fileno(), **{fd: fd for fd in how.fds}}
                limits = {"limits": asdict(self.limits), "address_space": self.device == "cpu"}
                self.proc, self.step_pid = step.start(how.argv, how.env, how.cwd, fds, log.fileno(), limits)
        finally:
            for fd in (to_r, from_w, *how.fds):
                os.close(fd)
        self.proc.stdin = os.fdopen(to_w, "wb", buffering=0)
        self.proc.stdout = os.fdopen(from_r, "rb", buffering=0)
        self.step_pidfd = procfs.pidfd(self.step_pid)
        self.counter = slurmstep.StepCounter(self.step_pid)
        self.pid = procfs.worker_pid(self.step_pid)
        self.pidfd = procfs.pidfd(self.pid)
        self.sampling = True
        self.start_s = time.perf_counter() - t0
        return self.proc

    def submission_path(self) -> str:
        if self.isolation.bwrap:
            return bwrap.SUBMISSION_DIR
        return str(self.space.submission) if self.space is not None else ""

    def cpu_ns(self) -> int:
        """CPU time of the worker: its cgroup's (every thread and process) or its own process's."""
        if self.group is not None:
            return self.group.cpu_ns()
        if self.counter is not None:
            return self.counter.cpu_ns()
        try:
            return time.clock_gettime_ns(procfs.cpu_clock(self._own_pid()))
        except OSError:  # the process is gone
            raise self.died() from None

    def _own_pid(self) -> int:
        if self.pid:
            return self.pid
        if self.proc is None:
            raise ValueError(f"{self.label}: the box was not started")
        return self.proc.pid

    def sample_memory(self) -> None:
        """Read its VmHWM from outside and keep the largest (only where no cgroup keeps its peak)."""
        if self.sampling:
            found = peak.procfs_peak(self.pid, self.pidfd)
            if found is not None:
                self.peak_seen = max(found, self.peak_seen or 0)

    def memory(self) -> dict:
        """Its peak memory over its whole run so far, {"peak_mb", "memory_source"}
        (harness.lab.box.proc.peak); {} before it started. Read before .stop(): that removes its cgroup."""
        if self.proc is None:
            return {}
        self.sample_memory()
        return peak.reading(self.group, self.peak_seen)

    def watch_memory(self) -> None:
        self.sample_memory()
        limit = self.limits.memory_mb
        if limit and self.device != "cpu" and procfs.rss_mb(self._own_pid()) > limit:
            self.killed_for = f"resident memory above the limit of {limit} MB; worker killed"
            self.kill()

    def kill(self) -> None:
        """Kill it and everything it started; never raises (a clean-up that fails is written to
        its log and the grader goes on)."""
        if self.proc is None:
            return
        for fd in (self.pidfd, self.step_pidfd):  # the worker (and a step's bwrap), by pidfd: never
            if fd is not None:                   # another process that got its pid
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except OSError:
                    pass
        procenv.kill_group(self.proc)  # bwrap (or srun); --die-with-parent takes the worker and its namespace
        if self.group is not None:
            try:
                self.group.kill()
            except OSError as exc:
                self.note(f"clean-up: {exc}")
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass

    def stop(self, ask: bool = True) -> None:
        """Ask it to exit (not when `ask` is False: a grader told to stop does not wait on a worker
        that may never answer), then kill whatever is left (a detached daemon, a fork bomb)."""
        if ask and self.proc is not None and self.proc.poll() is None and self.proc.stdin is not None:
            try:
                os.write(self.proc.stdin.fileno(), channel.EXIT)
                self.proc.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self.group is not None:
            try:
                self.group.remove()
            except OSError as exc:
                self.note(f"clean-up: {exc}")
            self.group = None
        for fd in (self.pidfd, self.step_pidfd):
            if fd is not None:
                os.close(fd)
        self.pidfd = self.step_pidfd = None
        if self.counter is not None:
            self.counter.close()
            self.counter = None

    def note(self, line: str) -> None:
        """A line of the grader's own in the worker's log."""
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"--- grader: {line}\n".encode(errors="backslashreplace"))
        except OSError:
            pass

    def died(self) -> Failure:
        """Why the worker ended (harness.lab.box.proc.death); it has ended, or is ending (this waits for
        it)."""
        if self.proc is None:
            raise ValueError(f"{self.label}: the box was not started")
        code = self.proc.wait()
        oom_kills = self.group is not None and bool(self.group.oom_kills())
        return death.cause(code, self.limits, oom_kills, self.killed_for, bool(self.isolation.bwrap),
                           self.log_path)
