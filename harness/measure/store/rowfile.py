"""A run's rows on disk, in one of two forms:

    <run>/results.jsonl      plain: appended and flushed while the run is written (results.RowWriter);
                             a partial run (no completion marker) keeps its rows so
    <run>/results.jsonl.gz   a complete run's rows, gzip with mtime 0 (the same rows give the same
                             bytes), written by the command that writes the completion marker
                             (runfolder.mark_complete), which records in the marker the number of
                             rows and the sha256 of the uncompressed rows, then removes the plain file

This module writes the compressed form and names the files; the one reader of a run's rows, in
either form, is harness.measure.store.rows.read_run (a complete run's compressed rows read whole or
not at all, against what its marker records, uncompressed only up to CAP_BYTES).

    PLAIN, PACKED, RECORD, CAP_BYTES        the file names; the marker's fields that record the rows;
                                            what one run's rows may uncompress to
    compress(data) -> bytes                 gzip, mtime 0, no file name: reproducible bytes
    whole_lines(data) -> bytes              the rows up to the last newline
    record(data) -> {"rows": n, "rows_sha256": hex}   what a marker records of uncompressed rows
    pack(run_dir) -> record                 PLAIN -> PACKED ({} where there is no plain file)
    drop_plain(run_dir)                     the plain file removed (once the marker is written)
    has_rows(run_dir) -> bool               a run folder: either form there
    run_dirs(root, pattern) -> [run_dir]    the run folders under root matching <study>/<run>
"""

import gzip
import hashlib
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.machine.files import write_atomic

PLAIN = "results.jsonl"
PACKED = "results.jsonl.gz"
RECORD = ("rows", "rows_sha256")
CAP_BYTES = 256 << 20  # what one run's rows may uncompress to (the largest run's are ~3 MiB)
COMPRESSION = 9


def compress(data: bytes) -> bytes:
    """gzip at mtime 0 and no file name in the header: the same rows, the same bytes."""
    return gzip.compress(data, compresslevel=COMPRESSION, mtime=0)


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


def has_rows(run_dir: Path) -> bool:
    return any((Path(run_dir) / name).is_file() for name in (PLAIN, PACKED))


def run_dirs(root: Path, pattern: str = "*/*") -> list[Path]:
    """The run folders under root matching pattern (<study>/<run>), sorted, each holding rows in either
    form; none in a hidden folder (an import's staging folder)."""
    root = Path(root)
    found = {path.parent for name in (PLAIN, PACKED) for path in root.glob(f"{pattern}/{name}")}
    return sorted(p for p in found if not any(part.startswith(".") for part in p.relative_to(root).parts))
