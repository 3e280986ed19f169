"""Fig. 9: images/s against batch size (study `batch_sweep`): a column per machine and device,
a row for the levels below Keras (raw library, hand-written, engine, framework ops, the NumPy
reference) and a row for Keras on its three backends, so that no panel holds more than about
eight lines. Every GPU panel also draws the best CPU line, dashed: where a GPU line crosses it,
the GPU starts to pay. The 95% interval of every cell is shaded.

    best_cpu_line(cells)      the CPU line with the most images/s at the largest batch
    fig_throughput(data, out) the figure
"""

from pathlib import Path

import pandas as pd

from harness.report.claims.rundata import ReportData
from harness.report.figures import batch_lines, dotplot
from harness.report.figures.grid import same_y_scale
from harness.report.markup.style import BACKEND_OF, caption, finish, ok_cells, panels, plt, short_machine

ROWS = (("levels below Keras", False), ("Keras, three backends", True))


def best_cpu_line(cells: pd.DataFrame) -> pd.DataFrame | None:
    """The cells of the CPU line (one machine's label) with the most images/s at the largest
    batch any CPU line measured; ties by machine, then label. None without CPU cells there."""
    cpu = cells[cells["device"] == "cpu"]
    if cpu.empty:
        return None
    largest = cpu[cpu["batch_size"] == cpu["batch_size"].max()]
    top = largest.sort_values(["images_per_s", "machine", "label"], ascending=[False, True, True]).iloc[0]
    return cpu[(cpu["machine"] == top["machine"]) & (cpu["label"] == top["label"])]


def best_cpu_name(best: pd.DataFrame) -> str:
    """'best CPU line: c/fused, AMD EPYC': the CPU's model only (a machine's full name, its cores and
    fingerprint or peak, runs past a panel's legend; the caption gives it)."""
    machine = short_machine(best["machine"].iloc[0]).replace("(R)", "").split(",")[0]
    return f"best CPU line: {best['label'].iloc[0]}, {machine}"


def fig_throughput(data: ReportData, out: Path) -> Path | None:
    """Fig. 9: images/s against batch size, a column per machine and device, a row per group of
    levels, the best CPU line dashed in every GPU panel."""
    cells = ok_cells(data.frame, "batch_sweep")
    if cells.empty:
        return None
    groups = panels(cells)
    keras = cells["implementation"].isin(list(BACKEND_OF))
    best = best_cpu_line(cells)
    sizes = sorted(int(b) for b in cells["batch_size"].unique())
    fig, grid = plt.subplots(len(ROWS), len(groups), figsize=(4.3 * len(groups), 9.4), squeeze=False)
    for row, (what, is_keras) in enumerate(ROWS):
        for col, (device, machine) in enumerate(groups):
            ax = grid[row][col]
            part = cells[(cells["device"] == device) & (cells["machine"] == machine) & (keras == is_keras)]
            batch_lines.draw(ax, part, "images_per_s")
            if device == "gpu" and best is not None:
                impl = best["implementation"].iloc[0]
                batch_lines.line(ax, best, "images_per_s", best_cpu_name(best), impl, "o", "--", width=1.2)
            batch_lines.batch_axis(ax, sizes, "batch size (images per call)")
            ax.set_title(f"{dotplot.panel_title(device, machine)}\n{what}", fontsize=9, loc="left")
            entries = len(ax.get_legend_handles_labels()[1])  # a GPU panel's long CPU line: one column, if
            ax.legend(frameon=False, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.17),  # it fits
                      ncol=1 if device == "gpu" and entries <= 6 else 2)
        grid[row][0].set_ylabel("throughput (images/s, log scale)")
    axes = [ax for r in grid for ax in r]
    same_y_scale(axes)
    fig.suptitle("Fig. 9  Throughput against batch size (the same y scale in every panel)")
    text = ("Line: one implementation and variant, median images/s per batch size; band: its 95% interval. "
            "Dashed, in every GPU panel only: the best CPU line "
            + (f"({best['label'].iloc[0]} on {short_machine(best['machine'].iloc[0])}, the most images/s at "
               f"batch {int(best['batch_size'].max())}), drawn again: where a GPU line passes it, the GPU "
               "starts to pay." if best is not None else "(no CPU cells).")
            + "\n" + caption(data.runs, "batch_sweep"))
    return finish(fig, data.runs, "batch_sweep", out, text,
                  margins={"left": 0.06, "right": 0.99, "top_in": 0.95, "bottom_in": 1.45, "gap_in": 1.75,
                           "wspace": 0.15})
