"""Fig. 7, why the high levels are slow: one bar per explained call (`explain` rows), split into
the stages its ablation ladder peels off, one colour per kind of stage; where two neighbouring
stages are of one kind, the second is drawn in a lighter shade of it, so every stage is its own
segment. A segment is labelled only where its label fits inside it (else with its share alone,
else not at all: DETAILS.md names every stage).

    KINDS, kind_of(stage)          the kinds of stage and their colours
    segments(row)                  a bar's segments: (left %, width %, stage, colour)
    fig_explain(data, out)         the figure
"""

from pathlib import Path

import matplotlib.colors
from matplotlib.patches import Patch

from harness.draw import place
from harness.figures.style import caption, fmt_ms, legend_below, plt, save, settle, short_machine
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
Segment = tuple[float, float, dict, str]


def kind_of(stage: dict) -> Kind:
    if stage["to"] is None:
        return KINDS[-1]
    name = (stage.get("short") or stage["name"]).lower()
    return next((k for k in KINDS[:-1] if any(word in name for word in k[2])), OTHER_KIND)


def lighter(hex_colour: str) -> str:
    rgb = matplotlib.colors.to_rgb(hex_colour)
    r, g, b = (c + (1 - c) * LIGHTER for c in rgb)
    return matplotlib.colors.to_hex((r, g, b))


def segments(row: dict) -> list[Segment]:
    """A bar's segments left to right: (left %, width %, stage, colour). A negative share (the
    difference of two noisy medians) is drawn as 0; a stage of the same kind as the one before it
    is drawn lighter, so neighbours never share a colour."""
    out: list[Segment] = []
    left, previous = 0.0, None
    for stage in row["stages"]:
        share = 100 * max(stage["share"], 0.0)
        kind = kind_of(stage)
        shade = lighter(kind[1]) if kind == previous and out and out[-1][3] == kind[1] else kind[1]
        out.append((left, share, stage, shade))
        left, previous = left + share, kind
    return out


def text_colour(fill: str) -> str:
    """White on dark fills, black on light ones (by luminance)."""
    r, g, b = matplotlib.colors.to_rgb(fill)
    return "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"


def stage_name(stage: dict) -> str:
    return "floor" if stage["to"] is None else (stage.get("short") or stage["to"])


def fig_explain(data: ReportData, out: Path) -> Path | None:
    """Fig. 7: one bar per explained call, split into the stages its ladder peels off, coloured by
    the kind of stage; the rows grouped by machine."""
    rows = study_rows(data.runs, "explain", only_ok=False)
    if not rows:
        return None
    height = 0.42 * len(rows) + 2.4
    fig, ax = plt.subplots(figsize=(9, height))
    bars = [segments(row) for row in rows]
    negative = [f"{row['implementation']}/{row['variant']} on {short_machine(row.get('machine', ''))}: "
                f"{stage_name(s)} {100 * s['share']:.0f}%"
                for row in rows for s in row["stages"] if s["share"] < 0]
    text = ("Each bar: one call's median, peeled down its ablation ladder; a segment is a stage's share "
            "(the difference of neighbouring medians). A lighter shade: the next stage of the same kind. "
            "Narrow segments are unlabelled (DETAILS.md names every stage)."
            + (f" Drawn as 0 (a negative difference of noisy medians, so the bar passes 100%): "
               f"{'; '.join(negative)}." if negative else "")
            + "\n" + caption(data.runs, "explain"))
    labels = []
    for y, (row, bar) in enumerate(zip(rows, bars, strict=True)):
        labels.append(f"{row['implementation']}/{row['variant']} ({row['device'].upper()}, "
                      f"{fmt_ms(row['steps'][0]['median_ns'] / 1e6)})\n"
                      f"{short_machine(row.get('machine', '')).replace('(R)', '')}"
                      + (f"; floor {row['floor']}" if row.get("floor") else ""))
        for left, width, _stage, shade in bar:
            ax.barh(y, width, left=left, color=shade, edgecolor="white", linewidth=0.6, height=0.75)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max(100.0, max(left + width for bar in bars for left, width, _, _ in bar)))
    ax.set_title("Fig. 7  Where one call's time goes, stage by stage (ablation ladder)", fontsize=10)
    ax.set_xlabel("share of the call's median time (%)")
    used = {kind_of(s) for row in rows for s in row["stages"]}
    legend_below(ax, [Patch(color=c, label=n) for n, c, _ in KINDS + [OTHER_KIND] if (n, c, _) in used])
    settle(fig, text)  # the labels are measured in the final layout
    for y, bar in enumerate(bars):
        for left, width, stage, shade in bar:
            share = f"{width:.0f}%"
            place.fit_label(ax, left, left + width, y, [f"{stage_name(stage)} {share}", share], fontsize=6,
                            color=text_colour(shade))
    return save(fig, out)
