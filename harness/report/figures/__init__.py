"""The report's figures, a module per figure or family, each drawn by a `(data, out)` function."""

from collections.abc import Callable
from pathlib import Path

from harness.report.claims.rundata import ReportData
from harness.report.figures import (
    backends,
    bill,
    code_lines,
    cost,
    explain,
    latency,
    overhead,
    precision,
    throughput,
    training,
)
from harness.report.markup.style import FIGURES_DIR

# Every figure is a PNG (style.DPI), a pure function of the result files and loc.csv: one colour per
# implementation in every figure (style.colour), one panel per machine and device, dots on log
# scales, every axis labelled with units, a caption line naming the environment under each figure.
# `python -m harness figures` draws them all.

# A figure: drawn from the report's data into `out` (a PNG), or None when its study has no rows.
Figure = Callable[[ReportData, Path], Path | None]

# (file, figure) in reading order: fig01 ... fig12.
FIGURES: tuple[tuple[str, Figure], ...] = (
    ("fig01_cost_vs_code.png", cost.fig_cost),
    ("fig02_loc.png", code_lines.fig_loc),
    ("fig03_latency.png", latency.fig_latency),
    ("fig04_distributions.png", latency.fig_distributions),
    ("fig05_cold_start.png", latency.fig_cold_start),
    ("fig06_time_split.png", overhead.fig_overhead),
    ("fig07_explain.png", explain.fig_explain),
    ("fig08_backends.png", backends.fig_backends),
    ("fig09_throughput.png", throughput.fig_throughput),
    ("fig10_training.png", training.fig_training),
    ("fig11_precision.png", precision.fig_precision),
    ("fig12_bill.png", bill.fig_bill),
)


def draw_all(data: ReportData, out_dir: Path = FIGURES_DIR,
             report: Callable[[str], object] = print) -> list[Path]:
    """Every figure, in reading order; a figure whose study has no rows is named, not drawn."""
    drawn = []
    for name, draw in FIGURES:
        path = draw(data, out_dir / name)
        if path is None:
            report(f"  {name}: no results for its study yet (make run-all)")
        else:
            drawn.append(path)
    return drawn
