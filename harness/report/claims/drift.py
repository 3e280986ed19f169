"""How far a machine's absolute medians move between two runs, as `reproduce` measured it. An
interval of a median resamples the rounds and processes of one run; it does not cover the machine
drifting between runs (on the AMD host of 2026-11-27 a second run, 11 minutes later, was 2-4%
faster nearly everywhere: 6 of 22 medians fell inside the first run's intervals, while 18 of 21
within-round ratios did). So the report prints the measured drift beside the medians, and where it is
known the headline's absolute intervals are widened by it: an interval for a rerun. Ratios, taken
within rounds, cancel a drift that moves every cell alike and stay the numbers to compare; but a
fresh process draws its own speed, so a rerun's ratios move too, less (on the Intel host of
2026-11-27, 90% of them by at most a few percent): the same reproduce row measures that move, and
the headline's ratio intervals are widened by it the same way.

    QUANTILE                                the share of cells the spread covers
    measured(row, device) -> Drift | None   one reproduce row's drift of the device's medians and ratios
    of_machines(runs) -> {(machine, device): Drift}   the newest reproduce row of each machine
    widen(low, high, drift) -> (low, high)  a median's interval for a rerun
    widen_ratio(low, high, drift) -> (low, high)  a within-round ratio's interval for a rerun
    sentence(machine, drift) -> str         the drift in words, for the report
    rerun_value(cell, drift) -> str         '47 ms [rerun 41.2–52.3 ms]': a median's interval for a rerun
    rerun_times(r, drift) -> str            '1700x [rerun 1490–1830]': a ratio's interval for a rerun
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.report.claims.rundata import study_rows
from harness.report.markup import quote, words
from harness.report.markup.tables import ms

QUANTILE = 0.9  # the spread covers this share of the cells' moves
FOLDER = "reproduce"  # RESULTS/reproduce/<run-id>/ (harness.report.claims.reproduce.FOLDER)


@dataclass(frozen=True)
class Drift:
    run: str  # the reproduce run that measured it
    reference_run: str  # the run it was held against
    cells: int  # cells measured in both runs
    shift: float  # the median over cells of (new median / first median - 1): a drift of the machine
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


def measured(row: dict, device: str) -> Drift | None:
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


def of_machines(runs: list[dict]) -> dict[tuple[str, str], Drift]:
    """(machine, device) -> the drift its newest reproduce row measured (runs: load_runs' dicts)."""
    by_time = sorted(runs, key=lambda r: (r["started"], r["run_id"]))
    newest = {row["machine"]: row for row in study_rows(by_time, FOLDER, only_ok=False)}
    out = {}
    for machine, row in newest.items():
        for device in sorted({c.get("device") for c in row.get("cells", [])}):
            found = measured(row, device)
            if found is not None:
                out[(machine, device)] = found
    return out


def widen(low: float, high: float, drift: Drift) -> tuple[float, float]:
    """[low, high] widened by the drift's spread on both sides (in log terms): an interval for a rerun."""
    return low * math.exp(-drift.spread), high * math.exp(drift.spread)


def widen_ratio(low: float, high: float, drift: Drift) -> tuple[float, float] | None:
    """A within-round ratio's [low, high] widened by how far the rerun moved the ratios (in log
    terms, both sides): a ratio's interval for a rerun; None where the reproduce row had no ratio."""
    if drift.ratio_spread is None:
        return None
    return low * math.exp(-drift.ratio_spread), high * math.exp(drift.ratio_spread)


def sentence(machine: str | None, device: str, drift: Drift) -> str:
    """'on vm: ..., a second run of `api_levels` (reproduce run X against Y) moved the CPU's medians
    by -3.3% (the median of 22 cells), 90% of them by at most 9.5%; 6 of 22 fell inside the first
    run's intervals' (machine None: without its 'on ...'), worded by templates/drift.md.j2."""
    return words.say("drift.md.j2", "drift", machine=machine, device=device, d=drift, quantile=QUANTILE)


def rerun_value(cell: pd.Series, found: Drift) -> str:
    """The median with its interval for a rerun: the one-run interval widened by the drift that
    `reproduce` measured on the cell's machine; the median alone where the cell has no interval."""
    low = cell["ci_low_ms"]
    if low is None or math.isnan(low):
        return quote.value(cell)
    wide = widen(low, cell["ci_high_ms"], found)
    return f"{ms(cell['median_ms'])} [rerun {quote.interval(*wide)}]"


def rerun_times(r: dict | None, found: Drift) -> str:
    """A within-round ratio with its interval for a rerun: the one-run interval widened by how far
    `reproduce` measured the machine's ratios to move (drift.widen_ratio); quote.times(r) where there is
    no interval to widen or no ratio's move was measured."""
    if not r or math.isnan(r["ci95_low"]):
        return quote.times(r)
    wide = widen_ratio(r["ci95_low"], r["ci95_high"], found)
    if wide is None:
        return quote.times(r)
    # times' wording (and tables.includes_one's "no measurable difference") on the widened interval
    return quote.times({**r, "ci95_low": wide[0], "ci95_high": wide[1]}).replace("x [", "x [rerun ", 1)
