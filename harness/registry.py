"""Names -> implementation classes, imported lazily (a CuPy run never imports TensorFlow).

A level is registered in one place, its entry in REGISTRY: three records, grouped by who reads
them. ImplSpec is how it runs (devices, variants, dtypes: what the planner needs, so a study can be
validated without importing any framework; what a lab's class sets too), its `shown` (Shown) how
the report shows it, its `installs` (Installs) what it installs and loads. The built-in classes
point at their entry; an incomplete entry is refused at import (check_registry).
For lab assignments a `module:Class` path works wherever a name does: the class subclasses
harness.base.LeNet and sets its own `spec = ImplSpec(...)`.

A level's `hooks` name the functions asked of it besides predict by what asks any level that has
them (which native library it would load, which kernels doctor compiles, which system tools its
worker runs) or by another level (the Keras model the ONNX level exports): they reach it through
`hook(name, what)`, never by an import. A harness module that serves one level alone (the C level's
stage split, `make weights`' Keras model) imports that level inside a function instead, as the
oracle is imported (tests/test_layout.py's SERVES).
"""

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, Unavailable


@dataclass(frozen=True)
class Shown:
    """How the report shows a level (docs/writing-a-level.md); the null level has only a colour."""
    display: str = ""  # its row in the headline table ("raw library: cuDNN")
    short: str = ""  # its label in figures and sentences ("cuDNN"); "" is the name
    rung: str = ""  # its rung on the ladder: one of RUNGS
    raw_for: tuple[str, ...] = ()  # the devices whose raw library it is (the headline's "x cuDNN" ratios)
    # paths of level names through it, bottom first (cuDNN -> TF ops -> Keras): the report reads only
    # the ops under Keras from them (the level before Keras on a path from a device's raw library)
    ladder: tuple[tuple[str, ...], ...] = ()
    order: int | None = None  # its place on the ladder, bottom first (None: not in the report's rows)
    colour: str | None = None  # its colour in every figure
    # its call as a newcomer first writes it, following `guide` (the level's own documentation):
    # one of its variants ("" for the null level); the report compares levels by this call and by
    # their fastest, never a tuned call of one level against the first-written call of another
    first_written: str = ""
    guide: str = ""  # the address of the documentation the first-written call follows
    # what the first-written call needs, its lines of code in the headline (harness.report.claims.loc):
    # files of the level's package, or "file:Name" for a Python function or class in one; () is
    # every inference file of the package
    first_written_code: tuple[str, ...] = ()


@dataclass(frozen=True)
class Installs:
    """What a level installs and loads: the bill, env.json, the Machines table and every worker read it."""
    versions: tuple[tuple[str, str], ...] = ()  # (column, distribution): env.json's, the Machines table's
    # (and the bill's: what a pip install of these requires is what the level needs installed)
    frameworks: tuple[str, ...] = ()  # top-level modules its worker imports (rows' `frameworks`, GPU memory)
    # top-level modules its first build looks for (then runs in a process of their own): the ONNX
    # export's Keras on TensorFlow; a process that runs the level must be able to find them
    build_frameworks: tuple[str, ...] = ()
    # the engine_setup.cache_dir kind it compiles its code into when built ("c"): the bill's worker
    # gives it a fresh, empty one, so the start-up it reads includes the compiler's run
    compile_cache: str = ""


@dataclass(frozen=True)
class ImplSpec:
    """How a level runs (what a lab's class sets as its `spec` too), then how the report shows it and
    what it installs, each its own record."""
    name: str
    path: str  # "module:Class"
    api_level: str
    devices: tuple[str, ...]
    variants: tuple[str, ...]  # the first is the default
    dtypes: tuple[str, ...]
    package: str | None  # counted by the LOC report
    gpu_only: tuple[str, ...] = ()  # variants that need a GPU (CUDA graphs)
    env: tuple[tuple[str, str], ...] = field(default=())  # set in its process before any import
    trainer: str | None = None  # "module:Class" of its harness.base.Trainer; None: cannot train
    train_variants: tuple[str, ...] = ()  # the first is the default
    hooks: tuple[tuple[str, str], ...] = ()  # (what, "module:function"): see hook()
    # variants that stand in as the device's fastest call where none is measured (the first that runs
    # on the device, in the registry's order: harness.measure.fastest_call); a measured one needs no mark
    stand_ins: tuple[str, ...] = ()
    # variants that keep a kernel resident on the GPU between calls (its SMs spinning): never a lab's
    # reference, fastest call or default, where a class shares the GPU (harness.lab.judge.rules.assignment)
    resident: tuple[str, ...] = ()
    # What the harness runs of it besides studies (docs/writing-a-level.md's table):
    explain: tuple[str, ...] = ()  # variants `make explain` and gpu-study profile stage by stage
    trace: tuple[str, ...] | str = ()  # variants gpu-study's `kernels` step traces ("all": every GPU one)
    shown: Shown = Shown()  # how the report shows it
    installs: Installs = Installs()  # what it installs and loads

    def variants_for(self, device: str) -> tuple[str, ...]:
        return tuple(v for v in self.variants if device == "gpu" or v not in self.gpu_only)


