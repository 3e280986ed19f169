"""The training lab (labs/cpu_train.toml, harness.lab.judge.phases.training): a submission is one SGD
step behind harness.base.Trainer, gated as verify-train checks every level (three steps of 32 from
the shared initial weights, each step's loss and weights against the oracle's) and timed step by
step beside numpy's. Its three examples are graded in the sandbox in tests/test_lab_train_kinds.py,
in the class of realistic faults graded there (one grading of the training lab a suite)."""

import pytest

from harness.errors import HarnessError
from harness.lab.judge.rules import assignment
from tests.conftest import ROOT


def test_the_training_lab_parses_with_verify_train_s_tolerance():
    from harness.check import train_verify

    lab = assignment.load("cpu_train")
    assert lab.task == "training" and lab.starter == ROOT / "labs" / "template-train"
    assert (lab.gate.steps, lab.gate.batch) == (3, 32) and lab.measure.batch_size == 32
    assert lab.gate.max_rel_loss == train_verify.LOSS_TOLERANCE and lab.gate.max_abs_diff == train_verify.WEIGHT_TOLERANCE
    assert [name for name, _ in lab.stages] == ["fc3", "fc2", "fc1", "conv2", "conv1"]


def test_a_training_lab_s_references_must_train():
    with pytest.raises(HarnessError, match=r"references: \['c/fused'\] cannot train"):
        assignment.parse('[lab]\ntask = "training"\nreferences = ["c"]\n', "t.toml")
    with pytest.raises(HarnessError, match=r"unknown stage\(s\) \['pool1'\]"):
        assignment.parse('[lab]\ntask = "training"\n[stages]\npool1 = 3\n', "t.toml")


def test_timed_steps_are_judged_against_the_oracle_s_replay_of_them():
    """An honest float32 step passes; so does a layer a max-pool near-tie pushed past 1e-3 (the
    class-scale bench once failed an honest copy so: fc2 0.0015 apart, about a fifth of the move);
    a step not taken, or losses not computed on the batches, fail naming what is off."""
    import numpy as np

    from harness.data import mnist, weights
    from harness.data.init_weights import DEFAULT_INIT
    from harness.lab.judge.rules import oracle, sgd, timing
    from lenet_numpy.train import NumpyTrainer

    images = timing.timing_images(7, 3 * 32, mnist.load("train")[0]).reshape(3, 32, 28, 28)
    labels = np.random.default_rng(7).integers(0, 10, (3, 32))
    trainer = NumpyTrainer(DEFAULT_INIT, dtype="float32")
    as64 = lambda w: {n: weights.Layer(k.astype(np.float64), b.astype(np.float64)) for n, (k, b) in w.items()}  # noqa: E731
    before = as64(trainer.weights())
    honest = np.array([trainer.train_step(mnist.to_input(x, "float32"), y) for x, y in zip(images, labels, strict=True)])
    losses, expected = oracle.steps(before, list(zip(images, labels, strict=True)))
    after = as64(trainer.weights())
    assert sgd.off_the_steps(honest, after, losses, before, expected[-1]) is None
    moved = sgd.layer_diffs(expected[-1], before)["fc2"]
    tied = dict(after, fc2=weights.Layer(after["fc2"].kernel + [[0.4 * moved]], after["fc2"].bias))
    assert 0.4 * moved > sgd.TIMED_TOLERANCE and sgd.off_the_steps(honest, tied, losses, before, expected[-1]) is None
    still = sgd.off_the_steps(honest, before, losses, before, expected[-1])  # weights never moved
    assert still is not None and all(f"{n} weights" in still for n in sgd.BACKWARD), still
    assert "loss relative" in sgd.off_the_steps(honest * 1.01, after, losses, before, expected[-1])
