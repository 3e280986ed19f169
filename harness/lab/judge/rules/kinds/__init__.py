"""The kinds of lab task, one object each, one module each: what differs between a lab that asks for
`predict` (inference), one SGD step (training), CUDA C kernels (the kernels kind, an inference lab whose
rung's level has the `kernels` hook) and one layer's backward (conv2_backward). Outside this package no
code asks which kind a lab is: it asks the lab's kind (`Lab.kind`) for what it needs.

A kind is a module of this package named as a lab file's [lab] task, holding `KIND`, a Kind: adding a
kind is adding a module (labs/README.md, "Adding a kind of lab"), no list to edit.

    Kind                           the base class (kinds._base; its defaults are inference's)
    names(), of(task, rung)        the tasks there are; the kind a lab file's [lab] names
    INFERENCE, KERNELS, TRAINING   the shipped kinds (modules inference, training)
    Kind.worker                    what the worker loads: the registry entry's field for a reference
                                   (`path`, `trainer`), the harness.base class a submission subclasses,
                                   the spec's fields a student's class without one is given
    Kind.gate_rule / gate_sentence what the gate checks, in words
    Kind.gate_images               how many gate images each worker is sent (none: training's gate is
                                   its steps)
    Kind.stage_oracle              the oracle's stages (inference: each layer's output), or none
    Kind.steps                     the grader's steps on a submission's worker (what is timed); a kind
                                   with work of its own has the worker run it through the worker's
                                   `call` op (harness.lab.box.tasks.call: a function the kind names)
    Kind.start_weights             the weights its submissions start from
    Kind.stage_how / kit_gate      what the feedback says of its stages; the gate's numbers in the kit
    Kind.kit_files / handout       what goes into the kit: the files beside the interface, and the
                                   module (harness.lab.term.handout.*) that writes its README, its gate
                                   data and its next-step advice
    Kind.checker / emulate_hint    the kit's check (a `module:function` the kit's `lenet-lab` runs)
    Kind.for_rung(rung)            the kind a lab of this task on that rung is (inference: kernels)

May import: harness.lab.judge.rules (timing, sgd, oracle), harness.lab.judge.phases (a kind's steps)
and the harness below the lab; it is read by the judge, the term and (as data) the worker and the kit.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.errors import HarnessError
from harness.lab.judge.rules.kinds._base import Kind
from harness.lab.judge.rules.kinds.inference import INFERENCE, KERNELS
from harness.lab.judge.rules.kinds.training import TRAINING

__all__ = ["INFERENCE", "KERNELS", "TRAINING", "Kind", "names", "of"]


def names() -> list[str]:
    """The tasks a lab file's [lab] may name: this package's modules, one a kind."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def of(task: str, rung: str) -> Kind:
    """The kind a lab file's [lab] task names: the KIND of this package's module of that name, as it
    serves the lab's rung (Kind.for_rung: an inference lab whose rung's level has the `kernels` hook
    is of the kernels kind)."""
    if task not in names():  # checked before the import: a task is a name here, never a path
        raise HarnessError(f"task: expected one of {names()}, found {task!r}")
    kind = importlib.import_module(f"{__name__}.{task}").KIND
    if not isinstance(kind, Kind):
        raise HarnessError(f"task: {__name__}.{task}.KIND is a {type(kind).__name__}, not a Kind")
    return kind.for_rung(rung)


