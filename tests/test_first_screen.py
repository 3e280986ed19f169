"""The drift between runs (harness.report.claims.drift), reproduce's check against an interval for a rerun,
and the first screen's computed sentences (harness.report.sections.first_screen): each claim from one
function, held against rows made by hand and against the committed runs."""

import math

import numpy as np
import pandas as pd
import pytest

from harness.report.claims import drift, headline, rundata
from harness.report.markup import quote
from harness.report.markup.tables import sig3
from harness.report.sections import findings, first_screen, gpu_section
from harness.reproduce import compare
from tests.test_processes import cell_row, fake_process_rounds


def reproduce_row(moves, device="cpu"):
    cells = [{"cell_id": f"c{i}", "device": device, "reference": {"median_ns": 1000.0},
              "new": {"median_ns": 1000.0 * m}} for i, m in enumerate(moves)]
    return {"kind": "reproduce", "run": "second", "reference_run": "first", "cells": cells,
            "shares_by_device": {device: {"median_inside": [1, len(moves)]}}}


def test_drift_is_the_median_move_and_the_spread_a_quantile_of_the_moves():
    moves = [0.96] * 8 + [0.90, 1.10]
    found = drift.measured(reproduce_row(moves), "cpu")
    assert found.cells == 10 and found.shift == pytest.approx(-0.04)
    assert found.spread == pytest.approx(np.quantile(np.abs(np.log(moves)), drift.QUANTILE))
    assert found.median_inside == (1, 10) and drift.measured(reproduce_row(moves), "gpu") is None
    low, high = drift.widen(10.0, 12.0, found)
    assert low == pytest.approx(10.0 * math.exp(-found.spread)) and high == pytest.approx(12.0 * math.exp(found.spread))
    with pytest.raises(ValueError, match="median"):
        drift.measured(reproduce_row([0.9, float("nan")]), "cpu")


def test_the_committed_reproduce_run_measures_the_amd_hosts_drift():
    """2026-11-27: the second run was 2-4% faster nearly everywhere; 6 of 22 medians inside."""
    drifts = drift.of_machines(rundata.latest_runs(rundata.load_runs()))
    (key, found), = [(k, v) for k, v in drifts.items() if k[1] == "cpu" and "peak 130 G MAC/s" in k[0]]
    assert found.cells == 22 and found.median_inside == (6, 22)
    assert -0.05 < found.shift < -0.02 and 0.02 < found.spread < 0.2


def test_reproduce_holds_new_medians_against_the_interval_for_a_rerun():
    base_a, pa = fake_process_rounds(5, [1e6] * 3)
    same, ps = fake_process_rounds(6, [2e6] * 3)
    reference = [cell_row("base", "base", base_a, pa), cell_row("x", "x", same, ps)]
    faster_base, pb = fake_process_rounds(8, [0.9e6] * 3)  # every cell 10% faster: a drift of the machine
    faster, pf = fake_process_rounds(9, [1.8e6] * 3)
    new = [cell_row("base", "base", faster_base, pb), cell_row("x", "x", faster, pf)]
    alone = compare.compare(reference, new, "base")
    assert alone["shares"]["median_inside"] == [0, 2] and alone["shares"]["median_inside_rerun"] == [0, 0]
    assert alone["shares"]["ratio_inside"] == [1, 1]  # the ratio cancels the drift
    known = drift.Drift("r", "f", 20, -0.1, math.log(1 / 0.85), (0, 20))
    widened = compare.compare(reference, new, "base", {"cpu": known})
    assert widened["shares"]["median_inside_rerun"] == [2, 2]
    text = "\n".join(compare.lines(widened))
    assert "goal: at least 80% of medians inside the interval for a rerun: 2 of 2 (100%), met" in text
    assert ("goal: at least 80% of ratios inside the one-run interval (no earlier move of this machine's "
            "ratios known): 1 of 1 (100%), met") in text  # the drift of older rows measured no ratio
    assert "one-run interval (no earlier move of this machine's medians known): 0 of 2 (0%), missed" in "\n".join(
        compare.lines(alone))


