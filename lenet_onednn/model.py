"""LeNet-5 on the oneDNN v3 C API (ctypes), on the CPU: the raw-library rung, cuDNN's twin.

    x (N,28,28,1) = logical (N,1,28,28) nhwc -conv1+bias+relu-> (N,6,28,28)
      -pool-> (N,6,14,14) -conv2+bias+relu-> (N,16,10,10) -pool-> (N,16,5,5)
      -fc1 (inner product on the 4-D pool2 output)+bias+relu-> (N,120) -fc2-> (N,84)
      -fc3+bias-> (N,10) -softmax-> (N,10) host
Shapes are oneDNN's logical (N, C, H, W); the layouts between layers are whatever the
primitives pick (format tag `any`), often blocked (nChw8c / nChw16c). Bias and ReLU are fused
into the convolutions and inner products (bias argument, ReLU post-op). Layout conversions:
the input is given as nhwc (conv1 takes it as it is: with one input channel anything else
makes oneDNN reorder every call); the Keras weights are reordered into the primitives'
layouts (layout.py); the output is plain (N, 10). Nothing else is converted.

Variants:
- tuned: everything built once per batch size (memory descs, primitives, memories, weights
  reordered once); a call copies the images in, executes the primitives on one stream,
  waits, and copies the probabilities out.
- naive: what a first attempt writes (oneDNN's getting-started example, per call): the same
  network, but every memory desc, primitive desc, primitive, memory and weight reorder made
  and destroyed inside each call. oneDNN's primitive cache (process-global, on by default)
  spares it most of the JIT code generation.
- naive_nocache: naive with the primitive cache at capacity 0 while this object predicts
  (set at the start of each predict, the old capacity restored at its end, since the cache is
  shared by the whole process). Setting 0 empties the cache, so a naive object in the same
  process misses once after each naive_nocache call.

float32 only: oneDNN 3.2 has no f64 convolution, pooling or inner product on the CPU
(dnnl_unimplemented; f64 is a GPU-only data type there).
"""

import ctypes

import numpy as np

from harness.base import LeNet, check_images
from harness.data import weights
from harness.registry import REGISTRY
from lenet_onednn import binding as dnnl
from lenet_onednn import layout
from lenet_onednn import primitives as P

EXPECTED = {  # logical (N, C, H, W) / (N, features) shapes of every layer's output, batch n
    "conv1": lambda n: (n, 6, 28, 28),
    "pool1": lambda n: (n, 6, 14, 14),
    "conv2": lambda n: (n, 16, 10, 10),
    "pool2": lambda n: (n, 16, 5, 5),
    "fc1": lambda n: (n, 120),
    "fc2": lambda n: (n, 84),
    "fc3": lambda n: (n, 10),
    "softmax": lambda n: (n, 10),
}


