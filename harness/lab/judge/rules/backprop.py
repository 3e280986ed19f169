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

    Backward(x, upstream, kernel, bias, dx, dkernel, dbias)   one stage: what it is handed, the
                                      oracle's gradients (dx None where not graded)
    oracle(w, images_u8, labels) -> {name: Backward}   the oracle's (float64), stage by stage
    judge(name, got, expected, tol) -> dict   one stage's verdict (harness.lab.judge.rules.stages'
                                      shape): each gradient within tol, the wrong ones and the largest
                                      difference named, an NCHW dx or an OIHW kernel recognised
    tolerance(max_abs_diff) -> float  a gradient's allowed |difference|: the gate's on the weights / lr
"""

from typing import Any, NamedTuple

import numpy as np

from harness.base import LEARNING_RATE
from harness.lab.judge.rules import stages
from harness.lab.judge.rules.sgd import Weights

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


def oracle(w: Weights, images_u8: np.ndarray, labels: np.ndarray) -> dict[str, Backward]:
    """{stage: Backward} in backpropagation's order, from the oracle's own functions (lenet_numpy.
    train) at weights w (float64): each stage's upstream is the oracle's dx of the stage after it."""
    from harness.data import mnist
    from lenet_numpy import train  # the oracle: grader only

    x = mnist.to_input(images_u8, "float64")
    labels = np.asarray(labels, np.int64)
    (k1, b1), (k2, b2), (k3, b3), (k4, b4), (k5, b5) = (w[n] for n in ("conv1", "conv2", "fc1", "fc2", "fc3"))
    z1, c1 = train.conv_forward(x, k1, b1, pad=2)                        # (N, 28, 28, 6)
    p1, m1 = train.pool_forward(np.maximum(z1, 0))                       # (N, 14, 14, 6)
    z2, c2 = train.conv_forward(p1, k2, b2, pad=0)                       # (N, 10, 10, 16)
    p2, m2 = train.pool_forward(np.maximum(z2, 0))                       # (N, 5, 5, 16)
    f = p2.reshape(len(x), -1)                                           # (N, 400)
    h1 = np.maximum(f @ k3 + b3, 0)                                      # (N, 120)
    h2 = np.maximum(h1 @ k4 + b4, 0)                                     # (N, 84)
    _, d = train.softmax_cross_entropy(h2 @ k5 + b5, labels)             # (N, 10)

    up5 = d @ k5.T                                                       # (N, 84)
    out = {"fc3": Backward(h2, labels, k5, b5, up5, h2.T @ d, d.sum(0))}
    d = up5 * (h2 > 0)
    up4 = d @ k4.T                                                       # (N, 120)
    out["fc2"] = Backward(h1, up5, k4, b4, up4, h1.T @ d, d.sum(0))
    d = up4 * (h1 > 0)
    up3 = (d @ k3.T).reshape(p2.shape)                                   # (N, 5, 5, 16)
    out["fc1"] = Backward(p2, up4, k3, b3, up3, f.T @ d, d.sum(0))
    up2, dk, db = train.conv_backward(train.pool_backward(up3, m2) * (z2 > 0), k2, c2)  # (N, 14, 14, 6)
    out["conv2"] = Backward(p1, up3, k2, b2, up2, dk, db)
    _, dk, db = train.conv_backward(train.pool_backward(up2, m1) * (z1 > 0), k1, c1, need_dx=False)
    out["conv1"] = Backward(x, up2, k1, b1, None, dk, db)
    return out


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
    oracle's (tol scaled by each one's range, as stages.tolerance); else "wrong", naming the wrong
    gradients and the largest difference among those of the right shape."""
    wrong, shapes, worst, layout = [], [], 0.0, None
    for part, mine, want in zip(PARTS, got, (expected.dx, expected.dkernel, expected.dbias), strict=True):
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
    verdict: dict[str, Any] = {"stage": name, "verdict": "wrong" if wrong else "ok",
                               "max_abs_diff": worst if wrong and np.isfinite(worst) and worst > 0 else None,
                               "layout": layout}
    if wrong:
        verdict["reason"] = "; ".join([f"its {', '.join(wrong)} differ{'s' if len(wrong) == 1 else ''} from "
                                       "the reference's", *shapes])
    return verdict
