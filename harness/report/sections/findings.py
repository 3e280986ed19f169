"""At most six findings in plain words, each one sentence with its numbers and intervals, from the
headline table's rows: what Keras costs and why, what each level saves in code (and the rest of its
bill: memory, start-up, install size), the CPU against the GPU at batch 1 and at a large batch, what
the raw libraries buy, what training costs, and the seed's question (cuDNN -> TensorFlow ops ->
Keras on the GPU). Each finding is its claims (the cells, the comparisons, the verdicts) and the
macro of templates/findings.md.j2 that words them; which cells it compares comes from the registry
(a level's rung, its first-written call, its fastest variant, its raw library)."""

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.headline import Level
from harness.report.claims.rundata import find, ratio_ci, study_rows
from harness.report.markup import words
from harness.report.markup.style import ok_cells
from harness.report.markup.tables import includes_one, inverse
from harness.report.sections import first_screen, gpu_section

TEMPLATE = "findings.md.j2"
BOTTOM = ("hand-written", "raw library")  # the rungs at the foot of the ladder (registry.RUNGS)
OPS = "framework ops"
BESIDE = ("hand-written", "compiled from Python", "inference engine")  # beside the CPU's raw library
HIGH = headline.HIGH_LEVEL.split("/")[0]  # the high-level API's first level (Keras on TensorFlow)
COMPILED = f"{HIGH}/{registry.compiled_call(HIGH)}"  # its model called inside its backend's compiler
STEP, FIT = (f"{HIGH}/{v}" for v in registry.spec(HIGH).train_variants)  # its two ways to train
# the framework-ops level under it on the GPU raw library's ladder (cuDNN -> TensorFlow ops -> Keras)
OPS_UNDER = next((p[p.index(HIGH) - 1] for p in registry.ladder_paths()
                  if p[0] == headline.RAW.get("gpu") and HIGH in p[1:]), None)


def comparison(r: dict | None) -> dict | None:
    """r = time(b) / time(a) within rounds as the `compare` macro words it: a faster ('faster', r),
    slower ('slower', r read the other way) or no measurable difference ('same'); with the study
    whose rounds it is taken in (headline.same_rounds) and whether it is of medians across runs."""
    if not r:
        return None
    verdict = "same" if includes_one(r) else "faster" if r["ratio"] >= 1 else "slower"
    return {"verdict": verdict, "ratio": inverse(r) if verdict == "slower" else r,
            "study": r["study"] if r.get("against") else None, "across_runs": bool(r.get("across_runs"))}


def keras_finding(frame: pd.DataFrame, runs: list[dict], levels: list[Level], machines: dict) -> dict | None:
    """Keras' first-written call on the CPU against the raw library, the share of it `explain` peels
    off first, and (in `overhead`) the same model inside its backend's compiler against `predict`."""
    keras = next((lv for lv in levels if lv.implementation == HIGH), None)
    cpu = machines.get("cpu")
    if keras is None or "cpu" not in keras.first:
        return None
    why = next((r for r in study_rows(runs, "explain", only_ok=False) if r["machine"] == cpu
                and f"{r['implementation']}/{r['variant']}" == headline.HIGH_LEVEL), None)
    first = why["stages"][0] if why is not None else None
    compiled = find(frame, "overhead", COMPILED, machine=cpu)
    predict = find(frame, "overhead", headline.HIGH_LEVEL, machine=cpu)
    both = compiled is not None and predict is not None  # both numbers and their ratio from one study
    return {"words": "keras", "in_predict": first is not None and first["share"] >= 0.5,
            "cell": keras.first["cpu"], "ratio": keras.first_ratios.get("cpu"),
            "raw": registry.short(headline.RAW["cpu"]),
            "stage": None if first is None else {"share": first["share"],
                                                 "name": first.get("short") or first["name"]},
            "compiled": compiled if both else None, "predict": predict if both else None,
            "compared": comparison(ratio_ci(predict, compiled)) if both else None}


