"""Why a lab worker ended, read from outside: its exit code or signal, its cgroup's out-of-memory
kills, the grader's own reason for killing it, and the end of its log.

    cause(code, limits, oom_kills, killed_for, under_bwrap, log_path) -> Failure
    out_of_memory_line(log_path)   the log's last line where a library says an allocation failed
    output_full(log_path, limits)  whether its log reached the output limit
"""

import os
import signal
from pathlib import Path

from harness.errors import Failure
from harness.lab.box.proc.limits import Limits

OOM_WORDS = ("Memory allocation still failed", "std::bad_alloc", "Cannot allocate memory", "out of memory")


def cause(code: int, limits: Limits, oom_kills: bool, killed_for: str | None, under_bwrap: bool,
          log_path: Path) -> Failure:
    """The Failure of a worker that exited with `code` (negative: killed by that signal)."""
    if oom_kills:
        return Failure("out-of-memory", f"past the memory limit of {limits.memory_mb} MB "
                                        "(killed by the kernel for its cgroup)")
    if killed_for:
        return Failure("out-of-memory", killed_for)
    if under_bwrap and code > 128:  # bwrap reports a child killed by signal N as 128 + N
        code = -(code - 128)
    if code == -signal.SIGXCPU:
        return Failure("timeout", f"CPU-time limit of {limits.cpu_s} s exceeded (killed by SIGXCPU)")
    if code == -signal.SIGXFSZ or output_full(log_path, limits):  # Python ignores SIGXFSZ: writes fail
        return Failure("crashed", f"wrote more than the output limit of {limits.output_mb} "
                                  "MB to one file or to its log")
    if code < 0 and -code in signal.valid_signals():
        name = signal.Signals(-code).name  # killed_by: the grader asks whether its own signal did it
        return Failure("crashed", f"the worker was killed by {name}", {"killed_by": name})
    said = out_of_memory_line(log_path)
    if said:  # a library that gives up on an allocation and exits (OpenBLAS does), not Python
        return Failure("out-of-memory", f"the worker exited with code {code} after an allocation "
                                        f"failed under the memory limit of {limits.memory_mb} MB "
                                        f"(its log: {said[:200]})")
    return Failure("crashed", f"the worker exited with code {code}")


def out_of_memory_line(log_path: Path) -> str | None:
    """The last line of the log's end (4 KiB) where a library says an allocation failed."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
            tail = log.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    found = [line for line in tail if any(words in line for words in OOM_WORDS)]
    return found[-1].strip() if found else None


def output_full(log_path: Path, limits: Limits) -> bool:
    if not limits.output_mb:
        return False
    try:
        return log_path.stat().st_size >= int(limits.output_mb) << 20
    except OSError:
        return False
