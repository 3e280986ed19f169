"""Talking to a Slurm cluster through its own commands (sbatch, squeue): what lab grading and
campaigns on Slurm share. Plain commands, no accounting database (sacct needs slurmdbd).

    header(lines) -> "#SBATCH ..." lines   sbatch(*args) -> job id   run(*cmd) -> the finished command
    still_queued(jobs) -> those of `jobs` (or their array tasks) pending or running
    held(jobs) -> {task: Slurm's reason}   those Slurm holds until released (is_held(state, reason));
                                           held_words(found), held_advice(jobs): in words
    ALIVE                                  the states of a job that has not ended
"""

import subprocess

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
