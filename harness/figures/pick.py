"""What a figure picks from the rows before it draws: the machine whose run is newest (the one a
figure draws as its own, the others labelled as other machines), the results folder the rows
came from, and the CPU floor as harness.measure.floor answers it, with its time on each machine.

    newest_machine(runs, study, device, frame)  the machine of the newest run with ok cells there
    results_root(runs)                          the results folder the runs were read from
    cpu_floors(data) -> (Floor, {machine: ms})  measure.floor's CPU floor and its median per machine
    run_date(run_id)                            '2026-11-24' from '20261124-064619-vm-...'
"""

from pathlib import Path

import pandas as pd

from harness.measure import floor
from harness.report.claims.rundata import ReportData

FLOOR_STUDY = floor.STUDY  # the study measure.floor reads the floor from


def newest_machine(runs: list[dict], study: str, device: str, frame: pd.DataFrame) -> str | None:
    """The machine of the newest `study` run (in this checkout's order, then its id) that has an ok
    cell on `device`: the run a figure draws as its own; every other machine is an older run."""
    if frame.empty:
        return None
    ok = frame[(frame["study"] == study) & (frame["status"] == "ok") & (frame["device"] == device)]
    with_cells = set(ok["run_id"])
    mine = [r for r in runs if r["study"] == study and r["run_id"] in with_cells]
    return max(mine, key=lambda r: (r["order"], r["run_id"]))["machine"] if mine else None


def results_root(runs: list[dict]) -> Path | None:
    """The results folder the runs were read from (a run's folder is ROOT/study/run_id), or None
    for rows that came from no folder (a test's)."""
    return next((Path(r["dir"]).parents[1] for r in runs if r.get("dir")), None)


def cpu_floors(data: ReportData) -> tuple[floor.Floor | None, dict[str, float]]:
    """harness.measure.floor's CPU floor (the fastest measured implementation of the newest
    api_levels run) and its median per image (ms) on each machine that measured it: on the floor's
    own run its median as measure.floor read it, on another machine that machine's api_levels cell
    of the same implementation and variant. (None, {}) when the rows came from no folder."""
    root = results_root(data.runs)
    if root is None:
        return None, {}
    found = data.floors.get("cpu") or floor.fastest_measured("cpu", root)  # the answering run's
    if found.median_ns is None:
        return found, {}
    frame = data.frame
    cells = frame[(frame["study"] == FLOOR_STUDY) & (frame["status"] == "ok") & (frame["device"] == "cpu")
                  & (frame["label"] == found.label) & (frame["batch_size"] == floor.BATCH)
                  & (frame["dtype"] == floor.DTYPE)] if not frame.empty else frame
    per_machine = {r["machine"]: (found.median_ns / 1e6 if r["run_id"] == found.run_id else r["median_ms"])
                   for _, r in cells.iterrows()}
    return found, per_machine


def run_date(run_id: str) -> str:
    """'2026-11-24' from a run id that starts with its date (YYYYMMDD-...), else the id."""
    day = run_id[:8]
    return f"{day[:4]}-{day[4:6]}-{day[6:]}" if day.isdigit() else run_id
