"""The oneDNN level through the real libdnnl: the binding's signatures, the enum values copied
from the v3.2 headers (checked against the strides the library gives), the weight layouts,
every variant against the NumPy reference, threads, and a missing library. Skipped only where
libdnnl cannot be loaded at all (the reason is shown)."""

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.errors import Unavailable
from lenet_numpy.model import conv2d_relu
from lenet_onednn import binding as dnnl
from lenet_onednn import layout
from lenet_onednn import primitives as P
from tests.conftest import ROOT, oracle_sample

F32 = dnnl.F32


@pytest.fixture(scope="module")
def lib():
    try:
        return dnnl.load()
    except Unavailable as exc:
        pytest.skip(f"libdnnl cannot be loaded here: {exc}")


@pytest.fixture(scope="module")
def engine(lib):
    eng, stream = dnnl.Ptr(), dnnl.Ptr()
    lib.dnnl_engine_create(ctypes.byref(eng), dnnl.CPU, 0)
    lib.dnnl_stream_create(ctypes.byref(stream), eng, dnnl.STREAM_DEFAULT_FLAGS)
    yield eng, stream
    lib.dnnl_stream_destroy(stream)
    lib.dnnl_engine_destroy(eng)


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], 320)


@pytest.fixture(scope="module")
def models(lib):
    from lenet_onednn.model import OnednnLeNet

    built = {v: OnednnLeNet(DEFAULT_WEIGHTS, variant=v) for v in registry.REGISTRY["onednn"].variants}
    yield built
    for m in built.values():
        m.close()


# --- the binding --------------------------------------------------------------------------
def test_every_function_has_argtypes_and_restype_and_pointers_come_back_whole(lib):
    for name, argtypes in dnnl.SIGNATURES.items():
        fn = getattr(lib.lib, name)
        assert fn.argtypes == argtypes, name
        assert fn.restype is dnnl.RESTYPES.get(name, ctypes.c_int), name
    # a pointer returned as a C int would lose its upper half
    assert lib.lib.dnnl_primitive_desc_query_md.restype is ctypes.c_void_p
    assert lib.lib.dnnl_version.restype == ctypes.POINTER(dnnl.Version)
    # ReLU's alpha/beta are C floats: passed as doubles they would be read as garbage
    assert lib.lib.dnnl_post_ops_append_eltwise.argtypes[2:] == [ctypes.c_float, ctypes.c_float]
    assert ctypes.sizeof(dnnl.Dims) == 12 * 8  # dnnl_dims_t is int64_t[12]


def test_version_is_the_wheels_3_2(lib):
    assert lib.version_info[:2] == (3, 2)
    found = dnnl.probe()
    assert found["found"] and found["path"] == lib.path and found["version"].startswith("3.2.")


def test_a_failed_call_names_the_function_and_the_status(lib, engine):
    eng, _ = engine
    src = P.MemoryDesc(lib, (1, 6, 28, 28), F32, dnnl.TAG_NHWC)
    wrong = P.MemoryDesc(lib, (1, 6, 10, 10), F32, dnnl.TAG_NHWC)  # 2x2 pooling of 28 is 14
    with pytest.raises(dnnl.OnednnError, match=r"dnnl_pooling_forward_primitive_desc_create failed: "
                                               r"dnnl_invalid_arguments \(status 2\)"):
        P.Primitive(lib, "pool", P.max_pool_2x2(lib, eng, src, wrong))
    src.close(), wrong.close()


