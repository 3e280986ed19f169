"""A course's term around the grading (docs/staff.md): `lab collect` reads a
Canvas bulk download, a Moodle download-all zip and a folder of git clones (names with spaces,
accents and quotes), refuses zip-slip, zip bombs and an --out in use, keeps the later of two
attachments of one name; the [grade] table gives points, ties where intervals overlap and a late
penalty from the manifest; `lab export` writes Canvas, Moodle and plain CSV gradebooks from the
LMS's roster. The end-to-end test runs collect -> (rows) -> report -> export through the command
line, on a made-up class of 12 in a Canvas zip (every entry stamped with the download's time, as
Canvas does) with the Submissions API's export for the real times (--times); its rows are written
as the grader writes them (the real grading of a class is tests/test_lab.py's). Each LMS's own
naming rules, exports and odd entries: tests/test_lab_collect_lms.py."""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab.judge import store
from harness.lab.judge.rules import assignment
from harness.lab.term.intake import collect
from harness.lab.term.marks import export, extensions, points
from tests import lab_rows
from tests.conftest import ROOT

CORRECT = (ROOT / "labs" / "examples" / "correct" / "lenet.py").read_bytes()
WRONG = (ROOT / "labs" / "examples" / "wrong" / "lenet.py").read_bytes()
GRADE = """
[grade]
gate_points = 60
speed_points = 40
speed = "tiers"
tiers = [[1.2, 40], [1.6, 30], [2.5, 15]]
due = 2026-12-01T23:59:00Z
late_per_day = 10
late_max_days = 3
"""


def lab_text() -> str:
    return (ROOT / "labs" / "cpu_numpy.toml").read_text() + GRADE


