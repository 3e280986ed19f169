"""Grade a class: each submission in its own limited worker, gated against the NumPy oracle,
then timed in rounds beside the references (each in its own trusted worker), under the same
load, on the same unseen images.

One submission, step by step (each failure is a row with a status, never a stopped grading):
  import    load the module and build the class           import-error, out-of-memory, timeout
  gate      the first `images` test images vs the oracle   wrong, crashed, out-of-memory, timeout
  warm-up   `warmup` calls; median vs rank_by's warm-up    too-slow (not timed), wrong
  rounds    per round one secret seed, the same images for every participant, the order
            rotated each round; every answer checked       wrong, crashed, timeout
  clocks    worker clocks against the grader's round trips and the worker's cgroup CPU
            counter, and that counter while the others are timed (harness.lab.timing)
                                                           timing-inconsistent
  ok        median per image, within-round ratio to every reference with a 95% interval
            (harness.measure.stats, resampling rounds), lines of code (pygount)

Every worker, the references' too, runs in the sandbox (harness.lab.isolation): the submission
sees a private copy of its folder (harness.lab.files), never the folder itself.
"""

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.data import mnist
from harness.errors import HarnessError
from harness.lab import files, isolation, store, timing
from harness.lab.labfile import Lab
from harness.lab.sandbox import Failure, Sandbox, capped_log
from harness.machine import env, procenv
from harness.measure import stats
from harness.measure.study import chunk_sizes

MAX_ATTEMPTS = 2  # gradings cut off by the grader's death before a submission gets a row
GATE_BATCH = 1000  # images per predict call in the gate: bounds memory
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


SOURCES = ("*.py", "*.cu", "*.cuh")  # Python glue and CUDA kernels (the CUDA lab)


def count_loc(folder: Path, student: str) -> dict:
    """Code lines of the source files of a submission's private copy (regular files only)."""
    from harness.report import loc

    found = sorted(p for pattern in SOURCES for p in Path(folder).rglob(pattern)
                   if p.is_file() and not p.is_symlink())
    return {"loc": sum(loc.analyze(p, student).code_count for p in found), "files": len(found)}


