"""Grades nothing can lose (harness.lab.judge.attempts): a grading cut off leaves its students
ungraded, named by the leaderboard and by `lab export` (which refuses, or with --allow-ungraded
leaves their cells blank), never 0; a signal to the grader ends the attempt as the grader's, never
the submission's; retries are capped at `ungraded`, and only the submission's own deaths make it
`crashed`; a dry run writes nothing. And what goes back to students: each feedback page's points and
late penalty, and Moodle's feedback-files zip. The grader here is a stand-in whose grade() is what a
test needs (a real signal to this process, a worker killed by SIGTERM, a row); the real grader's
signal path is test_lab.py's."""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab.judge import attempts, grade, store, student_lock
from harness.lab.judge.rules import assignment
from harness.lab.term.intake import collect
from harness.lab.term.marks import export, leaderboard, moodlezip
from tests import lab_rows
from tests.conftest import ROOT

CLASS = {"ann-1001": 1001, "ben-1002": 1002, "cy-1003": 1003, "dee-1004": 1004, "eve-1005": 1005}


def python(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def manifest(out: Path) -> None:
    """OUT/manifest.csv as `lab collect` writes it and `lab grade` copies it: every student handed in."""
    with open(out / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, collect.FIELDS)
        writer.writeheader()
        for folder, uid in CLASS.items():
            writer.writerow({"folder": folder, "student_id": uid, "name": folder.split("-")[0],
                             "status": collect.COLLECTED, "submitted_at": "", "late": "no", "time_source": "",
                             "source": f"{folder}_{uid}_assignsubmission_file_", "sha256": "0" * 64, "note": ""})


@pytest.fixture
def cut_off(tmp_path):
    """A grading cut off: three rows; dee's attempt ended by a SIGTERM to the grader; eve never began."""
    out = tmp_path / "grading"
    rows = [lab_rows.ok_row("ann-1001", 1.2, 1.1, 1.3, 40), lab_rows.ok_row("ben-1002", 2.0, 1.9, 2.1, 50),
            lab_rows.failed_row("cy-1003", "wrong", "2 of 10000 test images disagree")]
    lab_rows.graded(out, rows)
    store.write_students(out, sorted(CLASS))
    manifest(out)
    attempts.begin(out, "dee-1004", fresh=False)
    attempts.end(out, "dee-1004", attempts.BY_GRADER, "SIGTERM")
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\n" + "".join(f"{uid},{name}\n" for name, uid in CLASS.items()) + "1099,Nobody\n")
    return out, roster


def test_export_after_a_cut_off_grading_refuses_naming_the_ungraded(cut_off, tmp_path):
    """The slip reproduced: two students who handed in had no row; export gave each 0, "no
    submission", and exited 0. Now it refuses, names both and writes nothing."""
    out, roster = cut_off
    target = tmp_path / "grades.csv"
    done = python("lab", "export", out, "--roster", roster, "--format", "csv", "-o", target)
    assert done.returncode == 2 and not target.exists(), done.stderr
    assert "2 collected submission(s) have no finished row" in done.stderr
    assert "dee-1004, eve-1005" in done.stderr and "--allow-ungraded" in done.stderr
    assert "the grader was stopped (SIGTERM)" in done.stderr and "never started" in done.stderr
    with pytest.raises(HarnessError, match="dee-1004, eve-1005"):
        export.export(out, roster, "moodle", target)


@pytest.mark.parametrize("fmt", ["csv", "canvas"])  # moodle: with its zip, below
def test_allow_ungraded_leaves_their_cells_blank_and_names_them(cut_off, tmp_path, fmt):
    out, _ = cut_off
    roster = tmp_path / f"{fmt}.csv"
    if fmt == "csv":
        roster.write_text("id,name\n" + "".join(f"{uid},{n}\n" for n, uid in CLASS.items()) + "1099,Nobody\n")
        key, cell = "id", "points"
    else:
        roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,cpu_numpy\n" +
                          "".join(f"{n},{uid},s{uid},{n}@uni,A,\n" for n, uid in CLASS.items()) +
                          "Nobody,1099,s1099,nobody@uni,A,\n")
        key, cell = "ID", "cpu_numpy"
    target = tmp_path / "grades.csv"
    done = python("lab", "export", out, "--roster", roster, "--format", fmt, "-o", target, "--allow-ungraded")
    assert done.returncode == 0, done.stderr
    assert "not graded, its cell left blank: dee-1004" in done.stderr and "eve-1005" in done.stderr
    table = {r[key]: r for r in csv.DictReader(io.StringIO(target.read_text()))}
    assert table["1004"][cell] == "" and table["1005"][cell] == ""  # blank, never 0
    assert table["1001"][cell] not in ("", "0") and table["1003"][cell] != ""  # graded: points (wrong: 0)
    assert table["1099"][cell] == "0"  # handed nothing in: 0, as before
    if fmt == "csv":
        assert table["1004"]["status"] == "ungraded" and "not graded yet" in table["1004"]["feedback"]
        assert table["1099"]["status"] == "no submission"


