"""A training lab's check in its kit (`lenet-lab check` where the lab's task is "training"): the
grader's gate and stages on the student's harness.base.Trainer, in this process, with the grader's
own functions (harness.lab.judge.rules: sgd, backprop, stages, NumPy alone) against the oracle's
answers shipped precomputed (harness.lab.term.handout.kit.train_data): [gate] steps SGD steps from the
shared initial weights on the kit's batches, each step's loss and then its weights (their shapes
first, as the grader's worker checks them); where the loss is wrong, each forward stage on the
oracle's input (the submission's optional `stage`); then, whatever ended the gate (a wrong step, a
shape, an error), each layer's backward on its own (the lab's [stages]), on a freshly built Trainer
as the grader asks them of a fresh worker; then the time per step against the NumPy reference's
(timed where the kit was built, scaled to this machine). Speed and memory are the grader's alone.

    check(make, kit, say) -> bool     True when the grader's gate passes (make() builds the student's
                                      Trainer: harness.lab.term.handout.student.build)
    kit_check(path, kit, say, lock_timeout)   check, as `lenet-lab check` calls it (kit.json's checker)
    gate(trainer, kit) -> dict        the steps, judged as the grader judges them (WrongShape:
                                      weights() in the wrong shapes); batches(kit), timed(trainer, kit)
    asked_forward(trainer, kit) -> [verdict]   the forward stages (a wrong loss)
    asked_backward(trainer, kit) -> [verdict]  the lab's stages
    shipped_backward(kit), shipped_forward(kit)   the shipped answers as the rules' records
    key(kind, name, part) -> str      gate.npz's name of one shipped array (backward__fc2__dkernel)
"""

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness.data import mnist, weights
from harness.lab import backward
from harness.lab.judge.rules import backprop, sgd, stages
from harness.lab.term.handout import advice, doctor

EXTRA_STEPS = 5  # timed after the gate, on its batches again


class WrongShape(Exception):
    """weights()'s answer in the wrong shapes: the grader's worker refuses it (status wrong)."""


PARTS = ("x", "upstream", "kernel", "bias", "dx", "dkernel", "dbias")


def key(kind: str, name: str, part: str) -> str:
    """gate.npz's name of one shipped array: backward__fc2__dkernel, forward__fc1__output, ..."""
    return f"{kind}__{name}__{part}"


def shipped_backward(kit: Any) -> dict[str, backprop.Backward]:
    """{stage: Backward}: what each stage is handed and the oracle's answers (and alt's), as shipped."""
    out = {}
    for name, _ in kit.lab.get("stages") or []:
        got = {part: kit.arrays.get(key("backward", name, part)) for part in PARTS}
        alt = tuple(kit.arrays.get(key("backward", name, f"alt_{p}")) for p in PARTS[4:])
        out[name] = backprop.Backward(got["x"], got["upstream"], got["kernel"], got["bias"], got["dx"],
                                      got["dkernel"], got["dbias"], None if alt[1] is None else alt)
    return out


def shipped_forward(kit: Any) -> dict[str, stages.Stage]:
    out = {}
    for name in stages.INFERENCE:
        mistake = kit.arrays.get(key("forward", name, "flatten_nchw"))
        given, answer = (kit.arrays[key("forward", name, part)] for part in ("input", "output"))
        out[name] = stages.Stage(given, answer, {stages.FLATTEN_NCHW: mistake} if mistake is not None else {})
    return out


