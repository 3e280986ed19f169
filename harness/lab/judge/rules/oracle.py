"""The oracle's answers a grading compares with (grader only: it imports lenet_numpy, which no kit
ships; a kit carries these answers precomputed). Everything else of the rules is NumPy alone.

    forward_stages(weights_path, images_u8, dtype) -> {name: stages.Stage}   each inference stage's
                                      input and output, NHWC, each input the oracle's output before it
    steps(w, batches, at_zero) -> (losses, weights after each step)   the oracle's SGD steps (float64)
    backward(w, images_u8, labels) -> {name: backprop.Backward}   each training stage: what it is
                                      handed, the oracle's gradients and (alt) those with ReLU's
                                      gradient at exactly 0 taken as 1
    local(name, x, upstream, kernel, bias, at_zero) -> (dx, dkernel, dbias)   one layer's backward
                                      (harness.lab.reference's, where a reference's worker runs it too)
    activations(w, x) -> {name: array}   each stage's input, the oracle's forward pass at weights w

ReLU's gradient at a pre-activation of exactly 0: the oracle (lenet_numpy.train) takes it as 0; a
step or a stage that takes it as 1 (`at_zero=1`) is accepted too (harness.lab.judge.rules.sgd and
backprop judge against both), as verify-train accepts a max pool's ties: ReLU has no derivative at 0
and both are its subgradients. It matters at the shared initial weights, whose biases are 0: a 5x5
window of background pixels gives a pre-activation of exactly 0.
"""

from pathlib import Path
from typing import Any

import numpy as np

from harness.data import mnist
from harness.data import weights as weights_file
from harness.lab.judge.rules import backprop, stages
from harness.lab.judge.rules.sgd import BACKWARD, Weights
from harness.lab.reference import local


def forward_stages(weights_path: str | Path, images_u8: np.ndarray, dtype: str) -> dict[str, stages.Stage]:
    """{stage: Stage}, NHWC, each stage's input the oracle's own output of the stage before."""
    from lenet_numpy.model import conv2d_relu, dense, max_pool_2x2, softmax  # the oracle: grader only

    w = {name: weights_file.Layer(k.astype(dtype), b.astype(dtype)) for name, (k, b) in
         weights_file.read(weights_path).items()}
    steps = {"conv1": lambda x: conv2d_relu(x, *w["conv1"], pad=2), "pool1": max_pool_2x2,
             "conv2": lambda x: conv2d_relu(x, *w["conv2"], pad=0), "pool2": max_pool_2x2,
             "fc1": lambda x: np.maximum(dense(x.reshape(len(x), -1), *w["fc1"]), 0),
             "fc2": lambda x: np.maximum(dense(x, *w["fc2"]), 0), "fc3": lambda x: dense(x, *w["fc3"]),
             "softmax": softmax}
    x, out = mnist.to_input(images_u8, dtype), {}
    for name in stages.INFERENCE:
        y = steps[name](x).astype(dtype)
        mistakes = {}
        if name == "fc1":  # pool2's output flattened channels first: (N, 16, 5, 5) -> (N, 400)
            mistakes[stages.FLATTEN_NCHW] = np.maximum(dense(x.transpose(0, 3, 1, 2).reshape(len(x), -1),
                                                             *w["fc1"]), 0).astype(dtype)
        out[name] = stages.Stage(x, y, mistakes)
        x = y
    return out


def activations(w: Weights, x: np.ndarray) -> dict[str, np.ndarray]:
    """Each stage's input (what the grader hands it), the oracle's forward pass at weights w."""
    from lenet_numpy import train  # the oracle: grader only

    p1 = train.pool_forward(np.maximum(train.conv_forward(x, *w["conv1"], pad=2)[0], 0))[0]   # (N, 14, 14, 6)
    p2 = train.pool_forward(np.maximum(train.conv_forward(p1, *w["conv2"], pad=0)[0], 0))[0]  # (N, 5, 5, 16)
    h1 = np.maximum(p2.reshape(len(x), -1) @ w["fc1"].kernel + w["fc1"].bias, 0)              # (N, 120)
    h2 = np.maximum(h1 @ w["fc2"].kernel + w["fc2"].bias, 0)                                  # (N, 84)
    return {"conv1": x, "conv2": p1, "fc1": p2, "fc2": h1, "fc3": h2}


def backward(w: Weights, images_u8: np.ndarray, labels: np.ndarray) -> dict[str, backprop.Backward]:
    """{stage: Backward} in backpropagation's order at weights w (float64): each stage's upstream is
    the oracle's dx of the stage after it; alt: its gradients from the same inputs with ReLU's
    gradient at exactly 0 taken as 1 (None for fc3, which has no ReLU)."""
    x = mnist.to_input(images_u8, "float64")
    up: Any = np.asarray(labels, np.int64)  # fc3's: the labels; then each stage's dx
    acts, out = activations(w, x), {}
    for name in BACKWARD:
        kernel, bias = w[name]
        dx, dk, db = local(name, acts[name], up, kernel, bias)
        alt = None if name == "fc3" else local(name, acts[name], up, kernel, bias, at_zero=1)
        out[name] = backprop.Backward(acts[name], up, kernel, bias, dx, dk, db, alt)
        up = dx if dx is not None else up
    return out


def gradients(w: Weights, x: np.ndarray, labels: np.ndarray, at_zero: int) -> dict[str, tuple]:
    """{layer: (dkernel, dbias)} of the batch's mean loss at weights w, ReLU's gradient at 0 = at_zero."""
    acts, out = activations(w, x), {}
    up: Any = np.asarray(labels, np.int64)  # fc3's: the labels; then each stage's dx
    for name in BACKWARD:
        dx, dk, db = local(name, acts[name], up, *w[name], at_zero=at_zero)
        out[name], up = (dk, db), dx
    return out


def steps(w: Weights, batches: list[tuple[np.ndarray, np.ndarray]],
          at_zero: int = 0) -> tuple[list[float], list[Weights]]:
    """The oracle's (lenet_numpy.train, float64) loss of each step and its weights after it; with
    at_zero=1 the steps of ReLU's other subgradient at 0 (the same losses: the forward is the same)."""
    from harness.base import LEARNING_RATE
    from lenet_numpy.train import loss_and_grads  # the oracle: grader only

    losses, after = [], []
    for x_u8, y in batches:
        x, y = mnist.to_input(x_u8, "float64"), np.asarray(y, np.int64)
        loss, grads = loss_and_grads(w, x, y)
        if at_zero:
            grads = {n: weights_file.Layer(*g) for n, g in gradients(w, x, y, at_zero).items()}
        w = {n: weights_file.Layer(k - LEARNING_RATE * grads[n].kernel, b - LEARNING_RATE * grads[n].bias)
             for n, (k, b) in w.items()}
        losses.append(loss)
        after.append(w)
    return losses, after
