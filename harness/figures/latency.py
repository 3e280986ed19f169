"""Figs. 3 to 5, the answering machines' `api_levels` at batch 1: every variant's latency, how each
level's calls are distributed (its call as first written and its fastest, a histogram of every timed
call), and the cold start against the steady state. A panel per device, its answering machine's.

    api_cells(frame)                 api_levels at batch 1, float32, without the null level
    histogram(times, edges)          a row's bar heights: the square root of its calls per bin
    fig_latency / fig_distributions / fig_cold_start (data, out)
"""

from pathlib import Path

import matplotlib.lines
import matplotlib.transforms
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from harness import registry
from harness.figures import dotplot, pick
from harness.figures.style import colour, finish, fmt_ms, legend_below, ok_cells
from harness.report.claims.rundata import ReportData
from harness.report.markup import quote


def api_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """api_levels at batch 1, float32, without the harness's null implementation."""
    cells = ok_cells(frame, "api_levels")
    if cells.empty:
        return cells
    return cells[(cells["implementation"] != "null") & (cells["batch_size"] == 1)
                 & (cells["dtype"] == "float32")]


def answering_api_cells(data: ReportData) -> pd.DataFrame:
    """api_cells of the answering machines (pick.answering_machines)."""
    return pick.answering(api_cells(data.frame), data)


def marks_tag(ax: Axes, y: float, cell: pd.Series) -> None:
    """The cell's marks beside its whisker (quote.caveats: 'noisy', its median not known to +-10%;
    'stale', measured on older code; 'thin', no interval; 'contended')."""
    found = quote.caveats(cell)
    if found:
        ax.text(dotplot.ends(cell)[1] * 1.08, y, " ".join(found), va="center", fontsize=7, color="#555555")


MARKS_ROOM = 3.0  # the x axis runs this far past the rightmost whisker: room for its marks


def fig_latency(data: ReportData, out: Path) -> Path | None:
    """Fig. 3: every variant at batch 1 on the answering machines, a panel per device; a cell's
    marks beside it."""
    cells = answering_api_cells(data)
    if cells.empty:
        return None
    fig, panel_list = dotplot.ladder_panels(cells, per_row=0.27)
    for ax, part, labels, title in panel_list:
        for _, r in part.iterrows():
            y = labels.index(r["label"])
            dotplot.dot(ax, y, r, colour(r["implementation"]))
            marks_tag(ax, y, r)
        dotplot.rows_axis(ax, labels, title)
    dotplot.fit_x([ax for ax, *_ in panel_list], cells, right_room=MARKS_ROOM)
    for ax, *_ in panel_list:
        dotplot.time_axis(ax)
    fig.suptitle("Fig. 3  Per-image latency of every variant at batch 1 (dot: median; whisker: 95% CI)")
    return finish(fig, out)


BINS_PER_DECADE = 20  # the histograms' bins, evenly spaced on the log axis
ROW = 0.9  # the tallest bar of a row, in rows
LEAST = 0.07  # the least height of a bin that holds a call (in rows): a lone slow call stays visible


def histogram(times: list[float], edges: np.ndarray) -> np.ndarray:
    """A row's bar heights (in rows): the square root of its calls in each bin, its fullest bin ROW
    tall, a bin that holds any call at least LEAST: a tail of 3% of the calls (cuda/resident's calls
    after an idle spell) is a sixth of the peak, not a thirtieth, and one call is not lost."""
    counts, _ = np.histogram(times, edges)
    heights = np.sqrt(counts / counts.max()) * ROW if counts.max() > 0 else counts.astype(float)
    return np.where(counts > 0, np.maximum(heights, LEAST), 0.0)


def distribution_rows(data: ReportData) -> dict[str, list[tuple[pd.Series, bool]]]:
    """Per device of the answering machines: its rows top down, (cell, whether it is the level's
    fastest call), the ladder's order: each level's call as first written, then its fastest where
    that is another call (pick.pairs)."""
    rows: dict[str, list[tuple[pd.Series, bool]]] = {d: [] for d in registry.DEVICES}  # CPU on top
    for p in pick.pairs(data):
        first, fastest = p["first"], p["fastest"]
        if first is not None and first["cell_id"] != fastest["cell_id"]:
            rows[p["device"]].append((first, False))
        rows[p["device"]].append((fastest, True))
    return {d: found for d, found in rows.items() if found}


