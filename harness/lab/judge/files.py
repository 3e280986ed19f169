"""A submission folder, read as hostile input: only regular files and folders inside it are
copied (into the worker's private copy) and counted; a link (to anywhere), a named pipe, a
socket or a device is skipped and named, never opened or followed; caps on the number of files
and their size, filled in order of need: the lab's module first, then the files of the modules
it imports from its folder (and theirs), then the rest by name, so that 300 data files cannot
crowd out `lenet.py`. The grader reads the copy afterwards, never the student's folder again.

    copy_submission(folder, target, uid, module) -> {"files", "bytes", "skipped", "sha256"}
    digest(folder, module) -> sha256    of the files a copy would take now (combined: paths + hashes)
    picked(folder, module, skipped) -> (path, bytes), ...   the copy's files, in order, within the caps
    listing(folder) -> (files, skipped)   every regular file (relative paths), walked without recursion
    needed(folder, files, module) -> files   the module and its imports' files (transitively, by ast)
    in_order(folder, files, module) -> files  needed, then the rest
    imports(source, package) -> parts     the modules a source imports (relative ones resolved)
    module_files(parts, files) -> files   the files an import of those parts loads
    shadows(folder, module) -> why or None    something that would be imported instead of the module
    read_file(src, room) -> bytes or None
    count_loc(folder, module) -> {"loc", "files"}   code lines of the module, the files it imports
                                          and the CUDA sources of a private copy (capped)
    SOURCES: the endings of code written by hand (counted in lines of code, compared for similarity)
"""

