"""The figures draw what the rows say: the answering machine of each device and no other, no figure
taller than 1,600 px, each call against the CPU floor harness.measure.fastest_call answers (Fig. 6), one GPU
measure, each level's first-written and fastest call joined by an arrow (Fig. 1), inference lines on
top (Fig. 2), a histogram of every timed call with its median and p99 (Fig. 4), labels inside their
axes and spans (Figs. 1, 5, 7), "Keras on ..." (Fig. 8), at most about eight lines a panel and the
best CPU line in every GPU panel (Fig. 9), one line style per meaning (Fig. 10) and the within-round
float64/float32 ratio (Fig. 11). Synthetic rows where the logic allows, the committed results where
the figure reads the results folder (measure.fastest_call); each figure captured as it was saved."""

import dataclasses
import math
import re
import struct
from types import SimpleNamespace

import matplotlib.colors
import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Annotation

from harness import DEFAULT_RESULTS, registry
from harness.draw import place
from harness.figures import (
    backends,
    bill,
    code_lines,
    cost,
    every,
    explain,
    latency,
    overhead,
    pick,
    precision,
    style,
    throughput,
    training,
)
from harness.measure import fastest_call
from harness.measure.store import stats
from harness.report.claims import headline, loc, rundata
from harness.report.claims.rundata import ReportData
from harness.report.markup.tables import sig3

FIGURE_MODULES = (backends, bill, code_lines, cost, explain, latency, overhead, precision, throughput, training)


def cell(study, label, device, machine, median, dtype="float32", batch=1, noisy=False, run_id=None):
    impl, variant = label.split("/")
    rounds = [[median * 1e6 * (1 + 0.01 * k)] * 3 for k in range(5)]  # ns, five rounds of three calls
    return {"study": study, "run_id": run_id or f"run-{machine}", "machine": machine,
            "cell_id": f"{label}/{device}/b{batch}/{dtype}", "implementation": impl, "variant": variant,
            "label": label, "device": device, "batch_size": batch, "dtype": dtype, "status": "ok", "reason": "",
            "threads": math.nan, "median_ms": median, "ci_low_ms": median * 0.9, "ci_high_ms": median * 1.1,
            "device_median_ms": math.nan, "noisy": noisy, "images_per_s": batch / median * 1e3,
            "rounds_ns": rounds}


def run(study, machine, started, run_id=None):
    return {"study": study, "run_id": run_id or f"run-{machine}", "machine": machine, "started": started, "order": started,
            "env": {}, "rows": []}


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """Each figure as it was saved (the PNG written to tmp_path): drawn.figs[i]."""
    captured = SimpleNamespace(figs=[])
    real = style.save

    def keep(fig, path):
        captured.figs.append(fig)
        return real(fig, tmp_path / path.name)

    monkeypatch.setattr(style, "save", keep)  # style.finish saves through it
    for module in FIGURE_MODULES:
        if hasattr(module, "save"):
            monkeypatch.setattr(module, "save", keep)
    return captured


@pytest.fixture(scope="module")
def committed(committed_report) -> ReportData:
    """The committed results and loc.csv, as `make figures` reads them: the session's reading of the
    results (load_report only carries its line counts), with a frame of its own to draw from."""
    frame = committed_report.frame.copy()  # history is the frame where only the newest runs were read
    return dataclasses.replace(committed_report, frame=frame, history=frame, loc_rows=loc.read_csv())


def data_of(rows, runs=(), answering=None) -> ReportData:
    """The report's data with these cells (and these runs). answering: {device: machine}, the
    machines whose api_levels runs answer (a NumPy api_levels cell added for one the rows lack)."""
    rows, answer = list(rows), {}
    for device, machine in (answering or {}).items():
        mine = [r for r in rows if (r["study"], r["device"], r["machine"]) == ("api_levels", device, machine)]
        if not mine:
            mine = [cell("api_levels", "numpy/default", device, machine, 0.1, run_id=f"answer-{machine}")]
            rows += mine
        answer[device] = mine[0]["run_id"]
    frame = pd.DataFrame(rows)
    return ReportData(runs=list(runs), frame=frame, loc_rows=[], history=frame, answer=answer)


def texts_of(fig) -> list:
    return [t for ax in fig.axes for t in ax.texts]


# Fig. 6 -----------------------------------------------------------------------------------------

