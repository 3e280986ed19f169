"""A grading's folder: one result folder per submission, so Slurm tasks never share a file.

    OUT/<lab>.toml                    a copy of the lab file graded, named after the lab (so a lab
                                      named by its file name keeps it); Slurm tasks and `lab report`
                                      read it
    OUT/results/<id>/row.json         the submission's row (written last, atomically: present =
                                      done); <id> is the student's safe id (harness.lab.text:
                                      the folder name itself when it is a plain one)
    OUT/results/<id>/started.json     written first (host, time, attempt, and every attempt's
                                      history: who ended it, harness.lab.judge.attempts): a folder
                                      without row.json is a submission whose grading was cut off
    OUT/results/<id>/worker.log       what the submission's worker printed (its first and last
                                      32 KiB)
    OUT/students.json                 the submission folders' names: the leaderboard lists these
    OUT/.grader-key                   the key of the rows' MACs (readable by the grader alone)
    OUT/grading.json                  where the submissions and weights were (for `lab regrade`)

Under sudo everything here is handed to the user who ran it (SUDO_UID/SUDO_GID) after writing:
`lab report`, `lab export` and `lab regrade`'s reading run as that user; the key stays 0600.

Only the grader writes here (no worker can see --out). Each row and the students list carry an
HMAC-SHA256 under the grader's key: a row edited afterwards, or one added, is named on the
leaderboard instead of ranked.

    prepare, result_dir, graded_lab, students, linked, write_students, listed_students   the folder
    write_grading, grading, hand_over                           regrades; sudo's user owns it
    write_started, started, write_row, read_row, graded_row, read_rows, checked_rows   the rows
    write_json, read_json                                       any JSON file of OUT
    mac, genuine                                                                   their MACs
"""

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from harness.errors import HarnessError
from harness.lab import text
from harness.lab.judge.rules import assignment
from harness.lab.judge.rules.assignment import Lab
from harness.machine.files import write_atomic

SCHEMA_VERSION = 1
RESULTS = "results"
KEY = ".grader-key"
STUDENTS = "students.json"
GRADING = "grading.json"


def result_dir(out: Path, student: str) -> Path:
    """A student's results folder, named by the student's safe id (harness.lab.text), never verbatim."""
    return Path(out) / RESULTS / text.safe_id(student)


def students(submissions: Path, module: str, refused: Iterable[str] = (), links: bool = False) -> list[str]:
    """Every folder in `submissions` is one student's submission, by folder name (a link is not a
    folder of it: linked() refuses it, unless `links`: lab check's own link to the student's folder);
    `refused`, students with a refused row and no folder, may be all there is."""
    folder = Path(submissions)
    if not folder.is_dir():
        raise HarnessError(f"--submissions {folder}: not a folder (expected one folder per student, "
                           f"each holding {module})")
    names = sorted(p.name for p in folder.iterdir()
                   if p.is_dir() and (links or not p.is_symlink()) and not p.name.startswith((".", "_")))
    if not names and not list(refused):
        raise HarnessError(f"--submissions {folder}: no submission folders in it "
                           f"(expected {folder}/<student>/{module})")
    return names


def linked(submissions: Path) -> dict[str, str]:
    """{name: why} of the links among the student folders (a hand-made folder may hold one): each is
    that student's hand-in refused, never followed (it could lead to a classmate's folder, or /)."""
    return {p.name: f"{p.name}: a link in {submissions}, not a folder; not followed (copy the "
                    "student's files into a folder of that name, then grade with --resume)"
            for p in Path(submissions).iterdir()
            if p.is_symlink() and not p.name.startswith((".", "_"))}


def graded_lab(out: Path) -> Lab:
    """The lab of a grading folder, read from its one copy, OUT/<lab>.toml (as `prepare` wrote it)."""
    found = sorted(Path(out).glob("*.toml"))
    if len(found) != 1:
        raise HarnessError(f"{out}: not a lab grading folder (expected one <lab>.toml in it, found "
                           f"{[p.name for p in found]})")
    return assignment.load(str(found[0]))


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
        write_atomic(copy, lab_source)  # whole: a second grader starting on this OUT reads it
    key = out / KEY
    if not key.exists():  # made whole, then linked: two graders starting together share one key
        made = out / f"{KEY}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        try:
            os.link(made, key)
        except FileExistsError:
            pass  # the other grader's is the key
        finally:
            made.unlink()
    return copy


