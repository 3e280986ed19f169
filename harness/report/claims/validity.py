"""DETAILS' validity lines on processes: the cells whose speed depends on the process (each process's
median), and how each study's time was spent (worker set-up in each process, timed calls, the rest).
The reproduce rows have their own section (harness.report.claims.reproduce)."""

import pandas as pd

from harness.measure.store import stats
from harness.report.markup.tables import ms, table


def draws_section(frame: pd.DataFrame) -> list[str]:
    """The cells marked process-dependent, each with its processes' medians."""
    out = ["", "## Cells whose speed depends on the process", "",
           f"Each cell is timed in fresh worker processes, one after another (`processes` in its study "
           f"file; the headline's cells in at least {stats.MIN_PROCESSES}). A cell is marked "
           "*process-dependent* where its processes' medians differ by more than the interval its rounds "
           f"give within the processes, by more than {stats.DRAW_MIN_SHARE:.0%} of its median, and by "
           f"more than {stats.DRAW_ALPHA:.0%} of {stats.PERMUTATIONS} shuffles of its rounds among the "
           "processes give. Its interval resamples the processes, then the rounds within them, and holds "
           "every process's median. The processes run one after another, so a change in the machine's "
           "speed between them reads as a draw too; within-round ratios cancel it.", ""]
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    drawn = ok[ok["process-dependent"]] if "process-dependent" in ok else ok.iloc[0:0]
    if drawn.empty:
        return out + ["_None._"]
    rows = [[r["study"], r["cell_id"], f"{', '.join(ms(m) for m in r['process_medians_ms'])} "
             f"in {r['processes']} processes", ms(r["median_ms"]),
             f"{ms(r['ci_low_ms'])} – {ms(r['ci_high_ms'])}", r["machine"]]
            for _, r in drawn.iterrows()]
    return out + [f"{len(drawn)} of {len(ok)} measured cells.", "",
                  table(["study", "cell", "each process's median", "median", "95% CI (processes, then "
                         "rounds)", "machine"], rows)]


def time_spent(run: dict) -> dict | None:
    """A study run's wall time (its first row to its last), split into worker set-up (each setup
    row's time since the row before it: start, import, build, first call, warm-up), timed calls (the
    sum of every round's times) and the rest; None for a run with no rounds."""
    rows = run["rows"]
    rounds = [r for r in rows if r.get("kind") == "round"]
    if not rounds:
        return None
    setup, previous = 0.0, rows[0]["time"]
    for row in rows:
        if row.get("kind") == "setup":
            setup += row["time"] - previous
        previous = row["time"]
    wall = rows[-1]["time"] - rows[0]["time"]
    timed = sum(sum(r["times_ns"]) for r in rounds) / 1e9
    processes = 1 + max((r.get("process", 0) for r in rounds), default=0)
    return {"wall_s": wall, "setup_s": setup, "timed_s": timed, "rest_s": wall - setup - timed,
            "processes": processes}


def time_section(runs: list[dict]) -> list[str]:
    """How each study's newest run on each machine spent its time."""
    rows = []
    for run in sorted(runs, key=lambda r: (r["machine"], r["study"])):
        spent = time_spent(run)
        if spent is None:
            continue
        rows.append([run["study"], run["run_id"], spent["processes"], f"{spent['wall_s']:.0f} s",
                     f"{spent['setup_s']:.0f} s", f"{spent['timed_s']:.0f} s", f"{spent['rest_s']:.0f} s",
                     run["machine"]])
    head = ["", "## How each study's time was spent", "",
            "From the rows' own clocks: worker set-up is each process's start, import, model, first call "
            "and warm-up (paid once per process: more processes cost set-ups, not calls); timed calls "
            "are the calls the statistics read; the rest is the harness between them (the bill, load "
            "samples, convergence runs in `training`)."]
    if not rows:
        return head + ["", "_No study runs yet._"]
    return head + ["", table(["study", "run", "processes", "wall", "worker set-up", "timed calls", "rest",
                              "machine"], rows)]
