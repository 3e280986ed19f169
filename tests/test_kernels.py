"""`python -m harness kernels`: the trace arithmetic, the child's plumbing (on the CPU, where
the profiler sees no GPU work) and the no-GPU exit."""

import subprocess
import sys

import pytest

from harness import DEFAULT_WEIGHTS
from harness.errors import HarnessError
from harness.explain import kernels
from harness.machine import gpu
from tests.conftest import ROOT


def test_short_name_drops_template_arguments_and_signature():
    long = ("void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float, true, false, 0, 0>"
            "(cudnnTensorStruct, float const*, cudnnFilterStruct)")
    assert kernels.short_name(long) == "cudnn::cnn::conv2d_grouped_direct_kernel"
    assert kernels.short_name("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD"
    assert len(kernels.short_name("k" * 200)) == 60
    cublas = ("void std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, "
              "float, float, float, false, true>(cublasGemvParamsEx<int, float const>)")
    assert kernels.short_name(cublas) == "internal::gemvx::kernel"


def test_busy_time_is_the_union_of_intervals():
    assert kernels.busy_us([(0, 10), (5, 12), (20, 25), (21, 22)]) == 17
    assert kernels.busy_us([]) == 0


def test_summary_per_call_from_a_trace():
    def x(cat, name, ts, dur):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}

    events = []
    for t0 in (0, 100):  # two calls: a copy, two kernels (overlapping), a copy
        events += [x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", t0, 2),
                   x("kernel", "void conv<float>(int)", t0 + 5, 10), x("kernel", "pool", t0 + 12, 4),
                   x("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", t0 + 20, 2),
                   x("cuda_runtime", "cudaLaunchKernel", t0, 3), x("cuda_runtime", "cudaLaunchKernel", t0 + 4, 3),
                   x("cpu_op", "aten::empty", t0, 50)]
    events.append({"ph": "i", "cat": "kernel", "name": "marker", "ts": 0})  # no duration: ignored
    summary = kernels.summarize_trace(events, calls=2)
    assert summary["gpu_busy_ns_per_call"] == 2e3 + 11e3 + 2e3  # conv and pool overlap by 3 us
    assert summary["device_ns_per_call"] == 18e3 and summary["device_ops_per_call"] == 4
    assert summary["api_ns_per_call"] == 6e3 and summary["api_calls_per_call"] == 2
    assert [op["name"] for op in summary["ops"]][:2] == ["conv", "pool"]
    assert summary["ops"][0] == {"category": "kernel", "name": "conv", "per_call": 1.0, "ns_per_call": 10e3}
    assert summary["api_ops"] == [{"name": "cudaLaunchKernel", "per_call": 2.0, "ns_per_call": 6e3}]
    row = {"implementation": "cudnn", "variant": "tuned", "device": "gpu", "calls": 2, "host_ns_per_call": 30e3,
           **summary}
    assert kernels.table(row)[-1] == "  host in CUDA calls: cudaLaunchKernel x2.0 6.00 us"


def test_a_trace_without_gpu_work_is_a_clear_error():
    with pytest.raises(HarnessError, match="saw no kernel or copy on the GPU"):
        kernels.summarize_trace([{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}], 1)


@pytest.mark.slow
def test_the_child_measures_and_traces_a_real_level():
    """On the CPU: the child times numpy's calls and writes a trace; without GPU work the
    summary refuses, naming why."""
    pytest.importorskip("torch")
    raw = kernels.run_child("numpy", "default", "cpu", 20, DEFAULT_WEIGHTS, batch=2)  # more than one image a call
    assert raw["host_ns_per_call"] > 0 and isinstance(raw["events"], list)
    with pytest.raises(HarnessError, match="no kernel or copy"):
        kernels.summarize_trace(raw["events"], 20)


def test_a_batch_outside_the_test_set_is_refused_before_a_child_runs(monkeypatch):
    monkeypatch.setattr(kernels, "run_child", lambda *a, **k: pytest.fail("a child ran"))
    for batch in (0, 10001):
        with pytest.raises(HarnessError, match=rf"--batch: expected 1 to 10000 images per call, found {batch}"):
            kernels.profile("numpy/default", "cpu", 5, DEFAULT_WEIGHTS, batch)


def test_the_table_names_the_batch():
    row = {"implementation": "cuda", "variant": "cluster", "device": "gpu", "calls": 50, "batch": 512,
           "host_ns_per_call": 40e3, "gpu_busy_ns_per_call": 30e3, "device_ops_per_call": 3.0,
           "api_calls_per_call": 2.0, "api_ns_per_call": 5e3, "ops": [], "ops_not_listed": 0}
    assert kernels.table(row)[0].startswith("cuda/cluster on gpu, batch 512, 50 calls: host 40.0 us")


@pytest.mark.skipif(gpu.absent_reason() is None, reason="this machine has a GPU")
def test_without_a_gpu_kernels_exits_3_saying_why():
    run = subprocess.run([sys.executable, "-m", "harness", "kernels", "cudnn/tuned"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 3 and "kernels needs a GPU" in run.stderr


@pytest.mark.gpu
@pytest.mark.skipif(gpu.absent_reason() is not None, reason=f"needs an NVIDIA GPU: {gpu.absent_reason()}")
def test_gpu_profile_of_cudnn_graph_sees_its_kernels():
    row = kernels.profile("cudnn/graph", "gpu", 50)
    assert row["device_ops_per_call"] >= 8 and 0 < row["gpu_busy_ns_per_call"] <= row["host_ns_per_call"]
