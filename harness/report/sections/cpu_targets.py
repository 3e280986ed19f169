"""The CPU ladder's speed targets: the rung compiled from Python and the hand-written C rung against
the engines and the raw library, met or missed and by how much, from `api_levels` (every rung in the
same rounds); worded by templates/cpu.md.j2. The goals and the cells they name are the project's
(templates/cpu.toml), not results; every number is read from a results row.

    TARGETS_MS, COMPILED, RIVALS, SPEEDUP            the compiled-from-Python rung's goals
    C_LEVEL, C_GOAL_MS, C_GOAL_HOST, C_SPEEDUP, C_RIVAL   the hand-written C rung's
    goal(label, goal_ms, median_ms) -> claims        a time goal, met or missed by how much
    speedup(label, r, goal, call) -> claims          a speed-up over a rival, met, missed or undecided
    target_lines(frame, machine) -> [sentence]       the compiled-from-Python rung's targets
    fastest_engine(frame, machine) -> cell | None    the inference engines' fastest variant there
    c_speedup_lines(frame, machine) -> [sentence]    the C rung against the raw library and that engine
"""

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.rundata import answer_run, find, ratio_ci
from harness.report.markup import words
from harness.report.markup.tables import inverse, speedup_verdict

STUDY = "api_levels"
TEMPLATE = "cpu.md.j2"
GOALS = words.table_of("cpu")  # templates/cpu.toml: the goals and the cells they name
TARGETS_MS = GOALS["time_ms"]
COMPILED, RIVALS, SPEEDUP = (GOALS["compiled"][k] for k in ("call", "rivals", "speedup"))
C_LEVEL, C_GOAL_MS, C_GOAL_HOST, C_SPEEDUP, C_RIVAL = (GOALS["hand_written"][k] for k in
                                                      ("call", "goal_ms", "host", "speedup", "rival"))
ENGINE = registry.on_rung("inference engine")[0]  # its variants: ONNX Runtime (run, iobinding), OpenVINO


def goal(label: str, goal_ms: float, median_ms: float) -> dict:
    """A time goal: met (by how much under) or missed (by how much, and how many times the goal)."""
    return {"label": label, "goal_ms": goal_ms, "median_ms": median_ms, "study": STUDY,
            "met": median_ms <= goal_ms, "under_ms": goal_ms - median_ms, "over_ms": median_ms - goal_ms,
            "times": median_ms / goal_ms}


def speedup(label: str, r: dict, goal: float, call: pd.Series | None = None, rival: pd.Series | None = None,
            engine: bool = False) -> dict:
    """The rival's time over the call's within rounds (r) against the goal: met, missed or undecided
    by its whole interval; where missed and the cells are given, the time the call would need (the
    rival's over the goal) and how far short it is; undecided, the goal the interval spans."""
    verdict = speedup_verdict(r, goal)
    call_ms = None if call is None else float(call["median_ms"])
    missed = verdict == "missed" and rival is not None and call_ms is not None
    needed = rival["median_ms"] / goal if missed and rival is not None else None
    return {"label": label, "ratio": r, "verdict": verdict, "engine": engine, "call": C_LEVEL,
            "needed_ms": needed, "short_ms": None if needed is None or call_ms is None else call_ms - needed,
            "call_ms": call_ms,
            "spans": goal if verdict == "undecided" and call is not None else None}


def target_lines(frame: pd.DataFrame, machine: str) -> list[str]:
    out = []
    for label, goal_ms in TARGETS_MS.items():
        cell = find(frame, STUDY, label, machine=machine)
        if cell is not None:
            out.append(words.say(TEMPLATE, "goal", g=goal(label, goal_ms, cell["median_ms"]),
                                 where=" on the CPU"))
    hand = find(frame, STUDY, COMPILED, machine=machine)
    rivals = [speedup(label, r, SPEEDUP) for label in RIVALS
              if (r := ratio_ci(find(frame, STUDY, label, machine=machine), hand))]
    if hand is not None and rivals:
        out.append(words.say(TEMPLATE, "compiled", call=COMPILED, speedup_goal=SPEEDUP, rivals=rivals))
    return out


def fastest_engine(frame: pd.DataFrame, machine: str) -> pd.Series | None:
    """The fastest batch-1 float32 variant of the inference-engine level in the machine's api_levels
    run on the CPU (headline.fastest: the report's one definition of fastest)."""
    run = answer_run(frame, "cpu", machine)
    return headline.fastest(headline.ok_batch1(frame, STUDY, run, "cpu"), ENGINE) if run else None


def c_speedup_lines(frame: pd.DataFrame, machine: str) -> list[str]:
    """The C rung against the raw library's call and the fastest engine variant within rounds: the
    C's time over each rival's (the headline's ratio), read the other way."""
    hand = find(frame, STUDY, C_LEVEL, machine=machine)
    if hand is None:
        return []
    engine = fastest_engine(frame, machine)
    rivals = [(C_RIVAL, find(frame, STUDY, C_RIVAL, machine=machine), False)]
    rivals += [(engine["label"], engine, True)] if engine is not None else []
    found = [speedup(label, inverse(r), C_SPEEDUP, hand, rival, is_engine)
             for label, rival, is_engine in rivals
             if rival is not None and (r := ratio_ci(hand, rival)) is not None]
    return [words.say(TEMPLATE, "hand_written", call=C_LEVEL, speedup_goal=C_SPEEDUP, study=STUDY,
                      machine=machine, rivals=found)] if found else []
