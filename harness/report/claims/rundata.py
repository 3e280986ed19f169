"""Result files -> tables for the figures and the report. Pure functions of the files in
reports/results/ (no framework imported): the same files always give the same report.

Runs of one study from several machines are combined; each machine is keyed by its host
fingerprint and named so a reader tells it apart (harness.report.claims.hosts). For a study on a machine,
the newest complete run gives the cells: newest in this checkout's order (harness.measure.store.runfolder:
when it completed or was imported here), never by a time its rows carry. A partial run (no completion
marker) is named, never used.

A number is every complete, uncontended run of the same code on the same machine, pooled (pool): each
of the newest run's cells pools the runs of its study whose result_key for the cell's level is the
same (machine fingerprint, the level's sources, its library versions, the harness's timing code),
their runs, then processes, then rounds resampled (stats.pooled_summary). A run whose cell was
contended is left out and counted (`runs_contended`), unless every run of it was. So a rerun adds
evidence and never replaces a number; a run of other code is its own result.

One machine answers for each device (answering_machines): for the CPU the newest with a complete run
of every CPU study of `make run-all` (CPU_STUDIES), for the GPU the newest with a GPU `api_levels`
cell; every other machine has a page of its own (harness.report.sections.machine_pages).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness import DEFAULT_RESULTS, registry
from harness.errors import HarnessError
from harness.machine import provenance
from harness.measure import fastest_call
from harness.measure.plan import cells, narrow
from harness.measure.store import results, rowfile, runfolder, stats
from harness.measure.store import rows as row_reader
from harness.report.claims import hosts


def read_run(run_dir: Path) -> dict:
    """One run folder: its study, id, environment, rows (harness.measure.store.rows: a bad row skipped
    with a warning), whether it is complete and its place in this checkout's order (runfolder)."""
    env = row_reader.read_env(run_dir / "env.json")
    rows = results.read_rows(run_dir)
    order = runfolder.order(run_dir)
    return {"study": run_dir.parent.name, "run_id": run_dir.name, "dir": run_dir,
            "env": env, "rows": rows,
            "started": min((r["time"] for r in rows), default=0.0),
            "complete": order is not None, "order": order if order is not None else float("-inf")}


REPRODUCED = "reproduce/*/*/*"  # a reproduce row's second run: RESULTS/reproduce/<id>/<study>/<id>/


def load_runs(root: Path = DEFAULT_RESULTS, reruns: bool = False) -> list[dict]:
    """Every complete run folder (its marker written): read_run's dicts, each with its machine
    (hosts.assign: its `host_key` and `machine`, the machine's name in the report). A partial run
    (killed, or still running) never answers: partial_runs names it. reruns: the second runs of
    `reproduce` too (REPRODUCED), each marked `rerun`: complete runs of their study that a number
    pools (pool), never the newest run that gives a study's cells (latest_runs leaves them out)."""
    dirs = [(d, False) for d in rowfile.run_dirs(root)]
    dirs += [(d, True) for d in rowfile.run_dirs(root, REPRODUCED)] if reruns else []
    complete = [{**read_run(run_dir), "rerun": rerun} for run_dir, rerun in dirs
                if runfolder.completion(run_dir) is not None]
    # a quick run of some cells (harness.measure.plan.narrow): a try, never a machine's answer
    return hosts.assign([run for run in complete if not narrow.is_narrowed(run["env"])])


def partial_runs(root: Path = DEFAULT_RESULTS) -> list[dict]:
    """Every run folder without its completion marker: its study, id, the cells it finished, and the
    command that finishes it."""
    found = []
    for run_dir in rowfile.run_dirs(root):
        if runfolder.completion(run_dir) is not None:
            continue
        rows = results.read_rows(run_dir)
        cells = {row["cell_id"] for row in rows if row.get("kind") == "cell"}
        study = run_dir.parent.name
        finish = (f"python -m harness run {study} --resume --run-id {run_dir.name}"
                  if (run_dir / "study.toml").is_file() else f"run `{study}` again (it cannot be resumed)")
        found.append({"study": study, "run_id": run_dir.name, "dir": run_dir, "cells_done": len(cells),
                      "rows": len(rows), "finish": finish})
    return found


PROFILES = ("kernels",)  # studies whose runs each profile some targets: newest per target, not per run


