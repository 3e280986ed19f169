"""LeNet-5 on the cuDNN C API (ctypes), CuPy device memory and cuBLAS gemm (ctypes), NCHW on the device.

    x (N,1,28,28) -conv1+bias+relu-> (N,6,28,28) -pool-> (N,6,14,14)
      -conv2+bias+relu-> (N,16,10,10) -pool-> (N,16,5,5) = (N,400) in (c,h,w) order
      -fc1 gemm+bias+relu-> (N,120) -fc2-> (N,84) -fc3+bias-> (N,10) -softmax-> host

Variants:
- naive: what a first attempt does. Per image: create every descriptor, ask cuDNN for an
  algorithm (cudnnGetConvolutionForwardAlgorithm_v7), cudaMalloc fresh buffers and workspace,
  synchronous copies from pageable memory; all freed again at the end of the call.
- tuned: descriptors once per batch size, the algorithm picked once by timing them
  (cudnnFindConvolutionForwardAlgorithm), each convolution, its bias and ReLU in one call
  (cudnnConvolutionBiasActivationForward; three calls where cuDNN refuses it), each dense layer,
  its bias and ReLU in one cuBLASLt matmul with a bias (+ReLU) epilogue (cublaslt.py; the cuBLAS
  gemm + two cuDNN tensor ops where cuBLASLt refuses, the reason kept in dense_note), buffers and
  workspace preallocated, pinned host memory, asynchronous copies on one stream, one
  synchronization per call, CUDA events around the work for the device time. Every call of a
  predict (the copies, cuDNN's, cuBLASLt's) is built once per batch size as (function, argument
  tuple): the per-call Python is one loop over them.
- graph: tuned, with the whole call (copy in, the layers, copy out) captured once per batch
  size into a CUDA graph and replayed: one launch per call instead of ~20 enqueued calls.
- frontend: not this legacy API but cuDNN's graph API, through NVIDIA's Python frontend
  (lenet_cudnn/frontend.py, counted apart): fused operation graphs, replayed as one CUDA graph.

cuDNN and cuBLAS share one stream, fixed when the level is built; the gemms go through a
cuBLAS handle of the level's own (lenet_cudnn/cublas.py), because CuPy's re-binds its stream
on every call, which a stream being captured refuses. float32 stays float32: the convolutions
use FMA math and an algorithm whose math type is not tensor-op (TF32), cuBLAS its default math.
"""

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.base import LeNet
from harness.data import weights
from harness.errors import Unavailable
from harness.frameworks import cupy_setup, gpu_fault
from harness.registry import REGISTRY
from lenet_cudnn import binding as cu
from lenet_cudnn import cublas, cublaslt, layout
from lenet_cudnn.descriptors import LeNetDescriptors

H2D, D2H = 1, 2  # cudaMemcpyKind
TENSOR_OP_MATH = (1, 2)  # CUDNN_TENSOR_OP_MATH, _ALLOW_CONVERSION: TF32 in float32
# the dense layers: name, input buffer, fan in, fan out, ReLU
DENSE = (("fc1", "p2", 400, 120, True), ("fc2", "fc1", 120, 84, True), ("fc3", "fc2", 84, 10, False))
CLOSE_WAIT_S = 10.0  # close(): the stream's work waited for (polled) at most this long, then: hung


