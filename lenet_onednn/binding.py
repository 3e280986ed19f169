"""A thin ctypes binding over libdnnl (oneDNN v3 C API): only the functions LeNet-5 uses.

Every function has argtypes and restype set: ctypes would otherwise return a C int and cut a
64-bit pointer in half (dnnl_primitive_desc_query_md, dnnl_version), and pass Python floats
as doubles where the C side wants `float` (the ReLU post-op's alpha and beta). Every status is
checked: a failure raises OnednnError naming the function and the dnnl_status_t.

The pip wheel (onednn-cpu-gomp) ships no headers: the enum values below are copied from the
v3.2 headers (include/oneapi/dnnl/dnnl_types.h, dnnl_common_types.h at tag v3.2). The format
tag enum is numbered implicitly there; tests/test_onednn_level.py checks the tags used here
against the strides the library gives them.

Library discovery, first found wins:
  1. $LENET_ONEDNN_LIBRARY (a path to libdnnl.so.3); if set but unloadable: Unavailable
  2. the onednn-cpu-gomp wheel: lib/libdnnl.so.3 under sys.prefix (and the base prefixes)
  3. the system's libdnnl.so.3
OMP_NUM_THREADS must be in the environment before libgomp loads (it reads it once, at load):
the harness sets it per its thread rule (harness/procenv.py) before any import.
"""

import ctypes
import os
import sys
from pathlib import Path

from harness.errors import Unavailable
from harness.frameworks import native

# --- enums (dnnl_common_types.h, dnnl_types.h of v3.2) --------------------------------------
STATUS = {0: "dnnl_success", 1: "dnnl_out_of_memory", 2: "dnnl_invalid_arguments",
          3: "dnnl_unimplemented", 4: "dnnl_last_impl_reached", 5: "dnnl_runtime_error",
          6: "dnnl_not_required", 7: "dnnl_invalid_graph", 8: "dnnl_invalid_graph_op",
          9: "dnnl_invalid_shape", 10: "dnnl_invalid_data_type"}
SUCCESS = 0
F32, F64 = 3, 7  # dnnl_data_type_t
DATA_TYPES = {"float32": F32, "float64": F64}
CPU = 1  # dnnl_engine_kind_t: any_engine, cpu, gpu
STREAM_DEFAULT_FLAGS = 1  # dnnl_stream_in_order
# dnnl_format_tag_t (implicit numbering: undef 0, any 1, a 2, ab 3, abc 4, abcd 5, ...).
# Tags name physical order over the logical dims: for (N, C, H, W) nhwc = acdb; for weights
# (O, I, H, W) hwio = cdba, and for (O, I) io = ba.
TAG_ANY, TAG_A, TAG_AB, TAG_ABCD, TAG_BA, TAG_ACDB, TAG_CDBA = 1, 2, 3, 5, 14, 22, 28
TAG_X, TAG_NC, TAG_NCHW, TAG_NHWC, TAG_IO, TAG_HWIO = TAG_A, TAG_AB, TAG_ABCD, TAG_ACDB, TAG_BA, TAG_CDBA
FORMAT_KIND_BLOCKED = 2  # dnnl_format_kind_t: undef, any, blocked, opaque
FORWARD_TRAINING, FORWARD_INFERENCE = 64, 96  # dnnl_prop_kind_t (max pooling trains with a workspace)
CONVOLUTION_DIRECT = 0x1  # dnnl_alg_kind_t
ELTWISE_RELU = 0x20
ELTWISE_LINEAR = 0x26  # alpha * x + beta (relu 0x20, tanh, elu, square, abs, sqrt, linear)
ELTWISE_RELU_USE_DST_FOR_BWD = 0x100  # ReLU whose backward reads dst (dst > 0), not src
POOLING_MAX = 0x1FF
BINARY_ADD, BINARY_SUB = 0x1FFF0, 0x1FFF5  # dst = src0 + src1, src0 - src1
SOFTMAX_ACCURATE = 0x30000
# dnnl_query_t
QUERY_IMPL_INFO_STR = 8
QUERY_SRC_MD, QUERY_DIFF_SRC_MD, QUERY_WEIGHTS_MD, QUERY_DIFF_WEIGHTS_MD = 129, 130, 131, 132
QUERY_DST_MD, QUERY_DIFF_DST_MD, QUERY_WORKSPACE_MD = 133, 134, 135
QUERY_EXEC_ARG_MD = 255  # the memory desc of execution argument `index` (a DNNL_ARG_*)
QUERY_NDIMS_S32, QUERY_DIMS, QUERY_DATA_TYPE = 256, 257, 258
QUERY_STRIDES = 14  # dnnl_query_strides: of a memory desc, its strides (result: dnnl_dims_t **)
QUERY_FORMAT_KIND, QUERY_INNER_NBLKS_S32 = 262, 263
# execute arguments (DNNL_ARG_*)
ARG_SRC, ARG_SRC_1, ARG_DST, ARG_WEIGHTS, ARG_BIAS = 1, 2, 17, 33, 41
ARG_FROM, ARG_TO = ARG_SRC, ARG_DST
ARG_WORKSPACE = 64
ARG_DIFF_SRC, ARG_DIFF_DST, ARG_DIFF_WEIGHTS, ARG_DIFF_BIAS = 129, 145, 161, 169
ARG_MULTIPLE_SRC = 1024  # sum: source i is ARG_MULTIPLE_SRC + i
ARG_ATTR_SCALES = 4096  # a runtime scale of argument `arg` is passed as ARG_ATTR_SCALES | arg
MEMORY_ALLOCATE = ctypes.c_void_p(2**64 - 1)  # DNNL_MEMORY_ALLOCATE ((void *)(size_t)-1)
MAX_NDIMS = 12

