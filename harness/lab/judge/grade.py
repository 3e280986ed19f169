"""Grade a class: each submission in its own limited worker, gated against the NumPy oracle,
then timed in rounds beside the references (each in its own trusted worker), under the same
load, on the same unseen images.

One submission, step by step (each failure is a row with a status, never a stopped grading):
  import    load the module and build the class           import-error, out-of-memory, timeout
  probe     the gate's first PROBE_GATE images vs the oracle; if they pass, PROBE_CALLS calls
            timed beside rank_by: a slow submission is too-slow in seconds, not after the
            full gate's minutes (a wrong one goes on to the full gate: `wrong`, never timed)
                                                           too-slow, crashed, timeout
  gate      the first `images` test images vs the oracle   wrong, crashed, out-of-memory, timeout
  warm-up   `warmup` calls; median vs rank_by's warm-up    too-slow (not timed), wrong
  rounds    per round one secret seed, the same images for every participant, the order
            rotated each round; every answer checked       wrong, crashed, timeout
  clocks    worker clocks against the grader's round trips and the worker's cgroup CPU
            counter, and that counter while the others are timed (harness.lab.judge.timing)
                                                           timing-inconsistent
  ok        median per image, within-round ratio to every reference with a 95% interval
            (harness.measure.stats, resampling rounds), each round ranked at no less than the
            grader's own measure of it (timing.ranked_ns); lines of code (pygount, capped)

Every exchange with a submission has a deadline from rank_by's own times, measured by the grader
before the submission's worker starts (harness.lab.judge.deadlines): a hung call is `timeout` in seconds,
its row saying which call, the deadline and how it was derived; wall_s is the last resort.

Every worker, the references' too, runs in the sandbox (harness.lab.box.isolation) with a bounded
writable space (harness.lab.box.disk): the submission sees a private copy of its folder
(harness.lab.judge.files, the lab's module first), never the folder itself, and is graded under its
safe id (harness.lab.text).
Clean-up never stops a grading: what fails is reported and the next submission is graded.

    grade_all(lab, submissions, out, ...) -> rows    every submission (or --only these), row by row
    to_grade(...) -> (todo, kept)      --only: these, graded again; --resume: no row yet, or files
                                       changed since the row (its files_sha256, harness.lab.judge.files)
    Grader(lab, out, weights, report, iso)           the oracle and the references' workers
      .grade(student, folder) -> row                 one submission: .steps dispatches to one
                                                     method per step, each returning its values:
      .imported, .gate + .passes + .pass_gate, .warm_up + .fast_enough (the probe and the warm-up),
      .rounds -> Rounds, .verdict
      .measure_pace, .timed, .within                 the deadlines: the reference timed, the
                                                     submission's calls within theirs
      .limits, .space + .release, .present, .clean_up   a worker's limits and space, the copy's checks
      .retire, .close                                a reference's worker stopped, its log kept
    Warmup, Rounds                                   what the warm-up and the rounds measured
    gpu_lock, interrupted_row, one_line, node_info, count_loc
"""

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.data import mnist
from harness.errors import Failure, HarnessError, Unavailable
from harness.lab import text
from harness.lab.box import disk, isolation
from harness.lab.box import process as box
from harness.lab.box.sandbox import Chunk, Sandbox
from harness.lab.judge import deadlines, files, store, timing
from harness.lab.judge.assignment import Lab
from harness.machine import env, gpu, procenv
from harness.machine.gpulock import GpuLock
from harness.measure import stats
from harness.measure.study import chunk_sizes

MAX_ATTEMPTS = 2  # gradings cut off by the grader's death before a submission gets a row
PROBE_GATE = 100  # the gate's first images, checked before the probe: a wrong submission is `wrong`
PROBE_CALLS = 3  # timed before the full gate: past max_ratio, `too-slow` in seconds, not minutes
REFERENCE_TIMEOUT_S = 300
SUBMISSION = "submission"


def node_info(device: str) -> dict:
    system = env.collect_system()
    info = {"hostname": system["hostname"], "cpu": system["cpu"], "cpus_usable": system["cpus_usable"],
            "loadavg": system["loadavg"], "gpu": None}
    if device == "gpu":
        gpus = env.collect_gpus().get("gpus") or []
        info["gpu"] = ", ".join(g["name"] for g in gpus) or None
    return info


MAX_LOC_BYTES = 256 << 10  # source counted by pygount (about 6 s per MB), in the copy's order of need


