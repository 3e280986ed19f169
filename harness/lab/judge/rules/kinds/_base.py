"""The base of every kind of lab task (harness.lab.judge.rules.kinds: the package's docstring says what
each of its attributes and methods decides).

    Kind    the base class; its defaults are an inference lab's
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import DEFAULT_WEIGHTS
from harness.lab.judge.rules import stages, timing

if TYPE_CHECKING:  # a Lab (rules.assignment) holds its kind: its methods take it as Any (no circle)
    from harness.lab.judge.rules.tables import Gate


@dataclass(frozen=True)
class Kind:
    """An inference lab: the student's `predict`, gated on test images beside the NumPy oracle."""

    name: str = "inference"
    base: str = "LeNet"  # the harness.base class a submission subclasses
    entry: str = "path"  # the registry entry's field that names a reference's class
    handout: str = "harness.lab.term.handout.kit"  # its README, gate data and advice
    checker: str = "harness.lab.term.handout.student:inference_check"  # the kit's check
    kit_files: tuple[str, ...] = ()  # beside the kit's interface
    stage_how: str = "each given the reference's input to it"
    emulate_hint: str = ""  # the kit's hint where the GPU's CuPy is missing
    stage_names: tuple[str, ...] = stages.INFERENCE  # what [stages] may name, in network order
    starts_from: Path | None = None  # the weights given to the grader (not the default's stand-in)

    @property
    def worker(self) -> dict[str, Any]:
        """The worker's load request's part that this kind decides (harness.lab.box.worker.Worker.load)."""
        return {"entry": self.entry, "base": self.base, "spec": self.spec_fields()}

    def spec_fields(self) -> dict[str, Any]:
        """The spec fields a student's class without a spec is given beside harness.registry.lab_spec's."""
        return {}

    def gate_rule(self, g: Gate) -> str:
        return (f"{g.min_agree} of {g.images} test images with the NumPy reference's argmax and every "
                f"|dp| <= {g.max_abs_diff:g}")

    # the gate's line in a submission's feedback: gate_sentence(gate, g) (inference's: the test images')
    gate_sentence = staticmethod(timing.gate_sentence)

    def gate_images(self, g: Gate) -> int:
        return g.images

    def stage_oracle(self, weights: str, images: Any, dtype: str, staged: bool) -> dict:
        """Each layer's output for the first stage images (a lab with [stages]); else none."""
        from harness.lab.judge.rules import oracle

        return oracle.forward_stages(weights, images[:stages.STAGE_IMAGES], dtype) if staged else {}

    def start_weights(self, weights: str | Path) -> Path:
        """The weights its submissions start from: those given (a training lab given the default, trained,
        weights: the shared initial ones, weights/lenet5_init.weights.h5)."""
        given = Path(weights)
        return self.starts_from if self.starts_from and given == Path(DEFAULT_WEIGHTS) else given

    def steps(self, grader: Any, worker: Any) -> dict:
        """The grader's steps on a submission's worker: import, gate, stages, timed predicts; the
        row's fields they found."""
        return grader.inference_steps(worker)

    def kit_gate(self, g: Gate) -> dict:
        return {}

    def check_references(self, references: list[str], trainers: list[str]) -> str | None:
        """What is wrong with its references (None: nothing)."""
        return None

    def for_rung(self, rung: str) -> Kind:
        """The kind a lab of this task on this rung is (itself, unless a variant serves the rung)."""
        return self

    def kit_info(self, lab: Any) -> list[str]:
        """`lenet-lab info`'s lines on what to write and the gate (kept in the kit's kit.json)."""
        g = lab.gate
        return [f"your file: {lab.module}, one harness.base.LeNet subclass; predict (N, 28, 28, 1) -> "
                "(N, 10)",
                f"gate: the first {g.images} MNIST test images; at least {g.min_agree} argmaxes as the "
                f"oracle's, every |dp| <= {g.max_abs_diff:g}"]

    def reference_calls(self, lab: Any, weights: Path) -> tuple[Callable[[int], Any], int, int]:
        """The NumPy reference's timed call where the kit is built: (call(i), calls, warm-up calls left
        out of the median): a predict of one test image."""
        from harness.data import mnist
        from lenet_numpy.model import NumpyLeNet  # the oracle: runs here, never shipped

        x = mnist.to_input(mnist.load("test")[0][:8], lab.dtype)
        model = NumpyLeNet(str(weights), dtype=lab.dtype)
        return (lambda i: model.predict(x[i % 8:i % 8 + 1])), 200, 20
