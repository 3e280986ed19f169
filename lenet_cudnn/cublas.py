"""A thin ctypes binding over libcublas: the handle, its stream, workspace and math mode, and gemm.

Why not CuPy's cuBLAS: `cupy.cuda.cublas.sgemm` re-binds the handle's stream on every call
(cupy_backends/cuda/libs/cublas.pyx), and cublasSetStream raises while the stream is being
captured into a CUDA graph (cupy/cupy#6290). With a handle of our own, bound once to the
level's stream, the gemms can be captured like cuDNN's calls.

Every function has argtypes and restype set (ctypes would otherwise pass and return C ints and
truncate 64-bit pointers), and every status is checked: a failure raises CublasError carrying
cublasGetStatusString. Enum values are those of cublas_api.h (CUDA 12 and 13).

Library discovery, first found wins:
  1. $LENET_CUBLAS_LIBRARY (a path to libcublas.so.*)
  2. the libcublas already loaded in this process (CuPy's, after `import cupy.cuda.cublas`):
     one copy of cuBLAS per process, the one CuPy was built against
  3. the nvidia-cublas wheel in site-packages: nvidia/cu13/lib/libcublas.so.13 (CUDA 13's
     `nvidia-cublas`), nvidia/cublas/lib/libcublas.so.12 (`nvidia-cublas-cu12`)
  4. the system's libcublas.so.13, then libcublas.so.12
"""

import ctypes
import os

from harness.errors import Unavailable
from harness.frameworks import native

