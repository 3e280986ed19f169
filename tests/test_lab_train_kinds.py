"""The training lab as students meet it (issue 91): a class graded for real in the sandbox, each
submission a copy of labs/examples-train/correct with one realistic fault, and the kit's check beside
the grader. Whatever stops the gate (a weight of the wrong shape, a crash), the stages are asked (of
a fresh worker when the gate ended the last) and their points given; a forward bug is named as one
(the loss is judged before the weights), and by its layer where the submission has `stage`; ReLU's
gradient at exactly 0 taken as 1 is accepted and said so; a backward whose answers are the batch
size times the reference's, with a right step, passes with the gate's points, its stages named as
off by that factor. No feedback holds an operating-system term or a server path. The kit, installed
from its zip into a fresh virtual environment, agrees with the grader on every example submission of
every CPU lab, and the command the feedback names runs there. The lab's own three examples are
gated, named and ranked in the same class: the suite grades the training lab once."""

import os
import re
import subprocess
import sys
import zipfile

import pytest

from harness.lab.judge import files
from harness.lab.judge.rules import assignment, sgd, stages
from harness.lab.term.handout import kit
from harness.lab.term.marks import points
from tests.conftest import ROOT
from tests.lab_grading import grade_class

TRAIN = (ROOT / "labs" / "cpu_train.toml").read_text().replace("calls = 60 ", "calls = 12 ").replace(
    "rounds = 6", "rounds = 3").replace("warmup = 5", "warmup = 2")
NUMPY = (ROOT / "labs" / "cpu_numpy.toml").read_text().replace("calls = 300 ", "calls = 12 ").replace(
    "rounds = 10", "rounds = 3").replace("warmup = 20", "warmup = 2").replace(
    'references = ["numpy", "floor"]', 'references = ["numpy"]')
CORRECT = (ROOT / "labs" / "examples-train" / "correct" / "lenet.py").read_text()


def variant(*edits: tuple[str, str]) -> str:
    """The correct example with each (old, new) edit made; each old text must be there."""
    text = CORRECT
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


FLATTEN_NCHW = (("return p.reshape(len(p), -1)", "return p.transpose(0, 3, 1, 2).reshape(len(p), -1)"),
                ("return d.reshape(shape)", "return (d.reshape(shape[0], shape[3], shape[1], shape[2])"
                                            ".transpose(0, 2, 3, 1) if len(shape) == 4 else d.reshape(shape))"))
VARIANTS = {
    # weights() hands fc1's bias back as a row (1, 120); every backward right
    "rowbias": variant(("b.copy()) for name, (k, b) in self.w.items()}",
                        "b.reshape(1, -1) if name == 'fc1' else b.copy()) for name, (k, b) in self.w.items()}")),
    # fc1's rows in the wrong flatten order, forward and backward alike; with and without `stage`
    "flatten": variant(*FLATTEN_NCHW),
    "flatten_nostage": variant(*FLATTEN_NCHW, ("    def stage(self, name, x):", "    def stage_(self, name, x):")),
    # ReLU's gradient at exactly 0 taken as 1 (a public library's choice), in the step and the stages
    "relu_at_zero": variant(("(z2 > 0)", "(z2 >= 0)"), ("(z1 > 0)", "(z1 >= 0)"), ("(z > 0)", "(z >= 0)")),
    # a library whose backward sums over the batch: its train_step divides by N, its backward() does not
    "batch_scaled": variant(("    def backward(self, name, x, upstream, kernel, bias):",
                             "    def backward(self, name, x, upstream, kernel, bias):\n"
                             "        return tuple(None if g is None else g * len(x) for g in\n"
                             "                     self.mean_backward(name, x, upstream, kernel, bias))\n\n"
                             "    def mean_backward(self, name, x, upstream, kernel, bias):")),
    # its second step raises: the gate's exchange ends the worker
    "crash": variant(("    def train_step(self, images, labels):\n",
                      "    def train_step(self, images, labels):\n"
                      "        self.steps = getattr(self, 'steps', 0) + 1\n"
                      "        if self.steps == 2:\n"
                      "            raise RuntimeError('the library lost its cache')\n")),
}
EXAMPLES = {"train": ["correct", "wrong", "slow"], "numpy": ["correct", "wrong", "slow"]}


@pytest.fixture(scope="module")
def train_class(tmp_path_factory):
    """cpu_train graded (fewer timed steps): its examples and the variants."""
    given = {**{n: ROOT / "labs" / "examples-train" / n for n in EXAMPLES["train"]}, **VARIANTS}
    return grade_class(tmp_path_factory.mktemp("train"), TRAIN, given)


