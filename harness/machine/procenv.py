"""Process settings that must be in place before a framework is imported.

Thread counts are fixed and the same for every CPU implementation (OpenBLAS/OMP/MKL and TF's
intra/inter-op pools): on a small machine, NumPy's throughput collapses when TF's pool and
OpenBLAS's threads fight for the cores. GPU memory: TF grows on demand, JAX does not
preallocate, so a shared GPU server stays usable for the others.
"""

import os
import signal
import subprocess

BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def settings(threads: int = 1, inter_op_threads: int = 1, device: str = "cpu") -> dict[str, str]:
    env = {var: str(threads) for var in BLAS_THREAD_VARS}
    env.update({
        "TF_NUM_INTRAOP_THREADS": str(threads),
        "TF_NUM_INTEROP_THREADS": str(inter_op_threads),
        "TF_CPP_MIN_LOG_LEVEL": "2",           # no C++ INFO/WARNING lines on every import
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",    # polite on a shared GPU
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    })
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = "-1"  # a CPU cell never initialises CUDA or takes GPU memory
    return env


def apply(env: dict[str, str]) -> None:
    """Set them in this process; only useful before numpy/TF/CuPy are imported."""
    os.environ.update(env)


def pin_blas(threads: int) -> None:
    """This process's BLAS pools at `threads` (and its children's, unless they are given their own):
    only before NumPy is imported, whose OpenBLAS reads them once, at load."""
    apply({var: str(threads) for var in BLAS_THREAD_VARS})


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a child started with start_new_session=True, with everything it started (its
    process group), and reap it. A child already gone is fine."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
