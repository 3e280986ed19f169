"""Partial credit by stage: a lab file's [stages] table gives points to each layer a submission gets
right on its own. For inference each stage is one layer of the forward pass, asked of the
submission through its optional `stage(name, x)` method (labs/template/lenet.py documents it): the
grader hands each stage the oracle's input to it, so one wrong layer does not fail the ones after
it, and compares the output with the oracle's. For training each stage is one layer's backward pass,
on the oracle's activations and upstream gradient (harness.lab.judge.rules.backprop).

    INFERENCE, TRAINING               the stage names in network order (training: backward order)
    SHAPES                            each inference stage's (input, output) shape of one image, NHWC
    read(table, at, names) -> tuple[(name, points), ...]   the [stages] table checked
    Stage(input, output, mistakes)    one stage of the oracle, and what known mistakes output
    (the oracle's stages: harness.lab.judge.rules.oracle.forward_stages, grader only; this module
    needs NumPy alone: a training kit ships it)
    judge(name, got, stage, tol) -> dict   one stage's verdict: ok / wrong, its largest difference,
                                      and the known mistake it matches (NCHW output, NCHW flatten)
    unanswered(name, why) -> dict     a stage not implemented (missing) or that raised (error)
    tolerance(max_abs_diff, expected) the allowed |difference|: the gate's, scaled by the stage's range
    points_of(stages, verdicts) -> float   the points of the stages judged ok
    sentence(verdict, points, counts) -> str  one stage's line, for the feedback and the kit (its
                                      points, or that they do not count)
    STAGE_IMAGES                      how many test images each stage is asked on
"""

from typing import Any, NamedTuple

import numpy as np

from harness.lab.judge.rules import sgd
from harness.lab.judge.rules.tables import fail, number

INFERENCE = ("conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3", "softmax")
TRAINING = sgd.BACKWARD  # gradients, in the order backpropagation finds them
SHAPES = {"conv1": ((28, 28, 1), (28, 28, 6)), "pool1": ((28, 28, 6), (14, 14, 6)),
          "conv2": ((14, 14, 6), (10, 10, 16)), "pool2": ((10, 10, 16), (5, 5, 16)),
          "fc1": ((5, 5, 16), (120,)), "fc2": ((120,), (84,)), "fc3": ((84,), (10,)),
          "softmax": ((10,), (10,))}
STAGE_IMAGES = 16  # the gate's first test images: every stage on each


def read(table: object, at: str, names: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
    """[stages] name = points, ...: known names only (its kind's: INFERENCE or TRAINING), in their order."""
    if not isinstance(table, dict):
        fail(at, f"expected a table of stage = points, found {table!r}")
    unknown = sorted(set(table) - set(names))
    if unknown:
        fail(at, f"unknown stage(s) {unknown}; allowed: {list(names)}")
    return tuple((name, float(number(at, name, table[name], 0))) for name in names if name in table)


class Stage(NamedTuple):
    """One stage of the oracle: its input, its output, and the outputs of known mistakes {what: output}."""

    input: np.ndarray
    output: np.ndarray
    mistakes: dict[str, np.ndarray]


FLATTEN_NCHW = ("it flattens its input in NCHW order (channels first), as PyTorch does; fc1's weights "
                "expect NHWC order (flatten (N, 5, 5, 16) as it is)")
OUTPUT_NCHW = ("its output is in NCHW order (channels first) and matches the oracle's once transposed: "
               "return NHWC (N, H, W, C)")


def tolerance(max_abs_diff: float, expected: np.ndarray) -> float:
    """The gate's |dp| bound, scaled to the stage's own range (activations reach tens)."""
    return float(max_abs_diff * max(1.0, float(np.max(np.abs(expected)))))


def _within(got: np.ndarray, expected: np.ndarray, tol: float) -> bool:
    return got.shape == expected.shape and bool(np.all(np.abs(got.astype(np.float64) - expected) <= tol))


def judge(name: str, got: np.ndarray, stage: Stage, tol: float) -> dict:
    """One stage's verdict: "ok" within `tol`, else "wrong" with its largest difference (where the
    shapes agree) and the known mistake it matches, if any (an NCHW output, fc1 flattening NCHW)."""
    expected = stage.output
    verdict: dict[str, Any] = {"stage": name, "verdict": "wrong", "max_abs_diff": None, "layout": None}
    if got.shape == expected.shape:
        diff = float(np.max(np.abs(got.astype(np.float64) - expected))) if got.size else 0.0
        verdict["max_abs_diff"] = diff if np.isfinite(diff) else None
        if np.isfinite(diff) and diff <= tol:
            return {**verdict, "verdict": "ok"}
    else:
        verdict["reason"] = f"returned shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if expected.ndim == 4 and got.shape == tuple(np.array(expected.shape)[[0, 3, 1, 2]]) and \
            _within(got.transpose(0, 2, 3, 1), expected, tol):
        verdict["layout"] = OUTPUT_NCHW
    for what, output in stage.mistakes.items():
        if _within(got, output, tol):
            verdict["layout"] = what
    return verdict


def unanswered(name: str, why: str) -> dict:
    """A stage the submission did not answer: not implemented, or it raised (`why`)."""
    return {"stage": name, "verdict": "missing" if why == "not implemented" else "error",
            "max_abs_diff": None, "layout": None, "reason": why[:300]}


def points_of(stages: tuple[tuple[str, float], ...], verdicts: list[dict]) -> float:
    ok = {v.get("stage") for v in verdicts if isinstance(v, dict) and v.get("verdict") == "ok"}
    return float(sum(points for name, points in stages if name in ok))


def sentence(verdict: dict, points: float | None = None, counts: bool = True) -> str:
    """`- fc1: wrong (0 of 12 points), largest difference 3.1; it flattens ...`: one stage's line;
    its points only where they count (`counts`: the submission failed the gate), else none shown."""
    name, what = verdict.get("stage"), verdict.get("verdict")
    line = f"- {name}: {what}"
    if points is not None and counts:
        line += f" ({points if what == 'ok' else 0:g} of {points:g} points)"
    if what != "ok" and verdict.get("max_abs_diff") is not None:
        line += f", largest difference {verdict['max_abs_diff']:.3g}"
    for key in ("reason", "layout"):
        if verdict.get(key):
            line += f"; {verdict[key]}"
    if verdict.get("relu_at_zero") == 1:
        line += ("; ReLU's gradient at a pre-activation of exactly 0 taken as 1 (the reference's is 0: "
                 "both accepted)")
    return line
