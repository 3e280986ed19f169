"""The CPU's floor in the report: this core's measured multiply-add peak, the model's arithmetic at
that peak, the hand-written C call split by layer against it (the `arithmetic` rows, written by
`python -m harness arithmetic`: harness.explain.c_layers), and the C rung's targets, met or missed
and by how much. Every number is read from a row; the targets are the project's goals.

    arithmetic_run(runs, machine) -> run | None   the newest arithmetic run of that machine
    arithmetic_row(runs, machine) -> row | None   its row
    floor_ns(row) -> float                        the model's multiply-adds at the measured peak (the
                                                  row's, as c_layers.split computed it)
    gaps(row) -> [(stage, ns)]                    each stage's time above its arithmetic, largest first
    host_goal_line(row, cpu, machine) -> str      the <= 6 µs goal, where it was set (the Intel host)
    floor_target_lines(row) -> [line]             the C call against the arithmetic at the peak and
                                                  against the sum of its stages' floors, met or missed
    call_lines(row, cell, null) -> [line]         the Python call's cost (ctypes, the extension) and
                                                  c/fused above the C call beyond null/default
    peak_sentence(row) -> str                     the arithmetic line's CPU part (REPORT.md's method)
    process_sentence(row) -> str                  how far apart the fresh processes' C calls were
    numba_lines(frame, machine, c_cell) -> [line] the Numba rung beside the C, and what it needed
    section(data) -> [line]                       DETAILS.md's "The CPU's floor"
    row_of(run) -> row | None                     an arithmetic run's row
"""

import pandas as pd

from harness.explain import c_layers
from harness.report.claims import quote
from harness.report.claims.rundata import ReportData, find, ratio_ci
from harness.report.markup.style import fmt_ms
from harness.report.markup.tables import fmt_ratio, goal_line
from harness.report.sections import cpu_targets

TITLE = "## The CPU's floor: hand-written C against the arithmetic (`python -m harness arithmetic`)"
# The C rung's floor targets (the CPU floor issue), the project's goals, not results: the C call's
# share of the arithmetic at the measured peak, and of the sum of its stages' floors (each the
# longer of its arithmetic and its reads); c/fused's time above the C call beyond the harness's own
# call (null/default): the Python call's cost.
C_ARITHMETIC_SHARE = 0.75
C_STAGES_SHARE = 0.85
C_ABOVE_NS = 300.0
NULL = "null/default"


def us(ns: float) -> str:
    return fmt_ms(ns / 1e6)


def arithmetic_run(runs: list[dict], machine: str | None) -> dict | None:
    """The newest arithmetic run of that machine (runs: the newest run of each study and machine)."""
    found = [r for r in runs if r["study"] == c_layers.STUDY and r["machine"] == machine]
    return max(found, key=lambda r: r["order"]) if found else None


def row_of(run: dict | None) -> dict | None:
    rows = [row for row in (run or {}).get("rows", []) if row.get("kind") == c_layers.STUDY]
    return rows[-1] if rows else None


def arithmetic_row(runs: list[dict], machine: str | None) -> dict | None:
    return row_of(arithmetic_run(runs, machine))


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
    goal_ms = cpu_targets.C_GOAL_MS
    head = (f"Target {cpu_targets.C_LEVEL} ≤ {fmt_ms(goal_ms)} per image, "
            f"on the {cpu_targets.C_GOAL_HOST} host")
    if cpu_targets.C_GOAL_HOST in cpu:
        if cell is None:
            return f"{head}: not measured on this machine ({cpu}) yet."
        return goal_line(cpu_targets.C_LEVEL, goal_ms, cell["median_ms"], cpu_targets.STUDY,
                         f", on the {cpu_targets.C_GOAL_HOST} host ({cpu})")
    line = f"{head}: not judged here, since this machine is {cpu}"
    if row is not None:
        floor = floor_ns(row)
        line += (f"; its own arithmetic floor is {us(floor)} at its measured peak, "
                 + ("above the goal: the model's arithmetic alone takes longer than the goal on this core"
                    if floor > goal_ms * 1e6 else "under the goal"))
    return line + "."


