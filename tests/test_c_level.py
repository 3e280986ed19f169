"""The hand-written C level (lenet_c): every variant against the NumPy oracle on a few hundred images
(the full 10,000 in `make verify`), which path ran (AVX-512 intrinsics or the plain loops) said and
checked against the compiler's own target, the compile cache reused and invalidated by a source or
flag change, concurrent builds safe, and no compiler (or one that fails) named as the reason the
level cannot run here, with the fix. Needs a C compiler: skipped where there is none."""

import gc
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.data import weights
from harness.errors import Unavailable
from harness.frameworks import toolchain
from tests.conftest import assert_matches_oracle, oracle_sample

if not (shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")):
    pytest.skip("the hand-written C level needs a C compiler (apt install gcc)", allow_module_level=True)
from lenet_c import build, model  # noqa: E402
from lenet_c.model import CLeNet  # noqa: E402


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], 300, dtype="float64")


def output_of(argv) -> str:
    return Path(argv[argv.index("-o") + 1]).name


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A fresh compile cache, and the compiler invocations that compile (argv with -o), in order.
    The levels call through ctypes here: the call extension (call.c), built once per cache, is
    test_the_call_extension_is_built_once_...'s to count."""
    monkeypatch.setenv("LENET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(CLeNet, "bind", lambda self: (None, "ctypes: not built in this test"))
    compiles: list[list[str]] = []
    real = build.run

    def run(argv, stdin=None):
        if "-o" in argv:
            compiles.append(argv)
        return real(argv, stdin)

    monkeypatch.setattr(build, "run", run)
    return compiles


@pytest.mark.parametrize("variant, dtype", [("fused", "float32"), ("layers", "float32"), ("portable", "float32"),
                                            ("fused", "float64"), ("layers", "float64")])
def test_every_variant_matches_the_oracle(sample, variant, dtype):
    x, reference = sample
    level = CLeNet(DEFAULT_WEIGHTS, variant=variant, dtype=dtype)
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    assert_matches_oracle(level, x, reference, dtype, tolerance)
    # buffers (and layers' calls) made once per batch size, then reused; fused and portable read
    # float32 images where they are (C-contiguous in the dtype) and need none
    assert sorted(level.plans) == ([] if variant != "layers" and dtype == "float32" else [1, 7, 300])


def compiler_targets_avx512() -> bool:
    """Whether the compiler, told -march=native, defines __AVX512F__: asked independently of the level."""
    done = subprocess.run([*build.compiler().command, "-march=native", "-dM", "-E", "-x", "c", "-"],
                          input="", capture_output=True, text=True, check=True)
    return "#define __AVX512F__ 1" in done.stdout


def test_the_path_that_ran_is_the_compilers_target_and_is_reported():
    wanted = "avx512" if compiler_targets_avx512() else "portable"
    fused = CLeNet(DEFAULT_WEIGHTS, variant="fused")
    assert fused.path == wanted
    assert fused.info()["path"] == wanted and "-march=native" in fused.info()["flags"]
    for variant, dtype in (("portable", "float32"), ("fused", "float64"), ("layers", "float32")):
        assert CLeNet(DEFAULT_WEIGHTS, variant=variant, dtype=dtype).path == "portable"  # no intrinsics
    probe = registry.hook("c", "compiler")()  # what doctor prints
    assert probe["found"] and probe["fused_path"] == wanted and probe["version"] == build.compiler().version


def test_the_compile_cache_is_reused_and_invalidated_by_a_source_or_flag_change(counted, monkeypatch, tmp_path):
    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    assert len(counted) == 1 and "-march=native" in counted[0]
    CLeNet(DEFAULT_WEIGHTS, variant="fused").predict(np.zeros((1, 28, 28, 1), np.float32))
    assert len(counted) == 1  # the second construction found the library: no compiler run
    monkeypatch.setattr(build, "FLAGS", (*build.FLAGS, "-DLENET_UNUSED_FLAG"))
    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    assert len(counted) == 2 and "-DLENET_UNUSED_FLAG" in counted[1]
    text = build.source("fused.c")
    monkeypatch.setattr(build, "source", lambda name: text + "\n// an edit\n")
    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    assert len(counted) == 3
    libraries = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert len(libraries) == 3 and all(n.startswith("fused-") and n.endswith(".so") for n in libraries)


def test_concurrent_builds_each_load_a_whole_library_and_leave_no_temporary_file(counted, tmp_path):
    found, errors = [], []

    def build_one():
        try:
            found.append(build.library("layers.c", build.flags("layers", "float32")))
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=build_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(found)) == 1
    assert [p.name for p in (tmp_path / "c").iterdir()] == [found[0].name]  # no .tmp left behind
    CLeNet(DEFAULT_WEIGHTS, variant="layers").predict(np.zeros((2, 28, 28, 1), np.float32))


