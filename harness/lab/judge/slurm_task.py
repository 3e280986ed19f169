"""What runs on the cluster for `lab grade --slurm` (harness.lab.judge.slurm submits it): each task,
and the merge job after them.

    task(out, index, submissions, ...)   one task's students (OUT/slurm/round.json), each claimed
                                         (harness.lab.judge.student_lock), those without a finished row
                                         graded in one grader, the claims released
    merge(out, submissions) -> rows      a row for each student whose task left none, from the
                                         task's state (squeue, then scontrol: no accounting database)
    round_plan, where_task, task_states, scontrol_state, missing_row
"""

import re
from collections.abc import Callable
from pathlib import Path

from harness import DEFAULT_WEIGHTS
from harness.errors import HarnessError
from harness.lab.judge import grade, store, student_lock
from harness.machine import procenv
from harness.machine.slurmctl import run


def round_plan(out: Path) -> dict:
    data = store.read_json(Path(out) / "slurm" / "round.json")
    if not isinstance(data, dict) or not isinstance(data.get("students"), list) \
            or not isinstance(data.get("per_task"), int) or not isinstance(data.get("arrays"), list):
        raise HarnessError(f"{out}/slurm/round.json: missing or not a round of lab grade --slurm "
                           "(expected students, per_task, arrays)")
    return data


def task(out: Path, index: int, submissions: Path, weights: str | Path = DEFAULT_WEIGHTS,
         no_sandbox: bool = False, report: Callable[[str], None] = print,
         lock_timeout: float | None = None) -> int:
    """One task: its students (round.json), each claimed (two graders never grade one), those still
    without a finished row graded in one grader, the claims released. 0 (its rows are written).
    `lock_timeout`: seconds to wait for the node's GPU lock, then time anyway (rows flagged contended)."""
    out = Path(out)
    lab = store.graded_lab(out)
    plan = round_plan(out)
    mine = plan["students"][index * plan["per_task"]:(index + 1) * plan["per_task"]]
    if not mine:
        raise HarnessError(f"lab task --index {index}: no such task ({len(plan['students'])} students, "
                           f"{plan['per_task']} a task)")
    owner = student_lock.owner_here()
    claimed = []
    for student in mine:
        if store.graded_row(out, student) is not None:
            report(f"{student}: already graded; skipped")
        elif student_lock.take(out, student, owner):
            claimed.append(student)
        else:
            report(f"{student}: claimed by {student_lock.holder(out, student)}, "
                   "a grader still running; skipped")
    if not claimed:
        return 0
    procenv.apply(procenv.settings(lab.measure.threads, 1, lab.device))  # what its children inherit
    try:
        grade.grade_all(lab, submissions, out, resume=True, only=claimed, weights=weights, report=report,
                        no_sandbox=no_sandbox, lock_timeout=lock_timeout)
        return 0
    finally:
        for student in claimed:
            student_lock.release(out, student, owner)
        store.hand_over(out)


def task_states(job: str) -> dict[int, dict]:
    """{task index: {"state", "reason", "exit_code"}} of an array job; absent once purged."""
    found = {}
    done = run("squeue", "-h", "-t", "all", "-r", "-j", job, "-o", "%i|%T|%r")
    for line in (done.stdout.splitlines() if done and done.returncode == 0 else []):
        ident, state, reason = (line.split("|") + ["", ""])[:3]
        if "_" in ident and ident.split("_")[1].isdigit():
            found[int(ident.split("_")[1])] = {"state": state, "reason": reason, "exit_code": None}
    return found


def scontrol_state(job: str, index: int) -> dict | None:
    done = run("scontrol", "-o", "show", "job", f"{job}_{index}")
    if not done or done.returncode != 0:
        return None
    fields = dict(re.findall(r"(\w+)=(\S*)", done.stdout))
    return {"state": fields.get("JobState", "UNKNOWN"), "reason": fields.get("Reason", ""),
            "exit_code": fields.get("ExitCode"), "restarts": fields.get("Restarts")}


def missing_row(student: str, state: dict | None, started: dict | None) -> dict:
    """The row of a submission whose task left none: cancelled, or crashed with the reason."""
    where = f" on {started['host']}" if started else ""
    if state is None:
        return {"status": "crashed", "reason": "no result, and Slurm no longer knows the task (purged)"}
    name = state["state"]
    detail = f"Slurm state {name}"
    if state.get("exit_code"):
        detail += f", exit code {state['exit_code']}"
    if state.get("reason") and state["reason"] != "None":
        detail += f", reason {state['reason']}"
    if name == "CANCELLED" or name.startswith("CANCELLED"):
        when = "while grading" + where if started else "before it started"
        return {"status": "cancelled", "reason": f"the Slurm task was cancelled {when} ({detail})"}
    if name == "TIMEOUT":
        return {"status": "timeout", "reason": f"the Slurm task ran past its --time{where} ({detail})"}
    if name == "OUT_OF_MEMORY":
        return {"status": "out-of-memory", "reason": f"the Slurm task went past its --mem{where} ({detail})"}
    if not started:
        return {"status": "crashed", "reason": f"the Slurm task never started grading ({detail})"}
    return {"status": "crashed", "reason": f"the Slurm task ended without a result{where} ({detail}; a task "
                                           "killed past --mem shows as FAILED on Slurm without accounting)"}


def where_task(plan: dict, position: int) -> tuple[str, int] | None:
    """(array job, index in it) of the task that graded the `position`-th student of the round."""
    number = position // plan["per_task"]
    for array in plan["arrays"]:
        if array["first"] <= number < array["first"] + array["count"]:
            return str(array["job"]), number - array["first"]
    return None


def merge(out: Path, submissions: Path, job: str | None = None,
          report: Callable[[str], None] = print) -> list[dict]:
    """Rows for every student of the round whose task left none (`lab merge` then builds the
    leaderboard: harness.lab.term.commands.lab_merge). `job`: ignored (the round names its arrays)."""
    out = Path(out)
    lab = store.graded_lab(out)
    plan = round_plan(out)
    states = {str(a["job"]): task_states(str(a["job"])) for a in plan["arrays"]}
    made = []
    for position, student in enumerate(plan["students"]):
        if store.read_row(out, student) is not None:
            continue
        found = where_task(plan, position)
        state = None
        if found is not None:
            array, index = found
            state = states[array].get(index) or scontrol_state(array, index)
        row = {"lab": lab.name, "student": student, "rank_by": lab.rank_by.label,
               "references": [r.label for r in lab.references], "device": lab.device,
               "node": {"hostname": (store.started(out, student) or {}).get("host", "-")},
               "from_merge": True,
               "slurm": {"job": found[0] if found else None, "task": found[1] if found else None,
                         **(state or {})},
               **missing_row(student, state, store.started(out, student))}
        store.write_row(out, row)
        report(f"{student}: {row['status']}: {row['reason']}")
        made.append(row)
    return made

