"""A zip read as hostile input (the LMS's bulk download, and a zip a student handed in): every name
checked before a byte is read, every byte counted as it is read (a header may lie), and any
damage a clean HarnessError that names the archive and the entry, never a traceback.

Refused: an entry with `..`, an absolute path or a drive (zip-slip); a name flagged UTF-8 that is
not; the same name twice; a file name of "." or "..", a NUL, a name past MAX_PART bytes, a path
past MAX_PATH bytes or MAX_DEPTH folders; more entries than the cap; data past its declared size,
a damaged or encrypted entry; more than Room's bytes or files; inflation past MAX_RATIO.
A name without the UTF-8 flag is read as UTF-8 when it is (Info-ZIP, macOS), else as cp437.

Scope: a HarnessError refuses the whole archive; Refused (a HarnessError too) refuses one student's
hand-in alone. A room says which its overflow is (Room.error); everything wrong inside a zip a
student handed in is theirs (nested); theirs() makes any other check's refusal theirs.

    Refused, theirs(), Room, open_zip(where, source) -> ZipFile,
    members(where, opened, max_entries) -> [(member, path)],
    safe_path(archive, name), check_file(where, entry, path) -> path, declared(where, members, room),
    read_member(where, opened, member, room) -> bytes,
    nested(where, data, junk, room) -> {path: bytes}, name_of(member) (its name, decoded),
    fail(where, name, what) (the HarnessError), shown(name) (a name for a message, a long one cut)
"""

import contextlib
import io
import lzma
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.errors import HarnessError
from harness.lab.judge import files

FIX_ARCHIVE = "download it again from the LMS, or unpack it by hand after checking what it holds"
FIX_HANDIN = ("the others are collected; ask the student to hand in again, or unpack theirs by hand after "
              "checking what it holds")
MAX_PART = 255  # bytes in one file or folder name (NAME_MAX)
MAX_PATH = 1024  # bytes in a path inside a student's folder
MAX_DEPTH = files.MAX_DEPTH
MAX_RATIO = 200  # inflated / compressed bytes, for an entry past 1 MiB (deflate's best is ~1000)
MAX_ENTRIES = 100_000  # entries in one archive
UTF8_FLAG = 0x800
UNREADABLE = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError, NotImplementedError,
              RuntimeError, ValueError)


class Refused(HarnessError):
    """One student's hand-in refused: theirs alone is left out, the rest of the archive is read."""

    def __init__(self, message: str) -> None:
        super().__init__(message.replace("nothing was written", "nothing of theirs was written")
                         .replace(FIX_ARCHIVE, FIX_HANDIN))


@contextlib.contextmanager
def theirs() -> Iterator[None]:
    """Any refusal inside this block is one student's hand-in's (Refused), not the archive's."""
    try:
        yield
    except Refused:
        raise
    except HarnessError as exc:
        raise Refused(str(exc)) from None


@dataclass
class Room:
    """What may still be read: bytes and files, counted as they are read; past either, `error`
    (HarnessError: the whole archive is refused; Refused: one student's hand-in)."""

    bytes: int
    files: int
    what: str  # "the archive", "one student"
    error: type[HarnessError] = HarnessError

    def __post_init__(self) -> None:
        self.cap = (self.bytes, self.files)  # what the messages name

    def take(self, where: Path, name: str, size: int) -> None:
        if self.files < 1:
            raise self.error(f"{where}: entry {shown(name)} is past the cap of {self.cap[1]} files for "
                             f"{self.what}; nothing was written: {FIX_ARCHIVE}")
        if size > self.bytes:
            raise self.error(f"{where}: entry {shown(name)} takes {self.what} past the size cap of "
                             f"{self.cap[0] >> 20} MiB; nothing was written: {FIX_ARCHIVE}")
        self.files, self.bytes = self.files - 1, self.bytes - size


def shown(name: str) -> str:
    """An entry's name for a message: quoted, a long one cut in the middle (a 4 KB name stays readable)."""
    quoted = repr(name)
    return quoted if len(quoted) <= 200 else f"{quoted[:140]}...{quoted[-50:]}"


def fail(where: Path, name: str, what: str) -> HarnessError:
    return HarnessError(f"{where}: entry {shown(name)} {what}; nothing was written: {FIX_ARCHIVE}")


def open_zip(where: Path, source: Path | io.BytesIO) -> zipfile.ZipFile:
    """The zip, or a HarnessError: damaged, or a name flagged UTF-8 that is not (named by its bytes)."""
    try:
        return zipfile.ZipFile(source)
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{where}: entry {bytes(exc.object)[:120]!r} is flagged UTF-8 but is not; "
                           f"nothing was written: {FIX_ARCHIVE}") from None
    except UNREADABLE as exc:
        raise HarnessError(f"{where}: not a readable zip ({exc}); nothing was written: "
                           f"{FIX_ARCHIVE}") from None


