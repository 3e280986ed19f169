"""REPORT.md's opening: the six questions its readers bring, each answered from the rows of the
answering machines in a sentence or two, with its number, its interval and where to look (a figure,
a table, a section of DETAILS). Where those machines have not measured what a question needs, its
answer says so and names the command that would. Each question is one function that returns its
claims (templates/questions.md.j2 words them, one macro each); which cells it reads comes from the
registry (a level's rung, its first-written call, its raw library, Keras' calls and backends).

    cost(levels, machines)                  1: each device's raw library, framework ops and Keras, as
                                            first written, with their lines of code
    keras(frame, runs, levels, machines)    2: where predict's time goes (explain), what to call instead
                                            (overhead, within rounds)
    backends(levels)                        3: Keras on each backend against that backend's own ops
    training(frame, machines)               4: a training step on the GPU against the CPU
    knobs(frame, machines)                  5: float64, batch size and threads, within rounds
    spread(levels)                          6: how far each device's first-written calls' p99 is from
                                            their median (the histograms)
    figure(word) -> {number, file} | None   a figure of templates/figures.toml, by a word of its file
    answers(data) -> [str]                  the six answers, worded
"""

import math
from typing import Any

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.headline import Level
from harness.report.claims.rundata import ReportData, find, ratio_ci, study_rows
from harness.report.markup import words
from harness.report.markup.style import ok_cells
from harness.report.sections import explain_section
from harness.report.sections.findings import comparison

TEMPLATE = "questions.md.j2"
HIGH = headline.HIGH_LEVEL.split("/")[0]  # the high-level API's first level: Keras on TensorFlow
DEVICES = ("cpu", "gpu")


def run_study(study: str, device: str) -> str:
    """The command that measures a study on a device of this machine."""
    return f"python -m harness run {study}" + (" --devices gpu" if device == "gpu" else "")


def figure(word: str) -> dict | None:
    """The figure whose file name holds `word` ('explain', 'backends'): its number (its place in
    templates/figures.toml) and file; None where no figure draws it."""
    for number, record in enumerate(words.table_of("figures")["figure"], 1):
        if word in record["file"]:
            return {"number": number, "file": record["file"]}
    return None


def under(device: str, level: str) -> str | None:
    """The framework-ops level under `level` on the device's ladder (TensorFlow ops under Keras on
    TensorFlow): the level before it on a path that starts at the device's raw library."""
    raw = headline.RAW.get(device)
    return next((p[p.index(level) - 1] for p in registry.ladder_paths()
                 if p[0] == raw and level in p[1:] and p.index(level) > 1), None)


def older_code(cells: list[pd.Series]) -> bool:
    """Whether any of the cells was measured on an earlier version of its level's code."""
    return any(bool(c.get("stale")) for c in cells)


def commit_of(runs: list[dict], cell: pd.Series) -> str | None:
    """The commit the run of a cell recorded (None: not recorded)."""
    run = next((r for r in runs if r["run_id"] == cell["run_id"] and r["study"] == cell["study"]), None)
    return ((run or {}).get("env", {}).get("provenance") or {}).get("commit") or None


def cost(levels: list[Level], machines: dict, runs: list[dict] | None = None) -> dict:
    """Per device: the raw library, the framework ops under Keras and Keras, each as first written
    (its cell, its ratio to the raw library's fastest call within rounds, its lines of code), or why
    it has no number; whether a number was measured on older code (and the run's commit)."""
    by = {lv.implementation: lv for lv in levels}
    devices: list[dict[str, Any]] = []
    for device in DEVICES:
        raw = headline.RAW.get(device)
        if raw is None:
            continue
        rows: list[dict[str, Any]] = []
        missing: dict[str, list[str]] = {}  # why -> the levels without a number, for that reason
        for name in dict.fromkeys(n for n in (raw, under(device, HIGH), HIGH) if n):
            lv = by.get(name)
            cell = lv.first.get(device) if lv else None
            if cell is None:
                why = lv.missing.get(device, "not measured") if lv else "not measured"
                missing.setdefault(why, []).append(registry.short(name))
                continue
            rows.append({"name": registry.short(name), "cell": cell, "loc": lv.loc if lv else None,
                         "ratio": lv.first_ratios.get(device) if lv and name != raw else None})
        cells = [r["cell"] for r in rows]
        devices.append({"device": device, "machine": machines.get(device), "rows": rows,
                        "raw": registry.short(raw), "older": older_code(cells),
                        "missing": [{"names": names, "why": why} for why, names in missing.items()],
                        "commit": commit_of(runs or [], cells[0]) if cells and older_code(cells) else None})
    raw_cpu, high = by.get(headline.RAW.get("cpu") or ""), by.get(HIGH)
    fewer = raw_cpu.loc / high.loc if raw_cpu and high and raw_cpu.loc and high.loc else None
    return {"words": "cost", "devices": devices, "table": "#on-the-cpu", "fewer": fewer,
            "raw": registry.short(raw_cpu.implementation) if raw_cpu else None, "figure": figure("cost")}


