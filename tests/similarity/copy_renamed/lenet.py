"""My LeNet: convolution via patches and matmul."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec


def convolve_and_rectify(inp, filt, shift):
    # inp: padded input, filt: HWIO
    fh, fw, chans, outs = filt.shape
    patches = sliding_window_view(inp, (fh, fw), axis=(1, 2))
    batch, height, width = patches.shape[:3]
    matrix = patches.transpose(0, 1, 2, 4, 5, 3).reshape(batch * height * width, fh * fw * chans)
    return np.maximum(matrix @ filt.reshape(-1, outs) + shift, 0).reshape(batch, height, width, outs)


def downsample(t):
    # 2x2 max
    batch, height, width, chans = t.shape
    return t.reshape(batch, height // 2, 2, width // 2, 2, chans).max(axis=(2, 4))


LAYERS = ("conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3", "softmax")


class MyNet(LeNet):
    spec = ImplSpec("student", "lenet:MyNet", "numpy", devices=("cpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.params = weights.read(weights_path)

    def stage(self, layer, h):
        # one layer at a time
        p = self.params
        if layer in ("conv1", "conv2"):
            border = 2 if layer == "conv1" else 0
            return convolve_and_rectify(np.pad(h, ((0, 0), (border, border), (border, border), (0, 0))), *p[layer])
        if layer in ("pool1", "pool2"):
            return downsample(h)
        if layer == "fc1":
            h = h.reshape(len(h), -1)
        if layer in ("fc1", "fc2"):
            return np.maximum(h @ p[layer].kernel + p[layer].bias, 0)
        if layer == "fc3":
            return h @ p["fc3"].kernel + p["fc3"].bias
        ex = np.exp(h - h.max(axis=1, keepdims=True))
        return ex / ex.sum(axis=1, keepdims=True)

    def predict(self, images):
        h = np.asarray(images, dtype=np.float32)
        for layer in LAYERS:
            h = self.stage(layer, h)
        return h
