"""CUDA's libraries for a GPU lab's workers, with or without LD_LIBRARY_PATH: sudo clears it
(its env_reset drops every LD_* variable), so the GPU labs' workers also get the CUDA wheels'
own library folders (site-packages/nvidia/*/lib: cuDNN, cuBLAS, NVRTC, the runtime), which CuPy
and the bindings find there; and a grader started by sudo without LD_LIBRARY_PATH, for a GPU lab
whose CuPy cannot load, is told exactly what to pass.

    wheel_dirs(sites) -> folders        the nvidia wheels' library folders in these site-packages
    library_path(environ, device, sites) -> LD_LIBRARY_PATH for a worker (the given one, then the wheels')
    sudo_hint(environ) -> text or ""    what to pass when sudo cleared LD_LIBRARY_PATH
    check_sudo(device, environ)         a GPU lab under sudo whose CuPy cannot load: Unavailable, with the fix
"""

import os
import site
import sys
from pathlib import Path

from harness.errors import Unavailable


def wheel_dirs(sites: list[str] | None = None) -> list[str]:
    """Every nvidia/<package>/lib (and nvidia/cu13/lib) folder of the given site-packages."""
    found: list[str] = []
    for base in sites if sites is not None else [*site.getsitepackages(), *sys.path]:
        root = Path(base) / "nvidia"
        if not root.is_dir():
            continue
        for lib in sorted(root.glob("*/lib")):
            if lib.is_dir() and str(lib) not in found:
                found.append(str(lib))
    return found


def library_path(environ: dict, device: str, sites: list[str] | None = None) -> str | None:
    """The worker's LD_LIBRARY_PATH: the grader's (when it has one), then, for a GPU lab, the CUDA
    wheels' folders; None when there is nothing to set."""
    given = [p for p in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    extra = wheel_dirs(sites) if device == "gpu" else []
    folders = given + [p for p in extra if p not in given]
    return os.pathsep.join(folders) or None


def sudo_hint(environ: dict) -> str:
    """Under sudo with no LD_LIBRARY_PATH left: the command that passes the user's own."""
    if "SUDO_UID" not in environ or environ.get("LD_LIBRARY_PATH"):
        return ""
    return ("sudo cleared LD_LIBRARY_PATH: if your CUDA libraries are found through it, pass it on: "
            "sudo env LD_LIBRARY_PATH=\"$LD_LIBRARY_PATH\" .venv/bin/python -m harness lab grade ...")


def check_sudo(device: str, environ: dict | None = None) -> None:
    """A GPU lab graded under sudo without LD_LIBRARY_PATH: CuPy must load its libraries with the
    wheels' folders alone, or the grading stops here with the fix (not in every worker)."""
    env = dict(os.environ if environ is None else environ)
    hint = sudo_hint(env)
    if device != "gpu" or not hint:
        return
    from harness.frameworks import cupy_setup

    path = library_path(env, device)
    if path:
        os.environ["LD_LIBRARY_PATH"] = path  # for this process's own loads, as the workers get it
    try:
        cupy_setup.import_cupy()
    except Unavailable as exc:
        raise Unavailable(f"{exc}; {hint}") from None
