"""The conv2_backward kind: a lab whose students write one layer's backward pass, conv2's, and nothing
else. A lab file's `task = "conv2_backward"` names it (labs/cpu_conv2_backward.toml); it is the worked
example of adding a kind (labs/README.md, "Adding a kind of lab"): this module, a lab file, a starter
and examples, and no other harness file.

What the student writes: a harness.base.Trainer subclass whose `backward("conv2", x, upstream, kernel,
bias)` returns (dx, dkernel, dbias), as a training lab's optional per-layer backward does (the same
call: harness.lab.backward.ask), for conv2 with its ReLU and max pool:

    x (N, 14, 14, 6)   upstream (N, 5, 5, 16)   kernel (5, 5, 6, 16)   bias (16,)
    -> dx (N, 14, 14, 6), dkernel (5, 5, 6, 16), dbias (16,): the gradients of the batch's mean loss

What the kind decides (the grader's steps are its `steps`, built on the Grader's methods for a kind's
own work: .calls, .pace_of, .warm_up_of, .warmed_up, .timed_rounds, .verdict, .keeping):
    worker    the student's class is a harness.base.Trainer (given train_variants where it has no
              spec); the reference is the NumPy level, whose worker times lenet_numpy's own functions
              (harness.lab.reference.numpy_stage); the student's is asked through the worker's `call`
              op (harness.lab.backward.student_stage)
    gate      conv2's backward on the first [gate] batch training images at the shared initial weights
              (the oracle's activation into conv2 and its upstream gradient: harness.lab.judge.rules.
              oracle.backward), each gradient within backprop.tolerance([gate] max_abs_diff) of the
              oracle's (harness.lab.judge.rules.backprop.judge: the wrong gradients named, an NCHW dx
              or a PyTorch-ordered dkernel recognised, ReLU's gradient at 0 taken as 1 accepted)
    stages    none: the gate is the one layer
    timed     the backward itself, one call per batch_size fresh images (unseen images, random labels;
              the oracle's activation and upstream at the initial weights), on the worker's own clock,
              in rounds beside the reference's; every timed answer checked against the oracle's
    feedback  the gate's line: the wrong gradients, the largest difference, a layout recognised
    kit       none yet (`lab kit` says so): the starter is handed out as it is

    KIND, Conv2Backward              the kind
    counts(images), handed(want)     the answers' sizes; the arrays the student is handed (x,
                                     upstream, kernel, bias)
    asked(grader, calls, seed)       fresh data for `calls` calls and the oracle's answers
    checker(oracle, gate)            a timed answer's check
    readme(lab), next_step(row, lab), gate_data(lab, weights)   its handout (Kind.handout: this module)
    no_kit(lab)                      the kit's check and data: none yet, said so (HarnessError)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.data.init_weights import DEFAULT_INIT
from harness.errors import Failure, HarnessError
from harness.lab.judge.rules import backprop, deadlines, stages, timing
from harness.lab.judge.rules.kinds._base import Kind

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness.lab.judge.rules.tables import Gate

LAYER = "conv2"
# what the workers run: the submission's backward, and the NumPy reference's
FUNCTIONS = ("harness.lab.backward:student_stage", "harness.lab.reference:numpy_stage")


def counts(images: int) -> tuple[int, int, int]:
    """The values of conv2's dx, dkernel and dbias for `images` images."""
    return images * 14 * 14 * 6, 5 * 5 * 6 * 16, 16


def handed(want: backprop.Backward) -> tuple[np.ndarray, ...]:
    return want.x, want.upstream, want.kernel, want.bias


