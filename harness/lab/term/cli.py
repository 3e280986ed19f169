"""The lab wing's commands, `python -m harness lab grade | report | status | regrade | check | ...`: grading a
class's submissions, and the term around it (docs/staff.md). Each command runs one function of
harness.lab.term.commands on its parsed arguments (which imports the work inside it: bench, the
grader, harness.lab.judge.slurm_task).

    commands()                                    the `lab` group, for harness.cli to assemble
    grade_command(), grading_commands(), term_commands(), publishing_commands()   its parts
    lab_file(), submissions(help)                 shared options
"""

import argparse
from pathlib import Path

from harness import ROOT
from harness.command import (
    Command,
    lock_timeout,
    option,
    out,
    slurm_options,
    weights,
)
from harness.lab.term.commands import (
    lab_bench,
    lab_check,
    lab_collect,
    lab_export,
    lab_grade,
    lab_kit,
    lab_merge,
    lab_publish,
    lab_regrade,
    lab_report,
    lab_similarity,
    lab_status,
    lab_task,
)


def lab_file() -> argparse.ArgumentParser:
    """A lab by name or path; the names are read from labs/ (a new lab file is listed without an
    edit here; harness.measure.plan.study.toml_names reads the same, but would slow every command's start)."""
    names = ", ".join(sorted(p.stem for p in (ROOT / "labs").glob("*.toml"))) or "none found"
    return option("lab", help=f"a name in labs/ ({names}) or a .toml path")


def submissions(help: str | None = None) -> argparse.ArgumentParser:
    return option("--submissions", type=Path, required=True, help=help)


def commands() -> list[Command]:
    """`lab` and its commands, in the order `python -m harness lab --help` lists them."""
    return [Command("lab", "grade lab submissions: leaderboard, feedback, Slurm job arrays",
                    commands=(*publishing_commands(), grade_command(), *grading_commands(),
                              *term_commands()))]


def grade_command() -> Command:
    return Command(
        "grade", "grade every submission folder DIR/<student>/ of a lab", lab_grade,
        lab_file(),
        submissions("one folder per student"),
        out(None, "results, leaderboard and feedback go here", required=True),
        option("--resume", action="store_true",
               help="grade only submissions without a row in --out, or whose files changed since"),
        option("--only", default=None, help="comma-separated student folders, graded (again: their rows "
               "replaced) and the others' rows kept (default: all)"),
        option("--no-report", action="store_true", help="rows only (Slurm tasks; the merge reports)"),
        weights(),
        option("--slurm", action="store_true",
               help="job arrays of tasks (--per-task students each) + a merge job"),
        *slurm_options("a node feature every task asks for (sbatch --constraint)"),
        option("--max-parallel", type=int, default=None, metavar="K",
               help="at most K tasks at once (sbatch --array=0-N%%K)"),
        option("--per-task", type=int, default=1, metavar="K",
               help="with --slurm: K students a task (the grader's set-up paid once per task)"),
        option("--cpus-per-task", type=int, default=None, metavar="C",
               help="with --slurm: cores a task asks for (default: the lab's threads + 1)"),
        option("--dry-run", action="store_true", help="with --slurm: print the batch scripts only"),
        option("--no-sandbox", action="store_true",
               help="grade without bubblewrap (submissions run as your user; the leaderboard says so)"),
        lock_timeout("the rows"))