# --- enum values copied from the headers, checked against the library ---------------------
@pytest.mark.parametrize("tag,dims,strides", [
    (dnnl.TAG_NCHW, (2, 3, 4, 5), (60, 20, 5, 1)),
    (dnnl.TAG_NHWC, (2, 3, 4, 5), (60, 1, 15, 3)),
    (dnnl.TAG_HWIO, (6, 3, 4, 5), (1, 6, 90, 18)),  # (O, I, H, W) laid out H, W, I, O
    (dnnl.TAG_NC, (7, 10), (10, 1)),
    (dnnl.TAG_IO, (10, 84), (1, 10)),  # (O, I) laid out I, O: a Keras dense kernel
    (dnnl.TAG_X, (16,), (1,)),
])
def test_format_tags_give_the_strides_their_names_say(lib, tag, dims, strides):
    md = P.MemoryDesc(lib, dims, F32, tag)
    try:
        found = P.describe(lib, md)
        assert found["format_kind"] == dnnl.FORMAT_KIND_BLOCKED and found["blocks"] == 0
        assert found["dims"] == dims and found["strides"] == strides
        assert found["bytes"] == 4 * int(np.prod(dims))
        assert P.query_int(lib, md.ptr, dnnl.QUERY_DATA_TYPE) == F32
    finally:
        md.close()


def test_tag_any_leaves_the_layout_to_the_primitive(lib):
    md = P.MemoryDesc(lib, (1, 6, 28, 28), F32, dnnl.TAG_ANY)
    assert P.query_int(lib, md.ptr, dnnl.QUERY_FORMAT_KIND) == 1  # dnnl_format_kind_any
    md.close()


# --- weight layouts: the Keras arrays under logical dims + tags, computed by oneDNN ---------
def run_primitive(lib, engine, create_pd, arrays: dict):
    """Execute one primitive; arrays: DNNL_ARG -> (NumPy array, user md). Returns dst as float64."""
    eng, stream = engine
    prim = P.Primitive(lib, "test", create_pd)
    owned, pairs = [prim], []
    for arg, (array, md) in arrays.items():
        user = P.Memory(lib, eng, md, array.ctypes.data)
        owned.append(user)
        query = {dnnl.ARG_SRC: dnnl.QUERY_SRC_MD, dnnl.ARG_WEIGHTS: dnnl.QUERY_WEIGHTS_MD,
                 dnnl.ARG_DST: dnnl.QUERY_DST_MD}.get(arg)
        assert query is None or P.same(lib, prim.md(query), md), "the primitive wants another layout"
        pairs.append((arg, user))
    count, args = P.exec_args(pairs)
    lib.dnnl_primitive_execute(prim.ptr, stream, count, args)
    lib.dnnl_stream_wait(stream)
    for obj in owned:
        obj.close()
    return prim


def test_hwio_conv_kernel_as_logical_oihw_reproduces_the_reference(lib, engine, shared_weights, sample):
    x = sample[0][:3]  # (3, 28, 28, 1)
    kernel, bias = shared_weights["conv1"]
    array, dims, tag = layout.conv_kernel(kernel)
    assert dims == (6, 1, 5, 5) and tag == dnnl.TAG_HWIO and array is kernel  # no copy, no transpose
    out = np.zeros((3, 28, 28, 6), np.float32)
    mds = {"x": P.MemoryDesc(lib, (3, 1, 28, 28), F32, dnnl.TAG_NHWC), "w": P.MemoryDesc(lib, dims, F32, tag),
           "b": P.MemoryDesc(lib, (6,), F32, dnnl.TAG_X), "y": P.MemoryDesc(lib, (3, 6, 28, 28), F32, dnnl.TAG_NHWC)}
    relu = P.EltwiseAttr(lib, dnnl.ELTWISE_RELU, 0.0, 0.0)
    run_primitive(lib, engine, P.convolution(lib, engine[0], mds["x"], mds["w"], mds["b"], mds["y"], 2, relu),
                  {dnnl.ARG_SRC: (x, mds["x"]), dnnl.ARG_WEIGHTS: (np.ascontiguousarray(kernel), mds["w"]),
                   dnnl.ARG_BIAS: (bias, mds["b"]), dnnl.ARG_DST: (out, mds["y"])})
    relu.close()
    np.testing.assert_allclose(out, conv2d_relu(x, kernel, bias, pad=2), atol=1e-5)


