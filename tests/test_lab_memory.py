"""Memory in a lab (#55, the lab's part): each submission's peak memory read by the grader from
outside its worker (harness.lab.box.proc.peak: its cgroup, v1 or v2, else /proc VmHWM), the gate on it
([limits] peak_mb: over-memory), the leaderboard's and the feedback's column, old rows without it.

One small grading (one reference, a gate of 100 images, a few calls) of the correct example, a
submission that holds 300 MiB, one that also forges what its worker reports, and one that frees its
300 MiB and resets its own VmHWM; the rest reads fake cgroup folders, a child process's /proc, or rows
written directly (tests/lab_rows.py). Nothing depends on the machine's speed: 300 MiB against a
limit of 200 MiB, and the correct example's worker needs far less."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab.box.proc import peak
from harness.lab.box.walls import cgroup, procfs
from harness.lab.judge import store
from harness.lab.judge.phases import memory
from harness.lab.judge.rules import assignment
from harness.lab.term.marks import feedback, leaderboard, points
from tests import lab_rows
from tests.conftest import ROOT
from tests.test_lab import WRAP, python, rows_by_student

LAB = """
[lab]
name = "test_memory"
references = ["numpy"]
[measure]
calls = 6
rounds = 2
warmup = 2
[gate]
images = 100
[limits]
wall_s = 60
import_s = 20
memory_mb = 1024
cpu_s = 60
max_ratio = 300
peak_mb = 200
"""
BALLAST = "np.ones(300 << 20, dtype=np.uint8)"  # 300 MiB, every page touched
SUBMISSIONS = {
    # holds 300 MiB from its first call on
    "ballast": WRAP + f"""

class Ballast(CorrectLeNet):
    def predict(self, images):
        if not hasattr(self, "ballast"):
            self.ballast = {BALLAST}
        return super().predict(images)
""",
    # the same, and lies about it everywhere it can: every reply of its worker carries a small peak,
    # the harness's own memory reader is patched, and its own VmHWM is reset after each call
    "forger": WRAP + f"""
import __main__

_reply = __main__.Channel.reply
__main__.Channel.reply = lambda self, m: _reply(self, {{**m, "peak_mb": 1.0, "peak_rss_mb": 1.0,
                                                     "memory_source": "cgroup v2 memory.peak"}})
try:  # not in the box (only the interface's harness modules are): patched where it is
    from harness.measure.inside import memory as _memory
    _memory.rss = lambda: (1 << 20, 1 << 20)
except ImportError:
    pass


def reset_peak():
    try:  # refused where the grader ran as root: the worker, no longer root, cannot write it
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


class Forger(CorrectLeNet):
    def predict(self, images):
        if not hasattr(self, "ballast"):
            self.ballast = {BALLAST}
        out = super().predict(images)
        reset_peak()
        return out
""",
    # 300 MiB in its first call only, freed, then its own peak reset (VmHWM: /proc/self/clear_refs),
    # and every cgroup peak file it can find written (none is visible or writable in its box)
    "resetter": WRAP + f"""
import glob


class Resetter(CorrectLeNet):
    def predict(self, images):
        if not hasattr(self, "done"):
            ballast = {BALLAST}
            del ballast
            self.done = True
        try:  # refused where the grader ran as root (the worker, no longer root, cannot write it)
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        for path in glob.glob("/sys/fs/cgroup/**/memory.*peak*", recursive=True) + \\
                glob.glob("/sys/fs/cgroup/**/memory.max_usage_in_bytes", recursive=True):
            try:
                with open(path, "w") as f:
                    f.write("0")
            except OSError:
                pass
        return super().predict(images)
