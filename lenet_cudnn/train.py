"""LeNet-5 training on the cuDNN C API and cuBLAS (ctypes), CuPy device memory, NCHW on the device:
one plain SGD step at a time.

    forward  x (N,1,28,28) -conv1+bias, relu in place-> c1 (N,6,28,28) -pool-> p1 (N,6,14,14)
             -conv2+bias, relu-> c2 (N,16,10,10) -pool-> p2 (N,16,5,5) = (N,400) in (c,h,w) order
             -fc1 gemm+bias, relu-> f1 (N,120) -fc2-> f2 (N,84) -fc3-> logits (N,10) -softmax-> probs
    loss     host: mean of logsumexp(logits) - logits[label], float64, from the (N, 10) logits
    backward d_logits = (probs - onehot) / N  (CuPy elementwise on the 10-wide rows)
             fc3, fc2, fc1: dW = X^T dY, dX = dY W^T (cuBLAS gemms, column-major mappings in
             layout.py), db = cudnnConvolutionBackwardBias over the batch; ReLU:
             cudnnActivationBackward in place on the gradient (y for x: the forward was in place)
             pool2: cudnnPoolingBackward (x, y, dy) -> relu2 -> conv2: BackwardFilter, BackwardBias,
             BackwardData -> pool1 -> relu1 -> conv1: BackwardFilter, BackwardBias
    update   w += (-lr) * grad: cublasSaxpy (Daxpy) on each of the 10 tensors

Everything is enqueued on one stream (cuDNN's, cuBLAS' and CuPy's); the step waits once, for the
logits' copy to the host. Descriptors, algorithms (cuDNN's heuristics, deterministic and no TF32
first: train_algos.py) and buffers are made once per batch size. The weights stay on the device
in cuDNN/cuBLAS layouts (KCRS filters, fc1's rows in (c, h, w) order); `weights()` converts them
back to Keras layouts (layout.to_keras).
"""

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.base import LEARNING_RATE, Trainer, check_batch
from harness.data import weights
from harness.errors import Unavailable
from harness.frameworks import gpu_fault
from harness.registry import REGISTRY
from lenet_cudnn import binding as cu
from lenet_cudnn import cublas, layout
from lenet_cudnn.descriptors import LeNetDescriptors
from lenet_cudnn.model import import_cupy
from lenet_cudnn.train_algos import training_algos

SHAPES = {  # NCHW buffer shapes for batch n
    "x": lambda n: (n, 1, 28, 28), "c1": lambda n: (n, 6, 28, 28), "p1": lambda n: (n, 6, 14, 14),
    "c2": lambda n: (n, 16, 10, 10), "p2": lambda n: (n, 16, 5, 5), "f1": lambda n: (n, 120),
    "f2": lambda n: (n, 84), "logits": lambda n: (n, 10), "probs": lambda n: (n, 10),
}
# backward through the dense layers: (layer, its input, its output, fan in, fan out, the layer
# whose ReLU made the input: its gradient goes through that ReLU's backward; p2's to pool2)
DENSE = (("fc3", "f2", "logits", 84, 10, "fc2"), ("fc2", "f1", "f2", 120, 84, "fc1"),
         ("fc1", "p2", "f1", 400, 120, None))


def dense_backward(gemm, blas, one, zero, x, w, dy, dw, dx, batch, fan_in, fan_out):
    """dW (in, out) = X^T dY and, where dx is given, dX (batch, in) = dY W^T: two cuBLAS gemms
    on row-major device buffers (pointers), through their column-major reading (layout.py)."""
    g = layout.dense_backward_weights_gemm_args(batch, fan_in, fan_out)
    gemm(blas, g["transa"], g["transb"], g["m"], g["n"], g["k"], one, dy, g["lda"], x, g["ldb"],
         zero, dw, g["ldc"])
    if dx is not None:
        g = layout.dense_backward_data_gemm_args(batch, fan_in, fan_out)
        gemm(blas, g["transa"], g["transb"], g["m"], g["n"], g["k"], one, w, g["lda"], dy, g["ldb"],
             zero, dx, g["ldc"])


