"""A grading's folder: one result folder per submission, so Slurm tasks never share a file.

    OUT/<lab>.toml                    a copy of the lab file graded, named after the lab (so a lab
                                      named by its file name keeps it); Slurm tasks and `lab report`
                                      read it
    OUT/results/<student>/row.json    the submission's row (written last, atomically: present = done)
    OUT/results/<student>/started.json  written first (node, time): a folder without row.json is
                                      a submission whose grading was cut off
    OUT/results/<student>/worker.log  what the submission's worker printed
"""

import json
import os
import socket
import time
from pathlib import Path

from harness.errors import HarnessError

SCHEMA_VERSION = 1
RESULTS = "results"


def result_dir(out: Path, student: str) -> Path:
    return Path(out) / RESULTS / student


def students(submissions: Path, module: str) -> list[str]:
    """Every folder in `submissions` is one student's submission, by folder name."""
    folder = Path(submissions)
    if not folder.is_dir():
        raise HarnessError(f"--submissions {folder}: not a folder (expected one folder per student, "
                           f"each holding {module})")
    names = sorted(p.name for p in folder.iterdir()
                   if p.is_dir() and not p.name.startswith((".", "_")))
    if not names:
        raise HarnessError(f"--submissions {folder}: no submission folders in it "
                           f"(expected {folder}/<student>/{module})")
    return names


def lab_copy(out: Path) -> Path:
    """OUT/<lab>.toml, the one lab file of a grading folder."""
    found = sorted(Path(out).glob("*.toml"))
    if len(found) != 1:
        raise HarnessError(f"{out}: not a lab grading folder (expected one <lab>.toml in it, found "
                           f"{[p.name for p in found]})")
    return found[0]


def prepare(out: Path, lab_name: str, lab_source: str, lab_path: str) -> Path:
    """OUT/<lab>.toml: the lab being graded; another lab's folder is refused, not mixed."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    copy = out / f"{lab_name}.toml"
    others = [p for p in out.glob("*.toml") if p != copy]
    if others or (copy.is_file() and copy.read_text() != lab_source):
        raise HarnessError(f"{out}: holds results of another lab file ({(others or [copy])[0].name} differs "
                           f"from {lab_path}); use another --out")
    if Path(lab_path).resolve() != copy.resolve():
        copy.write_text(lab_source)
    return copy


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)  # atomic: a reader sees the old file or the new one


def mark_started(out: Path, student: str, **info) -> None:
    write_json(result_dir(out, student) / "started.json",
               {"student": student, "host": socket.gethostname(), "time": time.time(), **info})


def write_row(out: Path, row: dict) -> Path:
    path = result_dir(out, row["student"]) / "row.json"
    write_json(path, {"schema": SCHEMA_VERSION, **row})
    return path


def read_row(out: Path, student: str) -> dict | None:
    path = result_dir(out, student) / "row.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def started(out: Path, student: str) -> dict | None:
    try:
        return json.loads((result_dir(out, student) / "started.json").read_text())
    except (OSError, ValueError):
        return None


def read_rows(out: Path) -> list[dict]:
    base = Path(out) / RESULTS
    if not base.is_dir():
        raise HarnessError(f"{out}: no graded submissions ({base} missing); run "
                           "python -m harness lab grade LAB --submissions DIR --out OUT first")
    rows = [read_row(out, p.name) for p in sorted(base.iterdir()) if p.is_dir()]
    return [r for r in rows if r is not None]
