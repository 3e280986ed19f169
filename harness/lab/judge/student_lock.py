"""A grader's lock on one student (its file, claim.json, and staff's messages call it a claim): two
graders (two Slurm tasks, a requeued task and its ghost, two TAs' `lab grade --resume` on one OUT, a
TA's `lab grade --only` beside the cluster) never grade and write one student at once. Every grader
takes it: `lab grade` here (grade.grade_all, through held) and each Slurm task
(harness.lab.judge.slurm_task, for its students before it grades).

    OUT/results/<id>/claim.json     {"owner": "<job>_<task>" or "<host>:<pid>", "host", "pid", "job", "time"}

Made so it holds on a shared filesystem (NFS, Lustre), where a node-local flock means nothing: a
claim is a file made whole under a unique name and then hard-linked to claim.json (link(2) fails
when the name exists, atomically on the server: the classic NFS-safe lock file). A claim whose
owner is gone (its Slurm job no longer pending or running, or a process on this host that has
ended) is stale: a grader takes it over by renaming it to a name of its own (one rename wins, the
others find it gone) and then claims afresh. The same owner claiming again (a requeued task keeps
its job id) gets it back.

    take(out, student, owner, alive) -> True when this grader holds the claim now
    release(out, student, owner)     removes the claim if it is still this owner's
    holder(out, student) -> the claim's owner, or None
    owner_here() -> this grader's owner name; alive_on_slurm(owner) -> whether that owner still runs
    rows_now(out) -> {id: stamp}     which rows there are, read before a grader chooses whom to grade
    with held(out, student, seen) as busy:   grade only when `busy` is None: the claim taken and the
                                     row still the one seen (else why not); released after
"""

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.lab.judge import store

CLAIM = "claim.json"


def owner_here() -> str:
    """`<array job>_<task>` (or the job id) inside a Slurm job, else `<host>:<pid>`."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    job = os.environ.get("SLURM_JOB_ID")
    return job or f"{socket.gethostname()}:{os.getpid()}"


def alive_on_slurm(owner: str) -> bool:
    """Whether a claim's owner still runs: a Slurm job pending, running or being requeued (squeue),
    or a process of this host (`host:pid`). An owner nobody can ask about counts as alive: a claim
    is never broken on a guess."""
    host, sep, pid = owner.rpartition(":")
    if sep:
        if host != socket.gethostname():
            return True  # another machine's grader: only it can say
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except (PermissionError, ValueError):
            return True
        return True
    try:
        done = subprocess.run(["squeue", "-h", "-j", owner, "-o", "%T"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return True
    if done.returncode != 0:
        return "Invalid job id" not in done.stderr  # purged: long finished
    states = set(done.stdout.split())
    return bool(states & {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED",
                          "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "SUSPENDED", "STOPPED"})


def _path(out: Path, student: str) -> Path:
    return store.result_dir(out, student) / CLAIM


def holder(out: Path, student: str) -> str | None:
    """The claim's owner, or None when there is no claim (or it cannot be read)."""
    data = store.read_json(_path(out, student))
    return data.get("owner") if isinstance(data, dict) and isinstance(data.get("owner"), str) else None


def take(out: Path, student: str, owner: str, alive: Callable[[str], bool] = alive_on_slurm) -> bool:
    """Claim `student` for `owner`: True when it is ours now (made, ours already, or a stale one
    taken over), False when a live grader holds it."""
    path = _path(out, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        mine = path.with_name(f"{CLAIM}.{socket.gethostname()}.{os.getpid()}.{time.monotonic_ns()}")
        mine.write_text(json.dumps({"owner": owner, "host": socket.gethostname(), "pid": os.getpid(),
                                    "job": os.environ.get("SLURM_JOB_ID"), "time": time.time()}) + "\n")
        try:
            os.link(mine, path)
            return True
        except FileExistsError:
            pass
        finally:
            mine.unlink(missing_ok=True)
        try:
            judged = os.stat(path).st_ino  # the claim file judged below (a stale one is kept, so its
        except FileNotFoundError:          # inode is never a new claim's)
            continue  # moved aside or released meanwhile: link again
        current = holder(out, student)
        if current == owner:
            return True
        if current is not None and alive(current):
            return False
        # stale (or unreadable): one grader at a time (an atomic mkdir) moves it aside, and only while
        # it is still the file it judged: never a claim another grader has just made. (Its owner's name
        # is no test: a claim moved aside and then no file read as the same "no owner" as an unreadable
        # one, and a grader that took that for stale moved aside the claim linked in between.)
        gate = path.with_name(f"{CLAIM}.takeover")
        try:
            os.mkdir(gate)
        except FileExistsError:
            time.sleep(0.05)
            continue
        try:
            if os.stat(path).st_ino == judged:  # no claim can be linked while this one is there
                os.rename(path, path.with_name(f"{CLAIM}.stale.{os.getpid()}.{time.monotonic_ns()}"))
        except FileNotFoundError:
            pass
        finally:
            os.rmdir(gate)
    return False


def release(out: Path, student: str, owner: str) -> None:
    """Remove the claim when it is still `owner`'s (and the stale claims it took over)."""
    path = _path(out, student)
    if holder(out, student) == owner:
        path.unlink(missing_ok=True)
    for stale in path.parent.glob(f"{CLAIM}.stale.*"):
        stale.unlink(missing_ok=True)


Stamp = tuple[int, int, int]  # a row file's (inode, mtime ns, size): a row written again is a new file


def _stamp(path: Path) -> Stamp | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns, found.st_size


def rows_now(out: Path) -> dict[str, Stamp]:
    """{result folder (a student's safe id): its row's stamp} of the rows there now: read before a
    grader chooses whom to grade, so that a row another grader writes after it is told apart."""
    base = Path(out) / store.RESULTS
    found = {}
    for path in base.glob("*/row.json") if base.is_dir() else []:
        stamp = _stamp(path)
        if stamp is not None:
            found[path.parent.name] = stamp
    return found


@contextmanager
def held(out: Path, student: str, seen: dict[str, Stamp], owner: str | None = None,
         alive: Callable[[str], bool] = alive_on_slurm) -> Iterator[str | None]:
    """Inside, None when this grader may grade `student`: it holds the claim, and the student's row is
    still the one it saw when it chose (`seen`: rows_now then); else why not, in words (a live grader
    holds it; one graded it meanwhile, and its row stands). The claim is released on the way out,
    whatever ends the grading (a stale one, its grader dead, is taken over: take)."""
    owner = owner or owner_here()
    if not take(out, student, owner, alive):
        yield f"claimed by {holder(out, student)}, a grader still running; skipped"
        return
    try:
        row = store.result_dir(out, student) / "row.json"
        if _stamp(row) != seen.get(row.parent.name):
            yield "graded meanwhile by another grader (its row stands); skipped"
        else:
            yield None
    finally:
        release(out, student, owner)
