"""A worker's data ops (harness.lab.box.worker's protocol names them): a chunk of timed calls; one
stage of the network on the oracle's input to it; K timed SGD steps; the trainer's weights; a call of a
function the grader names (a kind's own work: a training lab's layer's backward, harness.lab.backward).
Each runs inside the sandbox, in the worker's process, on the submission's object.

Their messages (the rest of the protocol: harness.lab.box.worker):

    {"op": "stage", "name": S, "shape": [N, ...], "count": M}, then the stage's input, float32 NHWC
        -> {"ok", "answered": true, "shape": [...]} then its M float32 outputs; or {"ok",
        "answered": false, "why": ...} (no `stage` method, NotImplementedError, an error, or not M
        values): a stage's own failure is its verdict, never the worker's
    A training lab's worker ("task": "training" in load: the module's one harness.base.Trainer
    subclass, or the reference's trainer) answers instead:
    {"op": "train", "steps": K, "batch": B}  -> {"ok", "ready"}, then K times: the parent sends B*784
        uint8 pixels and B int64 labels, the worker answers int64 ns (its clock around train_step)
        then the loss, float64; -1 instead of the time as in stream
    {"op": "call", "function": "module:name", "data": D, "shapes": [...], "counts": [...]}, then one
        float32 array per shape  -> {"ok", "answered": true, "result": {...}, "shapes": [...]} then the
        answers' float32 values (each `counts` values, left out where its count is 0); or {"ok",
        "answered": false, "why": ...}. The function, named by the grader in a module the worker sees
        (harness.lab.backward, harness.lab.reference), is called as function(impl, dtype, data, arrays)
        -> (a JSON-able dict, answers): a kind's own work (a training lab's stage: one layer's
        backward, harness.lab.backward.student_stage), timed by its own clock where the kind times it
    {"op": "weights"}  -> {"ok", "count": 61706} then the weights, float32, layer by layer (conv1 ...
        fc3, kernel then bias, each in its Keras layout, C order)

    failure(exc, status), describe(exc), as_answer(out, rows)   a submission's error as a Failure; an answer
    unanswered(channel, exc)                     a stage or call op not answered, and why
    stream(channel, impl, dtype, calls, batch)   (the "stream" op: harness.lab.box.worker)
    stage(channel, impl, dtype, name, shape, count)
    call(channel, impl, dtype, function, data, shapes, counts)
    train(channel, impl, dtype, steps, batch)
    weights(channel, impl)
"""

import gc
import time
import traceback
from typing import Any

from harness.errors import Failure

PIXELS = 28 * 28
CLASSES = 10


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]


def failure(exc: BaseException, status: str) -> Failure:
    """The Failure a submission's exception is (printed to the log first)."""
    traceback.print_exception(exc)
    return Failure("out-of-memory" if isinstance(exc, MemoryError) else status, describe(exc))


def unanswered(channel: Any, exc: Exception) -> None:
    """A stage or call op the submission did not answer: not implemented, or its code raised (the
    traceback to the worker's log); a stage's own verdict, never the worker's."""
    if isinstance(exc, NotImplementedError):
        channel.reply({"ok": True, "answered": False, "why": "not implemented"})
        return
    traceback.print_exception(exc)
    channel.reply({"ok": True, "answered": False, "why": describe(exc)})


def as_answer(out: Any, rows: int) -> Any:
    """predict's output (an ndarray) as an answer: (rows, 10) float32, or the Failure `wrong`."""
    import numpy as np

    if out.shape != (rows, CLASSES):
        raise Failure("wrong", f"predict returned shape {out.shape}, expected ({rows}, {CLASSES})")
    return out.astype(np.float32, copy=False)


def stage(channel: Any, impl: Any, dtype: str, name: str, shape: list[int], count: int) -> None:
    """The submission's `stage(name, x)` on the oracle's input to that stage (NHWC)."""
    import numpy as np

    size = int(np.prod(shape))
    x = np.frombuffer(channel.exact(size * 4), dtype="<f4").reshape(shape).astype(dtype)
    method = getattr(impl, "stage", None)
    try:
        if not callable(method):
            raise NotImplementedError
        out = np.asarray(method(name, x), dtype=np.float32)
    except Exception as exc:
        unanswered(channel, exc)
        return
    if out.size != count:
        channel.reply({"ok": True, "answered": False,
                       "why": f"returned shape {tuple(out.shape)}, expected {count} values"})
        return
    channel.reply({"ok": True, "answered": True, "shape": [int(d) for d in out.shape]})
    channel.send(np.ascontiguousarray(out, dtype="<f4").tobytes())