@pytest.mark.slow  # nine training submissions graded in the sandbox: about three minutes
def test_every_kind_of_failure_gets_its_stages_and_its_words(train_class):
    out, rows = train_class
    lab = assignment.parse(TRAIN, "cpu_train.toml")
    feedback = {n: (out / "feedback" / f"{n}.md").read_text() for n in rows}
    score = {n: points.score(row, lab.grade, None, None) for n, row in rows.items()}
    right = [name for name, _ in lab.stages]

    def ok_stages(name: str) -> list[str]:
        return [v["stage"] for v in rows[name]["stages"] if v["verdict"] == "ok"]

    rowbias = rows["rowbias"]  # stopped by a shape: its stages' points, 60 of 100
    assert rowbias["status"] == "wrong" and "weights()['fc1']: shape (1, 120), expected (120,)" in rowbias["reason"]
    assert ok_stages("rowbias") == right and score["rowbias"].gate == 60 and score["rowbias"].total == 60
    assert "must return every kernel and bias in its own shape" in feedback["rowbias"]
    assert "(12 of 12 points)" in feedback["rowbias"]

    crash = rows["crash"]  # its worker ended by the gate: the stages asked of a fresh one
    assert crash["status"] == "crashed" and ok_stages("crash") == right and score["crash"].gate == 60
    assert "a fresh worker, started for the stages" in (out / "results" / "crash" / "worker.log").read_text()

    flatten = rows["flatten"]  # a forward bug: named by its loss, before any weight, and by its layer
    assert flatten["status"] == "wrong" and flatten["gate"]["kind"] == sgd.FORWARD
    assert "the forward pass or the loss is wrong" in flatten["reason"]
    departs = next(v for v in flatten["forward"] if v["verdict"] != "ok")
    assert departs["stage"] == "fc1" and departs["layout"] == stages.FLATTEN_NCHW
    assert "the forward pass or the loss" in feedback["flatten"] and "departs is **fc1**" in feedback["flatten"]
    assert "the forward pass or the loss" in feedback["flatten_nostage"]
    assert "without `stage(name, x)`" in feedback["flatten_nostage"]
    assert "**fc1**" not in feedback["flatten_nostage"].split("Stage by stage")[0]

    relu = rows["relu_at_zero"]  # accepted, and said so
    assert relu["status"] == "ok" and relu["gate"]["passes"] and relu["gate"]["relu_at_zero"] == 1
    assert ok_stages("relu_at_zero") == right
    assert "exactly 0 is 1 where the reference takes 0: both are accepted" in feedback["relu_at_zero"]

    scaled = rows["batch_scaled"]  # a right step: ok, the gate's points; its stages off by 32, not counted
    assert scaled["status"] == "ok" and score["batch_scaled"].gate == lab.grade.gate_points
    assert not score["batch_scaled"].staged and ok_stages("batch_scaled") == []
    assert "a factor of 32, the batch size" in feedback["batch_scaled"]
    assert "do not count" in feedback["batch_scaled"] and "of 12 points" not in feedback["batch_scaled"]

    assert rows["wrong"]["gate"]["kind"] == sgd.BACKWARD_KIND and "fc2's gradient is wrong" in rows["wrong"]["reason"]
    assert "Next step: Your loss is right and the named layer's weights are not" in feedback["wrong"]
    for name, text in feedback.items():  # in a student's words: no server's terms or folders
        assert "cgroup" not in text.lower() and "/sys/" not in text and "/proc/" not in text, name
        assert str(out.parent) not in text and str(ROOT) not in text, name
        assert "python -m harness" not in text, name
    assert all("python -m lenet_lab check lenet.py" in feedback[n] for n in ("rowbias", "flatten", "wrong"))
    grading = (out / "grading.json").read_text()
    assert "lenet5_init.weights.h5" in grading and "lenet5_mnist" not in grading


@pytest.mark.slow
def test_the_training_examples_are_gated_named_and_ranked(train_class):
    """The lab's three examples in the same class: the correct one passes and is ranked, the one whose
    backward pass leaves out fc2's ReLU mask fails naming fc2 (every other layer's backward, asked on
    its own, keeps its points), the one that backpropagates image by image ranks slower."""
    out, rows = train_class
    lab = assignment.parse(TRAIN, "cpu_train.toml")
    assert "calls = 12 " in TRAIN and lab.measure.calls == 12  # the shipped lab's 60, fewer: enough to rank
    assert rows["correct"]["status"] == "ok" and rows["slow"]["status"] == "ok", \
        {n: (r["status"], r["reason"]) for n, r in rows.items()}
    assert rows["correct"]["gate"]["passes"] and len(rows["correct"]["gate"]["steps"]) == 3
    correct, slow = (rows[n]["ratios"]["numpy"] for n in ("correct", "slow"))
    # both ranked with an interval (how much slower is the benchmark's to say, not a test's)
    assert all(0 < r["ci95_low"] <= r["ci95_high"] for r in (correct, slow)), (correct, slow)
    wrong = rows["wrong"]
    assert wrong["status"] == "wrong" and "fc2's gradient is wrong" in wrong["reason"]
    # its backward handed the reference's upstream gradients: fc2 alone is wrong (the sandbox's
    # exchange; the stages' rule is tests/test_lab_backprop.py's)
    assert [v["stage"] for v in wrong["stages"] if v["verdict"] != "ok"] == ["fc2"]
    assert points.score(wrong, lab.grade, None, None).gate == 48
    board = (out / "LEADERBOARD.md").read_text()
    assert board.index("correct") < board.index("slow") and "3 SGD steps of 32 training images" in board
    feedback = (out / "feedback" / "wrong.md").read_text()
    assert "the first that is not: **fc2**" in feedback and "fc2: wrong (0 of 12 points), largest difference" \
        in feedback