def keras(frame: pd.DataFrame, runs: list[dict], levels: list[Level], machines: dict) -> dict:
    """Keras' predict on the answering CPU machine: its time over the raw library's; the share of it
    explain's first stage is (and, where explain's split was accepted, the share that is building the
    tf.data pipeline and its iterator); and in `overhead`, the same model's other calls against
    predict, within rounds."""
    cpu = machines.get("cpu")
    lv = next((lv for lv in levels if lv.implementation == HIGH), None)
    row = next((r for r in study_rows(runs, "explain", only_ok=False) if r["machine"] == cpu
                and f"{r['implementation']}/{r['variant']}" == headline.HIGH_LEVEL and r.get("stages")), None)
    slow = find(frame, "overhead", headline.HIGH_LEVEL, machine=cpu)
    instead = []
    for variant in registry.KERAS_CALLS[1:]:  # predict_on_batch, the model's call
        cell = find(frame, "overhead", f"{HIGH}/{variant}", machine=cpu)
        if cell is not None and slow is not None:
            instead.append({"variant": variant, "cell": cell, "compared": comparison(ratio_ci(slow, cell))})
    first = row["stages"][0] if row else None
    return {"words": "keras", "cell": lv.first.get("cpu") if lv else None,
            "ratio": lv.first_ratios.get("cpu") if lv else None, "raw": registry.short(headline.RAW["cpu"]),
            "stage": None if first is None else {"share": first["share"],
                                                 "name": first.get("short") or first["name"]},
            "inside": explain_section.inside(row) if row else None, "predict": slow, "instead": instead,
            "explain_command": "make explain", "overhead_command": run_study("overhead", "cpu"),
            "figure": figure("explain")}


def backends(levels: list[Level]) -> dict:
    """Per device, each Keras backend's predict: its time, its ratio to the raw library, and its ratio
    to its own backend's framework ops as first written (both in api_levels' rounds)."""
    by = {lv.implementation: lv for lv in levels}
    devices = []
    for device in DEVICES:
        found = []
        for name in registry.KERAS_BACKENDS:
            lv = by.get(name)
            if lv is None or device not in lv.first:
                continue
            ops = by.get(under(device, name) or "")
            ops_cell = ops.first.get(device) if ops else None
            found.append({"backend": registry.display(name).split(" on ")[-1], "cell": lv.first[device],
                          "ratio": lv.first_ratios.get(device),
                          "ops": registry.short(ops.implementation) if ops else None,
                          "over_ops": ratio_ci(lv.first[device], ops_cell) if ops_cell is not None else None})
        if found:
            # the fastest backend's predict against the first backend's (Keras on TensorFlow), within rounds
            best, first = min(found, key=lambda b: b["cell"]["median_ms"]), found[0]
            compared = comparison(ratio_ci(first["cell"], best["cell"])) if best is not first else None
            devices.append({"device": device, "backends": found, "first": first["backend"],
                            "best": {**best, "compared": compared} if compared else None})
    return {"words": "backends", "devices": devices, "figure": figure("backends")}


def steps(frame: pd.DataFrame, machine: str | None, device: str, batch: int) -> pd.DataFrame:
    """The ok training steps of float32 at the study's own thread count, of a machine and device."""
    cells = ok_cells(frame, "training", machine=machine, device=device, batch_size=batch, dtype="float32")
    return cells[cells["threads"].isna()] if "threads" in cells else cells


def training(frame: pd.DataFrame, machines: dict, batch: int = 32) -> dict:
    """A training step of `batch` images: on the CPU, the fastest and the slowest level's; on the GPU,
    each call whose step is slower there than on the CPU (medians of two machines), or that no GPU
    has measured the training study."""
    cpu = steps(frame, machines.get("cpu"), "cpu", batch) if not frame.empty else frame
    gpu = steps(frame, machines.get("gpu"), "gpu", batch) if not frame.empty and machines.get("gpu") else None
    fast = cpu.loc[cpu["median_ms"].idxmin()] if not cpu.empty else None
    slow = cpu.loc[cpu["median_ms"].idxmax()] if not cpu.empty else None
    slower = []
    if gpu is not None and not gpu.empty and not cpu.empty:
        on_cpu = {r["label"]: r for _, r in cpu.iterrows()}
        slower = [{"label": g["label"], "gpu": g, "cpu": on_cpu[g["label"]],
                   "times": g["median_ms"] / on_cpu[g["label"]]["median_ms"]}
                  for _, g in gpu.iterrows()
                  if g["label"] in on_cpu and g["median_ms"] > on_cpu[g["label"]]["median_ms"]]
    return {"words": "training", "batch": batch, "fast": fast, "slow": slow,
            "gpu_measured": gpu is not None and not gpu.empty, "slower": slower,
            "gpu_command": run_study("training", "gpu"), "cpu_command": run_study("training", "cpu"),
            "figure": figure("training")}


