"""oneDNN objects for LeNet-5, each owning its C handle: memory descriptors, memories and
primitives (a primitive descriptor, the primitive built from it and the name of the
implementation oneDNN picked). Descriptors need no data, so their shapes and layouts are
tested without running the network."""

import ctypes

from harness.errors import Unavailable
from lenet_onednn import binding as dnnl
from lenet_onednn.binding import Ptr


class CpuEngine:
    """The CPU engine and the one stream every primitive of the level runs on."""

    def __init__(self, lib):
        self.lib, self.engine, self.stream = lib, Ptr(), Ptr()
        try:
            lib.dnnl_engine_create(ctypes.byref(self.engine), dnnl.CPU, 0)
        except dnnl.OnednnError as exc:
            raise Unavailable(f"oneDNN has no CPU engine here: {exc}") from None
        lib.dnnl_stream_create(ctypes.byref(self.stream), self.engine, dnnl.STREAM_DEFAULT_FLAGS)

    def close(self):
        """Destroy both; the handles are zeroed in place, so every holder sees them gone."""
        if self.stream:
            self.lib.dnnl_stream_destroy(self.stream)
            self.stream.value = None
        if self.engine:
            self.lib.dnnl_engine_destroy(self.engine)
            self.engine.value = None


class MemoryDesc:
    """A memory descriptor: logical dims (N, C, H, W) or (O, I, H, W) whatever the layout; the tag
    says how they lie in memory."""

    def __init__(self, lib, dims, data_type, tag):
        self.lib, self.ptr = lib, Ptr()
        lib.dnnl_memory_desc_create_with_tag(ctypes.byref(self.ptr), len(dims), dnnl.dims(dims),
                                             data_type, tag)

    def close(self):
        if self.ptr:
            self.lib.dnnl_memory_desc_destroy(self.ptr)
            self.ptr = Ptr()


def query_int(lib, md, what) -> int:
    value, ref = dnnl.out_param(ctypes.c_int)
    lib.dnnl_memory_desc_query(md, what, ref)
    return value.value


def query_dims(lib, md, what=dnnl.QUERY_DIMS) -> tuple:
    """dims or strides of a memory desc (pointer or MemoryDesc), ndims long."""
    md = getattr(md, "ptr", md)
    found = ctypes.POINTER(dnnl.Dims)()
    lib.dnnl_memory_desc_query(md, what, ctypes.byref(found))
    return tuple(found.contents[:query_int(lib, md, dnnl.QUERY_NDIMS_S32)])


def describe(lib, md) -> dict:
    """dims, and for plain blocked layouts the strides; `blocks` > 0: a blocked layout (nChw8c)."""
    md = getattr(md, "ptr", md)
    kind = query_int(lib, md, dnnl.QUERY_FORMAT_KIND)
    out = {"dims": query_dims(lib, md), "format_kind": kind,
           "bytes": lib.dnnl_memory_desc_get_size(md)}
    if kind == dnnl.FORMAT_KIND_BLOCKED:
        out["strides"] = query_dims(lib, md, dnnl.QUERY_STRIDES)
        out["blocks"] = query_int(lib, md, dnnl.QUERY_INNER_NBLKS_S32)
    return out


def same(lib, a, b) -> bool:
    return bool(lib.dnnl_memory_desc_equal(getattr(a, "ptr", a), getattr(b, "ptr", b)))


class Memory:
    """Memory for a descriptor: at `handle` (a buffer the caller keeps alive) or allocated by
    oneDNN (handle None)."""

    def __init__(self, lib, engine, md, handle=None):
        self.lib, self.ptr = lib, Ptr()
        where = dnnl.MEMORY_ALLOCATE if handle is None else Ptr(handle)
        lib.dnnl_memory_create(ctypes.byref(self.ptr), getattr(md, "ptr", md), engine, where)

    def set_handle(self, address: int):
        self.lib.dnnl_memory_set_data_handle(self.ptr, address)

    def close(self):
        if self.ptr:
            self.lib.dnnl_memory_destroy(self.ptr)
            self.ptr = Ptr()


