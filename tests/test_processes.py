"""Processes as a level of a study: each cell in fresh worker processes, an interval over processes
then rounds, the process-dependent mark, and `reproduce`. End to end with lab-style fakes (sleeps,
whose speed is set per process, not by the machine) and with seeded fake timers."""

import json
import os
import subprocess
import sys

import numpy as np

from harness.machine import env
from harness.measure.store import results, runfolder, stats
from harness.report.claims import reproduce, rundata, validity
from harness.reproduce import compare
from tests.conftest import ROOT
from tests.test_runner import final_rows, lab_cell, only_run, run_cli

STUDY = """
[study]
name = "{name}"
baseline = "{baseline}"
[measure]
processes = 3
rounds = 4
calls = 48
warmup = 1
{cells}
"""


def study_file(tmp_path, cells, name="p", baseline="tests.fake_impls:SleepyLeNet"):
    path = tmp_path / f"{name}.toml"
    path.write_text(STUDY.format(name=name, baseline=baseline, cells=cells))
    return path


def test_a_level_whose_speed_depends_on_the_process_gets_an_interval_over_processes_and_the_mark(tmp_path):
    draw = tmp_path / "claims"
    draw.mkdir()
    path = study_file(tmp_path, lab_cell("ProcessDrawLeNet") + lab_cell("SleepyLeNet"))
    run = run_cli(path, "--out", tmp_path / "out", env={"LENET_TEST_DRAW_DIR": str(draw)})
    assert run.returncode == 0, run.stderr
    run_dir = only_run(tmp_path / "out", "p")
    rows = final_rows(run_dir)
    drawn = rows["tests.fake_impls:ProcessDrawLeNet/default/cpu/b1/float32"]
    steady = rows["tests.fake_impls:SleepyLeNet/default/cpu/b1/float32"]
    assert sorted(p.name for p in draw.iterdir()) == ["0", "1", "2"]  # three fresh processes loaded it
    for row in (drawn, steady):
        assert row["round_process"] == [0] * 4 + [1] * 4 + [2] * 4 and row["stats"]["processes"] == 3
    st = drawn["stats"]
    medians = st["process_medians_ns"]
    assert medians[1] > 2 * max(medians[0], medians[2])  # process 1 sleeps 3 ms, the others 1 ms
    assert st["ci95_low_ns"] <= min(medians) and max(medians) <= st["ci95_high_ns"]
    assert st["drawn"] and any(w.startswith("process-dependent") for w in drawn["warnings"])
    assert not steady["stats"]["drawn"] and not any("process-dependent" in w for w in steady["warnings"])
    setups = [r for r in results.read_rows(run_dir) if r["kind"] == "setup"]
    assert sorted(r["process"] for r in setups) == [0, 0, 1, 1, 2, 2] and len({r["pid"] for r in setups}) == 6
    # the report: the mark, and DETAILS' line with each process's median
    frame = rundata.cells_frame(rundata.load_runs(tmp_path / "out"))
    marked = frame.set_index("cell_id")["process-dependent"]
    assert marked["tests.fake_impls:ProcessDrawLeNet/default/cpu/b1/float32"]
    assert not marked["tests.fake_impls:SleepyLeNet/default/cpu/b1/float32"]
    text = "\n".join(validity.draws_section(frame))
    assert "ProcessDrawLeNet" in text and "in 3 processes" in text and "SleepyLeNet" not in text


def fake_process_rounds(seed, speeds, rounds=4, calls=30, jitter=0.02):
    """Seeded fake timer: `rounds` rounds in each process, each process at its own speed."""
    rng = np.random.default_rng(seed)
    times = [list(rng.normal(s, s * jitter, calls)) for s in speeds for _ in range(rounds)]
    return times, [p for p in range(len(speeds)) for _ in range(rounds)]


def test_hierarchical_interval_holds_every_process_median_and_marks_only_a_real_draw():
    times, processes = fake_process_rounds(1, [27.3e3, 27.8e3, 39.7e3])  # the oneDNN
    st = stats.summarize(times, processes)
    assert st["ci95_low_ns"] <= min(st["process_medians_ns"]) and max(st["process_medians_ns"]) <= st["ci95_high_ns"]
    assert st["drawn"] and st["within_ci95_high_ns"] < 39e3 and not st["noisy"]
    quiet = [stats.summarize(*fake_process_rounds(seed, [100e3] * 3))["drawn"] for seed in range(40)]
    assert sum(quiet) <= 2  # the rounds' own noise is not a draw


def test_the_pooled_median_of_a_resample_is_the_median_of_its_pool_exactly():
    """Rounds of unequal lengths with tied values; each resample takes some rounds several times and
    some not at all: its median, found from the counts alone, is np.median of the pool built."""
    rng = np.random.default_rng(5)
    rounds = [np.round(rng.normal(100, 5, n)) for n in (1, 2, 7, 8, 30)]
    counts = rng.integers(0, 4, (200, len(rounds)))
    counts[counts.sum(axis=1) == 0, 0] = 1  # a resample takes at least one round
    pools = [np.concatenate([r for r, c in zip(rounds, row, strict=True) for _ in range(c)]) for row in counts]
    assert list(stats._pooled_medians_by_counts(rounds, counts)) == [np.median(pool) for pool in pools]


def test_one_process_gives_the_cluster_bootstrap_of_before():
    times, _ = fake_process_rounds(2, [1e6], rounds=10)
    one = stats.summarize(times)
    assert (one["ci95_low_ns"], one["ci95_high_ns"]) == stats.bootstrap_rounds_median_ci(times)
    assert one["processes"] == 1 and not one["drawn"] and one["ci_method"] == "cluster bootstrap over rounds"
    assert stats.summarize(times, [0] * 10)["ci95_low_ns"] == one["ci95_low_ns"]


