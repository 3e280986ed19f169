"""Points, ties and lateness, from the rows, the lab's [grade] table (assignment.Grade) and the
collection's manifest (harness.lab.term.intake.collect): what the leaderboard shows and `lab export` hands in.

- Gate: `gate_points` for every submission that passed the gate (ok, over-memory, too-slow,
  timing-inconsistent); one found too slow by the probe is gated on [gate] slow_images (its row's
  `gate`) and keeps them where [grade] slow_gate_points (default true); a row from before that, with
  `gate_first` and no `gate`, gets none: only the first images were checked.
- Stages: a row that did not pass the gate but has stage verdicts (a lab with [stages]) gets the
  points of the stages judged ok, at most gate_points.
- Speed (ok rows only): up to `speed_points` by the ratio to rank_by: "linear" (all at or below
  full_at, none at or above zero_at, linear in log(ratio) between) or "tiers" (the points of the
  first tier whose ratio is at least the submission's; none past the last).
- Ties: ok rows sorted by ratio; one shares the rank of the first of the current rank when their
  95% intervals overlap, and the next rank skips the tied places (1, 1, 3). Byte-identical
  submissions (the same files_sha256) tie whatever their intervals. Tied rows get the speed
  points of their group's best ratio: two identical submissions never differ in points.
- Late: days late = started days past `due` (the manifest's submitted_at; a time without a zone is
  read in due's zone), at least 1 where the LMS flagged it late; the points lose late_per_day
  percent a day, and all of them past late_max_days. A student with an extension
  (harness.lab.term.marks.extensions) is late past their own due, and the LMS's flag is not read.

    PASSED_GATE, Score, tie_ranks(intervals, same), groups(rows) -> {student: (rank, best ratio)},
    sorted_ok(rows) (the ok rows, best ratio first), identity(row) (the files' hash), ratio(row)
    speed_points(grade, ratio), stage_points(row, grade), late_days(grade, entry), late_factor(grade, days)
    score(row, grade, best_ratio, entry), scores(rows, grade, manifest) -> {student: Score}
"""

import math
from dataclasses import dataclass, replace
from datetime import datetime

from harness.lab.judge import attempts
from harness.lab.judge.rules.assignment import Grade

PASSED_GATE = ("ok", "over-memory", "too-slow", "timing-inconsistent")
RULE = ("Ranks tie where the 95% intervals overlap: a submission shares the rank of the first one of "
        "that rank when its interval overlaps that one's, and the next rank skips the tied places "
        "(1, 1, 3); byte-identical submissions tie whatever their intervals; tied submissions get the "
        "speed points of their group's best ratio.")


@dataclass(frozen=True)
class Score:
    gate: float
    speed: float
    late_days: int
    factor: float  # what lateness leaves of the points (1: on time)
    total: float
    most: float  # gate_points + speed_points
    note: str  # how it was computed, in words
    staged: bool = False  # its gate's points are those of the stages it got right (it failed the gate)


def tie_ranks(intervals: list[tuple[float, float]], same: list[str] | None = None) -> list[int]:
    """Competition ranks for (ci95_low, ci95_high) intervals sorted by their ratio: each ties with the
    first of the current rank when the two intervals overlap, and with an earlier row of the same
    `same` key (byte-identical files) whatever its interval."""
    ranks: list[int] = []
    first: dict[str, int] = {}  # a key's rank
    leader = 0
    for i, (low, high) in enumerate(intervals):
        key = same[i] if same else str(i)
        if key in first:
            ranks.append(first[key])
        elif i and low <= intervals[leader][1] and high >= intervals[leader][0]:
            ranks.append(ranks[leader])
        else:
            leader = i
            ranks.append(i + 1)
        first.setdefault(key, ranks[-1])
    return ranks


def ratio(row: dict) -> dict:
    return row["ratios"][row["rank_by"]]


def identity(row: dict) -> str:
    """What makes two submissions the same: the hash of their graded files (else the student)."""
    return row.get("files_sha256") or f"student:{row['student']}"


def sorted_ok(rows: list[dict]) -> list[dict]:
    """The ok rows by ratio; byte-identical submissions side by side, at the best ratio among them."""
    ok = [r for r in rows if r["status"] == "ok"]
    best: dict[str, float] = {}
    for r in ok:
        best[identity(r)] = min(best.get(identity(r), math.inf), ratio(r)["ratio"])
    return sorted(ok, key=lambda r: (best[identity(r)], identity(r), ratio(r)["ratio"], r["student"]))


