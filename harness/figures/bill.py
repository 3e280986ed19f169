"""Fig. 12: the full bill of each level at a glance: five currencies side by side (time per image,
lines of code, peak memory, start-up to the first answer, install size), one row per level in the
ladder's order and colours, from the headline's rows (headline.levels) on the CPU: a bar where its axis
starts at zero, a dot on a log axis (a bar from an arbitrary left edge would draw a length that means
nothing)."""

from pathlib import Path

from harness.figures.style import colour, finish, plt, short_machine
from harness.report.claims import headline
from harness.report.claims.bill import Bill
from harness.report.claims.rundata import ReportData

# (panel title, x label, value of a level, log scale)
PANELS = (
    ("time per image", "µs, batch 1, first-written call (log)",
     lambda lv, b: lv.first["cpu"]["median_ms"] * 1e3 if "cpu" in lv.first else None, True),
    ("code", "lines for inference", lambda lv, b: lv.loc, False),
    ("memory", "MiB resident, peak in calls", lambda lv, b: b.calls_peak_mb, False),
    ("start-up", "s to the first answer (log)", lambda lv, b: b.startup_s, True),
    ("installed", "MiB beyond the harness (log)", lambda lv, b: max(b.install_mb, 0.1), True),
)


def number(v: float) -> str:
    """110,000 and 2,247 in full, 3.3 and 0.044 to three figures."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.2g}"


def note(title: str, b: Bill) -> str:
    """A bar's mark: the start-up of a level that compiled its code, an install size read the old way."""
    if title == "start-up" and b.compiled:
        return " (compiles)"
    if title == "installed" and b.basis == "older":
        return " *"  # the caption says what the star means
    return ""


def fig_bill(data: ReportData, out: Path) -> Path | None:
    """Fig. 12, or None when the run that answers recorded no bill (runs before it was measured)."""
    levels, machines = headline.levels(data.frame, data.loc_rows, data.answer)
    rows = [lv for lv in levels if "cpu" in lv.bills]
    if not rows:
        return None
    rows.reverse()  # the ladder's bottom rung at the top of each panel
    fig, axes = plt.subplots(1, len(PANELS), figsize=(12.6, 0.32 * len(rows) + 1.6), sharey=True)
    names = [lv.name for lv in rows]
    for ax, (title, xlabel, value, log) in zip(axes, PANELS, strict=True):
        values = []
        for y, lv in enumerate(rows):
            bill: Bill = lv.bills["cpu"]
            v = value(lv, bill)
            if v is None:
                ax.text(0.02, y, "not measured", va="center", fontsize=7, color="#777777",
                        transform=ax.get_yaxis_transform())  # x in the axes' width: a log axis has no 0
                continue
            values.append(v)
            if log:
                ax.plot(v, y, marker="o", markersize=8, color=colour(lv.implementation),
                        markeredgecolor="black", markeredgewidth=0.5, linestyle="none", zorder=3)
                ax.annotate(f"{number(v)}{note(title, bill)}", (v, y), xytext=(6, 0),
                            textcoords="offset points", va="center", fontsize=7)
            else:
                ax.barh(y, v, color=colour(lv.implementation), height=0.7)
                ax.text(v, y, f" {number(v)}{note(title, bill)}", va="center", fontsize=7)
        if log:
            ax.set_xscale("log")
            ax.set_xlim(min(values) / 3, max(values) * 40)  # room for the labels right of the dots
            ax.grid(True, axis="y", color="#EEEEEE")  # a dot's row, read across
            ax.set_axisbelow(True)
        else:
            ax.set_xlim(0, max(values) * 1.35)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(range(len(rows)), names)
    cpu = short_machine(machines["cpu"])
    fig.suptitle(f"Fig. 12  The full bill of each level on the CPU ({cpu})", fontsize=11)
    return finish(fig, out)