def latest_runs(runs: list[dict]) -> list[dict]:
    """The newest run of each study on each machine; of a profile study (`kernels`, where a later
    run may profile a few targets again), the newest row of each target and batch size, as one run
    of the newest one's environment."""
    best: dict[tuple[str, str], dict] = {}
    for run in runs:
        if run.get("rerun"):  # a reproduce's second run: pooled, never a study's newest run
            continue
        key = (run["study"], run["machine"])
        if run["study"] in PROFILES and key in best:
            older, newer = sorted((best[key], run), key=lambda r: r["order"])
            run = {**newer, "rows": newest_rows(older["rows"] + newer["rows"]),
                   "run_ids": older.get("run_ids", [older["run_id"]]) + [newer["run_id"]]}
        if key not in best or run["order"] >= best[key]["order"]:
            best[key] = run
    return sorted(best.values(), key=lambda r: (r["study"], r["machine"]))


def newest_rows(rows: list[dict]) -> list[dict]:
    """Rows in order, each (implementation, variant, batch) kept once: its last ok row (or its
    last row where none is ok). Rows without a batch are batch 1."""
    kept: dict[tuple, dict] = {}
    for row in rows:
        key = (row.get("implementation"), row.get("variant"), row.get("batch", 1))
        if key not in kept or row.get("status") == "ok" or kept[key].get("status") != "ok":
            kept[key] = row
    return list(kept.values())


def study_rows(runs: Sequence[dict], study: str, only_ok: bool = True) -> list[dict]:
    """The rows of kind `study` in the runs of that study (the newest of each machine: latest_runs'),
    the ok ones unless only_ok is False, each with its run's machine."""
    return [{**row, "machine": run["machine"]} for run in runs if run["study"] == study for row in run["rows"]
            if row.get("kind") == study and (row.get("status") == "ok" or not only_ok)]


def cells_frame(runs: list[dict]) -> pd.DataFrame:
    """One row per final cell row, flattened: spec, status, statistics (ms), setup times, and the
    marks a quoted number carries: thin (too few rounds or calls for an interval: none is given),
    noisy, contended (with why) and stale (its level's sources changed since it was measured)."""
    records = []
    for run in runs:
        own = own_process(run["rows"])
        setups = process_setups(run["rows"])
        stale: dict[str, str | None] = {}
        for row in run["rows"]:
            if row.get("kind") != "cell":
                continue
            impl = row["cell"]["implementation"]
            if impl not in stale:
                stale[impl] = provenance.change(run["env"].get("provenance"), impl, run["started"])
            records.append({**cell_record(run, row, own, stale[impl] or ""),
                            "setups": setups.get(row["cell_id"], [])})
    frame = pd.DataFrame.from_records(records)
    if not frame.empty:
        frame["images_per_s"] = frame["batch_size"] / (frame["median_ms"] / 1e3)
        frame["label"] = frame["implementation"] + "/" + frame["variant"]
    return frame


def cell_statistics(row: dict) -> dict:
    """The statistics of a final cell row: the summary it saved, where of the current version, else
    computed from its raw times (cells.row_summary); a thin cell's interval and noise verdict are not
    shown (stats.interval_supported)."""
    st = cells.row_summary(row) or {}
    if st.get("thin"):
        st.update(ci95_low_ns=float("nan"), ci95_high_ns=float("nan"), ci_over_median=float("nan"),
                  noisy=False, drawn=False)
    return st


