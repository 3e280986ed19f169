"""A training lab's stages: each layer's backward pass on its own. The grader hands the submission's
optional `backward(name, x, upstream, kernel, bias)` (labs/template-train/lenet.py documents it)
the oracle's forward activation into the layer, the oracle's gradient of the loss with respect to
the layer's output (fc3: the labels, its output being the loss) and the layer's weights, and
compares the three gradients it returns with the oracle's: one wrong layer fails only its own stage,
whichever side of it the others lie in backpropagation's order.

A stage is a layer with its activation (and its max pool), NHWC, N images of the gate's first batch
at the shared initial weights:

    fc3     x (N, 84)           upstream labels (N,)     dense, softmax cross-entropy (batch mean)
    fc2     x (N, 120)          upstream (N, 84)         dense + ReLU
    fc1     x (N, 5, 5, 16)     upstream (N, 120)        flatten NHWC, dense + ReLU
    conv2   x (N, 14, 14, 6)    upstream (N, 5, 5, 16)   conv 5x5 "valid" + ReLU, max pool 2x2
    conv1   x (N, 28, 28, 1)    upstream (N, 14, 14, 6)  conv 5x5 "same" + ReLU, max pool 2x2

and returns (dx, dkernel, dbias), each shaped as x, the kernel and the bias (conv1's dx is not graded).

    Backward(x, upstream, kernel, bias, dx, dkernel, dbias, alt)   one stage: what it is handed, the
                                      oracle's gradients (dx None where not graded), and alt: those
                                      with ReLU's gradient at exactly 0 taken as 1, accepted too
                                      (harness.lab.judge.rules.oracle computes them: grader only)
    judge(name, got, expected, tol) -> dict   one stage's verdict (harness.lab.judge.rules.stages'
                                      shape): each gradient within tol, the wrong ones and the largest
                                      difference named, an NCHW dx or an OIHW kernel recognised, an
                                      answer off by a known factor (the batch size, the learning rate)
                                      named as such
    tolerance(max_abs_diff) -> float  a gradient's allowed |difference|: the gate's on the weights / lr

NumPy alone (a training kit ships this module and judges its student's stages with it).
"""

from typing import Any, NamedTuple

import numpy as np

from harness.base import LEARNING_RATE
from harness.lab.judge.rules import sgd, stages

PARTS = ("dx", "dkernel", "dbias")
DX_NCHW = ("its dx is in NCHW order (channels first) and matches the oracle's once transposed: return "
           "NHWC (N, H, W, C)")
KERNEL_OIHW = ("its dkernel is in PyTorch's (out, in, kh, kw) order and matches the oracle's once "
               "transposed: return the kernel's own layout, (kh, kw, in, out)")


class Backward(NamedTuple):
    """One stage: what the submission is handed, and the oracle's gradients (dx None: not graded)."""

    x: np.ndarray
    upstream: np.ndarray
    kernel: np.ndarray
    bias: np.ndarray
    dx: np.ndarray | None
    dkernel: np.ndarray
    dbias: np.ndarray
    alt: tuple[np.ndarray | None, np.ndarray, np.ndarray] | None = None  # ReLU'(0) = 1: (dx, dkernel, dbias)


def tolerance(max_abs_diff: float) -> float:
    """The gate's bound on a step's weights (w - lr * dw) as a bound on the gradient dw."""
    return max_abs_diff / LEARNING_RATE


def _diff(got: np.ndarray, expected: np.ndarray) -> float:
    d = float(np.max(np.abs(got.astype(np.float64) - expected))) if got.size else 0.0
    return d if np.isfinite(d) else float("inf")


def _layout(part: str, got: np.ndarray, expected: np.ndarray, tol: float) -> str | None:
    """The known layout mistake `got` is, if any: an NCHW dx, an OIHW (PyTorch) dkernel."""
    if expected.ndim != 4 or got.ndim != 4:
        return None
    back = {"dx": ((0, 2, 3, 1), DX_NCHW), "dkernel": ((2, 3, 1, 0), KERNEL_OIHW)}.get(part)
    if back is None or got.transpose(back[0]).shape != expected.shape:
        return None
    return back[1] if _diff(got.transpose(back[0]), expected) <= tol else None


def judge(name: str, got: tuple[Any, Any, Any], expected: Backward, tol: float) -> dict:
    """One stage's verdict: "ok" when dx (where graded), dkernel and dbias are each within tol of the
    oracle's (tol scaled by each one's range, as stages.tolerance), or each of the gradients with
    ReLU's gradient at 0 taken as 1 (expected.alt; relu_at_zero: 1 in the verdict); else "wrong",
    naming the wrong gradients, the largest difference among those of the right shape, and a layout
    or a known factor the wrong ones are off by."""
    wants = [(0, (expected.dx, expected.dkernel, expected.dbias))]
    if expected.alt is not None:
        wants.append((1, expected.alt))
    verdicts = [(_judged(name, got, want, tol, len(expected.x)), rule) for rule, want in wants]
    for verdict, rule in verdicts:
        if verdict["verdict"] == "ok":
            return {**verdict, **({"relu_at_zero": 1} if rule else {})}
    return verdicts[0][0]


def _judged(name: str, got: tuple[Any, Any, Any], wants: tuple[Any, Any, Any], tol: float,
            batch: int) -> dict:
    wrong, shapes, worst, layout, factors = [], [], 0.0, None, []
    for part, mine, want in zip(PARTS, got, wants, strict=True):
        if want is None:
            continue
        allowed = stages.tolerance(tol, want)
        if mine is None or mine.shape != want.shape:
            found = "nothing" if mine is None else f"shape {tuple(mine.shape)}"
            shapes.append(f"{part} {found}, expected {tuple(want.shape)}")
            wrong.append(part)
            layout = layout or (None if mine is None else _layout(part, mine, want, allowed))
            continue
        diff = _diff(mine, want)
        if not diff <= allowed:
            wrong.append(part)
            worst = max(worst, diff)
            said = sgd.known_factor(mine, want, batch)
            if said:
                factors.append((part, said))
    if factors and len(factors) == len(wrong) and len({s for _, s in factors}) == 1:
        layout = layout or f"{', '.join(p for p, _ in factors)} off the reference's by {factors[0][1]}"
    verdict: dict[str, Any] = {"stage": name, "verdict": "wrong" if wrong else "ok",
                               "max_abs_diff": worst if wrong and np.isfinite(worst) and worst > 0 else None,
                               "layout": layout}
    if wrong:
        verdict["reason"] = "; ".join([f"its {', '.join(wrong)} differ{'s' if len(wrong) == 1 else ''} from "
                                       "the reference's", *shapes])
    return verdict
