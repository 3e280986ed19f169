"""The worker's call op (harness.lab.box.tasks.call), the one request a kind's own work goes through:
the function the grader names runs on the loaded object and its result and answers come back; a
raise, a refusal ({"why": ...}) or an answer of the wrong size is the call's own verdict, never the
worker's; a function outside the worker's view is the grader's mistake, said as such. Over a
stand-in channel (the sandbox's side: tests/test_lab_conv2_backward.py)."""

import numpy as np
import pytest

from harness.errors import Failure
from harness.lab.backward import STUDENT_STAGE
from harness.lab.box import tasks
from tests.test_lab_backprop import Channel  # the worker's pipes, in memory


def called(impl: object, function: str, counts: list[int]) -> tuple[dict, bytes]:
    arrays = [np.arange(6, dtype="<f4").reshape(2, 3), np.ones(4, dtype="<f4")]
    channel = Channel(b"".join(a.tobytes() for a in arrays))
    tasks.call(channel, impl, "float32", function, {"name": "fc2", "counts": counts},
               [list(a.shape) for a in arrays], counts)
    (reply,) = channel.replies
    return reply, channel.sent


def sums(impl: object, dtype: str, data: dict, arrays: list) -> tuple[dict, list]:
    """A kind's function: the arrays' sums, and the data's name back."""
    return {"name": data["name"]}, [None, np.array([a.sum() for a in arrays])]


def test_a_kind_s_function_answers_through_the_call_op():
    reply, sent = called(None, f"{__name__}:sums", [0, 2])
    assert reply == {"ok": True, "answered": True, "result": {"name": "fc2"}, "shapes": [None, [2]]}
    assert np.frombuffer(sent, "<f4").tolist() == [15.0, 4.0]


def test_a_student_s_raise_refusal_or_wrong_size_is_the_call_s_own_verdict():
    class Student:
        def __init__(self, give):
            self.give = give

        def backward(self, name, *arrays):  # handed the two stand-in arrays
            return self.give()

    def boom():
        raise ZeroDivisionError("nope")

    counts = [6, 4, 0]  # stand-ins: dx of x's 6 values, dkernel of 4, no dbias
    reply, _ = called(Student(boom), STUDENT_STAGE, counts)
    assert reply == {"ok": True, "answered": False, "why": "ZeroDivisionError: nope"}
    reply, _ = called(Student(lambda: (np.zeros(6), np.zeros(5), None)), STUDENT_STAGE, counts)
    assert reply["answered"] is False and reply["why"] == "dkernel: returned shape (5,), expected 4 values"
    reply, _ = called(object(), STUDENT_STAGE, counts)
    assert reply["why"] == "not implemented"


def test_a_function_outside_the_worker_s_view_is_the_grader_s_mistake():
    with pytest.raises(Failure, match="the grader named a function outside the worker's view"):
        called(None, "harness.lab.nowhere:f", [1])
