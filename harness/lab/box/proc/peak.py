"""A worker's peak memory, read by the grader from outside the worker's process. Student code runs
inside the worker and can forge anything the worker says of itself (a patched reply, a patched
harness.measure.inside.memory): nothing the worker reports is read. The source is the best one its box has:

    cgroup   the worker's own cgroup's high-water mark (harness.lab.box.walls.cgroup.Cgroup.peak_file:
             v2 memory.peak, v1 memory.max_usage_in_bytes): the worker and every process it
             started, with the page cache and tmpfs pages they brought in, from before the worker's
             first instruction; nothing in the box can reset it
    procfs   without a cgroup (not root), or a v2 kernel before 5.19: the worker process's own
             VmHWM (/proc/PID/status, the peak of its resident set), read by the grader after every
             exchange and at every tick of a long wait (harness.lab.box.sandbox), the largest kept,
             until the worker is reaped. Processes it started are not counted, and the process can
             lower its own VmHWM between two readings (writing 5 to /proc/self/clear_refs): like
             timing without a cgroup, not tamper-evident, and the row's memory_source says so

The peak covers the worker's whole run: the interpreter's start, the import, the gate, the warm-up
and the timed calls alike (what a shared server feels). Host memory only: what a GPU framework
holds on the device is not counted.

    procfs_peak(pid, pidfd) -> bytes or None    the worker's VmHWM now, read from outside
    reading(group, seen) -> dict                the row's {"peak_mb", "memory_source"}
    SOURCES, MIB
"""

from harness.lab.box.walls import procfs
from harness.lab.box.walls.cgroup import Cgroup

MIB = 1 << 20
SOURCES = {
    "v2": "cgroup v2 memory.peak: the worker and every process it started",
    "v1": "cgroup v1 memory.max_usage_in_bytes: the worker and every process it started",
    "procfs": "/proc VmHWM of the worker process, read by the grader: processes it started are not "
              "counted, and it could lower its own reading (no cgroup: not tamper-evident)",
    "none": "not measured: no cgroup, and the worker's /proc/PID/status could not be read",
}


def procfs_peak(pid: int | None, pidfd: int | None) -> int | None:
    """The worker's VmHWM in bytes; None when it cannot be read, or the process had ended by then
    (its pid may be another process's once it is reaped: a reading counts only when its pidfd
    says the process is still there after it)."""
    if pid is None or pidfd is None:
        return None
    found = procfs.status_bytes(pid, "VmHWM")
    return found if found is not None and not procfs.exited(pidfd) else None


def reading(group: Cgroup | None, seen: int | None) -> dict:
    """{"peak_mb": MiB (one decimal) or None, "memory_source": SOURCES[...]}: the cgroup's peak
    where its kernel keeps one, else `seen`, the largest VmHWM read of the worker (procfs_peak)."""
    peak = group.peak_bytes() if group is not None else None
    if peak is not None and group is not None:
        return {"peak_mb": round(peak / MIB, 1), "memory_source": SOURCES[group.version]}
    if seen is None:
        return {"peak_mb": None, "memory_source": SOURCES["none"]}
    return {"peak_mb": round(seen / MIB, 1), "memory_source": SOURCES["procfs"]}
