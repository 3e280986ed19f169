"""reports/DETAILS.md: every table the short report leaves out, generated from the result files
alone (and loc.csv): the findings machine by machine, each study's full table, the cold starts,
verify and verify-train, the cells not measured grouped by reason, noisy cells, repeatability
and the runs behind the report. `python -m harness report` writes it beside REPORT.md."""

import dataclasses
from collections import Counter
from pathlib import Path

import pandas as pd

from harness import ROOT, registry
from harness.draw.style import caption
from harness.measure.store import stats
from harness.report import markdown
from harness.report.claims import bill, headline, loc, reproduce, validity
from harness.report.claims.rundata import ReportData, find, ratio_ci, study_rows
from harness.report.markup import quote, tables, words
from harness.report.markup.style import ok_cells
from harness.report.markup.tables import fmt_ratio, ms, table
from harness.report.sections import (
    cpu_floor,
    explain_section,
    gpu_floor_section,
    gpu_section,
    gpu_static_section,
    kernel_stages_section,
    machine_findings,
    training_section,
)

NO_GPU = "no NVIDIA GPU on this machine"
TEMPLATE = "details.md.j2"  # in harness/report/templates/: the words; this module computes what they say


def latency_table(frame: pd.DataFrame, study: str, with_device: bool = False) -> str:
    """Every ok cell of a study, with its ratio to the reference level's default call within rounds:
    a table per device, what every row of it shares said once above it (tables.compact)."""
    cells = ok_cells(frame, study)
    if cells.empty:
        return f"_No results for study `{study}` yet._"
    return "\n\n".join(device_latency(frame, study, group, with_device)
                        for _, group in cells.groupby("device", sort=False))


def device_latency(frame: pd.DataFrame, study: str, cells: pd.DataFrame, with_device: bool) -> str:
    """One device's rows of latency_table."""
    reference = headline.REFERENCE
    rows = []
    for _, r in cells.iterrows():
        base = find(frame, study, reference, machine=r["machine"], batch=r["batch_size"],
                    dtype=r["dtype"])
        rel = ratio_ci(r, base) if base is not None and r["label"] != reference else None
        flags = " ".join(quote.caveats(r))
        row = [r["label"], r["device"], r["batch_size"], r["dtype"], ms(r["median_ms"]),
               quote.ci_column(r), ms(r["p99_ms"]), r["n"], fmt_ratio(rel), flags or "-"]
        if with_device:
            row.insert(5, ms(r["device_median_ms"]))
        rows.append(row)
    headers = ["implementation/variant", "device", "batch", "dtype", "median", "95% CI of median",
               "p99", "calls", f"x {reference.split('/')[0]} (within rounds) [95% CI]", "flags"]
    if with_device:
        headers.insert(5, "device time (median)")
    return tables.compact(headers, rows)


def not_measured(frame: pd.DataFrame) -> list[str]:
    """Cells that have no number, grouped by reason: the expected one (GPU cells on a machine
    without a GPU) as one count per machine, every other reason with its cells."""
    missing = frame[frame["status"] != "ok"] if not frame.empty else frame
    if missing.empty:
        return ["_None._"]
    out = []
    expected = missing[missing["reason"].str.startswith(NO_GPU)]
    for machine, count in sorted(Counter(expected["machine"]).items()):
        out.append(f"- {count} GPU cells on {machine}: {expected['reason'].iloc[0]} (expected).")
    rest = missing[~missing["reason"].str.startswith(NO_GPU)]
    if not rest.empty:
        out += ["", table(["status", "reason", "machine", "cells"],
                          [[status, reason, machine, ", ".join(f"{r['study']}:{r['cell_id']}"
                                                               for _, r in group.iterrows())]
                           for (status, reason, machine), group
                           in rest.groupby(["status", "reason", "machine"])])]
    return out


def lines(block: list[str]) -> str:
    """A block of lines another module of the report made, placed whole ('' for none)."""
    return "\n".join(block)


