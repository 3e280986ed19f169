"""A thin ctypes binding over libcublasLt: one dense layer as one matmul with its bias and ReLU
fused into the epilogue (CUBLASLT_EPILOGUE_RELU_BIAS; _BIAS for fc3), instead of a gemm and two
cuDNN tensor ops.

cuBLASLt is column-major, like cuBLAS. Row-major Y (n, out) = X (n, in) W (in, out) is asked for
as the column-major Y^T (out, n) = W^T (out, in) X^T (in, n): A = W's buffer as an (out, in)
matrix, B = X's as (in, n), D = Y's as (out, n); no transposes, no copies (`layout_args`). The
epilogue's bias is a vector of D's rows (out), broadcast over its columns (the batch): the dense
bias as it is. float32 computes in CUBLAS_COMPUTE_32F (no TF32), float64 in CUBLAS_COMPUTE_64F.

Every function has argtypes and restype set; every status is checked (CublasError, with the
status' name). Library discovery, first found wins: $LENET_CUBLASLT_LIBRARY; the libcublasLt
already loaded in this process (CuPy's); the nvidia-cublas wheel (nvidia/cu13/lib, nvidia/cublas/lib);
the system's libcublasLt.so.13, then .so.12.
"""

import ctypes
import os

from harness.errors import Unavailable
from harness.frameworks import native
from lenet_cudnn.cublas import STATUS_NAMES, CublasError

# --- enums (cublasLt.h, cublas_api.h, library_types.h) -------------------------------------
STATUS_SUCCESS = 0
R_32F, R_64F = 0, 1  # cudaDataType
COMPUTE = {"float32": (68, R_32F), "float64": (70, R_64F)}  # CUBLAS_COMPUTE_32F / _64F, scale type
OP_N = 0
DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_POINTER = 3, 4, 7, 8  # cublasLtMatmulDescAttributes_t
EPILOGUE_RELU_BIAS, EPILOGUE_BIAS = 6, 4  # cublasLtEpilogue_t: RELU | BIAS, BIAS
PREF_MAX_WORKSPACE_BYTES = 1  # cublasLtMatmulPreferenceAttributes_t
SONAMES = ("libcublasLt.so.13", "libcublasLt.so.12")
WHEEL_PATHS = ("cu13/lib/libcublasLt.so.13", "cublas/lib/libcublasLt.so.13", "cublas/lib/libcublasLt.so.12")

Handle = Desc = Ptr = ctypes.c_void_p
c_int, c_size_t, c_uint64 = ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64


