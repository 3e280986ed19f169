"""The CPU's arithmetic peak: this core's multiply-adds per second measured by the C level's FMA probe,
and the C level's fused call split by layer (each stage timed inside C) against each layer's
arithmetic at that peak: where the time above the floor goes. Beside the peak, the core's read
bandwidth from its first- and second-level caches (the level's read probe, on a buffer half the
cache's size): a stage's own floor is the larger of its arithmetic at the peak and the bytes it
must read at the bandwidth of the level they live in (the smallest cache that holds them), and the
row names which bounds it. `python -m harness arithmetic` writes one row (kind "arithmetic") to
OUT/arithmetic/<run-id>/; the report's "The CPU's floor" section and its arithmetic line read it
(harness.report.sections.cpu_floor).

    split(variant, calls, rounds, weights) -> dict   the row: the peak, each stage's median over
                                                      rounds (and every round's), floor_ns, share
    in_processes(variant, calls, rounds, weights, processes) -> dict
                                                     split in that many fresh processes: the median
                                                     process's row, every process's medians beside
    cache_sizes() -> {"L1": bytes, "L2": bytes}      this core's data caches (sysfs)
    stage_floor(stage, rate, bandwidth, caches) -> dict   a stage's floor and what bounds it
    lines(row) -> list[str]                          a Markdown table of it
    write(rows, out) -> Path                         the run folder

A stage's `share` is floor_ns / median_ns: 1.0 is the arithmetic limit; its `stage_share` is
stage_floor_ns / median_ns, and the row's `stages_share` the sum of the stages' floors over the C
call. Each round times `calls`
single-image passes and keeps each stage's median; the row's median is the median over rounds,
the rounds PAUSE_S apart (this host's speed moves in phases of seconds: rounds spread over more
than a second). The machine's load over the whole measurement is read as the studies read it
(harness.machine.load): the row is `contended`, with the reason, when others used the CPU.
Each process draws its own address layout (ASLR), and the C call's time moves with the draw (about
2.8 or 3.3 µs for conv1 on the Zen 4 host: lenet_c/layout.py), so the command measures in several
fresh processes, one after another, and says how far apart they were.
The level is reached through its registry hooks ("fma_peak", "layer_split"), as doctor reaches it.
"""

import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.errors import HarnessError
from harness.explain import plumbing
from harness.machine import host, load

LEVEL = "c"
STUDY = "arithmetic"
PAUSE_S = 0.25  # between rounds
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
# where sysfs does not list a cache: the smallest first-level data and second-level caches of the x86
# cores this project has met (Zen 3: 32 KiB, 512 KiB), so a stage is not put in a level it overflows
ASSUMED = {"L1": 32 << 10, "L2": 512 << 10}
CHILD = ("import json, sys; from harness.explain import c_layers; "
         "print(json.dumps(c_layers.split(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])))")


def cache_sizes(root: Path = CACHES) -> dict[str, int]:
    """{"L1": bytes, "L2": bytes}: cpu0's level-1 data and level-2 caches as sysfs lists them,
    ASSUMED where it does not."""
    found = dict(ASSUMED)
    for index in sorted(root.glob("index*")):
        try:
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            kib = host.size_kib((index / "size").read_text())
        except OSError:
            continue
        if f"L{level}" in found and kind in ("Data", "Unified") and kib:
            found[f"L{level}"] = kib << 10
    return found


def stage_floor(stage: dict, rate: float, bandwidth: dict, caches: dict) -> dict[str, Any]:
    """A stage's floor: its needed multiply-adds at the peak `rate`, or its bytes at the read bandwidth
    of the smallest cache level that holds them (the second level for anything larger: LeNet's
    largest, fc1's 192 KB, fits every second-level cache we know), whichever is longer."""
    level = next((name for name, size in caches.items() if stage["bytes"] <= size), "L2")
    arithmetic_ns = stage["needed_macs"] / rate * 1e9
    memory_ns = stage["bytes"] / bandwidth[level]["bytes_per_s"] * 1e9
    return {"level": level, "arithmetic_ns": arithmetic_ns, "memory_ns": memory_ns,
            "stage_floor_ns": max(arithmetic_ns, memory_ns),
            "bound": "arithmetic" if arithmetic_ns >= memory_ns else f"{level} reads"}