def groups(rows: list[dict]) -> dict[str, tuple[int, float]]:
    """{student: (rank, the best ratio among those tied at that rank)} for the ok rows."""
    ok = sorted_ok(rows)
    ranks = tie_ranks([(ratio(r)["ci95_low"], ratio(r)["ci95_high"]) for r in ok], [identity(r) for r in ok])
    best: dict[int, float] = {}
    for rank, row in zip(ranks, ok, strict=True):
        best.setdefault(rank, ratio(row)["ratio"])
    return {row["student"]: (rank, best[rank]) for rank, row in zip(ranks, ok, strict=True)}


def speed_points(grade: Grade, ratio_to_rank_by: float) -> float:
    if grade.speed == "tiers":
        return next((points for most, points in grade.tiers if ratio_to_rank_by <= most), 0.0)
    if ratio_to_rank_by <= grade.full_at:
        return float(grade.speed_points)
    if ratio_to_rank_by >= grade.zero_at:
        return 0.0
    share = math.log(grade.zero_at / ratio_to_rank_by) / math.log(grade.zero_at / grade.full_at)
    return round(grade.speed_points * share, 2)


def late_days(grade: Grade, entry: dict | None) -> int:
    """Started days past `due` of the manifest's submitted_at; at least 1 where the LMS said late."""
    days = 0
    if entry and grade.due is not None and entry.get("submitted_at"):
        at, due = datetime.fromisoformat(entry["submitted_at"]), grade.due
        if (at.tzinfo is None) != (due.tzinfo is None):  # Moodle's worksheet has no zone: due's
            at = at.replace(tzinfo=due.tzinfo) if at.tzinfo is None else at.replace(tzinfo=None)
        days = max(0, math.ceil((at - due).total_seconds() / 86400))
    if entry and entry.get("late") == "yes":
        days = max(days, 1)
    return days


def late_factor(grade: Grade, days: int) -> float:
    if days > grade.late_max_days:
        return 0.0
    return max(0.0, 1 - grade.late_per_day / 100 * days)


def score(row: dict, grade: Grade, best_ratio: float | None, entry: dict | None,
          extended: datetime | None = None) -> Score:
    """One row's points; best_ratio: its tie group's best ratio (ok rows); `extended`: the student's
    own due (harness.lab.term.marks.extensions), then the LMS's late flag is not read."""
    if extended is not None:
        grade = replace(grade, due=extended)
        entry = {**(entry or {}), "late": ""}  # the LMS flagged it against the class's due
    gated = row["status"] in PASSED_GATE and not ("gate_first" in row and "gate" not in row) and \
        (row["status"] != "too-slow" or grade.slow_gate_points)
    staged = stage_points(row, grade) if not gated else None
    gate = float(grade.gate_points) if gated else staged or 0.0
    speed = speed_points(grade, best_ratio) if row["status"] == "ok" and best_ratio is not None else 0.0
    days = late_days(grade, entry)
    factor = late_factor(grade, days)
    total = round((gate + speed) * factor, 2)
    words = [f"{row['status']}: {gate:g} for the " + ("stages it got right" if staged is not None else "gate")
             + (f" + {speed:g} for speed" if speed else "")
             + ("" if gated or row["status"] not in PASSED_GATE else
               " (too slow: the lab gives a too-slow submission no gate points)" if "gate" in row else
               " (too slow for the full gate)")]
    if extended is not None:
        words.append(f"due {extended.isoformat(sep=' ')} (an extension)")
    if days:
        words.append(f"{days} day(s) late: " + ("no points (past late_max_days)" if factor == 0
                                                  else f"x {factor:.2f}"))
    return Score(gate, speed, days, factor, total, float(grade.gate_points + grade.speed_points),
                 "; ".join(words), staged is not None)


def stage_points(row: dict, grade: Grade) -> float | None:
    """A row that failed the gate: the points of its stages judged ok (the lab's [stages], as its row
    records them), at most gate_points; None for a row without stages."""
    verdicts = row.get("stages")
    if not isinstance(verdicts, list):
        return None
    got = sum(v["points"] for v in verdicts if isinstance(v, dict) and v.get("verdict") == "ok"
              and isinstance(v.get("points"), (int, float)) and v["points"] >= 0)
    return float(min(got, grade.gate_points))


def scores(rows: list[dict], grade: Grade, manifest: dict[str, dict] | None = None,
           extended: dict[str, datetime] | None = None) -> dict[str, Score]:
    """{student: Score} for every finished row (harness.lab.judge.attempts.finished: an ungraded or
    tampered row has no points, not 0); `manifest` is {folder: entry} (collect.read_manifest);
    `extended` the extensions ({folder or LMS id: due}, extensions.graded)."""
    from harness.lab.term.marks import extensions

    tied = groups(rows)
    out = {}
    for row in rows:
        if not attempts.finished(row):
            continue
        entry = (manifest or {}).get(row["student"])
        out[row["student"]] = score(row, grade, tied.get(row["student"], (0, None))[1], entry,
                                    extensions.due_of(extended or {}, row["student"], entry))
    return out
