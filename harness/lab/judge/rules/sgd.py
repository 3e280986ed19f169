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
    off_the_steps(losses, found, oracle_losses, before, expected) -> str | None
                                         timed steps on unseen batches against the oracle's replay of
                                         them: why they were not computed, or None (TIMED_TOLERANCE,
                                         NOT_TAKEN)
"""

import numpy as np

from harness.data import weights

Weights = dict[str, weights.Layer]
BACKWARD = ("fc3", "fc2", "fc1", "conv2", "conv1")  # the order backpropagation finds the gradients
# Timed steps run on unseen noisy images with random labels, many in a row: a max-pool near-tie there
# may route one gradient entry differently in float32 than in the oracle's float64 (verify-train's
# "tie"), and the steps after it carry the difference on (the NumPy reference's own float32 step over
# 320 chunks of 5-10 steps, measured 2026-11-29: losses within 2.2e-4 relative, one layer 1.9e-3
# apart, at most 0.29 of what the chunk moved it). A layer is off only past both bounds: a step not
# taken (or taken on other batches) leaves it as far from the oracle's as the steps moved it, or farther.
TIMED_TOLERANCE = 1e-3  # the losses (relative), and the weights' floor (absolute)
NOT_TAKEN = 0.5  # a layer's weights off by more than this share of the oracle's move over the chunk


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


def off_the_steps(losses: np.ndarray, found: Weights, oracle_losses: list[float], before: Weights,
                  expected: Weights) -> str | None:
    """Timed steps from weights `before`, on unseen batches: their losses within TIMED_TOLERANCE
    (relative) of the oracle's replay of them from the same weights, and every layer after them
    (`found`) within TIMED_TOLERANCE of the oracle's (`expected`) or within NOT_TAKEN of the oracle's
    move over them; else why not, in words."""
    rel = np.abs(np.asarray(losses, np.float64) - oracle_losses) / np.maximum(np.abs(oracle_losses), 1e-12)
    worst_loss = float(np.max(rel)) if np.all(np.isfinite(rel)) else float("inf")
    diffs, moved = layer_diffs(found, expected), layer_diffs(expected, before)
    off = [n for n in BACKWARD if not (diffs[n] <= TIMED_TOLERANCE or diffs[n] <= NOT_TAKEN * moved[n])]
    if worst_loss <= TIMED_TOLERANCE and not off:
        return None
    words = [f"loss relative {worst_loss:.2g} (allowed {TIMED_TOLERANCE:g})"]
    words += [f"{n} weights {diffs[n]:.2g} from the reference's, which the steps moved {moved[n]:.2g} "
              f"(allowed {TIMED_TOLERANCE:g}, or {NOT_TAKEN:g} of the move)" for n in off]
    return "; ".join(words)
