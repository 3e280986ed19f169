"""Fair, tamper-evident timing: unseen images, answers checked, worker clocks bounded by the
parent's.

Unseen images. Each round's images are drawn from the training set by a seed made at grading
time (secrets), then shifted by up to 2 pixels and given random noise: a submission cannot
precompute them (memoising all 60,000 training images gains nothing), and the seed is stored
only after the timing. The parent sends one call's images only after it has the previous
call's answer (harness.lab.box.sandbox), so no submission sees an image before answering the last.

Answers. Every timed call's probabilities come back and are compared with the NumPy oracle on
the same images: speed cannot come from wrong or stale answers.

Clocks. The worker times each predict with its own clock, inside the submission's process, so
a submission could patch it. The parent measures each call from outside with two clocks the
submission cannot touch: the round trip (images sent -> answer read) and the worker process's
CPU time over that round trip (the kernel's per-process CPU clock, all threads). One thread
cannot use more CPU time than wall time, so an honest call reports at least its CPU time,
less the protocol's own CPU cost (decoding the images, encoding the answer). The references
(trusted) are timed through the same protocol in the same round, and their CPU beyond their
reported time measures that cost:

    p = the largest median (cpu - reported) of a reference in the round, at least 0
    a = 2 * p + ALLOWANCE_NS                                       (per-call allowance)
    inconsistent when  median(reported) < 0.5 * (median(cpu) - a)
                  or   sum(reported)    < 0.5 * (sum(cpu) - calls * a)

Load cannot flag an honest submission: waiting for a core adds wall time, never CPU time (the
parent's round trips cannot be used the same way: on a loaded machine a CPU-heavy worker waits
for a core at each wake-up, outside its own clock, milliseconds per call). A clock that runs
slow is caught in every round; an unflagged lie gains at most 2x (plus the allowance). On the
GPU, time waiting for the device is not CPU time, so there the round trip is checked as well:
median(reported) < 0.5 * (median(trip) - 2 * g - ALLOWANCE_NS), g the references' median
(trip - reported). A round that fails is dropped from the ranking; the submission is
timing-inconsistent when half its rounds or more fail.

Ranked: a round's calls rank at their reported times, scaled up when the round's median reported
time is below the grader's own median measure from outside: on the CPU the worker's CPU time
over each call less the references' protocol cost (cpu - p'), on the GPU the round trip less
the references' protocol gap (trip - g'). Here p' and g' are the least of the references' gaps
in the round, where the flags take the largest: the references' gaps are noisy (on a loaded
machine one reference's jumps from ~12 to ~45 us in some rounds), and the largest would let a
slow clock rank that much below the CPU it used:

    ranked = reported * max(1, median(measure) / median(reported))     per round, every participant

An honest round reports about that measure or more (a wait adds to its clock, never to its CPU
time), so its times stand, lifted at most by its own protocol cost beyond the least reference's (a
few us of calls of about 200 here); a clock that runs slow, by any factor, gains nothing: its
round ranks at the grader's measure.

Not covered: work handed to another process (its CPU time is not the worker's), and a
submission that computes on several threads is flagged (the lab fixes threads = 1).

    new_seed(), timing_images(seed, count, train)        unseen images
    compare(probs, oracle, tolerance), disagreements(...)    answers against the oracle
    not_probabilities(gate)                              'apply softmax', where the answers are logits
    oracle_answers(oracle, images_u8, dtype), GATE_BATCH   the oracle's own, as the gate asks
    gate_passes(gate, ...), gate_sentence(gate, want)    the gate's rule and its line (grader, feedback, kit)
    protocol_gap_ns, inconsistency, busy_while_idle, longer_than_trip, too_many   the clock rules
    ranking_gap_ns(times, others)      the protocol cost the ranking takes off (the least)
    ranked_ns(times, outside, gap), clock_ratio(times, outside, gap)       the time that ranks
"""

import secrets
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from harness.data import mnist

ALLOWANCE_NS = 20_000  # per call, beyond twice the references' protocol cost
GATE_BATCH = 1000  # images per predict call in the gate (the grader's, the kit's): bounds memory
SHIFT = 2  # pixels
NOISE = 32  # uint8 levels, added


def new_seed() -> int:
    return secrets.randbits(62)