def test_the_leaderboard_names_the_ungraded_with_no_points(cut_off):
    out, _ = cut_off
    leaderboard.build(out, report=lambda _: None)
    board = (out / "LEADERBOARD.md").read_text()
    assert "**Not graded (2): dee-1004, eve-1005.**" in board
    assert "| – | [dee-1004](feedback/dee-1004.md) | ungraded | – |" in board  # no points, not 0
    assert "| – | [eve-1005](feedback/eve-1005.md) | ungraded | – |" in board
    assert f"- `ungraded`: {leaderboard.MEANING['ungraded']}" in board
    table = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text()))}
    assert table["dee-1004"]["status"] == "ungraded" and table["dee-1004"]["points"] == ""
    assert "not graded" in (out / "feedback" / "eve-1005.md").read_text()


def test_a_slurm_placeholder_and_a_tampered_row_are_no_grade(cut_off):
    out, _ = cut_off
    store.write_row(out, {"student": "dee-1004", "status": "crashed", "reason": "the Slurm task ended without a "
                          "result (Slurm state NODE_FAIL)", "from_merge": True, "rank_by": "numpy"})
    path = store.result_dir(out, "ben-1002") / "row.json"
    path.write_text(path.read_text().replace('"ratio": 2.0', '"ratio": 0.2'))
    rows, _ = attempts.class_rows(out)
    shown = {r["student"]: r for r in rows}
    assert shown["dee-1004"]["status"] == "ungraded" and "NODE_FAIL" in shown["dee-1004"]["reason"]
    assert sorted(attempts.unfinished(rows)) == ["ben-1002", "dee-1004", "eve-1005"]


def test_lab_status_says_where_each_student_stands(cut_off, tmp_path):
    """`lab status` while a grading runs (or after it was cut off): the class's counts, each student not
    graded by name: dee's attempt started and is claimed by a Slurm task, eve's never began, and a row
    changed after the grader wrote it is no grade."""
    out, _ = cut_off
    assert student_lock.take(out, "dee-1004", "4242_0", alive=lambda owner: True)
    done = python("lab", "status", out)
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert said[0] == f"{out}: 5 students"
    assert "  graded: 3 (ok 2, wrong 1)" in said and "  no grade: 0" in said
    assert "  started, no row yet: 1 (dee-1004 (claimed by 4242_0))" in said
    assert "  not started: 1 (eve-1005)" in said
    path = store.result_dir(out, "ben-1002") / "row.json"
    path.write_text(path.read_text().replace('"ratio": 2.0', '"ratio": 0.2'))
    said = python("lab", "status", out).stdout
    assert "  graded: 2 (ok 1, wrong 1)" in said and "  no grade: 1 (ben-1002 (row.json was changed" in said
    fresh = tmp_path / "submitted"  # a round submitted, no task started: no results/ yet
    store.prepare(fresh, "cpu_numpy", lab_rows.LAB.read_text(), str(lab_rows.LAB))
    store.write_students(fresh, sorted(CLASS))
    said = python("lab", "status", fresh).stdout
    assert "  graded: 0" in said and "  not started: 5 (ann-1001, ben-1002, cy-1003, dee-1004, eve-1005)" in said
    store.write_json(fresh / "slurm" / "round.json", {"students": [], "per_task": 1, "arrays": [{"job": "-x"}]})
    refused = python("lab", "status", fresh)
    assert refused.returncode == 2 and "round.json: arrays: expected Slurm job ids (digits), found ['-x']" \
        in refused.stderr, refused.stderr
    refused = python("lab", "status", tmp_path / "no-grading")
    assert refused.returncode == 2 and "no grading here (students.json missing)" in refused.stderr
    assert "Traceback" not in refused.stderr


