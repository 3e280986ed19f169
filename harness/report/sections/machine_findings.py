"""DETAILS.md's findings, machine by machine: every study's result in a sentence (the short
answer, six findings, is harness/report/sections/findings.py). Every number is read from a results row."""

import math
from collections.abc import Sequence

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.rundata import answer_run, find, ratio, ratio_ci
from harness.report.markup import quote, words
from harness.report.markup.style import BACKEND_OF
from harness.report.markup.tables import fmt_ratio, ms, sig3
from harness.report.sections import cpu_targets, gpu_floor_section, gpu_section, training_section


def findings(frame: pd.DataFrame, loc_rows: list[dict], runs: Sequence[dict] = ()) -> list[str]:
    out = []
    if frame.empty:
        return ["No results yet: run `make run-all`."]
    for machine in sorted(frame["machine"].unique()):
        out += recorded(frame, machine, "keras")
        out += raw_library_findings(frame, machine)
        out += training_section.findings(frame, machine)
        out += backend_findings(frame, machine)
        out += gpu_floor_section.target_lines(frame, runs, machine)
        out += gpu_section.findings(frame, runs, machine)
        out += cpu_targets.target_lines(frame, machine)
    out += code_sentence(loc_rows)
    return out


RECORDS = "machine_findings"  # templates/machine_findings.toml: the findings as records
SENTENCES = "machine_findings.md.j2"


def recorded(frame: pd.DataFrame, machine: str, group: str) -> list[str]:
    """machine_findings.toml's findings of a group said on the machine: each whose cells were all
    measured there, with what its record computes, worded by its macro."""
    out = []
    for record in (r for r in words.table_of(RECORDS)["finding"] if r["group"] == group):
        cells = {name: find(frame, record["study"], label, machine=machine)
                 for name, label in record["cells"].items()}
        if any(cell is None for cell in cells.values()):
            continue
        claims = computed(record, cells, frame, machine)
        if claims is not None:
            out.append(words.say(SENTENCES, record["words"], machine=machine, **cells, **claims))
    return out


def computed(record: dict, cells: dict, frame: pd.DataFrame, machine: str) -> dict | None:
    """What a finding's record asks of its cells (machine_findings.toml says what each key means), or
    None where it has nothing to say (a cold start not measured in the cell's own process)."""
    claims: dict = {f"{a}_over_{b}": ratio(cells[a], cells[b]) for a, b in record.get("ratios", [])}
    claims |= {f"{a}_over_{b}": ratio_ci(cells[a], cells[b]) for a, b in record.get("intervals", [])}
    if "above_fastest" in record:
        fastest = machine_fastest(frame, machine)
        claims["fastest"] = fastest
        median = cells[record["above_fastest"]]["median_ms"]
        claims["above_fastest"] = None if fastest is None else 1 - fastest["median_ms"] / median
    if "cold_start" in record:
        cold = cells[record["cold_start"]]
        if math.isnan(cold["cold_start_ms"]) or cold["own_process"] is False:
            return None
        claims.update(cold_ms=cold["cold_start_ms"],
                      cold_over_steady=cold["cold_start_ms"] / cold["median_ms"])
    return claims


def code_sentence(loc_rows: list[dict]) -> list[str]:
    """Lines of code for inference (the headline's numbers: headline.inference_loc), with the
    training step counted apart and named."""
    inference = {impl: headline.inference_loc(loc_rows, impl) for impl in registry.levels()}
    training: dict[str, int] = {}
    for row in loc_rows:
        if row["part"] == "training step":
            training[row["package"]] = training.get(row["package"], 0) + row["code"]
    shared = sum(r["code"] for r in loc_rows if r["api_level"] == "shared")
    raw, high = registry.raw_library("gpu"), registry.on_rung("high-level API")
    raw_loc, high_loc = inference.get(raw or ""), inference.get(high[0]) if high else None
    if not raw or not raw_loc or not high_loc:
        return []
    named = ", ".join(f"{registry.short(i)} {inference[i] if inference[i] is not None else '-'}"
                      for i in registry.levels() if i != raw and i not in high)
    apart = ", ".join(f"{pkg} {n}" for pkg, n in sorted(training.items()))
    return [f"Code for inference: the {registry.short(raw)} level takes {raw_loc} lines, "
            f"{registry.short(high[0]).split('/')[0]} {high_loc} "
            f"({sig3(raw_loc / high_loc)}x; one package for "
            f"all {len(high)} backends), {named} "
            f"(pygount code lines, as in REPORT's headline; the shared loaders, {shared} lines, apart). "
            f"The training step, counted apart: {apart or 'none'}."]