def cell_record(run: dict, row: dict, own: dict[str, bool], stale: str) -> dict:
    """One final cell row flattened for the frame (cells_frame)."""
    dev, setup = row.get("device_stats") or {}, row.get("setup") or {}
    times = [t for rnd in row.get("rounds_ns", []) for t in rnd]
    st = cell_statistics(row)
    spec = {"mode": "inference", "threads": None, **row["cell"]}  # rows before train mode lack them
    return {
        "study": run["study"], "run_id": run["run_id"], "machine": run["machine"],
        "run_order": run["order"],
        "cell_id": row["cell_id"], **spec, "status": row["status"],
        "reason": row.get("reason") or "",
        "n": st.get("n", 0),
        "median_ms": st.get("median_ns", float("nan")) / 1e6,
        "ci_low_ms": st.get("ci95_low_ns", float("nan")) / 1e6,
        "ci_high_ms": st.get("ci95_high_ns", float("nan")) / 1e6,
        "p90_ms": st.get("p90_ns", float("nan")) / 1e6,
        "p99_ms": st.get("p99_ns", float("nan")) / 1e6,
        "mean_ms": st.get("mean_ns", float("nan")) / 1e6,
        "min_ms": st.get("min_ns", float("nan")) / 1e6,
        "spread": st.get("spread", float("nan")),
        "ci_over_median": st.get("ci_over_median", float("nan")),
        "rounds": st.get("rounds", 0),
        "noisy": bool(st.get("noisy", False)),
        "thin": bool(st.get("thin", False)),
        "processes": st.get("processes", 0),  # the fresh worker processes its rounds came from
        "process_medians_ms": [m / 1e6 for m in st.get("process_medians_ns", [])],
        "process-dependent": bool(st.get("drawn", False)),  # its processes' medians differ (quote.MARKS)
        "contended": bool(row.get("contended", False)),
        "contended_reasons": list(row.get("contended_reasons") or []),
        "stale": stale,
        "device_median_ms": dev.get("median_ns", float("nan")) / 1e6,
        "cold_start_ms": (setup.get("cold_start_ns") or float("nan")) / 1e6,
        "own_process": own.get(row["cell_id"]),
        "import_s": (setup.get("import_ns") or float("nan")) / 1e9,
        "load_s": (setup.get("load_ns") or float("nan")) / 1e9,
        "memory": setup.get("memory"),  # resident bytes by stage (harness.measure.inside.memory)
        "rss_peak": row.get("rss_peak"),  # resident peak of the timed calls (bytes)
        "gpu_memory": setup.get("gpu_memory"),
        "installed": setup.get("installed"),
        "fresh_compile_cache": bool(setup.get("fresh_compile_cache")),  # its start-up compiled afresh
        "times_ms": [t / 1e6 for t in times],
        "rounds_ns": row.get("rounds_ns", []),
        "round_process": row.get("round_process") or [0] * len(row.get("rounds_ns", [])),
        "convergence": row.get("convergence"),
    }


def own_process(rows: list[dict]) -> dict[str, bool]:
    """cell_id -> whether its worker process started for it (its first call was a cold start)
    or had already run another cell (that call came after another variant's warm-up)."""
    seen, out = set(), {}
    for row in rows:
        if row.get("kind") == "setup" and row.get("pid") is not None:
            out[row["cell_id"]] = row["pid"] not in seen
            seen.add(row["pid"])
    return out


def process_setups(rows: list[dict]) -> dict[str, list[tuple[dict, dict]]]:
    """cell_id -> (its setup row, the setup row of the cell its worker process started for) in each
    process that set it up, in order: what the bill reads per process (bill.process_bills)."""
    starters: dict[int, dict] = {}
    out: dict[str, list[tuple[dict, dict]]] = {}
    for row in rows:
        if row.get("kind") == "setup" and row.get("pid") is not None:
            starter = starters.setdefault(row["pid"], row)
            out.setdefault(row["cell_id"], []).append((row, starter))
    return out


def load(root: Path = DEFAULT_RESULTS) -> tuple[list[dict], pd.DataFrame]:
    """(newest runs, their cells, each pooled over the runs of the same code: pool)."""
    runs, frame, _history = load_with_history(root, every_run=False)
    return runs, frame


def load_with_history(root: Path = DEFAULT_RESULTS,
                      every_run: bool = True) -> tuple[list[dict], pd.DataFrame, pd.DataFrame]:
    """(newest runs, their cells pooled with every run of the same code (pool), the cells of every
    run, or with every_run False of the runs that may pool: poolable): each file read and each cell
    summarized once; the newest runs' cells are taken from the history, in latest_runs' order."""
    every = load_runs(root, reruns=True)
    runs = latest_runs(every)
    history = cells_frame(every if every_run else poolable(every, runs))
    if history.empty:
        return runs, history, history
    parts = [history[(history["study"] == r["study"]) & (history["run_id"] == r["run_id"])]
             for r in runs]
    frame = pool(pd.concat(parts, ignore_index=True), history, every)
    machines = answering_machines(runs, frame)
    # each cell: whether its machine answers for its device (answer_run reads it)
    frame["answering"] = [machines.get(device) == machine
                          for device, machine in zip(frame["device"], frame["machine"], strict=True)]
    return runs, frame, history


