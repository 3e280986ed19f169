"""The report's tables and number formats, and its statistics sections: which cells are noisy, and how
the same cell compares across the committed runs of one machine (repeatability)."""

import itertools
import math
import re
from collections.abc import Iterable, Sequence

import pandas as pd

from harness.measure.store import stats
from harness.report.markup.style import fmt_ms


def ms(value: float | None) -> str:
    """Milliseconds for a table cell; '-' for a missing value (None or NaN)."""
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt_ms(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table (the report's, and its statistics sections'); a "|" inside a cell is escaped
    (one left bare would split the cell)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(re.sub(r"(?<!\\)\|", r"\\|", str(c)) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def noisy_section(frame: pd.DataFrame) -> list[str]:
    out = [f"Flag: the 95% interval of the median spans more than "
           f"{stats.NOISY_CI_OVER_MEDIAN:.0%} of it (the machine's speed changed between rounds). "
           "Read such a median with care; within-round ratios are less affected.", ""]
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    noisy = ok[ok["noisy"]] if not ok.empty else ok
    if not ok.empty:
        out += [f"{len(noisy)} of {len(ok)} measured cells are flagged.", ""]
    out.append(table(["study", "cell", "median", "95% CI of median", "CI / median", "rounds",
                      "per-call IQR / median", "machine"],
                     [[r["study"], r["cell_id"], ms(r["median_ms"]),
                       f"{ms(r['ci_low_ms'])} – {ms(r['ci_high_ms'])}", f"{r['ci_over_median']:.0%}",
                       r["rounds"], f"{r['spread']:.2f}", r["machine"]]
                      for _, r in noisy.iterrows()]) if not noisy.empty else "_None._")
    return out


def overlaps(a: pd.Series, b: pd.Series) -> bool:
    return a["ci_low_ms"] <= b["ci_high_ms"] and b["ci_low_ms"] <= a["ci_high_ms"]


def repeatability_section(frame: pd.DataFrame) -> list[str]:
    """The same cell (implementation, variant, device, batch, dtype) measured by several runs
    (of one study or of several) on one machine: do their intervals overlap?"""
    ok = frame[(frame["status"] == "ok") & (frame["rounds"] >= 2)] if not frame.empty else frame
    rows, pairs, overlapping = [], 0, 0
    if not ok.empty:
        for (machine, cell), group in ok.groupby(["machine", "cell_id"]):
            if len(group) < 2:
                continue
            for (_, a), (_, b) in itertools.combinations(group.iterrows(), 2):
                pairs += 1
                overlapping += overlaps(a, b)
            rows.append([cell, "; ".join(f"{r['study']}/{r['run_id'][:15]}: {ms(r['median_ms'])} "
                                         f"[{ms(r['ci_low_ms'])} – {ms(r['ci_high_ms'])}]"
                                         for _, r in group.iterrows()),
                         "yes" if all(overlaps(a, b) for (_, a), (_, b)
                                      in itertools.combinations(group.iterrows(), 2)) else "no",
                         machine])
    if not pairs:
        return ["_No cell was measured by more than one run on one machine._"]
    out = [f"The same cell measured by different committed runs (minutes or hours apart) on one machine: "
           f"{overlapping} of {pairs} pairs of 95% intervals overlap."]
    if overlapping < pairs:
        out.append("Where they do not, the machine ran at a different speed during the other "
                   "study: an interval describes the rounds of its own run, and a shift in machine "
                   "speed between runs (minutes or hours apart) is outside it. Compare levels within one "
                   "run (the `x numpy` ratios), not across runs.")
    return out + ["", table(["cell", "study/run: median [95% CI]", "all overlap", "machine"], rows)]


def crosscheck_lines(records: Iterable[dict]) -> list[str]:
    """The harness's timer against timeit, from crosscheck-*.json."""
    out = []
    for rec in records:
        low, high = rec["ratio_ci95"]
        host = rec.get("env", {}).get("hostname", "?")
        out.append(f"**Timer cross-check** ({rec['file']}, host {host}): timing "
                   f"`{rec['implementation']}` predict on one image in {rec['rounds']} alternating "
                   f"rounds of {rec['calls_per_round']} calls, the harness's mean per call is "
                   f"{rec['ratio_median']:.3f}x timeit's (95% CI {low:.3f}–{high:.3f}); "
                   "`python -m harness crosscheck` repeats it.")
    return out


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