class Grader:
    """Holds the oracle, the training images and the references' workers across submissions."""

    def __init__(self, lab: Lab, out: Path, weights=DEFAULT_WEIGHTS, report=print, iso=None):
        from lenet_numpy.model import NumpyLeNet  # the oracle: NumPy only

        self.lab = lab
        self.out = Path(out)
        self.weights = str(weights)
        self.report = report
        self.oracle = NumpyLeNet(self.weights, dtype=lab.dtype)
        n = lab.gate["images"]
        self.gate_images = mnist.load("test")[0][:n]  # sent to each worker: no MNIST in the sandbox
        self.gate_oracle = self.predict_oracle(self.gate_images)
        self.train = mnist.load("train")[0]
        self.env = procenv.settings(lab.measure["threads"], 1, lab.device)
        self.iso = iso or isolation.decide()
        self.refs: dict[str, Sandbox] = {}
        self.node = node_info(lab.device)
        self.scratch = Path(tempfile.mkdtemp(prefix="lenet-lab-"))  # 0700: the grader's alone

    def predict_oracle(self, images_u8: np.ndarray) -> np.ndarray:
        x = mnist.to_input(images_u8, self.lab.dtype)
        return np.concatenate([self.oracle.predict(x[i:i + GATE_BATCH])
                               for i in range(0, len(x), GATE_BATCH)]).astype(np.float64)

    # --- references ---------------------------------------------------------------------------
    def reference(self, label: str) -> Sandbox:
        if label not in self.refs:
            ref = self.lab.reference(label)
            package = registry.spec(ref.implementation).package
            ref_env = {**self.env, **registry.process_env(ref.implementation),
                       "LENET_LAB_ALLOW": package or ""}
            slot = 1 + [r.label for r in self.lab.references].index(label)
            limits = {k: self.lab.limits[k] for k in ("memory_mb", "pids", "output_mb")}
            box = Sandbox(label, ref_env, self.scratch, self.iso, slot, limits, self.lab.device,
                          packages=[package] if package else [], weights=self.weights)
            try:
                box.load({"op": "load", "implementation": ref.implementation, "variant": ref.variant,
                          "device": self.lab.device, "dtype": self.lab.dtype, "weights": self.weights},
                         REFERENCE_TIMEOUT_S)
            except Failure as exc:
                box.stop()
                raise HarnessError(f"reference {label} cannot run here ({exc.status}): {exc.reason}; "
                                   f"log: {self.out / 'references.log'}") from None
            finally:
                capped_log(box.log_path, self.out / "references.log")
                box.log_path.write_bytes(b"")
            self.refs[label] = box
        return self.refs[label]

    def chunk(self, who: str, box: Sandbox, images: np.ndarray, oracle: np.ndarray) -> dict:
        """Stream one chunk; a reference that fails is restarted once, then the grading stops."""
        b = self.lab.measure["batch_size"]
        calls = images.reshape(-1, b, 28, 28)
        timeout = REFERENCE_TIMEOUT_S if who != SUBMISSION else self.lab.limits["wall_s"]
        for attempt in (1, 2):
            try:
                result = box.stream(calls, timeout)
                break
            except Failure as exc:
                if who == SUBMISSION:
                    raise
                box.kill()
                self.refs.pop(who, None)
                if attempt == 2:
                    raise HarnessError(f"reference {who} failed twice ({exc.status}: {exc.reason})") from None
                box = self.reference(who)
        check = timing.disagreements(result["outputs"].reshape(-1, 10), oracle, self.lab.gate["max_abs_diff"])
        if check["bad"]:
            if who != SUBMISSION:
                raise HarnessError(f"reference {who} disagrees with the NumPy oracle on timed images: "
                                   f"{check}")
            raise Failure("wrong", f"timed calls: {check['bad']} of {check['calls']} answers on unseen "
                                   "images disagree with the oracle "
                                   f"(worst |dp| {check['max_abs_diff']:.2g})")
        return result

    def close(self):
        for box in self.refs.values():
            box.stop()
            capped_log(box.log_path, self.out / "references.log")
        self.refs.clear()
        shutil.rmtree(self.scratch, ignore_errors=True)

    # --- one submission -----------------------------------------------------------------------
    def grade(self, student: str, folder: Path) -> dict:
        lab = self.lab
        row = {"lab": lab.name, "student": student, "status": "ok", "reason": None,
               "batch_size": lab.measure["batch_size"],
               "rank_by": lab.rank_by.label, "references": [r.label for r in lab.references],
               "device": lab.device, "node": self.node, "sandbox": self.iso.mode,
               "isolation": self.iso.note, "started": time.time()}
        results = store.result_dir(self.out, student)
        results.mkdir(parents=True, exist_ok=True)
        copy = self.scratch / "submission"
        shutil.rmtree(copy, ignore_errors=True)
        copied = files.copy_submission(folder, copy, self.iso.uid(0))
        row.update(count_loc(copy, student), skipped_files=copied["skipped"], bytes=copied["bytes"])
        env = {**self.env, "LENET_LAB_ALLOW": ",".join(lab.allow_imports)}
        packages = [p for p in lab.allow_imports if (ROOT / p).is_dir()]
        box = Sandbox(student, env, self.scratch, self.iso, 0, lab.limits, lab.device, submission=copy,
                      packages=packages, weights=self.weights)
        try:
            if not (copy / lab.module).is_file():
                raise Failure("import-error", f"no {lab.module} (a regular file) in the submission folder "
                                              f"({sorted(p.name for p in copy.iterdir())[:20]}"
                                              + (f"; skipped: {copied['skipped'][:5]}" if copied["skipped"]
                                                 else "") + ")")
            row.update(self.steps(box, row))
        except Failure as exc:
            row.update(status=exc.status, reason=exc.reason, **getattr(exc, "extra", {}))
        finally:
            box.stop()
            capped_log(box.log_path, results / "worker.log")
            box.log_path.unlink(missing_ok=True)
            shutil.rmtree(copy, ignore_errors=True)
        row["seconds"] = round(time.time() - row["started"], 2)
        row["busy_s"] = round(box.busy_s, 2)
        row["sandbox_start_s"] = round(box.start_s, 4) if box.start_s is not None else None
        return row

    def steps(self, box: Sandbox, row: dict) -> dict:
        lab, m = self.lab, self.lab.measure
        loaded = box.load({"op": "load", "submission": box.submission_path(), "module": lab.module,
                           "class": lab.class_name, "device": lab.device, "dtype": lab.dtype,
                           "weights": self.weights}, lab.limits["import_s"])
        row["class"] = loaded["class"]
        row["import_s"] = round((loaded["import_ns"] + loaded["load_ns"]) / 1e9, 3)

        probs = box.gate(self.gate_images, GATE_BATCH, lab.limits["wall_s"])
        gate = timing.compare(probs, self.gate_oracle, lab.gate["max_abs_diff"])
        row["gate"] = gate
        if gate["agree"] < lab.gate["min_agree"] or not gate["max_abs_diff"] <= lab.gate["max_abs_diff"]:
            raise Failure("wrong", f"{gate['images'] - gate['agree']} of {gate['images']} test images "
                                   f"disagree with the NumPy reference (argmax), worst |dp| "
                                   f"{gate['max_abs_diff']:.2g} (gate: at least {lab.gate['min_agree']} "
                                   f"agree, |dp| <= {lab.gate['max_abs_diff']:g})")

        b, rank = m["batch_size"], lab.rank_by.label
        if m["warmup"]:
            images = timing.timing_images(timing.new_seed(), m["warmup"] * b, self.train)
            oracle = self.predict_oracle(images)
            ref_warm = self.chunk(rank, self.reference(rank), images, oracle)
            warm = self.chunk(SUBMISSION, box, images, oracle)
            slower = np.median(warm["times_ns"]) / np.median(ref_warm["times_ns"])
            row["warmup_ratio"] = float(slower)
            if slower > lab.limits["max_ratio"]:
                raise Failure("too-slow", f"{slower:.0f}x {rank} in its warm-up "
                                          f"({np.median(warm['times_ns']) / 1e3:.0f} us per call); the limit "
                                          f"is {lab.limits['max_ratio']:g}x, so it was not timed")

        labels = [r.label for r in lab.references]
        times = {who: [] for who in [SUBMISSION, *labels]}
        trips = {who: [] for who in [SUBMISSION, *labels]}
        cpu = {who: [] for who in [SUBMISSION, *labels]}
        idle = []  # per round: (the submission's CPU while the references were timed, their wall time)
        seeds = []
        for r, calls in enumerate(chunk_sizes(m["calls"], m["rounds"])):
            seed = timing.new_seed()
            images = timing.timing_images(seed, calls * b, self.train)
            oracle = self.predict_oracle(images)
            order = [SUBMISSION, *labels]
            order = order[r % len(order):] + order[:r % len(order)]  # rotated: no fixed position
            busy, wall = 0, 0
            for who in order:
                other = who != SUBMISSION
                ref = self.reference(who) if other else box
                c0, t0 = box.cpu_ns(), time.perf_counter_ns()
                result = self.chunk(who, ref, images, oracle)
                if other:  # the submission should be asleep, waiting for its next call
                    busy, wall = busy + box.cpu_ns() - c0, wall + time.perf_counter_ns() - t0
                times[who].append(result["times_ns"])
                trips[who].append(result["trips_ns"])
                cpu[who].append(result["cpu_ns"])
            idle.append((busy, wall))
            seeds.append(seed)  # revealed only now, for audit
        return self.verdict(times, trips, cpu, seeds, labels, idle)

    def verdict(self, times, trips, cpu, seeds, labels, idle) -> dict:
        rounds, gpu = len(seeds), self.lab.device == "gpu"
        cpu_gaps = [max(timing.protocol_gap_ns(times[ref][r], cpu[ref][r]) for ref in labels)
                    for r in range(rounds)]
        trip_gaps = [max(timing.protocol_gap_ns(times[ref][r], trips[ref][r]) for ref in labels)
                     for r in range(rounds)]
        flagged = []
        for r in range(rounds):
            why = (timing.busy_while_idle(*idle[r]) or timing.longer_than_trip(times[SUBMISSION][r],
                                                                                  trips[SUBMISSION][r])
                   or timing.inconsistency(times[SUBMISSION][r], cpu[SUBMISSION][r], cpu_gaps[r],
                                           trips[SUBMISSION][r] if gpu else None, trip_gaps[r]))
            if why:
                flagged.append({"round": r, "reason": why})
        used = [r for r in range(rounds) if r not in {f["round"] for f in flagged}]
        out = {"seeds": seeds, "times_ns": times, "trips_ns": trips, "cpu_ns": cpu,
               "idle_cpu_ns": [b for b, _ in idle], "protocol_cpu_ns": cpu_gaps,
               "protocol_trip_ns": trip_gaps,
               "inconsistent_rounds": flagged, "rounds_used": used}
        if timing.too_many(len(flagged), rounds):
            raise_with = Failure("timing-inconsistent",
                                 f"in {len(flagged)} of {rounds} rounds the reported times do not fit "
                                 f"the grader's clock; first: {flagged[0]['reason']}")
            raise_with.extra = out
            raise raise_with
        sub = [times[SUBMISSION][r] for r in used]
        summary = stats.summarize(sub)
        out.update({k: summary[k] for k in ("median_ns", "ci95_low_ns", "ci95_high_ns", "p90_ns",
                                            "mean_ns", "min_ns", "noisy")})
        out["median_per_image_ns"] = summary["median_ns"] / self.lab.measure["batch_size"]
        out["ratios"] = {ref: stats.round_ratio(sub, [times[ref][r] for r in used]) for ref in labels}
        rank = self.lab.rank_by.label
        out["reference_medians_ns"] = {ref: stats.pooled_median([times[ref][r] for r in used])
                                       for ref in labels}
        out["reference_ratios"] = {ref: stats.round_ratio([times[ref][r] for r in used],
                                                          [times[rank][r] for r in used]) for ref in labels}
        return out