def count_loc(folder: Path, module: str = "lenet.py") -> dict:
    """Code lines of the source files of a submission's private copy (regular files only): the
    module first, then its imports' files, then the rest, up to MAX_LOC_BYTES of source."""
    from harness.report import loc

    found = [Path(folder) / rel for rel in files.in_order(folder, files.listing(folder)[0], module)
             if rel.suffix in files.SOURCES]
    counted, room, lines = 0, MAX_LOC_BYTES, 0
    for path in found:
        size = path.stat().st_size
        if size > room:
            break
        lines, counted, room = lines + loc.analyze(path, "submission").code_count, counted + 1, room - size
    out: dict[str, Any] = {"loc": lines, "files": len(found)}
    if counted < len(found):
        out["loc_note"] = (f"lines counted in {counted} of {len(found)} source files: the first "
                           f"{MAX_LOC_BYTES >> 10} KB of source")
    return out


@dataclass(frozen=True)
class Warmup:
    """The warm-up (or the probe): the submission's median call time over rank_by's, in the same calls."""

    ratio: float
    median_ns: float
    reference_ns: float


@dataclass(frozen=True)
class Rounds:
    """The timed rounds, by round: its seed; each participant's chunk (keyed submission first, then
    the references; each round timed them in a rotated order); the submission's CPU time while
    the references were timed, and their wall time: (busy_ns, wall_ns)."""

    seeds: list[int]
    chunks: dict[str, list[Chunk]]
    idle: list[tuple[int, int]]


