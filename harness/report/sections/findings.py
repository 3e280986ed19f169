"""At most six findings in plain words, each one sentence with its number and interval, generated
from the headline table's rows: what Keras costs and why, what each level saves in code (and what
the rest of its bill is: memory, start-up, install size), the CPU
against the GPU at batch 1 and at a large batch, what the raw libraries buy, what training
costs, and the seed's question (cuDNN -> TensorFlow ops -> Keras on the GPU)."""

import math

import pandas as pd

from harness import registry
from harness.report.claims import headline, quote
from harness.report.claims.headline import Level
from harness.report.claims.rundata import find, ratio_ci
from harness.report.markup.tables import includes_one, inverse, sig3
from harness.report.sections import explain_section, first_screen, gpu_section

NAMES = {name: registry.short(name) for name in registry.REGISTRY}  # each level's spec: `short`
BOTTOM = ("hand-written", "raw library")  # the rungs at the foot of the ladder (registry.RUNGS)
OPS = "framework ops"
BESIDE = ("hand-written", "compiled from Python", "inference engine")  # beside the CPU's raw library


def with_ci(cell: pd.Series) -> str:
    """A number as the first screen quotes it: interval where supported, and its marks (few processes
    included: a finding quoting a cell of one process says so, as the headline does)."""
    return quote.quoted(cell, headline=True)


def per_s(cell: pd.Series) -> str:
    """Images per second with the interval that the median's gives (batch / time)."""
    b, rate = cell["batch_size"], f"{int(float(sig3(cell['images_per_s']))):,}"
    found = "".join(f" *{m}*" for m in quote.marks(cell, headline=True))
    if math.isnan(cell["ci_low_ms"]):
        return f"{rate} [no interval]{found}"
    lo, hi = b / (cell["ci_high_ms"] / 1e3), b / (cell["ci_low_ms"] / 1e3)
    return f"{rate} [{int(float(sig3(lo))):,}–{int(float(sig3(hi))):,}]{found}"


x_of = quote.times  # '1880x [1670–2530]', '(no measurable difference)' where the interval includes 1


def compare(a: str, b: str, r: dict | None) -> str:
    """A sentence part from r = time(b) / time(a) within rounds: a faster, slower, or no difference."""
    if not r:
        return f"{a} against {b}: no within-round ratio"
    if r.get("across_runs"):  # cells of different runs (headline.ratio_of_medians)
        return compare(a, b, {**r, "across_runs": False}) + " (a ratio of medians across runs)"
    if r.get("against"):  # within the rounds of another study (headline.same_rounds)
        return compare(a, b, {**r, "against": None}) + f" (within the rounds of `{r['study']}`)"
    if includes_one(r):
        return f"{a} and {b} show no measurable difference ({sig3(r['ratio'])}x)"
    if r["ratio"] >= 1:
        return f"{a} is {x_of(r)} faster than {b}"
    return f"{a} is {x_of(inverse(r))} slower than {b}"


def keras_finding(frame: pd.DataFrame, runs: list[dict], levels: list[Level], machines: dict) -> str | None:
    by = {lv.implementation: lv for lv in levels}
    cpu = machines.get("cpu")
    keras = by.get("keras")
    if keras is None or "cpu" not in keras.first:
        return None
    cell, raw = keras.first["cpu"], headline.RAW["cpu"]
    why = next((r for r in explain_section.explain_rows(runs) if r["implementation"] == "keras"
                and r["variant"] == "predict" and r["machine"] == cpu), None)
    first = why["stages"][0] if why is not None else None
    head = ("Keras' cost is in `model.predict`, not in the model" if first and first["share"] >= 0.5
            else "What Keras costs")
    line = (f"**{head}:** on the CPU, `model.predict` on TensorFlow takes {with_ci(cell)} per image, "
            f"{x_of(keras.first_ratios.get('cpu'))} the time of the raw library "
            f"({NAMES[raw]}'s fastest call)")
    if first is not None:
        line += (f", and {100 * first['share']:.0f}% of each call is the first stage `explain` peels off "
                 f"({first.get('short') or first['name']}, built from the NumPy array on every call)")
    function = find(frame, "overhead", "keras/function", machine=cpu)
    predict = find(frame, "overhead", "keras/predict", machine=cpu)
    if function is not None and predict is not None:  # both numbers and their ratio from one study
        line += (f"; in `overhead`, the same model called inside `tf.function` takes {with_ci(function)} "
                 f"against `predict`'s {with_ci(predict)}: "
                 + compare("`tf.function`", "`predict`", ratio_ci(predict, function)))
    return line + "."


