"""What each `python -m harness lab ...` command does: harness/lab/term/cli.py declares the commands and
their options, and each runs one of these on the parsed arguments, which returns the exit code. Each
imports what it uses inside it, so `lab collect` never loads the grader, nor `lab kit` the sandbox.

    lab_grade(args)                         grade here (then the leaderboard), or submit to Slurm
    lab_regrade(args)                       some students again, from what OUT recorded
    lab_report(args), lab_merge(args)       the leaderboard (the merge job: its rows first)
    lab_status(args)                        where a grading stands, read while it runs
    lab_check(args)                         a student's own check, its feedback printed
    lab_bench(args)                         a synthetic class graded and timed (harness.lab.term.bench)
    lab_task(args)                          one Slurm array task's students
    lab_kit(args), lab_collect(args), lab_export(args), lab_publish(args), lab_similarity(args)
    grade_here(lab, submissions, out, ...)  `lab grade` and `lab regrade` on this machine
    copy_manifest(submissions, out), graded_submissions(out, given)   what two commands share
    refused_hand_ins(submissions)           the students lab collect refused: a row each, no grading
"""

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness import DEFAULT_WEIGHTS
from harness.command import log, split_list
from harness.errors import HarnessError
from harness.machine import procenv

# The grading process's own BLAS threads: its oracle's answers are compared, never timed, and a
# pool of spinning OpenBLAS threads would take cores from the timed worker beside it. The workers
# get the lab's thread counts in their own environment (Grader.env).
GRADER_BLAS_THREADS = 1

if TYPE_CHECKING:
    from harness.lab.judge.rules.assignment import Lab

Report = Callable[[str], None]


def lab_grade(args: argparse.Namespace) -> int:
    """`lab grade`: every submission here, then the leaderboard; or (--slurm) job arrays.
    --lock-timeout: seconds to wait for the GPU lock, then time anyway (rows flagged contended)."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the lab loads NumPy
    from harness.lab.box.walls import libpath
    from harness.lab.judge.rules import assignment

    lab = assignment.load(str(args.lab))
    libpath.check_sudo(lab.device)
    only = split_list(args.only) if args.only else None
    if not args.dry_run:  # a dry run prints the scripts and writes nothing, OUT included
        copy_manifest(args.submissions, args.out)
    if args.slurm:
        from harness.lab.judge import slurm

        if only:
            raise HarnessError("--only: not with --slurm (--resume submits every unfinished student)")
        # each task waits for its node's GPU lock as long as --lock-timeout says
        options = slurm.Options(partition=args.partition, account=args.account, qos=args.qos,
                                constraint=args.constraint, gres=args.gres, time=args.time,
                                cpus_per_task=args.cpus_per_task, max_parallel=args.max_parallel,
                                per_task=args.per_task, lock_timeout=args.lock_timeout)
        return slurm.submit(lab, args.submissions, args.out, options, dry_run=args.dry_run,
                            weights=args.weights, report=log, no_sandbox=args.no_sandbox,
                            refused=refused_hand_ins(args.submissions), resume=args.resume)
    if args.dry_run:
        raise HarnessError("--dry-run: only with --slurm (it prints the batch scripts)")
    grade_here(lab, args.submissions, args.out, args.resume, only, args.weights, args.no_sandbox,
               args.no_report, log, args.lock_timeout)
    return 0


def grade_here(lab: "Lab", submissions: Path, out: Path, resume: bool, only: list[str] | None,
               weights: Path | str, no_sandbox: bool, no_report: bool = False,
               report: Report = print, lock_timeout: float | None = None) -> None:
    """`lab grade` and `lab regrade` on this machine: the grading, then the leaderboard; under sudo,
    OUT is handed to its user whatever happens (store.hand_over)."""
    from harness.lab.judge import grade, store
    from harness.lab.term.marks import leaderboard

    procenv.apply(procenv.settings(lab.measure.threads, 1, lab.device))  # what its children inherit
    try:
        grade.grade_all(lab, submissions, out, resume, only, weights, report=report, no_sandbox=no_sandbox,
                        refused=refused_hand_ins(submissions), lock_timeout=lock_timeout)
        if not no_report:
            leaderboard.build(out)
            print(f"leaderboard: {out / 'LEADERBOARD.md'}")
    finally:
        store.hand_over(out)


def lab_regrade(args: argparse.Namespace) -> int:
    """`lab regrade`: --only these students (default: those whose files changed, and those without a
    row) graded again with the lab, submissions and weights OUT recorded, then the leaderboard."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the recorded lab loads NumPy
    from harness.lab.box.walls import libpath
    from harness.lab.judge import store

    out, only = args.out, split_list(args.only) if args.only else None
    lab = store.graded_lab(out)
    libpath.check_sudo(lab.device)
    recorded = store.grading(out)
    submissions = args.submissions or (Path(recorded["submissions"]) if "submissions" in recorded else None)
    if submissions is None:
        raise HarnessError(f"{out}: no record of its submissions folder (graded before it was kept); "
                           "add --submissions DIR")
    weights = args.weights or recorded.get("weights") or DEFAULT_WEIGHTS
    copy_manifest(submissions, out)
    grade_here(lab, submissions, out, resume=only is None, only=only, weights=weights,
               no_sandbox=args.no_sandbox, report=log)
    return 0


