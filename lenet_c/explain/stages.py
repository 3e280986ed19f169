"""Where the C level's time goes: each stage of the fused pass timed inside C, and this core's
multiply-add peak measured (peak.c), so a stage's time can stand beside its arithmetic at that peak.
Instrumentation, not the level: this folder is left out of its line count and source hash.

    fma_peak(repeats) -> dict               {isa, lanes, macs_per_s}: the best of `repeats` probes
    layer_split(weights, variant, calls) -> dict   {stages: [{name, macs, median_ns}], call_median_ns}

MACS gives each stage's multiply-adds (the pools ride in the convolutions; the input stage copies
the image into its padded grid). The timed pass (lenet_fused_timed) is the same code as the
untimed one plus a clock read between stages (~20 ns each); call_median_ns is the untimed call,
the raw ctypes call (~0.2 µs) included.
"""

import ctypes
import time

import numpy as np

from harness import DEFAULT_WEIGHTS
from harness.data import mnist
from lenet_c import build
from lenet_c.model import CLeNet

MACS = {"input": 0, "conv1": 117_600, "conv2": 240_000, "fc1": 48_000, "fc2": 10_080, "fc3": 840}
PROBE_ITERATIONS = 2_000_000  # x 12 vector FMAs: ~7 ms at AVX-512 on a 3.5 GHz core


def fma_peak(repeats: int = 5) -> dict:
    """This core's multiply-add rate at its widest vector FMA (peak.c), the best of `repeats` runs:
    a run that another process interrupted is slower, never faster."""
    lib = build.load("explain/peak.c", build.FLAGS)
    lib.lenet_peak_isa.restype = ctypes.c_char_p
    lib.lenet_peak_macs.restype = ctypes.c_double
    lib.lenet_peak_macs.argtypes = (ctypes.c_long,)
    best = max(lib.lenet_peak_macs(PROBE_ITERATIONS) for _ in range(repeats))
    return {"isa": lib.lenet_peak_isa().decode(), "lanes": lib.lenet_peak_lanes(), "macs_per_s": best}


def layer_split(weights=DEFAULT_WEIGHTS, variant: str = "fused", calls: int = 2000) -> dict:
    """Median nanoseconds per stage of one image's pass (batch 1, float32, the first `calls` test
    images in turn), the untimed C call's median beside them, and the path that ran."""
    if variant not in ("fused", "portable"):
        raise ValueError(f"layer_split: the timed pass is fused.c's: fused or portable, not {variant!r}")
    level = CLeNet(weights, variant=variant)
    level.lib.lenet_stages.restype = ctypes.c_char_p
    stages = level.lib.lenet_stages().decode().split()
    images = mnist.to_input(mnist.load("test")[0][:calls])
    plan = level.plan(1)
    timed = level.lib.lenet_fused_timed
    timed.restype = None
    ns = np.zeros(len(stages), np.int64)
    args = (*plan.calls[0][1][:3], ctypes.c_int(1), ctypes.c_void_p(ns.ctypes.data))
    per_stage, per_call = np.zeros((calls, len(stages)), np.int64), np.zeros(calls, np.int64)
    untimed, untimed_args = plan.calls[0]
    for i in range(calls):
        plan.x[...] = images[i]
        ns[:] = 0
        timed(*args)
        per_stage[i] = ns
        t0 = time.perf_counter_ns()
        untimed(*untimed_args)
        per_call[i] = time.perf_counter_ns() - t0
    return {"path": level.path, "calls": calls, "call_median_ns": float(np.median(per_call)),  # ctypes' too
            "stages": [{"name": name, "macs": MACS[name], "median_ns": float(np.median(per_stage[:, j]))}
                       for j, name in enumerate(stages)]}
