"""`lab collect ARCHIVE_OR_FOLDER -o submissions/`: an LMS's bulk download, or a folder of git
clones, into one folder per student and submissions/manifest.csv, read as hostile input.

    Canvas "Download submissions" zip   name_[LATE_]userid_submissionid_file (flat; a resubmitted
                                        file is renamed file-1.py by Canvas: the suffix is dropped)
    Moodle "Download all submissions"   Full Name_participantid_assignsubmission_file_/path (or the
                                        same prefix on flat files); online text is left out
    (either)                            a .zip a student handed in is unpacked into their folder
    a folder of git clones              one clone per student (folder name = id); the files of the
                                        last commit, its committer date as the submission time

Each student's folder is `ascii-name-ID` (accents, spaces and quotes folded: a safe file name, link
and CSV field); the real name is in the manifest. Bad input is an error naming the file and the
fix, before anything is written: an entry with `..` or an absolute path, entries that expand past
MAX_BYTES (a zip bomb; sizes are counted while reading, not trusted from the header), an --out that
already holds a collection. Two submissions for one student: the latest is kept, and said.

    manifest.csv   folder, student_id, name, submitted_at (ISO 8601; a zip entry's time has no
                   zone), late (yes where the LMS flagged it), source, sha256 (JSON {file: hash}), note

    collect(source, out, report) -> [Submission]; read_manifest(path) -> {folder: row},
    graded_manifest(out) (the copy beside the rows)
    read_zip(path) (read_entries), canvas_entry(name), moodle_entry(name), unpack_nested(...),
    clones.read_git(folder), latest(submissions), write(submissions, out), folder_name(name, id),
    safe_path(archive, name), junk(path), read_member(...), place(...)
"""

import csv
import hashlib
import io
import json
import re
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from harness.errors import HarnessError
from harness.lab import files

MANIFEST = "manifest.csv"
FIELDS = ["folder", "student_id", "name", "submitted_at", "late", "source", "sha256", "note"]
MAX_BYTES = 512 << 20  # everything an archive (or the clones) may expand to
MAX_STUDENT_BYTES = files.MAX_BYTES  # one student's files: the grader's own cap
JUNK = ("__MACOSX/", ".DS_Store", "Thumbs.db")
CANVAS = re.compile(r"^(?P<name>[^_/]+)_(?:(?P<late>LATE)_)?(?P<id>\d+)_(?P<sub>\d+)_(?P<file>[^/]+)$")
MOODLE = re.compile(r"^(?P<name>[^/]+?)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<rest>.*)$")
FIX_ARCHIVE = "download it again from the LMS, or unpack it by hand after checking what it holds"


@dataclass
class Submission:
    """One student's hand-in: the files (relative path -> bytes) and what the LMS said of them."""

    student_id: str
    name: str
    source: str  # canvas, moodle, git
    submitted_at: str = ""  # ISO 8601
    late: str = ""  # "yes" where the LMS flagged it late
    key: str = ""  # the LMS's submission id, to tell two submissions apart
    files: dict[str, bytes] = field(default_factory=dict)
    note: str = ""

    @property
    def folder(self) -> str:
        return folder_name(self.name, self.student_id)


def folder_name(name: str, student_id: str) -> str:
    """`ascii-name-ID`: accents folded, quotes dropped, anything else not [a-z0-9] a hyphen."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    ascii_name = re.sub(r"['\"`’]", "", ascii_name)
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name).strip("-")[:40].strip("-") or "student"
    ident = re.sub(r"[^A-Za-z0-9]+", "-", student_id).strip("-")
    return slug if not ident or slug == ident.lower() else f"{slug}-{ident}"


def junk(path: str) -> bool:
    """An archiver's by-product (macOS resource forks, Finder and Explorer caches), not handed in."""
    return path.startswith(JUNK) or path.rsplit("/", 1)[-1] in JUNK