# --- who ended an attempt ----------------------------------------------------------------------------
class StandIn:
    """The Grader's face to grade_all; grade() does what the test sets (one callable a student)."""

    plan: dict = {}

    def __init__(self, lab, out, weights, report, iso):
        self.lab, self.out, self.report = lab, Path(out), report

    def grade(self, student, folder):
        return StandIn.plan[student](self.lab, student)

    def close(self):
        pass


def row_of(status, **extra):
    return lambda lab, student: {"lab": lab.name, "student": student, "status": status, "reason": status,
                                 "rank_by": lab.rank_by.label, **extra}


def signalled(signum):
    """The grader receives `signum` while it grades (as scancel or Ctrl-C would send it)."""
    def grade_it(lab, student):
        os.kill(os.getpid(), signum)
        raise AssertionError("the signal should have stopped the grading")
    return grade_it


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    monkeypatch.setattr(grade, "Grader", StandIn)
    submissions = tmp_path / "submissions"
    for name in ("ann", "ben"):
        (submissions / name).mkdir(parents=True)
        (submissions / name / "lenet.py").write_text("# a submission\n")
    lab = assignment.load("cpu_numpy")

    def run(plan, **kwargs):
        StandIn.plan = plan
        return grade.grade_all(lab, submissions, tmp_path / "out", no_sandbox=True, report=lambda _: None,
                               **kwargs)
    return run, tmp_path / "out"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1])
def test_a_signal_to_the_grader_is_the_grader_s_attempt_and_never_crashed(stand_in, signum):
    """Each signal ends the attempt as the grader's (no row), whatever the worker did; after
    MAX_ATTEMPTS of them the submission is ungraded, with its history, never crashed."""
    run, out = stand_in
    for number in range(1, attempts.MAX_ATTEMPTS + 1):
        with pytest.raises(attempts.Interrupted):
            run({"ann": row_of("wrong"), "ben": signalled(signum)}, resume=number > 1)
        assert store.read_row(out, "ben") is None
        past = attempts.history(out, "ben")
        assert len(past) == number and past[-1]["ended"]["by"] == "grader"
        assert past[-1]["ended"]["how"] == signal.Signals(signum).name
    assert signal.getsignal(signal.SIGTERM) is not attempts._raise  # the handlers before are back
    rows = run({"ben": signalled(signum)}, resume=True)
    (row,) = rows
    assert row["status"] == "ungraded" and len(row["attempts"]) == attempts.MAX_ATTEMPTS
    assert "none by the submission's doing" in row["reason"] and signal.Signals(signum).name in row["reason"]
    assert store.read_row(out, "ann")["status"] == "wrong"
    assert attempts.unfinished(attempts.class_rows(out)[0]) == {"ben": row["reason"]}
    regraded = run({"ben": row_of("wrong")}, only=["ben"])  # staff name it: a fresh start
    assert regraded[0]["status"] == "wrong" and len(attempts.history(out, "ben")) == 1
    assert attempts.history(out, "ben")[0]["ended"]["by"] == "row"