def share_target(what: str, share: float, goal: float, call_ns: float, floor: float) -> str:
    """'Target: the C call at least 75% of X: 64% (missed: at 75% it would take 6.1 µs, 1.2 µs less
    than its 7.3 µs).' The shares are medians of one run (no interval)."""
    verdict = "met" if share >= goal else (f"missed: at {goal:.0%} it would take {us(floor / goal)}, "
                                           f"{us(call_ns - floor / goal)} less than its {us(call_ns)}")
    return f"Target: the C call at least {goal:.0%} of {what}: {share:.0%} ({verdict})."


def floor_target_lines(row: dict) -> list[str]:
    """The C call against the arithmetic at the measured peak and, where the row has the read probe,
    against the sum of its stages' floors."""
    out = [share_target("the arithmetic at the measured peak", row["share"], C_ARITHMETIC_SHARE,
                        row["call_median_ns"], floor_ns(row))]
    if "stages_floor_ns" in row:
        what = "the sum of its stages' floors (each the longer of its arithmetic and its reads)"
        out.append(share_target(what, row["stages_share"], C_STAGES_SHARE, row["call_median_ns"],
                                row["stages_floor_ns"]))
    return out


def call_lines(row: dict, cell: pd.Series | None, null: pd.Series | None) -> list[str]:
    """What the Python call costs each way (an empty C function with the pass's arguments, timed
    beside the stages), and c/fused's time above the C call beyond null/default's: c/fused's median
    less the C call's (its ctypes call taken out) less null/default's, medians of two runs."""
    paths = row.get("call_paths") or {}
    if "ctypes" not in paths:
        return []
    ways = f"{us(paths['ctypes'])} through ctypes (its arguments built once)"
    if "extension" in paths:
        ways += (f", {us(paths['extension'])} through the level's extension (`lenet_c/call.c`, built like "
                 "the library: the images' checks, the new (1, 10) array and the call), the way predict "
                 "calls it")
    out = [f"The Python call alone (an empty C function with the pass's arguments, {row['calls']} calls a "
           f"round, the median over rounds): {ways}."]
    if cell is None or null is None:
        return out
    in_c = row.get("call_in_c", False)  # timed inside C; before, through ctypes: its empty call taken out
    c_call = row["call_median_ns"] - (0 if in_c else paths["ctypes"])  # the pass alone
    how = "timed inside C" if in_c else "its ctypes call taken out"
    above = cell["median_ms"] * 1e6 - c_call - null["median_ms"] * 1e6
    verdict = "met" if above <= C_ABOVE_NS else f"missed by {us(above - C_ABOVE_NS)}"
    return out + [f"Target: {cpu_targets.C_LEVEL} above the C call, beyond the harness's own call ({NULL}), "
                  f"at most {us(C_ABOVE_NS)}: {quote.quoted(cell)} (`{cpu_targets.STUDY}`) less the C call's "
                  f"{us(c_call)} ({how}) less {NULL}'s {quote.quoted(null)} leaves "
                  f"{us(above)} ({verdict}; medians of two runs, not within rounds)."]


def peak_sentence(row: dict | None) -> str:
    """'at this CPU's measured peak (58.4 G multiply-adds/s, avx512, one core) they take 7.13 µs'."""
    if row is None or row.get("status") != "ok":
        return ""
    peak = row["peak"]
    return (f"; at the CPU's measured peak ({peak['macs_per_s'] / 1e9:.1f} G multiply-adds/s, "
            f"{peak['isa']}, one core: `python -m harness arithmetic`) they take {us(floor_ns(row))}")


def process_sentence(row: dict) -> str:
    """How far apart the fresh processes' C calls were (each draws its own address layout), or ''
    for a row measured in one process."""
    found = row.get("processes") or []
    if len(found) < 2:
        return ""
    calls = sorted(p["call_median_ns"] for p in found)
    return (f"Measured in {len(found)} fresh processes, one after another (each draws its own address "
            f"layout, and the C call moves with the draw: lenet_c/layout.py): the C call took "
            f"{', '.join(us(ns) for ns in calls)}; the table is the median process's.")


