"""`python -m harness kernel-stages`: where the hand-written cluster kernel's time goes inside it,
on a GPU (lenet_cuda.explain.stages: clock64 stamps at each stage's end, within each block).
DETAILS puts the stages beside the kernels trace's time for the same kernel.
"""

from pathlib import Path
from typing import Any

from harness import registry
from harness.explain import plumbing

STUDY = "kernel_stages"
LEVEL, VARIANT, KERNEL = "cuda", "cluster", "lenet_cluster"


def row(weights: str, calls: int, dtype: str) -> dict[str, Any]:
    measured = registry.hook(LEVEL, "kernel_stages")(weights, calls, dtype)
    return {"kind": STUDY, "implementation": LEVEL, "variant": VARIANT, "kernel": KERNEL, "device": "gpu",
            "status": "ok", **measured}


def failed(dtype: str, reason: str) -> dict[str, Any]:
    return {"kind": STUDY, "implementation": LEVEL, "variant": VARIANT, "kernel": KERNEL, "device": "gpu",
            "dtype": dtype, "status": "failed", "reason": reason}


def lines(r: dict[str, Any]) -> list[str]:
    """The stages as printed on the terminal: block 0's cycles (and ns), the slowest block's."""
    clock = f" at {r['clock_khz'] / 1e6:.2f} GHz" if r.get("clock_khz") else ""
    out = [f"{KERNEL} on {r['gpu']} ({r['dtype']}, {r['calls']} calls; "
           f"cycles of each block's own SM clock{clock})",
           f"{'stage':<50} {'block 0':>9} {'ns':>7} {'slowest':>9}"]
    for s in r["stages"]:
        ns = f"{s['block0_ns']:.0f}" if s["block0_ns"] is not None else "-"
        out.append(f"{s['name']:<50} {s['block0_cycles']:>9.0f} {ns:>7} {s['slowest_block_cycles']:>9.0f}")
    total = f" ({r['block0_ns'] / 1e3:.2f} µs)" if r.get("block0_ns") is not None else ""
    out.append(f"{'block 0, entry to end':<50} {r['block0_cycles']:>9.0f}{total}")
    return out


def write(rows: list[dict[str, Any]], out: Path) -> Path:
    return plumbing.write(rows, out, STUDY, "gpu")
