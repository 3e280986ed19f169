"""A lab worker's own cgroup: a pids limit, a memory limit, a CPU counter that counts every
thread and helper process of the worker, and a kill that leaves nothing behind.

cgroup v2 (one unified hierarchy: cpu.stat, memory.max, pids.max, cgroup.kill) and v1 (one
hierarchy per controller: cpuacct, memory, pids, and freezer where mounted; Debian 12 with
systemd's hybrid layout, older Slurm nodes). Each worker's group is made under the grader's own
group of each hierarchy (on Slurm: inside the task's), in a folder `lenet-lab`:

    v2  <grader's group>/lenet-lab/<name>/{cgroup.procs, cpu.stat, memory.max, pids.max, ...}
    v1  <memory mount>/<grader's memory group>/lenet-lab/<name>/memory.limit_in_bytes, ...

Only root can make them: without root, `reason_unavailable()` says so and the lab runs without
cgroups (the leaderboard says its timing is not tamper-evident).

    Cgroup(name, memory_mb, pids)   one worker's group: .procs_files(), .cpu_ns(), .oom_kills(),
                                    .peak_bytes(), .pids_now(), .kill(), .remove() (and .set_limits())
    enter(procs_files)              the child joins its groups (between fork and exec)
    cpu_reading(text, v1, path)     ns from a group's CPU file (also a Slurm step's: slurmstep)
    reason_unavailable() -> why not, or None; layout(), mounts(), own_groups(), enable_v2_controllers()
"""

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

PARENT = "lenet-lab"
V1_CONTROLLERS = ("cpuacct", "memory", "pids")  # needed; freezer is used where mounted
V2_CONTROLLERS = ("cpu", "memory", "pids")
KILL_WAIT_S = 10.0


def mounts(mounts_file: str | Path = "/proc/self/mounts") -> dict:
    """{"v2": mountpoint} and/or {controller: mountpoint} of the v1 hierarchies."""
    found: dict[str, str] = {}
    for line in Path(mounts_file).read_text().splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        point, kind, options = parts[1], parts[2], parts[3].split(",")
        if kind == "cgroup2":
            found.setdefault("v2", point)
        elif kind == "cgroup":
            for option in options:
                if option in (*V1_CONTROLLERS, "freezer"):
                    found.setdefault(option, point)
    return found


def own_groups(cgroup_file: str | Path = "/proc/self/cgroup") -> dict:
    """{"v2": path} and {controller: path} of this process's groups (paths start with /)."""
    groups = {}
    for line in Path(cgroup_file).read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if not controllers:
            groups["v2"] = path
        for controller in controllers.split(","):
            groups[controller] = path
    return groups


def layout(mounts_file: str | Path = "/proc/self/mounts",
           cgroup_file: str | Path = "/proc/self/cgroup") -> tuple[str, dict]:
    """("v2", {"v2": parent folder}) when the unified hierarchy has the controllers, else
    ("v1", {controller: parent folder}); raises OSError with the reason when neither works."""
    found, own = mounts(mounts_file), own_groups(cgroup_file)
    v2 = found.get("v2")
    if v2:
        available = (Path(v2) / "cgroup.controllers")
        names = available.read_text().split() if available.is_file() else []
        if all(c in names for c in V2_CONTROLLERS):
            return "v2", {"v2": Path(v2) / own.get("v2", "/").lstrip("/") / PARENT}
    missing = [c for c in V1_CONTROLLERS if c not in found]
    if missing:
        raise OSError(f"no cgroup v2 with {list(V2_CONTROLLERS)} and no v1 hierarchy for {missing} "
                      f"in {mounts_file}")
    parents = {c: Path(found[c]) / own.get(c, "/").lstrip("/") / PARENT
               for c in (*V1_CONTROLLERS, "freezer") if c in found}
    return "v1", parents


def reason_unavailable() -> str | None:
    """None when this process can make worker cgroups here, else why not."""
    if os.geteuid() != 0:
        return "not root: only root can give each worker its own cgroup (run the grader with sudo)"
    try:
        version, parents = layout()
        for parent in parents.values():
            parent.mkdir(exist_ok=True)
        if version == "v2":
            enable_v2_controllers(parents["v2"])
    except OSError as exc:
        return f"cannot make cgroups here: {exc}"
    return None


def enable_v2_controllers(parent: Path) -> None:
    """v2's rule: a group with processes cannot hand controllers to its children. The grader's
    own group usually holds the grader, so the grader moves into a leaf of its own first."""
    base = parent.parent
    wanted = " ".join(f"+{c}" for c in V2_CONTROLLERS)
    if all(c in (parent / "cgroup.subtree_control").read_text().split() for c in V2_CONTROLLERS):
        return
    try:
        (base / "cgroup.subtree_control").write_text(wanted)
    except OSError:  # EBUSY: processes in base; move this one into a leaf and try again
        leaf = base / "lenet-grader"
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        (base / "cgroup.subtree_control").write_text(wanted)
    (parent / "cgroup.subtree_control").write_text(wanted)


