"""Fig. 10: time per SGD step against batch size (study `training`), float32: a row per answering
machine, a column for the raw, framework-ops and reference levels and one for Keras
(grid.batch_grid, as Fig. 9). One line style per meaning: dashed is Keras' `fit` and nothing else,
every other line solid (Keras' `train_on_batch` and every level's own step); a level's marker is its
own, filled for its first variant and hollow for its second.

    COLUMNS              the two columns: (title, whether Keras)
    is_fit(label)        whether a line is drawn dashed
    fig_training(data, out)
"""

from pathlib import Path

import matplotlib.ticker

from harness.figures import pick
from harness.figures.grid import batch_grid
from harness.figures.style import BACKEND_OF, finish, fmt_ms, ok_cells
from harness.report.claims.rundata import ReportData
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
    cells = pick.answering(cells, data) if not cells.empty else cells
    if cells.empty:
        return None
    cells = default_threads(cells)
    cells = cells[cells["dtype"] == "float32"]
    if cells.empty:
        return None
    fig, axes = batch_grid(cells, "median_ms", COLUMNS, "batch size (images per SGD step)",
                           "time per training step,\nmedian (log scale)", dashed=is_fit)
    axes[0].yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_ms(v)))
    fig.suptitle("Fig. 10  What one training step costs at each level")
    return finish(fig, out)
