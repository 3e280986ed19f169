"""How a measured number is quoted anywhere in the report: its median, its 95% interval only where
the rounds support one, and the marks that tell a reader not to take it at face value. One place,
so a number reads the same in the headline, the findings and DETAILS.

    MARKS                          mark -> what it means (the report's notes print these)
    caveats(cell) -> [str]         the marks a cell carries: thin, noisy, process-dependent, contended,
                                   stale (headline=True, any number on the first screen, headline or
                                   findings: and few processes, where it has fewer than 3)
    value(cell) -> str             '47 ms [43.8–49.4 ms]', or '47 ms [no interval]' when thin
    quoted(cell, headline) -> str  value, then its marks in italics: '395 µs [355–486 µs] *noisy*'
    plain(cell), short(cell)       REPORT.md's: value (short: the median alone) and its marks as
                                   symbols (SYMBOLS): '395 µs [355–486 µs]²'; symbol_legend(cells)
    rate(cell) -> str              images/s with the interval its median's gives, and its marks (as
                                   the first screen quotes them): '40,900 [39,800–41,700]'
    mark_notes(cells) -> [str]     one line per mark that the cells carry, saying what it means
    ci_column(cell) -> str         a table's interval column: '43.8 ms – 49.4 ms', or 'no interval'
    times(r) -> str                a within-round ratio: '1700x [1530–1780]', '1700x' (no interval),
                                   'no measurable difference [0.95–1.02]' (its interval holds 1)
"""

import math
from collections.abc import Iterable

import pandas as pd

from harness.measure.store import stats
from harness.report.markup.tables import fmt_ratio, includes_one, ms, sig3

MARKS = {
    "thin": (f"too few rounds or calls for an interval (fewer than {stats.MIN_ROUNDS} rounds of "
             f"{stats.MIN_CALLS_PER_ROUND} calls): the median alone, no interval"),
    "noisy": (f"the 95% interval of the median spans more than {stats.NOISY_CI_OVER_MEDIAN:.0%} of it: "
              "the machine's speed moved between rounds"),
    "process-dependent": ("its fresh worker processes' medians differ by more than its rounds within a "
                          "process do: each new process draws its own speed (DETAILS gives each "
                          "process's median); the interval covers the processes measured"),
    "contended": ("another process used the machine (or the GPU) during a round of this cell: the "
                  "run's rows name it"),
    "stale": "measured on older code: the level's sources have changed since (DETAILS says what changed)",
    "few processes": (f"measured in fewer than {stats.MIN_PROCESSES} fresh worker processes: its interval "
                      "covers the rounds of the processes measured, not the draw of a new one"),
}


# each mark's symbol where a number stands in REPORT.md's tables and answers (its legend words it)
SYMBOLS = dict(zip(MARKS, ("¹", "²", "³", "⁴", "⁵", "⁶"), strict=True))


def few_processes(cell: pd.Series) -> bool:
    """Measured in fewer than stats.MIN_PROCESSES processes (rows before processes: one)."""
    return int(cell.get("processes", 0) or 1) < stats.MIN_PROCESSES


def caveats(cell: pd.Series, headline: bool = False) -> list[str]:
    """Its marks in MARKS' order; `few processes` only where headline (every number the first screen,
    headline and findings, prints comes from at least stats.MIN_PROCESSES processes, or says so)."""
    return [m for m in MARKS if (few_processes(cell) if m == "few processes" else bool(cell.get(m, False)))
            and (headline or m != "few processes")]


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


def quoted(cell: pd.Series, headline: bool = False) -> str:
    """value and its marks; headline: a number on the first screen (few processes marked too)."""
    found = caveats(cell, headline)
    return value(cell) + "".join(f" *{m}*" for m in found)


def symbols(cell: pd.Series) -> str:
    """Its marks as REPORT.md's symbols ('²⁵'), as the first screen quotes them (few processes too)."""
    return "".join(SYMBOLS[m] for m in caveats(cell, headline=True))


def plain(cell: pd.Series) -> str:
    """value and its marks as symbols: '395 µs [355–486 µs]²'."""
    return value(cell) + symbols(cell)


def short(cell: pd.Series) -> str:
    """The median alone and its marks as symbols, for a table whose intervals are in DETAILS: '395 µs²'."""
    return ms(cell["median_ms"]) + symbols(cell)


def symbol_legend(cells: Iterable[pd.Series]) -> list[tuple[str, str]]:
    """(symbol, mark) for each mark the cells carry as the first screen quotes them, in MARKS' order."""
    seen = {m for cell in cells for m in caveats(cell, headline=True)}
    return [(SYMBOLS[m], m) for m in MARKS if m in seen]


def rate(cell: pd.Series) -> str:
    """Images per second with the interval the median's gives (batch / time), three significant
    figures, and its marks as the first screen quotes them."""
    b, found = cell["batch_size"], "".join(f" *{m}*" for m in caveats(cell, headline=True))
    if math.isnan(cell["ci_low_ms"]):
        return f"{whole3(cell['images_per_s'])} [no interval]{found}"
    lo, hi = b / (cell["ci_high_ms"] / 1e3), b / (cell["ci_low_ms"] / 1e3)
    return f"{whole3(cell['images_per_s'])} [{whole3(lo)}–{whole3(hi)}]{found}"


def whole3(x: float) -> str:
    """A count at three significant figures, with thousands separators: 40871.2 -> '40,900'."""
    return f"{int(float(sig3(x))):,}"


def mark_notes(cells: Iterable[pd.Series], headline: bool = False) -> list[str]:
    """'*noisy*: ...' for each mark the cells carry, in MARKS' order."""
    seen = {m for cell in cells for m in caveats(cell, headline)}
    return [f"*{m}*: {meaning}." for m, meaning in MARKS.items() if m in seen]


def times(r: dict | None) -> str:
    """A within-round ratio as a multiple: '1700x [1530–1780]'; 'no measurable difference
    [0.95–1.02]' where its interval holds 1 (never '0.98x'); '1700x' where the rounds give no
    interval; '-' for none."""
    if not r:
        return "-"
    if includes_one(r):
        return f"no measurable difference [{sig3(r['ci95_low'])}–{sig3(r['ci95_high'])}]"
    text = fmt_ratio(r)
    return text.replace(" [", "x [", 1) if " [" in text else text + "x"


def ci_column(cell: pd.Series) -> str:
    low = cell["ci_low_ms"]
    return "no interval" if low is None or math.isnan(low) else f"{ms(low)} – {ms(cell['ci_high_ms'])}"
