"""Compiling lenet.c for this CPU at run time, as NVRTC compiles the CUDA rung's kernels: the system's
C compiler ($CC, else cc or gcc), the flags below, and a cache keyed by a hash of the source, the
flags and the compiler's own version, so a second worker (or run) loads the library without
compiling, and an edited source or flag compiles again. The cache is $LENET_C_CACHE, else
~/.cache/lenet-levels/c, else (not writable: a sandboxed lab worker) the temporary folder.

    FLAGS                                the compiler's flags (why each is there, below)
    compiler() -> path                   or Unavailable with the fix
    library(source, flags) -> Path       the shared library, compiled once per key
    cache_dir() -> Path
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.errors import Unavailable

SOURCE = Path(__file__).with_name("lenet.c")
FLAGS = ("-O3", "-march=native",  # this CPU's vector units (AVX-512 where it has them)
         "-mprefer-vector-width=512",  # conv2's 16 filters in one register, not two
         "-fno-predictive-commoning",  # at -O3 it spills the broadcast inputs to the stack
         "-std=c11", "-shared", "-fPIC")
FIX = "install a C compiler (Debian/Ubuntu: apt install gcc) or set CC to one"


def compiler() -> str:
    for name in filter(None, (os.environ.get("CC"), "cc", "gcc")):
        found = shutil.which(name)
        if found:
            return found
    raise Unavailable(f"no C compiler found (CC={os.environ.get('CC', '')!r}, cc, gcc): {FIX}")


def cache_dir() -> Path:
    for folder in (os.environ.get("LENET_C_CACHE"), Path.home() / ".cache" / "lenet-levels" / "c"):
        if folder:
            try:
                Path(folder).mkdir(parents=True, exist_ok=True)
                if os.access(folder, os.W_OK):
                    return Path(folder)
            except OSError:
                continue
    fallback = Path(tempfile.gettempdir()) / f"lenet-c-{os.getuid()}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback


def version(cc: str) -> str:
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"the C compiler {cc} does not run ({exc}): {FIX}") from None
    return done.stdout


def library(source: Path = SOURCE, flags: tuple[str, ...] = FLAGS) -> Path:
    """The compiled library for this source, these flags and this compiler, compiled if not cached."""
    cc = compiler()
    key = hashlib.sha256(source.read_bytes() + "\0".join(flags).encode() + version(cc).encode()).hexdigest()
    target = cache_dir() / f"lenet-{key[:20]}.so"
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        done = subprocess.run([cc, *flags, "-o", str(built), str(source), "-lm"], capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            raise Unavailable(f"{cc} could not compile {source.name}: {done.stderr.strip()[:500]}: {FIX}")
        os.replace(built, target)  # atomic: a worker beside this one sees the whole file or none
    return target
