"""Fig. 10: time per SGD step against batch size (study `training`), float32, a panel per machine
and device for the raw, framework-ops and reference levels and one for Keras."""

from pathlib import Path

import matplotlib.ticker

from harness.report.rundata import ReportData
from harness.report.style import (
    BACKEND_OF,
    finish,
    fmt_ms,
    lines_against_batch,
    ok_cells,
    panels,
    plt,
    short_machine,
)
from harness.report.training_section import STUDY, default_threads


def fig_training(data: ReportData, out: Path) -> Path | None:
    """Fig. 10: time per SGD step against batch size, float32, one panel per machine and device for
    the raw, framework-ops and reference levels and one for Keras (at most about eight lines each)."""
    cells = ok_cells(data.frame, STUDY)
    if cells.empty:
        return None
    cells = default_threads(cells)
    cells = cells[cells["dtype"] == "float32"]
    keras = cells["implementation"].isin(list(BACKEND_OF))
    groups = [(device, machine, is_keras) for device, machine in panels(cells) for is_keras in (False, True)
              if (keras == is_keras)[(cells["device"] == device) & (cells["machine"] == machine)].any()]
    fig, axes = plt.subplots(1, len(groups), figsize=(4.6 * len(groups), 5.6), squeeze=False, sharey=True)
    for ax, (device, machine, is_keras) in zip(axes[0], groups, strict=True):
        part = cells[(cells["device"] == device) & (cells["machine"] == machine) & (keras == is_keras)]
        lines_against_batch(ax, part, "median_ms")
        what = "Keras, three backends" if is_keras else "raw library, framework ops, NumPy"
        ax.set_title(f"{device.upper()}: {short_machine(machine)}\n{what}", fontsize=9, loc="left")
        ax.set_xlabel("batch size (images per SGD step)")
        ax.grid(True, which="major", color="#EEEEEE")
        ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    axes[0][0].set_ylabel("time per training step, median (log scale)")
    axes[0][0].yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_ms(v)))
    fig.suptitle("Fig. 10  What one training step costs at each level")
    return finish(fig, data.runs, STUDY, out, margins={"left": 0.09, "right": 0.99, "top_in": 1.0,
                                                  "bottom_in": 1.4, "wspace": 0.08})
