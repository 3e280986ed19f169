"""The level's C compiled at run time by the system's C compiler for this CPU, and cached: what
NVRTC does for the CUDA level.

    compiler() -> Compiler           the C compiler here ($CC, else cc, gcc, clang on PATH), or Unavailable
    flags(variant, dtype) -> tuple   the command line of one library: FLAGS and its defines
    source(name) -> str              the text of a C file of this package
    library(name, flags) -> Path     the shared library, compiled once per key, then found in the cache
    load(name, flags) -> CDLL        that library, loaded
    extension(name) -> module        a C file that is a Python extension (call.c), built as the
                                     libraries are, against this Python's and NumPy's headers
    cache_folder() -> Path           where libraries are kept (see below)
    probe() -> dict                  for doctor: the compiler, the flags, the path fused runs here
    toolchain() -> dict              for the bill: what compiling needs (harness.frameworks.toolchain)

The cache is engine_setup.cache_dir("c") (~/.cache/lenet-levels/c; not writable: a private
temporary folder), one file per key, `fused-<sha256 prefix>.so`. The key: the source text, the
flags, the compiler (its path and its `--version`) and this CPU (-march=native compiles for the CPU
it runs on: a cache in a home folder that several machines share must not hand one CPU's
instructions to another). The compiler reads the source from stdin, so the library is built from
exactly the text hashed, and writes a temporary file in the cache folder that is then renamed
(harness.frameworks.cbuild.compile_file, the CUDA level's host code's step too): workers compiling
at once each rename a whole library, and no reader ever sees half of one.
"""

import ctypes
import hashlib
import importlib.util
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from harness.errors import Unavailable
from harness.frameworks import cbuild, engine_setup
from harness.frameworks.toolchain import toolchain_files

HERE = Path(__file__).resolve().parent
# -fno-predictive-commoning: at -O3 gcc otherwise carries conv2's broadcast pixels from one
# iteration to the next through the stack (twice conv2's time); -ffp-contract=fast: a * b + c
# is one FMA in the portable loops too (gcc's default outside ISO mode; clang's is `on`).
FLAGS = ("-O3", "-march=native", "-fno-predictive-commoning", "-ffp-contract=fast", "-std=gnu11",
         "-fPIC", "-shared")
DEFINES = {("fused", "float32"): (), ("fused", "float64"): ("-DLENET_DOUBLE",),
           ("portable", "float32"): ("-DLENET_PORTABLE",), ("portable", "float64"): ("-DLENET_DOUBLE",),
           ("layers", "float32"): (), ("layers", "float64"): ("-DLENET_DOUBLE",)}
SOURCES = {"fused": "fused.c", "portable": "fused.c", "layers": "layers.c"}  # variant -> C file
FIX = cbuild.FIX
TIMEOUT = 300  # seconds for one compilation


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]  # argv prefix: $CC split as a shell would ("ccache gcc" works)
    version: str  # the first line of `--version`


def run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    """Every compiler invocation goes through here (the tests count them)."""
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def compiler() -> Compiler:
    """$CC if set, else the first of cc, gcc, clang on PATH (cbuild.compiler), with its path resolved
    and its version; Unavailable with the fix if none runs."""
    argv = cbuild.compiler()
    path = shutil.which(argv[0]) or argv[0]
    command = (path, *argv[1:])
    return Compiler(command, version(command, os.stat(path).st_mtime_ns))


