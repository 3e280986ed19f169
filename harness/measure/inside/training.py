"""Train mode inside a worker: each timed call is one SGD step of the level's trainer on the
next batch of MNIST training images, from the seeded initial weights.

A loss that becomes NaN or infinite is `Diverged` (the cell's status, never a crash). The
convergence run trains a fresh trainer for a number of images or seconds, whichever ends
first, then reads its test accuracy with the NumPy reference; a loss that did not go down is
`Diverged` too.
"""

import itertools
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness.base import Trainer

Pair = tuple[np.ndarray, np.ndarray]  # (images (B, 28, 28, 1), labels (B,))

DOWN_FRACTION = 0.1  # the convergence run's first and last tenth of steps are compared ...
MIN_DROP = 0.05  # ... and the last tenth's mean loss must be at least 5% below the first's


class Diverged(RuntimeError):
    """The training loss became NaN or infinite, or stopped going down."""


_TRAIN_SET: dict[str, Pair] = {}  # dtype -> the 60,000 training pairs: read once per worker


def batches(dtype: str, batch: int) -> list[Pair]:
    """(images (B, 28, 28, 1), labels (B,)) pairs over the training set, in file order."""
    from harness.data import mnist

    if dtype not in _TRAIN_SET:
        images, labels = mnist.load("train")
        _TRAIN_SET[dtype] = (mnist.to_input(images, dtype), labels.astype(np.int64))
    x, y = _TRAIN_SET[dtype]
    return [(x[i:i + batch], y[i:i + batch]) for i in range(0, len(x) - batch + 1, batch)]


def stepper(trainer: Trainer, losses: list[float]) -> Callable[[Pair], None]:
    """fn((images, labels)): one step, its loss kept (the harness times fn; the append is ~50 ns)."""
    def step(pair: Pair) -> None:
        losses.append(trainer.train_step(pair[0], pair[1]))
    return step


def check_finite(losses: list[float], first_step: int = 0) -> None:
    for i, loss in enumerate(losses):
        if not math.isfinite(loss):
            raise Diverged(f"loss became {loss} at step {first_step + i}")


def test_accuracy(trainer: Trainer, dtype: str) -> float:
    """The trainer's current weights, read back and run through the NumPy reference (predict_all:
    in chunks, as verify's)."""
    from harness.base import predict_all
    from harness.data import init_weights, mnist
    from lenet_numpy.model import NumpyLeNet

    images, labels = mnist.load("test")
    with tempfile.TemporaryDirectory(prefix="lenet-trained-") as folder:
        path = init_weights.write(Path(folder) / "trained.weights.h5", trainer.weights(), seed=-1)
        probs = predict_all(NumpyLeNet(path, dtype=dtype), mnist.to_input(images, dtype))
    return float(np.mean(probs.argmax(1) == labels))


def converge(make_trainer: Callable[[], Trainer], pairs: list[Pair], dtype: str, max_images: int | None,
             max_seconds: float | None) -> dict[str, Any]:
    """Train a fresh trainer until max_images or max_seconds; the loss curve and test accuracy."""
    trainer = make_trainer()
    losses: list[float] = []
    seen = 0
    started = time.perf_counter()
    try:
        for i in itertools.count():
            x, y = pairs[i % len(pairs)]
            losses.append(float(trainer.train_step(x, y)))
            seen += len(x)
            elapsed = time.perf_counter() - started
            if (max_images and seen >= max_images) or (max_seconds and elapsed >= max_seconds):
                break
        result = {"images": seen, "steps": len(losses), "seconds": round(elapsed, 2),
                  "loss_first": losses[0], "loss_last": losses[-1]}
        check_finite(losses)
        k = max(1, int(len(losses) * DOWN_FRACTION))
        first, last = float(np.mean(losses[:k])), float(np.mean(losses[-k:]))
        result.update(loss_first_tenth=first, loss_last_tenth=last)
        if len(losses) >= 2 * k and not last < (1 - MIN_DROP) * first:
            raise Diverged(f"the loss did not go down: mean {first:.4g} over the first {k} steps, "
                           f"{last:.4g} over the last {k}")
        result["test_accuracy"] = test_accuracy(trainer, dtype)
        return result
    finally:
        trainer.close()
