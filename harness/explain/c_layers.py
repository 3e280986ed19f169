"""The hand-written C level's fused call split by layer (each stage timed inside C) against each
layer's arithmetic at this core's multiply-add peak, measured by the level's FMA probe: where the
time above the arithmetic floor goes.

    python -m harness.explain.c_layers [--variant fused|portable] [--calls N] [--json FILE]

    split(variant, calls, weights) -> dict   the level's stages, each with floor_ns and share (of
                                             its time that is arithmetic at the peak), and the peak
    lines(result) -> list[str]               a Markdown table of it
The level is reached through its registry hooks ("fma_peak", "layer_split"), as doctor reaches it.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness import DEFAULT_WEIGHTS, registry
from harness.errors import HarnessError

LEVEL = "c"


def split(variant: str = "fused", calls: int = 2000, weights: str | Path = DEFAULT_WEIGHTS) -> dict[str, Any]:
    """Each stage's median time, its multiply-adds, their time at the measured peak (floor_ns) and
    floor_ns / time (share: 1.0 is the arithmetic limit); the same for the whole pass."""
    peak = registry.hook(LEVEL, "fma_peak")()
    found = registry.hook(LEVEL, "layer_split")(weights, variant, calls)
    rate = peak["macs_per_s"]
    for stage in found["stages"]:
        stage["floor_ns"] = stage["macs"] / rate * 1e9
        stage["share"] = stage["floor_ns"] / stage["median_ns"] if stage["median_ns"] else None
    macs = sum(stage["macs"] for stage in found["stages"])
    found.update(variant=variant, peak=peak, macs=macs, floor_ns=macs / rate * 1e9,
                 share=macs / rate * 1e9 / found["call_median_ns"])
    return found


def lines(result: dict[str, Any]) -> list[str]:
    peak = result["peak"]
    rate = f"{peak['macs_per_s'] / 1e9:.1f} G multiply-adds/s measured ({peak['isa']}, {peak['lanes']} lanes)"
    label = f"{LEVEL}/{result['variant']} ({result['path']} path)"
    out = [f"{label}, batch 1, {result['calls']} calls; peak {rate}",
           "", "| stage | multiply-adds | median | at the peak | share |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for s in result["stages"]:
        share = f"{s['share']:.0%}" if s["share"] is not None and s["macs"] else "–"
        out.append(f"| {s['name']} | {s['macs']:,} | {s['median_ns'] / 1e3:.2f} µs | "
                   f"{s['floor_ns'] / 1e3:.2f} µs | {share} |")
    out.append(f"| the C call (untimed) | {result['macs']:,} | {result['call_median_ns'] / 1e3:.2f} µs | "
               f"{result['floor_ns'] / 1e3:.2f} µs | {result['share']:.0%} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.explain.c_layers",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--variant", default="fused", choices=("fused", "portable"))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="also write the result as JSON to this file")
    args = parser.parse_args(argv)
    try:
        result = split(args.variant, args.calls)
    except HarnessError as exc:  # no compiler here, above all: the reason and the fix
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