def test_lines_of_code_count_the_files_lenet_py_imports(tmp_path):
    """A copied library's unused files, a setup.py and an unused module do not count; the package
    files lenet.py reaches, directly or through a relative import, do."""
    (tmp_path / "mylib" / "unused").mkdir(parents=True)
    (tmp_path / "lenet.py").write_text("import numpy\nfrom mylib.layers import dense\n")
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (tmp_path / "mylib" / "layers.py").write_text("from .ops import matmul\n\ndense = matmul\n")
    (tmp_path / "mylib" / "ops.py").write_text("def matmul(a, b):\n    return a @ b\n")
    (tmp_path / "mylib" / "unused" / "cnn.py").write_text("x = 1\n" * 50)
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "helper.py").write_text("y = 2\n" * 30)
    found = files.needed(tmp_path, files.listing(tmp_path)[0], "lenet.py")
    assert [str(p) for p in found] == ["lenet.py", "mylib/__init__.py", "mylib/layers.py", "mylib/ops.py"]
    counted = files.count_loc(tmp_path, "lenet.py")
    assert counted == {"loc": 6, "files": 4}, counted


def kit_venv(tmp_path, name: str):
    """(the unzipped kit's folder, a fresh venv's python with the kit installed from its zip)."""
    zipped = kit.build(assignment.load(name), tmp_path / "dist")
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(tmp_path / "unpacked")
    base = getattr(sys, "_base_executable", sys.executable)  # the interpreter under our venv: NumPy there
    # without its own pip: this environment's pip installs for the venv's Python (pip --python), as
    # test_lab_kit does; the venv's copy (ensurepip) would cost 3-4 s a venv and is not what is tested
    subprocess.run([base, "-m", "venv", "--system-site-packages", "--without-pip", str(tmp_path / "venv")],
                   check=True, timeout=300)
    python = tmp_path / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           str(zipped)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "unpacked" / f"lab-kit-{name}", python, env


def kit_says(python, folder, env, submission) -> tuple[int, str]:
    """The kit's check of one submission, as the feedback names it: from the kit's folder."""
    done = subprocess.run([str(python), "-m", "lenet_lab", "check", str(submission)], capture_output=True,
                          text=True, cwd=folder, env=env, timeout=600)
    assert "No module named" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


@pytest.mark.slow  # two kits installed in fresh venvs, and cpu_numpy's examples graded: minutes
def test_the_kit_installed_from_its_zip_agrees_with_the_grader(train_class, tmp_path):
    out, rows = train_class
    folder, python, env = kit_venv(tmp_path / "train", "cpu_train")
    named = re.search(r"`python -m lenet_lab check (\S+)`", (out / "feedback" / "wrong.md").read_text())
    assert named and named[1] == "lenet.py"  # the command the feedback names, run as named
    for name, row in rows.items():
        given = tmp_path / "train" / "given" / name
        given.mkdir(parents=True)
        source = (ROOT / "labs" / "examples-train" / name / "lenet.py").read_text() if name in EXAMPLES["train"] \
            else VARIANTS[name]
        (given / "lenet.py").write_text(source)
        code, said = kit_says(python, folder, env, given / named[1])
        assert code == (0 if row["status"] in points.PASSED_GATE else 1), (name, row["status"], said)
        kit_stages = re.findall(r"^- (\w+): (ok|wrong|missing|error|not graded)", said, re.M)
        assert kit_stages == [(v["stage"], v["verdict"]) for v in row["stages"]], (name, said)
    installed = subprocess.run([str(tmp_path / "train" / "venv" / "bin" / "lenet-lab"), "check",
                                str(ROOT / "labs" / "examples-train" / "correct")], capture_output=True, text=True,
                               env=env, cwd=tmp_path, timeout=600)
    assert installed.returncode == 0 and "Status: passes the gate" in installed.stdout, installed.stderr
    (tmp_path / "numpy-class").mkdir()
    numpy_out, numpy_rows = grade_class(tmp_path / "numpy-class", NUMPY,
                                        {n: ROOT / "labs" / "examples" / n for n in EXAMPLES["numpy"]})
    folder, python, env = kit_venv(tmp_path / "numpy", "cpu_numpy")
    for name, row in numpy_rows.items():
        code, said = kit_says(python, folder, env, ROOT / "labs" / "examples" / name / "lenet.py")
        assert code == (0 if row["status"] in points.PASSED_GATE else 1), (name, row["status"], said)
    assert "python -m lenet_lab check lenet.py" in (numpy_out / "feedback" / "wrong.md").read_text()