def test_no_compiler_is_unavailable_with_the_reason_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(Unavailable, match=r"CC='/nonexistent/cc' is not a program on PATH; install one: apt install gcc"):
        CLeNet(DEFAULT_WEIGHTS)
    probe = registry.hook("c", "compiler")()
    assert not probe["found"] and "apt install gcc" in probe["reason"]
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no compiler on it
    with pytest.raises(Unavailable, match=r"no C compiler \(cc, gcc, clang\) on PATH; install one"):
        CLeNet(DEFAULT_WEIGHTS, variant="layers")


def test_a_source_the_compiler_rejects_is_unavailable_with_its_error(counted, monkeypatch):
    monkeypatch.setattr(build, "source", lambda name: "int broken = ;\n")
    with pytest.raises(Unavailable, match=r"cannot compile fused\.c with -O3 -march=native .*error"):
        CLeNet(DEFAULT_WEIGHTS)
    assert len(counted) == 1


def test_the_layers_calls_are_the_cuda_levels_launches():
    """layers.c is layers.cu's twin: the same functions, arguments and order (lenet_cuda/kernels.py)."""
    from lenet_cuda import kernels

    cuda = [(launch.kernel, launch.args) for launch in kernels.layer_launches(7)]
    assert cuda == [(fn, tuple(7 if a == "n" else a for a in args)) for fn, args in model.LAYER_CALLS]


def test_bad_images_and_choices_are_value_errors():
    level = CLeNet(DEFAULT_WEIGHTS, variant="layers")
    for bad in (np.zeros((2, 28, 28)), np.zeros((0, 28, 28, 1)), np.zeros((1, 32, 32, 1))):
        with pytest.raises(ValueError, match=r"\(N, 28, 28, 1\)"):
            level.predict(bad)
    with pytest.raises(ValueError, match="unknown variant 'tuned'"):
        CLeNet(DEFAULT_WEIGHTS, variant="tuned")


def test_the_timed_pass_gives_the_same_answers_and_names_every_stage(sample):
    import ctypes

    from lenet_c.explain import stages

    level = CLeNet(DEFAULT_WEIGHTS, variant="fused")
    x = sample[0][:20]
    untimed = level.predict(x)
    plan = level.plan(20)
    plan.x[...] = x
    ns = np.zeros(6, np.int64)
    level.lib.lenet_fused_timed(*plan.calls[0][1], ctypes.c_void_p(ns.ctypes.data))
    assert np.array_equal(plan.out, untimed)  # bit for bit: the same code, clocks between stages
    assert (ns[1:3] > 0).all()  # the convolutions took time
    split = stages.layer_split(variant="portable", calls=30)
    assert [s["name"] for s in split["stages"]] == list(stages.MACS)
    assert sum(s["macs"] for s in split["stages"]) == 416_520 and split["path"] == "portable"
    # the C call timed inside C (no Python in it), the call from Python beside it, the clock's own cost
    assert split["call_in_c"] and split["call_median_ns"] > 0 and split["ctypes_call_median_ns"] > 0
    assert sorted(split["call_paths"]) == ["clock", "ctypes", "extension"]
    with pytest.raises(ValueError, match="fused or portable"):
        stages.layer_split(variant="layers")


