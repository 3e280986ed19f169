"""A worker as a Slurm job step of its own (`srun --overlap` inside the grading task): Slurm puts
each step in its own cgroup (proctrack/cgroup, jobacct_gather/cgroup), so a grader that is not root,
and cannot make cgroups, still reads a CPU counter that counts every thread and process of the
worker, apart from the grader's and the other workers' (tamper-evident timing without root).

The step runs a small trusted relay (this module's main) that connects to a Unix socket the grader
listens on in its own scratch folder, receives the worker's pipes, log and bwrap's descriptors over
it (SCM_RIGHTS), puts them at the numbers bwrap expects and execs the worker's command line: the
worker talks to the grader over plain pipes (no srun I/O forwarding in the timed path), and the
grader knows the step's first process by the socket's peer credentials.

    reason_unavailable() -> why not, or None   inside a Slurm job, srun here, Slurm's cgroups on
    step_group(pid) -> the folder of the cgroup counting pid's CPU (v1 cpuacct, else v2)
    Step(label, scratch).start(argv, env, cwd, fds) -> (Popen of srun, the step's first pid)
    StepCounter(pid)       .cpu_ns(): the step's cgroup's CPU time (v1 cpuacct.usage, v2 cpu.stat)
The relay: harness.lab.box.proc.relay.
"""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from harness.errors import HarnessError
from harness.lab.box.walls import cgroup

ACCEPT_S = 60.0  # srun's start on a loaded node
TRIES = 2


def step_group(pid: int | str = "self") -> Path | None:
    """The folder of the cgroup that counts `pid`'s CPU time: v1's cpuacct group, else v2's."""
    try:
        own = cgroup.own_groups(f"/proc/{pid}/cgroup")
        found = cgroup.mounts()
    except (OSError, ValueError):
        return None
    if "cpuacct" in own and "cpuacct" in found:
        return Path(found["cpuacct"]) / own["cpuacct"].lstrip("/")
    if "v2" in own and "v2" in found:
        return Path(found["v2"]) / own["v2"].lstrip("/")
    return None


def reason_unavailable() -> str | None:
    """None when a worker can run as a Slurm step of its own here, with a cgroup that counts it."""
    if not os.environ.get("SLURM_JOB_ID"):
        return "not inside a Slurm job"
    if not shutil.which("srun"):
        return "no srun on PATH"
    group = step_group()
    if group is None or "job_" not in str(group):
        return f"Slurm keeps no cgroup per job here ({group}): its proctrack/cgroup plugin is off"
    return None


class StepCounter:
    """The CPU time of everything in a step's cgroup (the step's first process's own group)."""

    def __init__(self, pid: int) -> None:
        group = step_group(pid)
        if group is None:
            raise OSError(f"no cgroup of process {pid}")
        self.path = group / ("cpuacct.usage" if (group / "cpuacct.usage").exists() else "cpu.stat")
        self._fd = os.open(self.path, os.O_RDONLY)

    def cpu_ns(self) -> int:
        return cgroup.cpu_reading(os.pread(self._fd, 4096, 0), self.path.name == "cpuacct.usage", self.path)

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


class Step:
    """One worker's step: a listening socket in the grader's scratch folder, srun, the hand-over."""

    def __init__(self, label: str, scratch: Path) -> None:
        self.path = Path(scratch) / f"step-{label}.sock"
        self.path.unlink(missing_ok=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen(1)
        self.label = label

    def start(self, argv: list[str], env: dict, cwd: str, fds: dict[int, int], log: int,
              limits: dict) -> tuple[subprocess.Popen, int]:
        """srun the relay; hand it `fds` ({number in the worker: our descriptor}) and the limits it
        sets before it execs (harness.lab.box.proc.limits); (srun, the step's first pid). A step that
        does not connect is tried once more; then a HarnessError (the grader's failure, never the
        submission's), srun's own words in the worker's log."""
        srun = ["srun", "--overlap", "--ntasks=1", "--nodes=1", "--cpus-per-task=1", "--quiet",
                f"--job-name=lab-worker-{self.label}", "--input=none", "--output=none",
                sys.executable, "-m", "harness.lab.box.proc.relay", str(self.path)]
        node = os.environ.get("SLURMD_NODENAME")
        if node:
            srun[1:1] = [f"--nodelist={node}"]
        try:
            for attempt in range(1, TRIES + 1):
                proc = subprocess.Popen(srun, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True)
                conn = self.connected(proc)
                if conn is not None:
                    break
                os.write(log, f"--- grader: the Slurm step did not connect (try {attempt}, srun exit "
                              f"{proc.poll()})\n".encode())
            else:
                raise HarnessError(f"the Slurm step of worker {self.label} did not start ({TRIES} tries, "
                                   f"{ACCEPT_S:.0f} s each; srun's words in the worker's log)")
        finally:
            self.server.close()
            self.path.unlink(missing_ok=True)
        with conn:
            pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                            struct.calcsize("3i")))
            message = json.dumps({"argv": argv, "env": env, "cwd": cwd, "targets": list(fds),
                                  **limits}).encode()
            socket.send_fds(conn, [message], list(fds.values()))
            conn.recv(1)  # the relay closes its end when it execs (or fails)
        return proc, pid

    def connected(self, proc: subprocess.Popen) -> socket.socket | None:
        """The relay's connection, or None when srun ended (or ACCEPT_S passed: srun then killed)."""
        deadline = time.monotonic() + ACCEPT_S
        self.server.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                return self.server.accept()[0]
            except TimeoutError:
                if proc.poll() is not None:
                    return None
        proc.kill()
        proc.wait()
        return None
