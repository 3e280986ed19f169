"""How this grading isolates its workers, decided once and written on the leaderboard:

    full        root + bubblewrap + cgroups: each worker its own UID, namespaces and cgroup;
                the cgroup's CPU counter times every call (tamper-evident)
    namespaces  bubblewrap without cgroups (not root, or no usable cgroup hierarchy): files,
                processes and network isolated (as root, each worker its own UID too); the CPU
                check reads the worker process's own clock (helper processes escape it), but in
                a Slurm job with Slurm's cgroups (steps): each worker is a job step of its own, and
                its step's cgroup counts every thread and process (harness.lab.box.walls.slurmstep)
    none        --no-sandbox: the worker runs as the grader's user, with its files and processes

UIDs: a grading holds one block of SLOTS UIDs from LENET_LAB_UID_BASE (default 61000), taken
with an flock so that graders on one node (Slurm tasks) never share one: the submission is slot
0, the references slots 1.. . No accounts are needed; nothing on the host belongs to them.

    decide(no_sandbox, strict) -> Isolation   .mode, .bwrap, .cgroups, .note, .uid(slot)
    take_block(base), lock_dir()              the UID block and its lock
"""

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.errors import HarnessError
from harness.lab.box.walls import bwrap, cgroup, slurmstep

SLOTS = 8
BLOCKS = 64
DEFAULT_UID_BASE = 61000


@dataclass
class Isolation:
    mode: str  # full, namespaces, none
    bwrap: str | None
    cgroups: bool
    note: str  # one line for the leaderboard and progress
    uid_base: int | None = None  # the block's first UID (full mode)
    _lock: object = None
    steps: bool = False  # each worker a Slurm job step of its own, counted by the step's cgroup

    def uid(self, slot: int) -> int | None:
        return None if self.uid_base is None else self.uid_base + slot


def lock_dir() -> Path:
    usable = os.path.isdir("/run") and os.access("/run", os.W_OK)
    base = Path("/run") if usable else Path(tempfile.gettempdir())
    folder = base / "lenet-lab-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def take_block(base: int) -> tuple[int, IO[str]]:
    """(first UID, the held lock file) of a free block."""
    folder = lock_dir()
    for block in range(BLOCKS):
        handle = open(folder / f"block-{block}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return base + block * SLOTS, handle
    raise HarnessError(f"all {BLOCKS} UID blocks in {folder} are taken by other graders")


def decide(no_sandbox: bool = False, strict: bool = True) -> Isolation:
    """The best isolation here. strict (lab grade): no sandbox tool is an error with the fix,
    unless no_sandbox; not strict (lab check, a student's laptop): use whatever there is."""
    if no_sandbox:
        return Isolation("none", None, False, "NO SANDBOX (--no-sandbox): submissions ran as the grader's "
                                              "user, with its files and processes; timing not tamper-evident")
    binary = bwrap.find()
    why = bwrap.reason_unusable(binary)
    if why or binary is None:
        if strict:
            raise HarnessError(f"lab grade: {why}. Fix it, or pass --no-sandbox to grade without one "
                               "(the leaderboard then says so)")
        return Isolation("none", None, False, f"no sandbox ({why}); timing not tamper-evident")
    version = bwrap.version(binary)
    if os.geteuid() != 0 and slurmstep.reason_unavailable() is None:
        return Isolation("namespaces", binary, False,
                         f"{version}, namespaces only (not root): files, processes and network isolated; "
                         "each worker a Slurm job step of its own (srun --overlap), its CPU time read from "
                         "the step's cgroup, so timing is tamper-evident", steps=True)
    if os.geteuid() != 0:
        return Isolation("namespaces", binary, False,
                         f"{version}, namespaces only (not root): files, processes and network isolated, "
                         "but no cgroup, so timing is not tamper-evident")
    base = int(os.environ.get("LENET_LAB_UID_BASE", DEFAULT_UID_BASE))
    first, lock = take_block(base)
    uids = f"own UID per worker ({first}-{first + SLOTS - 1}), PID/IPC/network/mount namespaces"
    no_cgroup = cgroup.reason_unavailable()
    if no_cgroup:
        return Isolation("namespaces", binary, False, f"{version}, {uids}, but no cgroup ({no_cgroup}): "
                         "timing is not tamper-evident", uid_base=first, _lock=lock)
    return Isolation("full", binary, True, f"{version}, {uids}, cgroup {cgroup.layout()[0]} (CPU counter, "
                     "memory and pids limits)", uid_base=first, _lock=lock)
