"""CuPy, imported where a GPU level is built: the module with a usable CUDA device, or Unavailable
with the reason (not installed; no driver or device)."""

from harness.errors import Unavailable


def import_cupy():
    try:
        import cupy
    except ImportError as exc:
        raise Unavailable(f"CuPy is not installed ({exc}); make install-gpu") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, no device
        raise Unavailable(f"no CUDA device usable by CuPy: {exc}") from None
    if count == 0:
        raise Unavailable("no CUDA device usable by CuPy")
    return cupy