def fig_distributions(data: ReportData, out: Path) -> Path | None:
    """Fig. 4: every timed call of each level's first-written and fastest calls on the answering
    machines, a histogram a row on one log axis, median and p99 marked, a panel per device."""
    rows = {d: [(c, f) for c, f in found if len(c["times_ms"])]
            for d, found in distribution_rows(data).items()}
    rows = {d: found for d, found in rows.items() if found}
    if not rows:
        return None
    times = np.concatenate([np.asarray(c["times_ms"], float) for found in rows.values() for c, _ in found])
    low, high = np.log10(times.min()) - 0.05, np.log10(times.max()) + 0.05
    edges = np.logspace(low, high, max(int((high - low) * BINS_PER_DECADE), 1) + 1)
    machines = pick.answering_machines(data)
    fig, axes = dotplot.stacked([len(found) for found in rows.values()], per_row=0.3)
    for ax, (device, found) in zip(axes, rows.items(), strict=True):
        right = matplotlib.transforms.blended_transform_factory(ax.transAxes, ax.transData)
        for y, (cell, fastest) in enumerate(found):
            tint = colour(cell["implementation"])
            base = y + 0.45  # the row's baseline (the axis runs downward: row 0 on top)
            heights = histogram(cell["times_ms"], edges)
            used = np.flatnonzero(heights)  # its fastest call's bin to its slowest's: no baseline past them
            lo, hi = used[0], used[-1] + 1
            ax.stairs(base - heights[lo:hi], edges[lo:hi + 1], baseline=base, fill=fastest, color=tint,
                      alpha=0.9 if fastest else 1, linewidth=1.2)
            for value, style in ((cell["median_ms"], "-"), (cell["p99_ms"], "--")):
                ax.plot([value, value], [base, base - ROW], color="black", linestyle=style, linewidth=1.1)
            ax.text(1.01, y, f"{fmt_ms(cell['median_ms'])}  p99 {fmt_ms(cell['p99_ms'])}"
                    + "".join(f" {m}" for m in quote.caveats(cell)), transform=right, va="center", fontsize=7)
        dotplot.rows_axis(ax, [c["label"] for c, _ in found], dotplot.panel_title(device, machines[device]))
        ax.set_xscale("log")
        ax.set_xlim(edges[0], edges[-1])  # every call inside the axes
        dotplot.time_axis(ax, "time of one call (log scale)")
    legend_below(axes[-1], [Patch(color="#777777", label="fastest call measured"),
                            Patch(facecolor="white", edgecolor="#777777", linewidth=1.2,
                                  label="call as first written"),
                            matplotlib.lines.Line2D([], [], color="black", label="median"),
                            matplotlib.lines.Line2D([], [], color="black", linestyle="--", label="p99")],
                 ncol=4)
    fig.suptitle("Fig. 4  Every timed call of each level: as first written and fastest\n"
                 "(bar height: square root of the calls in its bin; right: median and p99)", fontsize=10)
    return finish(fig, out)


LABEL_ROOM = 4.0  # the x axis runs this far past the slowest first call: room for its label


def fig_cold_start(data: ReportData, out: Path) -> Path | None:
    """Fig. 5: the first call against the steady state on the answering machines, for cells whose
    worker started for them (a variant that shared a process with an earlier one had no cold start)."""
    cells = answering_api_cells(data)
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
            ax.annotate(fmt_ms(r["cold_start_ms"]), (r["cold_start_ms"], y), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=7)
        dotplot.rows_axis(ax, labels, title)
    # every steady state and its interval inside the axes (c/fused's 4 µs was cut off), and room for
    # the rightmost first call's label
    dotplot.fit_x([ax for ax, *_ in panel_list], cells, ("median_ms", "cold_start_ms"), right_room=LABEL_ROOM)
    for ax, *_ in panel_list:
        dotplot.time_axis(ax, "time of one call (log scale)")
    legend_below(panel_list[-1][0], [
        matplotlib.lines.Line2D([], [], marker="o", color="#555555", linestyle="none",
                                label="steady state (median)"),
        matplotlib.lines.Line2D([], [], marker="D", color="#555555", markerfacecolor="white",
                                linestyle="none", label="first call (cold start)")], ncol=2)
    fig.suptitle("Fig. 5  Cold start (tracing, compilation, set-up) against steady state, for variants "
                 "that started their own process", fontsize=10)
    return finish(fig, out)

