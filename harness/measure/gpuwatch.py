"""GPU work under watch: each request holds the GPU lock, and the GPU is sampled before and
after it, so a measurement disturbed by another process is flagged `contended`.

A run's own workers are never "other processes": their pids are passed as ours.
"""

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from harness.machine import gpu
from harness.machine.gpulock import GpuLock


class Requester(Protocol):
    """A worker: a request in, its reply (a dict) out, within `timeout` seconds."""

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]: ...


class GpuWatch:
    def __init__(self, lock: GpuLock | None, own_pids: Callable[[], Iterable[int]]):
        self.lock = lock
        self.own_pids = own_pids  # the pids of this run's workers
        self.busy_before_run: dict | None = None  # a GPU sample before this run touched the GPU

    def start(self) -> None:
        self.busy_before_run = gpu.sample()

    def request(self, worker: Requester, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The worker's reply, with `gpu_samples` and `contended` (the reason, or None)."""
        lock = self.lock
        got = lock.acquire() if lock else True
        try:
            before = gpu.sample(own_pids=self.own_pids())
            reply = worker.request(message, timeout)
            after = gpu.sample(own_pids=self.own_pids())
        finally:
            if lock and got:
                lock.release()
        reason = gpu.contention([before, after], self.busy_before_run)
        if lock and not got:
            reason = f"GPU lock not obtained in time (held by {lock.holder()})"
        reply["gpu_samples"] = [before, after]
        reply["contended"] = reason
        return reply
