"""The report's figures (PNG, 150 dpi), pure functions of the result files and loc.csv, named
in reading order (fig01 ... fig11). One colour per implementation in every figure (style.colour),
one panel per machine and device, dots on log scales, every axis labelled with units, a caption
line naming the environment under each figure. `python -m harness figures` draws them all."""

from pathlib import Path

import matplotlib.ticker
import numpy as np

from harness import registry
from harness.report import dotplot, explain_section, fig_cost, gpu_section, training_section
from harness.report.style import (
    BACKEND_OF,
    FIGURES_DIR,
    OKABE_ITO,
    colour,
    decorate,
    finish,
    fmt_ms,
    ladder_sorted,
    lines_against_batch,
    ok_cells,
    panels,
    plt,
    short_machine,
)


def same_y_scale(axes) -> None:
    """Every panel on the y range that holds all of them (panels compare by eye)."""
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(low, high)


def fig_loc(loc_rows, out: Path, runs) -> Path:
    """Fig. 2: code lines per level, split into the parts a reader wants apart."""
    parts = ["forward", "kernel source", "weight layout", "ffi binding", "training step"]
    ladder = ["cuda", "cudnn", "onednn", "tensorflow-ops", "jax-ops", "torch-ops", "keras", "numpy"]
    present = {row["api_level"] for row in loc_rows} - {"shared"}
    levels = [lvl for lvl in ladder if lvl in present] + sorted(present - set(ladder))
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
                  + ["shared loaders\n(MNIST, HDF5)"], fontsize=8)
    decorate(ax, "Fig. 2  Lines of code per level, by part",
             "level (implementation package), bottom rung first; blanks, comments and docstrings not counted",
             "code lines (pygount)", legend_size=8)
    return finish(fig, runs, None, out, "lines counted by pygount from this checkout (reports/loc.csv)",
                  margins={"left": 0.08, "right": 0.99, "top_in": 0.4, "bottom_in": 0.85})


def api_cells(frame):
    """api_levels at batch 1, float32, without the harness's null implementation."""
    cells = ok_cells(frame, "api_levels")
    if cells.empty:
        return cells
    return cells[(cells["implementation"] != "null") & (cells["batch_size"] == 1)
                 & (cells["dtype"] == "float32")]


def fig_latency(frame, runs, out: Path) -> Path | None:
    """Fig. 3: every implementation and variant at batch 1, a dot per machine, CPU and GPU apart."""
    cells = api_cells(frame)
    if cells.empty:
        return None
    devices = [d for d in registry.DEVICES if (cells["device"] == d).any()]
    labels = {d: ladder_sorted(cells[cells["device"] == d]["label"]) for d in devices}
    fig, axes = dotplot.stacked([len(labels[d]) for d in devices])
    for ax, device in zip(axes, devices, strict=True):
        part = cells[cells["device"] == device]
        machines = sorted(part["machine"].unique())
        for k, machine in enumerate(machines):
            for _, r in part[part["machine"] == machine].iterrows():
                dotplot.dot(ax, labels[device].index(r["label"]) + (k - (len(machines) - 1) / 2) * 0.22, r,
                            colour(r["implementation"]), marker=MACHINE_MARKERS[k % len(MACHINE_MARKERS)])
        dotplot.rows_axis(ax, labels[device], f"{device.upper()}, batch 1")
        dotplot.time_axis(ax)
        if len(machines) > 1 or device == devices[-1]:
            ax.legend(handles=machine_handles(machines), frameon=False, fontsize=7, loc="lower right")
    fig.suptitle("Fig. 3  Per-image latency of every implementation (dot: median; whisker: 95% CI)")
    return finish(fig, runs, "api_levels", out, margins=dotplot.STACKED)


MACHINE_MARKERS = "o^vD"


def machine_handles(machines):
    import matplotlib.lines

    return [matplotlib.lines.Line2D([], [], marker=MACHINE_MARKERS[k % len(MACHINE_MARKERS)], color="#555555",
                                    linestyle="none", label=short_machine(m)) for k, m in enumerate(machines)]