def safe_path(archive: Path, name: str) -> PurePosixPath:
    """An entry's path, or a HarnessError for `..`, an absolute path or a drive (zip-slip)."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", name):
        raise HarnessError(f"{archive}: entry {name!r} points outside the folder it would be unpacked "
                           f"into (an absolute path or '..'); nothing was written: {FIX_ARCHIVE}")
    return path


def canvas_entry(name: str) -> dict | None:
    """{name, late, id, sub, file} of a Canvas bulk-download file name, or None."""
    found = CANVAS.match(name)
    if not found:
        return None
    entry = found.groupdict()
    entry["file"] = re.sub(r"-\d+(\.[A-Za-z0-9]+)$", r"\1", entry["file"])  # Canvas's resubmission suffix
    return entry


def moodle_entry(name: str) -> dict | None:
    """{name, id, plugin, file} of a Moodle download-all path, or None."""
    head, _, tail = name.partition("/")
    found = MOODLE.match(head)
    if not found:
        return None
    entry = found.groupdict()
    entry["file"] = "/".join(part for part in (entry.pop("rest"), tail) if part)  # in folders, or flat
    return entry


def read_zip(archive: Path, max_bytes: int = MAX_BYTES) -> tuple[list[Submission], list[str]]:
    """(the submissions in an LMS zip, the entries left out and why)."""
    try:
        opened = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile) as exc:
        raise HarnessError(f"{archive}: not a readable zip ({exc}): {FIX_ARCHIVE}") from None
    with opened:
        return read_entries(archive, opened, max_bytes)


def read_entries(archive: Path, opened: zipfile.ZipFile,
                 max_bytes: int) -> tuple[list[Submission], list[str]]:
    """read_zip's work on the opened zip: every path checked and the sizes declared summed before
    a byte is read."""
    members = [m for m in opened.infolist() if not m.is_dir()]
    paths = {m.filename: safe_path(archive, m.filename) for m in members}
    declared = sum(m.file_size for m in members)
    if declared > max_bytes:
        raise HarnessError(f"{archive}: its entries expand to {declared >> 20} MiB, past the cap of "
                           f"{max_bytes >> 20} MiB (a zip bomb?); nothing was written: {FIX_ARCHIVE}")
    found: dict[tuple[str, ...], Submission] = {}
    skipped = []
    room = max_bytes
    for member in members:
        path = paths[member.filename].as_posix()
        if junk(path):
            continue
        sub, file = place(found, path)
        if sub is None:
            skipped.append(f"{path}: not a Canvas or Moodle submission name")
            continue
        data = read_member(archive, opened, member, room)
        nested = file.lower().endswith(".zip")
        inner = unpack_nested(archive, path, data, room) if nested else {file: data}
        room -= sum(len(d) for d in inner.values())
        sub.files.update(inner)
        sub.submitted_at = max(sub.submitted_at, datetime(*member.date_time).isoformat())
    return list(found.values()), skipped


def place(found: dict[tuple[str, ...], Submission], path: str) -> tuple[Submission | None, str]:
    """The submission an entry belongs to (made on first sight) and its path inside it."""
    moodle, canvas = moodle_entry(path), canvas_entry(path)
    if moodle and moodle["plugin"] == "file" and moodle["file"]:
        sub = found.setdefault(("moodle", moodle["id"]), Submission(moodle["id"], moodle["name"], "moodle",
                                                                    key=moodle["id"]))
        return sub, moodle["file"]
    if canvas:
        sub = found.setdefault(("canvas", canvas["id"], canvas["sub"]),
                               Submission(canvas["id"], canvas["name"], "canvas", key=canvas["sub"],
                                          late="yes" if canvas["late"] else ""))
        return sub, canvas["file"]
    return None, ""


def read_member(archive: Path, opened: zipfile.ZipFile, member: zipfile.ZipInfo, room: int) -> bytes:
    """An entry's bytes, counted as they come: past `room` or its declared size is a zip bomb."""
    limit = min(room, member.file_size, MAX_STUDENT_BYTES)
    with opened.open(member) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise HarnessError(f"{archive}: entry {member.filename!r} expands past "
                           f"{'its declared size' if limit == member.file_size else 'the size cap'} "
                           f"(a zip bomb?); nothing was written: {FIX_ARCHIVE}")
    return data


def unpack_nested(archive: Path, entry: str, data: bytes, room: int) -> dict[str, bytes]:
    """A zip a student handed in (their folder, zipped): its files, with the same checks as the
    LMS's zip (zip-slip, sizes counted while reading); one top-level folder common to all is dropped."""
    where = Path(f"{archive}!{entry}")
    try:
        opened = zipfile.ZipFile(io.BytesIO(data))
        members = [m for m in opened.infolist() if not m.is_dir()]
    except zipfile.BadZipFile as exc:
        raise HarnessError(f"{where}: a damaged zip inside the archive ({exc}): {FIX_ARCHIVE}") from None
    paths = {m.filename: safe_path(where, m.filename).as_posix() for m in members}
    members = [m for m in members if not junk(paths[m.filename])]
    if sum(m.file_size for m in members) > room:
        raise HarnessError(f"{where}: expands past the size cap (a zip bomb?); nothing was written: "
                           f"{FIX_ARCHIVE}")
    tops = {paths[m.filename].split("/", 1)[0] for m in members}
    strip = len(tops) == 1 and all("/" in paths[m.filename] for m in members)
    files = {}
    for member in members:
        name = paths[member.filename].split("/", 1)[1] if strip else paths[member.filename]
        files[name] = read_member(where, opened, member, room)
        room -= len(files[name])
    return files


