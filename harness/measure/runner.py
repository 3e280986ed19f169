"""Run a study: cells interleaved in rounds (A B C A B C ...), one worker process per
implementation x device, every measurement written as a row the moment it is made.

Processes are a level of the study: each cell is timed in `processes` fresh worker processes, one
after another. Process 0 of every group times the first `rounds` rounds of its cells (interleaved
as always), then the workers are stopped and fresh ones take the next `rounds`, and so on; each
process loads its cells again (import, build, cold start, warm-up), and only process 0 reads the
bill. Every setup and round row says which process (`process`, and its `pid`) it came from.

Rows (results.jsonl; results.jsonl.gz once complete: harness.measure.store.rowfile), each with
schema, run_id, time, kind:
- setup: a cell's worker loaded it: import, load and cold-start times
- round: one round of one cell: every per-call time (ns), device times where known, its process
- load:  the machine's load during one round (harness.machine.load): CPU used by other
         processes, steal, load average, the busiest others; `contended` the reason, or None
- cell:  the cell's final row: status (ok, skipped, error, crashed, timeout), reason, every
         per-call time by round and which process each round came from (round_process),
         statistics, cold start, device-time statistics, warnings,
         contended (with its reasons: a disturbed round, another process on the GPU)

env.json records the machine and, under `provenance`, the commit and each level's source hash;
complete.json (harness.measure.store.runfolder), written last, says the run finished: a run killed before
it is partial, never an answer, and `--resume` (one at a time: the run's lock) finishes it.
"""

import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import DEFAULT_WEIGHTS, registry
from harness.base import GPU_PEERS_ENV
from harness.data import weights
from harness.errors import Failure
from harness.frameworks import gpu_fault
from harness.machine import env, gpu, load, procenv, provenance
from harness.machine.files import write_atomic
from harness.machine.gpulock import GpuLock
from harness.measure.gpuwatch import GpuWatch
from harness.measure.inside import memory
from harness.measure.plan import cells
from harness.measure.plan.cells import CellState
from harness.measure.plan.study import Cell, Study, capped_calls, chunk_sizes
from harness.measure.progress import Progress
from harness.measure.store import results, runfolder
from harness.measure.workerproc import WorkerProcess


def gpu_peers_path() -> Path:
    """Where this runner lists its workers' pids (outside the run folder: not a result)."""
    return Path(tempfile.gettempdir()) / f"lenet-gpu-peers-{os.getpid()}"


def fresh_states(study: Study) -> list[CellState]:
    """Each cell of the study, nothing measured yet."""
    return [CellState(c, chunk_sizes(c.calls, c.total_rounds(study.measure.rounds))) for c in study.cells]


