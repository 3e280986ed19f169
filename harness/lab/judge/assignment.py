"""Lab files (labs/NAME.toml): what students implement, what each submission is timed beside,
the correctness gate and the per-submission limits. Validated like study files: an unknown key
is an error naming the file, the table and the allowed keys.

    [lab]      name, title, rung (the API level students implement), module (default lenet.py),
               class ("" = the module's one harness.base.LeNet subclass), device, dtype,
               references (registry names, "name/variant", or "floor": the device's fastest measured
               implementation, named when the file is read), rank_by (default: the first reference),
               allow_imports (the project's level packages a submission may import; default none)
    [measure]  calls (timed calls per participant, split over rounds), rounds, warmup, batch_size,
               threads
    [gate]     images (first N test images), min_agree (default: all of them), max_abs_diff
    [limits]   wall_s (the grader's whole wait on one submission), import_s (import + construction),
               memory_mb (the worker's cgroup; also RLIMIT_AS on the CPU, resident memory watched on
               the GPU), cpu_s (RLIMIT_CPU), max_ratio (slower than this x rank_by in the probe before
               the full gate, or in the warm-up: too-slow, not timed), pids (processes and threads,
               the cgroup's pids.max), output_mb
               (RLIMIT_FSIZE: any one file it writes, its log included), disk_mb and files (its
               writable space: its folder's copy, /tmp and /dev/shm on one tmpfs of that size and
               that many inodes, harness.lab.box.disk; without root, bwrap's tmpfs: size only)
    [grade]    gate_points, speed_points, speed ("linear": full_at, zero_at; or "tiers"), due,
               late_per_day, late_max_days (see Grade; harness.lab.term.points computes them)

    load(name_or_path) -> Lab       a lab of labs/ by name, or a lab file by path
    parse(text, where) -> Lab       a lab file's text; `where` names it in errors
    Lab                             the lab: its [lab] keys, and .measure, .gate, .limits, .starter
    Measure, Gate, Limits, Grade    the other tables, one record each
    Reference                       a reference implementation: .implementation, .variant, .label
    parse_reference, floor_named(text) ("floor" -> the fastest measured "name/variant")
"""

import re
import sys
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, NoReturn

from harness import ROOT, registry
from harness.errors import HarnessError
from harness.measure import study
from harness.measure.floor import fastest_measured

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LABS_DIR = ROOT / "labs"
LEVELS = ("numpy", "onednn", "cudnn", "cuda", "tensorflow-ops", "jax-ops", "torch-ops", "keras")
DEFAULTS: dict[str, dict[str, Any]] = {
    "lab": {"name": None, "title": "", "rung": "numpy", "module": "lenet.py", "class": "",
            "device": "cpu", "dtype": "float32", "references": ["numpy"], "rank_by": None,
            "allow_imports": []},
    "measure": {"calls": 300, "rounds": 10, "warmup": 20, "batch_size": 1, "threads": 1},
    "gate": {"images": 10000, "min_agree": None, "max_abs_diff": 1e-4},
    "limits": {"wall_s": 600, "import_s": 120, "memory_mb": 4096, "cpu_s": 900, "max_ratio": 100,
               "pids": 64, "output_mb": 16, "disk_mb": 256, "files": 4096},
    "grade": {"gate_points": 60, "speed_points": 40, "speed": "linear", "full_at": 1.0, "zero_at": 4.0,
              "tiers": [], "due": None, "late_per_day": 0, "late_max_days": 7},
}
TEST_IMAGES = 10000


@dataclass(frozen=True)
class Reference:
    implementation: str
    variant: str

    @property
    def label(self) -> str:
        """As a lab file writes it: `numpy`, `onednn/tuned`."""
        return self.implementation if self.variant == "default" else f"{self.implementation}/{self.variant}"


@dataclass(frozen=True)
class Measure:
    """[measure]: timed calls per participant (split over rounds), rounds, warm-up calls, batch, threads."""

    calls: int
    rounds: int
    warmup: int
    batch_size: int
    threads: int


@dataclass(frozen=True)
class Gate:
    """[gate]: the first `images` test images; at least min_agree argmaxes as the oracle's, every
    probability within max_abs_diff."""

    images: int
    min_agree: int
    max_abs_diff: float


@dataclass(frozen=True)
class Limits:
    """[limits]: per submission (see the module's docstring)."""

    wall_s: float
    import_s: float
    memory_mb: int
    cpu_s: float
    max_ratio: float
    pids: int
    output_mb: int
    disk_mb: int
    files: int


@dataclass(frozen=True)
class Grade:
    """[grade]: points (harness.lab.term.points). gate_points for passing the gate; up to speed_points
    for speed, by the ratio to rank_by: "linear" (all at or below full_at, none at or above zero_at,
    linear in log(ratio) between) or "tiers" ([[ratio at most, points], ...], ascending); due (a
    TOML date-time; without a zone, the LMS's local time) and late_per_day (percent of the points
    off per started day late), none past late_max_days."""

    gate_points: float = 60
    speed_points: float = 40
    speed: str = "linear"
    full_at: float = 1.0
    zero_at: float = 4.0
    tiers: tuple[tuple[float, float], ...] = ()
    due: datetime | None = None
    late_per_day: float = 0
    late_max_days: float = 7


