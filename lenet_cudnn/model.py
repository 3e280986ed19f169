"""LeNet-5 on the cuDNN C API (ctypes), CuPy device memory and cuBLAS gemm, NCHW on the device.

    x (N,1,28,28) -conv1+bias+relu-> (N,6,28,28) -pool-> (N,6,14,14)
      -conv2+bias+relu-> (N,16,10,10) -pool-> (N,16,5,5) = (N,400) in (c,h,w) order
      -fc1 gemm+bias+relu-> (N,120) -fc2-> (N,84) -fc3+bias-> (N,10) -softmax-> host

Variants:
- naive: what a first attempt does. Per image: create every descriptor, ask cuDNN for an
  algorithm (cudnnGetConvolutionForwardAlgorithm_v7), cudaMalloc fresh buffers and workspace,
  synchronous copies from pageable memory; all freed again at the end of the call.
- tuned: descriptors once per batch size, the algorithm picked once by timing them
  (cudnnFindConvolutionForwardAlgorithm), buffers and workspace preallocated, pinned host
  memory, asynchronous copies on one stream, one synchronization per call, CUDA events
  around the work for the device time.
"""

import ctypes

import numpy as np

from harness.base import LeNet
from harness.data import weights
from harness.errors import Unavailable
from harness.registry import REGISTRY
from lenet_cudnn import binding as cu
from lenet_cudnn import layout
from lenet_cudnn.descriptors import LeNetDescriptors

H2D, D2H = 1, 2  # cudaMemcpyKind


def import_cupy():
    try:
        import cupy
    except ImportError as exc:
        raise Unavailable(f"CuPy is not installed ({exc}); make install-gpu") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, no device
        raise Unavailable(f"no CUDA device usable by CuPy: {exc}") from None
    if count == 0:
        raise Unavailable("no CUDA device usable by CuPy")
    return cupy


