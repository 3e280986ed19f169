"""The GPU's floor in the report: the `gpu_floor` probes (harness.explain.gpu_probes), each GPU target's
floor computed from them, the targets of the hand-written and cuDNN rungs judged (absolute, never a
ratio to another level), and every GPU call at batch 1 as a multiple of the floor of a call.

    floor_row(runs, machine) -> row | None     the newest gpu_floor row of that machine
    floors(row) -> {name: Floor}              each target's floor, from the probes
    judged(frame, runs, machine, row) -> [Target]   the GPU's targets, measured and judged
    target_lines(frame, runs, machine) -> [str]     the findings' sentences
    section(frame, runs) -> [str]             DETAILS' section
"""

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from harness import registry
from harness.explain import gpu_probes
from harness.report.claims.rundata import study_rows
from harness.report.markup import words
from harness.report.markup.style import ok_cells
from harness.report.markup.tables import compact, table
from harness.report.sections import gpu_section

TITLE = "## The GPU's floor (`python -m harness gpu-floor`)"
SENTENCES = gpu_section.SENTENCES
CLUSTER_SMS = 8  # the hand-written kernels give one image a cluster of 8 blocks on 8 SMs
# lenet_cluster's cluster barriers on its critical path: all blocks running, then 0|1, 1|2, 2|3, 3|4
# (lenet_cuda/explain/stages.py's STAGES)
CLUSTER_BARRIERS = 5
BATCH = gpu_section.BATCH  # the large batch the kernels trace profiles
# the model's multiply-adds per image, from its layer shapes (the report's arithmetic line reads it too)
MACS = 28 * 28 * 6 * 5 * 5 * 1 + 10 * 10 * 16 * 5 * 5 * 6 + 400 * 120 + 120 * 84 + 84 * 10
COPY_SHARE_GOAL = 0.75  # batch 512 from a host array: at least this share of the measured copy rate


@dataclass(frozen=True)
class Floor:
    value: float  # ns per call, or images per second where rate
    how: str  # how it is computed from the probes, in words
    rate: bool = False  # images/s (higher is better) rather than ns


@dataclass(frozen=True)
class Target:
    what: str
    goal: float  # ns, or images/s where rate
    achieved: float | None
    source: str  # where the measured number comes from
    floor: Floor | None
    rate: bool = False
    stretch: float | None = None

    def met(self) -> bool | None:
        if self.achieved is None:
            return None
        return self.achieved >= self.goal if self.rate else self.achieved <= self.goal


def floor_row(runs: Sequence[dict], machine: str) -> dict | None:
    rows = [row for row in study_rows(runs, gpu_probes.STUDY) if row["machine"] == machine]
    return rows[-1] if rows else None


def positive(value: object, what: str) -> float:
    """A probe's number: finite and positive, else the row is broken (never clipped)."""
    if not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ValueError(f"{what} must be a finite positive number, found {value!r}")
    return float(value)


def floors(row: dict) -> dict[str, Floor]:
    """Each target's floor from the probes (those the row has)."""
    p = row["probes"]
    out: dict[str, Floor] = {}
    sm = positive(p["fma_one_sm"]["per_s"], "gpu_floor row: fma_one_sm") if "fma_one_sm" in p else None
    every = positive(p["fma_all"]["per_s"], "gpu_floor row: fma_all") if "fma_all" in p else None
    arithmetic_cluster = MACS / (CLUSTER_SMS * sm) * 1e9 if sm else None
    if "bus_round_trip" in p and every:
        rtt = positive(p["bus_round_trip"]["median_ns"], "gpu_floor row: bus_round_trip")
        out["call"] = Floor(rtt + MACS / every * 1e9, "one bus round trip from Python (host store, a "
                            "resident kernel's load and store, host load) + the arithmetic at every SM's "
                            "peak")
    if arithmetic_cluster is not None:
        barrier = (positive(p["cluster_barrier"]["median_ns"], "gpu_floor row: cluster_barrier")
                   if "cluster_barrier" in p else 0.0)
        out["kernel"] = Floor(arithmetic_cluster + CLUSTER_BARRIERS * barrier,
                              f"the arithmetic on {CLUSTER_SMS} SMs at one SM's measured peak"
                              + (f" + {CLUSTER_BARRIERS} cluster barriers" if barrier else ""))
        out["resident"] = Floor(out["kernel"].value, out["kernel"].how)
    if "h2d_1.6MB" in p:
        copy_bytes = positive(p["h2d_1.6MB"]["bytes_per_s"], "gpu_floor row: h2d_1.6MB")
        copy_rate = copy_bytes / gpu_probes.IMAGE_BYTES
        out["batch_host"] = Floor(copy_rate, "the pinned host-to-device copy's rate at 1.6 MB, in images",
                                  True)
    if every:
        out["batch_device"] = Floor(every / MACS, "every SM's multiply-add peak over one image's "
                                    f"{MACS:,} multiply-adds", True)
    if "empty_graph" in p:
        graph = positive(p["empty_graph"]["median_ns"], "gpu_floor row: empty_graph")
        out["library"] = Floor(graph + (MACS / every * 1e9 if every else 0.0),
                               "an empty CUDA graph's launch and wait + the arithmetic at every SM's peak")
    return out


