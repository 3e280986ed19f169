"""gpu-floor, the hardware's probes: they compile for sm_90 (NVRTC, no GPU), their row is read by the
report, each GPU target's floor is computed from the probes, a broken probe is an error (never
clipped), and on a GPU the probes measure what the hardware can do."""

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from harness import ROOT
from harness.errors import Unavailable
from harness.explain import gpu_probes
from harness.report.claims import rundata
from harness.report.sections import gpu_floor_section
from harness.report.sections.gpu_floor_section import MACS


def probe(median_ns):
    return {"median_ns": median_ns, "p10_ns": median_ns * 0.9, "p90_ns": median_ns * 1.2, "n": 2000}


def floor_row(**over):
    probes = {"bus_round_trip": probe(2_000.0), "empty_launch": probe(6_000.0), "empty_graph": probe(5_000.0),
              "h2d_40B": {**probe(4_000.0), "bytes": 40, "device_ns": 1_500.0, "bytes_per_s": 40 / 1.5e-6},
              "h2d_1.6MB": {**probe(60_000.0), "bytes": 1_605_632, "device_ns": 50_000.0,
                            "bytes_per_s": 1_605_632 / 50e-6},
              "fma_one_sm": {"blocks": 1, "multiply_adds": 33_554_432, "ns": 134_217.7, "per_s": 250e9},
              "fma_all": {"blocks": 264, "multiply_adds": 8_858_370_048, "ns": 268_435.5, "per_s": 33e12},
              "cluster_barrier": {**probe(200.0), "iters": 10_000}}
    probes.update(over)
    return {"kind": "gpu_floor", "device": "gpu", "status": "ok", "gpu": "NVIDIA H100", "sms": 132,
            "calls": 2000, "probes": probes, "failed_probes": {}}


def test_each_target_s_floor_is_computed_from_the_probes():
    f = gpu_floor_section.floors(floor_row())
    assert f["call"].value == pytest.approx(2_000 + MACS / 33e12 * 1e9)
    assert f["kernel"].value == pytest.approx(MACS / (8 * 250e9) * 1e9 + 5 * 200)
    assert f["resident"].value == f["kernel"].value
    assert f["batch_host"].value == pytest.approx(1_605_632 / 50e-6 / 3136) and f["batch_host"].rate
    assert f["batch_device"].value == pytest.approx(33e12 / MACS)
    assert f["library"].value == pytest.approx(5_000 + MACS / 33e12 * 1e9)
    # a probe that did not run leaves out the floors that need it, nothing else
    row = floor_row()
    del row["probes"]["cluster_barrier"], row["probes"]["bus_round_trip"]
    f = gpu_floor_section.floors(row)
    assert "call" not in f and f["kernel"].value == pytest.approx(MACS / (8 * 250e9) * 1e9)


@pytest.mark.parametrize("bad", [float("nan"), -1.0, 0.0, float("inf")])
def test_a_probe_outside_what_is_possible_is_an_error_never_clipped(bad):
    with pytest.raises(ValueError, match="bus_round_trip must be a finite positive number"):
        gpu_floor_section.floors(floor_row(bus_round_trip=probe(bad)))
    with pytest.raises(ValueError, match="probe samples: expected finite positive nanoseconds"):
        gpu_probes.quantiles(np.array([1.0, bad]))


def test_the_row_written_by_the_command_is_read_back_and_judged(tmp_path):
    """The row goes through the command's own writer into a run folder; the report's loader finds it,
    the DETAILS section prints the probes, the floors and every target against its floor."""
    gpu_probes.write([floor_row()], tmp_path)
    runs = rundata.latest_runs(rundata.load_runs(tmp_path))
    machine = next(r["machine"] for r in runs if r["study"] == "gpu_floor")
    assert gpu_floor_section.floor_row(runs, machine)["probes"]["bus_round_trip"]["median_ns"] == 2_000.0
    frame = pd.DataFrame.from_records([{
        "study": "api_levels", "device": "gpu", "machine": machine, "status": "ok", "batch_size": 1,
        "dtype": "float32", "label": label, "implementation": label.split("/")[0], "median_ms": ms,
        "threads": math.nan} for label, ms in (("cuda/persistent", 0.0190), ("cudnn/graph", 0.0561))])
    text = "\n".join(gpu_floor_section.section(frame, runs))
    assert "| bus_round_trip | 2 µs | 1.8 µs – 2.4 µs | - |" in text
    assert "| fma_all | 268 µs | best of 5 | 33,000 G multiply-adds/s (264 blocks of 1024 threads) |" in text
    floor = 2_000 + MACS / 33e12 * 1e9
    assert f"| cuda/persistent | 19 µs | {19_000 / floor:.3g}x |" in text
    assert "| fastest cuda call, batch 1, end to end | 8 µs | 19 µs | api_levels, cuda/persistent | " \
           f"missed by 11 µs (2.4x the goal) | 2.01 µs | {19_000 / floor:.2g}x |" in text
    assert "| resident compute per image | 2.5 µs | - | kernel-stages, block 0 after the weights' loads | " \
           "not measured |" in text
    lines = gpu_floor_section.target_lines(frame, runs, machine)
    assert lines[-1].startswith("Target: best cuDNN call, batch 1 ≤ 30 µs: 56.1 µs (api_levels, cudnn/graph), "
                                "missed by 26.1 µs (1.9x the goal); its floor 5.01 µs")


def test_the_probes_compile_for_sm_90_and_without_clusters_for_sm_80():
    from harness.machine import nvrtc

    try:
        lib = nvrtc.load()
    except Unavailable as exc:
        pytest.skip(str(exc))
    source = gpu_probes.SOURCE.read_text()
    for arch, kernels in (("sm_90", set(gpu_probes.KERNELS)), ("sm_80", set(gpu_probes.KERNELS) - {"probe_cluster"})):
        found = lib.compile(source, "gpu_probes.cu", arch, (*gpu_probes.OPTIONS, "--ptxas-options=-v")).resources()
        assert set(found) == kernels, (arch, found)
        assert all(r["spill_stores"] == 0 for r in found.values())


def test_gpu_floor_without_a_gpu_exits_3_with_the_reason():
    from harness.machine import gpu

    if gpu.absent_reason() is None:
        pytest.skip("a GPU is present: the command would run")
    done = subprocess.run([sys.executable, "-m", "harness", "gpu-floor", "--calls", "5"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "gpu-floor needs a GPU" in done.stderr, done.stderr


@pytest.mark.gpu
def test_gpu_probes_measure_what_a_gpu_can_do():
    from harness.machine import gpu

    if gpu.absent_reason() is not None:
        pytest.skip(f"needs an NVIDIA GPU: {gpu.absent_reason()}")
    row = gpu_probes.measure(200)
    assert row["failed_probes"] == {}, row["failed_probes"]
    p = row["probes"]
    assert 100 < p["bus_round_trip"]["median_ns"] < 100_000  # a bus crossing: more than 0.1 µs, under 100 µs
    assert p["fma_all"]["per_s"] > 10 * p["fma_one_sm"]["per_s"]
    assert p["h2d_1.6MB"]["bytes_per_s"] > p["h2d_40B"]["bytes_per_s"]
    gpu_floor_section.floors(row)  # every probe finite and positive
