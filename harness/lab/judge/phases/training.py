"""A training lab's steps ([lab] task = "training"): the submission is a harness.base.Trainer (one
SGD step: forward, backward, update), graded as `verify-train` checks every level and timed as
inference is.

  import    the module's one Trainer subclass built from the shared initial weights
            (weights/lenet5_init.weights.h5)                 import-error, timeout
  gate      [gate] steps SGD steps of [gate] batch images, the first training images in order (as
            verify-train), at harness.base.LEARNING_RATE: after each step the loss within
            max_rel_loss (relative), then every weight within max_abs_diff of the oracle's
            (harness.lab.judge.rules.oracle, float64; or of its steps with ReLU's gradient at 0
            taken as 1); a wrong step is named by its kind (harness.lab.judge.rules.sgd): the forward
            pass (its layer, where the submission has `stage`: .forward_verdicts), a layer's
            gradient in backpropagation's order (fc3 ... conv1), a step off by a known factor
                                                             wrong, crashed, timeout
  stages    (a lab with [stages]) each layer's backward on its own, handed the oracle's activation,
            upstream gradient and weights (harness.lab.judge.rules.backprop), whatever ended the
            gate: an error, a shape, a wrong step, a worker that died or timed out (then asked of a
            fresh worker under the same limits: .fresh_worker; only if that fails too are they
            "not graded", by name); one wrong layer fails only its own stage
  warm-up   `warmup` steps beside rank_by's                   too-slow
  rounds    per round the same fresh batches (unseen images, random labels) for every participant,
            in a rotated order; each round's losses and the submission's weights after it replayed
            by the oracle from its weights before it (sgd.off_the_steps)   wrong, timeout
  clocks, ok   harness.lab.judge.phases.verdict, as inference (per step; per image = / batch)

    Training(Steps)                  .steps: a training lab's (.training_steps and its phases), else Steps';
                                     .backward_verdicts (the stages), .forward_verdicts (where the loss
                                     is wrong), .fresh_worker (the Grader's: a new worker for the stages)

    oracle_steps(w, batches) -> (losses, weights after each step)   the oracle's (rules.oracle.steps)
    NOT_GRADED                       a stage's verdict when no worker could answer it
"""

import functools
from dataclasses import asdict

import numpy as np

from harness.data import mnist, weights
from harness.errors import Failure, HarnessError
from harness.lab.box.sandbox import Chunk, Sandbox
from harness.lab.judge.phases import verdict
from harness.lab.judge.phases.references import REFERENCE_TIMEOUT_S
from harness.lab.judge.phases.steps import Steps, Warmup
from harness.lab.judge.phases.verdict import SUBMISSION, Rounds
from harness.lab.judge.rules import backprop, deadlines, oracle, sgd, stages, timing
from harness.lab.judge.rules.sgd import Weights, off_the_steps, unflat

COUNT = weights.N_PARAMETERS


Batch = tuple[np.ndarray, np.ndarray]  # (B, 28, 28) uint8 images, (B,) labels


NOT_GRADED = "not graded"


def oracle_steps(w: Weights, batches: list[Batch], at_zero: int = 0) -> tuple[list[float], list[Weights]]:
    """The oracle's (lenet_numpy.train, float64) loss of each step and its weights after it."""
    return oracle.steps(w, batches, at_zero)


