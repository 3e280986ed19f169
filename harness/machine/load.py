"""Is the machine busy with something else? Read from /proc around each round of a run, so that a
round measured while another program ran beside it is flagged (its cells `contended`), and a run
warns before it starts on a busy machine.

A round's load: the CPU time that processes outside the run used during it (in cores: 1.0 is one
core kept busy), the share of time the hypervisor stole from this machine, and the load average.
The run's own processes (the runner and its workers, with their children) and kernel threads are
not counted. A round is contended when others used more than OTHERS_CORES_MAX cores on average,
or steal exceeded STEAL_MAX: on a small machine another busy process shares caches, memory
bandwidth and clocks with the timed one, and steal is time the timed one simply did not run.

    sample() -> Sample                              every process's CPU ticks and the CPU's, now
    between(before, after, own_pids) -> dict        a window's load: others_cores, steal, load1, busy
    contended(load) -> str | None                   why the window was contended, or None
    busy_now(own_pids, seconds) -> str | None       the same, for a short window starting now
"""

import os
import time
from dataclasses import dataclass, field

OTHERS_CORES_MAX = 0.25  # a quarter of a core used by others, on average over the round
STEAL_MAX = 0.05  # 5% of the CPU's time taken by the hypervisor
MIN_WINDOW_S = 1.0  # ticks are 10 ms: a shorter window is judged as if it lasted this long
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
KTHREADD = 2  # the parent of every kernel thread


@dataclass(frozen=True)
class Sample:
    when: float  # time.monotonic()
    steal: int  # ticks, all CPUs
    total: int
    procs: dict[int, tuple[int, str, int]] = field(default_factory=dict)  # pid -> (ppid, name, ticks)


def _cpu_ticks() -> tuple[int, int]:
    try:
        with open("/proc/stat") as f:
            parts = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (parts[7] if len(parts) > 7 else 0), sum(parts)


def _proc(pid: int) -> tuple[int, str, int] | None:
    """(ppid, name, user + system ticks) from /proc/PID/stat; the name may hold spaces and ')'."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    try:
        return int(fields[1]), head.partition("(")[2], int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


def sample() -> Sample:
    steal, total = _cpu_ticks()
    procs = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            found = _proc(int(entry))
            if found is not None:
                procs[int(entry)] = found
    return Sample(time.monotonic(), steal, total, procs)


def _own_tree(roots: set[int], *samples: Sample) -> set[int]:
    """The roots and every descendant seen in any sample (children may come and go)."""
    children: dict[int, set[int]] = {}
    for s in samples:
        for pid, (ppid, _, _) in s.procs.items():
            children.setdefault(ppid, set()).add(pid)
    own, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in own:
            own.add(pid)
            todo.extend(children.get(pid, ()))
    return own


def between(before: Sample, after: Sample, own_pids: set[int] | None = None,
            min_window: float = MIN_WINDOW_S) -> dict:
    """The load of the window from `before` to `after`, processes of own_pids (and children) apart."""
    own = _own_tree({os.getpid(), *(own_pids or set())}, before, after)
    seconds = max(after.when - before.when, min_window)
    used = []
    for pid, (ppid, name, ticks) in after.procs.items():
        if pid in own or ppid == KTHREADD or pid == KTHREADD:
            continue
        start = before.procs.get(pid, (0, "", 0))[2]  # a process born in the window: all its ticks
        if ticks > start:
            used.append(((ticks - start) / TICKS / seconds, name, pid))
    used.sort(reverse=True)
    steal = (after.steal - before.steal) / max(after.total - before.total, 1)
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"seconds": round(after.when - before.when, 3),
            "others_cores": round(sum(u for u, _, _ in used), 3),
            "steal": round(steal, 4), "load1": load1,
            "busy": [{"pid": pid, "name": name, "cores": round(u, 3)} for u, name, pid in used[:3]]}


def contended(load: dict) -> str | None:
    """Why a window's timings were disturbed, or None."""
    why = []
    if load["others_cores"] > OTHERS_CORES_MAX:
        top = ", ".join(f"{b['name']} ({b['pid']}) {b['cores']:.2f}" for b in load["busy"])
        why.append(f"other processes used {load['others_cores']:.2f} cores (> {OTHERS_CORES_MAX}): {top}")
    if load["steal"] > STEAL_MAX:
        why.append(f"the hypervisor stole {load['steal']:.0%} of the CPU (> {STEAL_MAX:.0%})")
    return "; ".join(why) or None


def busy_now(own_pids: set[int] | None = None, seconds: float = 0.5) -> str | None:
    """Whether the machine is busy right now (a short window): the reason, or None."""
    before = sample()
    time.sleep(seconds)
    return contended(between(before, sample(), own_pids, min_window=seconds))
