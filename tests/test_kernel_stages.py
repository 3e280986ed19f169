"""kernel-stages: the cluster kernel's stamps (placed and ordered right, checked in the CPU
emulation), their summary, the command without a GPU, and the DETAILS lines."""

import ctypes
import subprocess
import sys

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS
from harness.data import mnist, weights
from harness.explain import kernel_stages
from lenet_cuda import kernels, resident
from lenet_cuda.explain import stages
from lenet_numpy.model import NumpyLeNet
from tests import fake_cuda
from tests.conftest import ROOT


def test_the_stamp_count_is_cluster_cu_s():
    assert f"#define LENET_STAMPS {stages.STAMPS}" in kernels.source("cluster")
    assert [end for end, _ in stages.STAGES] == list(range(1, stages.STAMPS))


def stamped(folder, kernel, source, cluster):
    """kernel<float> of the stamping source compiled for the CPU as emu_stamped (skipped without
    g++), one test image and the weights (float32) in the kernel's parameter order."""
    params = [fake_cuda.CPP_TYPES[p].format(T="float") for p in kernels.PARAMS[kernel]]
    try:
        lib = fake_cuda.compile_emulated(folder, [source], [
            fake_cuda.wrapper("emu_stamped", f"{kernel}<float>", params, True, cluster)])
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    x = mnist.to_input(mnist.load("test")[0][:1]).astype(np.float32)
    w = [np.ascontiguousarray(getattr(layer, part), np.float32)
         for layer in weights.read(DEFAULT_WEIGHTS).values() for part in ("kernel", "bias")]
    return lib, x, w


def test_emulated_stamps_come_in_order_and_the_answer_is_unchanged(tmp_path):
    """One image through the stamping kernel: every block stamps 0..6 in order, block 0 alone 7."""
    lib, x, w = stamped(tmp_path, "lenet_cluster", stages.instrumented_source(), kernels.CLUSTER)
    out = np.zeros((1, 10), np.float32)
    fn = lib.emu_stamped
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [ctypes.c_void_p] * 14 + [ctypes.c_int]
    assert fn(kernels.CLUSTER, kernels.CLUSTER_THREADS, x.ctypes.data, *[a.ctypes.data for a in w],
              out.ctypes.data, None, None, 1) == 0
    assert np.max(np.abs(out - NumpyLeNet(DEFAULT_WEIGHTS).predict(x))) <= 1e-5
    stamps = np.ctypeslib.as_array((ctypes.c_longlong * (kernels.CLUSTER * stages.STAMPS)).in_dll(
        lib, "lenet_stage_clock")).reshape(kernels.CLUSTER, stages.STAMPS)
    assert (stamps[:, :7] > 0).all() and (np.diff(stamps[:, :7], axis=1) >= 0).all()
    assert stamps[0, 7] >= stamps[0, 6] and (stamps[1:, 7] == 0).all()


def test_summary_takes_each_block_s_own_differences():
    rng = np.random.default_rng(0)
    samples = []
    for _ in range(5):
        steps = np.tile(np.arange(1, 8) * 100, (kernels.CLUSTER, 1))  # stage k: 100 k cycles
        steps[3, 0] += 50  # block 3 is slower in stage 0
        start = rng.integers(0, 10**9, kernels.CLUSTER)[:, None]  # each SM's counter its own
        samples.append(np.concatenate([start, start + np.cumsum(steps, axis=1)], axis=1))
    got = stages.summarize(samples, 2_000_000)  # 2 GHz: 0.5 ns a cycle
    assert [s["block0_cycles"] for s in got["stages"]] == [100, 200, 300, 400, 500, 600, 700]
    assert got["stages"][0]["slowest_block_cycles"] == 150 and got["stages"][1]["slowest_block_cycles"] == 200
    assert got["block0_cycles"] == 2800 and got["block0_ns"] == 1400 and got["stages"][6]["block0_ns"] == 350
    assert stages.summarize(samples, None)["block0_ns"] is None
    with pytest.raises(ValueError, match=r"stamps: expected \(calls, 8, 8\), found \(1, 8, 7\)"):
        stages.summarize([np.zeros((8, 7))], 1.0)


