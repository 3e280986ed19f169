"""The NumPy reference's backward of one layer, in one place for both that run it: the grader's oracle
(harness.lab.judge.rules.oracle) and a reference's worker timed beside a student's layer (a kind's
`call` op: harness.lab.box.tasks.call). It imports the NumPy level (lenet_numpy.train's functions)
where it runs: never shipped in a kit (a kit holds no answer); the sandbox shows it to every worker,
and the NumPy level to a reference's.

    local(name, x, upstream, kernel, bias, at_zero) -> (dx, dkernel, dbias)   one layer's backward,
                         ReLU's gradient at exactly 0 taken as `at_zero`; conv1's dx None (not graded)
    numpy_stage(impl, dtype, data, arrays) -> (result, answers)   a `call` op's function: local's
                         backward of data["name"] on the arrays, timed as a student's is
                         (harness.lab.backward.timed)
"""

from typing import Any

import numpy as np

from harness.lab.backward import timed

PAD = {"conv1": 2, "conv2": 0}  # the convolutions' padding: conv1 "same", conv2 "valid"


def local(name: str, x: np.ndarray, upstream: np.ndarray, kernel: np.ndarray, bias: np.ndarray,
          at_zero: int = 0) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """One stage's backward as the oracle computes it (lenet_numpy.train's functions), ReLU's
    gradient at exactly 0 taken as `at_zero` (0 or 1); conv1's dx is None (not graded)."""
    from lenet_numpy import train  # the oracle: the grader's and a reference worker's, never a kit's

    def relu_grad(z: np.ndarray) -> np.ndarray:
        return z >= 0 if at_zero else z > 0

    if name in PAD:
        z, cache = train.conv_forward(x, kernel, bias, pad=PAD[name])          # (N, H', W', K)
        _, mask = train.pool_forward(np.maximum(z, 0))                        # (N, H'/2, W'/2, K)
        d = train.pool_backward(upstream, mask) * relu_grad(z)               # (N, H', W', K)
        return train.conv_backward(d, kernel, cache, need_dx=name != "conv1")
    f = x.reshape(len(x), -1)                                                 # fc1: (N, 400), NHWC
    z = f @ kernel + bias
    d = train.softmax_cross_entropy(z, upstream)[1] if name == "fc3" else upstream * relu_grad(z)
    return (d @ kernel.T).reshape(x.shape), f.T @ d, d.sum(0)


def numpy_stage(impl: Any, dtype: str, data: dict, arrays: list[np.ndarray]) -> tuple[dict, list]:
    """local's backward of data["name"] on arrays (x, upstream, kernel, bias), timed (the reference's
    own loaded object is not asked: the NumPy level's trainer has no per-layer backward; its
    functions are)."""
    return timed(local, dtype, data, arrays)  # local(name, x, upstream, kernel, bias): ReLU'(0) = 0
