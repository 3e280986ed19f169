"""reports/REPORT.md, the answer on its first screen: the question, the headline table, Fig. 1
(cost against code) and at most six findings; then the figures in reading order with captions,
a glossary, the machines and the method. Every number is read from a results row or loc.csv;
every other table is in DETAILS.md (harness/report/details.py). `python -m harness report`."""

import time
from pathlib import Path

import pandas as pd

from harness import DEFAULT_REPORT, registry
from harness.machine.files import write_atomic
from harness.report.claims import drift, headline, quote
from harness.report.claims.rundata import ReportData
from harness.report.figures import captions, cost
from harness.report.markup import tables
from harness.report.markup.style import fmt_ms
from harness.report.sections import cpu_floor, findings, first_screen, machines
from harness.report.sections.gpu_floor_section import MACS

REPORT_PATH = DEFAULT_REPORT

QUESTION = ("LeNet-5 is written at every level of a deep-learning API: hand-written kernels (CUDA C on "
            "the GPU; on the CPU, C compiled for the machine, and loops compiled from Python by Numba), "
            "the raw primitive libraries (cuDNN on the GPU, "
            "oneDNN on the CPU, driven through ctypes), the inference engines a user deploys the Keras "
            "model with (ONNX Runtime, OpenVINO), framework ops (TensorFlow, JAX, PyTorch) and one Keras "
            "model on three backends, with a NumPy reference, all with the same weights and the same "
            "answers. What does each step up the ladder cost in speed per "
            "image, and what does it save in code, on the CPU and on the GPU?")

FIGURES = captions.FIGURES  # (file, title, what to look at), in reading order

GLOSSARY = [
    ("`impl/variant`", "an implementation and how it is called: `tf/function` is TensorFlow ops inside "
     "`tf.function`, `cudnn/graph` the cuDNN level replayed as one CUDA graph, `onednn/naive_nocache` "
     "oneDNN creating its primitives on every call with its primitive cache off; `null` returns zeros "
     "and measures the harness itself"),
    ("floor", "the fastest implementation measured on a device, Python call included; not the "
     "arithmetic, which is computed separately (see [How the numbers are computed]"
     "(#how-the-numbers-are-computed))"),
    ("within-round ratio", "cells are timed in interleaved rounds; the ratio of two cells is the median "
     "over rounds of their medians' ratio in the same round, so a drift in machine speed cancels"),
    ("interval", "95% interval of a median or ratio, from resampling the processes of one run, then "
     "whole rounds within them (a cluster bootstrap); it covers that run, not the machine's drift "
     "between runs (`make reproduce` measures that; `rerun` marks an interval widened by it); a ratio's "
     "interval that includes 1 reads \"no measurable difference\""),
    *((f"*{mark}*", meaning) for mark, meaning in quote.MARKS.items()),
    ("cold start", "the first call of a worker process that started for that cell (tracing, compiling, "
     "allocating); reported only for such cells"),
    ("CUDA graph", "a recorded sequence of GPU kernels and copies replayed by one launch, so the host "
     "enqueues once per call instead of once per kernel"),
    ("host vs device time", "host time is the wall time of a call (array in, probabilities out); device "
     "time is the GPU's own, from CUDA events or a kernel trace"),
    ("tie", "in verify-train, a max-pool window whose top two values were equal within float32 "
     "rounding, where a level took the other, equally valid, branch: a pass"),
]

METHOD = [
    "Every call is timed (`perf_counter_ns`, host array in, host probabilities out) and kept; cells are "
    "interleaved in rounds (A B C A B C ...) in one run per machine; warm-up calls are dropped.",
    "A median is that of all timed calls; its 95% interval comes from resampling processes and then "
    "rounds, not calls, because calls within a round are correlated. It covers the rounds and processes "
    "of one run, not the machine's drift between runs: a second run (`make reproduce`) measures that "
    "drift, the report prints it beside the medians and widens the headline's absolute intervals by it "
    "where it is known (an interval for a rerun); within-round ratios cancel it and are the numbers to "
    "compare.",
    "**Why a within-round ratio differs from the ratio of two medians:** the ratio is the median of "
    "per-round ratios, so a round in which the machine was slow for both cells counts once, as a ratio, "
    "while the medians pool every call; when speed drifts between rounds the two differ, and the "
    "within-round ratio is the one to trust.",
    "Across machines (the CPU against the GPU) there are no shared rounds: those comparisons are of "
    "medians, each with its own interval.",
]


# Datasheet FP32 peaks (non-tensor-core), for the arithmetic line only: not measurements.
PEAK_FLOPS = {"H100": (67e12, "NVIDIA's H100 SXM datasheet")}