class Plan:
    """Every memory desc, primitive and memory of LeNet-5 for batch size n, and the execution
    order. `x` and `out` are NumPy buffers the first and last primitive read and write."""

    def __init__(self, lib, engine, stream, n, data_type, w, np_dtype):
        self.lib, self.n, self.owned = lib, n, []
        self.impl = {}  # primitive name -> oneDNN implementation
        self.steps = []  # (primitive, nargs, dnnl_exec_arg_t array)
        try:
            self.build(engine, stream, n, data_type, w, np_dtype)
        except BaseException:
            self.close()
            raise

    def keep(self, obj):
        self.owned.append(obj)
        return obj

    def md(self, dims, data_type, tag):
        return self.keep(P.MemoryDesc(self.lib, dims, data_type, tag))

    def primitive(self, name, create):
        prim = self.keep(P.Primitive(self.lib, name, create))
        self.impl[name] = prim.impl
        return prim

    def weights_memory(self, engine, stream, name, user, wanted_md, data_type):
        """The Keras array (layout.py) as memory in the layout the primitive wants: wrapped as it
        is where the layouts agree, else reordered once into oneDNN-allocated memory."""
        array, dims, tag = user
        user_md = self.md(dims, data_type, tag)
        user_mem = self.keep(P.Memory(self.lib, engine, user_md, array.ctypes.data))
        if P.same(self.lib, user_md, wanted_md):
            return user_mem
        mem = self.keep(P.Memory(self.lib, engine, wanted_md))
        r = self.primitive(f"{name}.weights_reorder", P.reorder(self.lib, engine, user_md, wanted_md))
        count, args = P.exec_args([(dnnl.ARG_FROM, user_mem), (dnnl.ARG_TO, mem)])
        self.lib.dnnl_primitive_execute(r.ptr, stream, count, args)
        self.lib.dnnl_stream_wait(stream)
        return mem

    def build(self, engine, stream, n, dt, w, np_dtype):
        lib, ANY = self.lib, dnnl.TAG_ANY
        self.arrays = w  # the user weights' buffers stay alive as long as the plan
        self.x = np.zeros((n, 28, 28, 1), np_dtype)  # NHWC = logical (N, 1, 28, 28) nhwc
        self.out = np.zeros((n, 10), np_dtype)  # (N, 10) nc
        relu = self.keep(P.EltwiseAttr(lib, dnnl.ELTWISE_RELU, 0.0, 0.0))
        bias_md = {name: self.md(b[1], dt, b[2]) for name, (_, b) in w.items()}  # (K,) x

        x_md = self.md((n, 1, 28, 28), dt, dnnl.TAG_NHWC)  # explicit: conv1's src as given
        # each layer's output layout is `any`: the primitive picks it, the next layer takes it as is
        conv1 = self.primitive("conv1", P.convolution(  # (N, 1, 28, 28) -> (N, 6, 28, 28)
            lib, engine, x_md, self.md((6, 1, 5, 5), dt, ANY), bias_md["conv1"],
            self.md((n, 6, 28, 28), dt, ANY), 2, relu))  # "same": pad 2
        pool1 = self.primitive("pool1", P.max_pool_2x2(  # -> (N, 6, 14, 14)
            lib, engine, conv1.md(dnnl.QUERY_DST_MD), self.md((n, 6, 14, 14), dt, ANY)))
        conv2 = self.primitive("conv2", P.convolution(  # -> (N, 16, 10, 10)
            lib, engine, pool1.md(dnnl.QUERY_DST_MD), self.md((16, 6, 5, 5), dt, ANY), bias_md["conv2"],
            self.md((n, 16, 10, 10), dt, ANY), 0, relu))  # "valid"
        pool2 = self.primitive("pool2", P.max_pool_2x2(  # -> (N, 16, 5, 5)
            lib, engine, conv2.md(dnnl.QUERY_DST_MD), self.md((n, 16, 5, 5), dt, ANY)))
        fc1 = self.primitive("fc1", P.inner_product(  # 4-D pool2 output, no flatten -> (N, 120)
            lib, engine, pool2.md(dnnl.QUERY_DST_MD), self.md((120, 16, 5, 5), dt, ANY), bias_md["fc1"],
            self.md((n, 120), dt, ANY), relu))
        fc2 = self.primitive("fc2", P.inner_product(  # -> (N, 84)
            lib, engine, fc1.md(dnnl.QUERY_DST_MD), self.md((84, 120), dt, ANY), bias_md["fc2"],
            self.md((n, 84), dt, ANY), relu))
        fc3 = self.primitive("fc3", P.inner_product(  # -> (N, 10)
            lib, engine, fc2.md(dnnl.QUERY_DST_MD), self.md((10, 84), dt, ANY), bias_md["fc3"],
            self.md((n, 10), dt, ANY)))  # no ReLU: logits
        softmax = self.primitive("softmax", P.softmax(  # over the 10 classes (axis 1) -> (N, 10) nc
            lib, engine, fc3.md(dnnl.QUERY_DST_MD), self.md((n, 10), dt, dnnl.TAG_NC)))
        chain = {"conv1": conv1, "pool1": pool1, "conv2": conv2, "pool2": pool2,
                 "fc1": fc1, "fc2": fc2, "fc3": fc3, "softmax": softmax}
        for name, prim in chain.items():
            found = P.query_dims(lib, prim.md(dnnl.QUERY_DST_MD))
            if found != EXPECTED[name](n):
                raise ValueError(f"oneDNN gives {name} shape {found}, LeNet-5 needs {EXPECTED[name](n)}")

        # memories: in and out at the NumPy buffers, the activations allocated by oneDNN
        mem = {"x": self.keep(P.Memory(lib, engine, x_md, self.x.ctypes.data))}
        for name, prim in chain.items():
            handle = self.out.ctypes.data if name == "softmax" else None
            mem[name] = self.keep(P.Memory(lib, engine, prim.md(dnnl.QUERY_DST_MD), handle))
        src, src_md = "x", x_md
        for name, prim in chain.items():
            args = [(dnnl.ARG_SRC, mem[src]), (dnnl.ARG_DST, mem[name])]
            if name in w:
                kernel, b = w[name]
                args.append((dnnl.ARG_WEIGHTS, self.weights_memory(
                    engine, stream, name, kernel, prim.md(dnnl.QUERY_WEIGHTS_MD), dt)))
                args.append((dnnl.ARG_BIAS, self.keep(P.Memory(lib, engine, bias_md[name],
                                                                b[0].ctypes.data))))
            # each layer reads the layout the one before it wrote: no hidden reorders
            if not P.same(lib, prim.md(dnnl.QUERY_SRC_MD), src_md):
                raise RuntimeError(f"{name}: its source layout is not its input's")
            self.steps.append((prim, *P.exec_args(args)))
            src, src_md = name, prim.md(dnnl.QUERY_DST_MD)

    def run(self, stream):
        execute = self.lib.dnnl_primitive_execute
        for prim, count, args in self.steps:
            execute(prim.ptr, stream, count, args)
        self.lib.dnnl_stream_wait(stream)

    def close(self):
        for obj in reversed(self.owned):
            obj.close()
        self.owned = []
        self.steps = []


