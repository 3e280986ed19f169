"""Grading on a Slurm cluster: one job-array task per submission, then one merge job.

    lab grade LAB --submissions DIR --out OUT --slurm [--partition P] [--gres gpu:1] [--max-parallel K]

writes OUT/slurm/{students.txt,task.sh,merge.sh} and submits
    sbatch --array=0-(N-1)%K task.sh            task i grades the i-th student of students.txt
    sbatch --dependency=afterany:ARRAY merge.sh  runs when every task has ended, however it ended
Each task writes OUT/results/<student>/ (a shared filesystem), exactly as `lab grade --only`
does on one server; the merge job gives every student without a row.json one, from the task's
state (squeue, then scontrol: no accounting database needed), and builds the leaderboard.
Limits map to the task: --time = wall_s x TIME_HEADROOM + SETUP_S, --mem = memory_mb + MEM_EXTRA_MB
(the grader, the oracle and the references share the task). Inside a node the GPU lock still
serialises timing. Plain sbatch scripts: submitit's polling needs slurmdbd (sacct).

    submit(lab, submissions, out, ...) -> the array job; scripts(...) -> (task.sh, merge.sh)
    merge(out, submissions, job) -> rows; task_states, scontrol_state, missing_row, task_resources,
    header, sbatch
"""

import math
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from harness import DEFAULT_WEIGHTS, ROOT
from harness.errors import HarnessError, Unavailable
from harness.lab.box.walls import isolation
from harness.lab.judge import grade, store
from harness.lab.judge.rules.assignment import Lab

TIME_HEADROOM = 1.5
SETUP_S = 300  # the oracle, the training images, the references' workers and warm-up
MEM_EXTRA_MB = 2048
MERGE_MINUTES = 15


def task_resources(lab: Lab) -> tuple[int, int]:
    """(--time in minutes, --mem in MB) of one task."""
    minutes = math.ceil((lab.limits.wall_s * TIME_HEADROOM + SETUP_S) / 60)
    return minutes, int(lab.limits.memory_mb) + MEM_EXTRA_MB


def header(lines: dict) -> str:
    return "\n".join(f"#SBATCH --{key}={value}" for key, value in lines.items() if value is not None)


def scripts(lab: Lab, submissions: Path, out: Path, count: int, partition: str | None = None,
            gres: str | None = None, max_parallel: int | None = None, weights: str | Path = DEFAULT_WEIGHTS,
            no_sandbox: bool = False) -> tuple[str, str]:
    """(task.sh, merge.sh); merge.sh's dependency names the array job as $ARRAY_JOB_ID."""
    out, submissions = Path(out).resolve(), Path(submissions).resolve()
    minutes, mem = task_resources(lab)
    q = shlex.quote
    common = (f"set -euo pipefail\ncd {q(str(ROOT))}\n"
              f"export PYTHONPATH={q(str(ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}\n")
    array = f"0-{count - 1}" + (f"%{max_parallel}" if max_parallel else "")
    task = "\n".join([
        "#!/bin/bash",
        header({"job-name": f"lab-{lab.name}", "array": array, "time": minutes, "mem": f"{mem}M",
                "cpus-per-task": lab.measure.threads, "partition": partition, "gres": gres,
                "output": f"{out}/slurm/task_%a.out"}),
        common + 'student=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" '
        f'{q(str(out / "slurm" / "students.txt"))})',
        f"exec {q(sys.executable)} -m harness lab grade {q(str(out / (lab.name + '.toml')))} --submissions "
        f"{q(str(submissions))} --out {q(str(out))} --only \"$student\" --resume --no-report "
        f"--weights {q(str(Path(weights).resolve()))}" + (" --no-sandbox" if no_sandbox else ""), ""])
    merge = "\n".join([
        "#!/bin/bash",
        header({"job-name": f"lab-{lab.name}-merge", "dependency": "afterany:$ARRAY_JOB_ID",
                "time": MERGE_MINUTES, "mem": "2048M", "partition": partition,
                "output": f"{out}/slurm/merge.out"}),
        common + f"exec {q(sys.executable)} -m harness lab merge {q(str(out))} --submissions "
        f"{q(str(submissions))} --job \"$ARRAY_JOB_ID\"", ""])
    return task, merge


