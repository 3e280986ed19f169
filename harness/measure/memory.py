"""What a level costs besides time, read inside its worker (one process per implementation, so one
level's import never counts against another's): host memory by stage, the GPU memory its framework
holds, and what had to be installed for it (the distributions it imported, the shared libraries it
mapped, their size on disk).

Host memory is Linux's own account of the process (/proc/self/status): VmRSS, resident now, and
VmHWM, the peak since the process started or since the peak was last reset by writing "5" to
/proc/self/clear_refs (Linux 4.0+; where that is refused the peak is the process's, and
`peak_reset` says so).

    rss() -> (resident, peak) bytes            reset_peak() -> bool
    gpu(frameworks) -> dict                    the allocators' own counters, where a GPU framework is loaded
    installed(modules, maps) -> dict           distributions and shared libraries, with sizes
"""

import importlib.metadata
import os
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path


def _status_kb(field: str, text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return None


def rss() -> tuple[int | None, int | None]:
    """(VmRSS, VmHWM) of this process in bytes; (None, None) where /proc has no answer."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None, None
    return _status_kb("VmRSS", text), _status_kb("VmHWM", text)


def reset_peak() -> bool:
    """Reset VmHWM to the resident size now, so the next reading is the peak of what follows."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def gpu(frameworks: Iterable[str]) -> dict:
    """GPU memory this process's framework holds and the peak its allocator reached, in bytes,
    from the allocator of each loaded framework (CuPy's pool, PyTorch's caching allocator, JAX's
    device statistics); {} with no GPU framework loaded."""
    out: dict = {}
    loaded = set(frameworks)
    if "cupy" in loaded and "cupy" in sys.modules:
        pool = sys.modules["cupy"].get_default_memory_pool()
        out["cupy"] = {"used": int(pool.used_bytes()), "held": int(pool.total_bytes())}
    torch = sys.modules.get("torch") if "torch" in loaded else None
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        out["torch"] = {"used": int(torch.cuda.memory_allocated()), "held": int(torch.cuda.memory_reserved()),
                        "peak": int(torch.cuda.max_memory_allocated())}
    jax = sys.modules.get("jax") if "jax" in loaded else None
    if jax is not None:
        stats = [d.memory_stats() or {} for d in jax.devices() if d.platform == "gpu"]
        if stats:
            out["jax"] = {"used": sum(s.get("bytes_in_use", 0) for s in stats),
                          "peak": sum(s.get("peak_bytes_in_use", 0) for s in stats),
                          "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")}
    return out


@cache
def _distribution_size(name: str) -> tuple[str, int, int]:
    """(version, bytes on disk, files) of an installed distribution, from its RECORD."""
    dist = importlib.metadata.distribution(name)
    total = count = 0
    for file in dist.files or ():
        try:
            total += os.stat(str(dist.locate_file(file))).st_size
            count += 1
        except OSError:
            pass
    return dist.version, total, count


def owners(paths: Iterable[str]) -> dict[str, str]:
    """{path: the installed distribution whose RECORD lists it} for files a wheel put outside
    site-packages (the onednn wheel's lib/libdnnl.so.3); paths no distribution lists are left out."""
    wanted = {os.path.realpath(p) for p in paths}
    found: dict[str, str] = {}
    if not wanted:
        return found
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if not str(file).endswith(tuple(os.path.basename(w) for w in wanted)):
                continue  # cheap test first: most files are not shared libraries we mapped
            real = os.path.realpath(str(dist.locate_file(file)))
            if real in wanted:
                found[real] = dist.metadata["Name"]
    return found


def distributions(modules: Iterable[str], extra: Iterable[str] = ()) -> dict[str, dict]:
    """The distributions that provide the imported top-level modules (and `extra` names):
    {name: {version, bytes, files}}."""
    providers = importlib.metadata.packages_distributions()
    names = {dist for module in modules for dist in providers.get(module.partition(".")[0], ())} | set(extra)
    out = {}
    for name in sorted(names):
        try:
            version, size, files = _distribution_size(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        out[name] = {"version": version, "bytes": size, "files": files}
    return out


def libraries(maps_text: str) -> dict[str, int]:
    """The shared libraries a process maps (/proc/PID/maps): {path: bytes on disk}."""
    out = {}
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        path = parts[5].strip() if len(parts) == 6 else ""
        if ".so" in Path(path).name and path not in out:
            try:
                out[path] = os.stat(path).st_size
            except OSError:
                continue
    return out


def installed(modules: Iterable[str] | None = None, maps_text: str | None = None) -> dict:
    """What this process needed installed: its distributions and, apart, the shared libraries it
    mapped that no distribution ships (the system's: libc, libgomp, a system cuDNN)."""
    if modules is None:
        modules = [m for m in list(sys.modules) if "." not in m]
    if maps_text is None:
        try:
            maps_text = Path("/proc/self/maps").read_text()
        except OSError:
            maps_text = ""
    libs = libraries(maps_text)
    packaged = tuple({os.path.realpath(p) for p in sys.path if "site-packages" in p or "dist-packages" in p})
    outside = [p for p in libs if not os.path.realpath(p).startswith(packaged)]
    owned = owners(p for p in outside if os.path.realpath(p).startswith(os.path.realpath(sys.prefix)))
    system = {p: libs[p] for p in outside if os.path.realpath(p) not in owned}
    return {"distributions": distributions(modules, owned.values()), "system_libraries": system,
            "libraries_mapped": len(libs)}
