"""A NumPy 'GPU' for the cuDNN level's trainer on a machine without one: libcudnn and libcublas
replaced by ctypes callbacks with the real argtypes (so every call is converted, counted and typed
exactly as the real library would see it) that compute with NumPy stand-ins on host memory at the
given addresses; CuPy replaced by NumPy arrays whose `.data.ptr` is their host address.

What this checks: the trainer's call sequence, argument order and counts, descriptors, buffer
shapes, the gemm mappings and the update, end to end against the oracle. What it cannot check:
cuDNN's and cuBLAS' own numerics, streams, asynchrony (the GPU test does)."""

import ctypes
import itertools
import types

import numpy as np

from lenet_cudnn import binding as cu
from lenet_cudnn import cublas, cublaslt
from tests.test_cudnn_level import pool_nchw, xcorr_nchw


# --- NumPy stand-ins for cuDNN's backward operations ----------------------------------------------
def conv_filter_grad_nchw(x, dy, r, s, pad):
    """cudnnConvolutionBackwardFilter: x (N, C, H, W), dy (N, K, H', W') -> dW (K, C, R, S)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    h, w = dy.shape[2:]
    return np.stack([np.stack([np.einsum("nchw,nkhw->kc", x[:, :, i:i + h, j:j + w], dy)
                               for j in range(s)], -1) for i in range(r)], -2)


def conv_data_grad_nchw(kcrs, dy, pad):
    """cudnnConvolutionBackwardData: filter (K, C, R, S), dy (N, K, H', W') -> dx (N, C, H, W)."""
    k, c, r, s = kcrs.shape
    n, _, h, w = dy.shape
    dx = np.zeros((n, c, h + r - 1, w + s - 1))
    for i in range(r):
        for j in range(s):
            dx[:, :, i:i + h, j:j + w] += np.einsum("nkhw,kc->nchw", dy, kcrs[:, :, i, j])
    return dx[:, :, pad:dx.shape[2] - pad, pad:dx.shape[3] - pad]


def pool_grad_nchw(x, dy):
    """cudnnPoolingBackward (max 2x2): each window's gradient to its first maximum."""
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    first = windows.argmax(-1)
    dx = np.zeros_like(windows)
    np.put_along_axis(dx, first[..., None], dy[..., None], -1)
    return dx.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, w)


def gemm_ops(transa, transb, m, n, k, a_buf, lda, b_buf, ldb, ldc, **_):
    """C = op(A) op(B) as BLAS reads flat column-major buffers (op: 0 N, 1 T); C's flat buffer."""
    def read(buf, ld, rows, cols):  # the stored column-major (rows, cols) matrix, leading dim ld
        return buf.ravel()[:ld * cols].reshape(cols, ld).T[:rows, :]

    a = read(a_buf, lda, m, k) if transa == 0 else read(a_buf, lda, k, m).T  # (m, k)
    b = read(b_buf, ldb, k, n) if transb == 0 else read(b_buf, ldb, n, k).T  # (k, n)
    c = np.zeros((ldc, n))
    c[:m, :] = a @ b
    return c.T.ravel()


ALLOCATIONS = {}  # start address -> end address of every 'device' array (fake_cupy), kept alive


def at(address, count, dtype):
    """`count` elements of `dtype` at a host address, as a writable NumPy view (host scalars)."""
    dtype = np.dtype(dtype)
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(address), dtype)


def device(address, count, dtype):
    """As `at`, for device memory: the range must lie inside one 'device' array, so a wrong shape
    or pointer in the trainer is an error here, not a write over someone else's memory."""
    end = address + count * np.dtype(dtype).itemsize
    if not any(start <= address and end <= stop for start, stop in ALLOCATIONS.items()):
        raise ValueError(f"{count} x {np.dtype(dtype)} at {address:#x}: not inside one device array")
    return at(address, count, dtype)


# --- the libraries -----------------------------------------------------------------------------
class FakeLibrary:
    """Every name in `signatures` as a ctypes callback with those argtypes (int status back);
    the ones a subclass defines as `do_<name>` compute, the others succeed doing nothing.
    `new` hands out descriptor ids from `first_id` on, so two libraries' ids never meet."""

    def __init__(self, signatures, restypes, first_id=0x1000):
        self.calls, self.errors, self._keep = [], [], []
        self.desc = {}  # id -> what the descriptor says, kind first: ("tensor", dtype, dims), ("conv", pad), ...
        self.ids = itertools.count(first_id)
        for name, argtypes in signatures.items():
            restype = restypes.get(name, ctypes.c_int)
            impl = getattr(self, f"do_{name}", None)
            if restype is not ctypes.c_int:
                continue  # version and error-string functions: defined by the subclass below
            proto = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)
            fn = proto(self._wrap(name, impl))
            self._keep.append(fn)
            setattr(self, name, fn)

    def last_error(self, status) -> bytes:
        """The error string the binding puts in its exception: what the fake found wrong."""
        return (self.errors[-1] if self.errors else f"fake status {status}").encode()

    def new(self, ref, what):
        key = next(self.ids)
        ref[0] = key
        self.desc[key] = what

    def _wrap(self, name, impl):
        def call(*args):  # an exception in a ctypes callback would be printed and lost: a status
            self.calls.append(name)
            try:
                if impl is not None:
                    impl(*args)
            except Exception as exc:  # noqa: BLE001  reported by the test through self.errors
                self.errors.append(f"{name}: {exc!r}")
                return 3  # CUDNN_STATUS_BAD_PARAM / CUBLAS_STATUS_ALLOC_FAILED: the binding raises
            return 0
        return call


