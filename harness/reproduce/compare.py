"""`python -m harness reproduce STUDY`: the study run again in fresh processes on this machine, and
each cell of the second run held against the newest run of the study on this machine (the
reference): does the new median fall inside the reference's 95% interval, does the new within-round
ratio (to the study's baseline) fall inside the reference ratio's, and do the two runs' intervals
overlap? Two more checks hold the new median and the new ratio against the intervals the report
prints (printed_intervals: every earlier run of the same code on this machine pooled,
harness.report.claims.rundata.pool). The shares at the end say how much of the study a second run
reproduces, against GOAL.

The result is one row (kind `reproduce`) in RESULTS/reproduce/<run-id>/results.jsonl(.gz), with env.json
beside it; the second run's own rows lie below, in RESULTS/reproduce/<run-id>/<study>/<run-id>/: a
complete run of its study that the report pools with the runs of the same code (rundata.load_runs'
reruns), never the study's newest run. DETAILS' validity section shows the newest reproduce row of
each machine (harness.report.claims.reproduce).

    reference(runs, study, host_key) -> run | None    the newest run of the study on the machine
                                                      (hosts.key: its fingerprint)
    printed_intervals(frame, study, run_id, baseline) -> {cell_id: {median, ratio, runs}}
                                                     the report's pooled intervals of the reference's cells
    compare(reference_rows, new_rows, baseline, printed) -> dict    cells and shares (both runs read
                                                           by today's rules: cells.row_summary)
    goal_lines(result) -> [str]                      the shares against GOAL
    lines(result) -> [str]                           the table printed, shares last
"""

import math
from typing import Any

import pandas as pd

from harness.measure.plan import cells as measured_cells
from harness.measure.store import rows, stats
from harness.report.claims import rundata
from harness.report.claims.reproduce import CHECKS, share_text, time_text
from harness.report.markup.tables import sig3

GOAL = 0.8  # on a quiet machine: this share of a second run's medians inside the printed interval
# (pooled over the earlier runs of the same code) and of its ratios inside the ratio's (likewise)


def reference(runs: list[dict], study: str, host_key: str) -> dict | None:
    """The newest run (rundata.load_runs' dicts, in this checkout's order) of `study` on the machine
    of `host_key` (hosts.key) with a cell."""
    found = [r for r in runs if r["study"] == study and r.get("host_key") == host_key
             and any(row.get("kind") == "cell" for row in r["rows"])]
    return max(found, key=lambda r: (r["order"], r["run_id"])) if found else None


def final_cells(run_rows: list[dict]) -> dict[str, dict]:
    """cell_id -> its last cell row (a cell measured again by --resume: the last is final)."""
    return {row["cell_id"]: row for row in run_rows if row.get("kind") == "cell"}


def _measured(row: dict | None) -> bool:
    return row is not None and rows.measured(row)


def _interval(low: float, high: float, thin: bool) -> list[float] | None:
    return None if thin or math.isnan(low) or math.isnan(high) else [low, high]


def _median(row: dict) -> dict[str, Any]:
    st = measured_cells.row_summary(row) or {}
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


def printed_intervals(frame: pd.DataFrame, study: str, run_id: str, baseline: str | None) -> dict[str, dict]:
    """cell_id -> the intervals the report prints for the cells of run `run_id` of `study` (frame:
    rundata.load's, each cell pooled over the runs of the same code): {median: [low, high] ns or
    None, ratio: the within-round ratio's to the baseline [low, high] or None, runs: how many runs}."""
    if frame.empty:
        return {}
    cells = frame[(frame["study"] == study) & (frame["run_id"] == run_id) & (frame["status"] == "ok")]
    out = {}
    for _, cell in cells.iterrows():
        base = cells[(cells["implementation"] == baseline) & (cells["device"] == cell["device"])
                     & (cells["batch_size"] == cell["batch_size"]) & (cells["dtype"] == cell["dtype"])]
        r = (rundata.ratio_ci(cell, base.iloc[0]) if baseline and not base.empty
             and base.iloc[0]["cell_id"] != cell["cell_id"] else None)
        out[cell["cell_id"]] = {
            "median": _interval(cell["ci_low_ms"] * 1e6, cell["ci_high_ms"] * 1e6, bool(cell["thin"])),
            "ratio": _interval(r["ci95_low"], r["ci95_high"], r["thin"]) if r else None,
            "runs": int(cell["runs"])}
    return out


def compare(reference_rows: list[dict], new_rows: list[dict], baseline: str | None,
            printed: dict[str, dict] | None = None) -> dict[str, Any]:
    """Each cell measured in both runs: medians and within-round ratios with their intervals, and the
    checks (None where the reference gives no interval, or the report printed none: printed,
    printed_intervals'); the cells measured in one run only; and the shares of each check, overall
    and per device."""
    printed = printed or {}
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
        shown = printed.get(cell_id) or {}
        cells.append({
            "cell_id": cell_id, "device": spec.get("device"), "reference": first, "new": second,
            "ratio_reference": ratio_a, "ratio_new": ratio_b,
            "median_inside": _inside(second["median_ns"], first["ci95_ns"]),
            "median_inside_pooled": _inside(second["median_ns"], shown.get("median")),
            "pooled_runs": shown.get("runs"),
            "medians_overlap": _overlap(first["ci95_ns"], second["ci95_ns"]),
            "ratio_inside": _inside(ratio_b["ratio"], ratio_a["ci95"]) if ratio_a and ratio_b else None,
            "ratio_inside_pooled": _inside(ratio_b["ratio"], shown.get("ratio")) if ratio_b else None,
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
    """The shares against GOAL: medians and ratios each inside the interval the report printed (every
    earlier run of the same code pooled), else the reference run's own."""
    shares = result["shares"]
    out = []
    for thing, key in (("medians", "median_inside"), ("ratios", "ratio_inside")):
        pooled = bool(shares.get(f"{key}_pooled", [0, 0])[1])
        which = ("the interval the report printed" if pooled
                 else f"the reference run's interval (the report printed none for these {thing})")
        key, what = (f"{key}_pooled" if pooled else key), f"{thing} inside {which}"
        held, of = shares.get(key, [0, 0])
        verdict = "no cell to judge" if not of else "met" if held / of >= GOAL else "missed"
        out.append(f"goal: at least {GOAL:.0%} of {what}: {share_text(held, of)}, {verdict}")
    return out
