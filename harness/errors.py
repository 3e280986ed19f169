"""User-facing errors. The CLI turns a HarnessError into one `ERROR: ...` line and exit 2."""


class HarnessError(Exception):
    """Bad input or an unusable environment, explained for a person (no traceback)."""


class Unavailable(HarnessError):
    """An implementation cannot run here (no library, no GPU); the message is the reason."""
