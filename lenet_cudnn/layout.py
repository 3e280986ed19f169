"""Weight layouts for cuDNN and cuBLAS: every transpose listed, every shape checked.

The shared file is in Keras layouts: conv kernels HWIO (R, S, C, K), dense kernels (in, out),
and fc1's 400 input rows in NHWC flatten order of pool2's (5, 5, 16) output. cuDNN works in
NCHW with KCRS filters, so pool2's output flattens in (16, 5, 5) order and fc1's rows must be
reordered to match.
"""

import numpy as np

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1


def conv_kernel_kcrs(hwio: np.ndarray) -> np.ndarray:
    """(R, S, C, K) -> (K, C, R, S), contiguous."""
    if hwio.ndim != 4:
        raise ValueError(f"expected an HWIO kernel (R, S, C, K), found shape {hwio.shape}")
    return np.ascontiguousarray(hwio.transpose(3, 2, 0, 1))


def fc1_rows_nchw(kernel: np.ndarray, h=5, w=5, c=16) -> np.ndarray:
    """(400, 120) with rows in (h, w, c) order -> rows in (c, h, w) order."""
    if kernel.shape[0] != h * w * c:
        raise ValueError(f"expected {h * w * c} fc1 rows, found shape {kernel.shape}")
    out = kernel.shape[1]
    return np.ascontiguousarray(kernel.reshape(h, w, c, out).transpose(2, 0, 1, 3).reshape(-1, out))


def conv_kernel_hwio(kcrs: np.ndarray) -> np.ndarray:
    """(K, C, R, S) -> (R, S, C, K), contiguous: the inverse of conv_kernel_kcrs."""
    if kcrs.ndim != 4:
        raise ValueError(f"expected a KCRS filter (K, C, R, S), found shape {kcrs.shape}")
    return np.ascontiguousarray(kcrs.transpose(2, 3, 1, 0))


def fc1_rows_nhwc(kernel: np.ndarray, h=5, w=5, c=16) -> np.ndarray:
    """(400, 120) with rows in (c, h, w) order -> rows in (h, w, c) order: the inverse of fc1_rows_nchw."""
    if kernel.shape[0] != h * w * c:
        raise ValueError(f"expected {h * w * c} fc1 rows, found shape {kernel.shape}")
    out = kernel.shape[1]
    return np.ascontiguousarray(kernel.reshape(c, h, w, out).transpose(1, 2, 0, 3).reshape(-1, out))


def to_keras(kernels: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{name: (kernel, bias)} in cuDNN/cuBLAS layouts (as convert gives) -> Keras layouts."""
    back = {"conv1": conv_kernel_hwio, "conv2": conv_kernel_hwio, "fc1": fc1_rows_nhwc,
            "fc2": np.ascontiguousarray, "fc3": np.ascontiguousarray}  # dense (in, out) as it is
    return {name: (back[name](kernel), np.ascontiguousarray(bias))
            for name, (kernel, bias) in kernels.items()}


def convert(layers: dict, dtype="float32") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The shared weights (harness.data.weights.read) in cuDNN/cuBLAS layouts, as `dtype`."""
    kernels = {
        "conv1": conv_kernel_kcrs(layers["conv1"].kernel),  # (6, 1, 5, 5)
        "conv2": conv_kernel_kcrs(layers["conv2"].kernel),  # (16, 6, 5, 5)
        "fc1": fc1_rows_nchw(layers["fc1"].kernel),  # (400, 120), rows in (c, h, w) order
        "fc2": layers["fc2"].kernel,  # (120, 84)
        "fc3": layers["fc3"].kernel,  # (84, 10)
    }
    return {name: (np.ascontiguousarray(kernel, dtype), layers[name].bias.astype(dtype))
            for name, kernel in kernels.items()}


def dense_gemm_args(batch: int, fan_in: int, fan_out: int) -> dict:
    """cuBLAS (column-major) arguments for Y = X W with row-major X (batch, in), W (in, out).

    A row-major (r, c) matrix is the column-major (c, r) matrix, its transpose. So we ask
    cuBLAS for Y^T = W^T X^T: C = A B with A = W (read as (out, in), lda = out),
    B = X (read as (in, batch), ldb = in), C = Y (written as (out, batch), ldc = out).
    No transposes, no copies.
    """
    return {"transa": CUBLAS_OP_N, "transb": CUBLAS_OP_N, "m": fan_out, "n": batch, "k": fan_in,
            "lda": fan_out, "ldb": fan_in, "ldc": fan_out}


def dense_backward_weights_gemm_args(batch: int, fan_in: int, fan_out: int) -> dict:
    """cuBLAS arguments for dW = X^T dY (row-major dW (in, out), X (batch, in), dY (batch, out)).

    Row-major dW (in, out) is the column-major (out, in) matrix dW^T = dY^T X. A = dY, stored
    row-major (batch, out) = column-major (out, batch): op N, lda = out. B = X, stored column-major
    (in, batch), wanted as (batch, in): op T, ldb = in. C = dW read as (out, in), ldc = out.
    """
    return {"transa": CUBLAS_OP_N, "transb": CUBLAS_OP_T, "m": fan_out, "n": fan_in, "k": batch,
            "lda": fan_out, "ldb": fan_in, "ldc": fan_out}


def dense_backward_data_gemm_args(batch: int, fan_in: int, fan_out: int) -> dict:
    """cuBLAS arguments for dX = dY W^T (row-major dX (batch, in), dY (batch, out), W (in, out)).

    Row-major dX is the column-major (in, batch) matrix dX^T = W dY^T. A = W, stored column-major
    (out, in), wanted as (in, out): op T, lda = out. B = dY, stored column-major (out, batch): op N,
    ldb = out. C = dX written as (in, batch), ldc = in.
    """
    return {"transa": CUBLAS_OP_T, "transb": CUBLAS_OP_N, "m": fan_in, "n": batch, "k": fan_out,
            "lda": fan_out, "ldb": fan_out, "ldc": fan_in}