class EltwiseAttr:
    """A primitive attribute with one eltwise post-op (alg, alpha, beta) applied as the output is
    written: ReLU (ELTWISE_RELU, 0, 0) is max(x, 0), linear (ELTWISE_LINEAR, a, b) is a*x + b."""

    def __init__(self, lib, alg, alpha, beta):
        self.lib, self.ptr, self.ops = lib, Ptr(), Ptr()
        lib.dnnl_post_ops_create(ctypes.byref(self.ops))
        lib.dnnl_post_ops_append_eltwise(self.ops, alg, alpha, beta)  # alpha, beta: c_float
        lib.dnnl_primitive_attr_create(ctypes.byref(self.ptr))
        lib.dnnl_primitive_attr_set_post_ops(self.ptr, self.ops)

    def close(self):
        self.lib.dnnl_primitive_attr_destroy(self.ptr)
        self.lib.dnnl_post_ops_destroy(self.ops)


class Primitive:
    """A primitive descriptor (from `create_pd(pd_ref)`), its primitive and its implementation."""

    def __init__(self, lib, name, create_pd):
        self.lib, self.name, self.pd, self.ptr = lib, name, Ptr(), Ptr()
        create_pd(ctypes.byref(self.pd))
        try:
            impl = ctypes.c_char_p()
            lib.dnnl_primitive_desc_query(self.pd, dnnl.QUERY_IMPL_INFO_STR, 0, ctypes.byref(impl))
            self.impl = impl.value.decode()
            lib.dnnl_primitive_create(ctypes.byref(self.ptr), self.pd)
        except BaseException:
            self.close()
            raise

    def md(self, what) -> Ptr:
        """src/weights/dst memory desc the primitive chose; owned by the pd (do not destroy)."""
        found = self.lib.dnnl_primitive_desc_query_md(self.pd, what, 0)
        if not found:
            raise RuntimeError(f"{self.name}: the primitive has no memory desc for query {what}")
        return Ptr(found)

    def close(self):
        if self.ptr:
            self.lib.dnnl_primitive_destroy(self.ptr)
            self.ptr = Ptr()
        if self.pd:
            self.lib.dnnl_primitive_desc_destroy(self.pd)
            self.pd = Ptr()


def exec_args(pairs) -> tuple:
    """[(DNNL_ARG_*, Memory), ...] -> (count, dnnl_exec_arg_t array), built once per plan."""
    pairs = list(pairs)
    return len(pairs), (dnnl.ExecArg * len(pairs))(*((arg, m.ptr) for arg, m in pairs))


def pd_ptr(md):
    return getattr(md, "ptr", md)


# --- primitive descriptors: forward_inference throughout (max pooling in training mode would
# want a workspace) ---------------------------------------------------------------------------
def convolution(lib, engine, src, weights, bias, dst, pad, attr):
    """5x5 kernel, stride 1, no dilation (oneDNN counts dilation from 0), `pad` on all sides."""
    def create(ref):
        lib.dnnl_convolution_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_INFERENCE, dnnl.CONVOLUTION_DIRECT, pd_ptr(src), pd_ptr(weights),
            pd_ptr(bias), pd_ptr(dst), dnnl.dims((1, 1)), dnnl.dims((0, 0)), dnnl.dims((pad, pad)),
            dnnl.dims((pad, pad)), attr.ptr)
    return create


def max_pool_2x2(lib, engine, src, dst):
    def create(ref):
        lib.dnnl_pooling_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_INFERENCE, dnnl.POOLING_MAX, pd_ptr(src), pd_ptr(dst),
            dnnl.dims((2, 2)), dnnl.dims((2, 2)), dnnl.dims((0, 0)), dnnl.dims((0, 0)),
            dnnl.dims((0, 0)), None)
    return create


def inner_product(lib, engine, src, weights, bias, dst, attr=None):
    def create(ref):
        lib.dnnl_inner_product_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_INFERENCE, pd_ptr(src), pd_ptr(weights), pd_ptr(bias), pd_ptr(dst),
            attr.ptr if attr else None)
    return create


def softmax(lib, engine, src, dst, axis=1):
    def create(ref):
        lib.dnnl_softmax_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_INFERENCE, dnnl.SOFTMAX_ACCURATE, pd_ptr(src), pd_ptr(dst), axis, None)
    return create


def reorder(lib, engine, src, dst):
    def create(ref):
        lib.dnnl_reorder_primitive_desc_create(ref, pd_ptr(src), engine, pd_ptr(dst), engine, None)
    return create