class Grader:
    """Holds the oracle, the training images and the references' workers across submissions."""

    def __init__(self, lab: Lab, out: Path, weights: str | Path = DEFAULT_WEIGHTS,
                 report: Callable[[str], None] = print, iso: isolation.Isolation | None = None) -> None:
        from lenet_numpy.model import NumpyLeNet  # the oracle: NumPy only

        self.lab = lab
        self.out = Path(out)
        self.weights = str(weights)
        self.report = report
        self.oracle = NumpyLeNet(self.weights, dtype=lab.dtype)
        self.gate_images = mnist.load("test")[0][:lab.gate.images]  # sent to each worker: no MNIST there
        self.gate_oracle = self.predict_oracle(self.gate_images)
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
        if self.tmpfs:
            disk.private_mounts()  # the spaces' tmpfs mounts vanish with the grader, however it ends

    def predict_oracle(self, images_u8: np.ndarray) -> np.ndarray:
        return timing.oracle_answers(self.oracle, images_u8, self.lab.dtype)

    # --- references ---------------------------------------------------------------------------
    def reference(self, label: str) -> Sandbox:
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
                             "device": self.lab.device, "dtype": self.lab.dtype, "weights": self.weights},
                            REFERENCE_TIMEOUT_S)
            except Failure as exc:
                worker.stop()
                raise HarnessError(f"reference {label} cannot run here ({exc.status}): {exc.reason}; "
                                   f"log: {self.out / 'references.log'}") from None
            finally:
                box.capped_log(worker.box.log_path, self.out / "references.log")
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
        """A reference's worker stopped (its cgroup and pidfd released), its log kept in references.log."""
        worker.stop()
        box.capped_log(worker.box.log_path, self.out / "references.log")

    # --- deadlines (harness.lab.judge.deadlines) ------------------------------------------------------
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

    def close(self) -> None:
        for worker in self.refs.values():
            self.retire(worker)
        self.refs.clear()
        for root in list(self.spaces):
            self.release(root)
        why = disk.remove_tree(self.scratch)
        if why:
            self.report(f"warning: {why}")

    # --- one submission -----------------------------------------------------------------------
    def grade(self, student: str, folder: Path) -> dict:
        lab = self.lab
        row: dict[str, Any] = {"lab": lab.name, "student": student, "status": "ok", "reason": None,
               "batch_size": lab.measure.batch_size,
               "rank_by": lab.rank_by.label, "references": [r.label for r in lab.references],
               "device": lab.device, "node": self.node, "sandbox": self.iso.mode,
               "isolation": self.iso.note, "started": time.time()}
        results = store.result_dir(self.out, student)
        results.mkdir(parents=True, exist_ok=True)
        worker = None
        self.pace, self.waits = None, {}
        try:
            space = self.space(0, "submission")
            copied = files.copy_submission(folder, space.submission, self.iso.uid(0), lab.module)
            row.update(count_loc(space.submission, lab.module), bytes=copied["bytes"],
                       files_sha256=copied["sha256"],  # what --resume compares (harness.lab.judge.files)
                       skipped_files=[text.clean(s, 300) for s in copied["skipped"]])
            env = {**self.env, "LENET_LAB_ALLOW": ",".join(lab.allow_imports)}
            packages = [p for p in lab.allow_imports if (ROOT / p).is_dir()]
            worker = Sandbox(text.safe_id(student), env, self.scratch, self.iso, 0,
                             self.limits(trusted=False), lab.device, space=space, packages=packages,
                             weights=self.weights)
            self.present(space.submission, copied["skipped"])
            self.steps(worker, row)
        except Failure as exc:
            row.update(status=exc.status, reason=text.clean(exc.reason, 1000), **exc.extra)
        finally:
            self.clean_up(worker, results, "submission")
        if self.waits:
            row["deadlines"] = self.waits
        row["seconds"] = round(time.time() - row["started"], 2)
        row["busy_s"] = round(worker.busy_s, 2) if worker is not None else 0.0
        start_s = worker.box.start_s if worker is not None else None
        row["sandbox_start_s"] = round(start_s, 4) if start_s is not None else None
        return row

    def limits(self, trusted: bool) -> box.Limits:
        """A worker's limits: the lab's; a reference (trusted) has no time limits."""
        given = self.lab.limits  # the lab's, of which a box enforces box.Limits' fields
        limits = box.Limits(**{f.name: getattr(given, f.name) for f in fields(box.Limits)})
        return replace(limits, wall_s=None, cpu_s=None) if trusted else limits

    def space(self, slot: int, name: str) -> disk.Space:
        """A worker's writable space (harness.lab.box.disk), made fresh; released in clean_up or close."""
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
                worker.stop()
                box.capped_log(worker.box.log_path, results / "worker.log")
                worker.box.log_path.unlink(missing_ok=True)
        except OSError as exc:
            self.report(f"warning: clean-up after {name} failed ({exc}); grading goes on")
        self.release(self.space_root(name))

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
            self.fast_enough(probe, f"a probe of {PROBE_CALLS} calls before the full gate",
                             "gated in full nor ")
        row["gate"] = gate = self.gate(worker)  # a wrong submission's row shows the whole gate
        self.pass_gate(gate)
        if self.lab.measure.warmup:
            warm = self.warm_up(worker, self.lab.measure.warmup)
            row["warmup_ratio"] = warm.ratio
            self.fast_enough(warm, "its warm-up", "")
        row.update(self.verdict(self.rounds(worker)))

    def imported(self, worker: Sandbox) -> dict:
        """import: the module loaded and the class built; the row's class and import_s."""
        lab = self.lab
        loaded = worker.load({"op": "load", "submission": worker.box.submission_path(), "module": lab.module,
                              "class": lab.class_name, "device": lab.device, "dtype": lab.dtype,
                              "weights": self.weights}, lab.limits.import_s)
        import_s = round((loaded["import_ns"] + loaded["load_ns"]) / 1e9, 3)
        return {"class": text.clean(loaded["class"], 200), "import_s": import_s}

    def gate(self, worker: Sandbox, first: int | None = None) -> dict:
        """gate: the worker's answers on the gate's test images (or the `first` of them) against
        the oracle's, within the gate's deadline."""
        n = first or len(self.gate_images)
        due = deadlines.for_gate(self.need_pace(), self.lab.limits, n)
        what = (f"the gate's first {n} images (its first call)" if first else
                f"the gate ({n} images, in calls of up to {timing.GATE_BATCH})")
        with self.within(worker, due, what, "gate_first" if first else "gate"):
            probs = worker.gate(self.gate_images[:n], timing.GATE_BATCH, due.seconds)
        return timing.compare(probs, self.gate_oracle[:n], self.lab.gate.max_abs_diff)

    def passes(self, gate: dict) -> bool:
        """The gate's rule on `gate` (the whole gate or its first images: no more disagreements than
        the whole gate allows)."""
        want = self.lab.gate
        return timing.gate_passes(gate, want.images, want.min_agree, want.max_abs_diff)

    def pass_gate(self, gate: dict) -> None:
        want = self.lab.gate
        if not self.passes(gate):
            raise Failure("wrong", f"{gate['images'] - gate['agree']} of {gate['images']} test images "
                                   f"disagree with the NumPy reference (argmax), worst |dp| "
                                   f"{gate['max_abs_diff']:.2g} (gate: at least {want.min_agree} "
                                   f"agree, |dp| <= {want.max_abs_diff:g})")

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
        """rounds: per round one secret seed, the same images for every participant, the order
        rotated; the submission's CPU is read while the references are timed (it should sleep)."""
        m = self.lab.measure
        everyone = [SUBMISSION, *(r.label for r in self.lab.references)]
        seeds: list[int] = []
        chunks: dict[str, list[Chunk]] = {who: [] for who in everyone}
        idle: list[tuple[int, int]] = []
        for r, calls in enumerate(chunk_sizes(m.calls, m.rounds)):
            seed = timing.new_seed()
            images = timing.timing_images(seed, calls * m.batch_size, self.train)
            oracle = self.predict_oracle(images)
            busy, wall = 0, 0
            for who in everyone[r % len(everyone):] + everyone[:r % len(everyone)]:  # no fixed position
                other = who != SUBMISSION
                participant = self.reference(who) if other else worker
                c0, t0 = worker.box.cpu_ns(), time.perf_counter_ns()
                chunks[who].append(self.chunk(who, participant, images, oracle) if other else
                                   self.timed(worker, images, oracle, f"round {r + 1}'s {calls} calls",
                                              "rounds"))
                if other:  # the submission should be asleep, waiting for its next call
                    busy, wall = busy + worker.box.cpu_ns() - c0, wall + time.perf_counter_ns() - t0
            idle.append((busy, wall))
            seeds.append(seed)  # revealed only now, for audit
        return Rounds(seeds, chunks, idle)

    def verdict(self, rounds: Rounds) -> dict:
        """clocks, then ok: the rounds that fit the grader's clocks, ranked by within-round ratio of
        each round's ranked times (timing.ranked_ns: never less than the grader's own measure)."""
        labels = [r.label for r in self.lab.references]
        times = {who: [c.times_ns for c in chunks] for who, chunks in rounds.chunks.items()}
        trips = {who: [c.trips_ns for c in chunks] for who, chunks in rounds.chunks.items()}
        cpu = {who: [c.cpu_ns for c in chunks] for who, chunks in rounds.chunks.items()}
        checks = self.clock_checks(times, trips, cpu, rounds.idle, labels)
        flagged, used = checks["inconsistent_rounds"], checks["rounds_used"]
        outside, gaps = (trips, checks["protocol_trip_ns"]) if self.lab.device == "gpu" else \
            (cpu, checks["protocol_cpu_ns"])
        ranked = {who: [timing.ranked_ns(times[who][r], outside[who][r], gaps[r]) for r in range(len(gaps))]
                  for who in times}
        out = {"seeds": rounds.seeds, "times_ns": times, "trips_ns": trips, "cpu_ns": cpu,
               "idle_cpu_ns": [b for b, _ in rounds.idle], "ranked_ns": ranked,
               "clock_ratio": [timing.clock_ratio(times[SUBMISSION][r], outside[SUBMISSION][r], gaps[r])
                               for r in range(len(gaps))], **checks}
        if timing.too_many(len(flagged), len(rounds.seeds)):
            raise Failure("timing-inconsistent",
                          f"in {len(flagged)} of {len(rounds.seeds)} rounds the reported times do not fit "
                          f"the grader's clock; first: {flagged[0]['reason']}", extra=out)
        sub = [ranked[SUBMISSION][r] for r in used]
        summary = stats.summarize(sub)
        out.update({k: summary[k] for k in ("median_ns", "ci95_low_ns", "ci95_high_ns", "p90_ns",
                                            "mean_ns", "min_ns", "noisy")})
        out["median_per_image_ns"] = summary["median_ns"] / self.lab.measure.batch_size
        out["ratios"] = {ref: stats.round_ratio(sub, [ranked[ref][r] for r in used]) for ref in labels}
        rank = self.lab.rank_by.label
        out["reference_medians_ns"] = {ref: stats.pooled_median([ranked[ref][r] for r in used])
                                       for ref in labels}
        out["reference_ratios"] = {ref: stats.round_ratio([ranked[ref][r] for r in used],
                                                          [ranked[rank][r] for r in used]) for ref in labels}
        return out

    def clock_checks(self, times: dict, trips: dict, cpu: dict, idle: list, labels: list[str]) -> dict:
        """Each round's protocol gaps (the references' own), and the rounds whose submission's
        times do not fit the grader's clocks (harness.lab.judge.timing)."""
        rounds, on_gpu = len(idle), self.lab.device == "gpu"
        cpu_gaps = [max(timing.protocol_gap_ns(times[ref][r], cpu[ref][r]) for ref in labels)
                    for r in range(rounds)]
        trip_gaps = [max(timing.protocol_gap_ns(times[ref][r], trips[ref][r]) for ref in labels)
                     for r in range(rounds)]
        flagged = []
        for r in range(rounds):
            why = (timing.busy_while_idle(*idle[r])
                   or timing.longer_than_trip(times[SUBMISSION][r], trips[SUBMISSION][r])
                   or timing.inconsistency(times[SUBMISSION][r], cpu[SUBMISSION][r], cpu_gaps[r],
                                           trips[SUBMISSION][r] if on_gpu else None, trip_gaps[r]))
            if why:
                flagged.append({"round": r, "reason": why})
        used = [r for r in range(rounds) if r not in {f["round"] for f in flagged}]
        return {"protocol_cpu_ns": cpu_gaps, "protocol_trip_ns": trip_gaps,
                "inconsistent_rounds": flagged, "rounds_used": used}


