"""The report's figures (PNG, 200 dpi), pure functions of the result files and loc.csv.

Colour-blind-safe (Okabe-Ito), every axis labelled with units, a caption line naming the
environment under each figure. `python -m harness figures` (make figures) draws them all.
"""

from pathlib import Path

import matplotlib.ticker
import numpy as np

from harness import registry
from harness.report import explain_section, gpu_section, training_section
from harness.report.style import (
    BACKEND_OF,
    FIGURES_DIR,
    IMPL_ORDER,
    LEVEL_ORDER,
    OKABE_ITO,
    decorate,
    finish,
    fmt_ms,
    lines_against_batch,
    ok_cells,
    plt,
)


def fig_loc(loc_rows, out: Path, runs) -> Path:
    parts = ["forward", "weight layout", "ffi binding", "training step"]
    levels = [r for r in LEVEL_ORDER if any(row["api_level"] == r for row in loc_rows)]
    fig, ax = plt.subplots(figsize=(9, 4.4))
    bottom = np.zeros(len(levels))
    for i, part in enumerate(parts):
        values = np.array([sum(r["code"] for r in loc_rows if r["api_level"] == lvl and r["part"] == part)
                           for lvl in levels], dtype=float)
        ax.bar(levels, values, bottom=bottom, color=OKABE_ITO[i], label=part)
        bottom += values
    for x, total in enumerate(bottom):
        ax.text(x, total, f"{int(total)}", ha="center", va="bottom", fontsize=9)
    shared = sum(r["code"] for r in loc_rows if r["api_level"] == "shared")
    ax.bar(len(levels), shared, color="white", edgecolor="#777777", hatch="..",
           label="shared loaders (every level uses them)")
    ax.text(len(levels), shared, f"{shared}", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(levels) + 1), [lvl.replace("-", "\n") for lvl in levels]
                  + ["shared loaders\n(MNIST, HDF5)"])
    decorate(ax, "Fig. 1  Lines of code per API level",
             "API level (implementation package); blanks, comments and docstrings not counted",
             "code lines (pygount)", legend_size=10)
    return finish(fig, runs, None, out, "lines counted by pygount from this checkout (reports/loc.csv)")


