"""Implementations' SGD steps for `verify-train`, beside the NumPy oracle, in a process of their
own (one framework, one Keras backend per interpreter, as verify's child; verify.families says
which levels share one).

    python -m harness.check.train_child NAME[,NAME...] DEVICE WEIGHTS STEPS BATCH DTYPE

Step k (1-based) trains on training images (k-1)*BATCH ... k*BATCH-1 (uint8 / 255). The oracle
(lenet_numpy.train, float64: the exact arithmetic's stand-in) takes the same steps once. For each
implementation and training variant it prints one JSON line: {"implementation", "variant",
"status": "ok" | "unavailable" | "FAIL", "reason", "seconds", "ms_per_step", "steps": [{"step", "loss",
"oracle_loss", "rel_loss", "layers": {"conv1": [max|dkernel|, max|dbias|], ...},
"oracle_near_ties": {"pool1": n, "pool2": n}}]},
the weights compared after each step.
A fatal input error (bad weights, bad data) is one line {"fatal": "..."}.
"""

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from harness import registry
from harness.check import child
from harness.data import mnist, weights
from harness.errors import HarnessError, Unavailable

ORACLE_DTYPE = "float64"
Pair = tuple[np.ndarray, np.ndarray]  # (x (B, 28, 28, 1), labels (B,))
Weights = dict[str, weights.Layer]  # layer name -> (kernel, bias), Keras layouts


def batches(steps: int, batch: int, dtype: str) -> list[Pair]:
    """The first steps*batch training images in order: [(x (B, 28, 28, 1), labels (B,)), ...]."""
    images, labels = mnist.load("train")
    if steps * batch > len(images):
        raise HarnessError(f"--steps x --batch: expected at most {len(images)} images, "
                           f"found {steps} x {batch} = {steps * batch}")
    x = mnist.to_input(images[:steps * batch], dtype)
    y = labels[:steps * batch].astype(np.int64)
    return [(x[i:i + batch], y[i:i + batch]) for i in range(0, steps * batch, batch)]


NEAR_TIE = 1e-6  # relative gap of a pool window's top two values that float32 rounding may swap


def near_ties(w: Weights, x: np.ndarray) -> dict[str, int]:
    """Max-pool windows of the oracle's forward whose top two values are positive and differ by less
    than NEAR_TIE relative (exact ties excluded: those are identical patches, e.g. the background).
    A float32 level may route such a window's gradient to the other pixel: a different, equally
    valid path from that step on."""
    from lenet_numpy.train import QUARTERS, conv_forward, pool_forward

    found = {}
    for pool, conv, pad in (("pool1", "conv1", 2), ("pool2", "conv2", 0)):
        a = np.maximum(conv_forward(x, w[conv].kernel, w[conv].bias, pad=pad)[0], 0)  # (N, H, W, K)
        top2 = np.sort(np.stack([a[:, i::2, j::2] for i, j in QUARTERS]), axis=0)[-2:]
        gap = (top2[1] - top2[0]) / np.maximum(top2[1], 1e-30)
        found[pool] = int(np.sum((top2[1] > 0) & (gap > 0) & (gap < NEAR_TIE)))
        x = pool_forward(a)[0]
    return found


def oracle_run(weights_path: str | Path, data: list[Pair]) -> list[tuple[float, Weights, dict[str, int]]]:
    """The oracle's (loss, weights after the step, near-ties in the step's forward) for every step."""
    from lenet_numpy.train import NumpyTrainer  # the oracle: NumPy only

    oracle = NumpyTrainer(weights_path, dtype=ORACLE_DTYPE)
    steps = []
    for x, y in data:
        ties = near_ties(oracle.w, x.astype(ORACLE_DTYPE))
        steps.append((oracle.train_step(x, y), oracle.weights(), ties))
    return steps


def compare(step: int, loss: float, oracle_loss: float, found: dict[str, Any],
            expected: Weights) -> dict[str, Any]:
    """One step's row: the losses, their relative difference, per layer max |dw| vs the oracle."""
    layers = {}
    for name, (kernel, bias) in expected.items():
        layer = found[name]
        for role, ours, theirs in (("kernel", layer[0], kernel), ("bias", layer[1], bias)):
            if np.shape(ours) != theirs.shape:
                raise ValueError(f"weights()[{name!r}] {role}: expected shape {theirs.shape}, "
                                 f"found {np.shape(ours)}")
        layers[name] = [float(np.max(np.abs(np.asarray(layer[0], np.float64) - kernel))),
                        float(np.max(np.abs(np.asarray(layer[1], np.float64) - bias)))]
    rel = abs(loss - oracle_loss) / max(abs(oracle_loss), 1e-12)
    return {"step": step, "loss": loss, "oracle_loss": oracle_loss, "rel_loss": rel, "layers": layers}


def train_rows(names: list[str], device: str, weights_path: str | Path, steps: int, batch: int, dtype: str,
               say: child.Say = print) -> None:
    data = batches(steps, batch, dtype)
    reference = oracle_run(weights_path, data)
    for name, variant in [(each, variant) for each in names
                          for variant in registry.spec(each).train_variants]:
        row: dict[str, Any] = {"implementation": name, "variant": variant, "status": "ok", "reason": None,
                               "steps": []}
        started = time.perf_counter()
        try:
            trainer = registry.create_trainer(name, weights_path, device=device, variant=variant,
                                              dtype=dtype)
            try:
                times = []
                for k, ((x, y), (oracle_loss, expected, ties)) in enumerate(
                        zip(data, reference, strict=True), 1):
                    t0 = time.perf_counter_ns()
                    loss = float(trainer.train_step(x, y))
                    times.append(time.perf_counter_ns() - t0)
                    row["steps"].append(compare(k, loss, oracle_loss, trainer.weights(), expected)
                                        | {"oracle_near_ties": ties})
                warm = times[1:] or times  # the first step traces / compiles
                row["ms_per_step"] = round(float(np.median(warm)) / 1e6, 3)
                row["first_step_ms"] = round(times[0] / 1e6, 1)
            finally:
                trainer.close()
        except Unavailable as exc:
            row.update(status="unavailable", reason=str(exc))
        except HarnessError:
            raise
        except Exception as exc:  # a trainer that crashes is a failed check; the steps so far stay
            traceback.print_exc()
            row.update(status="FAIL", reason=f"{type(exc).__name__}: {exc}".splitlines()[0])
        row["seconds"] = round(time.perf_counter() - started, 2)
        say(json.dumps(row))


def main(argv: list[str] | None = None) -> int:
    names, device, weights_path, steps, batch, dtype = argv or sys.argv[1:]
    return child.serve(lambda say: train_rows(names.split(","), device, weights_path, int(steps), int(batch),
                                              dtype, say=say))


if __name__ == "__main__":
    raise SystemExit(main())
