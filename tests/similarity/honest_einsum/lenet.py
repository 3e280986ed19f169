"""LeNet-5 for the lab: fill in predict (and anything it needs), then check it before handing in:

    python -m harness lab check cpu_numpy path/to/lenet.py

The grader imports this file in a fresh process, builds the one harness.base.LeNet subclass in
it with the shared weights, and calls predict. Keep everything you need in this folder.
"""

import numpy as np

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec


class StudentLeNet(LeNet):
    spec = ImplSpec("student", "lenet:StudentLeNet", "numpy", devices=("cpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        # {"conv1": Layer(kernel, bias), ..., "fc3": ...} in Keras layouts:
        # conv kernels (5, 5, C_in, C_out) HWIO, dense kernels (inputs, outputs)
        self.w = weights.read(weights_path)
        # my own copies: kernels as float32 arrays, once
        self.layers = [(np.asarray(layer.kernel, np.float32), np.asarray(layer.bias, np.float32))
                       for layer in (self.w[n] for n in ("conv1", "conv2", "fc1", "fc2", "fc3"))]

    @staticmethod
    def _convolve(batch, kern, offset):
        """Sum over the 25 kernel taps: each tap is a shifted view times a (C, K) slice."""
        taps_h, taps_w, _, k_out = kern.shape
        rows = batch.shape[1] - taps_h + 1
        cols = batch.shape[2] - taps_w + 1
        acc = np.zeros((batch.shape[0], rows, cols, k_out), np.float32)
        for dy in range(taps_h):
            for dx in range(taps_w):
                acc += np.einsum("nhwc,ck->nhwk", batch[:, dy:dy + rows, dx:dx + cols, :], kern[dy, dx])
        acc += offset
        np.maximum(acc, 0.0, out=acc)
        return acc

    @staticmethod
    def _halve(feature):
        """2x2 max pooling by comparing the four strided quarters."""
        top = np.maximum(feature[:, 0::2, 0::2], feature[:, 0::2, 1::2])
        bottom = np.maximum(feature[:, 1::2, 0::2], feature[:, 1::2, 1::2])
        return np.maximum(top, bottom)

    def predict(self, images):
        """images (N, 28, 28, 1) float32 in [0, 1] -> class probabilities (N, 10), a NumPy array.

        conv1 6x5x5 "same" + ReLU -> max pool 2x2 -> conv2 16x5x5 "valid" + ReLU -> max pool 2x2
        -> flatten in NHWC order (400) -> dense 120 ReLU -> dense 84 ReLU -> dense 10 softmax
        """
        x = np.asarray(images, dtype=self.dtype)
        (k1, b1), (k2, b2), *dense = self.layers
        padded = np.zeros((x.shape[0], 32, 32, 1), np.float32)
        padded[:, 2:30, 2:30, :] = x
        h = self._halve(self._convolve(padded, k1, b1))
        h = self._halve(self._convolve(h, k2, b2))
        flat = h.reshape(h.shape[0], 400)
        for index, (kern, offset) in enumerate(dense):
            flat = np.dot(flat, kern) + offset
            if index < 2:
                flat = np.where(flat > 0, flat, 0.0)
        logits = flat - np.max(flat, axis=-1, keepdims=True)
        odds = np.exp(logits)
        return odds / np.sum(odds, axis=-1, keepdims=True)