def asked(grader: Any, calls: int, seed: int) -> tuple[list[tuple[dict, tuple]], list[backprop.Backward]]:
    """`calls` calls' data of batch_size fresh images each (unseen: timing.timing_images; random labels)
    at the initial weights, and the oracle's answers to them."""
    from harness.lab.judge.rules import oracle  # the oracle: grader only

    b = grader.lab.measure.batch_size
    images = timing.timing_images(seed, calls * b, grader.train).reshape(calls, b, 28, 28)
    labels = np.random.default_rng(seed).integers(0, 10, (calls, b))
    answers = [oracle.backward(grader.initial, x, y)[LAYER] for x, y in zip(images, labels, strict=True)]
    data = {"name": LAYER, "counts": list(counts(b))}
    return [(data, handed(want)) for want in answers], answers


def checker(answers: list[backprop.Backward], g: Gate) -> Callable[[int, list], str | None]:
    """A timed call's check: its answers judged as the gate judges them (None: right)."""
    tol = backprop.tolerance(g.max_abs_diff)

    def check(i: int, got: list) -> str | None:
        verdict = backprop.judge(LAYER, (got[0], got[1], got[2]), answers[i], tol)
        return None if verdict["verdict"] == "ok" else verdict.get("reason") or "wrong"

    return check


@dataclass(frozen=True)
class Conv2Backward(Kind):
    """One layer's backward (conv2's), gated and timed on its own."""

    name: str = "conv2_backward"
    base: str = "Trainer"
    entry: str = "trainer"
    handout: str = "harness.lab.judge.rules.kinds.conv2_backward"  # this module: readme, next_step
    checker: str = "harness.lab.judge.rules.kinds.conv2_backward:no_kit"
    stage_how: str = "conv2's backward, given the reference's input and upstream gradient"
    stage_names: tuple[str, ...] = ()  # no [stages]: the gate is the one layer
    starts_from: Path | None = Path(DEFAULT_INIT)

    def spec_fields(self) -> dict[str, Any]:
        return {"train_variants": ["default"]}

    def gate_rule(self, g: Gate) -> str:
        return (f"conv2's backward (with its ReLU and max pool) on {g.batch} training images at the shared "
                f"initial weights: dx, dkernel and dbias each within {backprop.tolerance(g.max_abs_diff):g} "
                "of the NumPy reference's")

    def gate_sentence(self, gate: dict, g: Gate) -> str:
        if gate.get("passes"):
            return f"Gate ({self.gate_rule(g)}): passed."
        said = "; ".join(str(gate[k]) for k in ("reason", "layout") if gate.get(k))
        worst = gate.get("max_abs_diff")
        return (f"Gate ({self.gate_rule(g)}): failed: {said or gate.get('verdict')}" +
                (f", largest difference {worst:.3g}" if isinstance(worst, (int, float)) else "") + ".")

    def gate_images(self, g: Gate) -> int:
        return 0  # its gate is the layer's gradients, not test images

    def stage_oracle(self, weights: str, images: Any, dtype: str, staged: bool) -> dict:
        return {}

    def check_references(self, references: list[str], trainers: list[str]) -> str | None:
        if references != ["numpy"]:
            return (f"references: expected ['numpy'] (a conv2_backward lab is timed beside the NumPy "
                    f"reference's own conv2 backward), found {references}")
        return None

    def kit_info(self, lab: Any) -> list[str]:
        return [f"your file: {lab.module}, one harness.base.Trainer subclass; backward('conv2', x, upstream, "
                "kernel, bias) -> (dx, dkernel, dbias)", f"gate: {lab.gate_rule}"]

    def reference_calls(self, lab: Any, weights: Path) -> Any:
        return no_kit(lab)

    def steps(self, grader: Any, worker: Any) -> dict:
        """pace (the reference's calls), import, gate, warm-up, rounds, verdict; their values gathered as
        they come (grader.keeping: a Failure's row keeps them)."""
        lab, g = grader.lab, grader.lab.gate
        rank, b = lab.rank_by.label, lab.measure.batch_size
        found: dict[str, Any] = {}
        with grader.keeping(found):
            calls, answers = asked(grader, deadlines.PACE_CALLS, timing.new_seed())
            grader.pace = grader.pace_of(grader.calls(rank, None, calls, FUNCTIONS, counts(b),
                                                      checker(answers, g), "the pace's calls", "pace"))
            found["pace"] = grader.pace.row()
            found.update(grader.imported(worker))
            found["gate"] = gate = self.gate(grader, worker)
            if not gate["passes"]:
                raise Failure("wrong", f"conv2's backward: {gate.get('reason') or gate['verdict']}" +
                              (f"; {gate['layout']}" if gate.get("layout") else ""))
            if lab.measure.warmup:
                calls, answers = asked(grader, lab.measure.warmup, timing.new_seed())
                check = checker(answers, g)
                ref = grader.calls(rank, None, calls, FUNCTIONS, counts(b), check, "the warm-up", "warmup")
                mine = grader.calls(grader.SUBMISSION, worker, calls, FUNCTIONS, counts(b), check,
                                    f"the warm-up's {len(calls)} calls", "warmup")
                grader.warmed_up(found, grader.warm_up_of(mine, ref))

            def fresh(n: int) -> tuple[Any, int]:
                seed = timing.new_seed()
                return asked(grader, n, seed), seed

            def turn(who: str, data: Any, what: str) -> Any:
                calls, answers = data
                return grader.calls(who, worker, calls, FUNCTIONS, counts(b), checker(answers, g),
                                    f"{what} calls", "rounds")

            found.update(grader.verdict(grader.timed_rounds(worker, fresh, turn)))
        return found

    def gate(self, grader: Any, worker: Any) -> dict:
        """The student's backward on the gate's batch, judged against the oracle's (backprop.judge)."""
        from harness.data import mnist
        from harness.lab.judge.rules import oracle  # the oracle: grader only

        g = grader.lab.gate
        images, labels = mnist.load("train")
        want = oracle.backward(grader.initial, images[:g.batch], labels[:g.batch].astype(np.int64))[LAYER]
        due = deadlines.for_gate(grader.need_pace(), grader.lab.limits, g.batch)
        with grader.within(worker, due, f"the gate (conv2's backward on {g.batch} images)", "gate"):
            called = worker.call(FUNCTIONS[0], {"name": LAYER, "counts": list(counts(g.batch))}, handed(want),
                                 counts(g.batch), due.seconds)
        got = called.answers
        verdict = stages.unanswered(LAYER, called.why) if called.why else \
            backprop.judge(LAYER, (got[0], got[1], got[2]), want, backprop.tolerance(g.max_abs_diff))
        return {**verdict, "images": g.batch, "passes": verdict["verdict"] == "ok"}