def make_zip(path: Path, entries: list[tuple[str, bytes, tuple]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data, when in entries:
            info = zipfile.ZipInfo(name, date_time=when)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return path


def python(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


# --- collect -------------------------------------------------------------------------------------
def test_canvas_zip_late_flags_resubmission_suffix_and_the_latest_of_two(tmp_path):
    source = make_zip(tmp_path / "canvas.zip", [
        ("obrienzoë_LATE_1001_9001_lenet.py", CORRECT, (2026, 12, 2, 10, 0, 0)),
        ("smithann_1002_9002_lenet-1.py", CORRECT, (2026, 11, 30, 9, 0, 0)),  # Canvas's rename
        ("smithann_1002_9002_helper.py", b"X = 1\n", (2026, 11, 30, 9, 0, 0)),
        ("leeben_1003_9003_lenet.py", WRONG, (2026, 11, 29, 8, 0, 0)),
        ("leeben_1003_9010_lenet.py", CORRECT, (2026, 11, 30, 8, 0, 0)),  # his second submission
        ("__MACOSX/._leeben_1003_9003_lenet.py", b"junk", (2026, 11, 29, 8, 0, 0)),
        ("notes.txt", b"not a submission", (2026, 11, 29, 8, 0, 0))])
    said = []
    kept = collect.collect(source, tmp_path / "subs", report=said.append)
    assert sorted(s.folder for s in kept) == ["leeben-1003", "obrienzoe-1001", "smithann-1002"]
    assert (tmp_path / "subs" / "smithann-1002" / "lenet.py").read_bytes() == CORRECT
    assert (tmp_path / "subs" / "leeben-1003" / "lenet.py").read_bytes() == CORRECT  # the latest
    manifest = collect.read_manifest(tmp_path / "subs" / "manifest.csv")
    assert manifest["obrienzoe-1001"]["late"] == "yes" and manifest["smithann-1002"]["late"] == ""
    # the entries' times are the download's (content_zipper.rb): no submission time without --times
    assert manifest["obrienzoe-1001"]["submitted_at"] == "" and manifest["obrienzoe-1001"]["time_source"] == "lms-late-flag"
    assert "kept the latest (9010" in manifest["leeben-1003"]["note"]
    assert any("leeben-1003: lenet.py in 2 attachments (9003, 9010)" in line for line in said)
    assert any("notes.txt: not a Canvas or Moodle" in line for line in said)
    hashes = json.loads(manifest["smithann-1002"]["sha256"])
    assert sorted(hashes) == ["helper.py", "lenet.py"] and len(hashes["lenet.py"]) == 64


def test_moodle_zip_folders_names_with_accents_spaces_and_quotes(tmp_path):
    when = (2026, 12, 1, 12, 0, 0)
    source = make_zip(tmp_path / "moodle.zip", [
        ("Zoë O'Brien_501_assignsubmission_file_/lenet.py", CORRECT, when),
        ('Ann "Annie" Smith_502_assignsubmission_file_/lenet.py', CORRECT, when),
        ('Ann "Annie" Smith_502_assignsubmission_file_/lib/helper.py', b"X = 1\n", when),
        ('Ann "Annie" Smith_502_assignsubmission_onlinetext_/onlinetext.html', b"<p>hi</p>", when)])
    collect.collect(source, tmp_path / "subs", report=lambda line: None)
    assert (tmp_path / "subs" / "zoe-obrien-501" / "lenet.py").is_file()
    assert (tmp_path / "subs" / "ann-annie-smith-502" / "lib" / "helper.py").is_file()
    assert not list((tmp_path / "subs").rglob("onlinetext.html"))
    manifest = collect.read_manifest(tmp_path / "subs" / "manifest.csv")
    assert manifest["zoe-obrien-501"]["name"] == "Zoë O'Brien"
    assert manifest["ann-annie-smith-502"]["name"] == 'Ann "Annie" Smith'
    assert manifest["ann-annie-smith-502"]["student_id"] == "502"
    assert store.students(tmp_path / "subs", "lenet.py") == ["ann-annie-smith-502", "zoe-obrien-501"]


def test_git_clones_the_last_commit_and_its_date(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    clones = tmp_path / "clones"
    for name, date in (("ann", "2026-11-30T10:00:00+01:00"), ("ben", "2026-12-03T09:30:00+00:00")):
        repo = clones / name
        repo.mkdir(parents=True)
        env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date, "GIT_AUTHOR_NAME": name,
               "GIT_AUTHOR_EMAIL": f"{name}@uni", "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": f"{name}@uni"}
        (repo / "lenet.py").write_bytes(CORRECT)
        (repo / "link.py").symlink_to("/etc/passwd")
        for cmd in (["init", "-q"], ["add", "lenet.py", "link.py"], ["commit", "-q", "-m", "lab"]):
            subprocess.run(["git", *cmd], cwd=repo, env=env, check=True)
        (repo / "lenet.py").write_bytes(b"uncommitted: not handed in")
    (clones / "notes").mkdir()
    said = []
    collect.collect(clones, tmp_path / "subs", report=said.append)
    manifest = collect.read_manifest(tmp_path / "subs" / "manifest.csv")
    assert manifest["ben"]["submitted_at"] == "2026-12-03T09:30:00+00:00" and manifest["ben"]["source"] == "git"
    assert (tmp_path / "subs" / "ann" / "lenet.py").read_bytes() == CORRECT  # the commit, not the tree
    assert not (tmp_path / "subs" / "ann" / "link.py").exists()
    assert any("ann/link.py: a link" in line for line in said) and any("notes: not a git" in line for line in said)


def zipped(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_zip_handed_in_is_unpacked_with_the_same_checks(tmp_path):
    when = (2026, 12, 1, 12, 0, 0)
    folder = zipped({"my lab/lenet.py": CORRECT, "my lab/util/helper.py": b"X = 1\n", "__MACOSX/._x": b"junk"})
    source = make_zip(tmp_path / "canvas.zip", [("smithann_1002_9002_lab.zip", folder, when),
                                                ("Zoë O'Brien_501_assignsubmission_file_/lab.zip",
                                                 zipped({"lenet.py": CORRECT}), when)])
    collect.collect(source, tmp_path / "subs", report=lambda line: None)
    assert (tmp_path / "subs" / "smithann-1002" / "lenet.py").read_bytes() == CORRECT
    assert (tmp_path / "subs" / "smithann-1002" / "util" / "helper.py").is_file()
    assert (tmp_path / "subs" / "zoe-obrien-501" / "lenet.py").is_file()
    evil = make_zip(tmp_path / "evil.zip", [("smithann_1002_9002_lab.zip", zipped({"../../x.py": b"1"}), when)])
    [refused] = collect.collect(evil, tmp_path / "subs2", report=lambda line: None)  # theirs alone
    assert re.match(r".*evil.zip!smithann_1002_9002_lab.zip: entry '../../x.py' points outside", refused.refused)
    assert sorted(p.name for p in (tmp_path / "subs2").iterdir()) == ["hashes.json", "manifest.csv"]
    assert not list(tmp_path.rglob("x.py"))


@pytest.mark.parametrize("entry", ["../evil.py", "/etc/cron.d/evil", "smithann_1_2_..\\..\\evil.py", "C:/x.py"])
def test_zip_slip_is_refused_and_nothing_is_written(tmp_path, entry):
    source = make_zip(tmp_path / "bad.zip", [("smithann_1002_9002_lenet.py", CORRECT, (2026, 1, 1, 0, 0, 0)),
                                             (entry, b"import os", (2026, 1, 1, 0, 0, 0))])
    with pytest.raises(HarnessError, match=r"bad.zip: entry .* points outside .*nothing was written"):
        collect.collect(source, tmp_path / "subs")
    assert not (tmp_path / "subs").exists()


def test_a_zip_bomb_a_used_out_and_a_stray_file_are_refused(tmp_path):
    bomb = make_zip(tmp_path / "bomb.zip", [("smithann_1002_9002_lenet.py", b"\0" * (3 << 20), (2026, 1, 1, 0, 0, 0))])
    assert bomb.stat().st_size < 100_000
    with pytest.raises(HarnessError, match=r"bomb.zip: its entries expand to 3 MiB, past the cap of 1 MiB"):
        collect.collect(bomb, tmp_path / "subs", max_bytes=1 << 20)
    assert not (tmp_path / "subs").exists()
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "manifest.csv").write_text("x")
    with pytest.raises(HarnessError, match="already holds files"):
        collect.collect(bomb, tmp_path / "used")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(HarnessError, match="expected an LMS bulk-download zip"):
        collect.collect(tmp_path / "x.txt", tmp_path / "subs2")


# --- [grade], points, ties, lateness -------------------------------------------------------------
def test_grade_table_parsed_and_bad_ones_named():
    grade = assignment.parse(lab_text(), "lab.toml").grade
    assert grade.tiers == ((1.2, 40), (1.6, 30), (2.5, 15)) and grade.late_per_day == 10
    assert grade.due == datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
    assert assignment.load("cpu_numpy").grade == assignment.Grade()  # no table: the defaults
    for bad, words in (("speed = 'fast'", "speed: expected 'linear' or 'tiers'"),
                       ("bonus = 3", r"unknown key\(s\) \['bonus'\]"),
                       ("tiers = [[2, 10], [1, 20]]", "tiers: expected ascending ratios"),
                       ("tiers = [[1, 50]]", "tiers: .*points <= speed_points"),
                       ("due = 'friday'", "due: expected a date-time"),
                       ("full_at = 3\nzero_at = 2", "expected 0 < full_at < zero_at")):
        with pytest.raises(HarnessError, match=r"lab.toml \[grade\]: " + words):
            assignment.parse((ROOT / "labs" / "cpu_numpy.toml").read_text() + "\n[grade]\n" + bad + "\n", "lab.toml")


def test_ties_where_intervals_overlap_and_equal_points():
    assert points.tie_ranks([(1.47, 1.53), (1.50, 1.57), (1.8, 1.9), (1.85, 2.0), (2.5, 2.6)]) == [1, 1, 3, 3, 5]
    assert points.tie_ranks([(1.0, 1.1), (1.05, 1.3), (1.2, 1.4)]) == [1, 1, 3]  # tied with the first only
    rows = [ok_row("ann", 1.51, 1.47, 1.53), ok_row("ben", 1.51, 1.50, 1.57), ok_row("cat", 1.7, 1.65, 1.75)]
    grade = assignment.parse(lab_text(), "lab.toml").grade
    scores = points.scores(rows, grade)
    assert points.groups(rows) == {"ann": (1, 1.51), "ben": (1, 1.51), "cat": (3, 1.7)}
    assert scores["ann"].total == scores["ben"].total == 90 and scores["cat"].total == 75


def test_byte_identical_submissions_tie_whatever_their_intervals():
    """Timed at different moments, two copies of one file can get intervals apart ([1.42-1.50] and
    [1.51-1.67] in a class): the same files_sha256 ties them at the best ratio, side by side."""
    rows = [{**ok_row("ann", 1.46, 1.42, 1.50), "files_sha256": "f" * 64}, ok_row("dan", 1.50, 1.455, 1.55),
            {**ok_row("ben", 1.59, 1.51, 1.67), "files_sha256": "f" * 64}, ok_row("cat", 1.9, 1.8, 2.0)]
    assert [r["student"] for r in points.sorted_ok(rows)] == ["ann", "ben", "dan", "cat"]
    assert points.groups(rows) == {"ann": (1, 1.46), "ben": (1, 1.46), "dan": (1, 1.46), "cat": (4, 1.9)}
    assert points.tie_ranks([(1.0, 1.1), (1.3, 1.4), (1.2, 1.25)], ["a", "a", "b"]) == [1, 1, 3]


def test_speed_points_and_late_penalty():
    linear = assignment.Grade()
    assert points.speed_points(linear, 0.8) == 40 and points.speed_points(linear, 4.5) == 0
    assert points.speed_points(linear, 2.0) == 20  # halfway in log(ratio) from 1x to 4x
    grade = assignment.parse(lab_text(), "lab.toml").grade
    assert points.speed_points(grade, 3.0) == 0 and points.speed_points(grade, 2.0) == 15
    on_time = {"submitted_at": "2026-12-01T23:00:00", "late": ""}
    assert points.late_days(grade, on_time) == 0
    assert points.late_days(grade, {"submitted_at": "2026-12-02T10:00:00", "late": ""}) == 1
    assert points.late_days(grade, {"submitted_at": "2026-12-03T10:00:00+00:00", "late": ""}) == 2
    assert points.late_days(grade, {"submitted_at": "", "late": "yes"}) == 1  # the LMS's flag alone
    assert points.late_factor(grade, 2) == pytest.approx(0.8) and points.late_factor(grade, 4) == 0
    row = ok_row("ann", 1.1, 1.0, 1.2)
    late = points.score(row, grade, 1.1, {"submitted_at": "2026-12-02T10:00:00", "late": "yes"})
    assert late.total == 90 and "1 day(s) late: x 0.90" in late.note
    wrong = points.score({"student": "x", "status": "wrong"}, grade, None, None)
    assert wrong.total == 0 and points.score({"student": "x", "status": "too-slow"}, grade, None, None).total == 60
    first = {"images": 100, "agree": 100, "max_abs_diff": 0.0}  # too slow in the probe: the full gate never ran
    probed = points.score({"student": "x", "status": "too-slow", "gate_first": first}, grade, None, None)
    assert probed.total == 0 and "too slow for the full gate" in probed.note
    warmed = {"student": "x", "status": "too-slow", "gate_first": first, "gate": {**first, "images": 10000}}
    assert points.score(warmed, grade, None, None).total == 60  # too slow after the whole gate passed


# --- end to end: collect -> rows -> report -> export ---------------------------------------------
CLASS = [  # Canvas name, user id, submission, status, ratio [interval], when (Dec 2026)
    ("obrienzoë", 1001, "correct", "ok", (1.10, 1.05, 1.15), (1, 12)),
    ("smithann", 1002, "correct", "ok", (1.51, 1.47, 1.53), (1, 13)),
    ("twinben", 1003, "correct", "ok", (1.51, 1.50, 1.57), (1, 14)),  # byte-identical to smithann
    ("leecat", 1004, "correct", "ok", (2.0, 1.9, 2.1), (1, 15)),
    ("kimdan", 1005, "slow", "too-slow", None, (1, 16)),
    ("nguyenema", 1006, "wrong", "wrong", None, (1, 17)),
    ("garciafay", 1007, "correct", "ok", (1.3, 1.25, 1.35), (2, 9)),  # late: 1 day
    ("muellergus", 1008, "correct", "ok", (1.3, 1.26, 1.36), (3, 9)),  # late: 2 days
    ("patelhal", 1009, "correct", "ok", (2.4, 2.3, 2.5), (1, 18)),
    ("rossiivy", 1010, "correct", "ok", (1.8, 1.75, 1.85), (1, 19)),
    ("satojon", 1011, "correct", "ok", (3.0, 2.9, 3.1), (1, 20)),
    ("dupontkai", 1012, "correct", "ok", (1.15, 1.12, 1.2), (1, 21)),
]


def ok_row(student, ratio, low, high):
    return lab_rows.ok_row(student, ratio, low, high, loc=40)


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """A class of 12 collected from a Canvas zip, with rows as the grader writes them."""
    tmp = tmp_path_factory.mktemp("term")
    files = {"correct": CORRECT, "wrong": WRONG, "slow": (ROOT / "labs" / "examples" / "slow" / "lenet.py").read_bytes()}
    downloaded = (2026, 12, 5, 8, 0, 0)  # Canvas writes every entry with the zip's own time
    entries = [(f"{name}_{'LATE_' if day > 1 else ''}{uid}_{uid + 8000}_lenet.py", files[kind], downloaded)
               for name, uid, kind, _, _, (day, hour) in CLASS]
    source = make_zip(tmp / "canvas.zip", entries)
    export = tmp / "submissions.json"  # the Submissions API's answer, as the browser saves it
    export.write_text("while(1);" + json.dumps([
        {"id": uid + 5000, "user_id": uid, "submitted_at": f"2026-12-{day:02d}T{hour:02d}:00:00Z", "late": day > 1,
         "workflow_state": "submitted"} for _, uid, _, _, _, (day, hour) in CLASS]))
    done = python("lab", "collect", source, "-o", tmp / "submissions", "--times", export)
    assert done.returncode == 0, done.stderr
    lab_file = tmp / "cpu_numpy.toml"
    lab_file.write_text(lab_text())
    manifest = collect.read_manifest(tmp / "submissions" / "manifest.csv")
    by_id = {int(entry["student_id"]): folder for folder, entry in manifest.items()}
    assert sorted(by_id.values()) == store.students(tmp / "submissions", "lenet.py")
    rows = [ok_row(by_id[uid], *ratio) if status == "ok" else lab_rows.failed_row(
        by_id[uid], status, "2 of 10000 test images disagree" if status == "wrong" else "300x numpy in its warm-up")
        for _, uid, _, status, ratio, _ in CLASS]
    out = lab_rows.graded(tmp / "grading", rows, lab=lab_file)
    shutil.copyfile(tmp / "submissions" / "manifest.csv", out / "manifest.csv")  # what `lab grade` does
    return tmp, out, by_id


@pytest.mark.slow  # a dozen CLI calls and one leaderboard: about 15 s
def test_a_term_collect_report_export(term):
    tmp, out, by_id = term
    manifest = collect.read_manifest(tmp / "submissions" / "manifest.csv")
    assert len(manifest) == 12 and sum(e["late"] == "yes" for e in manifest.values()) == 2
    assert (tmp / "submissions" / "smithann-1002" / "lenet.py").read_bytes() == \
        (tmp / "submissions" / "twinben-1003" / "lenet.py").read_bytes()
    done = python("lab", "report", out)
    assert done.returncode == 0, done.stderr
    board = (out / "LEADERBOARD.md").read_text()
    assert "Ranks tie where the 95% intervals overlap" in board and "Points: 60 for passing the gate" in board
    assert "| 5 | [smithann-1002](feedback/smithann-1002.md) | ok | 90 |" in board
    assert "| 5 | [twinben-1003](feedback/twinben-1003.md) | ok | 90 |" in board  # identical: tied, equal
    assert "| 3 | [garciafay-1007](feedback/garciafay-1007.md) | ok | 81 |" in board  # 1 day late: 90 x 0.9
    assert "| 3 | [muellergus-1008](feedback/muellergus-1008.md) | ok | 72 |" in board  # 2 days: x 0.8
    rows = list(csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text())))
    assert {r["student"]: r["points"] for r in rows}["nguyenema-1006"] == "0.0"
    assert {r["student"]: r["points"] for r in rows}["kimdan-1005"] == "60.0"
    # the roster: Canvas's gradebook export; one student never handed in, one hand-in is not on it
    roster = tmp / "roster.csv"
    people = [(name, uid) for name, uid, *_ in CLASS if uid != 1012] + [("Quinn, Ava", 1013)]
    with open(roster, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "LeNet-5 lab cpu_numpy (777)"])
        writer.writerow(["    Points Possible", "", "", "", "", "100"])
        for name, uid in people:
            shown = "O'Brien, Zoë" if name == "obrienzoë" else name
            writer.writerow([shown, uid, f"s{uid}", f"{name}@uni", "A", ""])
    grades = tmp / "grades.csv"
    done = python("lab", "export", out, "--roster", roster, "--format", "canvas", "-o", grades)
    assert done.returncode == 1 and "not on the roster" in done.stderr and "dupontkai-1012 (id 1012)" in done.stderr
    table = list(csv.DictReader(io.StringIO(grades.read_text(encoding="utf-8"))))
    assert list(table[0]) == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "LeNet-5 lab cpu_numpy (777)"]
    got = {r["ID"]: r["LeNet-5 lab cpu_numpy (777)"] for r in table}
    assert got[""] == "100" and got["1002"] == got["1003"] == "90" and got["1013"] == "0"
    assert got["1006"] == "0" and got["1005"] == "60" and got["1001"] == "100"
    assert {r["ID"]: r["Student"] for r in table}["1001"] == "O'Brien, Zoë"
    again = python("lab", "export", out, "--roster", roster, "--format", "canvas", "-o", grades)
    assert again.returncode == 2 and "already exists" in again.stderr and "--force" in again.stderr
    assert python("lab", "export", out, "--roster", roster, "--format", "canvas", "-o", grades,
                  "--force").returncode == 1


