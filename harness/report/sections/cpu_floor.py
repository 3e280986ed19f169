"""The CPU's floor in the report: this core's measured multiply-add peak, the model's arithmetic at
that peak, the hand-written C call split by layer against it (the `arithmetic` rows, written by
`python -m harness arithmetic`: harness.explain.c_layers), and the C rung's targets, met or missed
and by how much; worded by templates/cpu.md.j2. Every number is read from a row; the targets are the
project's goals.

    arithmetic_run(runs, machine) -> run | None   the newest arithmetic run of that machine
    floor_ns(row) -> float                        the model's multiply-adds at the measured peak (the
                                                  row's, as c_layers.split computed it)
    gaps(row) -> [(stage, ns)]                    each stage's time above its arithmetic, largest first
    host_goal_line(row, cpu, cell) -> str         the <= 6 µs goal, where it was set (the Intel host)
    floor_targets(row) -> [claims]                the C call against the arithmetic at the peak and
                                                  against the sum of its stages' floors
    call_lines(row, cell, null) -> [line]         the Python call's cost (ctypes, the extension) and
                                                  the C level above the C call beyond the null level
    peak(row) -> claims | None                    the arithmetic line's CPU part (REPORT.md's method)
    numba_lines(frame, machine, c_cell) -> [line] the compiled-from-Python rung beside the C
    section(data) -> [line]                       DETAILS.md's "The CPU's floor"
    row_of(run) -> row | None                     an arithmetic run's row
"""

import pandas as pd

from harness import registry
from harness.explain import c_layers
from harness.report.claims.rundata import ReportData, find, ratio_ci
from harness.report.markup import words
from harness.report.sections import cpu_targets

TEMPLATE = cpu_targets.TEMPLATE
# The C rung's floor targets, the project's goals, not results: the C call's share of the arithmetic
# at the measured peak, and of the sum of its stages' floors (each the longer of its arithmetic and
# its reads); the C level's time above the C call beyond the harness's own call (the null level):
# the Python call's cost.
C_ARITHMETIC_SHARE = 0.75
C_STAGES_SHARE = 0.85
C_ABOVE_NS = 300.0
NULL = next(f"{name}/{registry.spec(name).variants[0]}" for name in registry.REGISTRY
            if not registry.computes(name))  # the harness's own call, returning zeros


def arithmetic_run(runs: list[dict], machine: str | None) -> dict | None:
    """The newest arithmetic run of that machine (runs: the newest run of each study and machine)."""
    found = [r for r in runs if r["study"] == c_layers.STUDY and r["machine"] == machine]
    return max(found, key=lambda r: r["order"]) if found else None


def row_of(run: dict | None) -> dict | None:
    rows = [row for row in (run or {}).get("rows", []) if row.get("kind") == c_layers.STUDY]
    return rows[-1] if rows else None


def floor_ns(row: dict) -> float:
    return row["floor_ns"]


def gaps(row: dict) -> list[tuple[str, float]]:
    """(stage, its median time above its multiply-adds at the peak), largest first: where the time
    above the floor goes. A stage at or under the probe's peak has no gap (0)."""
    found = [(s["name"], max(s["median_ns"] - s["floor_ns"], 0.0)) for s in row["stages"]]
    return sorted(found, key=lambda g: -g[1])


def host_goal_line(row: dict | None, cpu: str, cell: pd.Series | None) -> str:
    """The <= 6 µs goal: judged where it was set (cpu names C_GOAL_HOST), otherwise said not to
    apply, with this core's own floor beside it (a goal under the floor cannot be met here)."""
    call, goal_ms, host = cpu_targets.C_LEVEL, cpu_targets.C_GOAL_MS, cpu_targets.C_GOAL_HOST
    if host in cpu:
        if cell is None:
            return words.say(TEMPLATE, "host_not_measured", call=call, goal_ms=goal_ms, host=host, cpu=cpu)
        return words.say(TEMPLATE, "goal", g=cpu_targets.goal(call, goal_ms, cell["median_ms"]),
                         where=f", on the {host} host ({cpu})")
    floor = floor_ns(row) if row is not None else None
    return words.say(TEMPLATE, "host_goal", call=call, goal_ms=goal_ms, host=host, cpu=cpu, floor_ns=floor,
                     above=floor is not None and floor > goal_ms * 1e6)


def share_target(of: str, share: float, goal: float, call_ns: float, floor: float) -> dict:
    """The C call's share of a floor against its goal; missed, the time it would take at the goal
    and how far short it is (short_ns). The shares are medians of one run (no interval)."""
    return {"of": of, "share": share, "goal": goal, "call_ns": call_ns, "at_goal_ns": floor / goal,
            "short_ns": None if share >= goal else call_ns - floor / goal}


def floor_targets(row: dict) -> list[dict]:
    """The C call against the arithmetic at the measured peak and, where the row has the read probe,
    against the sum of its stages' floors."""
    out = [share_target("arithmetic", row["share"], C_ARITHMETIC_SHARE, row["call_median_ns"], floor_ns(row))]
    if "stages_floor_ns" in row:
        out.append(share_target("stages", row["stages_share"], C_STAGES_SHARE, row["call_median_ns"],
                                row["stages_floor_ns"]))
    return out


