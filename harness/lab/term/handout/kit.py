"""A lab's student kit (`make lab-kit LAB=cpu_numpy`, `python -m harness lab kit LAB`):
dist/lab-kit-LAB.zip, one folder that students unpack and run where it is, with NumPy alone
(`python -m lenet_lab check lenet.py`: a school's server where nothing can be installed), or
`python -m pip install ./lab-kit-LAB` for the `lenet-lab` command (NumPy of the grader's major
version, from the package index; nothing else). It holds the interface a submission imports and the
data the gate needs, never an answer: no level package (lenet_lab is the check's command alone), no
example, no oracle (its answers are shipped precomputed; a training lab's stages' too).

    lab-kit-LAB/pyproject.toml        installs `harness` (the interface only) and `lenet-lab`
    lab-kit-LAB/README.md             for students: install, the rules, check, hand in
    lab-kit-LAB/lenet.py (+ lenet.cu) the lab's starter
    lab-kit-LAB/lenet_lab/            COMMAND: `python -m lenet_lab` runs harness.lab.term.handout.student
    lab-kit-LAB/harness/...           INTERFACE (and, for the CUDA lab, EMULATION), copied from this
                                      checkout at build time: `from harness.base import LeNet`,
                                      `harness.registry.ImplSpec`, `harness.data.weights`,
                                      `from harness import weights` work as in the grader
    lab-kit-LAB/harness/_kit/         kit.json (the lab's numbers), gate.npz (the gate's test images
                                      and the oracle's probabilities), LAB.toml, weights/ (a .npz NumPy
                                      reads: harness.data.weights.write_npz; harness's ROOT when
                                      installed or run from the folder: harness/__init__.py)

    build(lab, dest, weights) -> the zip; stage(lab, folder, weights); INTERFACE, EMULATION, COMMAND
    (a training lab's README and gate data: harness.lab.term.handout.trainreadme)
    kit_json(lab, weights), gate_data(lab, weights), pyproject(lab), readme(lab), next_step(row, lab),
    nchw_readme(), npz_name(weights) (the weights' .npz copy), reference_times(lab, weights) (numpy's
    time here and this machine's probe), numpy_pin() (the grader's NumPy major, as a requirement)
"""

import importlib
import json
import platform
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from harness import DEFAULT_WEIGHTS, ROOT
from harness.data import weights as weights_file
from harness.errors import HarnessError
from harness.lab.judge.rules import kinds, timing
from harness.lab.judge.rules.assignment import Lab
from harness.lab.term.handout import doctor

DIST = ROOT / "dist"
# What a submission imports, and what `lenet-lab` runs (the gate's comparison is the grader's own).
INTERFACE = ("harness/__init__.py", "harness/errors.py", "harness/registry.py", "harness/base.py",
             "harness/data/__init__.py", "harness/data/weights.py", "harness/data/mnist.py",
             "harness/lab/__init__.py", "harness/lab/judge/__init__.py",
             "harness/lab/judge/rules/__init__.py", "harness/lab/judge/rules/timing.py",
             "harness/lab/term/__init__.py", "harness/lab/term/handout/__init__.py",
             "harness/lab/term/handout/student.py", "harness/lab/term/handout/doctor.py",
             "harness/lab/term/handout/clock.py", "harness/lab/term/handout/sharing.py",
             "harness/lab/judge/rules/sgd.py", "harness/lab/term/handout/trainkit.py",
             "harness/lab/backward.py",  # one layer's backward asked of the student's code
             # the training stages' rules (NumPy alone) and the advice the grader's feedback gives
             "harness/lab/judge/rules/stages.py", "harness/lab/judge/rules/backprop.py",
             "harness/lab/judge/rules/tables.py", "harness/lab/term/handout/advice.py",
             # the GPU lock a check takes on a shared server (stdlib only, and harness.errors)
             "harness/machine/__init__.py", "harness/machine/gpu.py", "harness/machine/gpulock.py")
