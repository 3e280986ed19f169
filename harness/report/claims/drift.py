"""How far a machine's absolute medians move between two runs, as `reproduce` measured it. An
interval of a median resamples the rounds and processes of one run; it does not cover the machine
drifting between runs (on the AMD host of 2026-11-27 a second run, 11 minutes later, was 2-4%
faster nearly everywhere: 6 of 22 medians fell inside the first run's intervals, while 18 of 21
within-round ratios did). So the report prints the measured drift beside the medians, and where it is
known the headline's absolute intervals are widened by it: an interval for a rerun. Ratios, taken
within rounds, cancel the drift and stay the numbers to compare.

    QUANTILE                                the share of cells the spread covers
    measured(row, device) -> Drift | None   one reproduce row's drift of the device's medians
    of_machines(runs) -> {(machine, device): Drift}   the newest reproduce row of each machine
    widen(low, high, drift) -> (low, high)  an interval for a rerun
    sentence(machine, drift) -> str         the drift in words, for the report
"""

import math
from dataclasses import dataclass

import numpy as np

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


def measured(row: dict, device: str) -> Drift | None:
    """The drift of one reproduce row's cells on `device`; None where no cell has both medians.
    A median that is not a positive finite number is an error, never skipped."""
    moves = []
    for cell in row.get("cells", []):
        if cell.get("device") != device:
            continue
        first, second = cell["reference"]["median_ns"], cell["new"]["median_ns"]
        for value in (first, second):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"reproduce run {row.get('run')}: cell {cell.get('cell_id')}: median "
                                 f"{value!r}, expected a positive number of ns")
        moves.append(second / first)
    if not moves:
        return None
    logs = np.abs(np.log(moves))
    inside = (row.get("shares_by_device") or {}).get(device, {}).get("median_inside") or [0, 0]
    return Drift(run=str(row.get("run")), reference_run=str(row.get("reference_run")), cells=len(moves),
                 shift=float(np.median(moves)) - 1, spread=float(np.quantile(logs, QUANTILE)),
                 median_inside=(int(inside[0]), int(inside[1])))


def of_machines(runs: list[dict]) -> dict[tuple[str, str], Drift]:
    """(machine, device) -> the drift its newest reproduce row measured (runs: load_runs' dicts)."""
    newest: dict[str, tuple[dict, dict]] = {}
    for run in sorted(runs, key=lambda r: (r["started"], r["run_id"])):
        if run["study"] != FOLDER:
            continue
        for row in run["rows"]:
            if row.get("kind") == "reproduce":
                newest[run["machine"]] = (run, row)
    out = {}
    for machine, (_run, row) in newest.items():
        for device in sorted({c.get("device") for c in row.get("cells", [])}):
            found = measured(row, device)
            if found is not None:
                out[(machine, device)] = found
    return out


def widen(low: float, high: float, drift: Drift) -> tuple[float, float]:
    """[low, high] widened by the drift's spread on both sides (in log terms): an interval for a rerun."""
    return low * math.exp(-drift.spread), high * math.exp(drift.spread)


def percent(x: float) -> str:
    return f"{100 * x:+.1f}%"


def sentence(machine: str | None, device: str, drift: Drift) -> str:
    """'On vm: ..., a second run of `api_levels` (reproduce run X against Y) moved the CPU's medians
    by -3.3% (the median of 22 cells), 90% of them by at most 9.5%; 6 of 22 fell inside the first
    run's intervals.' (machine None: without its 'On ...')"""
    held, of = drift.median_inside
    where = f"on {machine}, " if machine else ""
    return (f"{where}a second run (`reproduce` run `{drift.run}` against `{drift.reference_run}`) "
            f"moved the {device.upper()}'s medians by {percent(drift.shift)} (the median of {drift.cells} "
            f"cells), {QUANTILE:.0%} of them by at most {100 * math.expm1(drift.spread):.1f}%"
            + (f"; {held} of {of} fell inside the first run's intervals" if of else ""))
