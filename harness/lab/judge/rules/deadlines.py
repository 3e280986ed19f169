"""Deadlines for a submission's calls, from the rank reference's own times: a hung submission (a
sleep, a spin, a deadlock in predict) is `timeout` in seconds, not after the lab's wall_s.

A submission within max_ratio x rank_by answers a call within max_ratio x the reference's time
for the same work. One that has not answered long after that has hung, or is so far past the
limit that waiting on is pointless; the grader kills it (its box, harness.lab.box.sandbox: the same
kill as wall_s's) and the row says which call, the deadline and how it was derived:

    deadline = allowance + SAFETY x max_ratio x (the reference's time for the same work)

- the reference's time: measured just before each submission's worker starts
  (harness.lab.judge.grade: Grader.measure_pace). No submission runs then, so none can
  slow the reference to stretch its own deadline, and no byte a submission replies enters the sum:
  a lying worker cannot extend its deadline.
- the same work: k timed calls are k x the reference's median round trip (the grader's clock,
  waits for a core included, as the submission's calls will have them), at the lab's batch_size;
  a gate of n images is n x its time per image, at the gate's batch (the grader's clock around
  its gate exchange) or at batch_size (its own clock around predict, no waits: it is the
  project's trusted worker), whichever is more. A submission within max_ratio at batch_size is
  so per image however it batches, even one that loops over the images (the reference may batch
  far better); a round trip's wait for a core, counted per image, would count it 100 times.
- SAFETY (4): a submission at max_ratio still has 4x its time; max_ratio already decides
  too-slow (a slow call that answers is measured and judged by the ratio rule, never killed).
- allowance: CALL_FLOOR_S for calls of a shape the submission has run (the warm-up, the rounds,
  the probe's later calls). An exchange that may meet a new input shape may compile first (a
  JIT specialises per shape: JAX, torch.compile, CuPy's kernels): the gate's first images (the
  first call ever), the probe's first call (batch_size), the full gate (calls of 1000). These
  get a start-up allowance: the lab's import_s (its own budget for start-up), at most
  FIRST_CALL_S, and at least SAFETY x max_ratio x the reference's own cold start (its first
  call's time beyond a warm one's, measured once), so a lab whose reference starts slowly
  (cuDNN's tuning) lets submissions start slowly too.
- wall_s stays the last resort: each exchange waits no longer than what is left of it
  (harness.lab.box.sandbox), and a deadline past it is wall_s's.

    SAFETY, CALL_FLOOR_S, FIRST_CALL_S, PACE_CALLS
    Pace                                      the reference's measured times
    Deadline                                  seconds, and how they were derived (words)
    for_calls(pace, limits, calls, first)     k timed calls
    for_gate(pace, limits, images)            a gate exchange (its calls of up to 1000 images)
    start_up(pace, limits)                    the allowance of a new shape, and its words
    factor(limits)                            SAFETY x max_ratio; ms(seconds), in words
    timed_out(what, deadline) -> Failure      the row's `timeout`
"""

from dataclasses import asdict, dataclass

from harness.errors import Failure
from harness.lab.judge.rules.assignment import Limits

SAFETY = 4.0
# The allowance of any call: an honest process on a loaded node can stall a second or more (a
# burst of other work, swap, a GC); and a call of 1 s, about 4000x numpy, must end `too-slow`
# with its ratio (measured), not `timeout` (tests/test_lab.py's `sleepy`).
CALL_FLOOR_S = 5.0
# A first call's compile, at most: the slowest first call the project measured is numba/fused's, a few
# seconds (its number on each machine: reports/DETAILS.md, "Cold start against steady state"); JAX,
# TensorFlow and Keras first calls are under 1 s.
FIRST_CALL_S = 30.0
PACE_CALLS = 10  # the reference's calls timed for each submission's deadlines (their median)


@dataclass(frozen=True)
class Pace:
    """The rank reference's times, in seconds: its median round trip of one call at the lab's
    batch_size, and its median time inside predict in those calls (its own clock); its gate
    exchange on the gate's first images, per image; its cold start (its first gate exchange's time
    beyond a warm one's, measured once)."""

    reference: str
    call_s: float
    work_s: float
    image_s: float
    cold_s: float
    batch_size: int

    def row(self) -> dict:
        """Its fields as the row keeps them: times rounded to the nanosecond."""
        return {k: round(v, 9) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Deadline:
    seconds: float
    why: str  # how it was derived, in words, with the numbers


def factor(limits: Limits) -> float:
    return SAFETY * limits.max_ratio


def start_up(pace: Pace, limits: Limits) -> tuple[float, str]:
    """(the allowance of an exchange that may meet a new input shape, in words)."""
    own = min(limits.import_s, FIRST_CALL_S)
    theirs = factor(limits) * pace.cold_s
    if theirs > own:
        return theirs, (f"{factor(limits):g} x {pace.reference}'s cold start ({ms(pace.cold_s)}) "
                        "for a first call")
    return own, f"{own:g} s for a first call (import_s, at most {FIRST_CALL_S:g} s)"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _deadline(pace: Pace, limits: Limits, work_s: float, work: str, first: bool) -> Deadline:
    allowance, said = start_up(pace, limits) if first else (CALL_FLOOR_S, f"{CALL_FLOOR_S:g} s")
    k = factor(limits)
    return Deadline(allowance + k * work_s,
                    f"{said} + {k:g} x {pace.reference}'s {ms(work_s)} for {work}: max_ratio "
                    f"{limits.max_ratio:g} x safety {SAFETY:g}, {pace.reference} timed by the grader "
                    "before this submission started")


def for_calls(pace: Pace, limits: Limits, calls: int, first: bool = False) -> Deadline:
    """k timed calls of batch_size images (a probe's call, a warm-up's or a round's chunk)."""
    work = f"{calls} call(s) of {pace.batch_size} image(s)"
    return _deadline(pace, limits, calls * pace.call_s, work, first)


def for_gate(pace: Pace, limits: Limits, images: int) -> Deadline:
    """A gate exchange of `images` images: always a start-up allowance (its batch is new)."""
    per_image = max(pace.image_s, pace.work_s / pace.batch_size)
    return _deadline(pace, limits, images * per_image, f"{images} image(s)", True)


def timed_out(what: str, deadline: Deadline) -> Failure:
    return Failure("timeout", f"no answer to {what} within its deadline of {deadline.seconds:.1f} s "
                              f"({deadline.why}); worker killed")
