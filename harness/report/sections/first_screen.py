"""What the first screen must say beside its numbers, each sentence computed from rows: what an
interval covers (one run, not the drift between runs) and the drift measured; that the CPU columns
are one thread; what the GPU's fastest call is when it is a resident kernel (it holds SMs, polls,
relaunches after an idle spell, and serves one image at a time); what C's call "as first written"
is; and how much of a batch-1 call is the cost of making a call, per device.

    cpu_threads(runs, run_id) -> int | None        the answering CPU run's thread count (env.json)
    intervals_note(machines, drifts) -> str         what the intervals cover, and the drift measured
    threads_note(threads) -> str                    the CPU columns' thread count
    resident_note(frame, runs, cell) -> str | None  a resident kernel's caveats
    c_note(frame, run_id) -> str | None             C's default call against its layer-by-layer one
    call_cost(batch1, large) -> float               the share of a batch-1 call that is the call
    call_cost_sentence(rows) -> str                 per device, that share in words
"""

import math

import pandas as pd

from harness import registry
from harness.report.claims import drift
from harness.report.claims.rundata import find
from harness.report.markup.tables import ms
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


def intervals_note(machines: dict, drifts: dict) -> str:
    """What a [95% CI] covers, and where `reproduce` measured the machine's drift, that drift and
    that the columns print an interval for a rerun (headline.render widens them)."""
    line = ("**Intervals.** A 95% interval covers the rounds and processes of one run, not the machine's "
            "drift between runs")
    moved = [(d, found) for d in ("cpu", "gpu") if machines.get(d)
             and (found := drifts.get((machines[d], d))) is not None]
    if moved:
        line += ": " + "; ".join(drift.sentence(machines[d], d, found) for d, found in moved)
        line += (". So the " + " and ".join(d.upper() for d, _ in moved) + " columns print an interval for "
                 "a rerun (`rerun`): the one-run interval widened on each side by the move that "
                 f"{drift.QUANTILE:.0%} of the cells stayed within")
        if any(found.ratio_spread is not None for _, found in moved):
            line += ", their within-round ratios' by the move of the ratios"
        alone = [d.upper() for d in ("cpu", "gpu") if machines.get(d) and d not in dict(moved)]
        if alone:
            line += f"; the {' and '.join(alone)} columns' are one run's (no second run measured there)"
    else:
        line += " (no second run, `make reproduce`, has measured that drift on these machines)"
    return line + (". Ratios (`x oneDNN`, `x cuDNN`), taken within rounds, cancel a drift that moves every "
                   "cell alike: they are the numbers to compare.")


def threads_note(threads: int | None) -> str | None:
    if threads is None:
        return None
    words = "one thread" if threads == 1 else f"{threads} threads"
    return (f"**The CPU columns are {words}** (the studies' thread rule, OMP, BLAS and TensorFlow threads "
            f"{threads} for every level, recorded in each run's env.json): a comparison with the GPU is "
            f"with {words} of the CPU{' (one core at a time)' if threads == 1 else ''}, not the whole chip.")


