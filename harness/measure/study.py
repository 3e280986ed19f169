"""Study files (studies/NAME.toml): a small validated schema, and the plan of cells it yields.

    [study]                      name, question, figures (list), baseline (a cell's implementation),
                                 mode ("inference", the default: predict calls; or "train": one
                                 SGD step per call, from the seeded initial weights)
    [measure]                    calls, rounds, warmup, batch_sizes, dtypes, threads,
                                 inter_op_threads, max_images, setup_timeout_s, timeout_s,
                                 max_cell_seconds (a slow cell's calls are cut to fit, after
                                 its warm-up has shown its speed, to no fewer than
                                 min_calls_per_round, default 10, in each round); train mode: converge_images,
                                 converge_seconds (a convergence run per level, whichever ends
                                 first) at converge_batch_size
    [[cells]]                    implementation, variants ("all" or a list), devices,
                                 and optionally batch_sizes, dtypes, threads (a list: one cell each)

A cell = implementation x variant x device x batch size x dtype (x threads where a cell sets them).
In train mode the variants are the level's training variants (ImplSpec.train_variants).
"""

import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import ROOT, registry
from harness.errors import HarnessError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

STUDIES_DIR = ROOT / "studies"
STUDY_KEYS = {"name", "question", "figures", "baseline", "mode"}
MODES = ("inference", "train")
MEASURE_DEFAULTS = {
    "calls": 1000, "rounds": 10, "warmup": 20, "batch_sizes": [1], "dtypes": ["float32"],
    "threads": 1, "inter_op_threads": 1, "max_images": None,
    "setup_timeout_s": 300, "timeout_s": 120, "max_cell_seconds": None,
    "converge_images": None, "converge_seconds": None, "converge_batch_size": 32,
    "min_calls_per_round": 10,
}
CELL_KEYS = {"implementation", "variants", "devices", "batch_sizes", "dtypes", "threads"}


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

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Study:
    name: str
    question: str
    figures: tuple
    baseline: str | None
    measure: dict
    cells: tuple  # of Cell
    source: str  # the TOML text, copied into each run folder
    mode: str = "inference"


def _fail(where: str, message: str):
    raise HarnessError(f"{where}: {message}")


