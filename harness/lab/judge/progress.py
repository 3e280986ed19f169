"""Where a grading stands (`lab status OUT`), read while it runs: each student of the class graded (its
status), no grade (the Slurm merge's row for a task that left none, a tampered row), started with no
row yet (and the grader that holds its claim), or not started; and for a Slurm round, its tasks' and
merge job's states, a task Slurm holds named with the command that releases it. It only reads.

    where(out) -> {student: (state, detail)}   lines(out) -> the words `lab status` prints
    slurm_lines(out) -> the Slurm round's lines  merge_job(out) -> the newest round's merge job id
"""

from collections import Counter
from pathlib import Path

from harness.errors import HarnessError
from harness.lab import text
from harness.lab.judge import attempts, slurm_task, store, student_lock
from harness.machine.slurmctl import held_words, is_held, run

GRADED, NO_GRADE, STARTED, WAITING = "graded", "no grade", "started, no row yet", "not started"


def where(out: Path) -> dict[str, tuple[str, str]]:
    """{student: (state, detail)}: GRADED (detail: the row's status); NO_GRADE, a row that is no grade
    (the Slurm merge's placeholder, a tampered row: its reason); STARTED (who holds its claim, or '');
    WAITING. Rows as the leaderboard reads them (attempts.class_rows: MACs checked)."""
    names = store.listed_students(out)
    if names is None:
        raise HarnessError(f"{out}: no grading here ({store.STUDENTS} missing); run "
                           "python -m harness lab grade LAB --submissions DIR --out OUT first")
    if not (Path(out) / store.RESULTS).is_dir():  # submitted, and no task has started yet
        return {student: (WAITING, "") for student in names}
    rows, _ = attempts.class_rows(out)
    found = {}
    for row in rows:
        student = row["student"]
        if attempts.finished(row):
            found[student] = (GRADED, text.clean(row.get("status", "?"), 40))
        elif store.read_row(out, student) is not None:
            found[student] = (NO_GRADE, text.clean(row.get("reason") or row["status"], 160))
        elif store.started(out, student) is not None:
            holder = student_lock.holder(out, student)
            found[student] = (STARTED, f"claimed by {text.clean(holder, 40)}" if holder else "")
        else:
            found[student] = (WAITING, "")
    return found


def lines(out: Path) -> list[str]:
    """What `lab status` prints: the class's counts, the students not graded by name (10 at most a
    state), and the Slurm round's jobs where there is one."""
    out = Path(out)
    found = where(out)
    said = [f"{out}: {len(found)} students"]
    for state in (GRADED, NO_GRADE, STARTED, WAITING):
        students = sorted(s for s, (st, _) in found.items() if st == state)
        if state == GRADED:
            counts = Counter(found[s][1] for s in students)
            detail = ", ".join(f"{status} {n}" for status, n in sorted(counts.items()))
        else:
            named = [text.clean(s, 40) + (f" ({found[s][1]})" if found[s][1] else "")
                     for s in students[:10]]
            detail = ", ".join(named) + (f", and {len(students) - 10} more" if len(students) > 10 else "")
        said.append(f"  {state}: {len(students)}" + (f" ({detail})" if detail else ""))
    if (out / "slurm" / "round.json").is_file():
        said += slurm_lines(out)
    return said


def slurm_lines(out: Path) -> list[str]:
    """The newest round's arrays (each task's state, from squeue) and merge job, and what Slurm holds."""
    plan = slurm_task.round_plan(out)
    jobs = [str(array.get("job")) if isinstance(array, dict) else "?" for array in plan["arrays"]]
    if not all(job.isdigit() for job in jobs):
        raise HarnessError(f"{out}/slurm/round.json: arrays: expected Slurm job ids (digits), found {jobs}")
    said, held = [], {}
    for job in jobs:
        states = slurm_task.task_states(job)
        counts = Counter(s["state"] for s in states.values())
        summary = ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))
        said.append(f"Slurm array {job}: {summary or 'no longer known to Slurm'}")
        held.update({f"{job}_{index}": s["reason"] for index, s in states.items()
                     if is_held(s["state"], s["reason"])})
    merge = merge_job(out)
    if merge:
        done = run("squeue", "-h", "-t", "all", "-j", merge, "-o", "%T|%r")
        state, _, reason = (done.stdout.strip() if done and done.returncode == 0 else "").partition("|")
        said.append(f"Slurm merge job {merge}: {state or 'no longer known to Slurm'}"
                    + (f" ({reason})" if reason not in ("", "None") else ""))
    words = held_words(held)  # of the states just read
    return said + ([words] if words else [])


def merge_job(out: Path) -> str | None:
    """The newest round's merge job (the last `merge` line of OUT/slurm/jobs.txt)."""
    listed = Path(out) / "slurm" / "jobs.txt"
    found = [parts[1] for parts in (line.split() for line in listed.read_text().splitlines())
             if len(parts) == 2 and parts[0] == "merge" and parts[1].isdigit()] if listed.is_file() else []
    return found[-1] if found else None
