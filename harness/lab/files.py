"""A submission folder, read as hostile input: only regular files and folders inside it are
copied (into the worker's private copy) and counted; a link (to anywhere), a named pipe, a
socket or a device is skipped and named, never opened or followed; caps on the number of files
and their size. The grader reads the copy afterwards, never the student's folder again.

    copy_submission(folder, target, uid) -> {"files", "bytes", "skipped"}; copy_file(src, dst, room)
"""

import os
import stat
from pathlib import Path

MAX_FILES = 200
MAX_BYTES = 32 << 20  # all files together
MAX_DEPTH = 8
KINDS = {stat.S_IFLNK: "a link", stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket",
         stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


def copy_submission(folder: Path, target: Path, uid: int | None = None) -> dict:
    """Copy `folder` into `target` (made here). Returns {"files", "bytes", "skipped": [why, ...]}.
    With `uid`, the copy belongs to that UID/GID (the worker's own, writable by it alone)."""
    target.mkdir(mode=0o700)
    copied, total, skipped = 0, 0, []

    def walk(src: Path, dst: Path, depth: int) -> None:
        nonlocal copied, total
        try:
            entries = sorted(os.scandir(src), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(f"{src.relative_to(folder)}: unreadable ({exc.strerror})")
            return
        for entry in entries:
            rel = Path(entry.path).relative_to(folder)
            if entry.name == "__pycache__":
                continue
            mode = entry.stat(follow_symlinks=False).st_mode
            kind = stat.S_IFMT(mode)
            if kind == stat.S_IFDIR:
                if depth >= MAX_DEPTH:
                    skipped.append(f"{rel}/: deeper than {MAX_DEPTH} folders")
                    continue
                (dst / entry.name).mkdir(mode=0o700)
                walk(Path(entry.path), dst / entry.name, depth + 1)
            elif kind != stat.S_IFREG:
                skipped.append(f"{rel}: {KINDS.get(kind, 'not a regular file')}, skipped")
            elif copied >= MAX_FILES:
                skipped.append(f"{rel}: past the limit of {MAX_FILES} files")
            else:
                try:
                    size = copy_file(entry.path, dst / entry.name, MAX_BYTES - total)
                except OSError as exc:
                    skipped.append(f"{rel}: unreadable ({exc.strerror}), skipped")
                    continue
                if size is None:
                    skipped.append(f"{rel}: past the limit of {MAX_BYTES >> 20} MB for all files")
                else:
                    copied, total = copied + 1, total + size

    walk(Path(folder), target, 0)
    if uid is not None:
        for path in [target, *target.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
    return {"files": copied, "bytes": total, "skipped": skipped}


def copy_file(src: str, dst: Path, room: int) -> int | None:
    """Copy one regular file, opened without following a link and without blocking (a file
    swapped for a pipe between the listing and the open is refused); None when it is too big."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = b""
        while len(data) <= room:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > room:
        return None
    with os.fdopen(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(data)
    return len(data)