def test_fig6_draws_the_answering_cpu_machine_against_measure_floors_floor(committed, drawn, tmp_path):
    found, floors = pick.cpu_floors(committed)
    assert found == fastest_call.fastest_measured("cpu", DEFAULT_RESULTS, run_id=committed.answer["cpu"])
    machine = pick.answering_machines(committed)["cpu"]
    if machine not in floors or overhead.fig_overhead(committed, tmp_path / "f6.png") is None:
        pytest.skip("the answering CPU machine has no overhead run or no floor")
    fig = drawn.figs[0]
    cpu_axes = [ax for ax in fig.axes if ax.get_title(loc="left").startswith("CPU")]
    assert len(cpu_axes) == 1 and found.label in cpu_axes[0].get_title(loc="left")
    ax = cpu_axes[0]
    assert ax.get_title(loc="left").startswith(f"CPU: {style.short_machine(machine)}  (")
    floor_line = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert [ln.get_xdata()[0] for ln in floor_line] == [pytest.approx(floors[machine])]
    cells = committed.frame[(committed.frame["study"] == "overhead") & (committed.frame["machine"] == machine)
                            & (committed.frame["status"] == "ok") & (committed.frame["device"] == "cpu")
                            & (committed.frame["batch_size"] == 1)
                            & (committed.frame["implementation"] != "null")].sort_values(["median_ms", "label"])
    words = [t.get_text() for t in ax.texts]
    assert len(words) == len(cells) > 0
    for text, (_, row) in zip(words, cells.iterrows(), strict=True):
        ratio = sig3(row["median_ms"] / floors[machine])  # 9020x, never 9.02e+03x
        assert text.startswith(f"{style.fmt_ms(row['median_ms'])}, {ratio}x the floor")
    legend = " ".join(t.get_text() for t in fig.axes[-1].get_legend().get_texts())
    assert "host overhead" not in legend and "beyond the floor" in legend  # a slower library is not overhead


def test_fig6_has_one_gpu_measure_the_kernel_trace_and_drops_cpus_without_the_floor():
    cells = pd.DataFrame([cell("overhead", "onednn/tuned", "cpu", "amd", 0.030),
                          cell("overhead", "onednn/tuned", "cpu", "intel", 0.040),  # no floor measured here
                          {**cell("overhead", "torch/eager", "gpu", "h100", 0.36), "device_median_ms": 0.27},
                          {**cell("overhead", "torch/compile", "gpu", "h100", 0.52), "device_median_ms": 0.41}])
    split = overhead.time_split(cells, {"amd": 0.022}, {("h100", "torch/eager", 1): 0.033}, "numba/fused")
    got = {(r["machine"], r["label"]): (base, how) for r, base, how in split}
    assert set(got) == {("amd", "onednn/tuned"), ("h100", "torch/eager"), ("h100", "torch/compile")}
    assert got[("amd", "onednn/tuned")] == (0.022, "numba/fused")
    assert got[("h100", "torch/eager")] == (0.033, overhead.BUSY)  # the trace, not CUDA events' 0.27
    base, how = got[("h100", "torch/compile")]
    assert math.isnan(base) and how == "no kernel trace"  # CUDA events are not mixed in


def kernels_row(variant, batch, busy_ns, ops_per_call=1.0):
    return {"kind": "kernels", "status": "ok", "implementation": "cuda", "variant": variant, "batch": batch,
            "calls": 200, "host_ns_per_call": 2e5, "gpu_busy_ns_per_call": busy_ns,
            "device_ops_per_call": ops_per_call, "ops": []}


def test_fig6_keys_the_busy_time_by_batch_and_a_resident_kernel_has_no_share_of_a_call():
    """The batch-512 row must not overwrite batch 1's (it did: six GPU rows drawn 100% busy), a
    resident kernel's busy time spans calls, and a share over 100% is an error, never clipped."""
    runs = [{"study": "kernels", "machine": "h100", "rows": [
        kernels_row("graph", 1, 36_800), kernels_row("graph", 512, 150_000),
        kernels_row("persistent", 1, 40_867, ops_per_call=0.01)]}]
    busy = overhead.gpu_busy_ms(runs)
    assert busy[("h100", "cuda/graph", 1)] == pytest.approx(0.0368)
    assert busy[("h100", "cuda/graph", 512)] == pytest.approx(0.150)
    assert math.isnan(busy[("h100", "cuda/persistent", 1)])
    cells = pd.DataFrame([cell("overhead", "cuda/graph", "gpu", "h100", 0.064),
                          cell("overhead", "cuda/persistent", "gpu", "h100", 0.018)])
    got = {r["label"]: (base, how) for r, base, how in overhead.time_split(cells, {}, busy)}
    assert got["cuda/graph"] == (pytest.approx(0.0368), overhead.BUSY)
    assert math.isnan(got["cuda/persistent"][0]) and got["cuda/persistent"][1] == overhead.RESIDENT
    with pytest.raises(ValueError, match="over 100%"):
        overhead.time_split(cells, {}, {**busy, ("h100", "cuda/graph", 1): 0.070})


