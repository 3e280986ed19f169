"""The kinds of lab task, one object each: what differs between a lab that asks for `predict`
(inference), one SGD step (training) and CUDA C kernels (the kernels kind, an inference lab whose
rung's level has the `kernels` hook). Outside this module no code asks which kind a lab is: it asks
the lab's kind (`Lab.kind`) for what it needs.

    Kind, Training, Kernels        the classes (inference's, training's, the CUDA lab's)
    INFERENCE, TRAINING, KERNELS   the kinds; `of(task, rung)` the one a lab file's [lab] names
    Kind.worker                    what the worker loads: the registry entry's field for a reference
                                   (`path`, `trainer`), the harness.base class a submission subclasses,
                                   the spec's fields a student's class without one is given
    Kind.gate_rule / gate_sentence what the gate checks, in words
    Kind.gate_images               how many gate images each worker is sent (none: training's gate is
                                   its steps)
    Kind.stage_oracle              the oracle's stages (inference: each layer's output), or none
    Kind.steps                     the grader's steps on a submission's worker (what is timed)
    Kind.start_weights             the weights its submissions start from
    Kind.stage_how / kit_gate      what the feedback says of its stages; the gate's numbers in the kit
    Kind.kit_files / handout       what goes into the kit: the files beside the interface, and the
                                   module (harness.lab.term.handout.*) that writes its README, its gate
                                   data and its next-step advice
    Kind.checker / emulate_hint    the kit's check (a `module:function` the kit's `lenet-lab` runs)

May import: harness.lab.judge.rules (timing, sgd, oracle) and the harness below the lab; it is read by
the judge, the term and (as data) the worker and the kit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import DEFAULT_WEIGHTS
from harness.data.init_weights import DEFAULT_INIT
from harness.errors import HarnessError
from harness.lab.judge.rules import stages

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

    def gate_sentence(self, gate: dict, g: Gate) -> str:
        """The gate's line in a submission's feedback."""
        from harness.lab.judge.rules import timing

        return timing.gate_sentence(gate, g.images, g.min_agree, g.max_abs_diff)

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


@dataclass(frozen=True)
class Kernels(Kind):
    """The CUDA kernels lab: an inference lab whose students write CUDA C kernels (the rung's level has
    the `kernels` hook); its kit ships the CPU emulation (`lenet-lab emulate`)."""

    name: str = "inference"
    handout: str = "harness.lab.term.handout.cudareadme"  # an inference README, and `lenet-lab emulate`
    kit_files: tuple[str, ...] = ("harness/lab/emucuda.py", "harness/lab/cuda_emu.h")
    emulate_hint: str = "; without a GPU: lenet-lab emulate {module}"


INFERENCE, TRAINING, KERNELS = Kind(), Training(), Kernels()
NAMED = {kind.name: kind for kind in (INFERENCE, TRAINING)}  # [lab] task names a kind


def of(task: str, rung: str) -> Kind:
    """The kind a lab file's [lab] task names; an inference lab whose rung's level has the `kernels`
    hook (the kernels doctor compiles with NVRTC) is of the kernels kind."""
    from harness import registry

    if task not in NAMED:
        raise HarnessError(f"task: expected one of {list(NAMED)}, found {task!r}")
    kernels = any(spec.api_level == rung and "kernels" in dict(spec.hooks)
                  for spec in registry.REGISTRY.values())
    return KERNELS if kernels and NAMED[task] is INFERENCE else NAMED[task]
