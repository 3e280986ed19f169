"""The report's answer: one row per level of the ladder, with its lines of code, its batch-1
latency on the CPU and on the GPU (each with its ratio to that device's raw library, taken
within rounds), and its GPU throughput at the largest batch. A cell that was not measured is
"–" with a footnote that says why. Every number is read from a results row or loc.csv."""

from dataclasses import dataclass, field

import pandas as pd

from harness import registry
from harness.report.rundata import ratio_ci
from harness.report.style import IMPL_ORDER
from harness.report.tables import fmt_ratio, ms, sig3, table

# Each implementation's row name; the rows in the ladder's order (style.IMPL_ORDER: the GPU's two
# rungs, then the CPU's: hand-written, raw library, engine; the NumPy reference last).
ROW_NAMES = {"cuda": "hand-written CUDA", "cudnn": "raw library: cuDNN", "numba": "hand-written CPU (Numba)",
             "onednn": "raw library: oneDNN", "onnx": "inference engine", "tf": "TensorFlow ops",
             "jax": "JAX ops", "torch": "PyTorch ops", "keras": "Keras on TensorFlow",
             "keras_jax": "Keras on JAX", "keras_torch": "Keras on PyTorch", "numpy": "NumPy reference"}
LEVELS = [(ROW_NAMES[i], i) for i in IMPL_ORDER]  # (row, implementation)
RAW = {"cpu": "onednn", "gpu": "cudnn"}  # each device's raw library: the ratios' denominator
STUDY, SWEEP = "api_levels", "batch_sweep"


@dataclass
class Level:
    name: str
    implementation: str
    loc: int | None = None
    cells: dict = field(default_factory=dict)  # device -> the fastest ok batch-1 cell
    ratios: dict = field(default_factory=dict)  # device -> within-round ratio to the raw library
    throughput: pd.Series | None = None  # the fastest ok cell at the GPU sweep's largest batch
    missing: dict = field(default_factory=dict)  # column -> why not measured


def ok_batch1(frame: pd.DataFrame, study: str, machine: str | None, device: str) -> pd.DataFrame:
    if frame.empty:
        return frame
    cells = frame[(frame["study"] == study) & (frame["status"] == "ok") & (frame["machine"] == machine)
                  & (frame["device"] == device) & (frame["batch_size"] == 1)
                  & (frame["dtype"] == "float32")]
    return cells[cells["threads"].isna()] if "threads" in cells else cells


def pick_machine(frame: pd.DataFrame, device: str) -> str | None:
    """The machine whose api_levels run answers for `device`: the one that measured the device's
    raw library, then the one with the most measured cells, then by name."""
    if frame.empty:
        return None
    cells = frame[(frame["study"] == STUDY) & (frame["status"] == "ok") & (frame["device"] == device)
                  & (frame["implementation"] != "null")]
    if cells.empty:
        return None
    score = {m: ((part["implementation"] == RAW[device]).any(), len(part))
             for m, part in cells.groupby("machine")}
    return max(sorted(score), key=lambda m: score[m])


def fastest(cells: pd.DataFrame, implementation: str) -> pd.Series | None:
    part = cells[cells["implementation"] == implementation]
    return None if part.empty else part.loc[part["median_ms"].idxmin()]


def inference_loc(loc_rows: list[dict], implementation: str) -> int | None:
    spec = registry.REGISTRY.get(implementation)
    package = spec.package if spec else None
    parts = [r["code"] for r in loc_rows if r["package"] == package and r["part"] != "training step"]
    return sum(parts) if parts else None


def why_missing(frame: pd.DataFrame, study: str, machine: str | None, implementation: str,
                device: str) -> str:
    """Why a cell has no number: its skipped row's reason, the level's devices, or its absence."""
    spec = registry.REGISTRY.get(implementation)
    if spec and device not in spec.devices:
        return f"runs on the {spec.devices[0].upper()} only"
    if machine is None:
        return f"no {device.upper()} results in `{study}`"
    if not frame.empty:
        rows = frame[(frame["study"] == study) & (frame["machine"] == machine)
                     & (frame["implementation"] == implementation) & (frame["device"] == device)
                     & (frame["status"] != "ok")]
        if not rows.empty:
            return short_reason(rows.iloc[0]["reason"], rows.iloc[0]["status"])
    return f"not measured by `{study}` on {machine}"


def short_reason(reason: str, status: str) -> str:
    if "No module named 'tensorflow'" in reason:
        return ("the GPU machine has no TensorFlow (its GPU build, `pip install 'tensorflow[and-cuda]'`, "
                "was not installed there)")
    first = reason.split("; ")[0].split(". ")[0]
    return f"{status}: {first}"


