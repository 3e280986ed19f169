"""Is there an NVIDIA GPU here? Answered without importing CUDA, CuPy or a framework."""

import os
import shutil
import subprocess


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
