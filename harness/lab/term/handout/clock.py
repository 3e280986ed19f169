"""The kit's clock: the median time of one predict on one image, as a laptop's check measures it
(the grader's own clocks are harness.lab.judge.rules.timing's).

    time_per_image(impl, images_u8, dtype, calls) -> ns
"""

import time
from typing import Any

import numpy as np

from harness.data import mnist

TIMED_CALLS = 200  # one image per call, after WARMUP calls; at most TIME_BUDGET_S
WARMUP = 5
TIME_BUDGET_S = 5.0


def time_per_image(impl: Any, images_u8: np.ndarray, dtype: str, calls: int = TIMED_CALLS) -> float:
    """The median time of one predict on one image (ns), after WARMUP calls; at most TIME_BUDGET_S."""
    x = mnist.to_input(images_u8, dtype)
    for i in range(WARMUP):
        np.asarray(impl.predict(x[i:i + 1]))
    times: list[int] = []
    end = time.perf_counter() + TIME_BUDGET_S
    for i in range(calls):
        one = x[i % len(x):i % len(x) + 1]
        t0 = time.perf_counter_ns()
        np.asarray(impl.predict(one))
        times.append(time.perf_counter_ns() - t0)
        if time.perf_counter() > end:
            break
    return float(np.median(times))