def test_a_worker_killed_by_the_grader_s_own_signal_is_not_crashed(stand_in):
    """scancel signals every process of a task: the worker may die of the SIGTERM before the grader
    handles its own; the grader waits for its own before it writes `crashed`."""
    run, out = stand_in

    senders = []

    def killed_with_the_grader(lab, student):
        # the grader's SIGTERM arrives a moment after its worker died of one
        senders.append(subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -TERM {os.getpid()}"]))
        return row_of("crashed", killed_by="SIGTERM")(lab, student)

    with pytest.raises(attempts.Interrupted):
        run({"ann": row_of("wrong"), "ben": killed_with_the_grader})
    senders[0].wait(timeout=10)
    assert store.read_row(out, "ben") is None and attempts.history(out, "ben")[-1]["ended"]["by"] == "grader"
    rows = run({"ben": row_of("crashed", killed_by="SIGTERM")}, resume=True)  # its own SIGTERM: crashed
    assert rows[0]["status"] == "crashed"


def test_only_the_submission_s_own_deaths_make_it_crashed_and_a_lost_node_never(stand_in):
    run, out = stand_in
    run({"ann": row_of("wrong"), "ben": row_of("wrong")})
    for name in ("ann", "ben"):  # a lost node: begun, never ended; then it comes back
        store.result_dir(out, name).joinpath("row.json").unlink()
    for _ in range(attempts.MAX_OWN_DEATHS):
        attempts.begin(out, "ann", fresh=False)
        attempts.end(out, "ann", attempts.BY_SUBMISSION, "took the node's memory")
    for _ in range(attempts.MAX_ATTEMPTS):
        attempts.begin(out, "ben", fresh=False)
    rows = {r["student"]: r for r in run({}, resume=True)}
    assert rows["ann"]["status"] == "crashed" and "its own death" in rows["ann"]["reason"]
    assert rows["ben"]["status"] == "ungraded" and "no end recorded (the node lost" in rows["ben"]["reason"]
    assert "attempt 1 on" in rows["ben"]["reason"] and "graded (wrong; that row since removed)" in rows["ben"]["reason"]
    assert f"{attempts.MAX_ATTEMPTS} attempts at grading it were cut off" in rows["ben"]["reason"]


def test_a_started_file_from_before_the_history_counts_its_attempts(tmp_path):
    out = tmp_path / "out"
    store.write_started(out, "ann", {"student": "ann", "host": "n1", "time": 1.0, "attempt": 2})
    past = attempts.history(out, "ann")
    assert [a["attempt"] for a in past] == [1, 2] and all(a["ended"] is None for a in past)
    assert attempts.begin(out, "ann", fresh=False) == 3
    assert json.loads((store.result_dir(out, "ann") / "started.json").read_text())["attempt"] == 3
    with pytest.raises(ValueError, match="by"):
        attempts.end(out, "ann", "the weather", "rain")


@pytest.mark.parametrize("slurm", [True, False])
def test_dry_run_writes_nothing_not_even_out(cut_off, tmp_path, slurm):
    """A collected class (its manifest.csv) once had OUT made, and the manifest copied in, by a dry run."""
    submissions = tmp_path / "submissions"
    for name in CLASS:
        (submissions / name).mkdir(parents=True)
        (submissions / name / "lenet.py").write_text("# a submission\n")
    manifest(submissions)
    target = tmp_path / "not-yet"
    done = python("lab", "grade", "cpu_numpy", "--submissions", submissions, "--out", target, "--dry-run",
                  *(["--slurm"] if slurm else []))
    assert done.returncode == (0 if slurm else 2), done.stderr
    assert not target.exists()


# --- feedback back to students -------------------------------------------------------------------------
LATE_LAB = """
[grade]
gate_points = 60
speed_points = 40
full_at = 1.0
zero_at = 4.0
due = 2026-12-01T23:59:00+00:00
late_per_day = 10
late_max_days = 3
"""


def test_feedback_gives_the_points_and_the_late_penalty(tmp_path):
    lab_file = tmp_path / "cpu_numpy.toml"
    lab_file.write_text(lab_rows.LAB.read_text() + LATE_LAB)
    out = lab_rows.graded(tmp_path / "grading", [lab_rows.ok_row("ann-1001", 2.0, 1.9, 2.1, 40),
                                                  lab_rows.ok_row("ben-1002", 2.0, 1.9, 2.1, 41),
                                                  lab_rows.ok_row("cy-1003", 2.0, 1.9, 2.1, 42)], lab=lab_file)
    with open(out / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, collect.FIELDS)
        writer.writeheader()
        for folder, day in (("ann-1001", "01"), ("ben-1002", "02"), ("cy-1003", "09")):
            writer.writerow({"folder": folder, "student_id": folder[-4:], "name": folder, "status": "collected",
                             "submitted_at": f"2026-12-{day}T12:00:00+00:00", "late": "no", "time_source": "lms",
                             "source": "", "sha256": "0" * 64, "note": ""})
    leaderboard.build(out, report=lambda _: None)
    ann, ben, cy = ((out / "feedback" / f"{name}.md").read_text() for name in ("ann-1001", "ben-1002", "cy-1003"))
    assert "Points: **80 of 100** (60 for the gate + 20 for speed)." in ann
    assert "Late penalty: none (handed in by the due date, 2026-12-01T23:59:00+00:00)." in ann
    assert "Points: **72 of 100** (60 for the gate + 20 for speed, x 0.90 for lateness)." in ben
    assert "handed in 1 started day(s) after the due date, 2026-12-01T23:59:00+00:00: 10% off a day" in ben
    assert "Points: **0 of 100**" in cy and "past the 3 days that still count: no points" in cy


def moodle_worksheet(path: Path, names: dict[str, int]) -> Path:
    """Moodle's grading worksheet, as the assignment's "Download grading worksheet" writes it."""
    path.write_text("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Feedback comments\n" +
                    "".join(f"Participant {uid},{name},{name.split()[0].lower()}@uni,Submitted,,100,\n"
                            for name, uid in names.items()), encoding="utf-8")
    return path


def test_moodle_export_writes_the_feedback_files_zip_moodle_s_importer_reads(cut_off, tmp_path):
    """Each graded participant's page in a folder that Moodle's importer (importziplib.php, its rule
    ported in moodlezip.importer_match) gives back to that participant; nothing for the ungraded."""
    out, _ = cut_off
    names = {"Ann O_Brien": 1001, "Ben Øster": 1002, "Cy/../Dee": 1003, "Dee Ray": 1004, "Eve Li": 1005}
    target = tmp_path / "grades.csv"
    done = export.export(out, moodle_worksheet(tmp_path / "sheet.csv", names), "moodle", target,
                         allow_ungraded=True)
    assert done.feedback_zip == tmp_path / "grades-feedback-files.zip"
    with zipfile.ZipFile(done.feedback_zip) as archive:
        entries = archive.namelist()
        read = {moodlezip.importer_match(name): archive.read(name) for name in entries}
    sheet = {r["Identifier"]: r for r in csv.DictReader(io.StringIO(target.read_text()))}
    assert sheet["Participant 1004"]["Grade"] == sheet["Participant 1005"]["Grade"] == ""  # never 0
    assert sheet["Participant 1001"]["Grade"] not in ("", "0")
    assert "Ann O Brien_1001_assignsubmission_file/ann-1001.md" in entries  # its underscore: a space
    assert "Cy .. Dee_1003_assignsubmission_file/cy-1003.md" in entries  # no slash: one folder
    assert ("1002", "/ben-1002.md") in read and ("1001", "/ann-1001.png") in read
    assert b"Points: **" in read[("1001", "/ann-1001.md")]
    assert not any(pid in ("1004", "1005") for pid, _ in read)  # ungraded: no page to give
    assert None not in read  # every entry is one Moodle imports
    again = python("lab", "export", out, "--roster", tmp_path / "sheet.csv", "--format", "moodle", "-o",
                   tmp_path / "other.csv", "--allow-ungraded")
    assert again.returncode == 0 and "other-feedback-files.zip" in again.stdout, again.stderr
    target.unlink()
    with pytest.raises(HarnessError, match="grades-feedback-files.zip: already exists"):
        export.export(out, tmp_path / "sheet.csv", "moodle", target, allow_ungraded=True)


@pytest.mark.parametrize("path,found", [
    ("Student Name_1234_assignsubmission_file_My_cool_filename.txt", ("1234", "My_cool_filename.txt")),
    ("some_path_here/Student Name_1234_assignsubmission_file_/some_path/My File.txt",
     ("1234", "/some_path/My File.txt")),
    ("Student Name_1234_assignsubmission_file/feedback.md", ("1234", "/feedback.md")),
    ("Student Name_StringID_assignsubmission_file_x.txt", None),
    ("Student Name_1234_assignsubmission_noplugin_x.txt", None),
    ("Student Name_1234_assignsubmission_file/.hidden", None),
    ("some_path_here/RandomFile.txt", None),
])
def test_the_importer_rule_as_moodle_s_own_tests_state_it(path, found):
    """Moodle's mod/assign/feedback/file/tests/importziplib_test.php, its cases (good and bad names)."""
    assert moodlezip.importer_match(path) == found
