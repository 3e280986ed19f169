"""The lab's figures: speed against lines of code (one point per ranked submission, the
references marked), and one submission's per-call latency histogram.

    speed_vs_loc(rows, lab, refs, path), histogram(row, path), reference_loc(implementation),
    name_label(student)
"""

import functools
from pathlib import Path

import numpy as np
from matplotlib.ticker import FuncFormatter, LogFormatter

from harness import registry
from harness.draw import style
from harness.draw.style import plt
from harness.lab import text
from harness.lab.judge.rules.assignment import Lab


def name_label(student: str) -> str:
    """A student's name as a figure's text: escaped (harness.lab.text), no mathtext ($)."""
    return text.clean(student, 40).replace("$", r"\$")


@functools.cache  # `lab publish` asks for each reference twice (its table and its figure)
def reference_loc(implementation: str) -> int | None:
    """Code lines of a reference's package (all its files, as the report's LOC table)."""
    from harness.machine import provenance as loc

    package = registry.REGISTRY[implementation].package if implementation in registry.REGISTRY else None
    if not package:
        return None
    return sum(loc.count_lines(p, package)[0] for p in loc.package_files(package))


def speed_vs_loc(rows: list[dict], lab: Lab, refs: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ok = [r for r in rows if r["status"] == "ok"]
    rank_by = lab.rank_by.label
    if ok:
        x = [r["loc"] for r in ok]
        y = [r["ratios"][rank_by]["ratio"] for r in ok]
        low = [r["ratios"][rank_by]["ratio"] - r["ratios"][rank_by]["ci95_low"] for r in ok]
        high = [r["ratios"][rank_by]["ci95_high"] - r["ratios"][rank_by]["ratio"] for r in ok]
        ax.errorbar(x, y, yerr=[np.nan_to_num(low), np.nan_to_num(high)], fmt="o", color=style.OKABE_ITO[0],
                    capsize=3, label="submissions (95% interval)")
        for r, xi, yi in zip(ok, x, y, strict=True):
            ax.annotate(name_label(r["student"]), (xi, yi), textcoords="offset points", xytext=(5, 4),
                        fontsize=7)
    for i, ref in enumerate(lab.references):
        lines = reference_loc(ref.implementation)
        ratio = refs.get(ref.label, {}).get("ratio", 1.0 if ref.label == rank_by else None)
        if ratio is None:
            continue
        color = style.OKABE_ITO[(i + 1) % len(style.OKABE_ITO)]
        ax.axhline(ratio, color=color, linestyle="--", linewidth=0.8)
        if lines:
            ax.plot([lines], [ratio], marker="*", markersize=12, color=color, linestyle="none",
                    label=f"reference {ref.label} ({lines} lines)")
        else:
            ax.plot([], [], color=color, linestyle="--", label=f"reference {ref.label}")
    ax.set_yscale("log")
    unranked = len(rows) - len(ok)
    style.decorate(ax, f"Lab {lab.name}: speed against code ({len(ok)} ranked, {unranked} not)",
                   "lines of code (pygount, all .py files of the submission)",
                   f"time per image, × {rank_by} (within-round ratio, log)")
    hosts = sorted({(r.get("node") or {}).get("hostname", "?") for r in rows})
    caption = (f"Each point is a submission timed beside {', '.join(x.label for x in lab.references)} in the "
               f"same rounds on its node; nodes: {', '.join(hosts)}. Lower is faster.")
    return style.finish(fig, [], None, path, caption_text=caption)


def histogram(row: dict, path: Path) -> Path | None:
    """Per-call latency of one submission (every timed call of the rounds used), references'
    medians marked."""
    times = row.get("times_ns") or {}
    calls = [t for r in (row.get("rounds_used") or range(len(times.get("submission", []))))
             for t in times.get("submission", [])[r]]
    if not calls:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    us = np.asarray(calls, dtype=np.float64) / 1e3
    bins = np.logspace(np.log10(max(us.min(), 0.1)), np.log10(max(us.max(), 0.2)), 40)
    counts, edges = np.histogram(us, bins=bins)  # (40,) calls per bin, as ax.hist counted them
    # one step patch, not a rectangle per bin; the ticks' labels plain numbers (100, 200), not
    # mathtext (2×10²): the two were half of drawing one histogram, and a lab draws one per student
    ax.stairs(counts, edges, fill=True, color=style.OKABE_ITO[0], alpha=0.8,
              label=f"{name_label(row['student'])} ({len(us)} calls)")
    ax.axvline(np.median(us), color=style.OKABE_ITO[0], linestyle="-", linewidth=1)
    for i, (label, median) in enumerate((row.get("reference_medians_ns") or {}).items()):
        ax.axvline(median / 1e3, color=style.OKABE_ITO[(i + 1) % 8], linestyle="--",
                   label=f"{label} median {median / 1e3:.3g} µs")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # 10, 100, 1000, ...
    ax.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))  # matplotlib's choice of minor labels
    style.decorate(ax, f"{name_label(row['student'])}: time per call", "µs per call (log)", "calls")
    node = row.get("node") or {}
    caption = f"node {node.get('hostname')}: {node.get('gpu') or node.get('cpu')}; lab {row['lab']}"
    # a fixed layout: one histogram per student, and tight_layout took 0.3 s of each
    return style.finish(fig, [], None, path, caption_text=caption,
                        margins={"left": 0.1, "right": 0.98, "top_in": 0.35, "bottom_in": 0.5})
