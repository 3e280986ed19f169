"""The report's Markdown tables and number formats: a time, a ratio with its interval, three significant
figures, a speed-up's verdict."""

import math
import re
from collections.abc import Iterable, Sequence

from harness.draw.style import fmt_ms


def ms(value: float | None) -> str:
    """Milliseconds for a table cell; '-' for a missing value (None or NaN)."""
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt_ms(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table (the report's, and its statistics sections'); a "|" inside a cell is escaped
    (one left bare would split the cell)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(re.sub(r"(?<!\\)\|", r"\\|", str(c)) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def sig3(x: float | None) -> str:
    """Three significant figures, never in exponent form: 1878.5 -> 1880, 18.85 -> 18.9, 0.49 -> 0.490."""
    if x is None or math.isnan(x):
        return "-"
    if x == 0:
        return "0"
    rounded = float(f"{x:.3g}")
    digits = 2 - int(math.floor(math.log10(abs(rounded))))
    if digits <= 0:
        return f"{int(rounded):d}"
    return f"{rounded:.{digits}f}"


def inverse(r: dict) -> dict:
    """time(a) / time(b) as time(b) / time(a): the ratio and its interval's ends inverted (the same
    rounds, so the same number read the other way; never a second bootstrap)."""
    low, high = r["ci95_low"], r["ci95_high"]
    return {**r, "ratio": 1 / r["ratio"], "ci95_low": 1 / high if high else math.nan,
            "ci95_high": 1 / low if low else math.nan}


def speedup_verdict(r: dict, goal: float) -> str:
    """met where the whole 95% interval of the speed-up is at or above the goal, missed where it is
    all below, else undecided (the rounds cannot tell); without an interval, the median decides."""
    low, high = r["ci95_low"], r["ci95_high"]
    if math.isnan(low) or math.isnan(high):
        return "met" if r["ratio"] >= goal else "missed"
    return "met" if low >= goal else "missed" if high < goal else "undecided"


def includes_one(r: dict | None) -> bool:
    """Whether a ratio's 95% interval includes 1: no measurable difference."""
    if not r:
        return False
    return not math.isnan(r["ci95_low"]) and r["ci95_low"] <= 1 <= r["ci95_high"]


def fmt_ratio(r: dict | None, unit: str = "") -> str:
    """A within-round ratio with its interval, three significant figures, then the unit ("x"); an
    interval that includes 1 says so after it."""
    if not r:
        return "-"
    if math.isnan(r["ci95_low"]):
        return sig3(r["ratio"]) + unit
    text = f"{sig3(r['ratio'])} [{sig3(r['ci95_low'])}–{sig3(r['ci95_high'])}]{unit}"
    return text + " (no measurable difference)" if includes_one(r) else text


def compact(headers: Sequence[str], rows: Iterable[Sequence[object]], keep: int = 1) -> str:
    """A table whose columns that hold one value in every row (the device, the batch, the dtype, the
    machine) are said once, in a line above it, rather than on every row; its first `keep` columns
    (what names a row) stay, and a table of one row is left whole. "-" or "–" in every row reads
    "none"."""
    body = [list(r) for r in rows]
    if len(body) < 2:
        return table(headers, body)
    same = [i for i in range(keep, len(headers)) if len({str(r[i]) for r in body}) == 1]
    shown = [i for i in range(len(headers)) if i not in same]
    if not same or not shown:
        return table(headers, body)
    said = ", ".join(f"{headers[i]} {'none' if str(body[0][i]) in ('-', '–') else body[0][i]}" for i in same)
    rest = table([headers[i] for i in shown], [[r[i] for i in shown] for r in body])
    return f"Every row: {said}.\n\n{rest}"