# A level's rung, bottom first (Shown.rung): the report groups levels by these, never by name.
RUNGS = ("hand-written", "raw library", "compiled from Python", "inference engine", "framework ops",
         "high-level API", "reference")

DEVICES = ("cpu", "gpu")
DTYPES = ("float32", "float64")
NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
COLOUR = re.compile(r"#[0-9A-Fa-f]{6}\Z")


def refuse(name: str, field: str, expected: str, found: object) -> HarnessError:
    """The one error an incomplete entry gets: the file, the level, the field, expected vs found."""
    return HarnessError(f"harness/registry.py, level {name!r}: field `{field}`: expected {expected}; "
                        f"found {found!r} (docs/writing-a-level.md)")


def check_entry(spec: ImplSpec) -> None:
    """A registry entry with every field the harness relies on, or a HarnessError naming the field.
    The null level (api_level "none") has no place in the report: only its running fields count."""
    def within(field: str, values: tuple[str, ...], allowed: tuple[str, ...], what: str) -> None:
        if not set(values) <= set(allowed):
            raise refuse(spec.name, field, f"{what} among {', '.join(allowed)}", values)

    if not NAME.match(spec.name):
        raise refuse(spec.name, "name", "lower-case letters, digits and _", spec.name)
    if spec.path.count(":") != 1:
        raise refuse(spec.name, "path", "'module:Class'", spec.path)
    for name in ("devices", "variants", "dtypes"):
        if not getattr(spec, name):
            raise refuse(spec.name, name, "at least one", getattr(spec, name))
    within("devices", spec.devices, DEVICES, "devices")
    within("dtypes", spec.dtypes, DTYPES, "dtypes")
    for name in ("gpu_only", "stand_ins", "explain"):
        within(name, getattr(spec, name), spec.variants, "variants of its own")
    if spec.trace != "all":
        within("trace", tuple(spec.trace), spec.variants, "\"all\" or variants of its own")
    if bool(spec.trainer) != bool(spec.train_variants):
        raise refuse(spec.name, "train_variants", "variants exactly when it has a trainer",
                     spec.train_variants)
    if spec.api_level == "none":
        return
    shown = spec.shown
    if not isinstance(shown.order, int):
        raise refuse(spec.name, "order", "its place on the ladder, an int (bottom first: see the others')",
                     shown.order)
    if shown.rung not in RUNGS:
        raise refuse(spec.name, "rung", f"one of {', '.join(RUNGS)}", shown.rung)
    if not shown.display:
        raise refuse(spec.name, "display", "its row's name in the headline table", shown.display)
    if not spec.package:
        raise refuse(spec.name, "package", "the package whose lines are counted", spec.package)
    if not COLOUR.match(shown.colour or ""):
        raise refuse(spec.name, "colour", "its colour in every figure, '#RRGGBB'", shown.colour)
    within("raw_for", shown.raw_for, spec.devices, "devices of its own")
    within("first_written", (shown.first_written,), spec.variants, "one variant of its own")
    if not shown.guide.startswith("https://"):
        raise refuse(spec.name, "guide", "the https:// address of the documentation its first-written "
                     "call follows", shown.guide)


