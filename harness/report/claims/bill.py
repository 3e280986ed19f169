"""The full bill of a level, beside its time and its code: host memory by stage, start-up to the
first answer, and what must be installed, read from the cells of the run that answers.

Memory and start-up belong to the level's call as first written, and are read in every worker
process of the answering run that set it up (process_bills), then given as the median and the range
over those processes. One process sets up all of a level's variants in turn, so where the call was
not the first its worker set up, what it reached is what a process of its own would: the process's
resident memory after the framework's import (read by the process's first variant), plus what this
call added from the start of its own set-up to its first calls; its start-up is that import's time
plus its own build and first call (a first call after another variant's is warmer than a fresh
process's: `own` counts the processes that started for it). What every level shares (the
interpreter, NumPy, h5py, the harness) is the null level's bill in the same run, and is shown apart:
a level's own install size is its bill over the null level's.

What must be installed is what a pip install of the level's own distributions requires (their
Requires-Dist closure, recorded by the runner: harness.measure.inside.requires), the shared
libraries it mapped that no distribution ships, and the system tools it runs (the C compiler).
On the GPU a level is installed with its GPU extra: what the worker loaded of its distributions'
extras counts there. What the worker imported only because it was installed (TensorFlow imports
JAX, SciPy, pandas, matplotlib where they are) is left out of the size and shown apart. A level
with no distribution of its own (C) counts what its worker loaded; so does a row recorded before
the closure was (read as before, and said so).

    Bill                                    one level on one device, in MB and seconds
    bill_of(cell, shared) -> Bill | None    None: the run recorded no memory (older runs)
    process_bills(setups) -> [{...}]        per process: start-up and memory reached (a cell's `setups`)
    bills(frame, answer) -> {(impl, device): Bill}   every level of the answering runs
    null_cell(frame, run_id)                the null level's cell: the shared part of every bill
    installed_mb(installed) -> {name: MB}   what a worker loaded (the null level's: the harness's own)
    install_of(installed, shared) -> Install   what a level needs installed beyond the harness
"""

from dataclasses import dataclass, field

import pandas as pd

from harness import registry
from harness.measure.inside.requires import normal
from harness.report.markup import words
from harness.report.markup.style import ok_cells
from harness.report.markup.tables import compact

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
    install_mb: float  # what must be installed beyond the null level's: install_of's counted
    install_count: int  # how many of them (distributions, shared libraries, system tools' files)
    biggest: tuple[tuple[str, float], ...]  # its three largest (name, MB)
    shared_mb: float  # what the null level itself needs installed (every level shares it)
    not_required: tuple[tuple[str, float], ...] = ()  # imported because installed, not required (MB)
    tools_mb: float = 0.0  # of install_mb: the system tools it runs (the C compiler)
    tools_count: int = 0
    compiler: str = ""  # the tools' `--version` line, or why they could not be read
    basis: str = "required"  # install_of's basis: required, loaded, older
    compiled: bool = False  # its start-up compiled its code in an empty cache (registry's compile_cache)
    # over the processes that set the call up (process_bills): how many, how many started for it, and
    # the least and most start-up (s) and peak (MB) of them; the fields above are their medians
    processes: int = 1
    own_processes: int = 1
    startup_range: tuple[float, float] | None = None
    peak_range: tuple[float, float] | None = None


@dataclass(frozen=True)
class Install:
    """What a level needs installed beyond the harness (MB by distribution name or file path)."""
    counted: dict[str, float] = field(default_factory=dict)  # in the install size, system tools included
    tools: dict[str, float] = field(default_factory=dict)  # of counted: the system tools' files
    not_required: dict[str, float] = field(default_factory=dict)  # imported, outside the requirements
    compiler: str = ""  # the system tools' compiler (`--version`'s line), or "not read: why"
    # required: the Requires-Dist closure of its own distributions; loaded: what its worker loaded
    # (a level with no distribution of its own); older: the same reading, from a row recorded
    # before the closure was
    basis: str = "required"


