"""OUT/feedback/<id>.md: what failed and why, or how far from the references, with that
submission's latency histogram (OUT/feedback/<id>.png) and its peak memory (the references' beside
it, the lab's peak_mb where it sets one); <id> is the student's safe id, every string from the
submission (its name, reason, skipped files, log tail) is escaped, and every absolute path is cut to
its last parts (harness.lab.text.unpathed: the server's folders are not the student's business).

    write(row, lab, place, ranked, out, score) -> paths; log_tail(out, student, lines),
    memory_lines(row, lab), student_words(text) (no /sys, /proc, cgroup or server folder in it),
    stage_lines(row, lab) (each stage's verdict, a lab with [stages]; points where they count),
    forward_lines(row) (a training row's wrong loss: where its forward pass departs),
    next_step(row, lab) (the advice by kind of failure: harness.lab.term.handout.advice),
    student_due(student, out),
    extension_lines(student, lab, out)
    points_lines(score, lab, due)   its points (harness.lab.term.marks.points, as `lab export` gives
                               them) and its late penalty against its own due date, said even when
                               there is none
"""

import importlib
import re
from datetime import datetime
from pathlib import Path

from harness.draw.style import fmt_ms
from harness.lab import text
from harness.lab.judge import store
from harness.lab.judge.phases import memory
from harness.lab.judge.rules import stages
from harness.lab.judge.rules.assignment import Lab
from harness.lab.term.handout import advice
from harness.lab.term.marks import points
from harness.lab.term.public import alias
from harness.machine.files import write_atomic

NEXT_STEP = {
    "too-slow": "Profile one predict call on a single image: Python loops over pixels or channels are "
                "the usual cause; express each layer as a few whole-array operations.",
    "timing-inconsistent": "The grader times every call twice, once inside your process and once from "
                           "outside; leave the timing alone (no patched clocks, no background work).",
    "wrong": "Run the kit's check (lab-kit-{lab}.zip, unzipped: from its folder `python -m lenet_lab check "
             "{module}`, or `lenet-lab check {module}` with the kit installed) and compare layer by layer "
             "with the kit's README.md: the flatten order (NHWC), padding ('same' for conv1) and the kernel "
             "layouts (HWIO) are the usual suspects. Timed calls use new images: answers must be computed, "
             "not remembered.",
    "crashed": "The log below shows where; run your predict on a batch of 1 and of 1000 images.",
    "out-of-memory": "Process the images in chunks, and free what you no longer need.",
    "over-memory": "Your answers and times are fine, but your worker held more memory than the lab allows: "
                   "keep one batch's intermediate arrays at a time (reuse buffers, free what you no longer "
                   "need), and load nothing you do not use.",
    "timeout": "Something did not finish within the lab's limits (a loop that never ends, a blocking read?).",
    "import-error": "Import your file in a fresh Python: `python -c 'import lenet'` from its folder; it must "
                    "hold exactly one harness.base.LeNet subclass.",
    "cancelled": "The grading job was cancelled before it finished; ask the course staff.",
    "ungraded": "Nothing you did: the grading of your submission was cut off (the grader was stopped, or a "
                "machine lost) or has not come to it yet. The course staff will grade it; no points are "
                "given or taken until then.",
    "refused": "Your hand-in could not be taken as it was (the reason above), so nothing of it was graded: "
               "hand in your files again as plain files (or one ordinary zip of your folder), and tell the "
               "course staff.",
}

SYSTEM_PATH = re.compile(r"(?<![\w./-])/(?:sys|proc)/\S*")  # the server's counters, not the student's
SYSTEM_WORD = re.compile(r"(?i)\bcgroups?(?: v[12])?\b")


def student_words(said: str) -> str:
    """The feedback's text without the server's own terms: its /sys and /proc paths and "cgroup"
    said as what they are to a student; every other absolute path cut (text.unpathed)."""
    return text.unpathed(SYSTEM_WORD.sub("process group", SYSTEM_PATH.sub("(the grader's counters)", said)))


