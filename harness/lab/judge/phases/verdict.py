"""A submission's last two steps, from its timed rounds alone: the clocks (its reported times
against the grader's round trips and its worker's CPU counter, and that counter while the others
were timed: harness.lab.judge.rules.timing), then ok (its median per image, and its within-round ratio to
every reference with a 95% interval, each round ranked at no less than the grader's own measure of
it: timing.ranked_ns; harness.measure.store.stats resamples the rounds).

    Rounds                          what the rounds measured, by round (harness.lab.judge.phases.steps)
    verdict(lab, rounds) -> dict    the row's timing fields; a Failure (timing-inconsistent) when
                                    too many rounds do not fit the clocks
    clock_checks(times, trips, cpu, idle, labels, on_gpu) -> dict   each round's protocol gaps
                                    (the references' own) and the rounds that do not fit
"""

from dataclasses import dataclass

from harness.errors import Failure
from harness.lab.box.sandbox import Chunk
from harness.lab.judge.rules import timing
from harness.lab.judge.rules.assignment import Lab
from harness.measure.store import stats

SUBMISSION = "submission"  # the submission's key among the participants (the references: their labels)


@dataclass(frozen=True)
class Rounds:
    """The timed rounds, by round: its seed; each participant's chunk (keyed submission first, then
    the references; each round timed them in a rotated order); the submission's CPU time while
    the references were timed, and their wall time: (busy_ns, wall_ns)."""

    seeds: list[int]
    chunks: dict[str, list[Chunk]]
    idle: list[tuple[int, int]]


def verdict(lab: Lab, rounds: Rounds) -> dict:
    """clocks, then ok: the rounds that fit the grader's clocks, ranked by within-round ratio of
    each round's ranked times (timing.ranked_ns: never less than the grader's own measure)."""
    labels = [r.label for r in lab.references]
    times = {who: [c.times_ns for c in chunks] for who, chunks in rounds.chunks.items()}
    trips = {who: [c.trips_ns for c in chunks] for who, chunks in rounds.chunks.items()}
    cpu = {who: [c.cpu_ns for c in chunks] for who, chunks in rounds.chunks.items()}
    checks = clock_checks(times, trips, cpu, rounds.idle, labels, lab.device == "gpu")
    flagged, used = checks["inconsistent_rounds"], checks["rounds_used"]
    outside, gaps = (trips, checks["ranking_trip_gap_ns"]) if lab.device == "gpu" else \
        (cpu, checks["ranking_cpu_gap_ns"])
    ranked = {who: [timing.ranked_ns(times[who][r], outside[who][r], gaps[r]) for r in range(len(gaps))]
              for who in times}
    out = {"seeds": rounds.seeds, "times_ns": times, "trips_ns": trips, "cpu_ns": cpu,
           "idle_cpu_ns": [b for b, _ in rounds.idle], "ranked_ns": ranked,
           "clock_ratio": [timing.clock_ratio(times[SUBMISSION][r], outside[SUBMISSION][r], gaps[r])
                           for r in range(len(gaps))], **checks}
    if timing.too_many(len(flagged), len(rounds.seeds)):
        raise Failure("timing-inconsistent",
                      f"in {len(flagged)} of {len(rounds.seeds)} rounds the reported times do not fit "
                      f"the grader's clock; first: {flagged[0]['reason']}", extra=out)
    sub = [ranked[SUBMISSION][r] for r in used]
    summary = stats.summarize(sub)
    out.update({k: summary[k] for k in ("median_ns", "ci95_low_ns", "ci95_high_ns", "p90_ns",
                                        "mean_ns", "min_ns", "noisy")})
    out["median_per_image_ns"] = summary["median_ns"] / lab.measure.batch_size
    out["ratios"] = {ref: stats.round_ratio(sub, [ranked[ref][r] for r in used]) for ref in labels}
    rank = lab.rank_by.label
    out["reference_medians_ns"] = {ref: stats.pooled_median([ranked[ref][r] for r in used])
                                   for ref in labels}
    out["reference_ratios"] = {ref: stats.round_ratio([ranked[ref][r] for r in used],
                                                      [ranked[rank][r] for r in used]) for ref in labels}
    return out


def clock_checks(times: dict, trips: dict, cpu: dict, idle: list, labels: list[str],
                 on_gpu: bool) -> dict:
    """Each round's protocol gaps (the references' own), and the rounds whose submission's
    times do not fit the grader's clocks (harness.lab.judge.rules.timing). The rule that flags
    takes the largest reference's gap, the rule that ranks the least (timing.ranking_gap_ns):
    each in the direction that favours no lie."""
    rounds = len(idle)
    cpu_gaps = [max(timing.protocol_gap_ns(times[ref][r], cpu[ref][r]) for ref in labels)
                for r in range(rounds)]
    trip_gaps = [max(timing.protocol_gap_ns(times[ref][r], trips[ref][r]) for ref in labels)
                 for r in range(rounds)]
    ranking_cpu, ranking_trip = ([timing.ranking_gap_ns([times[ref][r] for ref in labels],
                                                        [outside[ref][r] for ref in labels])
                                  for r in range(rounds)] for outside in (cpu, trips))
    flagged = []
    for r in range(rounds):
        why = (timing.busy_while_idle(*idle[r])
               or timing.longer_than_trip(times[SUBMISSION][r], trips[SUBMISSION][r])
               or timing.inconsistency(times[SUBMISSION][r], cpu[SUBMISSION][r], cpu_gaps[r],
                                       trips[SUBMISSION][r] if on_gpu else None, trip_gaps[r]))
        if why:
            flagged.append({"round": r, "reason": why})
    used = [r for r in range(rounds) if r not in {f["round"] for f in flagged}]
    return {"protocol_cpu_ns": cpu_gaps, "protocol_trip_ns": trip_gaps,
            "ranking_cpu_gap_ns": ranking_cpu, "ranking_trip_gap_ns": ranking_trip,
            "inconsistent_rounds": flagged, "rounds_used": used}