def cpu_reading(text: bytes, v1: bool, path: Path) -> int:
    """ns from a group's CPU file: v1 cpuacct.usage (ns), v2 cpu.stat's usage_usec."""
    if v1:
        return int(text)
    for line in text.splitlines():
        if line.startswith(b"usage_usec "):
            return int(line.split()[1]) * 1000
    raise OSError(f"{path}: no usage_usec line")


def enter(procs_files: Iterable[bytes | str | Path]) -> None:
    """Move the calling process into each group of `procs_files` ("0": the writer itself). Called
    between fork and exec, on paths computed before the fork: system calls only."""
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


class Cgroup:
    """One worker's group. The child calls `enter(group.procs_files())` between fork and exec (the
    worker and everything it starts are in the group from its first instruction)."""

    def __init__(self, name: str, memory_mb: int | None = None, pids: int | None = None,
                 where: tuple[str, dict] | None = None) -> None:
        self.version, parents = where or layout()
        self.dirs = {c: p / name for c, p in parents.items()}
        for folder in self.dirs.values():
            folder.mkdir(parents=True, exist_ok=True)
        if self.version == "v2":
            enable_v2_controllers(parents["v2"])
        self.memory_mb, self.pids = memory_mb, pids
        self.set_limits()
        self._cpu_fd = os.open(self._cpu_file(), os.O_RDONLY)

    # --- files --------------------------------------------------------------------------------
    def _file(self, controller: str, name: str) -> Path:
        return self.dirs["v2" if self.version == "v2" else controller] / name

    def _cpu_file(self) -> Path:
        return self._file("cpuacct", "cpu.stat" if self.version == "v2" else "cpuacct.usage")

    def set_limits(self) -> None:
        if self.memory_mb:
            limit = str(int(self.memory_mb) << 20)
            if self.version == "v2":
                self._file("memory", "memory.max").write_text(limit)
                swap = self._file("memory", "memory.swap.max")
                if swap.exists():
                    swap.write_text("0")
            else:
                self._file("memory", "memory.limit_in_bytes").write_text(limit)
                swap = self._file("memory", "memory.memsw.limit_in_bytes")
                if swap.exists():  # memory + swap: no escape into swap
                    swap.write_text(limit)
        if self.pids:
            self._file("pids", "pids.max").write_text(str(int(self.pids)))

    def procs_files(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in self.dirs.values()]

    # --- readings -----------------------------------------------------------------------------
    def cpu_ns(self) -> int:
        """CPU time of everything that ever ran in the group, ns (one pread: about 2 us)."""
        return cpu_reading(os.pread(self._cpu_fd, 4096, 0), self.version == "v1", self._cpu_file())

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            for line in self._file("memory", name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def peak_file(self) -> Path:
        """The kernel's own high-water mark of the group's memory: v2 memory.peak (Linux 5.19+),
        v1 memory.max_usage_in_bytes; both count every process of the group, the page cache
        and tmpfs pages it brought in too, since the group was made. Only root can reset them (v1:
        by writing to it; v2 since Linux 6.12: for the writer's own open file only): the worker runs
        as another user, without capabilities, and no cgroup file system in its box is writable."""
        return self._file("memory", "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes")

    def peak_bytes(self) -> int | None:
        """The group's peak memory in bytes (peak_file); None where the kernel has no such file
        (v2 before Linux 5.19) or it cannot be read."""
        try:
            return int(self.peak_file().read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def pids_now(self) -> list[int]:
        found: set[int] = set()
        for path in self.procs_files():
            try:
                found.update(int(p) for p in path.read_text().split())
            except OSError:
                pass
        return sorted(found)

    # --- the end ------------------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL everything in the group and wait until it is empty (a fork bomb cannot outrun
        it: v2's cgroup.kill is atomic; on v1 the group is frozen first where a freezer exists)."""
        kill_file = self._file("v2", "cgroup.kill") if self.version == "v2" else None
        freezer = self.dirs.get("freezer")
        deadline = time.monotonic() + KILL_WAIT_S
        while True:
            pids = self.pids_now()
            if not pids:
                return
            if kill_file is not None and kill_file.exists():
                kill_file.write_text("1")
            else:
                if freezer is not None:
                    (freezer / "freezer.state").write_text("FROZEN")
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if freezer is not None:
                    (freezer / "freezer.state").write_text("THAWED")  # killed tasks die when thawed
            if time.monotonic() > deadline:
                raise OSError(f"cgroup {self.dirs} still holds processes {pids[:10]} after SIGKILL")
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left, then remove the group's folders."""
        try:
            os.close(self._cpu_fd)
        except OSError:
            pass
        self.kill()
        for folder in self.dirs.values():
            for _ in range(100):  # the kernel may need a moment after the last exit
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
