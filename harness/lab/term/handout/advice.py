"""What a training lab's student is told to do next, by the kind of failure: the grader's feedback
(harness.lab.term.marks.feedback) and the kit's check (harness.lab.term.handout.trainkit) say the
same words, in terms a student knows (no operating-system terms). Stdlib only: the kit ships it.

    KIT_COMMAND                      the kit's check from its folder, nothing installed
    kind(status, reason, gate) -> str | None   shape, forward, backward, scale, crash, slow, timeout
    next_step(kind, module) -> str   the advice for that kind
    departure(verdicts) -> str   a wrong loss's forward stages: the first layer that departs, or
                                     why none is named
"""

KIT_COMMAND = "python -m lenet_lab check {module}"  # from the unzipped kit's folder (lenet_lab/__main__.py)
KIT_WHERE = ("from the kit's folder (lab-kit-{lab}), with NumPy alone: `" + KIT_COMMAND + "` (or, with "
             "the kit installed, `lenet-lab check {module}`)")
RULES = ("the rules the reference keeps: ReLU's gradient 0 at a pre-activation below 0 (at exactly 0 "
         "either 0 or 1 is accepted); a max pool's gradient to the first maximum of its window in "
         "row-major order; the loss averaged over the batch (divide by N once); fc1's input flattened "
         "in NHWC order; kernels in HWIO and (inputs, outputs) layouts; the loss taken before the update")
ADVICE = {
    "shape": "weights() must return every kernel and bias in its own shape (conv kernels (5, 5, C_in, "
             "C_out), dense kernels (inputs, outputs), every bias (outputs,)): a bias of shape (1, 120) "
             "is usually a sum kept 2-D (keepdims=True) or a row vector; reshape it to (120,). Run the "
             "kit's check " + KIT_WHERE + ": it compares the same shapes.",
    "forward": "Your loss differs from the reference's before any weight is compared, so the forward pass "
               "or the loss is wrong, not the gradients. Write the optional `stage(name, x)` (the template "
               "shows it) and the check names the first layer that departs. Usual suspects: " + RULES + ". "
               "Run the kit's check " + KIT_WHERE + ".",
    "backward": "Your loss is right and the named layer's weights are not: its gradient is wrong (the "
                "stages below ask each layer's backward on its own). Check it against a numerical "
                "gradient (nudge one weight by 1e-3 in float64 and watch the loss) on a batch of 2. "
                "Usual suspects: " + RULES + ". Run the kit's check " + KIT_WHERE + ".",
    "scale": "Your step is the reference's times a known factor (named above). The lab's loss is the "
             "batch's mean, its gradient d(mean loss), and the update w -= learning_rate * dw once. "
             "Run the kit's check " + KIT_WHERE + ".",
    "crash": "Your code raised an error (the log below shows where). Run the kit's check " + KIT_WHERE +
             ": it calls train_step and weights() as the grader does and prints the traceback.",
    "slow": "Time one train_step on a batch of 32: Python loops over pixels or channels are the usual "
            "cause; write each layer as a few whole-array operations (a convolution as one matrix "
            "product over its 5x5 windows, forward and backward).",
    "timeout": "A call did not finish within its deadline (the reason above says which, and how the "
               "deadline was set from the reference's own time): a loop that never ends, or a step far "
               "slower than the reference's. Run the kit's check " + KIT_WHERE + ": it times your step.",
}


def kind(status: object, reason: object, gate: object) -> str | None:
    """The kind of a training row's failure (None: ok, or a kind without advice of its own)."""
    if status == "too-slow":
        return "slow"
    if status == "timeout":
        return "timeout"
    if status in ("crashed", "out-of-memory", "import-error"):
        return "crash"
    if status != "wrong":
        return None
    found = gate.get("kind") if isinstance(gate, dict) and not gate.get("passes") else None
    if found:
        return str(found)
    return "shape" if str(reason or "").startswith("weights()") else None


def next_step(kind_: str, lab: str, module: str) -> str:
    return ADVICE[kind_].format(lab=lab, module=module)


def departure(verdicts: list[dict]) -> str:
    """The forward stages' finding in words: the first that departs, or why none is named."""
    if not verdicts:
        return ""
    first = next((v for v in verdicts if v.get("verdict") != "ok"), None)
    if first is None:
        return ("Forward pass, layer by layer (each given the reference's input to it): every layer is "
                "right, so the loss is wrong: softmax cross-entropy of fc3's output, averaged over the "
                "batch, taken before the update.")
    if first.get("verdict") == "missing":
        return ("The forward pass or the loss is wrong: without `stage(name, x)` (optional, the template "
                "shows it) no layer can be named; with it, the first layer that departs is.")
    said = "; ".join(str(first[k]) for k in ("reason", "layout") if first.get(k))
    return (f"Forward pass, layer by layer (each given the reference's input to it): the first that departs "
            f"is **{first.get('stage')}** ({first.get('verdict')}" + (f": {said}" if said else "") + ").")
