"""The figures draw what the rows say: each machine against its own floor (the time-split
figure), every machine (precision), and one colour per Keras backend in every panel whichever
backends a panel has. Synthetic rows, the drawn figure captured before it is saved."""

import math

import matplotlib.colors
import pandas as pd
import pytest

from harness.report.figures import backends, overhead, precision
from harness.report.rundata import ReportData


def cell(study, label, device, machine, median, dtype="float32", batch=1):
    impl, variant = label.split("/")
    return {"study": study, "run_id": f"run-{machine}", "machine": machine, "cell_id": f"{label}/{device}",
            "implementation": impl, "variant": variant, "label": label, "device": device,
            "batch_size": batch, "dtype": dtype, "status": "ok", "reason": "", "threads": math.nan,
            "median_ms": median, "ci_low_ms": median * 0.9, "ci_high_ms": median * 1.1,
            "device_median_ms": math.nan, "noisy": False, "images_per_s": batch / median * 1e3}


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """The figure each draw function hands to finish(), instead of a PNG."""
    captured = []

    def keep(fig, runs, study, path, *args, **kwargs):
        captured.append(fig)
        return path

    for module in (backends, precision):
        monkeypatch.setattr(module, "finish", keep)
    return captured


def data_of(rows) -> ReportData:
    """The report's data with these cells and no runs."""
    frame = pd.DataFrame(rows)
    return ReportData(runs=[], frame=frame, loc_rows=[], history=frame)


def plotted_values(fig) -> list[float]:
    """Every value drawn: bar lengths, and the x and y data of every line and marker."""
    out = []
    for ax in fig.axes:
        for patch in ax.patches:
            out += [patch.get_width(), patch.get_height()]
        for line in ax.lines:
            out += [float(v) for v in line.get_xdata()] + [float(v) for v in line.get_ydata()]
    return out


def drawn_with(values, target) -> bool:
    return any(math.isclose(v, target, rel_tol=1e-9) for v in values)


def test_each_machine_is_split_against_its_own_floor():
    cells = pd.DataFrame([cell("overhead", "numpy/default", "cpu", "amd", 0.150),
                          cell("overhead", "tf/function", "cpu", "amd", 0.450),
                          cell("overhead", "onednn/tuned", "cpu", "intel", 0.030),
                          cell("overhead", "numpy/default", "cpu", "intel", 0.180)])
    split = overhead.overhead_split(cells)
    assert len(split) == 4
    for row, base, _how in split:
        own_floor = cells[cells["machine"] == row["machine"]]["median_ms"].min()
        assert base == own_floor, (row["machine"], row["label"], base)


def test_precision_draws_every_machine(drawn, tmp_path):
    rows = [cell("precision", "numpy/default", "cpu", machine, median, dtype)
            for machine, medians in (("amd", (0.150, 0.160)), ("intel", (0.190, 0.230)))
            for median, dtype in zip(medians, ("float32", "float64"), strict=True)]
    precision.fig_precision(data_of(rows), tmp_path / "p.png")
    values = plotted_values(drawn[0])
    for row in rows:
        assert drawn_with(values, row["median_ms"]), (row["machine"], row["dtype"])


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
    backends.fig_backends(data_of(rows), tmp_path / "b.png")
    colours = []
    for ax in drawn[0].axes:
        handles, labels = ax.get_legend_handles_labels()
        colours.append({label: colour_of(h) for h, label in zip(handles, labels, strict=True)})
    with_tf, without_tf = colours
    assert "TensorFlow" in with_tf and "TensorFlow" not in without_tf
    for backend in ("JAX", "PyTorch"):
        assert with_tf[backend] == without_tf[backend], backend
    assert len(set(with_tf.values())) == 3  # three backends, three colours
