"""cuda/resident (lenet_cuda/resident.cu, lenet_cuda/resident.py): the LL protocol and the resident
kernel's manners, on the CPU-emulated kernel behind the fake CuPy (tests/fake_cuda.py), where a
launch runs to its end: it serves what the host wrote, waits kernels.IDLE_NS, ends. On a GPU: a
second process's small kernels timed beside it (skipped here, with the reason)."""

import ctypes
import json
import re
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.base import GPU_PEERS_ENV
from harness.data import mnist
from harness.errors import HarnessError
from harness.lab.judge.rules import assignment
from harness.machine import gpu
from harness.measure import fastest_call
from lenet_cuda import kernels, model, resident
from lenet_numpy.model import NumpyLeNet
from tests import fake_cuda
from tests.test_fastest_call import cell, write_run
from tests.test_gpu_fault import Ended, ended  # noqa: F401 (a fixture)

ALIVE, QUIT, SERVED, NEXT = kernels.RESIDENT_ALIVE, kernels.RESIDENT_QUIT, kernels.RESIDENT_SERVED, kernels.RESIDENT_NEXT


@pytest.fixture(scope="module")
def sample():
    x = mnist.to_input(mnist.load("test")[0][:8])
    return x, NumpyLeNet(DEFAULT_WEIGHTS, dtype="float32").predict(x)


def emulated(monkeypatch, emulator, processes=None, variant="resident"):
    """A resident level on the emulated kernel; NVML replaced by `processes` (pids of others)."""
    fake = fake_cuda.FakeCupy(emulator)
    monkeypatch.setattr(model, "import_cupy", lambda: fake)
    impl = model.CudaLeNet(DEFAULT_WEIGHTS, variant=variant, dtype="float32")
    impl.resident.gpu_processes = lambda bus_id: list(processes or [])
    return fake, impl


def test_idle_timeout_is_at_most_200_us_for_both_resident_variants():
    assert kernels.IDLE_NS <= 200_000
    assert kernels.launches("resident", 1)[0].args[-1] == kernels.launches("persistent", 1)[0].args[-1] == kernels.IDLE_NS


def test_the_wire_carries_each_value_with_its_calls_sequence_and_the_answer_comes_back_so(monkeypatch, emulator, sample):
    x, reference = sample
    fake, impl = emulated(monkeypatch, emulator)
    for call in (1, 2):
        probs = impl.predict(x[call:call + 1])
        assert np.max(np.abs(probs - reference[call:call + 1])) <= 1e-5
        p = impl.resident.plans[1]
        words = p.x_pairs.view(np.uint32)
        assert (words[1::2] == call).all() and np.array_equal(words[0::2], x[call].reshape(-1).view(np.uint32))
        out = p.out_pairs.view(np.uint32)
        assert (out[1::2] == call).all() and np.array_equal(out[0::2].view(np.float32), probs[0])
    # the emulated launch served its call, waited IDLE_NS for the next and ended by itself
    assert list(p.ctl) == [2, 0, 0, 1]  # next (the call it was launched for), alive, quit, served
    assert fake.launched == [("kernel", "lenet_resident<float>", 8, 256)] * 2 and p.launched == 2
    args = p.launches[0][3]
    assert all(type(args[i]) is np.uint64 for i in (0, 11, 12))  # host pointers into mapped memory
    impl.close()
    assert p.ctl[QUIT] == 1


def test_the_kernel_waits_for_every_pair_of_its_call(monkeypatch, emulator, sample):
    """One pair still carrying the previous call's number: the kernel does not serve the image, ends
    when idle, and the answer's pairs stay as they were."""
    x, _ = sample
    _, impl = emulated(monkeypatch, emulator)
    impl.predict(x[:1])
    p = impl.resident.plans[1]
    before = p.out_pairs.copy()
    np.bitwise_or(x[1].reshape(-1).view(np.uint32), np.uint64(2 << 32), out=p.x_pairs)
    p.x_pairs[500] = (np.uint64(1) << np.uint64(32)) | np.uint64(x[1].reshape(-1).view(np.uint32)[500])
    p.ctl[NEXT], p.ctl[ALIVE] = 2, 1
    for fn, grid, block, args in p.launches:
        fn(grid, block, args)
    assert p.ctl[ALIVE] == 0 and p.ctl[SERVED] == 0 and np.array_equal(p.out_pairs, before)
    impl.close()


