"""Study files (studies/NAME.toml): a small validated schema, and the plan of cells it yields.

    [study]                      name, question, figures (list), baseline (a cell's implementation),
                                 mode ("inference", the default: predict calls; or "train": one
                                 SGD step per call, from the seeded initial weights), narrowed
                                 (written by `run --implementations/--rounds/--processes` only:
                                 what was cut; such a run is a try, never a machine's answer)
    [measure]                    processes (fresh worker processes per cell, one after another,
                                 default 1), rounds (in each process), calls (timed calls of a
                                 cell over all its processes and rounds), warmup (in each
                                 process), batch_sizes, dtypes, threads, bill (true:
                                 each worker records what it needed installed, for the report's bill),
                                 inter_op_threads, max_images, setup_timeout_s, timeout_s,
                                 max_cell_seconds (a slow cell's calls are cut to fit, after
                                 its warm-up has shown its speed; neither cap leaves fewer than
                                 min_calls_per_round, default 10, in each round); train mode: converge_images,
                                 converge_seconds (a convergence run per level, whichever ends
                                 first) at converge_batch_size
    [[cells]]                    implementation, variants ("all" or a list), devices,
                                 and optionally batch_sizes, dtypes, threads (a list: one cell each),
                                 processes (this table's cells: the study's otherwise)

A cell = implementation x variant x device x batch size x dtype (x threads where a cell sets them).
In train mode the variants are the level's training variants (ImplSpec.train_variants).
A file parses into frozen records: a Study holding its Measure (the [measure] table over its
defaults) and its plan, a tuple of Cells.
"""

import math
import sys
from collections.abc import Collection
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

from harness import ROOT, registry
from harness.errors import HarnessError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

STUDIES_DIR = ROOT / "studies"
STUDY_KEYS = {"name", "question", "figures", "baseline", "mode", "narrowed"}
MODES = ("inference", "train")
CELL_KEYS = {"implementation", "variants", "devices", "batch_sizes", "dtypes", "threads", "processes"}


@dataclass(frozen=True)
class Measure:
    """A study's [measure] table, its defaults filled in (the module docstring says what each is)."""

    calls: int = 1000  # over all of a cell's processes and rounds
    rounds: int = 10  # in each process
    processes: int = 1  # fresh worker processes per cell, one after another ([[cells]] may set its own)
    warmup: int = 20
    batch_sizes: tuple[int, ...] = (1,)  # a cell's own batch_sizes replace these
    dtypes: tuple[str, ...] = ("float32",)
    threads: int = 1
    inter_op_threads: int = 1
    max_images: int | None = None
    setup_timeout_s: int = 300
    timeout_s: int = 120
    max_cell_seconds: float | None = None
    converge_images: int | None = None
    converge_seconds: float | None = None
    converge_batch_size: int = 32
    min_calls_per_round: int = 10
    bill: bool = False  # each worker also reads what it needed installed (a second or so per worker)


MEASURE_KEYS = frozenset(field.name for field in fields(Measure))
WHOLE_NUMBERS = ("calls", "rounds", "processes", "warmup", "threads", "inter_op_threads",
                 "setup_timeout_s", "timeout_s", "min_calls_per_round")
CONVERGE_KEYS = ("converge_images", "converge_seconds", "converge_batch_size")


@dataclass(frozen=True)
class Cell:
    """What is measured (one cell of the grid)."""

    implementation: str
    variant: str
    device: str
    batch_size: int
    dtype: str
    calls: int
    mode: str = "inference"  # or "train": each call one training step
    threads: int | None = None  # None: the study's [measure] threads
    processes: int = 1  # fresh worker processes, one after another, each timing `rounds` rounds

    @property
    def id(self) -> str:
        threads = f"/t{self.threads}" if self.threads is not None else ""
        return (f"{self.implementation}/{self.variant}/{self.device}/b{self.batch_size}/"
                f"{self.dtype}{threads}")

    @property
    def group(self) -> str:
        """Cells of one group share a worker process: one framework (and thread count) per
        interpreter, since threads are set before the framework is imported."""
        threads = f"/t{self.threads}" if self.threads is not None else ""
        return f"{self.implementation}/{self.device}{threads}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def total_rounds(self, rounds: int) -> int:
        """Its rounds over all its processes (`rounds`: the study's, in each process)."""
        return rounds * self.processes

    def process_of(self, round_index: int, rounds: int) -> int:
        """Which of its processes (0, 1, ...) times its round `round_index` (of total_rounds)."""
        return round_index // rounds