def mean_cross_entropy(logits, labels) -> float:
    """logits (N, 10), labels (N,) -> mean of logsumexp(logits) - logits[label], in float64."""
    z = np.asarray(logits, np.float64)
    z = z - z.max(axis=1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-log_probs[np.arange(len(labels)), labels].mean())


@dataclass(frozen=True)
class TrainPlan:
    """What a step of batch size n needs, allocated once (CudnnTrainer.plan)."""

    d: LeNetDescriptors
    algos: dict  # "conv1.fwd", "conv1.bwd_filter", ... -> (algorithm, workspace bytes, math type)
    ws: Any  # cupy uint8 array: the workspace of every algorithm
    ws_size: int  # bytes the largest one needs
    t: dict  # name -> cupy array: the forward's tensors (SHAPES)
    dt: dict  # name -> cupy array: their gradients


class CudnnTrainer(Trainer):
    spec = REGISTRY["cudnn"]

    def __init__(self, weights_path, device="gpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        self.cp = cp = import_cupy()
        self.lib, self.blas_lib = cu.load(), cublas.load()
        self.handle, self.blas = cu.Handle(), None
        try:
            self.lib.cudnnCreate(ctypes.byref(self.handle))
        except cu.CudnnError as exc:
            raise Unavailable(str(exc)) from None
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.lib.cudnnSetStream(self.handle, self.stream.ptr)
        with self.stream:
            self.blas_ws = cp.empty(cublas.WORKSPACE_BYTES, cp.uint8)
        self.blas = cublas.BlasHandle(self.blas_lib, self.stream.ptr, self.blas_ws.data.ptr,
                                      cublas.WORKSPACE_BYTES)
        f32 = dtype == "float32"
        self.gemm = self.blas_lib.cublasSgemm_v2 if f32 else self.blas_lib.cublasDgemm_v2
        self.axpy = self.blas_lib.cublasSaxpy_v2 if f32 else self.blas_lib.cublasDaxpy_v2
        scalar = ctypes.c_float if f32 else ctypes.c_double
        self.scalars = (scalar(1.0), scalar(0.0), scalar(-self.learning_rate))  # host, kept alive
        self.one, self.zero, self.neg_lr = (ctypes.addressof(s) for s in self.scalars)
        with self.stream:
            self.w = {name: (cp.asarray(k), cp.asarray(b))
                      for name, (k, b) in layout.convert(weights.read(weights_path), dtype).items()}
            self.grad = {name: (cp.empty_like(k), cp.empty_like(b)) for name, (k, b) in self.w.items()}
        self.stream.synchronize()
        self.plans = {}  # batch size -> TrainPlan

    # --- set-up per batch size ------------------------------------------------------------
    def plan(self, n):
        if n not in self.plans:
            cp = self.cp
            d = LeNetDescriptors(self.lib, n, self.dtype)
            try:
                algos = training_algos(self.lib, self.handle, d, self.dtype)
            except BaseException:
                d.close()
                raise
            ws_size = max(size for _, size, _ in algos.values())
            with self.stream:
                t = {name: cp.empty(shape(n), self.dtype) for name, shape in SHAPES.items()}
                dt = {name: cp.empty(SHAPES[name](n), self.dtype)
                      for name in ("c1", "p1", "c2", "p2", "f1", "f2", "logits")}
                ws = cp.empty(max(ws_size, 1), cp.uint8)
            self.plans[n] = TrainPlan(d=d, algos=algos, ws=ws, ws_size=ws_size, t=t, dt=dt)
        return self.plans[n]

    # --- the step ---------------------------------------------------------------------------
    def forward(self, p):
        lib, h, d, t, ptr = self.lib, self.handle, p.d, p.t, (lambda a: a.data.ptr)
        ws, ws_size = ptr(p.ws), p.ws_size
        for name, src, src_desc, w_desc, conv, out, out_desc, pooled, pool_desc in (
                ("conv1", "x", d.x, d.w1, d.conv1, "c1", d.c1, "p1", d.p1),
                ("conv2", "p1", d.p1, d.w2, d.conv2, "c2", d.c2, "p2", d.p2)):
            kernel, bias = self.w[name]
            algo = p.algos[f"{name}.fwd"][0]
            lib.cudnnConvolutionForward(h, self.one, src_desc.ptr, ptr(t[src]), w_desc.ptr, ptr(kernel),
                                        conv.ptr, algo, ws, ws_size, self.zero, out_desc.ptr, ptr(t[out]))
            lib.cudnnAddTensor(h, self.one, d.bias[name].ptr, ptr(bias), self.one, out_desc.ptr, ptr(t[out]))
            lib.cudnnActivationForward(h, d.relu.ptr, self.one, out_desc.ptr, ptr(t[out]), self.zero,
                                       out_desc.ptr, ptr(t[out]))  # in place: c = relu(c)
            lib.cudnnPoolingForward(h, d.pool.ptr, self.one, out_desc.ptr, ptr(t[out]), self.zero,
                                    pool_desc.ptr, ptr(t[pooled]))
        for name, src, out, fan_in, fan_out in (("fc1", "p2", "f1", 400, 120), ("fc2", "f1", "f2", 120, 84),
                                                ("fc3", "f2", "logits", 84, 10)):
            kernel, bias = self.w[name]
            g = layout.dense_gemm_args(p.d.n, fan_in, fan_out)  # Y = X W as Y^T = W^T X^T
            self.gemm(self.blas.ptr, g["transa"], g["transb"], g["m"], g["n"], g["k"], self.one,
                      ptr(kernel), g["lda"], ptr(t[src]), g["ldb"], self.zero, ptr(t[out]), g["ldc"])
            desc = d.fc[name]
            lib.cudnnAddTensor(h, self.one, d.bias[name].ptr, ptr(bias), self.one, desc.ptr, ptr(t[out]))
            if name != "fc3":
                lib.cudnnActivationForward(h, d.relu.ptr, self.one, desc.ptr, ptr(t[out]), self.zero,
                                           desc.ptr, ptr(t[out]))
        desc = d.fc["fc3"]
        lib.cudnnSoftmaxForward(h, cu.SOFTMAX_ACCURATE, cu.SOFTMAX_MODE_CHANNEL, self.one, desc.ptr,
                                ptr(t["logits"]), self.zero, desc.ptr, ptr(t["probs"]))

    def relu_backward(self, relu, desc, y, dy):
        """dy *= (y > 0) in place; y is the ReLU's output, which the in-place forward left as x too."""
        self.lib.cudnnActivationBackward(self.handle, relu.ptr, self.one, desc.ptr, y, desc.ptr, dy,
                                         desc.ptr, y, self.zero, desc.ptr, dy)

    def backward(self, p, labels_dev):
        cp, lib, h, d, t, dt = self.cp, self.lib, self.handle, p.d, p.t, p.dt
        n, ptr = d.n, (lambda a: a.data.ptr)
        ws, ws_size = ptr(p.ws), p.ws_size
        # d_logits (N, 10) = (probs - onehot) / N
        d_logits = dt["logits"]
        cp.copyto(d_logits, t["probs"])
        d_logits[cp.arange(n), labels_dev] -= 1
        d_logits /= n
        for name, src, out, fan_in, fan_out, below in DENSE:
            dkernel, dbias = self.grad[name]
            dense_backward(self.gemm, self.blas.ptr, self.one, self.zero, ptr(t[src]), ptr(self.w[name][0]),
                           ptr(dt[out]), ptr(dkernel), ptr(dt[src]), n, fan_in, fan_out)
            lib.cudnnConvolutionBackwardBias(h, self.one, d.fc[name].ptr, ptr(dt[out]), self.zero,
                                             d.bias[name].ptr, ptr(dbias))  # sum over the batch
            if below:
                self.relu_backward(d.relu, d.fc[below], ptr(t[src]), ptr(dt[src]))
        for name, src, src_desc, w_desc, conv, out, out_desc, pooled, pool_desc in (
                ("conv2", "p1", d.p1, d.w2, d.conv2, "c2", d.c2, "p2", d.p2),
                ("conv1", "x", d.x, d.w1, d.conv1, "c1", d.c1, "p1", d.p1)):
            lib.cudnnPoolingBackward(h, d.pool.ptr, self.one, pool_desc.ptr, ptr(t[pooled]), pool_desc.ptr,
                                     ptr(dt[pooled]), out_desc.ptr, ptr(t[out]), self.zero, out_desc.ptr,
                                     ptr(dt[out]))
            self.relu_backward(d.relu, out_desc, ptr(t[out]), ptr(dt[out]))
            dkernel, dbias = self.grad[name]
            algo = p.algos[f"{name}.bwd_filter"][0]
            lib.cudnnConvolutionBackwardFilter(h, self.one, src_desc.ptr, ptr(t[src]), out_desc.ptr,
                                               ptr(dt[out]), conv.ptr, algo, ws, ws_size, self.zero,
                                               w_desc.ptr, ptr(dkernel))
            lib.cudnnConvolutionBackwardBias(h, self.one, out_desc.ptr, ptr(dt[out]), self.zero,
                                             d.bias[name].ptr, ptr(dbias))
            if name == "conv2":  # the images need no gradient
                algo = p.algos["conv2.bwd_data"][0]
                lib.cudnnConvolutionBackwardData(h, self.one, w_desc.ptr, ptr(self.w[name][0]), out_desc.ptr,
                                                 ptr(dt[out]), conv.ptr, algo, ws, ws_size, self.zero,
                                                 src_desc.ptr, ptr(dt[src]))

    def update(self):
        """w += (-lr) * grad, every kernel and bias: cuBLAS axpy on the flat buffers."""
        for name, tensors in self.w.items():
            for w, g in zip(tensors, self.grad[name], strict=True):
                self.axpy(self.blas.ptr, w.size, self.neg_lr, g.data.ptr, 1, w.data.ptr, 1)

    def run(self, images, labels, update):
        images, labels = check_batch(images, labels)
        p = self.plan(len(images))
        with self.stream:  # CuPy's current stream = the handles' stream
            p.t["x"].set(np.ascontiguousarray(images.transpose(0, 3, 1, 2), self.dtype), self.stream)
            labels_dev = self.cp.asarray(labels)
            self.forward(p)
            self.backward(p, labels_dev)
            if update:
                self.update()
            logits = p.t["logits"].get(stream=self.stream)  # waits for the whole step
        self.stream.synchronize()
        return mean_cross_entropy(logits, labels)

    def train_step(self, images, labels):
        return self.run(images, labels, update=True)

    def gradients(self, images, labels):
        """The loss and the gradients of the current weights, Keras layouts; no update."""
        loss = self.run(images, labels, update=False)
        return loss, self.to_host(self.grad)

    def to_host(self, tensors) -> dict:
        self.stream.synchronize()
        host = {name: (k.get(), b.get()) for name, (k, b) in tensors.items()}
        return {name: weights.Layer(*pair) for name, pair in layout.to_keras(host).items()}

    def weights(self):
        return self.to_host(self.w)

    def close(self):
        # polled with a deadline: a step still running then ends the process as hung, before its
        # memory is freed; a sticky error ends it as a fault (harness.frameworks.gpu_fault)
        gpu_fault.drain(self.stream, 10.0, f"cudnn's trainer ({self.dtype})'s close")
        for p in self.plans.values():
            p.d.close()
        self.plans.clear()
        if self.blas is not None:
            self.blas.close()
            self.blas = None
        self.blas_ws = None
        if self.handle:
            self.lib.cudnnDestroy(self.handle)
            self.handle = cu.Handle()

