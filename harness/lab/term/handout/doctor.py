"""What `lenet-lab` tells a student beside the gate, on a machine they know nothing about (a school's
GPU server, no administrator): what the machine has and where it lives (`doctor`), a test image
drawn in the terminal beside both answers (`show N`), how this machine's speed compares with the
NumPy reference's (timed where the kit was built, scaled by a probe of this machine), the grader's
versions against these, the process's peak memory, and the hint for a shape error in a first call.
Nothing here computes LeNet-5: the probe is plain matrix products.

    info(kit, say)                   the lab, its gate and limits, the grader's versions
    doctor(say)                      Python, NumPy and its BLAS, a GPU and its libraries, and where
    show(kit, n, probs, say)         test image n, the oracle's and (given) the student's probabilities
    machine_probe() -> ns            the median time of the probe's matrix products here
    reference_here(kit) -> ns|None   the reference's time per image estimated for this machine
    speed_line(kit, median_ns, what) -> str   the time per image (or step) against it, WARNING past
                                     the lab's max_ratio
    version_warnings(kit) -> [str]   the grader's Python and NumPy against these
    peak_mb() -> float               this process's peak resident memory
    shape_hint(exc) -> str           '' or the NCHW hint for an error in a first call
"""

import ctypes.util
import importlib.util
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

SHADES = " .:-=+*#%@"  # dark to light: one character per pixel pair, 28 x 14
PROBE_SHAPES = ((784, 25, 6), (100, 150, 16), (1, 400, 120), (1, 120, 84), (1, 84, 10))  # (m, k, n)
PROBE_ROUNDS = 200
SHAPE_WORDS = ("shape", "align", "broadcast", "reshape", "dimension", "axes", "size")
NCHW_HINT = ("a shape error in your first call: if your code is NCHW (channels first, as PyTorch "
             "and many textbooks), the kit's weights are in Keras' layouts; README.md, 'Code written "
             "for NCHW', gives the two conversions (the conv kernels, fc1's rows)")


def machine_probe() -> float:
    """ns: the median over PROBE_ROUNDS of the matrix products one image costs in LeNet-5's shapes
    (random data, float32, one thread's work): what scales the reference's time to this machine."""
    rng = np.random.default_rng(0)
    pairs = [(rng.random((m, k), np.float32), rng.random((k, n), np.float32)) for m, k, n in PROBE_SHAPES]
    times = []
    for _ in range(PROBE_ROUNDS):
        t0 = time.perf_counter_ns()
        for a, b in pairs:
            np.maximum(a @ b, 0.5)
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times))


def reference_here(kit: Any) -> float | None:
    """The reference's time per image on this machine (ns), estimated: its time where the kit was
    built, scaled by this machine's probe over that machine's; None where the kit has none."""
    ref = kit.lab.get("reference") or {}
    if not ref.get("median_ns") or not ref.get("probe_ns"):
        return None
    return float(ref["median_ns"]) * machine_probe() / float(ref["probe_ns"])


def speed_line(kit: Any, median_ns: float, what: str = "image") -> str:
    """The time per image, and against the reference's estimated here, the lab's limit: past it,
    a WARNING that the grader gives gate points only (not timed, no speed points)."""
    lab = kit.lab
    line = f"Median time per {what}: {median_ns / 1e3:.1f} us on this machine."
    reference = reference_here(kit)
    if reference is None:
        return line
    ratio, limit = median_ns / reference, lab["limits"]["max_ratio"]
    line += (f" {lab['rank_by']} takes about {reference / 1e3:.1f} us here (timed where this kit was built, "
             f"scaled to this machine): about {ratio:.0f}x {lab['rank_by']}.")
    if ratio > limit:
        line += (f"\nWARNING: the lab's speed limit is {limit:g}x {lab['rank_by']}: past it the grader "
                 "checks a part of the gate only, gives no speed points and does not time you. Make predict "
                 "faster before handing in (one image: a few whole-array operations per layer).")
    return line


def version_warnings(kit: Any) -> list[str]:
    """The grader's Python (major.minor) and NumPy (major) against this machine's."""
    grader = kit.lab.get("grader") or {}
    out = []
    mine = {"python": platform.python_version(), "numpy": np.__version__}
    for name, parts in (("numpy", 1), ("python", 2)):
        theirs = grader.get(name)
        if theirs and theirs.split(".")[:parts] != mine[name].split(".")[:parts]:
            out.append(f"WARNING: the grader runs {name} {theirs}, this is {name} {mine[name]}: code that "
                       f"works here may fail there (NumPy 2 removed np.product, np.float_, ...); use "
                       f"{name} {'.'.join(theirs.split('.')[:parts])}.x")
    return out


