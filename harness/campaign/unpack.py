"""import-results' checks, all made before anything is written, and its all-or-nothing unpacking.

An archive comes back from a borrowed machine: it is data, and nothing in it is trusted.
1. The compressed stream is read whole (gzip's CRC and length: a flipped byte or a cut-off
   download is refused), and what it unpacks to is capped (Limits: a gzip bomb stops at the cap).
2. Every entry: a plain file or folder under one top folder, no absolute path, no `..`, no link or
   device, no control character; no path twice; no path both a file and a folder; the entry count
   and each file's size under the caps.
3. Every results.jsonl row through the one reader (harness.measure.store.rows, strict), no row dated
   ahead of this machine's clock, every env.json a JSON object. A complete run's results.jsonl.gz
   (harness.measure.store.rowfile) is uncompressed whole, its size counted against the caps as it
   unpacks (a gzip bomb stops at the cap), checked against the run's complete.json in the archive
   (the number of rows, their sha256), then its rows like a plain file's.
Then the files are written to a staging folder beside the results (same filesystem) and renamed
into place; a failure on the way (a full disk) removes the staging folder and renames back what
was moved: an import is all or nothing.

    Limits                         the caps (a test passes small ones)
    check_stream(archive, limits)  step 1
    checked_entries(tar, archive, limits) -> (top, [(member, path under results/)])   step 2
    check_env(rel, data, where)                  step 3 for env.json
    check_rows(data, where, now) -> rows         step 3 for a run's rows (uncompressed)
    packed_rows(data, marker, where, limits, room) -> the uncompressed rows of a results.jsonl.gz
    Staging                        the staging folder: put(rel, bytes), commit(into), discard()
"""

import bz2
import gzip
import json
import lzma
import os
import shutil
import tarfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import HarnessError
from harness.machine.files import disk_error
from harness.measure.store import rows as row_reader
from harness.measure.store import runfolder

FUTURE_SLACK_S = 3600  # a borrowed machine's clock may run a little ahead; a row an hour ahead is refused
SKIPPED = {runfolder.LOCK}  # a run's lock file: this checkout's own, never imported


@dataclass(frozen=True)
class Limits:
    total_bytes: int = 1 << 30  # what the whole archive may unpack to (the results are ~20 MiB)
    file_bytes: int = 256 << 20  # one file
    entries: int = 20000  # files and folders


DEFAULT_LIMITS = Limits()
OPENERS: dict[bytes, Callable[..., Any]] = {b"\x1f\x8b": gzip.open, b"BZh": bz2.open, b"\xfd7zXZ": lzma.open}


def check_stream(archive: Path, limits: Limits) -> None:
    """The compressed stream read to its end (its checksum checked), at most limits.total_bytes
    unpacked; an uncompressed tar is taken as it is."""
    with archive.open("rb") as f:
        head = f.read(6)
    opener = next((o for magic, o in OPENERS.items() if head.startswith(magic)), None)
    if opener is None:
        return
    total = 0
    try:
        with opener(archive, "rb") as stream:
            while chunk := stream.read(1 << 20):
                total += len(chunk)
                if total > limits.total_bytes:
                    raise HarnessError(f"{archive}: unpacks to more than {limits.total_bytes / 2**20:g} MiB "
                                       "(the cap on an archive's results); refusing it (a gzip bomb?)")
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
        raise HarnessError(f"{archive}: the compressed stream is damaged or cut off ({exc}); "
                           "nothing imported: copy the archive again") from None


def entry_path(member: tarfile.TarInfo, archive: Path) -> PurePosixPath:
    name = member.name
    parts = PurePosixPath(name).parts
    if (name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir())
            or any(ord(ch) < 32 or ch == "\x7f" for ch in name) or "\\" in name):
        raise HarnessError(f"{archive}: refusing the entry {name!r} (absolute, '..', a link, a device "
                           "or a control character)")
    return PurePosixPath(*[p for p in parts if p != "."])


def checked_entries(tar: tarfile.TarFile, archive: Path,
                    limits: Limits) -> tuple[str, list[tuple[tarfile.TarInfo, PurePosixPath]]]:
    """The top folder's name, and (member, path under results/) for each of the archive's result
    files; every entry checked (step 2), read one at a time so a cap stops the reading."""
    files: dict[PurePosixPath, tarfile.TarInfo] = {}
    folders: set[PurePosixPath] = set()
    count = total = 0
    for member in tar:
        count += 1
        if count > limits.entries:
            raise HarnessError(f"{archive}: more than {limits.entries} entries (the cap); refusing it")
        path = entry_path(member, archive)
        if member.isfile():
            total += member.size
            if member.size > limits.file_bytes:
                raise HarnessError(f"{archive}: {member.name} is {member.size / 2**20:.1f} MiB, over the "
                                   f"{limits.file_bytes / 2**20:g} MiB cap on one file")
            if total > limits.total_bytes:
                raise HarnessError(f"{archive}: its files add up to more than "
                                   f"{limits.total_bytes / 2**20:g} MiB (the cap); refusing it")
        clash_with(path, member, files, folders, archive)
        if member.isfile():
            files[path] = member
        else:
            folders.add(path)
        folders.update(path.parents)
    tops = {p.parts[0] for p in [*files, *folders] if p.parts}
    if len(tops) != 1:
        raise HarnessError(f"{archive}: expected one top folder (gpu-study-...), found {sorted(tops)}")
    top = tops.pop()
    found = [(m, PurePosixPath(*p.parts[2:])) for p, m in files.items()
             if len(p.parts) > 2 and p.parts[1] == "results" and p.name not in SKIPPED]
    if not found:
        raise HarnessError(f"{archive}: no results/ inside (expected {top}/results/...)")
    return top, found


