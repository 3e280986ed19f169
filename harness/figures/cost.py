"""Fig. 1, the report's picture of its answer: per-image latency at batch 1 (log) against lines of
code, for each level and device of the answering machines two calls, joined by an arrow: the call
as first written (hollow; headline.as_first_written) and the fastest call measured (filled; the
headline's), circle CPU and square GPU, the level's colour, each with its 95% interval.

    arrows(data)          one arrow per level and device: tail (first written), head (fastest)
    label(a, arrows)      its words: the level, its device where drawn on both, the two medians
    fig_cost(data, out)   the figure
"""

from pathlib import Path

import matplotlib.lines
import matplotlib.ticker
import pandas as pd
from matplotlib.axes import Axes

from harness.draw import place
from harness.figures import dotplot, pick
from harness.figures.style import DEVICE_MARKER, colour, fmt_ms, layout, plt, save, short_machine
from harness.report.claims.headline import SHORT
from harness.report.claims.rundata import ReportData
from harness.report.markup import quote

# Levels of one count of lines (a level on both devices, Keras' three backends) would stack their
# arrows on one x: the k-th of n at one x is drawn DODGE ** (k - (n - 1) / 2) times it, CPU first,
# then the ladder's order, a marker's width apart (the caption says so).
DODGE = 1.08


def arrows(data: ReportData) -> list[dict]:
    """Per level and device (pick.pairs) with lines of code: {implementation, device, machine, x,
    tail, head}: tail the call as first written (None where the answering run did not time it), head
    the fastest call measured (the same cell where the first-written call is the fastest), x its
    lines of code, moved by DODGE where others share it."""
    found = [p for p in pick.pairs(data) if p["loc"] is not None]
    share: dict[int, list[int]] = {}  # lines of code -> the indices of found drawn there, in order
    for k in sorted(range(len(found)), key=lambda k: (found[k]["device"] != "cpu", k)):
        share.setdefault(found[k]["loc"], []).append(k)

    def x(k: int) -> float:
        group = share[found[k]["loc"]]
        return found[k]["loc"] * DODGE ** (group.index(k) - (len(group) - 1) / 2)

    return [{"implementation": p["implementation"], "device": p["device"], "machine": p["machine"], "x": x(k),
             "tail": p["first"], "head": p["fastest"]} for k, p in enumerate(found)]


def same_call(a: dict) -> bool:
    """Whether the first-written call is the fastest (or was not timed): one marker, no arrow."""
    key = ("study", "run_id", "cell_id")
    return a["tail"] is None or all(a["tail"][k] == a["head"][k] for k in key)


def label(a: dict, drawn: list[dict]) -> str:
    """'Keras/TF 30.7 ms → 188 µs': the level (with its device where it is drawn on both: two labels
    of one name read as one level), the first-written call's median, the fastest's; then the marks
    of the numbers quoted on a second line (a crowded column)."""
    both = sum(b["implementation"] == a["implementation"] for b in drawn) > 1
    device = f" ({a['device'].upper()})" if both else ""
    cells = [a["head"]] if same_call(a) else [a["tail"], a["head"]]
    marks = list(dict.fromkeys(m for c in cells for m in quote.caveats(c)))
    return (f"{SHORT.get(a['implementation'], a['implementation'])}{device} "
            + " → ".join(fmt_ms(c["median_ms"]) for c in cells) + (f"\n{' '.join(marks)}" if marks else ""))


def point(ax: Axes, x: float, cell: pd.Series, device: str, implementation: str, filled: bool) -> None:
    """One call: its marker (filled: fastest; hollow: as first written) and its 95% interval."""
    tint = colour(implementation)
    y = cell["median_ms"]
    low, high = dotplot.ends(cell)
    ax.errorbar(x, y, yerr=[[y - low], [high - y]], marker=DEVICE_MARKER[device],
                markersize=8, linestyle="none", color="black", elinewidth=0.8, capsize=2, capthick=0.8,
                markerfacecolor=tint if filled else "white", markeredgecolor="black" if filled else tint,
                markeredgewidth=0.5 if filled else 1.6, zorder=4 if filled else 3)


