"""LeNet-5 training step in NumPy, backpropagation by hand: the oracle every level's step is checked
against (harness verify-train).

Forward as in model.py (NHWC, im2col convolutions), keeping what the backward pass needs; loss =
softmax cross-entropy averaged over the batch; plain SGD `w -= lr * grad`.

Max-pool ties: the gradient goes to the FIRST maximum of the 2x2 window in row-major order
(top-left, top-right, bottom-left, bottom-right), once. Other levels may route a tie elsewhere
(or split it); after ReLU nearly every tie is 0 == 0, where ReLU' = 0 sends nothing back either
way, so the routing only matters for exact ties between positive floats (rare, and then the
levels' weights differ by one such gradient entry).
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from harness.base import LEARNING_RATE, Trainer
from harness.data import weights
from harness.registry import REGISTRY


def conv_forward(x, kernel, bias, pad):
    """x (N, H, W, C), kernel (R, S, C, K) HWIO -> pre-activation (N, H', W', K) and the cache."""
    r, s, c, k = kernel.shape
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    windows = sliding_window_view(x, (r, s), axis=(1, 2))                # (N, H', W', C, R, S)
    n, h, w = windows.shape[:3]
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, r * s * c)  # rows in RSC order
    out = cols @ kernel.reshape(r * s * c, k) + bias                     # (N*H'*W', K)
    return out.reshape(n, h, w, k), (cols, x.shape, pad)


def conv_backward(dout, kernel, cache, need_dx=True):
    """dout (N, H', W', K) -> dx (N, H, W, C) or None, dkernel (R, S, C, K), dbias (K,)."""
    cols, padded_shape, pad = cache
    r, s, c, k = kernel.shape
    n, h, w, _ = dout.shape
    dflat = dout.reshape(n * h * w, k)                                   # (N*H'*W', K)
    dkernel = (cols.T @ dflat).reshape(r, s, c, k)                       # (R*S*C, K) -> HWIO
    dbias = dflat.sum(axis=0)                                            # (K,)
    if not need_dx:
        return None, dkernel, dbias
    dcols = (dflat @ kernel.reshape(r * s * c, k).T).reshape(n, h, w, r, s, c)
    dx = np.zeros(padded_shape, dout.dtype)                              # (N, H+2p, W+2p, C)
    for i in range(r):  # col2im: every window position adds its share back
        for j in range(s):
            dx[:, i:i + h, j:j + w, :] += dcols[:, :, :, i, j, :]
    return (dx[:, pad:-pad, pad:-pad, :] if pad else dx), dkernel, dbias


QUARTERS = ((0, 0), (0, 1), (1, 0), (1, 1))  # the 2x2 window in row-major order


def pool_forward(x):
    """(N, H, W, C) -> (N, H/2, W/2, C) and a one-hot mask (4, N, H/2, W/2, C) of the first max."""
    quarters = np.stack([x[:, i::2, j::2] for i, j in QUARTERS])         # (4, N, H/2, W/2, C)
    out = quarters.max(axis=0)
    first = np.argmax(quarters == out, axis=0)                           # the first max wins ties
    return out, np.arange(4).reshape(4, 1, 1, 1, 1) == first


def pool_backward(dout, mask):
    """dout (N, H/2, W/2, C) -> dx (N, H, W, C): each window's gradient to its first max."""
    n, h, w, c = dout.shape
    dx = np.zeros((n, 2 * h, 2 * w, c), dout.dtype)
    for q, (i, j) in enumerate(QUARTERS):
        dx[:, i::2, j::2] = np.where(mask[q], dout, 0)
    return dx


def softmax_cross_entropy(logits, labels):
    """logits (N, 10), labels (N,) int -> the mean loss and d loss / d logits (N, 10)."""
    z = logits - logits.max(axis=1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))         # (N, 10)
    n = len(labels)
    loss = -log_probs[np.arange(n), labels].mean()
    dlogits = np.exp(log_probs)
    dlogits[np.arange(n), labels] -= 1
    return loss, dlogits / n


def loss_and_grads(w, x, labels):
    """w {"conv1": Layer, ...}, x (N, 28, 28, 1), labels (N,) -> loss, {"conv1": Layer(dk, db), ...}."""
    z1, c1 = conv_forward(x, *w["conv1"], pad=2)                         # (N, 28, 28, 6)
    a1 = np.maximum(z1, 0)
    p1, m1 = pool_forward(a1)                                            # (N, 14, 14, 6)
    z2, c2 = conv_forward(p1, *w["conv2"], pad=0)                        # (N, 10, 10, 16)
    a2 = np.maximum(z2, 0)
    p2, m2 = pool_forward(a2)                                            # (N, 5, 5, 16)
    f = p2.reshape(len(x), -1)                                           # (N, 400), NHWC order
    h1 = np.maximum(f @ w["fc1"].kernel + w["fc1"].bias, 0)              # (N, 120)
    h2 = np.maximum(h1 @ w["fc2"].kernel + w["fc2"].bias, 0)             # (N, 84)
    logits = h2 @ w["fc3"].kernel + w["fc3"].bias                        # (N, 10)
    loss, d = softmax_cross_entropy(logits, labels)

    grads = {"fc3": weights.Layer(h2.T @ d, d.sum(0))}                   # (84, 10), (10,)
    d = (d @ w["fc3"].kernel.T) * (h2 > 0)                               # (N, 84)
    grads["fc2"] = weights.Layer(h1.T @ d, d.sum(0))                     # (120, 84), (84,)
    d = (d @ w["fc2"].kernel.T) * (h1 > 0)                               # (N, 120)
    grads["fc1"] = weights.Layer(f.T @ d, d.sum(0))                      # (400, 120), (120,)
    d = (d @ w["fc1"].kernel.T).reshape(p2.shape)                        # (N, 5, 5, 16)
    d = pool_backward(d, m2) * (z2 > 0)                                  # (N, 10, 10, 16)
    d, dk, db = conv_backward(d, w["conv2"].kernel, c2)                  # d (N, 14, 14, 6)
    grads["conv2"] = weights.Layer(dk, db)
    d = pool_backward(d, m1) * (z1 > 0)                                  # (N, 28, 28, 6)
    _, dk, db = conv_backward(d, w["conv1"].kernel, c1, need_dx=False)
    grads["conv1"] = weights.Layer(dk, db)
    return float(loss), {name: grads[name] for name in weights.SHAPES}


class NumpyTrainer(Trainer):
    spec = REGISTRY["numpy"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        self.w = {name: weights.Layer(layer.kernel.astype(dtype), layer.bias.astype(dtype))
                  for name, layer in weights.read(weights_path).items()}

    def gradients(self, images, labels):
        """The loss and the gradients of the current weights (a test's trainer may alter them)."""
        x = np.asarray(images, dtype=self.dtype)
        return loss_and_grads(self.w, x, np.asarray(labels, dtype=np.int64))

    def train_step(self, images, labels):
        loss, grads = self.gradients(images, labels)
        lr = np.asarray(self.learning_rate, self.dtype)
        self.w = {name: weights.Layer(layer.kernel - lr * grads[name].kernel,
                                      layer.bias - lr * grads[name].bias)
                  for name, layer in self.w.items()}
        return loss

    def weights(self):
        return {name: weights.Layer(layer.kernel.copy(), layer.bias.copy())
                for name, layer in self.w.items()}