def section(data: ReportData) -> list[str]:
    cpu_run = data.answer.get("cpu")
    machine = next((r["machine"] for r in data.runs if r["run_id"] == cpu_run), None)
    out = ["", TITLE, ""]
    run = arithmetic_run(data.runs, machine)
    row = row_of(run)
    if row is None:
        return out + [f"_No `arithmetic` run on {machine or 'the machine that answers'} yet "
                      "(`make explain` makes one)._"]
    if row.get("status") != "ok":
        return out + [f"_Not measured on {machine}: {row.get('reason', 'no reason recorded')}._"]
    peak = row["peak"]
    cpu = (run or {}).get("env", {}).get("cpu", machine or "?")
    out += [f"This core's multiply-add peak, measured by the C level's probe (`lenet_c/explain/peak.c`: "
            f"12 independent chains of {peak['isa']} FMAs, {peak['lanes']} float32 lanes, the best of "
            f"{peak.get('runs', 5)} runs): **{peak['macs_per_s'] / 1e9:.1f} G multiply-adds/s** ({machine}, "
            f"run `{run['run_id'] if run else '?'}`). At that rate LeNet-5's {row['macs']:,} multiply-adds "
            f"take **{us(floor_ns(row))}**: the CPU's arithmetic floor."
            + (f" *contended*: {row['contended']}." if row.get("contended") else ""), "",
            f"The fused C call, image by image, each stage timed inside C ({row['rounds']} rounds of "
            f"{row['calls']} calls, the median over rounds; `share` is the stage's arithmetic at the peak "
            f"over its time; pooling is inside the convolutions, the softmax in fc3; the dense layers skip "
            f"ReLU's zero inputs, whose weights are never read, so their time depends on the image: the "
            f"test images in turn):", ""]
    out += c_layers.lines(row)[2:]
    spread = process_sentence(row)
    out += ["", spread] if spread else []
    above = row["call_median_ns"] - floor_ns(row)
    named = "; ".join(f"{name} {us(ns)}" for name, ns in gaps(row)[:3] if ns > 0)
    out += ["", f"Where the rest goes: the C call takes {us(row['call_median_ns'])}, {us(above)} above "
                f"the floor ({row['share']:.0%} of its time is arithmetic at the peak); the stages' time "
                f"above their arithmetic, largest first: {named}."]
    cell = find(data.frame, cpu_targets.STUDY, cpu_targets.C_LEVEL, machine=machine)
    if cell is not None:
        out[-1] += (f" Through the harness (the Python call, the image copied in, the probabilities out) "
                    f"{cpu_targets.C_LEVEL} takes {quote.quoted(cell)} per image "
                    f"(`{cpu_targets.STUDY}`), "
                    f"{us(cell['median_ms'] * 1e6 - row['call_median_ns'])} more than the C call timed here.")
    out += [""] + [f"- {line}" for line in floor_target_lines(row)]
    null = find(data.frame, cpu_targets.STUDY, NULL, machine=machine)
    out += [f"- {line}" for line in call_lines(row, cell, null)]
    out += ["- " + host_goal_line(row, cpu, cell)]
    out += [f"- {line}" for line in cpu_targets.c_speedup_lines(data.frame, machine)] if machine else []
    out += numba_lines(data.frame, machine, cell)
    return out


# What the compiled-from-Python rung needed (lenet_numba/kernels.py's decorator and compiler class)
NUMBA_NEEDED = ("fastmath (reassociation, FMA contraction), no bounds checks, and every array argument "
                "marked noalias through a compiler subclass (`numba.core.compiler.Compiler`, not a public "
                "option): without noalias LLVM keeps its loops scalar")


def numba_lines(frame: pd.DataFrame, machine: str | None, c_cell: pd.Series | None) -> list[str]:
    """The compiled-from-Python rung beside the C, within rounds, and what it needed to get there."""
    numba = find(frame, cpu_targets.STUDY, "numba/fused", machine=machine)
    r = ratio_ci(numba, c_cell)
    if numba is None or r is None:
        return []
    return [f"- The rung compiled from Python, numba/fused, takes {quote.quoted(numba)} per image, "
            f"{fmt_ratio(r, 'x')} the C's time within rounds (`{cpu_targets.STUDY}`); to get there Numba "
            f"needed {NUMBA_NEEDED}."]
