"""reports/REPORT.md, the answer first: the six questions its readers bring, each answered from
the rows (harness.report.sections.questions), each device's compact table (sections.device_tables),
Fig. 1 and the figures in reading order with their captions. DETAILS.md (harness/report/details.py)
holds what a reader does not need first; `full` computes its opening section (the full table with
its intervals, its notes and the findings), and the machines and the method are there too. Every
number is read from a results row or loc.csv. `python -m harness report`."""

import pandas as pd

from harness import registry
from harness.draw.style import fmt_ms
from harness.measure.store import stats
from harness.report.claims import headline
from harness.report.claims.rundata import ReportData, pooling
from harness.report.markup import quote, words
from harness.report.sections import (
    cpu_floor,
    device_tables,
    findings,
    first_screen,
    machine_pages,
    machines,
    questions,
)
from harness.report.sections.gpu_floor_section import MACS

TEMPLATE = "report.md.j2"  # in harness/report/templates/: the words; this module computes what they say
NOTES = "first_screen.md.j2"  # the notes beside DETAILS' full table (sections/first_screen.py's claims)
DEVICES = ("cpu", "gpu")


# Datasheet FP32 peaks (non-tensor-core), for the arithmetic line only: not measurements.
PEAK_FLOPS = {"H100": (67e12, "NVIDIA's H100 SXM datasheet")}


def floors(data: ReportData) -> list[dict]:
    """The floor of each device, measure.fastest_call's answer for the run that answers (never named by
    hand): its label and its time as quoted (quote.quoted: with its interval and marks)."""
    out = []
    for device, found in data.floors.items():
        cell = (data.frame[(data.frame["run_id"] == found.run_id) & (data.frame["study"] == "api_levels")
                           & (data.frame["cell_id"] == f"{found.label}/{device}/b1/float32")]
                if found.run_id and not data.frame.empty else None)
        shown = quote.quoted(cell.iloc[0]) if cell is not None and not cell.empty else fmt_ms(
            (found.median_ns or float("nan")) / 1e6)
        out.append({"device": device, "label": found.label, "shown": shown})
    return out


def gpu_peak(machines_by_device: dict) -> dict | None:
    """The model's arithmetic at the GPU's datasheet FP32 peak, where PEAK_FLOPS knows the GPU."""
    gpu = machines_by_device.get("gpu") or ""
    peak = next((v for k, v in PEAK_FLOPS.items() if k in gpu), None)
    return {"ns": 2 * MACS / peak[0] * 1e9, "source": peak[1]} if peak else None


def sources(data: ReportData, by_device: dict) -> list[dict]:
    """Which runs the headline reads: each device's run id, machine, start and commit (None where
    none was recorded), and `pooled`: the other runs its cells pool (rundata.pool), oldest first."""
    out = []
    for device, run_id in data.answer.items():
        run = next((r for r in data.runs if r["run_id"] == run_id and r["study"] == "api_levels"), None)
        if run is None:
            continue
        prov = run["env"].get("provenance") or {}
        cells = data.frame[(data.frame["run_id"] == run_id) & (data.frame["study"] == "api_levels")
                           & (data.frame["device"] == device)]
        ids = cells["pooled_runs"] if "pooled_runs" in cells else []
        pooled = [r for found in ids for r in found if r != run_id]
        out.append({"device": device, "run_id": run_id, "machine": by_device[device],
                    "started": run["started"], "commit": prov.get("commit") or None,
                    "dirty": bool(prov.get("dirty")), "pooled": list(dict.fromkeys(pooled))})
    return out


def partial_lines(partial: list[dict]) -> list[str]:
    """One line per partial run (no completion marker: killed, or still running): never used above,
    and how to finish it."""
    return [words.say(NOTES, "partial", run=run) for run in partial]


def stale_lines(frame: pd.DataFrame, answer: dict) -> list[str]:
    """One line per level whose numbers in the answering runs were measured on older code (a cell
    that measured nothing, skipped or failed, has no number to be stale)."""
    if frame.empty:
        return []
    cells = frame[frame["run_id"].isin([r for r in answer.values() if r]) & (frame["study"] == "api_levels")
                  & (frame["stale"] != "") & (frame["status"] == "ok")]
    return [words.say(NOTES, "stale", implementation=impl, why=why)
            for (impl, why), _ in cells.groupby(["implementation", "stale"])]