def code_lines(data: ReportData) -> str:
    """Each level's lines as first written (the headline's: loc.first_written), what they count, and
    every variant's inference lines; then every counted file's lines."""
    whole: dict[str, int] = {}
    for r in loc.files(data.loc_rows):
        if r["part"] not in loc.APART:
            whole[r["package"]] = whole.get(r["package"], 0) + r["code"]
    levels = table(["level", "as first written (the headline's)", "what it counts",
                    "every variant's inference lines"],
                   [[registry.display(name), loc.first_written(data.loc_rows, name) or "–",
                     ", ".join(f"`{i}`" for i in loc.first_written_code(name)) or "every inference file",
                     whole.get(registry.spec(name).package or "", "–")] for name in registry.levels()])
    parts: dict[tuple[str, str], list[str]] = {}  # (package, part) -> 'file code/comment' of each file
    for r in loc.files(data.loc_rows):
        parts.setdefault((r["package"], r["part"]), []).append(f"{r['file']} {r['code']}/{r['comment']}")
    files = table(["package", "part", "each file: code lines/comment lines"],
                  [[package, part, ", ".join(found)] for (package, part), found in parts.items()])
    return levels + "\n\n" + files


def cold_starts(data: ReportData) -> str:
    cold = ok_cells(data.frame, "api_levels")
    cold = cold[cold["own_process"].astype(bool)] if not cold.empty else cold  # shared: no cold start
    if cold.empty:
        return "_None._"
    return "\n\n".join(device_cold_starts(group) for _, group in cold.groupby("device", sort=False))


def device_cold_starts(cold: pd.DataFrame) -> str:
    """One device's rows of cold_starts (each in a process of its own), what every row shares said once
    above them."""
    return tables.compact(["implementation/variant", "device", "framework import", "first call",
                           "steady-state median", "first / steady"],
                          [[r["label"], r["device"], f"{r['import_s']:.2f} s", ms(r["cold_start_ms"]),
                            ms(r["median_ms"]), tables.sig3(r["cold_start_ms"] / r["median_ms"])]
                           for _, r in cold.iterrows()])


def explain(data: ReportData) -> list[str]:
    """Why Keras is slow (the explain rows), then where a GPU call's time goes (the kernels rows)."""
    return (explain_section.section(study_rows(data.runs, "explain", only_ok=False))
            + gpu_section.section(data.runs) + gpu_static_section.section(data.runs)
            + kernel_stages_section.section(data.runs) + gpu_floor_section.section(data.frame, data.runs))


def throughput(data: ReportData) -> str:
    """Images per second of each call and device (a row) at each batch size the sweep timed (a column),
    the median call's time beside it."""
    sweep = ok_cells(data.frame, "batch_sweep")
    if sweep.empty:
        return "_No results for study `batch_sweep` yet._"
    batches = sorted(int(b) for b in sweep["batch_size"].unique())
    rows: dict[tuple[str, str], dict[int, str]] = {}
    for _, r in sweep.iterrows():
        rows.setdefault((r["label"], r["device"]), {})[int(r["batch_size"])] = (
            f"{r['images_per_s']:,.0f} ({ms(r['median_ms'])})")
    return table(["implementation/variant", "device", *(f"batch {b}: images/s (a call)" for b in batches)],
                 [[label, device, *(found.get(b, "–") for b in batches)]
                  for (label, device), found in rows.items()])


def verify(data: ReportData) -> str | None:
    """verify's rows, where there are any (None: the section is left out): the calls that agreed with
    the reference on every image, one row per device, dtype and number of images (their accuracies'
    range, their largest difference); every other row on its own."""
    if not data.verify_rows:
        return None
    whole: dict[tuple, list[dict]] = {}
    rest = []
    for v in data.verify_rows:
        if v["status"] == "ok" and "agree" in v and v["agree"] == v.get("images") and "max_abs_diff" in v:
            whole.setdefault((v["device"], v.get("dtype", "float32"), v["images"]), []).append(v)
        else:
            rest.append(v)
    rows = []
    for (device, dtype, images), group in whole.items():
        accuracy = sorted({f"{v['accuracy']:.4f}" for v in group if "accuracy" in v})
        rows.append([device, dtype, ", ".join(f"{v['implementation']}/{v['variant']}" for v in group), "ok",
                     "–".join(dict.fromkeys([accuracy[0], accuracy[-1]])) if accuracy else "-",
                     f"all {images}/{images}", f"≤ {max(v['max_abs_diff'] for v in group):.1e}"])
    rows += [[v["device"], v.get("dtype", "float32"), f"{v['implementation']}/{v['variant']}", v["status"],
              f"{v['accuracy']:.4f}" if "accuracy" in v else "-",
              f"{v['agree']}/{v['images']}" if "agree" in v else "-",
              f"{v['max_abs_diff']:.1e}" if "max_abs_diff" in v else v.get("reason", "-")] for v in rest]
    return table(["device", "dtype", "implementation/variant", "status", "accuracy", "argmax agreement",
                  "max abs diff"], rows)


GLOSSARY = ROOT / "docs" / "glossary.md"  # the one source of the words' meanings, printed at DETAILS' head


