"""`lab collect ARCHIVE_OR_FOLDER -o submissions/ [--times EXPORT]`: an LMS's bulk download, or a
folder of git clones, into one folder per student and submissions/manifest.csv, read as hostile
input.

    Canvas "Download Submissions" zip   name_[LATE_]userid_attachmentid_file, one entry per file:
                                        every file of one user id is one hand-in (harness.lab.term.intake.lms)
    Moodle "Download all submissions"   Full Name_participantid_assignsubmission_file[_]/path (or
                                        flat files); online text and other plugins are left out
    (either)                            a .zip a student handed in is unpacked into their folder
    a folder of git clones              one clone per student (folder name = id); the files of the
                                        last commit, its committer date as the submission time

Submission times never come from a zip's entries: those are the time the TA downloaded it. They
come from the LMS's own export (--times: Canvas's Submissions API JSON, Moodle's grading
worksheet; harness.lab.term.intake.times), else lateness is Canvas's LATE flag alone (Moodle's zip has none),
and for clones the last commit's date. Each student's folder is `ascii-name-ID` (accents, spaces
and quotes folded: a safe file name, link and CSV field); the real name is in the manifest. A bad
download is an error naming the file and the fix before anything is written
(harness.lab.term.intake.unzip: zip-slip, lying headers, zip bombs, names a file system refuses,
caps counted as read); one student's bad hand-in (their own zip, their caps, their names) is theirs
alone: a refused row, no folder, exit 1; an entry that could be two students' is left out and
said; an --out that already holds a collection is refused.
Two files of one path in one hand-in (Canvas: two attachments): the later upload is kept, and said.

    manifest.csv   folder, student_id, name, status (collected, refused), submitted_at (ISO 8601;
                   "" where the LMS gave none),
                   late (yes where the LMS flagged it), time_source (lms-export, lms-late-flag,
                   git-commit, none), source, sha256 (JSON {file: hash}, or "hashes.json" where the
                   list is long), note; every cell through text.csv_cell (no formula, bounded)
    hashes.json    {folder: {file: sha256}} of every hand-in

    collect(source, out, report, max_bytes, times) -> [Submission]; read_manifest(path) -> {folder: row},
    graded_manifest(out) (the copy beside the rows)
    download.read_zip(path) -> (submissions, left out) (the LMS's zip, entry by entry),
    clones.read_git(folder), timed(submission, time), say(...) (the report), write(submissions, out)
    (checks, then write_all), settle(submission), clashes(submission), refused(subs),
    refused_in(manifest, submissions);
    Submission and folder_name: harness.lab.term.intake.handin
"""

import csv
import hashlib
import json
import os
import zipfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.lab import text
from harness.lab.term.intake import clones, download, unzip
from harness.lab.term.intake import times as lms_times
from harness.lab.term.intake.handin import MAX_BYTES, Submission
from harness.lab.term.intake.unzip import FIX_ARCHIVE

MANIFEST, HASHES = "manifest.csv", "hashes.json"
REQUIRED = ["folder", "student_id", "name", "submitted_at", "late", "source", "sha256", "note"]
FIELDS = ["folder", "student_id", "name", "status", "submitted_at", "late", "time_source", "source", "sha256",
          "note"]
COLLECTED, REFUSED = "collected", "refused"  # a manifest row's status (a manifest without one: collected)
MAX_CELL = 4000  # characters in a manifest cell (csv's own limit is 131072)
MAX_FULL_PATH = 4000  # bytes of out/<folder>/<file> (PATH_MAX is 4096)
def timed(sub: Submission, time: lms_times.Time | None) -> None:
    """The submission's time and late flag from the LMS's export where it has them, and where they
    came from; an export that disagrees with Canvas's LATE flag keeps the flag, and says so."""
    if sub.source == "git" and sub.submitted_at:
        sub.time_source = "git-commit"
    sub.time_source = sub.time_source or "none"
    if time is None:
        return
    if time.submitted_at:
        sub.submitted_at, sub.time_source = time.submitted_at, "lms-export"
    elif time.late and sub.time_source == "none":
        sub.time_source = "lms-late-flag"
    if sub.source == "canvas" and time.late != (sub.late == "yes"):
        sub.note = "; ".join(filter(None, [sub.note, f"the zip's LATE flag and {time.where} disagree: "
                                                     "counted late"]))
    if time.late:
        sub.late = "yes"


