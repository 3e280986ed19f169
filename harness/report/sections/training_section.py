"""The report's "What training costs at each level" (study `training`): the tables of time per
step, of each level's convergence run and of verify-train, and the findings, all read from rows
(Fig. 10 is figures/training.py)."""

import math
from collections.abc import Sequence

import pandas as pd

from harness import registry
from harness.report.claims import headline, quote
from harness.report.claims.rundata import find, ratio_ci, source
from harness.report.markup.style import ok_cells
from harness.report.markup.tables import fmt_ratio, ms, table

STUDY = "training"


def default_threads(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells at the study's own thread count (a cell with `threads` set is a variation)."""
    return cells[cells["threads"].isna()] if "threads" in cells else cells


def step_table(frame: pd.DataFrame) -> str:
    cells = ok_cells(frame, STUDY)
    if cells.empty:
        return f"_No results for study `{STUDY}` yet._"
    rows = []
    for _, r in cells.iterrows():
        threads = None if r["threads"] is None or math.isnan(r["threads"]) else int(r["threads"])
        base = find(frame, STUDY, headline.REFERENCE, machine=r["machine"], batch=r["batch_size"],
                    dtype=r["dtype"], threads=threads)
        rel = ratio_ci(r, base) if base is not None and r["label"] != headline.REFERENCE else None
        rows.append([r["label"], r["device"], r["batch_size"], r["dtype"], threads or "study default",
                     ms(r["median_ms"]), quote.ci_column(r),
                     f"{r['images_per_s']:,.0f}", fmt_ratio(rel), " ".join(quote.marks(r)) or "-",
                     r["machine"]])
    return table(["level/variant", "device", "batch", "dtype", "threads", "median per step",
                  "95% CI", "images/s", "x numpy (within rounds) [95% CI]", "flags", "machine"], rows)


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
                     f"{c['test_accuracy']:.4f}" if "test_accuracy" in c else r["reason"] or "-",
                     r["machine"]])
    if not rows:
        return "_No convergence runs yet._"
    return table(["level/variant", "device", "batch", "status", "images seen", "seconds",
                  "loss, first step → last", "test accuracy", "machine"], rows)


def findings(frame: pd.DataFrame, machine: str) -> list[str]:
    cells = ok_cells(frame, STUDY)
    if cells.empty:
        return []
    cells = default_threads(cells[(cells["machine"] == machine) & (cells["device"] == "cpu")
                                  & (cells["dtype"] == "float32")])
    out = []
    for batch in (32, 512):
        at = cells[cells["batch_size"] == batch]
        if len(at) < 2:
            continue
        fastest, slowest = at.loc[at["median_ms"].idxmin()], at.loc[at["median_ms"].idxmax()]
        out.append(f"**Training on {machine} (CPU), batch {batch}:** one SGD step takes from "
                   f"{ms(fastest['median_ms'])} ({fastest['label']}, "
                   f"{fastest['images_per_s']:,.0f} images/s) to {ms(slowest['median_ms'])} "
                   f"({slowest['label']}), {slowest['median_ms'] / fastest['median_ms']:.1f}x apart "
                   "(medians; `training` study).")
    for backend in registry.KERAS_BACKENDS:  # every Keras level, from its spec
        fit = find(frame, STUDY, f"{backend}/fit", batch=32, machine=machine)
        step = find(frame, STUDY, f"{backend}/train_on_batch", batch=32, machine=machine)
        if fit is not None and step is not None:
            out.append(f"`{backend}`: `model.fit` on one batch of 32 takes {ms(fit['median_ms'])}, "
                       f"`train_on_batch` {ms(step['median_ms'])} "
                       f"({fmt_ratio(ratio_ci(fit, step), 'x')} within rounds).")
    for label in ("numpy/default", "tf/function", "torch/eager"):
        one = find(frame, STUDY, label, batch=512, machine=machine)
        two = find(frame, STUDY, label, batch=512, machine=machine, threads=2)
        if one is not None and two is not None:
            out.append(f"{label} at batch 512 with 2 threads instead of 1: {ms(two['median_ms'])} "
                       f"against {ms(one['median_ms'])} per step "
                       f"({two['median_ms'] / one['median_ms']:.2f}x; separate workers, "
                       "not a within-round ratio).")
    converged = [r for r in convergence_rows(frame) if r["machine"] == machine]
    if converged:
        parts = [f"{r['label']} {r['convergence']['test_accuracy']:.3f} after "
                 f"{r['convergence']['images']:,} images" for r in converged
                 if isinstance(r["convergence"], dict) and "test_accuracy" in r["convergence"]]
        bad = [f"{r['label']} ({r['reason']})" for r in converged if r["status"] == "diverged"]
        out.append("Convergence runs (batch 32, from the seeded initial weights, at most one epoch "
                   "or the study's time budget, compilation included): test accuracy " + "; ".join(parts)
                   + ". This is what each level reached within that budget, not the accuracy it can "
                     "reach: a faster step sees more images."
                   + (f" Diverged: {'; '.join(bad)}." if bad else ""))
    return out


def verify_table(rows: Sequence[dict]) -> str:
    """verify-train's rows: each level's SGD steps against the NumPy oracle's."""
    if not rows:
        return "_No verify-train results yet (make verify)._"
    return table(["file", "level/variant", "device", "dtype", "status", "steps",
                  "max relative loss difference", "max |Δw| after the last step", "first drift"],
                 [[source(r), f"{r['implementation']}/{r['variant']}", r["device"], r.get("dtype", "-"),
                   r["status"], r.get("steps_done", "-"),
                   f"{r['max_rel_loss']:.1e}" if r.get("max_rel_loss") is not None else "-",
                   f"{r['final_max_dw']:.1e}" if r.get("final_max_dw") is not None else "-",
                   r.get("reason") or "-"] for r in rows])


def section(frame: pd.DataFrame, verify_rows: Sequence[dict] = ()) -> list[str]:
    return ["", "## What training costs at each level (study `training`, "
                "[Fig. 10](figures/fig10_training.png))", "",
            "Each timed call is one plain SGD step (softmax cross-entropy, learning rate 0.05) on "
            "the next batch of MNIST training images, starting from the seeded initial weights "
            "(`weights/lenet5_init.weights.h5`); `make verify` checks every level's steps against "
            "the NumPy oracle (`verify-train`).", "",
            step_table(frame), "",
            "Convergence runs:", "", convergence_table(frame), "",
            "Every level's training steps against the NumPy oracle (`python -m harness verify-train`: "
            "the same initial weights and batches; each step's loss within a relative 1e-4, the "
            "weights within 1e-4):", "", verify_table(verify_rows)]