def grade_all(lab: Lab, submissions: Path, out: Path, resume: bool = False, only: list[str] | None = None,
              weights: str | Path = DEFAULT_WEIGHTS, report: Callable[[str], None] = print,
              no_sandbox: bool = False, strict: bool = True) -> list[dict]:
    """Grade every submission folder (or `only` these), writing each row as it is made."""
    iso = isolation.decide(no_sandbox, strict)
    store.prepare(out, lab.name, lab.source, lab.path)
    store.write_grading(out, submissions, weights)
    todo, kept = to_grade(lab, submissions, out, only, resume, report)
    report(f"lab {lab.name}: {len(todo)} submission(s) to grade" +
           (f", {len(kept)} already graded (kept)" if kept else "") + f" -> {out}")
    report(f"sandbox: {iso.note}")
    lock = gpu_lock(lab, report)
    if not todo:
        return []
    rows = []
    grader = Grader(lab, out, weights, report, iso)
    try:
        for i, name in enumerate(todo, 1):
            # attempts cut off by the grader's death (a Slurm placeholder row is one); a finished
            # row (a regrade) starts afresh
            cut_off = (store.started(out, name) or {}).get("attempt", 0)
            previous = 0 if store.graded_row(out, name) else cut_off
            if previous >= MAX_ATTEMPTS:  # the grader died while grading it, each time
                row = interrupted_row(lab, name, previous)
            else:
                store.mark_started(out, name, attempt=previous + 1, slurm_job=os.environ.get("SLURM_JOB_ID"))
                report(f"[{i}/{len(todo)}] {text.clean(name, 80)}: grading")
                with lock.held() if lock is not None else contextlib.nullcontext():
                    row = grader.grade(name, Path(submissions) / name)
            store.write_row(out, row)
            report(f"[{i}/{len(todo)}] {text.clean(name, 80)}: {one_line(row)}")
            rows.append(row)
    finally:
        grader.close()
    return rows


