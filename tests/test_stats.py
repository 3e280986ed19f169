import numpy as np
import pytest

from harness import stats


def test_summary_of_known_values():
    s = stats.summarize(list(range(1, 101)))  # 1..100 ns
    assert s["n"] == 100 and s["median_ns"] == 50.5 and s["min_ns"] == 1 and s["max_ns"] == 100
    assert s["mean_ns"] == 50.5
    assert s["p90_ns"] == pytest.approx(90.1) and s["iqr_ns"] == pytest.approx(49.5)
    assert s["ci95_low_ns"] < 50.5 < s["ci95_high_ns"]
    assert s["noisy"]  # IQR/median ~ 0.98


def test_tight_distribution_is_not_noisy_and_ci_is_reproducible():
    rng = np.random.default_rng(42)  # a seeded fake timer: 1 ms +- 1%
    times = rng.normal(1e6, 1e4, 1000)
    a, b = stats.summarize(times), stats.summarize(times)
    assert not a["noisy"]
    assert a["ci95_low_ns"] == b["ci95_low_ns"] and a["ci95_high_ns"] == b["ci95_high_ns"]
    assert 0.995e6 < a["ci95_low_ns"] < a["median_ns"] < a["ci95_high_ns"] < 1.005e6


def test_bootstrap_ci_covers_true_median_most_of_the_time():
    rng = np.random.default_rng(7)
    covered = 0
    for trial in range(100):
        sample = rng.exponential(1.0, 200)  # true median ln 2
        low, high = stats.bootstrap_median_ci(sample, resamples=500, seed=trial)
        covered += low <= np.log(2) <= high
    assert covered >= 85


def test_noisy_threshold_is_iqr_over_median_above_ten_percent():
    assert not stats.summarize([90, 95, 100, 105, 110])["noisy"]  # IQR 10 / 100
    assert stats.summarize([80, 90, 100, 110, 120])["noisy"]  # IQR 20 / 100


def test_round_ratio_cancels_a_drift_common_to_both():
    drift = [1.0, 2.0, 4.0]  # the machine slows down round after round
    a = [[3.0 * d] * 5 for d in drift]
    b = [[1.0 * d] * 5 for d in drift]
    r = stats.round_ratio(a, b)
    assert r["ratio"] == 3.0 and r["min"] == r["max"] == 3.0 and r["rounds"] == 3
    # pooled medians would give 3.0 here too, but a drift with unequal counts would not:
    assert stats.round_ratio([[6.0]], []) is None


def test_empty_times_rejected():
    with pytest.raises(ValueError):
        stats.summarize([])
