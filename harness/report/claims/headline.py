"""The report's answer: one row per level of the ladder, with its lines of code, its batch-1
latency on the CPU and on the GPU (each with its ratio to that device's raw library, taken
within rounds), and its GPU throughput at the largest batch. A cell that was not measured is
"–" with a footnote that says why. Every number is read from a results row or loc.csv, and pools
every run of the same code on its machine (rundata.pool: its interval resamples runs, processes
and rounds; `runs` says how many)."""

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from harness import registry
from harness.report.claims import bill, loc
from harness.report.claims.rundata import answer_run, ratio_ci
from harness.report.markup import quote
from harness.report.markup.style import IMPL_ORDER, ok_cells
from harness.report.markup.tables import sig3, table

# The rows in the ladder's order (each level's spec: `order`, its row name `display`), and each
# device's raw library (`raw_for`): the ratios' denominator.
LEVELS = [(registry.display(i), i) for i in IMPL_ORDER]  # (row, implementation)
RAW = {d: raw for d in registry.DEVICES if (raw := registry.raw_library(d))}
STUDY, SWEEP = "api_levels", "batch_sweep"


def as_first_written(level: str) -> str:
    """'keras/predict': a level's call as a newcomer first writes it (its registry entry's first_written)."""
    return f"{level}/{registry.first_written(level)}"


REFERENCE = as_first_written(registry.on_rung("reference")[0])  # the oracle's call: the `x numpy` columns'
HIGH_LEVEL = as_first_written(registry.on_rung("high-level API")[0])  # Keras `model.predict` on TensorFlow


@dataclass
class Level:
    name: str
    implementation: str
    loc: int | None = None
    first: dict = field(default_factory=dict)  # device -> the default call's batch-1 cell (as first written)
    cells: dict = field(default_factory=dict)  # device -> the fastest ok batch-1 cell of any variant
    first_ratios: dict = field(default_factory=dict)  # device -> the default's within-round ratio to raw
    ratios: dict = field(default_factory=dict)  # device -> the fastest's within-round ratio to raw
    throughput: pd.Series | None = None  # the fastest ok cell at the GPU sweep's largest batch
    bills: dict = field(default_factory=dict)  # device -> bill.Bill of the first-written call
    missing: dict = field(default_factory=dict)  # column -> why not measured


def ok_batch1(frame: pd.DataFrame, study: str, run_id: str | None, device: str) -> pd.DataFrame:
    """The ok batch-1 float32 cells of one run on one device (at the study's own thread count)."""
    cells = ok_cells(frame, study, run_id=run_id, device=device, batch_size=1, dtype="float32")
    return cells[cells["threads"].isna()] if "threads" in cells else cells


def fastest(cells: pd.DataFrame, implementation: str | None = None) -> pd.Series | None:
    """The cell with the lowest median (of one implementation, or of every level that computes: the
    null level does not): the report's one definition of "fastest"; ties go to the first in the
    rows' order."""
    part = (cells[cells["implementation"].map(registry.computes)]
            if implementation is None else cells[cells["implementation"] == implementation])
    return None if part.empty else part.loc[part["median_ms"].idxmin()]


def default_call(cells: pd.DataFrame, implementation: str) -> pd.Series | None:
    """The level's call as a newcomer first writes it (predict, eager, layers, tuned)."""
    variant = registry.first_written(implementation)
    part = cells[(cells["implementation"] == implementation) & (cells["variant"] == variant)]
    return None if part.empty else part.iloc[0]


def why_missing(frame: pd.DataFrame, study: str, machine: str | None, implementation: str,
                device: str) -> str:
    """Why a cell has no number: its skipped row's reason, the level's devices, or its absence."""
    spec = registry.REGISTRY.get(implementation)
    if spec and device not in spec.devices:
        return f"runs on the {spec.devices[0].upper()} only"
    if machine is None:
        return f"no {device.upper()} results in `{study}`"
    if not frame.empty:
        rows = frame[(frame["study"] == study) & (frame["machine"] == machine)
                     & (frame["implementation"] == implementation) & (frame["device"] == device)
                     & (frame["status"] != "ok")]
        if not rows.empty:
            return short_reason(rows.iloc[0]["reason"], rows.iloc[0]["status"])
    return f"not measured by `{study}` on {machine}"


def short_reason(reason: str, status: str) -> str:
    if "No module named 'tensorflow'" in reason:
        return ("the GPU machine has no TensorFlow (its GPU build, `pip install 'tensorflow[and-cuda]'`, "
                "was not installed there)")
    first = reason.split("; ")[0].split(". ")[0]
    return f"{status}: {first}"


Table = tuple[list[Level], dict]  # levels(): the table's rows and {device: machine}