def levels(frame: pd.DataFrame, loc_rows: list[dict]) -> tuple[list[Level], dict]:
    """The table's rows, and {device: machine} of the runs they come from."""
    if frame.empty:
        return [], {"cpu": None, "gpu": None}
    machines = {d: pick_machine(frame, d) for d in ("cpu", "gpu")}
    batch1 = {d: ok_batch1(frame, STUDY, m, d) for d, m in machines.items()}
    raws = {d: fastest(batch1[d], RAW[d]) if not batch1[d].empty else None for d in batch1}
    sweep_gpu = (frame[(frame["study"] == SWEEP) & (frame["status"] == "ok") & (frame["device"] == "gpu")
                       & (frame["machine"] == machines["gpu"])] if not frame.empty else frame)
    largest = sweep_gpu["batch_size"].max() if not sweep_gpu.empty else None
    out = []
    for name, impl in LEVELS:
        level = Level(name, impl, inference_loc(loc_rows, impl))
        for device in ("cpu", "gpu"):
            cell = fastest(batch1[device], impl) if not batch1[device].empty else None
            if cell is None:
                level.missing[device] = why_missing(frame, STUDY, machines[device], impl, device)
                continue
            level.cells[device] = cell
            if impl != RAW[device]:
                level.ratios[device] = ratio_ci(cell, raws[device])
        at = sweep_gpu[(sweep_gpu["batch_size"] == largest) & (sweep_gpu["implementation"] == impl)]
        if at.empty:
            level.missing["throughput"] = why_missing(frame, SWEEP, machines["gpu"], impl, "gpu")
        else:
            level.throughput = at.loc[at["images_per_s"].idxmax()]
        if level.cells or level.loc is not None:
            out.append(level)
    return out, machines


def interval(low_ms: float, high_ms: float) -> str:
    """'28.2–43.4 µs', the unit once where both ends share it."""
    low, high = ms(low_ms), ms(high_ms)
    lo_num, _, lo_unit = low.partition(" ")
    hi_num, _, hi_unit = high.partition(" ")
    return f"{lo_num}–{high}" if lo_unit == hi_unit else f"{low}–{high}"


def latency(cell: pd.Series) -> str:
    variant = "" if cell["variant"] == "default" else f" `{cell['variant']}`"
    return f"{ms(cell['median_ms'])} [{interval(cell['ci_low_ms'], cell['ci_high_ms'])}]{variant}"


def images_per_s(cell: pd.Series) -> str:
    return f"{int(float(sig3(cell['images_per_s']))):,}/s `{cell['variant']}`"


def render(frame: pd.DataFrame, loc_rows: list[dict]) -> tuple[list[str], dict]:
    """The headline table and its footnotes, as Markdown lines; {device: machine} behind them."""
    rows, machines = levels(frame, loc_rows)
    if not rows:
        return ["_No results yet: run `make run-all`._"], machines
    notes: list[str] = []

    def dash(why: str) -> str:
        if why not in notes:
            notes.append(why)
        return f"– ({chr(ord('a') + notes.index(why))})"

    raw_name = {d: dict((i, n) for n, i in LEVELS)[RAW[d]].split(": ")[-1] for d in RAW}
    body = []
    for lv in rows:
        line = [lv.name, str(lv.loc) if lv.loc is not None
                else dash("lines of code not counted (no package)")]
        for device in ("cpu", "gpu"):
            if device in lv.cells:
                itself = lv.implementation == RAW[device]
                ratio = "1 (itself)" if itself else fmt_ratio(lv.ratios.get(device))
                line += [latency(lv.cells[device]), ratio]
            else:
                line += [dash(lv.missing[device]), "–"]
        line.append(images_per_s(lv.throughput) if lv.throughput is not None
                    else dash(lv.missing["throughput"]))
        body.append(line)
    largest = next((int(lv.throughput["batch_size"]) for lv in rows if lv.throughput is not None), None)
    headers = ["level", "code lines", "CPU, batch 1: median [95% CI] per image",
               f"x {raw_name['cpu']} (CPU) [95% CI]", "GPU, batch 1: median [95% CI] per image",
               f"x {raw_name['gpu']} (GPU) [95% CI]",
               f"GPU throughput, batch {largest}" if largest else "GPU throughput, largest batch"]
    out = [table(headers, body), ""]
    out += [f"({chr(ord('a') + i)}) {why}." for i, why in enumerate(notes)]
    return out, machines
