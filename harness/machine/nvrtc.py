"""A small ctypes binding over libnvrtc, CUDA's run-time compiler: CUDA C -> PTX or cubin, no GPU needed.

The hand-written CUDA level compiles through CuPy (cupy.RawModule, which calls NVRTC itself);
this binding lets the tests and `doctor` compile the same kernels on any machine, without CuPy
or a GPU: a syntax or type error never waits for a GPU, and ptxas reports each kernel's
registers and shared memory.

Library discovery, first found wins:
  1. $LENET_NVRTC_LIBRARY (a path to libnvrtc.so.*)
  2. the nvidia-cuda-nvrtc-cu12 wheel (nvidia/cuda_nvrtc/lib/libnvrtc.so.12), CUDA 13's
     nvidia-cuda-nvrtc (nvidia/cu13/lib/libnvrtc.so.13)
  3. the system's libnvrtc.so.13, then libnvrtc.so.12

Every compile that succeeds is kept in engine_setup.cache_dir("nvrtc") (~/.cache/lenet-levels/nvrtc),
one JSON file per key, `fused-sm_90-<sha256 prefix>.json`: the key is the source text, its name, the
arch, the options, the template instances and the library (its path, version, size and time), as
the C level's cache keys its libraries. The tests, `doctor` and `gpu-explain` compile the same
kernels: each compile is done once a machine. A file is written to a temporary file and renamed;
one that does not read back as a compile of that key is compiled again and replaced.
"""

import base64
import copy
import ctypes
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from harness.errors import HarnessError, Unavailable
from harness.frameworks import engine_setup, native
from harness.machine.files import write_atomic

SUCCESS = 0
SONAMES = ("libnvrtc.so.13", "libnvrtc.so.12")
WHEEL_PATHS = ("cuda_nvrtc/lib/libnvrtc.so.12", "cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.13")

Program = ctypes.c_void_p  # nvrtcProgram
c_int, c_size_t, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p
SIGNATURES = {
    "nvrtcVersion": [ctypes.POINTER(c_int), ctypes.POINTER(c_int)],
    "nvrtcGetNumSupportedArchs": [ctypes.POINTER(c_int)],
    "nvrtcGetSupportedArchs": [ctypes.POINTER(c_int)],
    # prog, source, name, number of headers, headers, include names
    "nvrtcCreateProgram": [ctypes.POINTER(Program), c_char_p, c_char_p, c_int,
                           ctypes.POINTER(c_char_p), ctypes.POINTER(c_char_p)],
    "nvrtcDestroyProgram": [ctypes.POINTER(Program)],
    "nvrtcCompileProgram": [Program, c_int, ctypes.POINTER(c_char_p)],
    "nvrtcGetPTXSize": [Program, ctypes.POINTER(c_size_t)],
    "nvrtcGetPTX": [Program, ctypes.c_char_p],
    "nvrtcGetCUBINSize": [Program, ctypes.POINTER(c_size_t)],
    "nvrtcGetCUBIN": [Program, ctypes.c_char_p],
    "nvrtcGetProgramLogSize": [Program, ctypes.POINTER(c_size_t)],
    "nvrtcGetProgramLog": [Program, ctypes.c_char_p],
    "nvrtcAddNameExpression": [Program, c_char_p],
    "nvrtcGetLoweredName": [Program, c_char_p, ctypes.POINTER(c_char_p)],
    "nvrtcGetErrorString": [c_int],
}
RESTYPES = {"nvrtcGetErrorString": c_char_p}
CACHE = "nvrtc"  # the engine_setup.cache_dir kind compiles are kept in


class NvrtcError(RuntimeError):
    def __init__(self, function: str, status: int, message: str, log: str = ""):
        super().__init__(f"{function} failed: {message} (status {status})" + (f"\n{log}" if log else ""))
        self.function, self.status, self.log = function, status, log


@dataclass(frozen=True)
class Compiled:
    """One compiled program: PTX (a virtual arch, compute_XY) or a cubin (a real one, sm_XY)."""

    arch: str
    image: bytes  # PTX text or cubin bytes
    log: str  # the compiler's log (warnings; ptxas' resource lines with --ptxas-options=-v)
    lowered: dict  # name expression ("lenet_fused<float>") -> mangled kernel name

    def resources(self) -> dict:
        """ptxas' report per kernel: {mangled name: {"registers": r, "shared_bytes": s, ...}}."""
        return ptxas_resources(self.log)


