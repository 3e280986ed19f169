"""A class with refused hand-ins, end to end (docs/staff.md, "Collect"): a Canvas download, built
as Canvas builds it, in which three students handed in a bad zip of their own (a bomb, one that
climbs out, one that cannot be read); `lab collect` collects the others and exits 1 naming the
three; `lab grade` gives each a refused row (their folders absent, the others' rows kept), and a
hand-made student folder that is a link is refused too, never followed; the leaderboard, the
feedback, `lab export` (Canvas: 0 points; Moodle and csv: 0 points and the reason) and `lab
publish` (the status under a pseudonym, never the reason) agree. The grading itself is
tests/test_lab.py's: the collected students' rows here are written as the grader writes them."""

import csv
import io
import os
import shutil

import pytest

from harness.lab.judge import grade, store
from harness.lab.judge.rules import assignment
from harness.lab.term.intake import collect
from harness.lab.term.marks import export, leaderboard
from harness.lab.term.public import publish
from tests import lab_rows
from tests.test_lab_collect_lms import DOWNLOADED, canvas_entry, zipped
from tests.test_lab_term import CORRECT, lab_text, make_zip, python

GOOD = {"Smith, Ann": 1002, "Lee, Bob": 1004}
BAD = {  # Canvas's sortable name, user id -> their own zip
    "Bomb, Bo": (3001, zipped({"data.npy": b"\0" * (40 << 20)})),
    "Slip, Sal": (3002, zipped({"lenet.py": CORRECT, "../../../escaped.py": b"import os"})),
    "Broken, Bea": (3003, zipped({"lenet.py": CORRECT})[:-40]),
}


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """(tmp, OUT, the collect run, its manifest): the class collected through the command line,
    the good students' rows written, then `lab grade`'s refusals (grade_all: nothing left to grade)."""
    tmp = tmp_path_factory.mktemp("refused")
    entries = [(canvas_entry(name, uid, uid + 8000, "lenet.py"), CORRECT, DOWNLOADED) for name, uid in GOOD.items()]
    entries += [(canvas_entry(name, uid, uid + 8000, "lab.zip"), data, DOWNLOADED) for name, (uid, data) in BAD.items()]
    source = make_zip(tmp / "canvas.zip", entries)
    done = python("lab", "collect", source, "-o", tmp / "submissions")
    manifest = collect.read_manifest(tmp / "submissions" / collect.MANIFEST)
    lab_file = tmp / "cpu_numpy.toml"
    lab_file.write_text(lab_text())
    (tmp / "elsewhere").mkdir()
    (tmp / "elsewhere" / "lenet.py").write_bytes(CORRECT)
    os.symlink(tmp / "elsewhere", tmp / "submissions" / "linked-1005")  # a hand-made folder: a link
    out = lab_rows.graded(tmp / "grading", [lab_rows.ok_row("smithann-1002", 1.2, 1.1, 1.3, 40),
                                            lab_rows.ok_row("leebob-1004", 1.5, 1.4, 1.6, 40)], lab=lab_file)
    shutil.copyfile(tmp / "submissions" / collect.MANIFEST, out / collect.MANIFEST)  # as `lab grade` does
    said: list[str] = []
    from harness.lab.term import commands
    refused = commands.refused_hand_ins(tmp / "submissions")
    made = grade.grade_all(assignment.load(str(lab_file)), tmp / "submissions", out, resume=True,
                           report=said.append, no_sandbox=True, refused=refused)
    return tmp, out, done, manifest, made, said


def test_collect_refuses_each_bad_hand_in_alone_and_exits_1(term):
    tmp, _, done, manifest, _, _ = term
    assert done.returncode == 1, done.stderr
    summary = done.stderr.strip().splitlines()[-1]  # the report goes to stderr
    assert summary.startswith("refused 3 student(s)' hand-in, nothing of theirs written: "
                              "bombbo-3001, slipsal-3002, brokenbea-3003 ")
    assert {f: r["status"] for f, r in manifest.items()} == {
        "smithann-1002": "collected", "leebob-1004": "collected", "bombbo-3001": "refused",
        "slipsal-3002": "refused", "brokenbea-3003": "refused"}
    assert "its entries expand to 40 MiB, past the cap of 32 MiB (a zip bomb?)" in manifest["bombbo-3001"]["note"]
    assert "'../../../escaped.py' points outside" in manifest["slipsal-3002"]["note"]
    assert "not a readable zip" in manifest["brokenbea-3003"]["note"]
    assert sorted(p.name for p in (tmp / "submissions").iterdir()) == [
        "hashes.json", "leebob-1004", "linked-1005", "manifest.csv", "smithann-1002"]
    assert (tmp / "submissions" / "smithann-1002" / "lenet.py").read_bytes() == CORRECT
    assert not list(tmp.rglob("escaped.py")) and not list(tmp.rglob("data.npy"))


