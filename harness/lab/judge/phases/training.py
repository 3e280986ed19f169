"""A training lab's steps ([lab] task = "training"): the submission is a harness.base.Trainer (one
SGD step: forward, backward, update), graded as `verify-train` checks every level and timed as
inference is.

  import    the module's one Trainer subclass built from the shared initial weights
            (weights/lenet5_init.weights.h5)                 import-error, timeout
  gate      [gate] steps SGD steps of [gate] batch images, the first training images in order (as
            verify-train), at harness.base.LEARNING_RATE: after each step the loss within
            max_rel_loss (relative) and every weight within max_abs_diff of the oracle's
            (lenet_numpy.train, float64); a wrong step names its first layer in backpropagation's
            order (fc3 ... conv1)                             wrong, crashed, timeout
  stages    (a lab with [stages]) each layer's backward on its own, handed the oracle's activation,
            upstream gradient and weights (harness.lab.judge.rules.backprop): one wrong layer
            fails only its own stage                          timeout
  warm-up   `warmup` steps beside rank_by's                   too-slow
  rounds    per round the same fresh batches (unseen images, random labels) for every participant,
            in a rotated order; each round's losses and the submission's weights after it replayed
            by the oracle from its weights before it (sgd.off_the_steps)   wrong, timeout
  clocks, ok   harness.lab.judge.phases.verdict, as inference (per step; per image = / batch)

    Training(Steps)                  .steps: a training lab's (.training_steps and its phases), else Steps';
                                     .backward_verdicts (the stages)

    oracle_steps(w, batches) -> (losses, weights after each step)
    (the gate's rule, shared with the training kit, and the timed steps': harness.lab.judge.rules.sgd)
"""

import functools
from dataclasses import asdict

import numpy as np

from harness.base import LEARNING_RATE
from harness.data import mnist, weights
from harness.errors import Failure, HarnessError
from harness.lab.box.sandbox import Chunk, Sandbox
from harness.lab.judge.phases import verdict
from harness.lab.judge.phases.references import REFERENCE_TIMEOUT_S
from harness.lab.judge.phases.steps import Steps, Warmup
from harness.lab.judge.phases.verdict import SUBMISSION, Rounds
from harness.lab.judge.rules import backprop, deadlines, stages, timing
from harness.lab.judge.rules.sgd import Weights, gate_numbers, off_the_steps, unflat

COUNT = weights.N_PARAMETERS


Batch = tuple[np.ndarray, np.ndarray]  # (B, 28, 28) uint8 images, (B,) labels


def oracle_steps(w: Weights, batches: list[Batch]) -> tuple[list[float], list[Weights]]:
    """The oracle's (lenet_numpy.train, float64) loss of each step and its weights after it."""
    from lenet_numpy.train import loss_and_grads  # the oracle: grader only

    losses, after = [], []
    for x_u8, y in batches:
        loss, grads = loss_and_grads(w, mnist.to_input(x_u8, "float64"), y.astype(np.int64))
        w = {n: weights.Layer(k - LEARNING_RATE * grads[n].kernel, b - LEARNING_RATE * grads[n].bias)
             for n, (k, b) in w.items()}
        losses.append(loss)
        after.append(w)
    return losses, after


