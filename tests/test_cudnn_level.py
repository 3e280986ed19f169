"""The cuDNN level. Without a GPU: the weight layouts, the sgemm argument mapping and the whole
NCHW pipeline are checked by emulating cuDNN's and cuBLAS' conventions in NumPy; descriptors
and output dimensions through the real libcudnn where it is installed. With a GPU: the real
thing against the reference."""

import ctypes
import dataclasses

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.errors import Unavailable
from harness.frameworks import native
from harness.machine import gpu
from lenet_cudnn import binding, cublas, layout, model
from lenet_numpy.model import conv2d_relu, max_pool_2x2, softmax
from tests.conftest import oracle_sample

# --- NumPy stand-ins for what cuDNN and cuBLAS compute (test oracles, not the level) --------


def xcorr_nchw(x, kcrs, bias, pad):
    """cuDNN CROSS_CORRELATION: x (N, C, H, W), filter (K, C, R, S) -> (N, K, H', W')."""
    k, c, r, s = kcrs.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    h, w = x.shape[2] - r + 1, x.shape[3] - s + 1
    out = np.zeros((x.shape[0], k, h, w))
    for i in range(r):
        for j in range(s):
            out += np.einsum("nchw,kc->nkhw", x[:, :, i:i + h, j:j + w], kcrs[:, :, i, j])
    return out + bias[None, :, None, None]


def pool_nchw(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def gemm_column_major(m, n, k, a_buf, lda, b_buf, ldb, ldc, **_):
    """C = A B as BLAS reads flat buffers in column-major order; returns C's flat buffer."""
    a = a_buf.ravel()[:lda * k].reshape(k, lda).T[:m, :]  # (m, k)
    b = b_buf.ravel()[:ldb * n].reshape(n, ldb).T[:k, :]  # (k, n)
    c = np.zeros((ldc, n))
    c[:m, :] = a @ b
    return c.T.ravel()  # column-major (ldc, n)


def dense_via_gemm(x, kernel, bias):
    batch, fan_in = x.shape
    g = layout.dense_gemm_args(batch, fan_in, kernel.shape[1])
    y = gemm_column_major(a_buf=kernel, b_buf=x, **g)  # A = W, B = X, as the level passes them
    return y.reshape(batch, kernel.shape[1]) + bias  # read back row-major (batch, out)


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], 64)



def partial_plan(**fields) -> model.Plan:
    """A model.Plan with the given fields, every other one None (what a unit test reads)."""
    names = [f.name for f in dataclasses.fields(model.Plan)]
    return model.Plan(**{**dict.fromkeys(names), **fields})

def test_hwio_to_kcrs_reproduces_reference_conv1(shared_weights, sample):
    x, _ = sample
    kernel, bias = shared_weights["conv1"]
    kcrs = layout.conv_kernel_kcrs(kernel)
    assert kcrs.shape == (6, 1, 5, 5) and kcrs.flags.c_contiguous
    ours = np.maximum(xcorr_nchw(x.transpose(0, 3, 1, 2), kcrs, bias, pad=2), 0)
    reference = conv2d_relu(x, kernel, bias, pad=2)  # NHWC
    np.testing.assert_allclose(ours, reference.transpose(0, 3, 1, 2), atol=1e-5)


def test_fc1_rows_reordered_from_nhwc_to_nchw_flatten(shared_weights):
    rng = np.random.default_rng(0)
    pool2_nhwc = rng.random((3, 5, 5, 16))
    kernel = shared_weights["fc1"].kernel
    nhwc_result = pool2_nhwc.reshape(3, 400) @ kernel  # what Keras computes
    nchw_flat = pool2_nhwc.transpose(0, 3, 1, 2).reshape(3, 400)  # what cuDNN's buffer holds
    np.testing.assert_allclose(nchw_flat @ layout.fc1_rows_nchw(kernel), nhwc_result, rtol=1e-6)
    assert not np.allclose(nchw_flat @ kernel, nhwc_result)  # without the reorder it is wrong