def levels(frame: pd.DataFrame, loc_rows: list[dict], answer: dict | None = None) -> Table:
    """The table's rows, and {device: machine} of the runs they come from. answer: {device: the
    api_levels run id that answers} (rundata.answer_run's; by default the newest runs'). A page asks
    once and passes the answer on to its sections (their `known`)."""
    if frame.empty:
        return [], {"cpu": None, "gpu": None}
    answer = answer if answer is not None else {d: answer_run(frame, d) for d in ("cpu", "gpu")}
    machines = {d: machine_of(frame, answer.get(d)) for d in ("cpu", "gpu")}
    batch1 = {d: ok_batch1(frame, STUDY, answer.get(d), d) for d in ("cpu", "gpu")}
    raws = {d: fastest(batch1[d], RAW[d]) if not batch1[d].empty else None for d in batch1}
    sweep_gpu = ok_cells(frame, SWEEP, device="gpu", machine=machines["gpu"])
    largest = sweep_gpu["batch_size"].max() if not sweep_gpu.empty else None
    found = bill.bills(frame, answer)
    out = []
    for name, impl in LEVELS:
        level = Level(name, impl, loc.first_written(loc_rows, impl))
        level.bills = {d: b for (i, d), b in found.items() if i == impl}
        for device in ("cpu", "gpu"):
            cell = fastest(batch1[device], impl) if not batch1[device].empty else None
            if cell is None:
                level.missing[device] = why_missing(frame, STUDY, machines[device], impl, device)
                continue
            elsewhere = faster_elsewhere(frame, cell, set(batch1[device]["variant"][
                batch1[device]["implementation"] == impl]))
            if elsewhere is not None:  # another study of this machine timed a faster call
                cell = elsewhere
            level.cells[device] = cell
            first = default_call(batch1[device], impl)
            if first is not None:
                level.first[device] = first
            if impl != RAW[device]:
                level.ratios[device] = (ratio_ci(cell, raws[device]) or same_rounds(frame, cell, RAW[device])
                                        or ratio_of_medians(cell, raws[device]))
            raw = raws[device]
            if first is not None and raw is not None and first["cell_id"] != raw["cell_id"]:
                level.first_ratios[device] = ratio_ci(first, raw)
        at = sweep_gpu[(sweep_gpu["batch_size"] == largest) & (sweep_gpu["implementation"] == impl)]
        if at.empty:
            level.missing["throughput"] = why_missing(frame, SWEEP, machines["gpu"], impl, "gpu")
        else:
            level.throughput = at.loc[at["images_per_s"].idxmax()]
        if level.cells or level.loc is not None:
            out.append(level)
    return out, machines


def faster_elsewhere(frame: pd.DataFrame, cell: pd.Series, timed: set[str]) -> pd.Series | None:
    """A faster batch-1 call of the same level on the same machine and device, of a variant the
    answering run did not time (`timed`), that another study timed (in its own rounds, not the raw
    library's), or None: the headline shows it, with a ratio of medians, rather than claim that a
    slower call is the level's fastest."""
    others = frame[(frame["machine"] == cell["machine"]) & (frame["study"] != cell["study"])
                   & ~frame["variant"].isin(timed)
                   & (frame["status"] == "ok") & (frame["implementation"] == cell["implementation"])
                   & (frame["device"] == cell["device"]) & (frame["batch_size"] == 1)
                   & (frame["dtype"] == "float32") & (frame["mode"] == "inference")
                   & (frame["median_ms"] < cell["median_ms"])]
    if "threads" in others:
        others = others[others["threads"].isna()]
    return None if others.empty else fastest(others)


def same_rounds(frame: pd.DataFrame, cell: pd.Series, raw: str) -> dict | None:
    """cell's time over the raw library's fastest call in cell's own run (another study's, where the
    headline's fastest call came from one that also timed the raw library): a within-round ratio,
    marked with the study and the raw call it is against; None where that run did not time it."""
    theirs = ok_cells(frame, cell["study"], run_id=cell["run_id"], device=cell["device"], batch_size=1,
                      dtype=cell["dtype"], implementation=raw)
    if "threads" in theirs:
        theirs = theirs[theirs["threads"].isna()]
    raw_cell = fastest(theirs) if not theirs.empty else None
    r = ratio_ci(cell, raw_cell)
    if r is None or raw_cell is None:
        return None
    return {**r, "study": cell["study"], "against": raw_cell["label"]}


def ratio_of_medians(a: pd.Series, b: pd.Series | None) -> dict | None:
    """a's median over b's, for cells of different runs: no shared rounds, so no interval."""
    return None if b is None else {"ratio": a["median_ms"] / b["median_ms"], "ci95_low": float("nan"),
                                   "ci95_high": float("nan"), "thin": False, "across_runs": True}


def machine_of(frame: pd.DataFrame, run_id: str | None) -> str | None:
    if run_id is None or frame.empty:
        return None
    hits = frame[(frame["run_id"] == run_id) & (frame["study"] == STUDY)]
    return None if hits.empty else str(hits.iloc[0]["machine"])


def latency(cell: pd.Series) -> str:
    """'47 ms [43.8–49.4 ms] `predict`', then its marks (quote.quoted): the cell's pooled median and
    interval (rundata.pool)."""
    found = quote.caveats(cell, headline=True)
    return f"{quote.value(cell)} `{cell['variant']}`" + "".join(f" *{m}*" for m in found)


def images_per_s(cell: pd.Series) -> str:
    marks = "".join(f" *{m}*" for m in quote.caveats(cell, headline=True))
    return f"{int(float(sig3(cell['images_per_s']))):,}/s `{cell['variant']}`{marks}"