# --- a result: every run of the same code on the same machine ----------------------------------

def timing_code(run: dict) -> str:
    """The run's timing code (provenance.TIMING_FILES): as recorded; for a run that recorded only its
    commit, that commit's (git), where the tree was clean; else unknown: the run is its own result."""
    prov = run["env"].get("provenance") or {}
    if prov.get("timing"):
        return str(prov["timing"])
    clean = prov.get("commit") and prov.get("dirty") is False  # a dirty tree's timing files may have differed
    derived = provenance.timing_at(prov["commit"]) if clean else None
    return derived or f"unknown: run {run['study']}/{run['run_id']}"


def result_key(run: dict, implementation: str) -> tuple:
    """What makes two runs' cells of a level one result: the machine (hosts.key: its fingerprint), the
    level's sources (provenance: unknown, so the run's own, where not recorded), the versions of the
    distributions that are the level (registry.own_distributions), and the timing code."""
    spec = registry.REGISTRY.get(implementation)
    sources = (run["env"].get("provenance") or {}).get("sources", {}).get(implementation)
    if sources is None and spec is not None and spec.package is not None:
        sources = f"unknown: run {run['study']}/{run['run_id']}"
    packages = run["env"].get("packages") or {}
    versions = tuple((dist, packages.get(dist)) for dist in registry.own_distributions(implementation))
    return run["host_key"], sources, versions, timing_code(run)


def poolable(every: list[dict], newest: list[dict]) -> list[dict]:
    """The runs whose cells may pool with a newest run's: of its study and machine, with its timing
    code (the newest runs among them). The others need not be summarized to build the frame."""
    wanted = {(r["study"], r["machine"], timing_code(r)) for r in newest}
    return [r for r in every if (r["study"], r["machine"], timing_code(r)) in wanted]


def pool(frame: pd.DataFrame, history: pd.DataFrame, every: list[dict]) -> pd.DataFrame:
    """The newest runs' cells (frame), each ok one pooled with the ok cells of every other run of its
    study on its machine that have its result_key (history: every run's cells; every: those runs): its
    statistics from every uncontended run's rounds (stats.pooled_summary), and `runs` (how many runs it
    pools), `runs_contended` (how many it left out, contended), `pooled_runs` (their ids, oldest
    first) and `pool` (each run's id, rounds and processes: ratio_ci's; None where the cell is its
    own run's alone)."""
    if frame.empty:
        return frame
    by_id = {(r["study"], r["run_id"]): r for r in every}
    keys: dict[tuple, tuple] = {}

    def key_of(study: str, run_id: str, impl: str) -> tuple:
        if (study, run_id, impl) not in keys:
            keys[(study, run_id, impl)] = result_key(by_id[(study, run_id)], impl)
        return keys[(study, run_id, impl)]

    ok = history[history["status"] == "ok"].sort_values(["run_order", "run_id"], kind="stable")
    columns = {c: ok[c].to_numpy() for c in ("study", "machine", "cell_id", "run_id", "implementation",
                                             "contended", "contended_reasons", "rounds_ns", "round_process",
                                             "times_ms")}
    places: dict[tuple, list[int]] = {}  # (study, machine, cell) -> its ok cells' places, oldest first
    for place, where in enumerate(zip(columns["study"], columns["machine"], columns["cell_id"], strict=True)):
        places.setdefault(where, []).append(place)
    records = []
    for record in frame.to_dict("records"):
        record.update(runs=1, runs_contended=0, pooled_runs=[record["run_id"]], pool=None)
        found = places.get((record["study"], record["machine"], record["cell_id"]), [])
        if record["status"] == "ok" and len(found) > 1:
            mine = key_of(record["study"], record["run_id"], record["implementation"])
            same = [{c: values[i] for c, values in columns.items()} for i in found
                    if key_of(record["study"], columns["run_id"][i], columns["implementation"][i]) == mine]
            quiet = [c for c in same if not c["contended"]] or same  # every run contended: all, marked
            if len(quiet) > 1 or quiet[0]["run_id"] != record["run_id"]:
                record.update(pooled_record(quiet))
            record["runs_contended"] = len(same) - len(quiet)
        records.append(record)
    out = pd.DataFrame.from_records(records)
    out["runs"] = out["runs"].astype(int)
    return out


