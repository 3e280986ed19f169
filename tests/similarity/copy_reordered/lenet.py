"""LeNet-5 (the class first, its helpers after it)."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec

STAGES = ("conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3", "softmax")


class CorrectLeNet(LeNet):
    spec = ImplSpec("correct", "lenet:CorrectLeNet", "numpy", devices=("cpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def predict(self, images):
        x = np.asarray(images, dtype=np.float32)                       # (N, 28, 28, 1)
        for name in STAGES:  # conv1 (N, 28, 28, 6) ... fc3 (N, 10), softmax (N, 10)
            x = self.stage(name, x)
        return x

    def stage(self, name, x):
        """One layer on its own, NHWC in and out (the template's stages); predict chains them."""
        w = self.w
        if name in ("conv1", "conv2"):
            pad = 2 if name == "conv1" else 0                          # "same" for conv1
            return conv_relu(np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))), *w[name])
        if name in ("pool1", "pool2"):
            return pool(x)
        if name == "fc1":
            x = x.reshape(len(x), -1)                                  # (N, 400) NHWC order
        if name in ("fc1", "fc2"):
            return np.maximum(x @ w[name].kernel + w[name].bias, 0)
        if name == "fc3":
            return x @ w["fc3"].kernel + w["fc3"].bias                 # (N, 10) logits
        e = np.exp(x - x.max(axis=1, keepdims=True))                   # softmax
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