def test_the_fma_probe_measures_the_widest_vector_the_build_targets():
    from lenet_c.explain import stages

    peak = stages.fma_peak(repeats=2)
    assert peak["macs_per_s"] > 0
    widest = {("avx512", 16)} if compiler_targets_avx512() else {("avx2+fma", 8), ("scalar", 1)}
    assert (peak["isa"], peak["lanes"]) in widest


def fake_probes(monkeypatch, probes):
    """The C level's probes (lenet_c.explain.stages, which harness.explain.c_layers imports) replaced."""
    from lenet_c.explain import stages

    for name, probe in probes.items():
        monkeypatch.setattr(stages, name, probe)


def test_the_layer_table_puts_each_stage_beside_its_arithmetic_at_the_peak(monkeypatch):
    from harness.explain import c_layers

    rounds = iter([1_000.0, 5_000.0, 7_000.0])  # conv2's median in each of three rounds
    def layer_split(weights, variant, calls):
        return {"path": "avx512", "calls": calls, "call_median_ns": 10_000.0, "call_in_c": True,
                "ctypes_call_median_ns": 10_200.0 + calls, "call_paths": {"ctypes": 200.0 + calls, "extension": 80.0},
                "stages": [{"name": "conv2", "macs": 240_000, "needed_macs": 240_000, "bytes": 9_664,
                            "median_ns": next(rounds)},
                           {"name": "fc1", "macs": 48_000, "needed_macs": 32_000, "bytes": 128_000,
                            "median_ns": 3_200.0},
                           {"name": "fc3", "macs": 0, "needed_macs": 0, "bytes": 100, "median_ns": 100.0}]}
    probed, bursts = {}, []
    l2_rates, peaks = iter([6e10, 5e10, 4e10]), iter([70e9, 50e9, 60e9])  # each round's probes
    def read_bandwidth(sizes):
        probed.update(sizes)
        return {"L1": {"bytes": sizes["L1"], "bytes_per_s": 1e11, "runs": 9},
                "L2": {"bytes": sizes["L2"], "bytes_per_s": next(l2_rates), "runs": 9}}
    def read_burst(sizes, other):
        bursts.append((sizes, other))
        rate = [4e10, 3.2e10, 2e10][len(bursts) - 1]  # this round's median
        return {name: {"bytes": size, "bytes_per_s": rate, "best_bytes_per_s": 1.5 * rate, "runs": 7}
                for name, size in sizes.items()}
    probes = {"fma_peak": lambda: {"isa": "avx512", "lanes": 16, "macs_per_s": next(peaks)},
              "layer_split": layer_split, "read_bandwidth": read_bandwidth, "read_burst": read_burst}
    fake_probes(monkeypatch, probes)
    monkeypatch.setattr(c_layers, "cache_sizes", lambda: {"L1": 32 << 10, "L2": 512 << 10})
    result = c_layers.split("fused", 10, 3)
    # the probes ran beside every round: the row takes their medians, and keeps each round's
    assert result["peak"]["macs_per_s"] == 60e9 and result["peak"]["rounds"] == [70e9, 50e9, 60e9]
    assert result["bandwidth"]["L2"]["bytes_per_s"] == 5e10 and result["bandwidth"]["L2"]["rounds"] == [6e10, 5e10, 4e10]
    assert probed == {"L1": 16 << 10, "L2": 256 << 10}  # each level probed with a buffer half its size
    assert result["call_paths"] == {"ctypes": 210.0, "extension": 80.0}  # medians over rounds
    assert result["call_in_c"] and result["ctypes_call_median_ns"] == 10_210.0
    conv2, fc1, _ = result["stages"]
    assert conv2["rounds_ns"] == [1_000, 5_000, 7_000] and conv2["median_ns"] == 5_000  # over rounds
    assert conv2["floor_ns"] == pytest.approx(4_000) and conv2["share"] == pytest.approx(0.8)
    # the pass reads 137.8 kB an image, more than L1 holds: every stage's reads come from L2 (residence)
    assert conv2["level"] == "L2" and conv2["bound"] == "arithmetic" and conv2["stage_share"] == pytest.approx(0.8)
    # fc1: its 128 kB of rows live in L2: 2.56 µs of reads against 0.53 µs of needed multiply-adds
    assert fc1["level"] == "L2" and fc1["bound"] == "L2 reads"
    assert fc1["stage_floor_ns"] == pytest.approx(2_560) and fc1["stage_share"] == pytest.approx(0.8)
    assert result["floor_ns"] == pytest.approx(4_800) and result["share"] == pytest.approx(0.48)
    assert result["stages_floor_ns"] == pytest.approx(4_000 + 2_560 + 2) and result["stages_share"] == pytest.approx(0.6562)
    # the burst probe timed the stages their reads bound (fc1; fc3's 100 bytes are under BURST_MIN), each
    # at its own size, after twice L1's bytes of other reads; the median over rounds, the best the best
    assert bursts == [({"fc1": 128_000}, 64 << 10)] * 3 and result["burst_after_bytes"] == 64 << 10  # fc3: too few
    assert fc1["burst"] == {"bytes": 128_000, "runs": 21, "bytes_per_s": 3.2e10, "best_bytes_per_s": 6e10}
    assert "burst" not in conv2
    table = c_layers.lines(result)
    assert "| conv2 | 240,000 | 5.00 µs | 4.00 µs | 80% | 9.4 KiB (L2) | 4.00 µs (arithmetic) | 80% |" in table
    assert "| fc1 | 48,000 | 3.20 µs | 0.80 µs | 25% | 125.0 KiB (L2) | 2.56 µs (L2 reads) | 80% |" in table
    assert "| fc3 | 0 | 0.10 µs | 0.00 µs | – | 100 B (L2) | 0.00 µs (L2 reads) | 2% |" in table
    # at 32 GB/s fc1's reads take 4 µs: the stages' floors 4 + 4 + 0.003 µs, 80% of the 10 µs call
    assert c_layers.burst_floors(result)["stages_floor_ns"] == pytest.approx(8_002)
    assert ("fc1's 125.0 KiB: 32 GB/s (its best run 60 GB/s) (21 runs over the rounds). At those rates the "
            "stages' floors would sum to 8.00 µs, and the C call is 80% of it.") in table[-1]
    assert table[0].startswith("c/fused (avx512 path), batch 1, 3 rounds of 10 calls; peak 60.0 G multiply-adds/s")
    assert "reads 100.0 GB/s from L1 (a 16.0 KiB buffer), 50.0 GB/s from L2 (a 256.0 KiB buffer)" in table[0]
    assert any(line.startswith("| the C call (untimed) | 288,000 | 10.00 µs | 4.80 µs | 48% |") and
               "6.56 µs (the stages' sum) | 66% |" in line for line in table)


