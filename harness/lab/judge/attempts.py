"""Each submission's attempts at grading, who ended each, and which rows are finished.

Grading a submission is an attempt, begun in OUT/results/<id>/started.json (its history, one entry
an attempt) and ended in one of four ways:

    a row          the grader wrote the submission's row: finished (graded, refused, or failed by its
                   own doing: its crash, memory, hang, wrong answers); {"by": "row", "how": status}
    the grader     the grader was told to stop: a signal of GRADER_SIGNALS (preemption's or scancel's
                   SIGTERM, Ctrl-C's SIGINT, a closed terminal's SIGHUP, Slurm's --signal USR1);
                   `ended` = {"by": "grader", "how": "SIGTERM"}; never the submission's doing
    the submission  it died so that no row could be written: {"by": "submission", "how": ...}; the
                   only end that counts against it (MAX_OWN_DEATHS of them: `crashed`)
    nothing        no end recorded: the node was lost, or the grader killed outright (SIGKILL, power);
                   never counted against the submission

Retries are capped: after MAX_ATTEMPTS attempts without a row the submission gets an `ungraded` row
with its history (named on the leaderboard and by `lab export`, never 0 points); `--only` (and `lab
regrade --only`) starts a graded or ungraded submission afresh.

A row is finished unless it is `ungraded`, `tampered` (changed after the grader wrote it) or the
Slurm merge's placeholder for a task that left none (`from_merge`): what `lab export` refuses
while any collected submission has one.

For a requeue path (Slurm): `end(out, student, BY_GRADER, "requeued")` for an attempt the scheduler
took away, then grade again with --resume; `verdict(history(out, student))` says whether another
try is allowed, and `finished(row)` whether a student still needs one.

    GRADER_SIGNALS, Interrupted, interruptible(), pending(), stopping(), settle(row)   the grader's signals
    begin(out, student, fresh, **info) -> attempt, end(out, student, by, how), history(out, student)
    verdict(history) -> None | "ungraded" | "crashed", cut_off_row(lab, student, history, status)
    finished(row), class_rows(out, collected) -> (rows, notes), never_graded_row(lab, student, history),
    unfinished(rows) -> {student: why}, ended_words(attempt) -> how one attempt ended, in words
"""

import signal
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from harness.lab import text
from harness.lab.judge import store
from harness.lab.judge.phases.prepare import node_info
from harness.lab.judge.rules.assignment import Lab

GRADER_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
MAX_ATTEMPTS = 3  # attempts cut off without a row before a submission is `ungraded`
MAX_OWN_DEATHS = 2  # attempts the submission's own death ended before it is `crashed`
SETTLE_S = 2.0  # a worker killed by one of GRADER_SIGNALS: how long to wait for the grader's own
BY_GRADER, BY_SUBMISSION, BY_ROW = "grader", "submission", "row"
UNFINISHED = ("ungraded", "tampered")

_pending: list[int] = []  # the grader signals received inside interruptible(), in order


class Interrupted(KeyboardInterrupt):
    """The grader received one of GRADER_SIGNALS: the attempt in progress is the grader's, not the
    submission's (a KeyboardInterrupt: the CLI ends with exit 130)."""

    def __init__(self, signum: int) -> None:
        self.how = signal.Signals(signum).name
        super().__init__(f"the grader received {self.how}")


def _raise(signum: int, frame: FrameType | None) -> None:
    _pending.append(signum)
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside: each of GRADER_SIGNALS raises Interrupted (and is remembered: pending()); the handlers
    before are put back after. Signals reach only the main thread: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {number: signal.signal(number, _raise) for number in GRADER_SIGNALS}
    _pending.clear()
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
        _pending.clear()


def stopping() -> bool:
    """Whether a grader signal came: the grader is stopping."""
    return bool(_pending)


def pending() -> None:
    """Raise Interrupted again when a grader signal came (its exception swallowed on the way)."""
    if _pending:
        raise Interrupted(_pending[0])


def settle(row: dict) -> None:
    """A worker killed by one of GRADER_SIGNALS may have been killed by the signal meant for the
    grader (scancel signals every process of a job): wait SETTLE_S for the grader's own, which then
    ends the attempt (Interrupted), before its row says `crashed`."""
    names = {number.name for number in GRADER_SIGNALS}
    if row.get("status") == "crashed" and row.get("killed_by") in names:
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and not _pending:
            time.sleep(0.05)
    pending()


def history(out: Path, student: str) -> list[dict]:
    """The student's attempts, oldest first: {attempt, host, time, ended (None: no end recorded)}."""
    data = store.started(out, student)
    if data is None:
        return []
    past = data.get("history")
    if isinstance(past, list) and all(isinstance(a, dict) for a in past):
        return past
    # started.json from before the history: its attempt count, none of them with a recorded end
    return [{"attempt": n, "host": data.get("host"), "time": data.get("time"), "ended": None}
            for n in range(1, int(data.get("attempt", 1)) + 1)]