def code_finding(levels: list[Level]) -> dict | None:
    """Code lines at the bottom of the ladder, with framework ops and with the high-level API, and
    the rest of the bill on the CPU (bill_claims)."""
    loc = {lv.implementation: lv.loc for lv in levels if lv.loc is not None}
    high = [i for i in registry.on_rung("high-level API") if i in loc]
    if not high:
        return None
    bottom = [i for i in registry.on_rung(*BOTTOM) if i in loc]
    ops = [loc[i] for i in registry.on_rung(OPS) if i in loc]
    biggest = max((loc[i] for i in bottom), default=None)
    return {"words": "code", "high_lines": loc[high[0]], "backends": len(high),
            "bottom": [{"lines": loc[i], "name": registry.display(i).split(": ")[-1]} for i in bottom],
            "ops": (min(ops), max(ops)) if ops else None, "api": registry.display(high[0]).split(" on ")[0],
            "fewer": biggest / loc[high[0]] if biggest else None, "bill": bill_claims(levels)}


BILL = {"memory": "calls_peak_mb", "startup": "startup_s", "install": "install_mb"}  # bill.Bill's fields


def bill_claims(levels: list[Level]) -> dict | None:
    """The cheapest and the dearest level's peak memory, start-up and install size (bill.Bill), where
    the run that answers recorded them for at least two levels."""
    billed = [lv for lv in levels if "cpu" in lv.bills]
    if len(billed) < 2:
        return None
    out = {}
    for what, key in BILL.items():
        ranked = sorted(billed, key=lambda lv: getattr(lv.bills["cpu"], key))
        out[what] = {"low": getattr(ranked[0].bills["cpu"], key), "low_name": ranked[0].name,
                     "high": getattr(ranked[-1].bills["cpu"], key), "high_name": ranked[-1].name}
    return out


def devices_finding(frame: pd.DataFrame, levels: list[Level], machines: dict, runs: list[dict] | None = None,
                    threads: int | None = None) -> dict | None:
    """The GPU against the CPU, each at its fastest measured call (headline.fastest over every level),
    at batch 1 and at the GPU sweep's largest batch; the CPU named with its thread count
    (first_screen.cpu_threads), the sweep's rate beside the kernels trace's where both measured it."""
    computing = [lv for lv in levels if registry.computes(lv.implementation)]
    fastest = {d: min((lv.cells[d] for lv in computing if d in lv.cells), key=lambda c: c["median_ms"],
                      default=None) for d in ("cpu", "gpu")}
    c, g = fastest["cpu"], fastest["gpu"]
    if c is None or g is None:
        return None
    overlap = c["ci_low_ms"] <= g["ci_high_ms"] and g["ci_low_ms"] <= c["ci_high_ms"]
    claims = {"words": "devices", "verdict": "tie" if overlap else "slower" if g["median_ms"] > c["median_ms"]
              else "faster", "threads": threads, "gpu_machine": short(machines["gpu"]),
              "cpu_machine": short(machines["cpu"]), "gpu": g, "cpu": c, "sweep": None, "trace_mega": None,
              "cpu_sweep": None, "sweep_over_cpu": None}
    sweeps = [lv.throughput for lv in computing if lv.throughput is not None]
    if not sweeps:
        return claims
    sweep = claims["sweep"] = max(sweeps, key=lambda cell: cell["images_per_s"])
    trace = gpu_section.kernels_of(study_rows(runs or [], "kernels"), sweep["label"], sweep["machine"],
                                   int(sweep["batch_size"]))
    claims["trace_mega"] = gpu_section.trace_rate(trace) / 1e6 if trace else None
    cpu_sweep = ok_cells(frame, headline.SWEEP, machine=machines["cpu"], device="cpu",
                         batch_size=sweep["batch_size"])
    cpu_sweep = cpu_sweep[cpu_sweep["implementation"].map(registry.computes).astype(bool)]
    if not cpu_sweep.empty:
        best = claims["cpu_sweep"] = cpu_sweep.loc[cpu_sweep["images_per_s"].idxmax()]
        claims["sweep_over_cpu"] = sweep["images_per_s"] / best["images_per_s"]
    return claims


def short(machine: str) -> str:
    return machine.split(": ", 1)[-1]