def clash_with(path: PurePosixPath, member: tarfile.TarInfo, files: dict, folders: set,
               archive: Path) -> None:
    """A path twice, or a path both a file and a folder, is refused (tar would let the last win)."""
    if path in files or (member.isfile() and path in folders):
        raise HarnessError(f"{archive}: the path {member.name!r} is in it twice (or both a file and a "
                           "folder); which one is meant cannot be told: refusing it")
    if any(parent in files for parent in path.parents):
        raise HarnessError(f"{archive}: {member.name!r} lies inside a path the archive has as a file; "
                           "refusing it")
    if member.isdir() and path in folders:
        return  # a folder named again (tar lists a folder before its files): harmless


def check_env(rel: PurePosixPath, data: bytes, where: str) -> None:
    """An env.json: a JSON object. Other files: nothing to check."""
    if rel.name == "env.json":
        try:
            if not isinstance(json.loads(data.decode("utf-8")), dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            raise HarnessError(f"{where}: not a readable environment ({exc})") from None


def packed_rows(data: bytes, marker: bytes | None, where: str, limits: Limits, room: int) -> bytes:
    """A results.jsonl.gz's rows, uncompressed whole (at most one file's cap, and the room left under
    the archive's: room) and as the run's complete.json in the archive records them (rows.checked);
    anything else is refused, naming the file."""
    cap = max(0, min(limits.file_bytes, room))
    said = (f"the caps: {limits.file_bytes / 2**20:g} MiB a file, {limits.total_bytes / 2**20:g} MiB "
            "all the archive's files together")
    try:
        fields = json.loads(marker) if marker is not None else None
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or fields.get("complete") is not True:
        fields = None
    return row_reader.checked(row_reader.unpack(data, cap, where, said), fields, where)


def check_rows(data: bytes, where: str, now: float) -> list[dict]:
    """A run's rows (a results.jsonl, or a results.jsonl.gz uncompressed), every one usable
    (harness.measure.store.rows, strict) and none dated ahead of this machine's clock."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    found = row_reader.read_lines(row_reader.lines_of(text), where, strict=True)
    for lineno, row in enumerate(found, 1):
        if row["time"] > now + FUTURE_SLACK_S:
            date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(row["time"]))
            raise HarnessError(f"{where}:{lineno}: dated {date}, ahead of this machine's clock "
                               f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(now))}); refusing it")
    return found


class Staging:
    """A folder beside the results (`.import-<top>-<pid>`): files are put there, then renamed into
    place; on any failure everything moved is moved back and the folder removed."""

    def __init__(self, into: Path, top: str):
        self.into = into
        self.root = into / f".import-{top}-{os.getpid()}"
        for stale in into.glob(".import-*"):  # a killed import's (the import lock is ours: none is running)
            shutil.rmtree(stale, ignore_errors=True)
        self.moved: list[tuple[Path, Path, Path | None]] = []  # (target, staged, its old version)

    def put(self, rel: PurePosixPath, data: bytes) -> None:
        path = self.root.joinpath(*rel.parts)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise HarnessError(f"{disk_error(self.into / Path(*rel.parts), exc)}; nothing imported") from None

    def units(self) -> list[PurePosixPath]:
        """What to rename: for each staged file, its shallowest folder that is not in the results yet
        (a new run folder moves whole), else the file itself."""
        found: list[PurePosixPath] = []
        for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
            rel = PurePosixPath(*path.relative_to(self.root).parts)
            unit = next((PurePosixPath(*rel.parts[:i]) for i in range(1, len(rel.parts) + 1)
                         if not self.into.joinpath(*rel.parts[:i]).exists()), rel)
            if not any(unit == u or u in unit.parents for u in found):
                found.append(unit)
        return found

    def commit(self) -> None:
        try:
            self.into.mkdir(parents=True, exist_ok=True)
            for unit in self.units():
                target, staged = self.into.joinpath(*unit.parts), self.root.joinpath(*unit.parts)
                old = None
                if target.is_file():  # a verify file merged, a campaign record added to: kept until the end
                    old = self.root / ".replaced" / "-".join(unit.parts)
                    old.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(target, old)
                target.parent.mkdir(parents=True, exist_ok=True)
                self.moved.append((target, staged, old))
                os.rename(staged, target)
        except OSError as exc:
            self.roll_back()
            raise HarnessError(f"{self.into}: the import could not be moved into place ({exc}); "
                               "nothing imported") from None
        self.discard()

    def roll_back(self) -> None:
        for target, staged, old in reversed(self.moved):
            try:
                if target.exists():
                    os.rename(target, staged)
                if old is not None:
                    os.rename(old, target)
            except OSError:
                pass
        self.moved = []
        self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
