"""Cross-check the harness's timer against an independent one (the standard library's timeit).

The same callable (one implementation's predict on one image) is timed in alternating rounds:
the harness's own per-call loop (harness.measure.inside.worker.time_calls), then timeit's loop
(`Timer.repeat(number=...)`, which times a whole loop and divides). Per round, the ratio of
the harness's mean per call to timeit's; their median over rounds, with a 95% interval from
resampling the rounds, says whether the harness measures what timeit measures. Means, not
medians, on both sides: timeit only knows the mean of a loop.

    python -m harness crosscheck [--implementation numpy] [--calls 200] [--rounds 10] [--json FILE]
"""

import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness import DEFAULT_WEIGHTS, registry
from harness.data import mnist
from harness.measure.inside.worker import time_calls
from harness.measure.store import stats

SAMPLES_PER_ROUND = 5  # timeit.repeat: loops of calls // 5 calls each


def crosscheck(name: str = "numpy", calls: int = 200, rounds: int = 10, weights: Path = DEFAULT_WEIGHTS,
               report: Callable[[str], None] = print) -> dict[str, Any]:
    impl = registry.create(name, weights)
    images, _ = mnist.load("test")
    batches = list(mnist.to_input(images[:calls])[:, None])  # calls x (1, 28, 28, 1)
    time_calls(impl.predict, batches, 0, min(20, calls))  # warm-up
    state = {"i": 0}

    def one_call() -> None:  # timeit's statement: the next image, as the harness feeds them
        state["i"] += 1
        impl.predict(batches[state["i"] % len(batches)])

    loop = max(1, calls // SAMPLES_PER_ROUND)
    per_round = []
    for r in range(rounds):
        times, _ = time_calls(impl.predict, batches, 0, calls)
        harness_mean = float(np.mean(times))
        samples = timeit.Timer(one_call).repeat(repeat=SAMPLES_PER_ROUND, number=loop)
        timeit_mean = float(np.mean(samples) / loop * 1e9)
        per_round.append({"round": r, "harness_mean_ns": harness_mean, "timeit_mean_ns": timeit_mean,
                          "harness_median_ns": float(np.median(times)),
                          "ratio": harness_mean / timeit_mean})
        report(f"round {r + 1:>2}: harness {harness_mean / 1e3:8.1f} us/call  "
               f"timeit {timeit_mean / 1e3:8.1f} us/call  ratio {harness_mean / timeit_mean:.3f}")
    impl.close()
    ratios = [p["ratio"] for p in per_round]
    low, high = stats.median_interval(ratios)  # rounds resampled, as for every ratio
    return {"implementation": name, "calls_per_round": calls, "rounds": rounds,
            "ratio_median": float(np.median(ratios)), "ratio_ci95": [float(low), float(high)],
            "timer": f"timeit (Python standard library), loops of {loop} calls",
            "per_round": per_round}
