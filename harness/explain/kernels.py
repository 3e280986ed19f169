"""`python -m harness kernels IMPL/VARIANT,... --device gpu`: where one call's GPU time goes.

Each target runs in a process of its own (its registry environment, one thread): warm-up
calls, then the host time per call (perf_counter, no profiler attached), then the same calls
under torch.profiler. Its CUPTI trace holds every kernel and copy of the process, whoever
launched it (cuDNN, cuBLAS, XLA, PyTorch), and every CUDA runtime/driver call on the host.
Per call, from that trace: each kernel and copy with its device time, the GPU's busy time
(the union of their intervals), and the host time spent inside CUDA calls. Busy time far
below host time means the GPU waits on the host: the call is bound by launches, not math.
PyTorch must be importable on the GPU machine (it brings CUPTI); the row says so if not.
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import DEFAULT_WEIGHTS, registry
from harness.errors import HarnessError, Unavailable
from harness.explain import plumbing

WARMUP = 30
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("cuda_runtime", "cuda_driver")
TOP = 6  # device operations kept per row, the longest first
MAX_BATCH = 10000  # images per call: the MNIST test set
Row = dict[str, Any]  # one kernels row, as results.jsonl holds it


def short_name(name: str, width: int = 60) -> str:
    """A kernel's name without its template arguments and signature: cuDNN's run to 500 chars."""
    name = name.removeprefix("void ").strip()
    if name.startswith("std::enable_if<"):  # cuBLAS: "std::enable_if<..., void>::type ns::kernel<...>(...)"
        depth = 0
        for i, ch in enumerate(name):
            depth += {"<": 1, ">": -1}.get(ch, 0)
            if ch == ">" and depth == 0:
                name = name[i + 1:].removeprefix("::type").strip()
                break
    for cut in ("<", "("):
        if cut in name[1:]:
            name = name[:name.index(cut, 1)]
    name = name.removeprefix("void ").strip()
    return name if len(name) <= width else name[:width - 1] + "…"


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: concurrent kernels count once."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def summarize_trace(events: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    """Per-call numbers from a Chrome trace's events (durations in µs)."""
    ops: dict[tuple[str, str], tuple[int, float]] = {}  # (category, name) -> (count, total µs)
    api: dict[str, tuple[int, float]] = {}  # CUDA call -> (count, total µs)
    intervals: list[tuple[float, float]] = []
    api_us, api_calls = 0.0, 0
    for ev in events:
        cat, dur = ev.get("cat"), ev.get("dur")
        if dur is None or ev.get("ph") != "X":
            continue
        if cat in DEVICE_CATEGORIES:
            key = (cat, short_name(ev.get("name", "?")))
            count, total = ops.get(key, (0, 0.0))
            ops[key] = (count + 1, total + dur)
            intervals.append((ev["ts"], ev["ts"] + dur))
        elif cat in HOST_CATEGORIES:
            api_us += dur
            api_calls += 1
            count, total = api.get(ev.get("name", "?"), (0, 0.0))
            api[ev.get("name", "?")] = (count + 1, total + dur)
    if not intervals:
        raise HarnessError("the profiler saw no kernel or copy on the GPU: did the calls run there?")
    listed: list[dict[str, Any]] = sorted(({"category": cat, "name": name, "per_call": count / calls,
                      "ns_per_call": 1e3 * total / calls} for (cat, name), (count, total) in ops.items()),
                    key=by_time)
    return {"gpu_busy_ns_per_call": 1e3 * busy_us(intervals) / calls,
            "device_ops_per_call": sum(op["per_call"] for op in listed),
            "device_ns_per_call": sum(op["ns_per_call"] for op in listed),
            "api_ns_per_call": 1e3 * api_us / calls, "api_calls_per_call": api_calls / calls,
            "ops": listed[:TOP], "ops_not_listed": max(0, len(listed) - TOP),
            # where the host's time inside CUDA goes, per API function (cudaLaunchKernel, ...)
            "api_ops": sorted(({"name": name, "per_call": n / calls, "ns_per_call": 1e3 * total / calls}
                               for name, (n, total) in api.items()), key=by_time)[:TOP]}


def by_time(op: dict[str, Any]) -> float:
    """The longest first: the sort key of an op's row."""
    return -op["ns_per_call"]


