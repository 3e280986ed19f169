"""lenet_cluster's stages on the GPU, from inside the kernel (`python -m harness kernel-stages`).

The `kernels` trace times the kernel whole. Here cluster.cu is compiled once more with
LENET_STAGE_CLOCKS: thread 0 of each block of image 0's cluster stamps its SM's cycle counter
(clock64) as it leaves each stage, into lenet_stage_clock (8 blocks x 8 stamps). The level's own
call (the cluster variant: the copies and the kernel in a CUDA graph) runs with that kernel, one
image a call; after each call the stamps are read back. Cycle counters of different SMs are not
one clock, so every difference is taken within one block. Block 0 waits at each cluster barrier
for the slowest block, so its stages are the kernel's critical path; the kernels trace's kernel
time less block 0's entry-to-end is the cluster's launch and end, which no stamp sees.

measure_resident: the same stamps in lenet_resident (common.cuh's cluster stages), which spans
calls, and the whole resident call attributed: Python's clock around predict, resident_host.c's
stamps inside it (pairs written, answer seen, answer copied) and the kernel's compute.
"""

from typing import Any

import numpy as np

from lenet_cuda import kernels

STAMPS = 8  # LENET_STAMPS in common.cuh
# (stamp that ends it, what the block did since the stamp before)
STAGES = ((1, "stage 0: weight loads issued, conv weights stored"),
          (2, "wait until every block of the cluster runs"),
          (3, "the image into every block (0|1 barrier)"),
          (4, "conv1 + pool, p1 into every block (1|2)"),
          (5, "conv2 + pool, p2 into every block (2|3)"),
          (6, "fc1, h1 into block 0 (3|4)"),
          (7, "block 0: fc2, fc3, softmax, the answer stored"))
DEFINE = "#define LENET_STAGE_CLOCKS 1\n"
CLOCK_RATE_ATTRIBUTE = 13  # cudaDevAttrClockRate


def instrumented_source() -> str:
    return DEFINE + kernels.source("cluster")


def summarize(samples: list[np.ndarray], clock_khz: float | None) -> dict[str, Any]:
    """samples: one (CLUSTER, STAMPS) int64 array of stamps per call. Per stage: block 0's cycles
    (the critical path) and the slowest block's (medians over calls); block 0's entry to end. In
    ns at the SM's highest clock where it is known (the GPU may run slower at batch 1)."""
    stamps = np.stack(samples).astype(np.int64)  # (calls, blocks, stamps)
    if stamps.ndim != 3 or stamps.shape[1:] != (kernels.CLUSTER, STAMPS):
        raise ValueError(f"stamps: expected (calls, {kernels.CLUSTER}, {STAMPS}), found {stamps.shape}")
    steps = np.diff(stamps, axis=2)  # (calls, blocks, STAMPS - 1): stage k ends at stamp k

    def ns(cycles: float) -> float | None:
        return cycles * 1e6 / clock_khz if clock_khz else None

    stages = []
    for end, name in STAGES:
        block0 = float(np.median(steps[:, 0, end - 1]))
        # blocks 1..7 stop stamping after the 3|4 barrier (stamp 7 is block 0's alone)
        blocks = steps[:, :, end - 1] if end < STAMPS - 1 else steps[:, :1, end - 1]
        slowest = float(np.median(blocks.max(axis=1)))
        stages.append({"stamp": end, "name": name, "block0_cycles": block0, "slowest_block_cycles": slowest,
                       "block0_ns": ns(block0)})
    total = float(np.median(stamps[:, 0, STAMPS - 1] - stamps[:, 0, 0]))
    return {"calls": len(samples), "clock_khz": clock_khz, "stages": stages,
            "block0_cycles": total, "block0_ns": ns(total)}


