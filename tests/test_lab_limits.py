"""Lab grading under limits, each test its own short grading (apart from tests/test_lab.py's
class, so that pytest-xdist runs them beside it): an honest submission on a loaded machine, a CPU
hog, and a student's own check."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.lab.judge import store
from harness.machine import procenv
from tests.conftest import ROOT
from tests.test_lab import LAB, python, rows_by_student


@pytest.fixture(scope="module")
def lab_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lab") / "test_cpu.toml"
    path.write_text(LAB)
    return path


@pytest.mark.slow
def test_an_honest_submission_is_ok_on_a_loaded_machine(lab_file, tmp_path):
    """The grading and a process that spins forever share one CPU (the affinity this thread gives
    the processes it starts): every worker gets half a core at most, and is preempted all along,
    on a machine of any size."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            done = python("lab", "grade", str(lab_file), "--submissions", str(ROOT / "labs" / "examples"),
                          "--out", str(tmp_path / "out"), "--only", "correct,slow", "--no-report")  # the rows are read
        finally:
            burner.kill()
            burner.wait()
    finally:
        os.sched_setaffinity(0, allowed)
    assert done.returncode == 0, done.stderr
    rows = rows_by_student(tmp_path / "out")
    assert {n: r["status"] for n, r in rows.items()} == {"correct": "ok", "slow": "ok"}, done.stderr
    for row in rows.values():  # far inside each step's deadline (harness.lab.judge.rules.deadlines), even here
        assert set(row["deadlines"]) == {"gate_first", "probe", "gate", "warmup", "rounds"}
        assert all(w["took_s"] < w["deadline_s"] / 4 for w in row["deadlines"].values()), row["deadlines"]


@pytest.mark.slow
def test_a_cpu_hog_is_stopped_by_the_cpu_limit(tmp_path):
    lab = tmp_path / "cpu_limit.toml"
    lab.write_text(LAB.replace("cpu_s = 60", "cpu_s = 3").replace("import_s = 5", "import_s = 60"))
    (tmp_path / "subs" / "spin").mkdir(parents=True)
    (tmp_path / "subs" / "spin" / "lenet.py").write_text("while True:\n    pass\n")
    done = python("lab", "grade", str(lab), "--submissions", str(tmp_path / "subs"), "--out",
                  str(tmp_path / "out"), "--no-report")
    assert done.returncode == 0, done.stderr
    row = store.read_row(tmp_path / "out", "spin")
    assert row["status"] == "timeout" and "CPU-time limit of 3 s" in row["reason"], row


def test_a_student_checks_a_submission_before_handing_in(lab_file):
    good = python("lab", "check", str(lab_file), str(ROOT / "labs" / "examples" / "correct" / "lenet.py"))
    assert good.returncode == 0, good.stderr
    assert "Status: **ok**" in good.stdout and "× numpy" in good.stdout
    assert "rank" not in good.stdout  # one submission: no "rank 1 of 1"
    bad = python("lab", "check", str(lab_file), str(ROOT / "labs" / "template"))
    assert bad.returncode == 1 and "NotImplementedError" in bad.stdout


# A grading process up to its check of one submission, that check replaced by one that exits with
# the names of the process's threads (a module in sys.modules before the command imports it)
THREADS_AT_CHECK = """
import argparse, os, sys, types
from pathlib import Path
fake = types.ModuleType("harness.lab.term.handout.check")
def check(*args, **kwargs):
    tasks = os.listdir("/proc/self/task")
    raise SystemExit(" ".join(open(f"/proc/self/task/{t}/comm").read().strip() for t in tasks))
fake.check = check
sys.modules["harness.lab.term.handout.check"] = fake
from harness.lab.term import commands
commands.lab_check(argparse.Namespace(lab="cpu_numpy", path=Path("nowhere"), weights="w", lock_timeout=None))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenBLAS starts no threads of its own anyway")
def test_the_grader_starts_no_blas_threads_of_its_own():
    """The grader's oracle is compared, never timed: its process pins BLAS to one thread before the
    lab loads NumPy, so no spinning OpenBLAS pool takes a core from the timed worker beside it."""
    env = {k: v for k, v in os.environ.items() if k not in procenv.BLAS_THREAD_VARS}
    run = subprocess.run([sys.executable, "-c", THREADS_AT_CHECK], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1 and run.stderr.split() == ["python"], run.stderr[-2000:]
