"""Loading a native library through ctypes, the same way for every binding (cuDNN, cuBLAS,
cuBLASLt, oneDNN, NVRTC): the first candidate that loads and wraps, else Unavailable naming
every path tried and the fix."""

import ctypes

from harness.errors import Unavailable


def first_library(candidates, wrap, what: str, fix: str, errors=(OSError, AttributeError)):
    """wrap(path, how, ctypes.CDLL(path)) of the first (path, how) in `candidates` that works."""
    tried = []
    for path, how in candidates:
        try:
            return wrap(path, how, ctypes.CDLL(path))
        except errors as exc:
            tried.append(f"{path} ({how}): {exc}".splitlines()[0])
    raise Unavailable(f"no usable {what} found; tried " + "; ".join(tried) + f". {fix}")