""",
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """OUT of one `lab grade` (with its report) of the correct example and SUBMISSIONS."""
    base = tmp_path_factory.mktemp("memory")
    lab = base / "test_memory.toml"
    lab.write_text(LAB)
    submissions = base / "submissions"
    shutil.copytree(ROOT / "labs" / "examples" / "correct", submissions / "correct")
    for name, source in SUBMISSIONS.items():
        (submissions / name).mkdir()
        (submissions / name / "lenet.py").write_text(source)
    done = python("lab", "grade", str(lab), "--submissions", str(submissions), "--out", str(base / "out"))
    assert done.returncode == 0, done.stderr
    return base / "out"


def from_cgroup(row: dict) -> bool:
    return row["memory_source"] in (peak.SOURCES["v1"], peak.SOURCES["v2"])


# --- one grading, end to end ----------------------------------------------------------------------
def test_the_peak_is_measured_and_gated(graded):
    rows = rows_by_student(graded)
    correct, ballast = rows["correct"], rows["ballast"]
    assert correct["status"] == "ok", correct["reason"]
    assert 10 < correct["peak_mb"] < 200 and correct["memory_source"] in peak.SOURCES.values()
    assert 10 < correct["reference_peak_mb"]["numpy"] < 200  # the reference's worker, read the same way
    assert ballast["status"] == "over-memory" and ballast["peak_mb"] >= 300, ballast
    assert ballast["reason"].startswith(f"its peak memory was {ballast['peak_mb']:.0f} MiB, above the lab's "
                                        "peak_mb of 200 MiB")
    assert ballast["median_per_image_ns"] > 0 and ballast["gate"]["agree"] == 100  # timed: its row kept


def test_what_a_submission_says_of_its_memory_is_never_read(graded):
    forger = rows_by_student(graded)["forger"]
    assert forger["status"] == "over-memory" and forger["peak_mb"] >= 300, forger
    assert "peak_rss_mb" not in forger and forger["memory_source"] != "cgroup v2 memory.peak"


def test_a_peak_reset_from_inside_is_caught_by_the_cgroup_and_admitted_without_one(graded):
    resetter = rows_by_student(graded)["resetter"]
    if from_cgroup(resetter):  # the kernel's mark for the group: nothing in the box can lower it
        assert resetter["status"] == "over-memory" and resetter["peak_mb"] >= 300, resetter
    else:  # the worker's own VmHWM, which it can reset between two readings: the row says so
        assert resetter["memory_source"] == peak.SOURCES["procfs"] and "could lower" in peak.SOURCES["procfs"]


def test_the_leaderboard_and_the_feedback_show_the_peak(graded):
    rows = rows_by_student(graded)
    board = (graded / "LEADERBOARD.md").read_text()
    head = next(line for line in board.splitlines() if line.startswith("| rank |"))
    assert "| median per image | peak memory |" in head
    line = next(line for line in board.splitlines() if line.startswith("| – | [ballast]"))
    cells = line.split(" | ")
    assert cells[2:6] == ["over-memory", "60", leaderboard.fmt_us(rows["ballast"]["median_per_image_ns"]),
                          f"{rows['ballast']['peak_mb']:.0f} MiB"]  # its time shown, never ranked
    assert f"- `over-memory`: {leaderboard.MEANING['over-memory']}" in board
    assert "peak_mb of 200 MiB a submission is `over-memory`" in board
    assert "- `numpy`: " in board and "peak memory" in board.split("References, timed beside")[1]
    with open(graded / "leaderboard.csv", newline="") as f:
        table = {r["student"]: r for r in csv.DictReader(f)}
    assert float(table["ballast"]["peak_mb"]) >= 300 and 10 < float(table["correct"]["peak_mb"]) < 200
    assert table["correct"]["rank"] == "1" and table["ballast"]["rank"] == ""
    assert float(table["correct"]["median_us_per_image"]) > 0
    page = (graded / "feedback" / "ballast.md").read_text()
    assert f"Peak memory: {rows['ballast']['peak_mb']:.0f} MiB" in page and "the lab's limit is 200 MiB" in page
    assert "Median time per image:" in page and "Next step: Your answers and times are fine" in page
    assert "Peak memory: " in (graded / "feedback" / "correct.md").read_text()


def test_without_a_cgroup_the_grader_reads_the_workers_own_peak(tmp_path):
    """--no-sandbox (no cgroup): the worker process's VmHWM, sampled by the grader at each exchange."""
    lab = tmp_path / "test_memory.toml"
    lab.write_text(LAB)
    (tmp_path / "subs" / "ballast").mkdir(parents=True)
    (tmp_path / "subs" / "ballast" / "lenet.py").write_text(SUBMISSIONS["ballast"])
    done = python("lab", "grade", str(lab), "--submissions", str(tmp_path / "subs"), "--out", str(tmp_path / "out"),
                  "--no-sandbox", "--no-report")
    assert done.returncode == 0, done.stderr
    row = store.read_row(tmp_path / "out", "ballast")
    assert row["memory_source"] == peak.SOURCES["procfs"] and "not counted" in row["memory_source"]
    assert row["status"] == "over-memory" and row["peak_mb"] >= 300, row
    assert 10 < row["reference_peak_mb"]["numpy"] < 200