# each framework's default in api_levels: the first variant of each level on the framework-ops rung
FRAMEWORK_OPS = tuple(f"{name}/{registry.spec(name).variants[0]}"
                      for name in registry.on_rung("framework ops"))


def raw_library_findings(frame: pd.DataFrame, machine: str) -> list[str]:
    """The CPU ladder from the raw library up (api_levels), and what oneDNN's cache saves (overhead)."""
    out: list[str] = []
    raw = registry.raw_library("cpu")  # its variants tuned and naive: the raw levels' two first attempts
    tuned = find(frame, "api_levels", f"{raw}/tuned", machine=machine) if raw else None
    if raw is None or tuned is None:
        return out
    naive = find(frame, "api_levels", f"{raw}/naive", machine=machine)
    numpy_ref = find(frame, "api_levels", headline.REFERENCE, machine=machine)
    ops = [r for r in (find(frame, "api_levels", label, machine=machine) for label in FRAMEWORK_OPS)
           if r is not None]
    best_ops = min(ops, key=lambda r: r["median_ms"]) if ops else None
    predict = find(frame, "api_levels", headline.HIGH_LEVEL, machine=machine)
    line = (f"**The CPU ladder on {machine}, raw library → framework ops → Keras** (`api_levels`, "
            f"ratios within rounds): {registry.short(raw)} tuned takes {ms(tuned['median_ms'])} per image")
    steps = [(naive, f"{registry.short(raw)} naive (everything created per call)"),
             (numpy_ref, "the NumPy reference"),
             (best_ops, f"the fastest framework-ops level ({best_ops['label']})" if best_ops is not None
              else ""), (predict, "Keras `model.predict`")]
    parts = [f"{what} {ms(r['median_ms'])} ({fmt_ratio(ratio_ci(r, tuned), 'x')} tuned)" for r, what in steps
             if r is not None]
    if parts:
        line += "; " + ", ".join(parts)
    out.append(line + "." + fastest_sentence(frame, machine))
    return out + recorded(frame, machine, "raw library")


def machine_fastest(frame: pd.DataFrame, machine: str) -> pd.Series | None:
    """The fastest batch-1 call of the machine's newest api_levels run on the CPU (headline.fastest):
    for the run that answers, measure.floor's answer."""
    run = answer_run(frame, "cpu", machine)
    return headline.fastest(headline.ok_batch1(frame, "api_levels", run, "cpu")) if run else None


def fastest_sentence(frame: pd.DataFrame, machine: str) -> str:
    """' The fastest call measured on this CPU is numba/fused, 22.2 µs [...]' (machine_fastest)."""
    best = machine_fastest(frame, machine)
    if best is None:
        return ""
    return f" The fastest call measured on this CPU is {best['label']}, {quote.quoted(best)} (`api_levels`)."


def backend_findings(frame: pd.DataFrame, machine: str) -> list[str]:
    """The backends study in sentences: one Keras model's predict and compiled call per backend."""
    out = []
    names = BACKEND_OF  # each Keras level's backend, from its spec
    compiled = {i: registry.compiled_call(i) for i in names}
    for device in ("cpu", "gpu"):
        found = {i: find(frame, "backends", f"{i}/predict", device=device, machine=machine)
                 for i in names}
        predict = {i: r for i, r in found.items() if r is not None}
        if len(predict) < 2:
            continue
        fastest = min(predict, key=lambda i: predict[i]["median_ms"])
        parts = [f"{ms(r['median_ms'])} on {names[i]}" for i, r in predict.items()]
        slowdowns = [f"{names[i]} {sig3(ratio(r, predict[fastest]))}x" for i, r in predict.items()
                     if i != fastest and ratio(r, predict[fastest])]
        line = (f"**One Keras model, three backends** ({device.upper()}, {machine}): `model.predict` "
                f"takes {', '.join(parts)} per image; against {names[fastest]}, "
                f"{', '.join(slowdowns)} (within rounds).")
        calls = {i: find(frame, "backends", f"{i}/{compiled[i]}", device=device, machine=machine)
                 for i in names}
        fast = [f"{ms(r['median_ms'])} ({compiled[i]}, {names[i]})" for i, r in calls.items()
                if r is not None]
        if fast:
            line += f" Compiled, the same model's call takes {', '.join(fast)}."
        out.append(line)
    return out