class Training(Steps):
    """A training lab's steps on a submission's worker; an inference lab's are Steps'."""

    def steps(self, worker: Sandbox, row: dict) -> None:
        """What its lab's kind runs on the worker (harness.lab.judge.rules.kinds: Kind.steps)."""
        self.lab.kind.steps(self, worker, row)

    def inference_steps(self, worker: Sandbox, row: dict) -> None:
        super().steps(worker, row)

    def training_steps(self, worker: Sandbox, row: dict) -> None:
        """import, gate, stages, warm-up, rounds, verdict; values into the row as they come. The
        stages are asked whatever ended the gate; the gate's failure is the row's after them."""
        self.pace = self.training_pace()
        row["pace"] = {k: round(v, 9) if isinstance(v, float) else v for k, v in asdict(self.pace).items()}
        row.update(self.imported(worker))
        stopped: Failure | None = None
        try:
            row["gate"] = gate = self.training_gate(worker)
        except Failure as exc:  # the exchange ended the worker (harness.lab.box.sandbox)
            stopped, worker_ok = exc, False
        else:
            worker_ok = True
            if not gate["passes"]:
                stopped = Failure("wrong", gate["first_failure"])
                if gate["kind"] == sgd.FORWARD:
                    row["forward"], worker_ok = self.forward_verdicts(worker)
        alive: Sandbox | None = worker if worker_ok else None
        if self.lab.stages:
            row["stages"], alive = self.backward_verdicts(alive)
        if stopped is not None:
            raise stopped
        if alive is None:  # a stage ended it: timed on a fresh one
            alive, why = self.restarted()
            if alive is None:
                raise Failure("crashed", f"its worker ended while its stages were asked, and {why}: "
                                         "not timed")
        worker = alive
        if self.lab.measure.warmup:
            warm = self.training_warm_up(worker, self.lab.measure.warmup)
            row["warmup_ratio"] = warm.ratio
            self.fast_enough(warm, "its warm-up", "")
        row.update(verdict.verdict(self.lab, self.training_rounds(worker)))

    def fresh_worker(self) -> Sandbox | None:
        """A fresh worker for the submission (its module imported and its class built again), its last
        one ended; None where none can be started (here: the Grader starts them)."""
        return None

    def restarted(self) -> tuple[Sandbox | None, str]:
        """(a fresh worker, loaded, or None; why not): its weights are the initial ones again."""
        try:
            worker = self.fresh_worker()
            if worker is None:
                return None, "no fresh worker could be started"
            self.imported(worker)
        except Failure as exc:
            return None, f"a fresh worker failed too ({exc.status}: {exc.reason})"
        self.last_weights = self.initial
        return worker, ""

    @functools.cached_property
    def backward_oracle(self) -> dict[str, backprop.Backward]:
        """The oracle's stages (harness.lab.judge.rules.oracle.backward) on the gate's first batch, at
        the initial weights: the same for every submission."""
        images, labels = self.fixed_batches()[0]
        return oracle.backward(self.initial, images, labels)

    @functools.cached_property
    def forward_oracle(self) -> dict[str, stages.Stage]:
        """The oracle's forward stages (inference's, harness.lab.judge.rules.oracle.forward_stages) on
        the gate's first batch, at the initial weights: where a wrong loss's forward pass departs."""
        return oracle.forward_stages(self.weights, self.fixed_batches()[0][0], self.lab.dtype)

    def forward_verdicts(self, worker: Sandbox) -> tuple[list[dict], bool]:
        """(a wrong loss: each forward stage asked of the submission's optional `stage(name, x)` on the
        oracle's input to it, no points: the feedback names the first layer that departs; whether the
        worker is still alive). The first stage not answered ends the asking."""
        verdicts = []
        for name in stages.INFERENCE:
            stage = self.forward_oracle[name]
            due = deadlines.for_gate(self.need_pace(), self.lab.limits, len(stage.input))
            try:
                with self.within(worker, due, f"forward stage {name} ({len(stage.input)} images)", "stages"):
                    why, got = worker.stage(name, stage.input, stage.output.size, due.seconds)
            except Failure as exc:  # the exchange ended the worker
                verdicts.append(stages.unanswered(name, f"{exc.status}: {exc.reason}"))
                return verdicts, False
            verdicts.append(stages.unanswered(name, why or "no answer") if got is None else stages.judge(
                name, got, stage, stages.tolerance(self.lab.gate.max_abs_diff, stage.output)))
            if got is None:  # no `stage` (or it raised): the later stages would say the same
                break
        return verdicts, True

    def backward_verdicts(self, worker: Sandbox | None) -> tuple[list[dict], Sandbox | None]:
        """(each of the lab's stages asked of the submission's `backward` on the oracle's activation,
        upstream gradient and weights, its gradients judged against the oracle's (backprop.judge);
        the worker that answered last). A stage not answered is missing (no method) or an error; one
        that ends the worker is an error, and the stages after it are asked of a fresh worker (the
        same when `worker` is None: the gate ended it); "not graded" where no worker can answer."""
        verdicts, tol, why = [], backprop.tolerance(self.lab.gate.max_abs_diff), ""
        for name, points in self.lab.stages:
            if worker is None and not why:
                worker, why = self.restarted()
            if worker is None:
                verdicts.append({"stage": name, "verdict": NOT_GRADED, "max_abs_diff": None, "layout": None,
                                 "reason": why, "points": points})
                continue
            want = self.backward_oracle[name]
            counts = (0 if want.dx is None else want.dx.size, want.dkernel.size, want.dbias.size)
            due = deadlines.for_gate(self.need_pace(), self.lab.limits, len(want.x))  # a new shape
            try:
                what = f"stage {name} (its backward on {len(want.x)} images)"
                with self.within(worker, due, what, "stages"):
                    handed = (want.x, want.upstream, want.kernel, want.bias)
                    answer, got = worker.backward(name, handed, counts, due.seconds)
            except Failure as exc:  # the exchange ended the worker
                answer, got, worker = f"{exc.status}: {exc.reason}", None, None
            verdict = stages.unanswered(name, answer or "no answer") if got is None else \
                backprop.judge(name, (got[0], got[1], got[2]), want, tol)
            verdicts.append({**verdict, "points": points})
        return verdicts, worker

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
        alt = oracle_steps(self.initial, batches, at_zero=1)  # ReLU's gradient at 0 taken as 1
        due = deadlines.for_gate(self.need_pace(), self.lab.limits, g.steps * g.batch)
        losses, found = [], []
        with self.within(worker, due, f"the gate's {g.steps} steps of {g.batch} images", "gate"):
            for x, y in batches:
                losses.append(float(worker.train(x[None], y[None], due.seconds).outputs[0]))
                found.append(unflat(worker.weights(COUNT, due.seconds)))
        self.last_weights = found[-1]
        return sgd.gate_numbers(losses, found, oracle_losses, oracle_weights, g.max_rel_loss, g.max_abs_diff,
                                alt, self.initial, g.batch)

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
