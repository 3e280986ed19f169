"""One submission's steps (the Grader's third phase), each returning its values; each failure is a
row with a status (a harness.errors.Failure), never a stopped grading:

  import    load the module and build the class           import-error, out-of-memory, timeout
  probe     the gate's first PROBE_GATE images vs the oracle; if they pass, PROBE_CALLS calls
            timed beside rank_by: a slow submission is gated on [gate] slow_images only (its
            gate points kept where [grade] slow_gate_points says so) and too-slow in seconds, not
            after the full gate's minutes (a wrong one goes on to the full gate: `wrong`, never timed)
                                                           too-slow, crashed, timeout
  gate      the first `images` test images vs the oracle   wrong, crashed, out-of-memory, timeout
  stages    (a lab with [stages]) each stage on the oracle's input to it, its verdict in the row,
            whatever the gate said (harness.lab.judge.rules.stages)         timeout
  warm-up   `warmup` calls; median vs rank_by's warm-up    too-slow (not timed), wrong
  rounds    per round one secret seed, the same images for every participant, the order
            rotated each round; every answer checked       wrong, crashed, timeout
  clocks, ok   harness.lab.judge.phases.verdict                   timing-inconsistent

Every exchange with the submission has a deadline from rank_by's own times, measured before the
submission's worker starts (harness.lab.judge.rules.deadlines): a hung call is `timeout` in seconds, its
row saying which call, the deadline and how it was derived; wall_s is the last resort.

The Grader's methods for them (harness.lab.judge.grade.Grader), on the submission's worker:
      .inference_steps(worker) -> dict      the steps in order, the row's fields they found
      .imported, .gate + .passes + .pass_gate, .stage_verdicts, .warm_up + .fast_enough (the probe
      and the warm-up),
      .rounds -> Rounds                     one method per step (.timed_rounds: any lab's rounds)
      .timed, .within, .need_pace           the submission's calls within their deadlines
    keeping(found)                          a Failure inside carries the values found so far (its
                                            extra, the row's fields after it), under its own
    Warmup                                  what the warm-up (or the probe) measured
    PROBE_CALLS
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from harness.errors import Failure

PROBE_CALLS = 3  # timed before the full gate: past max_ratio, `too-slow` in seconds, not minutes


@contextlib.contextmanager
def keeping(found: dict) -> Iterator[dict]:
    """The values a phase found survive its Failure: they go into the Failure's extra (the fields
    its row gets), under the extra's own."""
    try:
        yield found
    except Failure as exc:
        exc.extra = {**found, **exc.extra}
        raise


@dataclass(frozen=True)
class Warmup:
    """The warm-up (or the probe): the submission's median call time over rank_by's, in the same calls."""

    ratio: float
    median_ns: float
    reference_ns: float
