"""Fig. 11: float32 against float64 at batch 1 (study `precision`), a panel per machine and device."""

from pathlib import Path

from harness.report.figures import dotplot
from harness.report.rundata import ReportData
from harness.report.style import colour, finish, ok_cells


def fig_precision(data: ReportData, out: Path) -> Path | None:
    """Fig. 11: float32 (filled) against float64 (hollow), one panel per machine and device."""
    cells = ok_cells(data.frame, "precision")
    if cells.empty:
        return None
    cells = cells[cells["batch_size"] == 1]
    fig, panel_list = dotplot.ladder_panels(cells)
    for ax, part, labels, title in panel_list:
        for _, r in part.iterrows():
            y = labels.index(r["label"]) + (0.15 if r["dtype"] == "float64" else -0.15)
            dotplot.dot(ax, y, r, colour(r["implementation"]), filled=r["dtype"] == "float32",
                        marker="o" if r["dtype"] == "float32" else "D")
        dotplot.rows_axis(ax, labels, title)
        dotplot.time_axis(ax)
    import matplotlib.lines

    fig.axes[0].legend(handles=[matplotlib.lines.Line2D([], [], marker=m, color="#555555", linestyle="none",
                                                        markerfacecolor=f, label=d)
                                for m, f, d in (("o", "#555555", "float32"), ("D", "white", "float64"))],
                       frameon=False, fontsize=7, loc="lower right")
    fig.suptitle("Fig. 11  float32 (filled) against float64 (hollow), batch 1")
    return finish(fig, data.runs, "precision", out, margins=dotplot.STACKED)
