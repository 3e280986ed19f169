"""The CPU ladder's speed targets in sentences: the rung compiled from Python (Numba) and the
hand-written C rung against the engines and oneDNN, met or missed and by how much, from
`api_levels` (every rung in the same rounds).

Every number is read from a results row; the targets are the project's goals, not results.

    TARGETS_MS, COMPILED, RIVALS, SPEEDUP
    target_lines(frame, machine) -> [sentence]       Numba's targets (the CPU ladder issue's)
A speed-up is met, missed or undecided by its whole interval (tables.speedup_verdict), as every
target of the report is.
    C_LEVEL, C_GOAL_MS, C_GOAL_HOST, C_SPEEDUP
    fastest_engine(frame, machine) -> cell | None    the inference engines' fastest variant there
    c_speedup_lines(frame, machine) -> [sentence]    the C rung against oneDNN and that engine
"""

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.rundata import answer_run, find, ratio_ci
from harness.report.markup.tables import fmt_ratio, goal_line, inverse, ms, speedup_verdict

STUDY = "api_levels"
# Goals per image at batch 1, one thread, end to end. The project's goals, not results.
TARGETS_MS = {"numba/fused": 0.012, "onednn/tuned": 0.025}
COMPILED = "numba/fused"  # the rung compiled from Python (its goals: the CPU ladder issue)
RIVALS = ("onnx/iobinding", "onnx/run", "onednn/tuned")  # the hand-written rung must beat each of them
SPEEDUP = 1.5  # ... by at least this much, within rounds


def target_lines(frame: pd.DataFrame, machine: str) -> list[str]:
    out = []
    for label, goal in TARGETS_MS.items():
        cell = find(frame, STUDY, label, machine=machine)
        if cell is None:
            continue
        out.append(goal_line(label, goal, cell["median_ms"], STUDY, " on the CPU"))
    hand = find(frame, STUDY, COMPILED, machine=machine)
    rivals = [(label, find(frame, STUDY, label, machine=machine)) for label in RIVALS]
    parts = [f"{label} takes {fmt_ratio(r, 'x')} its time ({speedup_verdict(r, SPEEDUP)})"
             for label, rival in rivals if (r := ratio_ci(rival, hand))]
    if hand is not None and parts:
        out.append(f"Target: {COMPILED} at least {SPEEDUP:g}x faster than ONNX Runtime and oneDNN "
                   f"within rounds: " + "; ".join(parts) + ".")
    return out


# The C rung's goals (the CPU floor issue): per image at batch 1, one thread, end to end, on the host
# the goal was set for; and its speed-up over the raw library and the best inference engine.
C_LEVEL = "c/fused"
C_GOAL_MS = 0.006
C_GOAL_HOST = "Intel"  # the Intel Xeon (AVX-512, AMX) the goal was measured against
C_SPEEDUP = 4.0
ENGINE = registry.on_rung("inference engine")[0]  # its variants: ONNX Runtime (run, iobinding), OpenVINO


def fastest_engine(frame: pd.DataFrame, machine: str) -> pd.Series | None:
    """The fastest batch-1 float32 variant of the inference-engine level in the machine's api_levels
    run on the CPU (headline.fastest: the report's one definition of fastest)."""
    run = answer_run(frame, "cpu", machine)
    return headline.fastest(headline.ok_batch1(frame, STUDY, run, "cpu"), ENGINE) if run else None


def c_speedup_lines(frame: pd.DataFrame, machine: str) -> list[str]:
    """'Target: c/fused at least 4x faster than ...: onednn/tuned takes 2.68x its time (missed: it
    would need 9.26 µs ...)' within rounds, against oneDNN's tuned call and the fastest engine
    variant: the C's time over each rival's (the headline's ratio), read the other way."""
    hand = find(frame, STUDY, C_LEVEL, machine=machine)
    if hand is None:
        return []
    engine = fastest_engine(frame, machine)
    rivals = [("onednn/tuned", find(frame, STUDY, "onednn/tuned", machine=machine))]
    rivals += [(f"{engine['label']} (the fastest engine variant)", engine)] if engine is not None else []
    parts = []
    for label, rival in rivals:
        r = ratio_ci(hand, rival)
        if r is None or rival is None:
            continue
        r = inverse(r)
        needed = rival["median_ms"] / C_SPEEDUP
        verdict = speedup_verdict(r, C_SPEEDUP)
        if verdict == "missed":
            verdict += (f": {C_LEVEL} would need {ms(needed)}, {ms(hand['median_ms'] - needed)} less "
                        f"than its {ms(hand['median_ms'])}")
        elif verdict == "undecided":
            verdict += f": the interval spans {C_SPEEDUP:g}x"
        parts.append(f"{label} takes {fmt_ratio(r, 'x')} its time ({verdict})")
    return [f"Target: {C_LEVEL} at least {C_SPEEDUP:g}x faster than oneDNN and than the best inference "
            f"engine, within rounds (`{STUDY}`, {machine}): " + "; ".join(parts) + "."] if parts else []
