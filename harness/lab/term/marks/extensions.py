"""Extensions: a student's own due date, in OUT/extensions.csv (`lab grade` copies the submissions
folder's extensions.csv there beside manifest.csv; staff may also write or edit it in OUT before
`lab report` or `lab export`). Two columns, a header, one row per student:

    student_id,due
    1007,2026-12-03T23:59:00Z
    ann-smith-1002,2026-12-04

`student_id` is the LMS's id (the manifest's student_id) or the student's folder; `due` is the lab's
[grade] due format (a date-time, a zone or none; a bare date is its day's end). The late policy reads a
student's extension instead of the lab's due (points.score), and the LMS's own late flag is not used
for that student: it was computed against the class's due. The export's feedback and the student's
feedback say so. Every row is checked: an unknown column, a date that is not one, a student twice
are errors naming the file and the line.

    FILE                                   "extensions.csv"
    read(path) -> {student id: due}        the file checked
    graded(out) -> {student id: due}       OUT's file, or {} without one
    due_of(extensions, folder, entry)      a student's extended due, by folder or LMS id (else None)
    line(due, lab_due) -> str              the feedback's sentence
"""

import csv
from datetime import datetime
from pathlib import Path

from harness.errors import HarnessError
from harness.lab.judge.rules.tables import read_due

FILE = "extensions.csv"
COLUMNS = ["student_id", "due"]


def read(path: Path) -> dict[str, datetime]:
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if [c.strip() for c in reader.fieldnames or []] != COLUMNS:
                raise HarnessError(f"{path}: expected the columns {COLUMNS} (a header line), found "
                                   f"{reader.fieldnames}")
            found: dict[str, datetime] = {}
            for number, row in enumerate(reader, 2):
                cells = [(row.get(c) or "").strip() for c in reader.fieldnames or []]
                if len(cells) != 2 or not all(cells) or None in row:
                    raise HarnessError(f"{path}, line {number}: expected student_id,due; found "
                                       f"{list(row.values())}")
                student, text = cells
                if student in found:
                    raise HarnessError(f"{path}, line {number}: {student!r} has a second extension")
                try:
                    due = read_due(text, "due")
                except HarnessError:
                    due = None
                if due is None:
                    raise HarnessError(f"{path}, line {number}: due: expected a date-time "
                                       f"(2026-12-03T23:59:00Z) or a date (2026-12-03), found {text!r}")
                found[student] = due
            return found
    except OSError as exc:
        raise HarnessError(f"{path}: cannot be read ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: not a readable CSV ({exc})") from None


def graded(out: Path) -> dict[str, datetime]:
    path = Path(out) / FILE
    return read(path) if path.is_file() else {}


def due_of(extensions: dict[str, datetime], folder: str, entry: dict | None) -> datetime | None:
    """The student's extended due: by their folder, else by the manifest's LMS id."""
    return extensions.get(folder) or extensions.get(str((entry or {}).get("student_id") or ""))


def line(due: datetime, lab_due: datetime | None) -> str:
    theirs = f"; the class's: {lab_due.isoformat(sep=' ')}" if lab_due else ""
    return f"Your due date: {due.isoformat(sep=' ')} (an extension{theirs}): lateness counts from it."