@pytest.mark.parametrize("batch,fan_in,fan_out", [(1, 400, 120), (7, 120, 84), (64, 84, 10)])
def test_sgemm_arguments_give_row_major_xw(batch, fan_in, fan_out):
    rng = np.random.default_rng(batch)
    x, w, b = rng.random((batch, fan_in)), rng.random((fan_in, fan_out)), rng.random(fan_out)
    g = layout.dense_gemm_args(batch, fan_in, fan_out)
    assert (g["m"], g["n"], g["k"]) == (fan_out, batch, fan_in)
    assert (g["transa"], g["transb"]) == (0, 0)
    np.testing.assert_allclose(dense_via_gemm(x, w, b), x @ w + b, rtol=1e-12)


def test_whole_nchw_pipeline_emulated_matches_reference(shared_weights, sample):
    """The level's data flow (NCHW, KCRS, (c,h,w) flatten, column-major gemm) in NumPy."""
    x, reference = sample
    w = layout.convert(shared_weights, "float64")
    h = x.transpose(0, 3, 1, 2).astype(np.float64)  # (N, 1, 28, 28)
    h = pool_nchw(np.maximum(xcorr_nchw(h, *w["conv1"], pad=2), 0))  # (N, 6, 14, 14)
    h = pool_nchw(np.maximum(xcorr_nchw(h, *w["conv2"], pad=0), 0))  # (N, 16, 5, 5)
    h = h.reshape(len(h), 400)  # NCHW flatten: what the device buffer holds
    h = np.maximum(dense_via_gemm(h, *w["fc1"]), 0)
    h = np.maximum(dense_via_gemm(h, *w["fc2"]), 0)
    probs = softmax(dense_via_gemm(h, *w["fc3"]))
    assert np.array_equal(probs.argmax(1), reference.argmax(1))
    np.testing.assert_allclose(probs, reference, atol=1e-5)


def test_convert_casts_and_keeps_biases(shared_weights):
    w = layout.convert(shared_weights, "float64")
    assert w["conv2"][0].shape == (16, 6, 5, 5) and w["fc1"][0].shape == (400, 120)
    assert all(k.dtype == np.float64 and b.dtype == np.float64 for k, b in w.values())
    with pytest.raises(ValueError, match="expected an HWIO kernel"):
        layout.conv_kernel_kcrs(np.zeros((5, 5, 6)))


def test_pooling_and_softmax_stand_ins_agree_with_reference_ops():
    rng = np.random.default_rng(3)
    a = rng.random((2, 10, 10, 16))
    np.testing.assert_array_equal(pool_nchw(a.transpose(0, 3, 1, 2)),
                                  max_pool_2x2(a).transpose(0, 3, 1, 2))


# --- the real libcudnn, where installed (descriptors work without a GPU) ----------------------


def cudnn_or_skip():
    try:
        return binding.load()
    except Unavailable as exc:
        pytest.skip(f"libcudnn not installed here: {exc}")


@pytest.mark.parametrize("n", [1, 7, 512])
def test_descriptor_dims_from_real_libcudnn(n):
    from lenet_cudnn.descriptors import LeNetDescriptors

    lib = cudnn_or_skip()
    d = LeNetDescriptors(lib, n)
    try:
        assert d.c1.dims == (n, 6, 28, 28) and d.p1.dims == (n, 6, 14, 14)
        assert d.c2.dims == (n, 16, 10, 10) and d.p2.dims == (n, 16, 5, 5)
        assert d.c2.read_back() == (n, 16, 10, 10)  # what cuDNN stored, not what we asked
        assert d.fc["fc3"].read_back() == (n, 10, 1, 1)
    finally:
        d.close()
    assert not d.c1.ptr  # destroyed


def test_float64_descriptors_and_status_errors():
    from lenet_cudnn.descriptors import LeNetDescriptors, Tensor

    lib = cudnn_or_skip()
    LeNetDescriptors(lib, 2, "float64").close()
    with pytest.raises(binding.CudnnError, match="cudnnSetTensor4dDescriptor failed: CUDNN_STATUS_BAD_PARAM"):
        Tensor(lib, (0, 1, 28, 28), binding.DATA_FLOAT)


def test_every_bound_function_has_argtypes_and_restype():
    lib = cudnn_or_skip()
    for name, argtypes in binding.SIGNATURES.items():
        fn = getattr(lib.lib, name)
        assert fn.argtypes == argtypes, name
        assert fn.restype is binding.RESTYPES.get(name, binding.c_int), name
    assert lib.version >= 8000