def above_call(row: dict, cell: pd.Series | None, null: pd.Series | None) -> dict | None:
    """The C level's predict less the C call (timed inside C, or in older rows its ctypes call taken out)
    less the null level's predict: within the row's rounds where it timed both (`rounds`: one process,
    one moment), else the two runs' cells; over_ns where it misses C_ABOVE_NS; None without timings."""
    paths, in_c, rounds = row.get("call_paths") or {}, row.get("call_in_c", False), "predict_median_ns" in row
    if rounds:
        level, harness = row["predict_median_ns"], row["null_predict_median_ns"]
    elif "ctypes" in paths and cell is not None and null is not None:
        level, harness = cell["median_ms"] * 1e6, null["median_ms"] * 1e6
    else:
        return None
    c_call = row["call_median_ns"] - (0 if in_c else paths["ctypes"])  # the pass alone
    above = level - c_call - harness
    return {"c_call_ns": c_call, "in_c": in_c, "above_ns": above, "rounds": rounds, "level_ns": level,
            "null_ns": harness, "over_ns": above - C_ABOVE_NS if above > C_ABOVE_NS else None}


def call_lines(row: dict, cell: pd.Series | None, null: pd.Series | None) -> list[str]:
    """What the Python call costs each way (an empty C function with the pass's arguments, timed
    beside the stages), and the C level's time above the C call beyond the null level's (above_call)."""
    paths = row.get("call_paths") or {}
    if "ctypes" not in paths:
        return []
    out = [words.say(TEMPLATE, "python_call", paths=paths, calls=row["calls"])]
    found = above_call(row, cell, null)
    return out if found is None else out + [
        words.say(TEMPLATE, "above_call", call=cpu_targets.C_LEVEL, null=NULL, cell=cell, null_cell=null,
                  study=cpu_targets.STUDY, goal_ns=C_ABOVE_NS, **found)]


def peak(row: dict | None) -> dict | None:
    """The arithmetic line's CPU part: the measured peak (G multiply-adds/s, its ISA) and the model's
    multiply-adds at it; None for no row, or one that measured nothing."""
    if row is None or row.get("status") != "ok":
        return None
    return {"gmacs": row["peak"]["macs_per_s"] / 1e9, "isa": row["peak"]["isa"], "floor_ns": floor_ns(row)}


def section(data: ReportData) -> list[str]:
    cpu_run = data.answer.get("cpu")
    machine = next((r["machine"] for r in data.runs if r["run_id"] == cpu_run), None)
    out = ["", words.say(TEMPLATE, "title"), ""]
    run = arithmetic_run(data.runs, machine)
    row = row_of(run)
    if row is None:
        return out + [words.say(TEMPLATE, "no_run", machine=machine)]
    if row.get("status") != "ok":
        return out + [words.say(TEMPLATE, "not_measured", machine=machine, reason=row.get("reason"))]
    cpu = (run or {}).get("env", {}).get("cpu", machine or "?")
    out += [words.say(TEMPLATE, "peak", row=row, gmacs=row["peak"]["macs_per_s"] / 1e9, machine=machine,
                      run_id=run["run_id"] if run else None, floor_ns=floor_ns(row)), "",
            words.say(TEMPLATE, "stages", row=row), ""]
    out += c_layers.lines(row)[2:]
    processes = row.get("processes") or []
    if len(processes) >= 2:  # each fresh process draws its own address layout
        out += ["", words.say(TEMPLATE, "processes", calls=sorted(p["call_median_ns"] for p in processes))]
    cell = find(data.frame, cpu_targets.STUDY, cpu_targets.C_LEVEL, machine=machine)
    out += ["", words.say(TEMPLATE, "rest", row=row, above_ns=row["call_median_ns"] - floor_ns(row),
                          gaps=[(name, ns) for name, ns in gaps(row)[:3] if ns > 0], cell=cell,
                          call=cpu_targets.C_LEVEL, study=cpu_targets.STUDY,
                          beyond_ns=None if cell is None
                          else cell["median_ms"] * 1e6 - row["call_median_ns"])]
    out += [""] + ["- " + words.say(TEMPLATE, "share_target", **t) for t in floor_targets(row)]
    null = find(data.frame, cpu_targets.STUDY, NULL, machine=machine)
    out += [f"- {line}" for line in call_lines(row, cell, null)]
    out += ["- " + host_goal_line(row, cpu, cell)]
    out += [f"- {line}" for line in cpu_targets.c_speedup_lines(data.frame, machine)] if machine else []
    return out + numba_lines(data.frame, machine, cell)


def numba_lines(frame: pd.DataFrame, machine: str | None, c_cell: pd.Series | None) -> list[str]:
    """The compiled-from-Python rung beside the C, within rounds, and what it needed to get there."""
    numba = find(frame, cpu_targets.STUDY, cpu_targets.COMPILED, machine=machine)
    r = ratio_ci(numba, c_cell)
    if numba is None or r is None:
        return []
    return [words.say(TEMPLATE, "compiled_beside", call=cpu_targets.COMPILED, cell=numba, ratio=r,
                      study=cpu_targets.STUDY)]