def fig_distributions(frame, runs, out: Path) -> Path | None:
    """Fig. 4: every timed call of every cell, as a box (quartiles) with whiskers at p1 and p99,
    one panel per machine and device."""
    cells = api_cells(frame)
    if cells.empty:
        return None
    fig, panel_list = dotplot.ladder_panels(cells, per_row=0.32)
    for ax, part, labels, title in panel_list:
        for _, r in part.iterrows():
            y = labels.index(r["label"])
            box = ax.boxplot([r["times_ms"]], positions=[y], vert=False, whis=(1, 99), showfliers=False,
                             widths=0.6, patch_artist=True, medianprops={"color": "black"})
            box["boxes"][0].set_facecolor(colour(r["implementation"]))
            box["boxes"][0].set_alpha(0.8)
            if r["noisy"]:
                ax.text(r["p99_ms"] * 1.1, y, "noisy", va="center", fontsize=6, color="#555555")
        dotplot.rows_axis(ax, labels, title)
        dotplot.time_axis(ax, "per-image time of every timed call (log scale)")
    fig.suptitle("Fig. 4  Spread of every timed call (box: quartiles, black line: median; whiskers: p1–p99)")
    return finish(fig, runs, "api_levels", out, margins=dotplot.STACKED)


def fig_cold_start(frame, runs, out: Path) -> Path | None:
    """Fig. 5: the first call against the steady state, for cells whose worker started for them
    (a variant that shared a process with an earlier one had no cold start)."""
    cells = api_cells(frame)
    if cells.empty:
        return None
    cells = cells[cells["cold_start_ms"].notna() & (cells["own_process"] == True)]  # noqa: E712
    if cells.empty:
        return None
    fig, panel_list = dotplot.ladder_panels(cells)
    for ax, part, labels, title in panel_list:
        for _, r in part.iterrows():
            y = labels.index(r["label"])
            ax.plot([r["median_ms"], r["cold_start_ms"]], [y, y], color="#BBBBBB", linewidth=1, zorder=1)
            dotplot.dot(ax, y, r, colour(r["implementation"]), column="median_ms")
            dotplot.dot(ax, y, r, colour(r["implementation"]), marker="D", filled=False,
                        column="cold_start_ms")
            ax.text(r["cold_start_ms"] * 1.25, y, f"{fmt_ms(r['cold_start_ms'])}", va="center", fontsize=6)
        dotplot.rows_axis(ax, labels, title)
        dotplot.time_axis(ax, "time of one call (log scale)")
    import matplotlib.lines

    fig.axes[0].legend(handles=[matplotlib.lines.Line2D([], [], marker="o", color="#555555", linestyle="none",
                                                        label="steady state (median)"),
                                matplotlib.lines.Line2D([], [], marker="D", color="#555555",
                                                        markerfacecolor="white", linestyle="none",
                                                        label="first call (cold start)")],
                       frameon=False, fontsize=7, loc="lower right")
    fig.suptitle("Fig. 5  Cold start (tracing, compilation, set-up) against steady state, for variants "
                 "that started their own process", fontsize=10)
    return finish(fig, runs, "api_levels", out, margins=dotplot.STACKED)


def overhead_split(cells, gpu_busy=None):
    """Per cell: (compute or device part, host-overhead part, how the split was made), each
    machine's CPU cells against that machine's own floor (its fastest measured implementation).
    gpu_busy: {(machine, label): ms} from `kernels` rows, the GPU's own busy time; CUDA events
    otherwise, which also span the host's enqueueing."""
    out = []
    for (_machine, device), part in sorted(cells.groupby(["machine", "device"]),
                                          key=lambda kv: (kv[0][1] != "cpu", kv[0][0])):
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
                base, how = floor, f"fastest measured implementation on this CPU ({floor_label})"
            out.append((r, base, how))
    return out


