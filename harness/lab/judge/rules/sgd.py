"""The training gate's rule (a lab with task = "training"): a submission's SGD steps against the
oracle's, step by step, as `verify-train` holds every level. The grader (harness.lab.judge.phases.
training) and a training lab's kit (harness.lab.term.handout.trainkit) judge with the same functions,
which need NumPy alone (the oracle's answers: harness.lab.judge.rules.oracle, grader only).

    Weights, BACKWARD                    {layer: Layer(kernel, bias)}; the layers in backpropagation's order
    unflat(values) -> Weights            61,706 values in harness.data.weights.SHAPES' order, as layers
    shape_error(found) -> str | None     weights()'s answer against the layers' shapes, in the words the
                                         grader's worker uses (harness.lab.box.tasks.weights)
    layer_diffs(found, expected)         {layer: max |w - oracle's w|}
    gate_numbers(losses, found, oracle_losses, oracle_weights, max_rel_loss, max_abs_diff, alt, start,
                 batch) -> dict          per step the loss, then each layer's difference (the loss first:
                                         a forward bug is named as one); passes; the first failure in
                                         words and its kind (FORWARD, BACKWARD, SCALE); the steps of
                                         ReLU's gradient at 0 taken as 1 (alt) accepted too (relu_at_zero)
    known_factor(got, want, batch) -> str | None   an answer off by a known factor (the batch size,
                                         the learning rate, the sign), in words
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


def shape_error(found: object) -> str | None:
    """Why weights()'s answer is not {layer: (kernel, bias)} in the layers' own shapes (the grader's
    worker refuses it in these words: harness.lab.box.tasks.weights), or None."""
    for name, shapes in weights.SHAPES.items():
        try:
            layer = tuple(found[name])  # type: ignore[index]
        except (KeyError, TypeError, IndexError):
            return f"weights() has no layer {name!r} (kernel, bias)"
        for value, shape in zip(layer, shapes, strict=False):
            value = np.asarray(value)
            if value.shape != shape:
                return f"weights()[{name!r}]: shape {value.shape}, expected {shape}"
    return None


FORWARD, BACKWARD_KIND, SCALE = "forward", "backward", "scale"  # a wrong step's kinds (gate["kind"])


def known_factor(got: np.ndarray, want: np.ndarray, batch: int) -> str | None:
    """`got` as a known multiple of `want` (within 1%): the batch size, one over it, the learning
    rate, one over it, or -1, in words; None when it is none of them."""
    from harness.base import LEARNING_RATE

    g, w = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    if g.shape != w.shape or not np.all(np.isfinite(g)):
        return None
    ww = float(w @ w)
    if ww <= 0:
        return None
    c, lr = float(g @ w) / ww, LEARNING_RATE
    words = {batch: f"a factor of {batch}, the batch size: a gradient of the batch's summed loss, where "
                    "the lab's loss is its mean (divide by N once)",
             1 / batch: f"a factor of 1/{batch}, one over the batch size: divided by N once too often "
                        "(the upstream gradient already holds the mean's 1/N)",
             lr: f"a factor of {lr:g}, the learning rate: the step (lr times the gradient) where the "
                 "gradient is asked",
             1 / lr: f"a factor of 1/{lr:g}, one over the learning rate: w -= dw without the learning rate",
             -1.0: "a factor of -1, the opposite sign: the gradient of the loss is d(loss)/dw, and the "
                   "update subtracts it (w -= lr * dw)"}
    for factor, said in words.items():
        if abs(c - factor) <= 0.01 * abs(factor) and \
                float(np.linalg.norm(g - factor * w)) <= 0.01 * abs(factor) * ww ** 0.5:
            return said
    return None


def _flat(layer: weights.Layer) -> np.ndarray:
    return np.concatenate([np.ravel(layer[0]), np.ravel(layer[1])])


def gate_numbers(losses: list[float], found: list[Weights], oracle_losses: list[float],
                 oracle_weights: list[Weights], max_rel_loss: float, max_abs_diff: float,
                 alt: tuple[list[float], list[Weights]] | None = None, start: Weights | None = None,
                 batch: int = 0) -> dict:
    """The gate's row: per step the loss, the oracle's, their relative difference and each layer's
    max |dw| against the oracle's; `passes`; the first failure in words and its kind. Within a step
    the loss comes first (a wrong forward pass makes every gradient wrong: it is named as itself).
    `alt`: the oracle's steps with ReLU's gradient at exactly 0 taken as 1 (their losses, their
    weights), accepted as well (the chain nearer the submission's is judged; relu_at_zero says
    which). `start`: the weights before the first step, to name a step off by a known factor
    (known_factor) of `batch`."""
    chains = {0: (oracle_losses, oracle_weights), **({1: alt} if alt is not None else {})}
    diffs = {rule: [layer_diffs(w, want) for w, want in zip(found, chain, strict=True)]
             for rule, (_, chain) in chains.items()}
    near = {rule: sum(d <= max_abs_diff for step in ds for d in step.values()) for rule, ds in diffs.items()}
    rule = max(chains, key=lambda r: (near[r], -r))  # a tie: the oracle's own rule
    steps, first, kind = [], None, None
    want_losses, want_weights = chains[rule]
    for k, (loss, w, want_loss, want_w) in enumerate(zip(losses, found, want_losses, want_weights,
                                                          strict=True), 1):
        rel = abs(loss - want_loss) / max(abs(want_loss), 1e-12)
        rel = rel if np.isfinite(rel) else float("inf")
        layers = diffs[rule][k - 1]
        steps.append({"step": k, "loss": loss, "oracle_loss": want_loss, "rel_loss": rel, "layers": layers})
        if first is not None:
            continue
        wrong = [n for n in BACKWARD if not layers[n] <= max_abs_diff]
        if not rel <= max_rel_loss:
            first, kind = (f"step {k}: the loss {loss:.7g} differs from the NumPy reference's "
                           f"{want_loss:.7g} (relative {rel:.2g}, allowed {max_rel_loss:g}), before any "
                           "weight is compared: the forward pass or the loss is wrong"), FORWARD
        elif wrong:
            first, kind = (f"step {k}: the weights of {wrong[0]} differ from the NumPy reference's by "
                           f"up to {layers[wrong[0]]:.3g} (allowed {max_abs_diff:g}): {wrong[0]}'s gradient "
                           "is wrong"
                           + (f" (then {', '.join(wrong[1:])}, which backpropagation reaches through it)"
                              if wrong[1:] else "")), BACKWARD_KIND
            before = start if k == 1 else found[k - 2]
            want_before = start if k == 1 else want_weights[k - 2]
            if before is not None and want_before is not None and batch:
                said = known_factor(_flat(w[wrong[0]]) - _flat(before[wrong[0]]),
                                    _flat(want_w[wrong[0]]) - _flat(want_before[wrong[0]]), batch)
                if said:
                    first, kind = (f"step {k}: {wrong[0]}'s step (how far it moved the weights) is off the "
                                   f"NumPy reference's by {said}"), SCALE
    return {"steps": steps, "passes": first is None, "first_failure": first, "kind": kind,
            "relu_at_zero": rule}


def gate_sentence(gate: dict, rule: str) -> str:
    """The training gate's line: each step's loss against the oracle's, and its first failure."""
    steps = [s for s in gate.get("steps") or [] if isinstance(s, dict)]
    losses = "; ".join(f"step {s['step']} loss {s['loss']:.6g} (reference {s['oracle_loss']:.6g})"
                       for s in steps)
    verdict = "passed" if gate.get("passes") else f"failed: {gate.get('first_failure')}"
    relu = (" Your ReLU's gradient at a pre-activation of exactly 0 is 1 where the reference takes 0: "
            "both are accepted." if gate.get("relu_at_zero") == 1 else "")
    return f"Gate ({rule}): {verdict}. {losses}.{relu}"


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
