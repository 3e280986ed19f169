"""What each `python -m harness lab ...` command does: harness/lab/term/cli.py parses the arguments and
calls one of these, which returns the exit code. Each imports what it uses inside it, so `lab collect`
never loads the grader, nor `lab kit` the sandbox.

    lab_grade(lab, submissions, out, ...)   grade here (then the leaderboard), or submit to Slurm
    lab_regrade(out, ...)                   some students again, from what OUT recorded
    lab_report(out), lab_merge(out, submissions, job)   the leaderboard (the merge job: its rows first)
    lab_status(out)                         where a grading stands, read while it runs
    lab_check(lab, path, weights)           a student's own check, its feedback printed
    lab_task(out, index, ...)               one Slurm array task's students
    lab_kit(lab, dest, weights), lab_collect(source, out, times), lab_export(out, roster, ...)
    lab_publish(out, public_dir, submissions), lab_similarity(out, submissions, threshold, starter)
    grade_here(lab, submissions, out, ...)  `lab grade` and `lab regrade` on this machine
    copy_manifest(submissions, out), graded_submissions(out, given)   what two commands share
    refused_hand_ins(submissions)           the students lab collect refused: a row each, no grading
"""

import dataclasses
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness import DEFAULT_WEIGHTS
from harness.errors import HarnessError
from harness.machine import procenv

# The grading process's own BLAS threads: its oracle's answers are compared, never timed, and a
# pool of spinning OpenBLAS threads would take cores from the timed worker beside it. The workers
# get the lab's thread counts in their own environment (Grader.env).
GRADER_BLAS_THREADS = 1

if TYPE_CHECKING:
    from harness.lab.judge.rules.assignment import Lab
    from harness.lab.judge.slurm import Options

Report = Callable[[str], None]


def lab_grade(lab_name: str, submissions: Path, out: Path, report: Report, *, resume: bool = False,
              only: list[str] | None = None, no_report: bool = False, weights: Path | str = DEFAULT_WEIGHTS,
              slurm: "Options | None" = None, dry_run: bool = False, no_sandbox: bool = False,
              lock_timeout: float | None = None) -> int:
    """`lab grade`: every submission here, then the leaderboard; or (`slurm`: its options) job arrays.
    `lock_timeout`: seconds to wait for the GPU lock, then time anyway (rows flagged contended)."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the lab loads NumPy
    from harness.lab.box.walls import libpath
    from harness.lab.judge.rules import assignment

    lab = assignment.load(lab_name)
    libpath.check_sudo(lab.device)
    if not dry_run:  # a dry run prints the scripts and writes nothing, OUT included
        copy_manifest(submissions, out)
    if slurm is not None:
        from harness.lab.judge import slurm as on_slurm

        if only:
            raise HarnessError("--only: not with --slurm (--resume submits every unfinished student)")
        if lock_timeout is not None:  # each task waits for its node's GPU lock as long as this
            slurm = dataclasses.replace(slurm, lock_timeout=lock_timeout)
        return on_slurm.submit(lab, submissions, out, slurm, dry_run=dry_run, weights=weights, report=report,
                               no_sandbox=no_sandbox, refused=refused_hand_ins(submissions), resume=resume)
    if dry_run:
        raise HarnessError("--dry-run: only with --slurm (it prints the batch scripts)")
    grade_here(lab, submissions, out, resume, only, weights, no_sandbox, no_report, report, lock_timeout)
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


def lab_regrade(out: Path, only: list[str] | None, submissions: Path | None, weights: Path | str | None,
                no_sandbox: bool, report: Report) -> int:
    """`lab regrade`: `only` these students (default: those whose files changed, and those without a
    row) graded again with the lab, submissions and weights OUT recorded, then the leaderboard."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the recorded lab loads NumPy
    from harness.lab.box.walls import libpath
    from harness.lab.judge import store

    lab = store.graded_lab(out)
    libpath.check_sudo(lab.device)
    recorded = store.grading(out)
    submissions = submissions or (Path(recorded["submissions"]) if "submissions" in recorded else None)
    if submissions is None:
        raise HarnessError(f"{out}: no record of its submissions folder (graded before it was kept); "
                           "add --submissions DIR")
    weights = weights or recorded.get("weights") or DEFAULT_WEIGHTS
    copy_manifest(submissions, out)
    grade_here(lab, submissions, out, resume=only is None, only=only, weights=weights, no_sandbox=no_sandbox,
               report=report)
    return 0


def lab_report(out: Path) -> int:
    """`lab report`: the leaderboard, figure and feedback rebuilt from OUT's rows."""
    from harness.lab.judge import store
    from harness.lab.term.marks import leaderboard

    try:
        paths = leaderboard.build(out)
    finally:
        store.hand_over(out)
    print(f"wrote {len(paths)} files; leaderboard: {out / 'LEADERBOARD.md'}")
    return 0


