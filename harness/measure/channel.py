"""The parent's end of a worker's pipes: JSON lines and raw bytes, each read or write bounded by a
deadline, so that no worker (a study's, a lab's untrusted one) can stall its parent.

    Channel(reader, writer, tick=None, max_line=None)   the worker's stdout and stdin (Popen's pipes)
      .send(data, deadline)      write it all; the writer is made non-blocking
      .line(deadline) -> bytes   the next line, without its newline
      .message(deadline)         the next line as JSON
      .exact(n, deadline)        the next n bytes
    encode(message) -> bytes   one JSON line, as a worker reads a request; EXIT, the request to exit
    decode(line) -> the JSON value of one line, or Garbage
    Closed     the worker closed its end (exited, was killed), or its pipes were closed here
    TimedOut   the deadline passed; `reading` tells an unanswered request from unread input
    Garbage    a line past max_line, or one that is not JSON (a ValueError): `what`, `data`

Both wings turn these into their own harness.errors.Failure (the reasons differ: a lab worker
is hostile, a study's is not). A wait longer than TICK_S calls `tick` between looks (the lab
watches a worker's memory there).
"""

import json
import os
import select
import time
from collections.abc import Callable
from typing import IO, Any

TICK_S = 0.25  # how often a long wait calls tick
READ_BYTES = 1 << 20


class ChannelError(Exception):
    """The exchange with the worker could not go on."""


class Closed(ChannelError):
    """The worker's end is closed: it exited, was killed, or the pipes were closed here."""


class TimedOut(ChannelError):
    """The deadline passed: waiting for an answer (`reading`) or for the worker to read its input."""

    def __init__(self, reading: bool) -> None:
        super().__init__("reading" if reading else "writing")
        self.reading = reading


class Garbage(ChannelError, ValueError):
    """The worker wrote something that is not a message: `what` it was, the `data` (its start)."""

    def __init__(self, what: str, data: bytes) -> None:
        super().__init__(what)
        self.what = what
        self.data = data


def encode(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


# both workers' (harness.measure.inside.worker, harness.lab.box.worker) last request
EXIT = encode({"op": "exit"})


def decode(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        raise Garbage("something that is not JSON", line[:80]) from None


class Channel:
    def __init__(self, reader: IO[bytes], writer: IO[bytes], tick: Callable[[], None] | None = None,
                 max_line: int | None = None) -> None:
        self.reader = reader
        self.writer = writer
        self.tick = tick
        self.max_line = max_line
        self.buffer = b""
        os.set_blocking(writer.fileno(), False)  # send waits with a deadline instead

    def _wait_s(self, deadline: float, reading: bool) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimedOut(reading)
        return min(remaining, TICK_S) if self.tick is not None else remaining

    def _fill(self, deadline: float) -> None:
        """Read what the worker has written, waiting until the deadline for at least one byte."""
        while True:
            wait_s = self._wait_s(deadline, reading=True)
            try:
                fd = self.reader.fileno()
                ready, _, _ = select.select([fd], [], [], wait_s)
                chunk = os.read(fd, READ_BYTES) if ready else None
            except (OSError, ValueError):  # closed here meanwhile
                raise Closed from None
            if chunk == b"":
                raise Closed
            if chunk:
                self.buffer += chunk
                return
            if self.tick is not None:
                self.tick()

    def line(self, deadline: float) -> bytes:
        limit = self.max_line
        while b"\n" not in self.buffer:
            if limit is not None and len(self.buffer) > limit:
                raise Garbage(f"more than {limit} bytes without a newline", self.buffer[:80])
            self._fill(deadline)
        line, _, self.buffer = self.buffer.partition(b"\n")
        if limit is not None and len(line) > limit:
            raise Garbage(f"a line of {len(line)} bytes", line[:80])
        return line

    def message(self, deadline: float) -> Any:
        return decode(self.line(deadline))

    def exact(self, n: int, deadline: float) -> bytes:
        while len(self.buffer) < n:
            self._fill(deadline)
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def send(self, data: bytes, deadline: float) -> None:
        """Write without ever blocking past the deadline: a worker that stops reading (a patched
        protocol) cannot stall its parent on a full pipe."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.writer.fileno(), view):]
                continue
            except BlockingIOError:  # the pipe is full: wait until it drains, or the deadline
                pass
            except (OSError, ValueError):  # a broken pipe, or closed here
                raise Closed from None
            wait_s = self._wait_s(deadline, reading=False)
            try:
                select.select([], [self.writer], [], wait_s)
            except (OSError, ValueError):
                raise Closed from None
