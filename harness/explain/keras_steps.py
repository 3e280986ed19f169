"""The steps `explain` times, built inside the worker (the framework is imported there).

(a) The ablation ladder: public calls, from the variant asked for down to the floor (the fastest
    measured implementation on the device, harness.measure.fastest_call), each removing one stage.
    Neighbours' difference = that stage's cost.
(b) For Keras' own `predict` on TensorFlow: Keras' internal steps, called in the order
    `Model.predict` calls them (Keras 3.15, keras/src/backend/tensorflow/trainer.py and
    keras/src/trainers/epoch_iterator.py). Private APIs: other Keras versions are refused.
(c) cProfile, for counts only (function calls, iterators and datasets made per call).
"""

import cProfile
import pstats
from collections.abc import Callable
from pathlib import Path
from typing import Any

Rung = tuple[str, str, str]  # (variant or step name, what going one step down removes, short name)
Stage = tuple[str, Callable[[dict[str, Any]], None]]  # (stage name, fn(state))
FloorStep = tuple[str, Rung]  # ("name/variant" the floor ran, its rung)

KERAS_CHECKED = ("3.15.",)  # the Keras versions whose predict internals (b) was written against

# implementation -> the ladder, top to bottom: (variant or step name, what going one step
# down removes, a short name for the figure)
LADDERS: dict[str, list[Rung]] = {
    "keras": [
        ("predict", "tf.data pipeline built from the NumPy array on every call (data adapter, "
                    "dataset, traced map functions)", "tf.data pipeline"),
        ("predict_dataset", "epoch iterator, iterator creation (twice per call), callback list, "
                            "output concatenation", "iterators + callbacks"),
        ("predict_on_batch", "predict_function's distribution wrapper and output tree mapping",
         "predict_function wrapper"),
        ("function", "TensorFlow's graph executor, op by op (XLA fuses the graph)", "graph executor"),
        ("xla", "TensorFlow's per-call runtime: tensor conversion, function call, host copies",
         "TF per-call runtime"),
    ],
    "keras_jax": [
        ("predict", "epoch iterator, NumPy data adapter, callback list, output concatenation",
         "epoch iterator + callbacks"),
        ("predict_on_batch", "Keras' predict_function wrapper and output conversion",
         "predict_function wrapper"),
        ("jit", "JAX's per-call dispatch: argument checks, device transfer, compiled-call cache",
         "JAX dispatch"),
    ],
    "keras_torch": [
        ("predict", "epoch iterator, data adapter, callback list, output concatenation",
         "epoch iterator + callbacks"),
        ("predict_on_batch", "eager PyTorch op dispatch, one Keras layer call at a time",
         "eager op dispatch"),
        ("compile", "PyTorch's per-call runtime: guards, tensor conversion, host copies",
         "torch per-call runtime"),
    ],
    "tf": [("eager", "Python dispatch of every op", "Python op dispatch"),
           ("function", "the graph executor, op by op", "graph executor"),
           ("xla", "TensorFlow's per-call runtime: tensor conversion, function call, host copies",
            "TF per-call runtime")],
    "jax": [("eager", "Python dispatch of every op (each one a compiled computation)",
             "Python op dispatch"),
            ("jit", "JAX's per-call dispatch: argument checks, compiled-call cache, host copies",
             "JAX dispatch")],
    # torch.compile is no step down from eager for this small model on a CPU (measured slower
    # here), so the PyTorch ladder goes from eager straight to the floor.
    "torch": [("eager", "PyTorch's per-call runtime: dispatch of each op, tensor conversion, "
                        "host copies", "torch per-call runtime")],
}
FLOOR = "floor"  # the ladder's last step: the fastest measured implementation on this device
FLOOR_SHORT = "fastest measured implementation"
FLOOR_RUNG: Rung = (FLOOR, "the fastest measured implementation on this device", FLOOR_SHORT)


def floor_rung(ran: str, fastest: str | None = None) -> Rung:
    """The floor's step: `ran` is what it ran ("name/variant"); `fastest` the fastest measured
    implementation when a stand-in ran instead (it cannot run here)."""
    if fastest is None or fastest == ran:
        return (FLOOR, f"the fastest measured implementation on this device ({ran})", FLOOR_SHORT)
    return (FLOOR, f"the NumPy reference ({ran}), standing in for the fastest measured "
                   f"implementation on this device ({fastest}), which cannot run here", FLOOR_SHORT)


def ladder(name: str, variant: str, floor: Rung | None = None) -> list[Rung]:
    """The steps from `variant` down, then the floor (`floor`: floor_rung's, naming what it ran;
    default FLOOR_RUNG); [(variant, 'model', 'model')] when there is nothing to peel."""
    steps = LADDERS.get(name, [])
    names = [step[0] for step in steps]
    if variant not in names:
        return [(variant, "model", "model")]
    return steps[names.index(variant):] + [floor or FLOOR_RUNG]


def unused_frameworks(name: str, variant: str, device: str) -> list[str]:
    """Every level's framework (registry.frameworks) that neither name/variant's ladder runs nor its
    first build looks for: the level's own, and its floor's (asked of harness.measure.fastest_call, as
    floor_call does)."""
    from harness import registry
    from harness.measure.fastest_call import fastest_measured

    def needs(level: str) -> set[str]:
        installs = registry.spec(level).installs
        return {*installs.frameworks, *installs.build_frameworks}

    used = needs(name)
    if any(step == FLOOR for step, *_ in ladder(name, variant)):
        used |= needs(fastest_measured(device).implementation)
    return [module for module in registry.frameworks() if module not in used]


