"""Every machine but the answering ones on a short page of its own, reports/machines/NAME.md: what it
is, the runs it holds, its batch-1 `api_levels` table for each device and what it found (its fastest
call, its raw library's, each other study's fastest), no figures; REPORT.md's machines table links
each page (templates/machine_page.md.j2 words it). REPORT.md and DETAILS.md show the answering
machines only (rundata.answering_machines).

    FOLDER                                  the pages' folder, beside REPORT.md
    page_name(env) -> str                   NAME: 'fp-908ec61c984e', or 'legacy-<hash of its key>'
    names(data) -> {machine: NAME}          every machine but the answering ones
    pages(data) -> {NAME: text}             every page
    write(found, folder) -> [Path]          each page whole (temp + rename); a page no machine has now removed
"""

import hashlib
from pathlib import Path

import pandas as pd

from harness import registry
from harness.machine.files import write_atomic
from harness.report.claims import hosts, pairs
from harness.report.claims.headline import RAW, default_call, fastest, ok_batch1
from harness.report.claims.rundata import ReportData, missing_studies, ratio_ci
from harness.report.markup import quote
from harness.report.markup.style import ok_cells
from harness.report.markup.tables import table
from harness.report.sections import machines as machines_table

FOLDER = "machines"  # reports/machines/, beside REPORT.md
TEMPLATE = "machine_page.md.j2"
PREFIXES = ("fp-", "legacy-")  # the pages this module writes (write removes only its own)


def page_name(env: dict) -> str:
    """A machine's page name, from its key (hosts.key): its fingerprint, or a hash of what a run before
    the fingerprint recorded."""
    if env.get("fingerprint"):
        return f"fp-{env['fingerprint']}"
    return "legacy-" + hashlib.sha256(hosts.key(env).encode()).hexdigest()[:12]


def newest_envs(runs: list[dict]) -> dict[str, dict]:
    """machine -> the environment of its newest run (in this checkout's order)."""
    return {run["machine"]: run["env"] for run in sorted(runs, key=lambda r: (r["order"], r["run_id"]))}


def names(data: ReportData) -> dict[str, str]:
    """machine -> its page's NAME, for every machine but the answering ones, by name."""
    answering = set(data.machines.values())
    return {machine: page_name(env) for machine, env in sorted(newest_envs(data.runs).items())
            if machine not in answering}


def run_rows(runs: list[dict], machine: str) -> list[list[object]]:
    """One row per study the machine ran: its newest run, its commit, whether it was a clean tree."""
    rows = []
    for run in sorted((r for r in runs if r["machine"] == machine), key=lambda r: r["study"]):
        prov = run["env"].get("provenance") or {}
        commit = (prov.get("commit") or "")[:10] or "not recorded"
        dirty = " (uncommitted changes)" if prov.get("dirty") else ""
        rows.append([f"`{run['study']}`", f"`{run['run_id']}`", commit + dirty])
    return rows


def level_rows(frame: pd.DataFrame, run_id: str, device: str) -> tuple[list[list[str]], list[pd.Series]]:
    """The batch-1 table of one device: each level's calls (its first-written call first), median
    [95% CI] and marks, the runs it pools, its within-round ratio to the device's raw library."""
    cells = ok_batch1(frame, "api_levels", run_id, device)
    raw = fastest(cells, RAW[device]) if RAW.get(device) else None
    rows, quoted = [], []
    for impl in registry.levels():
        mine = cells[cells["implementation"] == impl]
        first = default_call(cells, impl)
        others = [c for _, c in mine.iterrows() if first is None or c["cell_id"] != first["cell_id"]]
        for cell in ([first] if first is not None else []) + others:
            itself = raw is not None and cell["cell_id"] == raw["cell_id"]
            r = ratio_ci(cell, raw) if raw is not None and not itself else None
            rows.append([f"{registry.display(impl)}: `{cell['variant']}`"
                         + (" (as first written)" if first is not None and cell is first else ""),
                         quote.quoted(cell, headline=True), str(int(cell["runs"])),
                         "1 (itself)" if itself else quote.times(r)])
            quoted.append(cell)
    return rows, quoted


def study_lines(frame: pd.DataFrame, machine: str) -> list[dict]:
    """Each other study of the machine with ok cells: how many, and its fastest batch-1 float32 cell
    (of any batch where it has none)."""
    out = []
    for study in sorted(set(frame.loc[frame["machine"] == machine, "study"])):
        if study == "api_levels":
            continue
        cells = ok_cells(frame, study, machine=machine)
        cells = cells[cells["implementation"].map(registry.computes)] if not cells.empty else cells
        if cells.empty:
            continue
        one = cells[(cells["batch_size"] == 1) & (cells["dtype"] == "float32")]
        best = (one if not one.empty else cells).sort_values(["median_ms", "cell_id"]).iloc[0]
        out.append({"study": study, "cells": len(cells), "best": best})
    return out


def page(data: ReportData, machine: str, name: str, same_type: list[pairs.Pair]) -> str:
    """One machine's page; same_type: pairs.pairs' claims (those of this machine are said)."""
    from harness.report.markup import words

    env = newest_envs(data.runs)[machine]
    mine = [r for r in data.runs if r["machine"] == machine]
    measured: set[str] = set()
    for run in mine:
        measured |= machines_table.measured_levels(run)
    described = machines_table.describe(env, measured)
    devices = []
    for device in ("cpu", "gpu"):
        found = [r for r in sorted(mine, key=lambda r: (r["order"], r["run_id"]), reverse=True)
                 if r["study"] == "api_levels"
                 and not ok_batch1(data.frame, "api_levels", r["run_id"], device).empty]
        if not found:
            continue
        run = found[0]
        rows, quoted = level_rows(data.frame, run["run_id"], device)
        cells = ok_batch1(data.frame, "api_levels", run["run_id"], device)
        best = fastest(cells)
        if best is None:  # its run timed nothing at batch 1 in float32 on the device
            continue
        devices.append({"device": device, "run": run["run_id"], "raw": registry.short(RAW[device]),
                        "table": table(["level: call", "median [95% CI]", "runs pooled",
                                        f"x {registry.short(RAW[device])} (within rounds) [95% CI]"], rows),
                        "fastest": best, "raw_cell": fastest(cells, RAW[device]),
                        "notes": quote.mark_notes(quoted, headline=True)})
    return words.render(TEMPLATE, machine=machine, name=name, answering=data.machines,
                        environment=table(["", ""], [[k, v if v not in (None, "") else "–"]
                                                     for k, v in described.items()]),
                        runs=table(["study", "newest run", "commit"], run_rows(mine, machine)),
                        missing=missing_studies(mine, machine), devices=devices,
                        studies=study_lines(data.frame, machine),
                        pairs=[p for p in same_type if machine in (p.older, p.newer)])


def pages(data: ReportData) -> dict[str, str]:
    """NAME -> the page of every machine but the answering ones."""
    same_type = pairs.pairs(data.runs, data.frame)
    return {name: page(data, machine, name, same_type) for machine, name in names(data).items()}


def write(found: dict[str, str], folder: Path) -> list[Path]:
    """Each page to folder/NAME.md, whole or not at all; a page of a machine no longer here (or now
    answering) is removed, so the folder is what the rows say."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [write_atomic(folder / f"{name}.md", text) for name, text in sorted(found.items())]
    for old in folder.glob("*.md"):
        if old.stem.startswith(PREFIXES) and old.stem not in found:
            old.unlink()
    return written
