"""One submission's steps (the Grader's third phase), each returning its values; each failure is a
row with a status (a harness.errors.Failure), never a stopped grading:

  import    load the module and build the class           import-error, out-of-memory, timeout
  probe     the gate's first PROBE_GATE images vs the oracle; if they pass, PROBE_CALLS calls
            timed beside rank_by: a slow submission is gated on [gate] slow_images only (its
            gate points kept where [grade] slow_gate_points says so) and too-slow in seconds, not
            after the full gate's minutes (a wrong one goes on to the full gate: `wrong`, never timed)
                                                           too-slow, crashed, timeout
  gate      the first `images` test images vs the oracle   wrong, crashed, out-of-memory, timeout
  stages    (a lab with [stages]) each stage on the oracle's input to it, its verdict in the row,
            whatever the gate said (harness.lab.judge.rules.stages)         timeout
  warm-up   `warmup` calls; median vs rank_by's warm-up    too-slow (not timed), wrong
  rounds    per round one secret seed, the same images for every participant, the order
            rotated each round; every answer checked       wrong, crashed, timeout
  clocks, ok   harness.lab.judge.phases.verdict                   timing-inconsistent

Every exchange with the submission has a deadline from rank_by's own times, measured before the
submission's worker starts (harness.lab.judge.rules.deadlines): a hung call is `timeout` in seconds, its
row saying which call, the deadline and how it was derived; wall_s is the last resort.

    Steps(References)                       one submission's steps, on its worker (a Sandbox)
      .steps(worker, row)                   the steps in order, their values into the row as they come
      .imported, .gate + .passes + .pass_gate, .stage_verdicts, .warm_up + .fast_enough (the probe
      and the warm-up),
      .rounds -> Rounds                     one method per step (.timed_rounds: any lab's rounds)
      .timed, .within, .need_pace           the submission's calls within their deadlines
    Warmup                                  what the warm-up (or the probe) measured
    PROBE_CALLS
"""

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from harness.errors import Failure
from harness.lab import text
from harness.lab.box.sandbox import Chunk, Sandbox
from harness.lab.judge.phases import verdict
from harness.lab.judge.phases.references import PROBE_GATE, References
from harness.lab.judge.phases.verdict import SUBMISSION, Rounds
from harness.lab.judge.rules import deadlines, stages, timing
from harness.measure.plan.study import chunk_sizes

PROBE_CALLS = 3  # timed before the full gate: past max_ratio, `too-slow` in seconds, not minutes


@dataclass(frozen=True)
class Warmup:
    """The warm-up (or the probe): the submission's median call time over rank_by's, in the same calls."""

    ratio: float
    median_ns: float
    reference_ns: float


