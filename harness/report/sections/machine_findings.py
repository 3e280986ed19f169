"""DETAILS.md's findings, machine by machine: every study's result in a sentence (the short
answer, six findings, is harness/report/sections/findings.py). Every number is read from a results row."""

import math
from collections.abc import Sequence

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.rundata import answer_run, find, ratio, ratio_ci
from harness.report.markup import words
from harness.report.markup.style import BACKEND_OF
from harness.report.sections import cpu_targets, gpu_section, training_section


def findings(frame: pd.DataFrame, loc_rows: list[dict], runs: Sequence[dict] = ()) -> list[str]:
    out = []
    if frame.empty:
        return ["No results yet: run `make run-all`."]
    for machine in sorted(frame["machine"].unique()):
        out += recorded(frame, machine, "keras")
        out += raw_library_findings(frame, machine)
        out += training_section.findings(frame, machine)
        out += backend_findings(frame, machine)
        # the GPU's targets against their floors: the GPU floor section's table says them
        out += gpu_section.findings(frame, runs, machine)
        out += cpu_targets.target_lines(frame, machine)
    return out  # the lines of code: their own section says each level's


RECORDS = "machine_findings"  # templates/machine_findings.toml: the findings as records
RAW_LADDER = words.table_of(RECORDS)["raw_ladder"]  # the CPU raw library's variants the ladder line quotes
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


# each framework's default in api_levels: the first variant of each level on the framework-ops rung
FRAMEWORK_OPS = tuple(f"{name}/{registry.spec(name).variants[0]}"
                      for name in registry.on_rung("framework ops"))


def raw_library_findings(frame: pd.DataFrame, machine: str) -> list[str]:
    """The CPU ladder from the raw library up (api_levels), and what oneDNN's cache saves (overhead)."""
    out: list[str] = []
    raw = registry.raw_library("cpu")  # its variants tuned and naive: the raw levels' two first attempts
    tuned = find(frame, "api_levels", f"{raw}/{RAW_LADDER['tuned']}", machine=machine) if raw else None
    if raw is None or tuned is None:
        return out
    naive = find(frame, "api_levels", f"{raw}/{RAW_LADDER['naive']}", machine=machine)
    numpy_ref = find(frame, "api_levels", headline.REFERENCE, machine=machine)
    ops = [r for r in (find(frame, "api_levels", label, machine=machine) for label in FRAMEWORK_OPS)
           if r is not None]
    predict = find(frame, "api_levels", headline.HIGH_LEVEL, machine=machine)
    steps = {"naive": naive, "reference": numpy_ref,
             "ops": min(ops, key=lambda r: r["median_ms"]) if ops else None, "predict": predict}
    out.append(words.say(SENTENCES, "cpu_ladder", machine=machine, raw=registry.short(raw), tuned=tuned,
                         steps={k: {"cell": c, "ratio": ratio_ci(c, tuned)}
                                for k, c in steps.items() if c is not None},
                         fastest=machine_fastest(frame, machine)))
    return out + recorded(frame, machine, "raw library")


def machine_fastest(frame: pd.DataFrame, machine: str) -> pd.Series | None:
    """The fastest batch-1 call of the machine's newest api_levels run on the CPU (headline.fastest):
    for the run that answers, measure.fastest_call's answer."""
    run = answer_run(frame, "cpu", machine)
    return headline.fastest(headline.ok_batch1(frame, "api_levels", run, "cpu")) if run else None


def backend_findings(frame: pd.DataFrame, machine: str) -> list[str]:
    """The backends study in sentences: one Keras model's predict and compiled call per backend."""
    out = []
    names = BACKEND_OF  # each Keras level's backend, from its spec
    for device in ("cpu", "gpu"):
        found = {i: find(frame, "backends", f"{i}/predict", device=device, machine=machine) for i in names}
        predict = {i: r for i, r in found.items() if r is not None}
        if len(predict) < 2:
            continue
        fastest = min(predict, key=lambda i: predict[i]["median_ms"])
        calls = {i: find(frame, "backends", f"{i}/{registry.compiled_call(i)}", device=device,
                         machine=machine) for i in names}
        out.append(words.say(SENTENCES, "backends", device=device, machine=machine, fastest=names[fastest],
                             predict=[(names[i], r) for i, r in predict.items()],
                             slower=[(names[i], x) for i, r in predict.items()
                                     if i != fastest and (x := ratio(r, predict[fastest]))],
                             compiled=[(names[i], registry.compiled_call(i), r) for i, r in calls.items()
                                       if r is not None]))
    return out