def grade_all(lab: Lab, submissions: Path, out: Path, resume=False, only=None, weights=DEFAULT_WEIGHTS,
              report=print, no_sandbox=False, strict=True) -> list[dict]:
    """Grade every submission folder (or `only` these), writing each row as it is made."""
    from harness.machine import gpu
    from harness.machine.gpulock import GpuLock

    iso = isolation.decide(no_sandbox, strict)
    store.prepare(out, lab.name, lab.source, lab.path)
    names = store.students(submissions, lab.module)
    store.write_students(out, names)
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise HarnessError(f"--only: no submission folder {unknown} in {submissions}; found {names}")
        names = [n for n in names if n in only]
    # a row the Slurm merge made for a task that left none (cancelled, crashed) is not a result
    done = [n for n in names
            if (store.read_row(out, n) or {"from_merge": True}).get("from_merge") is not True]
    if done and not resume:
        raise HarnessError(f"{out}: already holds results for {len(done)} submission(s) ({done[:5]}); "
                           "add --resume to grade only the others, or use another --out")
    todo = [n for n in names if n not in done]
    report(f"lab {lab.name}: {len(todo)} submission(s) to grade" +
           (f", {len(done)} already graded (--resume)" if done else "") + f" -> {out}")
    report(f"sandbox: {iso.note}")
    lock = None
    if lab.device == "gpu":
        absent = gpu.absent_reason()
        if absent:
            from harness.errors import Unavailable

            raise Unavailable(f"lab {lab.name} runs on the GPU: {absent}")
        lock = GpuLock(gpu.visible_gpu_id(), None, report)
        lock.check()
    rows = []
    grader = Grader(lab, out, weights, report, iso) if todo else None
    try:
        for i, name in enumerate(todo, 1):
            previous = (store.started(out, name) or {}).get("attempt", 0)
            if previous >= MAX_ATTEMPTS:  # the grader died while grading it, each time
                row = interrupted_row(lab, name, previous)
                store.write_row(out, row)
                report(f"[{i}/{len(todo)}] {name}: {one_line(row)}")
                rows.append(row)
                continue
            store.mark_started(out, name, slurm_job=os.environ.get("SLURM_JOB_ID"))
            report(f"[{i}/{len(todo)}] {name}: grading")
            if lock is not None:
                with lock.held():
                    row = grader.grade(name, Path(submissions) / name)
            else:
                row = grader.grade(name, Path(submissions) / name)
            store.write_row(out, row)
            report(f"[{i}/{len(todo)}] {name}: {one_line(row)}")
            rows.append(row)
    finally:
        if grader is not None:
            grader.close()
    return rows


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
    return f"{row['status']}: {row['reason']} ({row.get('seconds', '-')} s)"
