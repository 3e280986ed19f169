"""What the inference-engine and hand-written CPU levels (ONNX Runtime, OpenVINO, Numba) share with
the harness: the thread counts of its thread rule (harness.machine.procenv), read from the
environment its worker set, and where the exported models and compiled libraries are cached (a fresh,
empty cache for the bill's worker: fresh_cache)."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def threads() -> tuple[int, int]:
    """(intra-op, inter-op) threads: OMP_NUM_THREADS and TF_NUM_INTEROP_THREADS, 1 where unset
    (an engine's own default is every core, which breaks the rule on a shared machine)."""
    intra = int(os.environ.get("OMP_NUM_THREADS") or 1)
    inter = int(os.environ.get("TF_NUM_INTEROP_THREADS") or 1)
    return max(1, intra), max(1, inter)


FRESH: dict[str, Path] = {}  # kind -> the fresh folder fresh_cache lends it for now


def cache_dir(kind: str) -> Path:
    """$LENET_CACHE_DIR/kind, else $XDG_CACHE_HOME/lenet-levels/kind (~/.cache/...): outside the
    checkout, so nothing derived from the weights is ever committed. Inside fresh_cache(kind): its
    fresh folder."""
    if kind in FRESH:
        return FRESH[kind]
    base = os.environ.get("LENET_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "lenet-levels")
    return Path(base) / kind


@contextmanager
def fresh_cache(kind: str) -> Iterator[Path]:
    """A fresh, empty cache folder for `kind` while the block runs, removed after: the bill's worker
    builds a compiling level in one (registry's compile_cache), so the start-up it reads includes
    the compiler's run. What the block loaded stays loaded (a library mapped outlives its file)."""
    folder = Path(tempfile.mkdtemp(prefix=f"lenet-{kind}-fresh-"))
    FRESH[kind] = folder
    try:
        yield folder
    finally:
        FRESH.pop(kind, None)
        shutil.rmtree(folder, ignore_errors=True)
