"""The report's "What training costs at each level" (study `training`): the tables of time per
step, of each level's convergence run and of verify-train, and the findings, all read from rows
(Fig. 10 is figures/training.py)."""

import math
from collections.abc import Sequence

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.rundata import find, ratio_ci, source
from harness.report.markup import quote, words
from harness.report.markup.style import ok_cells
from harness.report.markup.tables import compact, fmt_ratio, ms

STUDY = "training"
TEMPLATE = "training.md.j2"  # the section's words and its findings'


def default_threads(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells at the study's own thread count (a cell with `threads` set is a variation)."""
    return cells[cells["threads"].isna()] if "threads" in cells else cells


def step_table(frame: pd.DataFrame) -> str:
    """Every timed step: a row per call, dtype and thread count, a column per batch size (its median
    [95% CI], images/s, the within-round ratio to the reference level's step and its marks), what
    every row shares said once above them (compact)."""
    cells = ok_cells(frame, STUDY)
    if cells.empty:
        return f"_No results for study `{STUDY}` yet._"
    batches = sorted(int(b) for b in cells["batch_size"].unique())
    rows: dict[tuple, dict[int, str]] = {}
    for _, r in cells.iterrows():
        threads = None if r["threads"] is None or math.isnan(r["threads"]) else int(r["threads"])
        base = find(frame, STUDY, headline.REFERENCE, machine=r["machine"], batch=r["batch_size"],
                    dtype=r["dtype"], threads=threads)
        rel = ratio_ci(r, base) if base is not None and r["label"] != headline.REFERENCE else None
        marks = " ".join(quote.caveats(r))
        rows.setdefault((r["label"], r["device"], r["dtype"], threads or "study default"), {})[
            int(r["batch_size"])] = (f"{ms(r['median_ms'])} [{quote.ci_column(r)}], "
                                     f"{r['images_per_s']:,.0f}/s" + (f", {fmt_ratio(rel)}" if rel else "")
                                     + (f" {marks}" if marks else ""))
    against = f"x {headline.REFERENCE.split('/')[0]}"  # the reference level's, within rounds [95% CI]
    return compact(["level/variant", "device", "dtype", "threads",
                    *(f"batch {b}: per step [95% CI], images/s, {against}" for b in batches)],
                   [[*key, *(found.get(b, "–") for b in batches)] for key, found in rows.items()])


def convergence_rows(frame: pd.DataFrame) -> list[pd.Series]:
    if frame.empty:
        return []
    cells = frame[(frame["study"] == STUDY)]
    return [r for _, r in cells.iterrows() if isinstance(r.get("convergence"), dict)
            or r["status"] == "diverged"]


def convergence_table(frame: pd.DataFrame) -> str:
    rows = []
    for r in convergence_rows(frame):
        c = r["convergence"] if isinstance(r["convergence"], dict) else {}
        rows.append([r["label"], r["device"], r["batch_size"], r["status"], c.get("images", "-"),
                     c.get("seconds", "-"),
                     f"{c['loss_first']:.3f} → {c['loss_last']:.3f}" if "loss_last" in c else "-",
                     f"{c['test_accuracy']:.4f}" if "test_accuracy" in c else r["reason"] or "-"])
    if not rows:
        return "_No convergence runs yet._"
    return compact(["level/variant", "device", "batch", "status", "images seen", "seconds",
                  "loss, first step → last", "test accuracy"], rows)


def findings(frame: pd.DataFrame, machine: str) -> list[str]:
    """The training study's findings on a machine: each batch's fastest and slowest step, Keras' `fit`
    against its one-batch step and each level's step on two threads."""
    ok = ok_cells(frame, STUDY)
    if ok.empty:
        return []
    cells = default_threads(ok[(ok["machine"] == machine) & (ok["device"] == "cpu")
                               & (ok["dtype"] == "float32")])
    out = []
    for batch in (32, 512):
        at = cells[cells["batch_size"] == batch]
        if len(at) >= 2:
            fast, slow = at.loc[at["median_ms"].idxmin()], at.loc[at["median_ms"].idxmax()]
            out.append(words.say(TEMPLATE, "step_range", machine=machine, batch=batch, fast=fast, slow=slow,
                                 apart=slow["median_ms"] / fast["median_ms"]))
    for backend in registry.KERAS_BACKENDS:  # every Keras level, from its spec
        step, fit = (find(frame, STUDY, f"{backend}/{v}", batch=32, machine=machine)
                     for v in registry.spec(backend).train_variants)
        if fit is not None and step is not None:
            out.append(words.say(TEMPLATE, "fit", backend=backend, fit=fit, step=step,
                                 ratio=ratio_ci(fit, step)))
    scaled = ok[(ok["machine"] == machine) & (ok["batch_size"] == 512) & (ok["threads"] == 2)] \
        if "threads" in ok else ok.iloc[:0]
    for label in sorted(set(scaled["label"])):  # each level also run on two threads
        one = find(frame, STUDY, label, batch=512, machine=machine)
        two = find(frame, STUDY, label, batch=512, machine=machine, threads=2)
        if one is not None and two is not None:
            out.append(words.say(TEMPLATE, "threads", label=label, one=one, two=two,
                                 times=two["median_ms"] / one["median_ms"]))
    return out  # the convergence runs: their table, under the steps


def verify_table(rows: Sequence[dict]) -> str:
    """verify-train's rows: each level's SGD steps against the NumPy oracle's, a table per file; the
    levels with no trainer named in one line, a reason the row above gave said once."""
    if not rows:
        return "_No verify-train results yet (make verify)._"
    out = []
    for name in dict.fromkeys(source(r) for r in rows):
        mine = [r for r in rows if source(r) == name]
        none = [r["implementation"] for r in mine if r["status"] == "no trainer"]
        body, said = [], None
        for r in (r for r in mine if r["status"] != "no trainer"):
            reason = r.get("reason") or "-"
            body.append([name, f"{r['implementation']}/{r['variant']}", r["device"], r.get("dtype", "-"),
                         r["status"], r.get("steps_done", "-"),
                         f"{r['max_rel_loss']:.1e}" if r.get("max_rel_loss") is not None else "-",
                         f"{r['final_max_dw']:.1e}" if r.get("final_max_dw") is not None else "-",
                         "as the row above" if reason == said and reason != "-" else reason])
            said = reason
        out.append(compact(["file", "level/variant", "device", "dtype", "status", "steps",
                            "max relative loss difference", "max |Δw| after the last step", "first drift"],
                           body, keep=2))
        if none:
            out.append(f"No trainer in `{name}` (none in its ImplSpec: nothing to check): {', '.join(none)}.")
    return "\n\n".join(out)


def section(frame: pd.DataFrame, verify_rows: Sequence[dict] = ()) -> list[str]:
    return ["", words.say(TEMPLATE, "title"), "", words.say(TEMPLATE, "method"), "", step_table(frame), "",
            words.say(TEMPLATE, "convergence"), "", convergence_table(frame), "",
            words.say(TEMPLATE, "verify"), "", verify_table(verify_rows)]