def timing_images(seed: int, count: int, train: np.ndarray) -> np.ndarray:
    """(count, 28, 28) uint8: training images shifted by up to SHIFT pixels, plus noise."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(train), count)
    shifts = rng.integers(-SHIFT, SHIFT + 1, (count, 2))
    noise = rng.integers(0, NOISE, (count, 28, 28))
    out = np.empty((count, 28, 28), dtype=np.uint8)
    for i, (p, (dy, dx)) in enumerate(zip(picks, shifts, strict=True)):
        out[i] = np.clip(np.roll(train[p], (int(dy), int(dx)), axis=(0, 1)) + noise[i], 0, 255)
    return out


FIRST_BAD = 5  # the gate names this many of the first images it found wrong (the kit's `show N` opens them)
SUMS_TO_ONE = 1e-3  # a row of probabilities sums to 1 within this, every value in [0, 1]


def compare(probs: np.ndarray, oracle: np.ndarray, tolerance: float) -> dict:
    """Gate numbers: argmax agreement and the worst |dp| (NaN counts as the worst); the first
    images whose argmax differs or whose |dp| is past `tolerance` (0-based test image numbers); and
    whether the answers are probabilities at all (rows in [0, 1] that sum to 1)."""
    probs = np.asarray(probs, dtype=np.float64).reshape(oracle.shape)
    diff = np.abs(probs - oracle)
    diff[np.isnan(diff)] = np.inf
    row = diff.max(axis=1) if diff.size else np.zeros(len(oracle))
    bad = np.flatnonzero((probs.argmax(1) != oracle.argmax(1)) | (row > tolerance)) if len(oracle) else \
        np.zeros(0, dtype=np.int64)
    sums = probs.sum(axis=1)
    probabilities = bool(np.all(np.abs(sums - 1) <= SUMS_TO_ONE) and np.all((probs >= 0) & (probs <= 1)))
    return {"images": int(len(oracle)), "agree": int(np.sum(probs.argmax(1) == oracle.argmax(1))),
            "max_abs_diff": float(diff.max()) if diff.size else 0.0,
            "first_bad": [int(i) for i in bad[:FIRST_BAD]], "probabilities": probabilities,
            "row_sums": [float(np.nanmin(sums)), float(np.nanmax(sums))] if len(sums) else [1.0, 1.0]}


def not_probabilities(gate: dict) -> str:
    """The words for answers that are not probabilities ('' when they are, or were not checked)."""
    if gate.get("probabilities", True):
        return ""
    low, high = (gate.get("row_sums") or [float("nan")] * 2)[:2]
    return (f"the answers are not probabilities (rows sum to {low:.3g} ... {high:.3g}, or values outside "
            "[0, 1]): apply softmax to fc3's outputs (logits) before returning them")


def oracle_answers(oracle: Any, images_u8: np.ndarray, dtype: str) -> np.ndarray:
    """The NumPy oracle's probabilities of these (N, 28, 28) uint8 images, (N, 10) float64."""
    x = mnist.to_input(images_u8, dtype)
    return np.concatenate([oracle.predict(x[i:i + GATE_BATCH])
                           for i in range(0, len(x), GATE_BATCH)]).astype(np.float64)


def gate_passes(gate: dict, images: int, min_agree: int, max_abs_diff: float) -> bool:
    """The gate's rule on `gate` (compare's numbers on the whole gate of `images`, or on its first
    images): no more disagreements than the whole gate allows, every |dp| within max_abs_diff."""
    return gate["images"] - gate["agree"] <= images - min_agree and gate["max_abs_diff"] <= max_abs_diff


def gate_sentence(gate: dict, want: Any) -> str:
    """The gate's line against `want` (a [gate]: its images, min_agree and max_abs_diff, as
    harness.lab.judge.rules.tables.Gate holds them); where it failed, the first images that disagree
    (test image numbers, from 0) and answers that are not probabilities, named."""
    images, min_agree, max_abs_diff = want.images, want.min_agree, want.max_abs_diff
    line = (f"Gate: {gate['agree']} of {gate['images']} test images agree with the NumPy reference "
            f"(needed {min_agree - (images - gate['images'])}); worst |dp| "
            f"{gate['max_abs_diff']:.2g} (allowed {max_abs_diff:g}).")
    first = gate.get("first_bad") or []
    if first and not gate_passes(gate, images, min_agree, max_abs_diff):
        line += (f" First test images that disagree: {', '.join(map(str, first))} (the kit's `show N` "
                 "draws one beside both answers).")
    why = not_probabilities(gate)
    return line + (f" Note: {why}." if why else "")