def to_grade(lab: Lab, submissions: Path, out: Path, only: list[str] | None, resume: bool,
             report: Callable[[str], None] = print) -> tuple[list[str], list[str]]:
    """(the submissions to grade, those whose rows are kept); the class list written to `out`.
    `only`: these students, graded again if they have a row (the others' rows are kept); `resume`:
    (of `only`, or of all) those without a row, or whose files changed since their row was made."""
    names = store.students(submissions, lab.module)
    store.write_students(out, names)
    if only:
        unknown = sorted(set(only) - set(names))
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


def gpu_lock(lab: Lab, report: Callable[[str], None]) -> GpuLock | None:
    """The GPU lock that timing on the GPU holds (checked now); None on the CPU."""
    if lab.device != "gpu":
        return None
    absent = gpu.absent_reason()
    if absent:
        raise Unavailable(f"lab {lab.name} runs on the GPU: {absent}")
    lock = GpuLock(gpu.visible_gpu_id(), None, report)
    lock.check()
    return lock


def interrupted_row(lab: Lab, student: str, attempts: int) -> dict:
    return {"lab": lab.name, "student": student, "status": "crashed", "rank_by": lab.rank_by.label,
            "references": [r.label for r in lab.references], "device": lab.device, "node": node_info("cpu"),
            "reason": f"the grader was interrupted {attempts} times while grading this submission; "
                      "not graded again (delete its results folder to try once more)"}


def one_line(row: dict) -> str:
    if row["status"] == "ok":
        r = row["ratios"][row["rank_by"]]
        return (f"ok  {row['median_per_image_ns'] / 1e3:.1f} us per image, "
                f"{r['ratio']:.2f}x {row['rank_by']} "
                f"[{r['ci95_low']:.2f}-{r['ci95_high']:.2f}], {row['loc']} lines ({row['seconds']} s)")
    return f"{row['status']}: {text.clean(row['reason'])} ({row.get('seconds', '-')} s)"