def test_a_quit_word_ends_a_kernel_that_would_wait_a_second(monkeypatch, emulator):
    monkeypatch.setattr(kernels, "IDLE_NS", 1_000_000_000)
    _, impl = emulated(monkeypatch, emulator)
    p = impl.resident.plan(1)
    assert p.launches[0][3][-1] == 1_000_000_000
    p.ctl[NEXT], p.ctl[ALIVE], p.ctl[QUIT] = 1, 1, 1  # no call written: only the quit word ends it
    start = time.monotonic()
    for fn, grid, block, args in p.launches:
        fn(grid, block, args)
    assert time.monotonic() - start < 0.5 and p.ctl[ALIVE] == 0 and p.ctl[SERVED] == 0
    impl.close()


def test_a_kernel_that_ended_as_the_call_came_is_launched_again(monkeypatch, emulator, sample):
    """The host saw the kernel alive (ctl says 1), then it ended without serving the call: the C
    side's wait sees the alive word go to 0 (another thread's store here), returns, and the host
    launches the kernel for the call and waits again."""
    x, reference = sample
    fake, impl = emulated(monkeypatch, emulator)
    impl.predict(x[:1])
    p = impl.resident.plans[1]
    p.ctl[ALIVE] = 1  # what the host reads as the call starts: one C call, no launch
    ends = threading.Timer(0.05, lambda: p.ctl.__setitem__(ALIVE, 0))  # ... then the kernel's store
    ends.start()
    probs = impl.predict(x[3:4])
    ends.join()
    assert np.max(np.abs(probs - reference[3:4])) <= 1e-5
    assert p.launched == 2 and p.ctl[NEXT] == 2 and list(p.ctl) == [2, 0, 0, 1]


@pytest.mark.parametrize("variant", kernels.RESIDENT_VARIANTS)
def test_the_c_host_side_serves_calls_of_a_kernel_running_beside_it(monkeypatch, emulator, sample, variant):
    """resident_host.c against the emulated kernel running at the same time in another thread: it
    stays resident, polls the pairs the C side writes into mapped memory call after call (resident_rows:
    rounds through both of its slots twice), and answers in pairs the C side spins on; the quit word
    ends it. The C side's stamps come in order."""
    x, reference = sample
    monkeypatch.setattr(kernels, "IDLE_NS", 2_000_000_000)  # the int32 most: calls come well within it
    _, impl = emulated(monkeypatch, emulator, variant=variant)
    p = impl.resident.plan(1)
    (fn, grid, block, args), = p.launches
    p.ctl[NEXT], p.ctl[ALIVE] = 1, 1
    kernel = threading.Thread(target=fn, args=(grid, block, args))
    kernel.start()
    stamps = (ctypes.c_int64 * 4)()
    try:
        for seq in (1, 2, 3, 4, 5):
            p.stage[...] = x[seq]
            p.wire.seq, p.wire.deadline_ns = seq, time.monotonic_ns() + 60_000_000_000
            assert impl.resident.host.resident_call(p.wire_ref, stamps) == resident.ANSWERED
            assert np.max(np.abs(p.answer - reference[seq:seq + 1])) <= 1e-5
            assert 0 < stamps[0] <= stamps[1] <= stamps[2] <= stamps[3] <= time.perf_counter_ns()
            assert kernel.is_alive() and p.ctl[ALIVE] == 1  # one launch, three calls
    finally:
        p.ctl[QUIT] = 1
        kernel.join(60)
    assert not kernel.is_alive() and p.ctl[ALIVE] == 0 and p.ctl[SERVED] == 5
    impl.close()


