"""How long a class takes to grade: a synthetic class of N submissions graded on this machine, or
across a Slurm cluster, timed, and checked to end with exactly one finished row per student. A
command (`lab bench`), not a timed test: docs/slurm.md describes it.

    python -m harness lab bench --students 100 [--lab cpu_numpy] --out DIR [--slurm --per-task K]

The mix: one student in TRAINING_SHARE (a class of 10 or more) hands in the training lab (cpu_train,
its examples in labs/examples-train), the rest the lab named (cpu_numpy: labs/examples), each lab's
class graded by its own `lab grade`. Each class: honest copies of its correct example (the most), and a
few of each kind that costs the grader something else: wrong answers (the gate refuses them), slow
(timed, ranked last), hanging at import (the lab's import_s each) and crashing at import. Printed:
the mix's wall time, the time per submission, the grader's cores busy on average (its CPU and its
workers' over wall time: what --cpus-per-task should ask), each lab's statuses and time per
submission, and the projection for a cluster: each node like this one, each lab's grader's set-up
paid once per task.

    mix(lab, students) -> [(lab, students, examples)]   the classes the bench grades
    make_class(folder, students, examples) -> {name: expected status}
    run(...) -> dict (run_class: one lab's);  lines(result) -> [str]
    one_row_each(out, names) -> problems;  projection(result, nodes, per_task) -> seconds
    grading(lab, submissions, out, *extra) -> CPU s;  wait_for_slurm(out)
"""

import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from harness import ROOT
from harness.errors import HarnessError
from harness.lab.box.walls import cgroup
from harness.lab.box.walls.cgroup import Cgroup
from harness.lab.judge import store

EXAMPLES = ROOT / "labs" / "examples"
TRAINING, TRAINING_EXAMPLES = "cpu_train", ROOT / "labs" / "examples-train"
TRAINING_SHARE = 5  # one student in 5 hands in the training lab
EXAMPLES_OF = {TRAINING: TRAINING_EXAMPLES}  # a lab's examples, where not labs/examples
HANG = "import time\ntime.sleep(3600)\n"
CRASH = "raise RuntimeError('the student forgot something')\n"
# of every 50 students: 2 wrong, 2 slow, 1 hanging, 1 crashing; the rest honest copies
KINDS = (("wrong", 2, "wrong"), ("slow", 2, "ok"), ("hang", 1, "timeout"), ("crash", 1, "import-error"))
PER = 50
MIXED_FROM = PER // 5  # a smaller class is honest copies of one lab's correct example


def mix(lab: str, students: int) -> list[tuple[str, int, Path]]:
    """The classes of a bench of `students`: (lab, its students, its examples folder), the training
    lab's share first taken out (none of a class under 10, or where the lab named is the training lab)."""
    if students < 1:
        raise HarnessError(f"--students: expected a whole number >= 1, found {students}")
    train = students // TRAINING_SHARE if students >= MIXED_FROM and lab != TRAINING else 0
    classes = [(lab, students - train, EXAMPLES_OF.get(lab, EXAMPLES))]
    return classes + ([(TRAINING, train, TRAINING_EXAMPLES)] if train else [])


def make_class(folder: Path, students: int, examples: Path = EXAMPLES) -> dict[str, str]:
    """One folder per student in `folder`, from `examples` (correct, wrong, slow); {student: the
    status expected}."""
    if students < 1:
        raise HarnessError(f"--students: expected a whole number >= 1, found {students}")
    folder.mkdir(parents=True, exist_ok=False)
    expected: dict[str, str] = {}
    sources = {"wrong": (examples / "wrong" / "lenet.py").read_text(),
               "slow": (examples / "slow" / "lenet.py").read_text(), "hang": HANG, "crash": CRASH}
    for kind, every, status in KINDS:
        for i in range(max(1, round(students * every / PER)) if students >= MIXED_FROM else 0):
            expected[f"{kind}-{i:03d}"] = status
            source = sources[kind]
            (folder / f"{kind}-{i:03d}").mkdir()
            (folder / f"{kind}-{i:03d}" / "lenet.py").write_text(source)
    honest = (examples / "correct" / "lenet.py").read_text()
    for i in range(students - len(expected)):
        expected[f"honest-{i:03d}"] = "ok"
        (folder / f"honest-{i:03d}").mkdir()
        (folder / f"honest-{i:03d}" / "lenet.py").write_text(honest)
    return expected


def one_row_each(out: Path, names: list[str]) -> list[str]:
    """What breaks "exactly one finished row per student": a student without a row, a row the
    merge made (no result), a row of someone else."""
    rows = {row.get("student"): row for row in store.read_rows(out)}
    problems = [f"{n}: no row" for n in names if n not in rows]
    problems += [f"{n}: no result ({rows[n].get('status')}: {rows[n].get('reason')})" for n in names
                 if n in rows and rows[n].get("from_merge")]
    problems += [f"{n}: a row, but not a student of the class" for n in rows if n not in names]
    return problems


def grading(lab: str, submissions: Path, out: Path, *extra: str) -> float | None:
    """`lab grade` in a cgroup of its own where this process may make one (root): the CPU seconds of
    the grader and every worker it started (their groups are made under its own), else None."""
    command = [sys.executable, "-m", "harness", "lab", "grade", lab, "--submissions", str(submissions),
               "--out", str(out), *extra]
    group = None if cgroup.reason_unavailable() else Cgroup(f"bench-{os.getpid()}")
    procs = [bytes(p) for p in group.procs_files()] if group is not None else []
    try:
        done = subprocess.run(command, cwd=ROOT, preexec_fn=(lambda: cgroup.enter(procs)) if procs else None)
        used = group.cpu_ns() / 1e9 if group is not None else None
    finally:
        if group is not None:
            group.remove()
    if done.returncode != 0:
        raise HarnessError(f"{' '.join(command[2:])} exited {done.returncode}")
    return used