class MatmulAlgo(ctypes.Structure):
    """cublasLtMatmulAlgo_t: opaque, 8 x uint64."""

    _fields_ = [("data", c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t"""

    _fields_ = [("algo", MatmulAlgo), ("workspaceSize", c_size_t), ("state", c_int),
                ("wavesCount", ctypes.c_float), ("reserved", c_int * 4)]


# name -> argtypes; every one returns cublasStatus_t (int) unless listed in RESTYPES
SIGNATURES = {
    "cublasLtCreate": [ctypes.POINTER(Handle)],
    "cublasLtDestroy": [Handle],
    "cublasLtGetVersion": [],
    # desc, compute type, scale type
    "cublasLtMatmulDescCreate": [ctypes.POINTER(Desc), c_int, c_int],
    "cublasLtMatmulDescSetAttribute": [Desc, c_int, Ptr, c_size_t],
    "cublasLtMatmulDescDestroy": [Desc],
    # layout, data type, rows, cols, leading dimension (column-major)
    "cublasLtMatrixLayoutCreate": [ctypes.POINTER(Desc), c_int, c_uint64, c_uint64, ctypes.c_int64],
    "cublasLtMatrixLayoutDestroy": [Desc],
    "cublasLtMatmulPreferenceCreate": [ctypes.POINTER(Desc)],
    "cublasLtMatmulPreferenceSetAttribute": [Desc, c_int, Ptr, c_size_t],
    "cublasLtMatmulPreferenceDestroy": [Desc],
    # handle, op desc, A, B, C, D layouts, preference, requested, results, returned
    "cublasLtMatmulAlgoGetHeuristic": [Handle, Desc, Desc, Desc, Desc, Desc, Desc, c_int,
                                       ctypes.POINTER(HeuristicResult), ctypes.POINTER(c_int)],
    # handle, op desc, *alpha, A, A layout, B, B layout, *beta, C, C layout, D, D layout,
    # *algo, workspace, workspace bytes, stream
    "cublasLtMatmul": [Handle, Desc, Ptr, Ptr, Desc, Ptr, Desc, Ptr, Ptr, Desc, Ptr, Desc,
                       ctypes.POINTER(MatmulAlgo), Ptr, c_size_t, Ptr],
}
RESTYPES = {"cublasLtGetVersion": c_size_t}


def layout_args(batch: int, fan_in: int, fan_out: int, relu: bool) -> dict:
    """The column-major problem for row-major Y (batch, out) = act(X (batch, in) W (in, out) + b):
    D (m, n) = A (m, k) B (k, n), m = out, n = batch, k = in; (rows, cols, ld) of each layout."""
    if min(batch, fan_in, fan_out) < 1:
        raise ValueError(f"dense layer: expected positive sizes, found batch {batch}, "
                         f"in {fan_in}, out {fan_out}")
    return {"m": fan_out, "n": batch, "k": fan_in, "transa": OP_N, "transb": OP_N,
            "a": (fan_out, fan_in, fan_out),  # W, row-major (in, out) = column-major (out, in)
            "b": (fan_in, batch, fan_in),  # X, row-major (batch, in) = column-major (in, batch)
            "d": (fan_out, batch, fan_out),  # Y, row-major (batch, out) = column-major (out, batch); C = D
            "epilogue": EPILOGUE_RELU_BIAS if relu else EPILOGUE_BIAS,
            "bias_length": fan_out}  # = D's rows


def candidates() -> list[tuple[str, str]]:
    """(path or soname, how it was found), in discovery order."""
    found = []
    if os.environ.get("LENET_CUBLASLT_LIBRARY"):
        found.append((os.environ["LENET_CUBLASLT_LIBRARY"], "LENET_CUBLASLT_LIBRARY"))
    found += [(path, "loaded in this process") for path in native.loaded_in_process("libcublasLt.so")]
    found += [(path, "nvidia-cublas wheel") for path in native.wheel_libraries(WHEEL_PATHS)]
    return found + [(soname, "system") for soname in SONAMES]


class CublasLt:
    """The loaded library: one attribute per bound function, each checking its status."""

    def __init__(self, path: str, how: str, lib):
        self.path, self.how, self.lib = path, how, lib
        for name, argtypes in SIGNATURES.items():
            fn = getattr(lib, name)  # AttributeError: a symbol this cuBLASLt lacks
            fn.argtypes = argtypes
            fn.restype = RESTYPES.get(name, c_int)
            setattr(self, name, fn if name in RESTYPES else self._checked(name, fn))
        self.version = int(lib.cublasLtGetVersion())

    @staticmethod
    def _checked(name, fn):
        def checked(*args):
            status = fn(*args)
            if status != STATUS_SUCCESS:
                raise CublasError(name, status, STATUS_NAMES.get(status, "unknown cuBLAS status"))

        checked.__name__ = name
        return checked


_loaded = None


def load() -> CublasLt:
    global _loaded
    if _loaded is None:
        _loaded = native.first_library(
            candidates(), CublasLt, "libcublasLt",
            "Install CuPy's CUDA libraries (make install-gpu) or set LENET_CUBLASLT_LIBRARY")
    return _loaded


def set_attribute(setter, desc, attribute, value: ctypes._SimpleCData):
    setter(desc, attribute, ctypes.byref(value), ctypes.sizeof(value))


class DenseMatmul:
    """One dense layer for one batch size: its descriptors, the algorithm cuBLASLt's heuristic
    picked, and the prebuilt argument tuple of its cublasLtMatmul (`args`; call `run()`).
    CublasError when cuBLASLt refuses (no algorithm for this problem and epilogue)."""

    def __init__(self, lt: CublasLt, handle, dtype, batch, fan_in, fan_out, relu, w_ptr, x_ptr, y_ptr,
                 bias_ptr, alpha_ptr, beta_ptr, workspace_ptr, workspace_bytes, stream_ptr):
        self.lt, self.op, self.layouts, self.pref = lt, Desc(), [], Desc()
        self.problem = g = layout_args(batch, fan_in, fan_out, relu)
        compute, scale = COMPUTE[dtype]
        try:
            lt.cublasLtMatmulDescCreate(ctypes.byref(self.op), compute, scale)
            for attribute, value in ((DESC_TRANSA, c_int(g["transa"])), (DESC_TRANSB, c_int(g["transb"])),
                                     (DESC_EPILOGUE, ctypes.c_uint32(g["epilogue"])),
                                     (DESC_BIAS_POINTER, ctypes.c_void_p(bias_ptr))):
                set_attribute(lt.cublasLtMatmulDescSetAttribute, self.op, attribute, value)
            for rows, cols, ld in (g["a"], g["b"], g["d"]):
                layout = Desc()
                lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), scale, rows, cols, ld)
                self.layouts.append(layout)
            a, b, d = self.layouts
            lt.cublasLtMatmulPreferenceCreate(ctypes.byref(self.pref))
            set_attribute(lt.cublasLtMatmulPreferenceSetAttribute, self.pref, PREF_MAX_WORKSPACE_BYTES,
                          c_uint64(workspace_bytes))
            self.heuristic, returned = HeuristicResult(), c_int()
            lt.cublasLtMatmulAlgoGetHeuristic(handle, self.op, a, b, d, d, self.pref, 1,
                                              ctypes.byref(self.heuristic), ctypes.byref(returned))
            if returned.value < 1:
                raise CublasError("cublasLtMatmulAlgoGetHeuristic", 15,
                                  f"no algorithm for {dtype} ({fan_out} x {fan_in}) @ ({fan_in} x {batch}) "
                                  f"with epilogue {g['epilogue']}")
        except BaseException:
            self.close()
            raise
        # C = D (beta = 0: C is not read)
        self.args = (handle, self.op, alpha_ptr, w_ptr, a, x_ptr, b, beta_ptr, y_ptr, d, y_ptr, d,
                     ctypes.byref(self.heuristic.algo), workspace_ptr, workspace_bytes, stream_ptr)

    def run(self):
        self.lt.cublasLtMatmul(*self.args)

    def close(self):
        for layout in self.layouts:
            self.lt.cublasLtMatrixLayoutDestroy(layout)
        self.layouts = []
        if self.pref:
            self.lt.cublasLtMatmulPreferenceDestroy(self.pref)
            self.pref = Desc()
        if self.op:
            self.lt.cublasLtMatmulDescDestroy(self.op)
            self.op = Desc()


def probe() -> dict:
    try:
        lib = load()
    except Unavailable as exc:
        return {"found": False, "reason": str(exc)}
    return {"found": True, "path": lib.path, "how": lib.how, "version": lib.version}
