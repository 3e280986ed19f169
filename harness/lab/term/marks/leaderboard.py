"""The leaderboard from the rows alone: OUT/leaderboard.csv, OUT/LEADERBOARD.md, the figure and
every student's feedback (`python -m harness lab report OUT` rebuilds them all).

Ranked by the within-round ratio to the lab's rank_by reference, timed in the same rounds on the
same node: machines of different speed (Slurm nodes) still rank fairly. The absolute median
and the node are shown beside it, never used for the ranking; so is each submission's peak memory,
read by the grader from outside its worker (harness.lab.box.proc.peak), the references' beside them, and
where the lab gates on it ([limits] peak_mb) a submission above it is over-memory, not ranked.

    build(out, report) -> paths   everything below, from the rows (and OUT/manifest.csv: lateness)
    ungraded_lines(rows)   the students without a finished row, named first
    ranked(rows) (each machine type apart: ranked_one_type; ties: harness.lab.term.marks.points),
    markdown(rows, lab, notes, scores), points_lines(lab),
    with_similarity(board, rows, out), write_csv(rows, path, scores), csv_row(rank, row, score),
    reference_summary(rows), isolation_lines(rows), memory_lines(rows, lab), node_name(row), fmt_us(ns),
    fmt_interval(r), fmt_mb(row)
"""

import csv
import io
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.draw.style import fmt_ms
from harness.lab import text
from harness.lab.judge import attempts, store
from harness.lab.judge.phases import memory
from harness.lab.judge.rules import assignment, deadlines
from harness.lab.term.intake import collect
from harness.lab.term.marks import extensions, machines, points
from harness.machine.files import write_atomic

# Every status a row may have, in the order of the unranked (most useful first); ok rows come first.
ROW_STATUSES = ("ok", "over-memory", "too-slow", "timing-inconsistent", "wrong", "crashed", "out-of-memory",
                "timeout", "import-error", "cancelled", "refused", "ungraded", "tampered")
MEANING = {
    "ok": "passed the gate; timed and ranked",
    "over-memory": "passed the gate and was timed, but its peak memory, measured from outside its worker, "
                   "was above the lab's peak_mb; not ranked, no points for speed",
    "too-slow": "slower than the lab's max_ratio (in the probe before the full gate, or the warm-up), "
                "so not timed",
    "timing-inconsistent": "its reported call times do not fit the grader's own clock",
    "wrong": "answers disagree with the NumPy reference (test images or unseen timed images)",
    "crashed": "the worker died or predict raised",
    "out-of-memory": "past the lab's memory limit (memory_mb): killed",
    "timeout": "past the lab's wall-time or CPU-time limit, or one step past its own deadline (an "
               f"allowance + {deadlines.SAFETY:g} x max_ratio x the reference's time for the same work; the "
               "row names the step)",
    "import-error": "the module could not be imported or the class built",
    "cancelled": "the Slurm task was cancelled",
    "refused": "the hand-in was refused before grading (by `lab collect`: a zip bomb, an entry that climbs "
               "out, a damaged archive, a file past the caps; or a student folder that is a link); the "
               "reason is in the row; nothing of it was graded",
    "ungraded": "not graded yet: its grading was cut off (the grader stopped by a signal, a node lost) or "
                "never came to it; not the submission's doing, no points (not 0) until it is graded "
                "(lab regrade OUT --only NAME); the row says what happened to each attempt",
    "tampered": "its row was changed after the grader wrote it; not ranked",
}
CSV_FIELDS = ["rank", "student", "status", "points", "median_us_per_image", "peak_mb", "rank_by",
              "ratio", "ratio_ci95_low", "ratio_ci95_high", "other_ratios", "loc", "files", "host", "cpu",
              "gpu", "memory_source", "reason"]


def ranked(rows: list[dict]) -> list[tuple[int | None, dict]]:
    """(rank, row): each machine type ranked on its own (machines.by_type), its ok rows by ratio,
    tied where their intervals overlap (points.RULE), then the rest."""
    return [placed for group in machines.by_type(rows) for placed in ranked_one_type(group)]


