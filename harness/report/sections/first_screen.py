"""What the first screen must say beside its numbers, as claims (templates/first_screen.md.j2 words
them): what an interval covers (one run, not the drift between runs) and the drift measured; that the
CPU columns are one thread; what the GPU's fastest call is when it is a resident kernel (it holds
SMs, polls, relaunches after an idle spell, and serves one image at a time); and how much of a
batch-1 call is the cost of making a call.

    cpu_threads(runs, run_id) -> int | None          the answering CPU run's thread count (env.json)
    intervals_note(pooled) -> claims                 what the intervals cover: the runs each pools
    threads_note(threads) -> claims | None           the CPU columns' thread count
    resident_note(frame, runs, cell) -> claims|None  a resident kernel's caveats
    call_cost(batch1, large) -> float                the share of a batch-1 call that is the call
    call_cost_claims(frame, machines) -> [claims]    per device, that share and its cells
"""

import math

import pandas as pd

from harness import registry
from harness.report.claims.rundata import find, study_rows
from harness.report.markup.style import ok_cells
from harness.report.sections import gpu_section

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


def cpu_threads(runs: list[dict], run_id: str | None) -> int | None:
    """The threads the answering CPU run gave every level (its env.json's thread variables, all one
    number), or None where they were not recorded or differ."""
    run = next((r for r in runs if r["run_id"] == run_id and r["study"] == "api_levels"), None)
    found = {(run["env"].get("threads") or {}).get(v) for v in THREAD_VARS} if run else set()
    value = found.pop() if len(found) == 1 else None
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def intervals_note(pooled: list[dict]) -> dict:
    """What a [95% CI] covers: every run of the same code on the machine (rundata.pooling: for each
    device, the least and most runs its cells pool, and the contended runs left out)."""
    return {"words": "intervals", "pooled": pooled}


def threads_note(threads: int | None) -> dict | None:
    return None if threads is None else {"words": "threads", "threads": threads}


def resident_note(frame: pd.DataFrame, runs: list[dict], cell: pd.Series | None) -> dict | None:
    """cell (the GPU's fastest batch-1 call) where its kernels row is a resident kernel: the SMs it
    holds, its relaunches, its mean and p99 beside its median, and its time per image at the sweep's
    largest batch against the fastest there."""
    if cell is None:
        return None
    row = gpu_section.kernels_of(study_rows(runs, "kernels"), cell["label"], cell["machine"])
    if row is None or not gpu_section.resident(row):
        return None
    # the kernel's static shape (gpu_explain compiles it with NVRTC on any machine, GPU or not)
    static = [r for run in runs if run["study"] == "gpu_explain" for r in run["rows"]
              if r.get("kind") == "gpu_explain" and r.get("implementation") == cell["implementation"]]
    claims = {"words": "resident", "cell": cell, "calls": row["calls"],
              "launches": round(row["device_ops_per_call"] * row["calls"]),
              "blocks": next((r.get("blocks_per_image") for r in static
                              if cell["variant"] in (r.get("variants") or [])), None), "serves": None}
    sweep = ok_cells(frame, "batch_sweep", device="gpu", machine=cell["machine"])
    if not sweep.empty:
        largest = sweep[sweep["batch_size"] == sweep["batch_size"].max()]
        mine = largest[largest["label"] == cell["label"]]
        best = largest.loc[largest["images_per_s"].idxmax()]
        if not mine.empty and best["label"] != cell["label"]:
            per = mine.iloc[0]["median_ms"] / mine.iloc[0]["batch_size"]
            theirs = best["median_ms"] / best["batch_size"]
            claims["serves"] = {"batch": int(best["batch_size"]), "per_image_ms": per, "best": best,
                                "best_per_image_ms": theirs, "per_over_best": per / theirs}
    return claims


def call_cost(batch1_ms: float, large_ms_per_image: float) -> float:
    """The share of a batch-1 call that is the cost of making a call: 1 - (an image's time at a large
    batch) / (the batch-1 call's). Negative where an image costs more in a large batch; an input that
    is not a positive finite time is an error."""
    for value in (batch1_ms, large_ms_per_image):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"call_cost: {value!r}, expected a positive time in ms")
    return 1 - large_ms_per_image / batch1_ms


def call_cost_rows(frame: pd.DataFrame, machines: dict) -> list[tuple[str, pd.Series, pd.Series, float]]:
    """Per device, (device, the fastest batch-1 cell in `batch_sweep`, the same label's cell at the
    sweep's largest batch, call_cost): both from one sweep on one machine."""
    out = []
    for device in ("cpu", "gpu"):
        cells = ok_cells(frame, "batch_sweep", device=device, machine=machines.get(device))
        cells = cells[cells["implementation"].map(registry.computes)] if not cells.empty else cells
        if cells.empty:
            continue
        large = cells[cells["batch_size"] == cells["batch_size"].max()]
        best = large.loc[large["images_per_s"].idxmax()]
        one = find(cells, "batch_sweep", best["label"], device=device, machine=best["machine"])
        if one is None or int(best["batch_size"]) == 1:
            continue
        out.append((device, one, best, call_cost(one["median_ms"], best["median_ms"] / best["batch_size"])))
    return out


def call_cost_claims(frame: pd.DataFrame, machines: dict) -> list[dict]:
    """Per device, the fastest call at the sweep's largest batch against the same call at batch 1,
    and the share of that call that is the cost of making it (call_cost)."""
    return [{"device": device, "large": large, "per_image_ms": large["median_ms"] / large["batch_size"],
             "batch": int(large["batch_size"]), "one_ms": one["median_ms"], "share": share,
             "verdict": "most" if share > 0.5 else "some" if share > 0 else "none"}
            for device, one, large, share in call_cost_rows(frame, machines)]
