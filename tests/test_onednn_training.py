"""The oneDNN training step (lenet_onednn/train.py) against the NumPy oracle (lenet_numpy/train.py,
float64: the exact arithmetic's stand-in), through the real libdnnl: K steps from the shared
initial weights, one step's per-layer gradients, batch sizes 1 and 32 (and switching between
them), the Keras layouts of weights(), the implementations oneDNN picked. Timing is printed,
never asserted. Skipped only where libdnnl cannot be loaded (the reason is shown)."""

import time

import numpy as np
import pytest

from harness import ROOT, registry
from harness.base import LEARNING_RATE
from harness.data import mnist, weights
from harness.errors import Unavailable
from lenet_numpy.train import NumpyTrainer
from lenet_onednn import binding as dnnl

INIT = ROOT / "weights" / "lenet5_init.weights.h5"
STEPS, BATCH = 20, 32
LOSS_RTOL, WEIGHT_ATOL = 1e-4, 1e-4


@pytest.fixture(scope="module")
def lib():
    try:
        return dnnl.load()
    except Unavailable as exc:
        pytest.skip(f"libdnnl cannot be loaded here: {exc}")


@pytest.fixture(scope="module")
def data(mnist_train):
    images, labels = mnist_train
    return mnist.to_input(images[:STEPS * BATCH]), labels[:STEPS * BATCH].astype(np.int64)


def trainer(path=INIT, **kwargs):
    from lenet_onednn.train import OnednnTrainer

    return OnednnTrainer(path, **kwargs)


def max_abs_diff(ours: dict, theirs: dict) -> dict:
    return {name: (float(np.max(np.abs(ours[name][0] - theirs[name][0]))),
                   float(np.max(np.abs(ours[name][1] - theirs[name][1])))) for name in theirs}


def test_registry_names_the_trainer():
    spec = registry.spec("onednn")
    assert spec.trainer == "lenet_onednn.train:OnednnTrainer" and spec.train_variants == ("default",)


def test_k_steps_agree_with_the_oracle(lib, data):
    """20 SGD steps of 32 images from the seeded initial weights: every step's loss within
    relative 1e-4, every weight within 1e-4 after the last step (both are orders of magnitude
    closer: printed)."""
    x, y = data
    ours, oracle = trainer(), NumpyTrainer(INIT, dtype="float64")
    try:
        rel = []
        for k in range(STEPS):
            xb, yb = x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH]
            loss, expected = ours.train_step(xb, yb), oracle.train_step(xb, yb)
            rel.append(abs(loss - expected) / abs(expected))
            assert rel[-1] <= LOSS_RTOL, f"step {k + 1}: loss {loss} vs oracle {expected}"
        diffs = max_abs_diff(ours.weights(), oracle.weights())
        worst = max(max(d) for d in diffs.values())
        print(f"\noneDNN vs oracle, {STEPS} steps of {BATCH}: max relative loss difference "
              f"{max(rel):.1e}, max |dw| {worst:.1e}")
        assert worst <= WEIGHT_ATOL, diffs
    finally:
        ours.close()


@pytest.mark.parametrize("path", [INIT, ROOT / "weights" / "lenet5_mnist.weights.h5"])
def test_per_layer_gradients_at_batch_7(lib, data, path):
    """One step's gradients, every kernel and bias, in Keras layouts (conv HWIO, dense (in, out),
    fc1's rows in NHWC flatten order): from the initial and from the trained weights."""
    x, y = data
    ours, oracle = trainer(path), NumpyTrainer(path, dtype="float64")
    try:
        loss, grads = ours.gradients(x[:7], y[:7])
        expected_loss, expected = oracle.gradients(x[:7], y[:7])
        assert abs(loss - expected_loss) <= LOSS_RTOL * abs(expected_loss)
        for name, (kernel, bias) in expected.items():
            assert grads[name].kernel.shape == kernel.shape and grads[name].bias.shape == bias.shape
            for role, got, want in (("kernel", grads[name].kernel, kernel), ("bias", grads[name].bias, bias)):
                scale = max(1.0, float(np.max(np.abs(want))))
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale, err_msg=f"{name} {role}")
        # no update: the weights are still the file's
        unchanged = max_abs_diff(ours.weights(), weights.read(path))
        assert max(max(d) for d in unchanged.values()) == 0.0
    finally:
        ours.close()