# --- the readers ----------------------------------------------------------------------------------
def fake_group(tmp_path: Path, version: str) -> cgroup.Cgroup:
    """A worker's group in fake cgroup folders (tests/test_lab_sandbox.py builds the layouts)."""
    if version == "v2":
        parents = {"v2": tmp_path / "lenet-lab"}
        (parents["v2"] / "w1").mkdir(parents=True)
        (parents["v2"] / "cgroup.subtree_control").write_text("cpu memory pids")
        (parents["v2"] / "w1" / "cpu.stat").write_text("usage_usec 0\n")
    else:
        parents = {c: tmp_path / c / "lenet-lab" for c in cgroup.V1_CONTROLLERS}
        (parents["cpuacct"] / "w1").mkdir(parents=True)
        (parents["cpuacct"] / "w1" / "cpuacct.usage").write_text("0\n")
    return cgroup.Cgroup("w1", memory_mb=512, pids=32, where=(version, parents))


@pytest.mark.parametrize("version, name", [("v2", "memory.peak"), ("v1", "memory.max_usage_in_bytes")])
def test_the_cgroup_peak_files(tmp_path, version, name):
    group = fake_group(tmp_path, version)
    assert group.peak_file().name == name and group.peak_bytes() is None  # not there (v2 before 5.19)
    assert peak.reading(group, None) == {"peak_mb": None, "memory_source": peak.SOURCES["none"]}
    assert peak.reading(group, 50 << 20) == {"peak_mb": 50.0, "memory_source": peak.SOURCES["procfs"]}
    group.peak_file().write_text(f"{(314 << 20) + (1 << 19)}\n")
    assert group.peak_bytes() == (314 << 20) + (1 << 19)
    assert peak.reading(group, 50 << 20) == {"peak_mb": 314.5, "memory_source": peak.SOURCES[version]}
    group.peak_file().write_text("garbage\n")
    assert group.peak_bytes() is None


def test_a_processes_peak_read_from_outside_and_why_it_is_not_tamper_evident():
    script = ("import sys\nb = bytearray(120 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
              "print(flush=True)\nsys.stdin.readline()\ndel b\n"
              "open('/proc/self/clear_refs', 'w').write('5')\nprint(flush=True)\nsys.stdin.readline()\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    fd = procfs.pidfd(child.pid)
    try:
        child.stdout.readline()
        held = peak.procfs_peak(child.pid, fd)
        assert held is not None and held >= 120 << 20
        child.stdin.write("\n")
        child.stdin.flush()
        child.stdout.readline()  # it freed the memory and reset its own mark: a reading now misses it
        assert peak.procfs_peak(child.pid, fd) < 120 << 20
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=30)
        assert peak.procfs_peak(child.pid, fd) is None  # ended: its pid may be another's now
    finally:
        child.kill()
        child.wait()
        if fd is not None:
            os.close(fd)


# --- the lab file, the gate, the rows -------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    ('"200MB"', r"\[limits\]: peak_mb: expected a whole number >= 64, found '200MB'"),
    ("10", r"\[limits\]: peak_mb: expected a whole number >= 64, found 10"),
    ("200.5", r"\[limits\]: peak_mb: expected a whole number >= 64, found 200.5"),
    ("8192", r"\[limits\]: peak_mb: expected at most memory_mb \(1024\): past memory_mb the worker is killed"),
])
def test_a_bad_peak_mb_names_the_file_and_the_key(value, expected):
    with pytest.raises(HarnessError, match=r"^lab\.toml " + expected):
        assignment.parse(LAB.replace("peak_mb = 200", f"peak_mb = {value}"), "lab.toml")
    assert assignment.parse(LAB, "lab.toml").limits.peak_mb == 200
    assert assignment.parse(LAB.replace("peak_mb = 200\n", ""), "lab.toml").limits.peak_mb is None


