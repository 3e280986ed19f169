"""`lab publish OUT PUBLIC_DIR`: the leaderboard as a static web page a course website can host as
it is (index.html, its figure and a CSV), under pseudonyms (harness.lab.term.public.alias).

Staff files and public files never mix: every public row is built from the graded row through an
allow-list of fields (PUBLIC_FIELDS), so no name, folder, id, feedback, failure reason or host name
can reach PUBLIC_DIR; the nodes are numbered, not named. PUBLIC_DIR may not be inside OUT (nor OUT
inside it) and holds only the files written here.

    publish(out, public_dir, submissions, report) -> paths; checked_target(out, public_dir)
    public_rows(rows, aliases) (the allow-list), for_display(row), reference_rows(rows, lab),
    graded_date(rows), page(lab, rows, refs, date) (templates/publish.html.j2), figure(public, rows,
    lab, path), write_csv(public, path)
"""

import csv
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError
from harness.lab import text
from harness.lab.judge import store
from harness.lab.judge.rules import assignment
from harness.lab.term.marks import leaderboard, plots, points
from harness.lab.term.public import alias

PAGE, FIGURE, TABLE = "index.html", "leaderboard.png", "leaderboard.csv"
PUBLIC_FIELDS = ["rank", "pseudonym", "status", "median_us", "ratio", "ci95_low", "ci95_high", "loc",
                 "peak_mb"]
COLUMNS = [("rank", True), ("pseudonym", False), ("status", False), ("time per image", True),
           ("× {rank_by} [95% interval]", True), ("lines of code", True), ("peak memory", True)]
TEMPLATES = Path(__file__).parent.parent / "templates"  # term/templates


def public_rows(rows: list[dict], aliases: dict[str, alias.Alias]) -> list[dict]:
    """The allow-list: rank (the leaderboard's, ties included), pseudonym, status, for a ranked row
    its time, ratio with interval and lines of code, and for any row its peak memory where the
    grader measured one (MiB, a number: harness.lab.box.proc.peak). Nothing else leaves a row."""
    public = []
    for rank, row in leaderboard.ranked(rows):
        entry = dict.fromkeys(PUBLIC_FIELDS)
        entry.update(rank=rank, pseudonym=aliases[row["student"]].alias, status=str(row["status"]))
        peak = row.get("peak_mb")
        if isinstance(peak, (int, float)) and not isinstance(peak, bool):
            entry["peak_mb"] = round(float(peak), 1)
        if row["status"] == "ok":
            r = points.ratio(row)
            entry.update(median_us=round(row["median_per_image_ns"] / 1e3, 3), ratio=round(r["ratio"], 4),
                         ci95_low=round(r["ci95_low"], 4), ci95_high=round(r["ci95_high"], 4),
                         loc=int(row["loc"]))
        public.append(entry)
    return public


def for_display(row: dict) -> dict:
    shown = dict(row)
    ok = row["ratio"] is not None
    shown["time"] = leaderboard.fmt_us(row["median_us"] * 1e3) if ok else "–"
    shown["ratio_text"] = leaderboard.fmt_interval(row) if ok else "–"
    shown["peak"] = f"{row['peak_mb']:.0f} MiB" if row["peak_mb"] is not None else "–"
    return shown


def reference_rows(rows: list[dict], lab: assignment.Lab) -> list[dict]:
    refs = leaderboard.reference_summary(rows)
    return [{"label": ref.label, "time": leaderboard.fmt_us(refs[ref.label]["median_ns"]),
             "ratio": f"{refs[ref.label]['ratio']:.2f}", "loc": plots.reference_loc(ref.implementation)}
            for ref in lab.references if ref.label in refs]


def graded_date(rows: list[dict]) -> str:
    """The day the class was graded (its last submission's start), UTC."""
    started = [r["started"] for r in rows if isinstance(r.get("started"), (int, float))]
    return time.strftime("%Y-%m-%d", time.gmtime(max(started) if started else time.time()))