def pooled_record(found: list[dict]) -> dict:
    """The statistics of a cell pooled over its runs' cells (found: cells_frame's records, oldest first)."""
    st = stats.pooled_summary([(c["rounds_ns"], c["round_process"]) for c in found])
    if st["thin"]:
        st.update(ci95_low_ns=float("nan"), ci95_high_ns=float("nan"), ci_over_median=float("nan"),
                  noisy=False, drawn=False)
    labels = stats.labels_of([r for c in found for r in c["rounds_ns"]],
                             [(i, p) for i, c in enumerate(found) for p in c["round_process"]])
    return {"n": st["n"], "median_ms": st["median_ns"] / 1e6, "ci_low_ms": st["ci95_low_ns"] / 1e6,
            "ci_high_ms": st["ci95_high_ns"] / 1e6, "p90_ms": st["p90_ns"] / 1e6,
            "p99_ms": st["p99_ns"] / 1e6,
            "mean_ms": st["mean_ns"] / 1e6, "min_ms": st["min_ns"] / 1e6, "spread": st["spread"],
            "ci_over_median": st["ci_over_median"], "rounds": st["rounds"], "noisy": bool(st["noisy"]),
            "thin": bool(st["thin"]), "processes": st["processes"],
            "process_medians_ms": [m / 1e6 for m in st["process_medians_ns"]],
            "process-dependent": bool(st["drawn"]), "contended": all(c["contended"] for c in found),
            "contended_reasons": sorted({w for c in found if c["contended"] for w in c["contended_reasons"]}),
            "times_ms": [t for c in found for t in c["times_ms"]],
            "rounds_ns": [r for c in found for r in c["rounds_ns"]], "round_process": labels,
            "runs": len(found), "pooled_runs": [c["run_id"] for c in found],
            "run_medians_ms": [m / 1e6 for m in st["run_medians_ns"]],
            "pool": [(c["run_id"], c["rounds_ns"], c["round_process"]) for c in found]}


def verify_records(root: Path = DEFAULT_RESULTS, pattern: str = "verify-*.json") -> list[dict]:
    """verify-*.json files written by `python -m harness verify --json FILE` (with
    pattern="verify-train-*.json": `verify-train`'s)."""
    found = []
    for path in sorted(Path(root).glob(pattern)):
        if pattern == "verify-*.json" and path.name.startswith("verify-train-"):
            continue
        data = row_reader.read_object(path)  # a JSON object, or {} with a warning
        rows = data.get("rows", [])
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict):
                found.append({"file": path.name, **row})
    return found


def source(row: dict) -> str:
    """A verify row's file, and the campaign it came from where the row says (rows merged by
    import-results from several campaigns each say theirs)."""
    return f"{row['file']} ({row['campaign']})" if row.get("campaign") else row["file"]


def crosscheck_records(root: Path = DEFAULT_RESULTS) -> list[dict]:
    """crosscheck-*.json files written by `python -m harness crosscheck --json FILE`."""
    return [{"file": path.name, **data} for path in sorted(Path(root).glob("crosscheck*.json"))
            if (data := row_reader.read_object(path))]


def answer_run(frame: pd.DataFrame, device: str, machine: str | None = None) -> str | None:
    """The api_levels run that answers for `device`: the newest (in this checkout's order) with an ok cell
    on the device, of `machine` where one is named (`make report MACHINE=...`), else of the machine
    that answers for the device (the frame's `answering` column, load's: answering_machines)."""
    if frame.empty:
        return None
    cells = frame[(frame["study"] == "api_levels") & (frame["status"] == "ok") & (frame["device"] == device)
                  & (frame["implementation"] != "null")]
    if machine is not None:
        cells = cells[cells["machine"] == machine]
    elif "answering" in cells and cells["answering"].any():
        cells = cells[cells["answering"].astype(bool)]
    if cells.empty:
        return None
    newest = cells.sort_values(["run_order", "run_id"]).iloc[-1]
    return str(newest["run_id"])


# The CPU studies of `make run-all` (the Makefile's STUDIES, then `make explain`'s explain and arithmetic):
# the answering CPU machine has a complete run of each.
CPU_STUDIES = ("api_levels", "overhead", "backends", "batch_sweep", "precision", "training", "explain",
               "arithmetic")


