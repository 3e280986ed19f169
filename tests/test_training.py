"""Training: the NumPy oracle's gradients against finite differences, every level's SGD steps against
the oracle (verify-train), a deliberately wrong gradient caught, the seeded initial weights."""

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS
from harness.data import mnist, weights
from lenet_numpy.model import NumpyLeNet
from lenet_numpy.train import NumpyTrainer, loss_and_grads


def float64_weights(path=DEFAULT_WEIGHTS) -> dict:
    return {name: weights.Layer(layer.kernel.astype(np.float64), layer.bias.astype(np.float64))
            for name, layer in weights.read(path).items()}


def batch(n=8, dtype="float64"):
    images, labels = mnist.load("train")
    return mnist.to_input(images[:n], dtype), labels[:n].astype(np.int64)


def test_oracle_gradients_match_finite_differences():
    w = float64_weights()
    x, y = batch()
    _, grads = loss_and_grads(w, x, y)
    rng = np.random.default_rng(0)
    eps = 1e-6
    for name in weights.SHAPES:
        for role in (0, 1):  # kernel, bias
            array, grad = w[name][role], grads[name][role]
            largest = np.unravel_index(np.argmax(np.abs(grad)), grad.shape)
            picks = [largest] + [tuple(rng.integers(0, s) for s in array.shape) for _ in range(4)]
            for idx in picks:
                old = array[idx]
                array[idx] = old + eps
                plus, _ = loss_and_grads(w, x, y)
                array[idx] = old - eps
                minus, _ = loss_and_grads(w, x, y)
                array[idx] = old
                numeric = (plus - minus) / (2 * eps)
                assert abs(numeric - grad[idx]) <= 1e-7 + 1e-5 * abs(numeric), (name, role, idx)


def test_oracle_loss_is_the_inference_levels_cross_entropy():
    x, y = batch(16, "float32")
    probs = NumpyLeNet(DEFAULT_WEIGHTS, dtype="float64").predict(x)
    expected = -np.mean(np.log(probs[np.arange(len(y)), y]))
    trainer = NumpyTrainer(DEFAULT_WEIGHTS, dtype="float64")
    assert trainer.train_step(x, y) == pytest.approx(expected, rel=1e-12)
    moved = trainer.weights()
    assert not np.array_equal(moved["conv1"].kernel, weights.read(DEFAULT_WEIGHTS)["conv1"].kernel)


def test_pool_ties_go_to_the_first_maximum():
    from lenet_numpy.train import pool_backward, pool_forward

    x = np.ones((1, 2, 2, 1))  # four equal values: the top-left one takes the gradient
    out, mask = pool_forward(x)
    dx = pool_backward(np.full_like(out, 3.0), mask)
    assert dx[0, :, :, 0].tolist() == [[3.0, 0.0], [0.0, 0.0]]


def test_init_weights_are_deterministic(tmp_path):
    from harness.data import init_weights

    again = init_weights.write(tmp_path / "init.weights.h5", init_weights.glorot(0), 0)
    assert again.read_bytes() == init_weights.DEFAULT_INIT.read_bytes()  # the committed file
    shipped = weights.read(init_weights.DEFAULT_INIT)
    for name, (kernel_shape, _) in weights.SHAPES.items():
        fan_in, fan_out = init_weights.fans(kernel_shape)
        assert np.abs(shipped[name].kernel).max() <= np.sqrt(6 / (fan_in + fan_out))
        assert not shipped[name].bias.any()
