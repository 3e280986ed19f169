"""The training gate's rule (a lab with task = "training"): a submission's SGD steps against the
oracle's, step by step, as `verify-train` holds every level. The grader (harness.lab.judge.phases.
training) and a training lab's kit (harness.lab.term.handout.student) judge with the same functions.

    Weights, BACKWARD                    {layer: Layer(kernel, bias)}; the layers in backpropagation's order
    unflat(values) -> Weights            61,706 values in harness.data.weights.SHAPES' order, as layers
    layer_diffs(found, expected)         {layer: max |w - oracle's w|}
    gate_numbers(losses, found, oracle_losses, oracle_weights, max_rel_loss, max_abs_diff) -> dict
                                         per step the loss and each layer's difference; passes; the first
                                         failure in words (its layer first in backpropagation's order)
    gate_sentence(gate, rule) -> str     the gate's line (feedback, the kit)
"""

import numpy as np

from harness.data import weights

Weights = dict[str, weights.Layer]
BACKWARD = ("fc3", "fc2", "fc1", "conv2", "conv1")  # the order backpropagation finds the gradients


def unflat(values: np.ndarray) -> Weights:
    out, at = {}, 0
    for name, shapes in weights.SHAPES.items():
        parts = []
        for shape in shapes:
            size = int(np.prod(shape))
            parts.append(np.asarray(values[at:at + size], np.float64).reshape(shape))
            at += size
        out[name] = weights.Layer(*parts)
    return out


def layer_diffs(found: Weights, expected: Weights) -> dict[str, float]:
    """{layer: max |w - oracle's w| over its kernel and bias}; NaN counts as infinite."""
    out = {}
    for name, (kernel, bias) in expected.items():
        d = max(float(np.max(np.abs(found[name].kernel - kernel))),
                float(np.max(np.abs(found[name].bias - bias))))
        out[name] = d if np.isfinite(d) else float("inf")
    return out


def gate_numbers(losses: list[float], found: list[Weights], oracle_losses: list[float],
                 oracle_weights: list[Weights], max_rel_loss: float, max_abs_diff: float) -> dict:
    """The gate's row: per step the loss, the oracle's, their relative difference and each layer's
    max |dw| against the oracle's; `passes`, and the first failure in words."""
    steps, first = [], None
    for k, (loss, w, want_loss, want_w) in enumerate(zip(losses, found, oracle_losses, oracle_weights,
                                                          strict=True), 1):
        rel = abs(loss - want_loss) / max(abs(want_loss), 1e-12)
        rel = rel if np.isfinite(rel) else float("inf")
        layers = layer_diffs(w, want_w)
        steps.append({"step": k, "loss": loss, "oracle_loss": want_loss, "rel_loss": rel, "layers": layers})
        if first is None:
            wrong = [n for n in BACKWARD if not layers[n] <= max_abs_diff]
            if wrong:
                first = (f"step {k}: the weights of {wrong[0]} differ from the NumPy reference's by up to "
                         f"{layers[wrong[0]]:.3g} (allowed {max_abs_diff:g}): {wrong[0]}'s gradient is wrong"
                         + (f" (then {', '.join(wrong[1:])}, which backpropagation reaches through it)"
                            if wrong[1:] else ""))
            elif not rel <= max_rel_loss:
                first = (f"step {k}: the loss {loss:.7g} differs from the NumPy reference's {want_loss:.7g} "
                         f"(relative {rel:.2g}, allowed {max_rel_loss:g}): the forward pass or the loss "
                         "is wrong")
    return {"steps": steps, "passes": first is None, "first_failure": first}


def gate_sentence(gate: dict, rule: str) -> str:
    """The training gate's line: each step's loss against the oracle's, and its first failure."""
    steps = [s for s in gate.get("steps") or [] if isinstance(s, dict)]
    losses = "; ".join(f"step {s['step']} loss {s['loss']:.6g} (reference {s['oracle_loss']:.6g})"
                       for s in steps)
    verdict = "passed" if gate.get("passes") else f"failed: {gate.get('first_failure')}"
    return f"Gate ({rule}): {verdict}. {losses}."
