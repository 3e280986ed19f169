"""A graded class without grading: rows written as the grader writes them (store.write_row, under
the grading's key), for the tests of what is built from rows alone (leaderboard, publish,
similarity's column). Nothing here runs a submission."""

import time
from pathlib import Path

from harness.lab.judge import store
from harness.lab.judge.rules import assignment
from tests.conftest import ROOT

LAB = ROOT / "labs" / "cpu_numpy.toml"
HOST = "gradebox-secret-7"
NUMPY_NS, ONEDNN_NS = 400_000.0, 90_000.0
# cpu_numpy's second reference is the "floor": the fastest CPU rung the committed rows measured
FLOOR = assignment.load(str(LAB)).references[1].label


def ok_row(student: str, ratio: float, low: float, high: float, loc: int) -> dict:
    """An ok row of cpu_numpy: `ratio` × numpy [low, high], numpy at 400 µs beside it."""
    median = ratio * NUMPY_NS
    return {"lab": "cpu_numpy", "student": student, "status": "ok", "reason": None, "batch_size": 1,
            "rank_by": "numpy", "references": ["numpy", FLOOR], "device": "cpu",
            "node": {"hostname": HOST, "cpu": "Test CPU 9000"}, "sandbox": "full",
            "isolation": "bubblewrap, own UID, cgroup", "started": time.time(), "loc": loc, "files": 1,
            "gate": {"agree": 10000, "images": 10000, "max_abs_diff": 1e-6},
            "median_per_image_ns": median, "rounds_used": [0, 1, 2], "inconsistent_rounds": [],
            "times_ns": {"submission": [[median * (1 + 0.01 * i) for i in range(10)]] * 3},
            "ratios": {"numpy": {"ratio": ratio, "ci95_low": low, "ci95_high": high},
                       FLOOR: {"ratio": median / ONEDNN_NS, "ci95_low": median / ONEDNN_NS * 0.95,
                                        "ci95_high": median / ONEDNN_NS * 1.05}},
            "reference_medians_ns": {"numpy": NUMPY_NS, FLOOR: ONEDNN_NS},
            "reference_ratios": {"numpy": {"ratio": 1.0}, FLOOR: {"ratio": ONEDNN_NS / NUMPY_NS}}}


def failed_row(student: str, status: str, reason: str) -> dict:
    return {"lab": "cpu_numpy", "student": student, "status": status, "reason": reason, "rank_by": "numpy",
            "references": ["numpy", FLOOR], "device": "cpu", "sandbox": "full",
            "node": {"hostname": HOST, "cpu": "Test CPU 9000"}, "isolation": "bubblewrap, own UID, cgroup",
            "started": time.time(), "loc": 12, "files": 1}


def graded(out: Path, rows: list[dict], lab: Path = LAB) -> Path:
    """OUT as `lab grade` leaves it: the lab file (cpu_numpy, or a copy of it with a [grade] table),
    the key, the class list and one row each."""
    store.prepare(out, "cpu_numpy", assignment.load(str(lab)).source, str(lab))  # as the grader: resolved
    store.write_students(out, [r["student"] for r in rows])
    for row in rows:
        store.write_row(out, row)
    return out
