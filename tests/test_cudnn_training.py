"""The cuDNN training step (lenet_cudnn/train.py). Without a GPU: the backward dense gemms' argument
mapping (column-major BLAS emulated in NumPy, through the trainer's own call), the whole NCHW
backward data flow emulated against the oracle's gradients, the layout inverses, the algorithm
choice (fake library) and the new bindings' signatures (the real libcudnn / libcublas where
installed). With a GPU: K steps against the oracle."""

import ctypes

import numpy as np
import pytest

from harness import ROOT, base, registry
from harness.data import mnist, weights
from harness.errors import Unavailable
from harness.machine import gpu
from lenet_cudnn import binding, cublas, layout, train_algos
from lenet_cudnn import train as cudnn_train
from lenet_numpy.train import NumpyTrainer
from tests.test_cudnn_level import gemm_column_major, pool_nchw, xcorr_nchw

INIT = ROOT / "weights" / "lenet5_init.weights.h5"
TRAINED = ROOT / "weights" / "lenet5_mnist.weights.h5"
GPU_ABSENT = gpu.absent_reason()


def gemm_ops(transa, transb, m, n, k, a_buf, lda, b_buf, ldb, ldc, **_):
    """C = op(A) op(B) as BLAS reads flat column-major buffers (op: 0 N, 1 T); C's flat buffer."""
    def read(buf, ld, rows, cols):  # the stored column-major (rows, cols) matrix, leading dim ld
        return buf.ravel()[:ld * cols].reshape(cols, ld).T[:rows, :]

    a = read(a_buf, lda, m, k) if transa == 0 else read(a_buf, lda, k, m).T  # (m, k)
    b = read(b_buf, ldb, k, n) if transb == 0 else read(b_buf, ldb, n, k).T  # (k, n)
    c = np.zeros((ldc, n))
    c[:m, :] = a @ b
    return c.T.ravel()


