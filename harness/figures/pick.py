"""What a figure picks from the rows before it draws: the answering machine of each device (every
figure draws those two machines and no other: the rest have pages of their own), each level's call
as first written and its fastest call there, the results folder the rows came from, and the CPU
floor as harness.measure.fastest_call answers it.

    answering_machines(data) -> {device: machine}   the machines every figure draws
    answering(cells, data)                          the cells of those machines, by device
    answering_rows(rows, data)                      the same for a study's rows (explain)
    pairs(data)                                     per level and device: first-written and fastest cells
    results_root(runs)                              the results folder the runs were read from
    cpu_floors(data) -> (Fastest, {machine: ms})    the CPU's fastest call and its median per machine
"""

from pathlib import Path

import pandas as pd

from harness import registry
from harness.measure import fastest_call
from harness.report.claims import headline
from harness.report.claims.rundata import ReportData

FLOOR_STUDY = fastest_call.STUDY  # the study measure.fastest_call reads the floor from


def answering_machines(data: ReportData) -> dict[str, str]:
    """{device: the machine that answers for it}: the machine of the api_levels run that answers on
    the device (data.answer, rundata.answer_run's), for the devices that have one."""
    return {d: m for d in registry.DEVICES if (m := headline.machine_of(data.frame, data.answer.get(d)))}


def answering(cells: pd.DataFrame, data: ReportData) -> pd.DataFrame:
    """The cells measured on their device's answering machine (a CPU cell of the GPU's machine is
    not one); on a device no api_levels run answers for (a results folder of other studies), the
    machine of the newest run among the cells."""
    if cells.empty:
        return cells
    machines = answering_machines(data)
    newest = cells.sort_values([c for c in ("run_order", "run_id") if c in cells])
    for device in sorted(set(cells["device"]) - set(machines)):
        machines[device] = newest[newest["device"] == device]["machine"].iloc[-1]
    keep = pd.Series(False, index=cells.index)
    for device, machine in machines.items():
        keep |= (cells["device"] == device) & (cells["machine"] == machine)
    return cells[keep]


def answering_rows(rows: list[dict], data: ReportData) -> list[dict]:
    """A study's rows (rundata.study_rows': each with its machine) of the answering machines, as
    answering picks cells (on a device no api_levels run answers for, the newest run's)."""
    machines = answering_machines(data)
    order = {run["run_id"]: run.get("order", 0) for run in data.runs}
    for device in sorted({row.get("device", "") for row in rows} - set(machines)):
        mine = [row for row in rows if row.get("device", "") == device]
        newest = max(mine, key=lambda row: (order.get(row.get("run_id"), 0), row.get("run_id", "")))
        machines[device] = newest["machine"]
    return [row for row in rows if machines.get(row.get("device", "")) == row.get("machine")]


def pairs(data: ReportData) -> list[dict]:
    """Per level (the headline's rows, the ladder's order) and device: {implementation, device,
    machine, loc, first, fastest}: `first` the cell of its call as first written
    (headline.as_first_written) in the api_levels run that answers, None where that run did not time
    it; `fastest` its fastest call there (the headline's, headline.levels)."""
    levels, machines = headline.levels(data.frame, data.loc_rows, data.answer)
    batch1 = {d: headline.ok_batch1(data.frame, headline.STUDY, data.answer.get(d), d)
              for d in registry.DEVICES if data.answer.get(d)}
    out = []
    for lv in levels:
        for device, fastest in lv.cells.items():
            cells = batch1.get(device)
            hit = (cells[cells["label"] == headline.as_first_written(lv.implementation)]
                   if cells is not None and not cells.empty else pd.DataFrame())
            out.append({"implementation": lv.implementation, "device": device, "machine": machines[device],
                        "loc": lv.loc, "first": None if hit.empty else hit.iloc[0], "fastest": fastest})
    return out


def results_root(runs: list[dict]) -> Path | None:
    """The results folder the runs were read from (a run's folder is ROOT/study/run_id), or None
    for rows that came from no folder (a test's)."""
    return next((Path(r["dir"]).parents[1] for r in runs if r.get("dir")), None)


def cpu_floors(data: ReportData) -> tuple[fastest_call.Fastest | None, dict[str, float]]:
    """harness.measure.fastest_call's CPU floor (the fastest measured implementation of the api_levels run
    that answers) and its median per image (ms) on each machine that measured it: on the floor's own
    run its median as measure.fastest_call read it, on another machine that machine's api_levels cell of the
    same implementation and variant. (None, {}) when the rows came from no folder."""
    root = results_root(data.runs)
    if root is None:
        return None, {}
    found = data.floors.get("cpu") or fastest_call.fastest_measured("cpu", root)  # the answering run's
    if found.median_ns is None:
        return found, {}
    frame = data.frame
    cells = frame[(frame["study"] == FLOOR_STUDY) & (frame["status"] == "ok") & (frame["device"] == "cpu")
                  & (frame["label"] == found.label) & (frame["batch_size"] == fastest_call.BATCH)
                  & (frame["dtype"] == fastest_call.DTYPE)] if not frame.empty else frame
    per_machine = {r["machine"]: (found.median_ns / 1e6 if r["run_id"] == found.run_id else r["median_ms"])
                   for _, r in cells.iterrows()}
    return found, per_machine