def test_within_round_ratio_over_processes_holds_each_process_ratio():
    a, pa = fake_process_rounds(3, [2e6, 2e6, 4e6])
    b, pb = fake_process_rounds(4, [1e6, 1e6, 1e6])
    r = stats.round_ratio(a, b, processes_a=pa, processes_b=pb)
    assert r["processes"] == 3 and r["ci95_low"] <= min(r["process_ratios"])
    assert max(r["process_ratios"]) <= r["ci95_high"] and r["ci95_high"] > 3.5


def cell_row(cell_id, implementation, rounds_ns, processes):
    spec = {"implementation": implementation, "variant": "default", "device": "cpu", "batch_size": 1,
            "dtype": "float32"}
    return {"kind": "cell", "cell_id": cell_id, "cell": spec, "status": "ok", "rounds_ns": rounds_ns,
            "round_process": processes}


def test_compare_reports_the_shares_it_should():
    base_a, pa = fake_process_rounds(5, [1e6] * 3)
    same, ps = fake_process_rounds(6, [2e6] * 3)
    moved, pm = fake_process_rounds(7, [3e6] * 3)
    reference = [cell_row("base", "base", base_a, pa), cell_row("same", "x", same, ps),
                 cell_row("moved", "y", same, ps)]
    base_b, pb = fake_process_rounds(8, [1e6] * 3)
    again, pg = fake_process_rounds(9, [2e6] * 3)
    new = [cell_row("base", "base", base_b, pb), cell_row("same", "x", again, pg),
           cell_row("moved", "y", moved, pm)]
    result = compare.compare(reference, new, "base")
    by = {c["cell_id"]: c for c in result["cells"]}
    assert by["same"]["median_inside"] and by["same"]["ratio_inside"] and by["same"]["ratios_overlap"]
    assert by["moved"]["median_inside"] is False and by["moved"]["ratio_inside"] is False
    assert by["base"]["ratio_inside"] is None  # the baseline has no ratio to itself
    assert result["shares"]["median_inside"] == [2, 3] and result["shares"]["ratio_inside"] == [1, 2]
    assert result["shares"]["medians_overlap"] == [2, 3] and result["shares"]["ratios_overlap"] == [1, 2]
    text = "\n".join(compare.lines(result))
    assert "new medians inside the reference's 95% interval: 2 of 3 (67%)" in text


def test_reproduce_reruns_a_study_and_writes_its_shares_as_a_row(tmp_path):
    """The reference run is written by hand with known intervals: the sleepy cell's wide around its
    2 ms, the other's far from it, so the second run's shares are known whatever the machine's speed."""
    cells = lab_cell("SleepyLeNet") + lab_cell("SleepyLeNet").replace("SleepyLeNet", "SleepyTwinLeNet")
    text = STUDY.format(name="r", baseline="tests.fake_impls:SleepyLeNet", cells=cells)
    ref_dir = tmp_path / "res" / "r" / "20000101-000000-ref"
    ref_dir.mkdir(parents=True)
    (ref_dir / "study.toml").write_text(text)
    (ref_dir / "env.json").write_text(json.dumps(env.collect_identity()))
    labels = [p for p in range(3) for _ in range(4)]
    near = [[2e6 * f] * 4 for f in np.linspace(0.5, 3.0, 12)]  # an interval from 1 to 6 ms around 2 ms
    far = [[100e6 + 1e5 * i] * 4 for i in range(12)]  # about 100 ms: far from a 2 ms sleep
    rows = [cell_row("tests.fake_impls:SleepyLeNet/default/cpu/b1/float32", "tests.fake_impls:SleepyLeNet",
                     near, labels),
            cell_row("tests.fake_impls:SleepyTwinLeNet/default/cpu/b1/float32",
                     "tests.fake_impls:SleepyTwinLeNet", far, labels)]
    (ref_dir / "results.jsonl").write_text("".join(json.dumps({"schema": 1, "run_id": ref_dir.name, "time": 1.0, **r}) + "\n" for r in rows))
    runfolder.mark_complete(ref_dir, "a test's reference run")
    run = run_cli_reproduce(tmp_path / "study.toml", text, tmp_path / "res")
    assert run.returncode == 0, run.stderr
    assert "new medians inside the reference's 95% interval: 1 of 2 (50%)" in run.stdout
    assert "new within-round ratios inside the reference's interval: 0 of 1 (0%)" in run.stdout
    (folder,) = (tmp_path / "res" / "reproduce").iterdir()
    (row,) = results.read_rows(folder)
    assert row["kind"] == "reproduce" and row["reference_run"] == "20000101-000000-ref"
    assert row["shares"]["median_inside"] == [1, 2] and (folder / "env.json").is_file()
    assert list(folder.glob("r/*/results.jsonl.gz"))  # the second run's own rows: pooled, never the newest run
    runs = rundata.latest_runs(rundata.load_runs(tmp_path / "res"))
    (rerun,) = [r for r in rundata.load_runs(tmp_path / "res", reruns=True) if r["rerun"]]
    assert rerun["study"] == "r" and rerun["run_id"] == folder.name
    assert [r["run_id"] for r in rundata.latest_runs([*runs, rerun]) if r["study"] == "r"] == ["20000101-000000-ref"]
    frame = rundata.load(tmp_path / "res")[1]  # the reference recorded no code (no provenance): its own result
    assert set(frame["run_id"]) == {"20000101-000000-ref"} and frame["runs"].max() == 1
    details = "\n".join(reproduce.section(runs))
    assert "against `20000101-000000-ref`" in details and "1 of 2 (50%)" in details


def run_cli_reproduce(path, text, results_dir):
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "harness", "reproduce", str(path), "--results",
                           str(results_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