@pytest.mark.parametrize("src_tag", [dnnl.TAG_NHWC, dnnl.TAG_NCHW])
def test_fc1_kernel_matches_nhwc_flatten_whatever_pool2s_layout(lib, engine, shared_weights, src_tag):
    """Keras computes pool2.reshape(N, 400) @ kernel in NHWC order; the inner product reads the
    4-D pool2 output by logical (N, C, H, W), so the kernel's logical dims must be (120, 16, 5, 5)."""
    rng = np.random.default_rng(0)
    pool2 = rng.random((4, 5, 5, 16), dtype=np.float32)  # NHWC
    kernel, bias = shared_weights["fc1"]
    expected = pool2.reshape(4, 400) @ kernel + bias
    array, dims, tag = layout.fc1_kernel(np.ascontiguousarray(kernel))
    assert dims == (120, 16, 5, 5) and tag == dnnl.TAG_HWIO and array.shape == (5, 5, 16, 120)
    src = pool2 if src_tag == dnnl.TAG_NHWC else np.ascontiguousarray(pool2.transpose(0, 3, 1, 2))
    out = np.zeros((4, 120), np.float32)
    mds = {"x": P.MemoryDesc(lib, (4, 16, 5, 5), F32, src_tag), "w": P.MemoryDesc(lib, dims, F32, tag),
           "b": P.MemoryDesc(lib, (120,), F32, dnnl.TAG_X), "y": P.MemoryDesc(lib, (4, 120), F32, dnnl.TAG_NC)}
    run_primitive(lib, engine, P.inner_product(lib, engine[0], mds["x"], mds["w"], mds["b"], mds["y"]),
                  {dnnl.ARG_SRC: (src, mds["x"]), dnnl.ARG_WEIGHTS: (array, mds["w"]),
                   dnnl.ARG_BIAS: (bias, mds["b"]), dnnl.ARG_DST: (out, mds["y"])})
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    # the obvious mistake, logical (120, 400) over the same bytes read as (400, 120) rows, is wrong
    assert not np.allclose(pool2.reshape(4, 400) @ kernel.reshape(120, 400).T, expected, atol=1e-3)


def test_layout_checks_shapes(shared_weights):
    with pytest.raises(ValueError, match="HWIO"):
        layout.conv_kernel(np.zeros((5, 5, 6)))
    with pytest.raises(ValueError, match="400"):
        layout.fc1_kernel(np.zeros((120, 84)))
    converted = layout.convert(shared_weights)
    assert {name: k[1] for name, (k, _) in converted.items()} == {
        "conv1": (6, 1, 5, 5), "conv2": (16, 6, 5, 5), "fc1": (120, 16, 5, 5), "fc2": (84, 120), "fc3": (10, 84)}
    assert all(k[0].dtype == np.float32 and k[0].flags.c_contiguous for k, _ in converted.values())


# --- the level against the reference ------------------------------------------------------
@pytest.mark.parametrize("variant", ["tuned", "naive", "naive_nocache"])
@pytest.mark.parametrize("batch", [1, 7, 64])
def test_every_variant_agrees_with_numpy(models, sample, variant, batch):
    x, reference = sample
    count = 64 if variant == "naive_nocache" and batch == 1 else len(x) - len(x) % batch
    ours = np.concatenate([models[variant].predict(x[i:i + batch]) for i in range(0, count, batch)])
    assert ours.shape == (count, 10) and ours.dtype == np.float32
    np.testing.assert_array_equal(ours.argmax(axis=1), reference[:count].argmax(axis=1))
    assert np.abs(ours - reference[:count]).max() <= 1e-5


def test_a_returned_array_is_not_overwritten_by_the_next_call(models, sample):
    x, reference = sample
    first = models["tuned"].predict(x[:1])
    models["tuned"].predict(x[1:2])
    np.testing.assert_allclose(first, reference[:1], atol=1e-5)


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_tuned_uses_no_reference_implementation(models, batch):
    impl = models["tuned"].impl_info(batch)
    assert set(impl) >= {"conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3", "softmax"}
    slow = {name: found for name, found in impl.items() if found.startswith("ref")}
    assert not slow, f"oneDNN fell back to its reference code for {slow}"