class Runner:
    def __init__(self, study: Study, run_dir: Path, writer: results.RowWriter,
                 weights: str | Path = DEFAULT_WEIGHTS, gpu_lock: GpuLock | None = None,
                 report: Callable[[str], None] = print):
        self.study = study
        self.run_dir = run_dir
        self.writer = writer
        self.weights = str(weights)
        self.report = report
        self.gpu_watch = GpuWatch(gpu_lock, self.own_pids)
        self.workers: dict[tuple[str, int], WorkerProcess] = {}  # (group, process) -> its worker
        self.process = 0  # the process (0, 1, ...) the rounds under way are timed in
        self.states = fresh_states(study)

    # --- resume -------------------------------------------------------------------------
    def restore(self, rows: list[dict]) -> int:
        """Take finished cells and rounds from earlier rows; returns how many cells were done."""
        return cells.restore(self.states, rows, self.study.measure.rounds)

    # --- the run ------------------------------------------------------------------------
    def run(self) -> list[CellState]:
        m = self.study.measure
        self.skip_unrunnable()
        most = max((s.cell.total_rounds(m.rounds) for s in self.states), default=0)
        todo = [(r, s) for r in range(most) for s in self.states
                if s.open and r < s.cell.total_rounds(m.rounds) and r not in s.rounds]
        if any(s.cell.device == "gpu" for _, s in todo):
            self.gpu_watch.start()
        progress = Progress(todo, self.report)
        clean_exit = False
        watch = RoundLoad(self)
        try:
            for r, state in todo:
                watch.at_round(r)
                self.next_process(state.cell.process_of(r, m.rounds))
                worker_pid = self.worker(state.cell).pid  # None until started
                if state.open and (state.ready_pid is None or state.ready_pid != worker_pid):
                    self.setup(state)  # first use, or its worker died: load it (again)
                if not state.open:  # skipped or failed: its chunks count as done
                    progress.skip()
                    continue
                started = time.monotonic()
                self.measure(state, r)
                progress.advance(state.cell.id, r, time.monotonic() - started,
                                 state.rounds.get(r, (None,))[0], state.final)
                watch.timed(state)
            watch.at_round(None)
            for state in self.states:
                if state.open and self.converges(state.cell):
                    self.process = state.cell.processes - 1  # its last process (started again if stopped)
                    if state.ready_pid is None or state.ready_pid != self.worker(state.cell).pid:
                        self.setup(state)
                    if state.open:
                        self.converge(state)
                if state.open:
                    self.finish(state, "ok")
            clean_exit = True
        finally:
            for worker in self.workers.values():
                # done: ask it to free its GPU memory and exit; Ctrl-C, a crash: kill it now
                worker.stop() if clean_exit else worker.kill()
        return self.states

    def skip_unrunnable(self) -> None:
        absent = gpu.absent_reason()
        for state in self.states:
            if state.open and state.cell.device == "gpu" and absent:
                self.finish(state, "skipped", absent)

    def next_process(self, process: int) -> None:
        """Rounds of a later process start: the earlier processes' workers are stopped (their GPU
        memory freed), so the next request of each group starts a fresh one."""
        if process == self.process:
            return
        for key in [k for k in self.workers if k[1] != process]:
            self.workers.pop(key).stop()
        self.process = process

    def worker(self, cell: Cell) -> WorkerProcess:
        key = (cell.group, self.process)
        if key not in self.workers:
            m = self.study.measure
            threads = cell.threads if cell.threads is not None else m.threads
            settings = procenv.settings(threads, m.inter_op_threads, cell.device)
            # the implementation's own variables (KERAS_BACKEND, XLA_FLAGS) win over the caller's
            worker_env = {**os.environ, **settings, **registry.process_env(cell.implementation),
                          GPU_PEERS_ENV: str(gpu_peers_path())}
            log = self.run_dir / "workers.log"
            self.workers[key] = WorkerProcess(f"{cell.group} (process {self.process})", worker_env, log)
        return self.workers[key]

    def ask(self, state: CellState, message: dict, timeout: float) -> dict | None:
        """Send one request; a crash or timeout ends this cell (the study goes on).

        GPU work holds the GPU lock and is watched for other processes on the GPU."""
        worker = self.worker(state.cell)
        try:
            if state.cell.device != "gpu":
                reply = worker.request(message, timeout)
            else:
                reply = self.ask_on_gpu(state, worker, message, timeout)
        except Failure as exc:
            self.finish(state, *self.gpu_verdict(exc))
            return None
        if not reply.get("ok"):
            status, reason = reply.get("status", "error"), reply.get("reason")
            poisoned = gpu_fault.sticky(str(reason)) or gpu_fault.cudnn_failed(str(reason))
            if state.cell.device == "gpu" and poisoned:
                status = "fault"  # its context may be poisoned: the group's next cell gets a fresh worker
                worker.kill()
            self.finish(state, status, reason)
            return None
        return reply

    def gpu_verdict(self, exc: Failure) -> tuple[str, str]:
        """(status, reason) of a failed request: where the worker ended on a GPU fault or hang that it
        named on stderr (harness.frameworks.gpu_fault: its exit code and workers.log's last such line),
        `fault` or `hung` with its words; else the failure's own. Either way the worker is gone, and
        the next request of its group starts a fresh one, which loads the group's other cells again."""
        code = re.search(r"exited with code (-?\d+)", exc.reason)
        kind = gpu_fault.kind_of(int(code.group(1))) if code and exc.status == "crashed" else None
        try:
            log = (self.run_dir / "workers.log").read_text(errors="replace") if kind else ""
        except OSError:
            log = ""
        found = gpu_fault.named(log)
        if kind and found and found[0] == kind:
            return kind, f"{found[1]} ({exc.reason})"
        return exc.status, exc.reason

    def write_gpu_peers(self) -> None:
        """This run's workers' pids, for the levels' manners on a shared GPU (base.GPU_PEERS_ENV)."""
        write_atomic(gpu_peers_path(), "".join(f"{pid}\n" for pid in self.own_pids()))

    def own_pids(self) -> list[int]:
        """This run's workers: their GPU memory is ours, not another user's."""
        return [w.pid for w in self.workers.values() if w.pid]

    def ask_on_gpu(self, state: CellState, worker: WorkerProcess, message: dict, timeout: float) -> dict:
        self.write_gpu_peers()
        reply = self.gpu_watch.request(worker, message, timeout)
        if reply["contended"] and reply["contended"] not in state.contended:
            state.contended.append(reply["contended"])
        return reply

    def setup(self, state: CellState) -> None:
        m = self.study.measure
        message = {"op": "setup", "cell": {**state.cell.to_dict(), "id": state.cell.id},
                   "weights": self.weights, "warmup": m.warmup,
                   "bill": m.bill and self.process == 0}  # what a level needs installed: read once
        reply = self.ask(state, message, m.setup_timeout_s)
        if reply is None:
            return
        state.ready_pid = self.worker(state.cell).pid
        if state.setup is None and reply.get("warmup_median_ns"):  # first setup: fit max_cell_seconds
            calls = capped_calls(m, state.cell.calls, reply["warmup_median_ns"] / 1e9,
                                 state.cell.processes)
            if calls != sum(state.chunks):
                self.report(f"  {state.cell.id}: {calls} timed calls instead of {state.cell.calls} "
                            f"(max_cell_seconds = {m.max_cell_seconds:g})")
            state.chunks = chunk_sizes(calls, state.cell.total_rounds(m.rounds))
        loaded = reply.pop("loaded", None)
        installed = (memory.installed(loaded["files"], loaded["maps"],
                                      own=registry.own_distributions(state.cell.implementation),
                                      tools=loaded.get("system_tools"), also=weights.DISTRIBUTIONS)
                     if loaded else None)
        row = self.writer.write({"kind": "setup", "cell_id": state.cell.id, "pid": state.ready_pid,
                                 "process": self.process, "calls": sum(state.chunks),
                                 **{k: v for k, v in reply.items() if k != "ok"}, "installed": installed,
                                 # its start-up compiled in an empty cache (registry's compile_cache)
                                 "fresh_compile_cache": bool(loaded and loaded.get("fresh_cache"))})
        if state.setup is None:
            state.setup = row

    def measure(self, state: CellState, r: int) -> None:
        m = self.study.measure
        start = 1 + m.warmup + sum(state.chunks[:r])  # each call a different image
        message = {"op": "measure", "cell_id": state.cell.id, "calls": state.chunks[r], "start": start}
        reply = self.ask(state, message, m.timeout_s)
        if reply is None:
            return
        state.rounds[r] = (reply["times_ns"], reply["device_ns"])
        state.round_process[r] = [self.process, state.ready_pid]
        state.rss_peak = max(filter(None, (state.rss_peak, reply.get("rss_peak"))), default=None)
        self.writer.write({"kind": "round", "cell_id": state.cell.id, "round": r,
                           "process": self.process, "pid": state.ready_pid, "times_ns": reply["times_ns"],
                           "device_ns": reply["device_ns"], "contended": reply.get("contended"),
                           "gpu_samples": reply.get("gpu_samples"), "rss_peak": reply.get("rss_peak")})

    def converges(self, cell: Cell) -> bool:
        """Train mode: one convergence run per level, its default training variant at the
        study's convergence batch size, in float32 with the study's thread count."""
        m = self.study.measure
        return (cell.mode == "train" and bool(m.converge_images or m.converge_seconds)
                and cell.variant == registry.spec(cell.implementation).train_variants[0]
                and cell.batch_size == m.converge_batch_size and cell.dtype == "float32"
                and cell.threads is None)

    def converge(self, state: CellState) -> None:
        m = self.study.measure
        self.report(f"  {state.cell.id}: convergence run (at most {m.converge_images} images "
                    f"or {m.converge_seconds} s)")
        message = {"op": "converge", "cell_id": state.cell.id, "images": m.converge_images,
                   "seconds": m.converge_seconds}
        timeout = (m.converge_seconds or 600) * 3 + m.setup_timeout_s
        reply = self.ask(state, message, timeout)
        if reply is not None:
            state.convergence = reply["convergence"]

    def finish(self, state: CellState, status: str, reason: str | None = None) -> None:
        state.final = self.writer.write(cells.final_row(state, self.study.name, status, reason))
        if status != "ok":
            self.report(f"  {state.cell.id}: {status}: {reason}")


