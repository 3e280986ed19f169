"""Fig. 9: images/s against batch size (study `batch_sweep`): a row per machine and device, a
column for the levels below Keras (raw library, hand-written, engine, framework ops, the NumPy
reference) and a column for Keras on its three backends (grid.batch_grid, as Fig. 10). Every GPU
panel also draws the best CPU line, dashed: where a GPU line crosses it, the GPU starts to pay.
The 95% interval of every cell is shaded.

    best_cpu_line(cells)      the CPU line with the most images/s at the largest batch
    fig_throughput(data, out) the figure
"""

from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes

from harness.figures import batch_lines
from harness.figures.grid import batch_grid
from harness.figures.style import caption, finish, ok_cells, short_machine
from harness.report.claims.rundata import ReportData

GROUPS = (("levels below Keras", False), ("Keras, three backends", True))  # a column each


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
    """Fig. 9: images/s against batch size, a row per machine and device, a column per group of
    levels, the best CPU line dashed in every GPU panel."""
    cells = ok_cells(data.frame, "batch_sweep")
    if cells.empty:
        return None
    best = best_cpu_line(cells)

    def best_cpu(ax: Axes, device: str) -> None:
        if device == "gpu" and best is not None:
            batch_lines.line(ax, best, "images_per_s", best_cpu_name(best), best["implementation"].iloc[0],
                             "o", "--", width=1.2)

    fig, _axes = batch_grid(cells, "images_per_s", GROUPS, "batch size (images per call)",
                            "throughput (images/s, log scale)", extra=best_cpu)
    fig.suptitle("Fig. 9  Throughput against batch size (the same y scale in every panel)")
    text = ("Line: one implementation and variant, median images/s per batch size; band: its 95% interval. "
            "Dashed, in every GPU panel only: the best CPU line "
            + (f"({best['label'].iloc[0]} on {short_machine(best['machine'].iloc[0])}, the most images/s at "
               f"batch {int(best['batch_size'].max())}), drawn again: where a GPU line passes it, the GPU "
               "starts to pay." if best is not None else "(no CPU cells).")
            + "\n" + caption(data.runs, "batch_sweep"))
    return finish(fig, data.runs, "batch_sweep", out, text)