def test_the_wire_structure_is_resident_host_c_s():
    text = resident.HOST_C.read_text()
    struct = text[text.index("struct resident_wire {"):text.index("};", text.index("struct resident_wire {"))]
    fields = re.findall(r"^\s+(?:const )?(?:volatile )?(\w+)(\*?) (\w+);", struct, re.M)
    ctype = {"uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64}
    assert [(name, ctypes.c_void_p if pointer else ctype[kind]) for kind, pointer, name in fields] == [
        (name, kind) for name, kind in resident.Wire._fields_]
    assert "#define RESIDENT_ALIVE 1" in text and kernels.RESIDENT_ALIVE == 1
    assert re.search(r"RESIDENT_ANSWERED = 0, RESIDENT_ENDED = 1, RESIDENT_TIMED_OUT = 2", text)
    assert (resident.ANSWERED, resident.ENDED, resident.TIMED_OUT) == (0, 1, 2)


@pytest.mark.usefixtures("ended")
def test_a_kernel_that_never_answers_times_out_and_is_told_to_quit(monkeypatch, emulator, sample):
    x, _ = sample
    fake, impl = emulated(monkeypatch, emulator)
    impl.predict(x[:1])
    p = impl.resident.plans[1]
    p.launches = tuple((lambda grid, block, args: None, g, b, a) for _, g, b, a in p.launches)  # hangs
    monkeypatch.setattr(resident, "POLL_TIMEOUT_S", 0.05)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"lenet_resident did not answer call 2 in 0.05 s \(alive 1, served 1\)"):
        impl.predict(x[1:2])
    assert time.monotonic() - start < 2.0 and p.ctl[QUIT] == 1
    impl.stream.done = False  # a kernel stuck where it never reads the quit word: not waited for
    monkeypatch.setattr(resident, "QUIT_WAIT_S", 0.01)
    with pytest.raises(Ended) as got:  # the process ends as hung: no synchronize, no memory freed
        impl.predict(x[2:3])
    assert got.value.kind == "hung"
    assert got.value.reason.startswith("cuda/resident (float32): lenet_resident did not answer call 3 in 0.05 s")
    impl.stream.done = True
    impl.close()


@pytest.mark.usefixtures("ended")
def test_a_close_under_a_kernel_that_never_finishes_ends_the_process_as_hung(monkeypatch, emulator, sample):
    """close() polls the stream with a deadline (as timed_out does): a kernel still running then is
    recorded as hung and its process ends before any memory it may touch is freed."""
    x, reference = sample
    fake, impl = emulated(monkeypatch, emulator, variant="resident_rows")
    assert np.max(np.abs(impl.predict(x[:2]) - reference[:2])) <= 1e-5
    impl.stream.done = False  # its kernel never ends
    monkeypatch.setattr(model, "CLOSE_WAIT_S", 0.05)
    start = time.monotonic()
    with pytest.raises(Ended) as got:
        impl.close()
    assert got.value.kind == "hung" and time.monotonic() - start < 2.0
    assert got.value.reason == ("cuda/resident_rows (float32)'s close: its GPU work still running 0.05 s after "
                                "it was asked to end")
    assert impl.resident.plans  # nothing freed under the running kernel
    impl.stream.done = True
    impl.close()