def run_child(name: str, variant: str, device: str, calls: int, weights: str | Path,
              timeout: float = 300, batch: int = 1) -> dict[str, Any]:
    """The child measures and writes the trace; the parent reads it (the trace can be MBs)."""
    with tempfile.TemporaryDirectory(prefix="lenet-kernels-") as tmp:
        trace = os.path.join(tmp, "trace.json")
        answer = plumbing.run_child("harness.explain.kernels", (name, variant, device, calls, weights, trace,
                                                                batch),
                                    name, variant, device, "kernels", timeout)
        with open(trace) as f:
            events = json.load(f).get("traceEvents", [])
    return {**answer, "events": events}


def profile(target: str, device: str = "gpu", calls: int = 200, weights: str | Path = DEFAULT_WEIGHTS,
            batch: int = 1) -> Row:
    if not 1 <= batch <= MAX_BATCH:
        raise HarnessError(f"--batch: expected 1 to {MAX_BATCH} images per call, found {batch}")
    name, variant = plumbing.target_of(target, device, "kernels")
    raw = run_child(name, variant, device, calls, weights, batch=batch)
    row = {"kind": "kernels", "implementation": name, "variant": variant, "device": device,
           "calls": calls, "batch": batch, "host_ns_per_call": raw["host_ns_per_call"],
           "profiled_ns_per_call": raw.get("profiled_ns_per_call"),  # the same calls, profiler attached
           **summarize_trace(raw["events"], calls)}
    if raw.get("note"):
        row["note"] = raw["note"]
    return row


def table(row: Row) -> list[str]:
    """The row as printed on the terminal."""
    host, busy = row["host_ns_per_call"] / 1e3, row["gpu_busy_ns_per_call"] / 1e3
    out = [f"{row['implementation']}/{row['variant']} on {row['device']}, batch {row.get('batch', 1)}, "
           f"{row['calls']} calls: "
           f"host {host:.1f} us per call, GPU busy {busy:.1f} us ({100 * busy / host:.0f}%), "
           f"{row['device_ops_per_call']:.1f} kernels/copies, {row['api_calls_per_call']:.1f} CUDA calls "
           f"taking {row['api_ns_per_call'] / 1e3:.1f} us of host time"]
    for op in row["ops"]:
        out.append(f"  {op['ns_per_call'] / 1e3:>8.2f} us  x{op['per_call']:<4.1f} "
                   f"{op['category']:<10} {op['name']}")
    if row["ops_not_listed"]:
        out.append(f"  ... and {row['ops_not_listed']} more")
    if row.get("api_ops"):
        out.append("  host in CUDA calls: " + "; ".join(
            f"{op['name']} x{op['per_call']:.1f} {op['ns_per_call'] / 1e3:.2f} us" for op in row["api_ops"]))
    if row.get("note"):
        out.append(f"  note: {row['note']}")
    return out


def write(rows: list[Row], out: Path, run_id: str | None = None) -> Path:
    return plumbing.write(rows, out, "kernels", "gpu", run_id)


def child(name: str, variant: str, device: str, calls: int, weights: str, trace_path: str,
          batch: int = 1) -> None:
    """In the child: measure, profile, write the trace; print one JSON line."""
    from harness.data import mnist

    impl = registry.create(name, weights, device=device, variant=variant)
    images = mnist.to_input(mnist.load("test")[0])
    starts = [(i * batch) % (len(images) - batch + 1) for i in range(calls)]  # new images each call
    batches = [images[s:s + batch] for s in starts]
    for i in range(WARMUP):
        impl.predict(batches[i % calls])
    start = time.perf_counter_ns()
    for x in batches:
        impl.predict(x)
    host_ns = (time.perf_counter_ns() - start) / calls
    try:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile
    except ImportError as exc:
        raise Unavailable(f"PyTorch is needed for its CUPTI profiler: {exc}") from None
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter_ns()
        for x in batches:
            impl.predict(x)
        profiled_ns = (time.perf_counter_ns() - start) / calls
    prof.export_chrome_trace(trace_path)
    notes = [getattr(impl, attr, None) for attr in ("fusion_note", "dense_note")]  # cuDNN: convs, dense
    note = "; ".join(n for n in notes if n) or None
    impl.close()
    print(json.dumps({"host_ns_per_call": host_ns, "profiled_ns_per_call": profiled_ns, "note": note}))


if __name__ == "__main__":
    n, v, d, c, w, t, b = sys.argv[1:8]
    child(n, v, d, int(c), w, t, int(b))