def test_cudnn_create_without_gpu_is_a_checked_error():
    lib = cudnn_or_skip()
    if gpu.absent_reason() is None:
        pytest.skip("a GPU is present")
    handle = binding.Handle()

    with pytest.raises(binding.CudnnError, match="cudnnCreate failed: CUDNN_STATUS_"):
        lib.cudnnCreate(ctypes.byref(handle))


def test_discovery_order_and_unavailable_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(binding, "_loaded", None)
    monkeypatch.setenv("LENET_CUDNN_LIBRARY", str(tmp_path / "libcudnn.so.9"))
    found = binding.candidates()
    assert found[0] == (str(tmp_path / "libcudnn.so.9"), "LENET_CUDNN_LIBRARY")
    assert found[-2:] == [("libcudnn.so.9", "system"), ("libcudnn.so.8", "system")]
    monkeypatch.setattr(binding, "candidates", lambda: [(str(tmp_path / "nope.so"), "test")])
    with pytest.raises(Unavailable, match="no usable libcudnn found; tried .*nope.so"):
        binding.load()
    monkeypatch.setattr(binding, "_loaded", None)


def test_cudnn_is_unavailable_on_cpu_with_reason():
    from harness.check import verify

    assert registry.REGISTRY["cudnn"].devices == ("gpu",)
    with pytest.raises(ValueError, match="unknown device 'cpu'"):
        registry.create("cudnn", DEFAULT_WEIGHTS, device="cpu")
    assert verify.exit_code([{"status": "unavailable"}]) == 3


# --- the cuBLAS binding (lenet_cudnn/cublas.py) ---------------------------------------------


