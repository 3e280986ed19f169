"""The training gate's rules in process, without a sandbox (harness.lab.judge.rules.sgd and oracle,
the feedback's words): a step's loss is judged before its weights, so a forward bug is named as one;
a step off by the batch size is named by that factor; the oracle's steps with ReLU's gradient at 0
taken as 1 pass too, and say so; weights() of the wrong shapes is refused by the kit in the grader's
worker's own words; the feedback shows stage points only where they count, advises by kind of
failure, and holds no operating-system term or server path. The same faults graded for real in the
sandbox, and the kit beside them: tests/test_lab_train_kinds.py."""

import numpy as np
import pytest

from harness.data import mnist, weights
from harness.data.init_weights import DEFAULT_INIT
from harness.errors import Failure
from harness.lab.box import tasks
from harness.lab.judge.rules import assignment, oracle, sgd
from harness.lab.term.handout import advice
from harness.lab.term.marks import feedback
from tests.conftest import ROOT

LAB = assignment.load("cpu_train")


@pytest.fixture(scope="module")
def chains():
    """(start, batches, the oracle's losses, its weights after each step, alt's (losses, weights))."""
    start = {n: weights.Layer(k.astype(np.float64), b.astype(np.float64))
             for n, (k, b) in weights.read(DEFAULT_INIT).items()}
    images, labels = mnist.load("train")
    batches = [(images[i:i + 32], labels[i:i + 32].astype(np.int64)) for i in range(0, 96, 32)]
    losses, after = oracle.steps(start, batches)
    return start, batches, losses, after, oracle.steps(start, batches, at_zero=1)


def gate(found, losses, chains_):
    start, _, want_losses, after, alt = chains_
    return sgd.gate_numbers(losses, found, want_losses, after, 1e-4, 1e-4, alt, start, 32)


def test_the_loss_is_judged_before_the_weights(chains):
    _, _, losses, after, _ = chains
    assert gate(after, losses, chains)["passes"]
    moved = [{n: weights.Layer(k + 0.01, b) for n, (k, b) in w.items()} for w in after]  # every layer off
    forward = gate(moved, [v * 1.001 for v in losses], chains)  # and the loss too: the forward is named
    assert not forward["passes"] and forward["kind"] == sgd.FORWARD
    assert forward["first_failure"].startswith("step 1: the loss") and "the forward pass or the loss" in \
        forward["first_failure"]
    backward = gate(moved, losses, chains)
    assert backward["kind"] == sgd.BACKWARD_KIND and "fc3's gradient is wrong" in backward["first_failure"]


def test_a_step_off_by_the_batch_size_is_named_so(chains):
    start, _, losses, after, _ = chains
    summed = {n: weights.Layer(start[n].kernel + 32 * (k - start[n].kernel),
                               start[n].bias + 32 * (b - start[n].bias)) for n, (k, b) in after[0].items()}
    result = gate([summed, *after[1:]], losses, chains)
    assert result["kind"] == sgd.SCALE and "a factor of 32, the batch size" in result["first_failure"]
    assert advice.kind("wrong", result["first_failure"], result) == "scale"


def test_relu_s_gradient_at_zero_taken_as_one_passes_and_is_said(chains):
    _, _, losses, after, (alt_losses, alt) = chains
    assert max(sgd.layer_diffs(alt[0], after[0]).values()) > 1e-4  # the rules' steps differ at these weights
    assert abs(alt_losses[2] - losses[2]) / losses[2] > 1e-4  # and so do the losses after them
    either = gate(alt, alt_losses, chains)
    assert either["passes"] and either["relu_at_zero"] == 1
    assert "exactly 0 is 1 where the reference takes 0: both are accepted" in sgd.gate_sentence(either, "r")
    assert gate(after, losses, chains)["relu_at_zero"] == 0


def test_the_kit_refuses_a_row_bias_in_the_grader_s_words():
    class RowBias:
        def weights(self):
            w = weights.read(DEFAULT_INIT)
            return {**w, "fc1": weights.Layer(w["fc1"].kernel, w["fc1"].bias.reshape(1, -1))}

    with pytest.raises(Failure) as graders:
        tasks.weights(None, RowBias())
    assert graders.value.reason == sgd.shape_error(RowBias().weights()) == \
        "weights()['fc1']: shape (1, 120), expected (120,)"
    assert sgd.shape_error(weights.read(DEFAULT_INIT)) is None
    assert advice.kind("wrong", graders.value.reason, None) == "shape"


def test_feedback_in_a_student_s_words():
    said = feedback.student_words("past the memory limit (killed by the kernel for its cgroup); read from "
                                  "/sys/fs/cgroup/lab/w0/memory.peak; see /work/wt/harness/lab/x.py")
    assert "cgroup" not in said.lower() and "/sys/" not in said and "/work/wt" not in said and "x.py" in said
    row = {"status": "ok", "stages": [{"stage": "fc3", "verdict": "wrong", "points": 12,
                                       "layout": "dx off the reference's by a factor of 32, the batch size"}]}
    lines = "\n".join(feedback.stage_lines(row, LAB))
    assert "do not count" in lines and "points)" not in lines and "factor of 32" in lines
    wrong = "\n".join(feedback.stage_lines({**row, "status": "wrong"}, LAB))
    assert "(0 of 12 points)" in wrong and "do not count" not in wrong
    for kind in advice.ADVICE:
        assert "{" not in advice.next_step(kind, "cpu_train", "lenet.py")
    assert feedback.next_step({"status": "too-slow"}, LAB).startswith("Time one train_step")
    assert "python -m lenet_lab check lenet.py" in feedback.next_step({"status": "crashed"}, LAB)


def test_the_template_states_the_rules_and_the_optional_methods():
    template = (ROOT / "labs" / "template-train" / "lenet.py").read_text()
    for said in ("averaged over the batch", "exactly 0", "row-major", "NHWC", "HWIO", "before the update",
                 "def backward(self, name, x, upstream, kernel, bias)", "def stage(self, name, x)",
                 "python -m lenet_lab check"):
        assert said in template, said
