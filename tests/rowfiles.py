"""A test's view of a run's rows, in either form (harness.measure.store.rowfile), for tests that
read a run's raw lines or change them in a copy of the results."""

import gzip
from pathlib import Path

from harness.measure.store import rowfile, runfolder


def text(run_dir: Path) -> str:
    """The run's rows as written, one JSON object a line (no check: the test's own copy)."""
    packed = Path(run_dir) / rowfile.PACKED
    if packed.is_file():
        return gzip.decompress(packed.read_bytes()).decode()
    return (Path(run_dir) / rowfile.PLAIN).read_text()


def rewrite(run_dir: Path, rows_text: str) -> None:
    """The run's rows replaced; a complete run's compressed again, its marker recording the new rows."""
    (Path(run_dir) / rowfile.PLAIN).write_text(rows_text)
    runfolder.pack_complete(run_dir)