def answering_machines(runs: list[dict], frame: pd.DataFrame, machine: str | None = None) -> dict:
    """{device: the machine that answers for it, or None}: for the CPU the newest machine (by its newest
    `api_levels` run with an ok CPU cell, in this checkout's order) with a complete run of every study
    in CPU_STUDIES, or, where no machine has them all, the newest with an ok CPU `api_levels` cell
    (missing_studies names what it lacks); for the GPU the newest with an ok GPU `api_levels` cell.
    machine: the machine that answers for both (`make report MACHINE=...`; resolve_machine's name)."""
    out: dict[str, str | None] = {}
    for device in ("cpu", "gpu"):
        run_id = answer_run(frame, device, machine)
        newest = None if run_id is None else machine_of_run(frame, run_id)
        if device == "cpu" and machine is None and newest is not None:
            cells = frame[(frame["study"] == "api_levels") & (frame["status"] == "ok")
                          & (frame["device"] == "cpu") & (frame["implementation"] != "null")]
            order = sorted({m: max(zip(g["run_order"], g["run_id"], strict=True))
                            for m, g in cells.groupby("machine")}.items(), key=lambda item: item[1])
            complete = [m for m, _ in order if not missing_studies(runs, m)]
            newest = complete[-1] if complete else newest
        out[device] = newest
    return out


def answering_cells(frame: pd.DataFrame, machines: dict) -> pd.DataFrame:
    """The cells REPORT.md and DETAILS.md show: each device's cells of the machine that answers for it
    (machines: answering_machines'); the other machines' are on their own pages."""
    if frame.empty:
        return frame
    mask = np.zeros(len(frame), dtype=bool)
    for device, machine in machines.items():
        if machine is not None:
            mask |= ((frame["device"] == device) & (frame["machine"] == machine)).to_numpy()
    return frame[mask]


def pooling(frame: pd.DataFrame, answer: dict) -> list[dict]:
    """For each device's answering api_levels run: how many runs its ok cells on the device pool
    (`least`, `most`), how many contended runs they left out (`left_out`), over how many cells."""
    out = []
    for device, run_id in answer.items():
        if not run_id or frame.empty:
            continue
        cells = frame[(frame["run_id"] == run_id) & (frame["study"] == "api_levels")
                      & (frame["status"] == "ok") & (frame["device"] == device)]
        if not cells.empty:
            out.append({"device": device, "machine": str(cells.iloc[0]["machine"]),
                        "least": int(cells["runs"].min()), "most": int(cells["runs"].max()),
                        "left_out": int(cells["runs_contended"].sum()), "cells": len(cells)})
    return out


def missing_studies(runs: list[dict], machine: str) -> list[str]:
    """The studies of CPU_STUDIES with no complete run on the machine (runs: load_runs' dicts)."""
    have = {run["study"] for run in runs if run["machine"] == machine}
    return [study for study in CPU_STUDIES if study not in have]


def machine_of_run(frame: pd.DataFrame, run_id: str) -> str | None:
    hits = frame[(frame["run_id"] == run_id) & (frame["study"] == "api_levels")]
    return None if hits.empty else str(hits.iloc[0]["machine"])


@dataclass(frozen=True)
class ReportData:
    """What the figures, REPORT.md and DETAILS.md are drawn from, read once. runs: the newest run
    of each study on each machine (load_runs' dicts); frame: their cells (cells_frame); loc_rows:
    loc.csv's rows; history: the cells of every committed run, for repeatability (the newest
    runs' cells where only those were read); the verify, verify-train and cross-check records."""

    runs: list[dict]
    frame: pd.DataFrame
    loc_rows: list[dict]
    history: pd.DataFrame
    verify_rows: list[dict] = field(default_factory=list)
    verify_train_rows: list[dict] = field(default_factory=list)
    crosschecks: list[dict] = field(default_factory=list)
    answer: dict = field(default_factory=dict)  # device -> the api_levels run id that answers (answer_run)
    machines: dict = field(default_factory=dict)  # device -> the machine that answers (answering_machines)
    floors: dict = field(default_factory=dict)  # device -> measure.fastest_call.Fastest of that run
    partial: list = field(default_factory=list)  # partial_runs: runs never used, named with how to finish


