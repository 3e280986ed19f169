"""What the PyTorch levels (torch ops, Keras on PyTorch) share with the harness: threads,
precision and device."""

import os
from typing import Any

from harness.frameworks.gpu_guard import require_gpu


def configure(device: str) -> Any:
    """Apply the harness's thread counts (harness.machine.procenv) and return the torch.device for
    `device`, or raise Unavailable when PyTorch sees no GPU."""
    import torch

    if os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if os.environ.get("TF_NUM_INTEROP_THREADS"):  # the harness's inter-op count, for every framework
        try:
            torch.set_num_interop_threads(int(os.environ["TF_NUM_INTEROP_THREADS"]))
        except RuntimeError:
            pass  # inter-op work already started in this process: its pool is fixed
    # float32 means float32: no TF32 tensor-core convolutions or matmuls (the cuDNN level's rule).
    # torch >= 2.9 has fp32_precision and warns on the old allow_tf32 flags (not to be mixed).
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        cudnn: Any = torch.backends.cudnn  # its `conv` (torch >= 2.9) is not in torch's type stubs
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        cudnn.conv.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if device != "gpu":
        return torch.device("cpu")
    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    require_gpu(torch.cuda.is_available(), f"PyTorch {torch.__version__} ({build})",
                "install the CUDA build of torch")
    return torch.device("cuda", 0)


def free(device: Any) -> None:
    """Give the CUDA caching allocator's memory back (polite on a shared GPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