def code_finding(levels: list[Level]) -> str | None:
    loc = {lv.implementation: lv.loc for lv in levels if lv.loc is not None}
    high = [i for i in registry.on_rung("high-level API") if i in loc]
    if not high:
        return None
    bottom = [i for i in registry.on_rung(*BOTTOM) if i in loc]
    raws = [f"{loc[impl]} with {registry.display(impl).split(': ')[-1]}" for impl in bottom]
    if raws:
        raws[0] = raws[0].replace(" with ", " lines with ", 1)
    ops = [loc[i] for i in registry.on_rung(OPS) if i in loc]
    biggest = max((loc[i] for i in bottom), default=None)
    api = registry.display(high[0]).split(" on ")[0]
    return (f"**What each level costs in code:** inference takes {', '.join(raws)} at the bottom, "
            + (f"{min(ops)}–{max(ops)} with framework ops, " if ops else "")
            + f"and {loc[high[0]]} with {api} (one model for all {len(high)} backends)"
            + (f", {sig3(biggest / loc[high[0]])}x fewer than the largest level at the bottom"
               if biggest else "")
            + " (pygount code lines, exact counts; training code apart)" + bill_part(levels) + ".")


def bill_value(level: Level, key: str) -> str:
    value = getattr(level.bills["cpu"], key)
    return f"{value:.2g} s" if key.endswith("_s") else f"{value:,.0f} MiB"


def bill_part(levels: list[Level]) -> str:
    """'; and in the rest of the bill on the CPU, ...': the cheapest and the dearest level's memory,
    start-up and install size (bill.Bill), where the run that answers recorded them."""
    billed = [lv for lv in levels if "cpu" in lv.bills]
    if len(billed) < 2:
        return ""
    parts = []
    for what, key in (("peak memory", "calls_peak_mb"), ("start-up to the first answer", "startup_s"),
                      ("install size beyond the harness", "install_mb")):
        ranked = sorted(billed, key=lambda lv: getattr(lv.bills["cpu"], key))
        low, high = ranked[0], ranked[-1]
        parts.append(f"{what} from {bill_value(low, key)} ({low.name}) "
                     f"to {bill_value(high, key)} ({high.name})")
    return "; on the CPU, the rest of the bill: " + ", ".join(parts) + " (`api_levels`, Fig. 12)"


def devices_finding(frame: pd.DataFrame, levels: list[Level], machines: dict, runs: list[dict] | None = None,
                    threads: int | None = None) -> str | None:
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
    verdict = ("is no measurably faster than" if overlap else
               "does not beat" if g["median_ms"] > c["median_ms"] else "beats")
    head = "The GPU pays off only with large batches" if verdict != "beats" else "The CPU against the GPU"
    cores = "one thread of " if threads == 1 else f"{threads} threads of " if threads else ""
    line = (f"**{head}:** at batch 1 the GPU ({short(machines['gpu'])}) "
            f"{verdict} the CPU ({cores}{short(machines['cpu'])}), each at its fastest measured call: "
            f"{g['label']} takes {with_ci(g)} per image against {c['label']}'s {with_ci(c)}")
    sweeps = [lv.throughput for lv in computing if lv.throughput is not None]
    if not sweeps:
        return line + "."
    sweep = max(sweeps, key=lambda cell: cell["images_per_s"])
    line += (f"; at batch {int(sweep['batch_size'])} the GPU's fastest, {sweep['label']}, runs "
             f"{per_s(sweep)} images/s (`batch_sweep`")
    trace = gpu_section.kernels_of(gpu_section.kernel_rows(runs or []), sweep["label"], sweep["machine"],
                                   int(sweep["batch_size"]))
    line += (f"; the `kernels` trace's back-to-back calls in one process give "
             f"{gpu_section.trace_rate(trace) / 1e6:.2f} M, DETAILS' GPU targets say why)" if trace else ")")
    cpu_sweep = frame[(frame["study"] == headline.SWEEP) & (frame["status"] == "ok")
                      & (frame["machine"] == machines["cpu"]) & (frame["device"] == "cpu")
                      & frame["implementation"].map(registry.computes)
                      & (frame["batch_size"] == sweep["batch_size"])]
    if not cpu_sweep.empty:
        best = cpu_sweep.loc[cpu_sweep["images_per_s"].idxmax()]
        line += (f" against the CPU's fastest at that batch, {best['label']}'s {per_s(best)}, "
                 f"{sig3(sweep['images_per_s'] / best['images_per_s'])}x (medians on two machines: no "
                 "within-round ratio)")
    return line + "."


def short(machine: str) -> str:
    return machine.split(": ", 1)[-1]