def test_grade_gives_each_refused_student_a_row(term):
    tmp, out, _, _, made, said = term
    assert sorted(r["student"] for r in made) == ["bombbo-3001", "brokenbea-3003", "linked-1005", "slipsal-3002"]
    rows = {r["student"]: r for r in store.checked_rows(out)[0]}
    assert sorted(rows) == sorted(store.listed_students(out)) and len(rows) == 6
    assert all(rows[s]["status"] == "refused" for s in ("bombbo-3001", "slipsal-3002", "brokenbea-3003", "linked-1005"))
    assert "a zip bomb?" in rows["bombbo-3001"]["reason"] and "not followed" in rows["linked-1005"]["reason"]
    assert rows["smithann-1002"]["status"] == "ok"  # kept
    assert any(line.startswith("slipsal-3002: refused: hand-in refused, not graded") for line in said), said
    assert not (out / "results" / "linked-1005" / "worker.log").exists()  # never run


def test_leaderboard_feedback_export_and_publish_agree(term):
    tmp, out, *_ = term
    leaderboard.build(out)
    board = (out / "LEADERBOARD.md").read_text()
    assert "| – | [bombbo-3001](feedback/bombbo-3001.md) | refused | 0 |" in board
    assert "- `refused`: the hand-in was refused before grading" in board
    table = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text()))}
    assert table["slipsal-3002"]["points"] == "0.0" and "points outside" in table["slipsal-3002"]["reason"]
    page = (out / "feedback" / "brokenbea-3003.md").read_text()
    assert "Status: **refused**" in page and "not a readable zip" in page and "hand in your files again" in page
    roster = tmp / "worksheet.csv"
    roster.write_text("Identifier,Full name,Status,Grade,Maximum Grade,Feedback comments\n" + "".join(
        f"Participant {uid},x,Submitted,,100,\n" for uid in (1002, 1004, 3001, 3002, 3003)))
    done = export.export(out, roster, "moodle", tmp / "moodle.csv")
    got = {r["Identifier"]: r for r in csv.DictReader(io.StringIO((tmp / "moodle.csv").read_text()))}
    assert got["Participant 3001"]["Grade"] == "0" and "a zip bomb?" in got["Participant 3001"]["Feedback comments"]
    assert got["Participant 1002"]["Grade"] == "100" and done.unmatched == ["linked-1005 (id linked-1005): 0 points, refused"]
    plain = tmp / "roster.csv"
    plain.write_text("id,name\n1002,Ann\n3002,Sal\n")
    export.export(out, plain, "csv", tmp / "plain.csv")
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO((tmp / "plain.csv").read_text()))}
    assert (rows["3002"]["points"], rows["3002"]["status"]) == ("0", "refused")
    assert "points outside" in rows["3002"]["feedback"]
    canvas = tmp / "gradebook.csv"
    canvas.write_text("Student,ID,SIS User ID,SIS Login ID,Section,cpu_numpy (7)\n"
                      "    Points Possible,,,,,100\nSal,3002,s,s,A,\nAnn,1002,a,a,A,\n")
    export.export(out, canvas, "canvas", tmp / "canvas.csv")
    cells = {r["ID"]: r["cpu_numpy (7)"] for r in csv.DictReader(io.StringIO((tmp / "canvas.csv").read_text()))}
    assert cells["3002"] == "0" and cells["1002"] == "100"
    publish.publish(out, tmp / "public", tmp / "submissions", report=lambda line: None)
    public = list(csv.DictReader(io.StringIO((tmp / "public" / publish.TABLE).read_text())))
    assert sorted(r["status"] for r in public) == ["ok", "ok", "refused", "refused", "refused", "refused"]
    shown = "".join(p.read_text(errors="replace") for p in (tmp / "public").iterdir())
    assert "bomb" not in shown.lower() and "3001" not in shown and "points outside" not in shown
