"""Figs. 3 to 5, every implementation and variant of `api_levels` at batch 1: its latency (a dot
per machine), the spread of every timed call, and its cold start against its steady state."""

from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from harness import registry
from harness.report.figures import dotplot
from harness.report.rundata import ReportData
from harness.report.style import colour, finish, fmt_ms, ladder_sorted, ok_cells, short_machine


def api_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """api_levels at batch 1, float32, without the harness's null implementation."""
    cells = ok_cells(frame, "api_levels")
    if cells.empty:
        return cells
    return cells[(cells["implementation"] != "null") & (cells["batch_size"] == 1)
                 & (cells["dtype"] == "float32")]


MACHINE_MARKERS = "o^vD"



def machine_handles(machines: list[str]) -> list[Line2D]:
    import matplotlib.lines

    return [matplotlib.lines.Line2D([], [], marker=MACHINE_MARKERS[k % len(MACHINE_MARKERS)], color="#555555",
                                    linestyle="none", label=short_machine(m)) for k, m in enumerate(machines)]



def fig_latency(data: ReportData, out: Path) -> Path | None:
    """Fig. 3: every implementation and variant at batch 1, a dot per machine, CPU and GPU apart."""
    cells = api_cells(data.frame)
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
    return finish(fig, data.runs, "api_levels", out, margins=dotplot.STACKED)



def fig_distributions(data: ReportData, out: Path) -> Path | None:
    """Fig. 4: every timed call of every cell, as a box (quartiles) with whiskers at p1 and p99,
    one panel per machine and device."""
    cells = api_cells(data.frame)
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
    return finish(fig, data.runs, "api_levels", out, margins=dotplot.STACKED)



def fig_cold_start(data: ReportData, out: Path) -> Path | None:
    """Fig. 5: the first call against the steady state, for cells whose worker started for them
    (a variant that shared a process with an earlier one had no cold start)."""
    cells = api_cells(data.frame)
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
    return finish(fig, data.runs, "api_levels", out, margins=dotplot.STACKED)
