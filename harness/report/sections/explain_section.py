"""The explain rows in the report: the newest explain run's rows of each machine, the findings'
"Why Keras is slow" line and the section of that name, its sentences generated from the rows (Fig. 7,
which draws the same rows, is figures/explain.py). No framework imported."""


from harness.explain import keras_steps
from harness.explain.ladder import TOLERANCE
from harness.report.markup import words
from harness.report.markup.style import fmt_ms

CITATIONS = (
    "The maintainers say the same: `model.predict` \"is designed for batch processing of large "
    "numbers of inputs. It is not intended for use inside of loops that iterate over your data "
    "and process small numbers of inputs at a time\" (its docstring, Keras 3); it converts the "
    "input to a tf.data dataset, batches it, runs a tf.function and handles callbacks on every "
    "call ([tensorflow/tensorflow#40261](https://github.com/tensorflow/tensorflow/issues/40261)); "
    "\"most of the extra time is spent creating the dataset\" "
    "([tensorflow/tensorflow#33340](https://github.com/tensorflow/tensorflow/issues/33340)).")
METHOD = (
    "Method: (a) an ablation ladder of public calls, timed like any cell and interleaved in rounds; "
    "each step down removes one stage and the difference of neighbouring medians is that stage's "
    "cost, down to the floor (the fastest implementation measured when the explain run chose it, "
    "not the arithmetic{floors}; "
    "timed in the same process and rounds); "
    "(b) for Keras' `predict` on TensorFlow, Keras' own internal steps timed in the order "
    "`Model.predict` runs them (private APIs of Keras 3.15), accepted only when their sum is within "
    "10% of a real `predict` timed in the same loop, the rest shown as 'other'; (c) cProfile for "
    "counts only (a profiler slows Python code and not C code, so it would skew proportions). "
    "`python -m harness explain keras/predict` repeats it.")
WORDS = "explain"  # templates/explain.toml: how a floor the rows recorded is named


def method(rows: list[dict]) -> str:
    """METHOD, naming the floors the rows recorded, per device (rows from before the floor was
    recorded name theirs in their last stage)."""
    floors: dict[str, list[str]] = {}
    for row in rows:
        found = floors.setdefault(row["device"], [])
        if row.get("floor") and row["floor"] not in found:
            found.append(row["floor"])
    words_of = words.table_of(WORDS)["method"]
    named = [" or ".join(words_of.get(label, f"`{label}`") for label in floors[device])
             + f" on the {device.upper()}" for device in ("cpu", "gpu") if floors.get(device)]
    return METHOD.format(floors=": " + ", ".join(named) if named else "")


def explain_rows(runs: list[dict]) -> list[dict]:
    """The rows of the newest explain run of each machine, each with its machine label."""
    found = []
    for run in runs:
        if run["study"] == "explain":
            found += [{**row, "machine": run["machine"]} for row in run["rows"]
                      if row.get("kind") == "explain"]
    return found


def ms(ns: float) -> str:
    return ("-" if ns < 0 else "") + fmt_ms(abs(ns) / 1e6)


# The floor's time in an explain row is its own measurement, not the headline's: each is labelled.
WHERE_FLOOR = "timed in this explain run, beside the call; the headline's figure is `api_levels`'"


def noise_ns(row: dict, stage: dict) -> float | None:
    """How far a ladder stage (one step's median minus the next's) can move by noise alone: the
    half-widths of both steps' 95% intervals, added; None where a step has no interval."""
    steps = {s["step"]: s for s in row.get("steps", [])}
    total = 0.0
    for name in (stage.get("from"), stage.get("to")):
        if name is None:
            continue
        step = steps.get(name)
        if step is None or step.get("ci95_low_ns") is None or step.get("ci95_high_ns") is None:
            return None
        total += max(step["ci95_high_ns"] - step["median_ns"], step["median_ns"] - step["ci95_low_ns"])
    return total


def stage_text(row: dict, i: int) -> str:
    """'name 472 µs (50%)'; a stage within its noise (|cost| no larger than what its two steps'
    intervals allow) says so instead of claiming a negative or tiny cost."""
    stage = row["stages"][i]
    noise = noise_ns(row, stage)
    if noise is not None and abs(stage["ns"]) <= noise:
        return f"{stage_name(row, i)} within its noise ({ms(stage['ns'])}, ±{ms(noise)}: no measurable cost)"
    where = f", {WHERE_FLOOR}" if i == len(row["stages"]) - 1 else ""  # the floor: measured here
    return f"{stage_name(row, i)} {ms(stage['ns'])} ({100 * stage['share']:.0f}%{where})"