@cache
def version(command: tuple[str, ...], mtime_ns: int) -> str:
    """The first line of `command --version`, asked once per compiler binary and process."""
    try:
        done = run([*command, "--version"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"the C compiler {shlex.join(command)} does not run ({exc}); {FIX}") from None
    if done.returncode != 0:
        said = done.stderr.strip()[:200]
        raise Unavailable(f"`{shlex.join(command)} --version` failed: {said}; {FIX}")
    return (done.stdout.strip().splitlines() or ["unknown"])[0]


def flags(variant: str, dtype: str) -> tuple[str, ...]:
    if (variant, dtype) not in DEFINES:
        raise ValueError(f"no C build for variant {variant!r} in {dtype}; expected one of {sorted(DEFINES)}")
    return FLAGS + DEFINES[variant, dtype]


def source(name: str) -> str:
    return (HERE / name).read_text()


@cache
def cpu_identity() -> str:
    """What -march=native depends on besides the compiler: the CPU's model name and feature flags
    (/proc/cpuinfo's first processor on Linux), else what `platform` knows."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    found: dict[str, str] = {}
    for line in lines:
        field = line.split(":", 1)[0].strip().lower()
        if field in ("model name", "flags", "features", "cpu model", "isa"):
            found.setdefault(field, line.strip())
    return "\n".join(found.values()) or f"{platform.machine()} {platform.processor()}"


def key(text: str, flag_list: tuple[str, ...], cc: Compiler) -> str:
    parts = (text, "\0".join(flag_list), "\0".join(cc.command), cc.version, cpu_identity())
    return hashlib.sha256("\0\0".join(parts).encode()).hexdigest()[:24]


def cache_folder() -> Path:
    """engine_setup.cache_dir("c"); where it cannot be written (a read-only home), a private
    temporary folder of this process's: the level still builds, once per process."""
    folder = engine_setup.cache_dir("c")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK | os.X_OK):
            return folder
    except OSError:
        pass
    return private_folder()


@cache
def private_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="lenet-c-"))  # mode 0700: no other user can plant a library


def library(name: str, flag_list: tuple[str, ...]) -> Path:
    """The shared library of C file `name` built with `flag_list`: from the cache, else compiled
    into it now (Unavailable where the compiler is missing or cannot build it)."""
    cc, text = compiler(), source(name)
    folder = cache_folder()
    path = folder / f"{Path(name).stem}-{key(text, flag_list, cc)}.so"
    if path.is_file():
        return path
    try:
        cbuild.compile_file([*cc.command, *flag_list, "-x", "c", "-"], text, path, ("-lm",), run)
    except cbuild.Rejected as exc:
        said = exc.stderr.splitlines()
        errors = [line for line in said if "error" in line] or said
        raise Unavailable(f"{cc.version} cannot compile {name} with {' '.join(flag_list)}: "
                          f"{' | '.join(errors[:3])[:600]}; "
                          "set CC to another compiler (gcc >= 8 or clang >= 10)") from None
    return path


def load(name: str, flag_list: tuple[str, ...]) -> ctypes.CDLL:
    path = library(name, flag_list)
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise Unavailable(f"cannot load {path}: {exc}") from None


def extension_flags() -> tuple[str, ...]:
    """FLAGS with this Python's and NumPy's headers, their versions in the key (an extension is built
    for one interpreter and one NumPy ABI); Unavailable where the Python headers are not installed."""
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise Unavailable(f"no Python.h in {include}: install this Python's headers "
                          "(apt install python3-dev)")
    return FLAGS + ("-I", include, "-I", np.get_include(),
                    f"-DLENET_PYTHON={sys.implementation.cache_tag}", f"-DLENET_NUMPY={np.__version__}")


def extension(name: str):
    """The Python extension the C file `name` defines (module lenet_c_<its stem>), built into the
    cache like a library and imported; Unavailable where it cannot be built or loaded."""
    path = library(name, extension_flags())
    spec = importlib.util.spec_from_file_location(f"lenet_c_{Path(name).stem}", path)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise Unavailable(f"cannot import {path}: {exc}") from None
    return module


def probe() -> dict:
    """For doctor: the compiler, the flags, and which path `fused` takes here (its library asked:
    "avx512" or "portable"); or why the level cannot build."""
    try:
        cc = compiler()
        fused = load(SOURCES["fused"], flags("fused", "float32"))
    except Unavailable as exc:
        return {"found": False, "reason": str(exc)}
    fused.lenet_path.restype = ctypes.c_char_p
    return {"found": True, "compiler": " ".join(cc.command), "version": cc.version,
            "flags": " ".join(FLAGS), "fused_path": fused.lenet_path().decode()}



def toolchain() -> dict:
    """What must be installed to compile this level besides Python's distributions, as the compiler
    here says (harness.frameworks.toolchain: the driver, the programs it runs, their libraries)."""
    cc = compiler()
    return toolchain_files(cc.command, cc.version)
