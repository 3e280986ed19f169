"""LeNet-5 as hand-written C (lenet.c), compiled at run time for this CPU by the system's compiler
(build.py) and called through ctypes at the cost of a raw call: the CPU's twin of the hand-written
CUDA level, and the rung below the Numba loops.

Variants (lenet.c says how each is written):
- fused: the whole network in one C call per batch, one image at a time, no batch buffers.
- layers: one C call per layer (8 per predict) over the batch, buffers made once per batch size.
float32. The arguments are raw addresses (c_void_p): ctypes' ndpointer checks cost microseconds a
call, more than the fused forward pass of one image.
"""

import ctypes

import numpy as np

from harness.base import LeNet, check_images
from harness.data import weights
from harness.registry import REGISTRY
from lenet_c import build

ADDRESS, INT = ctypes.c_void_p, ctypes.c_int
SIGNATURES = {  # C function -> its argument types (lenet.c)
    "lenet_fused": [ADDRESS, INT] + [ADDRESS] * 11,
    "conv1_layer": [ADDRESS, INT, ADDRESS, ADDRESS, ADDRESS],
    "pool_layer": [ADDRESS, INT, INT, INT, INT, ADDRESS],
    "conv2_layer": [ADDRESS, INT, ADDRESS, ADDRESS, ADDRESS],
    "dense_layer": [ADDRESS, INT, INT, ADDRESS, ADDRESS, ADDRESS, INT, INT],
    "softmax_layer": [ADDRESS, INT, ADDRESS]}


def load() -> ctypes.CDLL:
    """The compiled library, its functions typed."""
    lib = ctypes.CDLL(str(build.library()))
    for name, args in SIGNATURES.items():
        getattr(lib, name).argtypes, getattr(lib, name).restype = args, None
    lib.lenet_path.restype = ctypes.c_char_p
    return lib


def cpu_path() -> dict:
    """Which vector path the compiler took here (doctor, the rows)."""
    return {"path": load().lenet_path().decode(), "compiler": build.compiler(), "flags": list(build.FLAGS)}


def pad(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros around an array (extra filters and outputs that change nothing), contiguous float32."""
    out = np.zeros(shape, np.float32)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


class CLeNet(LeNet):
    spec = REGISTRY["c"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.lib = load()
        self.path = self.lib.lenet_path().decode()
        w = weights.read(weights_path)
        self.w = (pad(w["conv1"].kernel.reshape(25, 6), (25, 8)),  # HWIO (5, 5, 1, 6) -> (25 taps, 8)
                  pad(w["conv1"].bias, (8,)),
                  pad(w["conv2"].kernel, (5, 5, 6, 16)), pad(w["conv2"].bias, (16,)),  # HWIO as it is
                  pad(w["fc1"].kernel, (400, 128)), pad(w["fc1"].bias, (128,)),        # (400, 120)
                  pad(w["fc2"].kernel, (128, 96)), pad(w["fc2"].bias, (96,)),          # (120, 84)
                  pad(w["fc3"].kernel, (96, 16)), pad(w["fc3"].bias, (16,)))           # (84, 10)
        self.addresses = [a.ctypes.data for a in self.w]
        # batch size -> (its buffers, the output last; their addresses)
        self.plans: dict[int, tuple[tuple[np.ndarray, ...], list[int]]] = {}

    def buffers(self, n: int) -> tuple[np.ndarray, ...]:
        if self.variant == "fused":
            return (np.zeros((n, 10), np.float32),)
        shapes = ((n, 28, 28, 8), (n, 14, 14, 8), (n, 10, 10, 16), (n, 400), (n, 128), (n, 96), (n, 16),
                  (n, 10))  # conv1, pool1, conv2, pool2 (flattened NHWC), fc1, fc2, fc3, softmax
        return tuple(np.zeros(s, np.float32) for s in shapes)

    def predict(self, images):
        x = np.ascontiguousarray(check_images(images), np.float32)  # (N, 28, 28, 1)
        n = len(x)
        if n not in self.plans:
            made = self.buffers(n)
            self.plans[n] = (made, [b.ctypes.data for b in made])
        buf, a = self.plans[n]
        lib, (w1, b1, w2, b2, f1, g1, f2, g2, f3, g3) = self.lib, self.addresses
        if self.variant == "fused":
            lib.lenet_fused(x.ctypes.data, n, w1, b1, w2, b2, f1, g1, f2, g2, f3, g3, a[0])
        else:
            lib.conv1_layer(x.ctypes.data, n, w1, b1, a[0])  # (N, 28, 28, 8), ReLU
            lib.pool_layer(a[0], n, 28, 28, 8, a[1])         # (N, 14, 14, 8)
            lib.conv2_layer(a[1], n, w2, b2, a[2])           # (N, 10, 10, 16), ReLU
            lib.pool_layer(a[2], n, 10, 10, 16, a[3])        # (N, 5, 5, 16) = (N, 400)
            lib.dense_layer(a[3], n, 400, f1, g1, a[4], 128, 1)  # (N, 128): 120 and zeros
            lib.dense_layer(a[4], n, 128, f2, g2, a[5], 96, 1)   # (N, 96): 84 and zeros
            lib.dense_layer(a[5], n, 96, f3, g3, a[6], 16, 0)    # (N, 16): 10 logits and zeros
            lib.softmax_layer(a[6], n, a[7])                     # (N, 10)
        return buf[-1].copy()