def internal_text(internal: dict, stage: dict) -> str:
    """An internal step; 'other' (a real predict minus the steps' sum) is no stage when the sum was
    accepted: it is inside the tolerance the sum is accepted at, and said so."""
    if stage["name"] == "other" and abs(stage["ns"]) <= TOLERANCE * internal["predict_ns"]:
        return (f"other (a real `predict` minus the steps' sum) {ms(stage['ns'])}, within the "
                f"{TOLERANCE:.0%} the sum is accepted at: no measurable stage")
    return f"{stage['name']} {ms(stage['ns'])} ({100 * stage['share']:.0f}%)"


def headline(rows: list[dict]) -> list[str]:
    """The Findings' answer to 'why is Keras slow', from each machine's keras/predict explain row."""
    return [line for row in rows if row["implementation"] == "keras" and row["variant"] == "predict"
            for line in headline_of(row)]


def headline_of(row: dict) -> list[str]:
    first = row["stages"][0]
    line = (f"**Why Keras is slow** ({row['machine']}): of one `model.predict` call on TensorFlow "
            f"({ms(row['steps'][0]['median_ns'])}), {100 * first['share']:.0f}% is the "
            f"{first.get('short') or first['name']} it builds from the NumPy array on every call")
    internal = row.get("internal") or {}
    if internal.get("accepted"):
        by_name = {s["name"]: s for s in internal["stages"]}
        iterators = sum(s["share"] for n, s in by_name.items() if n.startswith("creating the iterator"))
        model = next(s for n, s in by_name.items() if n.startswith("running the predict function"))
        pipeline = by_name[keras_steps.PIPELINE_STAGE]["share"]
        line += (f"; timed inside Keras, building that pipeline and creating its iterator twice per "
                 f"call take {100 * (pipeline + iterators):.0f}%, running the model "
                 f"{100 * model['share']:.0f}%")
    floor = row["stages"][-1]
    return [line + f". The floor this explain run chose ({floor_name(row)}) takes "
                   f"{ms(floor['ns'])} in this explain run's own rounds ({WHERE_FLOOR}): "
                   "see \"Why Keras is slow\" below."]


def floor_name(row: dict) -> str:
    """Which implementation the row's floor was (rows before the oneDNN floor used NumPy)."""
    floor = row.get("floor")
    if not floor:
        return "the NumPy reference"
    return words.table_of(WORDS)["short"].get(floor, floor)


def stage_name(row: dict, i: int) -> str:
    """A stage's name as its row wrote it, except the last: it is the floor (the fastest measured
    implementation when the row was made), which rows before that rule called "the model's
    arithmetic" (it was never the arithmetic, which the method computes apart)."""
    name = row["stages"][i]["name"]
    if i == len(row["stages"]) - 1 and name.startswith("the model's arithmetic"):
        return f"the floor ({floor_name(row)}, the fastest measured implementation then)"
    if i == len(row["stages"]) - 1 and name.startswith(CHOSEN_FLOOR):
        return floor_words(row)
    return name


# how explain rows name their floor: true when the run chose it, not always of the report's rows
CHOSEN_FLOOR = "the fastest measured implementation on this device"


def floor_words(row: dict) -> str:
    """The floor as what this explain run timed beside the call: the fastest measured call when
    the run chose it (harness.measure.floor), which a later api_levels run can beat (the GPU's
    cudnn/graph, before the resident CUDA kernels were measured)."""
    return (f"the floor this explain run chose ({row.get('floor') or floor_name(row)}; the device's "
            "fastest call in this report may differ, see its headline)")


def section(rows: list[dict]) -> list[str]:
    if not rows:
        return ["_No explain results yet: `make explain` (part of `make run-all`)._"]
    out = []
    for row in rows:
        top = row["steps"][0]
        parts = [stage_text(row, i) for i in range(len(row["stages"]))]
        out.append(f"- **{row['implementation']}/{row['variant']}** ({row['device'].upper()}, "
                   f"{row['machine']}): one call takes {ms(top['median_ns'])}. Peeled step by "
                   f"step: {'; '.join(parts)}.")
        internal = row.get("internal")
        if internal and "stages" in internal:
            verdict = ("within 10% of a real `predict` in the same loop: accepted" if internal["accepted"]
                       else "more than 10% away from a real `predict`: not accepted, shown for reference")
            steps = [internal_text(internal, s) for s in internal["stages"]]
            out.append(f"  Keras' own steps, in order ({ms(internal['sum_ns'])} summed against "
                       f"{ms(internal['predict_ns'])} for `predict`, {verdict}): {'; '.join(steps)}.")
        counts = row["counts"]
        if counts.get("iterators_created") or counts.get("datasets_created"):
            out.append(f"  One call (cProfile, counts only) runs {counts['function_calls']:,} Python "
                       f"function calls and creates {counts['datasets_created']} tf.data datasets and "
                       f"{counts['iterators_created']} iterators.")
        elif counts:
            out.append(f"  One call runs {counts['function_calls']:,} Python function calls "
                       "(cProfile, counts only) and makes no tf.data dataset.")
    return out + ["", method(rows), "", CITATIONS]
