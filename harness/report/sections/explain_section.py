"""The explain rows in the report: the newest explain run's rows of each machine, the findings'
"Why Keras is slow" line and the section of that name, its sentences generated from the rows (Fig. 7,
which draws the same rows, is figures/explain.py). No framework imported."""


from harness.explain import keras_steps
from harness.explain.ladder import TOLERANCE
from harness.report.markup import words

TEMPLATE = "explain.md.j2"  # the section's words, and the findings' "Why Keras is slow"
WORDS = "explain"  # templates/explain.toml: how a floor the rows recorded is named


def method(rows: list[dict]) -> str:
    """The method paragraph, naming the floors the rows recorded, per device (rows from before the
    floor was recorded name theirs in their last stage)."""
    floors: dict[str, list[str]] = {}
    for row in rows:
        found = floors.setdefault(row["device"], [])
        if row.get("floor") and row["floor"] not in found:
            found.append(row["floor"])
    named = words.table_of(WORDS)["method"]
    return words.say(TEMPLATE, "method", floors=[
        {"device": device, "names": [{"label": label, "words": named.get(label)} for label in floors[device]]}
        for device in ("cpu", "gpu") if floors.get(device)])


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


def stage_claims(row: dict, i: int) -> dict:
    """A ladder stage as the `stage` macro words it: its name, cost and share; `noise` where its cost
    is within what its two steps' intervals allow (no measurable cost); `floor` for the last stage
    (timed in the explain run itself)."""
    stage = row["stages"][i]
    noise = noise_ns(row, stage)
    return {"name": stage_name(row, i), "ns": stage["ns"], "share": stage["share"],
            "noise": noise if noise is not None and abs(stage["ns"]) <= noise else None,
            "floor": i == len(row["stages"]) - 1}


def internal_claims(internal: dict, stage: dict) -> dict:
    """An internal step; 'other' (a real predict minus the steps' sum) is no stage when the sum was
    accepted: it is inside the tolerance the sum is accepted at (`within`)."""
    return {**stage, "within": stage["name"] == "other"
            and abs(stage["ns"]) <= TOLERANCE * internal["predict_ns"]}


def inside(row: dict) -> dict | None:
    """Inside Keras' predict, where explain's split of one call was accepted (its steps add up to the
    call): the share that is building the tf.data pipeline and its iterators, and the model's run."""
    internal = row.get("internal") or {}
    if not internal.get("accepted"):
        return None
    by_name = {s["name"]: s for s in internal["stages"]}
    iterators = sum(s["share"] for n, s in by_name.items() if n.startswith("creating the iterator"))
    model = next(s for n, s in by_name.items() if n.startswith("running the predict function"))
    return {"pipeline": by_name[keras_steps.PIPELINE_STAGE]["share"] + iterators, "model": model["share"]}


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
    the run chose it (harness.measure.fastest_call), which a later api_levels run can beat (the GPU's
    cudnn/graph, before the resident CUDA kernels were measured)."""
    return f"the floor this explain run chose ({row.get('floor') or floor_name(row)}; see the method)"


def section(rows: list[dict]) -> list[str]:
    if not rows:
        return [words.say(TEMPLATE, "no_rows")]
    out = []
    for row in rows:
        out.append(words.say(TEMPLATE, "row", label=f"{row['implementation']}/{row['variant']}",
                             device=row["device"], machine=row["machine"],
                             call_ns=row["steps"][0]["median_ns"],
                             stages=[stage_claims(row, i) for i in range(len(row["stages"]))]))
        internal = row.get("internal")
        if internal and "stages" in internal:  # a continuation of the row's item: indented
            out.append("  " + words.say(TEMPLATE, "internal", internal=internal, tolerance=TOLERANCE,
                                        stages=[internal_claims(internal, s) for s in internal["stages"]]))
        if row["counts"]:
            out.append("  " + words.say(TEMPLATE, "counts", counts=row["counts"]))
    return out + ["", method(rows), "", words.say(TEMPLATE, "citations")]
