"""The CPU's arithmetic peak: this core's multiply-adds per second measured by the C level's FMA probe,
and the C level's fused call split by layer (each stage timed inside C) against each layer's
arithmetic at that peak: where the time above the floor goes. Beside the peak, the core's read
bandwidth from its first- and second-level caches (the level's read probe, on a buffer half the
cache's size): a stage's own floor is the larger of its arithmetic at the peak and the bytes it
must read at the bandwidth of the level they come from (residence: the smallest cache that holds
the whole pass's reads, since each is read once an image), and the row names which bounds it. The
probe's rate is its best run over 2 MiB read in a row; beside it, each stage its reads bound is
timed as it reads, one burst of its own size after other reads (the level's burst probe, the
median of its runs), and the stages' floors at those rates (burst_floors) are said with the table.
`python -m harness arithmetic` writes one row (kind "arithmetic") to
OUT/arithmetic/<run-id>/; the report's "The CPU's floor" section and its arithmetic line read it
(harness.report.sections.cpu_floor).

    split(variant, calls, rounds, weights) -> dict   the row: the peak and the read bandwidths (the
                                                      medians of each round's probes), each stage's
                                                      median over rounds (and every round's),
                                                      floor_ns, share
    in_processes(variant, calls, rounds, weights, processes) -> dict
                                                     split in that many fresh processes: the median
                                                     process's row, every process's medians beside
    cache_sizes() -> {"L1": bytes, "L2": bytes}      this core's data caches (sysfs)
    residence(stage, pass_bytes, caches) -> str      the cache level a stage's reads come from
    stage_floor(stage, rate, bandwidth, caches, pass_bytes) -> dict   a stage's floor and its bound
    burst_floors(row) -> dict | None                 the stages' floors at the burst probe's rates
    lines(row) -> list[str]                          a Markdown table of it
    write(rows, out) -> Path                         the run folder

The peak and the read probes run in every round, just before its timings, and the row takes their
medians over the rounds: this core's boost moves its clock from moment to moment, and one probe's
best run can catch a faster moment than the stages ran at (on the Zen 5 host one read 144 G
multiply-adds/s where the others that minute read 132-135).
Every interval timed in C holds one clock read's cost (~20 ns, measured beside it as the empty
function between two clock reads): it is taken out of each stage's time and the C call's (clock_ns).
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
This module serves the C level alone: split imports the level's probes (lenet_c.explain.stages:
fma_peak, read_bandwidth, read_burst, layer_split) inside the function, as tests/test_layout.py allows
(SERVES), where a module that asks any level (doctor) goes through the registry's hooks.
"""

import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

from harness import DEFAULT_WEIGHTS, ROOT
from harness.errors import HarnessError
from harness.explain import plumbing
from harness.machine import host, load

LEVEL = "c"
STUDY = "arithmetic"
PAUSE_S = 0.25  # between rounds
# the smallest read the burst probe times: below it a read takes under ~80 ns, where the clock's own
# ~20 ns (taken out) and its jitter are too large a part
BURST_MIN = 16 << 10
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


def residence(stage: dict, pass_bytes: float, caches: dict) -> str:
    """The cache level a stage's reads come from: the smallest that holds them and everything the pass
    reads before it reads them again, an image later: all of the pass's reads (`pass_bytes`). Only the
    image is nearer: the caller writes it just before the call (`from_caller`). The second level for
    anything larger (LeNet's largest, fc1's 192 KB, fits every second-level cache we know). fc2's
    22 KiB fit a Zen 5 core's L1, but fc1's stream has taken them out by the time fc2 reads them:
    its rows forced into L1 took 90 ns against 150 ns where the pass leaves them."""
    needed = stage["bytes"] if stage.get("from_caller") else max(stage["bytes"], pass_bytes)
    return next((name for name, size in caches.items() if needed <= size), "L2")


def stage_floor(stage: dict, rate: float, bandwidth: dict, caches: dict,
                pass_bytes: float = 0.0) -> dict[str, Any]:
    """A stage's floor: its needed multiply-adds at the peak `rate`, or its bytes at the read bandwidth
    of the level they come from (residence), whichever is longer."""
    level = residence(stage, pass_bytes, caches)
    arithmetic_ns = stage["needed_macs"] / rate * 1e9
    memory_ns = stage["bytes"] / bandwidth[level]["bytes_per_s"] * 1e9
    return {"level": level, "arithmetic_ns": arithmetic_ns, "memory_ns": memory_ns,
            "stage_floor_ns": max(arithmetic_ns, memory_ns),
            "bound": "arithmetic" if arithmetic_ns >= memory_ns else f"{level} reads"}


