"""The CPU ladder's targets (harness/report/sections/cpu_targets.py) read from the committed api_levels rows:
met or missed, and by how much, follow the rows; the within-round comparison names each rival."""

from harness.report.claims import rundata
from harness.report.markup.tables import ms, speedup_verdict
from harness.report.sections import cpu_targets


def cpu_frame(committed_report):
    frame = committed_report.frame  # the committed results, read once a session (rundata.load's frame)
    hand = frame[(frame["study"] == "api_levels") & (frame["label"] == cpu_targets.COMPILED)
                 & (frame["status"] == "ok")]
    return frame, hand["machine"].iloc[0]  # the machine that measured the hand-written rung


def test_targets_follow_the_rows_and_turn_to_met_when_the_row_does(committed_report):
    frame, machine = cpu_frame(committed_report)
    fused = rundata.find(frame, "api_levels", "numba/fused", machine=machine)
    goal = cpu_targets.TARGETS_MS["numba/fused"]
    line = next(x for x in cpu_targets.target_lines(frame, machine) if x.startswith("Target numba/fused"))
    verdict = "met" if fused["median_ms"] <= goal else f"missed by {ms(fused['median_ms'] - goal)}"
    assert f": {ms(fused['median_ms'])} (`api_levels`), {verdict}" in line
    faster = frame.copy()
    faster.loc[(faster["label"] == "numba/fused") & (faster["machine"] == machine), "median_ms"] = goal - 0.002
    line = next(x for x in cpu_targets.target_lines(faster, machine) if x.startswith("Target numba/fused"))
    assert line.endswith("met (2 µs under).")


def test_the_speedup_names_every_rival_with_its_within_round_ratio(committed_report):
    frame, machine = cpu_frame(committed_report)
    line = next(x for x in cpu_targets.target_lines(frame, machine) if x.startswith("Target: numba/fused"))
    fused = rundata.find(frame, "api_levels", "numba/fused", machine=machine)
    for rival in cpu_targets.RIVALS:
        r = rundata.ratio_ci(rundata.find(frame, "api_levels", rival, machine=machine), fused)
        assert f"{rival} takes " in line and f"({speedup_verdict(r, 1.5)})" in line.split(rival)[1]