# Fig. 1 -----------------------------------------------------------------------------------------

def first_written_cell(data, implementation, device):
    """The answering api_levels run's cell of the level's call as first written, or None."""
    f = data.frame
    hit = f[(f["study"] == "api_levels") & (f["run_id"] == data.answer.get(device)) & (f["device"] == device)
            & (f["label"] == headline.as_first_written(implementation)) & (f["status"] == "ok")
            & (f["batch_size"] == 1) & (f["dtype"] == "float32") & f["threads"].isna()]
    return None if hit.empty else hit.iloc[0]


def test_fig1_arrows_join_each_levels_first_written_and_fastest_call(committed, drawn, tmp_path):
    cost.fig_cost(committed, tmp_path / "f1.png")
    axes = drawn.figs[0].axes  # a panel per device
    assert [ax.get_title(loc="left").split(":")[0] for ax in axes] == ["CPU", "GPU"]
    texts = [t for ax in axes for t in ax.texts]
    assert not [ln for ax in axes for ln in ax.get_lines()
                if matplotlib.colors.to_hex(ln.get_color()) == "#bbbbbb"]  # no ladder
    arrows = {(round(a.xyann[1], 9), round(a.xy[1], 9)) for a in texts
              if isinstance(a, Annotation) and a.arrow_patch is not None and not a.get_text()}
    levels, _ = headline.levels(committed.frame, committed.loc_rows, committed.answer)
    want, markers = set(), 0
    for lv in levels:
        for device, fastest in lv.cells.items() if lv.loc is not None else ():
            first = first_written_cell(committed, lv.implementation, device)
            markers += 1
            if first is not None and first["cell_id"] != fastest["cell_id"]:
                want.add((round(first["median_ms"], 9), round(fastest["median_ms"], 9)))  # tail, head
                markers += 1
    assert arrows == want and want  # from each first-written call to its level's fastest, and no other
    assert len([c for ax in axes for c in ax.containers if c.has_yerr]) == markers  # an interval on every marker
    assert len([t for t in texts if t.get_text()]) == len(cost.arrows(committed))  # one label per level and device
    for ax in axes:
        labels = [t for t in ax.texts if t.get_text()]
        r = place.renderer(ax)
        boxes = [place.text_box(t, r) for t in labels]
        centres = [tuple(ax.transData.transform(t.xy)) for t in labels]
        drawn_at = {(x, y) for ln in ax.get_lines() for x, y in zip(ln.get_xdata(), ln.get_ydata(), strict=True)}
        for i, a in enumerate(boxes):
            assert place.inside(ax, labels[i]), labels[i].get_text()
            if labels[i].arrow_patch is None:  # beside its own marker, no other's
                assert place.nearest(a, centres) == i, labels[i].get_text()
            else:  # a crowded marker's label sits farther off, its leader line ending at its own marker
                assert labels[i].arrow_patch.get_visible() and tuple(labels[i].xy) in drawn_at, labels[i].get_text()
            for j in range(i):
                assert not place.boxes_overlap(a, boxes[j], pad=0), (labels[i].get_text(), labels[j].get_text())
        for x, y in drawn_at:  # every marker inside the axes
            assert ax.get_xlim()[0] < x < ax.get_xlim()[1] and ax.get_ylim()[0] < y < ax.get_ylim()[1]


def test_fig1_caption_says_first_written_and_fastest():
    look = every.records()[0]["look"]
    assert every.records()[0]["draw"] == "cost.fig_cost"
    assert "first written" in look and "fastest" in look and "arrow" in look


# Fig. 2 -----------------------------------------------------------------------------------------

def test_fig2_puts_the_inference_total_on_top_and_counts_training_apart(drawn, tmp_path):
    rows = [{"package": "lenet_cudnn", "api_level": "cudnn", "part": part, "files": 1, "code": code, "comment": 0}
            for part, code in (("forward", 386), ("ffi binding", 375), ("weight layout", 43),
                               ("training step", 226))]
    rows.append({"package": "shared loaders", "api_level": "shared", "part": "shared", "files": 1, "code": 208,
                 "comment": 0})
    data = ReportData(runs=[], frame=pd.DataFrame(), loc_rows=rows, history=pd.DataFrame())
    code_lines.fig_loc(data, tmp_path / "f2.png")
    words = [t.get_text() for t in texts_of(drawn.figs[0])]
    inference = loc.first_written(rows, "cudnn")
    assert inference == 804 and words[0] == "804"  # the bold number on top: Fig. 1's x
    assert "226" in words and str(804 + 226) not in words  # training its own count, never added in
    assert "training step" in " ".join(t.get_text() for t in drawn.figs[0].axes[0].get_legend().get_texts())


