"""The one interface between the harness and an implementation (docs/design.md, "The one interface").

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

The checks a level shares rather than writes (not part of its answer): check_choice (device,
variant, dtype), check_images (a predict's input) and check_batch (a training step's input); and
lenet_classes, the one way a submission's class is found in its module. predict_all: a level's
probabilities of many images, CHUNK at a time (verify's levels and oracle, a study's test accuracy).
"""

from pathlib import Path

import numpy as np

from harness.registry import ImplSpec

# A file of pids, one a line, set by the harness's runner for its workers: its own processes on the
# GPU, which wait their turn (cells run one at a time), so a level's manners towards other processes
# (cuda/resident's) leave them out. Unset outside a run.
GPU_PEERS_ENV = "LENET_GPU_PEERS_FILE"


def check_choice(spec: ImplSpec, device: str, variant_field: str, variant: str,
                 variants: tuple[str, ...], dtype: str) -> None:
    """ValueError naming the field, the value and what the spec allows."""
    for field, value, allowed in (("device", device, spec.devices), (variant_field, variant, variants),
                                  ("dtype", dtype, spec.dtypes)):
        if value not in allowed:
            raise ValueError(f"{spec.name}: unknown {field} {value!r}; expected one of {list(allowed)}")


def check_images(images: np.ndarray) -> np.ndarray:
    """The images as an array, or ValueError unless they are (N, 28, 28, 1) with N >= 1."""
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[1:] != (28, 28, 1) or len(images) == 0:
        raise ValueError(f"expected images (N, 28, 28, 1) with N >= 1, found shape {images.shape}")
    return images


def check_batch(images: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels as int64), or ValueError unless images (N, 28, 28, 1), N >= 1, and labels
    (N,) integers in [0, 9]."""
    images, labels = check_images(images), np.asarray(labels)
    if labels.shape != (len(images),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"expected {len(images)} integer labels, found {labels.dtype} {labels.shape}")
    if labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"labels must be in [0, 9], found {labels.min()} .. {labels.max()}")
    return images, labels.astype(np.int64)


CHUNK = 1000  # images per predict call: bounds memory, keeps every variant on one path


def predict_all(impl: "LeNet", images: np.ndarray) -> np.ndarray:
    """impl's probabilities of `images`, CHUNK images a call (one call on all 10,000 would take
    1.5 GB of fresh pages: seconds of the kernel's time zeroing them)."""
    return np.concatenate([impl.predict(images[i:i + CHUNK]) for i in range(0, len(images), CHUNK)])


class LeNet:
    spec: ImplSpec

    def __init__(self, weights_path: str | Path, device: str = "cpu", variant: str | None = None,
                 dtype: str = "float32"):
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


def lenet_classes(module: object, base: type | None = None) -> list[type]:
    """The LeNet (or `base`: a training lab's Trainer) subclasses a submission's module defines
    itself, the most derived only (a student's own base class is fine; an alias is one class): the
    grader's worker and the kit's `lenet-lab` pick a submission's class from these the same way."""
    base = base or LeNet
    found = {id(v): v for v in vars(module).values() if isinstance(v, type) and issubclass(v, base)
             and v is not base and v.__module__ == getattr(module, "__name__", None)}.values()
    return [c for c in found if not any(o is not c and issubclass(o, c) for o in found)]


LEARNING_RATE = 0.05  # plain SGD, no momentum: every level takes the same step


class Trainer:
    """One training step at a time on the level's own copy of the weights.

    The step: softmax cross-entropy averaged over the batch, gradients of that mean, then plain
    SGD `w -= learning_rate * grad` on every kernel and bias. `train_step` returns the batch's
    mean loss from the forward pass before the update. A level's spec names its trainer class
    (`trainer="module:Class"`) and its `train_variants`; a level without one cannot train.
    """

    spec: ImplSpec

    def __init__(self, weights_path: str | Path, device: str = "cpu", variant: str | None = None,
                 dtype: str = "float32", learning_rate: float = LEARNING_RATE):
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