Ptr = ctypes.c_void_p  # every handle: engine, stream, memory desc, memory, pd, primitive, attr
PtrP = ctypes.POINTER(Ptr)
Dims = ctypes.c_int64 * MAX_NDIMS  # dnnl_dims_t
c_int, c_float, c_size_t = ctypes.c_int, ctypes.c_float, ctypes.c_size_t


class ExecArg(ctypes.Structure):
    """dnnl_exec_arg_t"""

    _fields_ = [("arg", c_int), ("memory", Ptr)]


class Version(ctypes.Structure):
    """dnnl_version_t"""

    _fields_ = [("major", c_int), ("minor", c_int), ("patch", c_int), ("hash", ctypes.c_char_p),
                ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]


# name -> argtypes; every one returns dnnl_status_t (int) unless listed in RESTYPES
SIGNATURES = {
    "dnnl_engine_create": [PtrP, c_int, c_size_t],
    "dnnl_engine_destroy": [Ptr],
    "dnnl_stream_create": [PtrP, Ptr, ctypes.c_uint],
    "dnnl_stream_wait": [Ptr],
    "dnnl_stream_destroy": [Ptr],
    "dnnl_memory_desc_create_with_tag": [PtrP, c_int, Dims, c_int, c_int],
    "dnnl_memory_desc_destroy": [Ptr],
    "dnnl_memory_desc_query": [Ptr, c_int, Ptr],
    "dnnl_memory_desc_get_size": [Ptr],
    "dnnl_memory_desc_equal": [Ptr, Ptr],
    "dnnl_memory_create": [PtrP, Ptr, Ptr, Ptr],
    "dnnl_memory_get_data_handle": [Ptr, PtrP],
    "dnnl_memory_set_data_handle": [Ptr, Ptr],
    "dnnl_memory_destroy": [Ptr],
    # pd, engine, prop, alg, src, weights, bias, dst, strides, dilates, padding_l, padding_r, attr
    "dnnl_convolution_forward_primitive_desc_create": [PtrP, Ptr, c_int, c_int, Ptr, Ptr, Ptr, Ptr,
                                                       Dims, Dims, Dims, Dims, Ptr],
    # pd, engine, prop, alg, src, dst, strides, kernel, dilation, padding_l, padding_r, attr
    "dnnl_pooling_forward_primitive_desc_create": [PtrP, Ptr, c_int, c_int, Ptr, Ptr,
                                                   Dims, Dims, Dims, Dims, Dims, Ptr],
    # pd, engine, prop, src, weights, bias, dst, attr
    "dnnl_inner_product_forward_primitive_desc_create": [PtrP, Ptr, c_int, Ptr, Ptr, Ptr, Ptr, Ptr],
    # pd, engine, prop, alg, src, dst, axis, attr
    "dnnl_softmax_forward_primitive_desc_create": [PtrP, Ptr, c_int, c_int, Ptr, Ptr, c_int, Ptr],
    # --- training (backward primitives take the forward pd as a hint) ---
    # pd, engine, alg, diff_src, weights, diff_dst, strides, dilates, padding_l, padding_r, hint, attr
    "dnnl_convolution_backward_data_primitive_desc_create": [PtrP, Ptr, c_int, Ptr, Ptr, Ptr,
                                                             Dims, Dims, Dims, Dims, Ptr, Ptr],
    # pd, engine, alg, src, diff_weights, diff_bias, diff_dst, strides, dilates, padding_l,
    # padding_r, hint, attr
    "dnnl_convolution_backward_weights_primitive_desc_create": [PtrP, Ptr, c_int, Ptr, Ptr, Ptr, Ptr,
                                                                Dims, Dims, Dims, Dims, Ptr, Ptr],
    # pd, engine, alg, diff_src, diff_dst, strides, kernel, dilation, padding_l, padding_r, hint, attr
    "dnnl_pooling_backward_primitive_desc_create": [PtrP, Ptr, c_int, Ptr, Ptr,
                                                    Dims, Dims, Dims, Dims, Dims, Ptr, Ptr],
    # pd, engine, prop, alg, src, dst, alpha, beta (C floats), attr
    "dnnl_eltwise_forward_primitive_desc_create": [PtrP, Ptr, c_int, c_int, Ptr, Ptr, c_float, c_float, Ptr],
    # pd, engine, alg, diff_src, diff_dst, data (src or dst), alpha, beta, hint, attr
    "dnnl_eltwise_backward_primitive_desc_create": [PtrP, Ptr, c_int, Ptr, Ptr, Ptr, c_float, c_float,
                                                    Ptr, Ptr],
    # pd, engine, diff_src, weights, diff_dst, hint, attr
    "dnnl_inner_product_backward_data_primitive_desc_create": [PtrP, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr],
    # pd, engine, src, diff_weights, diff_bias, diff_dst, hint, attr
    "dnnl_inner_product_backward_weights_primitive_desc_create": [PtrP, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr],
    # pd, engine, alg, src0, src1, dst, attr
    "dnnl_binary_primitive_desc_create": [PtrP, Ptr, c_int, Ptr, Ptr, Ptr, Ptr],
    # pd, engine, dst, n, scales (const float *), src descs (const_dnnl_memory_desc_t const *), attr
    "dnnl_sum_primitive_desc_create": [PtrP, Ptr, Ptr, c_int, ctypes.POINTER(c_float), PtrP, Ptr],
    # attr, arg (DNNL_ARG_*), mask (0: one scale for the whole tensor, given at execution)
    "dnnl_primitive_attr_set_scales_mask": [Ptr, c_int, c_int],
    # pd, src md, src engine, dst md, dst engine, attr
    "dnnl_reorder_primitive_desc_create": [PtrP, Ptr, Ptr, Ptr, Ptr, Ptr],
    "dnnl_primitive_desc_query": [Ptr, c_int, c_int, Ptr],
    "dnnl_primitive_desc_query_md": [Ptr, c_int, c_int],
    "dnnl_primitive_desc_destroy": [Ptr],
    "dnnl_primitive_create": [PtrP, Ptr],
    "dnnl_primitive_execute": [Ptr, Ptr, c_int, ctypes.POINTER(ExecArg)],
    "dnnl_primitive_destroy": [Ptr],
    "dnnl_primitive_attr_create": [PtrP],
    "dnnl_primitive_attr_destroy": [Ptr],
    "dnnl_primitive_attr_set_post_ops": [Ptr, Ptr],
    "dnnl_post_ops_create": [PtrP],
    "dnnl_post_ops_destroy": [Ptr],
    "dnnl_post_ops_append_eltwise": [Ptr, c_int, c_float, c_float],
    "dnnl_set_primitive_cache_capacity": [c_int],
    "dnnl_get_primitive_cache_capacity": [ctypes.POINTER(c_int)],
    "dnnl_version": [],
}
RESTYPES = {
    "dnnl_primitive_desc_query_md": Ptr,  # const_dnnl_memory_desc_t, owned by the pd; may be NULL
    "dnnl_memory_desc_get_size": c_size_t,
    "dnnl_memory_desc_equal": c_int,  # 1 if equal, not a status
    "dnnl_version": ctypes.POINTER(Version),
}