def collect(source: Path, out: Path, report: Callable[[str], None] = print, max_bytes: int = MAX_BYTES,
            times: Sequence[Path] = ()) -> list[Submission]:
    """Read `source` (an LMS zip or a folder of clones) and the LMS's exports of submission times,
    then write out/<folder>/, hashes.json and the manifest. A refused hand-in (Submission.refused)
    is a manifest row with its reason and no folder; the caller says so (exit 1)."""
    source, out = Path(source), Path(out)
    if out.exists() and any(not p.name.startswith(".") for p in out.iterdir()):
        raise HarnessError(f"-o {out}: already holds files (a collection?); nothing is overwritten: "
                           "collect into a new folder")
    known = lms_times.read_times(list(times))
    if source.is_dir():
        subs, skipped = clones.read_git(source, max_bytes)
    elif zipfile.is_zipfile(source):
        subs, skipped = download.read_zip(source, max_bytes)
    else:
        raise HarnessError(f"{source}: expected an LMS bulk-download zip (Canvas, Moodle) or a folder of "
                           "git clones")
    if not subs:
        raise HarnessError(f"{source}: no submission found (Canvas: name_[LATE_]userid_attachmentid_file; "
                           "Moodle: Full Name_id_assignsubmission_file/...; or git clones); "
                           f"left out: {skipped[:5]}")
    subs.sort(key=lambda s: s.student_id)
    for sub in subs:
        timed(sub, known.get(sub.student_id))
        settle(sub)
    write(subs, out)
    say(subs, skipped, source, out, bool(times), report)
    return subs


def refused(subs: list[Submission]) -> list[Submission]:
    return [s for s in subs if s.refused]


def say(subs: list[Submission], skipped: list[str], source: Path, out: Path, exported: bool,
        report: Callable[[str], None]) -> None:
    for line in skipped:
        report(f"left out: {line}")
    for sub in subs:
        if sub.note:
            report(f"{sub.folder}: {sub.note}")
        if sub.refused:
            report(f"{sub.folder}: REFUSED: {sub.refused}")
    taken = [s for s in subs if not s.refused]
    late = sum(1 for s in taken if s.late == "yes")
    counts = ", ".join(f"{k} {n}" for k, n in sorted(Counter(s.time_source for s in taken).items()))
    report(f"collected {len(taken)} student(s) from {source} ({subs[0].source}) into {out}"
           + (f"; {late} flagged late by the LMS" if late else "") + f"; times: {counts}"
           + f"; manifest: {out / MANIFEST}")
    if subs[0].source in ("canvas", "moodle") and not exported:
        report("no submission times (a zip's entry times are the download's): "
               + ("lateness is Canvas's LATE flag, at most 1 day" if subs[0].source == "canvas"
                  else "Moodle's zip says nothing of lateness")
               + "; pass --times with the LMS's export for days late (docs/staff.md, Collect)")
    if refused(subs):
        names = ", ".join(s.folder for s in refused(subs))
        report(f"refused {len(refused(subs))} student(s)' hand-in, nothing of theirs written: {names} "
               f"(the reasons: above, and in {out / MANIFEST}'s note; `lab grade` gives each a row, "
               "0 points; "
               "to grade one, put their checked files in their folder, then grade with --resume)")


def settle(sub: Submission) -> None:
    """The last checks of one hand-in's paths (a clone's too): a refusal is this student's alone."""
    if sub.refused:
        return
    try:
        with unzip.theirs():
            clashes(sub)
            for relative in sub.files:
                unzip.check_file(Path(sub.folder), relative, relative)
    except unzip.Refused as exc:
        sub.refuse(str(exc))