def test_batch_sizes_1_and_32_and_switching_between_them(lib, data):
    """A plan per batch size; the weights move between plans (reorders) when the size changes."""
    x, y = data
    ours, oracle = trainer(), NumpyTrainer(INIT, dtype="float64")
    try:
        for n, start in ((32, 0), (1, 32), (1, 33), (32, 34), (1, 66)):
            loss = ours.train_step(x[start:start + n], y[start:start + n])
            expected = oracle.train_step(x[start:start + n], y[start:start + n])
            assert abs(loss - expected) <= LOSS_RTOL * abs(expected), (n, start)
        assert set(ours.plans) == {1, 32} and ours.active is ours.plans[1]
        diffs = max_abs_diff(ours.weights(), oracle.weights())
        assert max(max(d) for d in diffs.values()) <= WEIGHT_ATOL, diffs
    finally:
        ours.close()
    after_close = max_abs_diff(ours.weights(), oracle.weights())  # kept on the host at close
    assert max(max(d) for d in after_close.values()) <= WEIGHT_ATOL


def test_weights_round_trip_exactly_through_the_primitives_layouts(lib):
    """Reordered into the layouts the forward primitives chose and back: bit for bit."""
    ours = trainer(ROOT / "weights" / "lenet5_mnist.weights.h5")
    try:
        ours.plan(32)  # loads the weights into plan 32's layouts
        found = ours.weights()
        for name, (kernel, bias) in weights.read(ROOT / "weights" / "lenet5_mnist.weights.h5").items():
            assert found[name].kernel.shape == kernel.shape and found[name].kernel.dtype == np.float32
            np.testing.assert_array_equal(found[name].kernel, kernel)
            np.testing.assert_array_equal(found[name].bias, bias)
    finally:
        ours.close()


def test_heavy_primitives_have_optimized_code_and_only_named_reorders(lib):
    ours = trainer()
    try:
        impl = ours.impl_info(32)
        heavy = [name for name in impl if name.split(".")[0] in ("conv1", "conv2", "pool1", "pool2",
                                                                  "fc1", "fc2", "fc3")
                 and "sgd" not in name]
        assert {"conv2.bwd_data", "conv2.bwd_weights", "conv1.bwd_weights", "pool1.bwd",
                "fc1.bwd_data", "fc1.bwd_weights"} <= set(heavy)
        slow = {name: impl[name] for name in heavy if impl[name].startswith("ref:")}
        assert not slow, f"reference (slow) oneDNN code for {slow}"
        plan = ours.plans[32]
        assert all(name.endswith(("_to_bwd_data", "_to_weights_layout", "_to_src_layout"))
                   for name in plan.reorders), plan.reorders
    finally:
        ours.close()


def test_bad_batches_are_clear_errors(lib):
    ours = trainer()
    try:
        x = np.zeros((4, 28, 28, 1), np.float32)
        with pytest.raises(ValueError, match=r"expected images \(N, 28, 28, 1\)"):
            ours.train_step(np.zeros((4, 28, 28)), np.zeros(4, int))
        with pytest.raises(ValueError, match="expected 4 integer labels"):
            ours.train_step(x, np.zeros(3, int))
        with pytest.raises(ValueError, match="expected 4 integer labels"):
            ours.train_step(x, np.zeros(4, np.float32))
        with pytest.raises(ValueError, match=r"labels must be in \[0, 9\]"):
            ours.train_step(x, np.array([0, 1, 2, 10]))
    finally:
        ours.close()
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        trainer(dtype="float64")
    with pytest.raises(ValueError, match="unknown training variant 'tuned'"):
        trainer(variant="tuned")


@pytest.mark.parametrize("n", [32, 512])
def test_step_time_is_printed(lib, n):
    """Median wall time of one training step (host array in, loss out), never asserted."""
    rng = np.random.default_rng(n)
    x = rng.random((n, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, n)
    ours = trainer(learning_rate=LEARNING_RATE)
    try:
        for _ in range(3):
            ours.train_step(x, y)
        times = []
        for _ in range(10):
            start = time.perf_counter()
            ours.train_step(x, y)
            times.append(time.perf_counter() - start)
        print(f"\noneDNN training step, batch {n}: median {np.median(times) * 1e3:.2f} ms "
              f"(min {min(times) * 1e3:.2f}), {dnnl.omp_max_threads()} OpenMP thread(s)")
    finally:
        ours.close()