def installed_mb(installed: dict | None) -> dict[str, float]:
    """{distribution or library: MB} of what a worker's `installed` record says it loaded."""
    if not installed:
        return {}
    out = {name: d["bytes"] / MB for name, d in installed.get("distributions", {}).items()}
    out.update({path: size / MB for path, size in installed.get("system_libraries", {}).items()})
    return out


def same(name: str) -> str:
    """A distribution's name in PEP 503's normal form (tensorflow_cpu = tensorflow-cpu); a path as it is."""
    return name if name.startswith("/") else normal(name)


def install_of(installed: dict | None, shared: dict[str, float] | None = None,
               device: str = "cpu") -> Install:
    """What a worker's `installed` record says its level needs installed, beyond `shared` (the null
    level's installed_mb: what the harness alone loads): the Requires-Dist closure of the level's
    own distributions and the shared libraries it mapped that no distribution ships, plus its system
    tools; the distributions it imported outside that closure apart (not_required). Where the record
    has no closure (`required` None: a level with no distribution of its own; absent: an older row),
    what the worker loaded is the bill, as it was read before. On the GPU a level is installed with
    its GPU extra (jax[cuda13]): what the worker loaded of its distributions' extras counts too."""
    if not installed:
        return Install(basis="loaded")
    common = {same(k) for k in shared or {}}
    required = installed.get("required")
    libraries = {p: b / MB for p, b in installed.get("system_libraries", {}).items()}
    if isinstance(required, dict):
        closure = {name: d["bytes"] / MB for name, d in required.get("closure", {}).items()}
        in_closure = {same(name) for name in closure}
        wanted = set(in_closure)
        if device == "gpu":  # its GPU extra's distributions, where the worker loaded them
            wanted |= set(required.get("through_extras", ()))
        loaded = {name: d["bytes"] / MB for name, d in installed.get("distributions", {}).items()}
        extras = {k: v for k, v in loaded.items() if same(k) in wanted and same(k) not in in_closure}
        counted = {**closure, **extras, **libraries}
        apart = {k: v for k, v in loaded.items() if same(k) not in wanted and same(k) not in common}
        basis = "required"
    else:
        counted, apart = installed_mb(installed), {}
        basis = "older" if "required" not in installed else "loaded"
    tools_record = installed.get("system_tools") or {}
    tools = {p: b / MB for p, b in tools_record.get("files", {}).items() if same(p) not in common}
    compiler = tools_record.get("compiler", "")
    if "error" in tools_record:
        compiler = f"not read: {tools_record['error']}"
    counted = {k: v for k, v in counted.items() if same(k) not in common}
    counted.update({p: v for p, v in tools.items() if p not in counted})
    return Install(counted, tools, apart, compiler, basis)


def process_bills(setups: list) -> list[dict]:
    """Per worker process that set the call up (a cell's `setups`: its setup row and that of the cell
    its process started for), what it reached as if in a process of its own: start-up (s), peak
    resident memory after its first calls (MB), the framework's import (s, MB) and whether the
    process started for it. A process whose rows recorded no memory is left out."""
    out = []
    for row, starter in setups:
        mine, first = row.get("memory") or {}, starter.get("memory") or {}
        if not mine.get("baseline") or not first.get("baseline") or row.get("cold_start_ns") is None:
            continue
        own = row is starter or all(row.get(k) == starter.get(k) for k in ("cell_id", "pid"))
        peak = mine.get("first_calls_peak") or mine["model"]
        reached = peak if own else first["import"] + (peak - mine["baseline"])
        import_ns = (row if own else starter).get("import_ns") or 0
        startup_ns = import_ns + (row.get("load_ns") or 0) + row["cold_start_ns"]
        out.append({"own": own, "startup_s": startup_ns / 1e9,
                    "peak_mb": reached / MB, "import_s": import_ns / 1e9,
                    "import_mb": (first["import"] - first["baseline"]) / MB})
    return out


def spread(values: list[float]) -> tuple[float, tuple[float, float]]:
    """(median, (least, most)) of per-process values."""
    ranked = sorted(values)
    mid = len(ranked) // 2
    median = ranked[mid] if len(ranked) % 2 else (ranked[mid - 1] + ranked[mid]) / 2
    return median, (ranked[0], ranked[-1])