def raw_finding(levels: list[Level]) -> dict | None:
    """Each device's raw library against its fastest framework ops; on the CPU, the raw library
    against the levels beside it (hand-written, compiled from Python, inference engine)."""
    by = {lv.implementation: lv for lv in levels}
    devices = []
    for device, raw in headline.RAW.items():
        ops = [lv for lv in (by.get(i) for i in registry.on_rung(OPS)) if lv and device in lv.cells]
        if not ops or not by.get(raw) or device not in by[raw].cells:
            continue
        best = min(ops, key=lambda lv: lv.cells[device]["median_ms"])
        devices.append({"device": device, "raw": registry.short(raw),
                        "raw_label": by[raw].cells[device]["label"], "ops_label": best.cells[device]["label"],
                        "compared": comparison(best.ratios.get(device))})
    cpu_raw = headline.RAW.get("cpu")
    raw_cpu = by.get(cpu_raw) if cpu_raw else None
    beside = [{"name": registry.short(impl), "label": by[impl].cells["cpu"]["label"],
               "compared": comparison(by[impl].ratios.get("cpu"))}
              for impl in registry.on_rung(*BESIDE)
              if raw_cpu and "cpu" in raw_cpu.cells and impl in by and "cpu" in by[impl].cells
              and impl != cpu_raw]
    if not devices and not beside:
        return None
    return {"words": "raw", "devices": devices, "cpu_raw": registry.short(cpu_raw) if cpu_raw else None,
            "beside": beside}


def training_finding(frame: pd.DataFrame, machines: dict) -> dict | None:
    """One SGD step of 32 images on the CPU: the fastest level against the slowest, within rounds; in
    the high-level API, its one-batch step against `fit` where `fit` is the slowest."""
    cpu = machines.get("cpu")
    cells = ok_cells(frame, "training", machine=cpu, batch_size=32, dtype="float32", device="cpu")
    if "threads" in cells:
        cells = cells[cells["threads"].isna()]
    if len(cells) < 2:
        return None
    low, high = cells.loc[cells["median_ms"].idxmin()], cells.loc[cells["median_ms"].idxmax()]
    fit, step = (find(frame, "training", FIT, batch=32, machine=cpu),
                 find(frame, "training", STEP, batch=32, machine=cpu))
    return {"words": "training", "low": low, "high": high, "compared": comparison(ratio_ci(high, low)),
            "step_against_fit": comparison(ratio_ci(fit, step))
            if fit is not None and step is not None and high["label"] == FIT else None}


def seed_finding(levels: list[Level]) -> dict:
    """Keras on TensorFlow on the GPU against cuDNN (with TensorFlow ops beside it); where it was not
    measured, why, and Keras on its other backends on the GPU instead."""
    by = {lv.implementation: lv for lv in levels}
    keras, ops = by.get(HIGH), by.get(OPS_UNDER or "")
    others = [by.get(name) for name in registry.KERAS_BACKENDS if name != HIGH]  # Keras' other backends
    return {"words": "seed", "keras": keras if keras and "gpu" in keras.first else None,
            "ops": ops if ops and "gpu" in ops.first else None,
            "why": keras.missing.get("gpu", "not measured") if keras else "not measured",
            "others": [{"cell": lv.first["gpu"], "backend": lv.name.split(" on ")[-1],
                        "ratio": lv.first_ratios.get("gpu")} for lv in others if lv and "gpu" in lv.first],
            "cpu": keras.first["cpu"] if keras and "cpu" in keras.first else None}


def findings(frame: pd.DataFrame, runs: list[dict], loc_rows: list[dict],
             answer: dict | None = None, known: headline.Table | None = None) -> list[str]:
    """The first screen's findings, each worded by its macro; a finding with nothing to say is left out.
    known: headline.levels() of these, where the caller has it."""
    levels, machines = known or headline.levels(frame, loc_rows, answer)
    if not levels:
        return [words.say(TEMPLATE, "no_results")]
    found = [keras_finding(frame, runs, levels, machines), code_finding(levels),  # with the bill
             devices_finding(frame, levels, machines, runs,
                             first_screen.cpu_threads(runs, (answer or {}).get("cpu"))),
             raw_finding(levels), training_finding(frame, machines), seed_finding(levels)]
    return [words.say(TEMPLATE, claims.pop("words"), **claims) for claims in found if claims][:6]