class CudnnLeNet(LeNet):
    spec = REGISTRY["cudnn"]

    def __init__(self, weights_path, device="gpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.cp = cp = import_cupy()
        self.lib = cu.load()
        self.handle = cu.Handle()
        try:
            self.lib.cudnnCreate(ctypes.byref(self.handle))
        except cu.CudnnError as exc:
            raise Unavailable(str(exc)) from None
        tuned = self.variant == "tuned"
        self.stream = cp.cuda.Stream(non_blocking=True) if tuned else cp.cuda.Stream.null
        self.lib.cudnnSetStream(self.handle, self.stream.ptr)  # cuDNN and cuBLAS on one stream
        self.blas = cp.cuda.device.get_cublas_handle()
        self.gemm = cp.cuda.cublas.sgemm if dtype == "float32" else cp.cuda.cublas.dgemm
        scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
        self.one, self.zero = scalar(1.0), scalar(0.0)  # alpha/beta, host memory, kept alive
        self.alpha, self.beta = ctypes.addressof(self.one), ctypes.addressof(self.zero)
        self.itemsize = np.dtype(dtype).itemsize
        with self.stream:
            self.w = {name: (cp.asarray(k), cp.asarray(b))
                      for name, (k, b) in layout.convert(weights.read(weights_path), dtype).items()}
        self.stream.synchronize()
        self.plans = {}  # tuned: batch size -> preallocated everything
        self.last_device_ns = None

    # --- the layers ----------------------------------------------------------------------
    def conv_bias_relu(self, d, x_desc, x, w_desc, conv, name, y_desc, y, algo, ws, ws_size):
        kernel, bias = self.w[name]
        lib, h = self.lib, self.handle
        lib.cudnnConvolutionForward(h, self.alpha, x_desc.ptr, x, w_desc.ptr, kernel.data.ptr,
                                    conv.ptr, algo, ws, ws_size, self.beta, y_desc.ptr, y)
        lib.cudnnAddTensor(h, self.alpha, d.bias[name].ptr, bias.data.ptr, self.alpha, y_desc.ptr, y)
        lib.cudnnActivationForward(h, d.relu.ptr, self.alpha, y_desc.ptr, y, self.beta, y_desc.ptr, y)

    def pool(self, d, x_desc, x, y_desc, y):
        self.lib.cudnnPoolingForward(self.handle, d.pool.ptr, self.alpha, x_desc.ptr, x,
                                     self.beta, y_desc.ptr, y)

    def dense(self, d, name, x, y, fan_in, fan_out, relu=True):
        """y (n, out) = x (n, in) @ W (in, out) + b, as Y^T = W^T X^T in cuBLAS' column-major."""
        kernel, bias = self.w[name]
        g = layout.dense_gemm_args(d.n, fan_in, fan_out)
        self.gemm(self.blas, g["transa"], g["transb"], g["m"], g["n"], g["k"], self.alpha,
                  kernel.data.ptr, g["lda"], x, g["ldb"], self.beta, y, g["ldc"])
        y_desc = d.fc[name]
        self.lib.cudnnAddTensor(self.handle, self.alpha, d.bias[name].ptr, bias.data.ptr,
                                self.alpha, y_desc.ptr, y)
        if relu:
            self.lib.cudnnActivationForward(self.handle, d.relu.ptr, self.alpha, y_desc.ptr, y,
                                            self.beta, y_desc.ptr, y)

    def forward(self, d, buf, algos, ws, ws_size):
        """Device pointers in `buf`; everything enqueued on one stream, cuDNN's and cuBLAS'."""
        self.cp.cuda.cublas.setStream(self.blas, self.stream.ptr)  # CuPy shares this handle
        self.conv_bias_relu(d, d.x, buf["x"], d.w1, d.conv1, "conv1", d.c1, buf["c1"],
                            algos[0], ws, ws_size)
        self.pool(d, d.c1, buf["c1"], d.p1, buf["p1"])
        self.conv_bias_relu(d, d.p1, buf["p1"], d.w2, d.conv2, "conv2", d.c2, buf["c2"],
                            algos[1], ws, ws_size)
        self.pool(d, d.c2, buf["c2"], d.p2, buf["p2"])
        self.dense(d, "fc1", buf["p2"], buf["fc1"], 400, 120)
        self.dense(d, "fc2", buf["fc1"], buf["fc2"], 120, 84)
        self.dense(d, "fc3", buf["fc2"], buf["fc3"], 84, 10, relu=False)
        d3 = d.fc["fc3"]
        self.lib.cudnnSoftmaxForward(self.handle, cu.SOFTMAX_ACCURATE, cu.SOFTMAX_MODE_CHANNEL,
                                     self.alpha, d3.ptr, buf["fc3"], self.beta, d3.ptr, buf["out"])

    def buffer_sizes(self, n) -> dict:
        counts = {"x": 784, "c1": 6 * 784, "p1": 6 * 196, "c2": 1600, "p2": 400,
                  "fc1": 120, "fc2": 84, "fc3": 10, "out": 10}
        return {name: n * count * self.itemsize for name, count in counts.items()}

    def pick_algos(self, d, find: bool):
        """The convolution algorithms and the workspace they need (bytes)."""
        algos, ws_size = [], 0
        for x, w, conv, y in ((d.x, d.w1, d.conv1, d.c1), (d.p1, d.w2, d.conv2, d.c2)):
            perf = (cu.ConvFwdAlgoPerf * cu.CONV_FWD_ALGOS)()
            count = ctypes.c_int()
            query = (self.lib.cudnnFindConvolutionForwardAlgorithm if find
                     else self.lib.cudnnGetConvolutionForwardAlgorithm_v7)
            query(self.handle, x.ptr, w.ptr, conv.ptr, y.ptr, cu.CONV_FWD_ALGOS,
                  ctypes.byref(count), perf)
            usable = [p for p in perf[:count.value] if p.status == cu.STATUS_SUCCESS]
            if not usable:
                raise RuntimeError(f"cuDNN offers no usable forward algorithm for {y.dims}")
            best = usable[0]  # Find: fastest measured first; _v7: best heuristic guess first
            size = ctypes.c_size_t()
            self.lib.cudnnGetConvolutionForwardWorkspaceSize(self.handle, x.ptr, w.ptr, conv.ptr,
                                                             y.ptr, best.algo, ctypes.byref(size))
            algos.append(best.algo)
            ws_size = max(ws_size, size.value)
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
            self.plans[n] = {
                "d": d, "algos": algos, "ws": ws, "ws_size": ws_size, "arrays": arrays,
                "buf": {name: a.data.ptr for name, a in arrays.items()},
                "pinned": (pinned_in, pinned_out),
                "host_in": np.frombuffer(pinned_in, self.dtype, n * 784).reshape(n, 1, 28, 28),
                "host_out": np.frombuffer(pinned_out, self.dtype, n * 10).reshape(n, 10),
                "events": (cp.cuda.Event(), cp.cuda.Event()),
            }
        return self.plans[n]

    def predict_tuned(self, images):
        rt = self.cp.cuda.runtime
        p = self.plan(len(images))
        np.copyto(p["host_in"], images.transpose(0, 3, 1, 2))  # NHWC -> NCHW into pinned memory
        start, end = p["events"]
        s = self.stream
        start.record(s)
        rt.memcpyAsync(p["buf"]["x"], p["host_in"].ctypes.data, p["host_in"].nbytes, H2D, s.ptr)
        self.forward(p["d"], p["buf"], p["algos"], p["ws"].data.ptr, p["ws_size"])
        rt.memcpyAsync(p["host_out"].ctypes.data, p["buf"]["out"], p["host_out"].nbytes, D2H, s.ptr)
        end.record(s)
        end.synchronize()  # the one synchronization per call
        self.last_device_ns = int(self.cp.cuda.get_elapsed_time(start, end) * 1e6)
        return p["host_out"].copy()

    def predict(self, images):
        if self.variant == "naive":
            return self.predict_naive(images)
        with self.stream:  # CuPy's current stream = the handle's stream (cuBLAS binds to it)
            return self.predict_tuned(images)

    def last_device_time_ns(self):
        return self.last_device_ns

    def close(self):
        for p in self.plans.values():
            p["d"].close()
        self.plans.clear()
        self.w = {}
        if self.handle:
            self.lib.cudnnDestroy(self.handle)
            self.handle = cu.Handle()
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()
