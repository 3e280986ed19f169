"""The full bill of a level, beside its time and its code: host memory by stage, start-up to the
first answer, and what must be installed, read from the cells of the run that answers.

Each number comes from the worker that started for the level's first-written call (its own
process: a second cell of a worker would find the framework already imported). What every level
shares (the interpreter, NumPy, h5py, the harness) is the null level's bill in the same run, and is
shown apart: a level's own memory and install size are its bill over the null level's.

    Bill                                    one level on one device, in MB and seconds
    bill_of(cell, shared) -> Bill | None    None: the run recorded no memory (older runs)
    bills(frame, answer) -> {(impl, device): Bill}   every level of the answering runs
    null_cell(frame, run_id)                the null level's cell: the shared part of every bill
    installed_mb(installed) -> {name: MB}
"""

from dataclasses import dataclass

import pandas as pd

from harness import registry
from harness.report.markup.tables import table

MB = 2**20  # the bill's memory and sizes are in MiB (the variables say _mb)


@dataclass(frozen=True)
class Bill:
    implementation: str
    device: str
    label: str
    baseline_mb: float  # resident before the framework's import: the interpreter, harness, images
    import_mb: float  # added by importing the level (its framework)
    model_mb: float  # added by building the model (weights converted, plans, graphs)
    calls_peak_mb: float  # the resident peak during the timed calls
    startup_s: float  # import + build + first call: the time before the first answer
    import_s: float
    build_s: float
    first_call_s: float
    install_mb: float  # distributions and system libraries beyond the null level's
    install_count: int  # how many of them
    biggest: tuple[tuple[str, float], ...]  # its three largest (name, MB)
    shared_mb: float  # what the null level itself needs installed (every level shares it)


def installed_mb(installed: dict | None) -> dict[str, float]:
    """{distribution or library: MB} of a worker's `installed` record."""
    if not installed:
        return {}
    out = {name: d["bytes"] / MB for name, d in installed.get("distributions", {}).items()}
    out.update({path: size / MB for path, size in installed.get("system_libraries", {}).items()})
    return out


def bill_of(cell: pd.Series, shared: dict[str, float] | None = None) -> Bill | None:
    """A cell's bill; shared: what the null level installed (installed_mb of its cell), kept apart."""
    memory = cell.get("memory")
    if not isinstance(memory, dict) or cell.get("own_process") is False or not memory.get("baseline"):
        return None
    mine = installed_mb(cell.get("installed"))
    own = {k: v for k, v in mine.items() if k not in (shared or {})}
    peak = cell.get("rss_peak") or memory.get("first_calls_peak") or memory["model"]
    first = cell["cold_start_ms"] / 1e3
    return Bill(cell["implementation"], cell["device"], cell["label"], memory["baseline"] / MB,
                (memory["import"] - memory["baseline"]) / MB, (memory["model"] - memory["import"]) / MB,
                peak / MB, cell["import_s"] + cell["load_s"] + first, cell["import_s"], cell["load_s"], first,
                sum(own.values()), len(own),
                tuple(sorted(own.items(), key=lambda kv: -kv[1])[:3]),
                sum((shared or {}).values()))


def null_cell(frame: pd.DataFrame, run_id: str | None) -> pd.Series | None:
    """The null level's cell in the run: what the harness alone costs."""
    if run_id is None or frame.empty:
        return None
    cells = frame[(frame["run_id"] == run_id) & (frame["study"] == "api_levels")
                  & (frame["implementation"] == "null") & (frame["status"] == "ok")]
    return None if cells.empty else cells.iloc[0]


def bills(frame: pd.DataFrame, answer: dict) -> dict[tuple[str, str], Bill]:
    """{(implementation, device): its bill} for each level's first-written call in the answering
    api_levels runs (registry order), where the run recorded one."""
    out: dict[tuple[str, str], Bill] = {}
    for device, run_id in answer.items():
        if run_id is None or frame.empty:
            continue
        null = null_cell(frame, run_id)
        shared = installed_mb(null.get("installed")) if null is not None else None
        cells = frame[(frame["run_id"] == run_id) & (frame["study"] == "api_levels")
                      & (frame["status"] == "ok") & (frame["device"] == device) & (frame["batch_size"] == 1)
                      & (frame["dtype"] == "float32")]
        for name, spec in registry.REGISTRY.items():
            if name == "null":
                continue
            first = cells[(cells["implementation"] == name) & (cells["variant"] == spec.variants[0])]
            found = bill_of(first.iloc[0], shared) if not first.empty else None
            if found is not None:
                out[(name, device)] = found
    return out


# what an install size's "(7)" counts, said in every table that shows one
INSTALLED_HEADER = "installed beyond the harness (how many distributions and shared libraries)"


def installed_text(b: Bill) -> str:
    """'15 MiB (7)': the install size beyond the harness and how many distributions and shared
    libraries it is (INSTALLED_HEADER says so in the column's header)."""
    return f"{b.install_mb:,.0f} MiB ({b.install_count})"


def section(frame: pd.DataFrame, answer: dict) -> list[str]:
    """DETAILS' table of the full bill: every level's stages, start-up and install, per device."""
    found = bills(frame, answer)
    head = ["", "## The full bill: memory, start-up, what must be installed (Fig. 12)", "",
            "Read in each level's own worker process, for its first-written call (`api_levels`): "
            "resident memory (VmRSS) before the import (the interpreter, the harness, the test images), "
            "what importing the level and building the model add, and the peak (VmHWM, reset before each "
            "timed round) during the timed calls; start-up is import + build + first call, the time before "
            "the first answer; installed is the size on disk of the distributions the worker imported and "
            "the shared libraries it mapped that no distribution ships, beyond what the null level (the "
            "harness alone) needs, which is shown apart."]
    if not found:
        return head + ["", "_No run that answers recorded the bill yet: `make run-all` measures it._"]
    rows = [[b.label, b.device, f"{b.baseline_mb:,.0f} MiB", f"+{b.import_mb:,.0f} MiB",
             f"+{b.model_mb:,.0f} MiB", f"{b.calls_peak_mb:,.0f} MiB", f"{b.import_s:.2f} s",
             f"{b.build_s:.2f} s", f"{b.first_call_s:.3g} s", f"{b.startup_s:.2g} s",
             installed_text(b),
             ", ".join(f"{name.rsplit('/', 1)[-1]} {mb:,.0f} MiB" for name, mb in b.biggest) or "–",
             f"{b.shared_mb:,.0f} MiB"]
            for (impl, device), b in sorted(found.items(), key=lambda kv: (kv[0][1], order(kv[0][0])))]
    headers = ["level/call", "device", "before import", "import", "model", "peak in calls", "import time",
               "build", "first call", "to first answer", INSTALLED_HEADER, "largest",
               "the harness's own"]
    return head + ["", table(headers, rows)]


def order(implementation: str) -> int:
    names = list(registry.REGISTRY)
    return names.index(implementation) if implementation in names else len(names)
