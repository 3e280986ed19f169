"""A worker's writable space, bounded: its private copy of its folder, its /tmp and its /dev/shm,
all on one tmpfs of `limits.disk_mb` megabytes and `limits.files` inodes (files and folders),
so that no worker can fill the host's disk or its inode table, and removed by one unmount, so
that no tree a submission makes (5,000 nested folders, 300,000 files) can crash the clean-up.

    root (the grader as root)   the grader mounts the tmpfs itself (mount(2): size= and
                                nr_inodes=, which bwrap's --tmpfs cannot set), in a mount
                                namespace of its own (private_mounts(): gone with the grader,
                                even one killed), copies the submission in, binds its three
                                folders into the sandbox, and unmounts it afterwards
    not root                    bwrap's own size-limited tmpfs for /tmp and /dev/shm (no inode
                                limit: an unprivileged bwrap offers none), the copy read-only
    --no-sandbox                a plain folder, writable, unbounded (the leaderboard says so)

    Space(root, tmpfs, disk_mb, files)   .submission, .tmp, .shm, .size_bytes
    make(root, disk_mb, files, uid, tmpfs) -> Space     release(space) -> None or what failed
    private_mounts() -> bool, mount_tmpfs(target, size, inodes, uid), unmount(target)
    remove_tree(path) -> None or what failed              rm -rf: no recursion in this process
"""

import ctypes
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
MNT_DETACH = 2
CLONE_NEWNS = 0x00020000
EXTRA_INODES = 8  # the space's own folders (root, submission, tmp, shm)


@dataclass(frozen=True)
class Space:
    root: Path
    tmpfs: bool  # a tmpfs the grader mounted (size and inodes bounded)
    disk_mb: int | None
    files: int | None

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def shm(self) -> Path:
        return self.root / "shm"

    @property
    def size_bytes(self) -> int | None:
        return int(self.disk_mb) << 20 if self.disk_mb else None


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def private_mounts() -> bool:
    """Give this thread (the grader's main thread, whose children the workers are) a mount
    namespace of its own, private: its tmpfs mounts vanish with it. False where not allowed."""
    libc = _libc()
    try:
        _check(libc.unshare(CLONE_NEWNS), "unshare")
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    except OSError:
        return False
    return True


def mount_tmpfs(target: Path, size: int, inodes: int, uid: int | None) -> None:
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    options = f"size={size},nr_inodes={inodes},mode=0700{owner}".encode()
    _check(_libc().mount(b"lenet-lab", os.fsencode(target), b"tmpfs", MS_NOSUID | MS_NODEV, options),
           f"mount tmpfs on {target}")


def unmount(target: Path) -> None:
    _check(_libc().umount2(os.fsencode(target), MNT_DETACH), f"umount {target}")


def make(root: Path, disk_mb: int | None, files: int | None, uid: int | None, tmpfs: bool) -> Space:
    """The space at `root` (made here): a bounded tmpfs when `tmpfs` (root only), else a folder."""
    root.mkdir(mode=0o700)
    space = Space(root, tmpfs, disk_mb, files)
    if tmpfs:
        mount_tmpfs(root, space.size_bytes or 1 << 30, int(files or 100_000) + EXTRA_INODES, uid)
    for folder in (space.tmp, space.shm):
        folder.mkdir()
        # 1777, as /tmp and /dev/shm are: the sandbox's root (no CAP_DAC_OVERRIDE) must pass through
        # /tmp to a checkout, venv or weights bound under it (a CI clone in /tmp: 0700 hid them)
        os.chmod(folder, 0o1777)
        if uid is not None:
            os.chown(folder, uid, uid)
    return space


def release(space: Space) -> str | None:
    """Unmount (or remove) the space; None, or what failed (the grader goes on either way)."""
    if space.tmpfs:
        try:
            unmount(space.root)
        except OSError as exc:
            return f"{exc}; removing it instead: {remove_tree(space.root)}"
    return remove_tree(space.root)


def remove_tree(path: Path) -> str | None:
    """Remove a tree of any depth and size: GNU rm walks it with fts (no recursion here, no path
    longer than PATH_MAX, one filesystem). None, or what failed."""
    if not os.path.lexists(path):
        return None
    try:
        done = subprocess.run(["rm", "-rf", "--one-file-system", "--", os.fsencode(path)],
                              capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"rm -rf {path}: {exc}"
    if done.returncode != 0:
        return f"rm -rf {path}: {done.stderr.decode(errors='replace').strip()[:300]}"
    return None
