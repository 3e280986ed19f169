"""Two machines of one CPU type stay two machines: what a reader on "the same" machine type may expect,
measured on the pairs the runs hold. Two cloud VMs of one CPU type (the same vendor, family, model,
stepping, instruction sets, caches and usable cores) can differ in their guest kernel's build tag and a
little memory, so their fingerprints differ (harness.machine.host), and each is its own machine in the
report. Where both ran `api_levels`, their batch-1 CPU cells say how far "the same" machine's numbers
move: each cell's median on one over the other, and each cell's within-round ratio to the raw
library on one over the other.

    cpu_type(env) -> tuple | None        what makes a CPU type (None: a run before the fingerprint)
    pairs(runs, frame) -> [Pair]         each pair of machines of one type with batch-1 CPU cells in both
"""

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness import registry
from harness.report.claims.rundata import ratio
from harness.report.markup.style import ok_cells

TYPE_FIELDS = ("vendor", "family", "model", "stepping", "model_name", "l2_kib", "l3_kib", "cpus_usable")
STUDY = "api_levels"


def cpu_type(env: dict) -> tuple | None:
    """The host's CPU type: TYPE_FIELDS and its instruction sets (not its kernel, memory or GPUs)."""
    host = env.get("host") or {}
    if not env.get("fingerprint") or not host:
        return None
    return (*(host.get(f) for f in TYPE_FIELDS), tuple(sorted(host.get("isa") or [])))


@dataclass(frozen=True)
class Pair:
    """`newer` against `older` (by their newest `api_levels` run in this checkout's order)."""

    older: str  # the machine's name (hosts.assign)
    newer: str
    cells: int  # batch-1 CPU cells measured on both (the null level apart)
    time_low: float  # the least of (newer's median / older's median) over those cells
    time_high: float  # the most
    time_median: float  # their median
    raw: str | None  # the raw library's call the ratios are against (None: no ratio in both)
    ratio_cells: int  # cells with a within-round ratio to it on both
    ratio_low: float | None  # the least of (newer's ratio / older's ratio)
    ratio_high: float | None  # the most
    ratio_most: float | None  # the largest move either way, as a share (0.3: 30%)


def batch1(frame: pd.DataFrame, machine: str) -> pd.DataFrame:
    """A machine's ok batch-1 float32 CPU cells of STUDY at the study's own thread count, the null apart."""
    cells = ok_cells(frame, STUDY, machine=machine, device="cpu", batch_size=1, dtype="float32")
    if "threads" in cells:
        cells = cells[cells["threads"].isna()]
    return cells[cells["implementation"].map(registry.computes)]


def compared(frame: pd.DataFrame, older: str, newer: str) -> Pair | None:
    """The pair's claim, or None where the two have no batch-1 CPU cell in common."""
    a, b = (batch1(frame, m).drop_duplicates("label").set_index("label") for m in (older, newer))
    shared = [label for label in a.index if label in b.index]
    if not shared:
        return None
    times = np.array([b.loc[label, "median_ms"] / a.loc[label, "median_ms"] for label in shared])
    raw_level = registry.raw_library("cpu")
    raws = a[a["implementation"] == raw_level]
    raw = None if raws.empty else str(raws["median_ms"].idxmin())
    moves = []
    if raw is not None and raw in b.index:
        for label in shared:
            if label == raw:
                continue
            before, after = ratio(a.loc[label], a.loc[raw]), ratio(b.loc[label], b.loc[raw])
            if before and after:
                moves.append(after / before)
    found = np.array(moves)
    spread = ((float(found.min()), float(found.max()), float(np.max(np.abs(found - 1)))) if moves
              else (None, None, None))
    return Pair(older=older, newer=newer, cells=len(shared), time_low=float(times.min()),
                time_high=float(times.max()), time_median=float(np.median(times)),
                raw=raw if moves else None, ratio_cells=len(moves),
                ratio_low=spread[0], ratio_high=spread[1], ratio_most=spread[2])


def pairs(runs: list[dict], frame: pd.DataFrame) -> list[Pair]:
    """Every pair of machines of one CPU type (cpu_type) whose newest `api_levels` runs (runs:
    latest_runs') both have batch-1 CPU cells, the older machine first, in the order of their types'
    newest runs."""
    newest: dict[str, tuple[float, dict]] = {}
    for run in runs:
        if run["study"] == STUDY and run["order"] >= newest.get(run["machine"], (float("-inf"), {}))[0]:
            newest[run["machine"]] = (run["order"], run["env"])
    by_type: dict[tuple, list[tuple[float, str]]] = {}
    for machine, (order, env) in newest.items():
        kind = cpu_type(env)
        if kind is not None:
            by_type.setdefault(kind, []).append((order, machine))
    out = []
    for members in by_type.values():
        for (_, older), (_, newer) in itertools.combinations(sorted(members), 2):
            found = compared(frame, older, newer)
            if found is not None:
                out.append(found)
    return out
