"""What a lab worker is started with: its command line (under bwrap and its seccomp filter, or
bare with --no-sandbox), the file descriptors that command reads, its environment and its folder.

    launch(isolation, space, env, scratch, slot, device, packages, weights) -> Launch
    sandbox_env(env, device, uid)   the few variables a sandboxed worker sees
"""

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness import ROOT
from harness.lab.box.walls import bwrap, libpath, procfs, seccomp
from harness.lab.box.walls.disk import Space
from harness.lab.box.walls.isolation import Isolation

PASS_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
            "CUPY_CACHE_DIR", "NVIDIA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    fds: list[int]  # open descriptors the command reads (bwrap's arguments, the seccomp program): close after
    env: dict
    cwd: str


def sandbox_env(env: dict, device: str, uid: int | None) -> dict:
    """The grader's few variables worth passing, the box's own, and a private HOME and caches."""
    out = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    libraries = libpath.library_path(dict(os.environ), device)  # + the CUDA wheels': sudo clears it
    if libraries:
        out["LD_LIBRARY_PATH"] = libraries
    out.update(env)
    out.update({"HOME": "/tmp", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONNOUSERSITE": "1", "MPLCONFIGDIR": "/tmp",
                "CUPY_CACHE_DIR": "/tmp/cupy"})  # CuPy's kernel cache: private, gone with the worker
    if uid is not None:
        out["LENET_LAB_UID"] = f"{uid}:{uid}"
    return out


def launch(isolation: Isolation, space: Space | None, env: dict, scratch: Path, slot: int, device: str,
           packages: Iterable[str], weights: str) -> Launch:
    argv = [sys.executable, "-m", procfs.WORKER]
    if isolation.bwrap:
        argv, fds = bwrap.packed(bwrap.command(isolation.bwrap, space, argv, weights, tuple(packages),
                                               gpu=device == "gpu"), seccomp.program())
        return Launch(argv, fds, sandbox_env(env, device, isolation.uid(slot)), "/")
    # --no-sandbox: the grader's own user and environment, in the student's folder
    path = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    own = space is not None and space.submission.is_dir()
    cwd = str(space.submission if own and space is not None else scratch)
    return Launch(argv, [], {**os.environ, **env, "PYTHONPATH": os.pathsep.join(path)}, cwd)