def split(variant: str = "fused", calls: int = 1000, rounds: int = 5,
          weights: str | Path = DEFAULT_WEIGHTS) -> dict[str, Any]:
    """The row: each stage's multiply-adds, its median time over rounds, that work at the measured
    peak (floor_ns) and floor_ns / time (share); the same for the whole untimed call."""
    before = load.sample()
    peak = registry.hook(LEVEL, "fma_peak")()
    caches = cache_sizes()
    bandwidth = registry.hook(LEVEL, "read_bandwidth")({level: size // 2 for level, size in caches.items()})
    found = []
    for i in range(rounds):
        time.sleep(PAUSE_S if i else 0)
        found.append(registry.hook(LEVEL, "layer_split")(weights, variant, calls))
    machine_load = load.between(before, load.sample())
    rate = peak["macs_per_s"]
    stages = []
    for j, stage in enumerate(found[0]["stages"]):
        per_round = [f["stages"][j]["median_ns"] for f in found]
        floor_ns = stage["macs"] / rate * 1e9
        time_ns = median(per_round)
        needs = {key: sum(f["stages"][j][key] for f in found) / rounds for key in ("needed_macs", "bytes")}
        bound = stage_floor(needs, rate, bandwidth, caches)
        stages.append({"name": stage["name"], "macs": stage["macs"], **needs, "median_ns": time_ns,
                       "rounds_ns": per_round, "floor_ns": floor_ns,
                       "share": floor_ns / time_ns if time_ns else None, **bound,
                       "stage_share": bound["stage_floor_ns"] / time_ns if time_ns else None})
    macs = sum(s["macs"] for s in stages)
    floor_ns = macs / rate * 1e9
    stages_floor_ns = sum(s["stage_floor_ns"] for s in stages)
    call_rounds = [f["call_median_ns"] for f in found]
    call_ns = median(call_rounds)
    return {"kind": STUDY, "implementation": LEVEL, "variant": variant, "device": "cpu",
            "status": "ok", "path": found[0]["path"], "calls": calls, "rounds": rounds, "peak": peak,
            "caches": caches, "bandwidth": bandwidth,
            "stages": stages, "macs": macs, "floor_ns": floor_ns,
            "call_median_ns": call_ns, "call_rounds_ns": call_rounds,
            **({"call_in_c": True, "ctypes_call_median_ns": median(f["ctypes_call_median_ns"] for f in found)}
               if found[0].get("call_in_c") else {}),
            "call_paths": {way: median(f["call_paths"][way] for f in found)
                           for way in found[0]["call_paths"]},
            "share": floor_ns / call_ns, "stages_floor_ns": stages_floor_ns,
            "stages_share": stages_floor_ns / call_ns, "load": machine_load,
            "contended": load.contended(machine_load)}


def in_processes(variant: str = "fused", calls: int = 1000, rounds: int = 5,
                 weights: str | Path = DEFAULT_WEIGHTS, processes: int = 3) -> dict[str, Any]:
    """split() in `processes` fresh interpreters, one after another: the row of the process whose C
    call was the median, with every process's call and stage medians (and contention) beside it."""
    found = []
    for _ in range(processes):
        done = subprocess.run([sys.executable, "-c", CHILD, variant, str(calls), str(rounds), str(weights)],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise HarnessError(f"arithmetic: the measuring process failed: {last}")
        found.append(json.loads(done.stdout.strip().splitlines()[-1]))
    found.sort(key=lambda r: r["call_median_ns"])
    row = dict(found[len(found) // 2])
    row["processes"] = [{"call_median_ns": r["call_median_ns"], "contended": r["contended"],
                         "stages_ns": {s["name"]: s["median_ns"] for s in r["stages"]}} for r in found]
    row["contended"] = "; ".join(r["contended"] for r in found if r["contended"]) or None
    return row


def size(nbytes: float) -> str:
    return f"{nbytes / 1024:.1f} KiB" if nbytes >= 1024 else f"{nbytes:.0f} B"


def bandwidth_text(row: dict[str, Any]) -> str:
    """'reads 190.2 GB/s from L1 (a 16.0 KiB buffer), 60.1 GB/s from L2 (256.0 KiB)', or '' for a
    row measured before the read probe existed."""
    found = row.get("bandwidth") or {}
    return ", ".join(f"{b['bytes_per_s'] / 1e9:.1f} GB/s from {level} (a {size(b['bytes'])} buffer)"
                     for level, b in found.items())


def table_line(name: str, macs: int, median_ns: float, floor_ns: float, share: str,
               floors: tuple[str, float, str, float] | None) -> str:
    """One row of the stage table; floors: (reads, floor_ns, bound, of floor) where the row has them."""
    line = f"| {name} | {macs:,} | {median_ns / 1e3:.2f} µs | {floor_ns / 1e3:.2f} µs | {share} |"
    if floors is None:
        return line
    reads, stage_floor_ns, bound, of_floor = floors
    return line + f" {reads} | {stage_floor_ns / 1e3:.2f} µs ({bound}) | {of_floor:.0%} |"


def lines(row: dict[str, Any]) -> list[str]:
    """The stage table: each stage's time beside its multiply-adds at the peak (`share`) and, where the
    row has the read probe's bandwidth, beside its own floor (arithmetic or reads, `of floor`)."""
    peak = row["peak"]
    rate = f"{peak['macs_per_s'] / 1e9:.1f} G multiply-adds/s measured ({peak['isa']}, {peak['lanes']} lanes)"
    label = f"{LEVEL}/{row['variant']} ({row['path']} path)"
    reads = bandwidth_text(row)
    memory = "stage_floor_ns" in row["stages"][0]
    out = [f"{label}, batch 1, {row['rounds']} rounds of {row['calls']} calls; peak {rate}"
           + (f"; reads {reads}" if reads else ""), "",
           "| stage | multiply-adds | median | at the peak | share |"
           + (" reads (from) | floor (bound) | of floor |" if memory else ""),
           "| --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |" if memory else "")]
    for s in row["stages"]:
        share = f"{s['share']:.0%}" if s["share"] is not None and s["macs"] else "–"
        floors = (f"{size(s['bytes'])} ({s['level']})", s["stage_floor_ns"], s["bound"],
                  s["stage_share"]) if memory else None
        out.append(table_line(s["name"], s["macs"], s["median_ns"], s["floor_ns"], share, floors))
    floors = (size(sum(s["bytes"] for s in row["stages"])), row["stages_floor_ns"], "the stages' sum",
              row["stages_share"]) if memory else None
    out.append(table_line("the C call (untimed)", row["macs"], row["call_median_ns"], row["floor_ns"],
                          f"{row['share']:.0%}", floors))
    if memory:
        out += ["", "A stage's floor is the longer of its multiply-adds at the peak and its reads (its "
                    "weights and biases, the image for the input stage) at the bandwidth of the cache level "
                    "that holds them; the dense layers skip the rows of their zero inputs (ReLU's), so their "
                    "floor counts only the rows and multiply-adds of the nonzero ones (the mean over the "
                    "calls)."]
    over = [s["name"] for s in row["stages"] if s["share"] is not None and s["macs"] and s["share"] > 1]
    if over:
        out += ["", f"A share over 100% ({', '.join(over)}) is not a stage beating the hardware: the peak is "
                    "itself measured, by a probe of FMAs alone on registers, the best of "
                    f"{peak.get('runs', 5)} short runs at "
                    "another moment (another clock speed), and misses what lets a stage run faster than "
                    "that run did (a higher boost clock while the stage ran); the stage's time is a median "
                    "of short intervals, each read by a clock of tens of nanoseconds' resolution. Read such "
                    "a stage as at the peak, within these two measurements' error."]
    return out


def write(rows: list[dict[str, Any]], out: Path) -> Path:
    return plumbing.write(rows, out, STUDY, "cpu")