def test_moodle_and_csv_exports_and_bad_rosters(term):
    tmp, out, by_id = term
    sheet = tmp / "worksheet.csv"
    with open(sheet, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                         "Feedback comments"])
        for name, uid, *_ in CLASS:
            writer.writerow([f"Participant {uid}", name, f"{name}@uni", "Submitted", "", "100", ""])
    target = tmp / "moodle-grades.csv"
    done = export.export(out, sheet, "moodle", target)
    assert done.unmatched == [] and done.graded == 12
    table = {r["Identifier"]: r for r in csv.DictReader(io.StringIO(target.read_text()))}
    assert table["Participant 1008"]["Grade"] == "72" and "2 day(s) late" in table["Participant 1008"]["Feedback comments"]
    assert "rank 5 of 10" in table["Participant 1003"]["Feedback comments"]
    plain = tmp / "plain-roster.csv"
    plain.write_text("id,name\n1001,\"O'Brien, Zoë\"\n1099,Nobody\n")
    done = export.export(out, plain, "csv", tmp / "plain-grades.csv")
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO((tmp / "plain-grades.csv").read_text()))}
    assert rows["1099"]["status"] == "no submission" and rows["1099"]["points"] == "0"
    assert rows["1001"]["name"] == "O'Brien, Zoë" and rows["1001"]["max_points"] == "100"
    assert len(done.unmatched) == 11
    (tmp / "bad.csv").write_text("name,email\nann,a@uni\n")
    with pytest.raises(HarnessError, match=r"--roster .*bad.csv: no column\(s\) \['id'\]"):
        export.export(out, tmp / "bad.csv", "csv", tmp / "x.csv")
    (tmp / "twice.csv").write_text("id,name\n1,a\n1,b\n")
    with pytest.raises(HarnessError, match=r"student id\(s\) \['1'\] listed twice"):
        export.export(out, tmp / "twice.csv", "csv", tmp / "y.csv")