def bill_of(cell: pd.Series, shared: dict[str, float] | None = None) -> Bill | None:
    """A cell's bill; shared: what the null level installed (installed_mb of its cell), kept apart.
    Where the cell's processes recorded their set-ups (`setups`), its start-up and peak are their
    medians, with their range (process_bills); else the cell's own set-up, where its process started
    for it."""
    memory = cell.get("memory")
    per = process_bills(cell.get("setups") or []) if isinstance(cell.get("setups"), list) else []
    if per:
        found = install_of(cell.get("installed"), shared, cell["device"])
        startup, startups = spread([p["startup_s"] for p in per])
        peak, peaks = spread([p["peak_mb"] for p in per])
        imported, _ = spread([p["import_mb"] for p in per])
        import_s, _ = spread([p["import_s"] for p in per])
        known = isinstance(memory, dict) and memory.get("baseline")
        baseline = memory["baseline"] / MB if known else float("nan")
        return Bill(cell["implementation"], cell["device"], cell["label"], baseline, imported, float("nan"),
                    peak, startup, import_s, cell["load_s"], cell["cold_start_ms"] / 1e3,
                    sum(found.counted.values()), len(found.counted),
                    tuple(sorted(found.counted.items(), key=lambda kv: -kv[1])[:3]),
                    sum((shared or {}).values()),
                    tuple(sorted(found.not_required.items(), key=lambda kv: -kv[1])),
                    sum(found.tools.values()), len(found.tools), found.compiler, found.basis,
                    flag(cell.get("fresh_compile_cache")), len(per), sum(p["own"] for p in per),
                    startups, peaks)
    if not isinstance(memory, dict) or cell.get("own_process") is False or not memory.get("baseline"):
        return None
    found = install_of(cell.get("installed"), shared, cell["device"])
    own = found.counted
    peak = cell.get("rss_peak") or memory.get("first_calls_peak") or memory["model"]
    first = cell["cold_start_ms"] / 1e3
    return Bill(cell["implementation"], cell["device"], cell["label"], memory["baseline"] / MB,
                (memory["import"] - memory["baseline"]) / MB, (memory["model"] - memory["import"]) / MB,
                peak / MB, cell["import_s"] + cell["load_s"] + first, cell["import_s"], cell["load_s"], first,
                sum(own.values()), len(own),
                tuple(sorted(own.items(), key=lambda kv: -kv[1])[:3]),
                sum((shared or {}).values()),
                tuple(sorted(found.not_required.items(), key=lambda kv: -kv[1])),
                sum(found.tools.values()), len(found.tools), found.compiler, found.basis,
                flag(cell.get("fresh_compile_cache")))


def flag(value: object) -> bool:
    """A row's yes/no that older rows lack (None, or NaN in a frame): no."""
    return bool(value) and not pd.isna(value)


def null_cell(frame: pd.DataFrame, run_id: str | None) -> pd.Series | None:
    """The null level's cell in the run (None: no run, or no such cell): what the harness alone costs."""
    cells = ok_cells(frame, "api_levels", run_id=run_id, implementation="null")
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
        cells = ok_cells(frame, "api_levels", run_id=run_id, device=device, batch_size=1, dtype="float32")
        for name in registry.REGISTRY:
            if name == "null":
                continue
            first = cells[(cells["implementation"] == name)
                          & (cells["variant"] == registry.first_written(name))]
            found = bill_of(first.iloc[0], shared) if not first.empty else None
            if found is not None:
                out[(name, device)] = found
    return out


# what an install size's "(7)" counts, said in every table that shows one
INSTALLED_HEADER = "installed beyond the harness (how many distributions, shared libraries and tools' files)"
OLDER = "all it imported: an older run"  # the install size of a row recorded before the closure was
TEMPLATE = "bill.md.j2"  # the section's words


def installed_text(b: Bill) -> str:
    """'15 MiB (7)': the install size beyond the harness and how many distributions, shared libraries
    and system tools' files it is (INSTALLED_HEADER says so in the column's header); a size read the
    old way (everything imported) says so."""
    return f"{b.install_mb:,.0f} MiB ({b.install_count})" + (f", {OLDER}" if b.basis == "older" else "")