def other_studies(frame: pd.DataFrame, loc_rows: list[dict], answer: dict | None,
                  known: headline.Table | None = None) -> list[dict]:
    """The "fastest call measured" cells another study than `api_levels` timed (their ratio is then of
    medians across runs), by study: [{study, cells: [{label, device}]}]."""
    rows, _machines = known or headline.levels(frame, loc_rows, answer)
    others: dict[str, list[dict]] = {}
    for lv in rows:
        for device, cell in lv.cells.items():
            if cell["study"] != headline.STUDY:
                others.setdefault(cell["study"], []).append({"label": cell["label"], "device": device})
    return [{"study": study, "cells": cells} for study, cells in sorted(others.items())]


def caveats(data: ReportData, known: headline.Table | None = None) -> list[str]:
    """The first screen's notes beside the headline (harness.report.sections.first_screen), each a
    paragraph; a note with nothing to say is left out."""
    levels, _machines = known or headline.levels(data.frame, data.loc_rows, data.answer)
    gpu_cells = [lv.cells["gpu"] for lv in levels
                 if "gpu" in lv.cells and registry.computes(lv.implementation)]
    fastest_gpu = min(gpu_cells, key=lambda c: c["median_ms"]) if gpu_cells else None
    notes = [first_screen.intervals_note(pooling(data.frame, data.answer)),
             first_screen.threads_note(first_screen.cpu_threads(data.runs, data.answer.get("cpu"))),
             first_screen.resident_note(data.frame, data.runs, fastest_gpu)]
    return [words.say(NOTES, note.pop("words"), **note) for note in notes if note]


def full(data: ReportData) -> dict:
    """DETAILS' opening section, as data (templates/details.md.j2 words it): the full table of the
    answering runs with its intervals and notes, the findings, the machines and the arithmetic."""
    runs, frame, loc_rows = data.runs, data.frame, data.loc_rows
    threads = first_screen.cpu_threads(runs, data.answer.get("cpu"))
    table = headline.levels(frame, loc_rows, data.answer)  # asked once, passed to each part
    table_lines, by_device = headline.render(frame, loc_rows, data.answer, threads, table)
    return {"headline": table_lines, "study": headline.STUDY, "sources": sources(data, by_device),
            "other_studies": other_studies(frame, loc_rows, data.answer, table),
            "raw_libraries": [registry.short(raw) for raw in headline.RAW.values()],
            "notes": caveats(data, table), "stale": stale_lines(frame, data.answer),
            "partial": partial_lines(data.partial),
            "answer_findings": findings.findings(frame, runs, loc_rows, data.answer, table),
            "machine_table": machines.machine_table(runs, machine_pages.names(data), data.machines),
            "machine_difference": machines.difference_line(runs, by_device.get("cpu"), by_device.get("gpu")),
            "floors": floors(data), "macs": MACS,
            "cpu_peak": cpu_floor.peak(cpu_floor.row_of(cpu_floor.arithmetic_run(data.runs,
                                                                                 by_device.get("cpu")))),
            "gpu_peak": gpu_peak(by_device),
            "call_cost": words.say(NOTES, "call_cost", parts=first_screen.call_cost_claims(frame, by_device))}


def legend(text: str) -> str:
    """The meaning of each mark's symbol that the text shows (quote.SYMBOLS), in plain words."""
    seen = [(symbol, mark) for mark, symbol in quote.SYMBOLS.items() if symbol in text]
    return words.say(questions.TEMPLATE, "legend", seen=seen, noisy_share=stats.NOISY_CI_OVER_MEDIAN,
                     min_processes=stats.MIN_PROCESSES) if seen else ""


def context(data: ReportData) -> dict:
    """What REPORT.md says, as data (templates/report.md.j2 words it): the six answers, each device's
    table and the figures."""
    table = headline.levels(data.frame, data.loc_rows, data.answer)  # asked once, passed on
    levels, by_device = table
    figures = [{"number": i, **record} for i, record in enumerate(words.table_of("figures")["figure"], 1)]
    said = {s["device"]: s for s in sources(data, by_device)}
    tables = [{**found, "raw": registry.short(headline.RAW[d]), "source": said.get(d)}
              for d in DEVICES if (found := device_tables.device_table(levels, d)) is not None]
    answers = questions.answers(data, table)
    return {"answers": answers, "tables": tables, "study": headline.STUDY,
            "unmeasured": [d for d in DEVICES if d not in {t["device"] for t in tables}],
            "legend": legend("\n".join(answers + [t["table"] for t in tables])),
            "cost_figure": figures[0], "figures": figures[1:]}


def build(data: ReportData) -> str:
    """REPORT.md, from its claims."""
    return words.render(TEMPLATE, **context(data))
