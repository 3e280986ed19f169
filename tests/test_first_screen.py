"""How far a second run moved the medians and ratios (harness.report.claims.reproduce.drift),
reproduce's check against the interval the report printed (every earlier run of the same code pooled),
and the first screen's computed sentences (harness.report.sections.first_screen): each claim from one
function, held against rows made by hand and against the committed runs."""

import math

import numpy as np
import pandas as pd
import pytest

from harness.report.claims import headline, reproduce, rundata
from harness.report.markup import quote
from harness.report.sections import findings, first_screen, gpu_section
from harness.reproduce import compare
from tests.test_processes import cell_row, fake_process_rounds


def reproduce_row(moves, device="cpu"):
    cells = [{"cell_id": f"c{i}", "device": device, "reference": {"median_ns": 1000.0},
              "new": {"median_ns": 1000.0 * m}} for i, m in enumerate(moves)]
    return {"kind": "reproduce", "run": "second", "reference_run": "first", "cells": cells,
            "shares_by_device": {device: {"median_inside": [1, len(moves)]}}}


def test_a_second_runs_move_is_the_median_move_and_its_spread_a_quantile_of_the_moves():
    moves = [0.96] * 8 + [0.90, 1.10]
    found = reproduce.drift(reproduce_row(moves), "cpu")
    assert found.cells == 10 and found.shift == pytest.approx(-0.04)
    assert found.spread == pytest.approx(np.quantile(np.abs(np.log(moves)), reproduce.QUANTILE))
    assert found.median_inside == (1, 10) and reproduce.drift(reproduce_row(moves), "gpu") is None
    with pytest.raises(ValueError, match="median"):
        reproduce.drift(reproduce_row([0.9, float("nan")]), "cpu")


def test_the_committed_reproduce_run_measures_the_amd_hosts_move(committed_report):
    """2026-11-27: the second run was 2-4% faster nearly everywhere; 6 of 22 medians inside."""
    runs = committed_report.runs  # the newest runs (rundata.latest_runs), read once a session
    (row,) = [row for run in runs if run["study"] == reproduce.FOLDER and "peak 130 G MAC/s" in run["machine"]
              for row in run["rows"] if row.get("kind") == "reproduce"]
    found = reproduce.drift(row, "cpu")
    assert found.cells == 22 and found.median_inside == (6, 22)
    assert -0.05 < found.shift < -0.02 and 0.02 < found.spread < 0.2


def test_reproduce_holds_new_medians_and_ratios_against_the_interval_the_report_printed():
    base_a, pa = fake_process_rounds(5, [1e6] * 3)
    same, ps = fake_process_rounds(6, [2e6] * 3)
    reference = [cell_row("base", "base", base_a, pa), cell_row("x", "x", same, ps)]
    faster_base, pb = fake_process_rounds(8, [0.9e6] * 3)  # every cell 10% faster: a drift of the machine
    faster, pf = fake_process_rounds(9, [1.8e6] * 3)
    new = [cell_row("base", "base", faster_base, pb), cell_row("x", "x", faster, pf)]
    alone = compare.compare(reference, new, "base")
    assert alone["shares"]["median_inside"] == [0, 2] and alone["shares"]["median_inside_pooled"] == [0, 0]
    assert alone["shares"]["ratio_inside"] == [1, 1]  # the ratio cancels the drift
    assert "median_inside_rerun" not in alone["shares"]  # the drift widening is gone: one mechanism
    printed = {"base": {"median": [0.85e6, 1.05e6], "ratio": None, "runs": 2},
               "x": {"median": [1.7e6, 2.1e6], "ratio": [1.9, 2.1], "runs": 2}}  # two earlier runs pooled
    pooled = compare.compare(reference, new, "base", printed)
    assert pooled["shares"]["median_inside_pooled"] == [2, 2] and pooled["shares"]["ratio_inside_pooled"] == [1, 1]
    assert pooled["cells"][1]["pooled_runs"] == 2
    text = "\n".join(compare.lines(pooled))
    assert "goal: at least 80% of medians inside the interval the report printed: 2 of 2 (100%), met" in text
    assert ("goal: at least 80% of medians inside the reference run's interval (the report printed none for "
            "these medians): 0 of 2 (0%), missed") in "\n".join(compare.lines(alone))


def test_the_intervals_the_report_printed_are_the_pooled_frames(committed_report):
    data = committed_report
    run_id = data.answer["cpu"]
    printed = compare.printed_intervals(data.frame, "api_levels", run_id, "numpy")
    cell = data.frame[(data.frame["run_id"] == run_id) & (data.frame["study"] == "api_levels")
                      & (data.frame["status"] == "ok") & ~data.frame["thin"]].iloc[0]
    found = printed[cell["cell_id"]]
    assert found["runs"] == cell["runs"]
    assert found["median"] == pytest.approx([cell["ci_low_ms"] * 1e6, cell["ci_high_ms"] * 1e6])


def test_a_second_run_measures_how_far_the_ratios_move():
    row = reproduce_row([1.1, 1.1, 1.1])
    for c, r in zip(row["cells"], (1.02, 0.97, 1.0), strict=True):
        c["ratio_reference"], c["ratio_new"] = {"ratio": 2.0}, {"ratio": 2.0 * r}
    row["shares_by_device"]["cpu"]["ratio_inside"] = [2, 3]
    found = reproduce.drift(row, "cpu")
    assert found.ratios == 3 and found.ratio_inside == (2, 3)
    assert found.ratio_spread == pytest.approx(np.quantile(np.abs(np.log([1.02, 0.97, 1.0])), reproduce.QUANTILE))
    assert found.ratio_spread < found.spread  # the ratios cancel the 10% move of every median
    assert found.ratios_moved == pytest.approx(math.expm1(found.ratio_spread))  # what the sentence quotes
    row["cells"][0]["ratio_new"] = {"ratio": -1.0}
    with pytest.raises(ValueError, match="ratio"):
        reproduce.drift(row, "cpu")


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


def test_the_committed_runs_first_screen_says_one_thread_and_the_resident_kernels_caveats(committed_report):
    data = committed_report  # the committed results, read once a session
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


def test_the_headline_prints_the_pooled_interval_and_says_how_many_runs_each_pools():
    one = pd.Series(cell("c/fused", "cpu", 0.0061))
    assert headline.latency(one) == "6.1 µs [5.79–6.41 µs] `fused` *few processes*"
    frame = pd.DataFrame([cell("c/fused", "cpu", 0.0061, runs=3, runs_contended=1, study="api_levels"),
                          cell("numpy/default", "cpu", 0.07, runs=2, runs_contended=0, study="api_levels")])
    (found,) = rundata.pooling(frame, {"cpu": "r", "gpu": None})
    assert found == {"device": "cpu", "machine": "m", "least": 2, "most": 3, "left_out": 1, "cells": 2}
    assert first_screen.intervals_note([found]) == {"words": "intervals", "pooled": [found]}


def test_findings_mark_single_process_cells_and_name_both_batch_512_rates(committed_report):
    data = committed_report  # the committed results, read once a session
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