def lab_report(args: argparse.Namespace) -> int:
    """`lab report`: the leaderboard, figure and feedback rebuilt from OUT's rows."""
    from harness.lab.judge import store
    from harness.lab.term.marks import leaderboard

    try:
        paths = leaderboard.build(args.out)
    finally:
        store.hand_over(args.out)
    print(f"wrote {len(paths)} files; leaderboard: {args.out / 'LEADERBOARD.md'}")
    return 0


def lab_status(args: argparse.Namespace) -> int:
    """`lab status`: where a grading stands (harness.lab.judge.progress); it only reads."""
    from harness.lab.judge import progress

    print("\n".join(progress.lines(args.out)))
    return 0


def lab_merge(args: argparse.Namespace) -> int:
    """`lab merge` (the Slurm merge job): a row for every task that left none, then the leaderboard."""
    from harness.lab.judge import slurm_task
    from harness.lab.term.marks import leaderboard

    slurm_task.merge(args.out, args.submissions, args.job, report=log)
    leaderboard.build(args.out)
    print(f"leaderboard: {args.out / 'LEADERBOARD.md'}")
    return 0


def lab_bench(args: argparse.Namespace) -> int:
    """`lab bench`: the mix graded, its lines printed, the result in OUT/bench.json; 1 unless each
    student has one finished row."""
    from harness.lab.term import bench
    from harness.machine.files import write_atomic

    result = bench.run(args.lab, args.students, args.out, args.slurm, args.per_task)
    for line in bench.lines(result, per_task=args.per_task):
        print(line)
    write_atomic(Path(args.out) / "bench.json", json.dumps(result, indent=1) + "\n")
    return 1 if result["problems"] else 0


def lab_task(args: argparse.Namespace) -> int:
    """`lab task` (a Slurm array task): its students graded (slurm_task.task)."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the grader's modules load NumPy
    from harness.lab.judge import slurm_task

    return slurm_task.task(args.out, args.index, args.submissions, args.weights, args.no_sandbox, log,
                           args.lock_timeout)


def lab_check(args: argparse.Namespace) -> int:
    """`lab check`: the feedback printed; exit 0 when the submission is ok, 1 when not."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the lab loads NumPy
    from harness.lab.judge.rules import assignment
    from harness.lab.term.handout import check

    lab = assignment.load(str(args.lab))
    procenv.apply(procenv.settings(lab.measure.threads, 1, lab.device))  # what its children inherit
    row, text = check.check(lab, args.path, args.weights, report=log, lock_timeout=args.lock_timeout)
    print(text)
    return 0 if row["status"] == "ok" else 1


def lab_kit(args: argparse.Namespace) -> int:
    """`lab kit`: dist/lab-kit-LAB.zip (or in --out)."""
    from harness.lab.judge.rules import assignment
    from harness.lab.term.handout import kit

    path = kit.build(assignment.load(str(args.lab)), args.out or kit.DIST, args.weights)
    print(f"kit: {path} (students: unzip, then python -m pip install ./{path.stem})")
    return 0


