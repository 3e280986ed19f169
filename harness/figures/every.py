"""Every figure in reading order (templates/figures.toml), and `draw_all`, which draws them."""

from collections.abc import Callable
from pathlib import Path

from harness.figures import (
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
from harness.figures.style import FIGURES_DIR
from harness.report.claims.rundata import ReportData
from harness.report.markup import words

# Every figure is a PNG (style.DPI), a pure function of the result files and loc.csv: one colour and
# marker per implementation in every figure (style.colour, style.marker), the answering machine of each
# device and no other (pick.answering_machines), dots on log scales, every axis labelled with units;
# how to read it is REPORT.md's caption (templates/figures.toml), the runs behind it DETAILS.md's.
# `python -m harness figures` draws them all.

# A figure: drawn from the report's data into `out` (a PNG), or None when its study has no rows.
Figure = Callable[[ReportData, Path], Path | None]

MODULES = {module.__name__.rsplit(".", 1)[1]: module for module in (
    backends, bill, code_lines, cost, explain, latency, overhead, precision, throughput, training)}
RECORDS = "figures"  # templates/figures.toml: one record a figure (file, draw, title, look)


def records() -> list[dict]:
    """Every figure's record, in reading order (fig01 ... fig12)."""
    return list(words.table_of(RECORDS)["figure"])


def drawer(record: dict) -> Figure:
    """The function a record names ("module.function" of this package)."""
    module, function = record["draw"].split(".")
    return getattr(MODULES[module], function)


# (file, figure) in reading order
FIGURES: tuple[tuple[str, Figure], ...] = tuple((record["file"], drawer(record)) for record in records())


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
