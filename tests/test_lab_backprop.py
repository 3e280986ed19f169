"""A training lab's stages (harness.lab.judge.rules.backprop): each layer's backward asked on its own,
handed the oracle's activation and upstream gradient, so the example whose fc2 leaves out its ReLU's
mask fails fc2 alone and keeps every other layer's points, fc3 after it and fc1, conv2, conv1 before
it in backpropagation's order. The submission's `backward` is asked through the worker's own op
(harness.lab.box.tasks.call of harness.lab.backward.student_stage) over a stand-in channel; the
sandbox's side of the exchange is graded in tests/test_lab_train_kinds.py."""

import numpy as np
import pytest

from harness.base import Trainer
from harness.data import mnist
from harness.data import weights as weights_file
from harness.data.init_weights import DEFAULT_INIT
from harness.lab.backward import STUDENT_STAGE
from harness.lab.box import tasks
from harness.lab.judge.rules import assignment, backprop, stages
from harness.lab.judge.rules import oracle as answers
from harness.lab.term.handout.student import submission_class
from harness.lab.term.marks import feedback, points
from tests.conftest import ROOT

EXAMPLES = ROOT / "labs" / "examples-train"
LAB = assignment.load("cpu_train")


@pytest.fixture(scope="module")
def oracle():
    w = {name: weights_file.Layer(k.astype(np.float64), b.astype(np.float64))
         for name, (k, b) in weights_file.read(DEFAULT_INIT).items()}
    images, labels = mnist.load("train")
    return w, images[:8], labels[:8].astype(np.int64), answers.backward(w, images[:8], labels[:8])


class Channel:
    """The worker's end of its pipes, in memory: the grader's bytes in, the replies and bytes out."""

    def __init__(self, data: bytes) -> None:
        self.data, self.replies, self.sent = data, [], b""

    def exact(self, n: int) -> bytes:
        out, self.data = self.data[:n], self.data[n:]
        assert len(out) == n
        return out

    def reply(self, message: dict) -> None:
        self.replies.append(message)

    def send(self, data: bytes) -> None:
        self.sent += data


def asked(impl: object, name: str, want: backprop.Backward) -> dict:
    """One stage through the worker's op, judged as the grader judges it."""
    arrays = (want.x, want.upstream, want.kernel, want.bias)
    counts = [0 if want.dx is None else want.dx.size, want.dkernel.size, want.dbias.size]
    channel = Channel(b"".join(np.ascontiguousarray(a, dtype="<f4").tobytes() for a in arrays))
    tasks.call(channel, impl, "float32", STUDENT_STAGE, {"name": name, "counts": counts},
               [list(a.shape) for a in arrays], counts)
    (reply,) = channel.replies
    if not reply["answered"]:
        return stages.unanswered(name, reply["why"])
    got, at = [], 0
    for shape, count in zip(reply["shapes"], counts, strict=True):
        got.append(None if shape is None else
                   np.frombuffer(channel.sent[at * 4:(at + count) * 4], "<f4").reshape(shape))
        at += count
    return backprop.judge(name, (got[0], got[1], got[2]), want, backprop.tolerance(LAB.gate.max_abs_diff))


def test_the_oracle_s_stages_are_its_step_s_gradients(oracle):
    from lenet_numpy.train import loss_and_grads

    w, images, labels, stages_ = oracle
    _, grads = loss_and_grads(w, mnist.to_input(images, "float64"), labels)
    assert list(stages_) == list(stages.TRAINING)
    for name, want in stages_.items():
        assert np.array_equal(want.dkernel, grads[name].kernel) and np.array_equal(want.dbias, grads[name].bias)
    for later, earlier in zip(stages.TRAINING[:-1], stages.TRAINING[1:], strict=True):  # upstream: dx after it
        assert np.array_equal(stages_[earlier].upstream, stages_[later].dx)
    assert stages_["conv1"].dx is None and np.array_equal(stages_["fc3"].upstream, labels)