def test_the_gate_turns_only_an_ok_row_over_the_limit():
    def row(status, peak_mb):
        return {"status": status, "reason": None, "peak_mb": peak_mb, "memory_source": peak.SOURCES["v1"]}

    over, under, wrong, unmeasured, ungated = row("ok", 300.0), row("ok", 150.0), row("wrong", 300.0), \
        row("ok", None), row("ok", 300.0)
    for r in (over, under, wrong, unmeasured):
        memory.gate(r, 200)
    memory.gate(ungated, None)
    assert over["status"] == "over-memory" and "300 MiB, above the lab's peak_mb of 200 MiB" in over["reason"]
    assert [r["status"] for r in (under, wrong, unmeasured, ungated)] == ["ok", "wrong", "ok", "ok"]


def test_old_rows_without_a_peak_render_and_an_over_memory_row_scores(tmp_path):
    old = lab_rows.ok_row("old", 1.0, 0.95, 1.05, 40)  # as rows were before #55: no peak, no source
    new = {**lab_rows.ok_row("new", 2.0, 1.9, 2.1, 40), "peak_mb": 300.4, "memory_source": peak.SOURCES["v1"],
           "reference_peak_mb": {"numpy": 61.0}}
    new.update(status="over-memory", reason="its peak memory was 300 MiB, above the lab's peak_mb of 200 MiB")
    out = lab_rows.graded(tmp_path / "out", [old, new])
    leaderboard.build(out, report=lambda line: None)
    board = (out / "LEADERBOARD.md").read_text()
    old_line = next(line for line in board.splitlines() if line.startswith("| 1 | [old]"))
    assert old_line.split(" | ")[4:6] == [leaderboard.fmt_us(old["median_per_image_ns"]), "–"]
    assert "| 300 MiB |" in next(line for line in board.splitlines() if "[new]" in line)
    assert "peak memory 61 MiB" in board  # the reference's, from the one row that has it
    with open(out / "leaderboard.csv", newline="") as f:
        table = {r["student"]: r for r in csv.DictReader(f)}
    assert table["old"]["peak_mb"] == "" and table["new"]["peak_mb"] == "300.4"
    assert table["new"]["memory_source"] == peak.SOURCES["v1"]
    assert "Peak memory" not in (out / "feedback" / "old.md").read_text()
    lab = store.graded_lab(out)
    scores = points.scores(store.read_rows(out), lab.grade)
    assert scores["new"].gate == lab.grade.gate_points and scores["new"].speed == 0  # passed the gate only
    assert feedback.memory_lines(old, lab) == []


def test_the_box_reads_nothing_before_it_starts(tmp_path):
    from harness.lab.box.proc.lifecycle import Box
    from harness.lab.box.walls.isolation import Isolation

    box = Box("x", {}, tmp_path, Isolation("none", None, False, "none"))
    box.sample_memory()  # no process: nothing read
    assert box.peak_seen is None and box.memory() == {} and memory.peak_memory(None, {}) == {}


def test_the_students_kit_names_the_memory_gate_only_where_the_lab_has_one():
    from harness import DEFAULT_WEIGHTS
    from harness.lab.term.handout import kit

    # the real weights: kit.json also carries the NumPy reference's time measured on them
    gated = assignment.parse(LAB, "lab.toml")
    assert kit.kit_json(gated, DEFAULT_WEIGHTS)["limits"]["peak_mb"] == 200
    plain = assignment.parse(LAB.replace("peak_mb = 200\n", ""), "lab.toml")
    assert "peak_mb" not in kit.kit_json(plain, DEFAULT_WEIGHTS)["limits"]
