"""`python -m harness gpu-floor`: the GPU hardware's probes, measured as the CPU's arithmetic peak is
(one row, of kind "gpu_floor": the name its results folder and the report read).

Before any LeNet runs, what the hardware gives a call (gpu_probes.cu):
- bus_round_trip: the host stores a number in mapped page-locked memory, a resident kernel's thread
  polling it stores it back in another word, the host sees it (from Python, as a call's own loop)
- h2d / d2h at 40 B and 1.6 MB (512 float32 images): pinned memory, a copy and the wait, timed on the
  host per copy, and its device time by events around 20 copies (the rate)
- fma_one_sm / fma_all: FP32 multiply-adds per second of one SM (one block) and of every SM
- empty_launch, empty_graph: an empty kernel's launch and wait, and an empty kernel's CUDA graph's
- cluster_barrier: one barrier.cluster arrive + wait on a cluster of 8 blocks (sm_90)
The report (harness/report/sections/gpu_floor_section.py) turns the row into each GPU target's floor.
"""

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.explain import plumbing

STUDY = "gpu_floor"
SOURCE = Path(__file__).with_name("gpu_probes.cu")
KERNELS = ("probe_echo", "probe_empty", "probe_fma", "probe_cluster")
OPTIONS = ("--std=c++17",)
IMAGE_BYTES = 28 * 28 * 4  # one float32 image
SIZES = {"40B": 40, "1.6MB": 512 * IMAGE_BYTES}  # an answer (10 float32) ... 512 images
QUIT = 0xFFFFFFFF  # PROBE_QUIT
ECHO_IDLE_NS = 1_000_000_000  # the echo kernel ends after 1 s without a number (a crashed host)
POLL_TIMEOUT_S = 2.0
FMA_CHAINS, FMA_ITERS, FMA_THREADS = 8, 4096, 1024
CLUSTER_ITERS = 10_000
HOST_ALLOC_MAPPED = 2
H2D, D2H = 1, 2


def quantiles(ns: np.ndarray) -> dict[str, float]:
    """median, p10, p90 and n of a sample of nanoseconds (every value finite and positive)."""
    ns = np.asarray(ns, dtype=np.float64)
    if ns.size == 0 or not np.all(np.isfinite(ns)) or np.any(ns <= 0):
        raise ValueError(f"probe samples: expected finite positive nanoseconds, found {ns[:5]} ...")
    p10, median, p90 = np.percentile(ns, [10, 50, 90])
    return {"median_ns": float(median), "p10_ns": float(p10), "p90_ns": float(p90), "n": int(ns.size)}


