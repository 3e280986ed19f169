"""LeNet-5 as hand-written loops compiled for this CPU by Numba (kernels.py): the CPU's twin of
the hand-written CUDA level. Numba (LLVM, a pip dependency) rather than C through the system
compiler: `make install` brings it whole, where a fresh machine may have no compiler.

Variants:
- fused: the whole network in one compiled call, one image at a time through buffers made
  once and kept across calls.
- layers: one compiled call per layer (8 per predict) over the batch, buffers made once per
  batch size.
float32 and float64 (the loops are compiled for the arrays' dtype). Compilation happens on the
first call (Numba compiles lazily, for the types it is called with): the cold start.
"""

import numpy as np

from harness.base import LeNet, check_images
from harness.data import weights
from harness.registry import REGISTRY
from lenet_numba import kernels

# One image's activations: (name, shape); the convolutions' are planar, rows kept wide (kernels.py).
BUFFERS = (("padded", (36 * 32,)), ("conv1", (6, 28 * 32)), ("pool1 row", (32,)), ("pool1", (6, 208)),
           ("conv2", (16, 144)), ("pool2", (400,)), ("fc1", (128,)), ("fc2", (96,)), ("fc3", (16,)))
SCRATCH = ("padded", "pool1 row")  # reused image by image in `layers` too: never batch-sized


def cpu_target() -> dict:
    """The CPU Numba compiles for, and the vector features of it the loops use (doctor)."""
    import numba
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    wanted = ("avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq", "amx-tile")
    return {"numba": numba.__version__, "cpu": binding.get_host_cpu_name(),
            "features": [f for f in wanted if features.get(f)]}


class NumbaLeNet(LeNet):
    spec = REGISTRY["numba"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        w = weights.read(weights_path)

        def padded(array, rows, cols=None):  # zeros around a dense kernel (in, out) or bias (out,)
            shape = (rows,) if cols is None else (rows, cols)
            out = np.zeros(shape, dtype)
            out[tuple(slice(0, n) for n in array.shape)] = array
            return out

        self.w = (  # conv1 (5, 5, 1, 6) HWIO -> (6, 5, 5) [k, r, s]; conv2 HWIO as it is
            np.ascontiguousarray(w["conv1"].kernel[:, :, 0, :].transpose(2, 0, 1), dtype),
            np.ascontiguousarray(w["conv1"].bias, dtype),
            np.ascontiguousarray(w["conv2"].kernel, dtype), np.ascontiguousarray(w["conv2"].bias, dtype),
            padded(w["fc1"].kernel, 400, 128), padded(w["fc1"].bias, 128),  # (400, 120) -> (400, 128)
            padded(w["fc2"].kernel, 128, 96), padded(w["fc2"].bias, 96),    # (120, 84) -> (128, 96)
            padded(w["fc3"].kernel, 96, 16), padded(w["fc3"].bias, 16))     # (84, 10) -> (96, 16)
        self.plans = {}  # batch size -> (buffers, out); fused: one image's buffers for every n

    def buffers(self, n):
        """fused: one image's buffers (n None); layers: each with a leading batch axis n, but the
        SCRATCH rows the layers' image loops reuse."""
        return tuple(np.zeros(shape if n is None or name in SCRATCH else (n, *shape), self.dtype)
                     for name, shape in BUFFERS)

    def predict(self, images):
        x = np.ascontiguousarray(check_images(images), self.dtype)  # (N, 28, 28, 1)
        n = len(x)
        if n not in self.plans:
            self.plans[n] = (self.buffers(None if self.variant == "fused" else n),
                             np.zeros((n, 10), self.dtype))
        buf, out = self.plans[n]
        if self.variant == "fused":
            kernels.forward(x, self.w, buf, out)
            return out.copy()
        w1, b1, w2, b2, f1, g1, f2, g2, f3, g3 = self.w
        padded, c1, row, p1, c2, p2, h1, h2, z = buf
        kernels.conv1_layer(x, padded, w1, b1, c1)     # (N, 6, 28 * 32)
        kernels.pool1_layer(c1, p1, row)                # (N, 6, 208)
        kernels.conv2_layer(p1, w2, b2, c2)             # (N, 16, 144)
        kernels.pool2_layer(c2, p2)                     # (N, 400)
        kernels.dense_layer(p2, f1, g1, h1, True)       # (N, 128): 120 and zeros
        kernels.dense_layer(h1, f2, g2, h2, True)       # (N, 96): 84 and zeros
        kernels.dense_layer(h2, f3, g3, z, False)       # (N, 16): 10 logits and zeros
        kernels.softmax_layer(z, out)                   # (N, 10)
        return out.copy()
