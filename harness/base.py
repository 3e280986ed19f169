"""The one interface between the harness and an implementation (DESIGN.md).

    impl = SomeLeNet(weights_path, device="cpu", variant="tuned", dtype="float32")
    probs = impl.predict(images)          # (N, 28, 28, 1) float -> (N, 10) on the host
    impl.last_device_time_ns()            # GPU time of the last predict, or None

    trainer = SomeTrainer(weights_path, device="cpu", variant="default", dtype="float32",
                          learning_rate=0.05)
    loss = trainer.train_step(images, labels)  # one plain SGD step; the loss before the update
    trainer.weights()                         # {"conv1": Layer(kernel, bias), ...} Keras layouts

`predict` returns only when the result is on the host, so GPU work is finished when the
harness reads its clock. A class names its ImplSpec (devices, variants, dtypes); built-in
ones take theirs from harness.registry, a lab's class writes its own.
"""

import numpy as np

from harness.registry import ImplSpec


def check_choice(spec: ImplSpec, device, variant_field, variant, variants, dtype):
    """ValueError naming the field, the value and what the spec allows."""
    for field, value, allowed in (("device", device, spec.devices), (variant_field, variant, variants),
                                  ("dtype", dtype, spec.dtypes)):
        if value not in allowed:
            raise ValueError(f"{spec.name}: unknown {field} {value!r}; expected one of {list(allowed)}")


class LeNet:
    spec: ImplSpec

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        variant = variant or self.spec.variants[0]
        check_choice(self.spec, device, "variant", variant, self.spec.variants_for(device), dtype)
        self.weights_path = weights_path
        self.device = device
        self.variant = variant
        self.dtype = dtype

    def predict(self, images: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def last_device_time_ns(self) -> int | None:
        """Device (GPU) time of the last predict, where the implementation measures it."""
        return None

    def close(self) -> None:
        """Free device memory and handles."""


LEARNING_RATE = 0.05  # plain SGD, no momentum: every level takes the same step


class Trainer:
    """One training step at a time on the level's own copy of the weights.

    The step: softmax cross-entropy averaged over the batch, gradients of that mean, then plain
    SGD `w -= learning_rate * grad` on every kernel and bias. `train_step` returns the batch's
    mean loss from the forward pass before the update. A level's spec names its trainer class
    (`trainer="module:Class"`) and its `train_variants`; a level without one cannot train.
    """

    spec: ImplSpec

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        if not self.spec.train_variants:
            raise ValueError(f"{self.spec.name}: this level has no training step")
        variant = variant or self.spec.train_variants[0]
        check_choice(self.spec, device, "training variant", variant, self.spec.train_variants, dtype)
        self.weights_path = weights_path
        self.device = device
        self.variant = variant
        self.dtype = dtype
        self.learning_rate = float(learning_rate)

    def train_step(self, images: np.ndarray, labels: np.ndarray) -> float:
        """images (N, 28, 28, 1) float, labels (N,) int -> the mean loss before the update."""
        raise NotImplementedError

    def weights(self) -> dict:
        """The current weights on the host, in Keras layouts: {"conv1": Layer(kernel, bias), ...}."""
        raise NotImplementedError

    def close(self) -> None:
        """Free device memory and handles."""