def _check_keys(where, table, allowed):
    if not isinstance(table, dict):
        _fail(where, f"expected a table, found {type(table).__name__}")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        _fail(where, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _list(where, key, value, allowed=None, kind=str):
    values = value if isinstance(value, list) else [value]
    for v in values:
        if not isinstance(v, kind) or isinstance(v, bool):
            _fail(where, f"{key}: expected {kind.__name__} values, found {v!r}")
        if allowed is not None and v not in allowed:
            _fail(where, f"{key}: unknown value {v!r}; allowed: {list(allowed)}")
    if not values:
        _fail(where, f"{key}: expected at least one value")
    return values


def toml_path(folder: Path, name_or_path: str) -> Path:
    """A .toml path (or an existing file) as it is, a bare name as folder/NAME.toml."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return path
    return folder / f"{name_or_path}.toml"


def toml_names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.toml"))


def path_of(name_or_path: str) -> Path:
    return toml_path(STUDIES_DIR, name_or_path)


def available() -> list[str]:
    return toml_names(STUDIES_DIR)


def load(name_or_path: str) -> Study:
    path = path_of(name_or_path)
    if not path.is_file():
        raise HarnessError(f"study {name_or_path!r} not found ({path}); available: {available()}")
    return parse(path.read_text(), str(path))


def parse(text: str, where: str = "<study>") -> Study:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{where}: TOML syntax error: {exc}") from None
    _check_keys(where, data, {"study", "measure", "cells"})
    head = data.get("study", {})
    _check_keys(f"{where} [study]", head, STUDY_KEYS)
    name = head.get("name") or Path(where).stem
    measure = dict(MEASURE_DEFAULTS)
    _check_keys(f"{where} [measure]", data.get("measure", {}), MEASURE_DEFAULTS)
    measure.update(data.get("measure", {}))
    for key in ("calls", "rounds", "warmup", "threads", "inter_op_threads",
                "setup_timeout_s", "timeout_s", "min_calls_per_round"):
        if not isinstance(measure[key], int) or isinstance(measure[key], bool) or measure[key] < 0:
            _fail(f"{where} [measure]", f"{key}: expected a whole number >= 0, found {measure[key]!r}")
    cap = measure["max_cell_seconds"]
    if cap is not None and (not isinstance(cap, int | float) or isinstance(cap, bool) or cap <= 0):
        _fail(f"{where} [measure]", f"max_cell_seconds: expected a number of seconds > 0, found {cap!r}")
    if measure["rounds"] < 1 or measure["calls"] < measure["rounds"]:
        _fail(f"{where} [measure]", "expected rounds >= 1 and calls >= rounds")
    mode = head.get("mode", "inference")
    if mode not in MODES:
        _fail(f"{where} [study]", f"mode: unknown value {mode!r}; allowed: {list(MODES)}")
    for key in ("converge_images", "converge_seconds", "converge_batch_size"):
        value = measure[key]
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)
                                  or value <= 0):
            _fail(f"{where} [measure]", f"{key}: expected a number > 0, found {value!r}")

    entries = data.get("cells")
    if not isinstance(entries, list) or not entries:
        _fail(where, "expected at least one [[cells]] table")
    cells = []
    for i, entry in enumerate(entries, 1):
        at = f"{where} [[cells]] #{i}"
        _check_keys(at, entry, CELL_KEYS)
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
        batches = _list(at, "batch_sizes", entry.get("batch_sizes", measure["batch_sizes"]), kind=int)
        dtypes = _list(at, "dtypes", entry.get("dtypes", measure["dtypes"]), spec.dtypes)
        threads = _list(at, "threads", entry["threads"], kind=int) if "threads" in entry else [None]
        if any(t is not None and t < 1 for t in threads):
            _fail(at, f"threads: expected whole numbers >= 1, found {threads}")
        for device in devices:
            every = spec.variants_for(device) if mode == "inference" else spec.train_variants
            for variant in every if variants == "all" else variants:
                for batch in batches:
                    if batch < 1:
                        _fail(at, f"batch_sizes: expected >= 1, found {batch}")
                    for dtype in dtypes:
                        for count in threads:
                            cells.append(Cell(entry["implementation"], variant, device, batch, dtype,
                                              calls_for(measure, batch), mode, count))
    ids = [cell.id for cell in cells]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        _fail(where, f"cells listed twice: {duplicates}")
    baseline = head.get("baseline")
    if baseline is not None and baseline not in {c.implementation for c in cells}:
        _fail(f"{where} [study]", f"baseline {baseline!r} is not an implementation of this study")
    return Study(name, head.get("question", ""), tuple(head.get("figures", [])), baseline,
                 measure, tuple(cells), text, mode)


def calls_for(measure: dict, batch: int) -> int:
    """Timed calls of one cell: `calls`, capped at max_images / batch (but >= rounds)."""
    calls = measure["calls"]
    if measure.get("max_images"):
        calls = min(calls, max(measure["rounds"], math.ceil(measure["max_images"] / batch)))
    return calls


def capped_calls(measure: dict, planned: int, seconds_per_call: float) -> int:
    """Timed calls of a cell once its speed is known (from the warm-up): at most
    max_cell_seconds of timed calls, but never fewer than min_calls_per_round in each round."""
    cap = measure.get("max_cell_seconds")
    if not cap or seconds_per_call <= 0:
        return planned
    floor = min(planned, measure["rounds"] * measure.get("min_calls_per_round", 10))
    return max(floor, min(planned, int(cap / seconds_per_call)))


def chunk_sizes(calls: int, rounds: int) -> list[int]:
    """Split a cell's calls as evenly as possible over the rounds."""
    base, extra = divmod(calls, rounds)
    return [base + (1 if r < extra else 0) for r in range(rounds)]
