"""One SGD step of LeNet-5 on oneDNN for batch size n: every memory desc, primitive and memory,
built once, and the order they run in.

Forward (training mode), logical (N, C, H, W) shapes, layouts `any` (picked by the primitives):
    x (N,1,28,28) nhwc -conv1-> c1 (N,6,28,28) -relu in place-> -pool1 (+ws1)-> p1 (N,6,14,14)
      -conv2-> c2 (N,16,10,10) -relu-> -pool2 (+ws2)-> p2 (N,16,5,5)
      -fc1 (inner product on 4-D p2)-> f1 (N,120) -relu-> -fc2-> f2 (N,84) -relu-> -fc3-> logits (N,10) nc
      -softmax-> probs (N,10) nc
The ReLUs are eltwise primitives (relu_use_dst_for_bwd, in place), not fused post-ops: their
backward reads their output. Max pooling writes a workspace (where each window's max was) that
its backward reads.

Loss (host, NumPy, 10 numbers a row): the mean over the batch of logsumexp(logits) -
logits[label], from the logits buffer; it is returned, nothing downstream depends on it.

Backward, every gradient in the layout of the tensor it belongs to (d_c2 in c2's layout, ...):
    d_logits = (probs - onehot) * (1/N)        binary sub + linear post-op (onehot written on the host)
    fc3, fc2, fc1: backward weights (dW, db) and backward data; ReLU backward in place on the gradient
    pool2 backward (ws2) -> relu2 backward -> conv2 backward weights (dW, db) and backward data
    pool1 backward (ws1) -> relu1 backward -> conv1 backward weights (no backward data: x needs none)
SGD (update=True): w += (-lr) * dw for the 10 tensors, binary add in place with a runtime scale
(or a sum primitive with scales where the binary has only reference code for the layout).

Weights live here in the layouts the forward primitives chose; `load` and `export` reorder them
from and to the Keras arrays (layout.py's conventions). Where a backward primitive wants another
layout (conv2's backward data picks its own weights layout), an explicit reorder step is part
of the plan and named in `reorders`.
"""

import numpy as np

from harness.data import weights
from lenet_onednn import backward as B
from lenet_onednn import binding as dnnl
from lenet_onednn import layout
from lenet_onednn import primitives as P

F32 = dnnl.F32
KERNEL_DIMS = {"conv1": (6, 1, 5, 5), "conv2": (16, 6, 5, 5), "fc1": (120, 16, 5, 5),
               "fc2": (84, 120), "fc3": (10, 84)}  # logical (O, I, H, W) / (O, I)
KERAS_SHAPES = {name: shapes for name, shapes in weights.SHAPES.items()}


class Tensor:
    """A memory and the memory desc it was made for (a pointer owned by a pd, or a MemoryDesc)."""

    def __init__(self, lib, engine, md, handle=None):
        self.md = getattr(md, "ptr", md)
        self.mem = P.Memory(lib, engine, self.md, handle)

    @property
    def ptr(self):
        return self.mem.ptr

    def close(self):
        self.mem.close()