def latest(submissions: list[Submission], report: Callable[[str], None]) -> list[Submission]:
    """One submission per student: where the source held several, the latest (then the highest
    LMS submission id), said in the report and in the manifest's note."""
    by_student: dict[str, list[Submission]] = {}
    for sub in submissions:
        by_student.setdefault(sub.student_id, []).append(sub)
    kept = []
    for _, subs in sorted(by_student.items()):
        subs.sort(key=lambda s: (s.submitted_at, int(s.key) if s.key.isdigit() else 0))
        chosen = subs[-1]
        if len(subs) > 1:
            chosen.note = (f"{len(subs)} submissions in the source; kept the latest ({chosen.key or '-'}, "
                           f"{chosen.submitted_at}), left out {', '.join(s.key or '-' for s in subs[:-1])}")
            report(f"{chosen.folder}: {chosen.note}")
        kept.append(chosen)
    return kept


def collect(source: Path, out: Path, report: Callable[[str], None] = print,
            max_bytes: int = MAX_BYTES) -> list[Submission]:
    """Read `source` (an LMS zip or a folder of clones), then write out/<folder>/ and the manifest."""
    source, out = Path(source), Path(out)
    if out.exists() and any(not p.name.startswith(".") for p in out.iterdir()):
        raise HarnessError(f"-o {out}: already holds files (a collection?); nothing is overwritten: "
                           "collect into a new folder")
    if source.is_dir():
        from harness.lab.clones import read_git  # clones.py imports Submission from here
        subs, skipped = read_git(source, max_bytes)
    elif zipfile.is_zipfile(source):
        subs, skipped = read_zip(source, max_bytes)
    else:
        raise HarnessError(f"{source}: expected an LMS bulk-download zip (Canvas, Moodle) or a folder of "
                           "git clones")
    if not subs:
        raise HarnessError(f"{source}: no submission found (Canvas: name_[LATE_]userid_submissionid_file; "
                           "Moodle: Full Name_id_assignsubmission_file_/...; or git clones); "
                           f"left out: {skipped[:5]}")
    kept = latest(subs, report)
    write(kept, out)
    for line in skipped:
        report(f"left out: {line}")
    late = sum(1 for s in kept if s.late == "yes")
    report(f"collected {len(kept)} student(s) from {source} ({kept[0].source}) into {out}"
           + (f"; {late} flagged late by the LMS" if late else "") + f"; manifest: {out / MANIFEST}")
    return kept


def write(subs: list[Submission], out: Path) -> None:
    """out/<folder>/<files> for each submission, then out/manifest.csv (written last)."""
    folders = [s.folder for s in subs]
    twice = sorted({f for f in folders if folders.count(f) > 1})
    if twice:
        raise HarnessError(f"two students would share the folder(s) {twice}; nothing was written")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for sub in subs:
        for relative, data in sorted(sub.files.items()):
            target = out / sub.folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        hashes = {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(sub.files.items())}
        rows.append({"folder": sub.folder, "student_id": sub.student_id, "name": sub.name,
                     "submitted_at": sub.submitted_at, "late": sub.late, "source": sub.source,
                     "sha256": json.dumps(hashes), "note": sub.note})
    with open(out / MANIFEST, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def graded_manifest(out: Path) -> dict[str, dict]:
    """OUT/manifest.csv (`lab grade` copies the collection's beside the rows): {folder: entry}, or
    {} when the class was not collected by `lab collect`."""
    path = Path(out) / MANIFEST
    return read_manifest(path) if path.is_file() else {}


def read_manifest(path: Path) -> dict[str, dict]:
    """{folder: the manifest's row} of a collection's manifest.csv."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = sorted(set(FIELDS) - set(reader.fieldnames or []))
            if missing:
                raise HarnessError(f"{path}: not a manifest of `lab collect` (missing columns {missing})")
            return {row["folder"]: row for row in reader}
    except OSError as exc:
        raise HarnessError(f"{path}: cannot be read ({exc.strerror})") from None