import ast
import hashlib
import importlib.machinery
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SOURCES = (".py", ".cu", ".cuh")  # code written by hand: Python glue and CUDA kernels (the CUDA lab)
MAX_FILES = 200
MAX_BYTES = 32 << 20  # all files together
MAX_DEPTH = 8
MAX_LISTED = 20_000  # entries looked at in a folder, all levels together
MAX_PARSED = 1 << 20  # a source longer than this is not read for its imports
MAX_LOC_BYTES = 256 << 10  # source counted by pygount (about 6 s per MB), in the copy's order of need
KINDS = {stat.S_IFLNK: "a link", stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket",
         stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


def listing(folder: Path) -> tuple[list[Path], list[str]]:
    """(every regular file inside `folder`, relative; what was skipped and why), by a stack."""
    found: list[Path] = []
    skipped: list[str] = []
    stack, looked = [(Path(), 0)], 0
    while stack:
        rel, depth = stack.pop()
        try:
            entries = sorted(os.scandir(Path(folder) / rel), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(f"{rel}: unreadable ({exc.strerror})")
            continue
        for entry in entries:
            looked += 1
            if looked > MAX_LISTED:
                skipped.append(f"{rel / entry.name} and the rest: past {MAX_LISTED} entries, not looked at")
                return found, skipped
            if entry.name == "__pycache__":
                continue
            try:
                kind = stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
            except OSError as exc:  # gone since the listing
                skipped.append(f"{rel / entry.name}: unreadable ({exc.strerror}), skipped")
                continue
            if kind == stat.S_IFDIR and depth >= MAX_DEPTH:
                skipped.append(f"{rel / entry.name}/: deeper than {MAX_DEPTH} folders")
            elif kind == stat.S_IFDIR:
                stack.append((rel / entry.name, depth + 1))
            elif kind != stat.S_IFREG:
                skipped.append(f"{rel / entry.name}: {KINDS.get(kind, 'not a regular file')}, skipped")
            else:
                found.append(rel / entry.name)
    return found, skipped


def imports(source: bytes, package: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The modules a Python source imports, each as its dotted parts (`from a.b import c` gives a.b
    and a.b.c, c being maybe a module); a relative import resolved against `package`, the parts of
    the source's own package (none when it cannot be parsed)."""
    if len(source) > MAX_PARSED:
        return set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names: set[tuple[str, ...]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(tuple(alias.name.split(".")) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            if node.level > len(package) + 1:  # above the folder: not the submission's
                continue
            base += tuple(node.module.split(".")) if node.module else ()
            if base:
                names.add(base)
            names.update(base + (alias.name,) for alias in node.names if alias.name != "*")
    return names


def module_files(parts: tuple[str, ...], files: list[Path]) -> list[Path]:
    """The folder's files a module's import loads: each package's __init__.py on the way, the module's own."""
    found = []
    for i in range(1, len(parts) + 1):
        where = Path(*parts[:i])
        found += [f for f in (where.with_suffix(".py"), where / "__init__.py") if f in files]
    return found


def needed(folder: Path, files: list[Path], module: str) -> list[Path]:
    """The module and the files of the modules it imports from the folder (transitively, read by
    ast: never run), each once, in order of need."""
    order: list[Path] = []
    todo = [Path(module)] if Path(module) in files else []
    while todo:
        path = todo.pop(0)
        if path in order:
            continue
        order.append(path)
        if path.suffix != ".py":
            continue
        try:
            source = (Path(folder) / path).read_bytes()[:MAX_PARSED + 1]
        except OSError:
            continue
        package = path.parent.parts  # a relative import is against the file's own package
        for parts in sorted(imports(source, package)):
            todo += module_files(parts, files)
    return order


def in_order(folder: Path, files: list[Path], module: str) -> list[Path]:
    """The module, then the files of the modules it imports from the folder (transitively), then the rest."""
    order = needed(folder, files, module)
    return order + sorted(f for f in files if f not in order)


def shadows(folder: Path, module: str) -> str | None:
    """Why `module` (lenet.py) would not be the module imported from the copy: a package or a
    compiled module of the same name comes first in Python's search."""
    stem = module[:-3]
    if (Path(folder) / stem).is_dir():
        return f"a folder {stem}/ beside {module}: `import {stem}` would import that package, not {module}"
    for suffix in importlib.machinery.all_suffixes():
        if suffix != ".py" and (Path(folder) / f"{stem}{suffix}").exists():
            return f"{stem}{suffix} beside {module}: `import {stem}` would load it instead of {module}"
    return None


def copy_submission(folder: Path, target: Path, uid: int | None = None, module: str = "lenet.py") -> dict:
    """Copy `folder` into `target` (made here), in order of need. Returns {"files", "bytes",
    "skipped": [why, ...], "sha256": the digest of what was copied}. With `uid`, the copy belongs to
    that UID/GID (the worker's own)."""
    target.mkdir(mode=0o700)
    skipped: list[str] = []
    made, hashes, size = [target], {}, 0
    for rel, data in picked(folder, module, skipped):
        try:
            for parent in reversed(rel.parents[:-1]):
                if not (target / parent).is_dir():
                    (target / parent).mkdir(mode=0o700)
                    made.append(target / parent)
            with os.fdopen(os.open(target / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                out.write(data)
        except OSError as exc:  # the space is full (its size or its files)
            skipped.append(f"{rel}: not copied ({exc.strerror}), skipped")
            continue
        hashes[rel], size = hashlib.sha256(data).hexdigest(), size + len(data)
        made.append(target / rel)
    if uid is not None:
        for path in made:
            os.chown(path, uid, uid, follow_symlinks=False)
    return {"files": len(hashes), "bytes": size, "skipped": skipped, "sha256": combined(hashes)}


def digest(folder: Path, module: str = "lenet.py") -> str:
    """The sha256 that copy_submission would record for `folder` now (the same files, caps and
    order), without copying: `--resume` regrades a student whose files changed since their row."""
    return combined({rel: hashlib.sha256(data).hexdigest() for rel, data in picked(folder, module, [])})


def combined(hashes: dict[Path, str]) -> str:
    """One sha256 of files: their relative paths (sorted) and each one's own sha256."""
    whole = hashlib.sha256()
    for rel in sorted(hashes):
        whole.update(os.fsencode(rel) + b"\0" + hashes[rel].encode() + b"\n")
    return whole.hexdigest()


def picked(folder: Path, module: str, skipped: list[str]) -> Iterator[tuple[Path, bytes]]:
    """(relative path, content) of the files a copy takes, in order of need, within the caps; what
    is left out is appended to `skipped`."""
    found, unlisted = listing(folder)
    skipped.extend(unlisted)
    count, total = 0, 0
    for rel in in_order(folder, found, module):
        if count >= MAX_FILES:
            skipped.append(f"{rel}: past the limit of {MAX_FILES} files")
            continue
        try:
            data = read_file(str(Path(folder) / rel), MAX_BYTES - total)
        except OSError as exc:  # unreadable, or gone
            skipped.append(f"{rel}: not copied ({exc.strerror}), skipped")
            continue
        if data is None:
            skipped.append(f"{rel}: past the limit of {MAX_BYTES >> 20} MB for all files")
            continue
        count, total = count + 1, total + len(data)
        yield rel, data


def read_file(src: str, room: int) -> bytes | None:
    """One regular file's bytes, opened without following a link and without blocking (a file
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
    return None if len(data) > room else data


def count_loc(folder: Path, module: str = "lenet.py") -> dict:
    """Code lines of a submission's private copy: the module and the Python files it imports from
    the folder (needed: read by ast, never from the worker; a copied library's unused files, a
    setup.py, do not count), and every CUDA source (a kernel file the glue reads), up to
    MAX_LOC_BYTES of source."""
    from harness.machine import provenance as loc

    every = listing(folder)[0]
    used = needed(folder, every, module)
    found = [Path(folder) / rel for rel in used + sorted(f for f in every if f.suffix in SOURCES
                                                          and f.suffix != ".py" and f not in used)
             if rel.suffix in SOURCES]
    counted, room, lines = 0, MAX_LOC_BYTES, 0
    for path in found:
        size = path.stat().st_size
        if size > room:
            break
        lines, counted, room = lines + loc.count_lines(path, "submission")[0], counted + 1, room - size
    out: dict[str, Any] = {"loc": lines, "files": len(found)}
    if counted < len(found):
        out["loc_note"] = (f"lines counted in {counted} of {len(found)} source files: the first "
                           f"{MAX_LOC_BYTES >> 10} KB of source")
    return out
