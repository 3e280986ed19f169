"""`lab export OUT --roster ROSTER.csv --format canvas|moodle|csv -o grades.csv`: the points of a
grading (harness.lab.term.marks.points: the lab's [grade] table, ties, OUT/manifest.csv's lateness) written
into the LMS's own gradebook-import file, from the LMS's own roster export.

    canvas   roster: the gradebook export (Student, ID, SIS User ID, SIS Login ID, Section, ...);
             out: those five columns and one assignment column (--column; default: the roster's
             column naming the lab, else the lab's title), matched on ID (the user id in Canvas's
             submission file names)
    moodle   roster: the assignment's grading worksheet (Identifier "Participant N", Full name, ...,
             Grade, ..., Feedback comments); out: the same worksheet with Grade and Feedback
             comments filled, matched on N (the participant id in Moodle's folder names), and beside
             it GRADES-feedback-files.zip: each graded student's feedback page, one folder per
             participant, for the assignment's "Upload multiple feedback files in a zip"
             (harness.lab.term.marks.moodlezip)
    csv      roster: id[, name]; out: id, name, points, max_points, status, late_days, feedback

A student is matched by the manifest's student_id (`lab collect`), else by the folder name.
Every collected submission must have a finished row (harness.lab.judge.attempts.finished: not
ungraded, tampered or a Slurm task's placeholder): while one has none, export refuses, naming them;
with --allow-ungraded their cells are left blank (never 0) and they are named (Export.ungraded).
Roster students who handed nothing in (not in the class that was collected and graded) get 0 and
"no submission"; submissions not on the roster are listed (Export.unmatched), never dropped
silently; an existing output is kept unless --force.
Staff open the file in a spreadsheet before importing it: every text cell, the roster's own (a name
is what the student typed into the LMS) and the header included, goes through text.csv_cell; the
points are written as numbers (90, 72.5).

    export(out, roster, fmt, target, force, column, allow_ungraded) -> Export; ungraded_refusal(out, missing)
    read_roster(path, fmt) -> (header, rows)
    roster_id(entry, fmt), canvas_column(header, lab, column), out_row(...), number(points),
    feedback(row, score, rank, ranked), write(target, fields, lines)
"""

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.lab import text
from harness.lab.judge import attempts, store
from harness.lab.judge.rules import assignment
from harness.lab.term.intake import collect
from harness.lab.term.marks import extensions, moodlezip, points
from harness.machine.files import write_atomic

CANVAS_FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
REQUIRED = {"canvas": CANVAS_FIXED, "moodle": ["Identifier"], "csv": ["id"]}
KEY = {"canvas": "ID", "moodle": "Identifier", "csv": "id"}
CSV_OUT = ["id", "name", "points", "max_points", "status", "late_days", "feedback"]
FORMATS = tuple(REQUIRED)


@dataclass(frozen=True)
class Export:
    path: Path
    written: int  # roster rows written
    graded: int  # of them with a graded submission
    unmatched: list[str]  # graded submissions not on the roster: "folder (id ...): points"
    ungraded: list[str]  # collected submissions without a finished row (--allow-ungraded): "folder: why"
    feedback_zip: Path | None = None  # Moodle's feedback-files zip (--format moodle)


def read_roster(path: Path, fmt: str) -> tuple[list[str], list[dict]]:
    """(the roster's columns, its student rows); Canvas's "Points Possible" row is left out."""
    if fmt not in REQUIRED:
        raise HarnessError(f"--format {fmt!r}: expected one of {list(FORMATS)}")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = [r for r in reader if not (r.get("Student") or "").strip().startswith("Points Possible")]
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"--roster {path}: cannot be read ({exc})") from None
    missing = [c for c in REQUIRED[fmt] if c not in header]
    if missing:
        raise HarnessError(f"--roster {path}: no column(s) {missing} for --format {fmt} (found {header}); "
                           f"export the roster from the LMS ({fmt}: {', '.join(REQUIRED[fmt])})")
    keys = [roster_id(r, fmt) for r in rows]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise HarnessError(f"--roster {path}: student id(s) {twice[:5]} listed twice; fix the roster")
    return header, rows


def roster_id(row: dict, fmt: str) -> str:
    value = (row.get(KEY[fmt]) or "").strip()
    if fmt == "moodle":  # "Participant 123456"
        found = re.search(r"\d+", value)
        return found.group() if found else value
    return value


def feedback(row: dict, score: points.Score, rank: int | None, ranked: int) -> str:
    words = [score.note]
    if row["status"] == "ok":
        r = points.ratio(row)
        words.append(f"{r['ratio']:.2f}x {row['rank_by']} [{r['ci95_low']:.2f}-{r['ci95_high']:.2f}], "
                     f"rank {rank} of {ranked}")
    elif row.get("reason"):
        words.append(str(row["reason"])[:200])
    return "; ".join(words)


def canvas_column(header: list[str], lab: assignment.Lab, column: str | None) -> str:
    """The assignment's column: --column, else the roster's one column naming the lab, else its title
    (Canvas's import makes a new assignment of an unknown column). Two columns naming the lab (a lab
    and its resubmission) are an error: the grades must not go to the wrong one by a guess."""
    if column:
        return column
    names = [n.lower() for n in (lab.name, lab.title) if n]
    found = [c for c in header if c not in CANVAS_FIXED and any(n in c.lower() for n in names)]
    if len(found) > 1:
        raise HarnessError(f"--roster: {len(found)} columns name the lab {lab.name!r} ({found}); "
                           f"say which one takes the grades with --column")
    return found[0] if found else (lab.title or lab.name)