def check_registry(registry: dict[str, ImplSpec]) -> None:
    """Every entry checked (check_entry), then what entries share: a place on the ladder and a colour
    each, and ladder paths through registered levels only."""
    for entry in registry.values():
        check_entry(entry)
    for shared in ("order", "colour"):
        seen: dict[object, str] = {}
        for name, entry in registry.items():
            value = getattr(entry.shown, shared)
            if value is not None and value in seen:
                raise refuse(name, shared, f"one of its own (level {seen[value]!r} has it)", value)
            seen[value] = name
    for name, entry in registry.items():
        for path in entry.shown.ladder:
            unknown = [step for step in path if step not in registry]
            if unknown or name not in path:
                raise refuse(name, "ladder", "paths of registered level names through this one", path)


def lab_spec(cls: type, device: str, dtype: str) -> ImplSpec:
    """The spec of a lab submission's class whose student left `spec` out: itself, on the lab's
    device and dtype (the grader's worker and the kit's lenet-lab give it the same)."""
    return ImplSpec(cls.__name__, f"lenet:{cls.__name__}", "lab", (device,), ("default",), (dtype,), None)


# Keras reads KERAS_BACKEND once, at import: one backend per worker process. XLA:CPU (JAX)
# gets the harness's one-thread rule through XLA_FLAGS (TF's own XLA is left alone).
JAX_ENV = (("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"),)

KERAS_TRAIN = ("train_on_batch", "fit")  # one batch per call, as a student writes a step
# the ways every Keras backend calls the model; the variant after them is its backend's compiled call
KERAS_CALLS = ("predict", "predict_on_batch", "call")

# Distributions more than one level records (versions: (column, distribution); "" records it in
# env.json without a column of the Machines table).
CUPY = (("CuPy", "cupy-cuda12x"), ("CuPy", "cupy-cuda13x"))
TF = (("TensorFlow", "tensorflow"), ("TensorFlow", "tensorflow-cpu"))
KERAS = (("Keras", "keras"),)
# what Keras' predict needs on every backend (Shown.first_written_code): the model, the backend check
# and the class that loads the weights and calls it; each backend adds its own set-up
KERAS_CODE = ("model.py:build_model", "model.py:require_backend", "model.py:KerasLeNet")

