"""A grading's references (the Grader's second phase): each reference a trusted worker in the same
sandbox as the submissions (the same overhead for all), started once and kept across submissions;
a chunk of calls streamed to any participant and its answers checked against the oracle; and the
pace the deadlines come from (harness.lab.judge.rules.deadlines), rank_by timed before each
submission's worker starts.

    References(Prepared)            the references' workers (.refs, by label)
      .reference(label) -> Sandbox  started and loaded on first use; one that cannot run stops
                                    the grading, its log in OUT/references.log
      .chunk(who, worker, images, oracle, wait) -> Chunk   one chunk of timed calls, its answers
                                    checked; a reference that fails is restarted once
      .retire(worker)               a reference's worker stopped, its log kept
      .measure_pace() -> Pace       rank_by's times on the grader's clock (deadlines.Pace)
      .reference_gate_s(label, images)   a reference's gate exchange, in seconds
    PROBE_GATE, REFERENCE_TIMEOUT_S
"""

import time

import numpy as np

from harness import registry
from harness.errors import Failure, HarnessError
from harness.lab.box.proc.limits import capped_log
from harness.lab.box.sandbox import Chunk, Sandbox
from harness.lab.judge.phases.prepare import Prepared
from harness.lab.judge.phases.verdict import SUBMISSION
from harness.lab.judge.rules import deadlines, timing

PROBE_GATE = 100  # the gate's first images, checked before the probe (and the pace's gate exchange)
REFERENCE_TIMEOUT_S = 300


class References(Prepared):
    """The references' workers, started once, and the deadlines' pace taken from rank_by."""

    def reference(self, label: str) -> Sandbox:
        """The reference's worker, started and loaded on first use; one that cannot run here stops
        the grading (its log: OUT/references.log)."""
        if label not in self.refs:
            ref = self.lab.reference(label)
            package = registry.spec(ref.implementation).package
            ref_env = {**self.env, **registry.process_env(ref.implementation),
                       "LENET_LAB_ALLOW": package or ""}
            slot = 1 + [r.label for r in self.lab.references].index(label)
            worker = Sandbox(label, ref_env, self.scratch, self.iso, slot, self.limits(trusted=True),
                             self.lab.device, space=self.space(slot, f"ref{slot}"),
                             packages=[package] if package else [], weights=self.weights)
            try:
                worker.load({"op": "load", "implementation": ref.implementation, "variant": ref.variant,
                             "device": self.lab.device, "dtype": self.lab.dtype, "weights": self.weights,
                             **self.lab.kind.worker},
                            REFERENCE_TIMEOUT_S)
            except Failure as exc:
                worker.stop()
                raise HarnessError(f"reference {label} cannot run here ({exc.status}): {exc.reason}; "
                                   f"log: {self.out / 'references.log'}") from None
            finally:
                capped_log(worker.box.log_path, self.out / "references.log")
                worker.box.log_path.write_bytes(b"")
            self.refs[label] = worker
        return self.refs[label]

    def chunk(self, who: str, worker: Sandbox, images: np.ndarray, oracle: np.ndarray,
              wait: float | None = None) -> Chunk:
        """Stream one chunk (a submission's within `wait` s, default wall_s: .timed gives its
        deadline); a reference that fails is restarted once, then the grading stops."""
        calls = images.reshape(-1, self.lab.measure.batch_size, 28, 28)
        timeout = REFERENCE_TIMEOUT_S if who != SUBMISSION else wait or self.lab.limits.wall_s
        for attempt in (1, 2):
            try:
                result = worker.stream(calls, timeout)
                break
            except Failure as exc:
                if who == SUBMISSION:
                    raise
                worker.box.kill()  # at once: a failed reference is not asked to exit
                self.refs.pop(who, None)
                self.retire(worker)
                if attempt == 2:
                    raise HarnessError(f"reference {who} failed twice ({exc.status}: {exc.reason})") from None
                worker = self.reference(who)
        check = timing.disagreements(result.outputs.reshape(-1, 10), oracle, self.lab.gate.max_abs_diff)
        if check["bad"]:
            if who != SUBMISSION:
                raise HarnessError(f"reference {who} disagrees with the NumPy oracle on timed images: "
                                   f"{check}")
            raise Failure("wrong", f"timed calls: {check['bad']} of {check['calls']} answers on unseen "
                                   "images disagree with the oracle "
                                   f"(worst |dp| {check['max_abs_diff']:.2g})")
        return result

    def retire(self, worker: Sandbox) -> None:
        """A reference's worker stopped (its cgroup and pidfd released), its log kept in references.log;
        killed rather than asked to exit when the grader was told to stop (Slurm's KillWait is short)."""
        worker.stop(ask=not self.stopping())
        capped_log(worker.box.log_path, self.out / "references.log")

    def measure_pace(self) -> deadlines.Pace:
        """rank_by's times (deadlines.Pace), taken while no submission runs (its worker starts
        after): for each submission a gate exchange on the gate's first images and PACE_CALLS timed
        calls at batch_size; once, its cold start (its first gate exchange beyond the next one)."""
        rank, batch = self.lab.rank_by.label, self.lab.measure.batch_size
        first = self.gate_images[:min(PROBE_GATE, self.lab.gate.images)]
        cold_s = self.reference_gate_s(rank, first) if self.cold_s is None else None
        gate_s = self.reference_gate_s(rank, first)
        if cold_s is not None:
            self.cold_s = max(0.0, cold_s - gate_s)
        images = timing.timing_images(timing.new_seed(), deadlines.PACE_CALLS * batch, self.train)
        calls = self.chunk(rank, self.reference(rank), images, self.predict_oracle(images))
        trip_s, work_s = (float(np.median(ns)) / 1e9 for ns in (calls.trips_ns, calls.times_ns))
        return deadlines.Pace(rank, trip_s, work_s, gate_s / len(first), self.cold_s or 0.0, batch)

    def reference_gate_s(self, label: str, images: np.ndarray) -> float:
        """Seconds, on the grader's clock, that a reference takes to answer a gate exchange."""
        worker = self.reference(label)
        started = time.perf_counter()
        try:
            worker.gate(images, timing.GATE_BATCH, REFERENCE_TIMEOUT_S)
        except Failure as exc:
            self.refs.pop(label, None)
            self.retire(worker)
            raise HarnessError(f"reference {label} failed its gate ({exc.status}: {exc.reason})") from None
        return time.perf_counter() - started
