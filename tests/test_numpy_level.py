"""The NumPy reference checked against a plain loop-based LeNet-5 (independent of im2col)."""

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS
from harness.data import mnist
from lenet_numpy.model import NumpyLeNet, conv2d_relu, max_pool_2x2


def conv_loop(x, kernel, bias, pad):
    """Direct cross-correlation, one output pixel at a time. x (H, W, C), kernel HWIO."""
    r, s, _, k = kernel.shape
    x = np.pad(x, ((pad, pad), (pad, pad), (0, 0)))
    h, w = x.shape[0] - r + 1, x.shape[1] - s + 1
    out = np.empty((h, w, k))
    for i in range(h):
        for j in range(w):
            out[i, j] = np.tensordot(x[i:i + r, j:j + s, :], kernel, axes=3) + bias
    return np.maximum(out, 0)


def lenet_loop(image, w):
    x = conv_loop(image.astype(np.float64), *w["conv1"], pad=2)
    x = max_pool_2x2(x[np.newaxis])[0]
    x = conv_loop(x, *w["conv2"], pad=0)
    x = max_pool_2x2(x[np.newaxis])[0].reshape(-1)
    for name in ("fc1", "fc2"):
        x = np.maximum(x @ w[name].kernel + w[name].bias, 0)
    z = x @ w["fc3"].kernel + w["fc3"].bias
    e = np.exp(z - z.max())
    return e / e.sum()


def test_reference_matches_direct_loops(shared_weights, mnist_test):
    images, _ = mnist_test
    x = mnist.to_input(images[:3])
    fast = NumpyLeNet(DEFAULT_WEIGHTS).predict(x)
    for i in range(3):
        np.testing.assert_allclose(fast[i], lenet_loop(x[i], shared_weights), atol=1e-6)


def test_conv_shapes_same_and_valid():
    rng = np.random.default_rng(0)
    x = rng.random((2, 28, 28, 1))
    same = conv2d_relu(x, rng.random((5, 5, 1, 6)), np.zeros(6), pad=2)
    valid = conv2d_relu(same[:, :14, :14], rng.random((5, 5, 6, 16)), np.zeros(16), pad=0)
    assert same.shape == (2, 28, 28, 6) and valid.shape == (2, 10, 10, 16)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtypes_and_probabilities(dtype, mnist_test):
    images, labels = mnist_test
    probs = NumpyLeNet(DEFAULT_WEIGHTS, dtype=dtype).predict(mnist.to_input(images[:500], dtype))
    assert probs.dtype == np.dtype(dtype) and probs.shape == (500, 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert np.mean(probs.argmax(1) == labels[:500]) > 0.98