def call(channel: Any, impl: Any, dtype: str, function: str, data: dict, shapes: list[list[int]],
         counts: list[int]) -> None:
    """`function` ("module:name" in a module the worker sees, named by the grader) called as
    function(impl, dtype, data, arrays) on the float32 arrays sent, one per shape; it returns (a
    JSON-able dict, answers), each answer `counts` values (None where its count is 0), or ({"why":
    ...}, []): not answered. A raise is the call's own verdict, never the worker's (unanswered)."""
    import importlib

    import numpy as np

    arrays = []
    for shape in shapes:
        size = int(np.prod(shape))
        arrays.append(np.frombuffer(channel.exact(size * 4), dtype="<f4").reshape(shape))
    module, _, name = function.partition(":")
    try:
        run = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:  # the grader's mistake, said as such (the worker ends)
        raise Failure("crashed", f"the worker cannot run {function!r} ({describe(exc)}): the grader named a "
                                 "function outside the worker's view") from None
    try:
        said, got = run(impl, dtype, data, arrays)
        if "why" in said:
            channel.reply({"ok": True, "answered": False, "why": str(said["why"])})
            return
        parts = [None if want == 0 else np.asarray(g, dtype=np.float32)
                 for g, want in zip(got, counts, strict=True)]
    except Exception as exc:
        unanswered(channel, exc)
        return
    for i, (part, want) in enumerate(zip(parts, counts, strict=True)):
        if part is not None and part.size != want:
            channel.reply({"ok": True, "answered": False,
                           "why": f"answer {i + 1}: returned shape {tuple(part.shape)}, expected {want} "
                                  "values"})
            return
    channel.reply({"ok": True, "answered": True, "result": said,
                   "shapes": [None if p is None else [int(d) for d in p.shape] for p in parts]})
    channel.send(b"".join(np.ascontiguousarray(p, dtype="<f4").tobytes() for p in parts if p is not None))


def train(channel: Any, impl: Any, dtype: str, steps: int, batch: int) -> None:
    """K train_step calls in lockstep, each timed by the worker's clock; the loss back."""
    import numpy as np

    gc.collect()
    gc.disable()
    channel.reply({"ok": True, "ready": True})
    try:
        for _ in range(steps):
            pixels = np.frombuffer(channel.exact(batch * PIXELS), dtype=np.uint8)
            labels = np.frombuffer(channel.exact(batch * 8), dtype="<i8").astype(np.int64)
            x = (pixels.reshape(batch, 28, 28, 1).astype(dtype) / 255.0).astype(dtype)
            try:
                t0 = time.perf_counter_ns()
                loss = float(impl.train_step(x, labels))
                t1 = time.perf_counter_ns()
            except BaseException as exc:
                error = failure(exc, "crashed")
                channel.send((-1).to_bytes(8, "little", signed=True))
                channel.reply({"ok": False, "status": error.status, "reason": error.reason})
                return
            channel.send((t1 - t0).to_bytes(8, "little", signed=True) + np.float64(loss).tobytes())
    finally:
        gc.enable()

def weights(channel: Any, impl: Any) -> None:
    """The trainer's weights, flat float32 in harness.data.weights.SHAPES' order."""
    import numpy as np

    from harness.data.weights import SHAPES

    try:
        found = impl.weights()
        parts = []
        for name, shapes in SHAPES.items():
            for value, shape in zip(found[name], shapes, strict=True):
                value = np.asarray(value, dtype="<f4")
                if value.shape != shape:
                    raise Failure("wrong", f"weights()[{name!r}]: shape {value.shape}, expected {shape}")
                parts.append(value.ravel())
    except Failure:
        raise
    except Exception as exc:
        raise failure(exc, "crashed") from None
    flat = np.concatenate(parts)
    channel.reply({"ok": True, "count": int(flat.size)})
    channel.send(np.ascontiguousarray(flat).tobytes())


def stream(channel: Any, impl: Any, dtype: str, calls: int, batch: int) -> None:
    import numpy as np

    gc.collect()
    gc.disable()  # no collection inside a timed call, as in timeit
    channel.reply({"ok": True, "ready": True})  # the parent's clocks start after this
    try:
        for _ in range(calls):
            pixels = np.frombuffer(channel.exact(batch * PIXELS), dtype=np.uint8)
            x = (pixels.reshape(batch, 28, 28, 1).astype(dtype) / 255.0).astype(dtype)
            try:
                t0 = time.perf_counter_ns()  # looked up each call: a patched clock is caught
                out = np.asarray(impl.predict(x))  # lazy results are forced inside the clock
                t1 = time.perf_counter_ns()
                out = as_answer(out, batch)
            except Failure as exc:
                channel.send((-1).to_bytes(8, "little", signed=True))
                channel.reply({"ok": False, "status": exc.status, "reason": exc.reason})
                return
            except BaseException as exc:
                error = failure(exc, "crashed")
                channel.send((-1).to_bytes(8, "little", signed=True))
                channel.reply({"ok": False, "status": error.status, "reason": error.reason})
                return
            channel.send((t1 - t0).to_bytes(8, "little", signed=True) +
                              np.ascontiguousarray(out, dtype="<f4").tobytes())
    finally:
        gc.enable()
