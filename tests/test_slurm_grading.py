"""Grading on Slurm without a cluster: the batch scripts (dry run), arrays split at MaxArraySize,
the pass-through options checked, the merge's task for a student, and the per-student claim that
holds on a shared filesystem (two graders, a stale owner, a requeued owner)."""

import json
import os
import subprocess
import sys
import threading

import pytest

from harness.errors import HarnessError
from harness.lab.judge import claim, slurm, slurm_task, store
from tests.conftest import ROOT

LAB = """
[lab]
name = "test_cpu"
references = ["numpy"]
[limits]
wall_s = 60
memory_mb = 1024
"""


def test_a_class_larger_than_max_array_size_is_split():
    assert slurm.arrays(25, 10) == [(0, 10), (10, 10), (20, 5)]
    assert slurm.arrays(10, 10) == [(0, 10)]
    assert slurm.arrays(1, 1001) == [(0, 1)]
    with pytest.raises(HarnessError, match="MaxArraySize"):
        slurm.arrays(3, 0)


def test_each_student_of_a_round_is_found_in_its_task():
    plan = {"students": [f"s{i}" for i in range(25)], "per_task": 2,
            "arrays": [{"job": "7", "first": 0, "count": 10}, {"job": "9", "first": 10, "count": 3}]}
    assert slurm_task.where_task(plan, 0) == ("7", 0)
    assert slurm_task.where_task(plan, 19) == ("7", 9)
    assert slurm_task.where_task(plan, 20) == ("9", 0)
    assert slurm_task.where_task(plan, 24) == ("9", 2)


@pytest.mark.parametrize("field,value,words", [
    ("per_task", 0, "--per-task: expected a whole number >= 1, found 0"),
    ("max_parallel", -2, "--max-parallel"),
    ("cpus_per_task", 0, "--cpus-per-task"),
    ("time", "ten", "--time: expected minutes or [D-]HH:MM[:SS]"),
])
def test_bad_options_are_refused_by_name(field, value, words):
    with pytest.raises(HarnessError) as caught:
        slurm.Options(**{field: value}).check()
    assert words in str(caught.value)