def mac(out: Path, data: dict) -> str:
    """HMAC-SHA256 of a row (without its own "mac") under the grading's key."""
    try:
        key = (Path(out) / KEY).read_bytes()
    except OSError as exc:
        raise HarnessError(f"{out}: cannot read the grader's key {KEY} ({exc.strerror}); rows are "
                           "written and checked by the grader's user only") from None
    body = json.dumps({k: v for k, v in data.items() if k != "mac"}, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def genuine(out: Path, data: dict) -> bool:
    return isinstance(data.get("mac"), str) and hmac.compare_digest(data["mac"], mac(out, data))


def write_students(out: Path, names: list[str]) -> None:
    data = {"students": sorted(names)}
    write_json(Path(out) / STUDENTS, {**data, "mac": mac(out, data)})


def listed_students(out: Path) -> list[str] | None:
    """The graded class, as the grader wrote it; None for a folder from before the list existed,
    and an error when the list was edited."""
    path = Path(out) / STUDENTS
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        data = {}
    if not isinstance(data, dict) or not genuine(out, data):
        raise HarnessError(f"{path}: changed after the grader wrote it (its MAC does not match); "
                           "grade the class again into a new --out")
    return list(data["students"])


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)  # atomic: a reader sees the old file or the new one


def write_started(out: Path, student: str, data: dict) -> None:
    """OUT/results/<id>/started.json: the student's attempts at grading (harness.lab.judge.attempts
    writes and reads them); its top level is the newest attempt (host, time, attempt)."""
    write_json(result_dir(out, student) / "started.json", data)


def write_row(out: Path, row: dict) -> Path:
    path = result_dir(out, row["student"]) / "row.json"
    data = {"schema": SCHEMA_VERSION, **row}
    write_json(path, {**data, "mac": mac(out, data)})
    return path


def graded_row(out: Path, student: str) -> dict | None:
    """The student's row, unless it is the Slurm merge's placeholder for a task that left none
    (cancelled, crashed): that is no result, and the grading of that student never finished."""
    row = read_row(out, student)
    return row if row is not None and not row.get("from_merge") else None


def read_row(out: Path, student: str) -> dict | None:
    return read_json(result_dir(out, student) / "row.json")


def started(out: Path, student: str) -> dict | None:
    data = read_json(result_dir(out, student) / "started.json")
    return data if isinstance(data, dict) and isinstance(data.get("attempt", 1), int) else None


def read_rows(out: Path) -> list[dict]:
    base = Path(out) / RESULTS
    if not base.is_dir():
        raise HarnessError(f"{out}: no graded submissions ({base} missing); run "
                           "python -m harness lab grade LAB --submissions DIR --out OUT first")
    rows = [read_json(p / "row.json") for p in sorted(base.iterdir()) if p.is_dir()]
    return [r for r in rows if isinstance(r, dict)]


def read_json(path: Path) -> dict | None:
    """The JSON in `path`; None where it cannot be read or is not JSON (the caller checks its shape)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def checked_rows(out: Path) -> tuple[list[dict], list[str]]:
    """(the rows of the class, what was set aside): a row whose MAC fails becomes a `tampered`
    row of its student; a row of a name not in the class list is dropped and named."""
    names = listed_students(out)
    rows, notes = [], []
    for row in read_rows(out):
        student = row["student"] if isinstance(row.get("student"), str) else "?"
        if names is not None and student not in names:
            notes.append(f"results/{text.safe_id(student)}: not a student of this grading "
                         f"(not in {STUDENTS}); ignored")
            continue
        if not genuine(out, row):
            row = {"student": student, "status": "tampered", "rank_by": row.get("rank_by", "?"),
                   "reason": "row.json was changed after the grader wrote it (its MAC does not match); "
                             "delete results/<student> and grade it again with --resume"}
            notes.append(f"results/{text.safe_id(student)}/row.json: changed after the grader wrote it")
        rows.append(row)
    return rows, notes


def write_grading(out: Path, submissions: Path, weights: str | Path) -> None:
    """OUT/grading.json: the submissions folder and weights graded, for `lab regrade OUT`."""
    write_json(Path(out) / GRADING, {"submissions": str(Path(submissions).resolve()),
                                     "weights": str(Path(weights).resolve())})


def grading(out: Path) -> dict:
    """What write_grading recorded ({} for a folder from before it)."""
    data = read_json(Path(out) / GRADING)
    return data if isinstance(data, dict) else {}


def hand_over(out: Path, environ: dict | None = None) -> tuple[int, int] | None:
    """Under sudo (root, SUDO_UID/SUDO_GID set): `out` and everything in it (links not followed)
    to the user who ran sudo; the key's 0600 keeps it theirs alone. Returns (uid, gid), or None."""
    env = os.environ if environ is None else environ
    uid, gid = env.get("SUDO_UID", ""), env.get("SUDO_GID", "")
    if os.geteuid() != 0 or not uid.isdigit() or not gid.isdigit() or not Path(out).is_dir():
        return None
    owner = (int(uid), int(gid))
    os.chown(out, *owner, follow_symlinks=False)
    for folder, dirs, names in os.walk(out):
        for name in dirs + names:
            os.chown(os.path.join(folder, name), *owner, follow_symlinks=False)
    return owner
