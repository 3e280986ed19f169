"""DETAILS' validity sections: the cells whose speed depends on the process (each process's median),
how each study's time was spent (worker set-up in each process, timed calls, the rest), the noisy
cells, the same cell across runs (repeatability) and the timer's cross-check against timeit. The
reproduce rows have their own section (harness.report.claims.reproduce)."""

import itertools
from collections.abc import Iterable, Mapping

import pandas as pd

from harness.measure.store import stats
from harness.report.markup import words
from harness.report.markup.tables import compact, ms, table

TEMPLATE = "validity.md.j2"  # the sections' words


def draws_section(frame: pd.DataFrame) -> list[str]:
    """The cells marked process-dependent, each with its processes' medians."""
    out = ["", words.say(TEMPLATE, "draws_title"), "", words.say(TEMPLATE, "draws_method", stats=stats), ""]
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    drawn = ok[ok["process-dependent"]] if "process-dependent" in ok else ok.iloc[0:0]
    if drawn.empty:
        return out + ["_None._"]
    # the cell names its device, and DETAILS one machine per device
    rows = [[r["study"], r["cell_id"], f"{', '.join(ms(m) for m in r['process_medians_ms'])} "
             f"in {r['processes']} processes", ms(r["median_ms"]),
             f"{ms(r['ci_low_ms'])} – {ms(r['ci_high_ms'])}"]
            for _, r in drawn.iterrows()]
    return out + [words.say(TEMPLATE, "count", found=len(drawn), of=len(ok)), "",
                  compact(["study", "cell", "each process's median", "median", "95% CI (processes, then "
                           "rounds)"], rows)]


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
        if (spent := time_spent(run)) is not None:
            rows.append([run["study"], run["run_id"], spent["processes"], f"{spent['wall_s']:.0f} s",
                         f"{spent['setup_s']:.0f} s", f"{spent['timed_s']:.0f} s", f"{spent['rest_s']:.0f} s",
                         run["machine"]])
    head = ["", words.say(TEMPLATE, "time_title"), "", words.say(TEMPLATE, "time_method")]
    if not rows:
        return head + ["", words.say(TEMPLATE, "no_runs")]
    return head + ["", compact(["study", "run", "processes", "wall", "worker set-up", "timed calls", "rest",
                                "machine"], rows, keep=2)]


def noisy_section(frame: pd.DataFrame) -> list[str]:
    """The cells whose median's interval is wide (stats.NOISY_CI_OVER_MEDIAN): the machine's speed moved."""
    out = [words.say(TEMPLATE, "noisy_method", stats=stats), ""]
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    noisy = ok[ok["noisy"]] if not ok.empty else ok
    if not ok.empty:
        out += [words.say(TEMPLATE, "count", found=len(noisy), of=len(ok), flagged=True), ""]
    # the cell names its device; DETAILS shows one machine per device (its runs list names them). Its
    # median and interval are in its study's table: here what says how noisy it is
    out.append(table(["study", "cell", "CI / median", "rounds", "per-call IQR / median"],
                     [[r["study"], r["cell_id"], f"{r['ci_over_median']:.0%}", r["rounds"],
                       f"{r['spread']:.2f}"]
                      for _, r in noisy.iterrows()]) if not noisy.empty else "_None._")
    return out


def overlaps(a: Mapping, b: Mapping) -> bool:
    return a["ci_low_ms"] <= b["ci_high_ms"] and b["ci_low_ms"] <= a["ci_high_ms"]


def repeatability_section(frame: pd.DataFrame) -> list[str]:
    """The same cell (implementation, variant, device, batch, dtype) measured by several runs
    (of one study or of several) on one machine: how many pairs of their intervals overlap, and the
    cell whose runs' medians lie furthest apart."""
    ok = [] if frame.empty else frame.loc[(frame["status"] == "ok") & (frame["rounds"] >= 2), [
        "machine", "cell_id", "mode", "study", "run_id", "median_ms", "ci_low_ms",
        "ci_high_ms"]].to_dict("records")
    rows, pairs, overlapping = [], 0, 0
    # (machine, cell, mode) -> its runs, in the frame's order: a training step is not an inference call
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in ok:
        groups.setdefault((r["machine"], r["cell_id"], r["mode"]), []).append(r)
    for (_machine, cell, _mode), runs in sorted(groups.items()):
        if len(runs) > 1:
            both = [overlaps(a, b) for a, b in itertools.combinations(runs, 2)]
            pairs, overlapping = pairs + len(both), overlapping + sum(both)
            if not all(both):
                rows.append((max(r["median_ms"] for r in runs) / min(r["median_ms"] for r in runs), cell,
                             "; ".join(f"{r['study']}/{r['run_id'][:15]}: {ms(r['median_ms'])} "
                                       f"[{ms(r['ci_low_ms'])} – {ms(r['ci_high_ms'])}]" for r in runs)))
    if not pairs:
        return [words.say(TEMPLATE, "no_repeats")]
    out = [words.say(TEMPLATE, "repeatability", overlapping=overlapping, pairs=pairs)]
    if overlapping < pairs:
        apart, cell, runs_said = max(rows)
        out.append(words.say(TEMPLATE, "repeat_why", cells=len(rows), cell=cell, apart=apart, runs=runs_said))
    return out


def crosscheck_lines(records: Iterable[dict]) -> list[str]:
    """The harness's timer against timeit, from crosscheck-*.json."""
    return [words.say(TEMPLATE, "crosscheck", rec=rec, host=rec.get("env", {}).get("hostname", "?"))
            for rec in records]
