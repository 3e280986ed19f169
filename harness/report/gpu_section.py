"""The GPU half in sentences and one table: the ladder from raw cuDNN up, the speed targets
(met or missed, and by how much), and where a GPU call's time goes (`kernels` rows).

Every number is read from a results row; the targets are the project's goals, not results.
"""

from collections.abc import Sequence

import pandas as pd

from harness.report.rundata import find, ratio, ratio_ci
from harness.report.tables import fmt_ratio, goal_line, ms, speedup_verdict, table

# Goals per image at batch 1, end to end: the hand-written rung's, and cuDNN's with its dense layers fused
# into cuBLASLt calls. The project's goals, not results.
TARGETS_MS = {"cuda/graph": 0.015, "cudnn/graph": 0.040, "cudnn/tuned": 0.100}
HAND_WRITTEN_SPEEDUP = 3.0  # cuda/graph at least this much faster than cudnn/graph, within rounds
FLOORS = ("cuda/graph", "cudnn/graph")  # the GPU's candidates for the fastest measured implementation
TORCH_VARIANTS = ("torch/eager", "torch/compile", "torch/cudagraph")
CUDNN_VARIANTS = ("cudnn/naive", "cudnn/tuned", "cudnn/graph")


def kernel_rows(runs: Sequence[dict]) -> list[dict]:
    """The newest `kernels` run of each machine: its ok rows, each with its machine."""
    return [{**row, "machine": run["machine"]} for run in runs if run["study"] == "kernels"
            for row in run["rows"] if row.get("kind") == "kernels" and row.get("status") == "ok"]


def kernels_of(rows: list[dict], label: str, machine: str) -> dict | None:
    return next((r for r in rows if f"{r['implementation']}/{r['variant']}" == label
                 and r["machine"] == machine), None)


def us(ns: float) -> str:
    return ms(ns / 1e6)


def cudnn_line(frame: pd.DataFrame, machine: str) -> str | None:
    """naive against tuned, and tuned against its CUDA graph (overhead: all three in one run)."""
    tuned = find(frame, "overhead", "cudnn/tuned", device="gpu", machine=machine)
    naive = find(frame, "overhead", "cudnn/naive", device="gpu", machine=machine)
    graph = find(frame, "overhead", "cudnn/graph", device="gpu", machine=machine)
    if tuned is None or naive is None:
        return None
    dev = tuned["device_median_ms"]
    return (f"cuDNN on {machine}: tuned {ms(tuned['median_ms'])} against naive "
            f"{ms(naive['median_ms'])} per image ({ratio(naive, tuned):.1f}x); CUDA events "
            f"around the tuned call span {ms(dev)} ({100 * dev / tuned['median_ms']:.0f}%), "
            "the stream waiting on the host's enqueueing as much as working (the GPU's "
            "busy time is under \"Where a GPU call's time goes\")."
            + (f" Replayed as one CUDA graph, the call takes {ms(graph['median_ms'])} "
               f"(tuned/graph {fmt_ratio(ratio_ci(tuned, graph))}x within rounds)."
               if graph is not None else ""))


def ladder_line(frame: pd.DataFrame, machine: str) -> str | None:
    """api_levels on the GPU: every level against the floor (the fastest CUDA graph measured: the
    hand-written kernels' where they ran, else cuDNN's), within rounds."""
    floors = [c for c in (find(frame, "api_levels", lb, device="gpu", machine=machine) for lb in FLOORS)
              if c is not None]
    if not floors:
        return None
    graph = min(floors, key=lambda c: c["median_ms"])
    name = {"cuda/graph": "the hand-written kernel replayed as one CUDA graph",
            "cudnn/graph": "cuDNN replayed as one CUDA graph"}[graph["label"]]
    others = [("cuda/fused", "the hand-written kernel launched from Python"),
              ("cudnn/graph", "cuDNN replayed as one CUDA graph"),
              ("cudnn/tuned", "cuDNN tuned (the same calls enqueued one by one)"),
              ("torch/eager", "PyTorch ops"), ("jax/jit", "JAX jit"),
              ("keras_jax/predict", "Keras `model.predict` on JAX"),
              ("keras_torch/predict", "on PyTorch"), ("keras/predict", "on TensorFlow")]
    parts = []
    for label, what in others:
        row = find(frame, "api_levels", label, device="gpu", machine=machine)
        if row is not None and label != graph["label"]:
            parts.append(f"{what} {ms(row['median_ms'])} ({fmt_ratio(ratio_ci(row, graph))}x)")
    return (f"**The GPU ladder on {machine}, raw library → framework ops → Keras** (`api_levels`, "
            f"batch 1, ratios to the floor within rounds): {name} takes "
            f"{ms(graph['median_ms'])} per image end to end (CUDA events: {ms(graph['device_median_ms'])} "
            f"on the stream); " + ", ".join(parts) + ".")


