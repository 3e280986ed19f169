"""Names -> implementation classes, imported lazily (a CuPy run never imports TensorFlow).

Each entry also carries the metadata the planner needs (devices, variants, dtypes), so a study
can be validated without importing any framework; the built-in classes point at their entry.
For lab assignments a `module:Class` path works wherever a name does: the class subclasses
harness.base.LeNet and sets its own `spec = ImplSpec(...)`.
"""

import importlib
from dataclasses import dataclass

from harness.errors import HarnessError, Unavailable


@dataclass(frozen=True)
class ImplSpec:
    name: str
    path: str  # "module:Class"
    api_level: str
    devices: tuple[str, ...]
    variants: tuple[str, ...]  # the first is the default
    dtypes: tuple[str, ...]
    package: str | None  # counted by the LOC report


REGISTRY = {
    spec.name: spec
    for spec in (
        ImplSpec("null", "harness.null_impl:NullLeNet", "none", ("cpu", "gpu"),
                 ("default",), ("float32", "float64"), None),
        ImplSpec("numpy", "lenet_numpy.model:NumpyLeNet", "numpy", ("cpu",),
                 ("default",), ("float32", "float64"), "lenet_numpy"),
        ImplSpec("tf", "lenet_tf.model:TFLeNet", "tensorflow-ops", ("cpu", "gpu"),
                 ("function", "eager", "xla"), ("float32", "float64"), "lenet_tf"),
        ImplSpec("keras", "lenet_keras.model:KerasLeNet", "keras", ("cpu", "gpu"),
                 ("predict", "predict_on_batch", "call", "function", "xla"), ("float32",),
                 "lenet_keras"),
        ImplSpec("cudnn", "lenet_cudnn.model:CudnnLeNet", "cudnn", ("gpu",),
                 ("tuned", "naive"), ("float32", "float64"), "lenet_cudnn"),
    )
}
DEVICES = ("cpu", "gpu")


def import_class(path: str):
    module_name, _, class_name = path.partition(":")
    if not class_name:
        raise HarnessError(f"implementation path {path!r}: expected 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # a framework that is not installed: the cell cannot run here
        raise Unavailable(f"cannot import {module_name!r} for {path!r}: {exc}") from None
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise HarnessError(f"module {module_name!r} has no class {class_name!r}") from None


def spec(name: str) -> ImplSpec:
    """The spec of a registered name, or of a lab's `module:Class` (imported to read it)."""
    if name in REGISTRY:
        return REGISTRY[name]
    if ":" in name:
        found = getattr(import_class(name), "spec", None)
        if not isinstance(found, ImplSpec):
            raise HarnessError(f"{name}: the class has no `spec = ImplSpec(...)` attribute")
        return found
    raise HarnessError(
        f"unknown implementation {name!r}; expected one of {sorted(REGISTRY)} "
        "or a 'module:Class' path"
    )


def create(name: str, weights_path, device="cpu", variant=None, dtype="float32"):
    """Import the class of `name` and build it (this is where a framework gets imported)."""
    return import_class(spec(name).path)(weights_path, device=device, variant=variant, dtype=dtype)