def test_kernel_stages_without_a_gpu_exits_3_with_the_reason():
    from harness.machine import gpu

    if gpu.absent_reason() is None:
        pytest.skip("a GPU is present: the command would run")
    done = subprocess.run([sys.executable, "-m", "harness", "kernel-stages", "--calls", "5"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "kernel-stages needs a GPU" in done.stderr, done.stderr


@pytest.mark.gpu
def test_gpu_stages_add_up_to_block_0_s_time():
    from harness.machine import gpu

    if gpu.absent_reason() is not None:
        pytest.skip(f"needs an NVIDIA GPU: {gpu.absent_reason()}")
    got = stages.measure(str(DEFAULT_WEIGHTS), 20)
    assert got["calls"] == 20 and got["gpu"]
    cycles = [s["block0_cycles"] for s in got["stages"]]
    assert all(c >= 0 for c in cycles) and 0 < sum(cycles) <= got["block0_cycles"] * 1.5


def test_details_section_puts_the_stages_beside_the_trace():
    from harness.report.sections import kernel_stages_section

    steps = np.tile(np.arange(1, 8) * 1000, (kernels.CLUSTER, 1))
    stamps = np.concatenate([np.zeros((kernels.CLUSTER, 1)), np.cumsum(steps, axis=1)], axis=1)
    summary = stages.summarize([stamps] * 3, 2_000_000)  # 28,000 cycles: 14 µs at 2 GHz
    row = {"kind": "kernel_stages", "status": "ok", "implementation": "cuda", "variant": "cluster",
           "kernel": "lenet_cluster", "gpu": "NVIDIA H100", "dtype": "float32", **summary}
    traced = {"kind": "kernels", "status": "ok", "implementation": "cuda", "variant": "cluster", "batch": 1,
              "ops": [{"category": "kernel", "name": "lenet_cluster", "ns_per_call": 16_000.0, "per_call": 1.0}]}
    runs = [{"study": "kernel_stages", "machine": "vm: H100", "started": 1.0, "order": 1.0, "rows": [row]},
            {"study": "kernels", "machine": "vm: H100", "started": 2.0, "order": 2.0, "rows": [traced]}]
    text = "\n".join(kernel_stages_section.section(runs))
    assert "## Inside lenet_cluster, float32, on vm: H100" in text
    assert "| block 0: fc2, fc3, softmax, the answer stored | 7,000 | 3,500 | 7,000 |" in text
    assert "| the image into every block (0\\|1 barrier) |" in text  # a pipe in a cell, escaped
    assert "Block 0 runs 28,000 cycles from entry to end (14 µs); its longest stage is \"block 0: fc2" in text
    assert "(25%)" in text and "times lenet_cluster at 16 µs a call: 2 µs of it is outside block 0's stamps" in text
    assert kernel_stages_section.section([runs[1]]) == []  # no stages measured: no section
    row["dtype"] = "float64"  # the trace is float32's: no comparison with another dtype's stamps
    assert "outside block 0's stamps" not in "\n".join(kernel_stages_section.section(runs))


# --- the resident call attributed (kernel-stages' second row) ----------------------------------
def test_a_resident_call_is_attributed_part_by_part_and_what_the_medians_leave_is_said():
    calls = [{"t0": 1_000, "s0": 1_900, "s1": 2_100, "s2": 7_100, "s3": 7_200, "t1": 7_800},
             {"t0": 9_000, "s0": 9_800, "s1": 10_000, "s2": 15_400, "s3": 15_500, "t1": 16_200},
             {"t0": 20_000, "s0": 21_000, "s1": 21_300, "s2": 26_000, "s3": 26_100, "t1": 26_600}]
    got = stages.attribute_call(calls, [2_000.0, 2_500.0, 2_200.0])
    assert [p["ns"] for p in got["parts"]] == [900, 200, 5_000, 100, 600]
    assert got["call_ns"] == 6_800 and got["unattributed_ns"] == 0 and got["calls"] == 3
    assert got["compute_ns"] == 2_200 and got["wait_less_compute_ns"] == 2_900  # (3000, 2900, 2500)
    assert "compute_ns" not in stages.attribute_call(calls, None)
    with pytest.raises(ValueError, match="out of order"):
        stages.attribute_call([{**calls[0], "s2": 1_000}], None)
    row = {"variant": "resident_rows", "dtype": "float32", "calls": 3, "launched_calls": 1, "fallback_calls": 0, "call": got,
           "stages": [{"name": "conv1 + pool, p1 into every block (1|2)", "block0_cycles": 900.0}]}
    text = "\n".join(kernel_stages.resident_lines(row))
    assert "cuda/resident_rows's call (float32, 3 calls, 1 with a launch, 0 on the launched path" in text
    assert "C: the image's pairs written into mapped memory" in text and "0.20 µs" in text
    assert "the call (median)" in text and "6.80 µs; the medians leave 0.00 µs" in text
    assert "the kernel's compute 2.20 µs, the rest (bus both ways, polls) 2.90 µs" in text


def test_the_resident_row_is_kernel_stages_second_row_and_a_failure_says_why(monkeypatch):
    """Each row is what the level's stamps measured (lenet_cuda.explain.stages, imported by name:
    kernel_stages serves the cuda level alone), with its kind, level, variant and kernel."""
    monkeypatch.setattr(stages, "measure", lambda *asked: {"dtype": asked[2], "asked": list(asked)})
    monkeypatch.setattr(stages, "measure_resident", lambda *asked: {"dtype": asked[2], "asked": list(asked)})
    first = kernel_stages.row("w.h5", 3, "float64")
    assert first["asked"] == ["w.h5", 3, "float64"] and first["kind"] == "kernel_stages"
    assert (first["implementation"], first["variant"], first["kernel"]) == ("cuda", "cluster", "lenet_cluster")
    second = kernel_stages.resident_row("w.h5", 3, "float32", "resident_rows")
    assert second["asked"] == ["w.h5", 3, "float32", "resident_rows"] and second["kind"] == "resident_stages"
    assert second["kernel"] == "lenet_resident_rows" and second["status"] == "ok" and second["dtype"] == "float32"
    failed = kernel_stages.resident_failed("float64", "resident_rows", "needs sm_90")
    assert failed["kind"] == "resident_stages" and failed["variant"] == "resident_rows" and failed["status"] == "failed"
    assert failed["kernel"] == "lenet_resident_rows" and set(kernel_stages.RESIDENT_KERNELS) == set(kernels.RESIDENT_VARIANTS)


def test_an_emulated_resident_call_stamps_its_c_side_in_order(monkeypatch, emulator):
    """The C side's stamps of a real predict (the emulated kernel): ordered, inside Python's clock."""
    import ctypes
    import time

    from lenet_cuda import model

    fake = fake_cuda.FakeCupy(emulator)
    monkeypatch.setattr(model, "import_cupy", lambda: fake)
    impl = model.CudaLeNet(DEFAULT_WEIGHTS, variant="resident", dtype="float32")
    impl.resident.gpu_processes = lambda bus_id: []
    impl.resident.stamps = (ctypes.c_int64 * 4)()
    x = mnist.to_input(mnist.load("test")[0][:1]).astype(np.float32)
    impl.predict(x)  # the kernel is launched and ends within the call (the emulator): no resident_call
    assert list(impl.resident.stamps) == [0, 0, 0, 0]
    p = impl.resident.plans[1]
    p.ctl[kernels.RESIDENT_ALIVE] = 1  # as if resident: one C call, which times out unanswered
    monkeypatch.setattr(resident, "POLL_TIMEOUT_S", 0.02)
    t0 = time.perf_counter_ns()
    with pytest.raises(RuntimeError, match="did not answer"):
        impl.predict(x)
    s = list(impl.resident.stamps)
    assert t0 < s[0] <= s[1] < time.perf_counter_ns() and s[2] == s[3] == 0
    impl.close()


def test_emulated_resident_rows_stamps_block_0s_answered_round_in_order(tmp_path):
    """lenet_resident_rows compiled with the stamps, one call served (then idle: a vote round, which
    stamps nothing): block 0's stamps 3..7 in order, and the answer the oracle's."""
    lib, x, w = stamped(tmp_path, "lenet_resident_rows", stages.DEFINE + kernels.source("resident_rows"),
                        kernels.ROWS_CLUSTER)
    pairs = x.reshape(-1).view(np.uint32).astype(np.uint64) | np.uint64(1 << 32)  # call 1
    out = np.zeros(10, np.uint64)
    ctl = np.array([1, 1, 0, 0], np.uint32)  # next 1, alive
    fn = lib.emu_stamped
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [ctypes.c_void_p] * 13 + [ctypes.c_int, ctypes.c_int]
    assert fn(kernels.ROWS_CLUSTER, kernels.ROWS_THREADS, pairs.ctypes.data, *[a.ctypes.data for a in w],
              out.ctypes.data, ctl.ctypes.data, 1, 100_000) == 0
    probs = (out & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    assert np.max(np.abs(probs - NumpyLeNet(DEFAULT_WEIGHTS).predict(x)[0])) <= 1e-5
    assert list(ctl) == [1, 0, 1, 1]  # served 1, ended (alive 0) after its vote stored the quit word
    stamps = np.ctypeslib.as_array((ctypes.c_longlong * (kernels.CLUSTER * stages.STAMPS)).in_dll(
        lib, "lenet_stage_clock")).reshape(kernels.CLUSTER, stages.STAMPS)
    assert (stamps[0, 3:] > 0).all() and (np.diff(stamps[0, 3:]) >= 0).all()
