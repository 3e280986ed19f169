"""The one reader of result rows and of a run's env.json: nothing read is trusted. A run's rows are
read here in either form (harness.measure.store.rowfile names them): a partial run's results.jsonl,
a complete run's results.jsonl.gz, whole and as its completion marker (harness.measure.store.runfolder)
records them. import-results, the report, the figures, reproduce, the floor and the lab all read rows
here (results.read_rows is read_run).

A row is one JSON object on one line. It is usable when
- `schema` is a version this harness knows (SCHEMA_VERSIONS), `run_id` and `kind` are strings,
  `time` (seconds since 1970, where the row was written) a finite number above zero;
- every number is finite (no NaN, no Infinity, none too big for a float), but NaN in an interval, a
  spread or a share the harness computed (nan_means_none: "not computed": one round has no interval);
- every time in nanoseconds (a key ending in `_ns` or holding `_ns_`, and all inside it) is at
  least 0 and below MAX_NS, and each timed call of a round (times_ns, rounds_ns) above 0;
- a row of a kind the report reads field by field (setup, round, load, cell) has those fields, of
  their types (FIELDS, CELL_SPEC), and the optional ones it reads of theirs (OPTIONAL, CELL_OPTIONAL).
A bad row is refused whole (strict: import-results) or skipped with one WARNING naming file:line
(the report, figures, reproduce, --resume): never a traceback, never a NaN in a table.

A usable cell row whose saved summary (`stats`) is of the current version (`stats_version`,
stats.SUMMARY_VERSION) has it checked against its own times (stats.impossible: counts, least and greatest
time, mean, order, intervals inside the times): one that cannot be theirs is refused (strict), or named
in one WARNING and its stats_version dropped, so its summary is computed again from its times
(harness.measure.plan.cells.row_summary): the times are the measurement.

    check(row) -> why the row is unusable, or None
    bad_summary(row) -> why a cell row's saved summary of the current version cannot be its times', or None
    parse(line) -> the row (ValueError: not one JSON object)
    read_lines(lines, where, strict, warn) -> the usable rows; a partial last line (a killed run) skipped
    read(path, strict, warn) -> the usable rows of a plain file (read_lines)
    read_run(run_dir, strict, warn) -> the usable rows of a run folder, in either form
    unpack(data, cap, where, cap_said) -> bytes   gzip -> the rows, whole, at most cap bytes (a HarnessError
                                         naming where: damaged, cut off, over the cap, more after it)
    checked(data, marker, where) -> bytes   the uncompressed rows, when they are what the marker records
    lines_of(text) -> the text's lines, each with its newline (split at "\n" only)
    read_object(path, strict, warn, then) -> a JSON file's object ({} where unreadable, not strict)
    read_env(path, strict, warn) -> env.json's object (read_object)
    BadRow                               the error a strict read raises (file:line: why)
"""

import json
import math
import sys
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.measure.store import rowfile, runfolder, stats

SCHEMA_VERSIONS = (1,)
MAX_NS = 3600 * 10**9  # an hour: no call, import or cold start of LeNet-5 takes longer
NUMBER = (int, float)
TEXT = (str, bool)  # values without a number in them
FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "setup": {"cell_id": str},
    "round": {"cell_id": str, "round": int, "times_ns": list},
    "load": {"round": int},
    "cell": {"cell_id": str, "status": str, "cell": dict, "rounds_ns": list},
}
CELL_SPEC: dict[str, type | tuple[type, ...]] = {"implementation": str, "variant": str, "device": str,
                                                 "batch_size": int, "dtype": str}
NONE = type(None)
OPTIONAL: dict[str, dict[str, type | tuple[type, ...]]] = {  # where present, of these types
    "setup": {"pid": (int, NONE), "process": int, "calls": int, "import_ns": (*NUMBER, NONE),
              "load_ns": (*NUMBER, NONE), "cold_start_ns": (*NUMBER, NONE), "memory": (dict, NONE),
              "gpu_memory": (dict, NONE), "installed": (dict, NONE), "frameworks": (list, NONE),
              "fresh_compile_cache": bool},
    "round": {"process": int, "pid": (int, NONE), "device_ns": (list, NONE), "rss_peak": (*NUMBER, NONE),
              "gpu_samples": (list, NONE), "contended": (str, NONE)},
    "load": {"cells": list, "busy": list, "contended": (str, NONE)},
    "cell": {"setup": (dict, NONE), "stats": (dict, NONE), "device_stats": (dict, NONE),
             "round_process": list, "contended": bool, "contended_reasons": list, "reason": (str, NONE),
             "rss_peak": (*NUMBER, NONE), "convergence": (dict, NONE), "warnings": list, "study": str,
             "stats_version": int},
}
CELL_OPTIONAL: dict[str, type | tuple[type, ...]] = {"calls": int, "mode": str, "threads": (int, NONE),
                                                     "processes": int}