def test_the_clocks_own_cost_is_taken_out_of_every_interval_and_a_stage_left_with_none_is_an_error(monkeypatch):
    from harness.errors import HarnessError
    from harness.explain import c_layers

    median = {"input": 60.0}
    def layer_split(weights, variant, calls):
        return {"path": "avx512", "calls": calls, "call_median_ns": 4_020.0, "call_paths": {"ctypes": 300.0, "clock": 20.0},
                "stages": [{"name": "input", "macs": 0, "needed_macs": 0, "bytes": 3_136, "from_caller": True,
                            "median_ns": median["input"]}]}
    probes = {"fma_peak": lambda: {"isa": "avx512", "lanes": 16, "macs_per_s": 60e9}, "layer_split": layer_split,
              "read_bandwidth": lambda sizes: {level: {"bytes": n, "bytes_per_s": 1e11, "runs": 9} for level, n in sizes.items()},
              "read_burst": lambda sizes, other: {}}
    fake_probes(monkeypatch, probes)
    monkeypatch.setattr(c_layers, "cache_sizes", lambda: {"L1": 32 << 10, "L2": 512 << 10})
    row = c_layers.split("fused", 10, 2)
    assert row["clock_ns"] == 20.0 and row["call_median_ns"] == 4_000.0 and row["call_rounds_ns"] == [4_000.0] * 2
    assert row["stages"][0]["median_ns"] == 40.0 and row["stages"][0]["level"] == "L1"  # the caller's image
    median["input"] = 20.0  # no more than the clock itself: nothing left to have been the stage
    with pytest.raises(HarnessError, match="stage input took no time once the clock's own 20 ns"):
        c_layers.split("fused", 10, 2)


