"""A correct training step: im2col convolutions (one matrix product each way), NHWC throughout."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import LEARNING_RATE, Trainer
from harness.data import weights
from harness.registry import ImplSpec

CORNERS = ((0, 0), (0, 1), (1, 0), (1, 1))  # a 2x2 window's pixels, row-major: ties go to the first


def im2col(x, size):
    """x (N, H, W, C) -> rows (N*H'*W', size*size*C) in (kh, kw, c) order, and (N, H', W')."""
    win = sliding_window_view(x, (size, size), axis=(1, 2))         # (N, H', W', C, kh, kw)
    n, h, w = win.shape[:3]
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, -1), (n, h, w)


def conv(x, kernel, bias):
    """x (N, H, W, C) padded -> (N, H-4, W-4, K) pre-activation, and the rows for the backward."""
    rows, (n, h, w) = im2col(x, 5)
    return (rows @ kernel.reshape(-1, kernel.shape[-1]) + bias).reshape(n, h, w, -1), rows


def conv_grads(d, kernel, rows, x_shape, pad):
    """d (N, H', W', K) -> dkernel, dbias and dx (N, H, W, C) without the padding."""
    k = kernel.shape[-1]
    flat = d.reshape(-1, k)
    dcols = (flat @ kernel.reshape(-1, k).T).reshape(*d.shape[:3], 5, 5, kernel.shape[2])
    dx = np.zeros(x_shape, d.dtype)
    for i in range(5):
        for j in range(5):
            dx[:, i:i + d.shape[1], j:j + d.shape[2]] += dcols[:, :, :, i, j]
    dx = dx[:, pad:dx.shape[1] - pad, pad:dx.shape[2] - pad] if pad else dx
    return (rows.T @ flat).reshape(kernel.shape), flat.sum(0), dx


def pool(x):
    """(N, H, W, C) -> max over 2x2 (N, H/2, W/2, C), and which corner won (the first maximum)."""
    corners = np.stack([x[:, i::2, j::2] for i, j in CORNERS])
    out = corners.max(0)
    return out, np.argmax(corners == out, axis=0)


def flatten(p):
    """(N, 5, 5, 16) -> (N, 400) in NHWC order, as fc1's rows expect."""
    return p.reshape(len(p), -1)


def unflatten(d, shape):
    """flatten's backward: (N, 400) -> (N, 5, 5, 16)."""
    return d.reshape(shape)


def unpool(d, won):
    dx = np.zeros((d.shape[0], 2 * d.shape[1], 2 * d.shape[2], d.shape[3]), d.dtype)
    for q, (i, j) in enumerate(CORNERS):
        dx[:, i::2, j::2] = np.where(won == q, d, 0)
    return dx


class CorrectTrainer(Trainer):
    spec = ImplSpec("correct", "lenet:CorrectTrainer", "numpy", devices=("cpu",), variants=("default",),
                    dtypes=("float32",), package=None, trainer="lenet:CorrectTrainer",
                    train_variants=("default",))

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        self.w = {name: [k.astype(dtype), b.astype(dtype)]
                  for name, (k, b) in weights.read(weights_path).items()}
        self.start = {name: (k.copy(), b.copy()) for name, (k, b) in self.w.items()}  # for stage

    def gradients(self, x, labels):
        w = {name: tuple(layer) for name, layer in self.w.items()}
        x1 = np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)))                # (N, 32, 32, 1)
        z1, rows1 = conv(x1, *w["conv1"])                                # (N, 28, 28, 6)
        p1, won1 = pool(np.maximum(z1, 0))                               # (N, 14, 14, 6)
        z2, rows2 = conv(p1, *w["conv2"])                                # (N, 10, 10, 16)
        p2, won2 = pool(np.maximum(z2, 0))                               # (N, 5, 5, 16)
        f = flatten(p2)                                                  # (N, 400)
        h1 = np.maximum(f @ w["fc1"][0] + w["fc1"][1], 0)                # (N, 120)
        h2 = np.maximum(h1 @ w["fc2"][0] + w["fc2"][1], 0)               # (N, 84)
        z = h2 @ w["fc3"][0] + w["fc3"][1]                               # (N, 10)
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        n = len(labels)
        loss = -logp[np.arange(n), labels].mean()
        d = np.exp(logp)
        d[np.arange(n), labels] -= 1
        d /= n                                                           # d loss / d logits
        g = {"fc3": (h2.T @ d, d.sum(0))}
        d = (d @ w["fc3"][0].T) * (h2 > 0)
        g["fc2"] = (h1.T @ d, d.sum(0))
        d = (d @ w["fc2"][0].T) * (h1 > 0)
        g["fc1"] = (f.T @ d, d.sum(0))
        d = unpool(unflatten(d @ w["fc1"][0].T, p2.shape), won2) * (z2 > 0)
        dk, db, d = conv_grads(d, w["conv2"][0], rows2, p1.shape, 0)
        g["conv2"] = (dk, db)
        d = unpool(d, won1) * (z1 > 0)
        dk, db, _ = conv_grads(d, w["conv1"][0], rows1, x1.shape, 2)
        g["conv1"] = (dk, db)
        return float(loss), g

    def train_step(self, images, labels):
        loss, g = self.gradients(np.asarray(images, self.dtype), np.asarray(labels, np.int64))
        lr = np.asarray(self.learning_rate, self.dtype)
        for name, layer in self.w.items():
            layer[0] = layer[0] - lr * g[name][0]
            layer[1] = layer[1] - lr * g[name][1]
        return loss

    def backward(self, name, x, upstream, kernel, bias):
        """One layer's backward on its own, for partial credit: (dx, dkernel, dbias)."""
        if name in ("conv1", "conv2"):
            pad = 2 if name == "conv1" else 0
            xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
            z, rows = conv(xp, kernel, bias)
            _, won = pool(np.maximum(z, 0))
            dk, db, dx = conv_grads(unpool(upstream, won) * (z > 0), kernel, rows, xp.shape, pad)
            return dx, dk, db
        f = flatten(x) if x.ndim == 4 else x
        z = f @ kernel + bias
        if name == "fc3":  # upstream is the labels: the loss is softmax cross-entropy, batch mean
            d = np.exp(z - z.max(1, keepdims=True))
            d /= d.sum(1, keepdims=True)
            d[np.arange(len(d)), upstream] -= 1
            d /= len(d)
        else:
            d = upstream * (z > 0)
        return unflatten(d @ kernel.T, x.shape), f.T @ d, d.sum(0)

    def stage(self, name, x):
        """One layer's forward on its own, at the initial weights (names where a wrong loss departs)."""
        if name in ("pool1", "pool2"):
            return pool(x)[0]
        if name == "softmax":
            e = np.exp(x - x.max(1, keepdims=True))
            return e / e.sum(1, keepdims=True)
        kernel, bias = self.start[name]
        if name in ("conv1", "conv2"):
            pad = 2 if name == "conv1" else 0
            return np.maximum(conv(np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))), kernel, bias)[0], 0)
        z = (flatten(x) if x.ndim == 4 else x) @ kernel + bias
        return z if name == "fc3" else np.maximum(z, 0)

    def weights(self):
        return {name: weights.Layer(k.copy(), b.copy()) for name, (k, b) in self.w.items()}
