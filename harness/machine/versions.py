"""Library versions the way their vendors print them, from a run's env.json: cuDNN's integer
(91900 -> 9.19.0) and the CUDA runtime the GPU levels used (not the driver's CUDA)."""

import re


def cudnn_version(env: dict) -> str | None:
    """cuDNN's integer version as its vendor prints it: 91900 -> 9.19.0 (cuDNN 9 counts
    major*10000 + minor*100 + patch; cuDNN 8, major*1000 + minor*100 + patch)."""
    found = env.get("cudnn") or {}
    v = found.get("version") if found.get("found", True) else None
    if not isinstance(v, int):
        return str(v) if v else None
    major, rest = (v // 10000, v % 10000) if v >= 90000 else (v // 1000, v % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def cuda_runtime(env: dict) -> str | None:
    """The CUDA runtime the GPU levels ran on (not the driver): recorded as `cuda_runtime`
    (CUDA's integer, 13000 -> 13.0) where the run has it, else the major version of the
    CuPy wheel that loads it (cupy-cuda13x -> 13.x)."""
    v = env.get("cuda_runtime")
    if isinstance(v, int):
        return f"{v // 1000}.{(v % 1000) // 10}"
    if v:
        return str(v)
    for name in sorted(env.get("packages") or {}):
        m = re.fullmatch(r"cupy-cuda(\d+)x", name)
        if m:
            return f"{m.group(1)}.x ({name})"
    return None