def test_a_stages_reads_come_from_the_cache_that_holds_the_whole_pass_but_the_callers_image_nearer():
    from harness.explain import c_layers

    caches = {"L1": 48 << 10, "L2": 1 << 20}
    assert c_layers.residence({"bytes": 22_000}, 20_000, caches) == "L1"  # a pass that fits L1
    assert c_layers.residence({"bytes": 22_000}, 165_000, caches) == "L2"  # fc1's stream took it out
    assert c_layers.residence({"bytes": 3_136, "from_caller": True}, 165_000, caches) == "L1"
    assert c_layers.residence({"bytes": 2 << 20}, 0, caches) == "L2"  # the second level for anything larger


def test_the_burst_floors_take_each_probed_stage_at_its_median_rate_and_the_others_as_they_are():
    from harness.explain import c_layers

    row = {"call_median_ns": 4_000.0, "stages": [
        {"name": "conv2", "stage_floor_ns": 1_800.0, "arithmetic_ns": 1_800.0, "bytes": 9_664},
        {"name": "fc1", "stage_floor_ns": 500.0, "arithmetic_ns": 240.0, "bytes": 130_000,
         "burst": {"bytes": 130_048, "bytes_per_s": 2e11, "best_bytes_per_s": 2.6e11, "runs": 1_000}},
        {"name": "fc3", "stage_floor_ns": 10.0, "arithmetic_ns": 10.0, "bytes": 2_000,
         "burst": {"bytes": 2_048, "bytes_per_s": 4e11, "best_bytes_per_s": 5e11, "runs": 1_000}}]}
    found = c_layers.burst_floors(row)
    assert found["stages"] == {"fc1": pytest.approx(650.0), "fc3": 10.0}  # fc3 still bound by its arithmetic
    assert found["stages_floor_ns"] == pytest.approx(2_460.0) and found["share"] == pytest.approx(0.615)
    assert c_layers.burst_floors({"call_median_ns": 1.0, "stages": row["stages"][:1]}) is None
    assert c_layers.burst_text({"call_median_ns": 1.0, "stages": row["stages"][:1]}) == ""


def test_the_burst_probe_times_one_read_of_each_size_after_other_reads():
    from lenet_c.explain import stages

    found = stages.read_burst({"fc1": 100_000, "fc2": 20_000}, 64 << 10, repeats=5)
    assert found["fc1"]["bytes"] == 98 << 10 and found["fc2"]["bytes"] == 20 << 10  # whole KiB
    assert all(0 < b["bytes_per_s"] <= b["best_bytes_per_s"] < 1e13 and b["runs"] == 5 for b in found.values())