KIND = Conv2Backward()


# --- its handout (Kind.handout names this module: harness.lab.term reads these) ---------------------------

def readme(lab: Any) -> str:
    return (f"# {lab.title}\n\nWrite `backward` in {lab.module}: the starter says what it is handed and what "
            f"it returns.\n\nGate: {lab.gate_rule}.\n")


def next_step(row: dict, lab: Any) -> str | None:
    """Its advice on a wrong backward (the gate's line names the wrong gradients); else its status's
    (feedback.NEXT_STEP)."""
    if row.get("status") != "wrong":
        return None
    return (f"Check each gradient against the rules in {lab.module}'s starter docstring: the kernel's "
            "layout (5, 5, 6, 16), HWIO; a max pool's gradient to the first maximum of its 2x2 window; "
            "ReLU's gradient 0 at exactly 0 (1 is accepted); the upstream gradient is already the "
            "batch's mean (sum over the batch, never divide again). Timed calls use new images: answers "
            "must be computed, not remembered.")


def gate_data(lab: Any, weights: Path) -> dict:
    return no_kit(lab)


def no_kit(lab: Any, *_: Any) -> Any:
    raise HarnessError(f"lab {lab.name}: the {KIND.name} kind has no kit yet; hand out its starter "
                       f"({lab.starter}) as it is")