def test_a_roster_with_two_columns_naming_the_lab_needs_column(tmp_path):
    from harness.errors import HarnessError
    from harness.lab.judge.rules import assignment
    from harness.lab.term.marks import export

    lab = assignment.load("cpu_numpy")
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "cpu_numpy (777)",
              "cpu_numpy resubmission (778)"]
    with pytest.raises(HarnessError, match=r"2 columns name the lab 'cpu_numpy'.*--column"):
        export.canvas_column(header, lab, None)
    assert export.canvas_column(header, lab, "cpu_numpy (777)") == "cpu_numpy (777)"
    assert export.canvas_column(header[:6], lab, None) == "cpu_numpy (777)"
    assert export.canvas_column(header[:5], lab, None) == lab.title  # none: a new assignment, the lab's title


def test_an_extension_moves_one_student_s_due_date_in_the_export_and_the_feedback(term, tmp_path):
    """garciafay (1007) handed in on Dec 2, a day late and flagged late by Canvas; an extension to Dec 3
    makes her on time (the flag, computed against the class's due, is not read), and says so in the
    export's feedback and in her feedback; muellergus (1008) keeps his two days."""
    tmp, graded_out, by_id = term
    out = tmp_path / "grading"
    shutil.copytree(graded_out, out)
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\n1007,Fay Garcia\n1008,Gus Mueller\n")
    export.export(out, roster, "csv", tmp_path / "before.csv")
    before = {r["id"]: r for r in csv.DictReader(io.StringIO((tmp_path / "before.csv").read_text()))}
    assert before["1007"]["late_days"] == "1"
    (out / extensions.FILE).write_text("student_id,due\n1007,2026-12-03T23:59:00Z\n")
    export.export(out, roster, "csv", tmp_path / "after.csv")
    after = {r["id"]: r for r in csv.DictReader(io.StringIO((tmp_path / "after.csv").read_text()))}
    assert after["1007"]["late_days"] == "0" and float(after["1007"]["points"]) > float(before["1007"]["points"])
    assert "due 2026-12-03 23:59:00+00:00 (an extension)" in after["1007"]["feedback"]
    assert after["1008"] == before["1008"]
    done = python("lab", "report", out)
    assert done.returncode == 0, done.stderr
    mine = (out / "feedback" / f"{by_id[1007]}.md").read_text()
    assert "Your due date: 2026-12-03 23:59:00+00:00 (an extension; the class's: 2026-12-01 23:59:00+00:00)" in mine
    assert "Your due date" not in (out / "feedback" / f"{by_id[1008]}.md").read_text()


@pytest.mark.parametrize("text,expected", [
    ("id,due\n1,2026-12-03\n", r"expected the columns \['student_id', 'due'\]"),
    ("student_id,due\n1,friday\n", r"line 2: due: expected a date-time"),
    ("student_id,due\n1,2026-12-03\n1,2026-12-04\n", r"line 3: '1' has a second extension"),
    ("student_id,due\n1\n", r"line 2: expected student_id,due"),
])
def test_a_bad_extensions_file_is_named(tmp_path, text, expected):
    (tmp_path / extensions.FILE).write_text(text)
    with pytest.raises(HarnessError, match=expected):
        extensions.graded(tmp_path)
    (tmp_path / extensions.FILE).write_text("student_id,due\nann-1,2026-12-03\n")
    assert extensions.graded(tmp_path)["ann-1"].day == 3