def test_the_cache_sizes_are_sysfs_data_and_unified_caches_else_assumed(tmp_path):
    from harness.explain import c_layers

    for index, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                                 ("2", "Unified", "2048K"), ("3", "Unified", "105M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(text + "\n")
    assert c_layers.cache_sizes(tmp_path) == {"L1": 48 << 10, "L2": 2 << 20}
    assert c_layers.cache_sizes(tmp_path / "absent") == c_layers.ASSUMED


def test_the_read_probe_measures_each_buffer_it_is_given():
    from lenet_c.explain import stages

    found = stages.read_bandwidth({"L1": 8 << 10, "L2": 100_000}, repeats=3)
    assert found["L1"]["bytes"] == 8 << 10 and found["L2"]["bytes"] == 98 << 10  # whole KiB
    assert all(0 < b["bytes_per_s"] < 1e13 and b["runs"] == 3 for b in found.values())


def test_a_cache_folder_that_cannot_be_written_falls_back_to_a_private_one(counted, monkeypatch, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("LENET_CACHE_DIR", str(blocked))
    level = CLeNet(DEFAULT_WEIGHTS, variant="layers")
    assert len(counted) == 1 and Path(level.info()["library"]).parent == build.private_folder()
    assert oct(build.private_folder().stat().st_mode & 0o777) == "0o700"


def test_the_fused_buffers_sit_in_one_block_at_the_same_distances_in_every_process():
    from lenet_c import layout

    level = CLeNet(DEFAULT_WEIGHTS, variant="fused")
    order = level.lib.lenet_params().decode().split()
    start = level.w["scratch"].ctypes.data
    names = ["scratch"] + [n for n in order if n != "scratch"]
    offsets = [level.w[n].ctypes.data - start for n in names]
    assert offsets == sorted(offsets) and all(o % layout.ALIGN == 0 for o in offsets)  # in order, aligned
    sizes = [-(-level.w[n].nbytes // layout.ALIGN) * layout.ALIGN for n in names]
    assert offsets == [sum(sizes[:i]) for i in range(len(names))]  # back to back: fixed by the sizes alone
    assert offsets[names.index("conv1.kernel")] % 4096 == 1792  # where layout's docstring says it measured fast
    assert list(level.table) == [level.w[n].ctypes.data for n in order]
    packed = layout.pack(weights.read(DEFAULT_WEIGHTS), "float32", level.lib.lenet_dense_block)
    assert all(np.array_equal(level.w[n], packed[n]) for n in packed)  # copies of the packed weights


def test_the_bills_worker_compiles_in_an_empty_cache_removed_after(counted, tmp_path):
    """The bill's start-up includes the compiler's run (issue 72): a fresh cache while the level is
    built; the library it loaded keeps running once its file is gone, and the real cache is kept."""
    from harness.frameworks import engine_setup

    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    assert len(counted) == 1  # the real cache (LENET_CACHE_DIR) holds the library now
    with engine_setup.fresh_cache("c") as fresh:
        assert build.cache_folder() == fresh and not any(fresh.iterdir())
        level = CLeNet(DEFAULT_WEIGHTS, variant="fused")
        assert len(counted) == 2  # compiled again, in the empty cache
    assert not fresh.exists() and build.cache_folder() == tmp_path / "c"
    assert level.predict(np.zeros((1, 28, 28, 1), np.float32)).shape == (1, 10)
    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    assert len(counted) == 2  # the real cache was left as it was


def test_the_bills_worker_of_the_c_level_compiles_and_reads_the_compiler(counted):
    """The worker's setup for the bill (its first cell, bill asked): the build compiles although the
    cache holds the library, and the reply carries the compiler's files for the runner's record."""
    from harness.measure.inside.worker import Worker

    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    cell = {"implementation": "c", "variant": "fused", "device": "cpu", "dtype": "float32", "batch_size": 1,
            "id": "c/fused/cpu/b1/float32"}
    worker = Worker()
    reply = worker.setup(cell, str(DEFAULT_WEIGHTS), warmup=1, bill=True)
    assert len(counted) == 2 and reply["loaded"]["fresh_cache"] is True
    tools = reply["loaded"]["system_tools"]
    assert os.path.realpath(shutil.which(build.compiler().command[0])) in tools["files"]
    again = worker.setup({**cell, "variant": "layers", "id": "c/layers/cpu/b1/float32"}, str(DEFAULT_WEIGHTS),
                         warmup=1, bill=True)
    assert again["loaded"] is None  # not the worker's first cell: no bill, the real cache
    assert len(counted) == 3  # layers: compiled once into the real cache (not there before)
    worker.close()
    gc.unfreeze()  # the worker froze this test process's heap (freeze_heap)


def test_the_compilers_toolchain_is_what_the_compiler_says_it_runs():
    cc = build.compiler()
    found = build.toolchain()
    assert found["compiler"] == cc.version
    assert all(os.path.isabs(p) and size > 0 for p, size in found["files"].items())
    cc1 = toolchain.program(cc.command, "cc1")
    if cc1 is not None:  # gcc: its compiler proper, in its own folder, and what it loads
        assert os.path.realpath(cc1) in found["files"] and found["files"][os.path.realpath(cc1)] > 1 << 20
        assert any(os.path.basename(p).startswith("libc.so") for p in toolchain.shared_libraries(cc1))
    assert toolchain.program(cc.command, "lenet-no-such-program") is None  # a bare name not on PATH: not there


def test_the_call_reads_contiguous_images_where_they_are_and_checks_and_copies_the_rest(sample):
    """fused and portable go through call.c: images already C-contiguous in the dtype are read where
    they lie (no plan, no copy) into a new array per call; any other images are checked and copied
    into the plan's input first, with the same answers."""
    x, reference = sample
    level = CLeNet(DEFAULT_WEIGHTS, variant="portable")
    assert level.call == "extension" and level.info()["call"] == "extension"
    first, again = level.predict(x[:5]), level.predict(x[:5])
    assert level.plans == {} and first is not again and np.array_equal(first, again)  # no copy, new arrays
    assert first.flags.c_contiguous and first.flags.writeable and first.dtype == np.float32
    others = {"float64": x[:5].astype(np.float64), "strided": x[:10:2], "fortran": np.asfortranarray(x[:5]),
              "byteswapped": x[:5].astype(">f4"), "read-only": x[:5].copy()}
    others["read-only"].setflags(write=False)
    for name, images in others.items():
        probs = level.predict(images)
        assert np.abs(probs - reference[np.arange(10)[:10:2] if name == "strided" else slice(0, 5)]).max() <= 1e-5, name
    assert sorted(level.plans) == [5]  # the copies went through the plan of batch 5
    for bad in (np.zeros((2, 28, 28), np.float32), np.zeros((0, 28, 28, 1), np.float32)):
        with pytest.raises(ValueError, match=r"\(N, 28, 28, 1\)"):
            level.predict(bad)  # the call declines them; check_images says what is wrong
    assert CLeNet(DEFAULT_WEIGHTS, variant="layers").call == "ctypes: one call per layer"


def test_the_call_extension_is_built_once_and_without_pythons_headers_the_call_is_ctypes(monkeypatch, tmp_path):
    monkeypatch.setenv("LENET_CACHE_DIR", str(tmp_path))
    compiled = []
    real = build.run
    monkeypatch.setattr(build, "run", lambda argv, stdin=None: (compiled.append(argv) if "-o" in argv else None,
                                                                  real(argv, stdin))[1])
    CLeNet(DEFAULT_WEIGHTS, variant="fused")
    CLeNet(DEFAULT_WEIGHTS, variant="fused", dtype="float64")
    extensions = [argv for argv in compiled if output_of(argv).startswith(".call-")]
    assert len(extensions) == 1 and "-march=native" in extensions[0]  # one build serves every dtype
    empty = tmp_path / "no-headers"
    empty.mkdir()
    monkeypatch.setattr(build.sysconfig, "get_paths", lambda: {"include": str(empty)})
    level = CLeNet(DEFAULT_WEIGHTS, variant="fused")
    assert level.fast is None and level.call.startswith("ctypes: no Python.h in") and "python3-dev" in level.call
    x = np.zeros((3, 28, 28, 1), np.float32)
    assert np.allclose(level.predict(x), CLeNet(DEFAULT_WEIGHTS, variant="portable").predict(x), atol=1e-6)


def test_the_avx512_path_compiles_on_any_host_whose_compiler_targets_it(tmp_path):
    """The AVX-512 loops run only on such a CPU, but every host's compiler checks that they build."""
    argv = [*build.compiler().command, *build.FLAGS, "-march=skylake-avx512", "-x", "c", "-", "-o",
            str(tmp_path / "fused.so")]
    done = subprocess.run(argv, input=build.source("fused.c"), capture_output=True, text=True, check=False)
    if "skylake-avx512" in done.stderr:
        pytest.skip(f"{build.compiler().version} does not know -march=skylake-avx512")
    assert done.returncode == 0, done.stderr[-2000:]
    symbols = subprocess.run(["nm", "-D", str(tmp_path / "fused.so")], capture_output=True, text=True).stdout
    assert "lenet_fused" in symbols and "lenet_dense_block" in symbols


def test_dense_kernels_are_cut_into_the_blocks_the_library_streams():
    from lenet_c import layout

    kernel = np.arange(400 * 120, dtype=np.float32).reshape(400, 120)
    whole = layout.blocked(kernel, (400, 128), 128, "float32")
    assert whole.shape == (1, 400, 128) and np.array_equal(whole[0, :, :120], kernel) and not whole[0, :, 120:].any()
    cut = layout.blocked(kernel, (400, 128), 64, "float32")
    assert cut.shape == (2, 400, 64) and np.array_equal(np.concatenate([cut[0], cut[1]], axis=1), whole[0])
    assert cut.ctypes.data % layout.ALIGN == 0
    with pytest.raises(ValueError, match="a dense block of 48 outputs does not divide 128"):
        layout.blocked(kernel, (400, 128), 48, "float32")
    level = CLeNet(DEFAULT_WEIGHTS, variant="portable")
    for name, width in (("fc1", 128), ("fc2", 96), ("fc3", 16)):
        block = level.lib.lenet_dense_block(width)
        assert width % block == 0 and level.w[f"{name}.kernel"].shape[::2] == (width // block, block)


def test_the_dense_inputs_read_are_the_oracles_nonzero_activations(sample):
    """lenet_dense_inputs counts the inputs of fc1, fc2 and fc3 that are not zero (the rows the pass
    reads): the oracle's own activations, counted in float64."""
    import ctypes

    from lenet_numpy import model as oracle

    x = sample[0][:3]
    level = CLeNet(DEFAULT_WEIGHTS, variant="portable", dtype="float64")
    w = {name: (layer.kernel.astype(np.float64), layer.bias.astype(np.float64))
         for name, layer in weights.read(DEFAULT_WEIGHTS).items()}
    for image in x:
        level.predict(image[None].astype(np.float64))
        counts = np.zeros(3, np.intc)
        level.lib.lenet_dense_inputs(ctypes.c_void_p(level.table.ctypes.data), ctypes.c_void_p(counts.ctypes.data))
        a = oracle.max_pool_2x2(oracle.conv2d_relu(image[None].astype(np.float64), *w["conv1"], pad=2))
        p2 = oracle.max_pool_2x2(oracle.conv2d_relu(a, *w["conv2"], pad=0)).reshape(1, -1)
        h1 = np.maximum(oracle.dense(p2, *w["fc1"]), 0)
        h2 = np.maximum(oracle.dense(h1, *w["fc2"]), 0)
        assert list(counts) == [np.count_nonzero(p2), np.count_nonzero(h1), np.count_nonzero(h2)]
        assert 0 < counts[0] < 400
