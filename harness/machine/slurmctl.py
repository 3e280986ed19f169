"""Talking to a Slurm cluster through its own commands (sbatch, squeue): what lab grading and
campaigns on Slurm share. Plain commands, no accounting database (sacct needs slurmdbd).

    header(lines) -> "#SBATCH ..." lines   sbatch(*args) -> job id   run(*cmd) -> the finished command
    still_queued(jobs) -> those of `jobs` (or their array tasks) pending or running
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
