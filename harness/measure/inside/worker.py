"""A worker process: holds one implementation (one framework) and times it on request.

Started by the runner as `python -m harness.measure.inside.worker` with thread and GPU-memory settings in its
environment (harness.machine.procenv), so they are in place before the framework is imported.
Protocol: one JSON object per line. Requests on stdin, replies on a private copy of stdout;
fd 1 itself is pointed at stderr so that nothing a framework prints can corrupt the replies.

    {"op": "setup", "cell": {...}, "weights": PATH, "warmup": N, "bill": B}
        -> {"ok": true, "import_ns", "load_ns", "cold_start_ns", "warmup_median_ns",
            "memory": {baseline, import, model, first_calls_peak, peak_reset} (resident bytes by
            stage; harness.measure.inside.memory), "gpu_memory", "installed" (with bill, else None)}
           (the first call timed apart; the warm-up's median tells the runner the cell's speed)
    {"op": "measure", "cell_id": ID, "calls": K, "start": I}
        -> {"ok": true, "times_ns": [...], "device_ns": [...] or null,
            "rss_peak": the resident peak during these calls (None where it cannot be reset)}
    {"op": "converge", "cell_id": ID, "images": N, "seconds": S}      (train mode only)
        -> {"ok": true, "convergence": {images, steps, seconds, losses, test_accuracy}}
    {"op": "exit"}

In train mode (cell["mode"] == "train") a call is one training step of the level's trainer
(harness.measure.inside.training) instead of a predict; a NaN loss is the status `diverged`.
"""

import contextlib
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from harness import registry
from harness.base import LeNet, Trainer
from harness.errors import Unavailable
from harness.frameworks import engine_setup
from harness.measure.inside import memory, training

perf_counter_ns = time.perf_counter_ns
FRAMEWORKS = tuple(registry.frameworks())  # every level's (Installs.frameworks): recorded when imported


def loaded_frameworks() -> list[str]:
    """The frameworks this process has imported (one per worker, by design)."""
    return [m for m in FRAMEWORKS if m in sys.modules]


def system_tools(name: str) -> dict | None:
    """What the level runs that no distribution ships (its registry hook "system_tools": the C
    compiler, lenet_c.build.toolchain), as this process finds it; None for a level without one, or
    {"error": why} where the hook fails (the bill then says so instead of a size)."""
    if name not in registry.with_hook("system_tools"):  # a lab's module:Class has none
        return None
    try:
        return registry.hook(name, "system_tools")()
    except Exception as exc:  # a missing ldd, a compiler gone since the build: the bill says why
        return {"error": f"{type(exc).__name__}: {exc}"}


def time_calls(predict: Callable[[Any], object], batches: Sequence[Any], start: int, count: int,
               device_time: Callable[[], int | None] | None = None) -> tuple[list[int], list[int] | None]:
    """Wall time of `count` predict calls (host array in, host probabilities out), in ns.

    The input batches are sliced beforehand; GC is off while the clock runs (as timeit does).
    """
    times = [0] * count
    device: list[int | None] | None = [0] * count if device_time else None
    n = len(batches)
    gc.collect()
    gc.disable()
    try:
        for i in range(count):
            x = batches[(start + i) % n]
            t0 = perf_counter_ns()
            predict(x)
            t1 = perf_counter_ns()
            times[i] = t1 - t0
            if device is not None and device_time is not None:
                device[i] = device_time()
    finally:
        gc.enable()
    if device is None or any(d is None for d in device):
        return times, None
    return times, [d for d in device if d is not None]


def freeze_heap() -> None:
    """Move everything allocated so far (the framework, the model) out of the collector's
    reach. time_calls runs gc.collect() before each timed chunk; with TensorFlow or PyTorch
    loaded, a full collection scans their whole heap (~0.2 s on the reference VM) for nothing.
    The timed calls are not affected either way: the collector is off while the clock runs."""
    gc.collect()
    gc.freeze()


