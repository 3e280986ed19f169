"""The class-scale bench's mix (harness.lab.term.bench): one student in TRAINING_SHARE hands in the
training lab, made from its own examples, and docs/slurm.md's "Class-scale timing" says so; the
printed lines give each lab's class, the projection pays each lab's set-up. (The class's kinds and
the one-row check: tests/test_slurm_grading.py.)"""

from harness.lab.term import bench
from tests.conftest import ROOT

SLURM = (ROOT / "docs" / "slurm.md").read_text()


def test_the_mix_holds_training_submissions_and_the_docs_say_which(tmp_path):
    assert bench.mix("cpu_numpy", 100) == [("cpu_numpy", 80, bench.EXAMPLES),
                                           ("cpu_train", 20, bench.TRAINING_EXAMPLES)]
    assert bench.mix("cpu_numpy", 9) == [("cpu_numpy", 9, bench.EXAMPLES)]  # too small to split
    assert bench.mix("cpu_train", 30) == [("cpu_train", 30, bench.TRAINING_EXAMPLES)]
    section = " ".join(SLURM.split("## Class-scale timing", 1)[1].split("\n## ", 1)[0].split())
    (_, inference, _), (_, training, _) = bench.mix("cpu_numpy", 100)
    assert f"one student in {bench.TRAINING_SHARE} hands in the training lab `cpu_train`" in section
    assert f"a class of 100 is {inference} `cpu_numpy` and {training} `cpu_train` submissions" in section
    help_text = (ROOT / "harness" / "lab" / "term" / "cli.py").read_text()  # `lab bench --lab`'s help
    assert f"one student in {bench.TRAINING_SHARE} hands in {bench.TRAINING} (a class of {bench.MIXED_FROM}" \
        in help_text
    expected = bench.make_class(tmp_path / "train", training, bench.TRAINING_EXAMPLES)
    assert {name.split("-")[0] for name in expected} == {"honest", "wrong", "slow", "hang", "crash"}
    assert "class WrongTrainer(Trainer)" in (tmp_path / "train" / "wrong-000" / "lenet.py").read_text()
    assert "class CorrectTrainer(Trainer)" in (tmp_path / "train" / "honest-000" / "lenet.py").read_text()


def test_the_lines_give_each_lab_and_project_each_lab_s_set_up():
    part = {"wall_s": 100.0, "cpu_s": 50.0, "graded_s": 90.0, "setup_s": 10.0, "problems": [],
            "unexpected": {}}
    labs = {"cpu_numpy": {**part, "students": 8, "statuses": {"ok": 8}},
            "cpu_train": {**part, "students": 2, "statuses": {"ok": 1, "wrong": 1}}}
    result = {"students": 10, "slurm": False, "per_task": 1, "wall_s": 200.0, "cpu_s": 100.0, "graded_s": 180.0,
              "setup_s": 20.0, "statuses": {"ok": 9, "wrong": 1}, "unexpected": {}, "problems": [], "labs": labs}
    # 8 students in 1 task of 10 (90 + 10 s), and 2 in 1 (90 + 10 s): each lab's grader sets up
    assert bench.projection(result, 1, 10) == 200.0 and bench.projection(result, 2, 10) == 100.0
    printed = bench.lines(result, nodes=(1,), per_task=10)
    assert printed[0].startswith("class of 10 (8 cpu_numpy, 2 cpu_train) on this machine, one grader: 200 s")
    assert 'cpu_train: 2 in 100 s, 50.00 s per submission; statuses {"ok": 1, "wrong": 1}' in printed