REGISTRY = {
    spec.name: spec
    for spec in (
        ImplSpec("null", "harness.null_impl:NullLeNet", "none", ("cpu", "gpu"),
                 ("default",), ("float32", "float64"), None, shown=Shown(colour="#999999")),
        ImplSpec("numpy", "lenet_numpy.model:NumpyLeNet", "numpy", ("cpu",),
                 ("default",), ("float32", "float64"), "lenet_numpy",
                 trainer="lenet_numpy.train:NumpyTrainer", train_variants=("default",),
                 shown=Shown(display="NumPy reference", short="NumPy ref.", rung="reference", order=130,
                             first_written="default",
                             guide="https://numpy.org/doc/stable/user/absolute_beginners.html",
                             colour="#000000"),
                 installs=Installs(versions=(("NumPy", "numpy"),))),
        ImplSpec("tf", "lenet_tf.model:TFLeNet", "tensorflow-ops", ("cpu", "gpu"),
                 ("function", "eager", "xla"), ("float32", "float64"), "lenet_tf",
                 trainer="lenet_tf.train:TFTrainer", train_variants=("function", "eager"), explain=("eager",),
                 shown=Shown(display="TensorFlow ops", short="TF ops", rung="framework ops", order=70,
                             first_written="eager",
                             guide="https://www.tensorflow.org/guide/basics",
                             colour="#E69F00"),
                 installs=Installs(versions=TF, frameworks=("tensorflow",))),
        ImplSpec("jax", "lenet_jax.model:JaxLeNet", "jax-ops", ("cpu", "gpu"),
                 ("jit", "eager"), ("float32", "float64"), "lenet_jax", env=JAX_ENV,
                 trainer="lenet_jax.train:JaxTrainer", train_variants=("jit",), explain=("eager",),
                 trace="all",
                 shown=Shown(display="JAX ops", short="JAX ops", rung="framework ops", order=80,
                             first_written="eager",
                             guide="https://docs.jax.dev/en/latest/quickstart.html",
                             colour="#009E73"),
                 installs=Installs(versions=(("JAX", "jax"),), frameworks=("jax",))),
        ImplSpec("torch", "lenet_torch.model:TorchLeNet", "torch-ops", ("cpu", "gpu"),
                 ("eager", "compile", "cudagraph"), ("float32", "float64"), "lenet_torch",
                 gpu_only=("cudagraph",), trainer="lenet_torch.train:TorchTrainer",
                 train_variants=("eager", "compile"), explain=("eager",), trace="all",
                 shown=Shown(display="PyTorch ops", short="PyTorch ops", rung="framework ops", order=90,
                             first_written="eager",
                             guide="https://docs.pytorch.org/tutorials/beginner/basics/buildmodel_tutorial.html",
                             colour="#D55E00"),
                 installs=Installs(versions=(("PyTorch", "torch"),), frameworks=("torch",))),
        ImplSpec("keras", "lenet_keras.model:KerasLeNet", "keras", ("cpu", "gpu"),
                 (*KERAS_CALLS, "function", "xla"), ("float32",),
                 "lenet_keras", env=(("KERAS_BACKEND", "tensorflow"),),
                 trainer="lenet_keras.train:KerasTrainer", train_variants=KERAS_TRAIN,
                 # the ONNX level exports this model: a level reaches another only through the registry
                 hooks=(("build_model", "lenet_keras.model:build_model"),), explain=("predict",),
                 shown=Shown(display="Keras on TensorFlow", short="Keras/TF", rung="high-level API",
                             order=100,
                             first_written="predict",
                             first_written_code=KERAS_CODE,
                             guide="https://keras.io/guides/sequential_model/",
                             colour="#CC79A7"),
                 installs=Installs(versions=KERAS + TF, frameworks=("keras", "tensorflow"))),
        ImplSpec("keras_jax", "lenet_keras.model:KerasJaxLeNet", "keras", ("cpu", "gpu"),
                 (*KERAS_CALLS, "jit"), ("float32",),
                 "lenet_keras", env=(("KERAS_BACKEND", "jax"), *JAX_ENV),
                 trainer="lenet_keras.train:KerasJaxTrainer", train_variants=KERAS_TRAIN,
                 explain=("predict",), trace=("predict",),
                 shown=Shown(display="Keras on JAX", short="Keras/JAX", rung="high-level API", order=110,
                             first_written="predict",
                             first_written_code=(*KERAS_CODE, "model.py:KerasJaxLeNet.configure"),
                             guide="https://keras.io/guides/sequential_model/",
                             colour="#117733"),
                 installs=Installs(versions=(*KERAS, ("JAX", "jax")), frameworks=("keras", "jax"))),
        ImplSpec("keras_torch", "lenet_keras.model:KerasTorchLeNet", "keras", ("cpu", "gpu"),
                 (*KERAS_CALLS, "compile"), ("float32",),
                 "lenet_keras", env=(("KERAS_BACKEND", "torch"),),
                 trainer="lenet_keras.train:KerasTorchTrainer", train_variants=KERAS_TRAIN,
                 explain=("predict",), trace=("predict",),
                 shown=Shown(display="Keras on PyTorch", short="Keras/PyTorch", rung="high-level API",
                             order=120,
                             first_written="predict",
                             first_written_code=(*KERAS_CODE, "model.py:KerasTorchLeNet.configure",
                                                 "model.py:KerasTorchLeNet.close"),
                             guide="https://keras.io/guides/sequential_model/",
                             colour="#882255"),
                 installs=Installs(versions=(*KERAS, ("PyTorch", "torch")), frameworks=("keras", "torch"))),
        # hand-written CUDA C kernels (NVRTC through CuPy): the GPU's floor, the CUDA lab's rung
        ImplSpec("cuda", "lenet_cuda.model:CudaLeNet", "cuda", ("gpu",),
                 ("fused", "layers", "graph", "cluster", "mapped", "persistent", "resident", "batch",
                  "batch2", "batch2_device", "rows", "resident_rows", "overlap"),
                 ("float32", "float64"), "lenet_cuda",
                 gpu_only=("graph", "cluster", "mapped", "persistent", "resident", "batch", "batch2",
                           "batch2_device", "rows", "resident_rows", "overlap"),
                 resident=("persistent", "resident", "resident_rows"),
                 hooks=(("kernels", "lenet_cuda.kernels:nvrtc_units"),),
                 stand_ins=("resident", "resident_rows", "persistent", "mapped", "rows", "cluster", "graph"),
                 trace="all",
                 shown=Shown(display="hand-written CUDA", short="CUDA", rung="hand-written", order=10,
                             first_written="layers",
                             first_written_code=("model.py", "kernels.py", "common.cuh", "layers.cu"),
                             guide="https://docs.nvidia.com/cuda/cuda-c-programming-guide/",
                             ladder=(("cuda", "cudnn"),), colour="#332288"),
                 installs=Installs(versions=(*CUPY, ("", "nvidia-cuda-nvrtc-cu12"),
                                             ("", "nvidia-cuda-nvrtc")), frameworks=("cupy",))),
        ImplSpec("cudnn", "lenet_cudnn.model:CudnnLeNet", "cudnn", ("gpu",),
                 ("tuned", "naive", "graph", "frontend"), ("float32", "float64"), "lenet_cudnn",
                 gpu_only=("graph", "frontend"),
                 trainer="lenet_cudnn.train:CudnnTrainer", train_variants=("default",),
                 hooks=(("library", "lenet_cudnn.binding:probe"),
                        ("cublaslt", "lenet_cudnn.cublaslt:probe")), stand_ins=("graph",), trace="all",
                 shown=Shown(display="raw library: cuDNN", short="cuDNN", rung="raw library",
                             raw_for=("gpu",), order=20,
                             first_written="tuned",
                             guide="https://docs.nvidia.com/deeplearning/cudnn/backend/latest/developer/overview.html",
                             colour="#0072B2",
                             ladder=(("cudnn", "tf", "keras"), ("cudnn", "jax", "keras_jax"),
                                     ("cudnn", "torch", "keras_torch"))),
                 installs=Installs(versions=(*CUPY, ("", "nvidia-cudnn-cu12"), ("", "nvidia-cudnn-cu13"),
                                             ("", "nvidia-cudnn-frontend"),
                                             # its own ctypes binding loads cuBLAS (lenet_cudnn.cublas)
                                             ("", "nvidia-cublas-cu12"), ("", "nvidia-cublas")),
                                   frameworks=("cupy",))),
        # float32 only: oneDNN 3.2 has no f64 conv/pooling/inner product on the CPU. No env
        # entry: OMP_NUM_THREADS comes from the harness's thread rule (procenv), set before
        # libgomp loads; an entry here would override a study's thread count.
        ImplSpec("onednn", "lenet_onednn.model:OnednnLeNet", "onednn", ("cpu",),
                 ("tuned", "naive", "naive_nocache"), ("float32",), "lenet_onednn",
                 trainer="lenet_onednn.train:OnednnTrainer", train_variants=("default",),
                 hooks=(("library", "lenet_onednn.binding:probe"),), stand_ins=("tuned",),
                 shown=Shown(display="raw library: oneDNN", short="oneDNN", rung="raw library",
                             raw_for=("cpu",), order=50,
                             first_written="tuned",
                             guide="https://uxlfoundation.github.io/oneDNN/page_cnn_inference_f32_cpp.html",
                             colour="#56B4E9",
                             ladder=(("onednn", "tf", "keras"), ("onednn", "jax", "keras_jax"),
                                     ("onednn", "torch", "keras_torch"), ("onednn", "onnx"))),
                 installs=Installs(versions=(("", "onednn-cpu-gomp"),))),
        # hand-written loops compiled for this CPU by Numba (LLVM): the CPU's twin of `cuda`
        ImplSpec("numba", "lenet_numba.model:NumbaLeNet", "hand-written-cpu", ("cpu",),
                 ("fused", "layers"), ("float32", "float64"), "lenet_numba",
                 hooks=(("cpu_target", "lenet_numba.model:cpu_target"),), stand_ins=("fused",),
                 shown=Shown(display="compiled from Python (Numba)", short="Numba",
                             rung="compiled from Python", order=40,
                             first_written="layers",
                             guide="https://numba.readthedocs.io/en/stable/user/5minguide.html",
                             colour="#DDCC77"),
                 installs=Installs(versions=(("Numba", "numba"), ("", "llvmlite")), frameworks=("numba",))),
        # hand-written C compiled at run time by the system's C compiler for this CPU: the CUDA
        # level's twin on the CPU (AVX-512 intrinsics where the CPU has them)
        ImplSpec("c", "lenet_c.model:CLeNet", "hand-written-c", ("cpu",),
                 ("fused", "layers", "portable"), ("float32", "float64"), "lenet_c",
                 hooks=(("compiler", "lenet_c.build:probe"), ("system_tools", "lenet_c.build:toolchain")),
                 stand_ins=("fused",),
                 shown=Shown(display="hand-written C", short="C", rung="hand-written", order=30,
                             first_written="layers",
                             first_written_code=("model.py", "build.py", "layers.c"),
                             guide="https://cs231n.github.io/convolutional-networks/",
                             ladder=(("c", "numba", "onednn"),), colour="#AA4499"),
                 installs=Installs(compile_cache="c")),
        # the Keras model exported to ONNX (once per weights file), run by an inference engine
        ImplSpec("onnx", "lenet_onnx.model:OnnxLeNet", "inference-engine", ("cpu", "gpu"),
                 ("run", "iobinding", "openvino"), ("float32",), "lenet_onnx",
                 hooks=(("doctor", "lenet_onnx.doctor.engines:probe"),),
                 shown=Shown(display="inference engine", short="ONNX engine", rung="inference engine",
                             order=60,
                             first_written="run",
                             guide="https://onnxruntime.ai/docs/get-started/with-python.html",
                             ladder=(("onnx", "keras"),), colour="#999933"),
                 installs=Installs(versions=(("ONNX Runtime", "onnxruntime"), ("OpenVINO", "openvino"),
                                             ("", "onnx"), ("", "tf2onnx")),
                                   frameworks=("onnxruntime", "openvino"),
                                   build_frameworks=("tensorflow", "keras"))),
    )
}
check_registry(REGISTRY)  # an incomplete entry stops here, naming its field
# implementation -> the Keras backend its worker runs (read from its env: written once, above)
KERAS_BACKENDS = {name: dict(spec.env)["KERAS_BACKEND"] for name, spec in REGISTRY.items()
                  if "KERAS_BACKEND" in dict(spec.env)}


