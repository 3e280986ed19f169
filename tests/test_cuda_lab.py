"""The CUDA lab (labs/cuda.toml): its template and example submissions compile with NVRTC for sm_80
and sm_90, and run on the CPU-emulated kernels (tests/fake_cuda.py) behind a fake CuPy: the correct
example passes the lab's gate against the oracle, the wrong one and the untouched template fail it."""

import importlib.util
import sys

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.errors import Unavailable
from harness.lab.judge.rules import assignment
from harness.machine import nvrtc
from tests import fake_cuda
from tests.conftest import ROOT, oracle_sample

FOLDERS = {"template": ROOT / "labs" / "template-cuda", "correct": ROOT / "labs" / "examples-cuda" / "correct",
           "wrong": ROOT / "labs" / "examples-cuda" / "wrong"}
KERNELS = {"conv_bias_relu", "max_pool_2x2", "dense_bias_act", "softmax_rows"}


@pytest.mark.parametrize("arch", ["compute_80", "compute_90", "sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_lab_kernels_compile_with_nvrtc(name, arch):
    try:
        lib = nvrtc.load()
    except Unavailable as exc:
        pytest.skip(f"NVRTC not installed here (pip install nvidia-cuda-nvrtc-cu12): {exc}")
    code = (FOLDERS[name] / "lenet.cu").read_text()
    assert set(fake_cuda.extern_c_kernels(code)) == KERNELS  # what the glue looks up by name
    done = lib.compile(code, "lenet.cu", arch, ("--std=c++17",))
    if arch.startswith("compute_"):
        for kernel in KERNELS:
            assert f".entry {kernel}(" in done.image.decode()  # extern "C": the plain name


def lab_text() -> str:
    return (ROOT / "labs" / "cuda.toml").read_text()


def test_lab_file_references_and_limits():
    """Everything but the rung, which the lab wing's API_LEVELS has to learn (see the next test)."""
    lab = assignment.parse(lab_text().replace('rung = "cuda"', 'rung = "cudnn"'), "labs/cuda.toml")
    assert lab.device == "gpu" and lab.dtype == "float32" and lab.module == "lenet.py"
    assert [r.label for r in lab.references] == ["cuda/fused", "cudnn/graph"]
    assert lab.rank_by.label == "cuda/fused" and lab.gate.max_abs_diff == 1e-4


def test_lab_file_loads():
    assert assignment.load("cuda").rung == "cuda"


def test_a_rung_of_kernels_is_the_registrys_kernels_hook_and_its_starter_its_own_folder():
    """The CUDA lab's kit ships the emulator and its own starter because its level has the `kernels`
    hook and labs/ a template-cuda folder, not because the lab wing knows its name."""
    cuda, numpy_lab = assignment.load("cuda"), assignment.load("cpu_numpy")
    assert cuda.kernels and cuda.starter == ROOT / "labs" / "template-cuda"
    assert not numpy_lab.kernels and numpy_lab.starter == ROOT / "labs" / "template"
    assert [s.api_level for s in registry.REGISTRY.values() if "kernels" in dict(s.hooks)] == [cuda.rung]


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], 12)


def build_submission(name, monkeypatch, folder):
    """Import the folder's lenet.py as the grader does and build its LeNet on the fake CuPy."""
    fake = fake_cuda.LabCupy(folder)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    spec = importlib.util.spec_from_file_location(f"lab_cuda_{name}", FOLDERS[name] / "lenet.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return fake, module.StudentLeNet(DEFAULT_WEIGHTS)


@pytest.mark.parametrize("name,passes", [("correct", True), ("wrong", False), ("template", False)])
def test_lab_examples_against_the_gate_on_emulated_kernels(name, passes, monkeypatch, tmp_path_factory, sample):
    x, reference = sample
    try:
        fake, impl = build_submission(name, monkeypatch, tmp_path_factory.mktemp(f"lab-{name}"))
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    probs = impl.predict(x)
    assert probs.shape == (12, 10) and isinstance(probs, np.ndarray)
    fake.check_guards()
    gate = assignment.DEFAULTS["gate"]["max_abs_diff"]
    ok = bool(np.array_equal(probs.argmax(1), reference.argmax(1)) and np.max(np.abs(probs - reference)) <= gate)
    assert ok is passes, np.max(np.abs(probs - reference))


def test_the_emulator_runs_a_kernel_with_a_large_local_array_and_reports_a_divergent_barrier(tmp_path):
    """Each emulated CUDA thread is a fiber with its own 256 KiB stack (a student's 100 KB local array
    fits), and threads of a block that pass different numbers of __syncthreads are reported, not hung."""
    fake = fake_cuda.LabCupy(tmp_path)
    code = r'''
    extern "C" __global__ void big(float* y, int n) {
        float buf[25000];                                   // 100 KB of one thread's own memory
        for (int i = 0; i < 25000; ++i) buf[i] = threadIdx.x + i;
        __syncthreads();
        if (threadIdx.x < n) y[blockIdx.x * blockDim.x + threadIdx.x] = buf[24999] + buf[threadIdx.x];
    }
    extern "C" __global__ void split(float* y, int n) {
        if (threadIdx.x % 2 == 0) __syncthreads();          // half the block waits at a barrier
        y[threadIdx.x] = n;
    }'''
    module = fake.RawModule(code=code)
    y = fake.zeros((64,), np.float32)
    module.get_function("big")((2,), (32,), (y, np.int32(32)))
    expected = np.concatenate([np.arange(32) * 3 + 24999.0] * 2)  # buf[24999] + buf[t] = (t + 24999) + 2t
    np.testing.assert_array_equal(np.asarray(y), expected)
    with pytest.raises(AssertionError, match="split: threads of a block passed different numbers of barriers"):
        module.get_function("split")((1,), (32,), (y, np.int32(1)))
    fake.check_guards()
