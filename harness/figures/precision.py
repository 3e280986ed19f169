"""Fig. 11: float64 against float32 at batch 1 (study `precision`), per implementation: the
within-round ratio of the float64 cell's time to the float32 cell's (harness.measure.store.stats.
round_ratio on both cells' rounds, which only cells of one run have), with its 95% interval, a
panel per answering machine. Right of 1: double precision is slower; left: faster.

    ratios(cells)           per (device, machine, label): the round_ratio dict, or None
    fig_precision(data, out)
"""

from pathlib import Path

import matplotlib.ticker
import pandas as pd

from harness.figures import dotplot, pick
from harness.figures.style import colour, finish, ok_cells
from harness.measure.store import stats
from harness.report.claims.rundata import ReportData

Key = tuple[str, str, str]  # (device, machine, label)


def ratios(cells: pd.DataFrame) -> dict[Key, dict | None]:
    """float64 time over float32 time within rounds, per implementation and machine; None where
    the two cells are not of one run (no rounds in common), or either is missing."""
    out: dict[Key, dict | None] = {}
    for (device, machine, label), part in cells.groupby(["device", "machine", "label"], sort=True):
        by_dtype = {r["dtype"]: r for _, r in part.iterrows()}
        f32, f64 = by_dtype.get("float32"), by_dtype.get("float64")
        if f32 is None or f64 is None or f32["run_id"] != f64["run_id"]:
            out[(device, machine, label)] = None
        else:
            out[(device, machine, label)] = stats.round_ratio(f64["rounds_ns"], f32["rounds_ns"])
    return out


TICKS = (0.25, 0.5, 0.6, 0.7, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0)


def ratio_axis(axes: list) -> None:
    """A shared log ratio axis, ticks at round ratios within it, '1.5x'."""
    for ax in axes:
        ax.set_xscale("log")
        ax.grid(True, axis="x", which="major", color="#EEEEEE")
        ax.set_axisbelow(True)
    low, high = axes[0].get_xlim()
    ticks = [t for t in TICKS if low <= t <= high]
    for ax in axes:
        ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    axes[-1].set_xlabel("float64 time / float32 time, within rounds (log scale; 1x: the same)")


def fig_precision(data: ReportData, out: Path) -> Path | None:
    """Fig. 11: float64/float32 within rounds, a dot and its interval per implementation, a panel
    per answering machine."""
    cells = ok_cells(data.frame, "precision")
    if cells.empty:
        return None
    cells = pick.answering(cells[cells["batch_size"] == 1], data)
    if cells.empty:
        return None
    found = ratios(cells)
    fig, panel_list = dotplot.ladder_panels(cells)
    for ax, part, labels, title in panel_list:
        device, machine = part["device"].iloc[0], part["machine"].iloc[0]
        for y, label in enumerate(labels):
            r = found.get((device, machine, label))
            impl = label.split("/")[0]
            if r is None:
                ax.text(1.0, y, "  no float64/float32 pair in one run", va="center", fontsize=7,
                        color="#555555")
                continue
            ax.errorbar(r["ratio"], y, xerr=[[r["ratio"] - r["ci95_low"]], [r["ci95_high"] - r["ratio"]]],
                        marker="o", markersize=6, color=colour(impl), markeredgecolor="black",
                        markeredgewidth=0.6, capsize=2, linestyle="none", zorder=3)
            right = r["ci95_high"] if r["ci95_high"] == r["ci95_high"] else r["ratio"]  # NaN: no interval
            ax.annotate(f"{r['ratio']:.2f}x", (right, y), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=7)
        ax.axvline(1.0, color="#555555", linestyle=":", linewidth=1, zorder=1)
        dotplot.rows_axis(ax, labels, title)
    ends = [v for r in found.values() if r for v in (r["ratio"], r["ci95_low"], r["ci95_high"]) if v == v]
    for ax in fig.axes:  # every dot, whisker and label inside the axes, and 1x
        ax.set_xscale("log")
        ax.set_xlim(min([1.0, *ends]) / 1.15, max([1.0, *ends]) * 1.4)
    ratio_axis(fig.axes)
    fig.suptitle("Fig. 11  What double precision costs: float64 time / float32 time, batch 1")
    return finish(fig, out)