def test_cublas_signatures_are_complete_and_pointers_are_void_p():
    """No function left to ctypes' int defaults: 64-bit handles and pointers would be truncated."""
    assert set(cublas.SIGNATURES) >= {
        "cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2",
        "cublasSetMathMode", "cublasSgemm_v2", "cublasDgemm_v2", "cublasGetVersion_v2"}
    assert cublas.Handle is ctypes.c_void_p and cublas.Ptr is ctypes.c_void_p
    for name, argtypes in cublas.SIGNATURES.items():
        assert isinstance(argtypes, list), name
        if name not in ("cublasGetStatusString",):
            assert argtypes[0] in (cublas.Handle, ctypes.POINTER(cublas.Handle)), name
    assert cublas.SIGNATURES["cublasCreate_v2"] == [ctypes.POINTER(ctypes.c_void_p)]
    assert cublas.SIGNATURES["cublasSetStream_v2"] == [ctypes.c_void_p, ctypes.c_void_p]
    assert cublas.SIGNATURES["cublasSetWorkspace_v2"] == [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    for gemm in ("cublasSgemm_v2", "cublasDgemm_v2"):
        args = cublas.SIGNATURES[gemm]
        assert len(args) == 14
        # alpha, A, B, beta, C: pointers; m, n, k, lda, ldb, ldc and the ops: int
        assert [i for i, t in enumerate(args) if t is ctypes.c_void_p] == [0, 6, 7, 9, 11, 12]
    assert cublas.DEFAULT_MATH == 0 and cublas.TF32_TENSOR_OP_MATH == 3


class FakeFunction:
    def __init__(self, status=0):
        self.argtypes = self.restype = None
        self.status, self.calls = status, []

    def __call__(self, *args):
        self.calls.append(args)
        if self.status == 0 and args and hasattr(args[0], "_obj"):  # cublasCreate_v2(&handle)
            args[0]._obj.value = 0xABC
        return self.status


class FakeLib:
    """Stands in for libcublas: every symbol, each returning `status` (GetStatusString: bytes)."""

    def __init__(self, status=0, missing=()):
        self.fns = {name: FakeFunction(status) for name in cublas.SIGNATURES if name not in missing}
        self.fns["cublasGetStatusString"] = lambda status: b"an invalid value was passed"

    def __getattr__(self, name):
        try:
            return self.fns[name]
        except KeyError:
            raise AttributeError(f"undefined symbol: {name}") from None


def test_cublas_binding_sets_argtypes_restype_and_checks_statuses():
    fake = FakeLib()
    lib = cublas.Cublas("fake.so", "test", fake)
    for name, argtypes in cublas.SIGNATURES.items():
        if name == "cublasGetStatusString":
            continue
        assert fake.fns[name].argtypes == argtypes, name
        assert fake.fns[name].restype is ctypes.c_int, name
    fake.fns["cublasSgemm_v2"].status = 7
    with pytest.raises(cublas.CublasError, match=r"cublasSgemm_v2 failed: CUBLAS_STATUS_INVALID_VALUE: an invalid value was passed \(status 7\)"):
        lib.cublasSgemm_v2(*range(14))
    with pytest.raises(AttributeError, match="cublasSetWorkspace_v2"):
        cublas.Cublas("old.so", "test", FakeLib(missing=("cublasSetWorkspace_v2",)))


def test_blas_handle_sets_workspace_after_stream_and_default_math():
    fake = FakeLib()
    handle = cublas.BlasHandle(cublas.Cublas("fake.so", "test", fake), 0x1234, 0x5000, 1 << 20)
    order = [name for name in ("cublasCreate_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2",
                               "cublasSetPointerMode_v2", "cublasSetMathMode") if fake.fns[name].calls]
    assert order == ["cublasCreate_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2",
                     "cublasSetPointerMode_v2", "cublasSetMathMode"]
    assert fake.fns["cublasSetStream_v2"].calls[0][1] == 0x1234
    assert fake.fns["cublasSetWorkspace_v2"].calls[0][1:] == (0x5000, 1 << 20)
    assert fake.fns["cublasSetMathMode"].calls[0][1] == cublas.DEFAULT_MATH
    handle.close()
    assert len(fake.fns["cublasDestroy_v2"].calls) == 1 and not handle.ptr
    handle.close()  # twice: nothing more
    assert len(fake.fns["cublasDestroy_v2"].calls) == 1


def test_blas_handle_create_failure_is_unavailable():
    fake = FakeLib()
    lib = cublas.Cublas("fake.so", "test", fake)
    fake.fns["cublasCreate_v2"].status = 1
    with pytest.raises(Unavailable, match="cublasCreate_v2 failed: CUBLAS_STATUS_NOT_INITIALIZED"):
        cublas.BlasHandle(lib, 1, 2, 3)


def test_cublas_discovery_order(monkeypatch, tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 fd:01 1 /opt/x/libcublasLt.so.13\n"
        "7f01-7f02 r-xp 00000000 fd:01 2 /opt/x/libcublas.so.13\n"
        "7f02-7f03 r--p 00001000 fd:01 2 /opt/x/libcublas.so.13\n"
        "7f03-7f04 rw-p 00000000 00:00 0 \n")
    assert native.loaded_in_process("libcublas.so", str(maps)) == ["/opt/x/libcublas.so.13"]
    assert native.loaded_in_process("libcublasLt.so", str(maps)) == ["/opt/x/libcublasLt.so.13"]
    assert native.loaded_in_process("libcublas.so", str(tmp_path / "absent")) == []
    monkeypatch.setenv("LENET_CUBLAS_LIBRARY", "/chosen/libcublas.so.13")
    monkeypatch.setattr(native, "loaded_in_process",
                        lambda prefix: ["/opt/x/libcublas.so.13"] if prefix == "libcublas.so" else [])
    monkeypatch.setattr(cublas, "wheel_libraries", lambda: ["/site/nvidia/cu13/lib/libcublas.so.13"])
    assert cublas.candidates() == [
        ("/chosen/libcublas.so.13", "LENET_CUBLAS_LIBRARY"),
        ("/opt/x/libcublas.so.13", "loaded in this process"),
        ("/site/nvidia/cu13/lib/libcublas.so.13", "nvidia-cublas wheel"),
        ("libcublas.so.13", "system"), ("libcublas.so.12", "system")]


def test_cublas_wheel_layouts_cu13_and_cu12(monkeypatch, tmp_path):
    import importlib.util

    for rel in ("a/nvidia/cu13/lib/libcublas.so.13", "b/nvidia/cublas/lib/libcublas.so.12"):
        (tmp_path / rel).parent.mkdir(parents=True)
        (tmp_path / rel).write_bytes(b"")

    class Spec:
        submodule_search_locations = [str(tmp_path / "a/nvidia"), str(tmp_path / "b/nvidia")]

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: Spec() if name == "nvidia" else None)
    assert cublas.wheel_libraries() == [str(tmp_path / "a/nvidia/cu13/lib/libcublas.so.13"),
                                        str(tmp_path / "b/nvidia/cublas/lib/libcublas.so.12")]


