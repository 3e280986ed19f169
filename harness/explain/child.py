"""The worker side of `explain`: one implementation (one framework) in a fresh process.

    python -m harness.explain.child NAME VARIANT DEVICE CALLS ROUNDS WEIGHTS

Prints one JSON object: the ladder's per-step times by round, Keras' internal stages with a
real predict timed in the same loop (Keras on TensorFlow), and cProfile counts.

The process imports the frameworks its ladder runs and no other (KeptOut): where they are
installed, TensorFlow imports Keras and JAX, and Keras imports JAX, IPython, matplotlib and pandas,
for features no call uses (TensorFlow Lite's JAX export, Orbax checkpoints, notebook display, plots,
DataFrames): seconds of a core per process.
"""

import importlib.machinery
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from harness.data import mnist
from harness.explain import keras_steps
from harness.measure.inside.worker import freeze_heap, loaded_frameworks, time_calls

# imported by Keras where installed, for notebooks, plots and DataFrame inputs; a call with a NumPy
# array asks no more of pandas than one isinstance against its DataFrame (tens of ns a call)
NOT_ON_A_CALL = ("IPython", "matplotlib", "pandas")
WARM_UP = 10  # untimed calls per step before the first round: cold start, tracing, compilation


class KeptOut(importlib.machinery.PathFinder):
    """The path finder (it finds what is installed), blind to `modules` and their submodules:
    `import` raises ModuleNotFoundError and importlib.util.find_spec answers None, as where they
    are not installed, and `module in sys.modules` stays False (libraries ask all three)."""

    modules: frozenset[str] = frozenset()

    @classmethod
    def find_spec(cls, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname.partition(".")[0] in cls.modules:
            return None
        return super().find_spec(fullname, path, target)


def keep_out(modules: Iterable[str]) -> None:
    """Make `modules` unimportable in this process, before any framework is imported."""
    KeptOut.modules = frozenset(modules)
    sys.meta_path[:] = [KeptOut if finder is importlib.machinery.PathFinder else finder
                        for finder in sys.meta_path]


def warm_up(steps: dict[str, Callable[[Any], Any]], batches: Sequence[Any]) -> None:
    """WARM_UP untimed calls of each step."""
    for fn in steps.values():
        for i in range(WARM_UP):
            fn(batches[i % len(batches)])


def interleaved(calls: dict[str, Callable[[Any], Any]], batches: Sequence[Any], rounds: int,
                per_round: int) -> dict[str, list[list[int]]]:
    """{step: [[ns per call] per round]}, the steps interleaved in each round (A B C A B C)."""
    out: dict[str, list[list[int]]] = {step: [] for step in calls}
    start = 0
    for _ in range(rounds):
        for step, fn in calls.items():
            times, _ = time_calls(fn, batches, start, per_round)
            out[step].append(times)
        start += per_round
    return out


def internal(model: Any, batches: Sequence[Any], rounds: int, per_round: int) -> dict[str, Any]:
    """Keras' predict stages, each timed, alternating with a real model.predict."""
    try:
        stages = keras_steps.keras_tf_internal_steps(model)
    except (ImportError, RuntimeError) as exc:
        return {"refused": str(exc)}
    clock = time.perf_counter_ns
    stage_rounds: dict[str, list[list[int]]] = {name: [] for name, _ in stages}
    predict_rounds = []
    for r in range(rounds):
        stage_times: dict[str, list[int]] = {name: [] for name, _ in stages}
        predict_times = []
        for i in range(per_round):
            x = batches[(r * per_round + i) % len(batches)]
            state = {"x": x}
            for name, fn in stages:
                t0 = clock()
                fn(state)
                stage_times[name].append(clock() - t0)
            t0 = clock()
            model.predict(x, verbose=0)
            predict_times.append(clock() - t0)
        for name in stage_times:
            stage_rounds[name].append(stage_times[name])
        predict_rounds.append(predict_times)
    return {"stages": [{"name": name, "rounds_ns": stage_rounds[name]} for name, _ in stages],
            "predict_rounds_ns": predict_rounds}


def main(argv: list[str] | None = None) -> int:
    name, variant, device, calls_text, rounds_text, weights = (argv or sys.argv[1:])
    calls, rounds = int(calls_text), int(rounds_text)
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # framework chatter goes to stderr
    sys.stdout = sys.stderr
    keep_out([*keras_steps.unused_frameworks(name, variant, device), *NOT_ON_A_CALL])
    images, _ = mnist.load("test")
    batches = list(mnist.to_input(images[:2000])[:, None])  # one image per call
    steps, model, floor = keras_steps.build_calls(name, variant, weights, device)
    warm_up(steps, batches)
    freeze_heap()
    per_round = max(1, calls // rounds)
    ran, floor_rung = floor or (None, None)  # what the floor ran, named in its step's text
    result = {"implementation": name, "variant": variant, "device": device, "floor": ran,
              "ladder": [{"step": step, "removes": removes, "short": short}
                         for step, removes, short in keras_steps.ladder(name, variant, floor_rung)],
              "rounds_ns": interleaved(steps, batches, rounds, per_round),
              "counts": keras_steps.profile_counts(next(iter(steps.values())), batches[0]),
              "frameworks": loaded_frameworks()}
    if name == "keras" and variant == "predict" and model is not None:
        result["internal"] = internal(model, batches, rounds, per_round)
    replies.write(json.dumps(result) + "\n")
    replies.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
