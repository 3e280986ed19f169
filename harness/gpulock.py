"""One harness at a time times on a GPU: an flock on a file shared by every user of the server.

The kernel drops an flock when its holder dies, so a killed run never leaves a stale lock.
A second run waits with a message; past --lock-timeout it runs anyway and its GPU cells are
flagged `contended`.
"""

import fcntl
import getpass
import json
import os
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def lock_path(gpu_id: str) -> Path:
    folder = Path(os.environ.get("LENET_LOCK_DIR") or tempfile.gettempdir())
    return folder / f"lenet-levels-gpu{gpu_id}.lock"


class GpuLock:
    def __init__(self, gpu_id="0", timeout_s: float | None = None, report=print):
        self.path = lock_path(gpu_id)
        self.timeout_s = timeout_s
        self.report = report
        self.fd = None
        self.waited_in_vain = False  # True: timed out waiting; what we time is contended

    def holder(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return "another run"
        return f"{info.get('user')}@{info.get('host')} pid {info.get('pid')}"

    def _try(self) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def acquire(self) -> bool:
        """True when held; False when the wait timed out (then the caller flags its cells)."""
        if self.fd is not None:
            return True
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        if not self._try():
            self.report(f"GPU busy: {self.holder()} is timing on it ({self.path}); waiting"
                        + (f" up to {self.timeout_s:g} s" if self.timeout_s is not None else ""))
            deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
            while not self._try():
                if deadline is not None and time.monotonic() > deadline:
                    self.report("GPU still busy: measuring anyway; these cells are flagged contended")
                    os.close(self.fd)
                    self.fd = None
                    self.waited_in_vain = True
                    return False
                time.sleep(0.2)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, json.dumps({"user": getpass.getuser(), "host": socket.gethostname(),
                                      "pid": os.getpid(), "since": time.time()}).encode())
        return True

    def release(self):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    @contextmanager
    def held(self):
        got = self.acquire()
        try:
            yield got
        finally:
            self.release()