@dataclass
class Plan:
    """Everything a tuned or graph call of batch size n needs, built once (CudnnLeNet.plan): the
    fields after `events` are filled in as the plan is checked (fusion, cuBLASLt), then captured."""

    d: LeNetDescriptors
    algos: list  # the two convolutions' forward algorithms (Find's fastest usable)
    conv_math: list  # their math types (never tensor-op in float32)
    ws: Any  # cupy uint8 array: the convolutions' workspace
    ws_size: int  # bytes the algorithms need (ws holds at least 1)
    arrays: dict  # name -> cupy uint8 array: x c1 p1 c2 p2 fc1 fc2 fc3 out, kept alive
    buf: dict  # name -> the array's device pointer
    pinned: tuple  # (in, out) pinned host memory, kept alive
    host_in: np.ndarray  # (N, 1, 28, 28) NCHW in pinned memory
    host_out: np.ndarray  # (N, 10) in pinned memory
    events: tuple  # (start, end) CUDA events around the work
    fused: bool = False  # conv + bias + ReLU in one cuDNN call
    lt: dict | None = None  # name -> cublaslt.DenseMatmul, or None: cuBLAS gemm + cuDNN ops
    calls: tuple | None = None  # (function, argument tuple) of the whole call, in order; None: unchecked
    graph: Any = None  # graph: the captured cupy.cuda.graph.Graph


def import_cupy():
    cupy = cupy_setup.import_cupy()
    try:
        import cupy.cuda.cublas  # noqa: F401  loads CuPy's libcublas: cublas.load() binds that copy
    except ImportError:
        pass  # no libcublas for CuPy: cublas.load() says what it tried
    return cupy


