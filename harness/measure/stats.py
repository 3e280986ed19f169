"""Statistics of raw per-call times (ns), computed from the raw times, which are always kept.

Robust by default (median, percentiles, IQR), as in torch.utils.benchmark and pyperf.

Intervals come from the rounds, not from single calls. Calls within a round are correlated:
the machine's speed shifts in phases lasting seconds, so a whole round can run 1.7x slower
than the next. A bootstrap over calls treats 1000 calls as 1000 independent draws and gives
an interval far too narrow (on the reference VM, runs of one cell minutes apart gave disjoint
intervals 15 times in 17). So the 95% interval of a median is a cluster bootstrap: resample
the rounds with replacement, pool their calls, take the median; the same for a within-round
ratio (resample the rounds' ratios). Seeded, so the same rows always give the same report.

A cell is flagged `noisy` when its estimate is unstable across rounds: the interval is wider
than NOISY_CI_OVER_MEDIAN of the median. The per-call spread (IQR / median) is reported apart:
a wide distribution measured in stable rounds is not noise in the estimate.

An interval needs rounds to resample: with fewer than MIN_ROUNDS rounds, or a round of fewer than
MIN_CALLS_PER_ROUND calls, the bootstrap's "95%" is the spread of a handful of numbers (from three
rounds, their min and max), not an interval. Such a cell is `thin` (`interval_supported` is False):
the report shows its median without an interval and marks it, and a ratio with fewer than
MIN_ROUNDS rounds likewise.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

Rounds = Sequence[Sequence[float]]  # per-call times (or values), one list per round

NOISY_CI_OVER_MEDIAN = 0.20  # the median known to better than about +-10%
MIN_ROUNDS = 5  # below this, resampling rounds cannot give a 95% interval
MIN_CALLS_PER_ROUND = 3  # a round of one or two calls has no median of its own
BOOTSTRAP_RESAMPLES = 1000
LEVEL = 0.95


def _percentile_interval(estimates: Any) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_rounds_median_ci(rounds: Rounds, resamples: int = BOOTSTRAP_RESAMPLES,
                               seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of all calls, resampling whole rounds (clusters).

    Fewer than two rounds carry no information on the spread between rounds: (nan, nan)."""
    arrays = [np.asarray(r, dtype=np.float64) for r in rounds if len(r)]
    if len(arrays) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(arrays), size=(resamples, len(arrays)))  # (B, R) round indices
    if len({len(r) for r in arrays}) == 1:  # the usual case: equal chunks, one vectorised step
        matrix = np.stack(arrays)  # (R, k)
        blocks = []
        block = max(1, 4_000_000 // matrix.size)  # bound memory: (block, R * k) per step
        for start in range(0, resamples, block):
            pooled = matrix[picks[start:start + block]].reshape(len(picks[start:start + block]), -1)
            blocks.append(np.median(pooled, axis=1))
        medians = np.concatenate(blocks)
    else:  # rounds of different lengths: no matrix, but no pool built per resample either
        medians = _pooled_medians_by_counts(arrays, picks)
    return _percentile_interval(medians)


def _pooled_medians_by_counts(rounds: list[np.ndarray], picks: np.ndarray) -> np.ndarray:
    """For each row of picks, the median of the picked rounds' calls pooled: exactly what
    np.median(np.concatenate(...)) gives, without building each pool. Every call is sorted once;
    a resample repeats round i's calls as often as it picked round i, so its pooled median is
    found by walking the cumulative repeat counts to the middle position(s)."""
    values = np.concatenate(rounds)
    labels = np.concatenate([np.full(len(r), i) for i, r in enumerate(rounds)])
    order = np.argsort(values, kind="stable")
    values, labels = values[order], labels[order]
    counts = np.stack([np.bincount(row, minlength=len(rounds)) for row in picks])  # (B, R)
    out = []
    block = max(1, 4_000_000 // values.size)  # bound memory: (block, N) per step
    for start in range(0, len(counts), block):
        # (block, N): how many pooled calls lie at or below each sorted value
        cumulative = np.cumsum(counts[start:start + block][:, labels], axis=1)
        total = cumulative[:, -1]
        upper = (cumulative > (total // 2)[:, None]).argmax(axis=1)  # the value at position total // 2
        lower = (cumulative > ((total - 1) // 2)[:, None]).argmax(axis=1)  # at (total - 1) // 2
        out.append(np.where(total % 2 == 1, values[upper], (values[lower] + values[upper]) / 2))
    return np.concatenate(out)


def interval_supported(rounds: Rounds) -> bool:
    """Whether the rounds can carry a 95% interval: at least MIN_ROUNDS non-empty rounds, each of
    at least MIN_CALLS_PER_ROUND calls (a round's calls for a median, a ratio's rounds)."""
    sizes = [len(r) for r in rounds if len(r)]
    return len(sizes) >= MIN_ROUNDS and min(sizes) >= MIN_CALLS_PER_ROUND


def thin_reason(rounds: Rounds) -> str:
    """'3 rounds of 15 calls' (what a thin cell had), for the mark that replaces its interval."""
    sizes = [len(r) for r in rounds if len(r)]
    calls = f"{min(sizes)}" if len(set(sizes)) == 1 else f"{min(sizes)}–{max(sizes)}"
    return (f"{len(sizes)} rounds of {calls} calls (an interval needs >= {MIN_ROUNDS} rounds of "
            f">= {MIN_CALLS_PER_ROUND})")


def summarize(rounds_ns: Rounds) -> dict[str, Any]:
    """Summary of per-call wall times in ns, given as rounds (a list of lists of calls)."""
    rounds = [list(r) for r in rounds_ns if len(r)]
    t = np.asarray([x for r in rounds for x in r], dtype=np.float64)
    if t.size == 0:
        raise ValueError("no times to summarize")
    q25, median, q75, p90, p99 = np.percentile(t, [25, 50, 75, 90, 99])
    low, high = bootstrap_rounds_median_ci(rounds)
    round_medians = [float(np.median(r)) for r in rounds]
    iqr = q75 - q25
    ci_width = (high - low) / median if median > 0 and not np.isnan(low) else float("nan")
    return {
        "n": int(t.size),
        "rounds": len(rounds),
        "median_ns": float(median),
        "mean_ns": float(t.mean()),
        "min_ns": float(t.min()),
        "max_ns": float(t.max()),
        "p90_ns": float(p90),
        "p99_ns": float(p99),
        "iqr_ns": float(iqr),
        "spread": float(iqr / median) if median > 0 else float("nan"),  # per-call IQR / median
        "round_medians_ns": round_medians,
        "ci95_low_ns": low,
        "ci95_high_ns": high,
        "ci_over_median": ci_width,
        "ci_method": "cluster bootstrap over rounds",
        "noisy": bool(ci_width > NOISY_CI_OVER_MEDIAN),  # NaN (one round) compares False
        "thin": not interval_supported(rounds),
    }


def pooled_median(rounds: Rounds) -> float:
    """The median of every call of every round."""
    return float(np.median([t for r in rounds for t in r]))


def median_interval(values: Sequence[float] | np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of independent values (one per round), by a seeded
    bootstrap; (nan, nan) for fewer than two values."""
    array = np.asarray(values, dtype=np.float64)
    if array.size < 2:
        return float("nan"), float("nan")
    picks = np.random.default_rng(seed).integers(0, array.size, size=(resamples, array.size))
    return _percentile_interval(np.median(array[picks], axis=1))


def round_ratio(rounds_a: Rounds, rounds_b: Rounds, resamples: int = BOOTSTRAP_RESAMPLES,
                seed: int = 0) -> dict[str, Any] | None:
    """Median over rounds of median(a in round r) / median(b in round r), with a 95% interval
    from resampling the rounds' ratios.

    Both cells were measured in the same rounds (A B A B ...), so a drift in machine speed
    hits both alike and cancels in each round's ratio.
    """
    pairs = zip(rounds_a, rounds_b, strict=False)
    ratios = np.array([np.median(a) / np.median(b) for a, b in pairs if len(a) and len(b)])
    if not ratios.size:
        return None
    low, high = median_interval(ratios, resamples, seed)
    return {"ratio": float(np.median(ratios)), "min": float(np.min(ratios)),
            "max": float(np.max(ratios)), "rounds": int(ratios.size),
            "ci95_low": low, "ci95_high": high, "thin": int(ratios.size) < MIN_ROUNDS}
