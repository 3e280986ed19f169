"""Trainers (`module:Class`) that misbehave, for the training study's tests."""

from harness.registry import ImplSpec
from lenet_numpy.train import NumpyTrainer


def spec_of(name, cls):
    return ImplSpec(name, f"tests.fake_trainers:{cls}", "numpy", ("cpu",), ("default",), ("float32",),
                    None, trainer=f"tests.fake_trainers:{cls}", train_variants=("default",))


class NanTrainer(NumpyTrainer):
    """Trains like the oracle for three steps, then its loss is NaN (an exploding level)."""

    spec = spec_of("nan", "NanTrainer")
    steps = 0

    def train_step(self, images, labels):
        self.steps += 1
        loss = super().train_step(images, labels)
        return float("nan") if self.steps > 3 else loss


class FlatTrainer(NumpyTrainer):
    """Never updates its weights (a step that forgets `w -= lr * grad`): the loss stays put."""

    spec = spec_of("flat", "FlatTrainer")

    def train_step(self, images, labels):
        loss, _ = self.gradients(images, labels)
        return float(loss)
