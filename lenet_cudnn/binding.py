"""A thin ctypes binding over libcudnn: only the functions LeNet-5 uses.

Every function has argtypes and restype set (ctypes would otherwise pass and return C ints and
truncate 64-bit pointers), and every status is checked: a failure raises CudnnError carrying
cudnnGetErrorString. Enum values are those of cuDNN 9's headers (unchanged since cuDNN 7).

Library discovery, first found wins:
  1. $LENET_CUDNN_LIBRARY (a path to libcudnn.so.*)
  2. the nvidia-cudnn-cu12 / nvidia-cudnn-cu13 wheel in site-packages (nvidia/cudnn/lib/)
  3. the system's libcudnn.so.9, then libcudnn.so.8
"""

import ctypes
import importlib.util
import os
from pathlib import Path

from harness.errors import Unavailable
from harness.frameworks import native

# --- enums (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h) --------------------------------------
STATUS_SUCCESS = 0
DATA_FLOAT, DATA_DOUBLE = 0, 1
TENSOR_NCHW = 0
CROSS_CORRELATION = 1
ACTIVATION_RELU = 1
NOT_PROPAGATE_NAN = 0
POOLING_MAX = 0
SOFTMAX_ACCURATE = 1
SOFTMAX_MODE_CHANNEL = 1  # over C at each (h, w): with (N, 10, 1, 1) tensors, over the 10 classes
CONV_FWD_ALGOS = 8  # CUDNN_CONVOLUTION_FWD_ALGO_COUNT
CONV_BWD_DATA_ALGOS, CONV_BWD_FILTER_ALGOS = 6, 7  # CUDNN_CONVOLUTION_BWD_{DATA,FILTER}_ALGO_COUNT
DETERMINISTIC = 1  # cudnnDeterminism_t: CUDNN_NON_DETERMINISTIC 0 (atomic adds), CUDNN_DETERMINISTIC 1
FMA_MATH = 3  # no TF32 tensor cores: float32 stays float32 (1e-5 agreement with the reference)
DATA_TYPES = {"float32": DATA_FLOAT, "float64": DATA_DOUBLE}

Handle = ctypes.c_void_p
Desc = ctypes.c_void_p
Ptr = ctypes.c_void_p
IntP = ctypes.POINTER(ctypes.c_int)
c_int, c_size_t, c_double = ctypes.c_int, ctypes.c_size_t, ctypes.c_double


class ConvFwdAlgoPerf(ctypes.Structure):
    """cudnnConvolutionFwdAlgoPerf_t"""

    _fields_ = [("algo", c_int), ("status", c_int), ("time", ctypes.c_float),
                ("memory", c_size_t), ("determinism", c_int), ("mathType", c_int),
                ("reserved", c_int * 3)]


# cudnnConvolutionBwdDataAlgoPerf_t and cudnnConvolutionBwdFilterAlgoPerf_t: the same fields
ConvBwdDataAlgoPerf = ConvBwdFilterAlgoPerf = ConvFwdAlgoPerf
# cudnnConvolutionBackwardData / BackwardFilter: handle, alpha, a desc, a, dy desc, dy, conv desc,
# algo, workspace, workspace bytes, beta, out desc, out
CONV_BACKWARD = [Handle, Ptr, Desc, Ptr, Desc, Ptr, Desc, c_int, Ptr, c_size_t, Ptr, Desc, Ptr]
# cudnnPoolingBackward / cudnnActivationBackward: handle, desc, alpha, y desc, y, dy desc, dy,
# x desc, x, beta, dx desc, dx
Y_DY_X_BACKWARD = [Handle, Desc, Ptr, Desc, Ptr, Desc, Ptr, Desc, Ptr, Ptr, Desc, Ptr]
# the algorithm queries: handle, 4 descriptors, requested count, returned count, perf results
ALGO_QUERY = [Handle, Desc, Desc, Desc, Desc, c_int, IntP, ctypes.POINTER(ConvFwdAlgoPerf)]
WORKSPACE_QUERY = [Handle, Desc, Desc, Desc, Desc, c_int, ctypes.POINTER(c_size_t)]