def clashes(sub: Submission) -> None:
    """A path handed in both as a file and as a folder is refused (settle: that hand-in alone)."""
    folders = {p.rsplit("/", i)[0] for p in sub.files for i in range(1, p.count("/") + 1)}
    both = sorted(folders & set(sub.files))
    if both:
        raise HarnessError(f"{sub.folder}: {both[0]!r} is handed in both as a file and as a folder; "
                           f"nothing of theirs was written: {FIX_ARCHIVE}")


def write(subs: list[Submission], out: Path) -> None:
    """out/<folder>/<files> for each submission, out/hashes.json, then out/manifest.csv (last); every
    check first, so a refusal writes nothing."""
    folders = [s.folder for s in subs]
    twice = sorted({f for f in folders if folders.count(f) > 1})
    if twice:
        raise HarnessError(f"two students would share the folder(s) {twice}; nothing was written")
    base = len(str(Path(out).resolve()).encode())
    for sub in subs:
        longest = max((len(f"{sub.folder}/{p}".encode("utf-8", "surrogatepass")) for p in sub.files),
                      default=0)
        if base + 1 + longest > MAX_FULL_PATH:
            raise HarnessError(f"-o {out}: {sub.folder}'s files would have paths past {MAX_FULL_PATH} bytes; "
                               "nothing was written: collect into a folder with a shorter path")
    try:
        write_all(subs, out)
    except OSError as exc:
        raise HarnessError(f"-o {out}: cannot write {exc.filename} ({exc.strerror}); what is there is "
                           "incomplete: remove it and collect again") from None


def write_all(subs: list[Submission], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows, hashes = [], {}
    for sub in subs:
        for relative, data in sorted(sub.files.items()):  # a refused hand-in has none: no folder
            target = out / sub.folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        listed = ""
        if not sub.refused:
            hashes[sub.folder] = {rel: hashlib.sha256(data).hexdigest()
                                  for rel, data in sorted(sub.files.items())}
            listed = json.dumps(hashes[sub.folder])
        rows.append({"folder": sub.folder, "student_id": sub.student_id, "name": sub.name,
                     "status": REFUSED if sub.refused else COLLECTED,
                     "submitted_at": sub.submitted_at, "late": sub.late, "time_source": sub.time_source,
                     "source": sub.source, "sha256": listed if len(listed) <= MAX_CELL else HASHES,
                     "note": "; ".join(filter(None, [sub.refused, sub.note]))})
    (out / HASHES).write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with open(out / MANIFEST, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows({k: text.csv_cell(v, MAX_CELL) for k, v in row.items()} for row in rows)


def refused_in(manifest: dict[str, dict], submissions: Path) -> dict[str, str]:
    """{folder: why} of the manifest's refused hand-ins that still have no folder in `submissions`
    (a TA who put a refused student's checked files in their folder has that student graded)."""
    return {folder: row.get("note") or "refused by lab collect"
            for folder, row in manifest.items()
            if row.get("status") == REFUSED and not os.path.lexists(Path(submissions) / folder)}


def graded_manifest(out: Path) -> dict[str, dict]:
    """OUT/manifest.csv (`lab grade` copies the collection's beside the rows): {folder: entry}, or
    {} when the class was not collected by `lab collect`."""
    path = Path(out) / MANIFEST
    return read_manifest(path) if path.is_file() else {}


def read_manifest(path: Path) -> dict[str, dict]:
    """{folder: the manifest's row} of a collection's manifest.csv (time_source is newer: optional)."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = sorted(set(REQUIRED) - set(reader.fieldnames or []))
            if missing:
                raise HarnessError(f"{path}: not a manifest of `lab collect` (missing columns {missing})")
            return {row["folder"]: row for row in reader}
    except OSError as exc:
        raise HarnessError(f"{path}: cannot be read ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: not a readable manifest ({exc}): collect again") from None
