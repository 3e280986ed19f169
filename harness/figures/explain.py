"""Fig. 7, why the high levels are slow: each explained call (`explain` rows) of the answering
machines on a log time axis, peeled down its ablation ladder: a span per stage, from the time
without it to the time with it, one colour per kind of stage (where two neighbouring stages are of
one kind, the second in a lighter shade), down to the floor, a black dot. The axis is log because a
stage's share hides its size: 88% of Keras' predict is tens of milliseconds, 45% of TF eager a few
hundred microseconds. A span is labelled with its stage and its time where that fits inside it, else
with its time, else not at all (DETAILS.md names every stage).

    KINDS, kind_of(stage)          the kinds of stage and their colours
    spans(row)                     a row's stages: (from ms, to ms, stage, colour), the call's end first
    fig_explain(data, out)         the figure
"""

from pathlib import Path

import matplotlib.colors
import matplotlib.lines
import matplotlib.transforms
from matplotlib.patches import Patch

from harness import registry
from harness.draw import place
from harness.figures import dotplot, pick
from harness.figures.style import fmt_ms, layout, legend_below, save
from harness.report.claims.rundata import ReportData, study_rows

# Each stage an ablation peels off falls in one of these kinds: one colour per kind in every row.
# (name, colour, words in a stage's name that put it in this kind)
Kind = tuple[str, str, tuple[str, ...]]
KINDS: list[Kind] = [("tf.data pipeline built per call", "#E69F00", ("tf.data",)),
         ("Keras' predict loop (iterators, callbacks, wrappers)", "#CC79A7",
          ("iterator", "callback", "wrapper")),
         ("framework op dispatch", "#56B4E9", ("dispatch", "executor")),
         ("framework per-call runtime", "#0072B2", ("runtime",)),
         ("the floor (the row's fastest measured implementation, named under its label)", "#000000", ())]
OTHER_KIND: Kind = ("other", "#999999", ())
LIGHTER = 0.45  # a second neighbouring stage of one kind: its kind's colour this far towards white
Span = tuple[float, float, dict, str]


def kind_of(stage: dict) -> Kind:
    if stage["to"] is None:
        return KINDS[-1]
    name = (stage.get("short") or stage["name"]).lower()
    return next((k for k in KINDS[:-1] if any(word in name for word in k[2])), OTHER_KIND)


def lighter(hex_colour: str) -> str:
    rgb = matplotlib.colors.to_rgb(hex_colour)
    r, g, b = (c + (1 - c) * LIGHTER for c in rgb)
    return matplotlib.colors.to_hex((r, g, b))


def spans(row: dict) -> list[Span]:
    """A row's stages but the floor, the call's end first: (from ms, to ms, stage, colour), from the
    median of the step with the stage to the median of the step without it. A stage whose removal
    made the call no faster (a negative difference of two noisy medians) has no span (DETAILS.md
    gives its share, the figure names it at the right); a stage of the same kind as the one before it
    is lighter, so neighbours never share a colour."""
    median = {step["step"]: step["median_ns"] / 1e6 for step in row["steps"]}
    out: list[Span] = []
    previous = None
    for stage in row["stages"]:
        if stage["to"] is None:
            continue
        kind = kind_of(stage)
        shade = lighter(kind[1]) if kind == previous and out and out[-1][3] == kind[1] else kind[1]
        previous = kind
        start, end = median[stage["from"]], median[stage["to"]]
        if end < start:
            out.append((start, end, stage, shade))
    return out


def floor_ms(row: dict) -> float | None:
    """The median of the row's last step, the floor (None for a row without one)."""
    last = row["stages"][-1] if row["stages"] else None
    if last is None or last["to"] is not None:
        return None
    return next(s["median_ns"] / 1e6 for s in row["steps"] if s["step"] == last["from"])


def text_colour(fill: str) -> str:
    """White on dark fills, black on light ones (by luminance)."""
    r, g, b = matplotlib.colors.to_rgb(fill)
    return "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"


def stage_name(stage: dict) -> str:
    return "floor" if stage["to"] is None else (stage.get("short") or stage["to"])


WIDTH_PT = 11  # a span's height (points): a 6-pt label fits inside it


def fig_explain(data: ReportData, out: Path) -> Path | None:
    """Fig. 7: each explained call of the answering machines, its stages as spans on a log time
    axis, a panel per device."""
    rows = pick.answering_rows(study_rows(data.runs, "explain", only_ok=False), data)
    rows = [row for row in rows if row.get("steps") and row.get("stages")]
    if not rows:
        return None
    devices = [d for d in registry.DEVICES if any(row["device"] == d for row in rows)]
    mine = {d: [row for row in rows if row["device"] == d] for d in devices}
    fig, axes = dotplot.stacked([len(mine[d]) for d in devices], per_row=0.42)
    drawn = []
    for ax, device in zip(axes, devices, strict=True):
        right = matplotlib.transforms.blended_transform_factory(ax.transAxes, ax.transData)
        for y, row in enumerate(mine[device]):
            for start, end, stage, shade in spans(row):
                ax.plot([end, start], [y, y], color=shade, linewidth=WIDTH_PT, solid_capstyle="butt",
                        zorder=2)
                drawn.append((ax, start, end, y, stage, shade))
            bottom = floor_ms(row)
            if bottom is not None:
                ax.plot(bottom, y, marker="o", markersize=7, color="black", linestyle="none", zorder=3)
            call = row["steps"][0]["median_ns"] / 1e6
            shown = [stage["from"] for _, _, stage, _ in spans(row)]
            gone = [stage_name(s) for s in row["stages"] if s["to"] is not None and s["from"] not in shown]
            ax.text(1.01, y, fmt_ms(call) + (f"; floor {fmt_ms(bottom)}" if bottom is not None else "")
                    + (f"\nno time: {', '.join(gone)}" if gone else ""), transform=right, va="center",
                    fontsize=7)
        labels = [f"{row['implementation']}/{row['variant']}"
                  + (f"\nfloor {row['floor']}" if row.get("floor") else "") for row in mine[device]]
        dotplot.rows_axis(ax, labels, dotplot.panel_title(device, mine[device][0]["machine"]))
    ends = [s["median_ns"] / 1e6 for row in rows for s in row["steps"]]
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlim(min(ends) / 1.6, max(ends) * 1.6)
        dotplot.time_axis(ax, "time of one call, median (log scale): each span is a stage, from the call "
                          "without it to the call with it")
        ax.tick_params(axis="y", labelsize=7)
    used = {kind_of(s) for row in rows for s in row["stages"]}
    kinds = [Patch(color=c, label=n) for n, c, _ in KINDS[:-1] + [OTHER_KIND] if (n, c, _) in used]
    floor = matplotlib.lines.Line2D([], [], marker="o", color="black", linestyle="none",
                                    label="the floor: the row's fastest measured implementation")
    legend_below(axes[-1], [*kinds, floor], ncol=2)
    fig.suptitle("Fig. 7  Where one call's time goes, stage by stage (ablation ladder)", fontsize=10)
    layout(fig)  # the labels are measured in the final layout
    for ax, start, end, y, stage, shade in drawn:
        time = fmt_ms(start - end)
        place.fit_label(ax, end, start, y, [f"{stage_name(stage)} {time}", time], fontsize=6,
                        color=text_colour(shade))
    return save(fig, out)
