"""ImplSpec's constructor stays compatible with the starters, examples and kits already handed out:
every labs/**/lenet.py imports with the harness on the path (as the grader's worker and a kit's
`lenet-lab check` import it) and its one class carries an ImplSpec, and the spec the harness builds
for a class that left it out (registry.lab_spec) builds for each."""

import importlib.util
import inspect
import sys

import pytest

from harness import registry
from harness.base import LeNet, Trainer
from harness.registry import ImplSpec
from tests.conftest import ROOT

LENETS = sorted(ROOT.glob("labs/**/lenet.py"))


def test_the_labs_hand_out_starters_and_examples():
    folders = {path.parent.relative_to(ROOT).as_posix() for path in LENETS}
    assert {"labs/template", "labs/template-cuda", "labs/template-train", "labs/examples/correct"} <= folders


@pytest.mark.parametrize("path", LENETS, ids=lambda path: path.parent.relative_to(ROOT).as_posix())
def test_every_handed_out_lenet_builds_its_spec(path, monkeypatch):
    name = "handed_out_" + "_".join(path.parent.relative_to(ROOT).parts).replace("-", "_")
    found = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(found)
    monkeypatch.setitem(sys.modules, name, module)
    found.loader.exec_module(module)  # the class's `spec = ImplSpec(...)` runs here
    classes = [cls for cls in vars(module).values() if inspect.isclass(cls) and cls.__module__ == name
               and issubclass(cls, (LeNet, Trainer))]
    assert len(classes) == 1, classes
    cls = classes[0]
    spec = cls.spec
    assert isinstance(spec, ImplSpec) and spec.path == f"lenet:{cls.__name__}"
    assert spec.devices and spec.variants and spec.dtypes and spec.variants_for(spec.devices[0])
    assert bool(spec.train_variants) == issubclass(cls, Trainer)  # a trainer names its training variants
    # what the grader builds for a class that left its spec out, on the lab's device and dtype
    built = registry.lab_spec(cls, spec.devices[0], spec.dtypes[0])
    assert built.name == cls.__name__ and built.devices == spec.devices[:1]