def fig_latency(frame, runs, out: Path) -> Path | None:
    cells = ok_cells(frame, "api_levels")
    cells = cells[(cells["implementation"] != "null") & (cells["batch_size"] == 1)]
    if cells.empty:
        return None
    series = sorted({(m, d) for m, d in zip(cells["machine"], cells["device"], strict=True)},
                    key=lambda s: (s[1], s[0]))
    impls = [i for i in IMPL_ORDER if i in set(cells["implementation"])]
    impls += sorted(set(cells["implementation"]) - set(impls))  # a lab's module:Class
    # every variant the study measured (cuDNN's graph is the GPU floor, oneDNN's naive its first try)
    keys = [(impl, variant) for impl in impls
            for variant in dict.fromkeys(cells[cells["implementation"] == impl]["variant"])]
    fig, ax = plt.subplots(figsize=(max(8, 1.0 * len(keys)), 4.8))
    width = 0.8 / len(series)
    for i, (machine, device) in enumerate(series):
        xs, ys, lo, hi = [], [], [], []
        for x, (impl, variant) in enumerate(keys):
            row = cells[(cells["machine"] == machine) & (cells["device"] == device)
                        & (cells["implementation"] == impl) & (cells["variant"] == variant)]
            if row.empty:
                continue
            r = row.iloc[0]
            xs.append(x + (i - (len(series) - 1) / 2) * width)
            ys.append(r["median_ms"])
            lo.append(r["median_ms"] - r["ci_low_ms"])
            hi.append(r["ci_high_ms"] - r["median_ms"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, color=OKABE_ITO[i % len(OKABE_ITO)],
               label=f"{device.upper()}: {machine}")
        for x, y, up in zip(xs, ys, hi, strict=True):
            ax.text(x, (y + up) * 1.1, fmt_ms(y), ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(keys)), [f"{impl}\n{variant}" for impl, variant in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room for the labels above the tallest whisker
    decorate(ax, "Fig. 2  Per-image latency per implementation (bars: median; whiskers: 95% CI)",
             "implementation and variant, from the raw library up to Keras",
             "per-image inference time, median (ms, log scale)")
    return finish(fig, runs, "api_levels", out)


def fig_histograms(frame, runs, out: Path) -> Path | None:
    cells = ok_cells(frame, "api_levels")
    cells = cells[cells["implementation"] != "null"]
    if cells.empty:
        return None
    n = len(cells)
    cols = min(3, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.8 * rows), squeeze=False)
    for ax, (_, r) in zip(axes.flat, cells.iterrows(), strict=False):
        t = np.asarray(r["times_ms"])
        bins = np.geomspace(max(t.min(), 1e-6), t.max() * 1.0001, 40)
        ax.hist(t, bins=bins, color=OKABE_ITO[0] if r["device"] == "cpu" else OKABE_ITO[1])
        ax.axvline(r["median_ms"], color="black", linewidth=1, label=f"median {fmt_ms(r['median_ms'])}")
        ax.axvline(r["p99_ms"], color="#777777", linestyle="--", linewidth=1,
                   label=f"p99 {fmt_ms(r['p99_ms'])}")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_title(f"{r['label']} on {r['device'].upper()}" + ("  [noisy]" if r["noisy"] else ""),
                     fontsize=9)
        ax.set_xlabel("per-image time (ms, log scale)")
        ax.set_ylabel("calls")
        ax.legend(frameon=False, fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle("Fig. 3  Distribution of per-image latency (every timed call)")
    return finish(fig, runs, "api_levels", out)


def fig_cold_start(frame, runs, out: Path) -> Path | None:
    cells = ok_cells(frame, "api_levels")
    cells = cells[(cells["implementation"] != "null") & cells["cold_start_ms"].notna()]
    if cells.empty:
        return None
    labels = [f"{r['label']}\n{r['device'].upper()}" for _, r in cells.iterrows()]
    x = np.arange(len(cells))
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(cells)), 4.5))
    ax.bar(x - 0.2, cells["cold_start_ms"], 0.4, color=OKABE_ITO[3], label="first call (cold start)")
    ax.bar(x + 0.2, cells["median_ms"], 0.4, color=OKABE_ITO[0], label="steady state (median)")
    for xi, (cold, warm) in enumerate(zip(cells["cold_start_ms"], cells["median_ms"], strict=True)):
        ax.text(xi - 0.2, cold * 1.08, fmt_ms(cold), ha="center", fontsize=7)
        ax.text(xi + 0.2, warm * 1.08, fmt_ms(warm), ha="center", fontsize=7)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_yscale("log")
    decorate(ax, "Fig. 4  Cold start (tracing, compilation, set-up) vs steady state",
             "implementation / variant, device",
             "time of one call (ms, log scale)")
    return finish(fig, runs, "api_levels", out)


def overhead_split(cells, gpu_busy=None):
    """Per cell: (compute or device part, host-overhead part, how the split was made).
    gpu_busy: {(machine, label): ms} from `kernels` rows, the GPU's own busy time; CUDA events
    otherwise, which also span the host's enqueueing."""
    out = []
    for device in registry.DEVICES:
        part = cells[cells["device"] == device]
        real = part[part["implementation"] != "null"]
        if real.empty:
            continue
        floor = real["median_ms"].min()
        floor_label = real.loc[real["median_ms"].idxmin(), "label"]
        for _, r in real.sort_values("median_ms").iterrows():
            if device == "gpu" and (r["machine"], r["label"]) in (gpu_busy or {}):
                base, how = gpu_busy[(r["machine"], r["label"])], "GPU busy time (kernels trace)"
            elif device == "gpu" and not np.isnan(r["device_median_ms"]):
                base, how = r["device_median_ms"], "device time (CUDA events)"
            elif device == "gpu":
                base, how = np.nan, "no device timer"
            else:
                base, how = floor, f"CPU compute floor (the fastest implementation, {floor_label})"
            out.append((r, base, how))
    return out


