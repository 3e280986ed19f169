"""LeNet-5 in C (layers.c, fused.c), compiled at run time by the system's C compiler for this CPU
and cached (build.py: the CPU's NVRTC): the CPU's twin of the CUDA level.

Variants:
- fused: the whole network in one C call, a loop over the batch inside: AVX-512 intrinsics where
  the CPU has them, else the same loops in GNU C's vector types (`path` says which: "avx512" or
  "portable").
- portable: fused with the intrinsics compiled out: the vector-typed loops at the target's width.
- layers: one C function per layer (8 calls a predict), each over the batch, Keras' layouts.
float32 and float64 (float64 runs the portable loops: the intrinsics are float32).

fused and portable are called through a small extension (call.c, built like the library: `call`
says "extension"): it reads images that are already C-contiguous in the dtype where they are and
returns the new array the pass wrote, ~0.1 µs; other images are checked, copied into the plan's
input and passed the same way. Without Python's headers, and for layers, the call is ctypes': a raw
call whose arguments are ctypes objects built once per batch size (a Plan: numpy.ctypeslib's
ndpointer checks cost ~4 µs a call), the images copied in and the probabilities copied out.
"""

import ctypes
from dataclasses import dataclass

import numpy as np

from harness.base import LeNet, check_images
from harness.data import weights
from harness.errors import Unavailable
from harness.registry import REGISTRY
from lenet_c import build, layout

# layers: each call's C function and arguments (layers.c's order; lenet_cuda/kernels.py's launches):
# names are buffers (the weights, or LAYER_BUFFERS with the batch axis), ints are ints; "n" the batch
LAYER_CALLS = (
    ("conv_bias_relu", ("x", "conv1.kernel", "conv1.bias", "c1", "n", 28, 28, 1, 6, 5, 5, 2, 28, 28)),
    ("max_pool_2x2", ("c1", "p1", "n", 28, 28, 6)),
    ("conv_bias_relu", ("p1", "conv2.kernel", "conv2.bias", "c2", "n", 14, 14, 6, 16, 5, 5, 0, 10, 10)),
    ("max_pool_2x2", ("c2", "p2", "n", 10, 10, 16)),
    ("dense_bias_act", ("p2", "fc1.kernel", "fc1.bias", "fc1", "n", 400, 120, 1)),
    ("dense_bias_act", ("fc1", "fc2.kernel", "fc2.bias", "fc2", "n", 120, 84, 1)),
    ("dense_bias_act", ("fc2", "fc3.kernel", "fc3.bias", "fc3", "n", 84, 10, 0)),
    ("softmax_rows", ("fc3", "out", "n", 10)),
)
# per image, NHWC; p2 (5, 5, 16) is fc1's (400,) input in Keras' flatten order
LAYER_BUFFERS = {"x": (28, 28, 1), "c1": (28, 28, 6), "p1": (14, 14, 6), "c2": (10, 10, 16),
                 "p2": (5, 5, 16), "fc1": (120,), "fc2": (84,), "fc3": (10,), "out": (10,)}


@dataclass
class Plan:
    """A batch size's buffers and prebuilt calls."""

    x: np.ndarray  # (N, 28, 28, 1) the images are copied into
    out: np.ndarray  # (N, 10) probabilities
    buffers: dict  # name -> array, kept alive while the calls point at them
    calls: tuple  # (C function, ctypes arguments)


def address(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


def argument(a, n: int, named: dict):
    """One LAYER_CALLS argument as a ctypes object: "n" the batch, an int, or a buffer's address."""
    return ctypes.c_int(n) if a == "n" else ctypes.c_int(a) if isinstance(a, int) else address(named[a])


class CLeNet(LeNet):
    spec = REGISTRY["c"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.flags = build.flags(self.variant, dtype)
        self.lib = build.load(build.SOURCES[self.variant], self.flags)  # compiles, or finds it cached
        self.lib.lenet_path.restype = ctypes.c_char_p
        self.path = self.lib.lenet_path().decode()  # "avx512" or "portable": which loops run
        w = weights.read(weights_path)
        if self.variant == "layers":  # Keras' layouts as they are, cast to the dtype
            self.w = {f"{name}.{part}": np.ascontiguousarray(array, dtype)
                      for name, layer in w.items() for part, array in (("kernel", layer.kernel),
                                                                       ("bias", layer.bias))}
        else:
            packed = layout.pack(w, dtype, self.lib.lenet_dense_block)  # its dense blocks' widths
            packed["scratch"] = layout.aligned((self.lib.lenet_scratch_size(),), dtype)
            self.lib.lenet_params.restype = ctypes.c_char_p
            order = self.lib.lenet_params().decode().split()
            if sorted(order) != sorted(packed):  # the C and this file disagree: a bug, not this machine
                raise RuntimeError(f"fused.c's buffers {order} are not model.py's {sorted(packed)}")
            # one block, the scratch first: the same distances between buffers in every process
            self.w = layout.arena(packed, ["scratch"] + [name for name in order if name != "scratch"])
            self.table = np.array([self.w[name].ctypes.data for name in order], np.uintp)
        self.fast, self.call = self.bind()
        self.plans: dict[int, Plan] = {}

    def bind(self):
        """(call.c's call bound to this library's lenet_fused and table, "extension"), or (None,
        "ctypes: <why>") for layers and where the extension cannot be built."""
        if self.variant == "layers":
            return None, "ctypes: one call per layer"
        try:
            module = build.extension("call.c")
        except Unavailable as exc:
            return None, f"ctypes: {exc}"
        fn = ctypes.cast(self.lib.lenet_fused, ctypes.c_void_p).value
        return module.bind(fn, self.table.ctypes.data, np.dtype(self.dtype).num), "extension"

    def info(self) -> dict:
        """What ran: the path, the compiler, its flags, and the library they built."""
        cc = build.compiler()
        return {"path": self.path, "compiler": " ".join(cc.command), "version": cc.version,
                "flags": " ".join(self.flags), "library": self.lib._name, "call": self.call}

    def function(self, name: str):
        fn = getattr(self.lib, name)
        fn.restype = None  # every entry point is void; no argtypes: the arguments are ctypes objects
        return fn

    def plan(self, n: int) -> Plan:
        """The buffers and calls of batch size n, made once."""
        if n not in self.plans:
            if self.variant == "layers":
                buffers = {name: np.zeros((n, *shape), self.dtype) for name, shape in LAYER_BUFFERS.items()}
                named = {**self.w, **buffers}
                calls = tuple((self.function(fn), tuple(argument(a, n, named) for a in args))
                              for fn, args in LAYER_CALLS)
            else:
                buffers = {"x": np.zeros((n, 28, 28, 1), self.dtype), "out": np.zeros((n, 10), self.dtype)}
                calls = ((self.function("lenet_fused"), (address(self.table), address(buffers["x"]),
                                                         address(buffers["out"]), ctypes.c_int(n))),)
            self.plans[n] = Plan(buffers["x"], buffers["out"], buffers, calls)
        return self.plans[n]

    def predict(self, images):
        if self.fast is not None:
            out = self.fast(images)  # None unless (N, 28, 28, 1) C-contiguous in the dtype
            if out is not None:
                return out  # (N, 10)
        images = check_images(images)
        p = self.plans.get(len(images)) or self.plan(len(images))
        p.x[...] = images  # (N, 28, 28, 1), cast to the dtype (half np.copyto's cost at batch 1)
        if self.fast is not None:
            return self.fast(p.x)
        for fn, args in p.calls:
            fn(*args)
        return p.out.copy()  # (N, 10)