def fig_overhead(frame, runs, out: Path) -> Path | None:
    """Fig. 6: each call's share above its machine's floor (CPU) or outside the GPU's work."""
    cells = ok_cells(frame, "overhead")
    cells = cells[cells["batch_size"] == 1] if not cells.empty else cells
    if cells.empty:
        return None
    busy = {(r["machine"], f"{r['implementation']}/{r['variant']}"): r["gpu_busy_ns_per_call"] / 1e6
            for r in gpu_section.kernel_rows(runs)}
    split = overhead_split(cells, busy)
    groups = list(dict.fromkeys((r["device"], r["machine"]) for r, _, _ in split))
    sizes = [sum(1 for r, _, _ in split if (r["device"], r["machine"]) == g) for g in groups]
    fig, axes = dotplot.stacked(sizes, per_row=0.24)
    for ax, group in zip(axes, groups, strict=True):
        rows = [(r, base) for r, base, _ in split if (r["device"], r["machine"]) == group]
        for y, (r, base) in enumerate(rows):
            if np.isnan(base):
                ax.barh(y, 100, color="white", edgecolor="#555555", hatch="//")
            else:
                share = 100 * min(base / r["median_ms"], 1.0)
                ax.barh(y, share, color=OKABE_ITO[2])
                ax.barh(y, 100 - share, left=share, color=OKABE_ITO[3])
            ax.text(101, y, fmt_ms(r["median_ms"]), va="center", fontsize=7)
        dotplot.rows_axis(ax, [r["label"] for r, _ in rows], dotplot.panel_title(*group))
        ax.set_xlim(0, 100)
    axes[-1].set_xlabel("share of the median per-image time (%); the median is written at the right")
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=OKABE_ITO[2], label="CPU: the machine's fastest measured implementation; "
                              "GPU: busy time (kernels trace, else CUDA events)"),
                        Patch(color=OKABE_ITO[3], label="host overhead (the rest of the call)"),
                        Patch(facecolor="white", edgecolor="#555555", hatch="//",
                              label="GPU, no device timer")],
               frameon=False, fontsize=7, loc="upper center", ncol=2,
               bbox_to_anchor=(0.5, 1 - 0.4 / fig.get_figheight()))
    fig.suptitle("Fig. 6  Where a call's time goes: the floor or the GPU's work, and host overhead",
                 y=1 - 0.1 / fig.get_figheight(), va="top")
    return finish(fig, runs, "overhead", out, margins={**dotplot.STACKED, "right": 0.9, "top_in": 1.2})


def panel_grid(n, width_each=4.3, height=4.2):
    fig, axes = plt.subplots(1, n, figsize=(width_each * n, height), squeeze=False)
    return fig, list(axes[0])