def copy_manifest(submissions: Path, out: Path) -> None:
    """`lab collect`'s manifest (submission times, late flags, ids) and the staff's extensions.csv
    (harness.lab.term.marks.extensions) beside the rows, for the points."""
    from harness.lab.term.intake import collect
    from harness.lab.term.marks import extensions

    for name in (collect.MANIFEST, extensions.FILE):  # the students' own due dates travel with it
        if (Path(submissions) / name).is_file():
            Path(out).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(submissions) / name, Path(out) / name)


def refused_hand_ins(submissions: Path) -> dict[str, str]:
    """{folder: why} of the students whose hand-in `lab collect` refused (its manifest's rows), and
    who still have no folder: `lab grade` gives each a refused row."""
    from harness.lab.term.intake import collect

    manifest = Path(submissions) / collect.MANIFEST
    return collect.refused_in(collect.read_manifest(manifest), submissions) if manifest.is_file() else {}


def lab_collect(args: argparse.Namespace) -> int:
    """`lab collect`: one folder per student and manifest.csv; exit 1 when a student's hand-in was
    refused (the others collected; the summary line names each)."""
    from harness.lab.term.intake import collect

    subs = collect.collect(args.source, args.out, report=log, times=args.times)
    return 1 if collect.refused(subs) else 0


def lab_export(args: argparse.Namespace) -> int:
    """`lab export`: the gradebook CSV; exit 2 (naming them) while collected submissions have no
    finished row, unless --allow-ungraded (their cells blank, their names listed); exit 1 when graded
    students are not on the roster."""
    from harness.lab.term.marks import export

    done = export.export(args.out, args.roster, args.format, args.target, args.force, args.column,
                         args.allow_ungraded)
    print(f"wrote {done.path}: {done.written} roster student(s), {done.graded} with a graded submission")
    if done.feedback_zip is not None:
        print(f"wrote {done.feedback_zip}: their feedback pages, for Moodle's \"Upload multiple feedback "
              "files in a zip\"")
    for line in done.ungraded:
        print(f"WARNING: not graded, its cell left blank: {line}", file=sys.stderr)
    for line in done.unmatched:
        print(f"WARNING: not on the roster {args.roster}: {line} (add them to the roster, or check their id)",
              file=sys.stderr)
    return 1 if done.unmatched else 0


def graded_submissions(out: Path, given: Path | None) -> Path:
    """The submissions folder of `lab publish` and `lab similarity`: --submissions, else the one
    `lab grade` recorded in OUT/grading.json; an error saying which is missing when neither is a folder."""
    from harness.lab.judge import store

    if given is not None:
        if not Path(given).is_dir():
            raise HarnessError(f"--submissions {given}: not a folder (expected one folder per student)")
        return Path(given)
    store.graded_lab(out)  # OUT is a grading folder at all
    recorded = store.grading(out).get("submissions")
    if not isinstance(recorded, str):
        raise HarnessError(f"{out}: {store.GRADING} records no submissions folder (graded before it was "
                           "kept, or not by lab grade); add --submissions DIR")
    if not Path(recorded).is_dir():
        raise HarnessError(f"{out}/{store.GRADING}: the submissions folder it records, {recorded}, is not a "
                           "folder now; add --submissions DIR")
    return Path(recorded)


def lab_publish(args: argparse.Namespace) -> int:
    """`lab publish`: the public page under pseudonyms."""
    from harness.lab.term.public import publish

    publish.publish(args.out, args.public_dir, graded_submissions(args.out, args.submissions), report=log)
    print(f"public page: {args.public_dir / publish.PAGE}")
    return 0


def lab_similarity(args: argparse.Namespace) -> int:
    """`lab similarity`: the flagged pairs (staff only), then the leaderboard's column of them."""
    from harness.lab.judge import store
    from harness.lab.term import similarity
    from harness.lab.term.marks import leaderboard

    out = args.out
    lab = store.graded_lab(out)
    similarity.run(out, graded_submissions(out, args.submissions), lab, args.threshold, args.starter,
                   report=log)
    if (out / "LEADERBOARD.md").is_file():
        leaderboard.build(out)  # its column of flagged pairs
    print(f"similarity: {out / similarity.PRIVATE / 'similarity.csv'}")
    return 0
