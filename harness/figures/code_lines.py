"""Fig. 2: code lines per level (from loc.csv): a bar of the lines that run inference, split into
the parts a reader wants apart, its total on top (the x of Fig. 1), and beside it the training
step's lines, a separate bar with its own count.

    INFERENCE_PARTS, TRAINING       loc.csv's parts in each bar
    bars(loc_rows)                  per level: {part: lines}, bottom rung first
    tick(api_level)                 its label under the bars (the registry's short labels)
    fig_loc(data, out)              the figure
"""

import os
from pathlib import Path

import numpy as np

from harness import registry
from harness.figures.style import IMPL_ORDER, OKABE_ITO, decorate, finish, plt
from harness.report.claims.rundata import ReportData

INFERENCE_PARTS = ("forward", "kernel source", "weight layout", "ffi binding")
TRAINING = "training step"
WIDTH = 0.42  # each of a level's two bars


def tick(api_level: str) -> str:
    """An API level's tick: its levels' short label (registry.short), the part they share where one
    package holds several (the Keras package's "Keras/TF", "Keras/JAX" -> "Keras"), a word a line;
    the API level's own name where no registered level has it."""
    shorts = [registry.short(name) for name in registry.levels()
              if registry.REGISTRY[name].api_level == api_level]
    common = os.path.commonprefix(shorts).rstrip("/ ") if len(shorts) > 1 else "".join(shorts)
    return (common or api_level.replace("-", " ")).replace(" ", "\n")


def bars(loc_rows: list[dict]) -> dict[str, dict[str, int]]:
    """{level: {part: code lines}} for every API level in loc.csv but the shared loaders, the
    ladder's order (bottom rung first), unknown levels after it."""
    ladder = list(dict.fromkeys(registry.REGISTRY[i].api_level for i in IMPL_ORDER))  # their API levels
    present = {row["api_level"] for row in loc_rows} - {"shared"}
    levels = [lvl for lvl in ladder if lvl in present] + sorted(present - set(ladder))
    return {lvl: {part: sum(r["code"] for r in loc_rows if r["api_level"] == lvl and r["part"] == part)
                  for part in (*INFERENCE_PARTS, TRAINING)} for lvl in levels}


def fig_loc(data: ReportData, out: Path) -> Path:
    """Fig. 2: per level, the inference bar by part with its total on top, the training bar beside."""
    per_level = bars(data.loc_rows)
    levels = list(per_level)
    x = np.arange(len(levels))
    fig, ax = plt.subplots(figsize=(9, 4.4))
    bottom = np.zeros(len(levels))
    for i, part in enumerate(INFERENCE_PARTS):
        values = np.array([per_level[lvl][part] for lvl in levels], dtype=float)
        ax.bar(x - WIDTH / 2, values, WIDTH, bottom=bottom, color=OKABE_ITO[i], label=part)
        bottom += values
    for k, total in enumerate(bottom):
        ax.text(k - WIDTH / 2, total, f"{int(total)}", ha="center", va="bottom", fontsize=8,
                fontweight="bold")
    training = np.array([per_level[lvl][TRAINING] for lvl in levels], dtype=float)
    ax.bar(x + WIDTH / 2, training, WIDTH, color="white", edgecolor=OKABE_ITO[4], hatch="////",
           label="training step (its own bar; not in the inference total)")
    for k, lines in enumerate(training):
        if lines:
            ax.text(k + WIDTH / 2, lines, f"{int(lines)}", ha="center", va="bottom", fontsize=7,
                    color="#555555")
    shared = sum(r["code"] for r in data.loc_rows if r["api_level"] == "shared")
    ax.bar(len(levels), shared, WIDTH * 2, color="white", edgecolor="#777777", hatch="..",
           label="shared loaders (every level uses them)")
    ax.text(len(levels), shared, f"{shared}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(levels) + 1), [tick(lvl) for lvl in levels]
                  + ["shared\nloaders\n(MNIST,\nHDF5)"], fontsize=8)
    ax.set_ylim(0, max([*bottom, *training, shared]) * 1.1)
    decorate(ax, "Fig. 2  Lines of code per level: inference by part (total on top), training beside",
             "level (implementation package), bottom rung first; blanks, comments and docstrings not counted",
             "code lines (pygount)", legend_size=8)
    return finish(fig, out)
