"""The students' kit (harness/lab/term/handout/kit.py, harness/lab/term/handout/student.py): built for cpu_numpy and cuda, it
holds no answer (no lenet_* package, no example, no forward pass, no oracle code: its answers are
precomputed), runs the grader's gate with the lab file's thresholds, runs from its unzipped folder in a
fresh virtual environment holding NumPy alone, and pip-installs there, where `lenet-lab check` passes
the correct example and fails the wrong one, printing no rank. Its check warns, before the gate, of a
submission past the lab's speed limit; names answers that are not probabilities; gives the NCHW hint
for a shape error in the first call; `show N` draws a test image. The CUDA
lab's kit runs the submission's kernels on the CPU (`lenet-lab emulate`)."""

import ast
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS
from harness.lab.judge.rules import assignment, timing
from harness.lab.term.handout import kit, student
from tests.conftest import ROOT

# Code that computes a forward pass (an answer), in any file of the kit.
FORWARD_MARKERS = ("im2col", "sliding_window_view", "einsum", "tensordot", "np.pad(", "conv2d", "correlate",
                   "class NumpyLeNet", "def conv", "def pool", "def forward")
TEXT = (".py", ".md", ".toml", ".json", ".cu", ".h", ".txt", ".cfg")


@pytest.fixture(scope="module")
def kits(tmp_path_factory):
    """{lab: (the zip, the unpacked kit folder)} for cpu_numpy and cuda."""
    dest = tmp_path_factory.mktemp("kits")
    out = {}
    done = subprocess.run([sys.executable, "-m", "harness", "lab", "kit", "cpu_numpy", "--out", str(dest)],
                          capture_output=True, text=True, timeout=120)  # as `make lab-kit` runs it
    assert done.returncode == 0 and "lab-kit-cpu_numpy.zip" in done.stdout, done.stderr
    for name in ("cpu_numpy", "cuda", "cpu_train"):
        path = dest / f"lab-kit-{name}.zip" if name == "cpu_numpy" else kit.build(assignment.load(name), dest)
        with zipfile.ZipFile(path) as archive:
            archive.extractall(dest / "unpacked")
        out[name] = (path, dest / "unpacked" / f"lab-kit-{name}")
    return out


@pytest.mark.parametrize("name", ["cpu_numpy", "cuda", "cpu_train"])
def test_kit_holds_no_answer(kits, name):
    path, _ = kits[name]
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        texts = {n: archive.read(n).decode() for n in names if n.endswith(TEXT)}
    assert all(n.startswith(f"lab-kit-{name}/") for n in names)
    parts = {part for n in names for part in n.split("/")}
    # no level package; lenet_lab is the check's command (`python -m lenet_lab check lenet.py`) alone
    assert not [p for p in parts if p.startswith("lenet_") and p != "lenet_lab"
                or p in ("examples", "examples-cuda", "tests")]
    assert sorted(n for n in names if "/lenet_lab/" in n) == [f"lab-kit-{name}/lenet_lab/{f}" for f in
                                                              ("__init__.py", "__main__.py")]
    for entry, text in texts.items():
        assert not [m for m in FORWARD_MARKERS if m in text], entry
        if entry.endswith(".py"):
            for node in ast.walk(ast.parse(text)):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not [m for m in modules if m.startswith("lenet") and m != "lenet_lab"], (entry, modules)
    # the level packages are named only in the registry's table (strings, never imported)
    assert [e for e, t in texts.items() if "lenet_numpy" in t] == [f"lab-kit-{name}/harness/registry.py"]
    py = sorted(n.split("/", 1)[1] for n in names if n.endswith(".py") and "/harness/" in n)
    assert py == sorted(p for p in kit.INTERFACE + kit.EMULATION if p.endswith(".py")
                        and (name == "cuda" or p not in kit.EMULATION))
    assert f"lab-kit-{name}/lenet.py" in names and f"lab-kit-{name}/README.md" in names


def test_kit_gate_is_the_graders(kits):
    """The lab file's thresholds, the first `images` test images and the oracle's own answers."""
    lab = assignment.load("cpu_numpy")
    data = student.load_kit(kits["cpu_numpy"][1] / "harness" / "_kit")
    assert data.lab["gate"] == {"images": lab.gate.images, "min_agree": lab.gate.min_agree,
                                "max_abs_diff": lab.gate.max_abs_diff}
    from harness.data import mnist
    from lenet_numpy.model import NumpyLeNet

    images = mnist.load("test")[0][:lab.gate.images]
    assert np.array_equal(data.images, images)
    # computed as the grader computes it (its batches: BLAS may round a batch of another size differently)
    oracle = timing.oracle_answers(NumpyLeNet(DEFAULT_WEIGHTS, dtype=lab.dtype), images, lab.dtype)
    assert np.array_equal(data.oracle, oracle)
    from harness.data import weights  # the kit's .npz holds the grader's arrays, bit for bit

    shipped, graders = weights.read(data.weights), weights.read(DEFAULT_WEIGHTS)
    assert all(np.array_equal(shipped[n][i], graders[n][i]) for n in graders for i in (0, 1))
    # the grader's comparison, and its rule: one image off, or one |dp| past the tolerance, fails
    close = data.oracle + 1e-5
    assert student.passes(data, timing.compare(close, data.oracle, 1e-4))
    far = close.copy()
    far[3] = np.roll(far[3], 1)
    assert not student.passes(data, timing.compare(far, data.oracle, 1e-4))


