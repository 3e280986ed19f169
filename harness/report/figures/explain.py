"""Fig. 7, why the high levels are slow: one bar per explained call (`explain` rows), split into
the stages its ablation ladder peels off, one colour per kind of stage."""

from pathlib import Path

from harness.report.explain_section import explain_rows, ms
from harness.report.rundata import ReportData
from harness.report.style import finish, plt, short_machine

# Each stage an ablation peels off falls in one of these kinds: one colour per kind in every row.
# (name, colour, words in a stage's name that put it in this kind)
Kind = tuple[str, str, tuple[str, ...]]
KINDS: list[Kind] = [("tf.data pipeline built per call", "#E69F00", ("tf.data",)),
         ("Keras' predict loop (iterators, callbacks, wrappers)", "#CC79A7",
          ("iterator", "callback", "wrapper")),
         ("framework op dispatch", "#56B4E9", ("dispatch", "executor")),
         ("framework per-call runtime", "#0072B2", ("runtime",)),
         ("the fastest measured implementation (the floor)", "#000000", ())]
OTHER_KIND: Kind = ("other", "#999999", ())
DARK = ("#000000", "#0072B2", "#CC79A7")  # white text on these


def kind_of(stage: dict) -> Kind:
    if stage["to"] is None:
        return KINDS[-1]
    name = (stage.get("short") or stage["name"]).lower()
    return next((k for k in KINDS[:-1] if any(word in name for word in k[2])), OTHER_KIND)


def fig_explain(data: ReportData, out: Path) -> Path | None:
    """Fig. 7: one bar per explained call, split into the stages its ladder peels off, coloured by
    the kind of stage; the rows grouped by machine."""
    rows = explain_rows(data.runs)
    if not rows:
        return None
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 2.4))
    labels, used = [], []
    for y, row in enumerate(rows):
        machine = short_machine(row.get("machine", ""))
        labels.append(f"{row['implementation']}/{row['variant']} ({row['device'].upper()}, "
                      f"{ms(row['steps'][0]['median_ns'])})\n{machine}")
        left = 0.0
        for stage in row["stages"]:
            share = 100 * max(stage["share"], 0.0)  # a negative difference (noise) is drawn as 0
            kind = kind_of(stage)
            used.append(kind)
            ax.barh(y, share, left=left, color=kind[1], edgecolor="white", height=0.75)
            if share > 12:
                name = "floor" if stage["to"] is None else (stage.get("short") or stage["to"])
                ax.text(left + share / 2, y, f"{name} {share:.0f}%", ha="center", va="center",
                        fontsize=6, color="white" if kind[1] in DARK else "black")
            left += share
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_title("Fig. 7  Where one call's time goes, stage by stage (ablation ladder)", fontsize=10)
    ax.set_xlabel("share of the call's median time (%)")
    kinds = [k for k in KINDS + [OTHER_KIND] if k in used]
    ax.legend(handles=[Patch(color=c, label=n) for n, c, _ in kinds], frameon=False, fontsize=7,
              loc="upper center", bbox_to_anchor=(0.4, -0.5 / (0.42 * len(rows) + 0.5)), ncol=2)
    return finish(fig, data.runs, "explain", out, margins={"left": 0.27, "right": 0.98, "top_in": 0.4,
                                                      "bottom_in": 1.15})