def test_another_process_on_the_gpu_sends_calls_to_the_launched_mapped_path(monkeypatch, emulator, sample):
    """NVML names another process: the resident kernel is told to quit and the call runs on mapped's
    launched kernel (cluster.cu's lenet_cluster); once the GPU is ours again, resident again."""
    x, reference = sample
    others = [4242]
    fake, impl = emulated(monkeypatch, emulator)
    impl.resident.gpu_processes = lambda bus_id: list(others)
    monkeypatch.setattr(resident, "NVML_EVERY_S", 0.0)  # asked at every call here
    probs = impl.predict(x[:2])
    assert np.max(np.abs(probs - reference[:2])) <= 1e-5
    assert impl.resident.fallback_calls == 1 and impl.resident.others == [4242]
    assert [k for k in fake.launched if k[0] == "kernel"] == [("kernel", "lenet_cluster<float>", 16, 256)] * 2
    assert ("cluster.cu", kernels.OPTIONS, ("lenet_cluster<float>",)) in fake.compiled
    assert impl.resident.plans[2].launched == 0  # never launched while shared
    others.clear()
    probs = impl.predict(x[2:4])
    assert np.max(np.abs(probs - reference[2:4])) <= 1e-5 and impl.resident.plans[2].launched == 1
    assert fake.launched[-1] == ("kernel", "lenet_resident<float>", 8, 256)
    others.append(77)  # another process again: the resident plan is told to quit
    impl.predict(x[4:6])
    assert impl.resident.plans[2].ctl[QUIT] == 1 and impl.resident.fallback_calls == 2
    impl.close()
    assert impl.resident.fallback is None


def test_nvml_is_asked_at_most_every_nvml_every_s(monkeypatch, emulator, sample):
    asked = []
    monkeypatch.setattr(resident, "NVML_EVERY_S", 60.0)  # an emulated call takes a good part of a second
    _, impl = emulated(monkeypatch, emulator)
    impl.resident.gpu_processes = lambda bus_id: asked.append(bus_id) or []
    for i in range(3):
        impl.predict(sample[0][i:i + 1])
    assert len(asked) == 1  # the first call; the next due NVML_EVERY_S later
    impl.close()


def test_other_gpu_processes_leaves_this_process_out(monkeypatch, tmp_path):
    calls = []

    def processes(handle):
        calls.append(handle)
        return [types.SimpleNamespace(pid=pid) for pid in (111, 222, 333)]

    fake_nvml = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlDeviceGetHandleByPciBusId=lambda bus: ("bus", bus),
        nvmlDeviceGetHandleByIndex=lambda i: ("index", i), nvmlDeviceGetComputeRunningProcesses=processes)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml)
    monkeypatch.setattr(resident, "_NVML", {})
    monkeypatch.setattr(resident.os, "getpid", lambda: 222)
    assert resident.other_gpu_processes("0000:01:00.0") == [111, 333] and calls == [("bus", "0000:01:00.0")]
    monkeypatch.setattr(resident.os, "getpid", lambda: 9)  # another pid namespace: one of them is ours
    assert resident.other_gpu_processes("") == [222, 333] and calls[-1] == ("index", 0)
    assert resident.others_than_me([], 9) == [] and resident.others_than_me([9], 9) == []
    # the harness's runner lists its own workers (they wait their turn): not strangers
    peers = tmp_path / "peers"
    peers.write_text("111\n333\n")
    monkeypatch.setenv(GPU_PEERS_ENV, str(peers))
    monkeypatch.setattr(resident.os, "getpid", lambda: 222)
    assert resident.other_gpu_processes("0000:01:00.0") == []
    peers.write_text("111\n")
    assert resident.other_gpu_processes("0000:01:00.0") == [333]
    peers.unlink()  # the run ended: every other process is a stranger again
    assert resident.other_gpu_processes("0000:01:00.0") == [111, 333]

    def refuses(handle):
        raise RuntimeError("NVML_ERROR_NO_PERMISSION")

    fake_nvml.nvmlDeviceGetComputeRunningProcesses = refuses
    assert resident.other_gpu_processes("x") is None  # nothing known: not taken as "others"