def clock_cost(rounds: list[dict]) -> float:
    """The clock's own cost in each interval the level times (its call paths' "clock": an empty
    function between two clock reads, the median over rounds), taken out of the C call's time and
    each stage's; 0 for a level that does not time it."""
    found = [r["call_paths"]["clock"] for r in rounds if "clock" in r.get("call_paths", {})]
    return median(found) if found else 0.0


def pass_bytes(rounds: list[dict]) -> float:
    """What the pass reads per image (every stage's bytes, the mean over the rounds)."""
    return sum(s["bytes"] for r in rounds for s in r["stages"]) / len(rounds)


def burst_sizes(stages: list[dict], rate: float, bandwidth: dict, caches: dict) -> dict[str, int]:
    """{stage: its bytes} for the stages whose floor their reads from beyond the first level bound
    (one round's stages), at least BURST_MIN of them: the reads the burst probe times at their size."""
    passed = sum(s["bytes"] for s in stages)
    floors = {s["name"]: stage_floor(s, rate, bandwidth, caches, passed) for s in stages}
    return {s["name"]: int(s["bytes"]) for s in stages if s["bytes"] >= BURST_MIN
            and floors[s["name"]]["level"] != "L1" and floors[s["name"]]["bound"] != "arithmetic"}


def burst_of(name: str, bursts: list[dict]) -> dict[str, Any]:
    """{"burst": a stage's burst probe over the rounds (the median rate, the best, the runs)}; {} for a
    stage the probe did not time."""
    rates = [b[name] for b in bursts if name in b]
    return {"burst": {"bytes": rates[0]["bytes"], "runs": sum(r["runs"] for r in rates),
                      "bytes_per_s": median(r["bytes_per_s"] for r in rates),
                      "best_bytes_per_s": max(r["best_bytes_per_s"] for r in rates)}} if rates else {}


def stage_row(j: int, found: list[dict], bursts: list[dict], rate: float, bandwidth: dict, caches: dict,
              clock_ns: float, passed: float) -> dict[str, Any]:
    """Stage j over the rounds: its median less the clock's cost, its arithmetic at the peak `rate`,
    its own floor (stage_floor, the pass reading `passed` bytes) and its burst (burst_of)."""
    stage = found[0]["stages"][j]
    per_round = [f["stages"][j]["median_ns"] - clock_ns for f in found]
    if min(per_round) <= 0:
        raise HarnessError(f"arithmetic: stage {stage['name']} took no time once the clock's own "
                           f"{clock_ns:.0f} ns were taken out: {min(per_round):.0f} ns")
    floor_ns, time_ns = stage["macs"] / rate * 1e9, median(per_round)
    needs = {key: sum(f["stages"][j][key] for f in found) / len(found) for key in ("needed_macs", "bytes")}
    needs["from_caller"] = bool(stage.get("from_caller"))
    bound = stage_floor(needs, rate, bandwidth, caches, passed)
    return {"name": stage["name"], "macs": stage["macs"], **needs, "median_ns": time_ns,
            "rounds_ns": per_round, "floor_ns": floor_ns, "share": floor_ns / time_ns, **bound,
            "stage_share": bound["stage_floor_ns"] / time_ns, **burst_of(stage["name"], bursts)}