def test_fig2_ticks_are_the_registrys_short_labels():
    """No table of API levels: a level's tick is its short label, the Keras package's three levels
    share theirs, an API level no registered level has keeps its own name."""
    assert code_lines.tick("hand-written-c") == registry.short("c")
    assert code_lines.tick("keras") == "Keras"  # Keras/TF, Keras/JAX, Keras/PyTorch
    assert code_lines.tick("inference-engine") == registry.short("onnx").replace(" ", "\n")
    assert code_lines.tick("some-new-api") == "some\nnew\napi"


# Figs. 3 and 5 -----------------------------------------------------------------------------------

def test_fig3_draws_only_the_answering_machine_and_tags_noisy(drawn, tmp_path):
    rows = [cell("api_levels", "numpy/default", "cpu", "amd", 0.11, noisy=True),
            cell("api_levels", "tf/function", "cpu", "amd", 0.39),
            cell("api_levels", "numpy/default", "cpu", "old-intel", 0.18, noisy=True),
            cell("api_levels", "tf/function", "cpu", "old-intel", 0.56, noisy=True)]
    rows = [{**r, "cold_start_ms": math.nan, "own_process": None} for r in rows]
    latency.fig_latency(data_of(rows, answering={"cpu": "amd"}), tmp_path / "f3.png")
    fig = drawn.figs[0]
    assert len(fig.axes) == 1 and fig.axes[0].get_title(loc="left") == "CPU: amd"
    ax = fig.axes[0]
    assert {round(float(c.lines[0].get_xdata()[0]), 6) for c in ax.containers} == {0.11, 0.39}  # amd's only
    assert [t.get_text() for t in ax.texts] == ["noisy"]
    assert all(place.inside(ax, t) for t in ax.texts)


def test_pick_answering_machines_are_the_machines_of_the_answering_runs():
    data = data_of([cell("api_levels", "numpy/default", "cpu", "amd", 0.1),
                    cell("api_levels", "numpy/default", "cpu", "intel", 0.1),
                    cell("backends", "keras/predict", "cpu", "intel", 30.0),
                    cell("backends", "keras/predict", "gpu", "amd", 3.0),
                    cell("api_levels", "cudnn/graph", "gpu", "h100", 0.06)], answering={"cpu": "amd", "gpu": "h100"})
    assert pick.answering_machines(data) == {"cpu": "amd", "gpu": "h100"}
    picked = pick.answering(data.frame, data)
    assert set(zip(picked["device"], picked["machine"], strict=True)) == {("cpu", "amd"), ("gpu", "h100")}
    rows = [{"device": "cpu", "machine": "amd"}, {"device": "cpu", "machine": "intel"},
            {"device": "gpu", "machine": "amd"}]
    assert pick.answering_rows(rows, data) == rows[:1]
    # a device no api_levels run answers for: the newest run's machine among the cells
    alone = data_of([{**cell("training", "numpy/default", "cpu", m, 1.0, run_id=f"r-{m}"), "run_order": k}
                     for k, m in enumerate(("first", "second", "third"))])
    assert set(pick.answering(alone.frame, alone)["machine"]) == {"third"}


def test_fig5_every_label_and_every_steady_state_lies_inside_its_axes(committed, drawn, tmp_path):
    if latency.fig_cold_start(committed, tmp_path / "f5.png") is None:
        pytest.skip("no cold starts on the answering machines")
    fig = drawn.figs[0]
    assert texts_of(fig)
    for ax in fig.axes:
        for text in ax.texts:
            assert place.inside(ax, text), text.get_text()
        low, high = ax.get_xlim()
        for container in ax.containers:  # c/fused's 4 µs steady state was cut off
            x = float(container.lines[0].get_xdata()[0])
            assert low < x < high


# Fig. 4 -----------------------------------------------------------------------------------------

def test_fig4_histogram_keeps_a_small_tail_visible():
    edges = np.logspace(-2, 0, 41)  # 10 µs to 1 ms
    times = [0.019] * 970 + [0.93] * 30  # cuda/resident's two kinds of call: 3% after an idle spell
    heights = latency.histogram(times, edges)
    assert heights.max() == pytest.approx(latency.ROW)
    tail = heights[np.searchsorted(edges, 0.93) - 1]
    assert tail == pytest.approx(latency.ROW * math.sqrt(30 / 970)) and tail > 0.1  # a sixth, not a thirtieth
    assert latency.histogram([0.019] * 10_000 + [0.93], edges)[np.searchsorted(edges, 0.93) - 1] == latency.LEAST