class FakeCudnn(FakeLibrary):
    def __init__(self):
        super().__init__(cu.SIGNATURES, cu.RESTYPES)
        self.cudnnGetVersion = lambda: 90000
        self.cudnnGetErrorString = lambda status: self.last_error(status)

    # descriptors
    def do_cudnnCreate(self, ref):
        ref[0] = 0xCAFE

    def do_cudnnCreateTensorDescriptor(self, ref):
        self.new(ref, None)

    do_cudnnCreateFilterDescriptor = do_cudnnCreateConvolutionDescriptor = do_cudnnCreateTensorDescriptor
    do_cudnnCreatePoolingDescriptor = do_cudnnCreateActivationDescriptor = do_cudnnCreateTensorDescriptor

    def do_cudnnSetTensor4dDescriptor(self, d, layout, dtype, n, c, h, w):
        assert layout == cu.TENSOR_NCHW
        self.desc[d] = ("tensor", {cu.DATA_FLOAT: np.float32, cu.DATA_DOUBLE: np.float64}[dtype], (n, c, h, w))

    def do_cudnnSetFilter4dDescriptor(self, d, dtype, layout, k, c, r, s):
        assert layout == cu.TENSOR_NCHW
        self.desc[d] = ("filter", {cu.DATA_FLOAT: np.float32, cu.DATA_DOUBLE: np.float64}[dtype], (k, c, r, s))

    def do_cudnnSetConvolution2dDescriptor(self, d, pad_h, pad_w, *rest):
        assert rest[:4] == (1, 1, 1, 1) and rest[4] == cu.CROSS_CORRELATION
        self.desc[d] = ("conv", pad_h)

    def do_cudnnSetPooling2dDescriptor(self, d, mode, nan, wh, ww, ph, pw, sh, sw):
        assert (mode, wh, ww, ph, pw, sh, sw) == (cu.POOLING_MAX, 2, 2, 0, 0, 2, 2)
        self.desc[d] = ("pool",)

    def do_cudnnSetActivationDescriptor(self, d, mode, nan, coef):
        assert mode == cu.ACTIVATION_RELU
        self.desc[d] = ("relu",)

    def do_cudnnGetConvolution2dForwardOutputDim(self, conv, x, w, n, c, h, wo):
        pad, (bn, _, bh, bw), (k, _, r, s) = self.desc[conv][1], self.desc[x][2], self.desc[w][2]
        n[0], c[0], h[0], wo[0] = bn, k, bh + 2 * pad - r + 1, bw + 2 * pad - s + 1

    def do_cudnnGetPooling2dForwardOutputDim(self, pool, x, n, c, h, w):
        bn, bc, bh, bw = self.desc[x][2]
        n[0], c[0], h[0], w[0] = bn, bc, bh // 2, bw // 2

    def _algo(self, handle, a, b, conv, d, requested, returned, perf):
        perf[0].algo, perf[0].status, perf[0].mathType, perf[0].determinism = 1, 0, cu.FMA_MATH, 1
        returned[0] = 1

    do_cudnnGetConvolutionForwardAlgorithm_v7 = _algo
    do_cudnnGetConvolutionBackwardDataAlgorithm_v7 = do_cudnnGetConvolutionBackwardFilterAlgorithm_v7 = _algo

    def _workspace(self, handle, a, b, conv, d, algo, size):
        size[0] = 256

    do_cudnnGetConvolutionForwardWorkspaceSize = _workspace
    do_cudnnGetConvolutionBackwardDataWorkspaceSize = do_cudnnGetConvolutionBackwardFilterWorkspaceSize = _workspace

    # memory as the descriptors say
    def tensor(self, d, address):
        _, dtype, dims = self.desc[d]
        return device(address, int(np.prod(dims)), dtype).reshape(dims)

    def scalars(self, d, alpha, beta):
        dtype = self.desc[d][1]
        return at(alpha, 1, dtype)[0], at(beta, 1, dtype)[0]

    def write(self, d, address, value, alpha, beta):
        a, b = self.scalars(d, alpha, beta)
        out = self.tensor(d, address)
        out[...] = a * value + (b * out if b else 0)

    # operations
    def do_cudnnConvolutionForward(self, h, alpha, xd, x, wd, w, conv, algo, ws, wss, beta, yd, y):
        kernel = self.tensor(wd, w)
        self.write(yd, y, xcorr_nchw(self.tensor(xd, x), kernel, np.zeros(len(kernel)), self.desc[conv][1]),
                   alpha, beta)

    def do_cudnnAddTensor(self, h, alpha, bd, b, beta, yd, y):
        self.write(yd, y, self.tensor(bd, b), alpha, beta)

    def do_cudnnActivationForward(self, h, act, alpha, xd, x, beta, yd, y):
        self.write(yd, y, np.maximum(self.tensor(xd, x), 0), alpha, beta)

    def do_cudnnPoolingForward(self, h, pool, alpha, xd, x, beta, yd, y):
        self.write(yd, y, pool_nchw(self.tensor(xd, x)), alpha, beta)

    def do_cudnnSoftmaxForward(self, h, algo, mode, alpha, xd, x, beta, yd, y):
        assert (algo, mode) == (cu.SOFTMAX_ACCURATE, cu.SOFTMAX_MODE_CHANNEL)
        z = self.tensor(xd, x).astype(np.float64)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        self.write(yd, y, e / e.sum(axis=1, keepdims=True), alpha, beta)

    def do_cudnnActivationBackward(self, h, act, alpha, yd, y, dyd, dy, xd, x, beta, dxd, dx):
        self.write(dxd, dx, self.tensor(dyd, dy) * (self.tensor(xd, x) > 0), alpha, beta)

    def do_cudnnPoolingBackward(self, h, pool, alpha, yd, y, dyd, dy, xd, x, beta, dxd, dx):
        self.write(dxd, dx, pool_grad_nchw(self.tensor(xd, x), self.tensor(dyd, dy)), alpha, beta)

    def do_cudnnConvolutionBackwardFilter(self, h, alpha, xd, x, dyd, dy, conv, algo, ws, wss, beta, dwd, dw):
        _, _, r, s = self.desc[dwd][2]
        self.write(dwd, dw, conv_filter_grad_nchw(self.tensor(xd, x), self.tensor(dyd, dy), r, s,
                                                  self.desc[conv][1]), alpha, beta)

    def do_cudnnConvolutionBackwardData(self, h, alpha, wd, w, dyd, dy, conv, algo, ws, wss, beta, dxd, dx):
        self.write(dxd, dx, conv_data_grad_nchw(self.tensor(wd, w), self.tensor(dyd, dy), self.desc[conv][1]),
                   alpha, beta)

    def do_cudnnConvolutionBackwardBias(self, h, alpha, dyd, dy, beta, dbd, db):
        self.write(dbd, db, self.tensor(dyd, dy).sum(axis=(0, 2, 3), keepdims=True), alpha, beta)