@dataclass(frozen=True)
class Lab:
    name: str
    title: str
    rung: str
    module: str
    class_name: str
    device: str
    dtype: str
    references: tuple[Reference, ...]
    rank_by: Reference
    allow_imports: tuple[str, ...]  # level packages (lenet_*) a submission may import
    measure: Measure
    gate: Gate
    limits: Limits
    source: str  # the TOML text (copied next to the results, read by Slurm tasks)
    path: str
    grade: Grade = Grade()

    def reference(self, label: str) -> Reference:
        return next(r for r in self.references if r.label == label)

    @property
    def starter(self) -> Path:
        """The starter folder students are handed (the kit's, similarity's boilerplate): the CUDA
        rung's labs/template-cuda, every other lab's labs/template."""
        return ROOT / "labs" / ("template-cuda" if self.rung == "cuda" else "template")


def _fail(where: str, message: str) -> NoReturn:
    raise HarnessError(f"{where}: {message}")


def _number(where: str, key: str, value: Any, minimum: float, whole: bool = False) -> Any:
    kinds = (int,) if whole else (int, float)
    if not isinstance(value, kinds) or isinstance(value, bool) or value < minimum:
        kind = "a whole number" if whole else "a number"
        _fail(where, f"{key}: expected {kind} >= {minimum}, found {value!r}")
    return value


def parse_reference(where: str, text: object, device: str) -> Reference:
    if not isinstance(text, str):
        _fail(where, f"references: expected 'name' or 'name/variant' strings, found {text!r}")
    name, _, variant = text.partition("/")
    try:
        spec = registry.spec(name)
    except HarnessError as exc:
        _fail(where, f"references: {exc}")
    if device not in spec.devices:
        _fail(where, f"references: {name} does not run on {device!r}; it runs on {list(spec.devices)}")
    variant = variant or spec.variants[0]
    if variant not in spec.variants_for(device):
        _fail(where, f"references: unknown variant {variant!r} of {name}; "
                     f"allowed: {list(spec.variants_for(device))}")
    return Reference(name, variant)


def floor_named(text: str) -> str:
    """The lab file's text with a "floor" reference (references, rank_by) replaced by the device's
    fastest measured implementation, "name/variant" (harness.measure.floor), read once: the grading's
    copy of the file, its rows and its leaderboard name the same concrete label. Text that is no
    valid TOML or names no floor comes back as it is (parse says what is wrong)."""
    try:
        head = tomllib.loads(text).get("lab")
    except tomllib.TOMLDecodeError:
        return text
    if not isinstance(head, dict):
        return text
    refs = head.get("references")
    named = [*(refs if isinstance(refs, list) else [refs]), head.get("rank_by")]
    device = head.get("device", DEFAULTS["lab"]["device"])
    if "floor" not in named or device not in registry.DEVICES:
        return text
    label = fastest_measured(device).label
    return re.sub(r"""(["'])floor\1""", lambda quoted: f"{quoted[1]}{label}{quoted[1]}", text)


def load(name_or_path: str) -> Lab:
    path = study.existing_toml(LABS_DIR, "lab", name_or_path)
    return parse(path.read_text(), str(path))


