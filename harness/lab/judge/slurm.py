"""Grading on a Slurm cluster: job arrays of tasks, each grading K students, then one merge job.

    lab grade LAB --submissions DIR --out OUT --slurm [--per-task K] [--max-parallel P]
        [--partition P] [--account A] [--qos Q] [--constraint C] [--gres gpu:1] [--time MIN]
        [--cpus-per-task C] [--lock-timeout S] [--resume]

writes OUT/slurm/{round.json,task.sh,merge.sh,jobs.txt} and submits
    sbatch --array=0-(M-1)%P task.sh FIRST     task FIRST+i grades students[(FIRST+i)*K : +K]; a class
                                               of more than MaxArraySize tasks is several arrays
    sbatch --dependency=afterany:ARRAYS merge.sh   runs when every task has ended, however it ended
Each task claims each of its students (harness.lab.judge.student_lock: holds on a shared filesystem),
grades them as `lab grade --only ... --resume` does on one server (the grader's set-up paid once
per task), and writes OUT/results/<student>/ (a shared filesystem). Tasks ask to be requeued
(--requeue): a preemption or a lost node puts the task back in the queue, and a signal
SIGNAL_BEFORE_S before its time limit requeues it (at most MAX_REQUEUES times); the requeued task
grades what is still unfinished. The merge job gives every student without a finished row one,
from its task's state (squeue, then scontrol: no accounting database needed), and builds the
leaderboard. `--resume` submits only the unfinished, and refuses while an earlier round's jobs
are queued or running.

Limits map to the task: --time = K x (wall_s x TIME_HEADROOM) + SETUP_S, --mem = memory_mb +
MEM_EXTRA_MB (the grader, the oracle and the references share the task), --cpus-per-task =
threads + 1 (the grader's own core). Plain sbatch scripts: submitit's polling needs slurmdbd (sacct).

    Options                      what every job asks of the cluster (pass-through)
    submit(lab, submissions, out, options, ...) -> 0;  scripts(...) -> (task.sh, merge.sh)
    submit_round(...)            the arrays and the merge job of one round (round.json, jobs.txt)
    arrays(tasks, max_array) -> [(first, count)]; array_spec(count, options) -> "0-(count-1)%P"
    task_resources, max_array_size, earlier_jobs
    job_needs(submissions, weights)   what the tasks reach (slurmctl.check_reachable before submitting)
(sbatch, squeue: harness.machine.slurmctl)
The tasks and the merge job: harness.lab.judge.slurm_task.
"""

import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import DEFAULT_WEIGHTS, ROOT
from harness.data import mnist
from harness.errors import HarnessError, Unavailable
from harness.lab.box.walls import isolation
from harness.lab.judge import grade, store
from harness.lab.judge.phases.prepare import start_weights
from harness.lab.judge.rules.assignment import Lab
from harness.machine.slurmctl import (
    check_reachable,
    code_needs,
    header,
    held_advice,
    run,
    sbatch,
    still_queued,
)

TIME_HEADROOM = 1.5
SETUP_S = 300  # the oracle, the training images, the references' workers and warm-up
MEM_EXTRA_MB = 2048
MERGE_MINUTES = 15
SIGNAL_BEFORE_S = 120  # the batch shell's USR1 this long before the time limit: it requeues the task
MAX_REQUEUES = 3  # requeues a task asks for itself (the time limit); Slurm's own (preemption) are Slurm's
DEFAULT_MAX_ARRAY = 1001  # Slurm's default MaxArraySize
# The grader and the worker it times take turns (a call computed, its answer checked, the next
# images sent), so a task needs about one core at a time (lab bench: 6.3 CPU-seconds a submission,
# docs/slurm.md, "Class-scale timing"); it asks for the lab's threads + 1, so that the grader's own
# work never takes the timed worker's core.