def build_calls(name: str, variant: str, weights: str | Path, device: str,
                dtype: str = "float32") -> tuple[dict[str, Callable[[Any], Any]], Any, FloorStep | None]:
    """({step: callable(images)}, the first step's Keras model or None, (the floor's
    "name/variant", its step) or None without one) for the ladder of name/variant, built here."""
    from harness import registry

    calls: dict[str, Callable[[Any], Any]] = {}
    model: Any = None  # the first step's Keras model
    floor: FloorStep | None = None
    for step, *_ in ladder(name, variant):
        if step == FLOOR:
            calls[step], floor = floor_call(weights, device)
        elif step == "predict_dataset":  # Keras predict on a ready tf.data.Dataset
            import tensorflow as tf

            def on_dataset(x: Any, m: Any = model) -> Any:
                return m.predict(tf.data.Dataset.from_tensors(x), verbose=0)

            calls[step] = on_dataset
        else:
            impl = registry.create(name, weights, device=device, variant=step, dtype=dtype)
            calls[step] = impl.predict
            model = model or getattr(impl, "model", None)
    return calls, model, floor


def floor_call(weights: str | Path, device: str) -> tuple[Callable[[Any], Any], FloorStep]:
    """(predict, ("name/variant", its step)) of the floor: the fastest measured implementation on
    the device (asked of harness.measure.fastest_call, never named here), or the NumPy reference where
    that cannot run here."""
    from harness import registry
    from harness.errors import Unavailable
    from harness.measure.fastest_call import fastest_measured

    fastest = fastest_measured(device)
    try:
        impl = registry.create(fastest.implementation, weights, device=device, variant=fastest.variant)
        return impl.predict, (fastest.label, floor_rung(fastest.label))
    except Unavailable as exc:
        print(f"explain: floor {fastest.label} unavailable ({exc}); using the NumPy reference",
              flush=True)
        stand_in = "numpy/default"
        return registry.create("numpy", weights).predict, (stand_in, floor_rung(stand_in, fastest.label))


PIPELINE_STAGE = "building the tf.data pipeline (dataset, map functions, distribution)"


def keras_tf_internal_steps(model: Any) -> list[Stage]:
    """Callables for Keras 3.15's TF `predict`, in its order, each doing one stage, sharing
    state through a dict: [(stage name, fn(state))]."""
    import keras
    from keras.src import callbacks as callbacks_module
    from keras.src import tree
    from keras.src.backend.tensorflow.trainer import convert_to_np_if_not_ragged
    from keras.src.trainers import data_adapters

    if not keras.__version__.startswith(KERAS_CHECKED):
        raise RuntimeError(f"the internal breakdown was written against Keras {KERAS_CHECKED}; "
                           f"this is Keras {keras.__version__}: use the ladder (a) alone")

    def adapter(s):
        s["adapter"] = data_adapters.get_data_adapter(
            x=s["x"], y=None, sample_weight=None, batch_size=None, steps_per_epoch=None,
            shuffle=False, class_weight=None)

    def pipeline(s):
        dataset = s["adapter"].get_tf_dataset()
        s["dataset"] = model.distribute_strategy.experimental_distribute_dataset(dataset)

    def iterator(s):
        s["iterator"] = iter(s["dataset"])

    def callbacks(s):
        s["callbacks"] = callbacks_module.CallbackList(None, add_progbar=False, verbose=0, epochs=1,
                                                       steps=s["adapter"].num_batches, model=model)
        s["callbacks"].on_predict_begin()
        s["callbacks"].on_predict_batch_begin(0)

    def next_batch(s):
        s["data"] = [next(s["iterator"])]

    def run(s):
        model.make_predict_function()
        s["out"] = model.predict_function(s["data"])

    def second_iterator(s):  # the epoch iterator makes a fresh one when the epoch ends
        s["iterator"] = iter(s["dataset"])

    def outputs(s):
        s["callbacks"].on_predict_batch_end(0, {"outputs": s["out"]})
        s["callbacks"].on_predict_end()
        s["result"] = tree.map_structure(convert_to_np_if_not_ragged, s["out"])

    return [("choosing the data adapter", adapter),
            (PIPELINE_STAGE, pipeline),
            ("creating the iterator", iterator),
            ("callback list and progress machinery", callbacks),
            ("reading the batch from the iterator", next_batch),
            ("running the predict function (the model)", run),
            ("creating the iterator again (end of epoch)", second_iterator),
            ("callbacks and converting the outputs", outputs)]


def profile_counts(fn: Callable[[Any], Any], x: Any) -> dict[str, int]:
    """cProfile of one call, for counts only (a profiler slows Python, not C: no proportions)."""
    profiler = cProfile.Profile()
    profiler.enable()
    fn(x)
    profiler.disable()
    stats = pstats.Stats(profiler)
    # Stats.total_calls and Stats.stats: attributes that typeshed leaves out
    total_calls: int = stats.total_calls  # type: ignore[attr-defined]
    entries: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    counts = {"function_calls": total_calls, "iterators_created": 0, "datasets_created": 0,
              "tf_function_traces": 0}
    for (filename, _line, func), (_cc, ncalls, _tt, _ct, _callers) in entries.items():
        if func == "__init__" and "iterator_ops" in filename:
            counts["iterators_created"] += ncalls
        elif func == "__init__" and filename.endswith("dataset_ops.py"):
            counts["datasets_created"] += ncalls
        elif func in ("_trace", "trace_function") and "polymorphic_function" in filename:
            counts["tf_function_traces"] += ncalls
    return counts
