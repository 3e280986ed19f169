"""Statistics of raw per-call times (ns): computed from the raw times, which are always kept.

Robust by default (median, percentiles, IQR), as in torch.utils.benchmark and pyperf; the 95%
confidence interval of the median is a seeded percentile bootstrap, so it is reproducible.
"""

import numpy as np

NOISY_IQR_OVER_MEDIAN = 0.10
BOOTSTRAP_RESAMPLES = 2000


def bootstrap_median_ci(times, resamples=BOOTSTRAP_RESAMPLES, seed=0, level=0.95):
    times = np.asarray(times, dtype=np.float64)
    rng = np.random.default_rng(seed)
    # Resample in blocks so memory stays bounded for long runs: (block, n) index arrays.
    medians = []
    block = max(1, min(resamples, 2_000_000 // max(len(times), 1)))
    for start in range(0, resamples, block):
        idx = rng.integers(0, len(times), size=(min(block, resamples - start), len(times)))
        medians.append(np.median(times[idx], axis=1))
    medians = np.concatenate(medians)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def summarize(times_ns) -> dict:
    """Summary of per-call wall times in ns; `noisy` when IQR/median > 10%."""
    t = np.asarray(times_ns, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no times to summarize")
    q25, median, q75, p90, p99 = np.percentile(t, [25, 50, 75, 90, 99])
    low, high = bootstrap_median_ci(t)
    iqr = q75 - q25
    return {
        "n": int(t.size),
        "median_ns": float(median),
        "mean_ns": float(t.mean()),
        "min_ns": float(t.min()),
        "max_ns": float(t.max()),
        "p90_ns": float(p90),
        "p99_ns": float(p99),
        "iqr_ns": float(iqr),
        "ci95_low_ns": low,
        "ci95_high_ns": high,
        "noisy": bool(median > 0 and iqr / median > NOISY_IQR_OVER_MEDIAN),
    }


def round_ratio(rounds_a: list, rounds_b: list) -> dict | None:
    """Median over rounds of median(a in round r) / median(b in round r).

    Both cells were measured in the same rounds (A B A B ...), so a drift in machine speed
    hits both alike and cancels in each round's ratio.
    """
    pairs = zip(rounds_a, rounds_b, strict=False)
    ratios = [np.median(a) / np.median(b) for a, b in pairs if len(a) and len(b)]
    if not ratios:
        return None
    return {"ratio": float(np.median(ratios)), "min": float(np.min(ratios)),
            "max": float(np.max(ratios)), "rounds": len(ratios)}