def test_drift_measures_how_far_a_rerun_moves_the_ratios_and_reproduce_holds_them_against_it():
    row = reproduce_row([1.1, 1.1, 1.1])
    for c, r in zip(row["cells"], (1.02, 0.97, 1.0), strict=True):
        c["ratio_reference"], c["ratio_new"] = {"ratio": 2.0}, {"ratio": 2.0 * r}
    row["shares_by_device"]["cpu"]["ratio_inside"] = [2, 3]
    found = drift.measured(row, "cpu")
    assert found.ratios == 3 and found.ratio_inside == (2, 3)
    assert found.ratio_spread == pytest.approx(np.quantile(np.abs(np.log([1.02, 0.97, 1.0])), drift.QUANTILE))
    assert found.ratio_spread < found.spread  # the ratios cancel the 10% move of every median
    assert drift.widen_ratio(2.0, 2.2, found) == pytest.approx(
        (2.0 * math.exp(-found.ratio_spread), 2.2 * math.exp(found.ratio_spread)))
    assert drift.widen_ratio(2.0, 2.2, drift.measured(reproduce_row([1.1]), "cpu")) is None  # no ratio
    assert found.ratios_moved == pytest.approx(math.expm1(found.ratio_spread))  # what the sentence quotes
    row["cells"][0]["ratio_new"] = {"ratio": -1.0}
    with pytest.raises(ValueError, match="ratio"):
        drift.measured(row, "cpu")
    r = {"ratio": 2.1, "ci95_low": 2.0, "ci95_high": 2.2}
    low, high = drift.widen_ratio(2.0, 2.2, found)
    assert drift.rerun_times(r, found) == f"2.10x [rerun {sig3(low)}–{sig3(high)}]"
    assert drift.rerun_times({**r, "ci95_low": math.nan}, found) == "2.10x"  # no interval to widen

    base_a, pa = fake_process_rounds(5, [1e6] * 3)
    x_a, px = fake_process_rounds(6, [2e6] * 3)
    base_b, pb = fake_process_rounds(8, [1e6] * 3)
    x_b, pxb = fake_process_rounds(9, [2.3e6] * 3)  # the ratio moved 15%: outside one run's interval
    reference = [cell_row("base", "base", base_a, pa), cell_row("x", "x", x_a, px)]
    new = [cell_row("base", "base", base_b, pb), cell_row("x", "x", x_b, pxb)]
    moved = drift.Drift("r", "f", 20, 0.0, 0.2, (0, 20), ratios=20, ratio_spread=math.log(1.2))
    result = compare.compare(reference, new, "base", {"cpu": moved})
    assert result["shares"]["ratio_inside"] == [0, 1] and result["shares"]["ratio_inside_rerun"] == [1, 1]
    assert "goal: at least 80% of ratios inside the interval for a rerun: 1 of 1 (100%), met" in "\n".join(
        compare.lines(result))


def cell(label, device, median, batch=1, machine="m", **more):
    impl, variant = label.split("/")
    return {"study": "batch_sweep", "run_id": "r", "machine": machine, "label": label, "implementation": impl,
            "variant": variant, "device": device, "batch_size": batch, "dtype": "float32", "status": "ok",
            "threads": math.nan, "median_ms": median, "images_per_s": batch / median * 1e3,
            "ci_low_ms": median * 0.95, "ci_high_ms": median * 1.05, "processes": 1, **more}


def test_the_cost_of_making_a_call_is_computed_per_device_and_not_most_of_a_cpu_call():
    assert first_screen.call_cost(6.1, 4.84) == pytest.approx(1 - 4.84 / 6.1)
    with pytest.raises(ValueError):
        first_screen.call_cost(0.0, 1.0)
    frame = pd.DataFrame([cell("c/fused", "cpu", 0.0061), cell("c/fused", "cpu", 2.48, batch=512),
                          cell("cuda/batch", "gpu", 0.0354, machine="g"),
                          cell("cuda/batch", "gpu", 0.336, batch=512, machine="g")])
    cpu, gpu = first_screen.call_cost_claims(frame, {"cpu": "m", "gpu": "g"})
    assert cpu["large"]["label"] == "c/fused" and cpu["batch"] == 512 and cpu["one_ms"] == 0.0061
    assert cpu["per_image_ms"] == pytest.approx(2.48 / 512)
    assert cpu["share"] == pytest.approx(1 - 2.48 / 512 / 0.0061) and cpu["verdict"] == "some"  # 21%
    assert gpu["share"] == pytest.approx(1 - 0.336 / 512 / 0.0354) and gpu["verdict"] == "most"  # 98%


