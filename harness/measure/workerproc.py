"""The runner's side of a study worker (harness.measure.inside.worker): start it, ask over its channel
(harness.measure.channel) with a deadline, kill it (the whole process group).

    WorkerProcess(group, env, log_path)
      .request(message, timeout) -> dict   its reply; a crash or a timeout is a
                                           harness.errors.Failure, `crashed` or `timeout`
      .start(), .alive(), .pid, .kill(), .stop()
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import ROOT
from harness.errors import Failure
from harness.machine import procenv
from harness.measure import channel
from harness.measure.channel import Channel


class WorkerProcess:
    def __init__(self, group: str, env: dict, log_path: Path) -> None:
        self.group = group
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.channel: Channel | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> Channel:
        with open(self.log_path, "ab") as log:
            log.write(f"--- worker for {self.group} started {time.ctime()}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.measure.inside.worker"], cwd=ROOT, env=self.env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True,  # its own process group: killed whole, spared the terminal's ^C
            )
        if self.proc.stdout is None or self.proc.stdin is None:
            raise ValueError("the worker's stdin and stdout must be pipes")
        self.channel = Channel(self.proc.stdout, self.proc.stdin)
        return self.channel

    def request(self, message: dict, timeout: float) -> dict:
        if self.proc is not None and self.proc.poll() is not None:
            raise self._died("while idle")  # the next request on its cells starts a fresh one
        pipe = self.channel if self.channel is not None else self.start()
        deadline = time.monotonic() + timeout
        when = "before the request"
        try:
            pipe.send(channel.encode(message), deadline)
            when = "while working"
            return pipe.message(deadline)
        except channel.TimedOut:
            self.kill()
            raise Failure("timeout", f"no answer within {timeout:g} s; worker killed") from None
        except channel.Closed:
            raise self._died(when) from None

    def _died(self, when: str) -> Failure:
        if self.proc is None:
            raise ValueError("the worker was not started")
        code = self.proc.wait()
        self.proc = self.channel = None
        name = signal.Signals(-code).name if code < 0 and -code in signal.valid_signals() else None
        how = f"killed by {name}" if name else f"exited with code {code}"
        return Failure("crashed", f"worker {how} {when} (see workers.log)")

    def kill(self) -> None:
        if self.proc is None:
            return
        procenv.kill_group(self.proc)
        self.proc = self.channel = None

    def stop(self) -> None:
        """Ask politely (the implementation frees its GPU memory), then make sure."""
        if self.alive() and self.proc is not None and self.channel is not None:
            try:
                self.channel.send(channel.EXIT, time.monotonic() + 1)
                self.proc.wait(timeout=10)
            except (channel.ChannelError, subprocess.TimeoutExpired):
                pass
        self.kill()