class Training(Steps):
    """A training lab's steps on a submission's worker; an inference lab's are Steps'."""

    def steps(self, worker: Sandbox, row: dict) -> None:
        if self.lab.task == "training":
            self.training_steps(worker, row)
        else:
            super().steps(worker, row)

    def training_steps(self, worker: Sandbox, row: dict) -> None:
        """import, gate, stages, warm-up, rounds, verdict; values into the row as they come."""
        self.pace = self.training_pace()
        row["pace"] = {k: round(v, 9) if isinstance(v, float) else v for k, v in asdict(self.pace).items()}
        row.update(self.imported(worker))
        row["gate"] = gate = self.training_gate(worker)
        if self.lab.stages:
            row["stages"] = self.backward_verdicts(worker)
        if not gate["passes"]:
            raise Failure("wrong", gate["first_failure"])
        if self.lab.measure.warmup:
            warm = self.training_warm_up(worker, self.lab.measure.warmup)
            row["warmup_ratio"] = warm.ratio
            self.fast_enough(warm, "its warm-up", "")
        row.update(verdict.verdict(self.lab, self.training_rounds(worker)))

    @functools.cached_property
    def backward_oracle(self) -> dict[str, backprop.Backward]:
        """The oracle's stages (harness.lab.judge.rules.backprop) on the gate's first batch, at the
        initial weights: the same for every submission."""
        images, labels = self.fixed_batches()[0]
        return backprop.oracle(self.initial, images, labels)

    def backward_verdicts(self, worker: Sandbox) -> list[dict]:
        """Each of the lab's stages asked of the submission's `backward` on the oracle's activation,
        upstream gradient and weights, its gradients judged against the oracle's (backprop.judge); a
        stage not answered is missing (no method) or an error, never the submission's failure."""
        verdicts, tol = [], backprop.tolerance(self.lab.gate.max_abs_diff)
        for name, points in self.lab.stages:
            want = self.backward_oracle[name]
            counts = (0 if want.dx is None else want.dx.size, want.dkernel.size, want.dbias.size)
            due = deadlines.for_gate(self.need_pace(), self.lab.limits, len(want.x))  # a new shape
            with self.within(worker, due, f"stage {name} (its backward on {len(want.x)} images)", "stages"):
                why, got = worker.backward(name, (want.x, want.upstream, want.kernel, want.bias), counts,
                                           due.seconds)
            verdict = stages.unanswered(name, why or "no answer") if got is None else \
                backprop.judge(name, (got[0], got[1], got[2]), want, tol)
            verdicts.append({**verdict, "points": points})
        return verdicts

    def fixed_batches(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The gate's batches: the first steps x batch training images in order, their labels."""
        g = self.lab.gate
        images, labels = mnist.load("train")
        n = g.steps * g.batch
        return [(images[i:i + g.batch], labels[i:i + g.batch].astype(np.int64)) for i in range(0, n, g.batch)]

    def fresh_batches(self, steps: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(steps, B, 28, 28) unseen images, (steps, B) random labels, and the new secret seed."""
        b, seed = self.lab.measure.batch_size, timing.new_seed()
        images = timing.timing_images(seed, steps * b, self.train).reshape(steps, b, 28, 28)
        return images, np.random.default_rng(seed).integers(0, 10, (steps, b)), seed

    def training_pace(self) -> deadlines.Pace:
        """rank_by's step times (deadlines.Pace: a step is a call; an image 1/batch of it), before the
        submission's worker starts; its first steps' extra time once, as the cold start."""
        rank, b = self.lab.rank_by.label, self.lab.measure.batch_size
        images, labels, _ = self.fresh_batches(deadlines.PACE_CALLS)
        steps = self.reference_steps(rank, images, labels)
        trip_s, work_s = (float(np.median(ns)) / 1e9 for ns in (steps.trips_ns, steps.times_ns))
        if self.cold_s is None:
            self.cold_s = max(0.0, steps.trips_ns[0] / 1e9 - trip_s)
        return deadlines.Pace(rank, trip_s, work_s, work_s / b, self.cold_s, b)

    def reference_steps(self, label: str, images: np.ndarray, labels: np.ndarray) -> Chunk:
        try:
            return self.reference(label).train(images, labels, REFERENCE_TIMEOUT_S)
        except Failure as exc:
            self.retire(self.refs.pop(label))
            raise HarnessError(f"reference {label} failed its training steps ({exc.status}: {exc.reason})") \
                from None

    def training_gate(self, worker: Sandbox) -> dict:
        """[gate] steps from the initial weights, each step's loss and weights against the oracle's."""
        g = self.lab.gate
        batches = self.fixed_batches()
        oracle_losses, oracle_weights = oracle_steps(self.initial, batches)
        due = deadlines.for_gate(self.need_pace(), self.lab.limits, g.steps * g.batch)
        losses, found = [], []
        with self.within(worker, due, f"the gate's {g.steps} steps of {g.batch} images", "gate"):
            for x, y in batches:
                losses.append(float(worker.train(x[None], y[None], due.seconds).outputs[0]))
                found.append(unflat(worker.weights(COUNT, due.seconds)))
        self.last_weights = found[-1]
        return gate_numbers(losses, found, oracle_losses, oracle_weights, g.max_rel_loss, g.max_abs_diff)

    def training_warm_up(self, worker: Sandbox, steps: int) -> Warmup:
        rank = self.lab.rank_by.label
        images, labels, _ = self.fresh_batches(steps)
        ref_ns = float(np.median(self.reference_steps(rank, images, labels).times_ns))
        mine = self.timed_steps(worker, images, labels, f"the warm-up's {steps} steps", "warmup")
        median_ns = float(np.median(mine.times_ns))
        return Warmup(median_ns / ref_ns, median_ns, ref_ns)

    def timed_steps(self, worker: Sandbox, images: np.ndarray, labels: np.ndarray, what: str,
                    step: str) -> Chunk:
        """The submission's steps within their deadline, then replayed by the oracle from its weights
        before them: its losses and its weights after them as sgd.off_the_steps allows."""
        due = deadlines.for_calls(self.need_pace(), self.lab.limits, len(images))
        with self.within(worker, due, what, step):
            chunk = worker.train(images, labels, due.seconds)
            after = unflat(worker.weights(COUNT, due.seconds))
        losses, expected = oracle_steps(self.last_weights, list(zip(images, labels, strict=True)))
        why = off_the_steps(chunk.outputs, after, losses, self.last_weights, expected[-1])
        if why:
            raise Failure("wrong", f"{what}: on unseen batches its steps left the NumPy reference's ({why}): "
                                   "steps must be computed, not replayed")
        self.last_weights = after
        return chunk

    def training_rounds(self, worker: Sandbox) -> Rounds:
        """As inference's rounds (Steps.timed_rounds), with steps for calls."""
        def fresh(steps: int) -> tuple[tuple[np.ndarray, np.ndarray], int]:
            images, labels, seed = self.fresh_batches(steps)
            return (images, labels), seed

        def turn(who: str, data: tuple[np.ndarray, np.ndarray], what: str) -> Chunk:
            if who == SUBMISSION:
                return self.timed_steps(worker, *data, f"{what} steps", "rounds")
            return self.reference_steps(who, *data)

        return self.timed_rounds(worker, fresh, turn)
