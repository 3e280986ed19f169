import numpy as np
import pytest

from harness.measure.store import stats


def test_summary_of_known_values():
    rounds = [list(range(1, 51)), list(range(51, 101))]  # 1..100 ns in two rounds
    s = stats.summarize(rounds)
    assert s["n"] == 100 and s["rounds"] == 2 and s["median_ns"] == 50.5
    assert s["min_ns"] == 1 and s["max_ns"] == 100 and s["mean_ns"] == 50.5
    assert s["p90_ns"] == pytest.approx(90.1) and s["iqr_ns"] == pytest.approx(49.5)
    assert s["spread"] == pytest.approx(49.5 / 50.5)
    assert s["round_medians_ns"] == [25.5, 75.5]
    assert s["ci95_low_ns"] <= 50.5 <= s["ci95_high_ns"]


def fake_rounds(seed, phases, calls=100, jitter=0.05):
    """A seeded fake timer: each round runs at its phase's speed, calls jitter around it."""
    rng = np.random.default_rng(seed)
    return [list(rng.normal(speed, speed * jitter, calls)) for speed in phases]


def test_quiet_cell_is_not_noisy_even_with_a_wide_call_distribution():
    rounds = fake_rounds(1, [100e3] * 10, jitter=0.3)  # per-call IQR/median ~ 0.4, stable rounds
    s = stats.summarize(rounds)
    assert s["spread"] > 0.3
    assert not s["noisy"] and s["ci_over_median"] < 0.05


def test_disturbed_cell_is_noisy():
    rounds = fake_rounds(2, [106e3, 180e3] * 5, jitter=0.02)  # the VM's two speed phases
    s = stats.summarize(rounds)
    assert s["spread"] > 0.3 and s["noisy"]
    assert s["ci_over_median"] > 0.2


def test_interval_from_rounds_is_wider_than_from_calls_when_rounds_differ():
    """The reason for the cluster bootstrap: 1000 correlated calls are not 1000 draws."""
    rounds = fake_rounds(3, [100e3, 104e3, 97e3, 110e3, 99e3, 103e3, 95e3, 108e3, 101e3, 98e3],
                         jitter=0.05)
    s = stats.summarize(rounds)
    calls = np.concatenate(rounds)
    rng = np.random.default_rng(0)
    naive = np.median(calls[rng.integers(0, calls.size, (1000, calls.size))], axis=1)
    naive_width = np.percentile(naive, 97.5) - np.percentile(naive, 2.5)
    assert s["ci95_high_ns"] - s["ci95_low_ns"] > 2 * naive_width


def test_rounds_interval_covers_the_true_median_most_of_the_time():
    """Round speeds drawn around a true speed: the interval covers it in most trials."""
    rng = np.random.default_rng(7)
    covered = 0
    for trial in range(60):
        phases = 100e3 * rng.lognormal(0, 0.1, 10)  # true median of round speeds: 100 us
        s = stats.summarize(fake_rounds(trial, phases, calls=50, jitter=0.01))
        covered += s["ci95_low_ns"] <= 100e3 <= s["ci95_high_ns"]
    assert covered >= 45


def test_interval_is_reproducible_and_unequal_rounds_work():
    rounds = fake_rounds(4, [1e6] * 5) + [[1e6] * 7]
    a, b = stats.summarize(rounds), stats.summarize(rounds)
    assert a["ci95_low_ns"] == b["ci95_low_ns"] and a["ci95_high_ns"] == b["ci95_high_ns"]
    assert a["ci95_low_ns"] <= a["median_ns"] <= a["ci95_high_ns"]


def test_one_round_has_no_interval_and_no_flag():
    s = stats.summarize([[1.0, 2.0, 3.0]])
    assert np.isnan(s["ci95_low_ns"]) and not s["noisy"]


def test_round_ratio_cancels_a_drift_common_to_both():
    drift = [1.0, 2.0, 4.0]  # the machine slows down round after round
    a = [[3.0 * d] * 5 for d in drift]
    b = [[1.0 * d] * 5 for d in drift]
    r = stats.round_ratio(a, b)
    assert r["ratio"] == 3.0 and r["min"] == r["max"] == 3.0 and r["rounds"] == 3
    assert r["ci95_low"] == r["ci95_high"] == 3.0  # the drift does not widen it
    assert stats.round_ratio([[6.0]], []) is None


def test_round_ratio_interval_spans_the_rounds_ratios():
    a = [[r] * 3 for r in (3.0, 3.3, 2.9, 3.1, 3.6, 3.0, 3.2, 2.8)]
    b = [[1.0] * 3] * 8
    r = stats.round_ratio(a, b)
    assert 2.8 <= r["ci95_low"] <= r["ratio"] <= r["ci95_high"] <= 3.6


def test_empty_times_rejected():
    with pytest.raises(ValueError):
        stats.summarize([])
