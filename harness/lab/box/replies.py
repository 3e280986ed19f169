"""What the grader accepts from a lab worker (harness.lab.box.worker's protocol), trusting no byte:
a reply is one JSON object of the expected shape, a call time is in range; anything else
(garbage, a forged or out-of-order reply, a line too long, a time out of range) is a Failure,
`crashed` with the reason, and ends the worker.

    WORKER_STATUSES               the statuses a worker may report of itself
    parse(line) -> dict           a reply object: {"ok": bool, ...}
    checked(reply, expect)        an ok reply of `expect`'s shape, or the Failure it reports
    call_time(head) -> int        one timed call's 8-byte time, in range
    garbage(what, data)           the Failure for anything that is not a reply
"""

import json

from harness.errors import Failure
from harness.measure import channel

MAX_LINE = 64 << 10  # a reply line longer than this is not a reply
MAX_TIME_NS = 10 ** 12  # a reported call time beyond 1000 s is garbage
FAILED_CALL = -1  # the time field of a call that failed: its error line follows
WORKER_STATUSES = ("import-error", "crashed", "wrong", "out-of-memory")  # a leaderboard status each


def garbage(what: str, data: bytes) -> Failure:
    return Failure("crashed", f"the worker wrote {what}, not a reply: {data[:80]!r}")


def parse(line: bytes) -> dict:
    try:
        reply = channel.decode(line)
    except channel.Garbage as exc:
        raise garbage(exc.what, exc.data) from None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise garbage("a JSON value that is not a reply object", line)
    return reply


def checked(reply: dict, expect: dict) -> dict:
    """An error reply becomes its Failure; an ok reply must carry `expect`'s keys with values of
    those types (or those exact values): anything else is a forgery or garbage."""
    if not reply["ok"]:
        status, reason = reply.get("status"), reply.get("reason")
        raise Failure(status if status in WORKER_STATUSES else "crashed",
                      reason[:500] if isinstance(reason, str) and reason else "no reason given")
    for key, want in expect.items():
        value = reply.get(key)
        ok = (isinstance(value, want) and not isinstance(value, bool)) if isinstance(want, type) \
            else value == want
        if not ok:
            raise garbage(f"a reply whose {key!r} is {value!r:.40}", json.dumps(reply).encode())
    return reply


def call_time(head: bytes) -> int:
    """A timed call's own time (int64 ns, little-endian); FAILED_CALL is left to the caller."""
    ns = int.from_bytes(head, "little", signed=True)
    if ns != FAILED_CALL and not 0 <= ns < MAX_TIME_NS:
        raise garbage(f"a call time of {ns} ns", head)
    return ns
