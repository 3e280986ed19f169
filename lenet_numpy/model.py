"""LeNet-5 forward pass in NumPy: convolutions as im2col + one matmul, NHWC throughout.

The shared weights are used as they are (Keras layouts: HWIO kernels, (in, out) dense), so
this level has no weight-conversion code.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import LeNet
from harness.data import weights
from harness.registry import REGISTRY


def conv2d_relu(x, kernel, bias, pad):
    """x (N, H, W, C), kernel (R, S, C, K) HWIO -> relu(x * kernel + bias) (N, H', W', K)."""
    r, s, c, k = kernel.shape
    if pad:  # zeros + assignment: several times faster than np.pad on one small image
        padded = np.zeros((x.shape[0], x.shape[1] + 2 * pad, x.shape[2] + 2 * pad, c), x.dtype)
        padded[:, pad:-pad, pad:-pad, :] = x
        x = padded
    windows = sliding_window_view(x, (r, s), axis=(1, 2))  # (N, H', W', C, R, S)
    n, h, w = windows.shape[:3]
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, r * s * c)  # rows in HWC order
    out = cols @ kernel.reshape(r * s * c, k) + bias
    return np.maximum(out, 0).reshape(n, h, w, k)


def max_pool_2x2(x):
    """(N, H, W, C) -> (N, H/2, W/2, C): the max of the four strided quarter grids."""
    top = np.maximum(x[:, 0::2, 0::2], x[:, 0::2, 1::2])
    bottom = np.maximum(x[:, 1::2, 0::2], x[:, 1::2, 1::2])
    return np.maximum(top, bottom)


def dense(x, kernel, bias):
    return x @ kernel + bias


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class NumpyLeNet(LeNet):
    spec = REGISTRY["numpy"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.w = {
            name: weights.Layer(layer.kernel.astype(dtype), layer.bias.astype(dtype))
            for name, layer in weights.read(weights_path).items()
        }

    def predict(self, images):
        w = self.w
        x = np.asarray(images, dtype=self.dtype)                    # (N, 28, 28, 1)
        x = conv2d_relu(x, *w["conv1"], pad=2)                      # (N, 28, 28, 6)
        x = max_pool_2x2(x)                                         # (N, 14, 14, 6)
        x = conv2d_relu(x, *w["conv2"], pad=0)                      # (N, 10, 10, 16)
        x = max_pool_2x2(x)                                         # (N, 5, 5, 16)
        x = x.reshape(x.shape[0], -1)                               # (N, 400), NHWC order
        x = np.maximum(dense(x, *w["fc1"]), 0)                      # (N, 120)
        x = np.maximum(dense(x, *w["fc2"]), 0)                      # (N, 84)
        return softmax(dense(x, *w["fc3"]))                         # (N, 10)
