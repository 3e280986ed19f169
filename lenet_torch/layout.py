"""Weight layouts for PyTorch: every transpose listed, every shape checked.

The shared file is in Keras layouts: conv kernels HWIO (R, S, C, K), dense kernels (in, out),
and fc1's 400 input rows in NHWC flatten order of pool2's (5, 5, 16) output. PyTorch works in
NCHW with OIHW filters and keeps dense weights as (out, in), so pool2's output flattens in
(16, 5, 5) order and fc1's rows must be reordered to match.
"""

import numpy as np


def conv_kernel_oihw(hwio: np.ndarray) -> np.ndarray:
    """(R, S, C, K) -> (K, C, R, S), contiguous."""
    if hwio.ndim != 4:
        raise ValueError(f"expected an HWIO kernel (R, S, C, K), found shape {hwio.shape}")
    return np.ascontiguousarray(hwio.transpose(3, 2, 0, 1))


def dense_out_in(kernel: np.ndarray) -> np.ndarray:
    """(in, out) -> (out, in), as F.linear wants it."""
    if kernel.ndim != 2:
        raise ValueError(f"expected a dense kernel (in, out), found shape {kernel.shape}")
    return np.ascontiguousarray(kernel.T)


def fc1_columns_chw(kernel: np.ndarray, h=5, w=5, c=16) -> np.ndarray:
    """(400, 120), rows in (h, w, c) order -> (120, 400), columns in (c, h, w) order."""
    if kernel.shape[0] != h * w * c:
        raise ValueError(f"expected {h * w * c} fc1 rows, found shape {kernel.shape}")
    chw_rows = kernel.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(h * w * c, -1)
    return dense_out_in(chw_rows)


def convert(layers: dict, dtype="float32") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The shared weights (harness.data.weights.read) in PyTorch layouts, as `dtype`."""
    kernels = {
        "conv1": conv_kernel_oihw(layers["conv1"].kernel),  # (6, 1, 5, 5)
        "conv2": conv_kernel_oihw(layers["conv2"].kernel),  # (16, 6, 5, 5)
        "fc1": fc1_columns_chw(layers["fc1"].kernel),       # (120, 400), columns in (c, h, w) order
        "fc2": dense_out_in(layers["fc2"].kernel),          # (84, 120)
        "fc3": dense_out_in(layers["fc3"].kernel),          # (10, 84)
    }
    return {name: (kernel.astype(dtype), layers[name].bias.astype(dtype))
            for name, kernel in kernels.items()}



def to_keras(torch_layers: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The inverse of convert: {name: (kernel, bias)} in PyTorch layouts -> Keras layouts."""
    k = {name: kernel for name, (kernel, _) in torch_layers.items()}
    fc1_chw_rows = k["fc1"].T                                        # (400, 120), rows (c, h, w)
    kernels = {
        "conv1": k["conv1"].transpose(2, 3, 1, 0),                   # (6, 1, 5, 5) -> (5, 5, 1, 6)
        "conv2": k["conv2"].transpose(2, 3, 1, 0),                   # (16, 6, 5, 5) -> (5, 5, 6, 16)
        "fc1": fc1_chw_rows.reshape(16, 5, 5, -1).transpose(1, 2, 0, 3).reshape(400, -1),
        "fc2": k["fc2"].T,                                           # (84, 120) -> (120, 84)
        "fc3": k["fc3"].T,                                           # (10, 84) -> (84, 10)
    }
    return {name: (np.ascontiguousarray(kernel), torch_layers[name][1])
            for name, kernel in kernels.items()}
