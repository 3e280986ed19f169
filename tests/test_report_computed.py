"""Sentences of the report that are computed, not typed: finding 3 compares each device's
fastest measured call, finding 4 takes a within-round ratio from the study that timed both cells,
explain's stages within their noise say so, a share over the measured peak says what the probe
misses, the Machines table has every level's versions, and Fig. 1's caption names only lines drawn."""

import pytest

from harness import registry
from harness.explain import c_layers
from harness.report.claims import headline, rundata
from harness.report.sections import explain_section, findings, machines


@pytest.fixture
def data(committed_report):
    return committed_report  # the committed results with this checkout's line counts, read once a session


def test_finding_3_compares_each_devices_fastest_measured_call(data):
    levels, machines_by = headline.levels(data.frame, data.loc_rows, data.answer)
    found = findings.devices_finding(data.frame, levels, machines_by)
    assert found is not None
    cpu_best = min((lv.cells["cpu"] for lv in levels if "cpu" in lv.cells and registry.computes(lv.implementation)),
                   key=lambda c: c["median_ms"])
    assert found["cpu"]["label"] == cpu_best["label"]  # not the raw library's, unless it is the fastest
    sweep = data.frame[(data.frame["study"] == headline.SWEEP) & (data.frame["status"] == "ok")
                       & (data.frame["machine"] == machines_by["cpu"]) & (data.frame["device"] == "cpu")]
    gpu_best = max((lv.throughput for lv in levels if lv.throughput is not None), key=lambda c: c["images_per_s"])
    at = sweep[sweep["batch_size"] == gpu_best["batch_size"]]
    if at.empty:  # the answering CPU machine has no batch_sweep at that batch: the finding says none
        assert found["cpu_sweep"] is None and found["sweep_over_cpu"] is None
        return
    cpu_rate = at.loc[at["images_per_s"].idxmax()]
    assert found["sweep"]["label"] == gpu_best["label"] and found["cpu_sweep"]["label"] == cpu_rate["label"]
    assert found["sweep_over_cpu"] == gpu_best["images_per_s"] / cpu_rate["images_per_s"]


def test_a_ratio_is_within_rounds_where_the_cells_study_timed_the_raw_library(data):
    """A level's fastest call from another study than api_levels (an overhead cell of a variant the
    answering run did not time, made its level's fastest GPU call) is held against the raw library
    timed in that study's rounds."""
    frame = data.frame.copy()
    ok_gpu = (frame["status"] == "ok") & (frame["device"] == "gpu") & (frame["batch_size"] == 1)
    # the answering api_levels run (a gpu-study gives every study of a campaign the same run id)
    answering = frame[ok_gpu & (frame["run_id"] == data.answer["gpu"]) & (frame["study"] == "api_levels")]
    overhead = frame[ok_gpu & (frame["study"] == "overhead") & (frame["machine"] == answering["machine"].iloc[0])
                     & ~frame["implementation"].isin(["cudnn", "cuda"]) & ~frame["label"].isin(answering["label"])]
    assert not overhead.empty, "overhead times a GPU variant api_levels does not (jax/eager)"
    pick = overhead.iloc[0]
    level = answering[answering["implementation"] == pick["implementation"]]
    frame.loc[pick.name, "median_ms"] = level["median_ms"].min() / 2
    levels, _ = headline.levels(frame, data.loc_rows, data.answer)
    checked = 0
    for lv in levels:
        for device, cell in lv.cells.items():
            r = lv.ratios.get(device)
            if not r or cell["study"] == headline.STUDY:
                continue
            raw = headline.RAW[device]
            theirs = frame[(frame["study"] == cell["study"]) & (frame["run_id"] == cell["run_id"])
                                & (frame["implementation"] == raw) & (frame["status"] == "ok")
                                & (frame["device"] == device) & (frame["batch_size"] == 1)]
            if theirs.empty:
                assert r.get("across_runs")  # no shared rounds: a ratio of medians, said so
            else:
                assert r.get("study") == cell["study"] and not r.get("across_runs")
                assert r == {**rundata.ratio_ci(cell, headline.fastest(theirs)), "study": cell["study"],
                             "against": headline.fastest(theirs)["label"]}
                assert findings.comparison(r)["study"] == cell["study"]  # said: within its rounds
                checked += 1
    assert checked, "the committed runs have a cell whose own study timed the raw library (overhead)"


def stage(name, ns, frm, to, share=0.1):
    return {"name": name, "ns": ns, "from": frm, "to": to, "share": share}


