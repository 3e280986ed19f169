"""Two real OS users on one server: the GPU lock and the results folder work for both, and a
folder nobody can use gives a clear message. Needs root (CI runs as root) to create the users
and switch to them; elsewhere skipped with the reason.

Each user's action runs in a child of a fresh single-threaded server process (multiprocessing's
forkserver), which switches to the user's uid and gid: forking pytest itself, with JAX's
threads running in it, could deadlock."""

import multiprocessing
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
from harness.lab.judge import store
from harness.lab.term.marks import export, leaderboard
from harness.machine.gpulock import GpuLock
from harness.measure.store import results
from tests import lab_rows

USERS = ("lenet-test-a", "lenet-test-b")
CONTEXT = multiprocessing.get_context("forkserver")
# The server imports this module (the lab's and the harness's modules it names) once, before its
# first fork: each user's child starts with them loaded instead of importing them again.
CONTEXT.set_forkserver_preload([__name__])

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


# --- what each user does (module-level: the forkserver's children import them) -----------
def lock_in(folder, timeout_s=None, hold_s=0.0):
    os.environ["LENET_LOCK_DIR"] = str(folder)
    lock = GpuLock("0", timeout_s=timeout_s, report=lambda _: None)
    got = lock.acquire()
    if got and hold_s:
        time.sleep(hold_s)
    lock.release()
    return got


def create_read_only(path):  # as an older harness did, with a 022 umask
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    return True


def make_folder(path):
    Path(path).mkdir(mode=0o755)
    return True


def make_run_dir(out, run_id):
    return results.create_run_dir(Path(out), "smoke", run_id).is_dir()


def report_and_export(out, roster, target):
    """`lab report` and `lab export` of a grading folder."""
    leaderboard.build(out)
    return export.export(out, roster, "csv", target).graded == 2


def _child(uid, gid, action, args, answers, warm=None):
    try:
        if warm is not None:  # as root first, on a copy: lazy imports and font caches loaded before the
            action(*warm)     # switch (the interpreter's folder, under /root here, is closed to the user)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        os.umask(0o022)
        answers.put((0 if action(*args) else 1, ""))
    except HarnessError as exc:
        answers.put((2, str(exc)))
    except BaseException as exc:  # noqa: BLE001 - reported through the code
        answers.put((3, f"{type(exc).__name__}: {exc}"))


def start_as(user, action, *args, warm=None):
    answers = CONTEXT.Queue()
    process = CONTEXT.Process(target=_child, args=(user.pw_uid, user.pw_gid, action, args, answers, warm))
    process.start()
    return process, answers


def as_user(user, action, *args, warm=None) -> tuple[int, str]:
    """(0: returned True, 1: returned False, 2: HarnessError, 3: anything else; its message)."""
    process, answers = start_as(user, action, *args, warm=warm)
    answer = answers.get(timeout=120)
    process.join(timeout=60)
    return answer


def test_second_user_can_take_the_lock_the_first_created(users, shared_dir):
    a, b = users
    assert as_user(a, lock_in, shared_dir) == (0, "")
    lock_file = shared_dir / "lenet-levels-gpu0.lock"
    assert lock_file.stat().st_uid == a.pw_uid
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o666  # the umask did not narrow it
    assert as_user(b, lock_in, shared_dir) == (0, "")
    assert as_user(a, lock_in, shared_dir) == (0, "")


def test_second_user_waits_while_the_first_holds_it(users, shared_dir):
    a, b = users
    holder, answers = start_as(a, lock_in, shared_dir, None, 5.0)
    lock_file = shared_dir / "lenet-levels-gpu0.lock"
    deadline = time.monotonic() + 60  # until A holds it: its note is written once it does
    while not (lock_file.exists() and lock_file.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert as_user(b, lock_in, shared_dir, 0.3) == (1, "")  # timed out: its cells get flagged
    assert answers.get(timeout=120) == (0, "")
    holder.join(timeout=60)
    assert as_user(b, lock_in, shared_dir, 5) == (0, "")  # free again


def test_a_read_only_lock_file_of_another_user_still_locks(users, shared_dir):
    a, b = users
    lock_file = shared_dir / "lenet-levels-gpu0.lock"
    assert as_user(a, create_read_only, lock_file) == (0, "")
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o644
    assert as_user(b, lock_in, shared_dir) == (0, "")


def test_unusable_lock_folder_is_a_clear_error(users, shared_dir):
    a, b = users
    private = shared_dir / "private"
    assert as_user(a, make_folder, private) == (0, "")
    code, message = as_user(b, lock_in, private)
    assert code == 2
    assert message.startswith(f"GPU lock folder {private}: cannot create lenet-levels-gpu0.lock "
                              f"(Permission denied; owner {USERS[0]}, mode 755); set LENET_LOCK_DIR")


def test_results_folder_of_another_user_is_a_clear_error(users, shared_dir):
    a, b = users
    out = shared_dir / "results"
    assert as_user(a, make_run_dir, out, "r1") == (0, "")
    code, message = as_user(b, make_run_dir, out, "r2")
    assert code == 2
    assert message.startswith(f"{out}/smoke/r2: cannot create the run folder: {out}/smoke is not writable")
    assert "use --out with a folder of your own" in message


def test_under_sudo_the_grading_belongs_to_the_user_who_ran_it(users, shared_dir):
    """`sudo lab grade`: --out handed to SUDO_UID/SUDO_GID; that user reports and exports, the key
    stays theirs alone (another user cannot check the rows)."""
    a, b = users
    out = shared_dir / "grading"
    lab_rows.graded(out, [lab_rows.ok_row("ann", 1.2, 1.1, 1.3, 40), lab_rows.failed_row("ben", "wrong", "no")])
    (out / "feedback").mkdir()
    (out / "feedback" / "old.md").write_text("root's")
    (out / "results" / "ann" / "worker.log").symlink_to("/etc/hostname")  # never followed
    assert store.hand_over(out, {}) is None  # not under sudo: nothing changes
    assert store.hand_over(out, {"SUDO_UID": str(a.pw_uid), "SUDO_GID": str(a.pw_gid)}) == (a.pw_uid, a.pw_gid)
    owners = {p.lstat().st_uid for p in [out, *out.rglob("*")]}
    assert owners == {a.pw_uid} and Path("/etc/hostname").stat().st_uid == 0
    key = (out / store.KEY).stat()
    assert key.st_uid == a.pw_uid and stat.S_IMODE(key.st_mode) == 0o600
    roster = shared_dir / "roster.csv"
    roster.write_text("id,name\nann,Ann\nben,Ben\n")
    scratch = Path(tempfile.mkdtemp(prefix="lenet-warm-"))
    lab_rows.graded(scratch / "out", [lab_rows.ok_row("ann", 1.2, 1.1, 1.3, 40)])
    warm = (scratch / "out", roster, scratch / "grades.csv")
    assert as_user(a, report_and_export, out, roster, shared_dir / "grades.csv", warm=warm) == (0, "")
    assert (out / "LEADERBOARD.md").stat().st_uid == a.pw_uid and (shared_dir / "grades.csv").is_file()
    warm = (scratch / "out", roster, scratch / "grades-b.csv")
    code, message = as_user(b, report_and_export, out, roster, shared_dir / "grades-b.csv", warm=warm)
    shutil.rmtree(scratch)
    assert code == 2 and "cannot read the grader's key" in message