def grading_commands() -> list[Command]:
    """`lab report | status | regrade | check | bench | task | merge`, after `lab grade`."""
    return [
        Command(
            "report", "rebuild the leaderboard, figure and feedback from OUT's rows",
            lab_report, option("out", type=Path)),
        Command(
            "status", "where a grading stands, read while it runs: graded, started, not started; a Slurm "
            "round's jobs, and any task Slurm holds", lab_status,
            option("out", type=Path, help="the grading's folder (lab grade --out)")),
        Command(
            "regrade", "grade some students of a grading again (their rows replaced, the rest kept), "
            "then the leaderboard", lab_regrade,
            option("out", type=Path, help="the grading's folder (lab grade --out)"),
            option("--only", default=None, help="comma-separated student folders (default: those whose "
                   "files changed since their row, and those without one)"),
            option("--submissions", type=Path, default=None,
                   help="the submission folders (default: the one lab grade recorded in OUT)"),
            option("--weights", default=None, help="(default: the ones lab grade recorded)"),
            option("--no-sandbox", action="store_true", help="as lab grade's")),
        Command(
            "check", "a student's own check: the gate and a short timing of one file", lab_check,
            lab_file(),
            option("path", type=Path, help="your lenet.py (or the folder holding it)"),
            weights(), lock_timeout("the timing")),
        Command(
            "bench", "a synthetic class of N graded here (or on Slurm): time per submission and "
            "per class, one row per student checked", lab_bench,
            option("--students", type=int, default=100, help="the class's size (default 100)"),
            option("--lab", default="cpu_numpy", help="the lab most of the class hands in (default "
                   "cpu_numpy); one student in 5 hands in cpu_train (a class of 10 or more)"),
            out(None, "a new folder: the class and its grading", required=True),
            option("--slurm", action="store_true",
                   help="grade on Slurm (the local one: its nodes share a host)"),
            option("--per-task", type=int, default=10, metavar="K", help="with --slurm: students a task")),
        Command(
            "task", "(a Slurm task) its students claimed and graded", lab_task,
            option("out", type=Path), option("--index", type=int, required=True, help="the task's number"),
            submissions(), weights(), option("--no-sandbox", action="store_true"), lock_timeout("the rows")),
        Command(
            "merge", "(the Slurm merge job) rows for tasks that left none, then the report", lab_merge,
            option("out", type=Path), submissions(),
            option("--job", default=None, help="the array job id, to read its tasks' states"))]


def term_commands() -> list[Command]:
    """`lab kit | collect | export`: a course's term around the grading (docs/staff.md)."""
    return [
        Command(
            "kit", "the students' kit of a lab: dist/lab-kit-LAB.zip (no answers inside)", lab_kit,
            lab_file(), out(None, "folder for the zip (default: the checkout's dist/)"), weights()),
        Command(
            "collect", "an LMS bulk download (Canvas, Moodle) or a folder of git clones -> one "
            "folder per student + manifest.csv", lab_collect,
            option("source", type=Path, help="the LMS's zip, or a folder of git clones"),
            option("-o", "--out", type=Path, required=True, help="the submissions folder to make"),
            option("--times", type=Path, action="append", default=[], metavar="EXPORT",
                   help="the LMS's record of submission times (a zip's times are the download's): "
                   "Canvas's Submissions API JSON (one --times per page), Moodle's grading worksheet")),
        Command(
            "export", "the points of a grading, as the LMS's gradebook-import CSV", lab_export,
            option("out", type=Path, help="the grading's folder (lab grade --out)"),
            option("--roster", type=Path, required=True, help="the LMS's own roster/gradebook export (CSV)"),
            option("--format", choices=("canvas", "moodle", "csv"), required=True),
            option("-o", dest="target", type=Path, required=True, metavar="GRADES_CSV"),
            option("--column", default=None, help="(canvas) the assignment's column (default: the roster's "
                   "column naming the lab)"),
            option("--force", action="store_true", help="replace GRADES_CSV if it exists"),
            option("--allow-ungraded", action="store_true",
                   help="export although some collected submissions have no finished row: their cells "
                        "left blank (never 0) and their names listed (default: refuse, naming them)"))]


def publishing_commands() -> list[Command]:
    """`lab publish | similarity`: the public page under pseudonyms, and staff's copy check."""
    return [
        Command(
            "publish", "the leaderboard as a static web page under pseudonyms (no names)", lab_publish,
            option("out", type=Path), option("public_dir", type=Path),
            option("--submissions", type=Path, default=None,
                   help="the submission folders, to read each student's alias.txt (default: the one "
                   "lab grade recorded in OUT)")),
        Command(
            "similarity", "pairwise code similarity of the submissions (staff only)", lab_similarity,
            option("out", type=Path),
            option("--submissions", type=Path, default=None,
                   help="one folder per student (default: the one lab grade recorded in OUT)"),
            option("--threshold", type=float, default=0.5, help="flag pairs scoring this or more (0-1)"),
            option("--starter", type=Path, default=None, help="the starter handed out, ignored as "
                   "boilerplate (default: the lab's labs/template*)"))]
