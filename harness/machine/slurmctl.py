"""Talking to a Slurm cluster through its own commands (sbatch, squeue): what lab grading and
campaigns on Slurm share. Plain commands, no accounting database (sacct needs slurmdbd).

    header(lines) -> "#SBATCH ..." lines   sbatch(*args) -> job id   run(*cmd) -> the finished command
    still_queued(jobs) -> those of `jobs` (or their array tasks) pending or running
    held(jobs) -> {task: Slurm's reason}   those Slurm holds until released (is_held(state, reason));
                                           held_words(found), held_advice(jobs): in words
    ALIVE                                  the states of a job that has not ended
    closed(path, mode, can) -> (where, verb) | None   the first folder on the way to `path` that cannot be
                                           searched, or `path` itself, where `can` (os.access: this
                                           user) says no
    check_reachable(needs, user, can)      refuses, naming the folder to open, where a job of `user`
                                           could not reach what it needs (code_needs(): the interpreter
                                           and the checkout, and what the caller adds)
"""

import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import harness
from harness import ROOT
from harness.errors import HarnessError

ALIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "RESIZING",
         "SUSPENDED", "SIGNALING", "STAGE_OUT")


def header(lines: dict) -> str:
    """`#SBATCH --key=value` for each value; True: the bare flag; None and False: left out."""
    return "\n".join(f"#SBATCH --{key}" + ("" if value is True else f"={value}")
                     for key, value in lines.items() if value is not None and value is not False)


def run(*cmd: str) -> subprocess.CompletedProcess | None:
    """The command, finished (30 s at most); None where it could not run."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None


def sbatch(*args: str) -> str:
    """Submit; the job id (a HarnessError with sbatch's words when it refuses)."""
    done = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise HarnessError(f"sbatch {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]  # "id" or "id;cluster"


def still_queued(jobs: list[str]) -> list[str]:
    """Those of `jobs` (or their array tasks) still pending or running; a purged job has ended."""
    if not jobs:
        return []
    done = run("squeue", "-h", "-r", "-j", ",".join(jobs), "-o", "%i|%T")
    if done is None:
        raise HarnessError("squeue did not answer: cannot tell whether earlier jobs still run")
    return sorted({line.split("|")[0] for line in done.stdout.splitlines()
                   if "|" in line and line.split("|")[1] in ALIVE})


def is_held(state: str, reason: str) -> bool:
    """Whether Slurm holds a job in that state, with that reason (squeue's %T and %r): it never starts
    until released (scontrol release). A node that fails to start a requeued task leaves it so, with
    the reason "launch failed requeued held"; a held submission's reason is JobHeldUser or JobHeldAdmin."""
    return state in ALIVE and state != "RUNNING" and "held" in reason.lower()


def held(jobs: list[str]) -> dict[str, str]:
    """{job or array task id: Slurm's reason} of those of `jobs` that Slurm holds (is_held)."""
    if not jobs:
        return {}
    done = run("squeue", "-h", "-r", "-j", ",".join(jobs), "-o", "%i|%T|%r")
    found = {}
    for line in done.stdout.splitlines() if done and done.returncode == 0 else []:
        ident, state, reason = (line.split("|", 2) + ["", ""])[:3]
        if is_held(state, reason):
            found[ident] = reason
    return found


def held_words(found: dict[str, str]) -> str:
    """'' or, of held()'s answer, the tasks Slurm holds and the command that releases them (a class
    waits on a held task forever: its merge job depends on it)."""
    if not found:
        return ""
    names = sorted(found)
    listed = ", ".join(f"{ident} ({found[ident]})" for ident in names[:10])
    listed += " ..." if len(names) > 10 else ""
    return (f"Slurm holds {listed} and starts {'it' if len(names) == 1 else 'them'} only once released: "
            f"scontrol release {','.join(names)}")


def held_advice(jobs: list[str]) -> str:
    """'' or, for a refusal's message, '; ' and held_words of the jobs Slurm holds."""
    words = held_words(held(jobs))
    return f"; {words}" if words else ""


Can = Callable[[str, int], bool]  # can(path, mode): whether the jobs' user may (os.access's question)
LETTER = {"read": "r", "list": "r", "write in": "w", "search": "x", "run": "x"}  # closed()'s verbs: chmod's


def closed(path: str | Path, mode: int, can: Can = os.access) -> tuple[Path, str] | None:
    """None when `can` allows every folder on the way to `path` to be searched and `path` to be opened
    for `mode` (os.R_OK, os.W_OK, os.X_OK, or'ed); else (the first folder that cannot be searched,
    "search"), or (path, what `mode` asks, in words), or (path, "find") where it is not there at all.
    The way as named and the way its links lead."""
    named = Path(os.path.abspath(path))
    if not os.path.exists(named):
        return named, "find"
    for way in dict.fromkeys([named, Path(os.path.realpath(named))]):
        for folder in reversed(way.parents):  # from / down
            if not can(str(folder), os.X_OK):
                return folder, "search"
        if not can(str(way), mode):
            is_dir = way.is_dir()
            verbs = [verb for bit, verb in ((os.R_OK, "list" if is_dir else "read"), (os.W_OK, "write in"),
                                            (os.X_OK, "search" if is_dir else "run")) if mode & bit]
            return way, " and ".join(verbs)
    return None


def closed_words(what: str, path: str | Path, where: tuple[Path, str], user: str) -> str:
    """A refusal's words: what cannot be reached, the folder to open, and how."""
    folder, verb = where
    if verb == "find":
        return f"{what} {path}: not found (the Slurm jobs read it where it is named)"
    try:
        found = os.stat(folder)
        owner = f" (owner {_name(found.st_uid)}, mode {stat.S_IMODE(found.st_mode):04o})"
    except OSError:
        owner = ""
    letters = "".join(dict.fromkeys(LETTER[word] for word in verb.split(" and ")))
    return (f"{what} {path}: {user}, the user the Slurm jobs run as, cannot {verb} {folder}{owner}; open it "
            f"to {user} (e.g. chmod o+{letters} {folder}) or move {what} where {user} can reach it")


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def code_needs() -> list[tuple[str, str | Path, int]]:
    """What every job runs, as check_reachable takes it: the interpreter, the checkout (its scripts
    `cd` there) and the harness package in it."""
    return [("the interpreter", sys.executable, os.X_OK), ("the checkout", ROOT, os.X_OK),
            ("the harness package", Path(harness.__file__).parent, os.R_OK | os.X_OK)]


def check_reachable(needs: list[tuple[str, str | Path, int]], user: str | None = None,
                    can: Can | None = None) -> None:
    """Refuse before anything is submitted where a job could not reach what it needs: each of `needs`
    is (what, path, mode). A job runs as the user who submits it (`user`, this one; `can`: os.access)
    on every node; without this, each task fails as it starts and the class waits on nothing."""
    user = user or _name(os.geteuid())
    for what, path, mode in needs:
        where = closed(path, mode, can or os.access)
        if where is not None:
            raise HarnessError(closed_words(what, path, where, user))