def fig_overhead(frame, runs, out: Path) -> Path | None:
    cells = ok_cells(frame, "overhead")
    cells = cells[cells["batch_size"] == 1] if not cells.empty else cells
    if cells.empty:
        return None
    busy = {(r["machine"], f"{r['implementation']}/{r['variant']}"): r["gpu_busy_ns_per_call"] / 1e6
            for r in gpu_section.kernel_rows(runs)}
    split = overhead_split(cells, busy)
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(split) + 2.2))
    labels = []
    for y, (r, base, _how) in enumerate(split):
        labels.append(f"{r['label']} ({r['device'].upper()})")
        total = r["median_ms"]
        if np.isnan(base):
            ax.barh(y, 100, color="white", edgecolor=OKABE_ITO[7], hatch="//")
        else:
            share = 100 * min(base / total, 1.0)
            ax.barh(y, share, color=OKABE_ITO[2])
            ax.barh(y, 100 - share, left=share, color=OKABE_ITO[3])
        ax.text(101, y, f"{fmt_ms(total)} per image", va="center", fontsize=7)
    ax.set_yticks(range(len(split)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the median per-image time (%)")
    ax.set_title("Fig. 5  Where a call's time goes: compute or device time vs host overhead")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=OKABE_ITO[2], label="GPU: busy time from the kernels trace (else CUDA "
                             "events, which span the host's enqueueing too); CPU: compute floor = the "
                             "fastest implementation's time in the study"),
                       Patch(color=OKABE_ITO[3], label="host overhead (the rest of the call)"),
                       Patch(facecolor="white", edgecolor="black", hatch="//",
                             label="GPU, not split (no device timer)")],
              frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(split)),
              ncol=1)
    fig.subplots_adjust(right=0.85)
    return finish(fig, runs, "overhead", out)


def fig_throughput(frame, runs, out: Path) -> Path | None:
    cells = ok_cells(frame, "batch_sweep")
    if cells.empty:
        return None
    fig, ax = plt.subplots(figsize=(11, 5))
    lines_against_batch(ax, cells, "images_per_s")
    decorate(ax, "Fig. 6  Throughput against batch size",
             "batch size (images per call, log scale)",
             "throughput (images/s, log scale)")
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the lines
    return finish(fig, runs, "batch_sweep", out)


def fig_precision(frame, runs, out: Path) -> Path | None:
    cells = ok_cells(frame, "precision")
    if cells.empty:
        return None
    groups = sorted({(r["label"], r["device"]) for _, r in cells.iterrows()})
    x = np.arange(len(groups))
    fig, ax = plt.subplots(figsize=(max(8, 1.5 * len(groups)), 4.5))
    for i, dtype in enumerate(("float32", "float64")):
        ys = []
        for label, device in groups:
            row = cells[(cells["label"] == label) & (cells["device"] == device) & (cells["dtype"] == dtype)]
            ys.append(row["median_ms"].iloc[0] if not row.empty else np.nan)
        ax.bar(x + (i - 0.5) * 0.4, ys, 0.4, color=OKABE_ITO[i], label=dtype)
        for xi, y in zip(x, ys, strict=True):
            if not np.isnan(y):
                ax.text(xi + (i - 0.5) * 0.4, y * 1.02, fmt_ms(y), ha="center", fontsize=7)
    ax.set_xticks(x, [f"{label}\n{device.upper()}" for label, device in groups], fontsize=8)
    decorate(ax, "Fig. 7  float32 against float64",
             "implementation / variant, device",
             "per-image time, median (ms)", legend_size=10)
    return finish(fig, runs, "precision", out)


