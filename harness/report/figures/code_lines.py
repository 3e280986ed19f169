"""Fig. 2: code lines per level, split into the parts a reader wants apart (from loc.csv)."""

from pathlib import Path

import numpy as np

from harness import registry
from harness.report.rundata import ReportData
from harness.report.style import IMPL_ORDER, OKABE_ITO, decorate, finish, plt


def fig_loc(data: ReportData, out: Path) -> Path:
    """Fig. 2: code lines per level, split into the parts a reader wants apart."""
    loc_rows = data.loc_rows
    parts = ["forward", "kernel source", "weight layout", "ffi binding", "training step"]
    ladder = list(dict.fromkeys(registry.REGISTRY[i].api_level for i in IMPL_ORDER))  # their API levels
    present = {row["api_level"] for row in loc_rows} - {"shared"}
    levels = [lvl for lvl in ladder if lvl in present] + sorted(present - set(ladder))
    fig, ax = plt.subplots(figsize=(9, 4.4))
    bottom = np.zeros(len(levels))
    for i, part in enumerate(parts):
        values = np.array([sum(r["code"] for r in loc_rows if r["api_level"] == lvl and r["part"] == part)
                           for lvl in levels], dtype=float)
        ax.bar(levels, values, bottom=bottom, color=OKABE_ITO[i], label=part)
        bottom += values
    for x, total in enumerate(bottom):
        ax.text(x, total, f"{int(total)}", ha="center", va="bottom", fontsize=9)
    shared = sum(r["code"] for r in loc_rows if r["api_level"] == "shared")
    ax.bar(len(levels), shared, color="white", edgecolor="#777777", hatch="..",
           label="shared loaders (every level uses them)")
    ax.text(len(levels), shared, f"{shared}", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(levels) + 1), [lvl.replace("-", "\n") for lvl in levels]
                  + ["shared loaders\n(MNIST, HDF5)"], fontsize=8)
    decorate(ax, "Fig. 2  Lines of code per level, by part",
             "level (implementation package), bottom rung first; blanks, comments and docstrings not counted",
             "code lines (pygount)", legend_size=8)
    return finish(fig, data.runs, None, out, "lines counted by pygount from this checkout (reports/loc.csv)",
                  margins={"left": 0.08, "right": 0.99, "top_in": 0.4, "bottom_in": 0.85})
