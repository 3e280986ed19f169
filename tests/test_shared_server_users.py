"""Two real OS users on one server: the GPU lock and the results folder work for both, and a
folder nobody can use gives a clear message. Needs root (CI runs as root) to create the users
and switch to them; elsewhere skipped with the reason."""

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.gpulock import GpuLock

USERS = ("lenet-test-a", "lenet-test-b")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("useradd"),
    reason="needs root and useradd to create two OS users (CI runs as root)")


@pytest.fixture(scope="module")
def users():
    for name in USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:  # a test run beside this one may create it at the same moment: fine
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                            name], capture_output=True)
    return [pwd.getpwnam(name) for name in USERS]


@pytest.fixture
def shared_dir():
    """A folder like /tmp: world-writable and sticky."""
    path = Path(tempfile.mkdtemp(prefix="lenet-shared-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path)


def as_user(user, action, umask=0o022):
    """Run `action()` in a forked child with the user's uid and gid; return its exit code
    (0: returned True, 1: returned False, 2: HarnessError, 3: any other exception)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        code = 3
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            os.umask(umask)
            code = 0 if action() else 1
        except HarnessError as exc:
            os.write(2, f"{exc}\n".encode())
            code = 2
        except BaseException as exc:  # noqa: BLE001 - reported through the exit code
            os.write(2, f"{type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def lock_in(folder, timeout_s=None, hold_s=0.0):
    def action():
        os.environ["LENET_LOCK_DIR"] = str(folder)
        lock = GpuLock("0", timeout_s=timeout_s, report=lambda _: None)
        got = lock.acquire()
        if got and hold_s:
            time.sleep(hold_s)
        lock.release()
        return got
    return action


def test_second_user_can_take_the_lock_the_first_created(users, shared_dir):
    a, b = users
    assert as_user(a, lock_in(shared_dir)) == 0
    lock_file = shared_dir / "lenet-levels-gpu0.lock"
    assert lock_file.stat().st_uid == a.pw_uid
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o666  # the umask did not narrow it
    assert as_user(b, lock_in(shared_dir)) == 0
    assert as_user(a, lock_in(shared_dir)) == 0


def test_second_user_waits_while_the_first_holds_it(users, shared_dir):
    a, b = users
    holder = os.fork()
    if holder == 0:
        os._exit(as_user(a, lock_in(shared_dir, hold_s=3.0)))
    try:
        lock_file = shared_dir / "lenet-levels-gpu0.lock"
        deadline = time.monotonic() + 30  # until A holds it: its note is written once it does
        while not (lock_file.exists() and lock_file.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert as_user(b, lock_in(shared_dir, timeout_s=0.3)) == 1  # timed out: flagged contended
    finally:
        os.waitpid(holder, 0)
    assert as_user(b, lock_in(shared_dir, timeout_s=5)) == 0  # free again


def test_a_read_only_lock_file_of_another_user_still_locks(users, shared_dir):
    a, b = users
    lock_file = shared_dir / "lenet-levels-gpu0.lock"

    def create_read_only():  # as an older harness did, with a 022 umask
        os.close(os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644))
        return True

    assert as_user(a, create_read_only) == 0
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o644
    assert as_user(b, lock_in(shared_dir)) == 0


def test_unusable_lock_folder_is_a_clear_error(users, shared_dir, capfd):
    a, b = users
    private = shared_dir / "private"
    assert as_user(a, lambda: private.mkdir(mode=0o755) or True) == 0
    assert as_user(b, lock_in(private)) == 2
    err = capfd.readouterr().err
    assert f"GPU lock folder {private}: cannot create lenet-levels-gpu0.lock (Permission denied; " \
           f"owner {USERS[0]}, mode 755); set LENET_LOCK_DIR" in err


def test_results_folder_of_another_user_is_a_clear_error(users, shared_dir, capfd):
    from harness import results

    a, b = users
    out = shared_dir / "results"
    assert as_user(a, lambda: results.create_run_dir(out, "smoke", "r1").is_dir()) == 0
    assert as_user(b, lambda: results.create_run_dir(out, "smoke", "r2").is_dir()) == 2
    err = capfd.readouterr().err
    assert f"{out}/smoke/r2: cannot create the run folder: {out}/smoke is not writable" in err
    assert "use --out with a folder of your own" in err
