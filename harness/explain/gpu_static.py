"""`python -m harness gpu-explain`: the hand-written CUDA kernels judged before a GPU is lent.

For every kernel of the `cuda` rung, per image: its multiply-adds, the bytes its threads load from
global memory, the blocks (SMs) one image can use, the busiest thread's multiply-adds and its
longest dependent chain (lenet_cuda.kernels.work, the kernels' work as their source does it), and
ptxas' registers, spills and shared memory per thread and block (NVRTC, for sm_90 by default). No
GPU is needed; DETAILS puts the measured kernel time beside each row where a `kernels` trace has it.
"""

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import Unavailable
from harness.explain import plumbing
from harness.machine import nvrtc

STUDY = "gpu_explain"
LEVEL = "cuda"
CTYPES = {"float32": "float", "float64": "double"}


def resources(arch: str) -> dict[str, dict]:
    """{template instance ("lenet_fused<float>"): ptxas' registers, spills, shared bytes}."""
    from lenet_cuda import kernels  # the level this module serves (imported here: SERVES)

    try:
        lib = nvrtc.load()
    except Unavailable as exc:
        raise Unavailable(f"gpu-explain needs NVRTC to read the kernels' registers: {exc}") from None
    found: dict[str, dict] = {}
    for text, filename, options, exprs in kernels.nvrtc_units(arch):
        found.update(nvrtc.resources(lib, text, filename, arch, options, exprs))
    return found


def rows(arch: str = "sm_90") -> list[dict[str, Any]]:
    """One row per kernel (a layers launch is a kernel of its own) and element type."""
    from lenet_cuda.explain import work as kernel_work  # the level this module serves (imported here: SERVES)

    use = resources(arch)
    out = []
    for order, work in enumerate(kernel_work.work()):
        stages = [asdict(s) for s in work.stages]
        for dtype, ctype in CTYPES.items():
            r = use.get(f"{work.kernel}<{ctype}>", {})
            out.append({
                "kind": STUDY, "implementation": LEVEL, "kernel": work.kernel, "part": work.part,
                "order": order,
                "variants": list(work.variants), "dtype": dtype, "arch": arch, "status": "ok",
                "blocks_per_image": work.blocks, "threads_per_block": work.threads,
                "macs": sum(s["macs"] for s in stages),
                "global_bytes": sum(s["reads"] for s in stages) * np.dtype(dtype).itemsize,
                "busiest_thread_macs": sum(s["per_thread"] for s in stages),
                "chain": sum(s["chain"] for s in stages),  # stages run one after another
                "registers": r.get("registers"),
                "spill_bytes": r.get("spill_stores", 0) + r.get("spill_loads", 0),
                "stack_bytes": r.get("stack_bytes"), "shared_bytes": r.get("shared_bytes"), "stages": stages})
    return out


def lines(found: list[dict[str, Any]]) -> list[str]:
    """The rows as printed on the terminal (float32)."""
    out = [f"{'kernel':<16} {'part':<17} {'blocks':>6} {'MACs':>8} {'global KB':>9} {'busiest':>7} "
           f"{'chain':>5} {'regs':>4} {'spills':>6} {'shared B':>8}"]
    for r in found:
        if r["dtype"] == "float32":
            out.append(f"{r['kernel']:<16} {r['part']:<17} {r['blocks_per_image']:>6} {r['macs']:>8,} "
                       f"{r['global_bytes'] / 1e3:>9.1f} {r['busiest_thread_macs']:>7} {r['chain']:>5} "
                       f"{r['registers']!s:>4} {r['spill_bytes']:>6} {r['shared_bytes']!s:>8}")
    return out


def write(found: list[dict[str, Any]], out: Path) -> Path:
    return plumbing.write(found, out, STUDY, "gpu")