def test_a_stage_within_its_noise_says_so_and_claims_no_cost():
    steps = [{"step": "a", "median_ns": 1000.0, "ci95_low_ns": 900.0, "ci95_high_ns": 1100.0},
             {"step": "b", "median_ns": 1020.0, "ci95_low_ns": 1000.0, "ci95_high_ns": 1050.0},
             {"step": "c", "median_ns": 100.0, "ci95_low_ns": 99.0, "ci95_high_ns": 101.0}]
    row = {"steps": steps, "stages": [stage("x", -20.0, "a", "b", -0.02), stage("y", 920.0, "b", "c", 0.9),
                                      stage("floor", 100.0, "c", None)]}
    assert explain_section.noise_ns(row, row["stages"][0]) == 130.0  # 100 + 30: both steps' half-widths
    assert explain_section.stage_claims(row, 0)["noise"] == 130.0  # within its noise: no measurable cost
    assert explain_section.stage_claims(row, 1)["noise"] is None  # 920 ns, beyond its 75 ns
    assert [explain_section.stage_claims(row, i)["floor"] for i in range(3)] == [False, False, True]
    internal = {"predict_ns": 1000.0}
    assert explain_section.internal_claims(internal, {"name": "other", "ns": -40.0, "share": -0.04})["within"]
    assert not explain_section.internal_claims(internal, {"name": "other", "ns": 400.0, "share": 0.4})["within"]


def test_a_share_over_the_measured_peak_says_what_the_probe_misses():
    row = {"peak": {"macs_per_s": 5e10, "isa": "avx512", "lanes": 16}, "variant": "fused", "path": "avx512",
           "rounds": 5, "calls": 10, "macs": 100, "call_median_ns": 10.0, "floor_ns": 9.0, "share": 0.9,
           "stages": [{"name": "conv2", "macs": 60, "median_ns": 4.0, "floor_ns": 4.1, "share": 1.02},
                      {"name": "fc1", "macs": 40, "median_ns": 5.0, "floor_ns": 4.0, "share": 0.8}]}
    text = "\n".join(c_layers.lines(row))
    assert "A share over 100% (conv2)" in text and "misses" in text
    row["stages"][0]["share"] = 0.99
    assert "A share over 100%" not in "\n".join(c_layers.lines(row))


def test_the_machines_table_has_every_levels_versions_and_says_a_library_was_not_used(data):
    table = machines.machine_table(data.runs)
    header = table.splitlines()[0]
    for column in ("ONNX Runtime", "OpenVINO", "Numba", "TensorFlow", "Keras", "JAX", "PyTorch", "NumPy"):
        assert f"| {column} |" in header
    env = {"cudnn": {"found": True, "version": 92800}, "packages": {}}
    assert machines.describe(env, measured=set())["cuDNN"].endswith("installed, not used")


def test_fig1s_caption_says_first_written_and_fastest(committed_texts):
    """Fig. 1 draws each level's call as first written and its fastest, joined by an arrow: its
    caption says both, and promises no ladder line (it draws none)."""
    report = committed_texts[0]  # markdown.build(committed_report)
    caption = next(line for line in report.splitlines() if line.startswith("_Fig. 1:"))
    assert "first written" in caption and "fastest" in caption and "Grey lines" not in caption
    assert "(see the method)" not in report


def test_the_machine_findings_read_their_levels_and_variants_from_the_registry():
    """The backends' names and compiled calls, each framework's default and the CPU's raw library come
    from the specs (the Keras variants past KERAS_CALLS, the first variant, raw_for), not a table."""
    from harness.report.sections import machine_findings

    assert machine_findings.FRAMEWORK_OPS == ("tf/function", "jax/jit", "torch/eager")
    assert {name: registry.compiled_call(name) for name in registry.KERAS_BACKENDS} == \
        {"keras": "function", "keras_jax": "jit", "keras_torch": "compile"}
    assert registry.raw_library("cpu") == "onednn"


def test_the_runs_list_names_every_run_a_merged_kernels_run_came_from():
    # a merged run names each run its rows came from: the batch-1 kernels run too
    from harness.draw.style import caption

    env = {"packages": {}, "threads": {}, "gpus": [{"name": "H100"}]}
    row = {"implementation": "cuda", "variant": "resident", "status": "ok"}
    runs = [{"study": "kernels", "machine": "m", "run_id": rid, "order": i, "env": env,
             "rows": [{**row, "batch": batch}]} for i, (rid, batch) in enumerate((("k1", 1), ("k512", 512)))]
    merged = rundata.latest_runs(runs)
    assert len(merged) == 1
    assert caption(merged).endswith("| runs kernels/k1 + kernels/k512")
    assert caption(runs[:1]).endswith("| run kernels/k1")
