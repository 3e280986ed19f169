"""Fig. 9: images/s against batch size (study `batch_sweep`), a panel per machine and device."""

from pathlib import Path

from harness.report.figures import dotplot
from harness.report.figures.grid import panel_grid, same_y_scale
from harness.report.rundata import ReportData
from harness.report.style import finish, lines_against_batch, ok_cells, panels


def fig_throughput(data: ReportData, out: Path) -> Path | None:
    """Fig. 9: images/s against batch size, one panel per machine and device."""
    cells = ok_cells(data.frame, "batch_sweep")
    if cells.empty:
        return None
    groups = panels(cells)
    fig, axes = panel_grid(len(groups), height=5.2)
    for ax, (device, machine) in zip(axes, groups, strict=True):
        lines_against_batch(ax, cells[(cells["device"] == device) & (cells["machine"] == machine)],
                            "images_per_s")
        ax.set_title(dotplot.panel_title(device, machine), fontsize=9, loc="left")
        ax.set_xlabel("batch size (images per call)")
        ax.grid(True, which="major", color="#EEEEEE")
        ax.legend(frameon=False, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    axes[0].set_ylabel("throughput (images/s, log scale)")
    same_y_scale(axes)
    fig.suptitle("Fig. 9  Throughput against batch size (the same y scale in every panel)")
    return finish(fig, data.runs, "batch_sweep", out, margins={"left": 0.06, "right": 0.99, "top_in": 0.75,
                                                           "bottom_in": 1.7, "wspace": 0.15})