def parse(text: str, where: str = "<lab>") -> Lab:
    text = floor_named(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{where}: TOML syntax error: {exc}") from None
    tables = _tables(data, where)
    head = tables["lab"]
    references, rank_by = _references(head, f"{where} [lab]")
    measure = _measure(tables["measure"], f"{where} [measure]")
    gate = _gate(tables["gate"], f"{where} [gate]")
    limits = _limits(tables["limits"], f"{where} [limits]")
    allow = _allow_imports(head["allow_imports"], f"{where} [lab]")
    return Lab(head["name"] or Path(where).stem, head["title"], head["rung"], head["module"], head["class"],
               head["device"], head["dtype"], references, rank_by, allow, measure, gate, limits, text, where,
               _grade(tables["grade"], f"{where} [grade]"))


def _tables(data: dict, where: str) -> dict[str, dict]:
    """Each table's keys over its defaults; an unknown table or key is an error."""
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        _fail(where, f"unknown table(s) {unknown}; allowed: {sorted(DEFAULTS)}")
    tables = {}
    for table, defaults in DEFAULTS.items():
        given = data.get(table, {})
        if not isinstance(given, dict):
            _fail(f"{where} [{table}]", f"expected a table, found {type(given).__name__}")
        unknown = sorted(set(given) - set(defaults))
        if unknown:
            _fail(f"{where} [{table}]", f"unknown key(s) {unknown}; allowed: {sorted(defaults)}")
        tables[table] = {**defaults, **given}
    return tables


def _references(head: dict, at: str) -> tuple[tuple[Reference, ...], Reference]:
    """The [lab] table checked; (its references, rank_by)."""
    for key in ("title", "module", "class"):
        if not isinstance(head[key], str):
            _fail(at, f"{key}: expected a string, found {head[key]!r}")
    if not head["module"].endswith(".py") or "/" in head["module"]:
        _fail(at, f"module: expected a file name ending in .py (e.g. lenet.py), found {head['module']!r}")
    if head["rung"] not in LEVELS:
        _fail(at, f"rung: unknown API level {head['rung']!r}; allowed: {list(LEVELS)}")
    if head["device"] not in registry.DEVICES:
        _fail(at, f"device: unknown {head['device']!r}; allowed: {list(registry.DEVICES)}")
    if head["dtype"] not in ("float32", "float64"):
        _fail(at, f"dtype: expected 'float32' or 'float64', found {head['dtype']!r}")
    refs = head["references"] if isinstance(head["references"], list) else [head["references"]]
    if not refs:
        _fail(at, "references: expected at least one reference implementation")
    references = tuple(parse_reference(at, r, head["device"]) for r in refs)
    labels = [r.label for r in references]
    if len(set(labels)) != len(labels):
        _fail(at, f"references: listed twice: {labels}")
    if head["rank_by"] is None:
        return references, references[0]
    wanted = parse_reference(at, head["rank_by"], head["device"]).label
    if wanted not in labels:
        _fail(at, f"rank_by: {head['rank_by']!r} is not one of the references {labels}")
    return references, references[labels.index(wanted)]


def _measure(table: dict, at: str) -> Measure:
    for key in ("calls", "rounds", "warmup", "batch_size", "threads"):
        _number(at, key, table[key], 0 if key == "warmup" else 1, whole=True)
    if table["calls"] < table["rounds"]:
        _fail(at, f"expected calls >= rounds, found calls = {table['calls']}, rounds = {table['rounds']}")
    return Measure(**table)


def _gate(table: dict, at: str) -> Gate:
    images = _number(at, "images", table["images"], 1, whole=True)
    if images > TEST_IMAGES:
        _fail(at, f"images: expected at most {TEST_IMAGES} (the MNIST test set), found {images}")
    min_agree = images if table["min_agree"] is None else table["min_agree"]
    _number(at, "min_agree", min_agree, 0, whole=True)
    if min_agree > images:
        _fail(at, f"min_agree: expected at most images ({images}), found {min_agree}")
    return Gate(images, min_agree, _number(at, "max_abs_diff", table["max_abs_diff"], 0))


def _limits(table: dict, at: str) -> Limits:
    for key in ("wall_s", "import_s", "cpu_s", "max_ratio"):
        _number(at, key, table[key], 1)
    _number(at, "memory_mb", table["memory_mb"], 64, whole=True)
    _number(at, "pids", table["pids"], 4, whole=True)
    _number(at, "output_mb", table["output_mb"], 1, whole=True)
    _number(at, "disk_mb", table["disk_mb"], 1, whole=True)
    _number(at, "files", table["files"], 16, whole=True)
    return Limits(**table)


def _allow_imports(allow: object, at: str) -> tuple[str, ...]:
    packages = sorted({s.package for s in registry.REGISTRY.values() if s.package})
    if not isinstance(allow, list) or any(a not in packages for a in allow):
        _fail(at, f"allow_imports: expected a list of the project's level packages {packages}, "
                  f"found {allow!r}")
    return tuple(allow)


def _grade(table: dict, at: str) -> Grade:
    for key in ("gate_points", "speed_points", "late_per_day", "late_max_days", "full_at", "zero_at"):
        _number(at, key, table[key], 0)
    if table["speed"] not in ("linear", "tiers"):
        _fail(at, f"speed: expected 'linear' or 'tiers', found {table['speed']!r}")
    if table["full_at"] <= 0 or table["zero_at"] <= table["full_at"]:
        _fail(at, f"expected 0 < full_at < zero_at, found full_at = {table['full_at']}, "
                  f"zero_at = {table['zero_at']}")
    tiers = table["tiers"]
    if not isinstance(tiers, list) or any(not isinstance(t, list) or len(t) != 2 for t in tiers):
        _fail(at, f"tiers: expected [[ratio at most, points], ...], found {tiers!r}")
    tiers = tuple((_number(at, "tiers ratio", r, 0), _number(at, "tiers points", p, 0)) for r, p in tiers)
    if table["speed"] == "tiers" and not tiers:
        _fail(at, "speed = 'tiers' needs tiers = [[ratio at most, points], ...]")
    ratios = [r for r, _ in tiers]
    if ratios != sorted(set(ratios)) or any(p > table["speed_points"] for _, p in tiers):
        _fail(at, f"tiers: expected ascending ratios and points <= speed_points, found {list(tiers)}")
    given = {k: table[k] for k in ("gate_points", "speed_points", "speed", "full_at", "zero_at",
                                   "late_per_day", "late_max_days")}
    return Grade(**given, tiers=tiers, due=_due(table["due"], at))


def _due(value: object, at: str) -> datetime | None:
    """A TOML date-time (or its ISO text); a bare date is the end of that day."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, 23, 59, 59)
    if value is not None and not isinstance(value, datetime):
        _fail(at, f"due: expected a date-time (due = 2026-12-01T23:59:00Z), found {value!r}")
    return value
