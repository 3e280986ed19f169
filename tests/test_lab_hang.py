"""A hung submission is `timeout` in seconds, not after the lab's wall_s (harness.lab.judge.rules.deadlines):
one that spins in predict from its first call (the gate's), one that sleeps for ever in the probe's
first call only, one that hangs only once timed (a round's calls); graded in one `lab grade` under
a lab whose wall_s is 600 s, in well under two minutes. An honest submission and the slow example
stay far inside their deadlines (tests/test_lab_limits.py grades them on a loaded machine).

Nothing here depends on the machine's speed: the hangs never answer, and the bounds (120 s for the
grading, against 600 s of wall_s) are far from the deadlines (seconds)."""

import re
import time

import numpy as np
import pytest

from harness.errors import Failure
from harness.lab.judge import grade
from harness.lab.judge.rules import assignment, deadlines
from tests.test_lab import LAB, WRAP, python, rows_by_student

# wall_s and cpu_s far away: only the deadlines can end these submissions in time
HANG_LAB = (LAB.replace("wall_s = 60", "wall_s = 600").replace("cpu_s = 60", "cpu_s = 600")
            .replace("max_ratio = 300", "max_ratio = 50"))  # deadlines of 200x numpy: a loaded
# machine's noise in numpy's times weighs less (the rule at the shipped lab's 100: below)
HUNG = {
    "spin": WRAP + "\n\nclass Spin(CorrectLeNet):\n    def predict(self, images):\n"
                   "        while True:\n            pass\n",
    "stuck": WRAP + "\n\nclass Stuck(CorrectLeNet):\n    def predict(self, images):\n"
                    "        if len(images) == 1:\n            time.sleep(10 ** 6)\n"
                    "        return super().predict(images)\n",
    # honest through the probe (3 calls) and the warm-up (5), then hangs in the rounds
    "late": WRAP + "\n\nclass Late(CorrectLeNet):\n    calls = 0\n\n    def predict(self, images):\n"
                   "        if len(images) == 1:\n            Late.calls += 1\n"
                   "            if Late.calls > 10:\n                time.sleep(10 ** 6)\n"
                   "        return super().predict(images)\n",
}
BOUND_S = 120  # the whole grading, against wall_s = 600 for each of the three


@pytest.mark.slow
def test_hung_submissions_are_timeout_in_seconds_not_wall_s(tmp_path):
    lab = tmp_path / "hang.toml"
    lab.write_text(HANG_LAB)
    for name, text in HUNG.items():
        (tmp_path / "subs" / name).mkdir(parents=True)
        (tmp_path / "subs" / name / "lenet.py").write_text(text)
    started = time.monotonic()
    done = python("lab", "grade", str(lab), "--submissions", str(tmp_path / "subs"), "--out",
                  str(tmp_path / "out"), "--no-report", timeout=600)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    rows = rows_by_student(tmp_path / "out")
    assert {n: r["status"] for n, r in rows.items()} == dict.fromkeys(HUNG, "timeout"), \
        {n: (r["status"], r["reason"]) for n, r in rows.items()}
    assert took < BOUND_S, took  # three hangs: 1800 s of wall_s before
    said = {n: r["reason"] for n, r in rows.items()}
    assert said["spin"].startswith("no answer to the gate's first 100 images (its first call) within its "
                                   "deadline of "), said["spin"]
    assert said["stuck"].startswith("no answer to the probe's call 1 of 3 (1 image(s)) within"), said["stuck"]
    assert re.match(r"no answer to round [12]'s 12 calls within", said["late"]), said["late"]
    for row in rows.values():
        assert "x numpy's" in row["reason"] and ": max_ratio 50 x safety 4, numpy timed by the grader " \
            "before this submission started); worker killed" in row["reason"], row["reason"]
        assert row["seconds"] < BOUND_S / 2 and row["pace"]["reference"] == "numpy"
        deadline = float(re.search(r"deadline of ([\d.]+) s", row["reason"]).group(1))
        assert deadline < 600 and row["busy_s"] >= deadline  # the grader waited its deadline, no more
    for name in ("spin", "stuck"):  # import_s's 5 s, unless numpy's cold start x 200 is more
        assert re.search(r"deadline of [\d.]+ s \([^+]* for a first call[^+]* \+ 200 x numpy's", said[name]), \
            said[name]
    assert re.search(r"deadline of [\d.]+ s \(5 s \+ 200 x numpy's [\d.]+ ms for 12 call\(s\)", said["late"]), \
        said["late"]  # no first call's allowance: the rounds' single images are a shape the probe ran
    assert "gate" in rows["late"] and rows["late"]["warmup_ratio"] < 50  # the hang was its only fault


