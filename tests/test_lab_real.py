"""What real students' code runs into, graded in one class with partial credit by stage: the example
with fc1's NCHW flatten gets every other stage's points and its feedback names fc1; a correct
submission far past the speed limit keeps its gate points (gated on [gate] slow_images, not timed, no
speed points; a lab may choose otherwise, and a regrade keeps the class's policy: the grading's own
copy of the lab file); one that returns logits is told to apply softmax; no feedback file holds an
absolute path of the server's."""

import re
import sys

import numpy as np
import pytest

from harness.lab.judge.rules import assignment, stages
from harness.lab.term.marks import points
from tests.conftest import ROOT
from tests.lab_grading import grade_class

LAB = """
[lab]
name = "real"
references = ["numpy"]
[measure]
calls = 12
rounds = 2
warmup = 2
[gate]
images = 300
slow_images = 150
[limits]
wall_s = 300
import_s = 30
max_ratio = 100
[stages]
conv1 = 10
pool1 = 5
conv2 = 10
pool2 = 5
fc1 = 10
fc2 = 5
fc3 = 5
softmax = 5
"""
EXAMPLES = ROOT / "labs" / "examples"
CORRECT = (EXAMPLES / "correct" / "lenet.py").read_text()
SUBMISSIONS = {
    # about 400x numpy per image (a sleep standing in for Python loops), honest on the gate's batches
    "crawl": CORRECT.replace("    def predict(self, images):\n", "    def predict(self, images):\n"
                             "        if len(images) == 1:\n            import time\n"
                             "            time.sleep(0.1)\n"),
    "logits": CORRECT.replace("        e = np.exp(x - x.max(axis=1, keepdims=True))                   # softmax\n"
                              "        return e / e.sum(axis=1, keepdims=True)", "        return x"),
    "broken": CORRECT.replace("    def predict(self, images):\n", "    def predict(self, images):\n"
                              "        raise ValueError('shapes (1,25) and (30,6) not aligned')\n"),
}
ABSOLUTE = re.compile(r"(?<![\w.~/-])/[\w.+-]+/")  # the start of an absolute path of two parts or more


def test_the_submissions_are_what_they_say():
    assert all(text != CORRECT for text in SUBMISSIONS.values())


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folders = {**SUBMISSIONS, "correct": EXAMPLES / "correct", "wrong": EXAMPLES / "wrong",
               "template": ROOT / "labs" / "template"}
    out, rows = grade_class(tmp_path_factory.mktemp("real"), LAB, folders)
    return out, rows, {p.name: p.read_text() for p in (out / "feedback").glob("*.md")}


@pytest.mark.slow  # six submissions graded once: about 30 s
def test_one_wrong_layer_costs_only_its_points_and_is_named(graded):
    _, rows, feedback = graded
    assert rows["correct"]["status"] == "ok"
    assert all(v["verdict"] == "ok" for v in rows["correct"]["stages"])
    wrong = {v["stage"]: v for v in rows["wrong"]["stages"]}
    assert rows["wrong"]["status"] == "wrong"
    assert [s for s, v in wrong.items() if v["verdict"] != "ok"] == ["fc1"]
    assert wrong["fc1"]["layout"] == stages.FLATTEN_NCHW and np.isfinite(wrong["fc1"]["max_abs_diff"]) \
        and wrong["fc1"]["max_abs_diff"] > 0.1
    assert rows["template"]["status"] == "crashed"  # predict not written: no stage was reached
    lab = assignment.parse(LAB, "real.toml")
    every = sum(p for _, p in lab.stages)
    assert points.score(rows["wrong"], lab.grade, None, None).gate == every - 10 == 45  # every stage but fc1
    text = feedback["wrong.md"]
    assert "(each given the reference's input to it): 7 of 8 right; the first that is not: **fc1**" in text
    assert "fc1: wrong (0 of 10 points), largest difference" in text and "NCHW order" in text
    assert "conv1: ok (10 of 10 points)" in text


@pytest.mark.slow  # the same grading
def test_too_slow_keeps_its_gate_points_logits_are_named_and_no_path_leaks(graded):
    out, rows, feedback = graded
    crawl = rows["crawl"]
    assert crawl["status"] == "too-slow" and crawl["probe_ratio"] > 100, crawl["reason"]
    assert crawl["gate"]["images"] == 150 and crawl["gate"]["agree"] == 150
    assert "gated on more than its first 150 test images (which it passed)" in crawl["reason"]
    lab = assignment.parse(LAB, "real.toml")
    kept = points.score(crawl, lab.grade, None, None)
    assert (kept.gate, kept.speed) == (lab.grade.gate_points, 0)
    strict = assignment.parse(LAB.replace("[stages]", "[grade]\nslow_gate_points = false\n[stages]"), "strict.toml")
    assert points.score(crawl, strict.grade, None, None).gate == 0  # a lab may give none
    assert rows["logits"]["status"] == "wrong" and "apply softmax" in rows["logits"]["reason"]
    assert "apply softmax to fc3's outputs" in feedback["logits.md"]
    assert "The end of your worker's log" in feedback["broken.md"]  # a traceback, its paths cut
    leaks = {name: ABSOLUTE.findall(text) for name, text in feedback.items()}
    assert not any(leaks.values()), leaks
    for text in feedback.values():
        assert str(ROOT) not in text and sys.prefix not in text and str(out.parent) not in text