@pytest.mark.parametrize("example,passes", [("correct", True), ("wrong", False), ("template", False)])
def test_cuda_kit_emulates_the_kernels(kits, example, passes, capsys):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the CPU emulation needs it")
    data = student.load_kit(kits["cuda"][1] / "harness" / "_kit")
    folder = ROOT / "labs" / ("template-cuda" if example == "template" else f"examples-cuda/{example}")
    try:
        ok = student.emulate(folder / "lenet.py", data, images=12)
    except NotImplementedError:  # the starter's kernels are left to the student
        ok = False
    assert ok is passes
    assert "cannot check" in capsys.readouterr().out or not passes


def documented_command(folder) -> list[str]:
    """The kit README's first command block: `cd lab-kit-LAB`, then the check, as the student reads it."""
    text = (folder / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert block[0] == f"cd {folder.name}" and block[1].startswith("python -m ")
    return block[1].split()


@pytest.mark.slow  # a venv with NumPy alone, then the kit installed in it: about a minute
def test_kit_runs_with_numpy_alone_then_installs_and_checks(kits, tmp_path):
    """`python -m venv` without system site packages, NumPy alone from the package index: the
    kit's documented command, run from the unzipped kit, checks the correct example and passes it
    (no h5py: the weights are .npz). Then pip installs the kit's folder (./lab-kit-cpu_numpy) there,
    and `lenet-lab check` passes the correct example and fails the wrong one, printing no rank.
    The installs are this environment's pip run for the venv's Python (pip --python): the venv's
    own copy of pip (ensurepip) would only cost seconds to set up."""
    _, folder = kits["cpu_numpy"]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    subprocess.run([*pip, "numpy"], check=True, env=env, cwd=tmp_path, timeout=300)
    bare = subprocess.run([str(python), "-c", "import h5py"], capture_output=True, text=True, env=env)
    assert "No module named 'h5py'" in bare.stderr
    command = documented_command(folder)
    correct = ROOT / "labs" / "examples" / "correct" / "lenet.py"
    here = subprocess.run([str(python), *command[1:-1], str(correct)], capture_output=True, text=True,
                          cwd=folder, env=env, timeout=300)
    assert here.returncode == 0 and "Status: passes the gate" in here.stdout, here.stdout + here.stderr
    assert "numpy takes about" in here.stdout and "Peak memory of this check" in here.stdout
    _, train_folder = kits["cpu_train"]  # the training kit's check, with NumPy alone too
    for example, code in (("correct", 0), ("wrong", 1)):
        trains = subprocess.run([str(python), *documented_command(train_folder)[1:-1],
                                 str(ROOT / "labs" / "examples-train" / example / "lenet.py")],
                                capture_output=True, text=True, cwd=train_folder, env=env, timeout=300)
        assert trains.returncode == code, trains.stdout + trains.stderr
    silent = subprocess.run([str(python), *command[1:3]], capture_output=True, text=True, cwd=folder, env=env)
    assert silent.returncode == 2 and "usage" in silent.stderr  # never exit 0 printing nothing
    subprocess.run([*pip, str(folder)], check=True, env=env, cwd=tmp_path, timeout=300)
    found = subprocess.run([str(python), "-c", "import harness, tensorflow"], capture_output=True, text=True,
                           cwd=tmp_path, env=env)
    assert "No module named 'tensorflow'" in found.stderr  # a clean environment: only the kit's needs
    lenet_lab = tmp_path / "venv" / "bin" / "lenet-lab"
    given = {"correct": ROOT / "labs" / "examples" / "correct" / "lenet.py",
             "wrong": ROOT / "labs" / "examples" / "wrong"}  # a file, or the folder holding lenet.py
    runs = {name: subprocess.run([str(lenet_lab), "check", str(path)], capture_output=True, text=True,
                                 cwd=tmp_path, env=env, timeout=120) for name, path in given.items()}
    assert runs["correct"].returncode == 0, runs["correct"].stdout + runs["correct"].stderr
    assert "10000 of 10000 test images agree" in runs["correct"].stdout
    assert "Median time per image" in runs["correct"].stdout and " us " in runs["correct"].stdout
    assert runs["wrong"].returncode == 1 and "Status: wrong" in runs["wrong"].stdout
    for run in runs.values():
        assert "rank " not in run.stdout.lower().replace("ranks by", "")
        assert "lenet_numpy" not in run.stdout + run.stderr
    imports = ("from harness import weights; from harness.base import LeNet; from harness.registry import "
               "ImplSpec; import harness.data.weights as w; print(sorted(weights.read()) == sorted(w.SHAPES))")
    done = subprocess.run([str(python), "-c", imports], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.stdout.strip() == "True", done.stderr


def test_the_kit_warns_past_the_speed_limit_and_of_other_versions(kits, monkeypatch):
    """200x numpy, estimated here from the kit's reference time and this machine's probe, is past
    cpu_numpy's 100x: a WARNING naming the limit, before the gate runs."""
    from harness.lab.term.handout import doctor

    _, folder = kits["cpu_numpy"]
    kit = student.load_kit(folder / "harness" / "_kit")
    assert kit.weights.suffix == ".npz" and kit.lab["reference"]["label"] == "numpy"
    monkeypatch.setattr(doctor, "machine_probe", lambda: kit.lab["reference"]["probe_ns"])  # this machine = the kit's
    fast, slow = (doctor.speed_line(kit, x * kit.lab["reference"]["median_ns"]) for x in (2, 200))
    assert "about 2x numpy" in fast and "WARNING" not in fast
    assert "about 200x numpy" in slow and "WARNING: the lab's speed limit is 100x numpy" in slow
    assert doctor.version_warnings(kit) == []
    old = student.Kit({**kit.lab, "grader": {"python": "3.9.1", "numpy": "1.26.4"}}, kit.images, kit.oracle,
                      kit.weights)
    assert [w.split(",")[0] for w in doctor.version_warnings(old)] == [
        "WARNING: the grader runs numpy 1.26.4", "WARNING: the grader runs python 3.9.1"]


def test_logits_a_shape_error_and_show(kits, capsys):
    _, folder = kits["cpu_numpy"]
    kit = student.load_kit(folder / "harness" / "_kit")
    logits = np.log(kit.oracle[:20] + 1e-9) + 3.0  # the same argmax, not probabilities
    gate = student.gate_numbers(kit, logits, 20)
    assert not gate["probabilities"] and "apply softmax" in student.gate_line(kit, gate)
    assert gate["first_bad"] == list(range(5))
    from harness.lab.term.handout import doctor

    assert "NCHW" in doctor.shape_hint(ValueError("cannot reshape array of size 5184 into shape (864,30)"))
    assert doctor.shape_hint(KeyError("conv1")) == ""
    doctor.show(kit, 3, kit.oracle[3])
    out = capsys.readouterr().out
    assert f"test image 3: the reference says {int(kit.oracle[3].argmax())}" in out and "@" in out


@pytest.mark.parametrize("example,passes,says", [
    ("correct", True, "Status: passes the gate"),
    ("wrong", False, "fc2's gradient is wrong"),
])
def test_the_training_kit_runs_the_grader_s_steps_from_its_folder(kits, example, passes, says):
    """cpu_train's kit, run from its unzipped folder by its documented command: the grader's three
    steps from the shared initial weights (its .npz), against the oracle's shipped answers, then each
    layer's backward on its own (the stages); a step that passes is timed."""
    _, folder = kits["cpu_train"]
    command = documented_command(folder)
    assert command[:3] == ["python", "-m", "lenet_lab"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}  # the kit's harness, not ours
    done = subprocess.run([sys.executable, *command[1:-1], str(ROOT / "labs" / "examples-train" / example)],
                          capture_output=True, text=True, cwd=folder, env=env, timeout=300)
    assert done.returncode == (0 if passes else 1), done.stdout + done.stderr
    assert says in done.stdout and "3 SGD steps of 32 training images" in done.stdout
    assert ("Median time per step of 32 images" in done.stdout and "numpy takes about" in done.stdout) is passes
    assert ("5 of 5 right" if passes else "4 of 5 right") in done.stdout
    assert ("- fc2: wrong (0 of 12 points)" in done.stdout) is not passes


def test_the_training_kit_s_readme_is_written_for_training(kits):
    """Its own README: the commands, the rules the reference keeps, the stages' partial credit and
    what a failed stage looks like; nothing of inference's (predict, test images, trained weights)."""
    _, folder = kits["cpu_train"]
    readme = (folder / "README.md").read_text()
    for said in ("python -m lenet_lab check", "averaged over the batch", "exactly 0", "row-major",
                 "NHWC", "HWIO", "before", "backward(name, x, upstream, kernel, bias)", "stage(name, x)",
                 "- fc2: wrong (0 of 12 points)", "factor of the batch size"):
        assert said in readme, said
    for inference in ("predict", "harness.base.LeNet", "test images", "trained weights"):
        assert inference not in readme, inference
    data = student.load_kit(folder / "harness" / "_kit")
    assert data.lab["stages"] == [[name, 12.0] for name in ("fc3", "fc2", "fc1", "conv2", "conv1")]
    assert data.weights.name == "lenet5_init.weights.npz"
