"""conv2's backward pass of LeNet-5 in NumPy (a right answer to labs/cpu_conv2_backward.toml): the
forward pass recomputed (5x5 "valid" convolution + bias, ReLU, 2x2 max pool), then its gradients
back through the pool, the ReLU and the convolution, each convolution one matrix product of the
5x5 windows laid out as rows (im2col)."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import Trainer
from harness.registry import ImplSpec


def columns(a, k=5):
    """(N, H, W, C) -> (N * H' * W', C * k * k): each k x k window as a row, in (c, i, j) order."""
    n, h, w, c = a.shape
    return sliding_window_view(a, (k, k), axis=(1, 2)).reshape(n * (h - k + 1) * (w - k + 1), c * k * k)


class Conv2Backward(Trainer):
    spec = ImplSpec("student", "lenet:Conv2Backward", "numpy", devices=("cpu",), variants=("default",),
                    dtypes=("float32",), package=None, trainer="lenet:Conv2Backward",
                    train_variants=("default",))

    def backward(self, name, x, upstream, kernel, bias):
        if name != "conv2":
            raise NotImplementedError(name)
        n = len(x)
        cols = columns(x)                                                  # (N*100, 150)
        kmat = kernel.transpose(2, 0, 1, 3).reshape(150, 16)               # rows in (c, i, j) order
        z = (cols @ kmat + bias).reshape(n, 10, 10, 16)
        a = np.maximum(z, 0)
        # each 2x2 window's four values in row-major order: (N, 5, 5, 16, 4)
        quads = a.reshape(n, 5, 2, 5, 2, 16).transpose(0, 1, 3, 5, 2, 4).reshape(n, 5, 5, 16, 4)
        first = quads.argmax(axis=-1)                                      # the first maximum
        dquads = np.zeros_like(quads)
        np.put_along_axis(dquads, first[..., None], upstream[..., None], axis=-1)
        da = dquads.reshape(n, 5, 5, 16, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(n, 10, 10, 16)
        dz = da * (z > 0)                                                  # (N, 10, 10, 16)
        flat = dz.reshape(n * 100, 16)
        dbias = flat.sum(axis=0)
        dkernel = (cols.T @ flat).reshape(6, 5, 5, 16).transpose(1, 2, 0, 3)  # (5, 5, 6, 16)
        # dx: dz padded by 4, correlated with the kernel flipped in space (a "full" convolution)
        padded = np.pad(dz, ((0, 0), (4, 4), (4, 4), (0, 0)))             # (N, 18, 18, 16)
        flipped = kernel[::-1, ::-1].transpose(3, 0, 1, 2).reshape(400, 6)  # rows in (o, i, j) order
        dx = (columns(padded) @ flipped).reshape(n, 14, 14, 6)
        return dx, dkernel, dbias
