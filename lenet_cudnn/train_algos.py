"""The convolution algorithms of a training step: forward, backward data and backward filter,
asked of cuDNN's heuristics (the _v7 getters: no timing runs, no memory of their own; the choice
is fixed once per batch size). Needs a cuDNN handle (a GPU); the choosing is plain Python, tested
with a fake library.

A usable algorithm: status success; in float32 not a tensor-op (TF32) math type, so float32
stays float32 like the oracle; deterministic first (backward filter and data ALGO_0 / ALGO_3 add
with atomics: results vary run to run), cuDNN's order (its best guess first) within that.
"""

import ctypes

from lenet_cudnn import binding as cu

TENSOR_OP_MATH = (1, 2)  # CUDNN_TENSOR_OP_MATH, _ALLOW_CONVERSION: TF32 in float32

KINDS = {  # kind -> (algorithm query, workspace query, algorithm count)
    "fwd": ("cudnnGetConvolutionForwardAlgorithm_v7", "cudnnGetConvolutionForwardWorkspaceSize",
            cu.CONV_FWD_ALGOS),
    "bwd_data": ("cudnnGetConvolutionBackwardDataAlgorithm_v7",
                 "cudnnGetConvolutionBackwardDataWorkspaceSize", cu.CONV_BWD_DATA_ALGOS),
    "bwd_filter": ("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                   "cudnnGetConvolutionBackwardFilterWorkspaceSize", cu.CONV_BWD_FILTER_ALGOS),
}


def choose(perfs, dtype: str):
    """The perf entry to use from cuDNN's list (its order: best guess first), or None."""
    usable = [p for p in perfs if p.status == cu.STATUS_SUCCESS and not
              (dtype == "float32" and p.mathType in TENSOR_OP_MATH)]
    deterministic = [p for p in usable if p.determinism == cu.DETERMINISTIC]
    return (deterministic or usable or [None])[0]


def pick(lib, handle, kind: str, descs, dtype: str) -> tuple[int, int, int]:
    """(algorithm, workspace bytes, math type) for one convolution. `descs` in the query's order:
    fwd (x, w, conv, y); bwd_data (w, dy, conv, dx); bwd_filter (x, dy, conv, dw)."""
    query, workspace_query, count = KINDS[kind]
    perf = (cu.ConvFwdAlgoPerf * count)()
    returned = ctypes.c_int()
    ptrs = [d.ptr for d in descs]
    getattr(lib, query)(handle, *ptrs, count, ctypes.byref(returned), perf)
    best = choose(perf[:returned.value], dtype)
    if best is None:
        raise RuntimeError(f"cuDNN offers no usable {kind} convolution algorithm for "
                           f"{[getattr(d, 'dims', None) for d in descs]} without tensor-op math")
    size = ctypes.c_size_t()
    getattr(lib, workspace_query)(handle, *ptrs, best.algo, ctypes.byref(size))
    return best.algo, size.value, best.mathType


def training_algos(lib, handle, d, dtype: str) -> dict[str, tuple[int, int, int]]:
    """Every convolution of the step, on LeNetDescriptors d: {"conv1.fwd": (algo, bytes, math), ...}.
    conv1 has no backward data (the images need no gradient)."""
    return {
        "conv1.fwd": pick(lib, handle, "fwd", (d.x, d.w1, d.conv1, d.c1), dtype),
        "conv2.fwd": pick(lib, handle, "fwd", (d.p1, d.w2, d.conv2, d.c2), dtype),
        "conv1.bwd_filter": pick(lib, handle, "bwd_filter", (d.x, d.c1, d.conv1, d.w1), dtype),
        "conv2.bwd_filter": pick(lib, handle, "bwd_filter", (d.p1, d.c2, d.conv2, d.w2), dtype),
        "conv2.bwd_data": pick(lib, handle, "bwd_data", (d.w2, d.c2, d.conv2, d.p1), dtype),
    }