def target_lines(frame: pd.DataFrame, rows: list[dict], machine: str) -> list[str]:
    """The speed targets from the overhead study (all variants in one run), and where the time goes."""
    out = []
    for label, goal in TARGETS_MS.items():
        cell = find(frame, "overhead", label, device="gpu", machine=machine)
        if cell is None:
            continue
        line = goal_line(label, goal, cell["median_ms"], "overhead")
        k = kernels_of(rows, label, machine)
        if cell["median_ms"] > goal and k is not None:
            busy, host = k["gpu_busy_ns_per_call"], k["host_ns_per_call"]
            line += (f" Where it goes (`kernels`): the GPU is busy {us(busy)} of a {us(host)} call "
                     f"({100 * busy / host:.0f}%), in {k['device_ops_per_call']:.0f} kernels and copies, "
                     f"the longest {k['ops'][0]['name']} ({us(k['ops'][0]['ns_per_call'])} for "
                     f"{k['ops'][0]['per_call']:.0f}); the host makes {k['api_calls_per_call']:.0f} CUDA "
                     f"calls ({us(k['api_ns_per_call'])} inside them under the profiler, which slows them).")
        out.append(line)
    hand, library = (find(frame, "overhead", lb, device="gpu", machine=machine) for lb in FLOORS)
    if hand is not None and library is not None:
        r = ratio_ci(library, hand)
        verdict = speedup_verdict(r, HAND_WRITTEN_SPEEDUP) if r else "no within-round ratio"
        out.append(f"Target: cuda/graph at least {HAND_WRITTEN_SPEEDUP:g}x faster than cudnn/graph within "
                   f"rounds: cudnn/graph takes {fmt_ratio(r)}x cuda/graph's time: {verdict}.")
    best = {}
    for family, labels in (("cuDNN", CUDNN_VARIANTS), ("PyTorch", TORCH_VARIANTS)):
        cells = [c for c in (find(frame, "overhead", lb, device="gpu", machine=machine) for lb in labels)
                 if c is not None]
        if cells:
            best[family] = min(cells, key=lambda c: c["median_ms"])
    if len(best) == 2:
        cudnn, torch = best["cuDNN"], best["PyTorch"]
        r = ratio_ci(cudnn, torch)
        verdict = "met" if r and r["ratio"] <= 1 else "missed"
        out.append(f"Target: the best cuDNN variant no slower than the best PyTorch variant on the same "
                   f"GPU: {cudnn['label']} {ms(cudnn['median_ms'])} against {torch['label']} "
                   f"{ms(torch['median_ms'])} ({fmt_ratio(r)}x within rounds): {verdict}.")
    return out


def findings(frame: pd.DataFrame, runs: Sequence[dict], machine: str) -> list[str]:
    lines = [cudnn_line(frame, machine), ladder_line(frame, machine)]
    return [line for line in lines if line] + target_lines(frame, kernel_rows(runs), machine)


def section(runs: list[dict]) -> list[str]:
    """## Where a GPU call's time goes: one row per profiled level."""
    rows = kernel_rows(runs)
    if not rows:
        return []
    body = []
    for r in rows:
        busy, host = r["gpu_busy_ns_per_call"], r["host_ns_per_call"]
        top = "; ".join(f"{op['name']} x{op['per_call']:.0f} {us(op['ns_per_call'])}" for op in r["ops"][:3])
        api = f"{r['api_calls_per_call']:.0f} ({us(r['api_ns_per_call'])})"
        body.append([f"{r['implementation']}/{r['variant']}", us(host), us(busy), f"{100 * busy / host:.0f}%",
                     f"{r['device_ops_per_call']:.0f}", api, top, r["machine"]])
    return ["", "## Where a GPU call's time goes (`python -m harness kernels`)", "",
            "One image per call, batch 1, 200 calls per level, each level in its own process. Host time "
            "per call is timed without the profiler; the rest comes from a CUPTI trace of the same calls "
            "(torch.profiler): every kernel and copy on the GPU, whoever launched it, and the host's "
            "time inside CUDA calls (the profiler slows those calls: that column can exceed the "
            "unprofiled host time). GPU busy is the union of the kernels' and copies' intervals; where "
            "it is a small share of the call, the call is bound by the host's launches, not by the "
            "GPU's arithmetic. CUDA events around a call (the studies' device time) span the host's "
            "enqueueing too, so they overstate the GPU's work for every variant but a graph.", "",
            table(["level/variant", "host per call", "GPU busy", "busy share", "kernels+copies",
                   "CUDA calls (host time, profiled)", "longest three on the GPU (per call)", "machine"],
                  body)]
