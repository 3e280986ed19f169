"""The cuDNN level. Without a GPU: the weight layouts, the sgemm argument mapping and the whole
NCHW pipeline are checked by emulating cuDNN's and cuBLAS' conventions in NumPy; descriptors
and output dimensions through the real libcudnn where it is installed. With a GPU: the real
thing against the reference."""

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.data import mnist
from harness.errors import Unavailable
from harness.machine import gpu
from lenet_cudnn import binding, layout
from lenet_numpy.model import NumpyLeNet, conv2d_relu, max_pool_2x2, softmax

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
def sample(shared_weights):
    images, _ = mnist.load("test")
    x = mnist.to_input(images[:64])
    return x, NumpyLeNet(DEFAULT_WEIGHTS).predict(x)


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
    import ctypes

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


# --- on a GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(gpu.absent_reason() is not None, reason=f"needs an NVIDIA GPU: {gpu.absent_reason()}")
@pytest.mark.parametrize("variant", ["tuned", "naive"])
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
        if variant == "tuned":
            assert impl.last_device_time_ns() > 0
    finally:
        impl.close()
