"""A training lab's kit, where it is not an inference lab's (harness.lab.term.handout.kit builds the
rest): its README, written for one SGD step, and its gate data, the oracle's answers precomputed for
the kit's check (harness.lab.term.handout.trainkit judges with the grader's own rules). Runs where
the kit is built (the oracle is imported here), never shipped.

    readme(lab) -> str                  the students' README: the commands (intro), the rules the
                                        reference keeps (RULES), the gate and points (gate_lines),
                                        what a passed and a failed check look like (says)
    gate_data(lab, weights) -> {name: array}   gate.npz: the steps' images and labels, the oracle's
                                        losses and weights after each step (and alt's: ReLU's gradient
                                        at 0 taken as 1), each stage's inputs and answers
    next_step(row, lab) -> str | None   the advice a failed submission's feedback gives, by kind of failure
"""

from pathlib import Path

import numpy as np

from harness.data import weights as weights_file
from harness.lab.judge.rules.assignment import Lab
from harness.lab.term.handout import advice
from harness.lab.term.handout.trainkit import PARTS, key


def _flat(after: list) -> np.ndarray:
    """(steps, 61706) float64: each step's weights in harness.data.weights.SHAPES' order."""
    return np.stack([np.concatenate([part.ravel() for name in weights_file.SHAPES for part in w[name]])
                     for w in after])


def gate_data(lab: Lab, weights: Path) -> dict[str, np.ndarray]:
    """gate.npz's arrays for a training lab, as the grader computes them (harness.lab.judge.phases.
    training, harness.lab.judge.rules.oracle): the gate's first batch's stages, backward (the lab's
    [stages]) and forward (asked where the loss is wrong)."""
    from harness.data import mnist
    from harness.lab.judge.rules import oracle

    images, labels = mnist.load("train")
    b, n = lab.gate.batch, lab.gate.steps * lab.gate.batch
    batches = [(images[i:i + b], labels[i:i + b].astype(np.int64)) for i in range(0, n, b)]
    start = {name: weights_file.Layer(k.astype(np.float64), bias.astype(np.float64))
             for name, (k, bias) in weights_file.read(weights).items()}
    losses, after = oracle.steps(start, batches)
    out = {"images": images[:n], "labels": labels[:n].astype(np.int64), "losses": np.array(losses),
           "oracle": _flat(after)}
    alt_losses, alt = oracle.steps(start, batches, at_zero=1)
    out["alt"], out["alt_losses"] = _flat(alt), np.array(alt_losses)
    for name, stage in oracle.backward(start, *batches[0]).items():
        if name not in dict(lab.stages):
            continue
        for part, value in zip(PARTS, stage[:7], strict=True):
            if value is not None:
                out[key("backward", name, part)] = np.asarray(value)
        for part, value in zip(PARTS[4:], stage.alt or (None, None, None), strict=True):
            if value is not None:
                out[key("backward", name, f"alt_{part}")] = np.asarray(value)
    for name, forward in oracle.forward_stages(weights, batches[0][0], lab.dtype).items():
        out[key("forward", name, "input")] = forward.input
        out[key("forward", name, "output")] = forward.output
        for mistake in forward.mistakes.values():  # fc1's NCHW flatten
            out[key("forward", name, "flatten_nchw")] = mistake
    return out


def readme(lab: Lab) -> str:
    """The students' README of a training lab's kit: its commands and what to write, the rules the
    reference keeps, the gate and partial credit, what the check says, hand in."""
    return "\n".join([*intro(lab), *RULES, *gate_lines(lab), *says(lab)])


def intro(lab: Lab) -> list[str]:
    module, name = lab.module, lab.name
    return [
        f"# {lab.title or name}: the student kit of lab `{name}`", "",
        "You write one step of training for LeNet-5 in NumPy: the forward pass, the loss, the backward "
        "pass by hand, and the SGD update. This kit holds what your file imports (`harness.base.Trainer`, "
        "`harness.registry.ImplSpec`, `harness.data.weights`), the initial weights every step starts from, "
        f"the starter `{module}`, the gate's training batches with the reference's answers precomputed (its "
        "loss and weights after each step, each layer's gradients), and the grader's own check. It holds no "
        "implementation of LeNet-5: that is yours to write.", "",
        "## Check, with nothing installed", "",
        "From this folder, with any Python 3.10+ that has NumPy (nothing else, nothing to install):", "",
        "```sh", f"cd lab-kit-{name}", f"python -m lenet_lab check path/to/{module}", "```", "",
        "Or install it once (`python3 -m venv .venv && . .venv/bin/activate && python -m pip install "
        f"./lab-kit-{name}`), then `lenet-lab check path/to/{module}` from anywhere. `python -m lenet_lab "
        "info` shows the lab, its gate and limits; `python -m lenet_lab doctor` what this machine has.", "",
        "## Write", "",
        f"Copy `{module}` into a folder of your own and fill in `train_step(images, labels)`: images "
        "(N, 28, 28, 1) float32 in [0, 1], labels (N,) int64; it returns the batch's mean loss (a float) "
        "and updates every kernel and bias, `w -= self.learning_rate * dw`. `weights()` returns the current "
        "weights, each kernel and bias in its own shape. One `harness.base.Trainer` subclass in "
        f"`{module}`; other modules of your folder may be imported by name (only the files `{module}` "
        "imports count as your lines of code). One thread; no network; none of the project's `lenet_*` "
        "packages.", "",
        "The network: conv1 6x5x5 'same' + ReLU, max pool 2x2, conv2 16x5x5 'valid' + ReLU, max pool 2x2, "
        "flatten (400), dense 120 ReLU, dense 84 ReLU, dense 10, softmax cross-entropy.", ""]