class FakeCublas(FakeLibrary):
    def __init__(self):
        super().__init__(cublas.SIGNATURES, cublas.RESTYPES)
        self.cublasGetStatusString = lambda status: self.last_error(status)

    def do_cublasCreate_v2(self, ref):
        ref[0] = 0xB1A5

    def do_cublasGetVersion_v2(self, handle, version):
        version[0] = 120000

    def _gemm(self, dtype, handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        al, be = at(alpha, 1, dtype)[0], at(beta, 1, dtype)[0]
        assert (al, be) == (1, 0), "the level's gemms are plain products"
        a_buf = device(a, lda * (k if ta == cublas.OP_N else m), dtype)
        b_buf = device(b, ldb * (n if tb == cublas.OP_N else k), dtype)
        device(c, ldc * n, dtype)[...] = gemm_ops(ta, tb, m, n, k, a_buf, lda, b_buf, ldb, ldc)

    def do_cublasSgemm_v2(self, *args):
        self._gemm(np.float32, *args)

    def do_cublasDgemm_v2(self, *args):
        self._gemm(np.float64, *args)

    def do_cublasSaxpy_v2(self, handle, n, alpha, x, incx, y, incy, dtype=np.float32):
        assert incx == incy == 1
        device(y, n, dtype)[...] += at(alpha, 1, dtype)[0] * device(x, n, dtype)

    def do_cublasDaxpy_v2(self, handle, n, alpha, x, incx, y, incy):
        self.do_cublasSaxpy_v2(handle, n, alpha, x, incx, y, incy, np.float64)


class FakeCublasLt(FakeLibrary):
    """cuBLASLt's matmul with its bias / ReLU+bias epilogue, reading A, B, D and the bias as the
    descriptors and layouts say (column-major), so a wrong layout, leading dimension, bias length
    or epilogue shows up as a wrong answer or an out-of-range read. `refuse`: the heuristic finds
    no algorithm (as cuBLASLt does for a problem it does not support)."""

    def __init__(self, refuse=False):
        self.refuse = refuse
        super().__init__(cublaslt.SIGNATURES, cublaslt.RESTYPES, first_id=0x2000)
        self.cublasLtGetVersion = lambda: 120900

    def do_cublasLtCreate(self, ref):
        ref[0] = 0x17

    def do_cublasLtMatmulDescCreate(self, ref, compute, scale):
        assert (compute, scale) in cublaslt.COMPUTE.values(), (compute, scale)  # never TF32
        self.new(ref, {"kind": "op", "compute": compute, "scale": scale, "attrs": {}})

    def do_cublasLtMatmulDescSetAttribute(self, desc, attribute, buf, size):
        raw = at(buf, size, np.uint8).tobytes()
        self.desc[desc]["attrs"][attribute] = int.from_bytes(raw, "little")

    def do_cublasLtMatrixLayoutCreate(self, ref, dtype, rows, cols, ld):
        assert ld >= rows, "a column-major leading dimension is at least the rows"
        self.new(ref, {"kind": "layout", "dtype": {cublaslt.R_32F: np.float32, cublaslt.R_64F: np.float64}[dtype],
                       "rows": rows, "cols": cols, "ld": ld})

    def do_cublasLtMatmulPreferenceCreate(self, ref):
        self.new(ref, {"kind": "pref"})

    def do_cublasLtMatmulAlgoGetHeuristic(self, h, op, a, b, c, d, pref, requested, results, returned):
        returned[0] = 0 if self.refuse else 1

    def matrix(self, layout, address):
        """The column-major (rows, cols) matrix at `address` with leading dimension ld."""
        lay = self.desc[layout]
        flat = device(address, lay["ld"] * lay["cols"], lay["dtype"])
        return flat.reshape(lay["cols"], lay["ld"]).T[:lay["rows"], :]

    def do_cublasLtMatmul(self, h, op, alpha, a, a_lay, b, b_lay, beta, c, c_lay, d, d_lay, algo, ws, wss, stream):
        desc = self.desc[op]
        dtype = self.desc[d_lay]["dtype"]
        assert (at(alpha, 1, dtype)[0], at(beta, 1, dtype)[0]) == (1, 0), "plain products"
        attrs = desc["attrs"]
        assert attrs.get(cublaslt.DESC_TRANSA, 0) == attrs.get(cublaslt.DESC_TRANSB, 0) == cublaslt.OP_N
        am, bm = self.matrix(a_lay, a), self.matrix(b_lay, b)  # (m, k), (k, n)
        out = am @ bm  # (m, n)
        epilogue = attrs.get(cublaslt.DESC_EPILOGUE, 1)
        if epilogue & cublaslt.EPILOGUE_BIAS:  # a vector of D's rows, broadcast over its columns
            out = out + device(attrs[cublaslt.DESC_BIAS_POINTER], out.shape[0], dtype)[:, None]
        if epilogue & 2:  # RELU
            out = np.maximum(out, 0)
        assert c == d and c_lay == d_lay
        self.matrix(d_lay, d)[...] = out


# --- CuPy -------------------------------------------------------------------------------------------
class DeviceArray(np.ndarray):
    """A host array standing in for cupy.ndarray: `.data.ptr` is its address."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self, stream=None):
        return np.array(self).view(np.ndarray)

    def set(self, array, stream=None):
        self[...] = array


class Stream:
    ptr = 0x5157

    def __init__(self, non_blocking=False):
        self.non_blocking = non_blocking

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def fake_cupy():
    kept = []

    def allocate(a):
        a = np.array(a, order="C").view(DeviceArray)
        kept.append(a)  # never freed while the test runs: its addresses stay valid
        ALLOCATIONS[a.ctypes.data] = a.ctypes.data + a.nbytes
        return a

    return types.SimpleNamespace(
        empty=lambda shape, dtype=np.float32: allocate(np.zeros(shape, dtype)),
        empty_like=lambda a: allocate(np.zeros_like(a)),
        asarray=allocate,
        copyto=np.copyto, arange=np.arange, uint8=np.uint8,
        cuda=types.SimpleNamespace(Stream=Stream))


def install(monkeypatch, module):
    """Point the trainer module at the fakes: its CuPy, libcudnn and libcublas."""
    lib, blas = cu.Cudnn("fake-libcudnn", "test", FakeCudnn()), cublas.Cublas("fake-libcublas", "test", FakeCublas())
    monkeypatch.setattr(module, "import_cupy", fake_cupy)
    monkeypatch.setattr(module.cu, "load", lambda: lib)
    monkeypatch.setattr(module.cublas, "load", lambda: blas)
    return lib, blas
