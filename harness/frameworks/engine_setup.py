"""What the inference-engine and hand-written CPU levels (ONNX Runtime, OpenVINO, Numba) share with
the harness: the thread counts of its thread rule (harness.machine.procenv), read from the
environment its worker set, and where the exported models are cached."""

import os
from pathlib import Path


def threads() -> tuple[int, int]:
    """(intra-op, inter-op) threads: OMP_NUM_THREADS and TF_NUM_INTEROP_THREADS, 1 where unset
    (an engine's own default is every core, which breaks the rule on a shared machine)."""
    intra = int(os.environ.get("OMP_NUM_THREADS") or 1)
    inter = int(os.environ.get("TF_NUM_INTEROP_THREADS") or 1)
    return max(1, intra), max(1, inter)


def cache_dir(kind: str) -> Path:
    """$LENET_CACHE_DIR/kind, else $XDG_CACHE_HOME/lenet-levels/kind (~/.cache/...): outside the
    checkout, so nothing derived from the weights is ever committed."""
    base = os.environ.get("LENET_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "lenet-levels")
    return Path(base) / kind