def test_without_nvml_nothing_is_known(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    monkeypatch.setattr(resident, "_NVML", {})
    assert resident.other_gpu_processes("x") is None and "import of pynvml" in resident._NVML["error"]


# --- never where a class runs ------------------------------------------------------------------
def test_a_lab_refuses_a_resident_reference_and_its_floor_is_never_resident(tmp_path, monkeypatch):
    spec = registry.spec("cuda")
    assert spec.variants[0] not in spec.resident  # never the level's default
    for variant in spec.resident:
        with pytest.raises(HarnessError, match=rf"cuda/{variant} keeps a kernel resident on the GPU"):
            assignment.parse_reference("labs/x.toml", f"cuda/{variant}", "gpu")
    write_run(tmp_path, "r1", [cell("cuda", "resident", 5_000.0, device="gpu"),
                               cell("cuda", "persistent", 6_000.0, device="gpu"),
                               cell("cuda", "mapped", 9_000.0, device="gpu")])
    assert fastest_call.fastest_measured("gpu", tmp_path).label == "cuda/resident"  # the report's floor
    assert fastest_call.fastest_measured("gpu", tmp_path, shared=True).label == "cuda/mapped"  # a lab's
    assert fastest_call.standing_in("gpu").label == "cuda/resident"  # the registry's first stand-in
    assert fastest_call.standing_in("gpu", shared=True).label == "cuda/mapped"
    monkeypatch.setattr(assignment, "fastest_measured", lambda device, shared=False: fastest_call.fastest_measured(
        device, tmp_path, shared=shared))
    text = '[lab]\nname = "x"\ndevice = "gpu"\nreferences = ["floor"]\n'
    assert 'references = ["cuda/mapped"]' in assignment.floor_named(text)


def test_no_shipped_lab_names_a_resident_variant():
    for lab in sorted(assignment.LABS_DIR.glob("*.toml")):
        text = lab.read_text()
        for variant in registry.spec("cuda").resident:
            assert f"cuda/{variant}" not in text, lab


# --- on a GPU: a second process's kernels beside the resident kernel ---------------------------
needs_gpu = pytest.mark.skipif(gpu.absent_reason() is not None, reason=f"needs an NVIDIA GPU: {gpu.absent_reason()}")

NEIGHBOUR = """
import json, sys, time
import cupy as cp
x = cp.ones(1 << 20, cp.float32)
times = []
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:  # a neighbour's small kernels, each waited for
    t = time.perf_counter_ns(); (x * 2).sum(); cp.cuda.Stream.null.synchronize()
    times.append(time.perf_counter_ns() - t)
print(json.dumps(sorted(times)[len(times) // 2]))
"""


def neighbour_median_ns(seconds: float) -> int:
    done = subprocess.run([sys.executable, "-c", NEIGHBOUR, str(seconds)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
@needs_gpu
def test_gpu_a_second_process_s_kernels_beside_the_resident_kernel(capsys):
    """Another process's small kernels, timed alone and then while this process calls cuda/resident
    in a loop: the resident kernel ends when idle and, once NVML names the neighbour, the calls go to
    the launched path. Printed, not asserted beyond correctness and the fallback (speed goals are
    never asserted in pytest)."""
    x = mnist.to_input(mnist.load("test")[0][:64])
    reference = NumpyLeNet(DEFAULT_WEIGHTS).predict(x)
    alone = neighbour_median_ns(2.0)
    impl = registry.create("cuda", DEFAULT_WEIGHTS, device="gpu", variant="resident")
    try:
        for i in range(200):  # resident: nobody else on the GPU
            assert np.max(np.abs(impl.predict(x[i % 64:i % 64 + 1]) - reference[i % 64:i % 64 + 1])) <= 1e-5
        launched_alone = impl.resident.plans[1].launched
        neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, "4.0"], stdout=subprocess.PIPE, text=True)
        calls, end = 0, time.monotonic() + 3.5
        while time.monotonic() < end:
            i = calls % 64
            assert np.max(np.abs(impl.predict(x[i:i + 1]) - reference[i:i + 1])) <= 1e-5
            calls += 1
        out, _ = neighbour.communicate(timeout=60)
        beside = json.loads(out.strip().splitlines()[-1])
        with capsys.disabled():
            print(f"\nneighbour's kernel median: alone {alone / 1e3:.1f} µs, beside cuda/resident "
                  f"{beside / 1e3:.1f} µs; {calls} calls, {impl.resident.fallback_calls} on the launched "
                  f"path, NVML saw {impl.resident.others}; resident launches before: {launched_alone}")
        assert neighbour.returncode == 0
        if impl.resident.others:  # NVML saw the neighbour (it cannot in some containers)
            assert impl.resident.fallback_calls > 0
    finally:
        impl.close()


@pytest.mark.gpu
@needs_gpu
def test_gpu_resident_kernel_stays_between_calls_ends_when_idle_and_comes_back():
    x = mnist.to_input(mnist.load("test")[0][:64])
    reference = NumpyLeNet(DEFAULT_WEIGHTS).predict(x)
    impl = registry.create("cuda", DEFAULT_WEIGHTS, device="gpu", variant="resident")
    impl.resident.gpu_processes = lambda bus_id: []  # this test's own neighbours do not count

    def alive_becomes(plan, value):  # the kernel's own store, within a generous second
        deadline = time.monotonic() + 1.0
        while plan.ctl[ALIVE] != value and time.monotonic() < deadline:
            time.sleep(0.0005)
        return plan.ctl[ALIVE] == value

    try:
        for i in range(64):  # back to back: well within IDLE_NS of each other
            assert np.max(np.abs(impl.predict(x[i:i + 1]) - reference[i:i + 1])) <= 1e-5
        plan = impl.resident.plans[1]
        assert plan.launched < 64  # resident: not a launch a call (a few where a call came late)
        assert alive_becomes(plan, 0) and plan.ctl[SERVED] >= 1  # idle: it ended by itself ...
        launched = plan.launched
        assert np.max(np.abs(impl.predict(x[:1]) - reference[:1])) <= 1e-5  # ... and came back
        assert plan.launched == launched + 1
        np.testing.assert_allclose(impl.predict(x[:13]), reference[:13], atol=1e-5)  # another batch size
    finally:
        plans = list(impl.resident.plans.values())
        impl.close()
    assert all(p.ctl[ALIVE] == 0 for p in plans)  # close waited for every kernel to end


# --- its stages (lenet_cuda.explain.stages' resident part) -------------------------------------
def test_resident_stage_stamps_compile_and_summarize_block_0s_compute():
    from harness.machine import nvrtc
    from lenet_cuda.explain import stages

    try:
        lib = nvrtc.load()
    except Exception as exc:
        pytest.skip(f"NVRTC not installed here: {exc}")
    expr = [e for dtype in kernels.CTYPES for e in kernels.name_expressions("resident", dtype)]
    built = lib.compile(stages.DEFINE + kernels.source("resident"), "resident.cu", "compute_90", kernels.OPTIONS, expr)
    assert "lenet_stage_clock" in built.image.decode()
    base = np.arange(kernels.CLUSTER * stages.STAMPS, dtype=np.int64).reshape(kernels.CLUSTER, stages.STAMPS)
    one = base * 0
    one[0] = [0, 10, 20, 1000, 1100, 1300, 1600, 1650]  # block 0: stamps 3..7 a call's compute
    two = one.copy()
    two[0, 3:] += [0, 100, 100, 100, 100]  # each compute stage 100 cycles longer
    out = stages.summarize_resident([one, two, one], clock_khz=2_000_000.0)  # 2 GHz
    assert [s["block0_cycles"] for s in out["stages"]] == [100, 200, 300, 50]
    assert out["compute_cycles"] == 650 and out["compute_ns"] == pytest.approx(325.0)
    with pytest.raises(ValueError, match="stamps: expected"):
        stages.summarize_resident([np.zeros((2, 2))], None)


@pytest.mark.gpu
@needs_gpu
def test_gpu_resident_stages(capsys):
    from lenet_cuda.explain import stages

    out = stages.measure_resident(str(DEFAULT_WEIGHTS), 200)
    with capsys.disabled():
        print(f"\nlenet_resident, a call's compute (block 0, stamps 3..7): {out['compute_cycles']:.0f} cycles "
              f"= {out['compute_ns'] or float('nan'):.0f} ns; "
              + ", ".join(f"{s['name']}: {s['block0_cycles']:.0f}" for s in out["stages"])
              + f"; calls on the launched path {out['fallback_calls']}")
    assert out["compute_cycles"] > 0
