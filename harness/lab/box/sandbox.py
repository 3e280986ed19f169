"""The grader's side of a lab worker (harness.lab.box.worker): a box (harness.lab.box.proc.lifecycle) asked
over a channel (harness.measure.channel) with deadlines; images streamed in lockstep with the grader's
own clocks around every call; every reply checked (harness.lab.box.replies).

    Sandbox(label, env, scratch, isolation, slot, limits, device, space, packages, weights)
      .box                          the process, its limits, its CPU counter
      .start(), .stop(ask)
      .request(message, timeout, what, expect) -> dict   one JSON request and its checked reply
      .load(message, timeout) -> dict                    import and construct
      .gate(images_u8, batch, timeout) -> (N, 10)        the worker's probabilities
      .stream(images, timeout) -> Chunk                  one chunk of timed calls
      .stage(name, x, count, timeout) -> (why, output)   one stage on the oracle's input to it
      .call(function, data, arrays, counts, timeout) -> Called   a kind's own work (the worker's call op)
      .train(images, labels, timeout) -> Chunk           (training) K timed SGD steps, their losses
      .weights(count, timeout) -> (count,) float32       (training) the trainer's weights, flat
      .busy_s                       how long the grader has waited on it, all requests together
    Chunk                           one chunk's measurements, per call
    Called                          a call op's answer: why not answered, its result, its answers, and the
                                    grader's clocks around it
    unanswered(reply, op), checked_shape(shape, count, op)   a stage or call reply, read

Every wait is bounded: by the request's own timeout, and by the box's wall_s over all requests.
Any failure in an exchange (a timeout, garbage, a death, an error reply) ends the worker.
"""

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import Failure
from harness.lab.box import replies
from harness.lab.box.proc.lifecycle import Box
from harness.lab.box.proc.limits import Limits
from harness.lab.box.walls.disk import Space
from harness.lab.box.walls.isolation import Isolation
from harness.measure import channel
from harness.measure.channel import Channel

CLASSES = 10


def unanswered(reply: dict, op: str) -> str | None:
    """Why a stage or call op was not answered (the worker's words, cut to 300 characters), or
    None where it was; a reply that does not say is garbage."""
    if not isinstance(reply.get("answered"), bool):
        raise replies.garbage(f"a {op} reply without answered", b"")
    if reply["answered"]:
        return None
    why = reply.get("why")
    return why[:300] if isinstance(why, str) and why else "no reason given"


def checked_shape(shape: object, count: int, op: str) -> list[int]:
    """A shape the worker chose for `count` values: a list of positive ints whose product is count;
    anything else is garbage."""
    if not isinstance(shape, list) or not all(isinstance(d, int) and 0 < d <= count for d in shape) \
            or int(np.prod(shape)) != count:
        raise replies.garbage(f"a {op}'s shape {shape!r:.40}", b"")
    return shape


@dataclass(frozen=True)
class Chunk:
    """One chunk of K timed calls of one participant: per call the worker's own time, the
    grader's round trip (images sent -> answer read) and the worker's CPU time over that trip
    (its cgroup: every thread and process), in ns; the answers, (K, B, 10) float32."""

    times_ns: list[int]
    trips_ns: list[int]
    cpu_ns: list[int]
    outputs: np.ndarray


@dataclass(frozen=True)
class Called:
    """One `call` op: why it was not answered (None: it was), the function's result (a dict, as the worker
    sent it: the caller checks its fields), its answers (None where a count is 0), the grader's round
    trip around it and the worker's CPU time over that trip, in ns."""

    why: str | None
    result: dict
    answers: list[np.ndarray | None]
    trip_ns: int
    cpu_ns: int