def ungraded_refusal(out: Path, missing: dict[str, str]) -> HarnessError:
    """The error of an export while collected submissions have no finished row, naming them."""
    names = sorted(missing)
    listed = "; ".join(text.clean(f"{name}: {missing[name]}", 300) for name in names[:20])
    more = f"; and {len(names) - 20} more" if len(names) > 20 else ""
    return HarnessError(f"{out}: {len(names)} collected submission(s) have no finished row, so no grade: "
                        f"{', '.join(text.clean(n, 80) for n in names)} ({listed}{more}); nothing was "
                        f"written. Grade them (python -m harness lab regrade {out} --only "
                        f"{','.join(text.clean(n, 80) for n in names)}), or add --allow-ungraded to export "
                        "the others with these cells blank")


def export(out: Path, roster: Path, fmt: str, target: Path, force: bool = False,
           column: str | None = None, allow_ungraded: bool = False) -> Export:
    """Write `target` for the LMS `fmt` from OUT's rows and the roster (see the module's docstring)."""
    out, target = Path(out), Path(target)
    bundle = target.with_name(f"{target.stem}-feedback-files.zip") if fmt == "moodle" else None
    for path in (target, bundle):
        if path is not None and path.exists() and not force:
            raise HarnessError(f"{path}: already exists; nothing was written (add --force to replace it)")
    lab = store.graded_lab(out)
    manifest = collect.graded_manifest(out)
    rows, _ = attempts.class_rows(out, manifest)  # one per collected student, ungraded ones included
    missing = attempts.unfinished(rows)
    if missing and not allow_ungraded:
        raise ungraded_refusal(out, missing)
    scores, places = points.scores(rows, lab.grade, manifest, extensions.graded(out)), points.groups(rows)
    by_id = {(manifest.get(r["student"]) or {}).get("student_id") or r["student"]: r for r in rows}
    header, roster_rows = read_roster(roster, fmt)
    most = lab.grade.gate_points + lab.grade.speed_points
    column = canvas_column(header, lab, column) if fmt == "canvas" else ""
    finished = [r["student"] for r in rows if r["student"] not in missing]
    if bundle is not None and moodlezip.stale(out, finished):
        from harness.lab.term.marks import leaderboard

        leaderboard.build(out)  # the feedback pages, with their points, as of these rows
    lines, seen, pages = [], set(), []
    for entry in roster_rows:
        key = roster_id(entry, fmt)
        row = by_id.get(key)
        seen.add(key)
        total: float | str
        if row is None:
            total, status, late, words = 0.0, "no submission", 0, "no submission"
        elif row["student"] in missing:  # blank, never 0: the LMS keeps no grade for it
            total, status, late, words = "", "ungraded", 0, "not graded yet: " + missing[row["student"]][:200]
        else:
            score = scores[row["student"]]
            place = places.get(row["student"], (None, None))[0]
            total, status, late = score.total, row["status"], score.late_days
            words = feedback(row, score, place, len(places))
            if bundle is not None:
                pages.append((entry.get("Full name") or "", key, moodlezip.sources(out, row["student"])))
        lines.append(out_row(fmt, entry, key, column, total, most, status, late, words))
    names = header + (["Grade"] if "Grade" not in header else []) + \
        (["Feedback comments"] if "Feedback comments" not in header else [])
    fields = {"canvas": CANVAS_FIXED + [column], "moodle": names, "csv": CSV_OUT}[fmt]
    if fmt == "canvas":  # Canvas's own second row
        lines.insert(0, {"Student": "    Points Possible", column: number(most)})
    write(target, fields, lines)
    if bundle is not None:
        moodlezip.write(bundle, pages)
    unmatched = [text.clean(f"{r['student']} (id {k}): " + (f"{scores[r['student']].total:g} points, "
                                                            if r["student"] in scores else "") + r["status"])
                 for k, r in sorted(by_id.items()) if k not in seen]
    graded = {k for k, r in by_id.items() if r["student"] not in missing}
    ungraded = [text.clean(f"{name}: {why}", 300) for name, why in sorted(missing.items())]
    return Export(target, len(roster_rows), len(seen & graded), unmatched, ungraded, bundle)


def write(target: Path, fields: list[str], lines: list[dict]) -> Path:
    """The gradebook file: its header and every text cell through text.csv_cell, numbers as numbers."""
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerow([text.csv_cell(name) for name in fields])
    csv.DictWriter(buffer, fields, extrasaction="ignore").writerows(text.csv_row(line) for line in lines)
    return write_atomic(target, buffer.getvalue())  # whole or not at all


def number(points: float | str) -> int | float | str:
    """Points as the LMS reads them, and as a number (never a quoted text): 90, not 90.0; 72.5;
    "" stays blank (not graded)."""
    if points == "":
        return ""
    return int(points) if float(points).is_integer() else points


def out_row(fmt: str, entry: dict, key: str, column: str, total: float | str, most: float, status: str,
            late: int, words: str) -> dict:
    """One line of the gradebook; `total` "" is a blank cell (not graded), never 0."""
    if fmt == "canvas":
        return {**{c: entry.get(c, "") for c in CANVAS_FIXED}, column: number(total)}
    if fmt == "moodle":
        return {**entry, "Grade": number(total), "Feedback comments": words}
    return {"id": key, "name": entry.get("name", ""), "points": number(total), "max_points": number(most),
            "status": status, "late_days": late, "feedback": words}
