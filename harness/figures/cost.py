"""Fig. 1, the report's picture of its answer: per-image latency at batch 1 (log) against lines
of code, one marker per level and device (circle CPU, square GPU, the colour the level's) with
its 95% interval, and each device's levels joined in ladder order: raw library -> framework ops
-> Keras on the same framework (three paths), the hand-written rung below the raw library where it
exists, and on the CPU the inference engine between oneDNN and the Keras model it was exported
from. The caption names every line drawn.

    points(frame, loc_rows, answer)   one point per level and device
    chains(pts)               the lines drawn: (device, [point, ...]) in PATHS' order
    fig_cost(data, out)       the figure
"""

from pathlib import Path

import matplotlib.lines
import matplotlib.ticker

from harness.draw import place
from harness.figures.style import (
    DEVICE_LINES,
    DEVICE_MARKER,
    caption,
    colour,
    fmt_ms,
    plt,
    save,
    settle,
)
from harness.report.claims.headline import SHORT, chains, lines_caption, points
from harness.report.claims.rundata import ReportData


def how_to_read(drawn: list[tuple[str, list[dict]]]) -> str:
    return "\n".join(line for line in (
        "Marker: a level's fastest variant at batch 1, median per image (circle CPU, square GPU); black "
        "whisker: its 95% interval (on every marker; most are shorter than the marker). x: the level's "
        "lines of code for inference (Fig. 2).", lines_caption(drawn)
        + " The NumPy reference is on no ladder: no line.") if line)


def label(p: dict, pts: list[dict]) -> str:
    """'PyTorch ops 126 µs', with its device where the level is drawn on both (two labels of one
    name a few pixels apart are read as one level's), then its marks."""
    both = sum(q["implementation"] == p["implementation"] for q in pts) > 1
    device = f" ({p['device'].upper()})" if both else ""
    return (f"{SHORT.get(p['implementation'], p['implementation'])}{device} {fmt_ms(p['median'])}"
            + (f"\n{' '.join(p['marks'])}" if p["marks"] else ""))  # marks below: a crowded column


def fig_cost(data: ReportData, out: Path) -> Path | None:
    pts = points(data.frame, data.loc_rows, data.answer)
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = chains(pts)
    styles = dict(DEVICE_LINES)
    for device, chain in drawn:
        ax.plot([p["loc"] for p in chain], [p["median"] for p in chain], styles[device], color="#BBBBBB",
                linewidth=1, zorder=1)
    for p in pts:
        ax.plot(p["loc"], p["median"], marker=DEVICE_MARKER[p["device"]], markersize=8, linestyle="none",
                color=colour(p["implementation"]), markeredgecolor="black", markeredgewidth=0.5, zorder=3)
        ax.errorbar(p["loc"], p["median"], yerr=[[p["median"] - p["low"]], [p["high"] - p["median"]]],
                    color="black", elinewidth=0.8, capsize=2, capthick=0.8, linestyle="none", zorder=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = min(p["loc"] for p in pts), max(p["loc"] for p in pts)
    ax.set_xlim(lo / 1.8, hi * 1.8)
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: fmt_ms(v)))
    ax.grid(True, which="major", color="#EEEEEE", zorder=0)
    handles = [matplotlib.lines.Line2D([], [], marker=DEVICE_MARKER[d], color="#555555", linestyle=s,
                                       label=f"{d.upper()} ({short})")
               for d, s in DEVICE_LINES
               for short in [next((p["machine"] for p in pts if p["device"] == d), "not measured")]]
    ax.legend(handles=handles, frameon=False, fontsize=7, loc="lower left")  # clear of the labels
    ax.set_title("Fig. 1  What each level costs per image against the code it takes")
    ax.set_xlabel("lines of code for inference (pygount; log scale)")
    ax.set_ylabel("per-image latency at batch 1, median (log scale)")
    shown = {p["machine"] for p in pts}
    runs = [r for r in data.runs if r["machine"] in shown]
    text = f"{how_to_read(drawn)}\n{caption(runs, 'api_levels')}"
    settle(fig, text)  # the labels are measured in the figure's final layout
    xy = [(p["loc"], p["median"]) for p in pts]
    place.renderer(ax)  # the PNG's dpi, before measuring in display units
    sides = place.sides_away([tuple(ax.transData.transform(q)) for q in xy],
                             [-1 if p["device"] == "gpu" else 1 for p in pts])
    place.place_labels(ax, xy, [label(p, pts) for p in pts], sides)
    return save(fig, out)