def wait_for_slurm(out: Path) -> None:
    jobs = [line.split()[1] for line in (out / "slurm" / "jobs.txt").read_text().splitlines()]
    while subprocess.run(["squeue", "-h", "-j", ",".join(jobs)], capture_output=True, text=True,
                         timeout=30).stdout.strip():
        time.sleep(2)


def run(lab: str, students: int, out: Path, slurm: bool = False, per_task: int = 1) -> dict:
    """The mix's classes graded one after the other (the lab named: OUT/class into OUT/graded; the
    training lab: OUT/class-cpu_train into OUT/graded-cpu_train); the mix's totals, each lab's in "labs"."""
    out = Path(out)
    labs = {}
    for name, count, examples in mix(lab, students):
        tag = "" if name == lab else f"-{name}"
        labs[name] = run_class(name, count, examples, out / f"class{tag}", out / f"graded{tag}", slurm,
                               per_task)
    parts = list(labs.values())
    cpu = [p["cpu_s"] for p in parts]
    return {"students": students, "slurm": slurm, "per_task": per_task,
            "wall_s": sum(p["wall_s"] for p in parts), "cpu_s": None if None in cpu else sum(cpu),
            "graded_s": sum(p["graded_s"] for p in parts),
            "setup_s": None if slurm else sum(p["setup_s"] for p in parts),
            "statuses": dict(sum((Counter(p["statuses"]) for p in parts), Counter())),
            "unexpected": {f"{n}/{s}": v for n, p in labs.items() for s, v in p["unexpected"].items()},
            "problems": [f"{n}: {problem}" for n, p in labs.items() for problem in p["problems"]],
            "labs": labs}


def run_class(lab: str, students: int, examples: Path, folder: Path, graded: Path, slurm: bool,
              per_task: int) -> dict:
    """One lab's class made in `folder`, graded into `graded`, timed and checked."""
    expected = make_class(folder, students, examples)
    start = time.perf_counter()
    if slurm:
        grading(lab, folder, graded, "--slurm", "--per-task", str(per_task))
        wait_for_slurm(graded)
        cpu_s = None
    else:
        cpu_s = grading(lab, folder, graded, "--no-report")
    wall = time.perf_counter() - start
    rows = {row["student"]: row for row in store.read_rows(graded)}
    graded_s = sum(float(r.get("seconds") or 0.0) for r in rows.values())
    return {"students": students, "wall_s": wall, "cpu_s": cpu_s,
            "graded_s": graded_s, "setup_s": max(0.0, wall - graded_s) if not slurm else None,
            "statuses": dict(Counter(r["status"] for r in rows.values())),
            "unexpected": {n: (rows[n]["status"], expected[n]) for n in expected
                           if n in rows and rows[n]["status"] != expected[n]},
            "problems": one_row_each(graded, sorted(expected))}


def projection(result: dict, nodes: int, per_task: int) -> float:
    """The class's wall time on `nodes` nodes, each like this machine, one task at a time each: the
    submissions' own time spread over the nodes, the grader's set-up paid once per task (a mix: each
    lab's class so, one after the other)."""
    if "labs" in result:
        return sum(projection(part, nodes, per_task) for part in result["labs"].values())
    tasks = math.ceil(result["students"] / per_task)
    return (result["graded_s"] + tasks * (result["setup_s"] or 0.0)) / nodes


def lines(result: dict, nodes: tuple[int, ...] = (1, 3, 10, 30), per_task: int = 10) -> list[str]:
    n, wall = result["students"], result["wall_s"]
    where = (f"on the local Slurm ({result['per_task']} a task; its nodes share this host's cores: not a "
             "speed-up)") if result["slurm"] else "on this machine, one grader"
    labs = result.get("labs") or {}
    each = ", ".join(f"{part['students']} {name}" for name, part in labs.items())
    out = [f"class of {n}{f' ({each})' if each else ''} {where}: {wall:.0f} s ({wall / 60:.1f} min), "
           f"{wall / n:.2f} s per submission",
           f"statuses: {json.dumps(result['statuses'], sort_keys=True)}"]
    out += [f"{name}: {part['students']} in {part['wall_s']:.0f} s, "
            f"{part['wall_s'] / part['students']:.2f} s per submission; "
            f"statuses {json.dumps(part['statuses'], sort_keys=True)}" for name, part in labs.items()]
    if result["cpu_s"] is not None:
        out.append(f"cores busy on average: {result['cpu_s'] / wall:.2f} (the grader's and its workers' CPU, "
                   f"read from their cgroup: {result['cpu_s']:.0f} s over {wall:.0f} s)")
    if result["setup_s"] is not None:
        out.append(f"the grader's set-up and the gaps between submissions: {result['setup_s']:.0f} s; "
                   f"submissions' own: {result['graded_s']:.0f} s")
        out += [f"projection, {k} node(s) like this one, {per_task} a task: "
                f"{projection(result, k, per_task) / 60:.1f} min" for k in nodes]
    out.append("one finished row per student: " + ("yes" if not result["problems"] else
                                                   f"NO: {result['problems'][:10]}"))
    if result["unexpected"]:
        out.append(f"statuses not as expected (found, expected): {result['unexpected']}")
    return out