def measure(weights_path: str, calls: int, dtype: str = "float32") -> dict[str, Any]:
    """The level's cluster call with the stamping kernel, `calls` single-image calls (MNIST test
    images in turn); returns summarize's dict and the GPU's name. Needs a GPU of sm_90 or later."""
    from harness.data import mnist
    from lenet_cuda.model import CudaLeNet

    impl = CudaLeNet(weights_path, variant="cluster", dtype=dtype)
    try:
        cp = impl.cp
        expr = kernels.name_expressions("cluster", dtype)
        module = cp.RawModule(code=instrumented_source(), options=kernels.OPTIONS, name_expressions=expr)
        impl.fn = {"lenet_cluster": module.get_function(expr[0])}  # before the first plan is built
        pointer = module.get_global("lenet_stage_clock")
        clock = cp.ndarray((kernels.CLUSTER, STAMPS), np.int64, memptr=pointer)
        images = mnist.to_input(mnist.load("test")[0][:100]).astype(dtype)
        for i in range(10):  # the graph captured, the module and caches warm
            impl.predict(images[i:i + 1])
        samples = []
        for i in range(calls):
            impl.predict(images[i % len(images):i % len(images) + 1])
            samples.append(clock.get())  # after the call's synchronization: its stamps are final
        device = cp.cuda.Device().id
        props = cp.cuda.runtime.getDeviceProperties(device)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        khz: float | None
        try:  # the SM's highest clock in kHz (cudaDevAttrClockRate; gone from the properties in CUDA 13)
            khz = float(cp.cuda.runtime.deviceGetAttribute(CLOCK_RATE_ATTRIBUTE, device))
        except Exception:
            khz = float(props.get("clockRate", 0)) or None
        return {**summarize(samples, khz), "gpu": name, "dtype": dtype}
    finally:
        impl.close()


# --- lenet_resident (resident.cu): the same stamps, read while the kernel stays resident ----------
# per resident variant: (stamp that ends it, what block 0 did since the stamp before)
RESIDENT_STAGES = {
    "resident": ((4, "conv1 + pool, p1 into every block (1|2)"),
                 (5, "conv2 + pool, p2 into every block (2|3)"),
                 (6, "fc1, h1 into block 0 (3|4)"),
                 (7, "block 0: fc2, fc3, softmax (before the answer's stores)")),
    "resident_rows": ((4, "block 0's rows: conv1, conv2, fc1's partial sums"),
                      (5, "the other blocks' partial sums waited for (mbarrier)"),
                      (6, "h1 from the 5 partial sums"),
                      (7, "fc2, fc3, softmax (before the answer's stores)"))}


# A resident call, every microsecond: Python's time around predict, the C side's stamps inside it
# (resident_host.c), the kernel's compute from its own stamps (3..7); (name, from, to) over the
# per-call clock (t0 predict called, s0..s3 the C side's stamps, t1 predict returned)
CALL_PARTS = (("Python: predict's checks, the images into staging, the call into C", "t0", "s0"),
              ("C: the image's pairs written into mapped memory", "s0", "s1"),
              ("C: the answer waited for (the kernel's compute, the bus both ways, polls)", "s1", "s2"),
              ("C: the answer's pairs read and copied out", "s2", "s3"),
              ("Python: back from C, the answer copied into the returned array", "s3", "t1"))


def attribute_call(clocks: list[dict[str, int]], compute_ns: list[float] | None) -> dict[str, Any]:
    """clocks: per call {t0, s0, s1, s2, s3, t1} (ns, one clock: CLOCK_MONOTONIC); compute_ns: the
    kernel's compute of each call (stamps 3..7 at the SM's clock) or None. Per part the median over
    calls; the wait less the compute (the image's and the answer's way across the bus and the polls
    that see them) where the compute is known; the median call; what the medians leave (the median of
    sums is not the sum of medians) said, not hidden."""
    order = ("t0", "s0", "s1", "s2", "s3", "t1")
    for c in clocks:
        if any(c[a] > c[b] for a, b in zip(order, order[1:], strict=False)) or c["t0"] <= 0:
            raise ValueError(f"a call's clocks are out of order: {c}")
    parts: list[dict[str, Any]] = [{"name": name, "ns": float(np.median([c[b] - c[a] for c in clocks]))}
             for name, a, b in CALL_PARTS]
    total = float(np.median([c["t1"] - c["t0"] for c in clocks]))
    out: dict[str, Any] = {"calls": len(clocks), "call_ns": total, "parts": parts,
                           "unattributed_ns": total - sum(p["ns"] for p in parts)}
    if compute_ns is not None:
        out["compute_ns"] = float(np.median(compute_ns))
        out["wait_less_compute_ns"] = float(np.median([c["s2"] - c["s1"] - k
                                                       for c, k in zip(clocks, compute_ns, strict=True)]))
    return out


