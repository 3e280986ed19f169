"""When each student handed in, from the LMS's own record (`lab collect --times FILE`): a bulk
download's entry times are the download's (rubyzip writes DOSTime.now; Moodle streams the zip), so
they never are.

    Canvas   the Submissions API's JSON, saved from the browser while logged in as staff:
             /api/v1/courses/<course>/assignments/<assignment>/submissions?per_page=100
             (&page=2, ... : one --times per page). Each object's user_id (or anonymous_id),
             submitted_at (ISO 8601, UTC) and late (Canvas's flag) (lib/api/v1/submission.rb:
             SUBMISSION_JSON_FIELDS, SUBMISSION_JSON_METHODS). Canvas prefixes JSON read with a
             session with `while(1);`: it is dropped. The gradebook CSV export holds no times
             (lib/gradebook_exporter.rb): it is refused, with what to pass instead.
    Moodle   the grading worksheet (Submissions > "Download grading worksheet"; mod/assign/
             gradingtable.php): Identifier ("Participant <id>", col_recordid), Status (holds
             "<time> late" where Moodle found it late, col_status: submittedlateshort) and
             "Last modified (submission)" (col_timesubmitted: userdate in the TA's profile
             timezone, English: "Tuesday, 1 December 2026, 11:59 PM", no zone, to the minute).

    Time, read_times(paths) -> {student id: Time}, read_one(path), canvas_json(path, text),
    moodle_worksheet(path, rows), moodle_date(text) -> ISO 8601, iso(where, text) (a Canvas time)
"""

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.errors import HarnessError

MAX_BYTES = 64 << 20
IDENTIFIER, STATUS, MODIFIED = "Identifier", "Status", "Last modified (submission)"
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december"]
MOODLE_DATE = re.compile(r"^(?:[A-Za-z]+, )?(\d{1,2}) ([A-Za-z]+) (\d{4}), (\d{1,2}):(\d{2}) ?([AaPp][Mm])$")
MOODLE_LATE = re.compile(r"\S late\b")  # lang/en/assign.php: submittedlateshort = '{$a} late'
WHERE = ("Canvas: the Submissions API's JSON (/api/v1/courses/<course>/assignments/<assignment>/"
         "submissions?per_page=100); Moodle: the grading worksheet CSV")


@dataclass(frozen=True)
class Time:
    submitted_at: str  # ISO 8601; "" where the LMS holds no time
    late: bool  # the LMS's own flag
    where: str  # the file (and row) it was read from


def read_times(paths: list[Path] | tuple[Path, ...]) -> dict[str, Time]:
    """{student id: Time} of every export given; one id in two of them with two times is an error."""
    found: dict[str, Time] = {}
    for path in paths:
        for ident, time in read_one(Path(path)).items():
            known = found.get(ident)
            if known and (known.submitted_at, known.late) != (time.submitted_at, time.late):
                raise HarnessError(f"--times: student {ident} is in {known.where} and in {time.where} with "
                                   "different times: pass each export once")
            found[ident] = time
    return found


def read_one(path: Path) -> dict[str, Time]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise HarnessError(f"--times {path}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_BYTES:
        raise HarnessError(f"--times {path}: past {MAX_BYTES >> 20} MiB: not an LMS export ({WHERE})")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"--times {path}: not UTF-8 (byte {exc.start}): expected {WHERE}") from None
    body = text.lstrip().removeprefix("while(1);").lstrip()
    if body.startswith(("[", "{")):
        return canvas_json(path, body)
    limit = csv.field_size_limit()
    csv.field_size_limit(MAX_BYTES)  # a worksheet's online-text column may be long
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        header = list(rows[0]) if rows else next(csv.reader(io.StringIO(text)), [])
    except csv.Error as exc:
        raise HarnessError(f"--times {path}: not a readable CSV ({exc}): expected {WHERE}") from None
    finally:
        csv.field_size_limit(limit)
    if "SIS Login ID" in header or header[:2] == ["Student", "ID"]:
        raise HarnessError(f"--times {path}: Canvas's gradebook export holds grades, not submission "
                           f"times: pass {WHERE.split(';')[0]}")
    if IDENTIFIER not in header:
        raise HarnessError(f"--times {path}: no {IDENTIFIER!r} column: expected {WHERE}")
    return moodle_worksheet(path, rows)


