"""Primitive descriptors for training LeNet-5 on oneDNN: the forward pass in training mode and
every backward primitive, each a `create(pd_ref)` closure for primitives.Primitive (as
primitives.py does for inference).

A backward primitive descriptor takes its forward one as a hint (`hint`: a Primitive): oneDNN
uses it to pick matching implementations and layouts, and max pooling's backward needs it to
read the workspace the forward wrote (where each window's maximum was).
"""

import ctypes

from lenet_onednn import binding as dnnl
from lenet_onednn.primitives import pd_ptr

STRIDE1, NO_DILATION = (1, 1), (0, 0)  # oneDNN counts dilation from 0
POOL = {"strides": (2, 2), "kernel": (2, 2), "dilation": (0, 0), "pad": (0, 0)}


def conv_geometry(pad):
    """strides, dilates, padding_l, padding_r of a 5x5 stride-1 convolution padded `pad` all round."""
    return dnnl.dims(STRIDE1), dnnl.dims(NO_DILATION), dnnl.dims((pad, pad)), dnnl.dims((pad, pad))


def pool_geometry():
    return (dnnl.dims(POOL["strides"]), dnnl.dims(POOL["kernel"]), dnnl.dims(POOL["dilation"]),
            dnnl.dims(POOL["pad"]), dnnl.dims(POOL["pad"]))


class ScaleAttr:
    """A primitive attribute with one runtime scale for the whole of argument `arg` (mask 0): its
    value comes at execution as a 1-element f32 memory under ARG_ATTR_SCALES | arg."""

    def __init__(self, lib, arg):
        self.lib, self.ptr = lib, dnnl.Ptr()
        lib.dnnl_primitive_attr_create(ctypes.byref(self.ptr))
        lib.dnnl_primitive_attr_set_scales_mask(self.ptr, arg, 0)

    def close(self):
        self.lib.dnnl_primitive_attr_destroy(self.ptr)


# --- forward, training mode ---------------------------------------------------------------
def conv_forward(lib, engine, src, weights, bias, dst, pad):
    def create(ref):
        lib.dnnl_convolution_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_TRAINING, dnnl.CONVOLUTION_DIRECT, pd_ptr(src), pd_ptr(weights),
            pd_ptr(bias), pd_ptr(dst), *conv_geometry(pad), None)
    return create


def relu_forward(lib, engine, data):
    """In place (src = dst = data); the backward reads dst: ReLU'(z) = 1 where dst > 0."""
    def create(ref):
        lib.dnnl_eltwise_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_TRAINING, dnnl.ELTWISE_RELU_USE_DST_FOR_BWD, pd_ptr(data),
            pd_ptr(data), 0.0, 0.0, None)
    return create


def pool_forward(lib, engine, src, dst):
    """Max 2x2 stride 2; training mode: the pd asks for a workspace (QUERY_WORKSPACE_MD)."""
    def create(ref):
        lib.dnnl_pooling_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_TRAINING, dnnl.POOLING_MAX, pd_ptr(src), pd_ptr(dst),
            *pool_geometry(), None)
    return create


def ip_forward(lib, engine, src, weights, bias, dst):
    def create(ref):
        lib.dnnl_inner_product_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_TRAINING, pd_ptr(src), pd_ptr(weights), pd_ptr(bias), pd_ptr(dst),
            None)
    return create


def softmax_forward(lib, engine, src, dst, axis=1):
    def create(ref):
        lib.dnnl_softmax_forward_primitive_desc_create(
            ref, engine, dnnl.FORWARD_TRAINING, dnnl.SOFTMAX_ACCURATE, pd_ptr(src), pd_ptr(dst), axis, None)
    return create


# --- backward ---------------------------------------------------------------------------
def conv_backward_data(lib, engine, diff_src, weights, diff_dst, pad, hint):
    def create(ref):
        lib.dnnl_convolution_backward_data_primitive_desc_create(
            ref, engine, dnnl.CONVOLUTION_DIRECT, pd_ptr(diff_src), pd_ptr(weights), pd_ptr(diff_dst),
            *conv_geometry(pad), hint.pd, None)
    return create


def conv_backward_weights(lib, engine, src, diff_weights, diff_bias, diff_dst, pad, hint):
    def create(ref):
        lib.dnnl_convolution_backward_weights_primitive_desc_create(
            ref, engine, dnnl.CONVOLUTION_DIRECT, pd_ptr(src), pd_ptr(diff_weights), pd_ptr(diff_bias),
            pd_ptr(diff_dst), *conv_geometry(pad), hint.pd, None)
    return create


def relu_backward(lib, engine, diff, dst, hint):
    """In place on the gradient (diff_src = diff_dst = diff): diff *= (dst > 0)."""
    def create(ref):
        lib.dnnl_eltwise_backward_primitive_desc_create(
            ref, engine, dnnl.ELTWISE_RELU_USE_DST_FOR_BWD, pd_ptr(diff), pd_ptr(diff), pd_ptr(dst),
            0.0, 0.0, hint.pd, None)
    return create


def pool_backward(lib, engine, diff_src, diff_dst, hint):
    def create(ref):
        lib.dnnl_pooling_backward_primitive_desc_create(
            ref, engine, dnnl.POOLING_MAX, pd_ptr(diff_src), pd_ptr(diff_dst), *pool_geometry(),
            hint.pd, None)
    return create


def ip_backward_data(lib, engine, diff_src, weights, diff_dst, hint):
    def create(ref):
        lib.dnnl_inner_product_backward_data_primitive_desc_create(
            ref, engine, pd_ptr(diff_src), pd_ptr(weights), pd_ptr(diff_dst), hint.pd, None)
    return create


def ip_backward_weights(lib, engine, src, diff_weights, diff_bias, diff_dst, hint):
    def create(ref):
        lib.dnnl_inner_product_backward_weights_primitive_desc_create(
            ref, engine, pd_ptr(src), pd_ptr(diff_weights), pd_ptr(diff_bias), pd_ptr(diff_dst),
            hint.pd, None)
    return create


def cross_entropy_grad(lib, engine, probs, onehot, dst, attr):
    """dst = (probs - onehot) * (1 / N): binary sub with a linear post-op (alpha 1/N) in `attr`."""
    def create(ref):
        lib.dnnl_binary_primitive_desc_create(ref, engine, dnnl.BINARY_SUB, pd_ptr(probs), pd_ptr(onehot),
                                              pd_ptr(dst), attr.ptr)
    return create


def sgd_binary(lib, engine, md, attr):
    """w = w + (-lr) * grad: binary add in place on w (src0 = dst), both in layout `md`; the scale
    -lr on src1 is a runtime scale (`attr` from ScaleAttr), passed at execution."""
    def create(ref):
        lib.dnnl_binary_primitive_desc_create(ref, engine, dnnl.BINARY_ADD, pd_ptr(md), pd_ptr(md),
                                              pd_ptr(md), attr.ptr)
    return create


def sgd_sum(lib, engine, md, learning_rate):
    """w = 1 * w + (-lr) * grad: a sum primitive, in place on w (source 0 = dst), scales fixed here."""
    scales = (dnnl.c_float * 2)(1.0, -learning_rate)
    srcs = (dnnl.Ptr * 2)(pd_ptr(md), pd_ptr(md))

    def create(ref):
        lib.dnnl_sum_primitive_desc_create(ref, engine, pd_ptr(md), 2, scales, srcs, None)
    return create