# --- the rule, on numbers ----------------------------------------------------------------------
LIMITS = assignment.load("cpu_numpy").limits  # max_ratio 100, import_s 120
PACE = deadlines.Pace("numpy", call_s=200e-6, work_s=110e-6, image_s=20e-6, cold_s=1e-3, batch_size=1)


def test_a_deadline_is_the_references_time_times_max_ratio_times_safety_plus_an_allowance():
    calls = deadlines.for_calls(PACE, LIMITS, 12)
    assert calls.seconds == pytest.approx(deadlines.CALL_FLOOR_S + 400 * 12 * 200e-6)
    assert "5 s + 400 x numpy's 2.4 ms for 12 call(s) of 1 image(s): max_ratio 100 x safety 4" in calls.why
    first = deadlines.for_calls(PACE, LIMITS, 1, first=True)  # a new shape may compile: 30 s, not import_s
    assert first.seconds == pytest.approx(deadlines.FIRST_CALL_S + 400 * 200e-6)
    assert "30 s for a first call (import_s, at most 30 s)" in first.why
    short = assignment.Limits(**{**LIMITS.__dict__, "import_s": 10})
    assert deadlines.for_calls(PACE, short, 1, first=True).seconds == pytest.approx(10 + 400 * 200e-6)


def test_a_gate_deadline_covers_a_submission_that_does_not_batch():
    """The reference batches the gate 10x better than a call of one image; a submission within
    max_ratio per call that loops over the images must still fit."""
    gate = deadlines.for_gate(PACE, LIMITS, 10000)
    looping = 10000 * LIMITS.max_ratio * PACE.work_s  # at max_ratio, one image at a time: 110 s
    assert gate.seconds > deadlines.SAFETY * looping and "400 x numpy's 1.1e+03 ms for 10000 image(s)" in gate.why
    waits = deadlines.Pace("numpy", call_s=8e-3, work_s=110e-6, image_s=20e-6, cold_s=1e-3, batch_size=1)
    assert deadlines.for_gate(waits, LIMITS, 100).seconds < 60  # a loaded machine's waits count per call


def test_a_reference_with_a_slow_cold_start_lifts_the_first_call_allowance():
    cudnn = deadlines.Pace("cudnn/tuned", call_s=250e-6, work_s=70e-6, image_s=2e-6, cold_s=0.4, batch_size=1)
    allowance, said = deadlines.start_up(cudnn, LIMITS)
    assert allowance == pytest.approx(160) and "400 x cudnn/tuned's cold start (400 ms) for a first call" in said


def test_the_slow_example_is_far_inside_its_deadline():
    """The slow example is about 30x numpy per call (tests/test_lab.py); the shipped lab kills
    a call only past 400x numpy's time (plus its allowance): a margin of more than 10x."""
    assert deadlines.factor(LIMITS) / 30 > 10


def test_a_timeout_names_the_call_and_the_deadline():
    due = deadlines.for_calls(PACE, LIMITS, 1)
    failure = deadlines.timed_out("the probe's call 2 of 3 (1 image(s))", due)
    assert isinstance(failure, Failure) and failure.status == "timeout"
    assert failure.reason.startswith("no answer to the probe's call 2 of 3 (1 image(s)) within its deadline "
                                     "of 5.1 s (5 s + 400 x numpy's 0.2 ms for 1 call(s)")