def ratio_range(pairs: list[tuple[str, dict | None]]) -> dict | None:
    """The least and the greatest of labelled within-round ratios: {low: (label, r), high: (label, r)}."""
    found = [(label, r) for label, r in pairs if r]
    if not found:
        return None
    ranked = sorted(found, key=lambda p: p[1]["ratio"])
    return {"low": {"label": ranked[0][0], "ratio": ranked[0][1]},
            "high": {"label": ranked[-1][0], "ratio": ranked[-1][1]}, "count": len(found)}


def knobs(frame: pd.DataFrame, machines: dict) -> dict:
    """On the answering CPU machine, each within rounds: float64's time over float32's (precision, per
    level at batch 1); an image's time at the sweep's largest batch against batch 1, of the fastest
    level there (batch_sweep, medians of one run); a training step at the largest thread count
    against the study's own (training)."""
    cpu = machines.get("cpu")
    precision: list[tuple[str, dict | None]] = []
    doubles = ok_cells(frame, "precision", machine=cpu, device="cpu", batch_size=1, dtype="float64")
    for _, c in doubles.iterrows():
        single = find(frame, "precision", c["label"], machine=cpu)
        precision.append((c["label"], ratio_ci(c, single)))
    sweep = ok_cells(frame, "batch_sweep", machine=cpu, device="cpu")
    batch = None
    if not sweep.empty and sweep["batch_size"].max() > 1:
        largest = sweep[sweep["batch_size"] == sweep["batch_size"].max()]
        best = largest[largest["implementation"].map(registry.computes).astype(bool)]
        if not best.empty:
            best = best.loc[best["images_per_s"].idxmax()]
            one = find(frame, "batch_sweep", best["label"], machine=cpu)
            if one is not None:
                batch = {"label": best["label"], "batch": int(best["batch_size"]), "one": one,
                         "per_image_ms": best["median_ms"] / best["batch_size"],
                         "gain": one["median_ms"] / (best["median_ms"] / best["batch_size"])}
    threads: list[tuple[str, dict | None]] = []
    cells = ok_cells(frame, "training", machine=cpu, device="cpu", dtype="float32")
    if "threads" in cells:
        for _, c in cells[cells["threads"].notna()].iterrows():
            own = steps(frame, cpu, "cpu", int(c["batch_size"]))
            base = own[own["label"] == c["label"]]
            if not base.empty:
                threads.append((f"{c['label']} at batch {int(c['batch_size'])}", ratio_ci(c, base.iloc[0])))
    counts = sorted({int(t) for t in cells["threads"].dropna()}) if "threads" in cells else []
    return {"words": "knobs", "precision": ratio_range(precision), "batch": batch,
            "threads": ratio_range(threads), "thread_count": counts[-1] if counts else None,
            "commands": {s: run_study(s, "cpu") for s in ("precision", "batch_sweep", "training")},
            "figures": {"precision": figure("precision"), "batch": figure("throughput")}}


SECOND_MODE = 1.5  # a mean this far above its median: a second mode of slow calls that the median hides


def spread(levels: list[Level]) -> dict:
    """Per device, the first-written calls' p99 over their median: the widest and the narrowest tail,
    and the call whose mean is furthest above its median, where SECOND_MODE times it or more."""
    devices = []
    for device in DEVICES:
        cells = [lv.first[device] for lv in levels if device in lv.first
                 and math.isfinite(lv.first[device]["p99_ms"]) and registry.computes(lv.implementation)]
        if not cells:
            continue
        tails = sorted(cells, key=lambda c: c["p99_ms"] / c["median_ms"])
        means = max(cells, key=lambda c: c["mean_ms"] / c["median_ms"])
        devices.append({"device": device, "narrow": tails[0], "wide": tails[-1],
                        "mean": means if means["mean_ms"] >= SECOND_MODE * means["median_ms"] else None})
    return {"words": "spread", "devices": devices, "figure": figure("distributions") or figure("histogram")}


def answers(data: ReportData, known: headline.Table | None = None) -> list[str]:
    """The six answers, each worded by its macro of questions.md.j2. known: headline.levels() of data,
    where the caller has it."""
    levels, machines = known or headline.levels(data.frame, data.loc_rows, data.answer)
    found = [cost(levels, machines, data.runs), keras(data.frame, data.runs, levels, machines),
             backends(levels), training(data.frame, machines), knobs(data.frame, machines), spread(levels)]
    return [words.say(TEMPLATE, claims.pop("words"), number=i, **claims) for i, claims in enumerate(found, 1)]