def canvas_json(path: Path, text: str) -> dict[str, Time]:
    """{user id: Time} of a page of Canvas's Submissions API."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise HarnessError(f"--times {path}: not JSON ({exc}): expected {WHERE}") from None
    if not isinstance(items, list):
        raise HarnessError(f"--times {path}: expected a JSON list of submissions (the Submissions API's "
                           f"answer), found {type(items).__name__}")
    found = {}
    for i, item in enumerate(items):
        where = f"{path} (item {i})"
        if not isinstance(item, dict):
            raise HarnessError(f"--times {where}: expected a submission object, found {type(item).__name__}")
        user, anon, at, late = (item.get(k) for k in ("user_id", "anonymous_id", "submitted_at", "late"))
        ident = str(user) if isinstance(user, int) and not isinstance(user, bool) else \
            f"anon_{anon}" if isinstance(anon, str) and anon.isalnum() else None
        if ident is None or not (at is None or isinstance(at, str)) or not isinstance(late, bool | None):
            raise HarnessError(f"--times {where}: expected user_id (a number), submitted_at (ISO 8601 or "
                               f"null) and late (true/false), found {json.dumps(item)[:200]}")
        if at is None and not late:
            continue  # nothing handed in, nothing said
        found[ident] = Time(iso(where, at) if at else "", bool(late), where)
    return found


def iso(where: str, text: str) -> str:
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise HarnessError(f"--times {where}: submitted_at {text[:60]!r} is not ISO 8601") from None
    return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).isoformat()


def moodle_worksheet(path: Path, rows: list[dict]) -> dict[str, Time]:
    """{participant id: Time} of Moodle's grading worksheet."""
    if rows and MODIFIED not in rows[0]:
        raise HarnessError(f"--times {path}: no {MODIFIED!r} column (the worksheet's header is in the "
                           "language of your Moodle profile: download it with English set)")
    found = {}
    for i, row in enumerate(rows, start=2):
        where = f"{path} (line {i})"
        ident = re.search(r"(\d+)\s*$", row.get(IDENTIFIER) or "")
        if not ident:
            raise HarnessError(f"--times {where}: {IDENTIFIER} {str(row.get(IDENTIFIER))[:60]!r} does not "
                               "end in the participant's number (\"Participant 1002\")")
        at, late = (row.get(MODIFIED) or "").strip(), bool(MOODLE_LATE.search(row.get(STATUS) or ""))
        if at in ("", "-") and not late:
            continue
        found[ident.group(1)] = Time(moodle_date(where, at) if at not in ("", "-") else "", late, where)
    return found


def moodle_date(where: str, text: str) -> str:
    """`Tuesday, 1 December 2026, 11:59 PM` (English strftimedaydatetime) as ISO 8601, no zone."""
    m = MOODLE_DATE.match(text)
    month = m and m.group(2).lower() in MONTHS
    if not m or not month or not 1 <= int(m.group(4)) <= 12:
        raise HarnessError(f"--times {where}: {MODIFIED} {text[:60]!r} is not a date as Moodle writes it "
                           "in English (\"Tuesday, 1 December 2026, 11:59 PM\"): download the worksheet "
                           "with English set in your Moodle profile")
    hour = int(m.group(4)) % 12 + (12 if m.group(6).lower() == "pm" else 0)
    try:
        at = datetime(int(m.group(3)), MONTHS.index(m.group(2).lower()) + 1, int(m.group(1)), hour,
                      int(m.group(5)))
    except ValueError:
        raise HarnessError(f"--times {where}: {MODIFIED} {text[:60]!r} is not a real date") from None
    return at.isoformat()
