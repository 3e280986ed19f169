"""`python -m harness kernel-stages`: where the hand-written cluster kernel's time goes inside it,
on a GPU (lenet_cuda.explain.stages: clock64 stamps at each stage's end, within each block).
DETAILS puts the stages beside the kernels trace's time for the same kernel.

A row per resident variant and dtype (kind "resident_stages"): its call attributed, every
microsecond: the resident kernel's compute from its stamps, the C host side's stamps (pairs
written, answer waited for, answer copied) and Python's clock around predict.
"""

from pathlib import Path
from typing import Any

from harness.explain import plumbing

STUDY = "kernel_stages"
LEVEL, VARIANT, KERNEL = "cuda", "cluster", "lenet_cluster"
RESIDENT = "resident_stages"  # the resident calls' rows (kind): their variants and kernels
RESIDENT_KERNELS = {"resident": "lenet_resident", "resident_rows": "lenet_resident_rows"}


def row(weights: str, calls: int, dtype: str) -> dict[str, Any]:
    from lenet_cuda.explain import stages  # the level this module serves (imported here: SERVES)

    measured = stages.measure(weights, calls, dtype)
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


def resident_row(weights: str, calls: int, dtype: str, variant: str) -> dict[str, Any]:
    from lenet_cuda.explain import stages  # the level this module serves (imported here: SERVES)

    measured = stages.measure_resident(weights, calls, dtype, variant)
    return {"kind": RESIDENT, "implementation": LEVEL, "variant": variant,
            "kernel": RESIDENT_KERNELS[variant], "device": "gpu", "status": "ok", **measured}


def resident_failed(dtype: str, variant: str, reason: str) -> dict[str, Any]:
    return {"kind": RESIDENT, "implementation": LEVEL, "variant": variant,
            "kernel": RESIDENT_KERNELS[variant], "device": "gpu", "dtype": dtype, "status": "failed",
            "reason": reason}


def resident_lines(r: dict[str, Any]) -> list[str]:
    """The resident call, every part of it (µs, medians over calls), then the kernel's stages."""
    def us(ns: float | None) -> str:
        return "-" if ns is None else f"{ns / 1e3:.2f}"

    out = [f"cuda/{r['variant']}'s call ({r['dtype']}, {r['calls']} calls, "
           f"{r.get('launched_calls', 0)} with a launch, {r.get('fallback_calls', 0)} on the launched path)"]
    call = r.get("call")
    if call:
        out += [f"  {p['name']:<76} {us(p['ns']):>7} µs" for p in call["parts"]]
        out.append(f"  {'the call (median)':<76} {us(call['call_ns']):>7} µs; the medians leave "
                   f"{us(call['unattributed_ns'])} µs")
        if call.get("compute_ns") is not None:
            out.append(f"  of the wait: the kernel's compute {us(call['compute_ns'])} µs, the rest (bus both "
                       f"ways, polls) {us(call['wait_less_compute_ns'])} µs")
    out += [f"  kernel {s['name']:<69} {s['block0_cycles']:>7.0f} cycles" for s in r["stages"]]
    return out


def write(rows: list[dict[str, Any]], out: Path) -> Path:
    return plumbing.write(rows, out, STUDY, "gpu")