def split(variant: str = "fused", calls: int = 1000, rounds: int = 5,
          weights: str | Path = DEFAULT_WEIGHTS) -> dict[str, Any]:
    """The row: each stage's multiply-adds, its median time over rounds, that work at the measured
    peak (floor_ns) and floor_ns / time (share); the same for the whole untimed call."""
    from lenet_c.explain import stages as probes  # the level this module serves (imported here: SERVES)

    before = load.sample()
    caches = cache_sizes()
    halves = {level: size // 2 for level, size in caches.items()}  # each level probed half full
    found, bursts, peaks, reads = [], [], [], []
    for i in range(rounds):  # the probes beside each round's timings, at the clock speed it ran at
        time.sleep(PAUSE_S if i else 0)
        peaks.append(probes.fma_peak())
        reads.append(probes.read_bandwidth(halves))
        found.append(probes.layer_split(weights, variant, calls))
        bursts.append(probes.read_burst(
            burst_sizes(found[-1]["stages"], peaks[-1]["macs_per_s"], reads[-1], caches), 2 * caches["L1"]))
    machine_load = load.between(before, load.sample())
    peak = {**peaks[0], "macs_per_s": median(p["macs_per_s"] for p in peaks),
            "rounds": [p["macs_per_s"] for p in peaks]}
    bandwidth = {level: {**reads[0][level], "bytes_per_s": median(r[level]["bytes_per_s"] for r in reads),
                         "rounds": [r[level]["bytes_per_s"] for r in reads]} for level in reads[0]}
    rate = peak["macs_per_s"]
    clock_ns, passed = clock_cost(found), pass_bytes(found)
    stages = [stage_row(j, found, bursts, rate, bandwidth, caches, clock_ns, passed)
              for j in range(len(found[0]["stages"]))]
    macs = sum(s["macs"] for s in stages)
    floor_ns = macs / rate * 1e9
    stages_floor_ns = sum(s["stage_floor_ns"] for s in stages)
    call_rounds = [f["call_median_ns"] - clock_ns for f in found]
    call_ns = median(call_rounds)
    return {"kind": STUDY, "implementation": LEVEL, "variant": variant, "device": "cpu",
            "status": "ok", "path": found[0]["path"], "calls": calls, "rounds": rounds, "peak": peak,
            "caches": caches, "bandwidth": bandwidth, "pass_bytes": passed,
            "burst_after_bytes": 2 * caches["L1"],
            "stages": stages, "macs": macs, "floor_ns": floor_ns,
            "call_median_ns": call_ns, "call_rounds_ns": call_rounds, "clock_ns": clock_ns,
            **({"call_in_c": True, "ctypes_call_median_ns": median(f["ctypes_call_median_ns"] for f in found)}
               if found[0].get("call_in_c") else {}),
            "call_paths": {way: median(f["call_paths"][way] for f in found)
                           for way in found[0]["call_paths"]},
            **{key: median(f[key] for f in found) for key in ("predict_median_ns", "null_predict_median_ns")
               if key in found[0]},
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


def burst_floors(row: dict[str, Any]) -> dict[str, Any] | None:
    """The stages' floors with the burst-probed stages' reads at the median rate of one read of their
    size (each stage's `burst`) instead of the read probe's best run: {"stages": {name: floor_ns},
    "stages_floor_ns", "share"} (share: that sum over the C call). None where no stage has a burst."""
    timed = {s["name"]: max(s["arithmetic_ns"], s["bytes"] / s["burst"]["bytes_per_s"] * 1e9)
             for s in row["stages"] if "burst" in s}
    if not timed:
        return None
    total = sum(timed.get(s["name"], s["stage_floor_ns"]) for s in row["stages"])
    return {"stages": timed, "stages_floor_ns": total, "share": total / row["call_median_ns"]}


def burst_text(row: dict[str, Any]) -> str:
    """What the burst probe found, and the stages' floors at its rates; '' for a row without it."""
    found = burst_floors(row)
    if found is None:
        return ""
    rates = "; ".join(f"{s['name']}'s {size(s['bytes'])}: {s['burst']['bytes_per_s'] / 1e9:.0f} GB/s "
                      f"(its best run {s['burst']['best_bytes_per_s'] / 1e9:.0f} GB/s)"
                      for s in row["stages"] if "burst" in s)
    runs = max(s["burst"]["runs"] for s in row["stages"] if "burst" in s)
    return (f"The read bandwidth above is the probe's best run, which reads 2 MiB in a row. A stage reads "
            f"its weights once an image, in one burst between the pass's other reads: one read of a stage's "
            f"bytes after {size(row['burst_after_bytes'])} of other reads took a median of {rates} "
            f"({runs} runs over the rounds). At those rates the stages' floors would sum to "
            f"{found['stages_floor_ns'] / 1e3:.2f} µs, and the C call is {found['share']:.0%} of it.")


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
        resides = ("the cache level they come from: the smallest that holds all that the pass reads "
                   f"({size(row['pass_bytes'])}), since a stage reads its weights again an image later, "
                   "after all the others; the image, which the caller has just written, from the smallest "
                   "that holds it" if "pass_bytes" in row else "the cache level that holds them")
        clock = (f" Each time is the interval's less the clock's own cost ({row['clock_ns']:.0f} ns: an "
                 "empty function between two clock reads)." if row.get("clock_ns") else "")
        out += ["", "A stage's floor is the longer of its multiply-adds at the peak and its reads (its "
                    f"weights and biases, the image for the input stage) at the bandwidth of {resides}; the "
                    "dense layers skip the rows of their zero inputs (ReLU's), so their floor counts only "
                    "the rows and multiply-adds of the nonzero ones (the mean over the calls)." + clock]
        burst = burst_text(row)
        out += ["", burst] if burst else []
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
