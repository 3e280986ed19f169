"""One layer's backward asked of a student's code, in one place for both that ask it: the grader's
worker (harness.lab.box.tasks: a training lab's stages, and a kind's `call` op) and the kit's check
(harness.lab.term.handout.trainkit). NumPy alone (the kit ships it, the sandbox shows it to every
worker); the NumPy reference's own backward is harness.lab.reference's (never shipped).

A layer's backward, as a training lab's template documents it: `backward(name, x, upstream, kernel,
bias) -> (dx, dkernel, dbias)`, NHWC, handed the oracle's input to the layer, its gradient of the loss
with respect to the layer's output (fc3: the labels) and the layer's weights.

    handed(name, arrays, dtype) -> [x, upstream, kernel, bias]   as `dtype`, fc3's upstream int64 labels
    ask(method, name, arrays, counts, dtype) -> [dx or None, dkernel, dbias]   the student's `method`
                         on the float32 arrays (x, upstream, kernel, bias) as `dtype` (fc3's upstream:
                         int64 labels); float32 answers, dx None where its count is 0 (not graded);
                         NotImplementedError where there is no method; the student's error as raised
    wrong_size(parts, counts) -> str | None    an answer of the wrong size, in words
    student_stage(impl, dtype, data, arrays) -> (result, answers)   a `call` op's function (harness.lab.box.
                         tasks.call): the submission's backward of data["name"], timed by the worker's
                         clock ({"ns": ...}; {"why": ...} where an answer has the wrong size)
    timed(method, dtype, data, arrays) -> (result, answers)   `method` asked and timed: the student's
                         (student_stage) and the NumPy reference's (harness.lab.reference.numpy_stage)
"""

import time
from collections.abc import Callable
from typing import Any

import numpy as np

PARTS = ("dx", "dkernel", "dbias")
STUDENT_STAGE = "harness.lab.backward:student_stage"  # the call op's function (harness.lab.box.tasks.call)


def handed(name: str, arrays: list[np.ndarray] | tuple[np.ndarray, ...], dtype: str) -> list[np.ndarray]:
    """(x, upstream, kernel, bias) as `dtype`; fc3's upstream is the labels, int64 (its output: the loss)."""
    out = [np.asarray(a).astype(dtype) for a in arrays]
    if name == "fc3":
        out[1] = np.asarray(arrays[1]).astype(np.int64)
    return out


def ask(method: Callable[..., Any] | None, name: str, arrays: list[np.ndarray] | tuple[np.ndarray, ...],
        counts: tuple[int, ...] | list[int], dtype: str) -> list[np.ndarray | None]:
    """The student's `method(name, x, upstream, kernel, bias)`, its three gradients as float32."""
    if not callable(method):
        raise NotImplementedError
    got = tuple(method(name, *handed(name, arrays, dtype)))
    if len(got) != 3:
        raise ValueError(f"backward returned {len(got)} values, expected 3 (dx, dkernel, dbias)")
    return [None if want == 0 else np.asarray(g, dtype=np.float32)
            for g, want in zip(got, counts, strict=True)]


def wrong_size(parts: list[np.ndarray | None], counts: tuple[int, ...] | list[int]) -> str | None:
    return next((f"{what}: returned shape {tuple(p.shape)}, expected {n} values"
                 for what, p, n in zip(PARTS, parts, counts, strict=True)
                 if p is not None and p.size != n), None)


def timed(method: Callable[..., Any] | None, dtype: str, data: dict,
           arrays: list[np.ndarray]) -> tuple[dict, list[np.ndarray | None]]:
    counts = data["counts"]
    t0 = time.perf_counter_ns()  # looked up each call: a patched clock is caught (the grader's trips)
    parts = ask(method, data["name"], arrays, counts, dtype)
    t1 = time.perf_counter_ns()
    bad = wrong_size(parts, counts)
    return ({"why": bad}, []) if bad else ({"ns": t1 - t0}, parts)


def student_stage(impl: Any, dtype: str, data: dict, arrays: list[np.ndarray]) -> tuple[dict, list]:
    """The submission's backward of data["name"] on arrays (x, upstream, kernel, bias), data["counts"]
    values each; its time on the worker's clock."""
    return timed(getattr(impl, "backward", None), dtype, data, arrays)