def panel(ax: Axes, drawn: list[dict], device: str, machine: str, ylim: tuple[float, float]) -> None:
    """One device's panel: its levels' markers, arrows and labels, on the shared latency scale."""
    mine = [a for a in drawn if a["device"] == device]
    for a in mine:
        point(ax, a["x"], a["head"], device, a["implementation"], filled=True)
        if not same_call(a):
            point(ax, a["x"], a["tail"], device, a["implementation"], filled=False)
            ax.annotate("", xy=(a["x"], a["head"]["median_ms"]), xytext=(a["x"], a["tail"]["median_ms"]),
                        arrowprops={"arrowstyle": "-|>", "color": colour(a["implementation"]), "lw": 1.3,
                                    "shrinkA": 6, "shrinkB": 6, "mutation_scale": 11}, zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [a["x"] for a in drawn]  # both panels on one x range: lines of code read alike
    ax.set_xlim(min(xs) / 2.2, max(xs) * 1.6)
    ax.set_ylim(*ylim)
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: fmt_ms(v)))
    ax.grid(True, which="major", color="#EEEEEE", zorder=0)
    ax.set_title(f"{device.upper()}: {short_machine(machine)}", fontsize=9, loc="left")
    ax.set_xlabel("lines of code for inference (log scale)")


def label_panel(ax: Axes, drawn: list[dict], device: str) -> None:
    """Each level's label beside its first-written marker (or its one marker), clear of the others."""
    mine = [a for a in drawn if a["device"] == device]
    if not mine:
        return
    place.renderer(ax)  # the PNG's dpi, before measuring in display units
    anchors = [a["tail"] if a["tail"] is not None else a["head"] for a in mine]  # a label at its tail
    xy = [(a["x"], c["median_ms"]) for a, c in zip(mine, anchors, strict=True)]
    heads = [(a["x"], a["head"]["median_ms"]) for a in mine if not same_call(a)]
    sides = place.sides_away([tuple(ax.transData.transform(q)) for q in xy], [1] * len(mine))
    place.place_labels(ax, xy, [label(a, mine) for a in mine], sides, others=heads)


def fig_cost(data: ReportData, out: Path) -> Path | None:
    drawn = arrows(data)
    if not drawn:
        return None
    machines = pick.answering_machines(data)
    devices = [d for d in DEVICE_MARKER if any(a["device"] == d for a in drawn)]
    fig, axes = plt.subplots(1, len(devices), figsize=(6.2 * len(devices), 6.4), sharey=True, squeeze=False)
    cells = [c for a in drawn for c in (a["tail"], a["head"]) if c is not None]
    low = min(dotplot.ends(c)[0] for c in cells)
    high = max(dotplot.ends(c)[1] for c in cells)
    ylim = (low / 1.8, high * 1.8)  # every marker and whisker inside the axes
    for ax, device in zip(axes[0], devices, strict=True):
        panel(ax, drawn, device, machines.get(device, ""), ylim)
    axes[0][0].set_ylabel("per-image latency at batch 1, median (log scale)")
    handles = [matplotlib.lines.Line2D([], [], marker="o", color="#555555", markerfacecolor="white",
                                       markeredgewidth=1.6, linestyle="none", label="as first written"),
               matplotlib.lines.Line2D([], [], marker="o", color="#555555", linestyle="none",
                                       label="fastest call measured (arrow: from first written)")]
    axes[0][0].legend(handles=handles, frameon=False, fontsize=7, loc="lower left")
    fig.suptitle("Fig. 1  What each level costs per image, as first written and at its fastest", fontsize=11)
    place.renderer(axes[0][0])  # the PNG's dpi first: the layout is the one the PNG is saved with
    layout(fig)  # the labels are measured in the figure's final layout
    for ax, device in zip(axes[0], devices, strict=True):
        label_panel(ax, drawn, device)
    return save(fig, out)