class Probes:
    """The compiled probes on the current device, one stream."""

    def __init__(self, cp: Any):
        self.cp = cp
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.module = cp.RawModule(code=SOURCE.read_text(), options=OPTIONS)
        self.fn = {name: self.module.get_function(name) for name in KERNELS
                   if name != "probe_cluster" or self.arch() >= 90}

    def arch(self) -> int:
        return int(self.cp.cuda.Device().compute_capability)

    def mapped(self, words: int) -> tuple[Any, np.ndarray]:
        memory = self.cp.cuda.PinnedMemory(4 * words, HOST_ALLOC_MAPPED)
        view = np.frombuffer(self.cp.cuda.PinnedMemoryPointer(memory, 0), np.uint32, words)
        view[:] = 0
        return memory, view

    def bus_round_trip(self, calls: int) -> dict[str, float]:
        """A resident thread echoes the host's number: host store -> kernel load -> kernel store ->
        host load, `calls` times (after 100 unrecorded), each timed by perf_counter_ns."""
        memory, words = self.mapped(2)  # [0] go (host -> kernel), [1] back (kernel -> host)
        go, back = words[0:1], words[1:2]
        with self.stream:
            address = words.ctypes.data
            self.fn["probe_echo"]((1,), (32,), (np.uint64(address), np.uint64(address + 4),
                                                np.uint64(ECHO_IDLE_NS)))
        samples = np.empty(calls, np.int64)
        clock = time.perf_counter_ns
        try:
            for i in range(-100, calls):
                want = i + 101
                t0 = clock()
                go[0] = want
                spins = 0
                while back[0] != want:
                    spins += 1
                    if spins % 4096 == 0 and clock() - t0 > POLL_TIMEOUT_S * 1e9:
                        raise RuntimeError(f"probe_echo did not answer {want} in {POLL_TIMEOUT_S:g} s")
                if i >= 0:
                    samples[i] = clock() - t0
        finally:
            go[0] = QUIT
            self.stream.synchronize()
            del memory
        return quantiles(samples)

    def copy(self, kind: int, nbytes: int, calls: int) -> dict[str, float]:
        """One pinned copy and its wait, timed on the host; the device's rate from events around 20."""
        cp, rt, s = self.cp, self.cp.cuda.runtime, self.stream
        host = cp.cuda.alloc_pinned_memory(nbytes)
        device = cp.cuda.alloc(nbytes)
        dst, src = (device.ptr, host.ptr) if kind == H2D else (host.ptr, device.ptr)
        samples = np.empty(calls, np.int64)
        for i in range(-10, calls):
            t0 = time.perf_counter_ns()
            rt.memcpyAsync(dst, src, nbytes, kind, s.ptr)
            s.synchronize()
            if i >= 0:
                samples[i] = time.perf_counter_ns() - t0
        start, end = cp.cuda.Event(), cp.cuda.Event()
        per_copy = []
        for _ in range(5):
            start.record(s)
            for _ in range(20):
                rt.memcpyAsync(dst, src, nbytes, kind, s.ptr)
            end.record(s)
            end.synchronize()
            per_copy.append(cp.cuda.get_elapsed_time(start, end) * 1e6 / 20)
        device_ns = float(np.median(per_copy))
        return {**quantiles(samples), "bytes": nbytes, "device_ns": device_ns,
                "bytes_per_s": nbytes / device_ns * 1e9}

    def launch(self, calls: int, graph: bool) -> dict[str, float]:
        """An empty kernel launched (or its one-node CUDA graph) and waited for, `calls` times."""
        s, kernel = self.stream, self.fn["probe_empty"]
        replay = None
        if graph:
            s.begin_capture()
            with s:
                kernel((1,), (32,), ())
            replay = s.end_capture()
        samples = np.empty(calls, np.int64)
        for i in range(-20, calls):
            t0 = time.perf_counter_ns()
            if replay is not None:
                replay.launch(s)
            else:
                with s:
                    kernel((1,), (32,), ())
            s.synchronize()
            if i >= 0:
                samples[i] = time.perf_counter_ns() - t0
        return quantiles(samples)

    def fma(self, blocks: int) -> dict[str, float]:
        """Multiply-adds per second of `blocks` blocks of FMA_THREADS (best of 5, events)."""
        cp, s = self.cp, self.stream
        out = cp.empty(blocks * FMA_THREADS, np.float32)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        with s:
            self.fn["probe_fma"]((blocks,), (FMA_THREADS,), (out, np.int32(64)))  # loaded, clocks up
            best = float("inf")
            for _ in range(5):
                start.record(s)
                self.fn["probe_fma"]((blocks,), (FMA_THREADS,), (out, np.int32(FMA_ITERS)))
                end.record(s)
                end.synchronize()
                best = min(best, cp.cuda.get_elapsed_time(start, end) * 1e6)
        macs = blocks * FMA_THREADS * FMA_ITERS * FMA_CHAINS
        return {"blocks": blocks, "multiply_adds": macs, "ns": best, "per_s": macs / best * 1e9}

    def cluster_barrier(self) -> dict[str, float]:
        """ns per cluster barrier (8 blocks of 256 threads), from block 0's globaltimer."""
        cp, s = self.cp, self.stream
        ns = cp.zeros(2, np.uint64)
        per = []
        with s:
            for _ in range(5):
                self.fn["probe_cluster"]((8,), (256,), (ns, np.int32(CLUSTER_ITERS)))
                s.synchronize()
                start, end = (int(v) for v in ns.get())
                per.append((end - start) / CLUSTER_ITERS)
        return {**quantiles(np.asarray(per)), "iters": CLUSTER_ITERS}