def test_dry_run_prints_the_batch_scripts_with_the_pass_through(tmp_path):
    (tmp_path / "lab.toml").write_text(LAB)
    for name in ("ann", "bob", "cy"):
        (tmp_path / "subs" / name).mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "harness", "lab", "grade", str(tmp_path / "lab.toml"),
                           "--submissions", str(tmp_path / "subs"), "--out", str(tmp_path / "o"), "--slurm",
                           "--max-parallel", "3", "--per-task", "2", "--partition", "gpu", "--gres", "gpu:1",
                           "--account", "cs101", "--qos", "normal", "--constraint", "a100", "--dry-run"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    minutes = -(-(2 * 60 * slurm.TIME_HEADROOM + slurm.SETUP_S) // 60)
    for line in (f"#SBATCH --time={minutes:.0f}", "#SBATCH --mem=3072M", "#SBATCH --gres=gpu:1",
                 "#SBATCH --partition=gpu", "#SBATCH --account=cs101", "#SBATCH --qos=normal",
                 "#SBATCH --constraint=a100", "#SBATCH --cpus-per-task=2", "#SBATCH --requeue",
                 f"#SBATCH --signal=B:USR1@{slurm.SIGNAL_BEFORE_S}", "#SBATCH --dependency=afterany:$ARRAY_JOBS",
                 "lab merge", "lab task", "2 tasks of up to 2", "sbatch --array=0-1%3 task.sh 0", "trap requeue USR1"):
        assert line in done.stdout, line
    assert not (tmp_path / "o" / "slurm").exists()


def test_a_claim_is_one_graders_and_a_stale_one_is_taken_over(tmp_path):
    out = tmp_path / "out"
    assert claim.take(out, "ann", "10_1", alive=lambda owner: True)
    assert claim.take(out, "ann", "10_1", alive=lambda owner: True)  # the same task, requeued: still its own
    assert not claim.take(out, "ann", "11_0", alive=lambda owner: True)  # 10_1 still runs
    assert claim.holder(out, "ann") == "10_1"
    assert claim.take(out, "ann", "11_0", alive=lambda owner: owner != "10_1")  # 10_1 is gone: stale
    assert claim.holder(out, "ann") == "11_0"
    claim.release(out, "ann", "10_1")  # no longer 10_1's: kept
    assert claim.holder(out, "ann") == "11_0"
    claim.release(out, "ann", "11_0")
    assert claim.holder(out, "ann") is None
    assert sorted(p.name for p in store.result_dir(out, "ann").iterdir()) == []


def test_of_many_graders_racing_for_a_stale_claim_exactly_one_wins(tmp_path):
    out = tmp_path / "out"
    claim.take(out, "ann", "dead", alive=lambda owner: True)
    won = []
    start = threading.Barrier(8)

    def race(i: int) -> None:
        start.wait()
        if claim.take(out, "ann", f"20_{i}", alive=lambda owner: owner != "dead"):
            won.append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1, won
    assert claim.holder(out, "ann") == f"20_{won[0]}"
    assert json.loads((store.result_dir(out, "ann") / claim.CLAIM).read_text())["owner"] == f"20_{won[0]}"


def test_a_claim_of_a_process_here_that_ended_is_stale(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True).stdout.strip()
    import socket

    assert not claim.alive_on_slurm(f"{socket.gethostname()}:{ended}")
    assert claim.alive_on_slurm(f"{socket.gethostname()}:{os.getpid()}")
    assert claim.alive_on_slurm("another-host:1")  # only that host can say: never broken on a guess


def test_each_machine_type_is_ranked_on_its_own():
    """A class timed on two kinds of node: each kind ranked apart, both named above the table; the
    Slurm node (several share a host) named in each row."""
    from harness.lab.judge.rules import assignment
    from harness.lab.term.marks import leaderboard
    from tests import lab_rows

    a100 = {"key": "k-a100", "name": "NVIDIA A100 / Xeon (AVX-512, L3 55 MiB)"}
    h100 = {"key": "k-h100", "name": "NVIDIA H100 / Xeon (AVX-512, L3 105 MiB)"}
    rows = []
    for name, ratio, kind, node in (("ann", 1.2, a100, "gpu-a1"), ("bob", 2.0, a100, "gpu-a2"),
                                    ("cy", 1.5, h100, "gpu-h1"), ("dee", 3.0, h100, "gpu-h1")):
        row = lab_rows.ok_row(name, ratio, ratio * 0.98, ratio * 1.02, 40)
        row["node"] = {**row["node"], "machine_type": kind, "slurm": {"node": node}}
        rows.append(row)
    placed = [(rank, row["student"]) for rank, row in leaderboard.ranked(rows)]
    assert placed == [(1, "ann"), (2, "bob"), (1, "cy"), (2, "dee")]
    board = leaderboard.markdown(rows, assignment.load(str(lab_rows.LAB)))
    assert "Timed on 2 machine types, each ranked on its own" in board
    assert a100["name"] in board and h100["name"] in board and "gpu-h1: " in board
    one = [dict(r, node={**r["node"], "machine_type": a100}) for r in rows]
    assert [rank for rank, _ in leaderboard.ranked(one)] == [1, 2, 3, 4]  # one type: one ranking


def test_the_benchmarks_class_and_its_one_row_check(tmp_path):
    from harness.lab.term import bench
    from tests import lab_rows

    expected = bench.make_class(tmp_path / "class", 100)
    kinds = {name.split("-")[0] for name in expected}
    assert len(expected) == 100 and kinds == {"honest", "wrong", "slow", "hang", "crash"}
    assert sum(s == "ok" for s in expected.values()) == 100 - 4 - 2 - 2  # 4 wrong, 2 hang, 2 crash; slow is ok
    assert sorted(p.name for p in (tmp_path / "class").iterdir()) == sorted(expected)
    assert len(bench.make_class(tmp_path / "small", 3)) == 3  # too few for the odd ones: all honest
    rows = [lab_rows.ok_row("ann", 1.1, 1.0, 1.2, 40), {**lab_rows.failed_row("bob", "cancelled", "x"),
                                                          "from_merge": True},
            lab_rows.ok_row("zed", 1.1, 1.0, 1.2, 40)]
    out = lab_rows.graded(tmp_path / "out", rows)
    assert bench.one_row_each(out, ["ann", "bob", "cy"]) == [
        "cy: no row", "bob: no result (cancelled: x)", "zed: a row, but not a student of the class"]
    result = {"students": 100, "graded_s": 300.0, "setup_s": 10.0}
    assert bench.projection(result, 1, 10) == 400.0  # 300 s of submissions + 10 tasks x 10 s
    assert bench.projection(result, 4, 10) == 100.0


@pytest.mark.slurm
def test_a_class_larger_than_the_clusters_max_array_size_is_submitted_as_several_arrays(tmp_path):
    """The local Slurm's MaxArraySize is 10 (scripts/slurm-local.sh): 12 tasks are two arrays."""
    import shutil

    if not shutil.which("sbatch") or slurm.max_array_size() != 10:
        pytest.skip("needs the local Slurm (MaxArraySize=10): sudo scripts/slurm-local.sh start --nodes 3")
    (tmp_path / "lab.toml").write_text(LAB)
    for i in range(12):
        (tmp_path / "subs" / f"s{i:02d}").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "harness", "lab", "grade", str(tmp_path / "lab.toml"),
                           "--submissions", str(tmp_path / "subs"), "--out", str(tmp_path / "o"), "--slurm",
                           "--dry-run"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "# sbatch --array=0-9 task.sh 0" in done.stdout and "# sbatch --array=0-1 task.sh 10" in done.stdout
