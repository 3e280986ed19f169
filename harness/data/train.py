"""Train the shared LeNet-5 weights with Keras (`make weights`).

Fixed seeds and deterministic ops, so a rerun on the same machine and versions gives the same
file. Writes weights/lenet5_mnist.weights.h5 with model.save_weights and records test
accuracy, epochs, seed and library versions as HDF5 root attributes.

    python -m harness.data.train [--epochs 15] [--seed 1] [--out PATH] [--data-dir DIR]
"""

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness import DEFAULT_WEIGHTS
from harness.data import mnist
from harness.errors import HarnessError

MIN_ACCURACY = 0.990


def train(out: Path, epochs: int, seed: int, data_dir: str | Path | None = None,
          min_accuracy: float = MIN_ACCURACY) -> float:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import h5py
    import keras
    import numpy as np
    import tensorflow as tf

    from lenet_keras.model import build_model  # the Keras level's model: the level this module serves

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    x_train, y_train = mnist.load("train", data_dir)
    x_test, y_test = mnist.load("test", data_dir)
    x_train, x_test = mnist.to_input(x_train), mnist.to_input(x_test)

    model = build_model()
    # Step decay: 1e-3, then x0.5 every 4 epochs (gets LeNet-5 past 99% in ~12 epochs).
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch: 1e-3 * 0.5 ** (epoch // 4))
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    started = time.perf_counter()
    model.fit(x_train, y_train, batch_size=128, epochs=epochs, callbacks=[schedule],
              validation_data=(x_test, y_test), verbose=2)
    seconds = time.perf_counter() - started
    _, accuracy = model.evaluate(x_test, y_test, batch_size=1000, verbose=0)
    print(f"test accuracy {accuracy:.4f} after {epochs} epochs ({seconds:.0f} s)")
    if accuracy < min_accuracy:
        raise HarnessError(f"test accuracy {accuracy:.4f} is below {min_accuracy}; not written")

    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_weights(out)
    with h5py.File(out, "a") as f:
        f.attrs.update({
            "test_accuracy": float(accuracy), "epochs": epochs, "seed": seed,
            "batch_size": 128, "train_seconds": round(seconds, 1),
            "tensorflow": tf.__version__, "keras": keras.__version__,
            "numpy": np.__version__, "h5py": h5py.__version__,
            "python": platform.python_version(),
        })
    print(f"wrote {out}")
    return accuracy


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_WEIGHTS)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    try:
        train(args.out, args.epochs, args.seed, args.data_dir)
    except HarnessError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
