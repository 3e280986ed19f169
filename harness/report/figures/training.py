"""Fig. 10: time per SGD step against batch size (study `training`), float32: a row per machine
and device, a column for the raw, framework-ops and reference levels and one for Keras. One line
style per meaning: dashed is Keras' `fit` and nothing else, every other line solid (Keras'
`train_on_batch` and every level's own step); the marker tells an implementation's variants apart.

    COLUMNS              the two columns: (title, whether Keras)
    is_fit(label)        whether a line is drawn dashed
    fig_training(data, out)
"""

from pathlib import Path

import matplotlib.ticker

from harness.report.claims.rundata import ReportData
from harness.report.figures import batch_lines
from harness.report.markup.style import (
    BACKEND_OF,
    caption,
    finish,
    fmt_ms,
    ok_cells,
    panels,
    plt,
    short_machine,
)
from harness.report.sections.training_section import STUDY, default_threads

COLUMNS = (("raw library, framework ops, NumPy", False), ("Keras, three backends", True))


def is_fit(label: str) -> bool:
    """Keras' `fit` (the one dashed line style): 'keras_jax/fit', not 'keras/train_on_batch'."""
    impl, _, variant = label.partition("/")
    return impl in BACKEND_OF and variant == "fit"


def fig_training(data: ReportData, out: Path) -> Path | None:
    """Fig. 10: time per SGD step against batch size, float32, a row per machine and device, a
    column for the levels below Keras and one for Keras (at most about eight lines a panel)."""
    cells = ok_cells(data.frame, STUDY)
    if cells.empty:
        return None
    cells = default_threads(cells)
    cells = cells[cells["dtype"] == "float32"]
    if cells.empty:
        return None
    keras = cells["implementation"].isin(list(BACKEND_OF))
    rows = panels(cells)
    sizes = sorted(int(b) for b in cells["batch_size"].unique())
    fig, grid = plt.subplots(len(rows), len(COLUMNS), figsize=(9.2, 3.3 * len(rows) + 2.6), squeeze=False,
                             sharey=True)
    for r, (device, machine) in enumerate(rows):
        for c, (what, is_keras) in enumerate(COLUMNS):
            ax = grid[r][c]
            part = cells[(cells["device"] == device) & (cells["machine"] == machine) & (keras == is_keras)]
            batch_lines.draw(ax, part, "median_ms", dashed=is_fit)
            last = r == len(rows) - 1
            batch_lines.batch_axis(ax, sizes, "batch size (images per SGD step)" if last else "")
            ax.set_title(f"{device.upper()}: {short_machine(machine)}\n{what}", fontsize=9, loc="left")
        grid[r][0].set_ylabel("time per training step,\nmedian (log scale)")
    grid[0][0].yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_ms(v)))
    for c in range(len(COLUMNS)):  # one legend per column, under it: the union of its panels' lines
        found: dict[str, object] = {}
        for r in range(len(rows)):
            handles, labels = grid[r][c].get_legend_handles_labels()
            found.update({lb: h for h, lb in zip(handles, labels, strict=True) if lb not in found})
        grid[-1][c].legend(list(found.values()), list(found), frameon=False, fontsize=7, loc="upper center",
                           bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.suptitle("Fig. 10  What one training step costs at each level")
    text = ("Line: median time per SGD step (float32, the study's thread count); band: its 95% interval. "
            "Dashed: Keras' fit, and only it; solid: Keras' train_on_batch and every other level's own step. "
            "Marker: an implementation's first variant a circle, its second a square.\n"
            + caption(data.runs, STUDY))
    return finish(fig, data.runs, STUDY, out, text,
                  margins={"left": 0.12, "right": 0.98, "top_in": 0.95, "bottom_in": 1.35, "gap_in": 0.75,
                           "wspace": 0.08})
