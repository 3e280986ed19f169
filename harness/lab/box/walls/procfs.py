"""A lab worker's process read from outside, by the grader: found under bwrap, its CPU clock, its
resident memory, a pidfd (a signal never reaches a process that reused its pid).

    worker_pid(pid, timeout) -> pid or None   the worker under bwrap (bwrap -> its init -> the worker)
    pidfd(pid) -> fd or None        a pidfd of it, opened before it can have exited
    cpu_clock(pid) -> clock id      another process's CPU-time clock (all its threads)
    rss_mb(pid) -> float            its resident memory, MB (/proc/PID/status)
    status_bytes(pid, field)        a memory field of /proc/PID/status (VmRSS, VmHWM) in bytes, or None
    exited(pidfd) -> bool           whether the process of a pidfd has ended (a pid read before is its own
                                    while it has not: a pid is not reused before its process is reaped)
    WORKER, WORKER_ARGS             the worker's module, and its argv after the interpreter
"""

import os
import select
import time
from pathlib import Path

WORKER = "harness.lab.box.worker"  # python -m WORKER: the process inside the box
WORKER_ARGS = [b"-m", WORKER.encode()]  # the worker's argv after the interpreter


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


def pidfd(pid: int | None) -> int | None:
    """A pidfd of the worker, opened while it cannot have exited yet (it waits for its first request)."""
    if pid is None:
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def cpu_clock(pid: int) -> int:
    """The clock id of another process's CPU time (clock_getcpuclockid: all its threads, in ns,
    precise even while it runs): Linux's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)."""
    return ((~pid) << 3) | 2


def rss_mb(pid: int) -> float:
    found = status_bytes(pid, "VmRSS")
    return found / (1 << 20) if found is not None else 0.0


def status_bytes(pid: int, field: str) -> int | None:
    """A "kB" field of another process's /proc/PID/status, in bytes (the kernel writes every line;
    the process's own name, the only text it sets there, is escaped: no line of its making). The
    same fields harness.measure.inside.memory reads of its own process, from inside; here, from outside."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def exited(pidfd: int) -> bool:
    """A pidfd reads ready once its process has ended (pidfd_open(2): POLLIN at exit)."""
    return bool(select.select([pidfd], [], [], 0)[0])