def ranked_one_type(rows: list[dict]) -> list[tuple[int | None, dict]]:
    places = points.groups(rows)
    rest = sorted((r for r in rows if r["status"] != "ok"),
                  key=lambda r: (ROW_STATUSES.index(r["status"]) if r["status"] in ROW_STATUSES else 99,
                                 r["student"]))
    return [(places[r["student"]][0], r) for r in points.sorted_ok(rows)] + [(None, r) for r in rest]


def node_name(row: dict) -> str:
    """The node a row was timed on, for a Markdown cell."""
    node = row.get("node") or {}
    hardware = node.get("gpu") or node.get("cpu")
    where = (node.get("slurm") or {}).get("node") or node.get("hostname", "?")  # Slurm nodes share hosts
    return text.cell(f"{where}: {hardware}" if hardware else where)


def fmt_us(ns: float) -> str:
    return fmt_ms(ns / 1e6)  # the report's format: µs, ms or s


def fmt_mb(row: dict) -> str:
    """A row's peak memory for a cell: "312 MiB", or "–" (not measured, or a row from before it was)."""
    peak = row.get("peak_mb")
    return f"{peak:.0f} MiB" if isinstance(peak, (int, float)) and not isinstance(peak, bool) else "–"


def fmt_interval(r: dict) -> str:
    """A ratio with its 95% interval ({"ratio", "ci95_low", "ci95_high"}), as the tables show it."""
    return f"{r['ratio']:.2f} [{r['ci95_low']:.2f}–{r['ci95_high']:.2f}]"


def csv_row(rank: int | None, row: dict, score: points.Score | None = None) -> dict:
    """One row of leaderboard.csv, every cell through text.csv_value: the numbers the grader
    computed stay numbers, every text (a folder name, a reason, a host) is neutralised."""
    node = row.get("node") or {}
    out = {"rank": rank or "", "student": row["student"], "status": row["status"], "rank_by": row["rank_by"],
           "points": score.total if score else "",
           "loc": row.get("loc", ""), "files": row.get("files", ""), "host": node.get("hostname", ""),
           "cpu": node.get("cpu", ""), "gpu": node.get("gpu") or "", "reason": row.get("reason") or "",
           "peak_mb": row.get("peak_mb"), "memory_source": row.get("memory_source")}
    if memory.timed(row):  # an over-memory row's times are shown too, never ranked
        r = points.ratio(row)
        out.update(median_us_per_image=round(row["median_per_image_ns"] / 1e3, 3), ratio=round(r["ratio"], 4),
                   ratio_ci95_low=round(r["ci95_low"], 4), ratio_ci95_high=round(r["ci95_high"], 4),
                   other_ratios=" ".join(f"{k}={v['ratio']:.4g}" for k, v in row["ratios"].items()
                                         if k != row["rank_by"]))
    return text.csv_row(out)


def write_csv(rows: list[dict], path: Path, scores: dict[str, points.Score] | None = None) -> Path:
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, CSV_FIELDS)
    writer.writeheader()
    writer.writerows(csv_row(rank, row, (scores or {}).get(row["student"])) for rank, row in ranked(rows))
    return write_atomic(path, buffer.getvalue())  # whole or not at all (a full disk keeps the last one)


def reference_summary(rows: list[dict]) -> dict[str, dict]:
    """Per reference: the median over graded submissions of its median time and of its ratio to
    rank_by (each measured beside that submission)."""
    import numpy as np

    out: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        for label, median in (row.get("reference_medians_ns") or {}).items():
            entry = out.setdefault(label, {"medians": [], "ratios": [], "peaks": []})
            entry["medians"].append(median / row.get("batch_size", 1))
            entry["ratios"].append((row.get("reference_ratios") or {}).get(label, {}).get("ratio", 1.0))
            peak = (row.get("reference_peak_mb") or {}).get(label)
            if isinstance(peak, (int, float)):
                entry["peaks"].append(peak)
    return {k: {"median_ns": float(np.median(v["medians"])), "ratio": float(np.median(v["ratios"])),
                "n": len(v["medians"]), "peak_mb": float(np.median(v["peaks"])) if v["peaks"] else None}
            for k, v in out.items()}


