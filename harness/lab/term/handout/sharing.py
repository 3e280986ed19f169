"""A shared server's GPU: the lock a student's `lenet-lab check` takes, the one the grader and the
studies take (harness.machine.gpulock, keyed on the GPU's UUID).

    gpu_lock(say, timeout_s) -> a context manager: the lock held, or nothing where none can be used
"""

import contextlib
from collections.abc import Callable
from typing import Any

from harness.errors import HarnessError


def gpu_lock(say: Callable[[str], None], timeout_s: float | None) -> Any:
    """The GPU lock the grader and the studies take (harness.machine.gpulock, keyed on the GPU's UUID),
    held while the check runs on the GPU: on a shared server a check never times beside a grading, and
    says who holds the GPU while it waits. Where no lock folder can be used (a laptop), it says so and
    goes on without one."""
    from harness.machine import gpu
    from harness.machine.gpulock import GpuLock

    lock = GpuLock(gpu.lock_id(), timeout_s, say)
    try:
        lock.check()
    except HarnessError as exc:
        say(f"no GPU lock here ({exc}); checking without one")
        return contextlib.nullcontext()
    return lock.held()
