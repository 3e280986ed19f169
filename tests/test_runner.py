"""The runner end to end, as a user runs it (subprocesses), with the null implementation and
small lab-style fakes: a worker killed mid-run, a worker that hangs, resume, no overwrite."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.measure.store import results
from tests.conftest import ROOT

STUDY = """
[study]
name = "{name}"
baseline = "null"
[measure]
calls = {calls}
rounds = {rounds}
warmup = 2
timeout_s = {timeout}
[[cells]]
implementation = "null"
devices = ["cpu"]
{extra}
"""


def write_study(tmp_path, name="t", calls=40, rounds=4, timeout=60, extra=""):
    path = tmp_path / f"{name}.toml"
    path.write_text(STUDY.format(name=name, calls=calls, rounds=rounds, timeout=timeout, extra=extra))
    return path


def lab_cell(path):
    return f'[[cells]]\nimplementation = "tests.fake_impls:{path}"\n'


def run_cli(*args, timeout=120, env=None):
    return subprocess.run([sys.executable, "-m", "harness", "run", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def final_rows(run_dir):
    return {r["cell_id"]: r for r in results.read_rows(run_dir) if r["kind"] == "cell"}


def only_run(out, name="t"):
    (run_dir,) = (out / name).iterdir()
    return run_dir


def test_smoke_study_with_null_overhead(tmp_path):
    run = run_cli("smoke", "--out", tmp_path)
    assert run.returncode == 0, run.stderr
    run_dir = only_run(tmp_path, "smoke")
    rows = final_rows(run_dir)
    null = rows["null/default/cpu/b1/float32"]
    assert null["status"] == "ok" and null["schema"] == results.SCHEMA_VERSION
    assert sum(len(r) for r in null["rounds_ns"]) == 100 and len(null["rounds_ns"]) == 6
    assert null["round_process"] == [0, 0, 0, 1, 1, 1]  # two fresh processes, three rounds each
    assert null["stats"]["n"] == 100 and null["setup"]["cold_start_ns"] > 0
    assert rows["numpy/default/cpu/b1/float32"]["stats"]["median_ns"] > null["stats"]["median_ns"]
    env = json.loads((run_dir / "env.json").read_text())
    assert env["cpu_count"] >= 1 and "numpy" in env["packages"]
    assert env["threads"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "[  1/12" in run.stderr and "ETA" in run.stderr  # progress per cell


def test_crashing_worker_is_recorded_and_the_study_goes_on(tmp_path):
    path = write_study(tmp_path, extra=lab_cell("CrashingLeNet"))
    run = run_cli(path, "--out", tmp_path, env={"LENET_TEST_CRASH_AT": "20"})
    assert run.returncode == 0, run.stderr
    rows = final_rows(only_run(tmp_path))
    crashed = rows["tests.fake_impls:CrashingLeNet/default/cpu/b1/float32"]
    assert crashed["status"] == "crashed" and "exited with code 9" in crashed["reason"]
    assert crashed["rounds_ns"]  # rounds measured before the crash are kept
    assert rows["null/default/cpu/b1/float32"]["status"] == "ok"
    assert len(rows["null/default/cpu/b1/float32"]["rounds_ns"]) == 4


def test_a_fault_is_named_and_the_groups_next_cell_gets_a_fresh_worker(tmp_path):
    """A cell whose worker ends on a GPU fault (gpu_fault's line and exit code) is `fault`, named by
    the error; the next cell of its group (same worker) is loaded again in a fresh worker and measured."""
    cell = '[[cells]]\nimplementation = "tests.fake_impls:FaultingLeNet"\nvariants = ["good", "bad"]\n'
    path = write_study(tmp_path, rounds=2, extra=cell)
    run = run_cli(path, "--out", tmp_path, env={"LENET_TEST_FAULT_AT": "5"})  # in its first round
    assert run.returncode == 0, run.stderr
    rows = final_rows(only_run(tmp_path))
    bad = rows["tests.fake_impls:FaultingLeNet/bad/cpu/b1/float32"]
    assert bad["status"] == "fault" and bad["reason"].startswith(
        "cudaErrorIllegalAddress (700) in a test's kernel (worker exited with code 86")
    good = rows["tests.fake_impls:FaultingLeNet/good/cpu/b1/float32"]
    assert good["status"] == "ok" and len(good["rounds_ns"]) == 2
    setups = [r for r in results.read_rows(only_run(tmp_path)) if r["kind"] == "setup"
              and r["cell_id"].startswith("tests.fake_impls:FaultingLeNet/good")]
    assert len({r["pid"] for r in setups}) == 2  # loaded in the first worker, then in a fresh one
    assert bad["rounds_ns"] == []  # its one round ended in the fault


def test_a_hang_is_recorded_as_hung(tmp_path):
    cell = '[[cells]]\nimplementation = "tests.fake_impls:FaultingLeNet"\nvariants = ["bad"]\n'
    path = write_study(tmp_path, rounds=2, extra=cell)
    run = run_cli(path, "--out", tmp_path, env={"LENET_TEST_FAULT_KIND": "hung"})
    assert run.returncode == 0, run.stderr
    bad = final_rows(only_run(tmp_path))["tests.fake_impls:FaultingLeNet/bad/cpu/b1/float32"]
    assert bad["status"] == "hung" and "still running 0.1 s" in bad["reason"]


def test_worker_killed_from_outside_mid_run(tmp_path):
    """The gated cell blocks in its third round until tmp_path/gate exists, so it is surely
    mid-run when its worker is killed, however fast or loaded the machine is."""
    path = write_study(tmp_path, calls=1000, rounds=10, extra=lab_cell("GatedLeNet"))
    env = {**os.environ, "LENET_TEST_GATE": str(tmp_path / "gate"), "LENET_TEST_GATE_AFTER": "250"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(path), "--out", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    victim = None
    deadline = time.monotonic() + 120  # a guard against a broken harness, not a timing check
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        runs = list((tmp_path / "t").glob("*/results.jsonl"))
        rows = results.read_rows(runs[0].parent) if runs else []
        victim = next((r["pid"] for r in rows if r["kind"] == "round"
                       and r["cell_id"].startswith("tests.fake_impls:GatedLeNet")), None)
    assert victim, "the gated cell never completed a round"
    os.kill(victim, signal.SIGKILL)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    rows = final_rows(only_run(tmp_path))
    killed = rows["tests.fake_impls:GatedLeNet/default/cpu/b1/float32"]
    assert killed["status"] == "crashed" and "SIGKILL" in killed["reason"], killed["reason"]
    assert 1 <= len(killed["rounds_ns"]) <= 2  # 250 calls: two rounds of 100, the third blocked
    null = rows["null/default/cpu/b1/float32"]
    assert null["status"] == "ok" and len(null["rounds_ns"]) == 10


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One finished run, t/done, that the two tests below try to change (neither may):
    (study file, --out folder, its compressed rows)."""
    out = tmp_path_factory.mktemp("finished")
    path = write_study(out)
    assert run_cli(path, "--out", out, "--run-id", "done").returncode == 0
    return path, out, out / "t" / "done" / "results.jsonl.gz"


def test_existing_run_folder_is_never_overwritten(finished_run):
    path, out, rows_path = finished_run
    before = rows_path.read_bytes()
    again = run_cli(path, "--out", out, "--run-id", "done")
    assert again.returncode == 2
    assert "run folder exists; refusing to overwrite" in again.stderr and "--resume" in again.stderr
    assert rows_path.read_bytes() == before


def test_resume_of_a_finished_run_redoes_nothing(finished_run):
    _, out, rows_path = finished_run
    before = rows_path.read_bytes()
    run = run_cli("t", "--out", out, "--resume")
    assert run.returncode == 0 and "1 of 1 cells already finished" in run.stderr
    assert rows_path.read_bytes() == before


def test_the_cli_builds_its_parser_without_the_plotting_and_table_libraries():
    """Every `python -m harness` (each runner, each test's child) builds the whole parser: the
    figures' and the report's matplotlib and pandas are imported only by the commands that draw."""
    code = ("import sys; from harness import cli; cli.build_parser(); "
            "print(sorted({'matplotlib', 'pandas'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