def log_tail(out: Path, student: str, lines: int = 15) -> list[str]:
    path = store.result_dir(out, student) / "worker.log"
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def student_due(student: str, out: Path) -> datetime | None:
    """The student's own due date, where OUT/extensions.csv gives one (harness.lab.term.marks.extensions)."""
    from harness.lab.term.intake import collect
    from harness.lab.term.marks import extensions

    return extensions.due_of(extensions.graded(out), student, collect.graded_manifest(out).get(student))


def extension_lines(student: str, lab: Lab, out: Path) -> list[str]:
    """The extension, in words, where the student has one."""
    from harness.lab.term.marks import extensions

    due = student_due(student, out)
    return [text.cell(extensions.line(due, lab.grade.due), 300), ""] if due else []


def stage_lines(row: dict, lab: Lab) -> list[str]:
    """Each stage's verdict (a lab with [stages]), the first wrong one named first; nothing without.
    Their points are shown where they count (the gate failed); else said not to count."""
    verdicts = [v for v in row.get("stages") or [] if isinstance(v, dict)]
    if not verdicts:
        return []
    wrong = [v for v in verdicts if v.get("verdict") != "ok"]
    first = f"; the first that is not: **{text.cell(wrong[0].get('stage'), 30)}**." if wrong else "."
    how = lab.kind.stage_how
    counts = row.get("status") not in points.PASSED_GATE
    head = f"Stage by stage ({how}): {len(verdicts) - len(wrong)} of {len(verdicts)} right{first}" + \
        ("" if counts else " (Their points do not count: a submission that passes the gate gets the gate's.)")
    given = [v.get("points") if isinstance(v.get("points"), (int, float)) else None for v in verdicts]
    return [head, "", *[text.cell(stages.sentence(v, p, counts), 600)
                        for v, p in zip(verdicts, given, strict=True)], ""]


def forward_lines(row: dict) -> list[str]:
    """A training row whose loss was wrong: where its forward pass departs (its `stage`), or why not said."""
    verdicts = [v for v in row.get("forward") or [] if isinstance(v, dict)]
    said = advice.departure([{k: text.cell(v.get(k), 400) if k in ("reason", "layout") else v.get(k)
                                  for k in ("stage", "verdict", "reason", "layout")} for v in verdicts])
    return [said, ""] if said else []


def next_step(row: dict, lab: Lab) -> str | None:
    """Its lab kind's advice on its failure (a training lab's: harness.lab.term.handout.advice), else its
    status's (NEXT_STEP), else none."""
    said = importlib.import_module(lab.kind.handout).next_step(row, lab)  # a training lab's: advice
    if said:
        return said
    step = NEXT_STEP.get(row["status"])
    return step.format(lab=lab.name, module=lab.module) if step else None


def memory_lines(row: dict, lab: Lab) -> list[str]:
    """Its peak memory, as the grader read it from outside its worker, the references' beside it
    and the lab's limit; nothing for a row without one (not measured, or from before it was)."""
    peak = row.get("peak_mb")
    if not isinstance(peak, (int, float)):
        return []
    refs = ", ".join(f"{label} {mb:.0f} MiB" for label, mb in (row.get("reference_peak_mb") or {}).items()
                     if isinstance(mb, (int, float)))
    limit = lab.limits.peak_mb
    return [f"Peak memory: {peak:.0f} MiB over your worker's whole run (import, gate and timed calls)"
            + (f"; the lab's limit is {limit} MiB" if limit else "")
            + (f"; beside you: {refs}" if refs else "")
            + ". Read by the grader from outside your worker, never from what your code reports.", ""]


def points_lines(score: points.Score | None, lab: Lab, own_due: datetime | None = None) -> list[str]:
    """The points and the late penalty in words (against `own_due`, an extension, else the lab's due
    date); for a row with no points yet (not graded), that."""
    if score is None:
        return ["Points: none yet: your submission has not been graded (no points given or taken until "
                "it is).", ""]
    grade = lab.grade
    parts = f"{score.gate:g} for the " + ("stages you got right" if score.staged else "gate") + \
        (f" + {score.speed:g} for speed" if score.speed else "")
    lines = [f"Points: **{score.total:g} of {score.most:g}** ({parts}" +
             (f", x {score.factor:.2f} for lateness" if score.late_days and score.factor else "") + ")."]
    when = own_due or grade.due
    due = f"the due date, {when.isoformat()}" if when else "the due date"
    if score.late_days and score.factor == 0:
        lines.append(f"Late penalty: handed in {score.late_days} started day(s) after {due}, past the "
                     f"{grade.late_max_days:g} days that still count: no points.")
    elif score.late_days:
        lines.append(f"Late penalty: handed in {score.late_days} started day(s) after {due}: "
                     f"{grade.late_per_day:g}% off a day, so your points are multiplied by "
                     f"{score.factor:.2f}.")
    elif when is not None:
        lines.append(f"Late penalty: none (handed in by {due}).")
    else:
        lines.append("Late penalty: none (this lab sets no due date).")
    return lines + [""]