class RoundLoad:
    """The machine's load around each round of a run (harness.machine.load): a `load` row per
    round, and the reason added to the `contended` list of every cell measured in a round that
    other processes disturbed."""

    def __init__(self, runner: "Runner"):
        self.runner = runner
        self.round: int | None = None
        self.start: load.Sample | None = None
        self.cells: list[CellState] = []

    def at_round(self, r: int | None) -> None:
        """Close the round under way when `r` starts another (None: the run is over)."""
        if r == self.round:
            return
        if self.round is not None and self.start is not None and self.cells:
            own = set(self.runner.own_pids())
            found = load.between(self.start, load.sample(), own)
            why = load.contended(found)
            self.runner.writer.write({"kind": "load", "round": self.round, **found, "contended": why,
                                      "cells": [state.cell.id for state in self.cells]})
            for state in self.cells if why else ():
                reason = f"round {self.round}: {why}"
                if reason not in state.contended:
                    state.contended.append(reason)
        self.round, self.cells = r, []
        self.start = load.sample() if r is not None else None

    def timed(self, state: CellState) -> None:
        if self.round in state.rounds and state not in self.cells:
            self.cells.append(state)


def start_run(study: Study, out: Path, run_id: str | None = None, resume: bool = False,
              weights: str | Path = DEFAULT_WEIGHTS, report: Callable[[str], None] = print,
              lock_timeout_s: float | None = None) -> tuple[Path, list[CellState]]:
    """Create (or reopen with resume) the run folder, record the environment, run the cells; the
    run's lock is held throughout (one writer per run), and the completion marker written last."""
    if resume:
        run_dir = results.find_run_dir(out, study.name, run_id)
        run_id = run_dir.name
        writer_lock = runfolder.Writer(run_dir)  # before a row is read: a second --resume stops here
    else:
        run_dir = results.create_run_dir(out, study.name, run_id)
        run_id = run_dir.name
        writer_lock = runfolder.Writer(run_dir)
        write_atomic(run_dir / "study.toml", study.source)
        m = study.measure
        info = env.collect(procenv.settings(m.threads, m.inter_op_threads, "cpu"))
        info["provenance"] = provenance.collect(c.implementation for c in study.cells)
        if study.narrowed:  # a quick run (harness.measure.plan.narrow): never a machine's answer
            info["narrowed"] = study.narrowed
        write_atomic(run_dir / "env.json", json.dumps(info, indent=2) + "\n")
    try:
        states = run_locked(study, run_dir, run_id, resume, weights, report, lock_timeout_s)
    finally:
        writer_lock.release()
    return run_dir, states