def test_one_wrong_layer_fails_its_own_stage_only(oracle):
    *_, stages_ = oracle
    verdicts = {}
    for example in ("correct", "wrong"):
        impl = submission_class(EXAMPLES / example / "lenet.py", "", Trainer)(DEFAULT_INIT)
        verdicts[example] = [{**asked(impl, name, want), "points": p} for (name, p), want in
                             zip(LAB.stages, stages_.values(), strict=True)]
    assert all(v["verdict"] == "ok" for v in verdicts["correct"]), verdicts["correct"]
    wrong = verdicts["wrong"]
    assert [v["stage"] for v in wrong if v["verdict"] != "ok"] == ["fc2"]
    fc2 = wrong[1]
    assert "dx, dkernel, dbias differ" in fc2["reason"] and fc2["max_abs_diff"] > backprop.tolerance(1e-4)
    row = {"status": "wrong", "stages": wrong}
    score = points.score(row, LAB.grade, None, None)
    assert score.gate == 48 and score.staged  # four layers of 12
    assert "(48 for the stages you got right)" in feedback.points_lines(score, LAB)[0]
    lines = "\n".join(feedback.stage_lines(row, LAB))
    assert "4 of 5 right; the first that is not: **fc2**" in lines and "- fc2: wrong (0 of 12 points)" in lines
    assert "- conv1: ok (12 of 12 points)" in lines


def test_a_stage_not_written_or_in_pytorch_s_layouts(oracle):
    *_, stages_ = oracle

    class Starter:
        def backward(self, name, x, upstream, kernel, bias):
            raise NotImplementedError(name)

    assert asked(Starter(), "fc1", stages_["fc1"])["verdict"] == "missing"
    assert asked(object(), "fc1", stages_["fc1"])["verdict"] == "missing"
    conv2 = stages_["conv2"]
    tol = backprop.tolerance(1e-4)
    nchw = backprop.judge("conv2", (conv2.dx.transpose(0, 3, 1, 2), conv2.dkernel, conv2.dbias), conv2, tol)
    assert nchw["verdict"] == "wrong" and nchw["layout"] == backprop.DX_NCHW and "dx shape" in nchw["reason"]
    oihw = backprop.judge("conv2", (conv2.dx, conv2.dkernel.transpose(3, 2, 0, 1), conv2.dbias), conv2, tol)
    assert oihw["layout"] == backprop.KERNEL_OIHW
    assert backprop.judge("conv1", (None, stages_["conv1"].dkernel, stages_["conv1"].dbias), stages_["conv1"],
                          tol)["verdict"] == "ok"  # conv1's dx is not graded


def test_relu_s_gradient_at_zero_either_way_and_a_known_factor_named(oracle):
    """At the initial weights (biases 0) a conv layer's pre-activation is exactly 0 over background
    pixels: a stage that takes ReLU's gradient there as 1 differs from the oracle's (0), and is
    accepted, saying so; a stage whose answers are the batch size times the oracle's (a summed loss)
    is wrong, named as off by that factor; so is one scaled by the learning rate."""
    *_, stages_ = oracle
    tol = backprop.tolerance(1e-4)
    conv1 = stages_["conv1"]
    assert conv1.alt is not None and not np.allclose(conv1.alt[2], conv1.dbias)  # the rules differ here
    either = backprop.judge("conv1", conv1.alt, conv1, tol)
    assert either["verdict"] == "ok" and either["relu_at_zero"] == 1
    assert "exactly 0 taken as 1" in stages.sentence(either, 12)
    fc2 = stages_["fc2"]
    n = len(fc2.x)
    summed = backprop.judge("fc2", (fc2.dx * n, fc2.dkernel * n, fc2.dbias * n), fc2, tol)
    assert summed["verdict"] == "wrong" and f"a factor of {n}, the batch size" in summed["layout"]
    assert f"off the reference's by a factor of {n}" in stages.sentence(summed, 12, counts=False)
    assert "points" not in stages.sentence(summed, 12, counts=False)
    stepped = backprop.judge("fc2", (fc2.dx, fc2.dkernel * 0.05, fc2.dbias), fc2, tol)
    assert "the learning rate" in stepped["layout"]
    assert backprop.judge("fc2", (fc2.dx, fc2.dkernel + 1.0, fc2.dbias), fc2, tol)["layout"] is None
