"""Trainers that verify-train must catch (imported by the training verify's child as module:Class)."""

from harness.data import weights
from harness.registry import REGISTRY, ImplSpec
from lenet_numpy.train import NumpyTrainer


class SignFlipTrainer(NumpyTrainer):
    """The NumPy oracle with conv2's bias gradient negated: a backprop bug in one layer."""

    spec = ImplSpec("signflip", "tests.train_fakes:SignFlipTrainer", "numpy", ("cpu",), ("default",),
                    ("float32", "float64"), None, trainer="tests.train_fakes:SignFlipTrainer",
                    train_variants=("default",))

    def gradients(self, images, labels):
        loss, grads = super().gradients(images, labels)
        grads["conv2"] = weights.Layer(grads["conv2"].kernel, -grads["conv2"].bias)
        return loss, grads


class CrashingTrainer(NumpyTrainer):
    """A trainer that dies in its third step: the steps before it and the other rows stay."""

    spec = ImplSpec("crash", "tests.train_fakes:CrashingTrainer", "numpy", ("cpu",), ("default",),
                    ("float32",), None, trainer="tests.train_fakes:CrashingTrainer",
                    train_variants=("default",))

    def train_step(self, images, labels):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 3:
            raise RuntimeError("out of cheese")
        return super().train_step(images, labels)


assert "signflip" not in REGISTRY
