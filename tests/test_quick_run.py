"""A quick run (`run STUDY --implementations A,B --rounds N --processes P`): the study narrowed to some
levels, written as a study file of its own, kept out of reports/results unless --out names it, and
never a machine's answer (the report's loader and the floor pass its run by)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ROOT
from harness.errors import HarnessError
from harness.measure import fastest_call
from harness.measure.plan import narrow, study
from harness.report.claims import rundata


def test_narrow_keeps_the_levels_cells_and_replaces_rounds_and_processes():
    full = study.load("api_levels")
    quick = narrow.narrow(full, ["numpy", "c"], rounds=2, processes=1)
    assert {c.implementation for c in quick.cells} == {"numpy", "c"}
    assert {c.id for c in quick.cells if c.implementation == "c"} == \
        {c.id for c in full.cells if c.implementation == "c"}  # the study's own cells of it
    assert quick.measure.rounds == 2 and {c.processes for c in quick.cells} == {1}
    assert quick.baseline == "numpy" and quick.narrowed == "implementations numpy,c; rounds 2; processes 1"
    assert study.parse(quick.source).narrowed == quick.narrowed  # its run folder's study.toml says so
    assert narrow.narrow(full, None, None, None) is full  # nothing cut: the study itself


def test_a_level_without_a_cell_gets_its_first_variant_and_the_baseline_goes_when_absent():
    quick = narrow.narrow(study.load("smoke"), ["tf"], rounds=None, processes=None)
    assert {(c.implementation, c.variant) for c in quick.cells} == {("tf", "function")}
    assert quick.baseline is None and quick.narrowed == "implementations tf"


@pytest.mark.parametrize("names, rounds, message", [
    (["nosuch"], None, r"--implementations: unknown implementation 'nosuch'"),
    (["numpy"], 0, r"--rounds: expected a whole number >= 1, found 0"),
])
def test_bad_narrowing_is_one_error(names, rounds, message):
    with pytest.raises(HarnessError, match=message):
        narrow.narrow(study.load("smoke"), names, rounds, None)


def test_a_quick_run_is_never_a_machines_answer(tmp_path):
    """Even written into a results folder: load_runs and the floor pass it by; the same run folder
    without the mark is read (so the test can fail)."""
    done = subprocess.run([sys.executable, "-m", "harness", "run", "api_levels", "--implementations",
                           "null,numpy", "--rounds", "2", "--processes", "1", "--out", str(tmp_path / "results")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "a quick run (implementations null,numpy; rounds 2; processes 1)" in done.stderr
    run_dir = next((tmp_path / "results" / "api_levels").iterdir())
    env = json.loads((run_dir / "env.json").read_text())
    assert env["narrowed"] == "implementations null,numpy; rounds 2; processes 1"
    assert rundata.load_runs(tmp_path / "results") == []
    assert fastest_call.measured_cells("cpu", tmp_path / "results") == []
    plain = tmp_path / "plain" / "api_levels" / run_dir.name  # the same rows, as a full run
    shutil.copytree(run_dir, plain)
    (plain / "env.json").write_text(json.dumps({k: v for k, v in env.items() if k != "narrowed"}))
    assert [r["run_id"] for r in rundata.load_runs(tmp_path / "plain")] == [run_dir.name]
    assert fastest_call.measured_cells("cpu", tmp_path / "plain")


def test_a_quick_run_goes_outside_reports_results_unless_asked():
    from harness import cli
    from harness.measure.cli import QUICK_OUT

    args = cli.build_parser().parse_args(["run", "smoke", "--rounds", "2"])
    assert args.out is None  # cmd_run picks QUICK_OUT for it
    assert not Path(QUICK_OUT).resolve().is_relative_to(ROOT)
    resumed = subprocess.run([sys.executable, "-m", "harness", "run", "smoke", "--resume", "--rounds", "2"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 2 and resumed.stderr.startswith("ERROR: --resume completes a run as it was planned")
