"""Grade a class: each submission in its own limited worker, gated against the NumPy oracle,
then timed in rounds beside the references (each in its own trusted worker), under the same
load, on the same unseen images.

The Grader goes through a grading's phases, one module each, each class building on the last:
harness.lab.judge.phases.prepare (the oracle, the images, the workers' environment and spaces),
.references (the references' workers and the deadlines' pace), .steps (one submission's steps:
import, probe, gate, warm-up, rounds), .verdict (its clocks checked and its times ranked), then
here: one submission's row from start to finish, and the grader's close.

Every worker, the references' too, runs in the sandbox (harness.lab.box.walls.isolation) with a bounded
writable space (harness.lab.box.walls.disk): the submission sees a private copy of its folder
(harness.lab.judge.files, the lab's module first), never the folder itself, and is graded under its
safe id (harness.lab.text). Clean-up never stops a grading: what fails is reported and the next
submission is graded.

    grade_all(lab, submissions, out, ...) -> rows    every submission (or --only these), row by row,
                                                     each under its claim (harness.lab.judge.claim:
                                                     one claimed or graded by another grader since
                                                     this one chose is skipped); a signal to the
                                                     grader stops it (no row for the submission in
                                                     progress: Interrupted)
    to_grade(...) -> (todo, kept)      --only: these, graded again; --resume: no row yet, or files
                                       changed since the row (its files_sha256, harness.lab.judge.files)
    Grader(lab, out, weights, report, iso)           the oracle and the references' workers
      .grade(student, folder) -> row                 one submission: its copy, its worker, its steps
                                                     (.steps), its peak memory and the gate on it
                                                     (harness.lab.judge.phases.memory), its row
      .present(copy, skipped), .clean_up(worker, results, name)   the copy's checks; the worker
                                                     stopped, its log kept, its space released
      .sandbox(student, space), .fresh_worker()      its worker; a fresh one (the training stages,
                                                     after a gate that ended the first)
      .close()                                       the references stopped, every space released
    attempt(grader, name, folder, lock, step) -> row   one attempt at a row: capped, or graded, a
                                                     signal to the grader ending it as the grader's
                                                     (harness.lab.judge.attempts: who ended each)
    write_refused(lab, out, refused), refused_row     a refused hand-in's row (collect's, or a linked folder)
    gpu_lock, one_line
"""

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import DEFAULT_WEIGHTS, ROOT
from harness.errors import Failure, HarnessError, Unavailable
from harness.lab import text
from harness.lab.box.proc.limits import capped_log
from harness.lab.box.sandbox import Sandbox
from harness.lab.box.walls import disk, isolation
from harness.lab.judge import attempts, claim, files, store
from harness.lab.judge.phases import memory
from harness.lab.judge.phases.prepare import node_info, start_weights
from harness.lab.judge.phases.training import Training
from harness.lab.judge.rules.assignment import Lab
from harness.machine import gpu
from harness.machine.gpulock import GpuLock


class Grader(Training):
    """Holds the oracle, the training images and the references' workers across submissions."""

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
            self.steps(self.worker, row)
        except Failure as exc:
            row.update(status=exc.status, reason=text.clean(exc.reason, 1000), **exc.extra)
        finally:
            worker = self.worker
            row.update(memory.measured(worker, self.refs))  # from outside, while the workers exist
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
    seen = claim.rows_now(out)  # before choosing: a row written after this is another grader's
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
                with claim.held(out, name, seen) as busy:  # two graders on one OUT grade a student once
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
