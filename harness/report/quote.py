"""How a measured number is quoted anywhere in the report: its median, its 95% interval only where
the rounds support one, and the marks that tell a reader not to take it at face value. One place,
so a number reads the same in the headline, the findings and DETAILS.

    MARKS                          mark -> what it means (the report's notes print these)
    marks(cell) -> [str]           the marks a cell carries: thin, noisy, contended, stale
    value(cell) -> str             '47 ms [43.8–49.4 ms]', or '47 ms [no interval]' when thin
    quoted(cell) -> str            value, then its marks in italics: '395 µs [355–486 µs] *noisy*'
    mark_notes(cells) -> [str]     one line per mark that the cells carry, saying what it means
    ci_column(cell) -> str         a table's interval column: '43.8 ms – 49.4 ms', or 'no interval'
    times(r) -> str                a within-round ratio: '1700x [1530–1780]', '1700x' (no interval)
"""

import math
from collections.abc import Iterable

import pandas as pd

from harness.measure import stats
from harness.report.tables import fmt_ratio, ms

MARKS = {
    "thin": (f"too few rounds or calls for an interval (fewer than {stats.MIN_ROUNDS} rounds of "
             f"{stats.MIN_CALLS_PER_ROUND} calls): the median alone, no interval"),
    "noisy": (f"the 95% interval of the median spans more than {stats.NOISY_CI_OVER_MEDIAN:.0%} of it: "
              "the machine's speed moved between rounds"),
    "contended": ("another process used the machine (or the GPU) during a round of this cell: the "
                  "run's rows name it"),
    "stale": "measured on older code: the level's sources have changed since (DETAILS says what changed)",
}


def marks(cell: pd.Series) -> list[str]:
    return [m for m in MARKS if bool(cell.get(m, False))]


def interval(low_ms: float, high_ms: float) -> str:
    """'28.2–43.4 µs', the unit once where both ends share it."""
    low, high = ms(low_ms), ms(high_ms)
    lo_num, _, lo_unit = low.partition(" ")
    hi_num, _, hi_unit = high.partition(" ")
    return f"{lo_num}–{high}" if lo_unit == hi_unit else f"{low}–{high}"


def value(cell: pd.Series) -> str:
    low = cell["ci_low_ms"]
    if low is None or math.isnan(low):
        return f"{ms(cell['median_ms'])} [no interval]"
    return f"{ms(cell['median_ms'])} [{interval(low, cell['ci_high_ms'])}]"


def quoted(cell: pd.Series) -> str:
    found = marks(cell)
    return value(cell) + "".join(f" *{m}*" for m in found)


def mark_notes(cells: Iterable[pd.Series]) -> list[str]:
    """'*noisy*: ...' for each mark the cells carry, in MARKS' order."""
    seen = {m for cell in cells for m in marks(cell)}
    return [f"*{m}*: {meaning}." for m, meaning in MARKS.items() if m in seen]


def times(r: dict | None) -> str:
    """A within-round ratio as a multiple: '1700x [1530–1780]', '0.98x [0.95–1.02] (no measurable
    difference)', '1700x' where the rounds give no interval; '-' for none."""
    if not r:
        return "-"
    text = fmt_ratio(r)
    return text.replace(" [", "x [", 1) if " [" in text else text + "x"


def ci_column(cell: pd.Series) -> str:
    low = cell["ci_low_ms"]
    return "no interval" if low is None or math.isnan(low) else f"{ms(low)} – {ms(cell['ci_high_ms'])}"