def test_cublas_missing_is_unavailable_naming_what_was_tried(monkeypatch, tmp_path):
    monkeypatch.setattr(cublas, "_loaded", None)
    monkeypatch.setenv("LENET_CUBLAS_LIBRARY", "/nonexistent/libcublas.so.13")
    monkeypatch.setattr(native, "loaded_in_process", lambda prefix: [])
    monkeypatch.setattr(cublas, "wheel_libraries", lambda: [])
    monkeypatch.setattr(cublas, "SONAMES", ("libcublas-lenet-absent.so.13",))
    with pytest.raises(Unavailable) as info:
        cublas.load()
    message = str(info.value)
    assert message.startswith("no usable libcublas found; tried /nonexistent/libcublas.so.13 (LENET_CUBLAS_LIBRARY)")
    assert "libcublas-lenet-absent.so.13 (system)" in message and "LENET_CUBLAS_LIBRARY" in message
    assert cublas.probe() == {"found": False, "reason": message}
    monkeypatch.setattr(cublas, "_loaded", None)


def test_real_libcublas_binds_and_reports_its_version_without_gpu(monkeypatch):
    """The nvidia-cublas-cu12 wheel (or CUDA 13's nvidia-cublas) loads and binds on any x86 Linux;
    cublasGetVersion needs no handle, cublasCreate needs a GPU."""
    monkeypatch.setattr(cublas, "_loaded", None)
    try:
        lib = cublas.load()
    except Unavailable as exc:
        pytest.skip(f"libcublas not installed here (pip install --no-deps nvidia-cublas-cu12): {exc}")
    finally:
        monkeypatch.setattr(cublas, "_loaded", None)
    assert lib.version >= 12000, lib.version
    for name, argtypes in cublas.SIGNATURES.items():
        fn = getattr(lib.lib, name)
        assert fn.argtypes == argtypes, name
        assert fn.restype is cublas.RESTYPES.get(name, ctypes.c_int), name
    assert "not initialized" in lib.error_string(1) or "NOT_INITIALIZED" in lib.error_string(1)
    if gpu.absent_reason() is not None:
        handle = cublas.Handle()
        with pytest.raises(cublas.CublasError, match="cublasCreate_v2 failed: CUBLAS_STATUS_"):
            lib.cublasCreate_v2(ctypes.byref(handle))


def test_registry_graph_variant_is_gpu_only():
    spec = registry.spec("cudnn")
    assert spec.variants == ("tuned", "naive", "graph", "frontend") and spec.variants[0] == "tuned"
    assert spec.gpu_only == ("graph", "frontend")  # frontend: cuDNN's graph API, replayed as a CUDA graph
    assert "graph" in spec.variants_for("gpu")
    assert "graph" not in spec.variants_for("cpu")


def test_tf32_algorithms_are_skipped_in_float32():
    """pick_algos takes the first usable Find entry whose math type is not tensor-op in float32."""
    from lenet_cudnn import model

    assert model.TENSOR_OP_MATH == (1, 2) and binding.FMA_MATH == 3

    class Lib:
        def cudnnFindConvolutionForwardAlgorithm(self, h, x, w, conv, y, n, count, perf):
            entries = [(6, 0, 1), (1, 0, 2), (7, 3, 0), (0, 0, 3), (2, 0, 0)]  # algo, status, math
            for i, (algo, status, math) in enumerate(entries):
                perf[i].algo, perf[i].status, perf[i].mathType = algo, status, math
            count._obj.value = len(entries)

        def cudnnGetConvolutionForwardWorkspaceSize(self, h, x, w, conv, y, algo, size):
            size._obj.value = 100 * algo

    class D:
        x = w1 = conv1 = c1 = p1 = w2 = conv2 = c2 = type("Desc", (), {"ptr": None, "dims": ()})()

    impl = model.CudnnLeNet.__new__(model.CudnnLeNet)
    impl.lib, impl.handle, impl.dtype = Lib(), None, "float32"
    assert impl.pick_algos(D(), find=True) == ([0, 0], 0)  # 6 (TF32), 1 (conversion), 7 (failed) skipped
    assert impl.conv_math == [3, 3]
    impl.dtype = "float64"
    assert impl.pick_algos(D(), find=True) == ([6, 6], 600)  # tensor-op math is not TF32 there