# --- the grader's side, without workers ------------------------------------------------------------
class FakeWorker:
    """What .within and .measure_pace use of a worker: its busy time, a gate and a stream."""

    def __init__(self, busy_s=0.0, gate_s=0.0, reported_ns=500_000, trip_ns=2_000_000):
        self.busy_s, self.gate_s, self.reported_ns, self.trip_ns = busy_s, gate_s, reported_ns, trip_ns

    def gate(self, images, batch, timeout):
        time.sleep(self.gate_s)
        return np.zeros((len(images), 10), np.float32)

    def stream(self, calls, timeout):
        from harness.lab.box.sandbox import Chunk

        k = len(calls)  # 0.5 ms inside predict, 2 ms on the grader's clock
        return Chunk([self.reported_ns] * k, [self.trip_ns] * k, [self.trip_ns] * k, np.zeros((k, 1, 10)))


def bare_grader(lab=None):
    grader = grade.Grader.__new__(grade.Grader)
    grader.lab = lab or assignment.parse(HANG_LAB, "hang.toml")
    grader.waits, grader.cold_s = {}, None
    return grader


def test_only_a_timeout_the_deadline_caused_is_the_deadlines():
    grader, due = bare_grader(), deadlines.Deadline(0.01, "how")
    with pytest.raises(Failure, match=r"^no answer to call 1 within its deadline of 0.0 s \(how\); worker killed"):
        with grader.within(FakeWorker(), due, "call 1", "probe"):
            time.sleep(0.02)
            raise Failure("timeout", "no answer within the timing limit of 0.01 s; worker killed")
    assert grader.waits["probe"]["deadline_s"] == 0.01 and grader.waits["probe"]["took_s"] >= 0.01
    with pytest.raises(Failure, match="^CPU-time limit"):  # cpu_s came first: its own reason
        with grader.within(FakeWorker(), deadlines.Deadline(5, "how"), "call 1", "probe"):
            raise Failure("timeout", "CPU-time limit of 3 s exceeded (killed by SIGXCPU)")
    with pytest.raises(Failure, match="^no answer within the wall-time limit"):  # wall_s was nearer
        with grader.within(FakeWorker(busy_s=599.995), due, "call 1", "probe"):
            time.sleep(0.02)
            raise Failure("timeout", "no answer within the wall-time limit of 600 s; worker killed")


def test_the_pace_is_the_references_on_the_graders_clock():
    """The deadlines come from the reference, timed by the grader: its round trips, its own clock
    (a trusted worker) around predict, its gate exchange."""
    grader = bare_grader()
    grader.gate_images = np.zeros((300, 28, 28), np.uint8)
    grader.train = np.zeros((50, 28, 28), np.uint8)
    grader.predict_oracle = lambda images: np.zeros((len(images), 10))
    reference = FakeWorker(gate_s=0.05)
    grader.reference = lambda label: reference
    pace = grader.measure_pace()
    assert pace.reference == "numpy" and pace.call_s == pytest.approx(2e-3) and pace.batch_size == 1
    assert pace.work_s == pytest.approx(5e-4)
    assert 0.05 / 100 <= pace.image_s < 1 / 100 and pace.cold_s < 1  # its first gate beyond the next
    assert grader.measure_pace().cold_s == pace.cold_s  # measured once


def test_a_failing_phase_s_fields_reach_the_row_under_the_failure_s_own():
    """A phase gathers its fields as they come; its Failure carries them (its extra), the one place
    that assembles the row (Grader.grade) merges them, the Failure's own fields winning."""
    from harness.lab.judge.phases.steps import keeping

    found: dict = {}
    with pytest.raises(Failure) as caught:
        with keeping(found):
            found.update(gate={"passes": False}, median_ns=1.0)
            raise Failure("timing-inconsistent", "clocks", extra={"median_ns": 2.0})
    assert caught.value.extra == {"gate": {"passes": False}, "median_ns": 2.0}
    with keeping(found):  # no failure: nothing changes
        found["warmup_ratio"] = 1.5
    assert found == {"gate": {"passes": False}, "median_ns": 1.0, "warmup_ratio": 1.5}
