"""The shared Keras weights as oneDNN sees them: no transposes, only logical dims and a tag.

oneDNN's dims are logical, whatever the layout: weights are (O, I, H, W) or (O, I), and the
tag says how those dims lie in memory. So the Keras arrays are handed over as they are:
  conv kernel  HWIO (R, S, C, K)    = logical (K, C, R, S), tag hwio
  fc1 kernel   (400, 120), rows in (h, w, c) order of pool2's (5, 5, 16) output
               = (5, 5, 16, 120) HWIO = logical (120, 16, 5, 5), tag hwio: the inner product
               then reads pool2's 4-D output directly (whatever its layout), no flatten
  dense kernel (in, out)            = logical (out, in), tag io
  bias         (K,)                 = logical (K,), tag x
The primitives (tuned) pick their own weight layouts; a reorder copies these into them once.
"""

import numpy as np

from lenet_onednn import binding as dnnl

POOL2_HWC = (5, 5, 16)


def conv_kernel(hwio: np.ndarray):
    """(R, S, C, K) -> the same bytes, logical (K, C, R, S), tag hwio."""
    if hwio.ndim != 4:
        raise ValueError(f"expected an HWIO kernel (R, S, C, K), found shape {hwio.shape}")
    r, s, c, k = hwio.shape
    return hwio, (k, c, r, s), dnnl.TAG_HWIO


def fc1_kernel(kernel: np.ndarray, hwc=POOL2_HWC):
    """(400, 120), rows in NHWC flatten order -> (5, 5, 16, 120), logical (120, 16, 5, 5), tag hwio."""
    h, w, c = hwc
    if kernel.ndim != 2 or kernel.shape[0] != h * w * c:
        raise ValueError(f"expected ({h * w * c}, out) fc1 kernel, found shape {kernel.shape}")
    out = kernel.shape[1]
    return kernel.reshape(h, w, c, out), (out, c, h, w), dnnl.TAG_HWIO


def dense_kernel(kernel: np.ndarray):
    """(in, out) -> the same bytes, logical (out, in), tag io."""
    if kernel.ndim != 2:
        raise ValueError(f"expected a dense kernel (in, out), found shape {kernel.shape}")
    return kernel, kernel.shape[::-1], dnnl.TAG_IO


def bias(vector: np.ndarray):
    if vector.ndim != 1:
        raise ValueError(f"expected a bias vector, found shape {vector.shape}")
    return vector, vector.shape, dnnl.TAG_X


KERNELS = {"conv1": conv_kernel, "conv2": conv_kernel, "fc1": fc1_kernel,
           "fc2": dense_kernel, "fc3": dense_kernel}


def convert(layers: dict, dtype="float32") -> dict:
    """name -> ((kernel, logical dims, tag), (bias, dims, tag)), contiguous arrays of `dtype`."""
    out = {}
    for name, to_onednn in KERNELS.items():
        kernel, kdims, ktag = to_onednn(np.ascontiguousarray(layers[name].kernel, dtype))
        b, bdims, btag = bias(np.ascontiguousarray(layers[name].bias, dtype))
        if bdims[0] != kdims[0]:
            raise ValueError(f"{name}: {bdims[0]} biases for {kdims[0]} outputs")
        out[name] = ((kernel, kdims, ktag), (b, bdims, btag))
    return out
