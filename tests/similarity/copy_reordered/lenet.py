"""LeNet-5 (the class first, its helpers after it)."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec


class CorrectLeNet(LeNet):
    spec = ImplSpec("correct", "lenet:CorrectLeNet", "numpy", devices=("cpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def predict(self, images):
        w = self.w
        x = np.asarray(images, dtype=np.float32)
        x = np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)))               # (N, 32, 32, 1)
        x = pool(conv_relu(x, *w["conv1"]))                            # (N, 14, 14, 6)
        x = pool(conv_relu(x, *w["conv2"]))                            # (N, 5, 5, 16)
        x = x.reshape(len(x), -1)                                      # (N, 400) NHWC order
        x = np.maximum(x @ w["fc1"].kernel + w["fc1"].bias, 0)         # (N, 120)
        x = np.maximum(x @ w["fc2"].kernel + w["fc2"].bias, 0)         # (N, 84)
        z = x @ w["fc3"].kernel + w["fc3"].bias                        # (N, 10)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.w = weights.read(weights_path)


def pool(x):
    """(N, H, W, C) -> (N, H/2, W/2, C), max over 2x2."""
    n, h, w, c = x.shape
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def conv_relu(x, kernel, bias):
    """x (N, H, W, C) already padded, kernel (5, 5, C, K) -> (N, H-4, W-4, K)."""
    r, s, c, k = kernel.shape
    win = sliding_window_view(x, (r, s), axis=(1, 2))               # (N, H', W', C, R, S)
    n, h, w = win.shape[:3]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, r * s * c)
    return np.maximum(cols @ kernel.reshape(-1, k) + bias, 0).reshape(n, h, w, k)