def launched_kernel_ns(rows: list[dict], machine: str) -> tuple[float, str] | None:
    """The fastest hand-written kernel of a launched call at batch 1 in the kernels trace."""
    found = [(op["ns_per_call"], f"{op['name']} ({r['implementation']}/{r['variant']})") for r in rows
             if r["machine"] == machine and r["implementation"] in gpu_section.hand_written()
             and r.get("batch", 1) == 1
             and not gpu_section.resident(r) for op in [gpu_section.own_kernel(r)] if op is not None]
    return min(found) if found else None


def batch_rates(rows: list[dict], machine: str) -> tuple[tuple[float, str] | None, tuple[float, str] | None]:
    """At BATCH images a call (kernels trace): the fastest hand-written call from a host array
    (host time), and the fastest hand-written kernel reading its input from device memory (a variant
    whose call copies the images in first: its kernel's own time is the device-resident rate)."""
    hand = [r for r in rows if r["machine"] == machine and r["implementation"] in gpu_section.hand_written()
            and r.get("batch", 1) == BATCH]

    def ns(r: dict, what: str, value: object) -> float:
        return positive(value, f"kernels row {r['implementation']}/{r['variant']} (batch {BATCH}): {what}")

    def label(r: dict) -> str:
        return f"{r['implementation']}/{r['variant']}"

    host = [(BATCH * 1e9 / ns(r, "host_ns_per_call", r["host_ns_per_call"]), label(r)) for r in hand]
    device = [(BATCH * 1e9 / ns(r, op["name"], op["ns_per_call"]), f"{op['name']} ({label(r)})")
              for r in hand if gpu_section.copy_share(r)[0] > 0
              for op in [gpu_section.own_kernel(r)] if op is not None]
    return (max(host) if host else None), (max(device) if device else None)


def judged(frame: pd.DataFrame, runs: Sequence[dict], machine: str, row: dict | None) -> list[Target]:
    """The GPU's targets on that machine (the hand-written rung's and the raw library's, the project's
    goals): measured (None where nothing measured it) and each floor."""
    f = floors(row) if row else {}
    rows = study_rows(runs, "kernels")
    stages = next((r for r in study_rows(runs, "kernel_stages") if r["machine"] == machine
                   and r["dtype"] == "float32"), None)
    out = []
    hand = gpu_section.fastest_hand_written(frame, "api_levels", machine)
    out.append(Target(f"fastest {' or '.join(gpu_section.hand_written())} call, batch 1, end to end", 8_000,
                      None if hand is None else hand["median_ms"] * 1e6,
                      "api_levels" + ("" if hand is None else f", {hand['label']}"), f.get("call"),
                      stretch=6_000))
    kernel = launched_kernel_ns(rows, machine)
    out.append(Target("the hand-written kernel, launched, batch 1", 4_000, kernel[0] if kernel else None,
                      "kernels trace" + (f", {kernel[1]}" if kernel else ""), f.get("kernel")))
    stamped = next((run["run_id"] for run in runs if run["study"] == "kernel_stages"
                    and run["machine"] == machine), None)
    out.append(Target("resident compute per image", 2_500, gpu_section.resident_compute_ns(stages),
                      "kernel-stages, block 0 after the weights' loads"
                      + (f", run {stamped} (lenet_cluster's stages)" if stamped else ""), f.get("resident")))
    host, device = batch_rates(rows, machine)
    goal_host = 8e6
    if "batch_host" in f:
        goal_host = max(goal_host, COPY_SHARE_GOAL * f["batch_host"].value)
    out.append(Target(f"batch {BATCH} from a host array (8 M images/s, or {COPY_SHARE_GOAL:.0%} of the "
                      "measured copy's rate where that is more)", goal_host, host[0] if host else None,
                      "kernels trace, host time" + (f", {host[1]}" if host else ""), f.get("batch_host"),
                      rate=True))
    out.append(Target(f"batch {BATCH}, input on the device", 50e6, device[0] if device else None,
                      "kernels trace, the kernel's own time" + (f", {device[1]}" if device else ""),
                      f.get("batch_device"), rate=True))
    raw = registry.raw_library("gpu")
    library = gpu_section.fastest_call(frame, "api_levels", machine, [raw] if raw else [])
    out.append(Target(f"best {registry.short(raw) if raw else 'raw library'} call, batch 1", 30_000,
                      None if library is None else library["median_ms"] * 1e6,
                      "api_levels" + ("" if library is None else f", {library['label']}"), f.get("library")))
    return out


def amount(value: float, rate: bool) -> str:
    return words.FILTERS["amount"](value, rate)


def verdict(t: Target) -> str:
    """'met (1 µs under, stretch met)', 'missed by 3.9 µs (2x the goal)', 'missed (6.2x short)'."""
    measured = t.achieved
    return words.say(SENTENCES, "verdict", t=t, met=t.met(),
                     short=None if measured is None or not t.rate else t.goal / measured,
                     under_ns=None if measured is None else t.goal - measured,
                     over_ns=None if measured is None else measured - t.goal,
                     times=None if measured is None else measured / t.goal,
                     stretch=None if t.stretch is None or measured is None else measured <= t.stretch)


