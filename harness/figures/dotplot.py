"""Horizontal dot plots on a log time axis, a panel per device (its answering machine's) stacked
with a shared axis: the shape of most of the report's figures (a dot per measured cell, its 95%
interval as a whisker, the implementation's colour, the ladder's order from the top), never
taller than TALLEST."""

import matplotlib.ticker
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from harness.figures.style import DPI, fmt_ms, ladder_sorted, panels, plt, short_machine

TALLEST = 1600 / DPI  # inches: a figure taller than 1,600 px is read in pieces, scrolling


def stacked(rows_per_panel: list[int], width: float = 9.0, per_row: float = 0.3,
            sharex: bool = True) -> tuple[Figure, list[Axes]]:
    """A figure of panels stacked vertically, each as tall as its rows (per_row inches a row, less
    where that would pass TALLEST)."""
    rows, fixed = sum(max(n, 1) for n in rows_per_panel), 0.7 * len(rows_per_panel) + 1.3
    per_row = min(per_row, (TALLEST - fixed) / rows)
    heights = [max(n, 1) * per_row + 0.7 for n in rows_per_panel]
    fig, axes = plt.subplots(len(heights), 1, figsize=(width, sum(heights) + 1.3), sharex=sharex,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    return fig, list(axes[:, 0])


def ladder_panels(cells: pd.DataFrame,
                  per_row: float = 0.3) -> tuple[Figure, list[tuple[Axes, pd.DataFrame, list[str], str]]]:
    """A stacked figure with a panel per (device, machine) of `cells`, rows in the ladder's order:
    the figure and, per panel, (ax, the panel's cells, its row labels, its title)."""
    groups = panels(cells)
    parts = [cells[(cells["device"] == device) & (cells["machine"] == machine)] for device, machine in groups]
    labels = [ladder_sorted(part["label"]) for part in parts]
    fig, axes = stacked([len(rows) for rows in labels], per_row=per_row)
    titles = [panel_title(device, machine) for device, machine in groups]
    return fig, list(zip(axes, parts, labels, titles, strict=True))


def time_axis(ax: Axes, label: str = "per-image time, median (log scale)") -> None:
    """A log time axis labelled in µs/ms/s; 2 and 5 labelled too where it spans under two decades
    (call it after the data are drawn)."""
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    if high / low < 100:
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_ms(v)))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.grid(True, axis="x", which="major", color="#EEEEEE")
    ax.set_axisbelow(True)
    spec = ax.get_subplotspec()
    if spec is None or spec.is_last_row():
        ax.set_xlabel(label)


def rows_axis(ax: Axes, labels: list[str], title: str) -> None:
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_title(title, fontsize=9, loc="left")


def ends(cell: pd.Series, column: str = "median_ms") -> tuple[float, float]:
    """The ends of a cell's 95% interval (ms), or its median twice where it has none (a thin cell)."""
    value = cell[column]
    if column != "median_ms" or cell["ci_low_ms"] != cell["ci_low_ms"]:  # NaN: no interval
        return value, value
    return cell["ci_low_ms"], cell["ci_high_ms"]


def fit_x(axes: list[Axes], cells: pd.DataFrame, columns: tuple[str, ...] = ("median_ms",),
          right_room: float = 1.0) -> None:
    """A log x axis shared by the panels that holds every cell's value in `columns` and its
    interval, with room for words right of the rightmost (right_room: a factor)."""
    found = [end for _, r in cells.iterrows() for c in columns for end in ends(r, c) if end == end]
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlim(min(found) / 1.5, max(found) * 1.5 * right_room)


def panel_title(device: str, machine: str) -> str:
    return f"{device.upper()}: {short_machine(machine)}"


def dot(ax: Axes, y: float, cell: pd.Series, colour: str, marker: str = "o", filled: bool = True,
        size: float = 6, column: str = "median_ms", label: str | None = None) -> None:
    """One cell's median with its 95% interval."""
    value = cell[column]
    low, high = ends(cell, column)
    err = [[value - low], [high - value]] if column == "median_ms" else None
    ax.errorbar(value, y, xerr=err, marker=marker, markersize=size, color=colour, capsize=2,
                linestyle="none", markerfacecolor=colour if filled else "white",
                markeredgecolor=colour if not filled else "black", markeredgewidth=0.6 if filled else 1.4,
                label=label, zorder=3)