def test_fig4_draws_each_levels_first_written_and_fastest_with_median_and_p99(committed, drawn, tmp_path):
    if latency.fig_distributions(committed, tmp_path / "f4.png") is None:
        pytest.skip("no api_levels cells on the answering machines")
    fig = drawn.figs[0]
    want = latency.distribution_rows(committed)
    assert len(fig.axes) == len(want) <= 2  # one panel per device
    for ax, rows in zip(fig.axes, want.values(), strict=True):
        assert [t.get_text() for t in ax.get_yticklabels()] == [c["label"] for c, _ in rows]
        words = [t.get_text() for t in ax.texts]
        for (c, _), text in zip(rows, words, strict=True):
            assert text.startswith(f"{style.fmt_ms(c['median_ms'])}  p99 {style.fmt_ms(c['p99_ms'])}")
        lines = {round(float(ln.get_xdata()[0]), 12) for ln in ax.get_lines()}
        assert {round(float(c["median_ms"]), 12) for c, _ in rows} <= lines  # the median and the p99 drawn
        assert {round(float(c["p99_ms"]), 12) for c, _ in rows} <= lines


# Fig. 7 -----------------------------------------------------------------------------------------

def test_fig7_neighbouring_stages_differ_in_colour_and_labels_fit_their_spans(committed, drawn, tmp_path):
    rows = rundata.study_rows(committed.runs, "explain", only_ok=False)
    for row in rows:
        colours = [shade for _, _, _, shade in explain.spans(row)]
        assert all(a != b for a, b in zip(colours, colours[1:], strict=False)), row["implementation"]
    if explain.fig_explain(committed, tmp_path / "f7.png") is None:
        pytest.skip("no explain run on the answering machines")
    for ax in drawn.figs[0].axes:
        r = place.renderer(ax)
        spans = [ln.get_window_extent(r) for ln in ax.get_lines() if ln.get_linewidth() == explain.WIDTH_PT]
        for text in ax.texts:
            if text.get_transform() is not ax.transData:
                continue  # the call's median, at the right
            box = text.get_window_extent(r)
            assert any(b.x0 <= box.x0 and box.x1 <= b.x1 for b in spans), f"{text.get_text()} spills out of its span"


def test_fig7_a_span_runs_between_the_medians_of_its_steps_and_a_second_stage_of_one_kind_is_lighter():
    row = {"steps": [{"step": "eager", "median_ns": 900e3}, {"step": "function", "median_ns": 500e3},
                     {"step": "xla", "median_ns": 420e3}, {"step": "floor", "median_ns": 9e3}],
           "stages": [{"name": "Python dispatch", "short": "Python op dispatch", "from": "eager", "to": "function"},
                      {"name": "graph executor", "short": "graph executor", "from": "function", "to": "xla"},
                      {"name": "runtime", "short": "TF per-call runtime", "from": "xla", "to": "floor"},
                      {"name": "floor", "from": "floor", "to": None}]}
    (a0, b0, _, c0), (a1, b1, _, c1), (a2, b2, _, c2) = explain.spans(row)
    assert (a0, b0, a1, b1, a2, b2) == pytest.approx((0.9, 0.5, 0.5, 0.42, 0.42, 0.009))
    assert c0 == "#56B4E9" and c1 == explain.lighter("#56B4E9") != c0 and c2 == "#0072B2"
    assert explain.floor_ms(row) == pytest.approx(0.009)
    row["steps"][2]["median_ns"] = 510e3  # xla slower than function: a negative stage has no span
    assert [s[2]["short"] for s in explain.spans(row)] == ["Python op dispatch", "TF per-call runtime"]


# Fig. 8 -----------------------------------------------------------------------------------------

def colour_of(handle) -> str:
    """The colour of a legend handle: a bar container, an errorbar container, a patch or a line."""
    if hasattr(handle, "patches") and handle.patches:
        return matplotlib.colors.to_hex(handle.patches[0].get_facecolor())
    if hasattr(handle, "lines"):
        return matplotlib.colors.to_hex(handle.lines[0].get_markerfacecolor())
    if hasattr(handle, "get_markerfacecolor"):
        return matplotlib.colors.to_hex(handle.get_markerfacecolor())
    return matplotlib.colors.to_hex(handle.get_facecolor())