def is_out_of_memory(exc: Exception) -> bool:
    """Host MemoryError, CuPy's OutOfMemoryError (a MemoryError), TF's ResourceExhaustedError."""
    if isinstance(exc, MemoryError):
        return True
    names = ("ResourceExhaustedError", "OutOfMemoryError", "CUDARuntimeError")
    return type(exc).__name__ in names and "memory" in str(exc).lower()


Request = dict[str, Any]  # a cell as a dict (Cell.to_dict() and its id), as the runner sends it
Reply = dict[str, Any]


class Worker:
    def __init__(self) -> None:
        self.cells: dict[str, tuple[LeNet, list[np.ndarray]]] = {}  # cell id -> (impl, batches)
        # train mode: cell id -> (trainer, batches, losses, cell, weights)
        self.trainers: dict[str, tuple[Trainer, list[training.Pair], list[float], Request, str]] = {}
        self.images: np.ndarray | None = None

    def test_images(self) -> np.ndarray:
        if self.images is None:
            from harness.data import mnist

            self.images, _ = mnist.load("test")
        return self.images

    def setup(self, cell: Request, weights: str, warmup: int, bill: bool = False) -> Reply:
        if cell.get("mode") == "train":
            return self.setup_training(cell, weights, warmup)
        from harness import registry
        from harness.data import mnist

        x = mnist.to_input(self.test_images(), cell["dtype"])
        b = cell["batch_size"]
        batches = [x[i:i + b] for i in range(0, len(x) - b + 1, b)]  # different images per call
        first = not self.cells  # this worker started for this cell (its import is this level's)
        billed = bill and first
        registered = registry.REGISTRY.get(cell["implementation"])  # None: a lab's module:Class
        kind = registered.installs.compile_cache if registered and billed else ""
        with engine_setup.fresh_cache(kind) if kind else contextlib.nullcontext():
            # the bill's start-up: a compiling level compiles now, in an empty cache (removed after)
            baseline = memory.rss()[0]  # the interpreter, the harness and the test images
            t0 = perf_counter_ns()
            cls = registry.import_class(registry.spec(cell["implementation"]).path)  # the framework
            t1 = perf_counter_ns()
            imported = memory.rss()[0]
            impl = cls(weights, device=cell["device"], variant=cell["variant"], dtype=cell["dtype"])
            t2 = perf_counter_ns()
            built, reset = memory.rss()[0], memory.reset_peak()
            t3 = perf_counter_ns()
            impl.predict(batches[0])  # cold start: tracing, compilation, autotuning, lazy init
            t4 = perf_counter_ns()
        device_time = impl.last_device_time_ns()
        warm, _ = time_calls(impl.predict, batches, 1, warmup)
        self.cells[cell["id"]] = (impl, batches)
        freeze_heap()
        stages = {"baseline": baseline, "import": imported, "model": built,
                  "first_calls_peak": memory.rss()[1], "peak_reset": reset}
        return {"import_ns": t1 - t0, "load_ns": t2 - t1, "cold_start_ns": t4 - t3,
                "cold_start_device_ns": device_time,
                "warmup_median_ns": sorted(warm)[len(warm) // 2] if warm else None,
                "frameworks": loaded_frameworks(),
                "keras_backend": os.environ.get("KERAS_BACKEND"),
                "memory": stages, "gpu_memory": memory.gpu(loaded_frameworks()),
                # once per worker: the bill reads only the cell its worker started for; the runner
                # finds what owns each file (memory.installed), so this process's memory is not its
                "loaded": {**memory.loaded(), "system_tools": system_tools(cell["implementation"]),
                           "fresh_cache": bool(kind)} if billed else None}

    def measure(self, cell_id: str, calls: int, start: int) -> Reply:
        if cell_id in self.trainers:
            return self.measure_training(cell_id, calls, start)
        impl, batches = self.cells[cell_id]
        probe = impl.last_device_time_ns if impl.last_device_time_ns() is not None else None
        reset = memory.reset_peak()
        times, device = time_calls(impl.predict, batches, start, calls, probe)
        return {"times_ns": times, "device_ns": device, "rss_peak": memory.rss()[1] if reset else None}

    def close(self) -> None:
        for impl, _ in self.cells.values():
            impl.close()
        for trainer, *_ in self.trainers.values():
            trainer.close()

    # --- train mode ---------------------------------------------------------------------
    def make_trainer(self, cell: Request, weights: str) -> Trainer:
        from harness import registry

        return registry.create_trainer(cell["implementation"], weights, device=cell["device"],
                                       variant=cell["variant"], dtype=cell["dtype"])

    def setup_training(self, cell: Request, weights: str, warmup: int) -> Reply:
        from harness import registry

        t0 = perf_counter_ns()
        path = registry.spec(cell["implementation"]).trainer
        if path is None:
            raise Unavailable(f"{cell['implementation']}: this level has no training step")
        registry.import_class(path)  # the framework
        t1 = perf_counter_ns()
        trainer = self.make_trainer(cell, weights)
        t2 = perf_counter_ns()
        pairs = training.batches(cell["dtype"], cell["batch_size"])
        losses: list[float] = []
        step = training.stepper(trainer, losses)
        t3 = perf_counter_ns()
        step(pairs[0])  # cold start: tracing, compilation, primitive creation
        t4 = perf_counter_ns()
        warm, _ = time_calls(step, pairs, 1, warmup)
        training.check_finite(losses)
        self.trainers[cell["id"]] = (trainer, pairs, losses, cell, weights)
        freeze_heap()
        return {"import_ns": t1 - t0, "load_ns": t2 - t1, "cold_start_ns": t4 - t3,
                "cold_start_device_ns": None,
                "warmup_median_ns": sorted(warm)[len(warm) // 2] if warm else None,
                "frameworks": loaded_frameworks(), "keras_backend": os.environ.get("KERAS_BACKEND")}

    def measure_training(self, cell_id: str, calls: int, start: int) -> Reply:
        trainer, pairs, losses, _, _ = self.trainers[cell_id]
        losses.clear()
        times, _ = time_calls(training.stepper(trainer, losses), pairs, start, calls)
        training.check_finite(losses, start)
        return {"times_ns": times, "device_ns": None}

    def converge(self, cell_id: str, images: int | None, seconds: float | None) -> Reply:
        _, pairs, _, cell, weights = self.trainers[cell_id]
        result = training.converge(lambda: self.make_trainer(cell, weights), pairs, cell["dtype"],
                                   images, seconds)
        return {"convergence": result}


def main() -> int:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # framework chatter on stdout goes to the log instead
    sys.stdout = sys.stderr
    worker = Worker()
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "exit":
            break
        try:
            if op == "setup":
                reply = worker.setup(request["cell"], request["weights"], request["warmup"],
                                     request.get("bill", False))
            elif op == "measure":
                reply = worker.measure(request["cell_id"], request["calls"], request["start"])
            elif op == "converge":
                reply = worker.converge(request["cell_id"], request["images"], request["seconds"])
            else:
                raise ValueError(f"unknown op {op!r}")
            reply["ok"] = True
        except Unavailable as exc:
            reply = {"ok": False, "status": "skipped", "reason": str(exc)}
        except training.Diverged as exc:
            reply = {"ok": False, "status": "diverged", "reason": str(exc)}
        except Exception as exc:  # reported as the cell's error, the worker goes on
            traceback.print_exc()
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if is_out_of_memory(exc):
                reason = (f"out of memory: {reason}; fix: free memory (other processes on the "
                          "GPU?) or use a smaller batch size")
            reply = {"ok": False, "status": "error", "reason": reason}
        replies.write(json.dumps(reply) + "\n")
    worker.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