def safe_path(archive: Path, name: str) -> PurePosixPath:
    """An entry's path, or a HarnessError for `..`, an absolute path or a drive (zip-slip)."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", name):
        raise HarnessError(f"{archive}: entry {shown(name)} points outside the folder it would be unpacked "
                           f"into (an absolute path or '..'); nothing was written: {FIX_ARCHIVE}")
    return path


def name_of(member: zipfile.ZipInfo) -> str:
    """The entry's name: as flagged, or UTF-8 where the bytes of an unflagged name are UTF-8."""
    if member.flag_bits & UTF8_FLAG or member.filename.isascii():
        return member.filename
    try:
        return member.filename.encode("cp437").decode("utf-8")
    except UnicodeError:
        return member.filename


def members(where: Path, opened: zipfile.ZipFile, max_entries: int = MAX_ENTRIES) \
        -> list[tuple[zipfile.ZipInfo, str]]:
    """(member, its checked path) of every file entry, in the archive's order."""
    listed = opened.infolist()
    if len(listed) > max_entries:
        raise HarnessError(f"{where}: {len(listed)} entries, past the cap of {max_entries}; nothing was "
                           f"written: {FIX_ARCHIVE}")
    found, seen = [], set()
    for member in listed:
        if member.is_dir():
            continue
        path = safe_path(where, name_of(member)).as_posix()
        if path in seen:
            raise fail(where, path, "appears twice (an LMS writes each name once)")
        seen.add(path)
        found.append((member, path))
    return found


def check_file(where: Path, entry: str, path: str) -> str:
    """`path` (a file's place inside a student's folder) when it is one a file system takes."""
    parts = path.split("/")
    bad = next((p for p in parts if p in ("", ".", "..") or "\0" in p), None)
    if bad is not None:
        raise fail(where, entry, f"would be written as {path!r}: {bad!r} is not a file or folder name")
    longest = max(len(p.encode("utf-8", "surrogatepass")) for p in parts)
    if longest > MAX_PART:
        raise fail(where, entry, f"has a name of {longest} bytes, past the {MAX_PART} a file system takes")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH or len(parts) > MAX_DEPTH:
        raise fail(where, entry, f"has a path past {MAX_PATH} bytes or {MAX_DEPTH} folders deep")
    return path


def declared(where: Path, listed: list[tuple[zipfile.ZipInfo, str]], room: Room) -> None:
    """A quick refusal where the headers alone say too much (the reading counts again)."""
    size = sum(m.file_size for m, _ in listed)
    if size > room.bytes:
        raise room.error(f"{where}: its entries expand to {size >> 20} MiB, past the cap of "
                           f"{room.cap[0] >> 20} MiB (a zip bomb?); nothing was written: {FIX_ARCHIVE}")
    if len(listed) > room.files:
        raise room.error(f"{where}: {len(listed)} files, past the cap of {room.cap[1]} for {room.what}; "
                           f"nothing was written: {FIX_ARCHIVE}")


def read_member(where: Path, opened: zipfile.ZipFile, member: zipfile.ZipInfo, room: Room) -> bytes:
    """An entry's bytes, counted as they come, taken from the room: past its declared size, inflated
    past MAX_RATIO, damaged or encrypted is a HarnessError; past the room's bytes, the room's error."""
    limit = room.bytes
    try:
        with opened.open(member) as stream:
            data = stream.read(min(limit, member.file_size) + 1)
    except UNREADABLE as exc:
        raise fail(where, member.filename, f"cannot be read ({exc})") from None
    if len(data) > member.file_size:
        raise fail(where, member.filename, "expands past its declared size (a zip bomb?)")
    if len(data) > limit:
        raise room.error(f"{where}: entry {shown(member.filename)} expands past the size cap of {room.what} "
                         f"({room.cap[0] >> 20} MiB; a zip bomb?); nothing was written: {FIX_ARCHIVE}")
    if len(data) > 1 << 20 and len(data) > MAX_RATIO * max(1, member.compress_size):
        raise fail(where, member.filename, f"inflates {len(data) // max(1, member.compress_size)} times "
                                           f"(past {MAX_RATIO}: a zip bomb?)")
    room.take(where, member.filename, len(data))
    return data


def nested(where: Path, data: bytes, junk: Callable[[str], bool], room: Room) -> dict[str, bytes]:
    """A zip a student handed in (their folder, zipped): its files with the same checks as the LMS's
    zip, any refusal theirs (Refused); one top-level folder common to all is dropped."""
    with theirs(), open_zip(where, io.BytesIO(data)) as opened:
        listed = [(m, p) for m, p in members(where, opened) if not junk(p)]
        declared(where, listed, room)
        tops = {p.split("/", 1)[0] for _, p in listed}
        strip = len(tops) == 1 and all("/" in p for _, p in listed)
        found = {}
        for member, path in listed:
            inside = path.split("/", 1)[1] if strip else path
            found[check_file(where, path, inside)] = read_member(where, opened, member, room)
        return found