def resolve_machine(machine: str, known: list[str], root: Path) -> str:
    """MACHINE as given: a machine's full name (hosts.assign's), or a part of exactly one name
    ('58.3 G', 'Intel Xeon'): names that tell hosts apart are long to type."""
    if machine in known:
        return machine
    hits = [m for m in known if machine.lower() in m.lower()]
    if len(hits) == 1:
        return hits[0]
    why = "names several machines" if hits else "no runs of that machine"
    raise HarnessError(f"MACHINE {machine!r}: {why} in {root}; machines: {hits or known}")


def load_report(root: Path, loc_rows: list[dict], every_run: bool = False,
                machine: str | None = None) -> ReportData:
    """The report's data from a results folder: every committed run is read, as every number pools
    the runs of the same code (pool); every_run: `history` holds every run's cells, otherwise the
    newest runs' (pooled) cells. machine: the machine whose runs answer (None: answering_machines';
    resolve_machine: or a part of its name)."""
    runs, frame, history = load_with_history(root, every_run)
    if machine is not None:
        machine = resolve_machine(machine, sorted(set(frame["machine"])) if not frame.empty else [], root)
    machines = answering_machines(runs, frame, machine) if not frame.empty else {}
    answer = {d: answer_run(frame, d, machines.get(d)) if machines.get(d) else None for d in ("cpu", "gpu")}
    floors = {d: fastest_call.fastest_measured(d, root, run_id=r) for d, r in answer.items() if r is not None}
    return ReportData(runs=runs, frame=frame, loc_rows=loc_rows, verify_rows=verify_records(root),
                      history=history if every_run else frame, crosschecks=crosscheck_records(root),
                      verify_train_rows=verify_records(root, "verify-train-*.json"),
                      answer=answer, machines=machines, floors=floors, partial=partial_runs(root))


def find(frame: pd.DataFrame, study: str, label: str, device: str = "cpu", batch: int = 1,
         dtype: str = "float32", machine: str | None = None, threads: int | None = None) -> pd.Series | None:
    """The first ok cell of that study, label, device, batch, dtype (and machine), or None. threads:
    None for a cell at the study's own thread count, else the cell's `threads`. Its columns compared
    as arrays (a report asks a few hundred times: none builds a frame)."""
    if frame.empty:
        return None
    wanted = {"status": "ok", "study": study, "label": label, "device": device, "batch_size": batch,
              "dtype": dtype}
    mask = np.ones(len(frame), dtype=bool)
    for column, value in wanted.items():
        mask &= frame[column].to_numpy() == value
    for place in np.flatnonzero(mask):
        cell = frame.iloc[place]
        if (machine is None or cell["machine"] == machine) and ("threads" not in frame or (
                pd.isna(cell["threads"]) if threads is None else cell["threads"] == threads)):
            return cell
    return None


def ratio_ci(a: pd.Series | None, b: pd.Series | None) -> dict | None:
    """a's time over b's, taken within rounds (both from the same newest run), pooled over the runs
    both cells pool (pool: stats.pooled_round_ratio; `runs` says how many), with its interval; no
    interval (NaN) where the rounds cannot support one (stats.interval_supported)."""
    if a is None or b is None or a["run_id"] != b["run_id"] or a["study"] != b["study"]:
        return None  # a campaign gives several studies one run id: their rounds are not shared
    theirs = {run_id: (rounds, processes) for run_id, rounds, processes in pooled_rounds(b)}
    shared = [((rounds, processes), theirs[run_id]) for run_id, rounds, processes in pooled_rounds(a)
              if run_id in theirs]
    r = stats.pooled_round_ratio(shared)
    if r is not None and (r["thin"] or a.get("thin", False) or b.get("thin", False)):
        r = {**r, "ci95_low": float("nan"), "ci95_high": float("nan"), "thin": True}
    return r


def pooled_rounds(cell: pd.Series) -> list[tuple]:
    """(run id, rounds, processes) of each run a cell pools (pool's `pool`; else its own run's)."""
    found = cell.get("pool")
    if isinstance(found, list):
        return found
    return [(cell["run_id"], cell["rounds_ns"], cell.get("round_process"))]


def ratio(a: pd.Series | None, b: pd.Series | None) -> float | None:
    r = ratio_ci(a, b)
    return r["ratio"] if r else None