def tools_text(b: Bill) -> str:
    """'cc (Debian 12.2.0-14) 12.2.0: 45 MiB (18 files)': the system tools in the install size."""
    if b.compiler.startswith("not read"):
        return b.compiler
    if not b.tools_count:
        return "–"
    return f"{b.compiler}: {b.tools_mb:,.0f} MiB ({b.tools_count} files)"


NAMED_FROM_MB = 10  # DETAILS' bill names what was imported, not required, from this size; the rest counted


def not_required_text(b: Bill, at_least_mb: float = 1.0) -> str:
    """'jaxlib 348 MiB, scipy 136 MiB and 9 more (3 MiB)': what the worker imported outside the
    level's requirements (left out of its install size), each from `at_least_mb` by name."""
    if b.basis == "older":
        return "not recorded (an older run)"
    named = [(name, mb) for name, mb in b.not_required if mb >= at_least_mb]
    rest = [mb for _name, mb in b.not_required if mb < at_least_mb]
    text = ", ".join(f"{name} {mb:,.0f} MiB" for name, mb in named)
    if rest:
        more = "more" if text else "small ones"
        text += f"{' and ' if text else ''}{len(rest)} {more} ({sum(rest):,.1f} MiB)"
    return text or "–"


def startup_text(b: Bill) -> str:
    """'0.31 s [0.29–0.35 s, 3 processes] (compiles)': start-up to the first answer, the median of
    the processes that set the call up and their range; a level that compiled its code (in an empty
    cache) says so."""
    found = f"{b.startup_s:.2g} s"
    if b.startup_range is not None and b.processes > 1:
        found += f" [{b.startup_range[0]:.2g}–{b.startup_range[1]:.2g} s, {b.processes} processes]"
    return found + (" (compiles)" if b.compiled else "")


def peak_text(b: Bill) -> str:
    """'148 MiB [140–151 MiB, 3 processes]': the peak the call reached, the median of its processes
    and their range."""
    found = f"{b.calls_peak_mb:,.0f} MiB"
    if b.peak_range is not None and b.processes > 1:
        found += f" [{b.peak_range[0]:,.0f}–{b.peak_range[1]:,.0f} MiB, {b.processes} processes]"
    return found


def section(frame: pd.DataFrame, answer: dict) -> list[str]:
    """DETAILS' table of the full bill: every level's stages, start-up and install, per device."""
    found = bills(frame, answer)
    head = ["", words.say(TEMPLATE, "title"), "",
            words.say(TEMPLATE, "method", older=OLDER, named_from=NAMED_FROM_MB)]
    if not found:
        return head + ["", words.say(TEMPLATE, "no_bill")]
    rows = [[b.label, b.device, mib(b.baseline_mb), mib(b.import_mb, "+"), mib(b.model_mb, "+"), peak_text(b),
             f"{b.import_s:.2f} s",
             f"{b.build_s:.2f} s", f"{b.first_call_s:.3g} s", startup_text(b),
             installed_text(b),
             ", ".join(f"{name.rsplit('/', 1)[-1]} {mb:,.0f} MiB" for name, mb in b.biggest) or "–",
             tools_text(b), not_required_text(b, NAMED_FROM_MB), f"{b.shared_mb:,.0f} MiB"]
            for (impl, device), b in sorted(found.items(), key=lambda kv: (kv[0][1], order(kv[0][0])))]
    headers = ["level/call", "device", "before import", "import", "model", "peak after its first calls",
               "import time",
               "build", "first call", "to first answer", INSTALLED_HEADER, "largest",
               "of which system tools", "imported because installed, not required (not counted)",
               "the harness's own"]
    return head + ["", compact(headers, rows)]


def mib(value: float, sign: str = "") -> str:
    """'+12 MiB'; '–' where the stage was not read apart (a call set up after another variant's)."""
    return "–" if value != value else f"{sign}{value:,.0f} MiB"


def order(implementation: str) -> int:
    names = list(registry.REGISTRY)
    return names.index(implementation) if implementation in names else len(names)
