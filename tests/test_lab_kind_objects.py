"""The kinds of lab task (harness.lab.judge.rules.kinds): each shipped lab file is of the kind its
[lab] task and rung say, each kind's worker request names what the worker can load, a task no kind
has is refused naming the file, and no harness code outside the kinds asks which kind a lab is."""

import importlib
import importlib.util
import re

import pytest

from harness import ROOT, base, registry
from harness.errors import HarnessError
from harness.lab.judge.rules import assignment, kinds

SPEC = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
house = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(house)


@pytest.mark.parametrize("name, kind", [("cpu_numpy", kinds.INFERENCE), ("cudnn", kinds.INFERENCE),
                                        ("cpu_train", kinds.TRAINING), ("cuda", kinds.KERNELS)])
def test_each_shipped_lab_is_of_its_kind(name, kind):
    assert assignment.load(name).kind is kind


@pytest.mark.parametrize("kind", [kinds.INFERENCE, kinds.TRAINING, kinds.KERNELS])
def test_each_kinds_worker_request_names_what_the_worker_loads(kind):
    asked = kind.worker
    assert isinstance(getattr(base, asked["base"]), type)  # harness.base.LeNet or Trainer
    assert asked["entry"] in {f for f in registry.ImplSpec.__dataclass_fields__}
    assert set(asked["spec"]) <= set(registry.ImplSpec.__dataclass_fields__)
    module, _, function = kind.checker.partition(":")
    assert (ROOT / (module.replace(".", "/") + ".py")).is_file() and function
    assert all((ROOT / path).is_file() for path in kind.kit_files)


def test_a_task_no_kind_has_is_refused_naming_the_file_and_the_kinds():
    text = (ROOT / "labs" / "cpu_numpy.toml").read_text().replace('[lab]\n', '[lab]\ntask = "backward"\n', 1)
    assert {"inference", "training"} <= set(kinds.names())  # the package's modules, one a kind
    with pytest.raises(HarnessError, match=re.escape(f"x.toml [lab]: task: expected one of {kinds.names()}, "
                                                     "found 'backward'")):
        assignment.parse(text, "x.toml")


def test_a_training_lab_starts_from_the_initial_weights_and_an_inference_lab_from_those_given(tmp_path):
    from harness import DEFAULT_WEIGHTS
    from harness.data.init_weights import DEFAULT_INIT

    assert kinds.TRAINING.start_weights(DEFAULT_WEIGHTS) == DEFAULT_INIT
    assert kinds.INFERENCE.start_weights(DEFAULT_WEIGHTS) == DEFAULT_WEIGHTS
    assert kinds.TRAINING.start_weights(tmp_path / "w.h5") == tmp_path / "w.h5"


def test_no_harness_code_outside_the_kinds_asks_which_kind_a_lab_is():
    measure = house.kind_measure(house.read_modules(ROOT))
    assert measure.where == [], measure.where


@pytest.mark.parametrize("name, said", [("cuda", "## The CUDA lab without a GPU"), ("cpu_numpy", "fill in `predict`"),
                                        ("cpu_train", "train_step")])
def test_each_kinds_kit_readme_is_its_own(name, said):
    lab = assignment.load(name)
    readme = importlib.import_module(lab.kind.handout).readme(lab)
    assert said in readme
    assert ("lenet-lab emulate" in readme) == (lab.kind is kinds.KERNELS)
