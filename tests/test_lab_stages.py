"""Partial credit by stage (harness.lab.judge.rules.stages): a lab with [stages] asks each layer of a
submission on the oracle's input to it; the example with fc1's NCHW flatten gets every other
stage's points, and its feedback names fc1 and the NCHW flatten (graded in tests/test_lab_real.py,
beside real students' mistakes). A lab without stages grades as before (tests/test_lab.py). The
oracle's stages come from harness.lab.judge.rules.oracle (grader only); the rest needs NumPy alone."""

import pytest

from harness import DEFAULT_WEIGHTS
from harness.data import mnist
from harness.errors import HarnessError
from harness.lab.judge.rules import assignment, stages
from harness.lab.judge.rules import oracle as answers
from harness.lab.term.marks import points

# every inference stage at 5 points, in the file's order reversed: read back in network order
LAB = "[stages]\n" + "".join(f"{name} = 5\n" for name in reversed(stages.INFERENCE))


@pytest.fixture(scope="module")
def oracle():
    return answers.forward_stages(DEFAULT_WEIGHTS, mnist.load("test")[0][:4], "float32")


def test_a_stage_in_nchw_and_fc1_flattening_nchw_are_named(oracle):
    conv = oracle["conv2"]
    tol = stages.tolerance(1e-4, conv.output)
    assert stages.judge("conv2", conv.output.copy(), conv, tol)["verdict"] == "ok"
    nchw = stages.judge("conv2", conv.output.transpose(0, 3, 1, 2).copy(), conv, tol)
    assert nchw["verdict"] == "wrong" and nchw["layout"] == stages.OUTPUT_NCHW and "shape" in nchw["reason"]
    fc1 = oracle["fc1"]
    flat = stages.judge("fc1", fc1.mistakes[stages.FLATTEN_NCHW], fc1, stages.tolerance(1e-4, fc1.output))
    assert flat["verdict"] == "wrong" and flat["layout"] == stages.FLATTEN_NCHW and flat["max_abs_diff"] > 0.1
    assert "fc1: wrong (0 of 10 points), largest difference" in stages.sentence(flat, 10)


def test_the_stages_table_is_checked(tmp_path):
    with pytest.raises(HarnessError, match=r"\[stages\]: unknown stage\(s\) \['relu'\]"):
        assignment.parse("[stages]\nrelu = 3\n", "x.toml")
    with pytest.raises(HarnessError, match="at most \\[grade\\] gate_points"):
        assignment.parse("[stages]\nconv1 = 50\nfc1 = 50\n", "x.toml")
    lab = assignment.parse(LAB, "staged.toml")
    assert [name for name, _ in lab.stages] == list(stages.INFERENCE)


def test_stage_points_of_a_row():
    grade = assignment.parse(LAB, "staged.toml").grade
    row = {"status": "wrong", "stages": [{"stage": "conv1", "verdict": "ok", "points": 10},
                                         {"stage": "fc1", "verdict": "wrong", "points": 10},
                                         {"stage": "fc2", "verdict": "ok", "points": 5}]}
    score = points.score(row, grade, None, None)
    assert score.gate == 15 and "15 for the stages it got right" in score.note
    assert points.score({"status": "wrong"}, grade, None, None).gate == 0
