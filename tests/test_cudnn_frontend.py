"""The cudnn level's `frontend` variant (cuDNN's graph API through nvidia-cudnn-frontend).

Without a GPU: every stage's operation graphs are built by the real frontend (its Python IR needs
no libcudnn), and a NumPy interpreter of that IR runs them, strided views, bindings and all,
against the reference; the recorder's file checks. With libcudnn and a recorded device
descriptor: the graphs are planned deviceless. With a GPU: the real thing against the reference.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.errors import HarnessError, Unavailable
from harness.machine import gpu
from lenet_cudnn import frontend_device, layout
from lenet_numpy.model import softmax
from tests.conftest import oracle_sample

cudnn = pytest.importorskip("cudnn", reason="no cuDNN Python frontend: pip install nvidia-cudnn-frontend")
from lenet_cudnn import frontend  # noqa: E402  (after the skip: it is what imports cudnn's graph)
from tests import fake_cudnn_frontend as fake  # noqa: E402
from tests import fake_gpu  # noqa: E402
from tests.test_gpu_fault import Ended, ended  # noqa: E402, F401 (a fixture)

# --- the graphs run by a NumPy interpreter of the frontend's IR (tests/fake_cudnn_frontend.py) ----


def run_graph(graph, binds, memory):
    """One graph on `memory` (buffer name -> flat array), through each tensor's binding."""
    def read(t):
        name, offset = binds[t.uid]
        flat = memory[name]
        return np.lib.stride_tricks.as_strided(flat[offset:], shape=t.dim,
                                               strides=[s * flat.itemsize for s in t.stride])

    def write(t, y):
        name, offset = binds[t.uid]
        memory[name][offset:offset + y.size] = y.ravel()

    fake.run_nodes(graph, read, write)


def emulate(x_nhwc, dtype, form_index, shared_weights):
    """The frontend's forward pass, each stage in its form `form_index`, run by run_graph."""
    n = len(x_nhwc)
    memory = {name: np.full(n * count, np.nan, dtype) for name, count in frontend.COUNTS.items()}
    for name, (kernel, bias) in layout.convert(shared_weights, dtype).items():
        memory[f"w:{name}"], memory[f"b:{name}"] = kernel.ravel(), bias.ravel()
        memory[f"t:{name}"] = np.ascontiguousarray(kernel.T).ravel()  # a dense layer's convolution form
    memory["x"][:] = x_nhwc.transpose(0, 3, 1, 2).ravel()
    new = frontend.GraphMaker(cudnn, dtype)
    for _stage, forms in frontend.stage_forms(new, n).items():
        forms = [f for f in forms if not getattr(f, "side_epilogue", False)]  # the graph API's alone
        for _name, graph, binds in forms[min(form_index, len(forms) - 1)]():
            run_graph(graph, binds, memory)
    return softmax(memory["fc3"].reshape(n, 10))  # softmax goes on the side (cudnnSoftmaxForward)


