"""What real students' code runs into, graded: a correct submission far past the speed limit keeps its
gate points (gated on [gate] slow_images, not timed, no speed points; a lab may choose otherwise, and a
regrade keeps the class's policy: the grading's own copy of the lab file); one that returns logits is
told to apply softmax; no feedback file holds an absolute path of the server's."""

import re
import sys

import pytest

from harness.lab.judge.rules import assignment
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
images = 400
slow_images = 150
[limits]
wall_s = 300
import_s = 30
max_ratio = 100
"""
CORRECT = (ROOT / "labs" / "examples" / "correct" / "lenet.py").read_text()
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


@pytest.mark.slow  # three submissions graded: about 20 s
def test_too_slow_keeps_its_gate_points_logits_are_named_and_no_path_leaks(tmp_path):
    out, rows = grade_class(tmp_path, LAB, {**SUBMISSIONS, "correct": ROOT / "labs" / "examples" / "correct"})
    crawl = rows["crawl"]
    assert crawl["status"] == "too-slow" and crawl["probe_ratio"] > 100, crawl["reason"]
    assert crawl["gate"]["images"] == 150 and crawl["gate"]["agree"] == 150
    assert "gated on more than its first 150 test images (which it passed)" in crawl["reason"]
    lab = assignment.parse(LAB, "real.toml")
    kept = points.score(crawl, lab.grade, None, None)
    assert (kept.gate, kept.speed) == (lab.grade.gate_points, 0)
    strict = assignment.parse(LAB + "[grade]\nslow_gate_points = false\n", "strict.toml")
    assert points.score(crawl, strict.grade, None, None).gate == 0  # a lab may give none
    assert rows["logits"]["status"] == "wrong" and "apply softmax" in rows["logits"]["reason"]
    feedback = {p.name: p.read_text() for p in (out / "feedback").glob("*.md")}
    assert "apply softmax to fc3's outputs" in feedback["logits.md"]
    assert "The end of your worker's log" in feedback["broken.md"]  # a traceback, its paths cut
    leaks = {name: ABSOLUTE.findall(text) for name, text in feedback.items()}
    assert not any(leaks.values()), leaks
    for text in feedback.values():
        assert str(ROOT) not in text and sys.prefix not in text and str(tmp_path) not in text