def times_raw(lv: Level, device: str, which: str) -> str:
    """'; 1700x [1530–1780]' against the device's raw library, within rounds (pooled over the runs
    both cells pool: rundata.ratio_ci); '; 1 (itself)'."""
    cell = (lv.first if which == "first" else lv.cells).get(device)
    itself = lv.implementation == RAW[device]
    if itself and cell is not None and cell["cell_id"] == lv.cells[device]["cell_id"]:
        return "; 1 (itself)"
    r = (lv.first_ratios if which == "first" else lv.ratios).get(device)
    if not r:
        return ""
    across = f" (`{cell['study']}`; medians across runs)" if r.get("across_runs") and cell is not None else ""
    if r.get("against"):  # headline.same_rounds: within the rounds of the study the cell came from
        across = f" (`{r['study']}`, within its rounds, against {r['against']})"
    return f"; {quote.times(r)}{across}"


def bill_columns(lv: Level, dash: Callable[[str], str]) -> list[str]:
    """The rest of the bill on the CPU (memory, start-up, install size), or why it is missing."""
    found = lv.bills.get("cpu")
    if found is None:
        why = (lv.missing.get("cpu") if "cpu" not in lv.cells
               else "not recorded: the run that answers predates the bill's measurements")
        return [dash(why or "not measured")] + ["–"] * 2
    return [f"{bill.peak_text(found)} ({found.import_mb:,.0f} MiB)", bill.startup_text(found),
            bill.installed_text(found)]


def render(frame: pd.DataFrame, loc_rows: list[dict], answer: dict | None = None,
           threads: int | None = None, known: Table | None = None) -> tuple[list[str], dict]:
    """The headline table, its footnotes and its marks' notes, as Markdown lines; {device:
    machine} behind them. threads: the CPU columns' thread count (first_screen.cpu_threads), named
    in their header. known: levels() of these, where the caller has it."""
    rows, machines = known or levels(frame, loc_rows, answer)
    if not rows:
        return ["_No results yet: run `make run-all`._"], machines
    notes: list[str] = []

    def dash(why: str) -> str:
        if why not in notes:
            notes.append(why)
        return f"– ({chr(ord('a') + notes.index(why))})"

    raw_name = {d: registry.short(RAW[d]) for d in RAW}
    body, quoted = [], []
    for lv in rows:
        line = [lv.name, str(lv.loc) if lv.loc is not None
                else dash("lines of code not counted (no package)")]
        for device in ("cpu", "gpu"):
            if device not in lv.cells:
                line += [dash(lv.missing[device]), "–"]
                continue
            first, best = lv.first.get(device), lv.cells[device]
            line.append(latency(first) + times_raw(lv, device, "first")
                        if first is not None else "– (default call not measured)")
            line.append("the same call" if first is not None and first["cell_id"] == best["cell_id"]
                        else latency(best) + times_raw(lv, device, "fastest"))
            quoted += [c for c in (first, best) if c is not None]
        if lv.throughput is not None:
            line.append(images_per_s(lv.throughput))
            quoted.append(lv.throughput)
        else:
            line.append(dash(lv.missing["throughput"]))
        line += bill_columns(lv, dash)
        body.append(line)
    largest = next((int(lv.throughput["batch_size"]) for lv in rows if lv.throughput is not None), None)
    headers = ["level", "code lines",
               f"CPU{', one thread' if threads == 1 else ''}, batch 1, as first written: "
               f"median [95% CI], x {raw_name['cpu']}",
               f"CPU, batch 1, fastest call measured, x {raw_name['cpu']}",
               "GPU, batch 1, as first written: median [95% CI], "
               f"x {raw_name['gpu']}",
               f"GPU, batch 1, fastest call measured, x {raw_name['gpu']}",
               f"GPU throughput, batch {largest}" if largest else "GPU throughput, largest batch",
               "memory, CPU: peak resident after its first calls [range over processes] (import's share)",
               "start-up, CPU: to the first answer [range over processes]",
               bill.INSTALLED_HEADER]
    out = [table(headers, body), ""]
    out += [f"({chr(ord('a') + i)}) {why}." for i, why in enumerate(notes)]
    marks = quote.mark_notes(quoted, headline=True)
    if marks:
        out += [""] + [f"{line}" for line in marks]
    return out, machines


SHORT = {name: registry.short(name) for name in registry.REGISTRY}  # each spec's `short`


def points(frame: pd.DataFrame, loc_rows: list[dict], answer: dict | None = None) -> list[dict]:
    """One point per level and device: x lines of code, y median and its interval (ms), and the
    marks its number carries (quote.caveats: stale, thin, noisy, contended)."""
    rows, machines = levels(frame, loc_rows, answer)
    return [{"implementation": lv.implementation, "device": d, "loc": lv.loc, "machine": machines[d],
             "label": cell["label"], "median": cell["median_ms"], "low": cell["ci_low_ms"],
             "high": cell["ci_high_ms"], "marks": quote.caveats(cell)}
            for lv in rows if lv.loc is not None for d, cell in lv.cells.items()]