@dataclass(frozen=True)
class Options:
    """What each job asks of the cluster: passed through to sbatch (None: the cluster's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gres: str | None = None
    time: str | None = None  # minutes, or Slurm's [D-]HH:MM:SS; default: task_resources
    cpus_per_task: int | None = None  # default: the lab's threads + 1
    max_parallel: int | None = None
    per_task: int = 1
    lock_timeout: float | None = None  # each task's wait for the GPU lock (None: as long as it takes)

    def check(self) -> None:
        for name in ("max_parallel", "per_task", "cpus_per_task"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise HarnessError(f"--{name.replace('_', '-')}: expected a whole number >= 1, found {value}")
        if self.time is not None and not re.fullmatch(r"\d+|(\d+-)?\d{1,2}(:\d{2}){1,2}", self.time):
            raise HarnessError(f"--time: expected minutes or [D-]HH:MM[:SS] as sbatch takes it, "
                               f"found {self.time!r}")
        if self.lock_timeout is not None and not (isinstance(self.lock_timeout, (int, float))
                                                  and 0 <= self.lock_timeout < math.inf):
            raise HarnessError(f"--lock-timeout: expected seconds >= 0, found {self.lock_timeout}")

    def cluster(self) -> dict:
        """The pass-through lines of every job."""
        return {"partition": self.partition, "account": self.account, "qos": self.qos,
                "constraint": self.constraint}


def task_resources(lab: Lab, per_task: int = 1) -> tuple[int, int]:
    """(--time in minutes, --mem in MB) of one task grading `per_task` students."""
    minutes = math.ceil((per_task * lab.limits.wall_s * TIME_HEADROOM + SETUP_S) / 60)
    return minutes, int(lab.limits.memory_mb) + MEM_EXTRA_MB


def scripts(lab: Lab, submissions: Path, out: Path, options: Options, weights: str | Path = DEFAULT_WEIGHTS,
            no_sandbox: bool = False) -> tuple[str, str]:
    """(task.sh, merge.sh). task.sh's first argument is its array's first task; merge.sh's
    dependency names the arrays as $ARRAY_JOBS."""
    out, submissions = Path(out).resolve(), Path(submissions).resolve()
    minutes, mem = task_resources(lab, options.per_task)
    q = shlex.quote
    # unbuffered: each line in the task's log as it is said, and none lost when Slurm kills the task
    common = (f"set -euo pipefail\ncd {q(str(ROOT))}\nexport PYTHONUNBUFFERED=1\n"
              f"export PYTHONPATH={q(str(ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}\n")
    grader = (f"{q(sys.executable)} -m harness lab task {q(str(out))} --index \"$task\" --submissions "
              f"{q(str(submissions))} --weights {q(str(Path(weights).resolve()))}"
              + (" --no-sandbox" if no_sandbox else "")
              + (f" --lock-timeout {options.lock_timeout!r}" if options.lock_timeout is not None else ""))
    task = "\n".join([
        "#!/bin/bash",
        header({"job-name": f"lab-{lab.name}", "time": options.time or minutes, "mem": f"{mem}M",
                "cpus-per-task": options.cpus_per_task or lab.measure.threads + 1, **options.cluster(),
                "gres": options.gres, "requeue": True, "signal": f"B:USR1@{SIGNAL_BEFORE_S}",
                "output": f"{out}/slurm/task_%A_%a.out", "open-mode": "append"}),
        common + 'task=$(( ${1:?first task} + SLURM_ARRAY_TASK_ID ))',
        "echo \"--- task $task on ${SLURMD_NODENAME:-?} (job ${SLURM_JOB_ID:-?}, "
        "restart ${SLURM_RESTART_COUNT:-0}) $(date)\"",
        # near the time limit: back into the queue (the unfinished students are graded again)
        f"requeue() {{ if (( ${{SLURM_RESTART_COUNT:-0}} < {MAX_REQUEUES} )); then echo \"time limit near: "
        "requeued\"; scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"; fi; }",
        "trap requeue USR1",
        f"{grader} &",
        "child=$!",
        # Slurm's SIGTERM (scancel, a requeue, a lost node) reaches the batch shell alone, and once the
        # shell ends Slurm kills what is left of the task: the shell hands the signal to the grader and
        # waits for it, so the grader ends its attempt as the grader's (never a crashed row for a
        # worker the same stop killed) and clears its scratch and claims within KillWait
        "trap 'kill -TERM \"$child\" 2>/dev/null' TERM",
        "while ! wait \"$child\"; do kill -0 \"$child\" 2>/dev/null || exit 1; done", ""])
    merge = "\n".join([
        "#!/bin/bash",
        header({"job-name": f"lab-{lab.name}-merge", "dependency": "afterany:$ARRAY_JOBS",
                "time": MERGE_MINUTES, "mem": "2048M", **options.cluster(),
                "output": f"{out}/slurm/merge.out", "open-mode": "append"}),
        common + f"exec {q(sys.executable)} -m harness lab merge {q(str(out))} --submissions "
        f"{q(str(submissions))}", ""])
    return task, merge


def arrays(tasks: int, max_array: int) -> list[tuple[int, int]]:
    """[(first task, count)]: task indices 0..tasks-1 as arrays of at most `max_array` tasks
    (Slurm takes array indices below MaxArraySize)."""
    if max_array < 1:
        raise HarnessError(f"MaxArraySize: expected >= 1, found {max_array}")
    return [(first, min(max_array, tasks - first)) for first in range(0, tasks, max_array)]


def array_spec(count: int, options: Options) -> str:
    return f"0-{count - 1}" + (f"%{options.max_parallel}" if options.max_parallel else "")


def max_array_size() -> int:
    """The cluster's MaxArraySize (scontrol show config), Slurm's default where it cannot be read."""
    done = run("scontrol", "show", "config")
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", done.stdout if done else "", re.M)
    return int(found.group(1)) if found else DEFAULT_MAX_ARRAY


def earlier_jobs(out: Path) -> list[str]:
    """The job ids every earlier round of OUT submitted (slurm/jobs.txt)."""
    listed = Path(out) / "slurm" / "jobs.txt"
    lines = listed.read_text().splitlines() if listed.is_file() else []
    return [parts[1] for parts in (line.split() for line in lines) if len(parts) >= 2 and parts[1].isdigit()]


def job_needs(submissions: Path, weights: str | Path) -> list[tuple[str, str | Path, int]]:
    """What the tasks reach besides the code (slurmctl.code_needs): the submissions, the weights and
    the MNIST folder (--out: made and written by this user before anything is submitted)."""
    return [*code_needs(), ("--submissions", submissions, os.R_OK | os.X_OK),
            ("the weights", weights, os.R_OK), ("the MNIST folder", mnist.data_dir(), os.R_OK | os.X_OK)]


def submit(lab: Lab, submissions: Path, out: Path, options: Options | None = None, dry_run: bool = False,
           weights: str | Path = DEFAULT_WEIGHTS, report: Callable[[str], None] = print,
           no_sandbox: bool = False, refused: dict[str, str] | None = None, resume: bool = False) -> int:
    """The grading as job arrays (K students a task) and its merge job; each refused student
    (collect's, or a folder that is a link) gets its refused row here, ungraded. `resume`: only
    the students without a finished row (or whose files changed), and never while an earlier
    round of OUT is still queued or running."""
    options = options or Options()
    options.check()
    refused = {**store.linked(submissions), **(refused or {})}
    names = store.students(submissions, lab.module, refused)
    if dry_run:
        task, merge = scripts(lab, submissions, out, options, weights, no_sandbox)
        tasks = math.ceil(len(names) / options.per_task)
        print(f"# {Path(out) / 'slurm' / 'task.sh'} ({tasks} tasks of up to {options.per_task}: "
              f"{', '.join(names)})\n{task}")
        print(f"# {Path(out) / 'slurm' / 'merge.sh'} (ARRAY_JOBS = the arrays' ids)\n{merge}")
        for first, count in arrays(tasks, max_array_size()):
            print(f"# sbatch --array={array_spec(count, options)} task.sh {first}")
        return 0
    isolation.decide(no_sandbox)  # refused here, not in every task, when there is no sandbox tool
    check_reachable(job_needs(submissions, weights))  # here, not as each task starts on its node
    if not shutil.which("sbatch"):
        raise Unavailable("sbatch not found: --slurm needs a Slurm cluster (a local one for trying it: "
                          "sudo scripts/slurm-local.sh start); without it, drop --slurm")
    running = still_queued(earlier_jobs(out))
    if running:
        raise HarnessError(f"{out}: an earlier round's jobs are still queued or running "
                           f"({', '.join(running[:10])}); wait for them (squeue) or scancel them, "
                           "then --resume" + held_advice(running))
    store.prepare(out, lab.name, lab.source, lab.path)
    store.write_grading(out, submissions, start_weights(lab, weights))  # training: the initial ones
    todo, kept = grade.to_grade(lab, submissions, out, None, resume, report, refused)
    grade.write_refused(lab, out, {n: why for n, why in refused.items() if store.graded_row(out, n) is None},
                        report)
    if not todo:
        report(f"lab {lab.name}: nothing to grade ({len(kept)} already graded); nothing submitted")
        return 0
    ids, merge_job = submit_round(lab, submissions, out, options, todo, weights, no_sandbox)
    report(f"submitted {len(ids)} array job(s) {', '.join(ids)} ({math.ceil(len(todo) / options.per_task)} "
           f"tasks of up to {options.per_task} of {len(todo)} students"
           + (f", at most {options.max_parallel} at once per array" if options.max_parallel else "")
           + (f"; {len(kept)} already graded, kept" if kept else "")
           + f") and merge job {merge_job}; watch: squeue -j {','.join([*ids, merge_job])}")
    print(f"leaderboard when job {merge_job} ends: {Path(out) / 'LEADERBOARD.md'}")
    return 0


def submit_round(lab: Lab, submissions: Path, out: Path, options: Options, todo: list[str],
                 weights: str | Path, no_sandbox: bool) -> tuple[list[str], str]:
    """The arrays grading `todo` and the merge job after them: (array job ids, merge job id);
    OUT/slurm/round.json names them (the tasks and the merge read it), jobs.txt keeps every round's."""
    folder = Path(out) / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    task, merge = scripts(lab, submissions, out, options, weights, no_sandbox)
    (folder / "task.sh").write_text(task)
    tasks = math.ceil(len(todo) / options.per_task)
    split = arrays(tasks, max_array_size())
    made: list[dict] = []
    plan = {"students": todo, "per_task": options.per_task, "arrays": made}
    for first, count in split:
        store.write_json(folder / "round.json", plan)  # before any task can start
        job = sbatch(f"--array={array_spec(count, options)}", str(folder / "task.sh"), str(first))
        made.append({"job": job, "first": first, "count": count})
        store.write_json(folder / "round.json", plan)
        with open(folder / "jobs.txt", "a") as jobs:
            jobs.write(f"array {job} {first} {count}\n")
    ids = [a["job"] for a in made]
    (folder / "merge.sh").write_text(merge.replace("$ARRAY_JOBS", ":".join(ids)))
    merge_job = sbatch(str(folder / "merge.sh"))
    with open(folder / "jobs.txt", "a") as jobs:
        jobs.write(f"merge {merge_job}\n")
    return ids, merge_job