class Sandbox:
    def __init__(self, label: str, env: dict, scratch: Path, isolation: Isolation, slot: int = 0,
                 limits: Limits | None = None, device: str = "cpu", space: Space | None = None,
                 packages: Iterable[str] = (), weights: str = "") -> None:
        self.box = Box(label, env, scratch, isolation, slot, limits, device, space, packages, weights)
        self.channel: Channel | None = None
        self.busy_s = 0.0

    def start(self) -> None:
        proc = self.box.start()
        if proc.stdout is None or proc.stdin is None:
            raise ValueError(f"{self.box.label}: the worker's stdin and stdout must be pipes")
        self.channel = Channel(proc.stdout, proc.stdin, tick=self.box.watch_memory, max_line=replies.MAX_LINE)

    def stop(self, ask: bool = True) -> None:
        self.box.stop(ask)

    def _deadline(self, timeout: float, what: str) -> tuple[float, str]:
        wall = self.box.limits.wall_s
        if wall is not None and wall - self.busy_s < timeout:
            return time.monotonic() + max(0.0, wall - self.busy_s), f"wall-time limit of {wall:g} s"
        return time.monotonic() + timeout, f"{what} limit of {timeout:g} s"

    @contextmanager
    def _exchange(self, timeout: float, what: str) -> Iterator[tuple[Channel, float]]:
        """(the channel, the deadline) of one exchange; its time counts in busy_s, and any failure
        in it ends the worker, as the Failure it is."""
        started = time.monotonic()
        deadline, why = self._deadline(timeout, what)
        if self.channel is None:
            raise ValueError(f"{self.box.label}: the worker was not started")
        try:
            yield self.channel, deadline
        except (channel.ChannelError, Failure) as exc:
            failure = exc if isinstance(exc, Failure) else self._failure(exc, why)
            self.box.kill()
            raise failure from None
        finally:
            self.busy_s += time.monotonic() - started
            self.box.sample_memory()  # without a cgroup: its peak, read after every exchange

    def _failure(self, exc: channel.ChannelError, why: str) -> Failure:
        if isinstance(exc, channel.TimedOut) and exc.reading:
            return Failure("timeout", f"no answer within the {why}; worker killed")
        if isinstance(exc, channel.TimedOut):
            return Failure("timeout", f"the worker stopped reading its input ({why}); worker killed")
        if isinstance(exc, channel.Garbage):
            return replies.garbage(exc.what, exc.data)
        return self.box.died()

    @staticmethod
    def _reply(pipe: Channel, deadline: float, expect: dict) -> dict:
        return replies.checked(replies.parse(pipe.line(deadline)), expect)

    def request(self, message: dict, timeout: float, what: str = "request",
                expect: dict | None = None) -> dict:
        if self.box.proc is None:
            self.start()
        with self._exchange(timeout, what) as (pipe, deadline):
            pipe.send(channel.encode(message), deadline)
            return self._reply(pipe, deadline, expect or {})

    def load(self, message: dict, timeout: float) -> dict:
        reply = self.request(message, timeout, "import", {"class": str, "import_ns": int, "load_ns": int})
        reply["class"] = reply["class"][:200]
        return reply

    def gate(self, images_u8: np.ndarray, batch: int, timeout: float) -> np.ndarray:
        """The worker's probabilities of these (N, 28, 28) uint8 images, (N, 10) float32."""
        images = len(images_u8)
        with self._exchange(timeout, "gate") as (pipe, deadline):
            pipe.send(channel.encode({"op": "gate", "images": images, "batch": batch}), deadline)
            pipe.send(np.ascontiguousarray(images_u8, dtype=np.uint8).tobytes(), deadline)
            self._reply(pipe, deadline, {"rows": images})
            raw = pipe.exact(images * CLASSES * 4, deadline)
        return np.frombuffer(raw, dtype="<f4").reshape(images, CLASSES)

    def stage(self, name: str, x: np.ndarray, count: int,
              timeout: float) -> tuple[str | None, np.ndarray | None]:
        """(None, its output) of the submission's stage `name` on x (float32, NHWC), `count` values in
        a shape of its choosing; or (why, None) where it did not answer (not implemented, an error)."""
        with self._exchange(timeout, f"stage {name}") as (pipe, deadline):
            pipe.send(channel.encode({"op": "stage", "name": name, "shape": list(x.shape), "count": count}),
                      deadline)
            pipe.send(np.ascontiguousarray(x, dtype="<f4").tobytes(), deadline)
            reply = self._reply(pipe, deadline, {})
            why = unanswered(reply, "stage")
            if why is not None:
                return why, None
            shape = checked_shape(reply.get("shape"), count, "stage")
            raw = pipe.exact(count * 4, deadline)
        return None, np.frombuffer(raw, dtype="<f4").reshape(shape)

    def call(self, function: str, data: dict, arrays: tuple[np.ndarray, ...] | list[np.ndarray],
             counts: tuple[int, ...] | list[int], timeout: float) -> Called:
        """The worker's `function` ("module:name", a module it sees) on the loaded object, `data` and the
        arrays (sent as float32), answering `counts` values each in shapes of its choosing (None where
        a count is 0): a kind's own work (harness.lab.box.tasks.call)."""
        box = self.box
        with self._exchange(timeout, f"call {function}") as (pipe, deadline):
            pipe.send(channel.encode({"op": "call", "function": function, "data": data,
                                      "counts": list(counts), "shapes": [list(a.shape) for a in arrays]}),
                      deadline)
            c0, t0 = box.cpu_ns(), time.perf_counter_ns()
            pipe.send(b"".join(np.ascontiguousarray(a, dtype="<f4").tobytes() for a in arrays), deadline)
            reply = self._reply(pipe, deadline, {})
            why = unanswered(reply, "call")
            result = reply.get("result", {})
            if why is None and not isinstance(result, dict):
                raise replies.garbage(f"a call's result {result!r:.60}", b"")
            answers = [] if why is not None else self._answers(pipe, deadline, reply, counts, "call")
            trip, cpu = time.perf_counter_ns() - t0, box.cpu_ns() - c0
        return Called(why, result if why is None else {}, answers, trip, cpu)

    @staticmethod
    def _answers(pipe: Channel, deadline: float, reply: dict, counts: tuple[int, ...] | list[int],
                 op: str) -> list[np.ndarray | None]:
        """The answers a reply's shapes announce, `counts` values each (None: a count of 0, not sent)."""
        shapes = reply.get("shapes")
        if not isinstance(shapes, list) or len(shapes) != len(counts):
            raise replies.garbage(f"a {op}'s shapes {shapes!r:.60}", b"")
        parts: list[np.ndarray | None] = []
        for shape, count in zip(shapes, counts, strict=True):
            if count == 0 and shape is None:
                parts.append(None)
                continue
            shape = checked_shape(shape, count, op)
            parts.append(np.frombuffer(pipe.exact(count * 4, deadline), dtype="<f4").reshape(shape))
        return parts

    def train(self, images: np.ndarray, labels: np.ndarray, timeout: float) -> Chunk:
        """Time K training steps: images (K, B, 28, 28) uint8 and labels (K, B), one step per batch,
        sent only after the previous step's loss; the Chunk's outputs are the losses, (K,) float64."""
        steps, batch = images.shape[:2]
        times, trips, cpu = [0] * steps, [0] * steps, [0] * steps
        losses = np.empty(steps, dtype=np.float64)
        box = self.box
        with self._exchange(timeout, "training") as (pipe, deadline):
            pipe.send(channel.encode({"op": "train", "steps": steps, "batch": batch}), deadline)
            self._reply(pipe, deadline, {"ready": True})
            for i in range(steps):
                data = np.ascontiguousarray(images[i], dtype=np.uint8).tobytes() + \
                    np.ascontiguousarray(labels[i], dtype="<i8").tobytes()
                c0 = box.cpu_ns()
                t0 = time.perf_counter_ns()
                pipe.send(data, deadline)
                times[i] = replies.call_time(pipe.exact(8, deadline))
                if times[i] == replies.FAILED_CALL:
                    self._reply(pipe, deadline, {})
                    raise replies.garbage("a failed step followed by an ok reply", b"")
                losses[i] = np.frombuffer(pipe.exact(8, deadline), dtype="<f8")[0]
                trips[i] = time.perf_counter_ns() - t0
                cpu[i] = box.cpu_ns() - c0
            box.watch_memory()
            if box.killed_for:
                raise Failure("out-of-memory", box.killed_for)
        return Chunk(times, trips, cpu, losses)

    def weights(self, count: int, timeout: float) -> np.ndarray:
        """The trainer's `count` weights, float32, in harness.data.weights.SHAPES' order."""
        with self._exchange(timeout, "weights") as (pipe, deadline):
            pipe.send(channel.encode({"op": "weights"}), deadline)
            self._reply(pipe, deadline, {"count": count})
            raw = pipe.exact(count * 4, deadline)
        return np.frombuffer(raw, dtype="<f4").copy()

    def stream(self, images: np.ndarray, timeout: float) -> Chunk:
        """Time one chunk of calls: images (K, B, 28, 28) uint8, one call per (B, 28, 28), sent
        only after the previous answer (no submission holds an image it has not answered)."""
        calls, batch = images.shape[:2]
        times, trips, cpu = [0] * calls, [0] * calls, [0] * calls
        out = np.empty((calls, batch, CLASSES), dtype=np.float32)
        box = self.box
        with self._exchange(timeout, "timing") as (pipe, deadline):
            pipe.send(channel.encode({"op": "stream", "calls": calls, "batch": batch}), deadline)
            self._reply(pipe, deadline, {"ready": True})  # clocks may start
            for i in range(calls):
                pixels = np.ascontiguousarray(images[i], dtype=np.uint8).tobytes()
                c0 = box.cpu_ns()
                t0 = time.perf_counter_ns()
                pipe.send(pixels, deadline)
                times[i] = replies.call_time(pipe.exact(8, deadline))
                if times[i] == replies.FAILED_CALL:  # its error line follows
                    self._reply(pipe, deadline, {})
                    raise replies.garbage("a failed call followed by an ok reply", b"")
                frame = pipe.exact(batch * CLASSES * 4, deadline)
                trips[i] = time.perf_counter_ns() - t0
                cpu[i] = box.cpu_ns() - c0
                out[i] = np.frombuffer(frame, dtype="<f4").reshape(batch, CLASSES)
            box.watch_memory()
            if box.killed_for:
                raise Failure("out-of-memory", box.killed_for)
        return Chunk(times, trips, cpu, out)
