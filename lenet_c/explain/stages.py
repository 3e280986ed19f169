"""Where the C level's time goes: each stage of the fused pass timed inside C, and this core's
multiply-add peak and read bandwidth measured (peak.c), so a stage's time can stand beside its
arithmetic at that peak and its bytes at that bandwidth.
Instrumentation, not the level: this folder is left out of its line count and source hash.

    fma_peak(repeats) -> dict               {isa, lanes, macs_per_s, runs}: the best of `repeats` probes
    read_bandwidth(sizes, repeats) -> dict  {level: {bytes, bytes_per_s, runs}}: reading a buffer of
                                            that many bytes over and over, the best of `repeats`
    read_burst(sizes, other, repeats) -> dict  {name: {bytes, bytes_per_s, best_bytes_per_s, runs}}:
                                            one read of that many bytes after `other` bytes of
                                            other reads, the median (and best) of `repeats`

Each probe is the best of many short runs (tens of µs each): a run that another process interrupts
is slower, never faster, and on a shared machine a short run is seldom interrupted where a long
one always is.
    layer_split(weights, variant, calls) -> dict   {stages: [{name, macs, needed_macs, bytes,
                                                   median_ns}], call_median_ns, call_in_c,
                                                   ctypes_call_median_ns, call_paths,
                                                   predict_median_ns, null_predict_median_ns}

MACS gives each stage's multiply-adds (the pools ride in the convolutions; the input stage copies
the image into its padded grid). What a stage must read (`bytes`): its weights and biases, the
image for the input stage; the dense layers skip the rows of their zero inputs (ReLU's), so theirs
are the rows of the nonzero inputs (counted in C after each pass, the mean over the calls) and
their `needed_macs` those rows' multiply-adds; `from_caller` marks the stage whose reads the caller
has just written (the input stage's image), where every other stage reads what the pass last read
an image before. The timed pass (lenet_fused_timed) is the same code
as the untimed one plus a clock read between stages (~20 ns each); call_median_ns is the C call: the
untimed pass between two clock reads in C (peak.c's lenet_peak_clocked; `call_in_c`), no Python in
the interval (ctypes_call_median_ns: the same pass timed from Python around its ctypes call).
predict_median_ns and null_predict_median_ns: the level's predict of one image and the null level's
(the harness's own call, zeros), each timed from Python as the harness's worker times a call
(harness.measure.inside.worker.time_calls), in the same loop as the C call: in one process, at one
moment, what the Python call adds to the pass beyond what the harness's own call costs.
call_paths: the median of an empty C function with the pass's signature (peak.c) called as predict
calls the pass, through ctypes (arguments built once) and through call.c's extension (checks the
images, makes the (1, 10) array): what the Python call itself costs each way; and "clock": that
function between lenet_peak_clocked's clock reads, what the clock adds to the C call's time.
"""

import ctypes
import time

import numpy as np

from harness import DEFAULT_WEIGHTS
from harness.data import mnist
from harness.errors import HarnessError, Unavailable
from harness.null_impl import NullLeNet
from lenet_c import build, layout
from lenet_c.model import CLeNet

MACS = {"input": 0, "conv1": 117_600, "conv2": 240_000, "fc1": 48_000, "fc2": 10_080, "fc3": 840}
# the float32 values each stage must read: the image; the convolutions' kernels and biases
# (150 + 6, 2,400 + 16); a dense layer's bias and one row of its (in, out) kernel per nonzero input
READS = {"input": 784, "conv1": 156, "conv2": 2_416}
DENSE = {"fc1": 120, "fc2": 84, "fc3": 10}  # outputs: a row's length
PROBE_ITERATIONS = 10_000  # x 12 vector FMAs: ~35 µs at AVX-512 on a 3.5 GHz core
PROBE_BYTES = 2 << 20  # read per bandwidth run: ~20 µs at 100 GB/s
REPEATS = 200


def fma_peak(repeats: int = REPEATS) -> dict:
    """This core's multiply-add rate at its widest vector FMA (peak.c), the best of `repeats` runs:
    a run that another process interrupted is slower, never faster."""
    lib = build.load("explain/peak.c", build.FLAGS)
    lib.lenet_peak_isa.restype = ctypes.c_char_p
    lib.lenet_peak_macs.restype = ctypes.c_double
    lib.lenet_peak_macs.argtypes = (ctypes.c_long,)
    best = max(lib.lenet_peak_macs(PROBE_ITERATIONS) for _ in range(repeats))
    return {"isa": lib.lenet_peak_isa().decode(), "lanes": lib.lenet_peak_lanes(), "macs_per_s": best,
            "runs": repeats}


