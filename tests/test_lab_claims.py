"""One claim for every grader (harness.lab.judge.student_lock): `lab grade` here takes the per-student claim
the Slurm tasks take, so two graders on one OUT (two TAs' `lab grade --resume`, two plain `lab grade`
started together) grade each student once, and a claim whose grader died is taken over. First the
grading loop with a stand-in grader (what it skips, and why), then two real graders racing."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.lab.judge import attempts, grade, store, student_lock
from harness.lab.judge.rules import assignment
from tests.conftest import ROOT


class StandIn:
    """The Grader's face to grade_all; grade() runs the test's `during` (one callable a student, or
    none) and returns a row."""

    during: dict = {}

    def __init__(self, lab, out, weights, report, iso):
        self.lab, self.out, self.report = lab, Path(out), report

    def grade(self, student, folder):
        StandIn.during.get(student, lambda: None)()
        return {"lab": self.lab.name, "student": student, "status": "wrong", "reason": "stand-in",
                "rank_by": self.lab.rank_by.label}

    def close(self):
        pass


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """run(during, **grade_all's options) -> (rows, what it said); the class: ann, ben, cy."""
    monkeypatch.setattr(grade, "Grader", StandIn)
    submissions = tmp_path / "submissions"
    for name in ("ann", "ben", "cy"):
        (submissions / name).mkdir(parents=True)
        (submissions / name / "lenet.py").write_text("# a submission\n")
    lab = assignment.load("cpu_numpy")

    def run(during=None, **kwargs):
        StandIn.during = during or {}
        said = []
        rows = grade.grade_all(lab, submissions, tmp_path / "out", no_sandbox=True, report=said.append, **kwargs)
        return {r["student"]: r for r in rows}, "\n".join(said)
    return run, tmp_path / "out", lab


def claims_left(out: Path) -> list[str]:
    return sorted(p.name for p in (out / store.RESULTS).glob("*/claim.json*"))


def test_a_student_another_live_grader_holds_is_skipped_and_named(stand_in):
    run, out, _ = stand_in
    assert student_lock.take(out, "ben", "another-host:4242")  # another machine's grader: only it can say it ended
    rows, said = run()
    assert sorted(rows) == ["ann", "cy"] and store.read_row(out, "ben") is None
    assert "ben: claimed by another-host:4242, a grader still running; skipped" in said
    assert student_lock.holder(out, "ben") == "another-host:4242"  # its claim is left to it
    assert claims_left(out) == ["claim.json"]  # ben's alone: ann's and cy's were released
    student_lock.release(out, "ben", "another-host:4242")
    rows, _ = run(resume=True)  # it ended without a row: the next --resume grades ben
    assert sorted(rows) == ["ben"] and claims_left(out) == []


def test_a_claim_whose_grader_here_died_is_taken_over(stand_in):
    run, out, _ = stand_in
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    assert student_lock.take(out, "ben", f"{socket.gethostname()}:{dead}")  # a grader killed outright (SIGKILL)
    rows, said = run()
    assert sorted(rows) == ["ann", "ben", "cy"] and "skipped" not in said
    assert claims_left(out) == []  # taken over, then released with the stale one it moved aside


def test_a_student_graded_meanwhile_by_another_grader_keeps_that_row(stand_in):
    """Another grader wrote ben's row after this one chose whom to grade (both saw no row): this one
    grades ann and cy only, and ben's row stays the other's."""
    run, out, lab = stand_in
    theirs = {"lab": lab.name, "student": "ben", "status": "wrong", "reason": "the other grader's",
              "rank_by": lab.rank_by.label}
    rows, said = run({"ann": lambda: store.write_row(out, theirs)})
    assert sorted(rows) == ["ann", "cy"]
    assert "ben: graded meanwhile by another grader (its row stands); skipped" in said
    assert store.read_row(out, "ben")["reason"] == "the other grader's"
    # a regrade asked by name (--only) is one: ben graded again, with nothing written since it chose
    rows, said = run(only=["ben"])
    assert sorted(rows) == ["ben"] and store.read_row(out, "ben")["reason"] == "stand-in"


def test_the_claim_is_released_when_a_signal_stops_the_grader(stand_in):
    run, out, _ = stand_in
    with pytest.raises(attempts.Interrupted):
        run({"ben": lambda: os.kill(os.getpid(), signal.SIGTERM)})
    assert store.read_row(out, "ben") is None and claims_left(out) == []
    rows, _ = run(resume=True)  # ben's attempt the grader's, cy never begun: both graded now
    assert sorted(rows) == ["ben", "cy"]


# --- two real graders --------------------------------------------------------------------------------
LAB = """
[lab]
name = "claims"
references = ["numpy"]
[measure]
calls = 8
rounds = 2
warmup = 2
[gate]
images = 100
[limits]
wall_s = 60
import_s = 10
memory_mb = 1024
cpu_s = 60
"""
CLASS = ("ann", "ben", "cy", "dee")


def grader(lab: Path, submissions: Path, out: Path, *options: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", "lab", "grade", str(lab), "--submissions",
                             str(submissions), "--out", str(out), "--no-sandbox", *options],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
@pytest.mark.parametrize("options", [("--resume",), ()], ids=["resume", "plain"])
def test_two_graders_started_together_grade_each_student_once(tmp_path, options):
    """Two `lab grade` processes on one OUT with four students, started together; dee's claim is a dead
    grader's (one of them takes it over). Each student is graded by one of them, once; the rows are
    all there, each the grader's own (its MAC), and no claim is left."""
    (tmp_path / "lab.toml").write_text(LAB)
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    for name in CLASS:
        (submissions / name).mkdir(parents=True)
        (submissions / name / "lenet.py").write_text((ROOT / "labs" / "examples" / "correct" / "lenet.py").read_text())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    assert student_lock.take(out, "dee", f"{socket.gethostname()}:{dead}")
    started = time.monotonic()
    both = [grader(tmp_path / "lab.toml", submissions, out, *options) for _ in range(2)]
    said = []
    for process in both:
        stdout, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr
        assert "Traceback" not in stderr
        said.append(stdout + stderr)
    print(f"two graders, {len(CLASS)} students: {time.monotonic() - started:.1f} s")
    # both chose all four (the race was real: each decides before its set-up of seconds) ...
    assert all(f"{len(CLASS)} submission(s) to grade" in words for words in said), said
    # ... and each student was graded by one of them, once; the other skipped it, saying why
    for name in CLASS:
        graded = [len(re.findall(rf"\] {name}: grading$", words, re.M)) for words in said]
        assert sorted(graded) == [0, 1], (name, graded, said)
        other = said[graded.index(0)]
        assert re.search(rf"\] {name}: (claimed by .*, a grader still running|graded meanwhile by another "
                         r"grader \(its row stands\)); skipped$", other, re.M), (name, other)
    rows, notes = store.checked_rows(out)
    assert notes == [] and sorted(r["student"] for r in rows) == list(CLASS)
    assert all(r["status"] == "ok" for r in rows), {r["student"]: r["reason"] for r in rows}
    assert all(len(attempts.history(out, name)) == 1 for name in CLASS)
    assert all(attempts.history(out, name)[0]["ended"]["by"] == attempts.BY_ROW for name in CLASS)
    assert claims_left(out) == [] and list(out.glob(".grader-key.*")) == []