class Steps(References):
    """One submission's steps on its worker, within their deadlines."""

    def steps(self, worker: Sandbox, row: dict) -> None:
        """The phases in order (the module's docstring), each returning its values; they go into
        the row as they come, so a failure's row keeps what was measured before it. The deadlines'
        pace is measured first, before the submission's worker starts."""
        self.pace = self.measure_pace()
        row["pace"] = {k: round(v, 9) if isinstance(v, float) else v for k, v in asdict(self.pace).items()}
        row.update(self.imported(worker))
        row["gate_first"] = first = self.gate(worker, min(PROBE_GATE, self.lab.gate.images))
        if self.passes(first):  # correct so far: too slow to be worth the full gate?
            probe = self.warm_up(worker, PROBE_CALLS, probe=True)
            row["probe_ratio"] = probe.ratio
            if probe.ratio > self.lab.limits.max_ratio:  # gated on [gate] slow_images only, then too-slow
                row["gate"] = gate = self.gate(worker, self.lab.gate.slow_images, slow=True)
                self.pass_gate(gate)
                self.fast_enough(probe, f"a probe of {PROBE_CALLS} calls before the full gate",
                                 f"gated on more than its first {gate['images']} test images (which it "
                                 "passed) nor ")
        row["gate"] = gate = self.gate(worker)  # a wrong submission's row shows the whole gate
        if self.lab.stages:
            row["stages"] = self.stage_verdicts(worker)
        self.pass_gate(gate)
        if self.lab.measure.warmup:
            warm = self.warm_up(worker, self.lab.measure.warmup)
            row["warmup_ratio"] = warm.ratio
            self.fast_enough(warm, "its warm-up", "")
        row.update(verdict.verdict(self.lab, self.rounds(worker)))

    def imported(self, worker: Sandbox) -> dict:
        """import: the module loaded and the class built; the row's class and import_s."""
        lab = self.lab
        loaded = worker.load({"op": "load", "submission": worker.box.submission_path(), "module": lab.module,
                              "class": lab.class_name, "device": lab.device, "dtype": lab.dtype,
                              "weights": self.weights, **lab.kind.worker}, lab.limits.import_s)
        import_s = round((loaded["import_ns"] + loaded["load_ns"]) / 1e9, 3)
        return {"class": text.clean(loaded["class"], 200), "import_s": import_s}

    def gate(self, worker: Sandbox, first: int | None = None, slow: bool = False) -> dict:
        """gate: the worker's answers on the gate's test images (or the `first` of them: the probe's,
        or a too-slow submission's `slow` gate) against the oracle's, within the gate's deadline."""
        n = min(first or len(self.gate_images), len(self.gate_images))
        due = deadlines.for_gate(self.need_pace(), self.lab.limits, n)
        what = (f"the gate's first {n} images (too slow for the whole gate)" if slow else
                f"the gate's first {n} images (its first call)" if first else
                f"the gate ({n} images, in calls of up to {timing.GATE_BATCH})")
        with self.within(worker, due, what, "gate_first" if first and not slow else "gate"):
            probs = worker.gate(self.gate_images[:n], timing.GATE_BATCH, due.seconds)
        return timing.compare(probs, self.gate_oracle[:n], self.lab.gate.max_abs_diff)

    def stage_verdicts(self, worker: Sandbox) -> list[dict]:
        """Each of the lab's stages asked of the submission on the oracle's input to it, its output
        judged against the oracle's (stages.judge); a stage not answered is missing (no method) or
        an error, never the submission's failure."""
        verdicts = []
        for name, points in self.lab.stages:
            stage = self.stage_oracle[name]
            due = deadlines.for_gate(self.need_pace(), self.lab.limits, len(stage.input))
            with self.within(worker, due, f"stage {name} ({len(stage.input)} images)", "stages"):
                why, got = worker.stage(name, stage.input, stage.output.size, due.seconds)
            verdict = stages.unanswered(name, why or "no answer") if got is None else stages.judge(
                name, got, stage, stages.tolerance(self.lab.gate.max_abs_diff, stage.output))
            verdicts.append({**verdict, "points": points})
        return verdicts

    def passes(self, gate: dict) -> bool:
        """The gate's rule on `gate` (the whole gate or its first images: no more disagreements than
        the whole gate allows)."""
        want = self.lab.gate
        return timing.gate_passes(gate, want.images, want.min_agree, want.max_abs_diff)

    def pass_gate(self, gate: dict) -> None:
        want = self.lab.gate
        if not self.passes(gate):
            why = timing.not_probabilities(gate)
            raise Failure("wrong", f"{gate['images'] - gate['agree']} of {gate['images']} test images "
                                   f"disagree with the NumPy reference (argmax), worst |dp| "
                                   f"{gate['max_abs_diff']:.2g} (gate: at least {want.min_agree} "
                                   f"agree, |dp| <= {want.max_abs_diff:g})" + (f"; {why}" if why else ""))

    def warm_up(self, worker: Sandbox, calls: int, probe: bool = False) -> Warmup:
        """warm-up (or the probe before the full gate): `calls` calls of the submission and of
        rank_by, on the same fresh images. The probe's calls go one exchange each, each within its
        own deadline (the first one's a new shape's): a hung call is named."""
        rank, batch = self.lab.rank_by.label, self.lab.measure.batch_size
        images = timing.timing_images(timing.new_seed(), calls * batch, self.train)
        oracle = self.predict_oracle(images)
        ref_ns = float(np.median(self.chunk(rank, self.reference(rank), images, oracle).times_ns))
        if probe:
            times = []
            for i in range(calls):
                call = slice(i * batch, (i + 1) * batch)
                times += self.timed(worker, images[call], oracle[call], f"the probe's call {i + 1} of "
                                    f"{calls} ({batch} image(s))", "probe", first=i == 0).times_ns
        else:
            times = self.timed(worker, images, oracle, f"the warm-up's {calls} calls", "warmup").times_ns
        median_ns = float(np.median(times))
        return Warmup(float(median_ns / ref_ns), median_ns, ref_ns)

    def fast_enough(self, warm: Warmup, when: str, skipped: str) -> None:
        max_ratio, rank = self.lab.limits.max_ratio, self.lab.rank_by.label
        if warm.ratio > max_ratio:
            raise Failure("too-slow", f"{warm.ratio:.0f}x {rank} in {when} ({warm.median_ns / 1e3:.0f} us "
                                      f"per call, {rank} {warm.reference_ns / 1e3:.0f} us); the limit is "
                                      f"{max_ratio:g}x {rank}, so it was not {skipped}timed")

    def rounds(self, worker: Sandbox) -> Rounds:
        """rounds: per round the same fresh images for every participant, each answer checked."""
        def fresh(calls: int) -> tuple[tuple[np.ndarray, np.ndarray], int]:
            seed = timing.new_seed()
            images = timing.timing_images(seed, calls * self.lab.measure.batch_size, self.train)
            return (images, self.predict_oracle(images)), seed

        def turn(who: str, data: tuple[np.ndarray, np.ndarray], what: str) -> Chunk:
            if who == SUBMISSION:
                return self.timed(worker, *data, f"{what} calls", "rounds")
            return self.chunk(who, self.reference(who), *data)

        return self.timed_rounds(worker, fresh, turn)

    def timed_rounds(self, worker: Sandbox, fresh: Callable[[int], tuple[Any, int]],
                     turn: Callable[[str, Any, str], Chunk]) -> Rounds:
        """The rounds of any lab: per round `fresh(calls)` -> (data, its secret seed), the same data
        for every participant's `turn(who, data, "round R's K")` -> its Chunk, the order rotated each
        round; the submission's CPU is read while the references are timed (it should sleep)."""
        m = self.lab.measure
        everyone = [SUBMISSION, *(r.label for r in self.lab.references)]
        seeds: list[int] = []
        chunks: dict[str, list[Chunk]] = {who: [] for who in everyone}
        idle: list[tuple[int, int]] = []
        for r, calls in enumerate(chunk_sizes(m.calls, m.rounds)):
            data, seed = fresh(calls)
            busy, wall = 0, 0
            for who in everyone[r % len(everyone):] + everyone[:r % len(everyone)]:  # no fixed position
                other = who != SUBMISSION
                if other:
                    self.reference(who)  # started (on first use) before the clocks
                c0, t0 = worker.box.cpu_ns(), time.perf_counter_ns()
                chunks[who].append(turn(who, data, f"round {r + 1}'s {calls}"))
                if other:  # the submission should be asleep, waiting for its next call
                    busy, wall = busy + worker.box.cpu_ns() - c0, wall + time.perf_counter_ns() - t0
            idle.append((busy, wall))
            seeds.append(seed)  # revealed only now, for audit
        return Rounds(seeds, chunks, idle)

    def timed(self, worker: Sandbox, images: np.ndarray, oracle: np.ndarray, what: str, step: str,
              first: bool = False) -> Chunk:
        """The submission's chunk of calls, within its deadline (a new shape's when `first`)."""
        calls = len(images) // self.lab.measure.batch_size
        due = deadlines.for_calls(self.need_pace(), self.lab.limits, calls, first)
        with self.within(worker, due, what, step):
            return self.chunk(SUBMISSION, worker, images, oracle, due.seconds)

    def need_pace(self) -> deadlines.Pace:
        if self.pace is None:
            raise ValueError("the deadlines were not measured for this submission (measure_pace)")
        return self.pace

    @contextlib.contextmanager
    def within(self, worker: Sandbox, due: deadlines.Deadline, what: str, step: str) -> Iterator[None]:
        """One exchange with the submission: a timeout its deadline caused (not wall_s's, nor cpu_s's)
        is the deadline's `timeout`, saying how it was derived; the row keeps, per step, the
        exchange that came nearest its deadline."""
        room = self.lab.limits.wall_s - worker.busy_s  # the box waits no longer than this (sandbox)
        started = time.monotonic()
        try:
            yield
        except Failure as exc:
            took = time.monotonic() - started
            if exc.status == "timeout" and due.seconds < room and took >= due.seconds:
                raise deadlines.timed_out(what, due) from None
            raise
        finally:
            took, kept = time.monotonic() - started, self.waits.get(step)
            if kept is None or took / due.seconds > kept["took_s"] / kept["deadline_s"]:
                self.waits[step] = {"took_s": round(took, 4), "deadline_s": round(due.seconds, 3)}
