"""Grade a class: each submission in its own limited worker, gated against the NumPy oracle,
then timed in rounds beside the references (each in its own trusted worker), under the same
load, on the same unseen images.

One submission, step by step (each failure is a row with a status, never a stopped grading):
  import    load the module and build the class           import-error, out-of-memory, timeout
  gate      the first `images` test images vs the oracle   wrong, crashed, out-of-memory, timeout
  warm-up   `warmup` calls; median vs rank_by's warm-up    too-slow (not timed), wrong
  rounds    per round one secret seed, the same images for every participant, the order
            rotated each round; every answer checked       wrong, crashed, timeout
  clocks    worker clocks against the parent's round trips (harness.lab.timing)
                                                           timing-inconsistent
  ok        median per image, within-round ratio to every reference with a 95% interval
            (harness.measure.stats, resampling rounds), lines of code (pygount)
"""

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from harness import DEFAULT_WEIGHTS, registry
from harness.data import mnist
from harness.errors import HarnessError
from harness.lab import store, timing
from harness.lab.labfile import Lab
from harness.lab.sandbox import Failure, Sandbox
from harness.machine import env, procenv
from harness.measure import stats
from harness.measure.study import chunk_sizes

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


def count_loc(folder: Path, student: str) -> dict:
    from harness.report import loc

    files = sorted(p for p in Path(folder).rglob("*.py") if "__pycache__" not in p.parts)
    return {"loc": sum(loc.analyze(p, student).code_count for p in files), "files": len(files)}


