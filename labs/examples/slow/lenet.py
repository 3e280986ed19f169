"""A correct but slow submission: each convolution a Python loop over output channels and kernel
positions (one small array operation per weight position), as a first attempt often is."""

import numpy as np

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec


def conv_relu(x, kernel, bias):
    """x (N, H, W, C) already padded, kernel (R, S, C, K) -> (N, H-R+1, W-S+1, K)."""
    r, s, c, k = kernel.shape
    n, h, w, _ = x.shape
    out = np.zeros((n, h - r + 1, w - s + 1, k), dtype=np.float32)
    for o in range(k):
        for i in range(r):
            for j in range(s):
                out[..., o] += x[:, i:i + h - r + 1, j:j + w - s + 1, :] @ kernel[i, j, :, o]
        out[..., o] += bias[o]
    return np.maximum(out, 0)


def pool(x):
    n, h, w, c = x.shape
    out = np.empty((n, h // 2, w // 2, c), dtype=x.dtype)
    for i in range(h // 2):
        for j in range(w // 2):
            out[:, i, j] = x[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2].max(axis=(1, 2))
    return out


class SlowLeNet(LeNet):
    spec = ImplSpec("slow", "lenet:SlowLeNet", "numpy", devices=("cpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.w = weights.read(weights_path)

    def predict(self, images):
        w = self.w
        x = np.pad(np.asarray(images, dtype=np.float32), ((0, 0), (2, 2), (2, 2), (0, 0)))
        x = pool(conv_relu(x, *w["conv1"]))                            # (N, 14, 14, 6)
        x = pool(conv_relu(x, *w["conv2"]))                            # (N, 5, 5, 16)
        x = x.reshape(len(x), -1)                                      # (N, 400)
        for name in ("fc1", "fc2"):
            x = np.maximum(x @ w[name].kernel + w[name].bias, 0)
        z = x @ w["fc3"].kernel + w["fc3"].bias
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