def ungraded_lines(rows: list[dict]) -> list[str]:
    """The students without a finished row, named first (harness.lab.judge.attempts.unfinished)."""
    missing = attempts.unfinished(rows)
    if not missing:
        return []
    names = ", ".join(text.cell(name, 80) for name in sorted(missing))
    return [f"**Not graded ({len(missing)}): {names}.** No finished row, so no points (not 0): "
            "`lab export` refuses until they are graded (`lab regrade OUT --only " +
            ",".join(text.cell(name, 80) for name in sorted(missing)) + "`); each one's row below says "
            "why.", ""]


def isolation_lines(rows: list[dict]) -> list[str]:
    """How the workers were isolated, said out loud; a warning unless every row was fully sandboxed."""
    graded = [r for r in rows if attempts.finished(r)]  # tampered, ungraded: no worker of theirs to speak of
    notes = sorted({r.get("isolation") or "unknown (a row from before the sandbox)" for r in graded})
    weak = any(r.get("sandbox") != "full" for r in graded if r.get("status") != "cancelled")
    lines = [f"Sandbox: {note}." for note in notes]
    if weak:
        lines.append("**Warning: timing is not tamper-evident for every row**: some workers had no cgroup, "
                     "so work in a helper process escaped the CPU check "
                     "(docs/staff.md, 'What the grader guarantees').")
    return lines + [""] if lines else []


def memory_lines(rows: list[dict], lab: assignment.Lab) -> list[str]:
    """Where the peak memory column comes from (each source the rows name) and the lab's gate on it."""
    sources = sorted({r["memory_source"] for r in rows
                      if r.get("memory_source") and r["status"] != "tampered"})
    gate = lab.limits.peak_mb
    lines = ["Peak memory: the most host memory a submission's worker held over its whole run (import, "
             "gate, timed calls), read by the grader from outside the worker (" +
             ("; ".join(text.cell(s, 200) for s in sources) or "not measured in these rows") + ")" +
             (f"; above the lab's peak_mb of {gate} MiB a submission is `over-memory`, not ranked." if gate
              else "; the lab sets no limit on it (peak_mb)."), ""]
    return lines


def points_lines(lab: assignment.Lab) -> list[str]:
    """The [grade] rule and the tie rule, for the leaderboard's header."""
    g = lab.grade
    speed = (f"linear in log(ratio) from {g.full_at:g}x (all) to {g.zero_at:g}x (none)" if g.speed == "linear"
             else "tiers " + ", ".join(f"<= {r:g}x: {p:g}" for r, p in g.tiers))
    late = (f"; late: -{g.late_per_day:g}% a started day past {g.due.isoformat()}, none after "
            f"{g.late_max_days:g} days" if g.late_per_day and g.due else "")
    return [f"Points: {g.gate_points:g} for passing the gate, up to {g.speed_points:g} for speed ({speed})"
            f"{late}. {points.RULE}", ""]