def raw_finding(levels: list[Level]) -> str | None:
    by = {lv.implementation: lv for lv in levels}
    parts = []
    for device, raw in headline.RAW.items():
        ops = [lv for lv in (by.get(i) for i in registry.on_rung(OPS)) if lv and device in lv.cells]
        if not ops or not by.get(raw) or device not in by[raw].cells:
            continue
        best = min(ops, key=lambda lv: lv.cells[device]["median_ms"])
        raw_name = f"{NAMES[raw]} ({by[raw].cells[device]['label']})"
        parts.append(f"on the {device.upper()}, " + compare(raw_name, f"the fastest framework ops "
                                                           f"({best.cells[device]['label']})",
                                                           best.ratios.get(device)))
    cpu_raw = headline.RAW.get("cpu")
    raw_cpu, beside = by.get(cpu_raw) if cpu_raw else None, []
    for impl in registry.on_rung(*BESIDE):
        level = by.get(impl)
        if (cpu_raw and raw_cpu and "cpu" in raw_cpu.cells and level and "cpu" in level.cells
                and impl != cpu_raw):
            label = f"the {NAMES[impl]} level ({level.cells['cpu']['label']})"
            beside.append(compare(NAMES[cpu_raw], label, level.ratios.get("cpu")))  # named just before
    if beside:
        parts.append("and on the CPU, " + "; ".join(beside))
    if not parts:
        return None
    return ("**What the raw libraries buy at batch 1, and what is beside them:** " + "; ".join(parts)
            + " (each level's fastest call measured; within-round ratios of medians, `api_levels`).")


def training_finding(frame: pd.DataFrame, machines: dict) -> str | None:
    cpu = machines.get("cpu")
    cells = frame[(frame["study"] == "training") & (frame["status"] == "ok") & (frame["machine"] == cpu)
                  & (frame["batch_size"] == 32) & (frame["dtype"] == "float32")
                  & (frame["device"] == "cpu")] if not frame.empty else frame
    if "threads" in cells:
        cells = cells[cells["threads"].isna()]
    if len(cells) < 2:
        return None
    low, high = cells.loc[cells["median_ms"].idxmin()], cells.loc[cells["median_ms"].idxmax()]
    line = (f"**What training costs:** one SGD step of 32 images on the CPU takes "
            f"{with_ci(low)} with {low['label']} and {with_ci(high)} with {high['label']}: "
            + compare(low["label"], high["label"], ratio_ci(high, low)))
    fit, step = (find(frame, "training", "keras/fit", batch=32, machine=cpu),
                 find(frame, "training", "keras/train_on_batch", batch=32, machine=cpu))
    if fit is not None and step is not None and high["label"] == "keras/fit":
        line += "; in Keras, " + compare("`train_on_batch`", "`fit`", ratio_ci(fit, step))
    return line + " (within rounds, `training`)."


def seed_finding(levels: list[Level], machines: dict) -> str:
    by = {lv.implementation: lv for lv in levels}
    keras, ops = by.get("keras"), by.get("tf")
    if keras and "gpu" in keras.first:
        return (f"**The seed's question, cuDNN → TensorFlow ops → Keras on the GPU:** Keras `predict` on "
                f"TensorFlow takes {with_ci(keras.first['gpu'])} per image, "
                f"{x_of(keras.first_ratios.get('gpu'))} the time of cuDNN's fastest call"
                + (f", TensorFlow ops {with_ci(ops.first['gpu'])} ({x_of(ops.first_ratios.get('gpu'))})"
                   if ops and "gpu" in ops.first else "") + ".")
    others = [by.get(name) for name in registry.KERAS_BACKENDS if name != "keras"]  # Keras' other backends
    measured = [(lv, lv.first["gpu"]) for lv in others if lv and "gpu" in lv.first]
    why = keras.missing.get("gpu", "not measured") if keras else "not measured"
    return ("**The seed's question (Keras on TensorFlow on the GPU) is not answered by these runs** "
            f"({why}); measured instead, Keras `predict` on the GPU takes "
            + ", ".join(f"{with_ci(c)} on {lv.name.split(' on ')[-1]} "
                        f"({x_of(lv.first_ratios.get('gpu'))} cuDNN's time)"
                        for lv, c in measured)
            + (f", and on TensorFlow on the CPU {with_ci(keras.first['cpu'])}"
               if keras and "cpu" in keras.first else "")
            + "; on a GPU server, `pip install 'tensorflow[and-cuda]'` and `make gpu-study` measure it.")


def findings(frame: pd.DataFrame, runs: list[dict], loc_rows: list[dict],
             answer: dict | None = None) -> list[str]:
    levels, machines = headline.levels(frame, loc_rows, answer)
    if not levels:
        return ["No results yet: run `make run-all`."]
    lines = [keras_finding(frame, runs, levels, machines), code_finding(levels),  # with the bill
             devices_finding(frame, levels, machines, runs,
                             first_screen.cpu_threads(runs, (answer or {}).get("cpu"))),
             raw_finding(levels), training_finding(frame, machines),
             seed_finding(levels, machines)]
    return [line for line in lines if line][:6]
