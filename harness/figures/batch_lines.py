"""Lines against batch size (Figs. 9 and 10): one line per label, the implementation's colour and
marker (style.colour, style.marker: two levels of near hues never share a marker), a further variant
of one implementation in a lighter shade of its colour with a hollow marker (then dotted), its 95%
interval shaded, and a line style that means one thing in a figure (the caller says which labels
are dashed and why).

    line(ax, part, column, label, impl, marker, style, tint, filled)   one label's line and its band
    draw(ax, cells, column, dashed)                       every label of a panel's cells
    band(cells, column)                                   (low, high) of each cell's interval
    batch_axis(ax, sizes, xlabel)                         log2 x with the batch sizes as ticks
"""

from collections.abc import Callable

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from harness.figures.style import colour, ladder_sorted, marker, shade

BAND_ALPHA = 0.15


def band(cells: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's 95% interval in `column`'s unit: the median's interval (ms), or for images/s
    the batch over the interval's ends (the slow end gives the low throughput)."""
    if column == "images_per_s":
        return (cells["batch_size"] / cells["ci_high_ms"] * 1e3).to_numpy(float), \
            (cells["batch_size"] / cells["ci_low_ms"] * 1e3).to_numpy(float)
    return cells["ci_low_ms"].to_numpy(float), cells["ci_high_ms"].to_numpy(float)


def line(ax: Axes, part: pd.DataFrame, column: str, label: str, impl: str, symbol: str,
         style: str = "-", width: float = 1.5, tint: str | None = None, filled: bool = True) -> None:
    """One label's cells (sorted by batch) as a line with markers, and its interval shaded where
    the cells have one; tint: its colour (default the implementation's); filled: its markers filled
    with it, else hollow, edged in it."""
    part = part.sort_values("batch_size")
    tint = tint or colour(impl)
    x = part["batch_size"].to_numpy(float)
    ax.plot(x, part[column].to_numpy(float), marker=symbol, markersize=6, color=tint, linestyle=style,
            linewidth=width, markeredgecolor="black" if filled else tint,
            markerfacecolor=tint if filled else "white", markeredgewidth=0.5 if filled else 1.3, label=label)
    low, high = band(part, column)
    has = ~(np.isnan(low) | np.isnan(high))
    if has.any():
        ax.fill_between(x[has], low[has], high[has], color=tint, alpha=BAND_ALPHA, linewidth=0)


def draw(ax: Axes, cells: pd.DataFrame, column: str, dashed: Callable[[str], bool] = lambda _: False) -> None:
    """Every label of one panel's cells, ladder order: solid unless dashed(label); the first variant
    of an implementation its marker filled in its colour, its second hollow in a lighter shade, and so
    on (variant_style, style.shade)."""
    labels = ladder_sorted(cells["label"])
    impls = [lb.split("/")[0] for lb in labels]
    count = {impl: impls.count(impl) for impl in impls}
    seen: dict[str, int] = {}
    for label in labels:
        impl = label.split("/")[0]
        k = seen[impl] = seen.get(impl, -1) + 1
        filled, style = variant_style(k)
        style = "--" if dashed(label) else style
        line(ax, cells[cells["label"] == label], column, label, impl, marker(impl), style,
             tint=shade(impl, k, count[impl]), filled=filled)


def variant_style(k: int) -> tuple[bool, str]:
    """The k-th variant of one implementation's (marker filled, line style): filled and solid, hollow
    and solid, then the two dotted, then dash-dotted from the fifth on (their shades differ too:
    style.shade). Dashed is left for what a figure means by it."""
    return k % 2 == 0, ("-", ":", "-.")[min(k // 2, 2)]


def batch_axis(ax: Axes, sizes: list[int], xlabel: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.grid(True, which="major", color="#EEEEEE")