def nan_means_none(key: str) -> bool:
    """Statistics that are NaN where they cannot be computed (harness.measure.store.stats): an interval,
    a spread, a share; never a measured time."""
    return key.startswith(("ci", "within_ci")) or key in ("spread", "share")


class BadRow(HarnessError):
    """A row (or env.json) that is not usable: where (file:line) and why."""


def parse(line: str) -> dict[str, Any]:
    """One line -> one JSON object (anything else is a ValueError); check() judges its numbers."""
    row = json.loads(line)
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, found {type(row).__name__}")
    return row


def is_number(value: Any) -> bool:
    return isinstance(value, NUMBER) and not isinstance(value, bool)


def type_name(expected: type | tuple[type, ...]) -> str:
    kinds = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def has_type(value: Any, expected: type | tuple[type, ...]) -> bool:
    if type(value) is bool:  # an int to isinstance, never a number here
        return expected is bool or isinstance(expected, tuple) and bool in expected
    return isinstance(value, expected)


def timey(key: str) -> bool:
    """A key whose numbers are nanoseconds."""
    return key.endswith("_ns") or "_ns_" in key


def bad_number(value: Any, where: str, as_time: bool, nan_ok: bool = False) -> str | None:
    """Why a number (or every number inside a list or object) is unusable, or None. where: the value's
    name, said only in the answer (a report reads a million values: none is named until one is bad)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return None
    if kind is int:  # finite, unless too big for a float (JSON's 1e400 is a float: inf)
        if abs(value) > sys.float_info.max:
            return f"{where} is an integer of {value.bit_length()} bits (too big for a float)"
    elif kind is float:
        if math.isnan(value) and nan_ok:
            return None
        if not math.isfinite(value):
            return f"{where} is {value} (not a finite number)"
    elif kind is list:
        if not value or fine_numbers(value, as_time):
            return None
        for i, item in enumerate(value):
            why = bad_number(item, f"[{i}]", as_time, nan_ok)
            if why:
                return f"{where}{why}"
        return None
    elif kind is dict:
        for key, item in value.items():
            if item is None or type(item) in TEXT or type(item) in NUMBER and 0 <= item < MAX_NS:
                continue  # the common cases at once: usable as any number, a time too (NaN compares False)
            key = str(key)
            why = bad_number(item, key, as_time or timey(key), nan_ok or nan_means_none(key))
            if why:
                return f"{where}.{why}"
        return None
    else:
        return None
    if as_time and not 0 <= value < MAX_NS:
        return f"{where} is {value:g} ns (expected 0 <= t < {MAX_NS:.3g} ns, an hour)"
    return None


def fine_numbers(values: list, as_time: bool) -> bool:
    """Whether a list holds only finite numbers (in nanoseconds: 0 <= t < MAX_NS), checked at C speed: the
    common case (a round's times, the medians of a summary); bad_number names the first bad one."""
    kinds = set(map(type, values))
    if kinds == {int}:
        low, high = min(values), max(values)
        return 0 <= low and high < MAX_NS if as_time else max(-low, high) <= sys.float_info.max
    if kinds <= {int, float} and (kinds == {float} or max(map(abs, values)) <= sys.float_info.max):
        return all(map(math.isfinite, values)) and (not as_time or 0 <= min(values) and max(values) < MAX_NS)
    return False


def bad_calls(times: Any, where: str) -> str | None:
    """A round's per-call times: a list of numbers, each above 0 (bad_number checks the rest)."""
    if not isinstance(times, list) or not set(map(type, times)) <= {int, float}:
        return f"{where}: expected a list of per-call times (numbers)"
    if times and min(times) <= 0:
        return f"{where} holds {min(times):g} ns (a call takes more than 0 ns)"
    return None


def bad_fields(row: dict[str, Any], fields: dict[str, type | tuple[type, ...]],
               where: str = "") -> str | None:
    for key, expected in fields.items():
        if key not in row:
            return f"no field {where}{key!r} (a {row.get('kind')} row needs it)"
        if not has_type(row[key], expected):
            return (f"field {where}{key!r}: expected {type_name(expected)}, "
                    f"found {type(row[key]).__name__}")
    return None


def bad_optional(row: dict[str, Any], fields: dict[str, type | tuple[type, ...]],
                 where: str = "") -> str | None:
    for key, expected in fields.items():
        if key in row and not has_type(row[key], expected):
            return f"field {where}{key!r}: expected {type_name(expected)}, found {type(row[key]).__name__}"
    return None


def bad_kind(row: dict[str, Any]) -> str | None:
    """The fields of the kinds the report reads one by one, with their types."""
    kind = row["kind"]
    why = bad_fields(row, FIELDS.get(kind, {}))
    if why:
        return why
    why = bad_optional(row, OPTIONAL.get(kind, {}))
    if why:
        return why
    if kind == "round":
        return bad_calls(row["times_ns"], "times_ns")
    if kind == "cell":
        why = bad_fields(row["cell"], CELL_SPEC, "cell.") or bad_optional(row["cell"], CELL_OPTIONAL, "cell.")
        if why:
            return why
        if row["cell"]["batch_size"] < 1:
            return f"cell.batch_size is {row['cell']['batch_size']} (expected 1 or more)"
        for i, rnd in enumerate(row["rounds_ns"]):
            why = bad_calls(rnd, f"rounds_ns[{i}]")
            if why:
                return why
    return None


def check(row: Any) -> str | None:
    """Why the row is unusable (see the module's docstring), or None."""
    if not isinstance(row, dict):
        return f"expected a JSON object, found {type(row).__name__}"
    schema = row.get("schema")
    if not is_number(schema) or schema not in SCHEMA_VERSIONS:
        return (f"schema {schema!r} is not one this harness reads (expected one of "
                f"{list(SCHEMA_VERSIONS)}; a newer harness wrote it?)")
    why = bad_fields(row, {"run_id": str, "kind": str, "time": NUMBER})
    if why:
        return why
    for key, value in row.items():
        if value is None or type(value) in TEXT or type(value) in NUMBER and 0 <= value < MAX_NS:
            continue  # as in bad_number's objects
        why = bad_number(value, key, timey(key), nan_means_none(key))
        if why:
            return why
    if not row["time"] > 0:
        return f"time is {row['time']} (expected seconds since 1970, above 0)"
    return bad_kind(row)


WARNED: set[str] = set()  # a file read twice in one command (the report, then the floor) warns once


def warn_stderr(message: str) -> None:
    if message not in WARNED:
        WARNED.add(message)
        print(message, file=sys.stderr)


def measured(row: dict[str, Any]) -> bool:
    """Whether a final cell row measured anything: status ok and at least one timed call."""
    return row.get("status") == "ok" and any(row.get("rounds_ns") or [])


def bad_summary(row: dict[str, Any]) -> str | None:
    """Why a usable cell row's saved summary, of the current version (stats.SUMMARY_VERSION), cannot be
    the summary of its own times (stats.impossible), or None (another kind, another version, nothing
    measured: its summary is computed from its times, harness.measure.plan.cells.row_summary)."""
    if row["kind"] != "cell" or row.get("stats_version") != stats.SUMMARY_VERSION or not measured(row):
        return None
    if not isinstance(row.get("stats"), dict):
        return (f"field 'stats': expected the summary of its times (stats_version {stats.SUMMARY_VERSION}), "
                f"found {type(row.get('stats')).__name__}")
    return stats.impossible(row["stats"], row["rounds_ns"])


def read_lines(lines: Iterable[str], where: str, strict: bool = False,
               warn: Callable[[str], None] = warn_stderr) -> list[dict]:
    """The usable rows of JSON lines read from `where` (a file, or an archive's member). A partial
    last line (no newline: a run killed mid-write) is skipped; any other bad line is a BadRow
    (strict) or skipped with one WARNING naming where:line. A cell row whose saved summary cannot be
    its times' (bad_summary) is a BadRow (strict), or kept with one WARNING and its summary computed
    again from its times (its stats_version dropped): its times are the measurement, the summary only
    derived from them. Every row read is a new object."""
    rows: list[dict] = []
    for lineno, line in enumerate(lines, 1):
        if not line.endswith("\n"):
            break  # unfinished last row: --resume cuts it off
        try:
            row = parse(line)
        except ValueError as exc:
            why: str | None = f"not a JSON row ({exc})"
        else:
            why = check(row)
        if why is None:
            fault = bad_summary(row)
            if fault and strict:
                raise BadRow(f"{where}:{lineno}: {fault}")
            if fault:
                warn(f"WARNING: {where}:{lineno}: {fault}; its summary is computed again from its times")
                del row["stats_version"]
            rows.append(row)
        elif strict:
            raise BadRow(f"{where}:{lineno}: {why}")
        else:
            warn(f"WARNING: {where}:{lineno}: {why}; row skipped")
    return rows


def read(path: Path, strict: bool = False, warn: Callable[[str], None] = warn_stderr) -> list[dict]:
    """Every usable row of a results.jsonl (read_lines); a file that is not UTF-8 text or cannot be
    read is a BadRow (strict) or a WARNING, its rows before the fault kept."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            return read_lines(f, str(path), strict, warn)
    except UnicodeDecodeError as exc:
        if strict:
            raise BadRow(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        warn(f"WARNING: {path}: not UTF-8 text ({exc.reason}); its rows skipped")
    except OSError as exc:
        if strict:
            raise BadRow(f"{path}: cannot read it ({exc.strerror or exc})") from None
        warn(f"WARNING: {path}: cannot read it ({exc.strerror or exc}); its rows skipped")
    return []


def lines_of(text: str) -> list[str]:
    """The lines of JSON rows, each ending in its newline (a partial last one without): split at "\n"
    only, as a file is read (str.splitlines would also split at \u2028 and its kin inside a row)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def read_run(run_dir: Path, strict: bool = False, warn: Callable[[str], None] = warn_stderr) -> list[dict]:
    """Every usable row of a run folder, in either form: a partial run's plain file as read() reads it
    (a partial last line skipped; a bad row a BadRow when strict, else one WARNING naming file:line); a
    complete run's compressed rows whole and as its completion marker records them, else a BadRow naming
    the file, strict or not (never the rows "up to the fault"). A complete run is read from its
    compressed file, a partial one from its plain file (a kill while its marker was written leaves both),
    a complete run from before compression from its plain file."""
    run_dir = Path(run_dir)
    marker = runfolder.completion(run_dir)
    order = (rowfile.PACKED, rowfile.PLAIN) if marker is not None else (rowfile.PLAIN, rowfile.PACKED)
    path = next((run_dir / name for name in order if (run_dir / name).is_file()), None)
    if path is None or path.name == rowfile.PLAIN:
        if marker is not None and any(key in marker for key in rowfile.RECORD):
            raise BadRow(f"{run_dir / rowfile.PACKED}: missing; the run's completion marker records "
                         "compressed rows (restore the file)")
        return [] if path is None else read(path, strict, warn)
    try:
        data = checked(unpack(path.read_bytes(), rowfile.CAP_BYTES, str(path)), marker, str(path))
        text = data.decode("utf-8", errors="strict")
    except HarnessError as exc:
        raise BadRow(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise BadRow(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise BadRow(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return read_lines(lines_of(text), str(path), strict, warn)


def unpack(data: bytes, cap: int, where: str, cap_said: str = "the cap on one run's rows") -> bytes:
    """One gzip member, uncompressed whole and at most cap bytes, its CRC and length checked."""
    stream = zlib.decompressobj(wbits=31)  # gzip's header and trailer
    try:
        out = stream.decompress(data, cap + 1)
    except zlib.error as exc:
        raise HarnessError(f"{where}: the compressed rows are damaged ({exc}); a complete run's rows are "
                           "read whole or not at all: restore the file") from None
    if len(out) > cap:
        raise HarnessError(f"{where}: the compressed rows unpack to more than {cap / 2**20:.3g} MiB "
                           f"({cap_said}); refusing them (a gzip bomb?)")
    if not stream.eof:
        raise HarnessError(f"{where}: the compressed rows are cut off (the gzip stream ends before its "
                           "end); a complete run's rows are read whole or not at all: restore the file")
    if stream.unused_data:
        raise HarnessError(f"{where}: {len(stream.unused_data)} bytes after the end of the compressed rows "
                           "(expected one gzip stream); refusing them")
    return out


def checked(data: bytes, marker: dict[str, Any] | None, where: str) -> bytes:
    """The uncompressed rows, when the completion marker records this many rows with this sha256."""
    recorded = rowfile.RECORD
    if marker is None or not all(key in marker for key in recorded):
        raise HarnessError(f"{where}: compressed rows without a completion marker that records them "
                           f"(expected {', '.join(recorded)} in the run's complete.json); refusing them")
    if data and not data.endswith(b"\n"):
        raise HarnessError(f"{where}: the compressed rows end inside a row (a complete run's rows are whole "
                           "lines); refusing them")
    found = rowfile.record(data)
    for key in recorded:
        if found[key] != marker[key]:
            raise HarnessError(f"{where}: the rows are not the ones the completion marker records "
                               f"({key}: the marker says {marker[key]!r}, the file holds {found[key]!r})")
    return data


def read_object(path: Path, strict: bool = False, warn: Callable[[str], None] = warn_stderr,
                then: str = "skipped") -> dict:
    """A JSON file holding one object (env.json, a verify or cross-check file). Missing: {}. Not
    JSON or not an object: a BadRow (strict), else one WARNING saying what follows (`then`) and {}."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, found {type(data).__name__}")
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        if strict:
            raise BadRow(f"{path}: not a readable JSON object ({exc})") from None
        warn(f"WARNING: {path}: not a readable JSON object ({exc}); {then}")
        return {}
    return data


def read_env(path: Path, strict: bool = False, warn: Callable[[str], None] = warn_stderr) -> dict:
    """A run's env.json (read_object); where unreadable, its run is labelled an unknown machine."""
    return read_object(path, strict, warn, "its run is labelled an unknown machine ('?')")
