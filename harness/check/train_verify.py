"""Prove the training steps agree: every chosen implementation and training variant takes the same
SGD steps from the same seeded weights as the NumPy oracle (lenet_numpy.train, float64).

All start from weights/lenet5_init.weights.h5; step k trains on training images (k-1)*B ... k*B-1
(uint8 / 255), learning rate harness.base.LEARNING_RATE. Pass: at every step the loss within
relative 1e-4 of the oracle's and every kernel and bias within 1e-4 absolute of the oracle's
(so after the last step too). A level that drifts is named by the first step and layer over. Status
"tie": it agreed until a step whose forward had a max-pool near-tie, then took the other branch
(see check); a pass, with the step named.
"""

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from harness import registry
from harness.check import verify
from harness.data import init_weights

Row = dict[str, Any]  # one implementation x variant, as printed and written by --json
Failure = tuple[int, str, str]  # (step, "loss" or "weights", what)

LOSS_TOLERANCE = 1e-4   # relative, every step
WEIGHT_TOLERANCE = 1e-4  # absolute, every kernel and bias entry, after every step
NO_TRAINER = "no trainer"  # a row of a level that cannot train: not a failure, not "could not run here"
STEPS, BATCH = 20, 32
# one child's limit: a family of levels, each training variant's steps, the oracle's beside them
# (minutes at most where nothing hangs); past it the child is killed and its variant is `hung`
CHILD_TIMEOUT_S = 900.0


def first_failure(steps: list[Row]) -> Failure | None:
    """(step, "loss" or "weights", what) of the first step over tolerance, or None; NaN is over."""
    for s in steps:
        if not s["rel_loss"] <= LOSS_TOLERANCE:
            what = f"{s['loss']:.7g} vs oracle {s['oracle_loss']:.7g}"
            return s["step"], "loss", (f"step {s['step']} loss: {what} "
                                       f"(relative {s['rel_loss']:.1e} > {LOSS_TOLERANCE:g})")
        for name, diffs in s["layers"].items():
            for role, diff in zip(("kernel", "bias"), diffs, strict=True):
                if not diff <= WEIGHT_TOLERANCE:
                    return s["step"], "weights", (f"step {s['step']} {name} {role}: max|dw| {diff:.1e} "
                                                  f"vs oracle (> {WEIGHT_TOLERANCE:g})")
    return None


def near_ties_before(steps: list[Row], failure: Failure) -> list[str]:
    """The steps up to the failure whose forward (in the oracle) had a max-pool near-tie, as text.
    A step's loss comes from its forward before its update, so a loss failure needs an earlier tie."""
    step, kind, _ = failure
    last = step if kind == "weights" else step - 1
    return [f"{s['step']} ({', '.join(f'{pool} x{n}' for pool, n in s['oracle_near_ties'].items() if n)})"
            for s in steps if 1 < s["step"] <= last and any(s.get("oracle_near_ties", {}).values())]


def check(row: Row, steps: int) -> Row:
    """Summarise a child's row: max relative loss difference, max |dw| after the last step, verdict.

    A drift that starts after a step (not the first) whose forward had a max-pool near-tie in the
    oracle (top two values within float32 rounding) is status "tie", a pass: the level agreed up to
    there, then routed that window's gradient to the other pixel, an equally valid path that the
    oracle cannot follow. Drift with no near-tie before it is FAIL."""
    done = row.pop("steps")
    row["steps_done"] = len(done)
    if done:
        row["max_rel_loss"] = max(s["rel_loss"] for s in done)
        row["final_max_dw"] = max(max(d) for d in done[-1]["layers"].values())
        row["final_layers"] = done[-1]["layers"]
        row["per_step"] = done
    if row["status"] != "ok":
        return row
    failure = first_failure(done)
    ties = near_ties_before(done, failure) if failure else []
    if len(done) != steps:
        row.update(status="FAIL", reason=f"{len(done)} of {steps} steps")
    elif failure and ties:
        row.update(status="tie", reason=(f"within tolerance through step {failure[0] - 1}; max-pool "
                                         f"near-ties in step(s) {', '.join(ties)}, then {failure[2]}"))
    elif failure:
        row.update(status="FAIL", reason=failure[2])
    return row


