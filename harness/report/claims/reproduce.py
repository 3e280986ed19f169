"""DETAILS' section on `python -m harness reproduce` (harness.reproduce): the newest reproduce row of
each machine, its shares of cells reproduced, how far the second run moved the medians and the
within-round ratios (measured: what a reader may expect of a rerun; the report's intervals pool the
runs themselves, harness.report.claims.rundata.pool) and the cells whose second run fell outside.

    QUANTILE                                the share of cells a move's spread covers
    drift(row, device) -> Drift | None      one reproduce row's move of the device's medians and ratios
    sentence(machine, device, drift) -> str the move in words
    section(runs) -> [str]                  DETAILS' lines
"""

import math
from dataclasses import dataclass

import numpy as np

from harness.report.markup import words
from harness.report.markup.tables import sig3, table

FOLDER = "reproduce"  # RESULTS/reproduce/<run-id>/: the reproduce rows
TEMPLATE = "reproduce.md.j2"  # DETAILS' section's words
CHECKS = (("median_inside", "new medians inside the reference's 95% interval"),
          ("ratio_inside", "new within-round ratios inside the reference's interval"),
          ("medians_overlap", "median intervals that overlap"),
          ("ratios_overlap", "ratio intervals that overlap"),
          ("median_inside_pooled", "new medians inside the interval the report printed (every earlier run "
                                   "of the same code pooled)"),
          ("ratio_inside_pooled", "new ratios inside the ratio's interval the report printed (every earlier "
                                  "run of the same code pooled)"))
# the checks of rows made before the report pooled runs, when its intervals were widened by a drift
OLD_CHECKS = (("median_inside_rerun", "new medians inside the reference's interval for a rerun "
                                      "(widened by the drift an earlier reproduce measured)"),
              ("ratio_inside_rerun", "new ratios inside the reference ratio's interval for a rerun "
                                     "(widened by the ratios' drift an earlier reproduce measured)"))
QUANTILE = 0.9  # a move's spread covers this share of the cells' moves
DRIFT_TEMPLATE = "drift.md.j2"


@dataclass(frozen=True)
class Drift:
    run: str  # the reproduce run that measured it
    reference_run: str  # the run it was held against
    cells: int  # cells measured in both runs
    shift: float  # the median over cells of (new median / first median - 1): a move of the machine
    spread: float  # QUANTILE of |log(new / first)| over cells: how far a rerun's median moves
    median_inside: tuple[int, int]  # (held, of): new medians inside the first run's interval
    ratios: int = 0  # cells with a within-round ratio in both runs
    ratio_spread: float | None = None  # QUANTILE of |log(new ratio / first ratio)|; None: no ratio
    ratio_inside: tuple[int, int] = (0, 0)  # (held, of): new ratios inside the first run's interval

    @property
    def moved(self) -> float:
        """The share QUANTILE of the cells' medians moved by at most (spread, as a fraction)."""
        return math.expm1(self.spread)

    @property
    def ratios_moved(self) -> float | None:
        """The share QUANTILE of the within-round ratios moved by at most; None: no ratio measured."""
        return None if self.ratio_spread is None else math.expm1(self.ratio_spread)



def _positive(value: object, row: dict, cell: dict, what: str, unit: str) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"reproduce run {row.get('run')}: cell {cell.get('cell_id')}: {what} "
                         f"{value!r}, expected a positive number{unit}")
    return float(value)


def drift(row: dict, device: str) -> Drift | None:
    """The drift of one reproduce row's cells on `device`: of their medians and of their
    within-round ratios; None where no cell has both medians. A median or ratio that is not a
    positive finite number is an error, never skipped."""
    moves, ratio_moves = [], []
    for cell in row.get("cells", []):
        if cell.get("device") != device:
            continue
        first = _positive(cell["reference"]["median_ns"], row, cell, "median", " of ns")
        moves.append(_positive(cell["new"]["median_ns"], row, cell, "median", " of ns") / first)
        if cell.get("ratio_reference") and cell.get("ratio_new"):
            before = _positive(cell["ratio_reference"]["ratio"], row, cell, "ratio", "")
            ratio_moves.append(_positive(cell["ratio_new"]["ratio"], row, cell, "ratio", "") / before)
    if not moves:
        return None
    shares = (row.get("shares_by_device") or {}).get(device, {})
    inside = shares.get("median_inside") or [0, 0]
    ratio_inside = shares.get("ratio_inside") or [0, 0]
    return Drift(run=str(row.get("run")), reference_run=str(row.get("reference_run")), cells=len(moves),
                 shift=float(np.median(moves)) - 1, spread=spread_of(moves),
                 median_inside=(int(inside[0]), int(inside[1])), ratios=len(ratio_moves),
                 ratio_spread=spread_of(ratio_moves) if ratio_moves else None,
                 ratio_inside=(int(ratio_inside[0]), int(ratio_inside[1])))


def spread_of(moves: list[float]) -> float:
    """QUANTILE of |log(move)|: how far a rerun moves that share of the cells, in log terms."""
    return float(np.quantile(np.abs(np.log(moves)), QUANTILE))


def sentence(machine: str | None, device: str, found: Drift) -> str:
    """'a second run (`reproduce` run X against Y) moved the CPU's medians by -3.3% (the median of 22
    cells), 90% of them by at most 9.5%; ...' (machine: 'on vm: ...' first), worded by drift.md.j2."""
    return words.say(DRIFT_TEMPLATE, "drift", machine=machine, device=device, d=found, quantile=QUANTILE)


def share_text(held: int, of: int) -> str:
    return f"{held} of {of} ({held / of:.0%})" if of else "none to compare"


def time_text(value: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if value >= scale:
            return f"{sig3(value / scale)} {unit}"
    return f"{sig3(value)} ns"


def outside_claims(c: dict) -> dict:
    """A cell whose second run fell outside the first's interval: its medians, and its ratios where
    the ratio fell outside."""
    ratio = (c["ratio_reference"]["ratio"], c["ratio_new"]["ratio"]) if c["ratio_inside"] is False else None
    return {"cell_id": c["cell_id"], "before": time_text(c["reference"]["median_ns"]),
            "after": time_text(c["new"]["median_ns"]), "ratio": ratio}


def section(runs: list[dict]) -> list[str]:
    """DETAILS' lines: the newest reproduce row of each machine (runs: the newest run of each study
    folder on each machine, so the newest reproduce run of each machine), its shares and the cells
    whose second run fell outside."""
    found = [(run, row) for run in runs if run["study"] == FOLDER
             for row in run["rows"] if row.get("kind") == "reproduce"]
    head = ["", words.say(TEMPLATE, "title"), "", words.say(TEMPLATE, "method"), ""]
    if not found:
        return head + [words.say(TEMPLATE, "no_run")]
    out = list(head)
    for run, row in sorted(found, key=lambda item: item[0]["machine"]):
        share_rows = [[what, share_text(*row["shares"][key])] for key, what in CHECKS + OLD_CHECKS
                      if key in row["shares"]]  # a row from before a check was added lacks it
        moves = [sentence(None, device, moved) for device in ("cpu", "gpu")
                 if (moved := drift(row, device)) is not None]
        out += [words.say(TEMPLATE, "run", machine=run["machine"], row=row, moves=moves), "",
                table(["check", "cells"], share_rows), ""]
        outside = [c for c in row["cells"] if c["median_inside"] is False or c["ratio_inside"] is False]
        if outside:
            out += [words.say(TEMPLATE, "outside", cells=[outside_claims(c) for c in outside]), ""]
    return out

