"""A kind added in one module (harness.lab.judge.rules.kinds.conv2_backward, issue 92's newcomer's
trial): a lab whose students write conv2's backward only (labs/cpu_conv2_backward.toml), found by its
[lab] task with no list edited, its right and wrong examples graded end to end in the sandbox
through `lab grade`: the right one passes its gate and is timed beside numpy's own conv2 backward,
the wrong one (its dkernel in PyTorch's order) fails with feedback naming dkernel and the layout."""

import pytest

from harness.errors import HarnessError
from harness.lab.judge.rules import assignment, kinds
from harness.lab.judge.rules.kinds import conv2_backward
from tests.conftest import ROOT
from tests.lab_grading import grade_class

SHIPPED = (ROOT / "labs" / "cpu_conv2_backward.toml").read_text()
# the shipped lab with fewer timed calls (60 over 6 rounds there)
SMALL = SHIPPED.replace("calls = 60 ", "calls = 12 ").replace("rounds = 6", "rounds = 3").replace(
    "warmup = 5", "warmup = 2")


def test_the_kind_is_found_by_its_task_with_no_list_edited():
    lab = assignment.load("cpu_conv2_backward")
    assert "conv2_backward" in kinds.names() and lab.kind is conv2_backward.KIND
    assert lab.starter == ROOT / "labs" / "template-conv2_backward" and lab.stages == ()
    assert "calls = 12 " in SMALL and assignment.parse(SMALL, "small.toml").measure.calls == 12
    with pytest.raises(HarnessError, match=r"t.toml \[lab\]: references: expected \['numpy'\]"):
        assignment.parse('[lab]\ntask = "conv2_backward"\nreferences = ["numpy", "c"]\n', "t.toml")
    with pytest.raises(HarnessError, match=r"has no kit yet"):
        conv2_backward.gate_data(lab, ROOT / "weights")


@pytest.mark.slow  # two submissions graded in the sandbox: about half a minute
def test_the_conv2_backward_examples_are_gated_named_and_ranked(tmp_path):
    out, rows = grade_class(tmp_path, SMALL, {n: ROOT / "labs" / "examples-conv2_backward" / n
                                              for n in ("correct", "wrong")})
    correct, wrong = rows["correct"], rows["wrong"]
    assert correct["status"] == "ok", (correct["status"], correct["reason"])
    assert correct["gate"]["passes"] and correct["gate"]["verdict"] == "ok"
    ratio = correct["ratios"]["numpy"]
    assert 0 < ratio["ci95_low"] <= ratio["ci95_high"], ratio  # ranked, with an interval
    assert len(correct["times_ns"]["submission"]) == 3  # its rounds
    assert wrong["status"] == "wrong" and not wrong["gate"]["passes"], (wrong["status"], wrong["reason"])
    assert "dkernel" in wrong["reason"] and "PyTorch's (out, in, kh, kw) order" in wrong["reason"]
    feedback = (out / "feedback" / "wrong.md").read_text()
    assert "Gate (conv2's backward" in feedback and "failed: its dkernel differs from the reference's" in feedback
    assert "(kh, kw, in, out)" in feedback and "the kernel's layout (5, 5, 6, 16), HWIO" in feedback
    board = (out / "LEADERBOARD.md").read_text()
    assert "correct" in board and "conv2's backward" in board