def begin(out: Path, student: str, fresh: bool, **info: object) -> int:
    """Record a new attempt at grading `student` (after its history unless `fresh`); its number."""
    past = [] if fresh else history(out, student)
    attempt = {"attempt": len(past) + 1, "host": socket.gethostname(), "time": time.time(), **info,
               "ended": None}
    store.write_started(out, student, {**attempt, "student": student, "history": [*past, attempt]})
    return len(past) + 1


def end(out: Path, student: str, by: str, how: str) -> None:
    """Record who ended the student's open attempt (BY_GRADER, BY_SUBMISSION, or BY_ROW: its row was
    written, `how` its status) and how."""
    if by not in (BY_GRADER, BY_SUBMISSION, BY_ROW):
        raise ValueError(f"by: expected {BY_GRADER!r}, {BY_SUBMISSION!r} or {BY_ROW!r}, found {by!r}")
    past = history(out, student)
    if not past or past[-1].get("ended") is not None:
        return  # no open attempt: nothing of this grader's to end
    past[-1] = {**past[-1], "ended": {"by": by, "how": how, "time": time.time()}}
    store.write_started(out, student, {**past[-1], "student": student, "history": past})


def verdict(past: list[dict]) -> str | None:
    """None: grade it (again); "crashed": its own death ended MAX_OWN_DEATHS attempts; "ungraded":
    MAX_ATTEMPTS attempts were cut off (no row), none of them (or too few) by its own doing. An attempt
    that ended in a row (since deleted) is no cut-off one."""
    cut = [a for a in past if (a.get("ended") or {}).get("by") != BY_ROW]
    own = [a for a in cut if (a.get("ended") or {}).get("by") == BY_SUBMISSION]
    if len(own) >= MAX_OWN_DEATHS:
        return "crashed"
    return "ungraded" if len(cut) >= MAX_ATTEMPTS else None


def ended_words(attempt: dict) -> str:
    """How one attempt ended, in words."""
    where = f"attempt {attempt.get('attempt', '?')} on {text.clean(attempt.get('host'), 80)}"
    ended = attempt.get("ended")
    if not isinstance(ended, dict):
        return f"{where}: no end recorded (the node lost, or the grader killed outright)"
    how = text.clean(ended.get("how"), 120)
    if ended.get("by") == BY_GRADER:
        return f"{where}: the grader was stopped ({how})"
    if ended.get("by") == BY_ROW:
        return f"{where}: graded ({how}; that row since removed)"
    return f"{where}: the submission died ({how})"


def cut_off_row(lab: Lab, student: str, past: list[dict], status: str) -> dict:
    """The row of a submission that reached a cap (verdict), with its history."""
    story = "; ".join(ended_words(a) for a in past)
    cut = len([a for a in past if (a.get("ended") or {}).get("by") != BY_ROW])
    if status == "crashed":
        reason = f"its own death ended attempts at grading it ({story}); not graded again"
    else:
        reason = (f"not graded: {cut} attempts at grading it were cut off before a row, none by "
                  f"the submission's doing ({story}); grade it again with lab regrade OUT --only NAME")
    return {"lab": lab.name, "student": student, "status": status, "rank_by": lab.rank_by.label,
            "references": [r.label for r in lab.references], "device": lab.device, "node": node_info("cpu"),
            "reason": text.clean(reason, 1000), "attempts": past, "started": time.time()}


def finished(row: dict) -> bool:
    """A row that is the submission's grade: not ungraded, tampered or the Slurm merge's placeholder."""
    return not row.get("from_merge") and row.get("status") not in UNFINISHED


def class_rows(out: Path, collected: Iterable[str] = ()) -> tuple[list[dict], list[str]]:
    """(one row per student of the class, what was set aside): store.checked_rows, where each listed
    (or `collected`) student without a row gets an `ungraded` one, and the Slurm merge's placeholder
    for a task that left no row is shown as the `ungraded` row it is (its Slurm state in the reason)."""
    rows, notes = store.checked_rows(out)
    shown = []
    for row in rows:
        if row.get("from_merge"):
            row = {**row, "status": "ungraded", "slurm_status": row.get("status"),
                   "reason": text.clean(f"not graded: the grading left no row ({row.get('reason')})", 1000)}
        shown.append(row)
    have = {row["student"] for row in shown}
    missing = sorted({*(store.listed_students(out) or []), *collected} - have)
    if missing:
        lab = store.graded_lab(out)
        shown += [never_graded_row(lab, student, history(out, student)) for student in missing]
    return shown, notes


def never_graded_row(lab: Lab, student: str, past: list[dict]) -> dict:
    """The `ungraded` row shown for a student of the class who has no row at all."""
    why = ("its grading never started (stopped before it came to this submission)" if not past else
           "its grading was cut off: " + "; ".join(ended_words(a) for a in past))
    return {"lab": lab.name, "student": student, "status": "ungraded", "rank_by": lab.rank_by.label,
            "references": [r.label for r in lab.references], "device": lab.device, "attempts": past,
            "reason": text.clean(f"not graded: no row; {why}; grade it with lab regrade OUT", 1000)}


def unfinished(rows: list[dict]) -> dict[str, str]:
    """{student: why} of the rows that are no grade yet (finished() is False)."""
    return {row["student"]: str(row.get("reason") or row["status"]) for row in rows if not finished(row)}