def first_written(name: str) -> str:
    """A level's call as a newcomer first writes it (Shown.first_written): 'eager' for TF ops."""
    return spec(name).shown.first_written or spec(name).variants[0]


def compiled_call(name: str) -> str:
    """A Keras level's compiled call: its first variant past KERAS_CALLS ("function", "jit", "compile")."""
    return next(v for v in spec(name).variants if v not in KERAS_CALLS)

# What to install when a framework is missing (the module's top-level name -> the fix).
INSTALL = {
    "tensorflow": "pip install tensorflow-cpu (a GPU server: 'tensorflow[and-cuda]')",
    "keras": "pip install keras",
    "jax": "pip install 'jax[cpu]' (a GPU server: 'jax[cuda12]')",
    "jaxlib": "pip install 'jax[cpu]' (a GPU server: 'jax[cuda12]')",
    "torch": "make install EXTRAS=dev,torch (or pip install torch)",
    "cupy": "make install-gpu",
    "numba": "pip install numba",
    "onnxruntime": "pip install onnxruntime (a GPU server: onnxruntime-gpu)",
    "openvino": "pip install openvino",
}


def levels() -> list[str]:
    """The levels the report has rows for (an `order`), bottom rung first; the null level is not one."""
    ranked = [(spec.shown.order, name) for name, spec in REGISTRY.items() if spec.shown.order is not None]
    return [name for _order, name in sorted(ranked)]