@dataclass(frozen=True)
class Study:
    """A parsed study file: its [study] head, its [measure] table and the plan of cells."""

    name: str
    question: str
    figures: tuple[str, ...]
    baseline: str | None
    measure: Measure
    cells: tuple[Cell, ...]
    source: str  # the TOML text, copied into each run folder
    mode: str = "inference"
    narrowed: str = ""  # what a quick run cut from the study file (harness.measure.plan.narrow); "": nothing


def _fail(where: str, message: str) -> NoReturn:
    raise HarnessError(f"{where}: {message}")


def _check_keys(where: str, table: object, allowed: Collection[str]) -> dict[str, Any]:
    """The table itself, once it is a table with no unknown key."""
    if not isinstance(table, dict):
        _fail(where, f"expected a table, found {type(table).__name__}")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        _fail(where, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return table


def _list(where: str, key: str, value: Any, allowed: Collection[Any] | None = None,
          kind: type = str) -> list[Any]:
    """A value or a list of values (a tuple: a default already read), each checked."""
    values = list(value) if isinstance(value, list | tuple) else [value]
    for v in values:
        if not isinstance(v, kind) or isinstance(v, bool):
            _fail(where, f"{key}: expected {kind.__name__} values, found {v!r}")
        if allowed is not None and v not in allowed:
            _fail(where, f"{key}: unknown value {v!r}; allowed: {list(allowed)}")
    if not values:
        _fail(where, f"{key}: expected at least one value")
    return values


def path_of(name_or_path: str, folder: Path = STUDIES_DIR) -> Path:
    """A .toml path (or an existing file) as it is, a bare name as folder/NAME.toml (a study's, by
    default)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return path
    return folder / f"{name_or_path}.toml"


def toml_names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.toml"))


def existing_toml(folder: Path, kind: str, name_or_path: str) -> Path:
    """path_of(name_or_path, folder), which must be a file; else an error naming the ones there are."""
    path = path_of(name_or_path, folder)
    if not path.is_file():
        raise HarnessError(f"{kind} {name_or_path!r} not found ({path}); available: {toml_names(folder)}")
    return path


def available() -> list[str]:
    return toml_names(STUDIES_DIR)


def load(name_or_path: str) -> Study:
    path = existing_toml(STUDIES_DIR, "study", name_or_path)
    return parse(path.read_text(), str(path))


def parse(text: str, where: str = "<study>") -> Study:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{where}: TOML syntax error: {exc}") from None
    _check_keys(where, data, {"study", "measure", "cells"})
    head = _check_keys(f"{where} [study]", data.get("study", {}), STUDY_KEYS)
    name = head.get("name") or Path(where).stem
    measure = _measure(f"{where} [measure]", data.get("measure", {}))
    mode = head.get("mode", "inference")
    if mode not in MODES:
        _fail(f"{where} [study]", f"mode: unknown value {mode!r}; allowed: {list(MODES)}")
    _check_converge(f"{where} [measure]", measure)
    entries = data.get("cells")
    if not isinstance(entries, list) or not entries:
        _fail(where, "expected at least one [[cells]] table")
    cells = [cell for i, entry in enumerate(entries, 1)
             for cell in _cells(f"{where} [[cells]] #{i}", entry, measure, mode)]
    ids = [cell.id for cell in cells]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        _fail(where, f"cells listed twice: {duplicates}")
    baseline = head.get("baseline")
    if baseline is not None and baseline not in {c.implementation for c in cells}:
        _fail(f"{where} [study]", f"baseline {baseline!r} is not an implementation of this study")
    narrowed = head.get("narrowed", "")
    if not isinstance(narrowed, str):
        _fail(f"{where} [study]", f"narrowed: expected a string, found {narrowed!r}")
    return Study(name, head.get("question", ""), tuple(head.get("figures", [])), baseline,
                 measure, tuple(cells), text, mode, narrowed)


def _measure(where: str, table: object) -> Measure:
    """The [measure] table over the defaults, its counts and the time cap checked."""
    values: dict[str, Any] = {  # as TOML gives them: checked below and, per cell, by _cells
        key: tuple(v) if key in ("batch_sizes", "dtypes") and isinstance(v, list) else v
        for key, v in _check_keys(where, table, MEASURE_KEYS).items()}
    measure = Measure(**values)
    for key in WHOLE_NUMBERS:
        value = getattr(measure, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            _fail(where, f"{key}: expected a whole number >= 0, found {value!r}")
    if not isinstance(measure.bill, bool):
        _fail(where, f"bill: expected true or false, found {measure.bill!r}")
    cap = measure.max_cell_seconds
    if cap is not None and (not isinstance(cap, int | float) or isinstance(cap, bool) or cap <= 0):
        _fail(where, f"max_cell_seconds: expected a number of seconds > 0, found {cap!r}")
    if measure.rounds < 1 or measure.processes < 1 or measure.calls < measure.rounds * measure.processes:
        _fail(where, "expected rounds >= 1, processes >= 1 and calls >= rounds x processes")
    return measure


def _check_converge(where: str, measure: Measure) -> None:
    """Train mode's convergence run: each of its numbers, where set, > 0."""
    for key in CONVERGE_KEYS:
        value = getattr(measure, key)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)
                                  or value <= 0):
            _fail(where, f"{key}: expected a number > 0, found {value!r}")


