"""The LMS's bulk download read entry by entry (harness.lab.term.intake.collect writes what it finds):
each entry's name parsed by its LMS's rule (lms), its bytes counted against the archive's cap and
its student's as they are read (unzip). One student's bad hand-in is a refused Submission (their
zip, their caps, their names: unzip.Refused); the download's own faults refuse it whole.

    read_zip(archive, max_bytes) -> (submissions, left out), entry_files(...) (an entry's files),
    hand_in(found, archive, path, entry), place(sub, relative, data, rank, uploads) (the later
    upload keeps a path), attachments_note(sub, relative, ranks), junk(path)
"""

import zipfile
from pathlib import Path

from harness.errors import HarnessError
from harness.lab.term.intake import lms, unzip
from harness.lab.term.intake.handin import MAX_BYTES, MAX_STUDENT_BYTES, Submission
from harness.lab.term.intake.unzip import FIX_ARCHIVE

MAX_STUDENT_FILES = 1000  # one student's files (the grader copies files.MAX_FILES of them)
JUNK = ("__MACOSX/", ".DS_Store", "Thumbs.db")


def junk(path: str) -> bool:
    """An archiver's by-product (macOS resource forks, Finder and Explorer caches), not handed in."""
    return path.startswith(JUNK) or path.rsplit("/", 1)[-1] in JUNK


def read_zip(archive: Path, max_bytes: int = MAX_BYTES) -> tuple[list[Submission], list[str]]:
    """(the hand-ins in an LMS zip, the entries left out and why): each entry's name parsed by its
    LMS's rule, its bytes counted against the archive's cap and its student's as they are read. A
    student's hand-in that is refused (unzip.Refused) is kept as a refused Submission; the rest is read."""
    with unzip.open_zip(archive, archive) as opened:
        listed = [(m, p) for m, p in unzip.members(archive, opened) if not junk(p)]
        total = unzip.Room(max_bytes, unzip.MAX_ENTRIES, "the archive")
        unzip.declared(archive, listed, total)
        found: dict[tuple[str, str], Submission] = {}
        rooms: dict[str, unzip.Room] = {}
        uploads: dict[tuple[str, str], list[tuple[int, int]]] = {}
        skipped = []
        for index, (member, path) in enumerate(listed):
            entry, why = lms.parse(path)
            if entry is None:
                skipped.append(f"{path}: {why}")
                continue
            sub = hand_in(found, archive, path, entry)
            if sub.refused:
                continue
            room = rooms.setdefault(sub.folder, unzip.Room(MAX_STUDENT_BYTES, MAX_STUDENT_FILES,
                                                           "one student", unzip.Refused))
            try:
                inner = entry_files(archive, opened, member, path, entry.file, room)
            except unzip.Refused as exc:
                sub.refuse(str(exc))
                continue
            for relative, data in inner.items():
                total.take(archive, path, len(data))  # the archive's cap: the whole download's
                place(sub, relative, data, (entry.attachment, index), uploads)
    for (folder, relative), ranks in uploads.items():
        twice = next(s for s in found.values() if s.folder == folder) if len(ranks) > 1 else None
        if twice is not None and not twice.refused:
            twice.note = "; ".join(filter(None, [twice.note, attachments_note(twice, relative, ranks)]))
    return list(found.values()), skipped


def entry_files(archive: Path, opened: zipfile.ZipFile, member: zipfile.ZipInfo, path: str, file: str,
                room: unzip.Room) -> dict[str, bytes]:
    """{path: bytes} an entry gives its student: the file, or the files of a zip they handed in. The
    student's refusal (unzip.Refused): a file name no file system takes, their caps passed, anything
    wrong inside their zip; the download's (HarnessError): an entry of the LMS's zip damaged or lying."""
    with unzip.theirs():
        file = unzip.check_file(archive, path, file)
    if not file.lower().endswith(".zip"):
        return {file: unzip.read_member(archive, opened, member, room)}
    whole = unzip.Room(room.bytes, 1, "one student", unzip.Refused)  # the zip itself: not one of their files
    data = unzip.read_member(archive, opened, member, whole)
    return unzip.nested(Path(f"{archive}!{path}"), data, junk, room)


def hand_in(found: dict[tuple[str, str], Submission], archive: Path, path: str,
            entry: lms.Entry) -> Submission:
    """The hand-in an entry belongs to (made on first sight); one id with two names, or with and
    without Canvas's LATE, is not an archive the LMS wrote."""
    late = "yes" if entry.late else ""
    sub = found.get((entry.lms, entry.student_id))
    if sub is None:
        sub = Submission(entry.student_id, entry.name, entry.lms, late=late,
                         time_source="lms-late-flag" if entry.lms == "canvas" else "none")
        found[(entry.lms, entry.student_id)] = sub
    elif (sub.name, sub.late) != (entry.name, late):
        raise HarnessError(f"{archive}: entry {path!r} names {entry.lms} id {entry.student_id} "
                           f"{entry.name!r}{' LATE' if late else ''}, another of its entries "
                           f"{sub.name!r}{' LATE' if sub.late else ''}: not as the LMS writes its download; "
                           f"nothing was written: {FIX_ARCHIVE}")
    return sub


def place(sub: Submission, relative: str, data: bytes, rank: tuple[int, int],
          uploads: dict[tuple[str, str], list[tuple[int, int]]]) -> None:
    """A file into its hand-in; where the path is taken, the later upload (Canvas: the higher
    attachment id; else the later entry) keeps it."""
    ranks = uploads.setdefault((sub.folder, relative), [])
    if not ranks or rank > max(ranks):
        sub.files[relative] = data
    ranks.append(rank)


def attachments_note(sub: Submission, relative: str, ranks: list[tuple[int, int]]) -> str:
    if sub.source == "canvas":
        ids = sorted(a for a, _ in ranks)
        return (f"{relative} in {len(ranks)} attachments ({', '.join(map(str, ids))}); kept the latest "
                f"({ids[-1]})")
    return f"{relative} {len(ranks)} times in the archive; kept the last"