def on_device(device: str | None) -> list[str]:
    """The levels that run on the device (None: all), bottom rung first (`harness list --device`)."""
    return [name for name in levels() if device is None or device in REGISTRY[name].devices]


def trainers(device: str | None) -> list[str]:
    """The levels with a trainer that run on the device (verify-train's default), bottom rung first."""
    return [name for name in on_device(device) if REGISTRY[name].trainer]


def targets(field: str, device: str) -> list[str]:
    """"level/variant" for every variant a level on the device lists in `field` (explain, trace, stand_ins;
    a trace of "all": every variant it runs there), bottom rung first."""
    out = []
    for name in on_device(device):
        found = getattr(REGISTRY[name], field)
        runs = REGISTRY[name].variants_for(device)
        out += [f"{name}/{v}" for v in (runs if found == "all" else found) if v in runs]
    return out


def frameworks() -> list[str]:
    """Every top-level module a level's worker imports (the specs' frameworks), once each."""
    return list(dict.fromkeys(module for spec in REGISTRY.values() for module in spec.installs.frameworks))


def display(name: str) -> str:
    """A level's row name (its shown.display), or its name."""
    found = REGISTRY.get(name)
    return (found.shown.display if found else "") or name


def short(name: str) -> str:
    """A level's label in figures and sentences (its shown.short), or its name."""
    found = REGISTRY.get(name)
    return (found.shown.short if found else "") or name