class CudnnLeNet(LeNet):
    spec = REGISTRY["cudnn"]

    def __init__(self, weights_path, device="gpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        gpu_fault.refuse_quarantined("cudnn", self.variant, dtype)  # the smoke found it hung or faulted
        self.cp = cp = import_cupy()
        self.lib = cu.load()
        self.blas_lib = cublas.load()
        self.handle, self.blas = cu.Handle(), None
        try:
            self.lib.cudnnCreate(ctypes.byref(self.handle))
        except cu.CudnnError as exc:
            raise Unavailable(str(exc)) from None
        # naive: the legacy default stream, what a first attempt uses; tuned and graph: a
        # stream of their own (a graph cannot be captured on the legacy default stream)
        own = self.variant != "naive"
        self.stream = cp.cuda.Stream(non_blocking=True) if own else cp.cuda.Stream.null
        self.lib.cudnnSetStream(self.handle, self.stream.ptr)  # cuDNN and cuBLAS on one stream
        with self.stream:
            self.blas_ws = cp.empty(cublas.WORKSPACE_BYTES, cp.uint8)  # fixed address, kept alive
        self.blas = cublas.BlasHandle(self.blas_lib, self.stream.ptr, self.blas_ws.data.ptr,
                                      cublas.WORKSPACE_BYTES)
        self.gemm = (self.blas_lib.cublasSgemm_v2 if dtype == "float32"
                     else self.blas_lib.cublasDgemm_v2)
        scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
        self.one, self.zero = scalar(1.0), scalar(0.0)  # alpha/beta, host memory, kept alive
        self.alpha, self.beta = ctypes.addressof(self.one), ctypes.addressof(self.zero)
        self.itemsize = np.dtype(dtype).itemsize
        with self.stream:
            self.w = {name: (cp.asarray(k), cp.asarray(b))
                      for name, (k, b) in layout.convert(weights.read(weights_path), dtype).items()}
        self.stream.synchronize()
        self.plans = {}  # tuned, graph: batch size -> preallocated everything (and the graph)
        self.conv_math = []  # the math types of the convolution algorithms last picked
        self.fusion_note = None  # tuned, graph: whether the convolutions run fused, and why not
        self.dense_note = None  # tuned, graph: whether the dense layers are cuBLASLt matmuls, and why not
        self.last_device_ns = None
        self.lt, self.lt_handle = None, cublaslt.Handle()
        self.fe = None  # frontend: the graph API's state (its stream, legacy handle and weights are these)
        if self.variant != "naive":  # tuned, graph, frontend: the dense layers through cuBLASLt
            try:
                self.lt = cublaslt.load()
                self.lt.cublasLtCreate(ctypes.byref(self.lt_handle))
            except (Unavailable, cublas.CublasError) as exc:
                self.lt = None
                self.dense_note = f"cuBLAS gemm + cuDNN bias and ReLU: no cuBLASLt ({exc})"
        if self.variant == "frontend":
            from lenet_cudnn import frontend

            self.fe = frontend.FrontendNet(self)

    # --- the layers ----------------------------------------------------------------------
    # --- the layers, each as the (function, argument tuple) calls that run it ----------------
    def conv_bias_relu(self, d, x_desc, x, w_desc, conv, name, y_desc, y, algo, ws, ws_size, fused):
        kernel, bias = self.w[name]
        lib, h = self.lib, self.handle
        if fused:  # alpha2 = 0: the z input (y itself here) is not read
            return [(lib.cudnnConvolutionBiasActivationForward, (
                h, self.alpha, x_desc.ptr, x, w_desc.ptr, kernel.data.ptr, conv.ptr, algo, ws, ws_size,
                self.beta, y_desc.ptr, y, d.bias[name].ptr, bias.data.ptr, d.relu.ptr, y_desc.ptr, y))]
        return [(lib.cudnnConvolutionForward, (h, self.alpha, x_desc.ptr, x, w_desc.ptr, kernel.data.ptr,
                                               conv.ptr, algo, ws, ws_size, self.beta, y_desc.ptr, y)),
                (lib.cudnnAddTensor, (h, self.alpha, d.bias[name].ptr, bias.data.ptr, self.alpha,
                                      y_desc.ptr, y)),
                (lib.cudnnActivationForward, (h, d.relu.ptr, self.alpha, y_desc.ptr, y, self.beta,
                                              y_desc.ptr, y))]

    def pool(self, d, x_desc, x, y_desc, y):
        return [(self.lib.cudnnPoolingForward, (self.handle, d.pool.ptr, self.alpha, x_desc.ptr, x,
                                                self.beta, y_desc.ptr, y))]

    def dense(self, d, name, x, y, fan_in, fan_out, relu=True, lt=None):
        """y (n, out) = x (n, in) @ W (in, out) + b, as Y^T = W^T X^T in cuBLAS' column-major:
        one cuBLASLt matmul with the bias (and ReLU) in its epilogue where `lt` (the plan's
        cublaslt.DenseMatmul per layer) has it, else the gemm and two cuDNN tensor ops."""
        if lt is not None:
            return [(self.lt.cublasLtMatmul, lt[name].args)]
        kernel, bias = self.w[name]
        g = layout.dense_gemm_args(d.n, fan_in, fan_out)
        y_desc = d.fc[name]
        calls = [(self.gemm, (self.blas.ptr, g["transa"], g["transb"], g["m"], g["n"], g["k"], self.alpha,
                              kernel.data.ptr, g["lda"], x, g["ldb"], self.beta, y, g["ldc"])),
                 (self.lib.cudnnAddTensor, (self.handle, self.alpha, d.bias[name].ptr, bias.data.ptr,
                                            self.alpha, y_desc.ptr, y))]
        if relu:
            calls.append((self.lib.cudnnActivationForward, (self.handle, d.relu.ptr, self.alpha, y_desc.ptr,
                                                            y, self.beta, y_desc.ptr, y)))
        return calls

    def forward(self, d, buf, algos, ws, ws_size, fused=False, lt=None):
        """Device pointers in `buf`; everything enqueued on the stream the handles are bound to."""
        for fn, args in self.layers(d, buf, algos, ws, ws_size, fused, lt):
            fn(*args)

    def layers(self, d, buf, algos, ws, ws_size, fused, lt=None) -> list:
        """The forward pass as (function, argument tuple) calls, in order."""
        d3 = d.fc["fc3"]
        return [
            *self.conv_bias_relu(d, d.x, buf["x"], d.w1, d.conv1, "conv1", d.c1, buf["c1"],
                                 algos[0], ws, ws_size, fused),
            *self.pool(d, d.c1, buf["c1"], d.p1, buf["p1"]),
            *self.conv_bias_relu(d, d.p1, buf["p1"], d.w2, d.conv2, "conv2", d.c2, buf["c2"],
                                 algos[1], ws, ws_size, fused),
            *self.pool(d, d.c2, buf["c2"], d.p2, buf["p2"]),
            *self.dense(d, "fc1", buf["p2"], buf["fc1"], 400, 120, lt=lt),
            *self.dense(d, "fc2", buf["fc1"], buf["fc2"], 120, 84, lt=lt),
            *self.dense(d, "fc3", buf["fc2"], buf["fc3"], 84, 10, relu=False, lt=lt),
            (self.lib.cudnnSoftmaxForward, (self.handle, cu.SOFTMAX_ACCURATE, cu.SOFTMAX_MODE_CHANNEL,
                                            self.alpha, d3.ptr, buf["fc3"], self.beta, d3.ptr, buf["out"])),
        ]

    def buffer_sizes(self, n) -> dict:
        counts = {"x": 784, "c1": 6 * 784, "p1": 6 * 196, "c2": 1600, "p2": 400,
                  "fc1": 120, "fc2": 84, "fc3": 10, "out": 10}
        return {name: n * count * self.itemsize for name, count in counts.items()}

    def pick_algos(self, d, find: bool):
        """The convolution algorithms and the workspace they need (bytes)."""
        algos, ws_size, math = [], 0, []
        for x, w, conv, y in ((d.x, d.w1, d.conv1, d.c1), (d.p1, d.w2, d.conv2, d.c2)):
            perf = (cu.ConvFwdAlgoPerf * cu.CONV_FWD_ALGOS)()
            count = ctypes.c_int()
            query = (self.lib.cudnnFindConvolutionForwardAlgorithm if find
                     else self.lib.cudnnGetConvolutionForwardAlgorithm_v7)
            query(self.handle, x.ptr, w.ptr, conv.ptr, y.ptr, cu.CONV_FWD_ALGOS,
                  ctypes.byref(count), perf)
            usable = [p for p in perf[:count.value] if p.status == cu.STATUS_SUCCESS and not
                      (self.dtype == "float32" and p.mathType in TENSOR_OP_MATH)]  # no TF32
            if not usable:
                raise RuntimeError(f"cuDNN offers no usable forward algorithm for {y.dims} "
                                   "without tensor-op math")
            best = usable[0]  # Find: fastest measured first; _v7: best heuristic guess first
            size = ctypes.c_size_t()
            self.lib.cudnnGetConvolutionForwardWorkspaceSize(self.handle, x.ptr, w.ptr, conv.ptr,
                                                             y.ptr, best.algo, ctypes.byref(size))
            algos.append(best.algo)
            math.append(best.mathType)
            ws_size = max(ws_size, size.value)
        self.conv_math = math
        return algos, ws_size

    # --- naive: everything per call --------------------------------------------------------
    def predict_naive(self, images):
        rt = self.cp.cuda.runtime
        n = len(images)
        x = np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=self.dtype)  # NHWC -> NCHW
        d = LeNetDescriptors(self.lib, n, self.dtype)
        buf = {}
        try:
            algos, ws_size = self.pick_algos(d, find=False)
            buf = {name: rt.malloc(size) for name, size in self.buffer_sizes(n).items()}
            ws = rt.malloc(ws_size) if ws_size else 0
            buf["ws"] = ws
            rt.memcpy(buf["x"], x.ctypes.data, x.nbytes, H2D)
            self.forward(d, buf, algos, ws, ws_size)
            out = np.empty((n, 10), self.dtype)
            rt.memcpy(out.ctypes.data, buf["out"], out.nbytes, D2H)  # waits for the work
            rt.deviceSynchronize()
            return out
        finally:
            for ptr in buf.values():
                if ptr:
                    rt.free(ptr)
            d.close()

    # --- tuned: set up once per batch size --------------------------------------------------
    def plan(self, n):
        if n not in self.plans:
            cp = self.cp
            d = LeNetDescriptors(self.lib, n, self.dtype)
            algos, ws_size = self.pick_algos(d, find=True)
            with self.stream:
                arrays = {name: cp.empty(size, cp.uint8) for name, size in self.buffer_sizes(n).items()}
                ws = cp.empty(max(ws_size, 1), cp.uint8)
            pinned_in = cp.cuda.alloc_pinned_memory(n * 784 * self.itemsize)
            pinned_out = cp.cuda.alloc_pinned_memory(n * 10 * self.itemsize)
            p = self.plans[n] = Plan(  # kept first: close() releases what a failing check made
                d=d, algos=algos, conv_math=list(self.conv_math), ws=ws, ws_size=ws_size, arrays=arrays,
                buf={name: a.data.ptr for name, a in arrays.items()}, pinned=(pinned_in, pinned_out),
                host_in=np.frombuffer(pinned_in, self.dtype, n * 784).reshape(n, 1, 28, 28),
                host_out=np.frombuffer(pinned_out, self.dtype, n * 10).reshape(n, 10),
                events=(cp.cuda.Event(), cp.cuda.Event()))
            p.fused = self.fusion_works(p)  # runs on the plan's buffers
            p.lt = self.dense_matmuls(p)
            rt, s = self.cp.cuda.runtime, self.stream.ptr
            # the whole call, prebuilt: pinned input -> device, the layers, -> pinned output
            p.calls = (
                (rt.memcpyAsync, (p.buf["x"], p.host_in.ctypes.data, p.host_in.nbytes, H2D, s)),
                *self.layers(d, p.buf, algos, ws.data.ptr, ws_size, p.fused, p.lt),
                (rt.memcpyAsync, (p.host_out.ctypes.data, p.buf["out"], p.host_out.nbytes, D2H, s)))
        return self.plans[n]

    def dense_matmuls(self, p) -> dict | None:
        """The three dense layers as cuBLASLt matmuls with the bias (+ReLU) epilogue, checked by
        one eager run; None where cuBLASLt refuses (the reason kept in self.dense_note)."""
        if self.lt is None:
            return None
        d, buf, made = p.d, p.buf, {}
        try:
            for name, x, fan_in, fan_out, relu in DENSE:
                kernel, bias = self.w[name]
                made[name] = cublaslt.DenseMatmul(
                    self.lt, self.lt_handle, self.dtype, d.n, fan_in, fan_out, relu, kernel.data.ptr,
                    buf[x], buf[name], bias.data.ptr, self.alpha, self.beta, self.blas_ws.data.ptr,
                    cublas.WORKSPACE_BYTES, self.stream.ptr)  # cuBLAS' workspace: the same stream, in order
            self.forward(d, buf, p.algos, p.ws.data.ptr, p.ws_size, p.fused, made)
            self.stream.synchronize()
        except cublas.CublasError as exc:
            for matmul in made.values():
                matmul.close()
            self.dense_note = f"cuBLAS gemm + cuDNN bias and ReLU: cuBLASLt refused: {exc}"
            return None
        self.dense_note = "each dense layer one cublasLtMatmul, bias and ReLU in its epilogue"
        return made

    def fusion_works(self, p) -> bool:
        """One fused call per convolution, if cuDNN takes it for the algorithms Find picked
        (the reason it refused is kept in self.fusion_note)."""
        try:
            self.forward(p.d, p.buf, p.algos, p.ws.data.ptr, p.ws_size, fused=True)
            self.stream.synchronize()
        except cu.CudnnError as exc:
            self.fusion_note = f"three calls per convolution: {exc}"
            return False
        self.fusion_note = "conv, bias and ReLU in one cudnnConvolutionBiasActivationForward"
        return True

    def enqueue(self, p):
        """One call's work on the stream: pinned input -> device, the layers, device -> pinned output,
        prebuilt in p.calls. Every address is the plan's, fixed for its lifetime: what a CUDA
        graph replays."""
        for fn, args in p.calls:
            fn(*args)

    def predict_tuned(self, images):
        p = self.plan(len(images))
        np.copyto(p.host_in, images.transpose(0, 3, 1, 2))  # NHWC -> NCHW into pinned memory
        start, end = p.events
        start.record(self.stream)
        self.enqueue(p)
        end.record(self.stream)
        end.synchronize()  # the one synchronization per call
        self.last_device_ns = int(self.cp.cuda.get_elapsed_time(start, end) * 1e6)
        return p.host_out.copy()

    # --- graph: tuned, captured once per batch size and replayed ----------------------------
    def capture(self, p: Plan):
        """The plan's call (enqueue) captured into a CUDA graph, once per batch size.

        Everything that allocates, synchronizes or measures happens before the capture: Find
        (it times the algorithms in memory of its own), the workspace query and the buffers
        (plan), and one eager run on the pinned input (kernels loaded, cuBLAS' heuristics
        cached), then a synchronization. Alpha and beta are host scalars read when each call is
        enqueued (pointer mode host), so their values are frozen into the graph.
        """
        s = self.stream
        if s.ptr == 0 or s is self.cp.cuda.Stream.null:
            raise RuntimeError("a CUDA graph cannot be captured on the legacy default stream")
        self.enqueue(p)  # the eager run
        s.synchronize()
        with s:
            s.begin_capture()  # relaxed mode (CuPy's default)
            try:
                self.enqueue(p)
            except BaseException:
                try:
                    s.end_capture()  # leave the stream usable; the first error is the one to see
                except Exception:  # an invalidated capture also fails to end
                    pass
                raise
            return s.end_capture()  # cupy.cuda.graph.Graph, instantiated

    def predict_graph(self, images):
        p = self.plan(len(images))
        np.copyto(p.host_in, images.transpose(0, 3, 1, 2))  # host side, outside the graph
        if p.graph is None:
            p.graph = self.capture(p)
        start, end = p.events
        start.record(self.stream)
        p.graph.launch(self.stream)
        end.record(self.stream)
        end.synchronize()
        self.last_device_ns = int(self.cp.cuda.get_elapsed_time(start, end) * 1e6)
        return p.host_out.copy()

    def predict(self, images):
        if self.fe is not None:
            return self.fe.predict(images)
        if self.variant == "naive":
            return self.predict_naive(images)
        if self.variant == "graph":  # no CuPy work per call: the stream is named where it matters
            return self.predict_graph(images)
        return self.predict_tuned(images)

    def last_device_time_ns(self):
        return self.fe.last_device_ns if self.fe is not None else self.last_device_ns

    def close(self):
        # polled with a deadline: work still running then ends the process as hung, before any memory
        # it may touch is freed; a sticky error ends it as a fault (harness.frameworks.gpu_fault)
        gpu_fault.drain(self.stream, CLOSE_WAIT_S, f"cudnn/{self.variant} ({self.dtype})'s close")
        if self.fe is not None:
            self.fe.close()  # its graphs and handle before the weights and stream they use
            self.fe = None
        for p in self.plans.values():
            p.graph = None  # the graph's executable goes before the memory it points at
            p.d.close()
            for matmul in (p.lt or {}).values():
                matmul.close()
        if self.lt is not None and self.lt_handle:
            self.lt.cublasLtDestroy(self.lt_handle)
            self.lt_handle = cublaslt.Handle()
        self.plans.clear()
        self.w = {}
        if self.blas is not None:
            self.blas.close()  # before its workspace is freed
            self.blas = None
        self.blas_ws = None
        if self.handle:
            self.lib.cudnnDestroy(self.handle)
            self.handle = cu.Handle()
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()