def summarize_resident(samples: list[np.ndarray], clock_khz: float | None,
                       variant: str = "resident") -> dict[str, Any]:
    """samples: (CLUSTER, STAMPS) stamps of lenet_resident after each call. Stamps 0-2 are a launch's
    (the kernel spans calls) and 2|3 holds the wait for the host, so a call's compute is block 0's
    stamp 3 (the image in every block) to 7 (the answer computed): stages 4..7, medians over calls."""
    stamps = np.stack(samples).astype(np.int64)
    if stamps.ndim != 3 or stamps.shape[1:] != (kernels.CLUSTER, STAMPS):
        raise ValueError(f"stamps: expected (calls, {kernels.CLUSTER}, {STAMPS}), found {stamps.shape}")
    steps = np.diff(stamps[:, 0, :], axis=1)  # (calls, STAMPS - 1), block 0

    def ns(cycles: float) -> float | None:
        return cycles * 1e6 / clock_khz if clock_khz else None

    stages = [{"stamp": end, "name": name, "block0_cycles": float(np.median(steps[:, end - 1])),
               "block0_ns": ns(float(np.median(steps[:, end - 1])))}
              for end, name in RESIDENT_STAGES[variant]]
    compute = float(np.median(stamps[:, 0, 7] - stamps[:, 0, 3]))
    return {"calls": len(samples), "clock_khz": clock_khz, "stages": stages,
            "compute_cycles": compute, "compute_ns": ns(compute)}


def measure_resident(weights_path: str, calls: int, dtype: str = "float32",
                     variant: str = "resident") -> dict[str, Any]:
    """The resident call with the stamping lenet_resident, `calls` single-image calls back to back:
    the kernel's stages (summarize_resident) and the whole call attributed (attribute_call) from
    Python's clock around predict and the C side's stamps. Calls that found the kernel ended (a
    launch in the call) are counted, not attributed. The kernel's stamps are read after each call
    on CuPy's default stream (the kernel keeps running on the level's own, non-blocking one). Needs
    a GPU of sm_90 or later."""
    import ctypes
    import time

    from harness.data import mnist
    from lenet_cuda.model import CudaLeNet

    impl = CudaLeNet(weights_path, variant=variant, dtype=dtype)
    try:
        cp, res = impl.cp, impl.resident
        assert res is not None
        expr = kernels.name_expressions(variant, dtype)
        module = cp.RawModule(code=DEFINE + kernels.source(variant), options=kernels.OPTIONS,
                              name_expressions=expr)
        impl.fn = {kernels.KERNELS[variant][0]: module.get_function(expr[0])}  # before the first plan
        clock = cp.ndarray((kernels.CLUSTER, STAMPS), np.int64, memptr=module.get_global("lenet_stage_clock"))
        images = mnist.to_input(mnist.load("test")[0][:100]).astype(dtype)
        for i in range(10):
            impl.predict(images[i:i + 1])
        res.stamps = (ctypes.c_int64 * 4)()
        samples, clocks, cycles, launched = [], [], [], 0
        for i in range(calls):
            ctypes.memset(res.stamps, 0, ctypes.sizeof(res.stamps))
            image = images[i % len(images):i % len(images) + 1]
            t0 = time.perf_counter_ns()
            impl.predict(image)
            t1 = time.perf_counter_ns()
            samples.append(clock.get())
            if res.stamps[0] == 0:  # the launched path: no resident_call, no C stamps
                launched += 1
                continue
            clocks.append({"t0": t0, **{f"s{k}": int(res.stamps[k]) for k in range(4)}, "t1": t1})
            cycles.append(float(samples[-1][0, 7] - samples[-1][0, 3]))  # block 0's compute, this call
        device = cp.cuda.Device().id
        try:
            khz = float(cp.cuda.runtime.deviceGetAttribute(CLOCK_RATE_ATTRIBUTE, device))
        except Exception:
            khz = None
        compute = [c * 1e6 / khz for c in cycles] if khz else None
        return {**summarize_resident(samples, khz, variant), "dtype": dtype, "launched_calls": launched,
                "fallback_calls": res.fallback_calls,
                "call": attribute_call(clocks, compute) if clocks else None}
    finally:
        impl.close()