def page(lab: assignment.Lab, rows: list[dict], refs: list[dict], date: str) -> str:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    rank_by = lab.rank_by.label
    columns = [{"title": title.format(rank_by=rank_by), "numeric": numeric} for title, numeric in COLUMNS]
    return env.get_template("publish.html.j2").render(
        title=lab.title or lab.name, lab=lab.name, rung=lab.rung, device=lab.device, rank_by=rank_by,
        date=date, columns=columns, rows=[for_display(r) for r in rows], references=refs, figure=FIGURE,
        csv=TABLE)


def figure(public: list[dict], rows: list[dict], lab: assignment.Lab, path: Path) -> Path:
    """The staff figure's drawing, fed pseudonyms and numbered nodes only (public is in
    leaderboard.ranked(rows)'s order)."""
    hosts = [str((row.get("node") or {}).get("hostname", "?")) for _, row in leaderboard.ranked(rows)]
    number = {name: f"node {i}" for i, name in enumerate(sorted(set(hosts)), 1)}
    shown = [{"student": p["pseudonym"], "status": "ok" if p["ratio"] is not None else "not ranked",
              "loc": p["loc"], "node": {"hostname": number[host]},
              "ratios": {lab.rank_by.label: {"ratio": p["ratio"], "ci95_low": p["ci95_low"],
                                             "ci95_high": p["ci95_high"]}}}
             for p, host in zip(public, hosts, strict=True)]
    return plots.speed_vs_loc(shown, lab, leaderboard.reference_summary(rows), path)


def write_csv(public: list[dict], path: Path) -> Path:
    """The public CSV, as every CSV of the labs: text cells through text.csv_value, numbers as numbers."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, PUBLIC_FIELDS)
        writer.writeheader()
        writer.writerows(text.csv_row(row) for row in public)
    return path


def checked_target(out: Path, public_dir: Path) -> Path:
    """PUBLIC_DIR, made; refused when it overlaps OUT or holds files this command did not write."""
    public_dir, staff = Path(public_dir).resolve(), Path(out).resolve()
    if public_dir == staff or staff in public_dir.parents or public_dir in staff.parents:
        raise HarnessError(f"{public_dir}: the public folder may not be inside the grading folder {staff} "
                           "(nor contain it): staff files and public files never mix")
    if public_dir.is_dir():
        others = sorted(p.name for p in public_dir.iterdir() if p.name not in (PAGE, FIGURE, TABLE))
        if others:
            raise HarnessError(f"{public_dir}: holds other files ({', '.join(others[:5])}); publish into an "
                               "empty folder, so that nothing else is published with the page")
    public_dir.mkdir(parents=True, exist_ok=True)
    return public_dir


def publish(out: Path, public_dir: Path, submissions: Path | None = None,
            report: Callable[[str], None] = print) -> list[Path]:
    """index.html, leaderboard.png and leaderboard.csv in PUBLIC_DIR; OUT/private/aliases.json."""
    out = Path(out)
    lab = store.graded_lab(out)
    target = checked_target(out, public_dir)
    rows, _ = store.checked_rows(out)
    aliases = alias.assign(out, sorted(r["student"] for r in rows), submissions)
    alias.write(out, aliases)
    alias.note_feedback(out, aliases)
    for student, chosen in sorted(aliases.items()):
        if chosen.refused:
            report(f"{text.clean(student)}: alias.txt refused ({chosen.refused}); shown as {chosen.alias}")
    public = public_rows(rows, aliases)
    paths = [write_csv(public, target / TABLE), figure(public, rows, lab, target / FIGURE)]
    shown = page(lab, public, reference_rows(rows, lab), graded_date(rows))
    (target / PAGE).write_text(shown, encoding="utf-8")
    report(f"published {len(public)} rows ({sum(a.chosen for a in aliases.values())} chosen aliases) "
           f"into {target}")
    return [target / PAGE, *paths]
