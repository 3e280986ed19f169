"""A wrong submission, with the classic porting bug: it flattens pool2's output in NCHW order
(channels first, as PyTorch does), but the shared fc1 weights expect Keras' NHWC order. It runs,
returns probabilities that sum to one, and disagrees with the reference on most images."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec


def conv_relu(x, kernel, bias):
    r, s, c, k = kernel.shape
    win = sliding_window_view(x, (r, s), axis=(1, 2))               # (N, H', W', C, R, S)
    n, h, w = win.shape[:3]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, r * s * c)
    return np.maximum(cols @ kernel.reshape(-1, k) + bias, 0).reshape(n, h, w, k)


def pool(x):
    n, h, w, c = x.shape
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


class WrongLeNet(LeNet):
    spec = ImplSpec("wrong", "lenet:WrongLeNet", "numpy", devices=("cpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.w = weights.read(weights_path)

    def predict(self, images):
        w = self.w
        x = np.pad(np.asarray(images, dtype=np.float32), ((0, 0), (2, 2), (2, 2), (0, 0)))
        x = pool(conv_relu(x, *w["conv1"]))
        x = pool(conv_relu(x, *w["conv2"]))                            # (N, 5, 5, 16)
        x = x.transpose(0, 3, 1, 2).reshape(len(x), -1)                # the bug: NCHW flatten
        x = np.maximum(x @ w["fc1"].kernel + w["fc1"].bias, 0)
        x = np.maximum(x @ w["fc2"].kernel + w["fc2"].bias, 0)
        z = x @ w["fc3"].kernel + w["fc3"].bias
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