RULES = [
    "## The rules the reference keeps", "",
    "Where two reasonable codes differ, the grader compares with these:", "",
    "- the loss is softmax cross-entropy **averaged over the batch**, taken **before** the update; "
    "every gradient is of that mean (divide by N once);",
    "- **ReLU's gradient** is 1 above 0 and 0 below; at a pre-activation of exactly 0 (common at the "
    "initial weights, whose biases are 0: a 5x5 window of background pixels) the reference takes 0, "
    "and 1 is accepted too, for the whole step (both are subgradients);",
    "- a **max pool's gradient** goes to the first maximum of its 2x2 window in row-major order "
    "(top-left, top-right, bottom-left, bottom-right), once;",
    "- fc1's input is flattened in **NHWC** order: reshape (N, 5, 5, 16) to (N, 400) as it is;",
    "- kernels in Keras' layouts: conv **(5, 5, C_in, C_out)** (HWIO), dense **(inputs, outputs)**; "
    "biases (outputs,).", ""]


def gate_lines(lab: Lab) -> list[str]:
    gate = lab.gate
    stages = ", ".join(f"{stage} {points:g}" for stage, points in lab.stages)
    most = lab.grade.gate_points
    return [
        "## The gate, and partial credit", "",
        f"The grader runs {gate.steps} SGD steps of {gate.batch} training images (the first "
        f"{gate.steps * gate.batch}, in order) from the initial weights. After each step it compares your "
        f"loss first (within {gate.max_rel_loss:g}, relative), then every weight (within "
        f"{gate.max_abs_diff:g}): a wrong loss means the forward pass or the loss is wrong, a wrong layer "
        "with a right loss that layer's gradient. Passing gives the gate's points and your step is timed "
        "beside the NumPy reference's on batches you have not seen.", "",
        f"A step that fails the gate, for whatever reason (a wrong step, a weight of the wrong shape, an "
        f"error), gets the points of the layers whose backward is right on its own ({stages}; at most "
        f"{most:g}). For them write the optional `backward(name, x, upstream, kernel, bias)` (the starter "
        "documents it): the grader hands each layer the reference's input, the reference's gradient from "
        "the layer after it and the initial weights, so one wrong layer costs only its own points. With "
        "the optional `stage(name, x)` (a layer's forward output) a wrong loss is traced to the first "
        "layer that departs.", ""]


def says(lab: Lab) -> list[str]:
    gate, module = lab.gate, lab.module
    command = advice.KIT_COMMAND.format(module=module)
    return [
        "## What the check says", "",
        "Passed:", "",
        "```text",
        f"Gate ({lab.gate_rule}): passed. step 1 loss 2.30... (reference 2.30...); ...",
        "Stage by stage (...): 5 of 5 right (their points do not count: the gate's do)",
        f"Median time per step of {gate.batch} images: ... us on this machine. numpy takes about ...",
        "Status: passes the gate. ...", "```", "",
        "Failed, with one wrong layer (its `backward` too):", "",
        "```text",
        f"Gate ({lab.gate_rule}): failed: step 1: the weights of fc2 differ from the NumPy reference's by "
        "up to 0.0031 (allowed 0.0001): fc2's gradient is wrong (then fc1, conv2, conv1, which "
        "backpropagation reaches through it). ...",
        "Stage by stage (...): 4 of 5 right",
        "- fc3: ok (12 of 12 points)",
        "- fc2: wrong (0 of 12 points), largest difference 0.062; its dx, dkernel, dbias differ from the "
        "reference's",
        "...",
        "Status: wrong. Next step: ...", "```", "",
        "A stage's line may name a known mistake: an answer off by a factor of the batch size (a gradient "
        "of the summed loss) or of the learning rate (the step where the gradient is asked), an NCHW dx, "
        "a kernel in PyTorch's (out, in, kh, kw) order. The check exits 0 when the gate passes; the "
        "grader says the same of the gate and the stages (speed and memory are the grader's alone). "
        f"If it fails, it prints what to do next; `{command}` again after each fix.", "",
        "## Hand in", "",
        f"Your `{module}` (and any helper module it imports), as the course says (the LMS assignment, or "
        "your git repository).", ""]


def next_step(row: dict, lab: Lab) -> str | None:
    """A training lab's advice on a failure, by its kind (harness.lab.term.handout.advice), else none."""
    found = advice.kind(row.get("status"), row.get("reason"), row.get("gate"))
    return advice.next_step(found, lab.name, lab.module) if found else None
