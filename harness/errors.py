"""Errors. The CLI turns a HarnessError into one `ERROR: ...` line and exit 2; a Failure is one
participant's outcome (a row's status), never the end of a run.

    HarnessError  bad input or an unusable environment, for a person
    Unavailable   an implementation cannot run here
    Failure       a worker (a lab submission or reference, a study's cell) failed: status, reason
"""


class HarnessError(Exception):
    """Bad input or an unusable environment, explained for a person (no traceback)."""


class Unavailable(HarnessError):
    """An implementation cannot run here (no library, no GPU); the message is the reason."""


def exit_code(exc: HarnessError) -> int:
    """A command's exit code for an error it stops on: 3 where something asked for cannot run here
    (Unavailable), 2 for bad input (README.md, "Exit codes")."""
    return 3 if isinstance(exc, Unavailable) else 2


class Failure(Exception):
    """A participant's outcome other than ok: `status` is the row's status (crashed, timeout,
    wrong, ...), `reason` its words, `extra` the row fields measured before it failed."""

    def __init__(self, status: str, reason: str, extra: dict | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.extra = dict(extra or {})
