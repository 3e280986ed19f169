"""The tables of a lab file after [lab] (harness.lab.judge.rules.assignment reads the file): each one's
record, and its check, which names the file, the table and the key of a bad value.

    Measure, Gate, Limits, Grade        the [measure], [gate], [limits] and [grade] tables' records
    read_measure(table, at), read_gate(table, at), read_limits(table, at), read_grade(table, at)
                                        a table's keys (over their defaults) checked -> its record
    read_due(value, at)                 [grade] due: a TOML date-time, or a date (its day's end)
    number(where, key, value, minimum, whole), fail(where, message)   a number checked; the error
"""

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NoReturn

from harness.errors import HarnessError

TEST_IMAGES = 10000


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
    slow_images: int = 1000  # a submission past max_ratio in the probe is gated on these only
    steps: int = 3  # training: SGD steps of `batch` images, each checked
    batch: int = 32
    max_rel_loss: float = 1e-4


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
    peak_mb: int | None = None  # the gate on the worker's measured peak memory (None: no gate)


@dataclass(frozen=True)
class Grade:
    """[grade]: points (harness.lab.term.marks.points). gate_points for passing the gate; up to speed_points
    for speed, by the ratio to rank_by: "linear" (all at or below full_at, none at or above zero_at,
    linear in log(ratio) between) or "tiers" ([[ratio at most, points], ...], ascending);
    slow_gate_points (default true: a too-slow submission that passed its gate, or the first
    [gate] slow_images of it, keeps gate_points; false: none); due (a
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
    slow_gate_points: bool = True  # a too-slow submission that passed its gate keeps gate_points


def fail(where: str, message: str) -> NoReturn:
    raise HarnessError(f"{where}: {message}")


def number(where: str, key: str, value: Any, minimum: float, whole: bool = False) -> Any:
    kinds = (int,) if whole else (int, float)
    if not isinstance(value, kinds) or isinstance(value, bool) or value < minimum:
        kind = "a whole number" if whole else "a number"
        fail(where, f"{key}: expected {kind} >= {minimum}, found {value!r}")
    return value


def read_measure(table: dict, at: str) -> Measure:
    for key in ("calls", "rounds", "warmup", "batch_size", "threads"):
        number(at, key, table[key], 0 if key == "warmup" else 1, whole=True)
    if table["calls"] < table["rounds"]:
        fail(at, f"expected calls >= rounds, found calls = {table['calls']}, rounds = {table['rounds']}")
    return Measure(**table)


def read_gate(table: dict, at: str) -> Gate:
    images = number(at, "images", table["images"], 1, whole=True)
    if images > TEST_IMAGES:
        fail(at, f"images: expected at most {TEST_IMAGES} (the MNIST test set), found {images}")
    min_agree = images if table["min_agree"] is None else table["min_agree"]
    number(at, "min_agree", min_agree, 0, whole=True)
    if min_agree > images:
        fail(at, f"min_agree: expected at most images ({images}), found {min_agree}")
    return Gate(images, min_agree, number(at, "max_abs_diff", table["max_abs_diff"], 0),
                min(images, number(at, "slow_images", table.get("slow_images", 1000), 1, whole=True)),
                number(at, "steps", table.get("steps", 3), 1, whole=True),
                number(at, "batch", table.get("batch", 32), 1, whole=True),
                number(at, "max_rel_loss", table.get("max_rel_loss", 1e-4), 0))


def read_limits(table: dict, at: str) -> Limits:
    for key in ("wall_s", "import_s", "cpu_s", "max_ratio"):
        number(at, key, table[key], 1)
    number(at, "memory_mb", table["memory_mb"], 64, whole=True)
    number(at, "pids", table["pids"], 4, whole=True)
    number(at, "output_mb", table["output_mb"], 1, whole=True)
    number(at, "disk_mb", table["disk_mb"], 1, whole=True)
    number(at, "files", table["files"], 16, whole=True)
    peak = table.get("peak_mb")
    if peak is not None:
        number(at, "peak_mb", peak, 64, whole=True)
        if peak > table["memory_mb"]:
            fail(at, f"peak_mb: expected at most memory_mb ({table['memory_mb']}): past memory_mb the "
                     f"worker is killed (out-of-memory) before its peak is gated; found {peak}")
    return Limits(**table)


def read_grade(table: dict, at: str) -> Grade:
    for key in ("gate_points", "speed_points", "late_per_day", "late_max_days", "full_at", "zero_at"):
        number(at, key, table[key], 0)
    if table["speed"] not in ("linear", "tiers"):
        fail(at, f"speed: expected 'linear' or 'tiers', found {table['speed']!r}")
    if table["full_at"] <= 0 or table["zero_at"] <= table["full_at"]:
        fail(at, f"expected 0 < full_at < zero_at, found full_at = {table['full_at']}, "
                  f"zero_at = {table['zero_at']}")
    tiers = table["tiers"]
    if not isinstance(tiers, list) or any(not isinstance(t, list) or len(t) != 2 for t in tiers):
        fail(at, f"tiers: expected [[ratio at most, points], ...], found {tiers!r}")
    tiers = tuple((number(at, "tiers ratio", r, 0), number(at, "tiers points", p, 0)) for r, p in tiers)
    if table["speed"] == "tiers" and not tiers:
        fail(at, "speed = 'tiers' needs tiers = [[ratio at most, points], ...]")
    ratios = [r for r, _ in tiers]
    if ratios != sorted(set(ratios)) or any(p > table["speed_points"] for _, p in tiers):
        fail(at, f"tiers: expected ascending ratios and points <= speed_points, found {list(tiers)}")
    given = {k: table[k] for k in ("gate_points", "speed_points", "speed", "full_at", "zero_at",
                                   "late_per_day", "late_max_days")}
    if not isinstance(table.get("slow_gate_points", True), bool):
        fail(at, f"slow_gate_points: expected true or false, found {table['slow_gate_points']!r}")
    given["slow_gate_points"] = table.get("slow_gate_points", True)
    return Grade(**given, tiers=tiers, due=read_due(table["due"], at))


def read_due(value: object, at: str) -> datetime | None:
    """A TOML date-time (or its ISO text); a bare date is the end of that day."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, 23, 59, 59)
    if value is not None and not isinstance(value, datetime):
        fail(at, f"due: expected a date-time (due = 2026-12-01T23:59:00Z), found {value!r}")
    return value