# name -> argtypes; every one returns cudnnStatus_t (int) unless listed in RESTYPES
SIGNATURES = {
    "cudnnCreate": [ctypes.POINTER(Handle)],
    "cudnnDestroy": [Handle],
    "cudnnSetStream": [Handle, Ptr],
    "cudnnCreateTensorDescriptor": [ctypes.POINTER(Desc)],
    "cudnnSetTensor4dDescriptor": [Desc, c_int, c_int, c_int, c_int, c_int, c_int],
    "cudnnGetTensor4dDescriptor": [Desc, IntP, IntP, IntP, IntP, IntP, IntP, IntP, IntP, IntP],
    "cudnnDestroyTensorDescriptor": [Desc],
    "cudnnCreateFilterDescriptor": [ctypes.POINTER(Desc)],
    "cudnnSetFilter4dDescriptor": [Desc, c_int, c_int, c_int, c_int, c_int, c_int],
    "cudnnDestroyFilterDescriptor": [Desc],
    "cudnnCreateConvolutionDescriptor": [ctypes.POINTER(Desc)],
    "cudnnSetConvolution2dDescriptor": [Desc, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int],
    "cudnnSetConvolutionMathType": [Desc, c_int],
    "cudnnGetConvolution2dForwardOutputDim": [Desc, Desc, Desc, IntP, IntP, IntP, IntP],
    "cudnnDestroyConvolutionDescriptor": [Desc],
    "cudnnGetConvolutionForwardAlgorithm_v7": [Handle, Desc, Desc, Desc, Desc, c_int, IntP,
                                               ctypes.POINTER(ConvFwdAlgoPerf)],
    "cudnnFindConvolutionForwardAlgorithm": [Handle, Desc, Desc, Desc, Desc, c_int, IntP,
                                             ctypes.POINTER(ConvFwdAlgoPerf)],
    "cudnnGetConvolutionForwardWorkspaceSize": [Handle, Desc, Desc, Desc, Desc, c_int,
                                                ctypes.POINTER(c_size_t)],
    "cudnnConvolutionForward": [Handle, Ptr, Desc, Ptr, Desc, Ptr, Desc, c_int, Ptr, c_size_t,
                                Ptr, Desc, Ptr],
    # y = relu(alpha1 conv(x) + alpha2 z + bias): conv, bias and activation in one call
    "cudnnConvolutionBiasActivationForward": [Handle, Ptr, Desc, Ptr, Desc, Ptr, Desc, c_int, Ptr,
                                              c_size_t, Ptr, Desc, Ptr, Desc, Ptr, Desc, Desc, Ptr],
    "cudnnAddTensor": [Handle, Ptr, Desc, Ptr, Ptr, Desc, Ptr],
    "cudnnCreateActivationDescriptor": [ctypes.POINTER(Desc)],
    "cudnnSetActivationDescriptor": [Desc, c_int, c_int, c_double],
    "cudnnDestroyActivationDescriptor": [Desc],
    "cudnnActivationForward": [Handle, Desc, Ptr, Desc, Ptr, Ptr, Desc, Ptr],
    "cudnnCreatePoolingDescriptor": [ctypes.POINTER(Desc)],
    "cudnnSetPooling2dDescriptor": [Desc, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int],
    "cudnnGetPooling2dForwardOutputDim": [Desc, Desc, IntP, IntP, IntP, IntP],
    "cudnnDestroyPoolingDescriptor": [Desc],
    "cudnnPoolingForward": [Handle, Desc, Ptr, Desc, Ptr, Ptr, Desc, Ptr],
    "cudnnSoftmaxForward": [Handle, c_int, c_int, Ptr, Desc, Ptr, Ptr, Desc, Ptr],
    # --- training ---
    # w desc, w, dy desc, dy, conv, algo, ws, ws bytes, beta, dx desc, dx
    "cudnnConvolutionBackwardData": CONV_BACKWARD,
    # x desc, x, dy desc, dy, conv, algo, ws, ws bytes, beta, dw (filter) desc, dw
    "cudnnConvolutionBackwardFilter": CONV_BACKWARD,
    # handle, alpha, dy desc, dy, beta, db desc, db
    "cudnnConvolutionBackwardBias": [Handle, Ptr, Desc, Ptr, Ptr, Desc, Ptr],
    # (w, dy, conv, dx) and (x, dy, conv, dw) descriptors
    "cudnnGetConvolutionBackwardDataAlgorithm_v7": ALGO_QUERY,
    "cudnnFindConvolutionBackwardDataAlgorithm": ALGO_QUERY,
    "cudnnGetConvolutionBackwardFilterAlgorithm_v7": ALGO_QUERY,
    "cudnnFindConvolutionBackwardFilterAlgorithm": ALGO_QUERY,
    "cudnnGetConvolutionBackwardDataWorkspaceSize": WORKSPACE_QUERY,
    "cudnnGetConvolutionBackwardFilterWorkspaceSize": WORKSPACE_QUERY,
    "cudnnPoolingBackward": Y_DY_X_BACKWARD,
    "cudnnActivationBackward": Y_DY_X_BACKWARD,
    "cudnnGetVersion": [],
    "cudnnGetErrorString": [c_int],
}
RESTYPES = {"cudnnGetVersion": c_size_t, "cudnnGetErrorString": ctypes.c_char_p}