@pytest.mark.usefixtures("report_cache")
def test_the_committed_runs_first_screen_says_one_thread_and_the_resident_kernels_caveats():
    data = rundata.load_report(rundata.DEFAULT_RESULTS, [])
    assert first_screen.cpu_threads(data.runs, data.answer["cpu"]) == 1
    assert first_screen.threads_note(1)["threads"] == 1 and first_screen.threads_note(None) is None
    persistent = rundata.find(data.frame, "api_levels", "cuda/persistent", device="gpu")
    note = first_screen.resident_note(data.frame, data.runs, persistent)
    assert note["blocks"] == 8 and note["launches"] == 2 and note["calls"] == 200
    assert note["cell"]["p99_ms"] == persistent["p99_ms"] and note["serves"] is not None  # one image at a time
    assert note["serves"]["per_over_best"] == pytest.approx(
        note["serves"]["per_image_ms"] / note["serves"]["best_per_image_ms"])
    graph = rundata.find(data.frame, "api_levels", "cudnn/graph", device="gpu")
    assert first_screen.resident_note(data.frame, data.runs, graph) is None  # launched every call


def test_the_headline_prints_an_interval_for_a_rerun_where_the_drift_is_known_and_says_what_intervals_cover():
    one = pd.Series(cell("c/fused", "cpu", 0.0061))
    known = drift.Drift("r", "f", 22, -0.035, 0.08, (6, 22))
    assert headline.latency(one) == "6.1 µs [5.79–6.41 µs] `fused` *few processes*"
    low, high = 0.0061 * 0.95 * math.exp(-0.08), 0.0061 * 1.05 * math.exp(0.08)
    assert headline.latency(one, known) == f"6.1 µs [rerun {quote.interval(low, high)}] `fused` *few processes*"
    note = first_screen.intervals_note({"cpu": "m", "gpu": "g"}, {("m", "cpu"): known})
    assert note["moved"] == [{"machine": "m", "device": "cpu", "drift": known}] and note["alone"] == ["gpu"]
    assert not note["ratios_moved"]  # the drift measured no ratio
    assert first_screen.intervals_note({"cpu": "m"}, {})["moved"] == []  # no second run


@pytest.mark.usefixtures("report_cache")
def test_findings_mark_single_process_cells_and_name_both_batch_512_rates():
    data = rundata.load_report(rundata.DEFAULT_RESULTS, [])
    found = findings.findings(data.frame, data.runs, [], data.answer)
    devices = next(line for line in found if "large batches" in line)
    sweep = rundata.find(data.frame, "batch_sweep", "c/fused", batch=512, machine=headline.machine_of(
        data.frame, data.answer["cpu"]))
    assert "one thread of" in devices
    if sweep is None:  # the answering CPU machine has no batch_sweep: the finding names no CPU rate at 512
        assert "the CPU's fastest at that batch" not in devices
    else:
        assert sweep["processes"] == 1 and f"c/fused's {quote.rate(sweep)}" in devices
        assert "*few processes*" in quote.rate(sweep)
    rows = rundata.study_rows(data.runs, "kernels")
    trace = next(r for r in rows if r["variant"] == "batch" and r["batch"] == 512)
    assert f"give {gpu_section.trace_rate(trace) / 1e6:.2f} M" in devices
    both = gpu_section.two_rates(data.frame, trace)
    assert "`batch_sweep` measured the same call at 1.52 M images/s" in both and "2.14 M" in both
    assert "back-to-back" in both and "interleaved in rounds" in both