def test_a_backend_keeps_its_colour_when_another_backend_is_missing(drawn, tmp_path):
    rows = [cell("backends", f"{impl}/predict", "cpu", "cpu-box", median)
            for impl, median in (("keras", 50.0), ("keras_jax", 0.9), ("keras_torch", 4.0))]
    rows += [cell("backends", f"{impl}/predict", "gpu", "gpu-box", median)  # no TensorFlow here
             for impl, median in (("keras_jax", 1.9), ("keras_torch", 5.8))]
    rows += [cell("backends", "keras/predict", "cpu", "old-box", 60.0)]  # not the answering CPU machine
    backends.fig_backends(data_of(rows, answering={"cpu": "cpu-box", "gpu": "gpu-box"}), tmp_path / "b.png")
    assert len(drawn.figs[0].axes) == 2  # one panel per device: the answering machines'
    colours, markers = [], []
    for ax in drawn.figs[0].axes:
        handles, labels = ax.get_legend_handles_labels()
        colours.append({label: colour_of(h) for h, label in zip(handles, labels, strict=True)})
        markers.append({label: h.lines[0].get_marker() for h, label in zip(handles, labels, strict=True)})
    with_tf, without_tf = colours
    # the legend names the Keras backend, not the framework's own ops (another level)
    assert set(with_tf) == {"Keras on TensorFlow", "Keras on JAX", "Keras on PyTorch"}
    assert "Keras on TensorFlow" not in without_tf
    for backend in ("Keras on JAX", "Keras on PyTorch"):
        assert with_tf[backend] == without_tf[backend], backend
    assert len(set(with_tf.values())) == 3  # three backends, three colours
    assert len(set(markers[0].values())) == 3 and markers[0]["Keras on JAX"] == markers[1]["Keras on JAX"]
    assert "not measured: Keras on TensorFlow" in [t.get_text() for t in drawn.figs[0].axes[1].texts]


# Fig. 9 -----------------------------------------------------------------------------------------

def sweep(machine, device, labels, run_id=None):
    return [cell("batch_sweep", label, device, machine, median * batch ** 0.5, batch=batch, run_id=run_id)
            for label, median in labels for batch in (1, 8, 64, 512)]


def test_fig9_draws_the_best_cpu_line_dashed_in_every_gpu_panel_and_bands(drawn, tmp_path):
    cpu = [(f"{i}/{v}", m) for i, v, m in (("numba", "fused", 0.02), ("onednn", "tuned", 0.03), ("onnx", "run", 0.03),
           ("onnx", "openvino", 0.04), ("tf", "function", 0.4), ("jax", "jit", 0.3), ("torch", "eager", 0.2),
           ("numpy", "default", 0.1), ("keras", "predict", 47.0), ("keras", "function", 0.4),
           ("keras_jax", "predict", 0.7), ("keras_jax", "jit", 0.3))]
    gpu = [(f"cuda/{v}", 0.05 + 0.01 * k) for k, v in enumerate(("fused", "graph", "mapped", "batch", "rows"))]
    rows = sweep("amd", "cpu", cpu) + sweep("h100", "gpu", [*gpu, ("cudnn/graph", 0.06), ("keras_jax/jit", 0.7)])
    rows += sweep("intel", "cpu", [("c/fused", 0.001)])  # faster, but not the answering CPU machine
    throughput.fig_throughput(data_of(rows, answering={"cpu": "amd", "gpu": "h100"}), tmp_path / "f9.png")
    best = throughput.best_cpu_line(pd.DataFrame([r for r in rows if r["machine"] != "intel"]))
    assert best["label"].iloc[0] == "numba/fused"
    fig = drawn.figs[0]
    assert len(fig.axes) == 4  # a row per answering machine
    for ax in fig.axes:
        own = [ln for ln in ax.get_lines() if not ln.get_label().startswith("best CPU line")]
        assert 0 < len(own) <= 8
        impls = [ln.get_label().split("/")[0] for ln in own]
        assert len(impls) == len(set(impls))  # one line per level: cuda/fused, the fastest, alone
        assert [m for m in (ln.get_marker() for ln in own)] == [style.marker(i) for i in impls]
        assert all(ln.get_linestyle() == "-" for ln in own)  # dashed means the best CPU line only
        assert len(ax.collections) == len(ax.get_lines())  # every line's interval shaded
        dashed = [ln for ln in ax.get_lines() if ln.get_label().startswith("best CPU line")]
        if ax.get_title(loc="left").startswith("GPU"):
            assert len(dashed) == 1 and dashed[0].get_linestyle() == "--"
            assert dashed[0].get_label() == "best CPU line: numba/fused, amd"
            assert list(dashed[0].get_ydata()) == list(best.sort_values("batch_size")["images_per_s"])
        else:
            assert not dashed


