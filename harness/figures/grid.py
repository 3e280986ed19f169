"""Grids of panels, one per machine and device: wrapped to at most COLUMNS a row on one y scale
(Fig. 8), and lines against batch size, a row per machine and device and a column per group of
levels, every panel on one y scale (Figs. 9 and 10).

    panel_grid(n) -> (fig, axes)                   n panels, COLUMNS a row at most
    same_y_scale(axes)                             every panel on the range that holds them all
    batch_grid(cells, column, groups, ...) -> fig  Figs. 9 and 10
"""

import math
from collections.abc import Callable, Sequence

import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from harness.figures import batch_lines
from harness.figures.dotplot import panel_title
from harness.figures.style import BACKEND_OF, legend_below, panels, plt

COLUMNS = 3  # panels a row: a 9-inch figure (style.DPI) holds three legible panels side by side


def panel_grid(n: int, width: float = 9.2, height_each: float = 3.6) -> tuple[Figure, list[Axes]]:
    """n panels, COLUMNS a row at most (the last row's empty places left blank)."""
    columns = min(n, COLUMNS)
    rows = math.ceil(n / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width, height_each * rows + 1.2), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def same_y_scale(axes: list[Axes]) -> None:
    """Every panel on the y range that holds all of them (panels compare by eye)."""
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(low, high)


def batch_grid(cells: pd.DataFrame, column: str, groups: Sequence[tuple[str, bool]], xlabel: str,
               ylabel: str, dashed: Callable[[str], bool] = lambda _: False,
               extra: Callable[[Axes, str], None] | None = None) -> tuple[Figure, list[Axes]]:
    """Lines against batch size (batch_lines): a row per machine and device (style.panels), a column
    per group of levels (its title, whether it is the Keras levels), one y scale in every panel; the
    lines dashed where dashed(label); extra(ax, device) draws what else a panel holds. Under each
    column, one legend: every line of its panels, once."""
    keras = cells["implementation"].isin(list(BACKEND_OF))
    rows = panels(cells)
    sizes = sorted(int(b) for b in cells["batch_size"].unique())
    fig, grid = plt.subplots(len(rows), len(groups), figsize=(9.2, 3.0 * len(rows) + 2.6), squeeze=False,
                             sharey=True)
    for r, (device, machine) in enumerate(rows):
        for c, (what, is_keras) in enumerate(groups):
            ax = grid[r][c]
            part = cells[(cells["device"] == device) & (cells["machine"] == machine) & (keras == is_keras)]
            batch_lines.draw(ax, part, column, dashed=dashed)
            if extra is not None:
                extra(ax, device)
            batch_lines.batch_axis(ax, sizes, xlabel if r == len(rows) - 1 else "")
            ax.set_title(f"{panel_title(device, machine)}\n{what}", fontsize=9, loc="left")
        grid[r][0].set_ylabel(ylabel)
    for c in range(len(groups)):  # the union of a column's lines, under it
        found: dict[str, Artist] = {}
        for r in range(len(rows)):
            handles, labels = grid[r][c].get_legend_handles_labels()
            found.update({lb: h for h, lb in zip(handles, labels, strict=True) if lb not in found})
        legend_below(grid[-1][c], list(found.values()), ncol=2)  # a fixed gap under the x label
    return fig, [ax for row in grid for ax in row]
