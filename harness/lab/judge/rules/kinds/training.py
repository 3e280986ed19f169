"""The training kind: a lab whose students write one SGD step (a harness.base.Trainer), gated on SGD
steps beside the NumPy oracle's (harness.lab.judge.phases.training), its stages each layer's backward.

    Training, TRAINING (its KIND)   a training lab
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data.init_weights import DEFAULT_INIT
from harness.lab.judge.rules import stages
from harness.lab.judge.rules.kinds._base import Kind

if TYPE_CHECKING:
    from harness.lab.judge.rules.tables import Gate


@dataclass(frozen=True)
class Training(Kind):
    """A training lab: one SGD step (a harness.base.Trainer), gated on steps beside the oracle's."""

    name: str = "training"
    base: str = "Trainer"
    entry: str = "trainer"
    handout: str = "harness.lab.term.handout.trainreadme"
    checker: str = "harness.lab.term.handout.trainkit:kit_check"
    stage_how: str = "each layer's backward, given the reference's input and upstream gradient"
    stage_names: tuple[str, ...] = stages.TRAINING  # backward order
    starts_from: Path | None = Path(DEFAULT_INIT)  # not the trained weights

    def spec_fields(self) -> dict[str, Any]:
        return {"train_variants": ["default"]}

    def gate_rule(self, g: Gate) -> str:
        return (f"{g.steps} SGD steps of {g.batch} training images from the shared initial weights, each "
                f"step's loss within {g.max_rel_loss:g} (relative) and every weight within "
                f"{g.max_abs_diff:g} of the NumPy reference's")

    def gate_sentence(self, gate: dict, g: Gate) -> str:
        from harness.lab.judge.rules import sgd

        return sgd.gate_sentence(gate, self.gate_rule(g))

    def gate_images(self, g: Gate) -> int:
        return 0  # its gate is its steps (harness.lab.judge.phases.training)

    def stage_oracle(self, weights: str, images: Any, dtype: str, staged: bool) -> dict:
        return {}  # its stages are each layer's backward, asked of the oracle as they come

    def steps(self, grader: Any, worker: Any) -> dict:
        return grader.training_steps(worker)

    def kit_gate(self, g: Gate) -> dict:
        return {"steps": g.steps, "batch": g.batch, "max_rel_loss": g.max_rel_loss}

    def kit_info(self, lab: Any) -> list[str]:
        return [f"your file: {lab.module}, one harness.base.Trainer subclass; train_step (N, 28, 28, 1), "
                "(N,) -> the batch's mean loss; weights()",
                f"gate: {lab.gate_rule}; stages: " + ", ".join(f"{n} {p:g}" for n, p in lab.stages)]

    def reference_calls(self, lab: Any, weights: Path) -> tuple[Callable[[int], Any], int, int]:
        """One SGD step of the measure's batch, from the start weights."""
        import numpy as np

        from harness.data import mnist
        from lenet_numpy.train import NumpyTrainer  # the oracle: runs here, never shipped

        batch = lab.measure.batch_size
        images, labels = mnist.load("train")
        x, y = mnist.to_input(images[:8 * batch], lab.dtype), labels[:8 * batch].astype(np.int64)
        trainer = NumpyTrainer(str(weights), dtype=lab.dtype)
        part = [slice(i * batch, (i + 1) * batch) for i in range(8)]
        return (lambda i: trainer.train_step(x[part[i]], y[part[i]])), 8, 2

    def check_references(self, references: list[str], trainers: list[str]) -> str | None:
        untrained = [r for r in references if r.partition("/")[0] not in trainers]
        if untrained:
            return (f"references: {untrained} cannot train (no trainer in the registry); a training lab's "
                    f"references: {trainers}")
        return None


TRAINING = KIND = Training()
