"""One harness at a time times on a GPU: an flock on a file shared by every user of the server,
and by every Slurm job on a node: named by the GPU's UUID, in a node-wide folder (lock_folder).

The kernel drops an flock when its holder dies, so a killed run never leaves a stale lock.
A second run waits with a message; past --lock-timeout it runs anyway and its GPU cells are
flagged `contended`.

Many users, one file: whoever creates it makes it world-writable (0666, whatever their umask),
and everyone else opens it without O_CREAT (in a sticky /tmp, Linux's protected_regular refuses
O_CREAT on another user's file even when its mode allows writing). A file that another user
created read-only (an older harness) is still locked through a read-only descriptor: flock
needs none of the write bits; only the holder's note is then left out.
"""

import fcntl
import getpass
import json
import os
import socket
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import HarnessError

NODE_FOLDERS = ("/run/lock", "/var/tmp")  # node-wide, sticky and world-writable on Linux


def lock_folder() -> Path:
    """Where the GPU locks live: $LENET_LOCK_DIR, else the first of NODE_FOLDERS that every user may
    write. Never $TMPDIR, nor /tmp or /dev/shm: a Slurm site often gives each job its own (TMPDIR
    per job, job_container/tmpfs), and a lock there would be every job's own."""
    if os.environ.get("LENET_LOCK_DIR"):
        return Path(os.environ["LENET_LOCK_DIR"])
    for folder in NODE_FOLDERS:
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) and mode & stat.S_IWOTH and mode & stat.S_ISVTX:
            return Path(folder)
    return Path("/tmp")


def lock_path(gpu_id: str) -> Path:
    """The lock of one GPU, named by its UUID (harness.machine.gpu.lock_id) where one is known."""
    return lock_folder() / f"lenet-levels-gpu{gpu_id}.lock"


def open_shared(path: Path) -> tuple[int, bool]:
    """(fd, writable) for the lock file, created world-writable by whoever comes first."""
    for _ in range(3):  # another user may create or remove it between our two opens
        for flags in (os.O_RDWR, os.O_RDONLY):
            try:
                return os.open(path, flags), flags == os.O_RDWR
            except FileNotFoundError:
                break
            except PermissionError:
                continue  # not writable for us: lock through a read-only descriptor
        else:
            raise HarnessError(f"GPU lock {path}: exists but this user may not open it "
                               f"({describe(path)}); ask its owner to remove it, or set "
                               "LENET_LOCK_DIR to a folder every user of the GPU can write")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise HarnessError(f"GPU lock folder {path.parent}: cannot create {path.name} "
                               f"({exc.strerror}; {describe(path.parent)}); set LENET_LOCK_DIR to a "
                               "folder every user of the GPU can write (e.g. a sticky 1777 folder)") from None
        os.fchmod(fd, 0o666)  # the umask must not lock the next user out
        return fd, True
    raise HarnessError(f"GPU lock {path}: could not be opened or created (it keeps appearing and "
                       "disappearing); try again")


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a uid with no passwd entry (containers)
        return f"uid {os.getuid()}"


def describe(path: Path) -> str:
    """Owner and mode of a path, for error messages."""
    try:
        st = path.stat()
    except OSError as exc:
        return exc.strerror or str(exc)
    import pwd

    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = f"uid {st.st_uid}"
    return f"owner {owner}, mode {st.st_mode & 0o7777:o}"


class GpuLock:
    def __init__(self, gpu_id: str = "0", timeout_s: float | None = None,
                 report: Callable[[str], object] = print):
        self.path = lock_path(gpu_id)
        self.timeout_s = timeout_s
        self.report = report
        self.fd: int | None = None
        self.writable = False
        self.waited_in_vain = False  # True: timed out waiting; what we time is contended

    def holder(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return "another run"
        return f"{info.get('user')}@{info.get('host')} pid {info.get('pid')}"

    def check(self) -> None:
        """Fail now, with the fix, when the lock file cannot be opened or created."""
        fd, _ = open_shared(self.path)
        os.close(fd)

    @staticmethod
    def _try(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def acquire(self) -> bool:
        """True when held; False when the wait timed out (then the caller flags its cells)."""
        if self.fd is not None:
            return True
        fd, self.writable = open_shared(self.path)
        self.fd = fd
        if not self._try(fd):
            self.report(f"GPU busy: {self.holder()} is timing on it ({self.path}); waiting"
                        + (f" up to {self.timeout_s:g} s" if self.timeout_s is not None else ""))
            deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
            while not self._try(fd):
                if deadline is not None and time.monotonic() > deadline:
                    self.report("GPU still busy: measuring anyway; these cells are flagged contended")
                    os.close(fd)
                    self.fd = None
                    self.waited_in_vain = True
                    return False
                time.sleep(0.2)
        if not self.writable:
            return True
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"user": user_name(), "host": socket.gethostname(),
                                      "pid": os.getpid(), "since": time.time()}).encode())
        return True

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    @contextmanager
    def held(self) -> Iterator[bool]:
        got = self.acquire()
        try:
            yield got
        finally:
            self.release()