def batches(kit: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """The gate's batches: (B, 28, 28, 1) inputs in the lab's dtype, (B,) int64 labels."""
    want = kit.lab["gate"]
    x, b = mnist.to_input(kit.images, kit.lab["dtype"]), want["batch"]
    labels = kit.labels.astype(np.int64)
    return [(x[k * b:(k + 1) * b], labels[k * b:(k + 1) * b]) for k in range(want["steps"])]


def gate(trainer: Any, kit: Any) -> dict:
    """The gate's steps on the kit's batches, judged by sgd.gate_numbers (WrongShape: a weights() of
    the wrong shapes, in the grader's words)."""
    want = kit.lab["gate"]
    losses, found = [], []
    for x, y in batches(kit):
        losses.append(float(trainer.train_step(x, y)))
        answer = trainer.weights()
        why = sgd.shape_error(answer)
        if why:
            raise WrongShape(why)
        found.append({name: weights.Layer(np.asarray(answer[name][0], np.float32).astype(np.float64),
                                          np.asarray(answer[name][1], np.float32).astype(np.float64))
                      for name in weights.SHAPES})  # float32, as the grader's worker sends them
    start = {name: weights.Layer(np.asarray(k_, np.float64), np.asarray(b_, np.float64))
             for name, (k_, b_) in weights.read(kit.weights).items()}
    oracle, alt = ([sgd.unflat(w) for w in kit.arrays[name]] for name in ("oracle", "alt"))
    alt_losses = [float(v) for v in kit.arrays["alt_losses"]]
    return sgd.gate_numbers(losses, found, [float(v) for v in kit.losses], oracle, want["max_rel_loss"],
                            want["max_abs_diff"], (alt_losses, alt), start, want["batch"])


def timed(trainer: Any, kit: Any) -> list[int]:
    """EXTRA_STEPS more steps on the gate's batches, each one's time in ns."""
    import time

    times, given = [], batches(kit)
    for k in range(EXTRA_STEPS):
        x, y = given[k % len(given)]
        t0 = time.perf_counter_ns()
        trainer.train_step(x, y)
        times.append(time.perf_counter_ns() - t0)
    return times


def asked_forward(trainer: Any, kit: Any) -> list[dict]:
    """Each forward stage on the oracle's input (float32, NHWC), as the grader's worker asks it."""
    verdicts, tol = [], kit.lab["gate"]["max_abs_diff"]
    method = getattr(trainer, "stage", None)
    for name, stage in shipped_forward(kit).items():
        try:
            if not callable(method):
                raise NotImplementedError
            out = np.asarray(method(name, stage.input.astype(np.float32)), dtype=np.float32)
        except NotImplementedError:
            verdicts.append(stages.unanswered(name, "not implemented"))
            break
        except Exception as exc:
            verdicts.append(stages.unanswered(name, f"{type(exc).__name__}: {exc}".splitlines()[0][:500]))
            break
        if out.size != stage.output.size:
            verdicts.append(stages.unanswered(name, f"returned shape {tuple(out.shape)}, expected "
                                                    f"{stage.output.size} values"))
            break
        verdicts.append(stages.judge(name, out, stage, stages.tolerance(tol, stage.output)))
    return verdicts


def asked_backward(trainer: Any, kit: Any) -> list[dict]:
    """Each of the lab's stages of the student's `backward`, handed the oracle's arrays (float32; fc3's
    upstream: the labels), judged by backprop.judge with the grader's tolerance."""
    verdicts, tol = [], backprop.tolerance(kit.lab["gate"]["max_abs_diff"])
    method = getattr(trainer, "backward", None)
    for (name, points), want in zip(kit.lab.get("stages") or [], shipped_backward(kit).values(), strict=True):
        arrays = [np.asarray(a, np.float32) for a in (want.x, want.upstream, want.kernel, want.bias)]
        counts = (0 if want.dx is None else want.dx.size, want.dkernel.size, want.dbias.size)
        try:
            parts = backward.ask(method, name, arrays, counts, kit.lab["dtype"])  # as the grader's worker
            bad = backward.wrong_size(parts, counts)
            verdict = stages.unanswered(name, bad) if bad else \
                backprop.judge(name, (parts[0], parts[1], parts[2]), want, tol)
        except NotImplementedError:
            verdict = stages.unanswered(name, "not implemented")
        except Exception as exc:
            verdict = stages.unanswered(name, f"{type(exc).__name__}: {exc}".splitlines()[0][:500])
        verdicts.append({**verdict, "points": points})
    return verdicts


def kit_check(path: Path, kit: Any, say: Callable[[str], None], lock_timeout: float | None) -> bool:
    """A training lab's check (kinds.Kind.checker), its trainer built as the grader builds it."""
    from harness.lab.term.handout import student

    return check(lambda: student.build(path, kit), kit, say)


def check(make: Callable[[], Any], kit: Any, say: Callable[[str], None] = print) -> bool:
    lab = kit.lab
    if kit.labels is None or kit.losses is None or "alt_losses" not in kit.arrays:
        raise ValueError("this kit holds no training gate (gate.npz without labels, losses and alt): "
                         "build it again with `lab kit`")
    for warning in doctor.version_warnings(kit):
        say(warning)
    trainer, result, status, kind = make(), None, "wrong", None
    try:
        result = gate(trainer, kit)
        if not result["passes"] and result["kind"] == sgd.FORWARD:
            said = advice.departure(asked_forward(trainer, kit))
            if said:
                say(said)
    except WrongShape as exc:
        kind = "shape"
        say(f"Gate ({lab['rule']}): failed: {exc}")
    except Exception as exc:  # the student's own error: its traceback, then the stages, as the grader
        traceback.print_exception(exc)
        status, kind = "crashed", "crash"
        say(f"Gate ({lab['rule']}): failed: {type(exc).__name__}: {exc}".splitlines()[0])
    if result is not None:
        say(sgd.gate_sentence(result, lab["rule"]))
    passes = result is not None and result["passes"]
    verdicts = []
    if lab.get("stages"):
        if result is None:  # the gate ended it: the grader asks a fresh worker
            getattr(trainer, "close", lambda: None)()
            trainer = make()
        verdicts = asked_backward(trainer, kit)
        right = [v for v in verdicts if v["verdict"] == "ok"]
        say(f"Stage by stage (each layer's backward, given the reference's input and upstream gradient): "
            f"{len(right)} of {len(verdicts)} right" + ("" if not passes else
                                                        " (their points do not count: the gate's do)"))
        for v in verdicts:
            say(stages.sentence(v, v["points"], not passes))
    try:
        if passes:  # the grader times a step that passes
            median = float(np.median(timed(trainer, kit)))
            say(doctor.speed_line(kit, median, f"step of {lab['gate']['batch']} images"))
    finally:
        getattr(trainer, "close", lambda: None)()
    say(f"Peak memory of this check: {doctor.peak_mb():.0f} MiB (the kit's data included)")
    if passes:
        say(f"Status: passes the gate. The grader ranks your step by the ratio to {lab['rank_by']}'s, timed "
            "beside you on its own machine, on batches you have not seen.")
        return True
    kind = kind or advice.kind(status, result and result["first_failure"], result)
    step = f" Next step: {advice.next_step(kind, lab['name'], lab['module'])}" if kind else ""
    say(f"Status: {status}.{step}")
    return False