class FakeGemm:
    """Stands in for cublasSgemm_v2 on 'device pointers' that are keys of `memory` (NumPy arrays)."""

    def __init__(self, memory):
        self.memory, self.calls = memory, []

    def __call__(self, handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        self.calls.append((transa, transb, m, n, k, a, lda, b, ldb, c, ldc))
        out = gemm_ops(transa, transb, m, n, k, self.memory[a], lda, self.memory[b], ldb, ldc)
        self.memory[c][...] = out[:self.memory[c].size].reshape(self.memory[c].shape)


def dense_backward_emulated(x, w, dy, need_dx=True):
    """The trainer's dense_backward on NumPy buffers: (dW (in, out), dX (batch, in) or None)."""
    batch, fan_in = x.shape
    memory = {1: x, 2: w, 3: dy, 4: np.zeros_like(w), 5: np.zeros_like(x)}
    gemm = FakeGemm(memory)
    cudnn_train.dense_backward(gemm, None, 1.0, 0.0, 1, 2, 3, 4, 5 if need_dx else None,
                               batch, fan_in, w.shape[1])
    return memory[4], (memory[5] if need_dx else None), gemm.calls


def test_gemm_emulation_with_ops_agrees_with_the_level_tests_one():
    rng = np.random.default_rng(0)
    a, b = rng.random((5, 3)), rng.random((3, 4))  # row-major: column-major (3, 5), (4, 3)
    g = layout.dense_gemm_args(5, 3, 4)
    np.testing.assert_array_equal(gemm_ops(a_buf=b, b_buf=a, **g), gemm_column_major(a_buf=b, b_buf=a, **g))


@pytest.mark.parametrize("batch,fan_in,fan_out", [(1, 400, 120), (7, 120, 84), (64, 84, 10)])
def test_backward_gemm_arguments_give_row_major_gradients(batch, fan_in, fan_out):
    rng = np.random.default_rng(batch)
    x, w, dy = rng.random((batch, fan_in)), rng.random((fan_in, fan_out)), rng.random((batch, fan_out))
    dw, dx, calls = dense_backward_emulated(x, w, dy)
    np.testing.assert_allclose(dw, x.T @ dy, rtol=1e-12)
    np.testing.assert_allclose(dx, dy @ w.T, rtol=1e-12)
    # A = dY, B = X for dW; A = W, B = dY for dX: what the trainer passes, no copies or transposes
    assert [(c[5], c[7], c[9]) for c in calls] == [(3, 1, 4), (2, 3, 5)]
    assert calls[0][:2] == (layout.CUBLAS_OP_N, layout.CUBLAS_OP_T)
    assert calls[1][:2] == (layout.CUBLAS_OP_T, layout.CUBLAS_OP_N)
    dw_only, none, calls = dense_backward_emulated(x, w, dy, need_dx=False)
    assert none is None and len(calls) == 1


def test_layout_inverses_round_trip_exactly(shared_weights):
    back = layout.to_keras(layout.convert(shared_weights, "float32"))
    for name, (kernel, bias) in shared_weights.items():
        assert back[name][0].shape == kernel.shape and back[name][0].flags.c_contiguous
        np.testing.assert_array_equal(back[name][0], kernel)
        np.testing.assert_array_equal(back[name][1], bias)
    with pytest.raises(ValueError, match="expected a KCRS filter"):
        layout.conv_kernel_hwio(np.zeros((6, 5, 5)))
    with pytest.raises(ValueError, match="expected 400 fc1 rows"):
        layout.fc1_rows_nhwc(np.zeros((399, 120)))


# --- the whole backward data flow, NCHW, in NumPy: cuDNN's stand-ins and the trainer's gemms ------
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


def emulated_gradients(layers, x_nhwc, labels):
    """The trainer's step (forward, backward) with cuDNN replaced by NumPy stand-ins and cuBLAS by
    the column-major emulation, in the level's layouts; returns the loss and Keras-layout gradients."""
    w = layout.convert(layers, "float64")
    n = len(x_nhwc)
    x = x_nhwc.transpose(0, 3, 1, 2).astype(np.float64)  # (N, 1, 28, 28)
    c1 = np.maximum(xcorr_nchw(x, *w["conv1"], pad=2), 0)  # (N, 6, 28, 28)
    p1 = pool_nchw(c1)
    c2 = np.maximum(xcorr_nchw(p1, *w["conv2"], pad=0), 0)  # (N, 16, 10, 10)
    p2 = pool_nchw(c2).reshape(n, 400)  # (c, h, w) order: the device buffer
    f1 = np.maximum(p2 @ w["fc1"][0] + w["fc1"][1], 0)
    f2 = np.maximum(f1 @ w["fc2"][0] + w["fc2"][1], 0)
    logits = f2 @ w["fc3"][0] + w["fc3"][1]
    loss = cudnn_train.mean_cross_entropy(logits, labels)
    z = np.exp(logits - logits.max(1, keepdims=True))
    d = z / z.sum(1, keepdims=True)
    d[np.arange(n), labels] -= 1
    d /= n
    grads, acts = {}, {"fc3": f2, "fc2": f1, "fc1": p2}
    for name in ("fc3", "fc2", "fc1"):
        dw, dx, _ = dense_backward_emulated(acts[name], w[name][0], d)
        grads[name] = (dw, d.sum(0))  # cudnnConvolutionBackwardBias over the batch
        d = dx * (acts[name] > 0) if name != "fc1" else dx  # cudnnActivationBackward, in place
    d = pool_grad_nchw(c2, d.reshape(n, 16, 5, 5)) * (c2 > 0)
    grads["conv2"] = (conv_filter_grad_nchw(p1, d, 5, 5, 0), d.sum((0, 2, 3)))
    d = conv_data_grad_nchw(w["conv2"][0], d, 0)  # (N, 6, 14, 14)
    d = pool_grad_nchw(c1, d) * (c1 > 0)
    grads["conv1"] = (conv_filter_grad_nchw(x, d, 5, 5, 2), d.sum((0, 2, 3)))
    return loss, layout.to_keras(grads)


@pytest.mark.parametrize("path", [INIT, TRAINED])
def test_emulated_backward_data_flow_matches_oracle_gradients(path):
    images, labels = mnist.load("train")
    x, y = mnist.to_input(images[:7]), labels[:7].astype(np.int64)
    loss, grads = emulated_gradients(weights.read(path), x, y)
    oracle_loss, expected = NumpyTrainer(path, dtype="float64").gradients(x, y)
    assert abs(loss - oracle_loss) <= 1e-9 * abs(oracle_loss)
    for name, (kernel, bias) in expected.items():
        assert grads[name][0].shape == kernel.shape, name
        np.testing.assert_allclose(grads[name][0], kernel, rtol=1e-7, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(grads[name][1], bias, rtol=1e-7, atol=1e-10, err_msg=name)


# --- algorithm choice ------------------------------------------------------------------------
class Perf:
    def __init__(self, algo, status=0, math=0, determinism=1):
        self.algo, self.status, self.mathType, self.determinism = algo, status, math, determinism


def test_algorithm_choice_prefers_deterministic_and_never_tf32_in_float32():
    perfs = [Perf(0, determinism=0), Perf(5, math=1), Perf(6, status=3), Perf(1, math=3), Perf(2)]
    assert train_algos.choose(perfs, "float32").algo == 1  # 0 atomics, 5 TF32, 6 failed
    assert train_algos.choose(perfs, "float64").algo == 5  # tensor-op math is not TF32 in float64
    assert train_algos.choose([Perf(0, determinism=0)], "float32").algo == 0  # only that: taken
    assert train_algos.choose([Perf(5, math=2)], "float32") is None


def test_training_algos_ask_each_kind_with_its_descriptors_in_order():
    calls = []

    class Lib:
        def __getattr__(self, name):
            def fn(handle, *args):
                calls.append((name, args[:4]))
                if "Algorithm" in name:
                    perf, count = args[-1], args[-2]
                    perf[0].algo, perf[0].status, perf[0].mathType, perf[0].determinism = 1, 0, 3, 1
                    count._obj.value = 1
                else:
                    args[-1]._obj.value = 64 if "Filter" in name else 32
            return fn

    class D:
        pass

    d = D()
    for name in ("x", "w1", "conv1", "c1", "p1", "w2", "conv2", "c2"):
        setattr(d, name, type("Desc", (), {"ptr": name, "dims": name})())
    algos = train_algos.training_algos(Lib(), None, d, "float32")
    assert algos == {"conv1.fwd": (1, 32, 3), "conv2.fwd": (1, 32, 3), "conv1.bwd_filter": (1, 64, 3),
                     "conv2.bwd_filter": (1, 64, 3), "conv2.bwd_data": (1, 32, 3)}
    asked = {(name, args) for name, args in calls if "Algorithm" in name}
    assert ("cudnnGetConvolutionBackwardFilterAlgorithm_v7", ("x", "c1", "conv1", "w1")) in asked
    assert ("cudnnGetConvolutionBackwardDataAlgorithm_v7", ("w2", "c2", "conv2", "p1")) in asked
    assert ("cudnnGetConvolutionForwardAlgorithm_v7", ("p1", "w2", "conv2", "c2")) in asked


# --- the bindings ----------------------------------------------------------------------------
NEW_CUDNN = {"cudnnConvolutionBackwardData": 13, "cudnnConvolutionBackwardFilter": 13,
             "cudnnConvolutionBackwardBias": 7, "cudnnPoolingBackward": 12, "cudnnActivationBackward": 12,
             "cudnnGetConvolutionBackwardDataAlgorithm_v7": 8, "cudnnGetConvolutionBackwardFilterAlgorithm_v7": 8,
             "cudnnFindConvolutionBackwardDataAlgorithm": 8, "cudnnFindConvolutionBackwardFilterAlgorithm": 8,
             "cudnnGetConvolutionBackwardDataWorkspaceSize": 7,
             "cudnnGetConvolutionBackwardFilterWorkspaceSize": 7}


def test_new_signatures_match_the_cudnn_9_headers():
    """Argument counts from cudnn_cnn.h / cudnn_ops.h; pointers and descriptors as void *, the
    algorithm, counts as int, workspace sizes as size_t."""
    sig, P, Int, S = binding.SIGNATURES, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    for name, count in NEW_CUDNN.items():
        assert len(sig[name]) == count, name
    assert sig["cudnnConvolutionBackwardData"] == [P, P, P, P, P, P, P, Int, P, S, P, P, P]
    assert sig["cudnnConvolutionBackwardFilter"] == sig["cudnnConvolutionBackwardData"]
    assert sig["cudnnConvolutionBackwardBias"] == [P, P, P, P, P, P, P]
    assert sig["cudnnPoolingBackward"] == [P] * 12
    assert sig["cudnnGetConvolutionBackwardDataWorkspaceSize"][5:] == [Int, ctypes.POINTER(S)]
    assert ctypes.sizeof(binding.ConvBwdDataAlgoPerf) == ctypes.sizeof(binding.ConvFwdAlgoPerf)
    assert (binding.CONV_BWD_DATA_ALGOS, binding.CONV_BWD_FILTER_ALGOS, binding.DETERMINISTIC) == (6, 7, 1)
    assert cublas.SIGNATURES["cublasSaxpy_v2"] == [P, Int, P, P, Int, P, Int]
    assert cublas.SIGNATURES["cublasDaxpy_v2"] == cublas.SIGNATURES["cublasSaxpy_v2"]


def test_new_functions_bind_in_the_real_libraries(monkeypatch):
    try:
        lib = binding.load()
    except Unavailable as exc:
        pytest.skip(f"libcudnn not installed here (pip install --no-deps 'nvidia-cudnn-cu12>=9,<10'): {exc}")
    for name in NEW_CUDNN:
        assert getattr(lib.lib, name).argtypes == binding.SIGNATURES[name], name
    monkeypatch.setattr(cublas, "_loaded", None)
    try:
        blas = cublas.load()
    except Unavailable as exc:
        pytest.skip(f"libcublas not installed here: {exc}")
    finally:
        monkeypatch.setattr(cublas, "_loaded", None)
    assert blas.lib.cublasSaxpy_v2.argtypes == cublas.AXPY


def test_registry_names_the_trainer_and_it_is_gpu_only():
    spec = registry.spec("cudnn")
    assert spec.trainer == "lenet_cudnn.train:CudnnTrainer" and spec.train_variants == ("default",)
    with pytest.raises(ValueError, match="unknown device 'cpu'"):
        cudnn_train.CudnnTrainer(INIT, device="cpu")


def test_bad_batches_are_clear_errors():
    """harness.base.check_batch: the cuDNN and oneDNN trainers' one check of a step's input."""
    x = np.zeros((4, 28, 28, 1), np.float32)
    with pytest.raises(ValueError, match="expected 4 integer labels"):
        base.check_batch(x, np.zeros(3, int))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 9\]"):
        base.check_batch(x, np.array([0, 1, 2, -1]))
    with pytest.raises(ValueError, match=r"expected images \(N, 28, 28, 1\)"):
        base.check_batch(x[:, :, :, 0], np.zeros(4, int))


# --- on a GPU ---------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(GPU_ABSENT is not None, reason=f"needs an NVIDIA GPU: {GPU_ABSENT}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_k_steps_agree_with_the_oracle(dtype):
    """The first gradients exactly; then K steps as verify-train checks them. In float32 a step
    may go the other way at a max-pool near-tie and drift after it (PyTorch on the same GPU
    does the same, at the same steps: the H100 run's verify-train rows); float64 never may."""
    from harness.check import train_verify

    images, labels = mnist.load("train")
    x, y = mnist.to_input(images[:7]), labels[:7].astype(np.int64)
    ours = registry.import_class(registry.spec("cudnn").trainer)(INIT, device="gpu", dtype=dtype)
    oracle = NumpyTrainer(INIT, dtype="float64")
    try:
        loss, grads = ours.gradients(x, y)
        expected_loss, expected = oracle.gradients(x, y)
        assert abs(loss - expected_loss) <= 1e-4 * abs(expected_loss)
        for name, (kernel, bias) in expected.items():
            np.testing.assert_allclose(grads[name].kernel, kernel, atol=1e-5, rtol=0, err_msg=name)
            np.testing.assert_allclose(grads[name].bias, bias, atol=1e-5, rtol=0, err_msg=name)
        ours.train_step(x[:1], y[:1])  # another batch size: its own plan, the same weights
        assert set(ours.plans) == {7, 1}
    finally:
        ours.close()
    rows = train_verify.verify_train(["cudnn"], "gpu", INIT, steps=20, batch=32, dtype=dtype,
                                     progress=lambda line: None)
    allowed = ("ok", "tie") if dtype == "float32" else ("ok",)
    assert len(rows) == 1 and rows[0]["status"] in allowed, rows


# --- the trainer itself, on the NumPy 'GPU' (tests/fake_gpu.py) ----------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_trainer_on_a_numpy_device_agrees_with_the_oracle(monkeypatch, dtype):
    """CudnnTrainer end to end with libcudnn, libcublas and CuPy replaced by NumPy behind ctypes
    callbacks with the real argtypes: every call's arguments converted, counted and computed."""
    from tests import fake_gpu

    lib, blas = fake_gpu.install(monkeypatch, cudnn_train)
    images, labels = mnist.load("train")
    x, y = mnist.to_input(images[:40]), labels[:40].astype(np.int64)
    ours = cudnn_train.CudnnTrainer(INIT, dtype=dtype)
    oracle = NumpyTrainer(INIT, dtype="float64")
    tol = 1e-5 if dtype == "float32" else 1e-10
    try:
        loss, grads = ours.gradients(x[:7], y[:7])
        expected_loss, expected = oracle.gradients(x[:7], y[:7])
        assert abs(loss - expected_loss) <= tol * abs(expected_loss)
        for name, (kernel, bias) in expected.items():
            np.testing.assert_allclose(grads[name].kernel, kernel, atol=tol, rtol=0, err_msg=name)
            np.testing.assert_allclose(grads[name].bias, bias, atol=tol, rtol=0, err_msg=name)
        for start, n in ((0, 16), (16, 1), (17, 16)):  # two batch sizes: two plans, one set of weights
            loss = ours.train_step(x[start:start + n], y[start:start + n])
            expected_loss = oracle.train_step(x[start:start + n], y[start:start + n])
            assert abs(loss - expected_loss) <= 1e-4 * abs(expected_loss), (start, n)
        found, want = ours.weights(), oracle.weights()
        for name in want:
            np.testing.assert_allclose(found[name].kernel, want[name].kernel, atol=tol, rtol=0, err_msg=name)
            np.testing.assert_allclose(found[name].bias, want[name].bias, atol=tol, rtol=0, err_msg=name)
        assert set(ours.plans) == {7, 16, 1}
    finally:
        ours.close()
    assert not lib.lib.errors and not blas.lib.errors, lib.lib.errors + blas.lib.errors
    called = set(lib.lib.calls)
    assert {"cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter", "cudnnConvolutionBackwardBias",
            "cudnnPoolingBackward", "cudnnActivationBackward"} <= called
    axpy = "cublasSaxpy_v2" if dtype == "float32" else "cublasDaxpy_v2"
    assert blas.lib.calls.count(axpy) == 3 * 10  # three steps, ten tensors