def backend_rows(cells, device, machine):
    """Per backend: {stage: row} with the compiled path as one stage (its variant named)."""
    stages = {"predict": "predict", "predict_on_batch": "predict_on_batch", "call": "call",
              "function": "compiled", "jit": "compiled", "compile": "compiled"}
    found = {}
    for _, r in cells[(cells["device"] == device) & (cells["machine"] == machine)].iterrows():
        if r["implementation"] in BACKEND_OF and r["variant"] in stages:
            found.setdefault(r["implementation"], {})[stages[r["variant"]]] = r
    return found


def fig_backends(frame, runs, out: Path) -> Path | None:
    cells = ok_cells(frame, "backends")
    cells = cells[cells["batch_size"] == 1] if not cells.empty else cells
    if cells.empty:
        return None
    panels = sorted({(d, m) for d, m in zip(cells["device"], cells["machine"], strict=True)})
    stages = ["predict", "predict_on_batch", "call", "compiled"]
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 4.8), squeeze=False)
    for ax, (device, machine) in zip(axes.flat, panels, strict=True):
        by_backend = backend_rows(cells, device, machine)
        impls = [i for i in BACKEND_OF if i in by_backend]
        width = 0.8 / max(len(impls), 1)
        for i, impl in enumerate(impls):
            for x, stage in enumerate(stages):
                r = by_backend[impl].get(stage)
                if r is None:
                    continue
                xpos = x + (i - (len(impls) - 1) / 2) * width
                ax.bar(xpos, r["median_ms"], width, color=OKABE_ITO[i],
                       yerr=[[r["median_ms"] - r["ci_low_ms"]], [r["ci_high_ms"] - r["median_ms"]]],
                       capsize=2, label=BACKEND_OF[impl] if x == 0 or stage == "predict" else None)
                text = fmt_ms(r["median_ms"]) + (f"\n{r['variant']}" if stage == "compiled" else "")
                ax.text(xpos, r["median_ms"] * 1.1, text, ha="center", va="bottom", fontsize=6)
        floor = cells[(cells["device"] == device) & (cells["machine"] == machine)
                      & (cells["implementation"] == "numpy")]
        if not floor.empty:
            ax.axhline(floor["median_ms"].iloc[0], color="#555555", linestyle=":", linewidth=1,
                       label=f"NumPy reference ({fmt_ms(floor['median_ms'].iloc[0])})")
        ax.set_xticks(range(len(stages)), ["model.predict", "predict_on_batch", "model(x)",
                                           "compiled model(x)"])
        ax.set_yscale("log")
        decorate(ax, f"{device.upper()}: {machine}", "how the model is called",
                 "per-image time, median (ms, log scale)")
    fig.suptitle("Fig. 8  One Keras model, three backends (bars: median; whiskers: 95% CI)")
    return finish(fig, runs, "backends", out)


FIGURES = {
    "fig2_latency.png": fig_latency,
    "fig3_histograms.png": fig_histograms,
    "fig4_cold_start.png": fig_cold_start,
    "fig5_overhead.png": fig_overhead,
    "fig6_throughput.png": fig_throughput,
    "fig7_precision.png": fig_precision,
    "fig8_backends.png": fig_backends,
    "fig10_training.png": training_section.fig_training,
}


def draw_all(runs, frame, loc_rows, out_dir: Path = FIGURES_DIR, report=print) -> list[Path]:

    drawn = [fig_loc(loc_rows, out_dir / "fig1_loc.png", runs)]
    path = explain_section.fig_explain(explain_section.explain_rows(runs), runs, out_dir / "fig9_explain.png")
    drawn += [path] if path else []
    for name, draw in FIGURES.items():
        path = draw(frame, runs, out_dir / name)
        if path is None:
            report(f"  {name}: no results for its study yet (make run-all)")
        else:
            drawn.append(path)
    return drawn