def test_naive_nocache_restores_the_process_wide_cache_capacity(lib, models, sample):
    capacity, ref = dnnl.out_param(ctypes.c_int)
    lib.dnnl_get_primitive_cache_capacity(ref)
    before = capacity.value
    assert before > 0  # on by default
    models["naive_nocache"].predict(sample[0][:1])
    lib.dnnl_get_primitive_cache_capacity(ref)
    assert capacity.value == before


def test_bad_input_and_float64_are_refused(models):
    from lenet_onednn.model import OnednnLeNet

    with pytest.raises(ValueError, match=r"\(N, 28, 28, 1\)"):
        models["tuned"].predict(np.zeros((28, 28), np.float32))
    with pytest.raises(ValueError, match=r"N >= 1"):
        models["tuned"].predict(np.zeros((0, 28, 28, 1), np.float32))
    with pytest.raises(ValueError, match="dtype"):
        OnednnLeNet(DEFAULT_WEIGHTS, dtype="float64")


def test_close_destroys_everything_and_twice_is_harmless(lib, sample):
    from lenet_onednn.model import OnednnLeNet

    m = OnednnLeNet(DEFAULT_WEIGHTS, variant="tuned")
    m.predict(sample[0][:2])
    plan = m.plans[2]
    m.close()
    assert not m.plans and not m.engine and not m.stream and not plan.owned
    m.close()


# --- the process: threads and a missing library (fresh interpreters) ----------------------
def run_python(code: str, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_omp_num_threads_set_before_loading_is_what_libgomp_uses(lib, threads):
    code = ("from harness import DEFAULT_WEIGHTS; from lenet_onednn.model import OnednnLeNet; "
            "from lenet_onednn import binding; m = OnednnLeNet(DEFAULT_WEIGHTS); "
            "print(binding.probe()['threads'], binding.omp_max_threads())")
    done = run_python(code, OMP_NUM_THREADS=threads)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [threads, threads]


def test_doctor_and_env_json_give_the_workers_threads_not_the_parents(lib):
    """The probe runs in the parent, whose libgomp read the parent's environment (here 3 threads); env.json
    and doctor give the workers' count (the thread rule: 1 by default, 2 when a study says 2) and label
    the parent's as its own."""
    code = ("import json; from harness.machine import doctor, env, procenv\n"
            "found = [env.collect_onednn(s)['onednn'] for s in (None, procenv.settings(2, 1, 'cpu'))]\n"
            "print(json.dumps([[f['threads'], f['parent_threads']] for f in found]))\n"
            "print(doctor.onednn_line(found[0]))\n")
    done = run_python(code, OMP_NUM_THREADS="3")
    assert done.returncode == 0, done.stderr
    counts, line = done.stdout.strip().splitlines()
    assert json.loads(counts) == [[1, 3], [2, 3]]
    assert "1 OpenMP thread(s) in a worker" in line and line.endswith("this process's own libgomp: 3"), line


def test_the_harness_thread_rule_is_not_overridden_by_the_registry():
    assert "OMP_NUM_THREADS" not in registry.process_env("onednn")


def test_a_missing_library_is_unavailable_with_the_reason():
    code = ("from harness import DEFAULT_WEIGHTS; from harness.errors import Unavailable\n"
            "from lenet_onednn import binding; from lenet_onednn.model import OnednnLeNet\n"
            "print(binding.probe())\n"
            "try:\n    OnednnLeNet(DEFAULT_WEIGHTS)\nexcept Unavailable as exc:\n    print('UNAVAILABLE', exc)\n")
    done = run_python(code, LENET_ONEDNN_LIBRARY="/nonexistent/libdnnl.so.3")
    assert done.returncode == 0, done.stderr
    assert "'found': False" in done.stdout
    line = next(line for line in done.stdout.splitlines() if line.startswith("UNAVAILABLE"))
    assert "/nonexistent/libdnnl.so.3 (LENET_ONEDNN_LIBRARY)" in line and "onednn-cpu-gomp" in line
