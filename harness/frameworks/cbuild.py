"""A small C file compiled by the system's C compiler into a shared library, once per content, for a
level's host-side code (lenet_cuda's resident call). Portable flags (no -march=native): the library
is the same on every CPU of an architecture, so the key is the text, the flags and the compiler.

    compiler() -> list[str]                       $CC split as a shell would, else cc, gcc or clang
    shared_library(text, stem, kind) -> CDLL      built into engine_setup.cache_dir(kind), loaded
    compile_file(command, text, path, after, run) the compile step both use (lenet_c's build too):
                                                  `command` reads C from stdin and writes `path`

A library is written to a temporary file in the cache folder and renamed: workers building at once
each rename a whole file, no reader sees half of one. Unavailable (with the fix) where no compiler
runs; Rejected (an Unavailable holding the compiler's stderr) where it refuses the text.
"""

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from harness.errors import Unavailable
from harness.frameworks import engine_setup

FLAGS = ("-O2", "-std=gnu11", "-fPIC", "-shared")
FIX = "install one: apt install gcc (or dnf install gcc, xcode-select --install), or set CC"
TIMEOUT_S = 120


def compiler() -> list[str]:
    wanted = os.environ.get("CC")
    for name in [wanted] if wanted else ["cc", "gcc", "clang"]:
        argv = shlex.split(name)
        if argv and shutil.which(argv[0]):
            return argv
    what = f"CC={wanted!r} is not a program on PATH" if wanted else "no C compiler (cc, gcc, clang) on PATH"
    raise Unavailable(f"{what}; {FIX}")


@cache
def identity(argv: tuple[str, ...]) -> str:
    """The compiler's path and `--version` line: part of the key (another compiler, another library)."""
    try:
        done = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"the C compiler {shlex.join(argv)} does not run ({exc}); {FIX}") from None
    return f"{shutil.which(argv[0])}\0{(done.stdout.splitlines() or ['?'])[0]}"


class Rejected(Unavailable):
    """The compiler ran and refused the text; `stderr` is what it said."""

    def __init__(self, command: Sequence[str], stderr: str):
        super().__init__(f"{shlex.join(command)} refused the source: {stderr.strip()[:600]}")
        self.stderr = stderr


def run(argv: list[str], stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def compile_file(command: Sequence[str], text: str, path: Path, after: Sequence[str] = (),
                 run: Callable[[list[str], str], subprocess.CompletedProcess] = run) -> Path:
    """`command -o <temporary> after...` compiles `text` (read from stdin: the command ends in `-x c -`)
    into a temporary file in path's folder, renamed to `path` once whole (a concurrent build renames a
    whole file too; no reader sees half of one). `run` runs the compiler (a caller's own: its timeout,
    its count in tests). Unavailable where the folder cannot be written or the compiler does not run,
    Rejected where it refuses the text; no temporary file is left either way."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".so.tmp", dir=path.parent)
    except OSError as exc:
        raise Unavailable(f"cannot write the compile cache {path.parent} ({exc}); "
                          "set LENET_CACHE_DIR to a writable folder") from None
    os.close(fd)
    try:
        argv = [*command, "-o", tmp, *after]
        try:
            done = run(argv, text)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"{shlex.join(argv)} failed to run: {exc}") from None
        if done.returncode != 0:
            raise Rejected(command, done.stderr)
        os.replace(tmp, path)  # atomic: a concurrent build's rename replaces a whole file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def shared_library(text: str, stem: str, kind: str) -> ctypes.CDLL:
    argv = compiler()
    key = hashlib.sha256("\0".join([text, *FLAGS, *argv, identity(tuple(argv))]).encode()).hexdigest()[:24]
    folder = engine_setup.cache_dir(kind)
    path = folder / f"{stem}-{key}.so"
    if not path.is_file():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Unavailable(f"cannot write the compile cache {folder} ({exc}); "
                              "set LENET_CACHE_DIR to a writable folder") from None
        try:
            compile_file([*argv, *FLAGS, "-x", "c", "-"], text, path)
        except Rejected as exc:
            said = exc.stderr.strip()[:600]
            raise Unavailable(f"{shlex.join(argv)} cannot compile {stem}.c: {said}") from None
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise Unavailable(f"cannot load {path}: {exc}") from None