def read_bandwidth(sizes: dict[str, int], repeats: int = REPEATS) -> dict:
    """Bytes per second this core reads from a buffer of `sizes[level]` bytes (rounded up to whole
    KiB), read over and over (peak.c), the best of `repeats` runs."""
    lib = build.load("explain/peak.c", build.FLAGS)
    lib.lenet_peak_read.restype = ctypes.c_double
    lib.lenet_peak_read.argtypes = (ctypes.c_void_p, ctypes.c_long, ctypes.c_long)
    found = {}
    for level, size in sizes.items():
        floats = -(-size // 1024) * 256  # whole KiB: a multiple of every probe's chains x lanes
        buf = layout.aligned((floats,), "float32")
        buf[:] = 1e-3
        passes = max(1, PROBE_BYTES // (4 * floats))
        rate = max(lib.lenet_peak_read(buf.ctypes.data, floats, passes) for _ in range(repeats))
        found[level] = {"bytes": 4 * floats, "bytes_per_s": rate, "runs": repeats}
    return found


def call_paths(level: CLeNet, plan, calls: int) -> dict[str, float]:
    """Median ns of an empty C function (peak.c's lenet_peak_empty) called the two ways predict can
    call the pass: ctypes with prebuilt arguments, and call.c's extension bound to it (where it builds)."""
    lib = build.load("explain/peak.c", build.FLAGS)
    empty = lib.lenet_peak_empty
    empty.restype = None
    args = plan.calls[0][1]
    clocked, empty_address = clock(), ctypes.cast(empty, ctypes.c_void_p)
    ways = {"ctypes": lambda: empty(*args)}
    try:
        address = ctypes.cast(empty, ctypes.c_void_p).value
        bound = build.extension("call.c").bind(address, level.table.ctypes.data, np.dtype(level.dtype).num)
        ways["extension"] = lambda: bound(plan.x)
    except Unavailable:
        pass
    found = {way: np.zeros(calls, np.int64) for way in [*ways, "clock"]}
    now = time.perf_counter_ns
    for i in range(calls):
        for way, fn in ways.items():
            t0 = now()
            fn()
            found[way][i] = now() - t0
        found["clock"][i] = clocked(empty_address, *args)
    return {way: float(np.median(ns)) for way, ns in found.items()}


def clock():
    """peak.c's lenet_peak_clocked: (fn, table, x, out, n) -> ns of fn's call, timed in C."""
    lib = build.load("explain/peak.c", build.FLAGS)
    clocked = lib.lenet_peak_clocked
    clocked.restype = ctypes.c_longlong
    return clocked


def read_burst(sizes: dict[str, int], other: int, repeats: int = REPEATS) -> dict:
    """Bytes per second of one read through a buffer of `sizes[name]` bytes (whole KiB), after a read
    through `other` bytes elsewhere (peak.c's lenet_peak_burst): how a stage reads its weights, once
    an image, between the pass's other reads. The median of `repeats` runs, and the best, each less
    the clock's own cost (the median of as many empty intervals: peak.c's lenet_peak_clocked)."""
    lib = build.load("explain/peak.c", build.FLAGS)
    lib.lenet_peak_burst.restype = ctypes.c_double
    lib.lenet_peak_burst.argtypes = (ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_long)
    clocked, empty = clock(), ctypes.cast(lib.lenet_peak_empty, ctypes.c_void_p)
    nothing = (None, None, None, ctypes.c_int(0))
    elsewhere = layout.aligned((-(-other // 1024) * 256,), "float32")
    elsewhere[:] = 1e-3
    found = {}
    for name, size in sizes.items():
        floats = -(-size // 1024) * 256  # whole KiB, as read_bandwidth's
        buf = layout.aligned((floats,), "float32")
        buf[:] = 1e-3
        runs = [lib.lenet_peak_burst(buf.ctypes.data, floats, elsewhere.ctypes.data, elsewhere.size)
                for _ in range(repeats)]
        clock_ns = float(np.median([clocked(empty, *nothing) for _ in range(repeats)]))
        reads = {"median": float(np.median(runs)) - clock_ns, "best": min(runs) - clock_ns}
        if min(runs) < 0 or reads["best"] <= 0:  # a lost sum, or a read quicker than the clock alone
            raise HarnessError(f"read_burst: one read of {4 * floats} bytes took {min(runs):.0f} ns, "
                               f"the clock alone {clock_ns:.0f} ns: nothing left to be the read")
        found[name] = {"bytes": 4 * floats, "bytes_per_s": 4 * floats / reads["median"] * 1e9,
                       "best_bytes_per_s": 4 * floats / reads["best"] * 1e9, "runs": repeats,
                       "clock_ns": clock_ns}
    return found


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
    clocked, fused = clock(), ctypes.cast(untimed, ctypes.c_void_p)
    per_pass, per_predict, per_null = (np.zeros(calls, np.int64) for _ in range(3))
    counts, nonzero = np.zeros(len(DENSE), np.intc), np.zeros(len(DENSE))
    null = NullLeNet(weights)  # the harness's own call: returns zeros
    for i in range(calls):
        plan.x[...] = images[i]
        ns[:] = 0
        timed(*args)
        per_stage[i] = ns
        level.lib.lenet_dense_inputs(args[0], ctypes.c_void_p(counts.ctypes.data))
        nonzero += counts
        t0 = time.perf_counter_ns()
        untimed(*untimed_args)
        per_call[i] = time.perf_counter_ns() - t0
        per_pass[i] = clocked(fused, *untimed_args)
        batch = images[i:i + 1]  # (1, 28, 28, 1), as the harness's worker slices them (time_calls)
        t0 = time.perf_counter_ns()
        level.predict(batch)
        per_predict[i] = time.perf_counter_ns() - t0
        t0 = time.perf_counter_ns()
        null.predict(batch)
        per_null[i] = time.perf_counter_ns() - t0
    rows = {name: float(n) for name, n in zip(DENSE, nonzero / calls, strict=True)}  # mean rows read
    return {"path": level.path, "calls": calls, "call_in_c": True,
            "call_median_ns": float(np.median(per_pass)),  # the C call: timed inside C
            "ctypes_call_median_ns": float(np.median(per_call)), "call_paths": call_paths(level, plan, calls),
            "predict_median_ns": float(np.median(per_predict)),
            "null_predict_median_ns": float(np.median(per_null)),
            "stages": [{"name": name, "macs": MACS[name],
                        "needed_macs": rows[name] * DENSE[name] if name in DENSE else MACS[name],
                        "bytes": 4 * ((rows[name] + 1) * DENSE[name] if name in DENSE else READS[name]),
                        "from_caller": name == "input",  # the image, written by the caller just before
                        "median_ns": float(np.median(per_stage[:, j]))}
                       for j, name in enumerate(stages)]}