def test_fig9_band_is_the_interval_in_images_per_second():
    cells = pd.DataFrame([cell("batch_sweep", "cudnn/graph", "gpu", "h100", 2.0, batch=64)])
    low, high = throughput.batch_lines.band(cells, "images_per_s")
    assert low[0] == pytest.approx(64 / 2.2e-3) and high[0] == pytest.approx(64 / 1.8e-3)


# Fig. 10 ----------------------------------------------------------------------------------------

def test_fig10_dashed_means_fit_and_nothing_else_in_a_grid_of_panels(drawn, tmp_path):
    labels = ["onednn/default", "tf/function", "tf/eager", "torch/eager", "torch/compile", "keras/train_on_batch",
              "keras/fit", "keras_jax/train_on_batch", "keras_jax/fit"]
    rows = [{**cell("training", label, "cpu", machine, 5.0 * k + 1, batch=batch), "mode": "train"}
            for machine in ("amd", "intel") for k, label in enumerate(labels) for batch in (32, 128, 512)]
    training.fig_training(data_of(rows, answering={"cpu": "amd"}), tmp_path / "f10.png")
    fig = drawn.figs[0]
    assert fig.get_figwidth() * style.DPI <= 1400  # two panels side by side, not in a row of four
    assert {ax.get_title(loc="left").split("\n")[0] for ax in fig.axes} == {"CPU: amd"}  # intel is not answering
    lines = [ln for ax in fig.axes for ln in ax.get_lines()]
    assert len(lines) == len(labels)
    for line in lines:
        assert line.get_linestyle() == ("--" if line.get_label().endswith("/fit") else "-"), line.get_label()


# Fig. 11 ----------------------------------------------------------------------------------------

def test_fig11_draws_the_within_round_ratio_per_implementation(drawn, tmp_path):
    rows = [cell("precision", "torch/eager", "cpu", "amd", 0.205, "float32"),
            cell("precision", "torch/eager", "cpu", "amd", 0.131, "float64"),  # faster in double precision
            cell("precision", "jax/jit", "cpu", "amd", 0.297, "float32"),
            cell("precision", "jax/jit", "cpu", "amd", 0.458, "float64"),
            cell("precision", "numpy/default", "cpu", "amd", 0.114, "float32"),
            cell("precision", "numpy/default", "cpu", "amd", 0.125, "float64", run_id="another-run")]
    rows[3]["rounds_ns"] = [[0.458e6 * (1 + 0.05 * np.sin(k))] * 3 for k in range(5)]
    rows.append(cell("precision", "jax/jit", "cpu", "intel", 0.3))  # not the answering machine
    precision.fig_precision(data_of(rows, answering={"cpu": "amd"}), tmp_path / "f11.png")
    assert len(drawn.figs[0].axes) == 1
    ax = drawn.figs[0].axes[0]
    dots = {ax.get_yticklabels()[round(float(c.lines[0].get_ydata()[0]))].get_text(): c for c in ax.containers}
    by = {(r["label"], r["dtype"]): r for r in rows if r["machine"] == "amd"}
    for label in ("torch/eager", "jax/jit"):
        want = stats.round_ratio(by[(label, "float64")]["rounds_ns"], by[(label, "float32")]["rounds_ns"])
        x = float(dots[label].lines[0].get_xdata()[0])
        assert x == pytest.approx(want["ratio"]), label
        segments = dots[label].lines[2][0].get_segments()[0]
        assert [s[0] for s in segments] == pytest.approx([want["ci95_low"], want["ci95_high"]])
    assert float(dots["torch/eager"].lines[0].get_xdata()[0]) < 1 < float(dots["jax/jit"].lines[0].get_xdata()[0])
    assert "numpy/default" not in dots  # its two cells are of two runs: no within-round ratio
    assert any("no float64/float32 pair in one run" in t.get_text() for t in ax.texts)


# captions ---------------------------------------------------------------------------------------

def test_one_record_a_figure_its_caption_and_drawer_in_reading_order():
    found = every.records()
    assert [r["file"] for r in found] == sorted({r["file"] for r in found})  # fig01, fig02, ... once each
    assert all(r["title"] and r["look"] and callable(every.drawer(r)) for r in found)
    assert [name for name, _ in every.FIGURES] == [r["file"] for r in found]


def test_a_label_goes_away_from_its_nearest_neighbour_at_its_height():
    # a label between two markers at one height reads as the other marker's
    centres = [(500.0, 400.0), (800.0, 402.0), (300.0, 100.0), (300.0, 110.0)]
    sides = place.sides_away(centres, [1, -1, 1, -1])
    assert sides[:2] == [-1, 1]  # oneDNN left, CUDA right: neither label between the two markers
    assert sides[2:] == [1, -1]  # straight above each other: their defaults (CPU right, GPU left)
    assert place.sides_away([(0.0, 0.0), (1000.0, 0.0)], [-1, 1]) == [-1, 1]  # out of reach


