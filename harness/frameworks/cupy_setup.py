"""CuPy, imported where a GPU level is built: the module with a usable CUDA device, or Unavailable
with the reason (not installed; no driver or device: the frameworks' one no-GPU refusal)."""

from typing import Any

from harness.errors import Unavailable
from harness.frameworks.gpu_guard import require_gpu


def import_cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        raise Unavailable(f"CuPy is not installed ({exc}); make install-gpu") from None
    try:
        count, why = cupy.cuda.runtime.getDeviceCount(), ""
    except Exception as exc:  # CUDARuntimeError: no driver, no device
        count, why = 0, f" ({exc})"
    require_gpu(count > 0, f"CuPy {cupy.__version__}", "install CuPy for its CUDA (make install-gpu)",
                aside=why)
    return cupy