def raw_library(device: str) -> str | None:
    """The device's raw library (the level whose raw_for names the device): the headline's denominator."""
    return next((name for name in levels() if device in REGISTRY[name].shown.raw_for), None)


def on_rung(*rungs: str) -> list[str]:
    """The levels on these rungs, bottom first."""
    return [name for name in levels() if REGISTRY[name].shown.rung in rungs]


def ladder_paths() -> list[tuple[str, ...]]:
    """Every level's `ladder` paths, once each, in the levels' order (the ops under Keras)."""
    return list(dict.fromkeys(path for name in levels() for path in REGISTRY[name].shown.ladder))


def distributions() -> list[str]:
    """Every distribution a level records the version of (its installs.versions), once each."""
    return list(dict.fromkeys(dist for spec in REGISTRY.values() for _column, dist in spec.installs.versions))


def own_distributions(name: str) -> tuple[str, ...]:
    """The distributions that are the level itself (its installs.versions: both spellings where a
    framework has two, tensorflow and tensorflow-cpu): what a pip install of them requires is what
    the level needs installed (harness.measure.inside.requires). () for a lab's `module:Class`
    (its class is not imported to ask) and a level without any (the C level)."""
    found = REGISTRY.get(name)
    return tuple(dict.fromkeys(dist for _column, dist in found.installs.versions)) if found else ()


def version_columns() -> dict[str, tuple[str, ...]]:
    """The Machines table's version columns, in the levels' order: column -> its distributions
    (the first installed one is shown)."""
    out: dict[str, tuple[str, ...]] = {}
    for name in levels():
        for column, dist in REGISTRY[name].installs.versions:
            if column and dist not in out.get(column, ()):
                out[column] = (*out.get(column, ()), dist)
    return out


def with_hook(what: str) -> list[str]:
    """The levels that have the hook `what` (doctor asks each of them, not a name it knows)."""
    return [name for name, spec in REGISTRY.items() if what in dict(spec.hooks)]


def import_class(path: str) -> Any:
    """The class (or function) a "module:Name" path names, imported now."""
    module_name, _, class_name = path.partition(":")
    if not class_name:
        raise HarnessError(f"implementation path {path!r}: expected 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # a framework that is not installed: the cell cannot run here
        missing = (exc.name or "").split(".")[0]
        fix = f"; install it: {INSTALL[missing]}" if missing in INSTALL else ""
        raise Unavailable(f"cannot import {module_name!r} for {path!r}: {exc}{fix}") from None
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise HarnessError(f"module {module_name!r} has no class {class_name!r}") from None


def computes(name: str | None) -> bool:
    """A registered level that does the arithmetic (not the null level, which returns zeros): a
    candidate for the floor and for "fastest"."""
    return name is not None and name in REGISTRY and REGISTRY[name].api_level != "none"


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


def process_env(name: str) -> dict[str, str]:
    """Environment variables the implementation's process needs before its first import."""
    return dict(spec(name).env)


def hook(name: str, what: str) -> Callable[..., Any]:
    """The level's function `what` (its spec's `hooks`), imported now: e.g. hook("cudnn", "library")()
    is the cuDNN library the level would load here, or why none. Unavailable when its module
    cannot be imported; HarnessError when the level has no such hook."""
    hooks = dict(spec(name).hooks)
    if what not in hooks:
        raise HarnessError(f"{name}: no hook {what!r}; expected one of {sorted(hooks)}")
    return import_class(hooks[what])


def create(name: str, weights_path: str | Path, device: str = "cpu", variant: str | None = None,
           dtype: str = "float32") -> Any:
    """Import the class of `name` and build it (this is where a framework gets imported)."""
    return import_class(spec(name).path)(weights_path, device=device, variant=variant, dtype=dtype)


def create_trainer(name: str, weights_path: str | Path, device: str = "cpu", variant: str | None = None,
                   dtype: str = "float32", **options: Any) -> Any:
    """Import the trainer class of `name` (its spec's `trainer`) and build it."""
    path = spec(name).trainer
    if path is None:
        raise Unavailable(f"{name}: this level has no training step (no trainer in its ImplSpec)")
    return import_class(path)(weights_path, device=device, variant=variant, dtype=dtype, **options)
