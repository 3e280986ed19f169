"""`python -m harness reproduce STUDY`: the study run again in fresh processes on this machine, and
each cell of the second run held against the newest run of the study on this machine (the
reference): does the new median fall inside the reference's 95% interval, does the new within-round
ratio (to the study's baseline) fall inside the reference ratio's, and do the two runs' intervals
overlap? Where an earlier reproduce row of this machine measured its drift between runs
(harness.report.claims.drift), two more checks hold the new median and the new ratio against the
reference's intervals for a rerun (widened by that drift), the intervals the report's headline
prints. The shares at the end say how much of the study a second run reproduces, against GOAL.

The result is one row (kind `reproduce`) in RESULTS/reproduce/<run-id>/results.jsonl(.gz), with env.json
beside it; the second run's own rows lie below, in RESULTS/reproduce/<run-id>/<study>/<run-id>/, out
of the report's sight (it reads RESULTS/<study>/<run-id>/ only). DETAILS' validity section shows
the newest reproduce row of each machine (harness.report.claims.reproduce).

    reference(runs, study, host_key) -> run | None    the newest run of the study on the machine
                                                      (hosts.key: its fingerprint)
    compare(reference_rows, new_rows, baseline, drifts) -> dict    cells and shares (both runs read
                                                           by today's rules: cells.summary)
    goal_lines(result) -> [str]                      the shares against GOAL
    lines(result) -> [str]                           the table printed, shares last
"""

import math
from typing import Any

from harness.measure.plan import cells as measured_cells
from harness.measure.store import stats
from harness.report.claims import drift
from harness.report.claims.reproduce import CHECKS, share_text, time_text
from harness.report.markup.tables import sig3

GOAL = 0.8  # on a quiet machine: this share of a second run's medians inside the printed interval
# (the interval for a rerun where the drift is known) and of its ratios inside the ratio's (likewise)


def reference(runs: list[dict], study: str, host_key: str) -> dict | None:
    """The newest run (rundata.load_runs' dicts, in this checkout's order) of `study` on the machine
    of `host_key` (hosts.key) with a cell."""
    found = [r for r in runs if r["study"] == study and r.get("host_key") == host_key
             and any(row.get("kind") == "cell" for row in r["rows"])]
    return max(found, key=lambda r: (r["order"], r["run_id"])) if found else None


def final_cells(rows: list[dict]) -> dict[str, dict]:
    """cell_id -> its last cell row (a cell measured again by --resume: the last is final)."""
    return {row["cell_id"]: row for row in rows if row.get("kind") == "cell"}


def _measured(row: dict | None) -> bool:
    return row is not None and measured_cells.measured(row)


def _interval(low: float, high: float, thin: bool) -> list[float] | None:
    return None if thin or math.isnan(low) or math.isnan(high) else [low, high]


def _median(row: dict) -> dict[str, Any]:
    st = measured_cells.summary(row["rounds_ns"], row.get("round_process"))
    return {"median_ns": st["median_ns"], "processes": st["processes"],
            "ci95_ns": _interval(st["ci95_low_ns"], st["ci95_high_ns"], st["thin"])}


def _ratio(row: dict, base: dict | None) -> dict[str, Any] | None:
    if base is None or base is row:
        return None
    r = stats.round_ratio(row["rounds_ns"], base["rounds_ns"], processes_a=row.get("round_process"),
                          processes_b=base.get("round_process"))
    if r is None:
        return None
    return {"ratio": r["ratio"], "ci95": _interval(r["ci95_low"], r["ci95_high"], r["thin"])}


def _inside(value: float, interval: list[float] | None) -> bool | None:
    return None if interval is None else interval[0] <= value <= interval[1]


def _overlap(a: list[float] | None, b: list[float] | None) -> bool | None:
    return None if a is None or b is None else a[0] <= b[1] and b[0] <= a[1]


def _baselines(cells: dict[str, dict], baseline: str | None) -> dict[tuple, dict]:
    """(device, batch, dtype) -> the baseline's measured cell."""
    out: dict[tuple, dict] = {}
    for row in cells.values():
        cell = row.get("cell") or {}
        if baseline and cell.get("implementation") == baseline and _measured(row):
            out.setdefault((cell.get("device"), cell.get("batch_size"), cell.get("dtype")), row)
    return out


def _rerun(value: float, interval: list[float] | None, found: drift.Drift | None) -> bool | None:
    if interval is None or found is None:
        return None
    return _inside(value, list(drift.widen(interval[0], interval[1], found)))


def _ratio_rerun(first: dict | None, second: dict | None, found: drift.Drift | None) -> bool | None:
    if not first or not second or first["ci95"] is None or found is None:
        return None
    wide = drift.widen_ratio(first["ci95"][0], first["ci95"][1], found)
    return None if wide is None else _inside(second["ratio"], list(wide))


