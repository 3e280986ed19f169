"""The runner's side of a worker: start, ask with a deadline, kill (the whole process group)."""

import json
import os
import select
import signal
import subprocess
import sys
import time

from harness import ROOT
from harness.machine import procenv


class WorkerDied(Exception):
    """The worker crashed or ran past its deadline; `status` is 'crashed' or 'timeout'."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class WorkerProcess:
    def __init__(self, group: str, env: dict, log_path):
        self.group = group
        self.env = env
        self.log_path = log_path
        self.proc = None
        self.buffer = b""

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        log = open(self.log_path, "ab")
        log.write(f"--- worker for {self.group} started {time.ctime()}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.measure.worker"], cwd=ROOT, env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True,  # its own process group: killed whole, spared the terminal's ^C
        )
        log.close()
        self.buffer = b""

    def request(self, message: dict, timeout: float) -> dict:
        if self.proc is None:
            self.start()
        elif self.proc.poll() is not None:
            self._died("while idle")  # the next request on its cells starts a fresh one
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._died("before the request")
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerDied("timeout", f"no answer within {timeout:g} s; worker killed")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self._died("while working")
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def _died(self, when: str):
        code = self.proc.wait()
        self.proc = None
        name = signal.Signals(-code).name if code < 0 and -code in signal.valid_signals() else None
        how = f"killed by {name}" if name else f"exited with code {code}"
        raise WorkerDied("crashed", f"worker {how} {when} (see workers.log)")

    def kill(self):
        if self.proc is None:
            return
        procenv.kill_group(self.proc)
        self.proc = None

    def stop(self):
        """Ask politely (the implementation frees its GPU memory), then make sure."""
        if self.alive():
            try:
                self.proc.stdin.write(b'{"op": "exit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self.kill()