class CudnnError(RuntimeError):
    def __init__(self, function: str, status: int, message: str):
        super().__init__(f"{function} failed: {message} (status {status})")
        self.function, self.status = function, status


def candidates() -> list[tuple[str, str]]:
    """(path or soname, how it was found), in discovery order."""
    found = []
    if os.environ.get("LENET_CUDNN_LIBRARY"):
        found.append((os.environ["LENET_CUDNN_LIBRARY"], "LENET_CUDNN_LIBRARY"))
    spec = importlib.util.find_spec("nvidia.cudnn") if importlib.util.find_spec("nvidia") else None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for version in ("9", "8"):
            lib = Path(folder) / "lib" / f"libcudnn.so.{version}"
            if lib.is_file():
                found.append((str(lib), "nvidia-cudnn wheel"))
    found += [("libcudnn.so.9", "system"), ("libcudnn.so.8", "system")]
    return found


class Cudnn:
    """The loaded library: one attribute per bound function, each checking its status."""

    def __init__(self, path: str, how: str, lib: ctypes.CDLL):
        self.path, self.how, self.lib = path, how, lib
        for name, argtypes in SIGNATURES.items():
            fn = getattr(lib, name)  # AttributeError: a symbol this cuDNN lacks
            fn.argtypes = argtypes
            fn.restype = RESTYPES.get(name, c_int)
            setattr(self, name, fn if name in RESTYPES else self._checked(name, fn))
        self.version = int(lib.cudnnGetVersion())

    def error_string(self, status: int) -> str:
        return self.lib.cudnnGetErrorString(status).decode()

    def _checked(self, name, fn):
        def checked(*args):
            status = fn(*args)
            if status != STATUS_SUCCESS:
                raise CudnnError(name, status, self.error_string(status))

        checked.__name__ = name
        return checked


_loaded = None


def load() -> Cudnn:
    """The first libcudnn found (see module docstring), or Unavailable naming what was tried."""
    global _loaded
    if _loaded is None:
        _loaded = native.first_library(
            candidates(), Cudnn, "libcudnn",
            "Install the gpu extra (make install-gpu) or set LENET_CUDNN_LIBRARY")
    return _loaded


def probe() -> dict | None:
    """For env.json and doctor: which libcudnn, which version; or why none."""
    try:
        lib = load()
    except Unavailable as exc:
        return {"found": False, "reason": str(exc)}
    return {"found": True, "path": lib.path, "how": lib.how, "version": lib.version}


def out_param(ctype=c_int):
    value = ctype()
    return value, ctypes.byref(value)
