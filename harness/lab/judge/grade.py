"""Grade a class: each submission in its own limited worker, gated against the NumPy oracle,
then timed in rounds beside the references (each in its own trusted worker), under the same
load, on the same unseen images.

The Grader is one class whose methods are a grading's phases, each module of
harness.lab.judge.phases saying what its phase checks: prepare (the oracle, the images, the
workers' environment and spaces: __init__), references (the references' workers and the deadlines'
pace), steps (one submission's steps: import, probe, gate, warm-up, rounds), training (a training
lab's steps), verdict (its clocks checked and its times ranked), then here: one submission's row
assembled in one place from what the steps return (.grade; a Failure carries the fields found
before it, harness.lab.judge.phases.steps: keeping), and the grader's close.

Every worker, the references' too, runs in the sandbox (harness.lab.box.walls.isolation) with a bounded
writable space (harness.lab.box.walls.disk): the submission sees a private copy of its folder
(harness.lab.judge.files, the lab's module first), never the folder itself, and is graded under its
safe id (harness.lab.text). Clean-up never stops a grading: what fails is reported and the next
submission is graded.

    grade_all(lab, submissions, out, ...) -> rows    every submission (or --only these), row by row,
                                                     each under its claim (harness.lab.judge.student_lock:
                                                     one claimed or graded by another grader since
                                                     this one chose is skipped); a signal to the
                                                     grader stops it (no row for the submission in
                                                     progress: Interrupted)
    to_grade(...) -> (todo, kept)      --only: these, graded again; --resume: no row yet, or files
                                       changed since the row (its files_sha256, harness.lab.judge.files)
    Grader(lab, out, weights, report, iso)           the oracle and its answers on the gate's images,
                                                     the training images, each stage's input and
                                                     output (.stage_oracle), the workers'
                                                     environment, the sandbox, the node, the scratch
      .grade(student, folder) -> row                 one submission: its copy, its worker, its steps
                                                     (.steps: its lab's kind's), its peak memory and
                                                     the gate on it (harness.lab.judge.phases.memory),
                                                     its row
      .present(copy, skipped), .clean_up(worker, results, name)   the copy's checks; the worker
                                                     stopped, its log kept, its space released
      .sandbox(student, space), .fresh_worker()      its worker; a fresh one (the training stages,
                                                     after a gate that ended the first), .restarted
      .close()                                       the references stopped, every space released
      prepare: .predict_oracle, .limits(trusted), .space(slot, name), .space_root, .release(root)
      references: .reference(label), .chunk(who, worker, images, oracle, wait), .retire(worker),
                  .measure_pace(), .reference_gate_s(label, images)
      steps: .inference_steps(worker) -> fields, .imported, .gate + .passes + .pass_gate,
             .stage_verdicts, .warm_up + .warmed_up (.fast_enough), .rounds + .timed_rounds, .timed,
             .within, .need_pace
      a kind's own work (a kind's steps build on these: harness.lab.judge.rules.kinds): .keeping(found),
             .calls(who, worker, asked, functions, counts, check, what, step) -> Chunk (the worker's
             `call` op, timed, each answer checked), .pace_of(chunk), .warm_up_of(mine, rank),
             .warmed_up(found, warm), .verdict(rounds), .timed_rounds; SUBMISSION, the submission's name
             among the participants
      training: .training_steps(worker) -> fields, .training_gate, .forward_verdicts,
                .backward_verdicts, .training_warm_up, .training_rounds, .timed_steps,
                .training_pace, .reference_steps, .fixed_batches, .fresh_batches
    attempt(grader, name, folder, lock, step) -> row   one attempt at a row: capped, or graded, a
                                                     signal to the grader ending it as the grader's
                                                     (harness.lab.judge.attempts: who ended each)
    write_refused(lab, out, refused), refused_row     a refused hand-in's row (collect's, or a linked folder)
    gpu_lock, one_line
"""

import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.data import mnist
from harness.data import weights as weights_file
from harness.errors import Failure, HarnessError, Unavailable
from harness.lab import backward, text
from harness.lab.box.proc.limits import Limits, capped_log
from harness.lab.box.sandbox import Chunk, Sandbox
from harness.lab.box.walls import disk, isolation
from harness.lab.judge import attempts, files, store, student_lock
from harness.lab.judge.phases import memory, verdict
from harness.lab.judge.phases.prepare import node_info, start_weights
from harness.lab.judge.phases.references import PROBE_GATE, REFERENCE_TIMEOUT_S
from harness.lab.judge.phases.steps import PROBE_CALLS, Warmup, keeping
from harness.lab.judge.phases.training import COUNT, NOT_GRADED
from harness.lab.judge.phases.verdict import SUBMISSION, Rounds
from harness.lab.judge.rules import backprop, deadlines, oracle, sgd, stages, timing
from harness.lab.judge.rules.assignment import Lab
from harness.lab.judge.rules.sgd import off_the_steps, unflat
from harness.machine import gpu, procenv
from harness.machine.gpulock import GpuLock
from harness.measure.plan.study import chunk_sizes


