"""The training study: train-mode study files, train steps timed by the same worker and rounds,
convergence runs, and a loss that goes NaN or stops going down as a `diverged` row."""

import subprocess
import sys

import pytest

from harness.errors import HarnessError
from harness.figures import training as training_figure
from harness.measure.plan import study
from harness.measure.store import results
from harness.report.claims import rundata
from harness.report.sections import training_section
from tests.conftest import ROOT

TRAIN_STUDY = """
[study]
name = "training"
mode = "train"
[measure]
calls = 6
rounds = 2
warmup = 1
batch_sizes = [16]
converge_images = 640
converge_seconds = 60
converge_batch_size = 16
[[cells]]
implementation = "numpy"
[[cells]]
implementation = "numpy"
threads = [2]
"""
MISBEHAVING = """
[[cells]]
implementation = "tests.fake_trainers:NanTrainer"
[[cells]]
implementation = "tests.fake_trainers:FlatTrainer"
"""


def test_train_mode_takes_the_training_variants_and_threads_make_cells_of_their_own():
    plan = study.parse(TRAIN_STUDY, "t.toml")
    assert plan.mode == "train"
    ids = [c.id for c in plan.cells]
    assert ids == ["numpy/default/cpu/b16/float32", "numpy/default/cpu/b16/float32/t2"]
    assert plan.cells[0].group != plan.cells[1].group  # threads are set before import: two workers
    assert all(c.mode == "train" for c in plan.cells)


@pytest.mark.parametrize("text,message", [
    ('mode = "fit"', "mode: unknown value 'fit'; allowed: ['inference', 'train']"),
    ('mode = "train"\n[[cells]]\nimplementation = "null"', "null has no training step; levels that train: "),
    ('mode = "train"\n[[cells]]\nimplementation = "tf"\nvariants = ["xla"]', "variants: unknown value 'xla'"),
])
def test_bad_train_studies_name_the_field(text, message):
    head, _, cells = text.partition("\n[[cells]]")
    source = f'[study]\nname = "t"\n{head}\n' + (f"[[cells]]{cells}" if cells else
                                                   '[[cells]]\nimplementation = "numpy"\n')
    with pytest.raises(HarnessError, match=message.replace("[", r"\[").replace("]", r"\]")):
        study.parse(source, "t.toml")


@pytest.fixture(scope="module")
def train_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train")
    path = folder / "training.toml"
    path.write_text(TRAIN_STUDY + MISBEHAVING)
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(path), "--out", str(folder / "out"),
                           "--run-id", "r"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = results.read_rows(folder / "out" / "training" / "r")
    return folder / "out", {r["cell_id"]: r for r in rows if r["kind"] == "cell"}


def test_train_steps_are_timed_and_the_default_cell_converges(train_run):
    _, cells = train_run
    oracle = cells["numpy/default/cpu/b16/float32"]
    assert oracle["status"] == "ok" and len(oracle["rounds_ns"]) == 2
    assert sum(len(r) for r in oracle["rounds_ns"]) == 6
    c = oracle["convergence"]
    assert c["images"] == 640 and c["steps"] == 40
    assert c["loss_last_tenth"] < 0.95 * c["loss_first_tenth"] and 0.1 < c["test_accuracy"] <= 1.0
    threaded = cells["numpy/default/cpu/b16/float32/t2"]
    assert threaded["status"] == "ok" and threaded["convergence"] is None  # one run per level


def test_a_nan_loss_is_a_diverged_row_not_a_crash(train_run):
    _, cells = train_run
    nan = cells["tests.fake_trainers:NanTrainer/default/cpu/b16/float32"]
    assert nan["status"] == "diverged" and "loss became nan at step" in nan["reason"]


def test_a_loss_that_does_not_go_down_is_diverged(train_run):
    _, cells = train_run
    flat = cells["tests.fake_trainers:FlatTrainer/default/cpu/b16/float32"]
    assert flat["status"] == "diverged" and "did not go down" in flat["reason"]
    assert flat["rounds_ns"]  # its timed steps were kept


def test_the_training_section_reads_the_rows(train_run, tmp_path):
    out, _ = train_run
    runs, frame = rundata.load(out)
    lines = training_section.section(frame)
    text = "\n".join(lines)
    assert "fig10_training.png" in text and "numpy/default" in text
    conv = training_section.convergence_table(frame)
    assert "diverged" in conv and "did not go down" in conv
    assert training_figure.fig_training(rundata.load_report(out, []), tmp_path / "f.png").is_file()