class TrainPlan:
    def __init__(self, lib, engine, stream, n, learning_rate):
        self.lib, self.engine, self.stream, self.n = lib, engine, stream, n
        self.owned, self.impl, self.reorders = [], {}, []
        self.forward_steps, self.backward_steps, self.update_steps = [], [], []
        try:
            self.build(n, learning_rate)
        except BaseException:
            self.close()
            raise

    # --- building blocks -------------------------------------------------------------------
    def keep(self, obj):
        self.owned.append(obj)
        return obj

    def md(self, dims, tag=dnnl.TAG_ANY):
        return self.keep(P.MemoryDesc(self.lib, dims, F32, tag))

    def primitive(self, name, create):
        prim = self.keep(P.Primitive(self.lib, name, create))
        self.impl[name] = prim.impl
        return prim

    def first_fast(self, name, creates):
        """(index, Primitive) of the first of `creates` whose implementation is not oneDNN's
        reference code (`ref:`) and exists at all; the last one whatever it is."""
        for i, create in enumerate(creates):
            last = i == len(creates) - 1
            try:
                prim = P.Primitive(self.lib, name, create)
            except dnnl.OnednnError:
                if last:
                    raise
                continue
            if last or not prim.impl.startswith("ref:"):
                self.keep(prim)
                self.impl[name] = prim.impl
                return i, prim
            prim.close()

    def tensor(self, md, handle=None):
        return self.keep(Tensor(self.lib, self.engine, md, handle))

    def step(self, steps, prim, args):
        """Append prim with [(DNNL_ARG_*, Tensor)], each tensor's md checked against the one the
        primitive expects for that argument (no silent layout mismatch)."""
        for arg, t in args:
            if arg & dnnl.ARG_ATTR_SCALES:
                continue
            wanted = self.lib.dnnl_primitive_desc_query_md(prim.pd, dnnl.QUERY_EXEC_ARG_MD, arg)
            if not wanted or not P.same(self.lib, wanted, t.md):
                raise RuntimeError(f"{prim.name}: argument {arg} is not in the layout the primitive expects")
        steps.append((prim, *P.exec_args((arg, t.mem) for arg, t in args)))

    def in_layout(self, steps, name, t, wanted_md):
        """`t` itself where `wanted_md` is its layout, else a copy made by a reorder step in `steps`."""
        if P.same(self.lib, t.md, wanted_md):
            return t
        out = self.tensor(wanted_md)
        r = self.primitive(name, P.reorder(self.lib, self.engine, t.md, wanted_md))
        self.step(steps, r, [(dnnl.ARG_FROM, t), (dnnl.ARG_TO, out)])
        self.reorders.append(name)
        return out

    # --- the network -------------------------------------------------------------------------
    def build(self, n, learning_rate):
        # host buffers the primitives read and write directly
        self.x = np.zeros((n, 28, 28, 1), np.float32)  # NHWC = logical (N, 1, 28, 28) nhwc
        self.logits = np.zeros((n, 10), np.float32)  # fc3's dst, nc: the loss is taken from it
        self.probs = np.zeros((n, 10), np.float32)  # softmax dst, nc
        self.onehot = np.zeros((n, 10), np.float32)  # nc, written from the labels every step
        self.neg_lr = np.array([-learning_rate], np.float32)  # the SGD scale, (1,) x
        self.bias_md = {name: self.md(dims[:1], dnnl.TAG_X) for name, dims in KERNEL_DIMS.items()}
        self.build_forward(n)
        self.build_backward(n)
        self.build_update(learning_rate)

    def build_forward(self, n):
        """Forward primitives, each output layout `any` (the next layer takes it as it is); weights
        in the layouts the primitives pick; activations and workspaces allocated by oneDNN."""
        lib, eng, bias_md, DST = self.lib, self.engine, self.bias_md, dnnl.QUERY_DST_MD
        nc = self.md((n, 10), dnnl.TAG_NC)
        x_md = self.md((n, 1, 28, 28), dnnl.TAG_NHWC)
        f = self.fwd = {}
        f["conv1"] = self.primitive("conv1", B.conv_forward(  # (N,1,28,28) -> (N,6,28,28), "same": pad 2
            lib, eng, x_md, self.md(KERNEL_DIMS["conv1"]), bias_md["conv1"], self.md((n, 6, 28, 28)), 2))
        c1 = f["conv1"].md(DST)
        f["relu1"] = self.primitive("relu1", B.relu_forward(lib, eng, c1))
        f["pool1"] = self.primitive("pool1", B.pool_forward(lib, eng, c1, self.md((n, 6, 14, 14))))
        p1 = f["pool1"].md(DST)
        f["conv2"] = self.primitive("conv2", B.conv_forward(  # -> (N,16,10,10), "valid"
            lib, eng, p1, self.md(KERNEL_DIMS["conv2"]), bias_md["conv2"], self.md((n, 16, 10, 10)), 0))
        c2 = f["conv2"].md(DST)
        f["relu2"] = self.primitive("relu2", B.relu_forward(lib, eng, c2))
        f["pool2"] = self.primitive("pool2", B.pool_forward(lib, eng, c2, self.md((n, 16, 5, 5))))
        p2 = f["pool2"].md(DST)
        f["fc1"] = self.primitive("fc1", B.ip_forward(  # 4-D p2, no flatten -> (N,120)
            lib, eng, p2, self.md(KERNEL_DIMS["fc1"]), bias_md["fc1"], self.md((n, 120))))
        f1 = f["fc1"].md(DST)
        f["relu3"] = self.primitive("relu3", B.relu_forward(lib, eng, f1))
        f["fc2"] = self.primitive("fc2", B.ip_forward(  # -> (N,84)
            lib, eng, f1, self.md(KERNEL_DIMS["fc2"]), bias_md["fc2"], self.md((n, 84))))
        f2 = f["fc2"].md(DST)
        f["relu4"] = self.primitive("relu4", B.relu_forward(lib, eng, f2))
        f["fc3"] = self.primitive("fc3", B.ip_forward(  # -> logits (N,10) nc, no ReLU
            lib, eng, f2, self.md(KERNEL_DIMS["fc3"]), bias_md["fc3"], nc))
        f["softmax"] = self.primitive("softmax", B.softmax_forward(lib, eng, nc, nc))

        self.w = {name: (self.tensor(f[name].md(dnnl.QUERY_WEIGHTS_MD)), self.tensor(bias_md[name]))
                  for name in KERNEL_DIMS}
        t = self.t = {"x": self.tensor(x_md, self.x.ctypes.data)}
        for name, md, host in (("logits", nc, self.logits), ("probs", nc, self.probs),
                               ("onehot", nc, self.onehot)):
            t[name] = self.tensor(md, host.ctypes.data)
        for name, md in (("c1", c1), ("p1", p1), ("c2", c2), ("p2", p2), ("f1", f1), ("f2", f2),
                         ("ws1", f["pool1"].md(dnnl.QUERY_WORKSPACE_MD)),
                         ("ws2", f["pool2"].md(dnnl.QUERY_WORKSPACE_MD))):
            t[name] = self.tensor(md)
        S, D = dnnl.ARG_SRC, dnnl.ARG_DST
        for name, src, dst, ws in (
                ("conv1", "x", "c1", None), ("relu1", "c1", "c1", None), ("pool1", "c1", "p1", "ws1"),
                ("conv2", "p1", "c2", None), ("relu2", "c2", "c2", None), ("pool2", "c2", "p2", "ws2"),
                ("fc1", "p2", "f1", None), ("relu3", "f1", "f1", None), ("fc2", "f1", "f2", None),
                ("relu4", "f2", "f2", None), ("fc3", "f2", "logits", None),
                ("softmax", "logits", "probs", None)):
            args = [(S, t[src]), (D, t[dst])]
            if name in self.w:
                args += [(dnnl.ARG_WEIGHTS, self.w[name][0]), (dnnl.ARG_BIAS, self.w[name][1])]
            if ws:
                args.append((dnnl.ARG_WORKSPACE, t[ws]))
            self.step(self.forward_steps, f[name], args)

    def build_backward(self, n):
        """d_logits, then back through the layers; each gradient in its forward tensor's layout."""
        lib, eng, f, t = self.lib, self.engine, self.fwd, self.t
        mean = self.keep(P.EltwiseAttr(lib, dnnl.ELTWISE_LINEAR, 1.0 / n, 0.0))  # * 1/N
        xent = self.primitive("xent_grad", B.cross_entropy_grad(lib, eng, t["probs"].md, t["onehot"].md,
                                                                t["logits"].md, mean))
        d = self.d = {name: self.tensor(t[name].md)
                      for name in ("logits", "f2", "f1", "p2", "c2", "p1", "c1")}
        self.step(self.backward_steps, xent, [(dnnl.ARG_SRC, t["probs"]), (dnnl.ARG_SRC_1, t["onehot"]),
                                              (dnnl.ARG_DST, d["logits"])])
        self.grad = {}
        for name, src, out, relu in (("fc3", "f2", "logits", "relu4"), ("fc2", "f1", "f2", "relu3"),
                                     ("fc1", "p2", "f1", None)):
            hint = f[name]
            self.weights_grad(name, lambda dw_md, db_md, src=src, out=out, hint=hint: B.ip_backward_weights(
                lib, eng, t[src].md, dw_md, db_md, t[out].md, hint), src, out)
            self.data_grad(name, lambda dsrc_md, w_md, out=out, hint=hint:
                           B.ip_backward_data(lib, eng, dsrc_md, w_md, t[out].md, hint), src, out)
            if relu:
                self.relu_grad(relu, src)
        self.pool_grad("pool2", "c2", "p2", "ws2")
        self.relu_grad("relu2", "c2")
        self.weights_grad("conv2", lambda dw_md, db_md: B.conv_backward_weights(
            lib, eng, t["p1"].md, dw_md, db_md, t["c2"].md, 0, f["conv2"]), "p1", "c2")
        self.data_grad("conv2", lambda dsrc_md, w_md: B.conv_backward_data(
            lib, eng, dsrc_md, w_md, t["c2"].md, 0, f["conv2"]), "p1", "c2")
        self.pool_grad("pool1", "c1", "p1", "ws1")
        self.relu_grad("relu1", "c1")
        self.weights_grad("conv1", lambda dw_md, db_md: B.conv_backward_weights(  # x needs no gradient
            lib, eng, t["x"].md, dw_md, db_md, t["c1"].md, 2, f["conv1"]), "x", "c1")

    def weights_grad(self, name, make, src, out):
        """dW in the layout the primitive picks (`any`), db (K,) x; src: the forward input, out:
        the gradient of the forward output."""
        prim = self.primitive(f"{name}.bwd_weights", make(self.md(KERNEL_DIMS[name]), self.bias_md[name]))
        self.grad[name] = (self.tensor(prim.md(dnnl.QUERY_DIFF_WEIGHTS_MD)), self.tensor(self.bias_md[name]))
        self.step(self.backward_steps, prim, [(dnnl.ARG_SRC, self.t[src]), (dnnl.ARG_DIFF_DST, self.d[out]),
                                              (dnnl.ARG_DIFF_WEIGHTS, self.grad[name][0]),
                                              (dnnl.ARG_DIFF_BIAS, self.grad[name][1])])

    def data_grad(self, name, make, src, out):
        """d(src) from d(out) and the weights. The gradient's layout is left to oneDNN (`any`: it
        picks faster code than with the layout forced, even where it then picks the same), the
        weights' too unless the forward's layout has fast code; reorder steps where they differ."""
        kernel = self.w[name][0]
        diff_src_any = self.md(P.query_dims(self.lib, self.t[src].md))
        _, prim = self.first_fast(f"{name}.bwd_data", [make(diff_src_any, md)
                                                        for md in (kernel.md, self.md(KERNEL_DIMS[name]))])
        steps = self.backward_steps
        kernel = self.in_layout(steps, f"{name}.weights_to_bwd_data", kernel, prim.md(dnnl.QUERY_WEIGHTS_MD))
        diff_src_md = prim.md(dnnl.QUERY_DIFF_SRC_MD)
        same = P.same(self.lib, diff_src_md, self.d[src].md)
        diff_src = self.d[src] if same else self.tensor(diff_src_md)
        self.step(steps, prim, [(dnnl.ARG_DIFF_DST, self.d[out]), (dnnl.ARG_WEIGHTS, kernel),
                                (dnnl.ARG_DIFF_SRC, diff_src)])
        if not same:
            r = self.primitive(f"{name}.diff_src_to_src_layout",
                               P.reorder(self.lib, self.engine, diff_src_md, self.d[src].md))
            self.step(steps, r, [(dnnl.ARG_FROM, diff_src), (dnnl.ARG_TO, self.d[src])])
            self.reorders.append(r.name)

    def relu_grad(self, name, out):
        """In place on d[out]: d *= (out > 0), out being the ReLU's (in-place) output."""
        t, d = self.t[out], self.d[out]
        prim = self.primitive(f"{name}.bwd", B.relu_backward(self.lib, self.engine, t.md, t.md,
                                                             self.fwd[name]))
        self.step(self.backward_steps, prim,
                  [(dnnl.ARG_DST, t), (dnnl.ARG_DIFF_DST, d), (dnnl.ARG_DIFF_SRC, d)])

    def pool_grad(self, name, src, out, ws):
        """d(src) from d(out): each window's gradient to the max the workspace recorded."""
        prim = self.primitive(f"{name}.bwd", B.pool_backward(self.lib, self.engine, self.t[src].md,
                                                             self.t[out].md, self.fwd[name]))
        self.step(self.backward_steps, prim, [(dnnl.ARG_DIFF_DST, self.d[out]),
                                              (dnnl.ARG_WORKSPACE, self.t[ws]),
                                              (dnnl.ARG_DIFF_SRC, self.d[src])])

    def build_update(self, learning_rate):
        """SGD, w += (-lr) * dw in place, each gradient first in its weight's layout: a binary add
        with a runtime scale, or a sum with scales where the binary has only reference code for
        the layout (and the last resort whatever its code: both are ref for fc2's and fc3's
        blocked brgemm weights at some batch sizes; they are small)."""
        lib, eng = self.lib, self.engine
        scale_attr = self.keep(B.ScaleAttr(lib, dnnl.ARG_SRC_1))
        neg_lr = self.tensor(self.md((1,), dnnl.TAG_X), self.neg_lr.ctypes.data)
        for name in KERNEL_DIMS:
            for i, part in enumerate(("kernel", "bias")):
                w, steps = self.w[name][i], self.update_steps
                g = self.in_layout(steps, f"{name}.d{part}_to_weights_layout", self.grad[name][i], w.md)
                kind, prim = self.first_fast(f"{name}.sgd_{part}", [
                    B.sgd_binary(lib, eng, w.md, scale_attr), B.sgd_sum(lib, eng, w.md, learning_rate)])
                args = ([(dnnl.ARG_SRC, w), (dnnl.ARG_SRC_1, g), (dnnl.ARG_DST, w),
                         (dnnl.ARG_ATTR_SCALES | dnnl.ARG_SRC_1, neg_lr)] if kind == 0 else
                        [(dnnl.ARG_MULTIPLE_SRC, w), (dnnl.ARG_MULTIPLE_SRC + 1, g), (dnnl.ARG_DST, w)])
                self.step(steps, prim, args)

    # --- running -----------------------------------------------------------------------------
    def run(self, steps):
        execute = self.lib.dnnl_primitive_execute
        for prim, count, args in steps:
            execute(prim.ptr, self.stream, count, args)

    def train(self, images, labels, update=True) -> float:
        """images (N, 28, 28, 1), labels (N,) int in [0, 10) -> the mean loss before the update."""
        np.copyto(self.x, images)
        self.onehot.fill(0.0)
        self.onehot[np.arange(self.n), labels] = 1.0
        self.run(self.forward_steps)
        self.run(self.backward_steps)
        if update:
            self.run(self.update_steps)
        self.lib.dnnl_stream_wait(self.stream)
        return mean_cross_entropy(self.logits, labels)

    # --- weights in and out, Keras layouts -------------------------------------------------------
    def copy(self, src_md, src, dst_md, dst):
        """One reorder from memory `src` to `dst` (each with .ptr), made, run and destroyed:
        loading and reading weights, not part of the step."""
        r = P.Primitive(self.lib, "copy", P.reorder(self.lib, self.engine, src_md, dst_md))
        try:
            count, args = P.exec_args([(dnnl.ARG_FROM, src), (dnnl.ARG_TO, dst)])
            self.lib.dnnl_primitive_execute(r.ptr, self.stream, count, args)
            self.lib.dnnl_stream_wait(self.stream)
        finally:
            r.close()

    def transfer(self, tensors, layers=None, to_keras=True) -> dict:
        """Between `tensors` {name: (kernel Tensor, bias Tensor)} and Keras arrays: filled from
        `layers` (to_keras False) or returned as new arrays (to_keras True)."""
        out = {}
        for name, (kernel_t, bias_t) in tensors.items():
            if to_keras:
                kshape, bshape = KERAS_SHAPES[name]
                keras = weights.Layer(np.empty(kshape, np.float32), np.empty(bshape, np.float32))
            else:
                keras = weights.Layer(np.ascontiguousarray(layers[name].kernel, np.float32),
                                      np.ascontiguousarray(layers[name].bias, np.float32))
            kview, kdims, ktag = layout.KERNELS[name](keras.kernel)  # same bytes, logical dims + tag
            bview, bdims, btag = layout.bias(keras.bias)
            for view, dims, tag, t in ((kview, kdims, ktag, kernel_t), (bview, bdims, btag, bias_t)):
                user_md = P.MemoryDesc(self.lib, dims, F32, tag)
                user = P.Memory(self.lib, self.engine, user_md, view.ctypes.data)
                try:
                    if to_keras:
                        self.copy(t.md, t, user_md, user)
                    else:
                        self.copy(user_md, user, t.md, t)
                finally:
                    user.close()
                    user_md.close()
            out[name] = keras
        return out

    def load(self, layers: dict):
        """Keras arrays {"conv1": Layer(kernel HWIO, bias), ...} into this plan's weight layouts."""
        self.transfer(self.w, layers, to_keras=False)

    def export(self) -> dict:
        return self.transfer(self.w)

    def gradients(self) -> dict:
        """The last step's gradients in Keras layouts (the layouts of the weights they belong to)."""
        return self.transfer(self.grad)

    def close(self):
        for obj in reversed(self.owned):
            obj.close()
        self.owned = []
        self.forward_steps, self.backward_steps, self.update_steps = [], [], []


def mean_cross_entropy(logits, labels) -> float:
    """logits (N, 10), labels (N,) -> mean of logsumexp(logits) - logits[label], in float64."""
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-log_probs[np.arange(len(labels)), labels].mean())