class OnednnLeNet(LeNet):
    spec = REGISTRY["onednn"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.lib = lib = dnnl.load()
        self.data_type = dnnl.DATA_TYPES[dtype]
        self.w = layout.convert(weights.read(weights_path), dtype)
        self.cpu = P.CpuEngine(lib)
        self.engine, self.stream = self.cpu.engine, self.cpu.stream
        self.plans = {}  # tuned: batch size -> Plan

    def plan(self, n) -> Plan:
        return Plan(self.lib, self.engine, self.stream, n, self.data_type, self.w, self.dtype)

    def predict_naive(self, images):
        p = self.plan(len(images))
        try:
            np.copyto(p.x, images)
            p.run(self.stream)
            return p.out.copy()
        finally:
            p.close()

    def predict_tuned(self, images):
        n = len(images)
        if n not in self.plans:
            self.plans[n] = self.plan(n)
        p = self.plans[n]
        np.copyto(p.x, images)  # (N, 28, 28, 1) into the nhwc input buffer
        p.run(self.stream)
        return p.out.copy()  # (N, 10)

    def predict(self, images):
        images = check_images(images)
        if self.variant == "tuned":
            return self.predict_tuned(images)
        if self.variant == "naive":
            return self.predict_naive(images)
        before, ref = dnnl.out_param(ctypes.c_int)  # naive_nocache
        self.lib.dnnl_get_primitive_cache_capacity(ref)
        self.lib.dnnl_set_primitive_cache_capacity(0)
        try:
            return self.predict_naive(images)
        finally:
            self.lib.dnnl_set_primitive_cache_capacity(before.value)

    def impl_info(self, n=1) -> dict[str, str]:
        """primitive name -> the implementation oneDNN picked (a `ref:` one is the slow
        reference code: a sign of a layout it has no optimized kernel for)."""
        if self.variant == "tuned":
            if n not in self.plans:
                self.plans[n] = self.plan(n)
            return dict(self.plans[n].impl)
        p = self.plan(n)
        try:
            return dict(p.impl)
        finally:
            p.close()

    def close(self):
        for p in self.plans.values():
            p.close()
        self.plans.clear()
        self.cpu.close()
