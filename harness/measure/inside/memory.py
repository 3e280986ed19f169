"""What a level costs besides time, read inside its worker (one process per implementation, so one
level's import never counts against another's): host memory by stage, the GPU memory its framework
holds, and what had to be installed for it (the distributions it imported, the shared libraries it
mapped, their size on disk; what a pip install of the level's own distributions requires, apart:
requires.closure; the system tools it runs, as its worker found them).

Host memory is Linux's own account of the process (/proc/self/status): VmRSS, resident now, and
VmHWM, the peak since the process started or since the peak was last reset by writing "5" to
/proc/self/clear_refs (Linux 4.0+; where that is refused the peak is the process's, and
`peak_reset` says so).

    rss() -> (resident, peak) bytes            reset_peak() -> bool
    gpu(frameworks) -> dict                    the allocators' own counters, where a GPU framework is loaded
    loaded() -> {files, maps}                  what this process imported and mapped (read in the worker)
    installed(files, maps, own, tools) -> dict the distributions owning each file imported or library
                                               mapped (by file, not by top-level name), with sizes;
                                               what a pip install of the level's own distributions
                                               requires (requires.closure); its system tools
                                               (read in the runner: its memory is not the level's)
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


def _record_heads(dist: importlib.metadata.Distribution) -> set[str]:
    """The first path component of every file in a distribution's RECORD ('nvidia', 'numpy.libs',
    '..' for files outside its folder): read from the text, without parsing every entry."""
    text = dist.read_text("RECORD") or ""
    return {line.split(",", 1)[0].split("/", 1)[0] for line in text.splitlines() if line}


def _file_index(paths: set[str]) -> dict[str, str]:
    """{path of every file the RECORD of a distribution that may own one of `paths` lists: that
    distribution's name}. A distribution may own a path when its folder holds the path's first
    component (or the path lies outside that folder): only those RECORDs are parsed whole."""
    index: dict[str, str] = {}
    heads_of: dict[str, set[str]] = {}  # a distributions' folder -> the paths' first components in it
    for dist in importlib.metadata.distributions():
        try:
            base = os.path.realpath(str(dist.locate_file("")))
        except (OSError, TypeError, ValueError):
            continue
        if base not in heads_of:
            heads_of[base] = {os.path.relpath(path, base).split(os.sep, 1)[0] for path in paths}
        if not _record_heads(dist) & heads_of[base]:
            continue
        name = dist.metadata["Name"]
        for file in dist.files or ():
            index.setdefault(os.path.normpath(os.path.join(base, str(file))), name)
    return index


def owners(paths: Iterable[str]) -> dict[str, str]:
    """{real path: the installed distribution whose RECORD lists it} for each of `paths` (a module's
    file, a mapped library, inside site-packages or out of it: the onednn wheel's lib/libdnnl.so.3);
    paths no distribution lists are left out. Each file is its own distribution's: a namespace
    package (`nvidia`) bills only the nvidia-* distributions whose files were loaded."""
    wanted = {os.path.realpath(p) for p in paths}
    if not wanted:
        return {}
    index = _file_index(wanted)
    return {path: index[path] for path in wanted if path in index}


def module_files() -> list[str]:
    """The file of every module this process imported (Python sources, compiled extensions)."""
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path:
            found.append(path)
    return found


def distributions(owned: dict[str, str]) -> dict[str, dict]:
    """The distributions that own the loaded files (owners' answer): {name: {version, bytes, files,
    loaded}}; bytes and files: the whole distribution (what must be installed), loaded: how many of
    its files this process imported or mapped."""
    loaded: dict[str, int] = {}
    for name in owned.values():
        loaded[name] = loaded.get(name, 0) + 1
    out = {}
    for name in sorted(loaded):
        try:
            version, size, files = _distribution_size(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        out[name] = {"version": version, "bytes": size, "files": files, "loaded": loaded[name]}
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


def loaded() -> dict:
    """What this process loaded, for installed() in another process: {files: its modules' files,
    maps: its memory map's text}."""
    try:
        maps_text = Path("/proc/self/maps").read_text()
    except OSError:
        maps_text = ""
    return {"files": module_files(), "maps": maps_text}


def installed(files: Iterable[str] | None = None, maps_text: str | None = None,
              own: Iterable[str] = (), tools: dict | None = None,
              also: Iterable[str] = ()) -> dict:
    """What this process needed installed: the distributions that own a file it imported or a
    library it mapped (files: the imported modules' files, by default this process's), and, apart,
    the shared libraries it mapped that no distribution ships (the system's: libc, libgomp, a
    system cuDNN). `required`: what a pip install of the level's own distributions (own: its
    registry `versions`) needs, requires.closure; None where none of them is installed (the C
    level, the null level: what they loaded is their bill); `also` joins the closure there (what
    the harness's weights reader needs: harness.data.weights.DISTRIBUTIONS). `system_tools`:
    programs the level runs that no distribution ships (the C compiler: lenet_c.build.toolchain), as
    its worker found them, or None."""
    from harness.measure.inside import requires  # here: a worker, which never asks, skips packaging

    if files is None:
        files = module_files()
    if maps_text is None:
        try:
            maps_text = Path("/proc/self/maps").read_text()
        except OSError:
            maps_text = ""
    libs = libraries(maps_text)
    owned = owners([*files, *libs])
    system = {p: libs[p] for p in libs if os.path.realpath(p) not in owned}
    required = requires.closure(own, _distribution_size, also)
    return {"distributions": distributions(owned), "system_libraries": system,
            "libraries_mapped": len(libs), "required": required if required["of"] else None,
            "system_tools": tools}