EMULATION = kinds.KERNELS.kit_files  # the CUDA lab: kernels on the CPU
# `python -m lenet_lab check lenet.py` from the unzipped kit's folder (and once installed): the check
COMMAND = {"lenet_lab/__init__.py": '"""The kit\'s check: python -m lenet_lab check lenet.py."""\n',
           "lenet_lab/__main__.py": "from harness.lab.term.handout.student import main\n\n"
                                    "raise SystemExit(main())\n"}


def build(lab: Lab, dest: Path = DIST, weights: Path = DEFAULT_WEIGHTS) -> Path:
    """dest/lab-kit-LAB.zip (replaced when present), its entries under lab-kit-LAB/."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    name = f"lab-kit-{lab.name}"
    target = dest / f"{name}.zip"
    with tempfile.TemporaryDirectory(prefix="lenet-lab-kit-") as tmp:
        folder = Path(tmp) / name
        stage(lab, folder, Path(weights))
        partial = target.with_suffix(".zip.part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                archive.write(path, f"{name}/{path.relative_to(folder).as_posix()}")
        partial.replace(target)
    return target


def stage(lab: Lab, folder: Path, weights: Path) -> None:
    """The kit's folder: the interface, the starter, the data, pyproject.toml and README.md."""
    from harness.lab.judge.phases.prepare import start_weights

    weights = start_weights(lab, weights)  # training starts from the shared initial weights
    if not Path(weights).is_file():
        raise HarnessError(f"{weights}: no weights file to ship (make weights trains it)")
    for relative in INTERFACE + lab.kind.kit_files:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / relative, folder / relative)
    for relative, command in COMMAND.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(command)
    data = folder / "harness" / "_kit"
    (data / "weights").mkdir(parents=True)
    weights_file.write_npz(weights_file.read(weights), data / "weights" / npz_name(Path(weights)))
    (data / f"{lab.name}.toml").write_text(lab.source)
    (data / "kit.json").write_text(json.dumps(kit_json(lab, Path(weights)), indent=1) + "\n")
    # its kind's README, gate data and advice: this module (inference), trainreadme, cudareadme
    handout = importlib.import_module(lab.kind.handout)
    arrays: dict[str, Any] = handout.gate_data(lab, Path(weights))
    np.savez_compressed(data / "gate.npz", **arrays)
    starter = lab.starter
    for source in sorted(starter.iterdir()):
        if source.is_file():
            text = re.sub(r"python -m harness lab check \S+ (\S+)", r"lenet-lab check \1", source.read_text())
            (folder / source.name).write_text(text)
    (folder / "pyproject.toml").write_text(pyproject(lab))
    (folder / "README.md").write_text(handout.readme(lab))


def npz_name(weights: Path) -> str:
    """lenet5_mnist.weights.h5 -> lenet5_mnist.weights.npz: the kit's copy, read by NumPy alone."""
    return weights.name.removesuffix(".h5").removesuffix(".keras") + ".npz"


def reference_times(lab: Lab, weights: Path) -> dict | None:
    """The NumPy reference's median time per image (batch 1) here, and this machine's probe
    (harness.lab.term.handout.doctor.machine_probe): the kit's check scales the one by the other's
    ratio on the student's machine. Only for a CPU lab ranked by numpy (else None); what is timed is
    its kind's (Kind.reference_calls: a predict of one image, or one SGD step)."""
    if lab.device != "cpu" or lab.rank_by.implementation != "numpy":
        return None
    import time

    call, calls, warm_up = lab.kind.reference_calls(lab, weights)
    times = []
    for i in range(calls):
        t0 = time.perf_counter_ns()
        call(i)
        times.append(time.perf_counter_ns() - t0)
    return {"label": lab.rank_by.label, "median_ns": float(np.median(times[warm_up:])),
            "probe_ns": doctor.machine_probe()}