def floor_line(data: ReportData) -> str:
    """The floor of each device, measure.floor's answer for the run that answers (never named by hand)."""
    parts = []
    for device, found in data.floors.items():
        cell = (data.frame[(data.frame["run_id"] == found.run_id) & (data.frame["study"] == "api_levels")
                           & (data.frame["cell_id"] == f"{found.label}/{device}/b1/float32")]
                if found.run_id and not data.frame.empty else None)
        shown = quote.quoted(cell.iloc[0]) if cell is not None and not cell.empty else fmt_ms(
            (found.median_ns or float("nan")) / 1e6)
        parts.append(f"{shown} on the {device.upper()} ({found.label})")
    return ("**Floor and arithmetic.** The floor in this report is the fastest measured batch-1 call of "
            "the run that answers (`harness.measure.floor`: every level and variant `api_levels` timed), "
            + (", ".join(parts) if parts else "not measured yet") + ", Python call and copies included.")


def arithmetic_line(frame: pd.DataFrame, machines_by_device: dict, data: ReportData) -> str:
    """The model's arithmetic, computed from its layer shapes, apart from the measured floor; its time
    at the CPU's measured peak where an arithmetic run of the answering machine has one."""
    line = f"The arithmetic is apart: {MACS:,} multiply-adds per image (from the layer shapes)"
    line += cpu_floor.peak_sentence(cpu_floor.arithmetic_row(data.runs, machines_by_device.get("cpu")))
    gpu = machines_by_device.get("gpu") or ""
    peak = next((v for k, v in PEAK_FLOPS.items() if k in gpu), None)
    if peak:
        line += f", {2 * MACS / peak[0] * 1e9:.3g} ns at the GPU's FP32 peak ({peak[1]})"
    return line + first_screen.call_cost_sentence(frame, machines_by_device) + "."


def runs_line(data: ReportData, by_device: dict) -> str:
    """Which runs the headline reads: run id, date, commit (or that none was recorded)."""
    parts = []
    for device, run_id in data.answer.items():
        run = next((r for r in data.runs if r["run_id"] == run_id and r["study"] == "api_levels"), None)
        if run is None:
            continue
        prov = run["env"].get("provenance") or {}
        commit = (f"commit {prov['commit'][:10]}" + (" with local changes" if prov.get("dirty") else "")
                  if prov.get("commit") else "commit not recorded")
        date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run["started"]))
        parts.append(f"{device.upper()} columns from `api_levels` run `{run_id}` on {by_device[device]}, "
                     f"{date}, {commit}")
    return "; ".join(parts)


def partial_lines(partial: list[dict]) -> list[str]:
    """One line per partial run (no completion marker: killed, or still running): never used above,
    and how to finish it."""
    return [f"*partial run, not used* `{run['study']}/{run['run_id']}`: {run['cells_done']} cells finished "
            f"before it stopped; finish it: `{run['finish']}`." for run in partial]


def stale_lines(frame: pd.DataFrame, answer: dict) -> list[str]:
    """One line per level whose numbers in the answering runs were measured on older code (a cell
    that measured nothing, skipped or failed, has no number to be stale)."""
    if frame.empty:
        return []
    cells = frame[frame["run_id"].isin([r for r in answer.values() if r]) & (frame["study"] == "api_levels")
                  & (frame["stale"] != "") & (frame["status"] == "ok")]
    return [f"*stale* {impl}: {why}." for (impl, why), _ in cells.groupby(["implementation", "stale"])]


def fig1_lines(data: ReportData) -> str:
    """' Grey lines (CPU solid, GPU dashed) join ...: CPU: a → b; ...': the lines Fig. 1 draws, named
    (each level's registry `ladder`), so the caption promises no line the runs could not draw."""
    drawn = cost.lines_caption(cost.chains(cost.points(data.frame, data.loc_rows, data.answer)))
    return f" {drawn}" if drawn else ""


def raw_ratios() -> str:
    """'`x oneDNN` and `x cuDNN`': the headline's ratio columns, each device's raw library."""
    return " and ".join(f"`x {registry.short(raw)}`" for raw in headline.RAW.values())


def fastest_sources(frame: pd.DataFrame, loc_rows: list[dict], answer: dict | None) -> str:
    """Where the "fastest call measured" cells come from: every variant `api_levels` timed, in the same
    rounds, and, naming each, the cells another study timed (their ratio is then of medians across runs)."""
    rows, _machines = headline.levels(frame, loc_rows, answer)
    others: dict[str, list[str]] = {}
    for lv in rows:
        for device, cell in lv.cells.items():
            if cell["study"] != headline.STUDY:
                others.setdefault(cell["study"], []).append(f"{cell['label']} on the {device.upper()}")
    text = f"every variant `{headline.STUDY}` timed, in the same rounds"
    if others:
        text += "; " + "; ".join(f"from `{study}`: {', '.join(labels)}"
                                 for study, labels in sorted(others.items()))
        text += " (a faster variant that study timed; beside each, its ratio and the rounds it is taken in)"
    return text