def write(row: dict, lab: Lab, place: int | None, ranked: int, out: Path,
          score: points.Score | None = None, with_points: bool = True, histogram: bool = True) -> list[Path]:
    """OUT/feedback/<id>.md (and its histogram); `with_points`: its points_lines, and `histogram`
    (not in a student's own `lab check`, which prints the text alone: no points, no figure)."""
    folder = Path(out) / "feedback"
    folder.mkdir(parents=True, exist_ok=True)
    student = row["student"]
    node = row.get("node") or {}
    name = text.safe_id(student)  # the files' names; the student's own name only in the text, escaped
    lines = [f"# {text.cell(student, 300)}: lab {lab.name}", "",
             f"Status: **{text.cell(row['status'], 30)}**" +
             (f" — rank {place} of {ranked}" if place else ""), ""]
    lines += extension_lines(student, lab, out)
    lines += points_lines(score, lab, student_due(student, out)) if with_points else []
    if row.get("reason"):
        lines += [f"What happened: {text.cell(row['reason'], 1000)}", ""]
    if row.get("skipped_files"):
        lines += ["Left out of your folder's copy (only regular files inside it are graded):", "",
                  *[f"- {text.cell(entry)}" for entry in row["skipped_files"][:20]], ""]
    gate = row.get("gate")
    if gate:
        lines += [lab.kind.gate_sentence(gate, lab.gate), ""]
    lines += forward_lines(row)
    lines += stage_lines(row, lab)
    lines += memory_lines(row, lab)
    if memory.timed(row):  # ok, or over-memory: timed in full before its peak was gated
        median = fmt_ms(row["median_per_image_ns"] / 1e6)
        lines += [f"Median time per image: {median} on {node.get('hostname')} "
                  f"({node.get('gpu') or node.get('cpu')}), over {len(row['rounds_used'])} rounds.", ""]
        for label, r in row["ratios"].items():
            lines.append(f"- × {label}: {r['ratio']:.2f} "
                         f"[95% interval {r['ci95_low']:.2f}–{r['ci95_high']:.2f}]"
                         f" ({'faster' if r['ratio'] < 1 else 'slower'} than {label}; "
                         f"{label} took {fmt_ms(row['reference_medians_ns'][label] / 1e6)} per call "
                         "beside you)")
        lines += ["", f"Lines of code: {row['loc']} in {row['files']} file(s)."]
    step = next_step(row, lab)
    if step:
        lines += [""] if memory.timed(row) else []
        lines += [f"Next step: {step}"]
    for flagged in row.get("inconsistent_rounds") or []:
        lines.append(f"- round {flagged['round']} dropped: {text.cell(flagged['reason'])}")
    picture = None
    if histogram:
        from harness.lab.term.marks import plots  # matplotlib: only where a figure is drawn

        picture = plots.histogram(row, folder / f"{name}.png")
    elif memory.timed(row):
        lines += ["", "(histogram: left out in a check)"]
    if picture:
        lines += ["", f"![time per call]({picture.name})"]
    tail = log_tail(out, student) if row["status"] in ("crashed", "import-error", "out-of-memory") else []
    if tail:
        lines += ["", "The end of your worker's log:", "", "```", *text.block(tail), "```"]
    lines += alias.refusal_lines(out, student)  # `lab publish` refused its alias.txt
    path = folder / f"{name}.md"
    write_atomic(path, student_words("\n".join(lines) + "\n"))  # no folder or term of the server's in it
    return [path] + ([picture] if picture else [])
