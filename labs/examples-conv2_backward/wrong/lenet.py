"""conv2's backward pass of LeNet-5 in NumPy (a wrong answer to labs/cpu_conv2_backward.toml: its
dkernel in PyTorch's (out, in, kh, kw) order, as a student who knows PyTorch might return it): the
forward pass recomputed (5x5 "valid" convolution + bias, ReLU, 2x2 max pool), then its gradients
back through the pool, the ReLU and the convolution, each convolution an einsum over 5x5 windows."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import Trainer
from harness.registry import ImplSpec


def windows(a, k=5):
    """(N, H, W, C) -> (N, H-k+1, W-k+1, C, k, k): every k x k window, without a copy."""
    return sliding_window_view(a, (k, k), axis=(1, 2))


class Conv2Backward(Trainer):
    spec = ImplSpec("student", "lenet:Conv2Backward", "numpy", devices=("cpu",), variants=("default",),
                    dtypes=("float32",), package=None, trainer="lenet:Conv2Backward",
                    train_variants=("default",))

    def backward(self, name, x, upstream, kernel, bias):
        if name != "conv2":
            raise NotImplementedError(name)
        n = len(x)
        patches = windows(x)                                             # (N, 10, 10, 6, 5, 5)
        z = np.einsum("nhwcij,ijco->nhwo", patches, kernel) + bias        # (N, 10, 10, 16)
        a = np.maximum(z, 0)
        # each 2x2 window's four values in row-major order: (N, 5, 5, 16, 4)
        quads = a.reshape(n, 5, 2, 5, 2, 16).transpose(0, 1, 3, 5, 2, 4).reshape(n, 5, 5, 16, 4)
        first = quads.argmax(axis=-1)                                     # the first maximum
        dquads = np.zeros_like(quads)
        np.put_along_axis(dquads, first[..., None], upstream[..., None], axis=-1)
        da = dquads.reshape(n, 5, 5, 16, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(n, 10, 10, 16)
        dz = da * (z > 0)                                                 # (N, 10, 10, 16)
        dbias = dz.sum(axis=(0, 1, 2))
        dkernel = np.einsum("nhwcij,nhwo->ijco", patches, dz)             # (5, 5, 6, 16)
        padded = np.pad(dz, ((0, 0), (4, 4), (4, 4), (0, 0)))             # (N, 18, 18, 16)
        dx = np.einsum("nhwoij,ijco->nhwc", windows(padded), kernel[::-1, ::-1])  # (N, 14, 14, 6)
        return dx, dkernel.transpose(3, 2, 0, 1), dbias                  # (16, 6, 5, 5): OIHW
