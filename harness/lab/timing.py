"""Fair, tamper-evident timing: unseen images, answers checked, worker clocks bounded by the
parent's.

Unseen images. Each round's images are drawn from the training set by a seed made at grading
time (secrets), then shifted by up to 2 pixels and given random noise: a submission cannot
precompute them (memoising all 60,000 training images gains nothing), and the seed is stored
only after the timing. The parent sends one call's images only after it has the previous
call's answer (harness.lab.sandbox), so no submission sees an image before answering the last.

Answers. Every timed call's probabilities come back and are compared with the NumPy oracle on
the same images: speed cannot come from wrong or stale answers.

Clocks. The worker times each predict with its own clock (inside the submission's process,
so a submission could patch it); the parent times each call's round trip (images sent ->
answer read), which bounds the true time from above. The gap (round trip - reported) is the
protocol: pipe writes, wake-ups, decoding. The references (trusted) are timed through the same
protocol in the same round, so their gap measures it on this machine, under this load:

    o = the largest median gap of a reference in the round
    a = 2 * o + ALLOWANCE_NS                                     (per-call allowance)
    inconsistent when  median(reported) < 0.5 * (median(trip) - a)
                  or   sum(reported)    < 0.5 * (sum(trip) - calls * a - CHUNK_ALLOWANCE_NS)

An honest submission's median gap is about o, so the median test needs the submission's median
time to be below its own protocol gap minus 2o: load slows calls and pipes alike and cancels.
The sum test allows CHUNK_ALLOWANCE_NS of scheduler stalls per chunk. A round that fails is
dropped from the ranking; the submission is timing-inconsistent when half its rounds or more
fail. A clock that runs slow is caught in every round; the most a lie can gain unflagged is 2x
(plus the allowance) on the median.
"""

import secrets

import numpy as np

ALLOWANCE_NS = 50_000  # per call: what a pipe round trip may cost beyond the references' gap
CHUNK_ALLOWANCE_NS = 50_000_000  # per chunk: a few scheduler stalls on a loaded machine
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


def compare(probs: np.ndarray, oracle: np.ndarray, tolerance: float) -> dict:
    """Gate numbers: argmax agreement and the worst |dp| (NaN counts as the worst)."""
    probs = np.asarray(probs, dtype=np.float64).reshape(oracle.shape)
    diff = np.abs(probs - oracle)
    diff[np.isnan(diff)] = np.inf
    return {"images": int(len(oracle)), "agree": int(np.sum(probs.argmax(1) == oracle.argmax(1))),
            "max_abs_diff": float(diff.max()) if diff.size else 0.0}


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


def protocol_gap_ns(times_ns, trips_ns) -> float:
    """Median per-call protocol cost of a trusted worker: round trip minus its own time."""
    return float(np.median(np.asarray(trips_ns, np.float64) - np.asarray(times_ns, np.float64)))


def inconsistency(times_ns, trips_ns, reference_gap_ns: float) -> str | None:
    """None when the reported times fit the parent's round trips (rule in the module doc),
    else the reason, with the numbers."""
    t = np.asarray(times_ns, dtype=np.float64)
    trip = np.asarray(trips_ns, dtype=np.float64)
    a = 2 * max(reference_gap_ns, 0.0) + ALLOWANCE_NS
    med_t, med_trip = float(np.median(t)), float(np.median(trip))
    if med_t < 0.5 * (med_trip - a):
        return (f"median reported {med_t / 1e3:.1f} us per call, but the grader's round trips have "
                f"median {med_trip / 1e3:.1f} us (protocol allowance {a / 1e3:.1f} us)")
    if t.sum() < 0.5 * (trip.sum() - len(t) * a - CHUNK_ALLOWANCE_NS):
        return (f"reported calls sum to {t.sum() / 1e6:.2f} ms, but the grader waited "
                f"{trip.sum() / 1e6:.2f} ms for them (allowance {(len(t) * a + CHUNK_ALLOWANCE_NS) / 1e6:.2f} ms)")
    return None


def too_many(inconsistent_rounds: int, rounds: int) -> bool:
    return inconsistent_rounds * 2 >= rounds