def multiple(t: Target) -> str:
    """How far the measured number is from its floor: a time over its floor, a rate's floor over it."""
    if t.achieved is None or t.floor is None:
        return "-"
    return f"{(t.floor.value / t.achieved if t.rate else t.achieved / t.floor.value):.2g}x"


def target_lines(frame: pd.DataFrame, runs: Sequence[dict], machine: str) -> list[str]:
    row = floor_row(runs, machine)
    return [words.say(SENTENCES, "target", t=t, verdict=verdict(t), multiple=multiple(t))
            + sweep_words(frame, runs, machine, t)
            for t in judged(frame, runs, machine, row) if t.achieved is not None]


def sweep_words(frame: pd.DataFrame, runs: Sequence[dict], machine: str, t: Target) -> str:
    """A batch target from a host array read from the trace: the same call's `batch_sweep` rate beside
    it, and why the two differ (gpu_section.two_rates); '' for the other targets."""
    if not t.rate or not t.source.startswith("kernels trace, host time, ") or frame.empty:
        return ""
    label = t.source.rsplit(", ", 1)[-1]
    row = next((r for r in study_rows(runs, "kernels") if r.get("batch", 1) == BATCH
                and r["machine"] == machine and f"{r['implementation']}/{r['variant']}" == label), None)
    return gpu_section.two_rates(frame, row) if row is not None else ""


def probe_table(row: dict) -> str:
    p = row["probes"]
    body = []
    for key in ("bus_round_trip", "empty_launch", "empty_graph"):
        if key in p:
            body.append([key, gpu_section.us(p[key]["median_ns"]),
                         f"{gpu_section.us(p[key]['p10_ns'])} – {gpu_section.us(p[key]['p90_ns'])}", "-"])
    for key in (k for k in p if k.startswith(("h2d", "d2h"))):
        c = p[key]
        body.append([key, gpu_section.us(c["median_ns"]),
                     f"{gpu_section.us(c['p10_ns'])} – {gpu_section.us(c['p90_ns'])}",
                     f"{c['bytes_per_s'] / 1e9:.3g} GB/s (device {gpu_section.us(c['device_ns'])})"])
    for key in ("fma_one_sm", "fma_all"):
        if key in p:
            body.append([key, gpu_section.us(p[key]["ns"]), "best of 5",
                         f"{p[key]['per_s'] / 1e9:,.0f} G multiply-adds/s ({p[key]['blocks']} blocks of "
                         f"{gpu_probes.FMA_THREADS} threads)"])
    if "cluster_barrier" in p:
        c = p["cluster_barrier"]
        body.append(["cluster_barrier", f"{c['median_ns']:.0f} ns",
                     f"{c['p10_ns']:.0f} – {c['p90_ns']:.0f} ns",
                     f"{c['iters']:,} barriers a launch, 8 blocks"])
    for key, why in row.get("failed_probes", {}).items():
        body.append([key, "failed", why, "-"])
    return table(["probe", "median", "p10 – p90", "rate"], body)


def variants_table(frame: pd.DataFrame, machine: str, call: Floor) -> str:
    cells = ok_cells(frame, "api_levels", device="gpu", machine=machine, batch_size=1, dtype="float32")
    body = [[r["label"], gpu_section.us(r["median_ms"] * 1e6), f"{r['median_ms'] * 1e6 / call.value:.3g}x"]
            for _, r in cells.sort_values("median_ms").iterrows()]
    return table(["level/variant", "median per call (api_levels)", "multiple of the floor of a call"], body)


def section(frame: pd.DataFrame, runs: Sequence[dict]) -> list[str]:
    """DETAILS' section: per machine with a gpu_floor row, the probes, the targets against their floors,
    and every GPU call at batch 1 as a multiple of the floor of a call."""
    machines = sorted({run["machine"] for run in runs if run["study"] == gpu_probes.STUDY})
    out: list[str] = []
    for machine in machines:
        row = floor_row(runs, machine)
        if row is None:
            continue
        f = floors(row)
        out += ["", f"{TITLE}: {machine}", "", words.say(SENTENCES, "probes", calls=row["calls"]), "",
                probe_table(row), "", "Each target's floor, from the probes:", ""]
        out += ["- " + words.say(SENTENCES, "floor", name=name, floor=fl) for name, fl in f.items()]
        targets = judged(frame, runs, machine, row)
        body = [[t.what, amount(t.goal, t.rate), "-" if t.achieved is None else amount(t.achieved, t.rate),
                 t.source, verdict(t), "-" if t.floor is None else amount(t.floor.value, t.rate), multiple(t)]
                for t in targets]
        headers = ["target", "goal", "measured", "where", "verdict", "floor", "multiple of the floor"]
        out += ["", compact(headers, body)]
        if "call" in f and not frame.empty:
            out += ["", words.say(SENTENCES, "every_call", floor=f["call"]), "",
                    variants_table(frame, machine, f["call"])]
    return out
