"""A training lab's check in its kit (`lenet-lab check` where the lab's task is "training"): the
grader's gate on the student's harness.base.Trainer, in this process: [gate] steps SGD steps from the
shared initial weights on the kit's batches, each step's loss and weights against the oracle's
(shipped precomputed), by the grader's own rule (harness.lab.judge.rules.sgd); then the time per step
against the NumPy reference's (timed where the kit was built, scaled to this machine).

    check(trainer, kit, say) -> bool  True when the grader's gate passes (the student's Trainer, built
                                      by harness.lab.term.handout.student.build)
"""

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.data import mnist, weights
from harness.lab.judge.rules import sgd
from harness.lab.term.handout import doctor

EXTRA_STEPS = 5  # timed after the gate, on its batches again


def check(trainer: Any, kit: Any, say: Callable[[str], None] = print) -> bool:
    lab, gate = kit.lab, kit.lab["gate"]
    if kit.labels is None or kit.losses is None:
        raise ValueError("this kit holds no training gate (gate.npz without labels and losses)")
    for warning in doctor.version_warnings(kit):
        say(warning)
    batch = gate["batch"]
    x = mnist.to_input(kit.images, lab["dtype"])
    losses, found, times = [], [], []
    try:
        for k in range(gate["steps"] + EXTRA_STEPS):
            part = slice((k % gate["steps"]) * batch, (k % gate["steps"] + 1) * batch)
            t0 = time.perf_counter_ns()
            loss = float(trainer.train_step(x[part], kit.labels[part].astype(np.int64)))
            times.append(time.perf_counter_ns() - t0)
            if k < gate["steps"]:
                losses.append(loss)
                found.append({name: weights.Layer(np.asarray(k_, np.float64), np.asarray(b_, np.float64))
                              for name, (k_, b_) in trainer.weights().items()})
    finally:
        getattr(trainer, "close", lambda: None)()
    expected = [sgd.unflat(w) for w in kit.oracle]
    result = sgd.gate_numbers(losses, found, [float(v) for v in kit.losses], expected, gate["max_rel_loss"],
                              gate["max_abs_diff"])
    say(sgd.gate_sentence(result, lab["rule"]))
    say(doctor.speed_line(kit, float(np.median(times[1:])), f"step of {batch} images"))
    say(f"Peak memory of this check: {doctor.peak_mb():.0f} MiB (the kit's data included)")
    if not result["passes"]:
        say("Status: wrong. Check the named layer's gradient against a numerical one (nudge one weight "
            "in float64 and watch the loss) on a batch of 2.")
        return False
    say(f"Status: passes the gate. The grader ranks your step by the ratio to {lab['rank_by']}'s, timed "
        "beside you on its own machine, on batches you have not seen.")
    return True