class OnednnError(RuntimeError):
    def __init__(self, function: str, status: int):
        name = STATUS.get(status, "unknown dnnl_status_t")
        super().__init__(f"{function} failed: {name} (status {status})")
        self.function, self.status, self.status_name = function, status, name


def prefixes() -> list[str]:
    """sys.prefix, then the base prefixes (a venv over a system Python with the wheel)."""
    found = []
    for prefix in (sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", None), sys.base_exec_prefix):
        if prefix and prefix not in found:
            found.append(prefix)
    return found


def candidates() -> list[tuple[str, str]]:
    """(path or soname, how it was found), in discovery order."""
    if os.environ.get("LENET_ONEDNN_LIBRARY"):  # set: the only candidate (a typo must not pass)
        return [(os.environ["LENET_ONEDNN_LIBRARY"], "LENET_ONEDNN_LIBRARY")]
    found = [(str(Path(p) / "lib" / "libdnnl.so.3"), "onednn-cpu-gomp wheel") for p in prefixes()
             if (Path(p) / "lib" / "libdnnl.so.3").is_file()]
    return found + [("libdnnl.so.3", "system")]


class Onednn:
    """The loaded library: one attribute per bound function, each checking its status."""

    def __init__(self, path: str, how: str, lib: ctypes.CDLL):
        self.path, self.how, self.lib = path, how, lib
        for name, argtypes in SIGNATURES.items():
            fn = getattr(lib, name)  # AttributeError: a symbol this libdnnl lacks
            fn.argtypes = argtypes
            fn.restype = RESTYPES.get(name, c_int)
            setattr(self, name, fn if name in RESTYPES else self._checked(name, fn))
        v = lib.dnnl_version().contents
        self.version_info = (v.major, v.minor, v.patch)
        self.hash = (v.hash or b"").decode()
        if v.major != 3:
            raise AttributeError(f"oneDNN {v.major}.{v.minor}: this binding follows the v3 C API")

    @property
    def version(self) -> str:
        return ".".join(map(str, self.version_info)) + (f" ({self.hash})" if self.hash else "")

    @staticmethod
    def _checked(name, fn):
        def checked(*args):
            status = fn(*args)
            if status != SUCCESS:
                raise OnednnError(name, status)

        checked.__name__ = name
        return checked


_loaded = None


def load() -> Onednn:
    """The first libdnnl found (see module docstring), or Unavailable naming what was tried."""
    global _loaded
    if _loaded is None:
        _loaded = native.first_library(
            candidates(), Onednn, "libdnnl.so.3 (oneDNN v3)",
            "pip install onednn-cpu-gomp==2023.2.0 (x86_64) or set LENET_ONEDNN_LIBRARY")
    return _loaded


def omp_max_threads() -> int | None:
    """libgomp's omp_get_max_threads(): the thread count oneDNN's OpenMP build will use."""
    try:
        gomp = ctypes.CDLL("libgomp.so.1")  # the copy libdnnl already loaded
    except OSError:
        return None
    gomp.omp_get_max_threads.argtypes, gomp.omp_get_max_threads.restype = [], c_int
    return int(gomp.omp_get_max_threads())


def probe() -> dict:
    """For env.json and doctor: which libdnnl, which version, how many threads; or why none."""
    try:
        lib = load()
    except Unavailable as exc:
        return {"found": False, "reason": str(exc)}
    return {"found": True, "path": lib.path, "how": lib.how, "version": lib.version,
            "threads": omp_max_threads()}


def out_param(ctype=Ptr):
    value = ctype()
    return value, ctypes.byref(value)


def dims(values) -> Dims:
    values = tuple(values)
    if len(values) > MAX_NDIMS:
        raise ValueError(f"at most {MAX_NDIMS} dims, got {values}")
    return Dims(*values)