def kit_json(lab: Lab, weights: Path) -> dict:
    """The lab's numbers `lenet-lab` needs (harness.lab.term.handout.student.Kit.lab), the grader's
    versions, and the reference's time where the kit was built (reference_times)."""
    gate = lab.gate
    return {"name": lab.name, "title": lab.title, "rung": lab.rung,
            "module": lab.module, "class": lab.class_name, "device": lab.device, "dtype": lab.dtype,
            "rank_by": lab.rank_by.label, "task": lab.task, "rule": lab.gate_rule,
            "base": lab.kind.base, "spec": lab.kind.spec_fields(), "checker": lab.kind.checker,
            "emulate_hint": lab.kind.emulate_hint, "info": lab.kind.kit_info(lab),
            "gate": {"images": gate.images, "min_agree": gate.min_agree, "max_abs_diff": gate.max_abs_diff,
                     **lab.kind.kit_gate(gate)},
            "limits": {"import_s": lab.limits.import_s, "wall_s": lab.limits.wall_s,
                       "memory_mb": lab.limits.memory_mb, "max_ratio": lab.limits.max_ratio,
                       **({"peak_mb": lab.limits.peak_mb} if lab.limits.peak_mb else {})},  # a gate: say it
            "weights": npz_name(weights), "stages": [list(stage) for stage in lab.stages],
            "grader": {"python": platform.python_version(), "numpy": np.__version__},
            "reference": reference_times(lab, weights)}


def gate_data(lab: Lab, weights: Path) -> dict[str, np.ndarray]:
    """gate.npz's arrays: the gate's test images (N, 28, 28) uint8 and the oracle's probabilities
    (N, 10) float64, as the grader computes them (timing.oracle_answers); for a training lab the
    steps' images and labels, the oracle's loss of each step and its weights after it (steps, 61706)
    float64, as the grader's (harness.lab.judge.phases.training)."""
    from harness.data import mnist
    from lenet_numpy.model import NumpyLeNet  # the oracle: runs here, never shipped

    images = mnist.load("test")[0][:lab.gate.images]
    oracle = NumpyLeNet(str(weights), dtype=lab.dtype)
    return {"images": images, "oracle": timing.oracle_answers(oracle, images, lab.dtype)}


def pyproject(lab: Lab) -> str:
    packages = [path.removesuffix("/__init__.py").replace("/", ".") for path in (*INTERFACE, *COMMAND)
                if path.endswith("/__init__.py")]  # every package the interface's files sit in
    return "\n".join([
        "[build-system]", 'requires = ["setuptools>=61"]', 'build-backend = "setuptools.build_meta"', "",
        "[project]", f'name = "lenet-lab-kit-{lab.name.replace("_", "-")}"', 'version = "1.0"',
        f'description = "Student kit of the LeNet-5 lab {lab.name}: the interface, the weights, the gate"',
        'requires-python = ">=3.10"', f'dependencies = ["{numpy_pin()}"]', "",
        "[project.scripts]", 'lenet-lab = "harness.lab.term.handout.student:main"', "",
        "[tool.setuptools]", f"packages = {json.dumps(packages)}", "",
        "[tool.setuptools.package-data]", 'harness = ["_kit/*", "_kit/weights/*"]', '"harness.lab" = ["*.h"]',
        ""])


def numpy_pin() -> str:
    """The grader's NumPy major version, as a requirement: numpy>=2,<3 (np.product, gone in NumPy 2,
    passes a check on NumPy 1 and crashes on the grader's)."""
    major = int(np.__version__.split(".")[0])
    return f"numpy>={major},<{major + 1}"


