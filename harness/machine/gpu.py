"""Is there an NVIDIA GPU here? Answered without importing CUDA, CuPy or a framework."""

import os
import shutil
import subprocess
from collections.abc import Iterable


def absent_reason() -> str | None:
    """None when a GPU is usable by this process, else why not (one line)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"no GPU: CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    if not shutil.which("nvidia-smi"):
        if os.path.exists("/dev/nvidia0"):
            return None
        return "no NVIDIA GPU on this machine (no nvidia-smi, no /dev/nvidia0)"
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi -L failed: {exc}"
    if done.returncode != 0 or "GPU" not in done.stdout:
        message = (done.stderr or done.stdout).strip().splitlines()
        return f"no usable NVIDIA GPU (nvidia-smi -L: {message[0] if message else done.returncode})"
    return None


def visible_gpu_id() -> str:
    """The GPU this process times on, as CUDA_VISIBLE_DEVICES' first entry names it (an index, or a
    UUID); "0" when it is not set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return visible or "0"


def lock_id() -> str:
    """The GPU this process times on, as the GPU lock names it: its UUID, the same in every job and
    for every user of a node (Slurm renumbers each job's GPUs from 0 in CUDA_VISIBLE_DEVICES, so two
    jobs on two GPUs of one node would both say "0", and two on one GPU may say "0" and "1"); the
    visible index when no UUID can be read (no nvidia-smi)."""
    visible = visible_gpu_id()
    return uuid_of(visible, gpu_listing()) or visible


def uuid_of(visible: str, listing: str | None) -> str | None:
    """The UUID of the GPU that CUDA_VISIBLE_DEVICES' first entry `visible` names, from nvidia-smi's
    `--query-gpu=uuid --format=csv,noheader` (`listing`: one line per GPU this process may use, in
    order: inside a job whose devices Slurm's cgroup constrains, only the job's). An entry that is a
    UUID (GPU-..., MIG-...) is its own; an index is the position in the listing; None when the
    listing does not have it."""
    if visible.startswith(("GPU-", "MIG-")):
        return visible
    lines = [line.strip() for line in (listing or "").splitlines()]
    uuids = [line for line in lines if line.startswith(("GPU-", "MIG-"))]
    if not visible.isdigit() or int(visible) >= len(uuids):
        return None
    return uuids[int(visible)]


def gpu_listing() -> str | None:
    """nvidia-smi's UUIDs of the GPUs this process may use, one a line; None without nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def sample(own_pids: Iterable[int] = ()) -> dict | None:
    """GPU utilization and the compute processes that are not ours, or None without a GPU.

    NVML (nvidia-ml-py) where installed, nvidia-smi otherwise.
    """
    gpu_id = visible_gpu_id()
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = (pynvml.nvmlDeviceGetHandleByIndex(int(gpu_id)) if gpu_id.isdigit()
                      else pynvml.nvmlDeviceGetHandleByUUID(gpu_id))
            util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
            pids = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no pynvml, or NVML refuses: ask nvidia-smi
        if not shutil.which("nvidia-smi"):
            return None
        target = ["-i", gpu_id]
        try:
            util_out = subprocess.run(["nvidia-smi", *target, "--query-gpu=utilization.gpu",
                                       "--format=csv,noheader,nounits"],
                                      capture_output=True, text=True, timeout=10).stdout
            apps = subprocess.run(["nvidia-smi", *target, "--query-compute-apps=pid",
                                   "--format=csv,noheader"], capture_output=True, text=True,
                                  timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        try:
            util = float(util_out.strip().splitlines()[0])
        except (ValueError, IndexError):
            return None
        pids = [int(p) for p in apps.split() if p.strip().isdigit()]
    others = sorted(set(pids) - set(own_pids))
    return {"utilization_pct": float(util), "other_pids": others}


BUSY_UTILIZATION_PCT = 5.0


def contention(samples: list, busy_before_run: dict | None = None) -> str | None:
    """Why measurements around these samples were contended, or None.

    Other compute processes on the GPU at a sample are the evidence. Utilization is used
    only from the sample taken before this run touched the GPU: NVML's utilization is a
    trailing average, so later samples would also see our own work.
    """
    for s in samples:
        if s and s["other_pids"]:
            return f"other processes on the GPU: pids {s['other_pids']}"
    if busy_before_run and busy_before_run["utilization_pct"] > BUSY_UTILIZATION_PCT:
        return f"GPU {busy_before_run['utilization_pct']:.0f}% busy before this run started"
    return None