def _cells(at: str, table: object, measure: Measure, mode: str) -> list[Cell]:
    """The cells of one [[cells]] table: every variant x device x batch size x dtype x threads."""
    entry = _check_keys(at, table, CELL_KEYS)
    spec = _spec(at, entry, mode)
    offered = spec.variants if mode == "inference" else spec.train_variants
    variants = entry.get("variants", [offered[0]])
    if variants != "all":
        variants = _list(at, "variants", variants, offered)
    devices = _list(at, "devices", entry.get("devices", list(spec.devices)), registry.DEVICES)
    for device in devices:
        if device not in spec.devices:
            _fail(at, f"devices: {spec.name} does not run on {device!r}; allowed: {list(spec.devices)}")
        if variants != "all" and mode == "inference":
            for variant in set(variants) - set(spec.variants_for(device)):
                _fail(at, f"variants: {variant!r} needs a GPU; list it in a cell with "
                          'devices = ["gpu"]')
    batches = _list(at, "batch_sizes", entry.get("batch_sizes", measure.batch_sizes), kind=int)
    dtypes = _list(at, "dtypes", entry.get("dtypes", measure.dtypes), spec.dtypes)
    threads = _list(at, "threads", entry["threads"], kind=int) if "threads" in entry else [None]
    if any(t is not None and t < 1 for t in threads):
        _fail(at, f"threads: expected whole numbers >= 1, found {threads}")
    processes = entry.get("processes", measure.processes)
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        _fail(at, f"processes: expected a whole number >= 1, found {processes!r}")
    if measure.calls < measure.rounds * processes:
        _fail(at, f"processes: {processes} x {measure.rounds} rounds is more rounds than "
                  f"calls = {measure.calls}")
    cells = []
    for device in devices:
        every = spec.variants_for(device) if mode == "inference" else spec.train_variants
        for variant in every if variants == "all" else variants:
            for batch in batches:
                if batch < 1:
                    _fail(at, f"batch_sizes: expected >= 1, found {batch}")
                cells += [Cell(entry["implementation"], variant, device, batch, dtype,
                               calls_for(measure, batch, processes), mode, count, processes)
                          for dtype in dtypes for count in threads]
    return cells


def _spec(at: str, entry: dict[str, Any], mode: str) -> registry.ImplSpec:
    """The cell's implementation, known to the registry and, in train mode, able to train."""
    if "implementation" not in entry:
        _fail(at, f"implementation: missing; allowed: {sorted(registry.REGISTRY)}")
    try:
        spec = registry.spec(entry["implementation"])
    except HarnessError as exc:
        _fail(at, str(exc))
    offered = spec.variants if mode == "inference" else spec.train_variants
    if not offered:
        trainable = sorted(n for n, s in registry.REGISTRY.items() if s.train_variants)
        _fail(at, f"implementation: {spec.name} has no training step; levels that train: {trainable}")
    return spec


def calls_for(measure: Measure, batch: int, processes: int = 1) -> int:
    """Timed calls of one cell: `calls`, capped at max_images / batch, but never fewer than
    min_calls_per_round in each round of each process (a round of one or two calls has no median
    of its own)."""
    calls = measure.calls
    if measure.max_images:
        floor = measure.rounds * processes * measure.min_calls_per_round
        calls = min(calls, max(floor, math.ceil(measure.max_images / batch)))
    return calls


def capped_calls(measure: Measure, planned: int, seconds_per_call: float, processes: int = 1) -> int:
    """Timed calls of a cell once its speed is known (from the warm-up): at most
    max_cell_seconds of timed calls (over all its processes), but never fewer than
    min_calls_per_round in each round."""
    cap = measure.max_cell_seconds
    if not cap or seconds_per_call <= 0:
        return planned
    floor = min(planned, measure.rounds * processes * measure.min_calls_per_round)
    return max(floor, min(planned, int(cap / seconds_per_call)))


def chunk_sizes(calls: int, rounds: int) -> list[int]:
    """Split a cell's calls as evenly as possible over the rounds."""
    base, extra = divmod(calls, rounds)
    return [base + (1 if r < extra else 0) for r in range(rounds)]