def lab_status(out: Path) -> int:
    """`lab status`: where a grading stands (harness.lab.judge.progress); it only reads."""
    from harness.lab.judge import progress

    print("\n".join(progress.lines(out)))
    return 0


def lab_merge(out: Path, submissions: Path, job: str | None, report: Report) -> int:
    """`lab merge` (the Slurm merge job): a row for every task that left none, then the leaderboard."""
    from harness.lab.judge import slurm_task
    from harness.lab.term.marks import leaderboard

    slurm_task.merge(out, submissions, job, report=report)
    leaderboard.build(out)
    print(f"leaderboard: {out / 'LEADERBOARD.md'}")
    return 0


def lab_task(out: Path, index: int, submissions: Path, weights: Path | str, no_sandbox: bool, report: Report,
             lock_timeout: float | None) -> int:
    """`lab task` (a Slurm array task): its students graded (slurm_task.task)."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the grader's modules load NumPy
    from harness.lab.judge import slurm_task

    return slurm_task.task(out, index, submissions, weights, no_sandbox, report, lock_timeout)


def lab_check(lab_name: str, path: Path, weights: Path | str, report: Report,
              lock_timeout: float | None = None) -> int:
    """`lab check`: the feedback printed; exit 0 when the submission is ok, 1 when not."""
    procenv.pin_blas(GRADER_BLAS_THREADS)  # before the lab loads NumPy
    from harness.lab.judge.rules import assignment
    from harness.lab.term.handout import check

    lab = assignment.load(lab_name)
    procenv.apply(procenv.settings(lab.measure.threads, 1, lab.device))  # what its children inherit
    row, text = check.check(lab, path, weights, report=report, lock_timeout=lock_timeout)
    print(text)
    return 0 if row["status"] == "ok" else 1


def lab_kit(lab_name: str, dest: Path | None, weights: Path) -> int:
    """`lab kit`: dist/lab-kit-LAB.zip (or in `dest`)."""
    from harness.lab.judge.rules import assignment
    from harness.lab.term.handout import kit

    path = kit.build(assignment.load(lab_name), dest or kit.DIST, weights)
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


def lab_collect(source: Path, out: Path, times: list[Path], report: Report) -> int:
    """`lab collect`: one folder per student and manifest.csv; exit 1 when a student's hand-in was
    refused (the others collected; the summary line names each)."""
    from harness.lab.term.intake import collect

    subs = collect.collect(source, out, report=report, times=times)
    return 1 if collect.refused(subs) else 0


def lab_export(out: Path, roster: Path, fmt: str, target: Path, force: bool, column: str | None,
               allow_ungraded: bool = False) -> int:
    """`lab export`: the gradebook CSV; exit 2 (naming them) while collected submissions have no
    finished row, unless --allow-ungraded (their cells blank, their names listed); exit 1 when graded
    students are not on the roster."""
    from harness.lab.term.marks import export

    done = export.export(out, roster, fmt, target, force, column, allow_ungraded)
    print(f"wrote {done.path}: {done.written} roster student(s), {done.graded} with a graded submission")
    if done.feedback_zip is not None:
        print(f"wrote {done.feedback_zip}: their feedback pages, for Moodle's \"Upload multiple feedback "
              "files in a zip\"")
    for line in done.ungraded:
        print(f"WARNING: not graded, its cell left blank: {line}", file=sys.stderr)
    for line in done.unmatched:
        print(f"WARNING: not on the roster {roster}: {line} (add them to the roster, or check their id)",
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


def lab_publish(out: Path, public_dir: Path, submissions: Path | None, report: Report) -> int:
    """`lab publish`: the public page under pseudonyms."""
    from harness.lab.term.public import publish

    publish.publish(out, public_dir, graded_submissions(out, submissions), report=report)
    print(f"public page: {public_dir / publish.PAGE}")
    return 0


def lab_similarity(out: Path, submissions: Path | None, threshold: float, starter: Path | None,
                   report: Report) -> int:
    """`lab similarity`: the flagged pairs (staff only), then the leaderboard's column of them."""
    from harness.lab.judge import store
    from harness.lab.term import similarity
    from harness.lab.term.marks import leaderboard

    lab = store.graded_lab(out)
    similarity.run(out, graded_submissions(out, submissions), lab, threshold, starter, report=report)
    if (out / "LEADERBOARD.md").is_file():
        leaderboard.build(out)  # its column of flagged pairs
    print(f"similarity: {out / similarity.PRIVATE / 'similarity.csv'}")
    return 0
