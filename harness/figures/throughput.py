"""Fig. 9: images/s against batch size (study `batch_sweep`) on the answering machines: a row per
device, a column for the levels below Keras (raw library, hand-written, engine, framework ops, the
NumPy reference) and a column for Keras on its three backends (grid.batch_grid, as Fig. 10), each
level's variant with the most images/s at the panel's largest batch (DETAILS.md has every variant).
Every GPU panel also draws the answering CPU machine's best line, dashed: where a GPU line crosses
it, the GPU starts to pay. The 95% interval of every cell is shaded.

    best_per_level(cells)     each level's line with the most images/s at its panel's largest batch
    best_cpu_line(cells)      the CPU line with the most images/s at the largest batch
    fig_throughput(data, out) the figure
"""

from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes

from harness.figures import batch_lines, pick
from harness.figures.grid import batch_grid
from harness.figures.style import finish, marker, ok_cells, short_machine
from harness.report.claims.rundata import ReportData

GROUPS = (("levels below Keras", False), ("Keras, three backends", True))  # a column each


def best_per_level(cells: pd.DataFrame) -> pd.DataFrame:
    """Per machine, device and level, the cells of its one line with the most images/s at the largest
    batch that machine measured on that device (ties by label): at most one line per level, so a
    panel holds about eight (the GPU's thirteen CUDA variants are one line)."""
    keep = []
    for (_machine, _device), panel in cells.groupby(["machine", "device"], sort=True):
        largest = panel[panel["batch_size"] == panel["batch_size"].max()]
        for _impl, part in largest.groupby("implementation", sort=True):
            top = part.sort_values(["images_per_s", "label"], ascending=[False, True]).iloc[0]
            keep.append(panel[panel["label"] == top["label"]])
    return pd.concat(keep) if keep else cells


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
    fingerprint or peak, runs past a panel's legend; the panel titles give it)."""
    machine = short_machine(best["machine"].iloc[0]).replace("(R)", "").split(",")[0]
    return f"best CPU line: {best['label'].iloc[0]}, {machine}"


def fig_throughput(data: ReportData, out: Path) -> Path | None:
    """Fig. 9: images/s against batch size, a row per answering machine, a column per group of
    levels, each level's best line, the best CPU line dashed in every GPU panel."""
    cells = ok_cells(data.frame, "batch_sweep")
    cells = pick.answering(cells, data) if not cells.empty else cells
    if cells.empty:
        return None
    cells = best_per_level(cells)
    best = best_cpu_line(cells)

    def best_cpu(ax: Axes, device: str) -> None:
        if device == "gpu" and best is not None:
            impl = best["implementation"].iloc[0]
            batch_lines.line(ax, best, "images_per_s", best_cpu_name(best), impl, marker(impl), "--",
                             width=1.2)

    fig, _axes = batch_grid(cells, "images_per_s", GROUPS, "batch size (images per call)",
                            "throughput (images/s, log scale)", extra=best_cpu)
    fig.suptitle("Fig. 9  Throughput against batch size, each level's best line (one y scale in every panel)",
                 fontsize=10)
    return finish(fig, out)
