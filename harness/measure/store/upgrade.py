"""`python -m harness upgrade-results`: the complete runs of a results folder, their cell rows given the
summary of the current version (stats.SUMMARY_VERSION) where they carry another or none.

A cell row saves its summary (`stats`) and the version of the code that computed it (`stats_version`);
the report reads a saved summary of the current version and computes any other again from the row's
times (harness.measure.plan.cells.row_summary), which costs most of a report's time. After a bump of
the version, or for rows from before versions, this command computes each such summary once and saves
it in its row. Nothing measured changes: only `stats` and `stats_version` of a cell row are written, and
each rewritten row is checked to hold every other field as it was. Each run is rewritten whole: its
compressed rows (results.jsonl.gz) through a temporary file renamed into place, then its completion
marker with the new rows' sha256 (a kill between the two renames leaves a run whose rows the marker
does not record: the reader refuses it, naming both, and the committed copy restores it).

    upgrade_run(run_dir) -> int           the cell rows given today's summary (0: the run left as it was)
    upgrade(root) -> [(run_dir, count)]   every complete, compressed run under root
"""

import json
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.machine.files import write_atomic
from harness.measure.store import rowfile, rows, runfolder, stats

SAVED = ("stats", "stats_version")  # what upgrading a row may change


def stale(row: dict[str, Any]) -> bool:
    """A measured cell row whose saved summary is not of the current version."""
    return (row.get("kind") == "cell" and rows.measured(row)
            and row.get("stats_version") != stats.SUMMARY_VERSION)


def upgraded(line: str, where: str) -> str:
    """One row's line with today's summary (a stale row), else the line itself, byte for byte."""
    row = rows.parse(line)
    if not stale(row):
        return line
    new = {**row, "stats": stats.summarize(row["rounds_ns"], row.get("round_process")),
           "stats_version": stats.SUMMARY_VERSION}
    text = json.dumps(new, separators=(",", ":")) + "\n"
    kept = {k: v for k, v in rows.parse(text).items() if k not in SAVED}
    if json.dumps(kept, sort_keys=True) != json.dumps({k: v for k, v in row.items() if k not in SAVED},
                                                      sort_keys=True):
        raise HarnessError(f"{where}: its row would change more than its summary; left as it was")
    return text


def upgrade_run(run_dir: Path) -> int:
    """A complete run's compressed rows, each stale cell row given today's summary; how many were."""
    run_dir = Path(run_dir)
    path = run_dir / rowfile.PACKED
    marker = runfolder.completion(run_dir)
    if marker is None or not path.is_file():
        return 0
    rows.read_run(run_dir, strict=True)  # every row usable, and the rows the marker records
    text = rows.checked(rows.unpack(path.read_bytes(), rowfile.CAP_BYTES, str(path)), marker,
                        str(path)).decode("utf-8")
    lines = rows.lines_of(text)
    new = [upgraded(line, f"{path}:{i}") for i, line in enumerate(lines, 1)]
    count = sum(a is not b for a, b in zip(lines, new, strict=True))
    if not count:
        return 0
    data = "".join(new).encode("utf-8")
    rows.read_lines(rows.lines_of(data.decode("utf-8")), str(path), strict=True)  # as a reader will
    write_atomic(path, rowfile.compress(data))
    write_atomic(run_dir / runfolder.MARKER, json.dumps({**marker, **rowfile.record(data)}, indent=2) + "\n")
    return count


def upgrade(root: Path) -> list[tuple[Path, int]]:
    """upgrade_run of every complete run under root (a study's runs and reproduce's second runs), each
    under its writer's lock (runfolder.Writer: no run is rewritten while it is written)."""
    root = Path(root)
    found = sorted({p.parent for p in root.rglob(rowfile.PACKED)
                    if not any(part.startswith(".") for part in p.relative_to(root).parts)})
    done = []
    for run_dir in found:
        writer = runfolder.Writer(run_dir)
        try:
            done.append((run_dir, upgrade_run(run_dir)))
        finally:
            writer.release()
    return done
