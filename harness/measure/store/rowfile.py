"""A run's rows on disk, in one of two forms:

    <run>/results.jsonl      plain: appended and flushed while the run is written (results.RowWriter);
                             a partial run (no completion marker) keeps its rows so
    <run>/results.jsonl.gz   a complete run's rows, gzip with mtime 0 (the same rows give the same
                             bytes), written by the command that writes the completion marker
                             (runfolder.mark_complete), which records in the marker the number of
                             rows and the sha256 of the uncompressed rows, then removes the plain file

Compressed rows are read whole or not at all: a file cut short, damaged, or not the rows its marker
records is an error naming the file, never read "up to the last whole row" (that is for a plain file
a killed run left). Uncompressing stops at a cap (a gzip bomb stops there).

    PLAIN, PACKED, RECORD                   the file names; the marker's fields that record the rows
    compress(data) -> bytes                 gzip, mtime 0, no file name: reproducible bytes
    record(data) -> {"rows": n, "rows_sha256": hex}   what a marker records of uncompressed rows
    pack(run_dir) -> record                 PLAIN -> PACKED ({} where there is no plain file)
    unpack(data, cap, where, cap_said) -> bytes   gzip -> the rows, whole (a HarnessError naming where)
    checked(data, marker, where) -> bytes   the rows, when they are what the marker records
    find(run_dir) -> Path | None            the rows' file: PACKED where the run is marked, else PLAIN
    has_rows(run_dir) -> bool               a run folder: either form there
    run_dirs(root, pattern) -> [run_dir]    the run folders under root matching <study>/<run>
"""

import gzip
import hashlib
import zlib
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.machine.files import write_atomic

PLAIN = "results.jsonl"
PACKED = "results.jsonl.gz"
RECORD = ("rows", "rows_sha256")
CAP_BYTES = 256 << 20  # what one run's rows may uncompress to (the largest run's are ~3 MiB)
LEVEL = 9


def compress(data: bytes) -> bytes:
    """gzip at mtime 0 and no file name in the header: the same rows, the same bytes."""
    return gzip.compress(data, compresslevel=LEVEL, mtime=0)


def whole_lines(data: bytes) -> bytes:
    """The rows up to the last newline (a partial last line is what --resume cuts off)."""
    return data[: data.rfind(b"\n") + 1]


def record(data: bytes) -> dict[str, Any]:
    return {"rows": data.count(b"\n"), "rows_sha256": hashlib.sha256(data).hexdigest()}


def pack(run_dir: Path) -> dict[str, Any]:
    """results.jsonl -> results.jsonl.gz (written whole: a temporary file renamed), and what the marker
    records of it; the plain file stays until the marker is written (drop_plain). {}: no plain file."""
    plain = Path(run_dir) / PLAIN
    try:
        data = whole_lines(plain.read_bytes())
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise HarnessError(f"{plain}: cannot read the run's rows to compress them ({exc.strerror or exc}); "
                           "the run stays partial, its rows kept") from None
    write_atomic(plain.with_name(PACKED), compress(data))
    return record(data)


def drop_plain(run_dir: Path) -> None:
    (Path(run_dir) / PLAIN).unlink(missing_ok=True)


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
    if marker is None or not all(key in marker for key in RECORD):
        raise HarnessError(f"{where}: compressed rows without a completion marker that records them "
                           f"(expected {', '.join(RECORD)} in the run's complete.json); refusing them")
    if data and not data.endswith(b"\n"):
        raise HarnessError(f"{where}: the compressed rows end inside a row (a complete run's rows are whole "
                           "lines); refusing them")
    found = record(data)
    for key in RECORD:
        if found[key] != marker[key]:
            raise HarnessError(f"{where}: the rows are not the ones the completion marker records "
                               f"({key}: the marker says {marker[key]!r}, the file holds {found[key]!r})")
    return data


def find(run_dir: Path, marked: bool) -> Path | None:
    """The rows' file: the compressed one of a marked (complete) run, else the plain one; None: neither.
    A partial run with both (a kill while its marker was written) is read from the plain file."""
    run_dir = Path(run_dir)
    order = (PACKED, PLAIN) if marked else (PLAIN, PACKED)
    return next((run_dir / name for name in order if (run_dir / name).is_file()), None)


def has_rows(run_dir: Path) -> bool:
    return any((Path(run_dir) / name).is_file() for name in (PLAIN, PACKED))


def run_dirs(root: Path, pattern: str = "*/*") -> list[Path]:
    """The run folders under root matching pattern (<study>/<run>), sorted, each holding rows in either
    form; none in a hidden folder (an import's staging folder)."""
    root = Path(root)
    found = {path.parent for name in (PLAIN, PACKED) for path in root.glob(f"{pattern}/{name}")}
    return sorted(p for p in found if not any(part.startswith(".") for part in p.relative_to(root).parts))
