"""The CPU's floor (harness/explain/c_layers.py, harness/report/sections/cpu_floor.py, the C rung's targets in
harness/report/sections/cpu_targets.py): `python -m harness arithmetic` writes the measured peak and the C call
by layer as a row (or why it could not); the report's every claim about it follows the rows: the
floor, where the rest goes, the host goal judged only where it was set, the speed-ups within rounds."""

import os
import shutil

import numpy as np
import pytest

from harness import cli
from harness.measure.store import results
from harness.report.claims import rundata
from harness.report.claims.rundata import ReportData
from harness.report.markup.tables import fmt_ratio, inverse, speedup_verdict
from harness.report.sections import cpu_floor, cpu_targets
from harness.report.sections.findings import comparison

PEAK = {"isa": "avx512", "lanes": 16, "macs_per_s": 60e9}
needs_cc = pytest.mark.skipif(not (shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")),
                              reason="no C compiler on this machine: the C level cannot build")


def row(**changes) -> dict:
    """An arithmetic row at 60 G MAC/s: conv2 at the peak, conv1 1 µs above it, fc1 0.2 µs above;
    each floor at the row's peak, as harness.explain.c_layers.split writes it."""
    rate = changes.get("peak", PEAK)["macs_per_s"]
    stages = [{"name": "input", "macs": 0, "median_ns": 100.0},
              {"name": "conv1", "macs": 120_000, "median_ns": 3_000.0},
              {"name": "conv2", "macs": 240_000, "median_ns": 4_000.0},
              {"name": "fc1", "macs": 48_000, "median_ns": 1_000.0}]
    for s in stages:
        s.update(floor_ns=s["macs"] / rate * 1e9)
        s.update(share=s["floor_ns"] / s["median_ns"])
    base = {"kind": "arithmetic", "implementation": "c", "variant": "fused", "device": "cpu", "status": "ok",
            "path": "avx512", "calls": 100, "rounds": 5, "peak": PEAK, "stages": stages, "macs": 408_000,
            "call_median_ns": 8_500.0, "share": 408_000 / rate * 1e9 / 8_500, "floor_ns": 408_000 / rate * 1e9}
    return {**base, **changes}


def test_the_floor_is_the_multiply_adds_at_the_measured_peak_and_the_gaps_are_sorted():
    assert cpu_floor.floor_ns(row()) == pytest.approx(6_800)
    gaps = cpu_floor.gaps(row())
    assert [name for name, _ in gaps[:3]] == ["conv1", "fc1", "input"]
    assert gaps[0][1] == pytest.approx(1_000) and gaps[1][1] == pytest.approx(200)
    assert dict(gaps)["conv2"] == 0  # at the probe's peak: no gap, never a negative one


def test_the_host_goal_is_judged_only_on_the_host_it_was_set_for():
    fast, slow = ({"median_ms": 0.005}, {"median_ms": 0.0075})
    assert cpu_floor.host_goal_line(row(), "Intel(R) Xeon(R) Platinum", fast).endswith("met (1 µs under).")
    assert "missed by 1.5 µs (1.2x the goal)" in cpu_floor.host_goal_line(row(), "Intel(R) Xeon(R)", slow)
    amd = cpu_floor.host_goal_line(row(), "AMD EPYC 9R14", fast)
    assert "not judged here, since this machine is AMD EPYC 9R14" in amd
    assert "its own arithmetic floor is 6.8 µs" in amd and "above the goal" in amd  # 6.8 > 6: computed
    quick = row(peak={**PEAK, "macs_per_s": 120e9})
    assert "its own arithmetic floor is 3.4 µs at its measured peak, under the goal" in \
        cpu_floor.host_goal_line(quick, "AMD EPYC", fast)


def test_the_method_line_gives_the_arithmetic_at_the_measured_peak_only_from_an_ok_row():
    assert cpu_floor.peak(row()) == {"gmacs": 60.0, "isa": "avx512", "floor_ns": pytest.approx(6_800)}
    assert cpu_floor.peak(None) is None
    assert cpu_floor.peak({"status": "unavailable", "reason": "no compiler"}) is None


@pytest.fixture(scope="module")
def committed(committed_report):
    """The committed results (runs, frame: the session's one read) and the machine of their ok C
    cells: no test changes them (a test that needs another frame copies it)."""
    runs, frame = committed_report.runs, committed_report.frame
    hand = frame[(frame["study"] == "api_levels") & (frame["label"] == cpu_targets.C_LEVEL)
                 & (frame["status"] == "ok")]
    return runs, frame, hand["machine"].iloc[0]


def test_the_speedups_are_within_round_ratios_and_say_what_a_miss_would_need(committed):
    _, frame, machine = committed
    line = cpu_targets.c_speedup_lines(frame, machine)[0]
    hand = rundata.find(frame, "api_levels", "c/fused", machine=machine)
    engine = cpu_targets.fastest_engine(frame, machine)
    onnx = frame[(frame["study"] == "api_levels") & (frame["implementation"] == "onnx")
                 & (frame["machine"] == machine) & (frame["status"] == "ok") & (frame["batch_size"] == 1)]
    assert engine["median_ms"] == onnx["median_ms"].min()
    for label, rival in (("onednn/tuned", rundata.find(frame, "api_levels", "onednn/tuned", machine=machine)),
                         (engine["label"], engine)):
        r = inverse(rundata.ratio_ci(hand, rival))  # the headline's ratio read the other way: one number
        said = line.split(f"{label} ")[1].removeprefix("(the fastest engine variant) ")
        verdict = speedup_verdict(r, cpu_targets.C_SPEEDUP)
        assert said.startswith(f"takes {fmt_ratio(r)}x its time ({verdict}")
        if verdict == "missed":
            assert said.split("(missed", 1)[1].startswith(": c/fused would need")
    quicker = frame.copy()
    mask = (quicker["label"] == "c/fused") & (quicker["machine"] == machine) & (quicker["study"] == "api_levels")
    quicker.loc[mask, "rounds_ns"] = quicker.loc[mask, "rounds_ns"].map(lambda rs: [[x / 10 for x in r] for r in rs])
    assert cpu_targets.c_speedup_lines(quicker, machine)[0].count("(met)") == 2  # 10x faster: both met


def test_the_section_reads_the_arithmetic_row_of_the_machine_that_answers(committed):
    runs, frame, machine = committed
    answer = frame[(frame["study"] == "api_levels") & (frame["machine"] == machine)]["run_id"].iloc[0]
    data = ReportData(runs=runs, frame=frame, loc_rows=[], history=frame, answer={"cpu": answer})
    found = cpu_floor.row_of(cpu_floor.arithmetic_run(runs, machine))
    text = "\n".join(cpu_floor.section(data))
    if found is None:
        assert "No `arithmetic` run on" in text
        return
    assert f"**{found['peak']['macs_per_s'] / 1e9:.1f} G multiply-adds/s**" in text
    assert "| conv2 | 240,000 |" in text and "Where the rest goes" in text and "Target c/fused" in text
    elsewhere = [{**r, "machine": "other"} if r["study"] == "arithmetic" else r for r in runs]
    text = "\n".join(cpu_floor.section(ReportData(runs=elsewhere, frame=frame, loc_rows=[], history=frame,
                                                  answer={"cpu": answer})))
    assert f"No `arithmetic` run on {machine} yet" in text  # another machine's peak is never this one's


@needs_cc
def test_the_command_writes_the_peak_and_the_split_as_a_row(tmp_path, capsys):
    assert cli.main(["arithmetic", "--calls", "20", "--rounds", "2", "--processes", "3",
                     "--out", str(tmp_path)]) == 0
    [run_dir] = tmp_path.glob("arithmetic/*/")
    [found] = results.read_rows(run_dir)
    assert found["status"] == "ok" and found["rounds"] == 2 and found["peak"]["macs_per_s"] > 0
    calls = [p["call_median_ns"] for p in found["processes"]]
    assert len(calls) == 3 and calls == sorted(calls) and found["call_median_ns"] == calls[1]  # the median
    assert [s["name"] for s in found["stages"]] == ["input", "conv1", "conv2", "fc1", "fc2", "fc3"]
    assert all(len(s["rounds_ns"]) == 2 and s["median_ns"] == np.median(s["rounds_ns"]) for s in found["stages"])
    assert found["macs"] == 416_520 and "| conv2 | 240,000 |" in capsys.readouterr().out


def test_without_a_compiler_the_row_says_why_and_the_section_too(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")  # the measuring processes inherit it
    assert cli.main(["arithmetic", "--calls", "5", "--rounds", "1", "--processes", "1",
                     "--out", str(tmp_path)]) == 0
    [run_dir] = tmp_path.glob("arithmetic/*/")
    [found] = results.read_rows(run_dir)
    assert found["status"] == "unavailable" and "apt install gcc" in found["reason"]
    runs = rundata.load_runs(tmp_path)
    data = ReportData(runs=runs, frame=rundata.cells_frame([]), loc_rows=[], history=rundata.cells_frame([]),
                      answer={"cpu": None})
    machine = runs[0]["machine"]
    lines = cpu_floor.section(data)  # no api_levels run here: the machine is not known
    assert "No `arithmetic` run on the machine that answers" in lines[-1]
    assert cpu_floor.row_of(cpu_floor.arithmetic_run(runs, machine))["status"] == "unavailable"


def test_bad_counts_are_an_error_naming_them(capsys):
    assert cli.main(["arithmetic", "--calls", "0"]) == 2
    assert "--calls, --rounds and --processes: expected positive numbers, found 0, 5 and 3" in \
        capsys.readouterr().err


def test_the_numba_rung_stands_beside_the_c_within_rounds_with_what_it_needed(committed):
    _, frame, machine = committed
    c_cell = rundata.find(frame, "api_levels", "c/fused", machine=machine)
    numba = rundata.find(frame, "api_levels", "numba/fused", machine=machine)
    [line] = cpu_floor.numba_lines(frame, machine, c_cell)
    r = rundata.ratio_ci(numba, c_cell)
    assert f"{r['ratio']:.3g}" in line and "x the C's time within rounds" in line and "noalias" in line
    assert cpu_floor.numba_lines(frame, "another machine", c_cell) == []


def test_a_speedup_is_met_missed_or_undecided_by_its_whole_interval():
    r = {"ratio": 2.8, "ci95_low": 2.5, "ci95_high": 3.1}
    assert speedup_verdict(r, 3) == "undecided"
    assert speedup_verdict({**r, "ci95_high": 2.9}, 3) == "missed"
    assert speedup_verdict({**r, "ratio": 3.2, "ci95_low": 3.0, "ci95_high": 3.4}, 3) == "met"
    assert speedup_verdict({**r, "ci95_low": float("nan"), "ci95_high": float("nan")}, 3) == "missed"


def test_the_target_and_the_finding_quote_one_number_for_one_ratio(committed):
    _, frame, machine = committed
    hand = rundata.find(frame, "api_levels", "c/fused", machine=machine)
    onednn = rundata.find(frame, "api_levels", "onednn/tuned", machine=machine)
    r = rundata.ratio_ci(hand, onednn)
    target = cpu_targets.c_speedup_lines(frame, machine)[0]
    finding = comparison(r)  # the finding reads the same ratio the same way: one number
    assert f"onednn/tuned takes {fmt_ratio(inverse(r))}x" in target
    assert finding["verdict"] == "slower" and fmt_ratio(finding["ratio"]) == fmt_ratio(inverse(r))


def test_a_contended_measurement_is_marked_with_its_reason():
    runs = [{"study": "api_levels", "machine": "m", "started": 1.0, "order": 1.0, "run_id": "x", "env": {},
             "rows": []},
            {"study": "arithmetic", "machine": "m", "started": 2.0, "order": 2.0, "run_id": "y", "env": {"cpu": "AMD EPYC"},
             "rows": [row(contended="other processes used 0.90 cores (> 0.25): make (7) 0.90")]}]
    empty = rundata.cells_frame([])
    text = "\n".join(cpu_floor.section(ReportData(runs=runs, frame=empty, loc_rows=[], history=empty,
                                                  answer={"cpu": "x"})))
    assert "the CPU's arithmetic floor. *contended*: other processes used 0.90 cores" in text
    runs[1]["rows"] = [row(contended=None)]
    assert "*contended*" not in "\n".join(cpu_floor.section(ReportData(runs=runs, frame=empty, loc_rows=[],
                                                                       history=empty, answer={"cpu": "x"})))


def test_the_spread_over_fresh_processes_is_said_only_where_there_were_several():
    runs = [{"study": "api_levels", "machine": "m", "started": 1.0, "order": 1.0, "run_id": "x", "env": {},
             "rows": []},
            {"study": "arithmetic", "machine": "m", "started": 2.0, "order": 2.0, "run_id": "y", "env": {"cpu": "AMD EPYC"},
             "rows": [row()]}]
    empty = rundata.cells_frame([])
    data = ReportData(runs=runs, frame=empty, loc_rows=[], history=empty, answer={"cpu": "x"})
    assert not any(line.startswith("Measured in") for line in cpu_floor.section(data))
    runs[1]["rows"] = [row(processes=[{"call_median_ns": ns, "contended": None, "stages_ns": {}}
                                      for ns in (9_000, 10_200, 9_100)])]
    said = next(line for line in cpu_floor.section(data) if line.startswith("Measured in"))
    assert "3 fresh processes" in said and "took 9 µs, 9.1 µs, 10.2 µs" in said  # sorted


def test_the_c_call_is_judged_against_the_arithmetic_and_the_sum_of_its_stages_floors():
    old = row()  # measured before the read probe: judged against the arithmetic alone
    [found] = cpu_floor.floor_targets(old)
    assert (found["of"], found["goal"], found["share"], found["short_ns"]) == ("arithmetic", 0.75, 0.8, None)  # met
    slow = row(call_median_ns=10_000.0, share=0.68, stages_floor_ns=8_000.0, stages_share=0.8)
    arithmetic, stages = cpu_floor.floor_targets(slow)
    # at 75% of its 6.8 µs floor the call would take 9.07 µs, 0.933 µs less than its 10 µs
    assert arithmetic["at_goal_ns"] == pytest.approx(6_800 / 0.75)
    assert arithmetic["short_ns"] == pytest.approx(10_000 - 6_800 / 0.75)
    assert (stages["of"], stages["goal"]) == ("stages", 0.85)
    assert stages["short_ns"] == pytest.approx(10_000 - 8_000 / 0.85)


def test_the_python_calls_cost_and_the_time_above_the_c_call_beyond_null_are_computed():
    measured = row(call_median_ns=8_500.0, call_paths={"ctypes": 250.0, "extension": 90.0})
    cell, null = {"median_ms": 0.00875}, {"median_ms": 0.0003}
    # 8.75 - (8.5 - 0.25) - 0.3 = 0.2 µs above the C call beyond null/default: met
    found = cpu_floor.above_call(measured, cell, null)
    assert found["c_call_ns"] == pytest.approx(8_250) and found["above_ns"] == pytest.approx(200)
    assert found["over_ns"] is None
    assert cpu_floor.above_call(measured, {"median_ms": 0.00895}, null)["over_ns"] == pytest.approx(100)  # missed
    # a C call timed inside C has no ctypes call in it to take out: 8.95 - 8.5 - 0.3 leaves 0.15 µs
    in_c = row(call_median_ns=8_500.0, call_in_c=True, call_paths={"ctypes": 250.0, "extension": 90.0})
    found = cpu_floor.above_call(in_c, {"median_ms": 0.00895}, null)
    assert found["in_c"] and found["c_call_ns"] == pytest.approx(8_500) and found["above_ns"] == pytest.approx(150)
    [cost] = cpu_floor.call_lines(measured, None, null)  # no api_levels cell: the cost alone
    assert "0.25 µs through ctypes" in cost and "0.09 µs through the level's extension" in cost
    assert cpu_floor.call_lines(row(), cell, null) == []  # a row from before the call paths were timed
    # a row that timed both predicts beside the C call judges within its own rounds, not the two runs'
    rounds = row(call_median_ns=3_700.0, call_in_c=True, call_paths={"ctypes": 280.0, "extension": 180.0},
                 predict_median_ns=4_150.0, null_predict_median_ns=260.0)
    found = cpu_floor.above_call(rounds, {"median_ms": 0.00446}, null)  # the cells are not read
    assert found["rounds"] and found["above_ns"] == pytest.approx(190) and found["over_ns"] is None
    assert found["level_ns"] == 4_150.0 and found["null_ns"] == 260.0
    [_, line] = cpu_floor.call_lines(rounds, None, None)  # judged without any api_levels cell
    assert "its predict of one image, 4.15 µs, less the C call's 3.7 µs, less null/default's predict, " \
           "0.26 µs, leaves 0.19 µs (met; medians over the rounds above" in line
    # the level's call can cost less than the null level's: said so, not clipped to zero
    cheaper = cpu_floor.above_call({**rounds, "predict_median_ns": 3_900.0}, None, None)
    assert cheaper["above_ns"] == pytest.approx(-60) and cheaper["over_ns"] is None
    [_, line] = cpu_floor.call_lines({**rounds, "predict_median_ns": 3_900.0}, None, None)
    assert "leaves -0.06 µs (met: the level's call costs less than the harness's own" in line
