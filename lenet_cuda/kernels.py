"""The kernels' host-side contract, in plain Python (no CuPy): which .cu file, which template
instances, each kernel's parameters, every launch's grid and block and every buffer's shape.
model.py launches exactly these; the tests check them against the oracle's shapes without a GPU.

    layers: x (N,28,28,1) -conv_bias_relu-> c1 (N,28,28,6) -max_pool_2x2-> p1 (N,14,14,6)
            -conv_bias_relu-> c2 (N,10,10,16) -max_pool_2x2-> p2 (N,5,5,16) = (N,400) NHWC order
            -dense_bias_act-> fc1 (N,120) -> fc2 (N,84) -> fc3 (N,10) -softmax_rows-> out (N,10)
    fused:  x (N,28,28,1) -lenet_fused, N blocks of FUSED_THREADS-> out (N,10)
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCES = {"layers": "layers.cu", "fused": "fused.cu", "graph": "fused.cu"}  # variant -> kernel file
OPTIONS = ("--std=c++17",)  # CuPy adds the architecture of the GPU it runs on
CTYPES = {"float32": "float", "float64": "double"}
LAYER_THREADS = 256  # threads per block of the layer kernels (one thread per output element)
FUSED_THREADS = 512  # must equal LENET_THREADS in fused.cu (the tests read it from there)
STATIC_SHARED_LIMIT = 48 * 1024  # bytes of static __shared__ per block, every architecture

# Each kernel's parameters, in the .cu's order: "T*" a device array of the element type, "int"
# a 32-bit int (passed as numpy.int32, so its size is never CuPy's guess from a Python int).
PARAMS = {
    "conv_bias_relu": ("T*",) * 4 + ("int",) * 10,  # x, w, b, y, n h w c k r s pad ho wo
    "max_pool_2x2": ("T*",) * 2 + ("int",) * 4,  # x, y, n h w c
    "dense_bias_act": ("T*",) * 4 + ("int",) * 4,  # x, w, b, y, n fan_in fan_out relu
    "softmax_rows": ("T*",) * 2 + ("int",) * 2,  # x, y, n classes
    "lenet_fused": ("T*",) * 12 + ("int",),  # x, 5 x (kernel, bias), probs, n
}
KERNELS = {"layers": ("conv_bias_relu", "max_pool_2x2", "dense_bias_act", "softmax_rows"),
           "fused": ("lenet_fused",), "graph": ("lenet_fused",)}

# Buffers on the device, per image (the batch is the leading axis), NHWC.
LAYER_BUFFERS = {"x": (28, 28, 1), "c1": (28, 28, 6), "p1": (14, 14, 6), "c2": (10, 10, 16),
                 "p2": (5, 5, 16), "fc1": (120,), "fc2": (84,), "fc3": (10,), "out": (10,)}
FUSED_BUFFERS = {"x": (28, 28, 1), "out": (10,)}
# The fused kernel's static shared arrays (elements), as declared in fused.cu
FUSED_SHARED = {"img": 784, "s_conv1_w": 150, "s_conv1_b": 6, "s_conv2_w": 2400, "s_conv2_b": 16,
                "p1": 1176, "p2": 400, "h1": 120, "h2": 84, "logits": 10, "partial": FUSED_THREADS}
WEIGHTS = ("conv1", "conv2", "fc1", "fc2", "fc3")


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: int  # blocks (1-D)
    block: int  # threads per block (1-D)
    args: tuple  # buffer names ("x", "conv1.kernel", ...) and ints, in PARAMS order
    threads: int  # threads with work: grid * block covers them (one per output; softmax: per row)


def source(variant: str) -> str:
    return (HERE / SOURCES[variant]).read_text()


def name_expressions(variant: str, dtype: str) -> list[str]:
    """The template instances CuPy compiles and looks up: ["lenet_fused<float>"]."""
    if dtype not in CTYPES:
        raise ValueError(f"dtype: expected one of {list(CTYPES)}, found {dtype!r}")
    return [f"{kernel}<{CTYPES[dtype]}>" for kernel in KERNELS[variant]]


def nvrtc_units() -> list[tuple[str, str, tuple[str, ...], list[str]]]:
    """What doctor compiles (the registry's "kernels" hook): per kernel file, its source, name,
    options and the template instances of every dtype."""
    return [(source(v), SOURCES[v], OPTIONS, [e for dtype in CTYPES for e in name_expressions(v, dtype)])
            for v in ("layers", "fused")]


def blocks(count: int, threads: int) -> int:
    return (count + threads - 1) // threads


def buffer_shapes(variant: str, n: int) -> dict[str, tuple]:
    if n < 1:
        raise ValueError(f"batch size: expected >= 1, found {n}")
    per_image = FUSED_BUFFERS if variant in ("fused", "graph") else LAYER_BUFFERS
    return {name: (n, *shape) for name, shape in per_image.items()}


def layer_launches(n: int) -> list[Launch]:
    """The eight launches of the layers variant for a batch of n, in order."""
    t = LAYER_THREADS

    def conv(x, name, y, h, c, k, pad):  # 5x5 kernel, stride 1
        ho = h + 2 * pad - 4
        count = n * ho * ho * k
        return Launch("conv_bias_relu", blocks(count, t), t,
                      (x, f"{name}.kernel", f"{name}.bias", y, n, h, h, c, k, 5, 5, pad, ho, ho), count)

    def pool(x, y, h, c):
        count = n * (h // 2) * (h // 2) * c
        return Launch("max_pool_2x2", blocks(count, t), t, (x, y, n, h, h, c), count)

    def dense(x, name, fan_in, fan_out, relu):
        count = n * fan_out
        return Launch("dense_bias_act", blocks(count, t), t,
                      (x, f"{name}.kernel", f"{name}.bias", name, n, fan_in, fan_out, int(relu)), count)

    return [conv("x", "conv1", "c1", 28, 1, 6, 2),  # "same": (N, 28, 28, 6)
            pool("c1", "p1", 28, 6),  # (N, 14, 14, 6)
            conv("p1", "conv2", "c2", 14, 6, 16, 0),  # "valid": (N, 10, 10, 16)
            pool("c2", "p2", 10, 16),  # (N, 5, 5, 16) = (N, 400)
            dense("p2", "fc1", 400, 120, True),
            dense("fc1", "fc2", 120, 84, True),
            dense("fc2", "fc3", 84, 10, False),
            Launch("softmax_rows", blocks(n, t), t, ("fc3", "out", n, 10), n)]


def fused_launches(n: int) -> list[Launch]:
    """One block per image; its threads share the image's work (fused.cu)."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    return [Launch("lenet_fused", n, FUSED_THREADS, ("x", *weights, "out", n), n * FUSED_THREADS)]


def launches(variant: str, n: int) -> list[Launch]:
    if n < 1:
        raise ValueError(f"batch size: expected >= 1, found {n}")
    return fused_launches(n) if variant in ("fused", "graph") else layer_launches(n)


def fused_shared_bytes(dtype: str) -> int:
    """Static shared memory of one lenet_fused block (ptxas reports the same number)."""
    return sum(FUSED_SHARED.values()) * np.dtype(dtype).itemsize