def gpu_name(cp: Any) -> tuple[str, int]:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return name, int(props["multiProcessorCount"])


def plan(probes: Probes, calls: int, sms: int) -> dict[str, Callable[[], dict[str, Any]]]:
    """Each probe by its row key, in the order they run."""
    todo: dict[str, Callable[[], dict[str, Any]]] = {"bus_round_trip": lambda: probes.bus_round_trip(calls)}
    for direction, kind in (("h2d", H2D), ("d2h", D2H)):
        for label, nbytes in SIZES.items():
            n = calls if nbytes < 4096 else max(calls // 10, 20)
            todo[f"{direction}_{label}"] = partial(probes.copy, kind, nbytes, n)
    todo["empty_launch"] = lambda: probes.launch(calls, graph=False)
    todo["empty_graph"] = lambda: probes.launch(calls, graph=True)
    todo["fma_one_sm"] = lambda: probes.fma(1)
    todo["fma_all"] = lambda: probes.fma(2 * sms)  # two blocks of 1024 threads fill an SM's 2048
    if "probe_cluster" in probes.fn:
        todo["cluster_barrier"] = probes.cluster_barrier
    return todo


def measure(calls: int) -> dict[str, Any]:
    """Every probe in turn (`calls` round trips, launches and small copies): one row. A probe that
    fails is named in `failed_probes` with why; the others still run."""
    from harness.frameworks.cupy_setup import import_cupy

    cp = import_cupy()
    name, sms = gpu_name(cp)
    try:
        probes = Probes(cp)
    except Exception as exc:  # no NVRTC, a driver too old for the PTX
        raise HarnessError(f"the probes do not compile or load here ({type(exc).__name__}: {exc})") from None
    found: dict[str, Any] = {}
    broken: dict[str, str] = {}
    for key, probe in plan(probes, calls, sms).items():
        try:
            found[key] = probe()
        except Exception as exc:  # one probe's failure is a row's field, not the end of the others
            broken[key] = f"{type(exc).__name__}: {exc}"
    return {"kind": STUDY, "device": "gpu", "status": "ok" if found else "failed", "gpu": name, "sms": sms,
            "calls": calls, "probes": found, "failed_probes": broken}


def failed(reason: str) -> dict[str, Any]:
    return {"kind": STUDY, "device": "gpu", "status": "failed", "reason": reason}


def lines(row: dict[str, Any]) -> list[str]:
    """The probes as printed on the terminal."""
    p = row["probes"]
    out = [f"the GPU's probes on {row['gpu']} ({row['sms']} SMs; {row['calls']} calls a probe, medians)"]
    for key in (k for k in ("bus_round_trip", "empty_launch", "empty_graph") if k in p):
        out.append(f"  {key:<16} {p[key]['median_ns'] / 1e3:8.2f} µs  (p10 {p[key]['p10_ns'] / 1e3:.2f}, "
                   f"p90 {p[key]['p90_ns'] / 1e3:.2f})")
    for key in (k for k in p if k.startswith(("h2d", "d2h"))):
        c = p[key]
        out.append(f"  {key:<16} {c['median_ns'] / 1e3:8.2f} µs a copy and its wait; device "
                   f"{c['device_ns'] / 1e3:.2f} µs, {c['bytes_per_s'] / 1e9:.2f} GB/s")
    for key in (k for k in ("fma_one_sm", "fma_all") if k in p):
        out.append(f"  {key:<16} {p[key]['per_s'] / 1e9:8.1f} G multiply-adds/s ({p[key]['blocks']} blocks)")
    if "cluster_barrier" in p:
        out.append(f"  {'cluster_barrier':<16} {p['cluster_barrier']['median_ns']:8.1f} ns")
    out += [f"  {key:<16} failed: {why}" for key, why in row.get("failed_probes", {}).items()]
    return out


def write(rows: list[dict[str, Any]], out: Path) -> Path:
    return plumbing.write(rows, out, STUDY, "gpu")