REPORT_TERMS = "## Terms of the report"  # the glossary section DETAILS prints


def glossary(path: Path = GLOSSARY) -> str:
    """docs/glossary.md's terms of the report: the list under REPORT_TERMS, to the next section."""
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    text = path.read_text() if path.is_file() else ""
    if REPORT_TERMS not in text:
        return f"_{name} has no section `{REPORT_TERMS}`._"
    section = text.split(REPORT_TERMS, 1)[1].split("\n## ", 1)[0]
    start = section.find("\n- ")
    return section[start + 1:].strip() if start >= 0 else section.strip()


def answering(data: ReportData) -> ReportData:
    """The data of the machines that answer (each device's answering api_levels run's machine): each
    device's cells of its machine, and those machines' runs. Every other machine is on a page of its
    own; DETAILS' tables show these two."""
    machines = {d: headline.machine_of(data.frame, run_id) for d, run_id in data.answer.items()}
    machines = {d: m for d, m in machines.items() if m is not None}
    if not machines:  # no api_levels run answers (a folder of other studies, or the null level's): show all
        return data

    def mine(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:
            return frame
        keep = pd.Series(False, index=frame.index)
        for device, machine in machines.items():
            keep |= (frame["device"] == device) & (frame["machine"] == machine)
        return frame[keep]

    runs = [r for r in data.runs if r["machine"] in machines.values()]
    return dataclasses.replace(data, runs=runs, frame=mine(data.frame), history=mine(data.history))


def aliases(data: ReportData) -> dict[str, str]:
    """Each answering machine's full name (24 words for a fingerprinted host) to the short one DETAILS
    uses after its machines section names it once: "the CPU machine", "the GPU machine", or "the
    machine" where one machine answers for both devices."""
    found = {d: headline.machine_of(data.frame, run_id) for d, run_id in data.answer.items()}
    machines: dict[str, str] = {d: m for d, m in found.items() if m is not None}
    if len(set(machines.values())) == 1:
        return {m: "the machine" for m in machines.values()}
    return {m: f"the {d.upper()} machine" for d, m in sorted(machines.items())}


def renamed(data: ReportData, names: dict[str, str]) -> ReportData:
    """data with its machines called by their short names (aliases): every table and line below the
    machines section says "the CPU machine" where it would repeat a long name."""
    def frame_of(frame: pd.DataFrame) -> pd.DataFrame:
        return frame if frame.empty else frame.assign(machine=frame["machine"].replace(names))
    runs = [{**r, "machine": names.get(r["machine"], r["machine"])} for r in data.runs]
    return dataclasses.replace(data, runs=runs, frame=frame_of(data.frame), history=frame_of(data.history))


def context(data: ReportData) -> dict:
    """What DETAILS.md says, as data (templates/details.md.j2 words it): the opening section
    markdown.full computes (the machines table: every machine), then each section's table or the block
    of lines its module makes, of the answering machines (answering)."""
    opening = markdown.full(data)
    names = aliases(data)
    data = renamed(answering(data), names)
    frame = data.frame
    return {
        **opening, "glossary": glossary(), "aliases": names,
        "findings": machine_findings.findings(frame, data.loc_rows, data.runs),
        "resamples": stats.BOOTSTRAP_RESAMPLES, "noisy_share": stats.NOISY_CI_OVER_MEDIAN,
        "crosschecks": validity.crosscheck_lines(data.crosschecks),
        "code_lines": code_lines(data),
        "latency": latency_table(frame, "api_levels"), "cold_starts": cold_starts(data),
        "bill": lines(bill.section(frame, data.answer)),
        "overhead": latency_table(frame, "overhead", with_device=True),
        "cpu_floor": lines(cpu_floor.section(data)),
        "backends": latency_table(frame, "backends"), "explain": lines(explain(data)),
        "throughput": throughput(data), "precision": latency_table(frame, "precision"),
        "training": lines(training_section.section(frame, data.verify_train_rows)),
        "verify": verify(data), "not_measured": lines(not_measured(frame)),
        "noisy": lines(validity.noisy_section(frame)), "draws": lines(validity.draws_section(frame)),
        "repeatability": lines(validity.repeatability_section(data.history)),
        "reproduce": lines(reproduce.section(data.runs)),
        "time_spent": lines(validity.time_section(data.runs)),
        "runs": caption(data.runs)}


def build(data: ReportData) -> str:
    """DETAILS.md, from its claims."""
    return words.render(TEMPLATE, **context(data))