def disagreements(probs: np.ndarray, oracle: np.ndarray, tolerance: float) -> dict:
    """Timed answers against the oracle: an answer is bad when any |dp| > tolerance, or its
    argmax differs where the oracle's top two are further apart than 2 * tolerance (a near tie
    may flip within the tolerance)."""
    probs = np.asarray(probs, dtype=np.float64).reshape(oracle.shape)
    diff = np.abs(probs - oracle).max(axis=1)
    diff[np.isnan(diff)] = np.inf
    top2 = np.sort(oracle, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * tolerance
    bad = (diff > tolerance) | (clear & (probs.argmax(1) != oracle.argmax(1)))
    return {"bad": int(bad.sum()), "calls": int(len(oracle)), "max_abs_diff": float(diff.max())}


def protocol_gap_ns(times_ns: ArrayLike, other_ns: ArrayLike) -> float:
    """Median per-call protocol cost of a trusted worker: its CPU time (or round trip) beyond
    its own reported time, at least 0."""
    gap = np.asarray(other_ns, np.float64) - np.asarray(times_ns, np.float64)
    return max(float(np.median(gap)), 0.0)


def ranking_gap_ns(times_ns: list[ArrayLike], other_ns: list[ArrayLike]) -> float:
    """The protocol cost the ranking takes off the grader's measure: the least of the references'
    protocol_gap_ns (their reported times and CPU times or round trips, one list per reference)."""
    return min(protocol_gap_ns(t, o) for t, o in zip(times_ns, other_ns, strict=True))


def inconsistency(times_ns: ArrayLike, cpu_ns: ArrayLike, cpu_gap_ns: float,
                  trips_ns: ArrayLike | None = None, trip_gap_ns: float = 0.0) -> str | None:
    """None when the reported times fit the parent's clocks (rule in the module doc), else the
    reason, with the numbers. trips_ns is given on the GPU only."""
    t = np.asarray(times_ns, dtype=np.float64)
    cpu = np.asarray(cpu_ns, dtype=np.float64)
    a = 2 * cpu_gap_ns + ALLOWANCE_NS
    med_t, med_cpu = float(np.median(t)), float(np.median(cpu))
    if med_t < 0.5 * (med_cpu - a):
        return (f"median reported {med_t / 1e3:.1f} us per call, but the worker used a median "
                f"{med_cpu / 1e3:.1f} us of CPU per call (protocol allowance {a / 1e3:.1f} us)")
    if t.sum() < 0.5 * (cpu.sum() - len(t) * a):
        return (f"reported calls sum to {t.sum() / 1e6:.2f} ms, but the worker used {cpu.sum() / 1e6:.2f} ms "
                f"of CPU for them (allowance {len(t) * a / 1e6:.2f} ms)")
    if trips_ns is not None:
        trip = float(np.median(np.asarray(trips_ns, dtype=np.float64)))
        b = 2 * trip_gap_ns + ALLOWANCE_NS
        if med_t < 0.5 * (trip - b):
            return (f"median reported {med_t / 1e3:.1f} us per call, but the grader's round trips have "
                    f"median {trip / 1e3:.1f} us (protocol allowance {b / 1e3:.1f} us)")
    return None


# CPU a sleeping worker may use while the others are timed, or this share of their wall time,
# whichever is more. An honest worker blocked on its next call uses ~0 (tens of us seen, finishing its
# previous reply); a background process gets milliseconds even on a loaded machine.
IDLE_BUSY_NS = 2_000_000
IDLE_BUSY_SHARE = 0.02


def busy_while_idle(busy_ns: float, wall_ns: float) -> str | None:
    """A submission waiting for its next call uses no CPU; one that computes (a background
    thread, a helper process, a fork bomb) while the references are timed slows them down."""
    if busy_ns > max(IDLE_BUSY_NS, IDLE_BUSY_SHARE * wall_ns):
        return (f"the submission used {busy_ns / 1e6:.1f} ms of CPU while the references were timed "
                f"({wall_ns / 1e6:.1f} ms): background work slows the others")
    return None


def longer_than_trip(times_ns: ArrayLike, trips_ns: ArrayLike) -> str | None:
    """A call cannot take longer inside the worker than the grader's round trip around it."""
    t, trip = np.asarray(times_ns, dtype=np.float64), np.asarray(trips_ns, dtype=np.float64)
    over = int(np.sum(t > trip))
    if over:
        return f"{over} call(s) reported a time longer than the grader's own round trip around them"
    return None


def too_many(inconsistent_rounds: int, rounds: int) -> bool:
    return inconsistent_rounds * 2 >= rounds


def ranked_ns(times_ns: ArrayLike, outside_ns: ArrayLike, gap_ns: float) -> list[int]:
    """One round's calls as they rank: the reported times, scaled up by the round's
    max(1, median(outside - gap) / median(reported)) (the module's doc). By the medians, not call
    by call: an honest round's noise is not turned into a bias."""
    t = np.asarray(times_ns, dtype=np.float64)
    factor = max(1.0, 1.0 / clock_ratio(t, outside_ns, gap_ns)) if len(t) else 1.0
    return [int(v) for v in np.rint(t * factor)]


def clock_ratio(times_ns: ArrayLike, outside_ns: ArrayLike, gap_ns: float) -> float:
    """median(reported) / median(outside - gap): about 1 for an honest worker (more when it waited
    for a core), below 1 for a clock that runs slow."""
    measured = float(np.median(np.asarray(outside_ns, dtype=np.float64) - gap_ns))
    reported = float(np.median(np.asarray(times_ns, dtype=np.float64)))
    return max(reported, 1.0) / measured if measured > 0 else float("inf")
