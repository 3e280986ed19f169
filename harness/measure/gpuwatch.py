"""GPU work under watch: each request holds the GPU lock, and the GPU is sampled before and
after it, so a measurement disturbed by another process is flagged `contended`.

A run's own workers are never "other processes": their pids are passed as ours.
"""

from harness.machine import gpu


class GpuWatch:
    def __init__(self, lock, own_pids):
        self.lock = lock  # a GpuLock, or None
        self.own_pids = own_pids  # () -> the pids of this run's workers
        self.busy_before_run = None  # a GPU sample before this run touched the GPU

    def start(self):
        self.busy_before_run = gpu.sample()

    def request(self, worker, message: dict, timeout: float) -> dict:
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
        if not got:
            reason = f"GPU lock not obtained in time (held by {lock.holder()})"
        reply["gpu_samples"] = [before, after]
        reply["contended"] = reason
        return reply