def caveats(data: ReportData, by_device: dict, drifts: dict) -> list[str]:
    """The first screen's notes beside the headline (harness.report.sections.first_screen), each a
    paragraph."""
    levels, _machines = headline.levels(data.frame, data.loc_rows, data.answer)
    gpu_cells = [lv.cells["gpu"] for lv in levels
                 if "gpu" in lv.cells and registry.computes(lv.implementation)]
    fastest_gpu = min(gpu_cells, key=lambda c: c["median_ms"]) if gpu_cells else None
    notes = [first_screen.intervals_note(by_device, drifts),
             first_screen.threads_note(first_screen.cpu_threads(data.runs, data.answer.get("cpu"))),
             first_screen.c_note(data.frame, data.answer.get("cpu")),
             first_screen.resident_note(data.frame, data.runs, fastest_gpu)]
    out: list[str] = []
    for note in notes:
        if note:
            out += [note, ""]
    return out[:-1]


def build(data: ReportData) -> str:
    """REPORT.md: the newest runs' cells, loc.csv and the cross-checks (the rest is DETAILS.md's)."""
    runs, frame, loc_rows = data.runs, data.frame, data.loc_rows
    drifts = drift.of_machines(runs)
    threads = first_screen.cpu_threads(runs, data.answer.get("cpu"))
    table_lines, by_device = headline.render(frame, loc_rows, data.answer, drifts, threads)
    source = runs_line(data, by_device)
    parts = ["# lenet-levels: what each API level costs and saves", "",
             "_Generated by `make report` from `reports/results/` and `reports/loc.csv`: every number is "
             "read from a results row. Every other table is in [DETAILS.md](DETAILS.md)._", "",
             f"**The question.** {QUESTION}", "", "## The answer", ""]
    parts += table_lines
    if source:
        parts += ["", f"{source}. The answer is the newest run's machine (`make report MACHINE=...` names "
                      "another); other machines' runs are in DETAILS. Per device, each level's call as a "
                      "user first writes it (its default: `predict`, eager, tuned) and the fastest call "
                      f"measured at batch 1 ({fastest_sources(frame, loc_rows, data.answer)}), each "
                      f"named; {raw_ratios()} are within-round ratios to the fastest call of that "
                      "device's raw library, with 95% intervals where the rounds support them; code lines "
                      "are pygount's, for inference (training apart)."]
    parts += [f"{line}" for line in ["", *caveats(data, by_device, drifts)] if line is not None]
    stale = stale_lines(frame, data.answer)
    parts += ([""] + stale) if stale else []
    partial = partial_lines(data.partial)
    parts += ([""] + partial) if partial else []
    parts += ["", f"![Fig. 1: {FIGURES[0][1]}](figures/{FIGURES[0][0]})", "",
              f"_Fig. 1: {FIGURES[0][1]}._ {FIGURES[0][2]}{fig1_lines(data)}", "", "### Findings", ""]
    found = findings.findings(frame, runs, loc_rows, data.answer)
    parts += [f"{i}. {line}" for i, line in enumerate(found, 1)]
    parts += ["", "## The figures, in reading order", ""]
    for i, (name, title, look) in enumerate(FIGURES[1:], 2):
        parts += [f"![Fig. {i}: {title}](figures/{name})", "", f"_Fig. {i}: {title}._ {look}", ""]
    parts += ["## Glossary", ""] + [f"- **{term}**: {meaning}." for term, meaning in GLOSSARY]
    parts += ["", "## Machines", "", machines.machine_table(runs)]
    diff = machines.difference_line(runs, by_device.get("cpu"), by_device.get("gpu"))
    parts += ["", diff] if diff else []
    parts += ["", "## How the numbers are computed", ""]
    method = floor_line(data) + " " + arithmetic_line(frame, by_device, data)
    parts += [f"- {line}" for line in METHOD + [method]
              + tables.crosscheck_lines(data.crosschecks)]
    parts += ["", "Every study's full table, verify and verify-train, the cells not measured and why, "
                  "noisy cells and repeatability: [DETAILS.md](DETAILS.md).", ""]
    return "\n".join(parts)


def write(text: str, path: Path = REPORT_PATH) -> Path:
    """REPORT.md or DETAILS.md, whole or not at all (a full disk or a kill keeps the last one)."""
    return write_atomic(path, text)