# --- on a GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(gpu.absent_reason() is not None, reason=f"needs an NVIDIA GPU: {gpu.absent_reason()}")
@pytest.mark.parametrize("variant", ["tuned", "naive", "graph"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_level_agrees_with_reference(sample, variant, dtype):
    x, reference = sample
    impl = registry.create("cudnn", DEFAULT_WEIGHTS, device="gpu", variant=variant, dtype=dtype)
    try:
        probs = impl.predict(x.astype(dtype))
        assert probs.shape == (64, 10) and probs.dtype == np.dtype(dtype)
        assert np.array_equal(probs.argmax(1), reference.argmax(1))
        assert np.max(np.abs(probs - reference)) <= 1e-5
        one = impl.predict(x[:1].astype(dtype))
        assert np.max(np.abs(one - reference[:1])) <= 1e-5
        if variant != "naive":
            assert impl.last_device_time_ns() > 0
        if dtype == "float32":
            assert impl.conv_math and not set(impl.conv_math) & {1, 2}  # no TF32 convolutions
        assert impl.blas.math_mode() == cublas.DEFAULT_MATH
        if variant != "naive":  # float32: the dense layers are cuBLASLt matmuls with epilogues
            assert impl.dense_note and (dtype == "float64" or impl.dense_note.startswith(
                "each dense layer one cublasLtMatmul")), impl.dense_note
    finally:
        impl.close()


@pytest.mark.gpu
@pytest.mark.skipif(gpu.absent_reason() is not None, reason=f"needs an NVIDIA GPU: {gpu.absent_reason()}")
def test_gpu_graph_replays_new_inputs_per_batch_size(sample):
    """One graph per batch size, captured once; each replay reads the new pinned input."""
    x, reference = sample
    impl = registry.create("cudnn", DEFAULT_WEIGHTS, device="gpu", variant="graph")
    try:
        assert impl.stream.ptr != 0  # never the legacy default stream
        for _ in range(3):
            for i in (0, 5, 9):
                one = impl.predict(x[i:i + 1])
                assert np.max(np.abs(one - reference[i:i + 1])) <= 1e-5
        graphs = {n: p.graph for n, p in impl.plans.items()}
        assert set(graphs) == {1} and graphs[1] is not None
        np.testing.assert_allclose(impl.predict(x[:16]), reference[:16], atol=1e-5)
        assert impl.plans[1].graph is graphs[1]  # not captured again
        assert set(impl.plans) == {1, 16}
        assert not set(impl.plans[16].conv_math) & {1, 2}
    finally:
        impl.close()


def run(calls):
    """Run a layer's prebuilt (function, argument tuple) calls, as forward and enqueue do."""
    for fn, args in calls:
        fn(*args)


def test_tuned_convolutions_run_fused_and_fall_back_to_three_calls_when_refused():
    """tuned/graph: conv + bias + ReLU as one cudnnConvolutionBiasActivationForward (alpha2 = 0,
    so z is not read); where cuDNN refuses it at plan time, the plan keeps the three calls."""
    calls = []

    class Lib:
        refuse = False

        def __getattr__(self, name):
            def call(*args):
                calls.append((name, args))
                if Lib.refuse and name == "cudnnConvolutionBiasActivationForward":
                    raise binding.CudnnError(name, 9, "CUDNN_STATUS_NOT_SUPPORTED")
            return call

    desc = type("Desc", (), {"ptr": 7})()
    d = type("D", (), {"bias": {"conv1": desc}, "relu": desc})()
    impl = model.CudnnLeNet.__new__(model.CudnnLeNet)
    impl.lib, impl.handle, impl.alpha, impl.beta = Lib(), "h", "one", "zero"
    kernel, bias = (type("A", (), {"data": type("P", (), {"ptr": p})()})() for p in (101, 102))
    impl.w = {"conv1": (kernel, bias)}
    run(impl.conv_bias_relu(d, desc, "x", desc, desc, "conv1", desc, "y", 3, "ws", 64, fused=True))
    assert [name for name, _ in calls] == ["cudnnConvolutionBiasActivationForward"]
    args = calls[0][1]
    assert args[1] == "one" and args[3] == "x" and args[5] == 101 and args[7] == 3
    assert args[10] == "zero" and args[12] == "y" and args[14] == 102 and args[17] == "y"
    calls.clear()
    run(impl.conv_bias_relu(d, desc, "x", desc, desc, "conv1", desc, "y", 3, "ws", 64, fused=False))
    assert [name for name, _ in calls] == ["cudnnConvolutionForward", "cudnnAddTensor",
                                           "cudnnActivationForward"]

    tried = []
    impl.stream = type("S", (), {"synchronize": lambda self: None})()
    impl.forward = lambda *args, fused: (tried.append(fused), run(impl.conv_bias_relu(
        d, desc, "x", desc, desc, "conv1", desc, "y", 3, "ws", 64, fused)))
    plan = partial_plan(d=d, buf={}, algos=[3, 3], ws=kernel, ws_size=64)
    assert impl.fusion_works(plan) is True and "one cudnnConvolutionBiasActivationForward" in impl.fusion_note
    Lib.refuse = True
    assert impl.fusion_works(plan) is False and tried == [True, True]
    assert impl.fusion_note.startswith("three calls per convolution") and "NOT_SUPPORTED" in impl.fusion_note


# --- cuBLASLt: each dense layer one matmul with its bias (+ReLU) epilogue -------------------------


@pytest.mark.parametrize("batch,fan_in,fan_out,relu", [(1, 400, 120, True), (7, 120, 84, True), (512, 84, 10, False)])
def test_cublaslt_problem_is_the_oracles_dense_layer_column_major(batch, fan_in, fan_out, relu):
    from lenet_cudnn import cublaslt

    g = cublaslt.layout_args(batch, fan_in, fan_out, relu)
    assert (g["m"], g["n"], g["k"]) == (fan_out, batch, fan_in)
    assert g["a"] == (fan_out, fan_in, fan_out) and g["b"] == (fan_in, batch, fan_in)
    assert g["d"] == (fan_out, batch, fan_out) and g["bias_length"] == g["d"][0] == fan_out
    assert g["epilogue"] == (cublaslt.EPILOGUE_RELU_BIAS if relu else cublaslt.EPILOGUE_BIAS)
    assert cublaslt.EPILOGUE_RELU_BIAS == 6 and cublaslt.EPILOGUE_BIAS == 4  # cublasLt.h: RELU 2 | BIAS 4
    assert cublaslt.COMPUTE == {"float32": (68, 0), "float64": (70, 1)}  # COMPUTE_32F (not _FAST_TF32 = 77)
    with pytest.raises(ValueError, match="expected positive sizes"):
        cublaslt.layout_args(0, fan_in, fan_out, relu)


def test_cublaslt_signatures_leave_nothing_to_ctypes_defaults():
    from lenet_cudnn import cublaslt

    for name, argtypes in cublaslt.SIGNATURES.items():
        assert isinstance(argtypes, list), name
    assert len(cublaslt.SIGNATURES["cublasLtMatmul"]) == 16
    assert cublaslt.SIGNATURES["cublasLtMatrixLayoutCreate"][2:] == [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64]
    assert ctypes.sizeof(cublaslt.HeuristicResult) == 64 + 8 + 4 + 4 + 16  # cublasLtMatmulHeuristicResult_t


def fake_lt(refuse=False):
    from lenet_cudnn import cublaslt
    from tests import fake_gpu

    return cublaslt.CublasLt("fake-libcublasLt", "test", fake_gpu.FakeCublasLt(refuse)), fake_gpu.fake_cupy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cublaslt_dense_layers_with_epilogues_reproduce_the_oracle(shared_weights, sample, dtype):
    """pool2's output from the NumPy oracle, then fc1, fc2 (RELU_BIAS) and fc3 (BIAS) as the
    level's DenseMatmuls on the fake cuBLASLt (column-major reads as the layouts say), then softmax."""
    from lenet_cudnn import cublaslt

    x, reference = sample
    lt, cp = fake_lt()
    w = shared_weights
    h = max_pool_2x2(conv2d_relu(max_pool_2x2(conv2d_relu(x, *w["conv1"], pad=2)), *w["conv2"], pad=0))
    n = len(h)
    scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
    one, zero = scalar(1), scalar(0)
    bufs = {"p2": cp.asarray(h.reshape(n, 400).astype(dtype)),  # NHWC flatten (the oracle's own)
            **{name: cp.empty((n, size), dtype) for name, size in (("fc1", 120), ("fc2", 84), ("fc3", 10))}}
    for name, src, fan_in, fan_out, relu in (("fc1", "p2", 400, 120, True), ("fc2", "fc1", 120, 84, True),
                                             ("fc3", "fc2", 84, 10, False)):
        kernel, bias = (cp.asarray(a.astype(dtype)) for a in w[name])
        matmul = cublaslt.DenseMatmul(lt, 0x17, dtype, n, fan_in, fan_out, relu, kernel.data.ptr,
                                      bufs[src].data.ptr, bufs[name].data.ptr, bias.data.ptr,
                                      ctypes.addressof(one), ctypes.addressof(zero), 0, 1 << 20, 0)
        matmul.run()
        matmul.close()
    assert not lt.lib.errors, lt.lib.errors
    assert lt.lib.calls.count("cublasLtMatmul") == 3
    np.testing.assert_allclose(softmax(np.asarray(bufs["fc3"], np.float64)), reference, atol=1e-5)
    assert bufs["fc1"].min() >= 0 and bufs["fc3"].min() < 0  # ReLU on fc1, none on fc3's logits


def test_cublaslt_refusal_falls_back_to_the_gemm_path_with_the_reason():
    """No algorithm from the heuristic: the plan keeps cuBLAS' gemm + cuDNN's bias and ReLU."""
    lt, cp = fake_lt(refuse=True)
    impl = model.CudnnLeNet.__new__(model.CudnnLeNet)
    impl.lt, impl.lt_handle, impl.dtype, impl.dense_note = lt, 0x17, "float32", None
    impl.alpha = impl.beta = 0x10
    impl.blas_ws = cp.empty(16, cp.uint8)
    impl.stream = type("S", (), {"ptr": 0, "synchronize": lambda self: None})()
    impl.w = {name: (cp.empty((size, 1)), cp.empty(size)) for name, size in (("fc1", 120), ("fc2", 84), ("fc3", 10))}
    d = type("D", (), {"n": 2})()
    plan = partial_plan(d=d, buf=dict.fromkeys(("p2", "fc1", "fc2", "fc3"), 0x40), algos=[0, 0],
                        ws=impl.blas_ws, ws_size=0, fused=True)
    assert impl.dense_matmuls(plan) is None
    assert impl.dense_note.startswith("cuBLAS gemm + cuDNN bias and ReLU: cuBLASLt refused: "
                                      "cublasLtMatmulAlgoGetHeuristic failed: no algorithm for float32 (120 x 400)")
    assert lt.lib.calls.count("cublasLtMatmulDescDestroy") == 1  # the refused layer's descriptors freed
    impl.lt = None
    assert impl.dense_matmuls(plan) is None  # no cuBLASLt at all: the note set at construction stays


def test_dense_is_one_prebuilt_lt_call_where_the_plan_has_it():
    impl = model.CudnnLeNet.__new__(model.CudnnLeNet)
    impl.lt = type("Lt", (), {"cublasLtMatmul": "matmul"})()
    prebuilt = {"fc2": type("M", (), {"args": ("h", "op", "alpha")})()}
    assert impl.dense(None, "fc2", 1, 2, 120, 84, lt=prebuilt) == [("matmul", ("h", "op", "alpha"))]
