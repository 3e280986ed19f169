"""A lab worker: one submission (untrusted) or one reference, in a process of its own, started by
harness.lab.box.sandbox inside the sandbox (harness.lab.box.walls.bwrap): it sees its own folder's
private copy, the Python environment, the interface's harness modules and the weights, nothing else.

    python -m harness.lab.box.worker

Started as root inside the sandbox (a grader run with sudo), its first act, before any student
code is imported, is to become the unprivileged UID/GID in $LENET_LAB_UID ("uid:gid"), with no
supplementary groups, no capabilities (an empty bounding set, none inheritable) and no_new_privs.

Control messages are JSON lines on stdin; replies go to a private copy of stdout (fd 1 itself
is pointed at stderr, so a submission's prints cannot corrupt them). Images and answers travel
as raw bytes, in lockstep: the parent sends a call's images only after it has the previous
call's answer, so no submission ever holds an image it has not answered yet.

    {"op": "load", "submission": DIR, "module": "lenet.py", "class": ""      (or "implementation":
     NAME, "variant": V), "device", "dtype", "weights", "entry", "base", "spec"}  -> {"ok", "class",
        "import_ns", "load_ns"}; entry (the registry field naming a reference's class), base (the
        harness.base class a submission subclasses) and spec (fields a class without a spec is given)
        are its lab kind's (harness.lab.judge.rules.kinds: Kind.worker), the worker asks no kind
    {"op": "gate", "images": N, "batch": B}, then N*784 uint8 pixels  -> {"ok", "rows": N} then
        N*10 float32 (little-endian); the grader sends the gate's images (no MNIST in the sandbox)
    {"op": "stream", "calls": K, "batch": B}  -> {"ok", "ready"}, then K times: the parent sends
        B*784 uint8 pixels, the worker answers int64 ns (its clock around predict) then B*10
        float32; -1 instead of the time means the call failed, and one JSON error line follows
    {"op": "stage" | "train" | "weights", ...}   a stage on its own, a training lab's SGD steps and
        weights: harness.lab.box.tasks
    {"op": "call", "function": "module:name", "data": {...}, "shapes": [...], "counts": [...]}, then
        float32 arrays   a kind's own work (a training lab's layer's backward on its own): the function
        the grader names, called on the loaded object (harness.lab.box.tasks.call); the worker knows
        no kind
    {"op": "exit"}

An error reply is {"ok": false, "status": ..., "reason": ...}; the status is import-error,
crashed, wrong (output of the wrong shape) or out-of-memory (a harness.errors.Failure here).

    main()                      the request loop
    Worker(channel)             .load(request), .gate(images, batch) (stream: harness.lab.box.tasks)
    Channel(out_fd)             the worker's end of its pipes: .line(), .exact(n), .send(), .reply()
    submission_class(folder, module, class_name), confine(), last_cap()  (failure, as_answer,
    describe: harness.lab.box.tasks)
"""

import ctypes
import dataclasses
import importlib
import inspect
import json
import os
import sys
import time
from typing import Any

from harness.errors import Failure
from harness.lab.box import tasks
from harness.lab.box.tasks import PIXELS, as_answer, describe, failure

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_V3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set
LEVEL_PREFIX = "lenet_"  # the project's own levels: a submission writes its level itself


def confine() -> None:
    """Become the sandbox slot's UID/GID (when started as root), for good: no way back, and no
    capability left anywhere (bounding, inheritable, ambient)."""
    ids = os.environ.pop("LENET_LAB_UID", "")
    libc = ctypes.CDLL(None, use_errno=True)
    if ids and os.getuid() == 0:
        uid, gid = (int(v) for v in ids.split(":"))
        for cap in range(last_cap() + 1):  # needs CAP_SETPCAP, which goes with the rest
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # from 0 to non-zero: the kernel clears the permitted and effective sets
        header = (ctypes.c_uint32 * 2)(CAPABILITY_V3, 0)
        libc.capset(header, (ctypes.c_uint32 * 6)())  # and this the inheritable set
        if os.getuid() != uid or os.geteuid() != uid:
            raise SystemExit(f"worker: could not become UID {uid}")
    try:
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except AttributeError:
        pass


def last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


class Channel:
    """The worker's end of its pipes (the grader's is harness.measure.channel, not visible here):
    exact reads from fd 0 (JSON lines and raw bytes share it), writes to a private fd. No
    deadlines: the grader keeps them."""

    def __init__(self, out_fd: int) -> None:
        self.out_fd = out_fd
        self.buffer = b""

    def _fill(self) -> None:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            raise EOFError
        self.buffer += chunk

    def line(self) -> dict:
        while b"\n" not in self.buffer:
            self._fill()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._fill()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.out_fd, view):]

    def reply(self, message: dict) -> None:
        self.send((json.dumps(message) + "\n").encode())


