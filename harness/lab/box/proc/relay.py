"""The trusted relay at the start of a worker's Slurm step (harness.lab.box.walls.slurmstep): it
connects to the grader's socket, receives the worker's pipes, log and bwrap's descriptors (SCM_RIGHTS),
puts each at the number the worker's command line expects, sets the worker's limits as a child of the
grader gets them (harness.lab.box.proc.limits) and execs the command line.

    python -m harness.lab.box.proc.relay SOCKET      main(socket path) -> exit code (only on failure)
"""

import fcntl
import json
import os
import socket
import sys

from harness.lab.box.proc.limits import Limits, limiter

MAX_FDS = 16
HIGH_FD = 200  # where the received descriptors wait before they are placed


def main(path: str) -> int:
    """The relay: connect, receive, place the descriptors, exec the worker's command line."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, MAX_FDS)
    conn.close()  # before the descriptors move: its number may be one of theirs (the grader reads EOF)
    spec = json.loads(data)
    targets = spec["targets"]
    if len(fds) != len(targets):
        print(f"slurmstep: expected {len(targets)} descriptors, got {len(fds)}", file=sys.stderr)
        return 70
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD) for fd in fds]  # out of the targets' way
    for fd in fds:
        os.close(fd)
    for fd, target in zip(high, targets, strict=True):
        os.dup2(fd, target, inheritable=True)
    os.chdir(spec["cwd"])
    limiter(Limits(**spec["limits"]), bool(spec["address_space"]), None)()
    os.execve(spec["argv"][0], spec["argv"], spec["env"])  # the high copies close on exec


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
