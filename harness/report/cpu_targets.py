"""The CPU ladder's speed targets in sentences: the hand-written rung against the engines and
oneDNN, met or missed and by how much, from `api_levels` (every rung in the same rounds).

Every number is read from a results row; the targets are the project's goals, not results.

    TARGETS_MS, HAND_WRITTEN, RIVALS, SPEEDUP
    target_lines(frame, machine) -> [sentence]
"""

import pandas as pd

from harness.report.rundata import find, ratio_ci
from harness.report.tables import fmt_ratio, goal_line

STUDY = "api_levels"
# Goals per image at batch 1, one thread, end to end. The project's goals, not results.
TARGETS_MS = {"numba/fused": 0.012, "onednn/tuned": 0.025}
HAND_WRITTEN = "numba/fused"
RIVALS = ("onnx/iobinding", "onnx/run", "onednn/tuned")  # the hand-written rung must beat each of them
SPEEDUP = 1.5  # ... by at least this much, within rounds


def target_lines(frame: pd.DataFrame, machine: str) -> list[str]:
    out = []
    for label, goal in TARGETS_MS.items():
        cell = find(frame, STUDY, label, machine=machine)
        if cell is None:
            continue
        out.append(goal_line(label, goal, cell["median_ms"], STUDY, " on the CPU"))
    hand = find(frame, STUDY, HAND_WRITTEN, machine=machine)
    rivals = [(label, find(frame, STUDY, label, machine=machine)) for label in RIVALS]
    parts = [f"{label} takes {fmt_ratio(r)}x its time ({'met' if r['ratio'] >= SPEEDUP else 'missed'})"
             for label, rival in rivals if (r := ratio_ci(rival, hand))]
    if hand is not None and parts:
        out.append(f"Target: {HAND_WRITTEN} at least {SPEEDUP:g}x faster than ONNX Runtime and oneDNN "
                   f"within rounds: " + "; ".join(parts) + ".")
    return out