def submission_class(folder: str, module: str, class_name: str, base: str = "LeNet") -> type:
    """The student's class: the named one, or the module's one subclass of harness.base's `base` (the
    most derived, where the module subclasses its own class): LeNet, or a training lab's Trainer."""
    from harness import base as bases
    from harness.base import lenet_classes

    os.chdir(folder)
    sys.path.insert(0, folder)  # the submission's own helper modules import by name
    try:
        mod = importlib.import_module(module[:-3])
    except ModuleNotFoundError as exc:
        name = (exc.name or "").split(".")[0]
        allowed = [p for p in os.environ.get("LENET_LAB_ALLOW", "").split(",") if p]
        if name.startswith(LEVEL_PREFIX) and name not in allowed:
            raise Failure("import-error", f"{module} imports {name}, one of the project's own levels: a "
                                          f"submission writes its level itself (this lab allows "
                                          f"{allowed or 'none of them'})") from None
        raise
    where = getattr(mod, "__file__", None) or ""
    if os.path.realpath(where) != os.path.realpath(os.path.join(folder, module)):  # a lenet/ or lenet.*.so
        raise Failure("import-error", f"import {module[:-3]} found {where or 'a namespace package'}, "
                                      f"not {module}")
    if class_name:
        cls = getattr(mod, class_name, None)
        if not inspect.isclass(cls):
            raise Failure("import-error", f"{module} has no class {class_name!r}")
        return cls
    leaves = lenet_classes(mod, getattr(bases, base))
    if len(leaves) != 1:
        names = [c.__name__ for c in leaves]
        raise Failure("import-error", f"{module}: expected one harness.base.{base} subclass (or set the "
                                      f"lab's class), found {len(leaves)} {names}")
    return leaves[0]


class Worker:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.impl: Any = None
        self.dtype = "float32"

    def load(self, request: dict) -> dict:
        from harness import registry
        from harness.registry import ImplSpec

        self.dtype = request["dtype"]
        t0 = time.perf_counter_ns()
        try:
            if request.get("implementation"):
                spec = registry.spec(request["implementation"])
                cls = registry.import_class(getattr(spec, request["entry"]) or "")  # its lab kind's entry
            else:
                cls = submission_class(request["submission"], request["module"], request["class"],
                                       request["base"])
        except Failure:
            raise
        except BaseException as exc:  # SystemExit and KeyboardInterrupt at import count too
            raise failure(exc, "import-error") from None
        if not isinstance(getattr(cls, "spec", None), ImplSpec):  # a student may leave it out
            given: dict[str, Any] = {k: tuple(v) for k, v in request["spec"].items()}  # its kind's
            spec = registry.lab_spec(cls, request["device"], request["dtype"])
            cls.spec = dataclasses.replace(spec, **given)
        t1 = time.perf_counter_ns()
        try:
            self.impl = cls(request["weights"], device=request["device"],
                            variant=request.get("variant"), dtype=request["dtype"])
        except BaseException as exc:
            raise failure(exc, "import-error") from None
        t2 = time.perf_counter_ns()
        return {"class": f"{cls.__module__}.{cls.__name__}", "import_ns": t1 - t0, "load_ns": t2 - t1}

    def predict(self, x: Any, rows: int) -> Any:
        out = self.impl.predict(x)
        try:
            import numpy as np

            out = np.asarray(out, dtype=np.float32)
        except Exception as exc:
            raise Failure("wrong", f"predict returned {type(out).__name__}, not an array: "
                                   f"{describe(exc)}") from None
        return as_answer(out, rows)

    def gate(self, images: int, batch: int) -> None:
        import numpy as np

        pixels = np.frombuffer(self.channel.exact(images * PIXELS), dtype=np.uint8)
        x = (pixels.reshape(images, 28, 28, 1).astype(self.dtype) / 255.0).astype(self.dtype)
        parts = []
        for i in range(0, images, batch):
            try:
                parts.append(self.predict(x[i:i + batch], len(x[i:i + batch])))
            except Failure:
                raise
            except BaseException as exc:
                raise failure(exc, "crashed") from None
        out = np.ascontiguousarray(np.concatenate(parts), dtype="<f4")
        self.channel.reply({"ok": True, "rows": images})
        self.channel.send(out.tobytes())


def main() -> int:
    confine()
    out_fd = os.dup(1)
    os.dup2(2, 1)  # anything printed goes to the log, never into the replies
    sys.stdout = sys.stderr
    channel = Channel(out_fd)
    worker = Worker(channel)
    while True:
        try:
            request = channel.line()
        except EOFError:
            return 0
        op = request.get("op")
        if op == "exit":
            return 0
        try:
            if op == "load":
                channel.reply({"ok": True, **worker.load(request)})
            elif op == "gate":
                worker.gate(request["images"], request["batch"])
            elif op == "train":
                tasks.train(channel, worker.impl, worker.dtype, request["steps"], request["batch"])
            elif op == "weights":
                tasks.weights(channel, worker.impl)
            elif op == "stage":
                tasks.stage(channel, worker.impl, worker.dtype, request["name"], request["shape"],
                            request["count"])
            elif op == "call":
                tasks.call(channel, worker.impl, worker.dtype, request["function"], request["data"],
                           request["shapes"], request["counts"])
            elif op == "stream":
                tasks.stream(channel, worker.impl, worker.dtype, request["calls"], request["batch"])
            else:
                raise Failure("crashed", f"unknown op {op!r}")
        except Failure as exc:
            channel.reply({"ok": False, "status": exc.status, "reason": exc.reason})


if __name__ == "__main__":
    raise SystemExit(main())