def ptxas_resources(log: str) -> dict:
    """Parse `ptxas info : Function properties for NAME` / `Used R registers, ... S bytes smem`."""
    found: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line) or \
            re.search(r"Function properties for (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            row = found.setdefault(current, {})
            row["registers"] = int(m.group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            row["shared_bytes"] = int(smem.group(1)) if smem else 0
            cmem = re.findall(r"(\d+) bytes cmem\[(\d+)\]", line)
            row["constant_bytes"] = {int(bank): int(size) for size, bank in cmem}
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current:
            row = found.setdefault(current, {})
            row["stack_bytes"], row["spill_stores"], row["spill_loads"] = map(int, m.groups())
    return found


def candidates() -> list[tuple[str, str]]:
    """(path or soname, how it was found), in discovery order."""
    found = []
    if os.environ.get("LENET_NVRTC_LIBRARY"):
        found.append((os.environ["LENET_NVRTC_LIBRARY"], "LENET_NVRTC_LIBRARY"))
    found += [(path, "nvidia-cuda-nvrtc wheel") for path in native.wheel_libraries(WHEEL_PATHS)]
    return found + [(soname, "system") for soname in SONAMES]


class Nvrtc:
    """The loaded library: every function with argtypes and restype, statuses checked."""

    def __init__(self, path: str, how: str, lib: ctypes.CDLL):
        self.path, self.how, self.lib = path, how, lib
        for name, argtypes in SIGNATURES.items():
            fn = getattr(lib, name)  # AttributeError: a symbol this NVRTC lacks
            fn.argtypes, fn.restype = argtypes, RESTYPES.get(name, c_int)
        major, minor = c_int(), c_int()
        self.check("nvrtcVersion", ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)

    def check(self, name: str, *args: Any, log: str = "") -> None:
        status = getattr(self.lib, name)(*args)
        if status != SUCCESS:
            raise NvrtcError(name, status, self.lib.nvrtcGetErrorString(status).decode(), log)

    def supported_archs(self) -> list[int]:
        count = c_int()
        self.check("nvrtcGetNumSupportedArchs", ctypes.byref(count))
        archs = (c_int * count.value)()
        self.check("nvrtcGetSupportedArchs", archs)
        return list(archs)

    def compile(self, source: str, name: str, arch: str, options: Sequence[str] = (),
                name_expressions: Sequence[str] = ()) -> Compiled:
        """Compile `source` for `arch`: "compute_90" gives PTX, "sm_90" a cubin (ptxas ran); from the
        cache where the same compile was done before (module docstring), else by build() and kept.
        NvrtcError carries the compiler's log when the source does not compile."""
        if not re.fullmatch(r"(compute|sm)_\d+[a-z]?", arch):
            raise ValueError(f"arch: expected compute_XY (PTX) or sm_XY (cubin), found {arch!r}")
        path = self.cache_path(source, name, arch, options, name_expressions)
        kept = read_kept(path, arch, name_expressions)
        if kept is not None:
            return kept
        done = self.build(source, name, arch, options, name_expressions)
        keep(path, done)
        return done

    def cache_path(self, source: str, name: str, arch: str, options: Sequence[str],
                   name_expressions: Sequence[str]) -> Path:
        """The cache file of one compile: its key hashes everything the compiler's answer depends on."""
        library = Path(self.path)
        stat = os.stat(library) if library.is_file() else None  # a soname: its version says it
        parts = (source, name, arch, "\0".join(options), "\0".join(name_expressions), self.path,
                 "{}.{}".format(*self.version), f"{stat.st_size} {stat.st_mtime_ns}" if stat else "")
        key = hashlib.sha256("\0\0".join(parts).encode()).hexdigest()[:24]
        return engine_setup.cache_dir(CACHE) / f"{Path(name).stem}-{arch}-{key}.json"

    def build(self, source: str, name: str, arch: str, options: Sequence[str] = (),
              name_expressions: Sequence[str] = ()) -> Compiled:
        """The compile itself, by libnvrtc (compile() checked the arch)."""
        prog = Program()
        self.check("nvrtcCreateProgram", ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
        try:
            for expr in name_expressions:
                self.check("nvrtcAddNameExpression", prog, expr.encode())
            opts = [f"--gpu-architecture={arch}", *options]
            argv = (c_char_p * len(opts))(*[o.encode() for o in opts])
            status = self.lib.nvrtcCompileProgram(prog, len(opts), argv)
            log = self._log(prog)
            if status != SUCCESS:
                raise NvrtcError("nvrtcCompileProgram", status,
                                 self.lib.nvrtcGetErrorString(status).decode(), log)
            cubin = arch.startswith("sm_")
            size = c_size_t()
            self.check("nvrtcGetCUBINSize" if cubin else "nvrtcGetPTXSize", prog, ctypes.byref(size))
            image = ctypes.create_string_buffer(size.value)
            self.check("nvrtcGetCUBIN" if cubin else "nvrtcGetPTX", prog, image)
            lowered: dict[str, str] = {}
            for expr in name_expressions:
                out = c_char_p()
                self.check("nvrtcGetLoweredName", prog, expr.encode(), ctypes.byref(out))
                lowered[expr] = cast(bytes, out.value).decode()
            raw = image.raw[:size.value]
            return Compiled(arch, raw if cubin else raw.rstrip(b"\0"), log, lowered)
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _log(self, prog: Program) -> str:
        size = c_size_t()
        self.check("nvrtcGetProgramLogSize", prog, ctypes.byref(size))
        text = ctypes.create_string_buffer(max(size.value, 1))
        self.check("nvrtcGetProgramLog", prog, text)
        return text.value.decode(errors="replace").strip()


def read_kept(path: Path, arch: str, name_expressions: Sequence[str]) -> Compiled | None:
    """The compile kept in path, or None where there is none or the file is not one of this key's
    (a compile of another arch or other instances, a field missing or of another type)."""
    try:
        kept = json.loads(path.read_text())
        image = base64.b64decode(kept["image"], validate=True)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    lowered = kept.get("lowered")
    fields_ok = set(kept) == {"arch", "image", "log", "lowered"} and isinstance(kept["log"], str)
    if not fields_ok or kept["arch"] != arch:
        return None
    names_ok = isinstance(lowered, dict) and all(isinstance(v, str) for v in lowered.values())
    if not names_ok or list(lowered) != list(name_expressions):
        return None
    return Compiled(arch, image, kept["log"], lowered)


def keep(path: Path, done: Compiled) -> None:
    """done -> path, whole (written and renamed); a cache that cannot be written keeps nothing."""
    text = json.dumps({"arch": done.arch, "image": base64.b64encode(done.image).decode(), "log": done.log,
                       "lowered": done.lowered})
    try:
        write_atomic(path, text)
    except HarnessError:
        pass  # a read-only home: each process compiles again, as without a cache


def resources(lib: Nvrtc, source: str, name: str, arch: str, options: Sequence[str] = (),
              name_expressions: Sequence[str] = ()) -> dict:
    """{name expression: ptxas' registers, shared memory, spills} for a real arch (sm_XY)."""
    if not arch.startswith("sm_"):
        raise ValueError(f"arch: registers are known for a real arch (sm_XY) only, found {arch!r}")
    key = (lib.path, source, name, arch, tuple(options), tuple(name_expressions))
    if key not in _RESOURCES:  # one compile per process: doctor and gpu-explain read the same kernels
        done = lib.compile(source, name, arch, (*options, "--ptxas-options=-v"), name_expressions)
        found = done.resources()
        _RESOURCES[key] = {expr: found.get(mangled, {}) for expr, mangled in done.lowered.items()}
    return copy.deepcopy(_RESOURCES[key])


_RESOURCES: dict[tuple, dict] = {}  # resources' answers (about 3 s a real arch for every kernel)


_loaded: Nvrtc | None = None


def load() -> Nvrtc:
    """The first libnvrtc found (see module docstring), or Unavailable naming what was tried."""
    global _loaded
    if _loaded is None:
        _loaded = native.first_library(
            candidates(), Nvrtc, "libnvrtc",
            "Install it: pip install nvidia-cuda-nvrtc-cu12 (in the dev extra), or set LENET_NVRTC_LIBRARY",
            errors=(OSError, AttributeError, NvrtcError))
    return _loaded


def probe() -> dict:
    """For doctor: which libnvrtc, its version and the architectures it compiles for; or why none."""
    try:
        lib = load()
    except Unavailable as exc:
        return {"found": False, "reason": str(exc)}
    return {"found": True, "path": lib.path, "how": lib.how, "version": "{}.{}".format(*lib.version),
            "archs": lib.supported_archs()}