def peak_mb() -> float:
    """This process's peak resident memory, MiB (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def shape_hint(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".lower()
    shaped = isinstance(exc, (ValueError, IndexError)) and any(w in text for w in SHAPE_WORDS)
    return NCHW_HINT if shaped else ""


def show(kit: Any, n: int, probs: np.ndarray | None, say: Callable[[str], None] = print) -> None:
    """Test image n (28 x 28, two pixel rows a character) beside the oracle's probabilities and, where
    given, the student's: the images a failed gate names can be looked at here."""
    if not 0 <= n < len(kit.images):
        raise ValueError(f"show: expected an image number from 0 to {len(kit.images) - 1}, found {n}")
    image = kit.images[n].astype(np.float64) / 255.0
    pairs = (image[0::2] + image[1::2]) / 2  # (14, 28)
    art = ["".join(SHADES[min(int(v * len(SHADES)), len(SHADES) - 1)] for v in row) for row in pairs]
    oracle = kit.oracle[n]
    rows = [f"  digit  reference{'   yours' if probs is not None else ''}"]
    for digit in range(10):
        mine = f"  {probs[digit]:7.4f}" if probs is not None else ""
        off = probs is not None and abs(probs[digit] - oracle[digit]) > kit.lab["gate"]["max_abs_diff"]
        mark = " <" if off else ""
        rows.append(f"  {digit:5d}  {oracle[digit]:9.4f}{mine}{mark}")
    say(f"test image {n}: the reference says {int(oracle.argmax())}"
        + (f", yours {int(np.argmax(probs))}" if probs is not None else ""))
    for i in range(max(len(art), len(rows))):
        say(f"{art[i] if i < len(art) else ' ' * 28}{rows[i] if i < len(rows) else ''}")


def info(kit: Any, say: Callable[[str], None] = print) -> None:
    """The lab, its gate and limits, the grader's versions (and a warning where these differ)."""
    lab = kit.lab
    grader = lab.get("grader") or {}
    say(f"the grader runs: Python {grader.get('python', '?')}, NumPy {grader.get('numpy', '?')}")
    for warning in version_warnings(kit):
        say(warning)
    say(f"lab {lab['name']}: {lab['title']} ({lab['device']}, {lab['dtype']})")
    for line in lab["info"]:  # its kind's: the file to write, the gate (kinds.Kind.kit_info)
        say(line)
    say(f"ranked by: the ratio to {lab['rank_by']}, timed beside you by the grader; limits: "
        + ", ".join(f"{k} {v}" for k, v in lab["limits"].items()))
    say(f"weights: {kit.weights}")


def _where(module: str) -> str:
    found = importlib.util.find_spec(module)
    return (found.origin or "a namespace package") if found else "not found"


def _blas() -> str:
    """NumPy's BLAS as its build says, and the library this process actually loaded (its path)."""
    built = ""
    try:
        config = np.show_config(mode="dicts")  # NumPy >= 1.25
        blas = (config or {}).get("Build Dependencies", {}).get("blas", {})
        built = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except (TypeError, AttributeError):
        pass
    loaded = []
    try:
        with open("/proc/self/maps") as maps:
            loaded = sorted({line.split()[-1] for line in maps if any(
                k in line for k in ("blas", "mkl", "accelerate", "lapack")) and "/" in line})
    except OSError:
        pass
    return f"{built or 'unknown build'}; loaded: {', '.join(loaded) or 'none found in /proc/self/maps'}"


def _gpu() -> list[str]:
    smi = shutil.which("nvidia-smi")
    lines = [f"nvidia-smi: {smi or 'not found on PATH'}"]
    if smi:
        try:
            query = ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
            done = subprocess.run([smi, *query], capture_output=True, text=True, timeout=20)
            lines.append(f"GPU(s): {done.stdout.strip() or done.stderr.strip() or 'none listed'}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            lines.append(f"GPU(s): nvidia-smi failed ({exc})")
    for lib in ("cudart", "cublas", "cudnn", "nvrtc", "cuda"):
        lines.append(f"lib{lib}: {ctypes.util.find_library(lib) or 'not found by the loader'}")
    lines.append(f"LD_LIBRARY_PATH: {os.environ.get('LD_LIBRARY_PATH') or '(not set)'}")
    lines.append(f"cupy: {_where('cupy')}")
    return lines


def doctor(say: Callable[[str], None] = print) -> None:
    """What this machine has for the lab, and where each lives."""
    say(f"Python {platform.python_version()}: {sys.executable} (prefix {sys.prefix})")
    say(f"NumPy {np.__version__}: {os.path.dirname(np.__file__)}")
    say(f"BLAS: {_blas()}")
    say(f"CPU: {platform.machine()}, {os.cpu_count()} logical CPUs; this process may use "
        f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}")
    for line in _gpu():
        say(line)