def test_a_label_is_nearest_its_own_point():
    from matplotlib.transforms import Bbox

    box = Bbox.from_extents(100, 100, 200, 110)  # a label right of (90, 105), below (150, 140)
    assert place.nearest(box, [(90.0, 105.0), (150.0, 140.0)]) == 0
    assert place.nearest(box, [(90.0, 105.0), (150.0, 112.0)]) == 1  # 2 px above it: reads as this one's


def test_fig1_names_the_device_of_a_level_drawn_on_both_and_both_medians():
    def call(label, median):
        return pd.Series({"study": "api_levels", "run_id": "r", "cell_id": label, "median_ms": median})

    drawn = [{"implementation": "torch", "device": "cpu", "tail": None, "head": call("torch/eager", 0.126)},
             {"implementation": "torch", "device": "gpu", "tail": call("torch/eager", 0.399),
              "head": call("torch/cudagraph", 0.136)}]
    assert cost.label(drawn[0], drawn) == "PyTorch ops (CPU) 126 µs"  # one call: one median
    assert cost.label(drawn[1], drawn) == "PyTorch ops (GPU) 399 µs → 136 µs"  # first written → fastest
    assert cost.label(drawn[0], drawn[:1]) == "PyTorch ops 126 µs"


def test_every_level_has_its_own_marker_and_a_variant_its_own_fill_and_line_style():
    # near hues (sand, orange and olive; pink and wine) never share a marker; a level's variants in one
    # panel differ by fill and line style as well as by shade, and none of them is dashed
    from harness.figures import batch_lines

    markers = [style.marker(name) for name in style.IMPL_ORDER]
    assert len(set(markers)) == len(markers)
    styles = [batch_lines.variant_style(k) for k in range(6)]
    assert len(set(styles)) == 6 and "--" not in {s for _, s in styles}
    assert styles[:2] == [(True, "-"), (False, "-")]


def test_each_variant_of_one_level_has_its_own_shade_of_the_level_colour():
    # the first variant keeps the level's colour and each further one is a lighter shade of it, none
    # repeated, the last 60% toward white (Fig. 9's ten CUDA lines)
    from harness.figures import style

    shades = [style.shade("cuda", k, 10) for k in range(10)]
    assert shades[0] == style.colour("cuda") and len(set(shades)) == 10
    last = [int(shades[-1][i:i + 2], 16) for i in (1, 3, 5)]
    base = [int(style.colour("cuda")[i:i + 2], 16) for i in (1, 3, 5)]
    assert all(abs(c - (b + (255 - b) * style.LIGHTEST)) <= 0.5 for c, b in zip(last, base, strict=True))
    assert style.shade("numpy", 0, 1) == style.colour("numpy")  # a lone variant keeps its colour
    with pytest.raises(ValueError):
        style.shade("cuda", 3, 3)


# every figure ------------------------------------------------------------------------------------

DEVICE_TITLE = re.compile(r"(CPU|GPU): (.+?)(?:\n|  \(|$)")


def test_every_figure_is_at_most_1600_px_tall_and_draws_one_machine_per_device(committed, drawn, tmp_path):
    """Drawn from the committed rows: no figure taller than 1,600 px; each draws the answering machine
    of a device and no other, in one panel (Figs. 9 and 10: one per group of levels)."""
    paths = every.draw_all(committed, tmp_path, report=lambda _: None)
    assert paths and len(drawn.figs) == len(paths)
    answering = {d.upper(): style.short_machine(m) for d, m in pick.answering_machines(committed).items()}
    for path, fig in zip(paths, drawn.figs, strict=True):
        _width, height = struct.unpack(">II", path.read_bytes()[16:24])
        assert height <= 1600, (path.name, height)
        titles = [DEVICE_TITLE.match(ax.get_title(loc="left")) for ax in fig.axes]
        found = [(m[1], " ".join(m[2].split())) for m in titles if m]
        per_device = len(throughput.GROUPS) if path.name.startswith(("fig09", "fig10")) else 1
        for device in {d for d, _ in found}:
            assert len([d for d, _ in found if d == device]) <= per_device, path.name
        for device, machine in found:  # a title wrapped to its panel's width is the name wrapped
            assert answering[device].startswith(machine) or machine.startswith(answering[device][:20]), \
                (path.name, machine)