class Grader:
    """Holds the oracle, the training images and the references' workers across submissions."""

    SUBMISSION = SUBMISSION  # the submission's name among the participants (a kind's steps: .calls)

    def __init__(self, lab: Lab, out: Path, weights: str | Path = DEFAULT_WEIGHTS,
                 report: Callable[[str], None] = print, iso: isolation.Isolation | None = None) -> None:
        from lenet_numpy.model import NumpyLeNet  # the oracle: NumPy only

        self.lab = lab
        self.out = Path(out)
        self.weights = str(start_weights(lab, weights))
        self.report = report
        self.oracle = NumpyLeNet(self.weights, dtype=lab.dtype)
        # sent to each worker (no MNIST there); a training lab's gate is its steps (phases.training)
        self.gate_images = mnist.load("test")[0][:lab.kind.gate_images(lab.gate)]
        self.initial = {name: weights_file.Layer(k.astype("float64"), b.astype("float64"))
                        for name, (k, b) in weights_file.read(self.weights).items()}  # training's start
        self.last_weights = self.initial  # a training submission's weights after its last steps
        self.gate_oracle = (self.predict_oracle(self.gate_images) if len(self.gate_images) else
                            np.empty((0, 10)))
        self.stage_oracle = lab.kind.stage_oracle(self.weights, self.gate_images, lab.dtype, bool(lab.stages))
        self.train = mnist.load("train")[0]
        self.env = procenv.settings(lab.measure.threads, 1, lab.device)
        self.iso = iso or isolation.decide()
        self.refs: dict[str, Sandbox] = {}
        self.node = node_info(lab.device)
        self.scratch = Path(tempfile.mkdtemp(prefix="lenet-lab-"))  # 0700: the grader's alone
        self.spaces: dict[Path, disk.Space] = {}  # the workers' writable spaces, by folder
        self.tmpfs = self.iso.bwrap is not None and os.geteuid() == 0  # a bounded tmpfs per space
        self.cold_s: float | None = None  # rank_by's cold start (deadlines.Pace), measured once
        self.pace: deadlines.Pace | None = None  # this submission's deadlines come from it
        self.waits: dict[str, dict] = {}  # per step: the exchange nearest its deadline
        self.worker: Sandbox | None = None  # the submission's worker now (a fresh one may replace it)
        self.current: tuple[str, Path, Path] = ("", Path(), Path())  # its student, folder, results
        if self.tmpfs:
            disk.private_mounts()  # the spaces' tmpfs mounts vanish with the grader, however it ends

    def stopping(self) -> bool:
        return attempts.stopping()

    def grade(self, student: str, folder: Path) -> dict:
        """One submission's row: its private copy, its worker, its steps, whatever happens."""
        lab = self.lab
        row: dict[str, Any] = {"lab": lab.name, "student": student, "status": "ok", "reason": None,
               "batch_size": lab.measure.batch_size,
               "rank_by": lab.rank_by.label, "references": [r.label for r in lab.references],
               "device": lab.device, "node": self.node, "sandbox": self.iso.mode,
               "isolation": self.iso.note, "started": time.time()}
        results = store.result_dir(self.out, student)
        results.mkdir(parents=True, exist_ok=True)
        self.worker, self.current = None, (student, folder, results)
        self.pace, self.waits = None, {}
        try:
            space = self.space(0, "submission")
            copied = files.copy_submission(folder, space.submission, self.iso.uid(0), lab.module)
            row.update(files.count_loc(space.submission, lab.module), bytes=copied["bytes"],
                       files_sha256=copied["sha256"],  # what --resume compares (harness.lab.judge.files)
                       skipped_files=[text.clean(s, 300) for s in copied["skipped"]])
            self.worker = self.sandbox(student, space)
            self.present(space.submission, copied["skipped"])
            row.update(self.steps(self.worker))
        except Failure as exc:  # its extra: the fields found before it (phases.steps: keeping)
            row.update(status=exc.status, reason=text.clean(exc.reason, 1000), **exc.extra)
        finally:
            worker = self.worker
            row.update(memory.peak_memory(worker, self.refs))  # from outside, while the workers exist
            self.clean_up(worker, results, "submission")
        memory.gate(row, lab.limits.peak_mb)
        if self.waits:
            row["deadlines"] = self.waits
        row["seconds"] = round(time.time() - row["started"], 2)
        row["busy_s"] = round(worker.busy_s, 2) if worker is not None else 0.0
        start_s = worker.box.start_s if worker is not None else None
        row["sandbox_start_s"] = round(start_s, 4) if start_s is not None else None
        return row

    def sandbox(self, student: str, space: disk.Space) -> Sandbox:
        """The submission's worker (not started: its first request starts it), in its space."""
        lab = self.lab
        env = {**self.env, "LENET_LAB_ALLOW": ",".join(lab.allow_imports)}
        packages = [p for p in lab.allow_imports if (ROOT / p).is_dir()]
        return Sandbox(text.safe_id(student), env, self.scratch, self.iso, 0, self.limits(trusted=False),
                       lab.device, space=space, packages=packages, weights=self.weights)

    def fresh_worker(self) -> Sandbox:
        """A fresh worker for the submission being graded, under the same limits, its copy made again
        (its last worker ended: the training stages after a gate that ended it); the last one's log
        kept in worker.log, this one's appended after a line that says so."""
        student, folder, results = self.current
        self.clean_up(self.worker, results, "submission")
        self.worker = None
        with open(results / "worker.log", "a") as log:
            log.write("\n--- a fresh worker, started for the stages ---\n")
        space = self.space(0, "submission")
        files.copy_submission(folder, space.submission, self.iso.uid(0), self.lab.module)
        self.worker = self.sandbox(student, space)
        return self.worker

    def restarted(self) -> tuple[Sandbox | None, str]:
        """(a fresh worker, loaded, or None; why not): its weights are the initial ones again."""
        try:
            worker = self.fresh_worker()
            if worker is None:
                return None, "no fresh worker could be started"
            self.imported(worker)
        except Failure as exc:
            return None, f"a fresh worker failed too ({exc.status}: {exc.reason})"
        self.last_weights = self.initial
        return worker, ""

    def present(self, copy: Path, skipped: list[str]) -> None:
        """The lab's module is in the copy, and is the one `import` finds."""
        module = self.lab.module
        if not (copy / module).is_file():
            raise Failure("import-error", f"no {module} (a regular file) in the submission folder "
                                          f"({sorted(p.name for p in copy.iterdir())[:20]}"
                                          + (f"; skipped: {skipped[:5]}" if skipped else "") + ")")
        why = files.shadows(copy, module)
        if why:
            raise Failure("import-error", f"{why}; remove it (only {module} is graded)")

    def clean_up(self, worker: Sandbox | None, results: Path, name: str) -> None:
        """Stop the worker, keep its log, release its space: nothing here stops the grading."""
        try:
            if worker is not None:
                # a grader told to stop kills its worker rather than ask it to exit: it may be hung,
                # and Slurm kills what is left of a stopped task after KillWait
                worker.stop(ask=not self.stopping())
                capped_log(worker.box.log_path, results / "worker.log")
                worker.box.log_path.unlink(missing_ok=True)
        except OSError as exc:
            self.report(f"warning: clean-up after {name} failed ({exc}); grading goes on")
        self.release(self.space_root(name))

    def close(self) -> None:
        """The last phase: the references' workers stopped, every space released, scratch removed."""
        for worker in self.refs.values():
            self.retire(worker)
        self.refs.clear()
        for root in list(self.spaces):
            self.release(root)
        why = disk.remove_tree(self.scratch)
        if why:
            self.report(f"warning: {why}")

    # --- prepare: the oracle's answers, workers' limits and spaces (harness.lab.judge.phases.prepare) -----

    def predict_oracle(self, images_u8: np.ndarray) -> np.ndarray:
        return timing.oracle_answers(self.oracle, images_u8, self.lab.dtype)

    def limits(self, trusted: bool) -> Limits:
        """A worker's limits: the lab's; a reference (trusted) has no time limits."""
        given = self.lab.limits  # the lab's, of which a box enforces Limits' fields
        limits = Limits(**{f.name: getattr(given, f.name) for f in fields(Limits)})
        return replace(limits, wall_s=None, cpu_s=None) if trusted else limits

    def space(self, slot: int, name: str) -> disk.Space:
        """A worker's writable space (harness.lab.box.walls.disk), made fresh; released in clean_up or
        close."""
        root = self.space_root(name)
        self.release(root)
        given = self.lab.limits
        try:
            self.spaces[root] = disk.make(root, given.disk_mb, given.files, self.iso.uid(slot), self.tmpfs)
        except OSError as exc:
            raise HarnessError(f"cannot make a worker's writable space {root}: {exc}") from None
        return self.spaces[root]

    def space_root(self, name: str) -> Path:
        return self.scratch / f"space-{name}"

    def release(self, root: Path) -> None:
        space = self.spaces.pop(root, None)
        why = disk.release(space) if space is not None else disk.remove_tree(root)
        if why:
            self.report(f"warning: clean-up of {root} failed ({why}); grading goes on")

    # --- references: workers, chunks, the deadlines' pace (harness.lab.judge.phases.references) -----------

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

    # --- steps: an inference lab's, within their deadlines (harness.lab.judge.phases.steps) ---------------

    def steps(self, worker: Sandbox) -> dict:
        """The row's fields from what its lab's kind runs on the worker (harness.lab.judge.rules.kinds:
        Kind.steps); a Failure carries those found before it."""
        return self.lab.kind.steps(self, worker)

    def inference_steps(self, worker: Sandbox) -> dict:
        """The phases in order (the module's docstring), each returning its values, gathered as they
        come; a failure carries those found before it (keeping), so its row keeps them. The deadlines'
        pace is measured first, before the submission's worker starts."""
        found: dict[str, Any] = {}
        with keeping(found):
            self.pace = self.measure_pace()
            found["pace"] = self.pace.row()
            found.update(self.imported(worker))
            found["gate_first"] = first = self.gate(worker, min(PROBE_GATE, self.lab.gate.images))
            if self.passes(first):  # correct so far: too slow to be worth the full gate?
                probe = self.warm_up(worker, PROBE_CALLS, probe=True)
                found["probe_ratio"] = probe.ratio
                if probe.ratio > self.lab.limits.max_ratio:  # gated on [gate] slow_images only, then too-slow
                    found["gate"] = gate = self.gate(worker, self.lab.gate.slow_images, slow=True)
                    self.pass_gate(gate)
                    self.fast_enough(probe, f"a probe of {PROBE_CALLS} calls before the full gate",
                                     f"gated on more than its first {gate['images']} test images (which it "
                                     "passed) nor ")
            found["gate"] = gate = self.gate(worker)  # a wrong submission's row shows the whole gate
            if self.lab.stages:
                found["stages"] = self.stage_verdicts(worker)
            self.pass_gate(gate)
            if self.lab.measure.warmup:
                self.warmed_up(found, self.warm_up(worker, self.lab.measure.warmup))
            found.update(self.verdict(self.rounds(worker)))
        return found

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

    def warmed_up(self, found: dict, warm: Warmup) -> None:
        """The warm-up's ratio into the row (found); slower than [limits] max_ratio x rank_by there
        ends the grading as too-slow, untimed."""
        found["warmup_ratio"] = warm.ratio
        self.fast_enough(warm, "its warm-up", "")

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

    # --- a kind's own work: what a kind's steps (harness.lab.judge.rules.kinds) build on -------------------

    keeping = staticmethod(keeping)  # the values a kind's steps found survive its Failure (phases.steps)

    def calls(self, who: str, worker: Sandbox | None, asked: list[tuple[dict, tuple[np.ndarray, ...]]],
              functions: tuple[str, str], counts: tuple[int, ...], check: Callable[[int, list], str | None],
              what: str, step: str) -> Chunk:
        """A kind's own work timed: one worker `call` op (harness.lab.box.tasks.call) per (data, arrays)
        of `asked`, by the submission (`worker`, functions[0], all within its deadline: a chunk of
        calls') or by the reference `who` (functions[1]; one that fails stops the grading). Each call's
        time is its worker's own clock (the function's result's "ns"), beside the grader's trip and
        the worker's CPU; each answer must pass `check(i, answers)` (None: right): a submission's
        wrong answer is wrong (computed, never replayed), a reference's stops the grading."""
        mine = who == SUBMISSION
        if mine and worker is None:
            raise ValueError("calls: the submission's calls need its worker")
        box = worker if mine else self.reference(who)
        assert box is not None
        due = deadlines.for_calls(self.need_pace(), self.lab.limits, len(asked)) if mine else None
        times, trips, cpu = [], [], []
        with self.within(box, due, what, step) if due is not None else contextlib.nullcontext():
            end = time.monotonic() + (due.seconds if due is not None else REFERENCE_TIMEOUT_S)
            for i, (data, arrays) in enumerate(asked):
                try:
                    called = box.call(functions[0 if mine else 1], data, arrays, counts,
                                      max(0.001, end - time.monotonic()))
                except Failure as exc:
                    if mine:
                        raise
                    self.retire(self.refs.pop(who))
                    raise HarnessError(f"reference {who} failed {what} ({exc.status}: {exc.reason})") \
                        from None
                ns: object = called.result.get("ns")
                why: str | None = called.why
                if not isinstance(ns, int) or ns < 0:
                    ns, why = 0, why or "its time is not a count of ns"
                elif why is None:
                    why = check(i, called.answers)
                if why and mine:
                    raise Failure("wrong", f"{what}, call {i + 1}: {why} (answers on unseen data are "
                                           "checked: computed, never replayed)")
                if why:
                    raise HarnessError(f"reference {who} disagrees with the NumPy oracle in {what}: {why}")
                times.append(ns)
                trips.append(called.trip_ns)
                cpu.append(called.cpu_ns)
        return Chunk(times, trips, cpu, np.empty(0))

    def pace_of(self, chunk: Chunk) -> deadlines.Pace:
        """rank_by's pace (deadlines.Pace) from a chunk of its calls at batch_size, before the
        submission's worker starts: an image 1/batch of a call; its first call's extra time once, as
        the cold start."""
        rank, b = self.lab.rank_by.label, self.lab.measure.batch_size
        trip_s, work_s = (float(np.median(ns)) / 1e9 for ns in (chunk.trips_ns, chunk.times_ns))
        if self.cold_s is None:
            self.cold_s = max(0.0, chunk.trips_ns[0] / 1e9 - trip_s)
        return deadlines.Pace(rank, trip_s, work_s, work_s / b, self.cold_s, b)

    @staticmethod
    def warm_up_of(mine: Chunk, rank: Chunk) -> Warmup:
        """The warm-up's ratio: the submission's median call over rank_by's, on the same data."""
        median_ns, ref_ns = float(np.median(mine.times_ns)), float(np.median(rank.times_ns))
        return Warmup(median_ns / ref_ns, median_ns, ref_ns)

    def verdict(self, rounds: Rounds) -> dict:
        """The row's timing fields from the timed rounds (harness.lab.judge.phases.verdict)."""
        return verdict.verdict(self.lab, rounds)

    # --- training: a training lab's steps (harness.lab.judge.phases.training) -----------------------------

    def training_steps(self, worker: Sandbox) -> dict:
        """import, gate, stages, warm-up, rounds, verdict; their values gathered as they come (keeping). The
        stages are asked whatever ended the gate; the gate's failure is the row's after them."""
        found: dict[str, Any] = {}
        with keeping(found):
            self.pace = self.training_pace()
            found["pace"] = self.pace.row()
            found.update(self.imported(worker))
            stopped: Failure | None = None
            try:
                found["gate"] = gate = self.training_gate(worker)
            except Failure as exc:  # the exchange ended the worker (harness.lab.box.sandbox)
                stopped, worker_ok = exc, False
            else:
                worker_ok = True
                if not gate["passes"]:
                    stopped = Failure("wrong", gate["first_failure"])
                    if gate["kind"] == sgd.FORWARD:
                        found["forward"], worker_ok = self.forward_verdicts(worker)
            alive: Sandbox | None = worker if worker_ok else None
            if self.lab.stages:
                found["stages"], alive = self.backward_verdicts(alive)
            if stopped is not None:
                raise stopped
            if alive is None:  # a stage ended it: timed on a fresh one
                alive, why = self.restarted()
                if alive is None:
                    raise Failure("crashed", f"its worker ended while its stages were asked, and {why}: "
                                             "not timed")
            worker = alive
            if self.lab.measure.warmup:
                self.warmed_up(found, self.training_warm_up(worker, self.lab.measure.warmup))
            found.update(self.verdict(self.training_rounds(worker)))
        return found

    @functools.cached_property
    def backward_oracle(self) -> dict[str, backprop.Backward]:
        """The oracle's stages (harness.lab.judge.rules.oracle.backward) on the gate's first batch, at
        the initial weights: the same for every submission."""
        images, labels = self.fixed_batches()[0]
        return oracle.backward(self.initial, images, labels)

    @functools.cached_property
    def forward_oracle(self) -> dict[str, stages.Stage]:
        """The oracle's forward stages (inference's, harness.lab.judge.rules.oracle.forward_stages) on
        the gate's first batch, at the initial weights: where a wrong loss's forward pass departs."""
        return oracle.forward_stages(self.weights, self.fixed_batches()[0][0], self.lab.dtype)

    def forward_verdicts(self, worker: Sandbox) -> tuple[list[dict], bool]:
        """(a wrong loss: each forward stage asked of the submission's optional `stage(name, x)` on the
        oracle's input to it, no points: the feedback names the first layer that departs; whether the
        worker is still alive). The first stage not answered ends the asking."""
        verdicts = []
        for name in stages.INFERENCE:
            stage = self.forward_oracle[name]
            due = deadlines.for_gate(self.need_pace(), self.lab.limits, len(stage.input))
            try:
                with self.within(worker, due, f"forward stage {name} ({len(stage.input)} images)", "stages"):
                    why, got = worker.stage(name, stage.input, stage.output.size, due.seconds)
            except Failure as exc:  # the exchange ended the worker
                verdicts.append(stages.unanswered(name, f"{exc.status}: {exc.reason}"))
                return verdicts, False
            verdicts.append(stages.unanswered(name, why or "no answer") if got is None else stages.judge(
                name, got, stage, stages.tolerance(self.lab.gate.max_abs_diff, stage.output)))
            if got is None:  # no `stage` (or it raised): the later stages would say the same
                break
        return verdicts, True

    def backward_verdicts(self, worker: Sandbox | None) -> tuple[list[dict], Sandbox | None]:
        """(each of the lab's stages asked of the submission's `backward` on the oracle's activation,
        upstream gradient and weights, its gradients judged against the oracle's (backprop.judge);
        the worker that answered last). A stage not answered is missing (no method) or an error; one
        that ends the worker is an error, and the stages after it are asked of a fresh worker (the
        same when `worker` is None: the gate ended it); "not graded" where no worker can answer."""
        verdicts, tol, why = [], backprop.tolerance(self.lab.gate.max_abs_diff), ""
        for name, points in self.lab.stages:
            if worker is None and not why:
                worker, why = self.restarted()
            if worker is None:
                verdicts.append({"stage": name, "verdict": NOT_GRADED, "max_abs_diff": None, "layout": None,
                                 "reason": why, "points": points})
                continue
            want = self.backward_oracle[name]
            counts = (0 if want.dx is None else want.dx.size, want.dkernel.size, want.dbias.size)
            due = deadlines.for_gate(self.need_pace(), self.lab.limits, len(want.x))  # a new shape
            try:
                what = f"stage {name} (its backward on {len(want.x)} images)"
                with self.within(worker, due, what, "stages"):
                    handed = (want.x, want.upstream, want.kernel, want.bias)
                    asked = {"name": name, "counts": list(counts)}
                    called = worker.call(backward.STUDENT_STAGE, asked, handed, counts, due.seconds)
                answer, got = called.why, None if called.why else called.answers
            except Failure as exc:  # the exchange ended the worker
                answer, got, worker = f"{exc.status}: {exc.reason}", None, None
            verdict = stages.unanswered(name, answer or "no answer") if got is None else \
                backprop.judge(name, (got[0], got[1], got[2]), want, tol)
            verdicts.append({**verdict, "points": points})
        return verdicts, worker

    def fixed_batches(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The gate's batches: the first steps x batch training images in order, their labels."""
        g = self.lab.gate
        images, labels = mnist.load("train")
        n = g.steps * g.batch
        return [(images[i:i + g.batch], labels[i:i + g.batch].astype(np.int64)) for i in range(0, n, g.batch)]

    def fresh_batches(self, steps: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(steps, B, 28, 28) unseen images, (steps, B) random labels, and the new secret seed."""
        b, seed = self.lab.measure.batch_size, timing.new_seed()
        images = timing.timing_images(seed, steps * b, self.train).reshape(steps, b, 28, 28)
        return images, np.random.default_rng(seed).integers(0, 10, (steps, b)), seed

    def training_pace(self) -> deadlines.Pace:
        """rank_by's step times (deadlines.Pace: a step is a call; an image 1/batch of it), before the
        submission's worker starts; its first steps' extra time once, as the cold start."""
        images, labels, _ = self.fresh_batches(deadlines.PACE_CALLS)
        return self.pace_of(self.reference_steps(self.lab.rank_by.label, images, labels))

    def reference_steps(self, label: str, images: np.ndarray, labels: np.ndarray) -> Chunk:
        try:
            return self.reference(label).train(images, labels, REFERENCE_TIMEOUT_S)
        except Failure as exc:
            self.retire(self.refs.pop(label))
            raise HarnessError(f"reference {label} failed its training steps ({exc.status}: {exc.reason})") \
                from None

    def training_gate(self, worker: Sandbox) -> dict:
        """[gate] steps from the initial weights, each step's loss and weights against the oracle's."""
        g = self.lab.gate
        batches = self.fixed_batches()
        oracle_losses, oracle_weights = oracle.steps(self.initial, batches)
        alt = oracle.steps(self.initial, batches, at_zero=1)  # ReLU's gradient at 0 taken as 1
        due = deadlines.for_gate(self.need_pace(), self.lab.limits, g.steps * g.batch)
        losses, found = [], []
        with self.within(worker, due, f"the gate's {g.steps} steps of {g.batch} images", "gate"):
            for x, y in batches:
                losses.append(float(worker.train(x[None], y[None], due.seconds).outputs[0]))
                found.append(unflat(worker.weights(COUNT, due.seconds)))
        self.last_weights = found[-1]
        return sgd.gate_numbers(losses, found, oracle_losses, oracle_weights, g.max_rel_loss, g.max_abs_diff,
                                alt, self.initial, g.batch)

    def training_warm_up(self, worker: Sandbox, steps: int) -> Warmup:
        images, labels, _ = self.fresh_batches(steps)
        rank = self.reference_steps(self.lab.rank_by.label, images, labels)
        return self.warm_up_of(self.timed_steps(worker, images, labels, f"the warm-up's {steps} steps",
                                                "warmup"), rank)

    def timed_steps(self, worker: Sandbox, images: np.ndarray, labels: np.ndarray, what: str,
                    step: str) -> Chunk:
        """The submission's steps within their deadline, then replayed by the oracle from its weights
        before them: its losses and its weights after them as sgd.off_the_steps allows."""
        due = deadlines.for_calls(self.need_pace(), self.lab.limits, len(images))
        with self.within(worker, due, what, step):
            chunk = worker.train(images, labels, due.seconds)
            after = unflat(worker.weights(COUNT, due.seconds))
        losses, expected = oracle.steps(self.last_weights, list(zip(images, labels, strict=True)))
        why = off_the_steps(chunk.outputs, after, losses, self.last_weights, expected[-1])
        if why:
            raise Failure("wrong", f"{what}: on unseen batches its steps left the NumPy reference's ({why}): "
                                   "steps must be computed, not replayed")
        self.last_weights = after
        return chunk

    def training_rounds(self, worker: Sandbox) -> Rounds:
        """As inference's rounds (.timed_rounds), with steps for calls."""
        def fresh(steps: int) -> tuple[tuple[np.ndarray, np.ndarray], int]:
            images, labels, seed = self.fresh_batches(steps)
            return (images, labels), seed

        def turn(who: str, data: tuple[np.ndarray, np.ndarray], what: str) -> Chunk:
            if who == SUBMISSION:
                return self.timed_steps(worker, *data, f"{what} steps", "rounds")
            return self.reference_steps(who, *data)

        return self.timed_rounds(worker, fresh, turn)



def grade_all(lab: Lab, submissions: Path, out: Path, resume: bool = False, only: list[str] | None = None,
              weights: str | Path = DEFAULT_WEIGHTS, report: Callable[[str], None] = print,
              no_sandbox: bool = False, strict: bool = True,
              refused: dict[str, str] | None = None, links: bool = False,
              lock_timeout: float | None = None) -> list[dict]:
    """Grade every submission folder (or `only` these), writing each row as it is made; each
    `refused` student ({name: why}: collect refused their hand-in) and each student folder that is a
    link gets a refused row, ungraded (`links`: followed instead, for lab check's own link).
    `lock_timeout`: seconds to wait for another run's GPU lock before timing anyway (contended)."""
    iso = isolation.decide(no_sandbox, strict)
    store.prepare(out, lab.name, lab.source, lab.path)
    store.write_grading(out, submissions, start_weights(lab, weights))  # training: the initial weights
    refused = {**({} if links else store.linked(submissions)), **(refused or {})}
    seen = student_lock.rows_now(out)  # before choosing: a row written after this is another grader's
    todo, kept = to_grade(lab, submissions, out, only, resume, report, refused, links)
    report(f"lab {lab.name}: {len(todo)} submission(s) to grade" +
           (f", {len(kept)} already graded (kept)" if kept else "") + f" -> {out}")
    report(f"sandbox: {iso.note}")
    rows = write_refused(lab, out, {n: why for n, why in refused.items() if not only or n in only}, report)
    lock = gpu_lock(lab, report, lock_timeout)
    if not todo:
        return rows
    with attempts.interruptible():  # a signal to the grader ends the attempt as the grader's
        grader = Grader(lab, out, weights, report, iso)
        try:
            for i, name in enumerate(todo, 1):
                with student_lock.held(out, name, seen) as busy:  # graders on one OUT grade a student once
                    if busy:
                        report(f"[{i}/{len(todo)}] {text.clean(name, 80)}: {busy}")
                        continue
                    row = attempt(grader, name, Path(submissions) / name, lock, f"[{i}/{len(todo)}]")
                    store.write_row(out, row)
                    if "attempts" not in row:  # graded now (a capped row's attempts ended before)
                        attempts.end(out, name, attempts.BY_ROW, row["status"])
                report(f"[{i}/{len(todo)}] {text.clean(name, 80)}: {one_line(row)}")
                rows.append(row)
        finally:
            grader.close()
    return rows


def attempt(grader: Grader, name: str, folder: Path, lock: GpuLock | None, step: str) -> dict:
    """One attempt at the submission's row (harness.lab.judge.attempts): its history's verdict when a
    cap is reached; else graded, the attempt recorded first and, when a grader signal stops it,
    ended as the grader's (then Interrupted goes on up: no row)."""
    out = grader.out
    fresh = store.graded_row(out, name) is not None  # a regrade (--only) starts afresh
    past = [] if fresh else attempts.history(out, name)
    capped = attempts.verdict(past)
    if capped:
        return attempts.cut_off_row(grader.lab, name, past, capped)
    attempts.begin(out, name, fresh, slurm_job=os.environ.get("SLURM_JOB_ID"))
    grader.report(f"{step} {text.clean(name, 80)}: grading")
    try:
        with lock.held() if lock is not None else contextlib.nullcontext(True) as held:
            row = grader.grade(name, folder)
        if not held and lock is not None:  # --lock-timeout passed: timed beside another run
            row["contended"] = (f"timed without the GPU lock ({lock.path}): another run held it past "
                                f"--lock-timeout {lock.timeout_s:g} s")
        attempts.settle(row)  # its worker killed by the signal meant for the grader: no row
    except attempts.Interrupted as exc:
        attempts.end(out, name, attempts.BY_GRADER, exc.how)
        grader.report(f"{step} {text.clean(name, 80)}: not graded: the grader received {exc.how} "
                      "(not the submission's doing; --resume grades it again)")
        raise
    return row


def to_grade(lab: Lab, submissions: Path, out: Path, only: list[str] | None, resume: bool,
             report: Callable[[str], None] = print, refused: dict[str, str] | None = None,
             links: bool = False) -> tuple[list[str], list[str]]:
    """(the submissions to grade, those whose rows are kept); the class list (`refused` too) written
    to `out`. `only`: these students, graded again if they have a row (the others' rows are kept);
    `resume`: (of `only`, or of all) those without a row, or whose files changed since their row."""
    refused = refused or {}
    names = store.students(submissions, lab.module, refused, links)
    store.write_students(out, names + sorted(refused))
    if only:
        unknown = sorted(set(only) - set(names) - set(refused))
        if unknown:
            raise HarnessError(f"--only: no submission folder {unknown} in {submissions}; found {names}")
    rows = {n: row for n in names if (row := store.graded_row(out, n)) is not None}
    if only and not resume:
        return [n for n in names if n in only], [n for n in rows if n not in only]
    chosen = [n for n in names if n in only] if only else names
    if rows and not resume and not only:
        raise HarnessError(f"{out}: already holds results for {len(rows)} submission(s) ({list(rows)[:5]}); "
                           "add --resume to grade only the others (and those whose files changed), "
                           "--only NAMES to grade some again, or use another --out")
    changed = [n for n in chosen if n in rows and rows[n].get("files_sha256") not in
               (None, files.digest(Path(submissions) / n, lab.module))]  # None: a row from before hashes
    for name in changed:
        report(f"{text.clean(name, 80)}: files changed since its row was made: graded again")
    todo = [n for n in chosen if n not in rows or n in changed]
    return todo, [n for n in rows if n not in todo]


def gpu_lock(lab: Lab, report: Callable[[str], None], timeout_s: float | None = None) -> GpuLock | None:
    """The GPU lock that timing on the GPU holds (checked now); None on the CPU."""
    if lab.device != "gpu":
        return None
    absent = gpu.absent_reason()
    if absent:
        raise Unavailable(f"lab {lab.name} runs on the GPU: {absent}")
    lock = GpuLock(gpu.lock_id(), timeout_s, report)
    lock.check()
    return lock


def write_refused(lab: Lab, out: Path, refused: dict[str, str], report: Callable[[str], None]) -> list[dict]:
    """A refused row for each student whose hand-in was refused ({name: why}), written now: nothing
    of theirs is graded, and the leaderboard, feedback and export show why (0 points)."""
    rows = []
    for name, why in sorted(refused.items()):
        row = refused_row(lab, name, why)
        store.write_row(out, row)
        report(f"{text.clean(name, 80)}: {one_line(row)}")
        rows.append(row)
    return rows


def refused_row(lab: Lab, student: str, why: str) -> dict:
    return {"lab": lab.name, "student": student, "status": "refused", "rank_by": lab.rank_by.label,
            "references": [r.label for r in lab.references], "device": lab.device, "node": node_info("cpu"),
            "reason": text.clean(f"hand-in refused, not graded: {why}", 1000), "started": time.time()}


def one_line(row: dict) -> str:
    if row["status"] == "ok":
        r = row["ratios"][row["rank_by"]]
        return (f"ok  {row['median_per_image_ns'] / 1e3:.1f} us per image, "
                f"{r['ratio']:.2f}x {row['rank_by']} "
                f"[{r['ci95_low']:.2f}-{r['ci95_high']:.2f}], {row['loc']} lines ({row['seconds']} s)")
    return f"{row['status']}: {text.clean(row['reason'])} ({row.get('seconds', '-')} s)"
