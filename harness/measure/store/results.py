"""The results store: <out>/<study>/<run-id>/ with results.jsonl, env.json and study.toml, and
complete.json once the run is finished (harness.measure.store.runfolder), when the rows are compressed
into results.jsonl.gz (harness.measure.store.rowfile).

Every row is one JSON object on one line, carrying the schema version, written with a single
write() and flushed to disk (fsync) as it is made, so a run killed at any point leaves valid
JSON lines: at worst a partial last line, which readers skip and --resume cuts off. A row that
cannot be written whole (a full disk) is cut off again, and the run stops with one error: every
row before it is kept. A run folder is never overwritten. Rows are read by harness.measure.store.rows
(read_rows here is its read_run).
"""

import getpass
import json
import os
import socket
import time
from pathlib import Path

from harness.errors import HarnessError
from harness.machine.files import disk_error
from harness.measure.store import rowfile, runfolder
from harness.measure.store import rows as row_reader

SCHEMA_VERSION = 1
ROWS = rowfile.PLAIN  # what RowWriter appends to; a complete run's rows are rowfile.PACKED


def short_hostname() -> str:
    return socket.gethostname().split(".")[0] or "host"


def new_run_id() -> str:
    host = short_hostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "user"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{host}-{user}-{os.getpid()}"


def create_run_dir(out: Path, study: str, run_id: str | None) -> Path:
    run_dir = Path(out) / study / (run_id or new_run_id())
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir()  # exclusive: two users at once never share a folder
    except FileExistsError:
        raise HarnessError(
            f"{run_dir}: run folder exists; refusing to overwrite it "
            "(add --resume to complete it, or choose another --run-id)"
        ) from None
    except PermissionError:
        from harness.machine.gpulock import describe

        blocked = next(p for p in (run_dir.parent, *run_dir.parent.parents) if p.exists())
        raise HarnessError(
            f"{run_dir}: cannot create the run folder: {blocked} is not writable for this user "
            f"({describe(blocked)}); use --out with a folder of your own, or ask its owner to "
            f"make it shared (chmod 1777 {blocked})"
        ) from None
    return run_dir


def find_run_dir(out: Path, study: str, run_id: str | None) -> Path:
    """The run to resume: --run-id, else the newest partial run of the study (no completion marker:
    harness.measure.store.runfolder), else its newest run (resuming it redoes nothing)."""
    base = Path(out) / study
    if run_id:
        run_dir = base / run_id
        if not rowfile.has_rows(run_dir):
            raise HarnessError(f"{run_dir}: no such run to resume (no {ROWS})")
        return run_dir
    runs = sorted((p for p in base.glob("*") if rowfile.has_rows(p)),
                  key=lambda p: (runfolder.completion(p) is None, p.stat().st_mtime))
    if not runs:
        raise HarnessError(f"{base}: no run of study {study!r} to resume")
    return runs[-1]


# read_rows(run_dir, strict=False) -> a run folder's usable rows, in either form: the one reader's
# (harness.measure.store.rows.read_run): a partial last line (a run killed mid-write) is skipped; a bad
# row is skipped with one WARNING naming file:line (strict: an error); a complete run's compressed rows
# are whole, or an error naming the file.
read_rows = row_reader.read_run


class RowWriter:
    """Appends rows to results.jsonl, each flushed and fsynced before the call returns."""

    def __init__(self, run_dir: Path, run_id: str):
        self.path = Path(run_dir) / ROWS
        self.run_id = run_id
        self._cut_partial_tail()
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _cut_partial_tail(self):
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            with open(self.path, "r+b") as f:
                f.truncate(end)

    def write(self, row: dict) -> dict:
        """Append one row whole, or not at all: on a full disk the part written is cut off and the
        error names the file (the rows before it are intact)."""
        row = {"schema": SCHEMA_VERSION, "run_id": self.run_id, "time": time.time(), **row}
        data = (json.dumps(row, separators=(",", ":")) + "\n").encode()
        start = os.lseek(self.fd, 0, os.SEEK_END)
        try:
            written = os.write(self.fd, data)
            if written != len(data):
                raise OSError(28, "No space left on device")  # a short write: the disk filled
            os.fsync(self.fd)
        except OSError as exc:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass  # a partial last line is skipped by every reader and cut off by --resume
            error = disk_error(self.path, exc)
            raise HarnessError(f"{error}; the rows before it are kept: free some space, then finish "
                               "the run with --resume") from None
        return row

    def close(self) -> None:
        os.close(self.fd)