# --- enums (cublas_api.h) -----------------------------------------------------------------
STATUS_SUCCESS = 0
OP_N, OP_T = 0, 1
DEFAULT_MATH = 0  # CUBLAS_DEFAULT_MATH: float32 gemms in float32 (no TF32 tensor cores)
PEDANTIC_MATH = 2  # CUBLAS_PEDANTIC_MATH
TF32_TENSOR_OP_MATH = 3  # CUBLAS_TF32_TENSOR_OP_MATH: what this level never sets
POINTER_MODE_HOST = 0  # alpha and beta in host memory, read when the call is enqueued
# cuBLAS' recommended workspace (cuBLAS docs, cublasSetWorkspace): 32 MiB covers Hopper and
# Blackwell, 4 MiB the others. Set by us, cuBLAS never allocates one during a graph capture.
WORKSPACE_BYTES = 32 << 20
SONAMES = ("libcublas.so.13", "libcublas.so.12")
STATUS_NAMES = {0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED",
                3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
                8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
                13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
                15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR"}

Handle = ctypes.c_void_p  # cublasHandle_t
Ptr = ctypes.c_void_p  # device memory, host scalars, cudaStream_t
c_int, c_size_t = ctypes.c_int, ctypes.c_size_t
IntP = ctypes.POINTER(c_int)
GEMM = [Handle, c_int, c_int, c_int, c_int, c_int, Ptr, Ptr, c_int, Ptr, c_int, Ptr, Ptr, c_int]
AXPY = [Handle, c_int, Ptr, Ptr, c_int, Ptr, c_int]  # handle, n, *alpha, x, incx, y, incy

# name -> argtypes; every one returns cublasStatus_t (int) unless listed in RESTYPES
SIGNATURES = {
    "cublasCreate_v2": [ctypes.POINTER(Handle)],
    "cublasDestroy_v2": [Handle],
    "cublasSetStream_v2": [Handle, Ptr],
    "cublasSetWorkspace_v2": [Handle, Ptr, c_size_t],
    "cublasSetMathMode": [Handle, c_int],
    "cublasGetMathMode": [Handle, IntP],
    "cublasSetPointerMode_v2": [Handle, c_int],
    # handle, transa, transb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc
    "cublasSgemm_v2": GEMM,
    "cublasDgemm_v2": GEMM,
    # y = alpha * x + y (the SGD step: w += (-lr) * grad)
    "cublasSaxpy_v2": AXPY,
    "cublasDaxpy_v2": AXPY,
    "cublasGetVersion_v2": [Handle, IntP],
    "cublasGetStatusString": [c_int],
}
RESTYPES = {"cublasGetStatusString": ctypes.c_char_p}


class CublasError(RuntimeError):
    def __init__(self, function: str, status: int, message: str):
        super().__init__(f"{function} failed: {message} (status {status})")
        self.function, self.status = function, status


def wheel_libraries() -> list[str]:
    return native.wheel_libraries(("cu13/lib/libcublas.so.13", "cublas/lib/libcublas.so.13",
                                   "cublas/lib/libcublas.so.12"))


def candidates() -> list[tuple[str, str]]:
    """(path or soname, how it was found), in discovery order."""
    found = []
    if os.environ.get("LENET_CUBLAS_LIBRARY"):
        found.append((os.environ["LENET_CUBLAS_LIBRARY"], "LENET_CUBLAS_LIBRARY"))
    found += [(path, "loaded in this process") for path in native.loaded_in_process("libcublas.so")]
    found += [(path, "nvidia-cublas wheel") for path in wheel_libraries()]
    found += [(soname, "system") for soname in SONAMES]
    return found


class Cublas:
    """The loaded library: one attribute per bound function, each checking its status."""

    def __init__(self, path: str, how: str, lib: ctypes.CDLL):
        self.path, self.how, self.lib = path, how, lib
        for name, argtypes in SIGNATURES.items():
            fn = getattr(lib, name)  # AttributeError: a symbol this cuBLAS lacks
            fn.argtypes = argtypes
            fn.restype = RESTYPES.get(name, c_int)
            setattr(self, name, fn if name in RESTYPES else self._checked(name, fn))
        version = c_int()
        self.cublasGetVersion_v2(None, ctypes.byref(version))  # needs no handle and no GPU
        self.version = version.value

    def error_string(self, status: int) -> str:
        text = self.lib.cublasGetStatusString(status)
        return text.decode() if text else STATUS_NAMES.get(status, "unknown cuBLAS status")

    def _checked(self, name, fn):
        def checked(*args):
            status = fn(*args)
            if status != STATUS_SUCCESS:
                raise CublasError(name, status, f"{STATUS_NAMES.get(status, 'status')}: "
                                                f"{self.error_string(status)}")

        checked.__name__ = name
        return checked


_loaded = None


def load() -> Cublas:
    """The first libcublas found (see module docstring), or Unavailable naming what was tried."""
    global _loaded
    if _loaded is None:
        _loaded = native.first_library(
            candidates(), Cublas, "libcublas",
            "Install CuPy's CUDA libraries (make install-gpu; CUDA 13: pip install 'cupy-cuda13x[ctk]') "
            "or set LENET_CUBLAS_LIBRARY", errors=(OSError, AttributeError, CublasError))
    return _loaded


def probe() -> dict:
    """For env.json and doctor: which libcublas, which version; or why none."""
    try:
        lib = load()
    except Unavailable as exc:
        return {"found": False, "reason": str(exc)}
    return {"found": True, "path": lib.path, "how": lib.how, "version": lib.version}


class BlasHandle:
    """A cuBLAS handle of the level's own, bound once to `stream` (never re-bound), with a
    fixed workspace (`workspace_ptr`, WORKSPACE_BYTES, owned by the caller and kept alive),
    pointer mode host and the default math mode (no TF32)."""

    def __init__(self, lib: Cublas, stream_ptr: int, workspace_ptr: int, workspace_bytes: int):
        self.lib, self.ptr = lib, Handle()
        try:
            lib.cublasCreate_v2(ctypes.byref(self.ptr))
        except CublasError as exc:
            raise Unavailable(str(exc)) from None
        try:
            lib.cublasSetStream_v2(self.ptr, stream_ptr)
            # after SetStream: it resets the workspace to cuBLAS' own pool
            lib.cublasSetWorkspace_v2(self.ptr, workspace_ptr, workspace_bytes)
            lib.cublasSetPointerMode_v2(self.ptr, POINTER_MODE_HOST)
            lib.cublasSetMathMode(self.ptr, DEFAULT_MATH)
        except CublasError:
            self.close()
            raise

    def math_mode(self) -> int:
        mode = c_int()
        self.lib.cublasGetMathMode(self.ptr, ctypes.byref(mode))
        return mode.value

    def close(self):
        if self.ptr:
            self.lib.cublasDestroy_v2(self.ptr)
            self.ptr = Handle()