def compare(reference_rows: list[dict], new_rows: list[dict], baseline: str | None,
            drifts: dict[str, drift.Drift] | None = None) -> dict[str, Any]:
    """Each cell measured in both runs: medians and within-round ratios with their intervals, and the
    checks (None where the reference gives no interval, or no earlier drift of the device is known:
    drifts, {device: drift.Drift}); the cells measured in one run only; and the shares of each check,
    overall and per device."""
    drifts = drifts or {}
    ref, new = final_cells(reference_rows), final_cells(new_rows)
    ref_base, new_base = _baselines(ref, baseline), _baselines(new, baseline)
    cells, left_out = [], []
    for cell_id in ref:
        a, b = ref[cell_id], new.get(cell_id)
        if b is None or not (_measured(a) and _measured(b)):
            if _measured(a) or _measured(b):
                left_out.append(cell_id)
            continue
        spec = a["cell"]
        key = (spec.get("device"), spec.get("batch_size"), spec.get("dtype"))
        first, second = _median(a), _median(b)
        ratio_a, ratio_b = _ratio(a, ref_base.get(key)), _ratio(b, new_base.get(key))
        cells.append({
            "cell_id": cell_id, "device": spec.get("device"), "reference": first, "new": second,
            "ratio_reference": ratio_a, "ratio_new": ratio_b,
            "median_inside": _inside(second["median_ns"], first["ci95_ns"]),
            "median_inside_rerun": _rerun(second["median_ns"], first["ci95_ns"],
                                          drifts.get(spec.get("device"))),
            "medians_overlap": _overlap(first["ci95_ns"], second["ci95_ns"]),
            "ratio_inside": _inside(ratio_b["ratio"], ratio_a["ci95"]) if ratio_a and ratio_b else None,
            "ratio_inside_rerun": _ratio_rerun(ratio_a, ratio_b, drifts.get(spec.get("device"))),
            "ratios_overlap": _overlap(ratio_a["ci95"], ratio_b["ci95"]) if ratio_a and ratio_b else None})
    devices = sorted({c["device"] for c in cells})
    return {"cells": cells, "left_out": left_out, "shares": shares(cells),
            "shares_by_device": {d: shares([c for c in cells if c["device"] == d]) for d in devices}}



def shares(cells: list[dict]) -> dict[str, list[int]]:
    """check -> [how many held, of how many cells it could be decided for]."""
    return {key: [sum(c.get(key) is True for c in cells), sum(c.get(key) is not None for c in cells)]
            for key, _ in CHECKS}


def _with_interval(value: float, interval: list[float] | None, fmt: Any) -> str:
    return fmt(value) + (f" [{fmt(interval[0])}–{fmt(interval[1])}]" if interval else " [no interval]")


def _yes(flag: bool | None) -> str:
    return "–" if flag is None else "yes" if flag else "NO"


def lines(result: dict[str, Any]) -> list[str]:
    """The table printed by `reproduce`, its shares last."""
    out = [f"{'cell':<40} {'median: reference -> new':<52} in  overlap  "
           f"{'ratio: reference -> new':<40} in  overlap"]
    for c in result["cells"]:
        ref, new = c["reference"], c["new"]
        median = (f"{_with_interval(ref['median_ns'], ref['ci95_ns'], time_text)}"
                  f" -> {time_text(new['median_ns'])}")
        ratio = ""
        if c["ratio_reference"] and c["ratio_new"]:
            ratio = (f"{_with_interval(c['ratio_reference']['ratio'], c['ratio_reference']['ci95'], sig3)}"
                     f" -> {sig3(c['ratio_new']['ratio'])}")
        out.append(f"{c['cell_id']:<40} {median:<52} {_yes(c['median_inside']):<3} "
                   f"{_yes(c['medians_overlap']):<8} {ratio:<40} {_yes(c['ratio_inside']):<3} "
                   f"{_yes(c['ratios_overlap'])}")
    if result["left_out"]:
        out.append(f"measured in one run only (not compared): {', '.join(result['left_out'])}")
    out.append("")
    for key, what in CHECKS:
        out.append(f"{what}: {share_text(*result['shares'][key])}")
    if len(result["shares_by_device"]) > 1:
        for device, found in result["shares_by_device"].items():
            out.append(f"  {device}: " + "; ".join(f"{key.replace('_', ' ')} {share_text(*found[key])}"
                                                   for key, _ in CHECKS))
    return out + goal_lines(result)


def goal_lines(result: dict[str, Any]) -> list[str]:
    """The shares against GOAL: medians and ratios each inside the printed interval (the interval for
    a rerun where an earlier drift is known, else the one-run interval)."""
    shares = result["shares"]
    out = []
    for thing, key in (("medians", "median_inside"), ("ratios", "ratio_inside")):
        rerun = bool(shares.get(f"{key}_rerun", [0, 0])[1])
        which = ("the interval for a rerun" if rerun
                 else f"the one-run interval (no earlier move of this machine's {thing} known)")
        key, what = (f"{key}_rerun" if rerun else key), f"{thing} inside {which}"
        held, of = shares.get(key, [0, 0])
        verdict = "no cell to judge" if not of else "met" if held / of >= GOAL else "missed"
        out.append(f"goal: at least {GOAL:.0%} of {what}: {share_text(held, of)}, {verdict}")
    return out
