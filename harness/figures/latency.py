"""Figs. 3 to 5, every implementation and variant of `api_levels` at batch 1: its latency (a dot
per machine), the spread of every timed call, and its cold start against its steady state."""

from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from harness import registry
from harness.figures import dotplot, pick
from harness.figures.style import (
    caption,
    colour,
    finish,
    fmt_ms,
    ladder_sorted,
    legend_below,
    ok_cells,
    short_machine,
)
from harness.measure.store import stats
from harness.report.claims.rundata import ReportData
from harness.report.markup import quote


def api_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """api_levels at batch 1, float32, without the harness's null implementation."""
    cells = ok_cells(frame, "api_levels")
    if cells.empty:
        return cells
    return cells[(cells["implementation"] != "null") & (cells["batch_size"] == 1)
                 & (cells["dtype"] == "float32")]


OTHER_MARKERS = "^vDs"  # other machines' markers, hollow; the newest run's machine: a filled circle
NOISY = f"noisy: the median's 95% interval spans more than {stats.NOISY_CI_OVER_MEDIAN:.0%} of it"


def machine_handles(newest: str, others: list[str], run_of: dict[str, str]) -> list[Line2D]:
    """The legend: the newest run's machine, then each other machine, named as such."""
    handles = [Line2D([], [], marker="o", color="#555555", linestyle="none",
                      label=f"{short_machine(newest)}: newest run ({pick.run_date(run_of[newest])})")]
    return handles + [Line2D([], [], marker=OTHER_MARKERS[k % len(OTHER_MARKERS)], color="#555555",
                             markerfacecolor="white", linestyle="none",
                             label=f"older, another machine: {short_machine(m)} ({pick.run_date(run_of[m])})")
                      for k, m in enumerate(others)]


def noisy_tag(ax: Axes, y: float, cell: pd.Series) -> None:
    """The cell's marks beside its whisker (quote.marks: 'noisy', its median not known to +-10%;
    'stale', measured on older code; 'thin', no interval; 'contended')."""
    found = quote.marks(cell)
    if found:
        right = cell["ci_high_ms"] if cell["ci_high_ms"] == cell["ci_high_ms"] else cell["median_ms"]
        ax.text(right * 1.06, y, " ".join(found), va="center", fontsize=6, color="#555555")


def fig_latency(data: ReportData, out: Path) -> Path | None:
    """Fig. 3: every implementation and variant at batch 1, CPU and GPU apart: the newest run's
    machine filled, every other machine hollow and named as another machine; noisy cells tagged."""
    cells = api_cells(data.frame)
    if cells.empty:
        return None
    devices = [d for d in registry.DEVICES if (cells["device"] == d).any()]
    labels = {d: ladder_sorted(cells[cells["device"] == d]["label"]) for d in devices}
    run_of = {m: run for m, run in zip(cells["machine"], cells["run_id"], strict=True)}
    fig, axes = dotplot.stacked([len(labels[d]) for d in devices])
    newest_of: dict[str, str] = {}
    legend: list[Line2D] = []
    for ax, device in zip(axes, devices, strict=True):
        part = cells[cells["device"] == device]
        newest = newest_of[device] = pick.newest_machine(data.runs, "api_levels", device, part) or \
            sorted(part["machine"])[0]
        others = sorted(set(part["machine"]) - {newest})
        # the machines of one row spread over at most 0.76 of it (the row's band is 1), so a dot
        # never leaves its row or the panel, however many machines there are
        step = min(0.24, 0.76 / len(others)) if others else 0.0
        for k, machine in enumerate([newest, *others]):
            for _, r in part[part["machine"] == machine].iterrows():
                y = labels[device].index(r["label"]) + (k - len(others) / 2) * step
                if k == 0:
                    dotplot.dot(ax, y, r, colour(r["implementation"]))
                else:
                    dotplot.dot(ax, y, r, colour(r["implementation"]), size=5, filled=False,
                                marker=OTHER_MARKERS[(k - 1) % len(OTHER_MARKERS)])
                noisy_tag(ax, y, r)
        dotplot.rows_axis(ax, labels[device], f"{device.upper()}, batch 1")
        dotplot.time_axis(ax)
        for handle in machine_handles(newest, others, run_of):
            handle.set_label(f"{device.upper()}: {handle.get_label()}")
            legend.append(handle)
    # one legend under the panels, a line a machine: machines named apart by their fingerprint or their
    # peak are too long to share a row above a panel, and inside a panel they would hide dots
    legend_below(axes[-1], legend)
    fig.suptitle("Fig. 3  Per-image latency of every implementation (dot: median; whisker: 95% CI)")
    shown = [run for run in data.runs if run["study"] == "api_levels"]
    newest_runs = ", ".join(f"{d.upper()} {short_machine(m)} (run {run_of[m]})" for d, m in newest_of.items())
    text = (f"Filled circles: the machine of the newest api_levels run on each device: {newest_runs}. "
            f"Hollow: other machines, older runs, drawn for scale, not as peers (another day, another "
            f"machine). "
            f"{NOISY}.\n{caption(shown, 'api_levels')}")
    return finish(fig, shown, "api_levels", out, text)



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
            if quote.marks(r):
                ax.text(r["p99_ms"] * 1.1, y, " ".join(quote.marks(r)), va="center", fontsize=6,
                        color="#555555")
        dotplot.rows_axis(ax, labels, title)
        dotplot.time_axis(ax, "per-image time of every timed call (log scale)")
    fig.suptitle("Fig. 4  Spread of every timed call (box: quartiles, black line: median; whiskers: p1–p99)")
    return finish(fig, data.runs, "api_levels", out)



LABEL_ROOM = 4.0  # the x axis runs this far past the slowest first call: room for its label


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
            ax.annotate(fmt_ms(r["cold_start_ms"]), (r["cold_start_ms"], y), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=6)
        dotplot.rows_axis(ax, labels, title)
        dotplot.time_axis(ax, "time of one call (log scale)")
        ax.set_xlim(right=cells["cold_start_ms"].max() * LABEL_ROOM)  # the rightmost label inside the axes
    import matplotlib.lines

    fig.axes[0].legend(handles=[matplotlib.lines.Line2D([], [], marker="o", color="#555555", linestyle="none",
                                                        label="steady state (median)"),
                                matplotlib.lines.Line2D([], [], marker="D", color="#555555",
                                                        markerfacecolor="white", linestyle="none",
                                                        label="first call (cold start)")],
                       frameon=False, fontsize=7, loc="lower right")
    fig.suptitle("Fig. 5  Cold start (tracing, compilation, set-up) against steady state, for variants "
                 "that started their own process", fontsize=10)
    return finish(fig, data.runs, "api_levels", out)