def resident_note(frame: pd.DataFrame, runs: list[dict], cell: pd.Series | None) -> str | None:
    """cell (the GPU's fastest batch-1 call) where its kernels row is a resident kernel: the SMs it
    holds, its relaunches, its mean and p99 beside its median, and its time per image at the sweep's
    largest batch against the fastest there."""
    if cell is None:
        return None
    row = gpu_section.kernels_of(gpu_section.kernel_rows(runs), cell["label"], cell["machine"])
    if row is None or not gpu_section.resident(row):
        return None
    launches = round(row["device_ops_per_call"] * row["calls"])
    # the kernel's static shape (gpu_explain compiles it with NVRTC on any machine, GPU or not)
    static = [r for run in runs if run["study"] == "gpu_explain" for r in run["rows"]
              if r.get("kind") == "gpu_explain" and r.get("implementation") == "cuda"]
    blocks = next((r.get("blocks_per_image") for r in static if cell["variant"] in (r.get("variants") or [])),
                  None)
    held = f"{blocks} blocks, each on its own SM, " if blocks else ""
    line = (f"**{cell['label']}, the GPU's fastest batch-1 call, keeps one kernel resident between calls** "
            f"({held}polling mapped host memory for the next image: those SMs are kept from other work; "
            f"`kernels`: launched {launches} times in {row['calls']} calls, again after each idle spell). "
            f"Its mean, {ms(cell['mean_ms'])}, and p99, {ms(cell['p99_ms'])}, stand beside its "
            f"{ms(cell['median_ms'])} median: a call after an idle spell pays a launch")
    sweep = frame[(frame["study"] == "batch_sweep") & (frame["status"] == "ok") & (frame["device"] == "gpu")
                  & (frame["machine"] == cell["machine"])] if not frame.empty else frame
    if not sweep.empty:
        largest = sweep[sweep["batch_size"] == sweep["batch_size"].max()]
        mine = largest[largest["label"] == cell["label"]]
        best = largest.loc[largest["images_per_s"].idxmax()]
        if not mine.empty and best["label"] != cell["label"]:
            per = mine.iloc[0]["median_ms"] / mine.iloc[0]["batch_size"]
            theirs = best["median_ms"] / best["batch_size"]
            line += (f"; it serves one image at a time: at batch {int(best['batch_size'])} it takes "
                     f"{ms(per)} per image (`batch_sweep`), {per / theirs:.0f}x {best['label']}'s "
                     f"{ms(theirs)}")
    return line + "."


def c_note(frame: pd.DataFrame, run_id: str | None) -> str | None:
    """The hand-written C level's call as first written is its registry default (`fused`, one kernel
    for the network, on the vector path -march=native picks); its layer-by-layer call beside it."""
    spec = registry.REGISTRY.get("c")
    if spec is None or run_id is None or frame.empty:
        return None
    cells = frame[(frame["run_id"] == run_id) & (frame["study"] == "api_levels") & (frame["status"] == "ok")
                  & (frame["implementation"] == "c") & (frame["batch_size"] == 1)
                  & (frame["device"] == "cpu")]
    default = spec.variants[0]
    first = cells[cells["variant"] == default]
    others = cells[cells["variant"] != default]
    if first.empty or others.empty:
        return None
    slow, fused = others.loc[others["median_ms"].idxmax()], first.iloc[0]["median_ms"]
    return (f"**C \"as first written\" is `c/{default}`**, the whole network in one function on the vector "
            f"path the compiler picks for this CPU (-march=native), written for speed; written layer by "
            f"layer, {slow['label']} takes {ms(slow['median_ms'])}, {slow['median_ms'] / fused:.0f}x "
            f"its {ms(fused)} (`api_levels`, the same rounds).")


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
        cells = frame[(frame["study"] == "batch_sweep") & (frame["status"] == "ok")
                      & (frame["device"] == device) & (frame["machine"] == machines.get(device))
                      & frame["implementation"].map(registry.computes)] if not frame.empty else frame
        if cells.empty:
            continue
        large = cells[cells["batch_size"] == cells["batch_size"].max()]
        best = large.loc[large["images_per_s"].idxmax()]
        one = find(cells, "batch_sweep", best["label"], device=device, machine=best["machine"])
        if one is None or int(best["batch_size"]) == 1:
            continue
        out.append((device, one, best, call_cost(one["median_ms"], best["median_ms"] / best["batch_size"])))
    return out


def call_cost_sentence(frame: pd.DataFrame, machines: dict) -> str:
    """'; the fastest at a large batch per device against its own batch-1 call: on the CPU c/fused ...,
    so a call's own cost is 21% of a batch-1 call; on the GPU ..., 97%: most of it'."""
    parts = []
    for device, one, large, share in call_cost_rows(frame, machines):
        per = large["median_ms"] / large["batch_size"]
        verdict = "most of it" if share > 0.5 else "not most of it" if share > 0 else "none of it"
        parts.append(f"on the {device.upper()}, {large['label']} takes {ms(per)} per image at batch "
                     f"{int(large['batch_size'])} against {ms(one['median_ms'])} at batch 1, so making the "
                     f"call is {100 * share:.0f}% of a batch-1 call ({verdict})")
    if not parts:
        return ""
    return ("; against a large batch (`batch_sweep`, the fastest at its largest batch and the same call at "
            "batch 1, one machine each): " + "; ".join(parts))