def markdown(rows: list[dict], lab: assignment.Lab, notes: Iterable[str] = (),
             scores: dict[str, points.Score] | None = None) -> str:
    rank_by = lab.rank_by.label
    lines = [f"# Leaderboard: {lab.title or lab.name}", "", *ungraded_lines(rows), *isolation_lines(rows),
             f"Lab `{lab.name}` ({lab.rung} level, {lab.device}). Ranked by the within-round ratio to "
             f"`{rank_by}`, timed in the same rounds on the same node (the median over rounds of "
             "each round's median ratio, with a 95% interval from resampling rounds); lower is faster. "
             "The absolute median depends on the node and is shown beside it. Each submission passed the "
             f"gate first: {lab.gate_rule}; every timed answer, on "
             "images it had not seen, was checked too.", "", *machines.type_lines(rows), *points_lines(lab),
             *memory_lines(rows, lab),
             "| rank | student | status | points | median per image | peak memory "
             f"| × {rank_by} [95% interval] | LOC | node | note |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for rank, row in ranked(rows):
        if memory.timed(row):  # an over-memory row's times are shown too, never ranked
            speed, ratio = fmt_us(row["median_per_image_ns"]), fmt_interval(points.ratio(row))
            dropped = len(row.get("inconsistent_rounds") or [])
            note = text.cell(row.get("reason") or row.get("contended") or "", 90) or (
                f"{dropped} round(s) dropped (timing)" if dropped else "")
        else:
            speed, ratio, note = "–", "–", text.cell(row.get("reason") or "", 90)
        score = (scores or {}).get(row["student"])
        student = f"[{text.cell(row['student'], 80)}](feedback/{text.safe_id(row['student'])}.md)"
        lines.append(f"| {rank or '–'} | {student} | {text.cell(row['status'], 30)} | "
                     f"{f'{score.total:g}' if score else '–'} | "
                     f"{speed} | {fmt_mb(row)} | {ratio} | {text.cell(row.get('loc', '–'))} | "
                     f"{node_name(row)} | {note} |")
    refs = reference_summary(rows)
    if refs:
        lines += ["", "References, timed beside every submission (medians over submissions):", ""]
        lines += [f"- `{label}`: {fmt_us(v['median_ns'])} per image, {v['ratio']:.2f}× {rank_by}"
                  + (f", peak memory {v['peak_mb']:.0f} MiB" if v["peak_mb"] is not None else "")
                  for label, v in refs.items()]
    if notes:
        lines += ["", "Set aside (not from this grader, or changed after it wrote them):", ""]
        lines += [f"- {text.cell(note)}" for note in notes]
    lines += ["", "Statuses:", ""]
    lines += [f"- `{s}`: {MEANING[s]}" for s in ROW_STATUSES if any(r["status"] == s for r in rows)]
    lines += ["", "![speed against lines of code](leaderboard.png)", ""]
    return "\n".join(lines)


def with_similarity(board: str, rows: list[dict], out: Path) -> str:
    """The table with a last column, "similar to", from `lab similarity`'s OUT/private/similarity.csv
    (staff only; never on the public page); the board as it was when there is none. The names in
    it are folder names, as any cell: text.cell."""
    from harness.lab.term import similarity

    pairs = similarity.flagged(out, [row["student"] for row in rows])
    if pairs is None:
        return board
    lines = board.split("\n")
    head = next(i for i, line in enumerate(lines) if line.startswith("| rank |"))
    lines[head] += " similar to ([lab similarity](private/similarity.csv)) |"
    lines[head + 1] += " --- |"
    for i, (_, row) in enumerate(ranked(rows), head + 2):  # the table's rows, in ranked()'s order
        found = pairs.get(row["student"], [])
        lines[i] += " " + ", ".join(
            f"**{text.cell(other, 80)}** {score:.2f}" for other, score in found) + " |"
    return "\n".join(lines)


def build(out: Path, report: Callable[[str], None] = print) -> list[Path]:
    """Everything readers see, from OUT/results/*/row.json and OUT/<lab>.toml alone."""
    from harness.lab.term.marks import feedback, plots

    out = Path(out)
    lab = store.graded_lab(out)
    manifest = collect.graded_manifest(out)
    rows, notes = attempts.class_rows(out, manifest)  # a listed student without a row: ungraded
    scores = points.scores(rows, lab.grade, manifest, extensions.graded(out))
    paths = [write_csv(rows, out / "leaderboard.csv", scores)]
    write_atomic(out / "LEADERBOARD.md", with_similarity(markdown(rows, lab, notes, scores), rows, out))
    paths.append(out / "LEADERBOARD.md")
    paths.append(plots.speed_vs_loc(rows, lab, reference_summary(rows), out / "leaderboard.png"))
    places = {row["student"]: rank for rank, row in ranked(rows)}
    ranked_count = len([r for r in rows if r["status"] == "ok"])
    for row in rows:
        paths += feedback.write(row, lab, places[row["student"]], ranked_count, out,
                                scores.get(row["student"]))
    return paths

