"""What a lab worker's box enforces, and the rlimits it sets between fork and exec (the box itself:
harness.lab.box.proc.lifecycle).

Limits of every worker, references included (the same overhead for all):
- memory: the cgroup's limit (the kernel kills past it: out-of-memory), and on the CPU also
  RLIMIT_AS (an allocation past it raises MemoryError in the submission); on the GPU the CUDA
  driver maps far more address space than it uses, so there RLIMIT_AS is left off and the
  resident set is watched too;
- processes and threads: the cgroup's pids limit;
- CPU time: RLIMIT_CPU (SIGXCPU at the limit); wall time: the grader's deadline on everything it
  waits for (harness.lab.box.sandbox), then SIGKILL;
- disk: its writable space (its folder's copy, /tmp, /dev/shm) is one tmpfs of limits.disk_mb and
  limits.files (harness.lab.box.walls.disk), made and removed by the caller;
- kernel keyrings: denied by a seccomp filter (harness.lab.box.walls.seccomp);
- output: RLIMIT_FSIZE on every file it writes, its log included (SIGXFSZ past it); the log kept
  in --out is its first and last LOG_KEEP bytes, with the size noted.

    Limits                          what one box enforces (None: no limit)
    limiter(limits, address_space, group) -> the child's set-up between fork and exec
    capped_log(source, target)      a worker's log copied, its first and last LOG_KEEP bytes
"""

import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.lab.box.walls import cgroup
from harness.lab.box.walls.cgroup import Cgroup

LOG_KEEP = 32 << 10  # bytes of the log kept from its start, and as many from its end


@dataclass(frozen=True)
class Limits:
    """What one box enforces; None is no limit. wall_s bounds the grader's waits, all together."""

    wall_s: float | None = None
    cpu_s: float | None = None
    memory_mb: int | None = None
    pids: int | None = None
    output_mb: int | None = None
    disk_mb: int | None = None  # the writable space (harness.lab.box.walls.disk): its size ...
    files: int | None = None  # ... and its files and folders


def limiter(limits: Limits, address_space: bool, group: Cgroup | None) -> Callable[[], None]:
    """The child's set-up between fork and exec: rlimits and its cgroup. Only system calls on
    values computed here, in the parent (Python code between fork and exec must not allocate or
    lock). When the grader dies, bwrap's --die-with-parent takes the sandbox with it."""
    caps = [(resource.RLIMIT_CORE, (0, 0))]  # (kind, (soft, hard))
    if limits.cpu_s:
        soft = int(limits.cpu_s)
        caps.append((resource.RLIMIT_CPU, (soft, soft + 5)))  # soft: SIGXCPU, hard: SIGKILL
    if limits.memory_mb and address_space:
        size = int(limits.memory_mb) << 20
        caps.append((resource.RLIMIT_AS, (size, size)))
    if limits.output_mb:
        size = int(limits.output_mb) << 20
        caps.append((resource.RLIMIT_FSIZE, (size, size)))
    procs = [bytes(path) for path in group.procs_files()] if group is not None else []

    def apply() -> None:
        for kind, values in caps:
            resource.setrlimit(kind, values)
        cgroup.enter(procs)

    return apply


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