class Grader:
    """Holds the oracle, the training images and the references' workers across submissions."""

    def __init__(self, lab: Lab, out: Path, weights=DEFAULT_WEIGHTS, report=print):
        from lenet_numpy.model import NumpyLeNet  # the oracle: NumPy only

        self.lab = lab
        self.out = Path(out)
        self.weights = str(weights)
        self.report = report
        self.oracle = NumpyLeNet(self.weights, dtype=lab.dtype)
        n = lab.gate["images"]
        self.gate_oracle = self.predict_oracle(mnist.load("test")[0][:n])
        self.train = mnist.load("train")[0]
        self.env = {**os.environ, **procenv.settings(lab.measure["threads"], 1, lab.device)}
        self.refs: dict[str, Sandbox] = {}
        self.node = node_info(lab.device)
        self.scratch = Path(tempfile.mkdtemp(prefix="lenet-lab-refs-"))

    def predict_oracle(self, images_u8: np.ndarray) -> np.ndarray:
        x = mnist.to_input(images_u8, self.lab.dtype)
        return np.concatenate([self.oracle.predict(x[i:i + GATE_BATCH])
                               for i in range(0, len(x), GATE_BATCH)]).astype(np.float64)

    # --- references ---------------------------------------------------------------------------
    def reference(self, label: str) -> Sandbox:
        if label not in self.refs:
            ref = self.lab.reference(label)
            ref_env = {**self.env, **registry.process_env(ref.implementation)}
            box = Sandbox(label, ref_env, self.scratch, self.scratch / "references.log",
                          device=self.lab.device)
            try:
                box.request({"op": "load", "implementation": ref.implementation, "variant": ref.variant,
                             "device": self.lab.device, "dtype": self.lab.dtype, "weights": self.weights},
                            REFERENCE_TIMEOUT_S, "import")
            except Failure as exc:
                box.kill()
                raise HarnessError(f"reference {label} cannot run here ({exc.status}): {exc.reason}; "
                                   f"log: {self.scratch / 'references.log'}") from None
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
        self.refs.clear()
        shutil.rmtree(self.scratch, ignore_errors=True)

    # --- one submission -----------------------------------------------------------------------
    def grade(self, student: str, folder: Path) -> dict:
        lab = self.lab
        row = {"lab": lab.name, "student": student, "status": "ok", "reason": None,
               "batch_size": lab.measure["batch_size"],
               "rank_by": lab.rank_by.label, "references": [r.label for r in lab.references],
               "device": lab.device, "node": self.node, "started": time.time()}
        row.update(count_loc(folder, student))
        results = store.result_dir(self.out, student)
        results.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"lenet-lab-{student}-"))
        box = Sandbox(student, self.env, workdir, results / "worker.log", limits=lab.limits,
                      device=lab.device)
        try:
            if not (folder / lab.module).is_file():
                raise Failure("import-error", f"no {lab.module} in the submission folder "
                                              f"({sorted(p.name for p in folder.iterdir())})")
            shutil.copytree(folder, workdir / "submission", ignore=shutil.ignore_patterns("__pycache__"))
            row.update(self.steps(box, workdir / "submission", row))
        except Failure as exc:
            row.update(status=exc.status, reason=exc.reason, **getattr(exc, "extra", {}))
        finally:
            box.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        row["seconds"] = round(time.time() - row["started"], 2)
        row["busy_s"] = round(box.busy_s, 2)
        return row

    def steps(self, box: Sandbox, folder: Path, row: dict) -> dict:
        lab, m = self.lab, self.lab.measure
        loaded = box.request({"op": "load", "submission": str(folder), "module": lab.module,
                              "class": lab.class_name, "device": lab.device, "dtype": lab.dtype,
                              "weights": self.weights}, lab.limits["import_s"], "import")
        row["class"] = loaded["class"]
        row["import_s"] = round((loaded["import_ns"] + loaded["load_ns"]) / 1e9, 3)

        probs = box.gate(lab.gate["images"], GATE_BATCH, lab.limits["wall_s"])
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
        seeds = []
        for r, calls in enumerate(chunk_sizes(m["calls"], m["rounds"])):
            seed = timing.new_seed()
            images = timing.timing_images(seed, calls * b, self.train)
            oracle = self.predict_oracle(images)
            order = [SUBMISSION, *labels]
            order = order[r % len(order):] + order[:r % len(order)]  # rotated: no fixed position
            for who in order:
                result = self.chunk(who, box if who == SUBMISSION else self.reference(who), images, oracle)
                times[who].append(result["times_ns"])
                trips[who].append(result["trips_ns"])
                cpu[who].append(result["cpu_ns"])
            seeds.append(seed)  # revealed only now, for audit
        return self.verdict(times, trips, cpu, seeds, labels)

    def verdict(self, times, trips, cpu, seeds, labels) -> dict:
        rounds, gpu = len(seeds), self.lab.device == "gpu"
        cpu_gaps = [max(timing.protocol_gap_ns(times[ref][r], cpu[ref][r]) for ref in labels)
                    for r in range(rounds)]
        trip_gaps = [max(timing.protocol_gap_ns(times[ref][r], trips[ref][r]) for ref in labels)
                     for r in range(rounds)]
        flagged = []
        for r in range(rounds):
            why = timing.inconsistency(times[SUBMISSION][r], cpu[SUBMISSION][r], cpu_gaps[r],
                                       trips[SUBMISSION][r] if gpu else None, trip_gaps[r])
            if why:
                flagged.append({"round": r, "reason": why})
        used = [r for r in range(rounds) if r not in {f["round"] for f in flagged}]
        out = {"seeds": seeds, "times_ns": times, "trips_ns": trips, "cpu_ns": cpu,
               "protocol_cpu_ns": cpu_gaps, "protocol_trip_ns": trip_gaps,
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
              report=print) -> list[dict]:
    """Grade every submission folder (or `only` these), writing each row as it is made."""
    from harness.machine import gpu
    from harness.machine.gpulock import GpuLock

    store.prepare(out, lab.name, lab.source, lab.path)
    names = store.students(submissions, lab.module)
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
    lock = None
    if lab.device == "gpu":
        absent = gpu.absent_reason()
        if absent:
            from harness.errors import Unavailable

            raise Unavailable(f"lab {lab.name} runs on the GPU: {absent}")
        lock = GpuLock(gpu.visible_gpu_id(), None, report)
        lock.check()
    rows = []
    grader = Grader(lab, out, weights, report) if todo else None
    try:
        for i, name in enumerate(todo, 1):
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


def one_line(row: dict) -> str:
    if row["status"] == "ok":
        r = row["ratios"][row["rank_by"]]
        return (f"ok  {row['median_per_image_ns'] / 1e3:.1f} us per image, "
                f"{r['ratio']:.2f}x {row['rank_by']} "
                f"[{r['ci95_low']:.2f}-{r['ci95_high']:.2f}], {row['loc']} lines ({row['seconds']} s)")
    return f"{row['status']}: {row['reason']} ({row.get('seconds', '-')} s)"