def sbatch(*args: str) -> str:
    done = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise HarnessError(f"sbatch {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]  # "id" or "id;cluster"


def submit(lab: Lab, submissions: Path, out: Path, partition: str | None = None, gres: str | None = None,
           max_parallel: int | None = None, dry_run: bool = False, weights: str | Path = DEFAULT_WEIGHTS,
           report: Callable[[str], None] = print, no_sandbox: bool = False,
           refused: dict[str, str] | None = None) -> int:
    """The grading as a job array (one task per student folder) and its merge job; each refused
    student (collect's, or a folder that is a link) gets its refused row here, ungraded."""
    refused = {**store.linked(submissions), **(refused or {})}
    names = store.students(submissions, lab.module, refused)
    if max_parallel is not None and max_parallel < 1:
        raise HarnessError(f"--max-parallel: expected a whole number >= 1, found {max_parallel}")
    task, merge = scripts(lab, submissions, out, len(names), partition, gres, max_parallel, weights,
                          no_sandbox)
    if dry_run:
        print(f"# {Path(out) / 'slurm' / 'task.sh'} ({len(names)} tasks: {', '.join(names)})\n{task}")
        print(f"# {Path(out) / 'slurm' / 'merge.sh'} (ARRAY_JOB_ID = the array job's id)\n{merge}")
        return 0
    isolation.decide(no_sandbox)  # refused here, not in every task, when there is no sandbox tool
    if not shutil.which("sbatch"):
        raise Unavailable("sbatch not found: --slurm needs a Slurm cluster (a one-node Slurm for trying it: "
                          "sudo scripts/slurm-local.sh start); without it, drop --slurm")
    store.prepare(out, lab.name, lab.source, lab.path)
    store.write_students(out, names + sorted(refused))
    grade.write_refused(lab, out, refused, report)
    folder = Path(out) / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "students.txt").write_text("\n".join(names) + "\n", errors="surrogateescape")  # any bytes
    (folder / "task.sh").write_text(task)
    array_job = sbatch(str(folder / "task.sh"))
    (folder / "merge.sh").write_text(merge.replace("$ARRAY_JOB_ID", array_job))
    merge_job = sbatch(str(folder / "merge.sh"))
    (folder / "jobs.txt").write_text(f"array {array_job}\nmerge {merge_job}\n")
    report(f"submitted array job {array_job} ({len(names)} tasks" +
           (f", at most {max_parallel} at once" if max_parallel else "") +
           f") and merge job {merge_job}; watch: squeue -j {array_job},{merge_job}")
    print(f"leaderboard when job {merge_job} ends: {Path(out) / 'LEADERBOARD.md'}")
    return 0


def _run(*cmd: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None


def task_states(job: str) -> dict[int, dict]:
    """{task index: {"state", "reason", "exit_code"}} of an array job; absent once purged."""
    found = {}
    done = _run("squeue", "-h", "-t", "all", "-r", "-j", job, "-o", "%i|%T|%r")
    for line in (done.stdout.splitlines() if done and done.returncode == 0 else []):
        ident, state, reason = (line.split("|") + ["", ""])[:3]
        if "_" in ident and ident.split("_")[1].isdigit():
            found[int(ident.split("_")[1])] = {"state": state, "reason": reason, "exit_code": None}
    return found


def scontrol_state(job: str, index: int) -> dict | None:
    done = _run("scontrol", "-o", "show", "job", f"{job}_{index}")
    if not done or done.returncode != 0:
        return None
    fields = dict(re.findall(r"(\w+)=(\S*)", done.stdout))
    return {"state": fields.get("JobState", "UNKNOWN"), "reason": fields.get("Reason", ""),
            "exit_code": fields.get("ExitCode")}


def missing_row(student: str, state: dict | None, started: dict | None) -> dict:
    """The row of a submission whose task left none: cancelled, or crashed with the reason."""
    where = f" on {started['host']}" if started else ""
    if state is None:
        return {"status": "crashed", "reason": "no result, and Slurm no longer knows the task (purged)"}
    name = state["state"]
    detail = f"Slurm state {name}"
    if state.get("exit_code"):
        detail += f", exit code {state['exit_code']}"
    if state.get("reason") and state["reason"] != "None":
        detail += f", reason {state['reason']}"
    if name == "CANCELLED" or name.startswith("CANCELLED"):
        when = "while grading" + where if started else "before it started"
        return {"status": "cancelled", "reason": f"the Slurm task was cancelled {when} ({detail})"}
    if name == "TIMEOUT":
        return {"status": "timeout", "reason": f"the Slurm task ran past its --time{where} ({detail})"}
    if name == "OUT_OF_MEMORY":
        return {"status": "out-of-memory", "reason": f"the Slurm task went past its --mem{where} ({detail})"}
    if not started:
        return {"status": "crashed", "reason": f"the Slurm task never started grading ({detail})"}
    return {"status": "crashed", "reason": f"the Slurm task ended without a result{where} ({detail}; a task "
                                           "killed past --mem shows as FAILED on Slurm without accounting)"}


def merge(out: Path, submissions: Path, job: str | None, report: Callable[[str], None] = print) -> list[dict]:
    """Rows for every student the tasks left without one (`lab merge` then builds the leaderboard:
    harness.lab.term.commands.lab_merge)."""
    out = Path(out)
    lab = store.graded_lab(out)
    listed = out / "slurm" / "students.txt"
    names = listed.read_text(errors="surrogateescape").splitlines() if listed.is_file() \
        else store.students(submissions, lab.module)
    states = task_states(job) if job else {}
    made = []
    for index, student in enumerate(names):
        if store.read_row(out, student) is not None:
            continue
        state = states.get(index) or (scontrol_state(job, index) if job else None)
        row = {"lab": lab.name, "student": student, "rank_by": lab.rank_by.label,
               "references": [r.label for r in lab.references], "device": lab.device,
               "node": {"hostname": (store.started(out, student) or {}).get("host", "-")},
               "from_merge": True, "slurm": {"job": job, "task": index, **(state or {})},
               **missing_row(student, state, store.started(out, student))}
        store.write_row(out, row)
        report(f"{student}: {row['status']}: {row['reason']}")
        made.append(row)
    return made