def finished(study: Study, run_dir: Path, report: Callable[[str], None]) -> list[CellState]:
    """A complete run resumed: its cells, as its (compressed) rows have them; nothing is redone, and
    its rows stay as they are."""
    states = fresh_states(study)
    done = cells.restore(states, results.read_rows(run_dir), study.measure.rounds)
    report(f"resuming {run_dir}: {done} of {len(states)} cells already finished (the run is complete)")
    return states


def run_locked(study: Study, run_dir: Path, run_id: str, resume: bool, weights: str | Path,
               report: Callable[[str], None], lock_timeout_s: float | None) -> list[CellState]:
    """start_run's body, under the run's lock: the rows, then the marker (a run already marked
    complete keeps its marker, and with it its place in this checkout's order)."""
    if resume and runfolder.completion(run_dir) is not None:
        return finished(study, run_dir, report)
    writer = results.RowWriter(run_dir, run_id)
    lock = None
    if any(c.device == "gpu" for c in study.cells) and gpu.absent_reason() is None:
        lock = GpuLock(gpu.lock_id(), lock_timeout_s, report)
        lock.check()  # an unusable lock folder stops the run here, with the fix
    runner = Runner(study, run_dir, writer, weights, gpu_lock=lock, report=report)
    if resume:
        done = runner.restore(results.read_rows(run_dir))
        report(f"resuming {run_dir}: {done} of {len(runner.states)} cells already finished")
    most = max((c.processes for c in study.cells), default=1)
    processes = f" in each of {most} processes" if most > 1 else ""
    report(f"study {study.name}: {len(study.cells)} cells, {study.measure.rounds} rounds{processes} "
           f"-> {run_dir}")
    busy = load.busy_now(seconds=0.2)
    if busy:
        report(f"WARNING: the machine is busy ({busy}); rounds it disturbs are flagged contended "
               "in the rows and the report. Wait for it to be idle for numbers worth quoting.")
    try:
        runner.run()
    finally:
        writer.close()
        gpu_peers_path().unlink(missing_ok=True)  # the workers are gone: their list with them
    if runfolder.completion(run_dir) is None:
        runfolder.mark_complete(run_dir, "finished" + (" (resumed)" if resume else ""),
                                cells=len(runner.states))
    return runner.states
