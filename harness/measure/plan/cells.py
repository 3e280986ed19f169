"""One cell's state through a run, and the final `cell` row made from it.

A cell's timed calls are split into one chunk per round; its rounds, setup and final row are
kept here, so a resumed run takes over exactly where the rows stop.
"""

from dataclasses import dataclass, field
from typing import Any

from harness.measure.plan.study import Cell, chunk_sizes
from harness.measure.store import rows, stats

SETUP_FIELDS = ("import_ns", "load_ns", "cold_start_ns", "cold_start_device_ns", "memory", "gpu_memory",
                "installed", "fresh_compile_cache")


@dataclass
class CellState:
    cell: Cell
    chunks: list[int]  # timed calls in each round
    # round -> (times_ns, device_ns or None)
    rounds: dict[int, tuple[list[int], list[int] | None]] = field(default_factory=dict)
    setup: dict[str, Any] | None = None  # the first successful setup of this cell
    ready_pid: int | None = None  # the worker process that has it loaded
    final: dict[str, Any] | None = None
    contended: list[str] = field(default_factory=list)  # why its rounds were disturbed (GPU, load)
    convergence: dict[str, Any] | None = None  # train mode: the convergence run's result
    rss_peak: int | None = None  # the highest resident peak of its timed rounds (bytes)
    # round -> [process, pid]: the worker process that timed it (one process: a resumed run's
    # rounds of one process number come from two)
    round_process: dict[int, list[Any]] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        return self.final is None


def restore(states: list[CellState], rows: list[dict[str, Any]], rounds: int) -> int:
    """Take finished cells and rounds from earlier rows; returns how many cells were done.
    rounds: the study's, in each process."""
    by_id = {s.cell.id: s for s in states}
    for row in rows:
        if row.get("kind") == "load" and row.get("contended"):  # a disturbed round: its cells
            for cell_id in row.get("cells", []):
                reason = f"round {row['round']}: {row['contended']}"
                if cell_id in by_id and reason not in by_id[cell_id].contended:
                    by_id[cell_id].contended.append(reason)
        state = by_id.get(row.get("cell_id", ""))
        if state is None:
            continue
        if row["kind"] == "cell":
            state.final = row
        elif row["kind"] == "round":
            state.rounds[row["round"]] = (row["times_ns"], row.get("device_ns"))
            state.round_process[row["round"]] = [row.get("process", 0), row.get("pid")]
            state.rss_peak = max(filter(None, (state.rss_peak, row.get("rss_peak"))), default=None)
            if row.get("contended") and row["contended"] not in state.contended:
                state.contended.append(row["contended"])
        elif row["kind"] == "setup" and state.setup is None:
            state.setup = row
            if row.get("calls"):
                state.chunks = chunk_sizes(row["calls"], state.cell.total_rounds(rounds))
    return sum(not s.open for s in states)


def final_row(state: CellState, study_name: str, status: str, reason: str | None) -> dict[str, Any]:
    """The cell's last row: its status, every per-call time by round, and the statistics."""
    order = sorted(state.rounds)
    rounds = [state.rounds[r] for r in order]
    rounds_ns = [times for times, _ in rounds]
    # which process each round came from, 0, 1, ... (a worker restarted by --resume is another)
    processes = stats.labels_of(rounds_ns, [tuple(state.round_process.get(r, [0, None])) for r in order])
    device_rounds = [dev for _, dev in rounds if dev]
    device_processes = [p for (_, dev), p in zip(rounds, processes, strict=True) if dev]
    measured = status == "ok" and any(rounds_ns)
    row: dict[str, Any] = {"kind": "cell", "cell_id": state.cell.id, "study": study_name,
           "cell": state.cell.to_dict(), "status": status, "reason": reason,
           "rounds_ns": rounds_ns, "round_process": processes,
           "stats": stats.summarize(rounds_ns, processes) if measured else None,
           "stats_version": stats.SUMMARY_VERSION,  # of stats and device_stats: read back while current
           "device_stats": stats.summarize(device_rounds, device_processes)
           if device_rounds and status == "ok" else None,
           "setup": {k: state.setup.get(k) for k in SETUP_FIELDS} if state.setup else None,
           "contended": bool(state.contended), "contended_reasons": state.contended,
           "convergence": state.convergence, "rss_peak": state.rss_peak, "warnings": []}
    if row["stats"] and row["stats"]["noisy"]:
        row["warnings"].append(noisy_warning(row["stats"]))
    if row["stats"] and row["stats"]["drawn"]:
        row["warnings"].append(drawn_warning(row["stats"]))
    return row


def row_summary(row: dict[str, Any]) -> dict[str, Any] | None:
    """A final cell row's statistics (stats.summarize of its raw times), a copy of its own; None where it
    measured nothing. Its saved `stats` where its `stats_version` is the current stats.SUMMARY_VERSION
    (the row reader, harness.measure.store.rows, has checked them against its times: bad_summary);
    otherwise (a row of an older version, or from before versions) computed again from its times, so
    every run is read with today's rules."""
    if not rows.measured(row):
        return None
    if row.get("stats_version") == stats.SUMMARY_VERSION and isinstance(row.get("stats"), dict):
        return dict(row["stats"])
    return stats.summarize(row["rounds_ns"], row.get("round_process"))


def noisy_warning(st: dict[str, Any]) -> str:
    return (f"noisy: the 95% interval of the median spans {st['ci_over_median']:.0%} of it "
            f"(> {stats.NOISY_CI_OVER_MEDIAN:.0%}); the machine's speed changed between rounds")


def drawn_warning(st: dict[str, Any]) -> str:
    medians = ", ".join(f"{m / 1e3:.4g}" for m in st["process_medians_ns"])
    return (f"process-dependent: its {st['processes']} processes' medians ({medians} µs) differ by "
            "more than the rounds within a process do: each new process draws its own speed")
