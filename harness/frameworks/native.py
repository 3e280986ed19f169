"""Loading a native library through ctypes, the same way for every binding (cuDNN, cuBLAS,
cuBLASLt, oneDNN, NVRTC): the first candidate that loads and wraps, else Unavailable naming
every path tried and the fix (first_library); the copies of a library already mapped into
this process, which a binding tries before any other (loaded_in_process); and the copies the
NVIDIA wheels installed (wheel_libraries)."""

import ctypes
import importlib.util
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from harness.errors import Unavailable

T = TypeVar("T")


def loaded_in_process(prefix: str, maps: str = "/proc/self/maps") -> list[str]:
    """Paths of the libraries mapped into this process whose file name starts with `prefix`
    ("libcublas.so": not libcublasLt), first seen first."""
    found: list[str] = []
    try:
        lines = Path(maps).read_text().splitlines()
    except OSError:
        return found
    for line in lines:  # address perms offset dev inode [path]
        fields = line.split(maxsplit=5)
        path = fields[5].strip() if len(fields) == 6 else ""
        if Path(path).name.startswith(prefix) and path not in found:
            found.append(path)
    return found


def wheel_libraries(rels: Iterable[str]) -> list[str]:
    """Paths of the files `rels` (relative to the `nvidia` namespace package: "cu13/lib/...",
    "cublas/lib/...") that exist, folder by folder of the package, in the order of `rels`."""
    spec = importlib.util.find_spec("nvidia")
    return [str(Path(folder) / rel) for folder in (spec.submodule_search_locations or [] if spec else [])
            for rel in rels if (Path(folder) / rel).is_file()]


def first_library(candidates: Iterable[tuple[str, str]], wrap: Callable[[str, str, ctypes.CDLL], T],
                  what: str, fix: str,
                  errors: tuple[type[BaseException], ...] = (OSError, AttributeError)) -> T:
    """wrap(path, how, ctypes.CDLL(path)) of the first (path, how) in `candidates` that works."""
    tried = []
    for path, how in candidates:
        try:
            return wrap(path, how, ctypes.CDLL(path))
        except errors as exc:
            tried.append(f"{path} ({how}): {exc}".splitlines()[0])
    raise Unavailable(f"no usable {what} found; tried " + "; ".join(tried) + f". {fix}")