# 0: fused graphs; 1: convolutions split (op + bias/relu graph), dense layers as convolutions; 2: all split
# (the last forms, the op alone with its epilogue on the side, run in the emulated variant below)
@pytest.mark.parametrize("form_index", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_graphs_compute_lenet(mnist_test, shared_weights, form_index, dtype):
    x, reference = oracle_sample(mnist_test[0], 6, dtype)
    probs = emulate(x.astype(dtype), dtype, form_index, shared_weights)
    assert np.array_equal(probs.argmax(1), reference.argmax(1))
    assert np.abs(probs - reference).max() <= (1e-5 if dtype == "float32" else 1e-12)


def test_the_pooling_graph_reads_four_strided_views_of_the_conv_output():
    new = frontend.GraphMaker(cudnn, "float32")
    ((name, graph, binds),) = frontend.stage_forms(new, 3)["pool1"][0]()
    views = graph.get_inputs()
    assert sorted(binds[t.uid] for t in views) == [("c1", 0), ("c1", 1), ("c1", 28), ("c1", 29)]
    assert all(t.dim == [3, 6, 14, 14] and t.stride == [4704, 784, 56, 2] for t in views)
    (out,) = graph.get_outputs()
    assert binds[out.uid] == ("p1", 0) and out.dim == [3, 6, 14, 14]
    assert [n.params["mode"] for n in graph.nodes] == ["max", "max", "max"]


def test_every_stage_binds_every_tensor_it_reads_or_writes():
    new = frontend.GraphMaker(cudnn, "float32")
    stages = frontend.stage_forms(new, 2)
    assert list(stages) == ["conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3"]
    for forms in stages.values():
        for form in forms:
            for _name, graph, binds in form():
                real = {t.uid for n in graph.nodes for t in (*n.inputs.values(), *n.outputs.values())
                        if not t.is_virtual}
                assert set(binds) == real
                for buffer, offset in binds.values():
                    assert buffer in frontend.COUNTS or buffer[:2] in ("w:", "b:", "t:") and offset == 0


def test_a_stage_no_form_builds_names_each_refusal():
    class Refusing:
        def validate(self):
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED\nsecond line")

    stage = frontend.plan_stage(cudnn, "fc1", [lambda: [("fc1", Refusing(), {})],
                                               lambda: [("fc1_matmul", Refusing(), {})]], "float32")
    assert stage.graphs == []
    assert stage.note == ("form 1: RuntimeError: CUDNN_STATUS_NOT_SUPPORTED; "
                          "form 2: RuntimeError: CUDNN_STATUS_NOT_SUPPORTED")


def test_the_frontend_must_reach_the_library_the_level_loaded(monkeypatch):
    class Lib:
        lib, version, path = type("CDLL", (), {"_handle": 0})(), 90100, "/x/libcudnn.so.9"

    handed = []
    monkeypatch.setattr(cudnn._pybind_module, "_set_dlhandle_cudnn", handed.append, raising=False)
    monkeypatch.setattr(cudnn, "backend_version", lambda: 91900)
    with pytest.raises(Unavailable, match="reaches cuDNN 91900, the level loaded 90100"):
        frontend.import_frontend(Lib())
    assert handed == [0]  # the level's library handed over first

    def unreachable():
        raise RuntimeError("Unable to find symbol cudnnGetVersion")

    monkeypatch.setattr(cudnn, "backend_version", unreachable)
    with pytest.raises(Unavailable, match="cannot reach libcudnn: Unable to find symbol"):
        frontend.import_frontend(Lib())


def test_the_registry_lists_the_variant_and_loc_counts_it_apart():
    spec = registry.REGISTRY["cudnn"]
    assert "frontend" in spec.variants_for("gpu") and spec.variants[0] == "tuned"
    from harness.report.claims import loc

    assert loc.PARTS["frontend.py"] == loc.PARTS["frontend_device.py"] == "graph API variant"
    assert "graph API variant" in loc.APART


# --- the variant itself, its device emulated (tests/fake_cudnn_frontend.py) -------------------


def frontend_net(monkeypatch, dtype="float32", rules=None, lt_library=None):
    monkeypatch.setattr(frontend, "import_frontend", lambda lib: fake.frontend_module(rules or fake.Rules()))
    monkeypatch.setattr(frontend, "time", fake.clock())
    return frontend.FrontendNet(fake.fake_net(dtype, lt_library))


def is_pointwise_only(graph):
    return all(n.node_type == cudnn.NodeType.POINTWISE for n in graph.nodes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_variant_plans_checks_captures_and_replays(monkeypatch, mnist_test, dtype):
    x, reference = oracle_sample(mnist_test[0], 5, dtype)
    fe = frontend_net(monkeypatch, dtype)
    for lo, hi in ((0, 5), (0, 1), (0, 1), (0, 5), (2, 3)):  # each size: an eager call, then replays
        probs = fe.predict(x[lo:hi].astype(dtype))
        assert probs.dtype == np.dtype(dtype) and np.array_equal(probs.argmax(1), reference[lo:hi].argmax(1))
        assert np.abs(probs - reference[lo:hi]).max() <= 1e-5
    assert sorted(fe.plans) == [1, 5] and all(p.graph is not None for p in fe.plans.values())
    assert fe.net.stream.launches == 3  # x[:1] once, x once, x[2:3] once: replays of their captures
    assert fe.stage_notes == {"conv1": "conv1", "pool1": "pool1", "conv2": "conv2", "pool2": "pool2",
                              "fc1": "fc1", "fc2": "fc2", "fc3": "fc3",
                              "softmax": "cudnnSoftmaxForward on the side (no softmax node in the frontend)"}
    assert fe.capture_note == "the whole call replayed as one CUDA graph" and "conv1: conv1" in fe.net.fusion_note
    graph = fe.plans[1].stages[0].graphs[0].graph
    notes = "['DOWN_CONVERT_INPUTS', 'TENSOR_CORE']"
    assert (f"deselect {notes}" in graph.steps) == (dtype == "float32")  # float32 stays float32, no TF32
    assert fe.last_device_ns is None  # a flag, no events
    fe.close()
    assert fe.handle is None and not fe.plans


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_dense_layers_are_cublaslt_matmuls_and_the_call_copies_nothing_but_its_flag(monkeypatch, mnist_test,
                                                                                        dtype):
    """With cuBLASLt each dense layer is one matmul with its bias (+ReLU) epilogue (the fake reads
    its layouts, bias and epilogue as cuBLASLt does); conv1 reads the images and the softmax writes
    the answer in mapped host memory; the call's one copy is the flag's 4 bytes, polled by the host."""
    x, reference = oracle_sample(mnist_test[0], 4, dtype)
    lt = fake_gpu.FakeCublasLt()
    fe = frontend_net(monkeypatch, dtype, lt_library=lt)
    for lo, hi in ((0, 4), (0, 4), (1, 2), (1, 2)):
        probs = fe.predict(x[lo:hi].astype(dtype))
        assert np.abs(probs - reference[lo:hi]).max() <= (1e-5 if dtype == "float32" else 1e-12)
    assert lt.calls.count("cublasLtMatmul") == 2 * 3 * 3  # each size's 3: checked, the eager call, a replay
    assert fe.net.stream.launches == 2 and fe.last_device_ns is None
    for name in ("fc1", "fc2", "fc3"):
        assert fe.stage_notes[name] == "one cublasLtMatmul, bias" + (" and ReLU" if name != "fc3" else "") + \
            " in its epilogue"
    p = fe.plans[4]
    assert [s.lt is not None for s in p.stages] == [False] * 4 + [True] * 3
    copies = [args for fn, args in p.calls if getattr(fn, "__name__", "") == "<lambda>" and len(args) == 5]
    assert copies == [(p.flag.ctypes.data, p.buf["one"], 4, frontend.D2H, fe.net.stream.ptr)]  # the flag only
    conv1 = p.stages[0].graphs[0]
    assert ("x", 0) in conv1.binds.values() and p.buf["x"] == p.host_in.ctypes.data
    assert p.buf["out"] == p.host_out.ctypes.data and "x" not in p.arrays and "out" not in p.arrays
    assert int(p.flag[0]) == 1  # the last call's
    fe.close()


def test_cublaslt_refusing_leaves_the_dense_layers_to_the_graphs_with_the_reason(monkeypatch, mnist_test):
    x, reference = oracle_sample(mnist_test[0], 2)
    fe = frontend_net(monkeypatch, lt_library=fake_gpu.FakeCublasLt(refuse=True))
    assert np.abs(fe.predict(x) - reference).max() <= 1e-5
    assert fe.stage_notes["fc1"].startswith("fc1 (cuBLASLt refused: cublasLtMatmulAlgoGetHeuristic")
    fe.close()


def test_each_graphs_plans_are_timed_and_the_fastest_pinned(monkeypatch, mnist_test):
    """Every plan of every graph is executed and timed; the fastest (here the fake's plan 2: 5 µs
    an execution, the others 9 µs on the fake's clock) is selected, and every later execution is
    that plan's."""
    x, reference = oracle_sample(mnist_test[0], 1)
    rules = fake.Rules(plans=3, slow=lambda graph, index: 5e-6 if index == 2 else 9e-6)
    fe = frontend_net(monkeypatch, rules=rules)
    assert np.abs(fe.predict(x) - reference).max() <= 1e-5
    graph = fe.plans[1].stages[0].graphs[0].graph
    assert "select 2" in graph.steps and graph.selected == 2
    per_plan = 1 + frontend.PLAN_TIMING_CALLS
    assert sorted(graph.executed[:3 * per_plan]) == sorted([0, 1, 2] * per_plan) and set(graph.executed[3 * per_plan:]) == {2}
    assert fe.plan_notes["conv1 (batch 1)"] == "plan 2 of 3 pinned, the fastest at 5.0 µs"
    assert "conv1 (batch 1): plan 2 of 3 pinned" in fe.net.fusion_note
    one = fake.Rules(plans=1)
    fe1 = frontend_net(monkeypatch, rules=one)
    assert np.abs(fe1.predict(x) - reference).max() <= 1e-5 and fe1.plan_notes["conv1 (batch 1)"] == "its one plan of 1"
    fe.close()
    fe1.close()


def test_a_call_that_never_sets_its_flag_times_out_saying_so(monkeypatch, mnist_test):
    x, _ = oracle_sample(mnist_test[0], 2)
    fe = frontend_net(monkeypatch)
    fe.net.stream.refuse_capture = True  # eager calls: the plan's calls are what runs
    fe.predict(x)
    p = fe.plans[2]
    p.calls = p.calls[:-1]  # no flag
    monkeypatch.setattr(frontend, "POLL_TIMEOUT_S", 0.05)
    with pytest.raises(RuntimeError, match=r"cudnn/frontend's call did not set its flag in 0.05 s"):
        fe.predict(x)


def test_refused_fused_graphs_run_split_and_a_refused_pooling_graph_runs_on_the_side(monkeypatch, mnist_test):
    x, reference = oracle_sample(mnist_test[0], 3)
    fused = lambda g: "no fusion" if len(g.nodes) > 1 and not is_pointwise_only(g) else None  # noqa: E731
    # cuDNN checks alignment when it executes: the pooling views at odd element offsets are refused then
    odd = lambda g, pack: "misaligned" if any(p % 16 for p in pack.values()) else None  # noqa: E731
    fe = frontend_net(monkeypatch, rules=fake.Rules(build=fused, execute=odd))
    probs = fe.predict(x)
    assert np.abs(probs - reference).max() <= 1e-5 and np.abs(fe.predict(x) - reference).max() <= 1e-5
    assert fe.stage_notes["conv1"] == ("conv1_conv + conv1_bias_relu (fused refused: form 1: RuntimeError: "
                                       "CUDNN_STATUS_NOT_SUPPORTED: no fusion)")
    assert fe.stage_notes["fc3"].startswith("fc3_matmul + fc3_bias_relu (fused refused")
    assert fe.stage_notes["pool2"] == ("cudnnPoolingForward on the side (the pointwise graph refused: executing "
                                       "pool2 failed: RuntimeError: CUDNN_STATUS_BAD_PARAM: misaligned)")
    fe.close()


def test_without_fused_or_pointwise_graphs_the_ops_run_alone_and_the_rest_on_the_side(monkeypatch, mnist_test):
    x, reference = oracle_sample(mnist_test[0], 3)
    alone = lambda g: None if len(g.nodes) == 1 and not is_pointwise_only(g) else "no"  # noqa: E731
    fe = frontend_net(monkeypatch, rules=fake.Rules(build=alone))
    assert np.abs(fe.predict(x) - reference).max() <= 1e-5 and np.abs(fe.predict(x) - reference).max() <= 1e-5
    side = " + bias/ReLU on the side (cudnnAddTensor, cudnnActivationForward) (fused refused: form 1: "
    assert fe.stage_notes["conv2"].startswith("conv2_conv" + side)
    assert fe.stage_notes["fc1"].startswith("fc1_matmul" + side) is False  # the matmul form is split, not alone
    assert fe.stage_notes["fc1"].startswith("fc1_as_conv_alone" + side)
    assert fe.stage_notes["pool1"].startswith("cudnnPoolingForward on the side")
    fe.close()


def test_a_convolution_or_dense_layer_refused_in_every_form_is_unavailable(monkeypatch, mnist_test):
    x, _ = oracle_sample(mnist_test[0], 2)
    fc1 = lambda g: "no fc1" if any(n.name.startswith("fc1") for n in g.nodes) else None  # noqa: E731
    fe = frontend_net(monkeypatch, rules=fake.Rules(build=fc1))
    with pytest.raises(Unavailable, match=r"refused fc1 \(batch 2, float32\): form 1: RuntimeError: "
                                          r"CUDNN_STATUS_NOT_SUPPORTED: no fc1; form 2: .*; form 4: "):
        fe.predict(x)


def test_dense_layers_run_as_convolutions_where_no_matmul_plan_is_left(monkeypatch, mnist_test):
    """float32 matmul plans may all be TF32 (deselected): the dense layers then run as convolutions."""
    x, reference = oracle_sample(mnist_test[0], 3)
    matmul = lambda g: "only TF32" if any(n.node_type == cudnn.NodeType.MATMUL for n in g.nodes) else None  # noqa: E731
    fe = frontend_net(monkeypatch, rules=fake.Rules(build=matmul))
    assert np.abs(fe.predict(x) - reference).max() <= 1e-5 and np.abs(fe.predict(x) - reference).max() <= 1e-5
    assert fe.stage_notes["fc1"] == ("fc1_as_conv (fused refused: form 1: RuntimeError: "
                                     "CUDNN_STATUS_NOT_SUPPORTED: only TF32)")
    assert sorted(fe._transposed) == ["fc1", "fc2", "fc3"] and fe._transposed["fc1"].shape == (120, 400)
    fe.close()


def test_a_refused_capture_leaves_the_calls_eager(monkeypatch, mnist_test):
    x, reference = oracle_sample(mnist_test[0], 2)
    fe = frontend_net(monkeypatch)
    fe.net.stream.refuse_capture = True
    for _ in range(3):
        assert np.abs(fe.predict(x) - reference).max() <= 1e-5
    assert fe.plans[2].graph is None and fe.net.stream.launches == 0
    assert fe.capture_note == "eager calls: the CUDA graph capture failed: cudaErrorStreamCaptureUnsupported"


# --- the device-properties file ---------------------------------------------------------------


def recorded_files() -> list[Path]:
    """Committed descriptors: imported gpu-study archives' (reports/results) and lenet_cudnn/devices."""
    return sorted([*(ROOT / "reports" / "results").rglob("cudnn-device-*.json"),
                   *(ROOT / "lenet_cudnn" / "devices").glob("*.json")])


def test_a_recorded_file_is_written_whole_and_read_back_checked(tmp_path):
    data = {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "cudnn": 91900,
            "frontend": "1.32.0", "recorded": "2026-11-27T18:00:00Z", "descriptor": '{"sm": 90}'}
    path = frontend_device.write(data, tmp_path)
    assert path.name.startswith("cudnn-device-") and path.name.endswith("-20261127T180000Z.json")
    assert frontend_device.read(path) == data and not list(tmp_path.glob("*.tmp"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, "descriptor": ""}))
    with pytest.raises(HarnessError, match="bad.json: field 'descriptor'"):
        frontend_device.read(bad)
    bad.write_text(json.dumps({k: v for k, v in data.items() if k != "gpu"}))
    with pytest.raises(HarnessError, match="field 'gpu' missing"):
        frontend_device.read(bad)
    bad.write_text("[1]")
    with pytest.raises(HarnessError, match="expected a JSON object, found list"):
        frontend_device.read(bad)


def test_check_with_a_bad_file_is_one_error_line(tmp_path, capsys):
    assert frontend_device.main(["check", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "none.json" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("path", recorded_files() or [None], ids=lambda p: p.name if p else "none")
def test_the_graphs_plan_deviceless_against_a_recorded_gpu(path):
    if path is None:
        pytest.skip("no recorded device descriptor yet: gpu-study's cudnn-device step writes one "
                    "(python -m lenet_cudnn.frontend_device record)")
    data = frontend_device.read(path)
    try:
        notes = frontend.build_deviceless(data["descriptor"], 1, "float32")
    except Unavailable as exc:
        pytest.skip(f"cannot plan deviceless here: {exc}")
    for stage in ("conv1", "conv2", "fc1", "fc2", "fc3"):
        assert not notes[stage].startswith("refused"), (stage, notes[stage])


# --- on a GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(gpu.absent_reason() is not None, reason=f"needs an NVIDIA GPU: {gpu.absent_reason()}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_frontend_agrees_with_reference(mnist_test, dtype):
    x, reference = oracle_sample(mnist_test[0], 64, dtype)
    try:
        impl = registry.create("cudnn", DEFAULT_WEIGHTS, device="gpu", variant="frontend", dtype=dtype)
    except Unavailable as exc:
        pytest.skip(f"cudnn/frontend unavailable here: {exc}")
    try:
        for batch in (x, x[:1], x[:1], x[:7], x):  # the second call of a size replays its capture
            probs = impl.predict(batch.astype(dtype))
            assert probs.shape == (len(batch), 10) and probs.dtype == np.dtype(dtype)
            assert np.array_equal(probs.argmax(1), reference[:len(batch)].argmax(1))
            assert np.abs(probs - reference[:len(batch)]).max() <= 1e-5, impl.fe.stage_notes
        assert impl.last_device_time_ns() > 0
        assert set(impl.fe.stage_notes) == {"conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3", "softmax"}
        print(impl.fe.stage_notes, impl.fe.capture_note)  # the GPU log says which forms ran
    finally:
        impl.close()


# --- a fault on a fallback path, and the input's copy node --------------------------------------


@pytest.mark.usefixtures("ended")
def test_a_sticky_error_raised_mid_call_ends_the_process_as_a_fault_never_a_fallback(monkeypatch, mnist_test):
    """A plan's execution that poisons the context (an illegal address: a mapped pointer, say) is no
    refused plan: the process ends, named by the error, before any other plan or form is tried."""
    x, _ = oracle_sample(mnist_test[0], 2)
    tried = []

    def poison(graph, pack):
        tried.append(graph)
        return "cudaErrorIllegalAddress: an illegal memory access was encountered"

    fe = frontend_net(monkeypatch, rules=fake.Rules(execute=poison))
    with pytest.raises(Ended) as got:
        fe.predict(x)
    assert got.value.kind == "fault" and len(tried) == 1
    assert got.value.reason.startswith("cudaErrorIllegalAddress (700) in cudnn/frontend (float32): plan 0 of 3")


@pytest.mark.usefixtures("ended")
def test_a_refusal_after_which_the_context_reports_a_fault_ends_the_process(monkeypatch, mnist_test):
    """A refusal's words (misaligned pointers: BAD_PARAM), but the probe's synchronize finds the context
    poisoned: a fault named by the synchronize's error, not cudnnPoolingForward on the side."""
    x, _ = oracle_sample(mnist_test[0], 3)
    refused = []

    def odd(graph, pack):
        if any(p % 16 for p in pack.values()):
            refused.append(graph)
            return "misaligned"
        return None

    fe = frontend_net(monkeypatch, rules=fake.Rules(execute=odd))
    synchronize = fe.net.stream.synchronize

    def poisoned():
        if refused:
            raise RuntimeError("cudaErrorMisalignedAddress: misaligned address")
        synchronize()

    fe.net.stream.synchronize = poisoned
    with pytest.raises(Ended) as got:
        fe.predict(x)
    assert got.value.kind == "fault" and got.value.reason.startswith("cudaErrorMisalignedAddress (716) in ")
    assert "probed after RuntimeError: CUDNN_STATUS_BAD_PARAM: misaligned" in got.value.reason


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_from_copy_input_from_the_call_copies_the_images_to_the_device_first(monkeypatch, mnist_test, dtype):
    n = frontend.COPY_INPUT_FROM
    x, reference = oracle_sample(mnist_test[0], n + 2, dtype)
    fe = frontend_net(monkeypatch, dtype)
    for batch in (x, x, x[:2]):  # large: copied (eager, then a replay); small: read across the bus
        assert np.abs(fe.predict(batch.astype(dtype)) - reference[:len(batch)]).max() <= 1e-5
    big, small = fe.plans[n + 2], fe.plans[2]
    fn, args = big.calls[0]
    assert args == (big.buf["x"], big.host_in.ctypes.data, (n + 2) * 784 * np.dtype(dtype).itemsize, frontend.H2D,
                    fe.net.stream.ptr)
    assert "x" in big.arrays and big.buf["x"] == big.arrays["x"].data.ptr != big.host_in.ctypes.data
    assert "x" not in small.arrays and small.buf["x"] == small.host_in.ctypes.data
    assert fe.plan_notes[f"input (batch {n + 2})"].startswith("copied to the device by the call's first node")
    assert fe.plan_notes["input (batch 2)"].startswith("read by conv1 from mapped host memory")
    fe.close()