def fig_throughput(frame, runs, out: Path) -> Path | None:
    """Fig. 9: images/s against batch size, one panel per machine and device."""
    cells = ok_cells(frame, "batch_sweep")
    if cells.empty:
        return None
    groups = panels(cells)
    fig, axes = panel_grid(len(groups), height=5.2)
    for ax, (device, machine) in zip(axes, groups, strict=True):
        lines_against_batch(ax, cells[(cells["device"] == device) & (cells["machine"] == machine)],
                            "images_per_s")
        ax.set_title(dotplot.panel_title(device, machine), fontsize=9, loc="left")
        ax.set_xlabel("batch size (images per call)")
        ax.grid(True, which="major", color="#EEEEEE")
        ax.legend(frameon=False, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    axes[0].set_ylabel("throughput (images/s, log scale)")
    same_y_scale(axes)
    fig.suptitle("Fig. 9  Throughput against batch size (the same y scale in every panel)")
    return finish(fig, runs, "batch_sweep", out, margins={"left": 0.06, "right": 0.99, "top_in": 0.75,
                                                           "bottom_in": 1.7, "wspace": 0.15})


def fig_precision(frame, runs, out: Path) -> Path | None:
    """Fig. 11: float32 (filled) against float64 (hollow), one panel per machine and device."""
    cells = ok_cells(frame, "precision")
    if cells.empty:
        return None
    cells = cells[cells["batch_size"] == 1]
    fig, panel_list = dotplot.ladder_panels(cells)
    for ax, part, labels, title in panel_list:
        for _, r in part.iterrows():
            y = labels.index(r["label"]) + (0.15 if r["dtype"] == "float64" else -0.15)
            dotplot.dot(ax, y, r, colour(r["implementation"]), filled=r["dtype"] == "float32",
                        marker="o" if r["dtype"] == "float32" else "D")
        dotplot.rows_axis(ax, labels, title)
        dotplot.time_axis(ax)
    import matplotlib.lines

    fig.axes[0].legend(handles=[matplotlib.lines.Line2D([], [], marker=m, color="#555555", linestyle="none",
                                                        markerfacecolor=f, label=d)
                                for m, f, d in (("o", "#555555", "float32"), ("D", "white", "float64"))],
                       frameon=False, fontsize=7, loc="lower right")
    fig.suptitle("Fig. 11  float32 (filled) against float64 (hollow), batch 1")
    return finish(fig, runs, "precision", out, margins=dotplot.STACKED)


def backend_rows(cells, device, machine):
    """Per backend: {stage: row} with the compiled path as one stage (its variant named)."""
    stages = {"predict": "predict", "predict_on_batch": "predict_on_batch", "call": "call",
              "function": "compiled", "jit": "compiled", "compile": "compiled"}
    found = {}
    for _, r in cells[(cells["device"] == device) & (cells["machine"] == machine)].iterrows():
        if r["implementation"] in BACKEND_OF and r["variant"] in stages:
            found.setdefault(r["implementation"], {})[stages[r["variant"]]] = r
    return found


def first_stage(found, stages):
    return next(s for s in stages if s in found)


def fig_backends(frame, runs, out: Path) -> Path | None:
    """Fig. 8: one Keras model on three backends, a panel per machine and device; each backend
    keeps its colour in every panel, whichever backends a panel has."""
    cells = ok_cells(frame, "backends")
    cells = cells[cells["batch_size"] == 1] if not cells.empty else cells
    if cells.empty:
        return None
    groups = panels(cells)
    stages = ["predict", "predict_on_batch", "call", "compiled"]
    fig, axes = panel_grid(len(groups))
    for ax, (device, machine) in zip(axes, groups, strict=True):
        by_backend = backend_rows(cells, device, machine)
        for impl in BACKEND_OF:  # fixed order and fixed offsets: a missing backend leaves a gap
            offset = (list(BACKEND_OF).index(impl) - 1) * 0.2
            for x, stage in enumerate(stages):
                r = by_backend.get(impl, {}).get(stage)
                if r is None:
                    continue
                ax.errorbar(x + offset, r["median_ms"], yerr=[[r["median_ms"] - r["ci_low_ms"]],
                                                             [r["ci_high_ms"] - r["median_ms"]]],
                            marker="o", markersize=6, color=colour(impl), markeredgecolor="black",
                            markeredgewidth=0.5, capsize=2, linestyle="none",
                            label=BACKEND_OF[impl] if stage == first_stage(by_backend[impl], stages)
                            else None)
        floor = cells[(cells["device"] == device) & (cells["machine"] == machine)
                      & (cells["implementation"] == "numpy")]
        if not floor.empty:
            ax.axhline(floor["median_ms"].iloc[0], color="#555555", linestyle=":", linewidth=1,
                       label=f"NumPy reference ({fmt_ms(floor['median_ms'].iloc[0])})")
        ax.set_xticks(range(len(stages)), ["predict", "predict_on\n_batch", "model(x)", "compiled\nmodel(x)"],
                      fontsize=8)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_ms(v)))
        ax.grid(True, axis="y", color="#EEEEEE")
        ax.set_title(dotplot.panel_title(device, machine), fontsize=9, loc="left")
        missing = [BACKEND_OF[i] for i in BACKEND_OF if i not in by_backend]
        if missing:
            ax.text(0.02, 0.02, f"not measured: {', '.join(missing)}", transform=ax.transAxes, fontsize=7,
                    color="#555555")
        ax.legend(frameon=False, fontsize=7, loc="upper right")
    axes[0].set_ylabel("per-image time, median (log scale)")
    same_y_scale(axes)
    fig.suptitle("Fig. 8  One Keras model, three backends, called four ways (dot: median; whisker: 95% CI)")
    return finish(fig, runs, "backends", out, margins={"left": 0.07, "right": 0.99, "top_in": 0.75,
                                                        "bottom_in": 0.55, "wspace": 0.18})


def draw_all(runs, frame, loc_rows, out_dir: Path = FIGURES_DIR, report=print) -> list[Path]:
    """Every figure, in reading order; a figure whose study has no rows is named, not drawn."""
    explain = explain_section.explain_rows(runs)
    figures = [
        ("fig01_cost_vs_code.png", lambda p: fig_cost.fig_cost(frame, loc_rows, runs, p)),
        ("fig02_loc.png", lambda p: fig_loc(loc_rows, p, runs)),
        ("fig03_latency.png", lambda p: fig_latency(frame, runs, p)),
        ("fig04_distributions.png", lambda p: fig_distributions(frame, runs, p)),
        ("fig05_cold_start.png", lambda p: fig_cold_start(frame, runs, p)),
        ("fig06_time_split.png", lambda p: fig_overhead(frame, runs, p)),
        ("fig07_explain.png", lambda p: explain_section.fig_explain(explain, runs, p)),
        ("fig08_backends.png", lambda p: fig_backends(frame, runs, p)),
        ("fig09_throughput.png", lambda p: fig_throughput(frame, runs, p)),
        ("fig10_training.png", lambda p: training_section.fig_training(frame, runs, p)),
        ("fig11_precision.png", lambda p: fig_precision(frame, runs, p)),
    ]
    drawn = []
    for name, draw in figures:
        path = draw(out_dir / name)
        if path is None:
            report(f"  {name}: no results for its study yet (make run-all)")
        else:
            drawn.append(path)
    return drawn