def readme(lab: Lab, extra: list[str] | None = None) -> str:
    """The students' README of an inference lab: install, write, check, `extra` (the CUDA lab's: without
    a GPU, harness.lab.term.handout.cudareadme), hand in."""
    gate, module = lab.gate, lab.module
    lines = [
        f"# {lab.title or lab.name}: the student kit of lab `{lab.name}`", "",
        "This kit holds what your submission imports (`harness.base.LeNet`, `harness.registry.ImplSpec`, "
        "`harness.data.weights`), the trained weights, the starter and the gate's test images with the "
        "answers your LeNet-5 must give. It holds no implementation of LeNet-5: that is yours to write.", "",
        "## Check, with nothing installed", "",
        "From this folder, with any Python 3.10+ that has NumPy (nothing else, nothing to install):", "",
        "```sh", f"cd lab-kit-{lab.name}",
        f"python -m lenet_lab check path/to/{module}", "```", "",
        "The same command takes `info` (the lab, its limits, the grader's Python and NumPy), `doctor` (what "
        "this machine has: Python, NumPy and its BLAS, a GPU and its libraries, and where each lives) and "
        "`show N [path/to/lenet.py]` (test image N drawn in the terminal beside the reference's answer and "
        "yours: a failed gate names the first images that disagree).", "",
        "## Or install it", "", "```sh", "python3 -m venv .venv && . .venv/bin/activate",
        f"python -m pip install ./lab-kit-{lab.name}", "```", "",
        f"Then `lenet-lab check path/to/{module}`, `lenet-lab info`, `lenet-lab doctor`, `lenet-lab show N`. "
        f"The kit asks for NumPy {numpy_pin().removeprefix('numpy')}: the grader's major version.", "",
        "## Write", "",
        f"Copy `lab-kit-{lab.name}/{module}` into a folder of your own and fill in `predict`. Rules: one "
         f"`harness.base.LeNet` subclass in `{module}`; other modules of your folder may be imported by "
         "name; "
         "`predict` takes `(N, 28, 28, 1)` float32 in [0, 1] and returns `(N, 10)` probabilities as a NumPy "
         "array, for N = 1 (timing) and N up to 1000 (the gate). One thread; no network; none of the "
         "project's `lenet_*` packages.", "",
        "The network: conv1 6x5x5 'same' + ReLU, max pool 2x2, conv2 16x5x5 'valid' + ReLU, max pool 2x2, "
        "flatten in NHWC order (400), dense 120 ReLU, dense 84 ReLU, dense 10 softmax. "
        "`weights.read(weights_path)` gives `{'conv1': Layer(kernel, bias), ...}` in Keras layouts: conv "
        "kernels (5, 5, C_in, C_out) HWIO, dense kernels (inputs, outputs).", "",
        *nchw_readme(),
        "## What the check says", "",
        f"It runs the grader's gate in this process: the first {gate.images} MNIST test images, at least "
        f"{gate.min_agree} answers with the reference's argmax and every probability within "
        f"{gate.max_abs_diff:g} of it, then prints your time per image on this machine. It exits 0 when "
        "the gate passes. Before the gate it times your predict and the NumPy reference's (timed where the "
        f"kit was built, scaled to this machine): past the lab's limit of {lab.limits.max_ratio:g}x "
        f"`{lab.rank_by.label}` it warns you: the grader then checks part of the gate only and gives gate "
        "points, no speed points. It reports your peak memory too. The grader then times you beside the "
        "reference "
        f"(`{lab.rank_by.label}`) on its own machine, on images nobody has seen, and checks every answer: "
        "remembering the gate's answers gains nothing. `lenet-lab info` shows the lab's limits.", ""]
    lines += extra or []
    lines += ["## Hand in", "", f"Your `{module}` (and any helper module it imports), as the course "
              "says (the LMS assignment, or your git repository).", ""]
    return "\n".join(lines)


def nchw_readme() -> list[str]:
    """The two conversions NCHW code needs (the kit's check points here on a shape error)."""
    return [
        "## Code written for NCHW", "",
        "Code from PyTorch or a textbook is often NCHW (channels first). The weights here are Keras' "
        "layouts; two conversions, once, in `__init__`:", "",
        "```python", "k = w['conv1'].kernel.transpose(3, 2, 0, 1)   # HWIO (5, 5, C_in, C_out) -> OIHW "
        "(C_out, C_in, 5, 5); conv2 the same",
        "fc1 = w['fc1'].kernel.reshape(5, 5, 16, 120).transpose(2, 0, 1, 3).reshape(400, 120)  # rows for a "
        "(C, H, W) flatten", "```", "",
        "The kit's check catches a shape error in your first call and points here.", ""]


def next_step(row: dict, lab: Lab) -> str | None:
    """An inference lab's own advice on a failure: none beyond its status's (feedback.NEXT_STEP)."""
    return None