def verify_train(names: Sequence[str], device: str = "cpu", weights_path: str | Path | None = None,
                 steps: int = STEPS, batch: int = BATCH, dtype: str = "float32",
                 data_dir: str | Path | None = None, progress: Callable[[str], None] = print,
                 timeout_s: float | None = None) -> list[Row]:
    """One row per implementation x training variant: ok / FAIL / hung / unavailable, with the numbers.
    Each family of implementations (verify.families) trains in a child process
    (harness.check.train_child) with its registry environment, under a limit (timeout_s, else
    CHILD_TIMEOUT_S); one that crashes or passes its limit leaves a row saying so for the variant it
    was on and a FAIL row for every other variant it did not report, never loses the others'."""
    weights_path = weights_path or init_weights.DEFAULT_INIT
    if data_dir:
        os.environ["LENET_DATA_DIR"] = str(data_dir)
    rows: list[Row] = []

    def add(row: Row) -> None:
        rows.append(row)
        progress(format_row(row))

    for family in verify.families(names):
        runnable = []
        for name in family:
            spec = registry.spec(name)
            if not spec.trainer or not spec.train_variants:  # not about this machine: nothing to check
                add({"implementation": name, "variant": "-", "device": device, "status": NO_TRAINER,
                     "reason": f"{name} has no trainer (no `trainer` in its ImplSpec): nothing to check"})
                continue
            why = (f"{name} runs on {list(spec.devices)}" if device not in spec.devices else
                   f"{name} trains in {list(spec.dtypes)}, not {dtype}" if dtype not in spec.dtypes else None)
            if why:
                add({"implementation": name, "variant": "-", "device": device, "status": "unavailable",
                     "reason": why})
            else:
                runnable.append(name)
        if runnable:
            for row in child_rows(runnable, device, weights_path, steps, batch, dtype,
                                  timeout_s or CHILD_TIMEOUT_S):
                add(check({"implementation": row.pop("implementation"), "device": device, "dtype": dtype,
                           **row}, steps))
    return verify.in_order(rows, names)


def child_rows(names: Sequence[str], device: str, weights_path: str | Path, steps: int, batch: int,
               dtype: str, timeout_s: float | None = None) -> Iterator[Row]:
    """Run harness.check.train_child for implementations of one family (verify.families), killed
    whole at timeout_s (verify.rows_of_child); yield their rows as they come."""
    command = [sys.executable, "-m", "harness.check.train_child", ",".join(names), device, str(weights_path),
               str(steps), str(batch), dtype]
    expected = [{"implementation": name, "variant": variant} for name in names
                for variant in registry.spec(name).train_variants]
    with tempfile.TemporaryDirectory(prefix="lenet-verify-train-") as out_dir:
        for row in verify.rows_of_child(command, names, expected, os.path.join(out_dir, "stderr.log"),
                                        "verify-train", timeout_s):
            yield {"steps": [], **row}


def format_row(row: Row) -> str:
    head = f"{row['implementation'] + '/' + row['variant']:<28} {row['device']:<4} {row['status']:<11}"
    if "max_rel_loss" in row:
        text = (f"{head} max rel dloss {row['max_rel_loss']:.1e}  max|dw| {row['final_max_dw']:.1e} "
                f"after {row['steps_done']} steps")
        if "ms_per_step" in row:
            text += f"  {row['ms_per_step']:.2f} ms/step ({row['seconds']} s)"
        return text + (f"\n{'':<45}{row['reason']}" if row.get("reason") else "")
    return f"{head} {row.get('reason') or ''}"


HEADER = (f"{'implementation/variant':<28} {'dev':<4} {'status':<11} (tolerance: every step's loss "
          f"within relative {LOSS_TOLERANCE:g}, weights within {WEIGHT_TOLERANCE:g} of the oracle)")


def exit_code(rows: list[Row]) -> int:
    """verify's rule: 1 when any level drifted or crashed, 3 when nothing failed but something could not
    run here, else 0 ("tie" is a pass). A level without a trainer changes nothing, unless no level named
    had one (3: nothing was checked)."""
    checked = [row for row in rows if row["status"] != NO_TRAINER]
    return verify.exit_code(checked) if checked else 3


def no_trainer(rows: list[Row]) -> list[str]:
    """The levels named that have no trainer (their rows' status NO_TRAINER)."""
    return [row["implementation"] for row in rows if row["status"] == NO_TRAINER]
