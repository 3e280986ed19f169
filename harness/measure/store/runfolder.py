"""A run folder's state: complete or not (its marker), its place in this checkout's order, and its
one writer (a lock).

    <run>/complete.json   written last, atomically, by the command that made the run (or by
                          import-results on this checkout): a run without it is partial: its rows
                          are kept, it never answers, and the report names it with how to finish it.
                          Writing it compresses the rows (harness.measure.store.rowfile): it records
                          their count and sha256, and the plain file goes once it is written
    <run>/.writer.lock    held (flock) by the one process writing the run's rows: a second writer
                          (two `--resume` of one run) is refused with the holder named

"Newest" is this checkout's order: `order` in the marker is this machine's clock when the run
completed here or was imported here (and never before a run already marked here, should the clock
lag), never a time the rows (or an archive) carry.

    MARKER, LOCK                          the file names
    mark_complete(run_dir, how, order)    compress the rows, write the marker (order: next_order,
                                          unless given), remove the plain rows
    pack_complete(run_dir) -> bool        a complete run's plain rows compressed, its marker kept
    next_order(root) -> float             now, and after every run already marked under root
    completion(run_dir) -> dict | None    the marker's fields; None: partial (or a marker unreadable)
    order(run_dir) -> float | None        where the run stands in this checkout's order
    complete_by_rows(rows) -> bool        a run from before markers: every cell it began finished
    Writer(run_dir)                       the run's lock, or a HarnessError naming its holder
    hold_results(root) -> Writer          an import's lock on the results folder (<root>/.writer.lock)
"""

import errno
import fcntl
import getpass
import json
import math
import os
import socket
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.machine.files import write_atomic
from harness.measure.store import rowfile

MARKER = "complete.json"
LOCK = ".writer.lock"


def next_order(root: Path) -> float:
    """The order of a run completing (or imported) now under root (<root>/<study>/<run>/): this
    machine's clock, and after every run already there whatever the clocks that marked them said."""
    newest = max((order(marker.parent) or 0.0 for marker in Path(root).glob(f"*/*/{MARKER}")), default=0.0)
    return max(time.time(), newest + 0.001)


def mark_complete(run_dir: Path, how: str, order: float | None = None, **fields: Any) -> Path:
    """The marker, written last: the run's id, how it came to be complete, its order here (None:
    next_order of the results folder it is in), and the record of its compressed rows. The rows are
    compressed first and the plain file removed last: a kill on the way leaves a partial run with its
    plain rows, or a complete one with both forms (its compressed rows are read)."""
    run_dir = Path(run_dir)
    packed = rowfile.pack(run_dir)
    data = {"run_id": run_dir.name, "complete": True, "how": how,
            "order": next_order(run_dir.parent.parent) if order is None else order, **fields, **packed}
    path = write_atomic(run_dir / MARKER, json.dumps(data, indent=2) + "\n")
    if packed:
        rowfile.drop_plain(run_dir)
    return path


def pack_complete(run_dir: Path) -> bool:
    """A complete run whose rows are plain (written before runs were compressed on completion):
    compress them and record them in its marker, which keeps every other field (its order too).
    False: nothing to do (a partial run, or one already compressed)."""
    run_dir = Path(run_dir)
    marker = completion(run_dir)
    if marker is None or not (run_dir / rowfile.PLAIN).is_file():
        return False
    write_atomic(run_dir / MARKER, json.dumps({**marker, **rowfile.pack(run_dir)}, indent=2) + "\n")
    rowfile.drop_plain(run_dir)
    return True


def completion(run_dir: Path) -> dict[str, Any] | None:
    """The marker's fields, or None (no marker, or one that is not a marker: the run is partial)."""
    try:
        data = json.loads((Path(run_dir) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    order = data.get("order")
    if not (data.get("complete") is True and isinstance(order, (int, float)) and not isinstance(order, bool)
            and math.isfinite(order)):
        return None
    return data


def complete_by_rows(rows: list[dict[str, Any]]) -> bool:
    """For a run written before runs were marked: complete when it has rows and every cell any row
    names has its final cell row (a run killed mid-way has rounds of cells that never finished)."""
    named = {row["cell_id"] for row in rows if isinstance(row.get("cell_id"), str)}
    finished = {row["cell_id"] for row in rows if row.get("kind") == "cell"}
    return bool(rows) and named <= finished


def order(run_dir: Path) -> float | None:
    marker = completion(run_dir)
    return None if marker is None else float(marker["order"])


def holder_text() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return json.dumps({"user": user, "host": socket.gethostname(), "pid": os.getpid(),
                       "since": time.strftime("%Y-%m-%d %H:%M:%S")})


def describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"{info['user']} on {info['host']}, process {info['pid']}, since {info['since']}"
    except (ValueError, KeyError, TypeError):
        return "another process (it did not say which)"


class Writer:
    """The run's one writer: an exclusive flock on <run>/.writer.lock, held until release() or the
    process ends (a killed run's lock goes with it, so --resume can take it)."""

    def __init__(self, run_dir: Path, what: str = "this run", advice: str = "one writer per run: wait for "
                 "it to end, or resume another run"):
        self.path = Path(run_dir) / LOCK
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise HarnessError(f"{self.path}: cannot open the run's lock ({exc.strerror or exc})") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            held = os.pread(self.fd, 4096, 0).decode("utf-8", "replace")
            os.close(self.fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise HarnessError(f"{self.path}: cannot lock the run ({exc.strerror or exc}); a folder "
                                   "on a filesystem without locks? use --out on a local disk") from None
            raise HarnessError(f"{self.path.parent}: another process is writing {what} "
                               f"({describe_holder(held)}); {advice}") from None
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, holder_text().encode(), 0)
        except OSError:
            pass  # the lock holds even where the name of its holder could not be written (a full disk)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


def hold_results(root: Path) -> Writer:
    """The results folder's lock for an import (two imports at once would each check, then both
    rename): the second is refused with the holder named."""
    Path(root).mkdir(parents=True, exist_ok=True)
    return Writer(root, "an import into this results folder", "one import at a time: run it again when "
                  "the other has ended")
