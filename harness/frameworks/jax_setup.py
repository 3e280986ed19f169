"""What the JAX levels (jax ops, Keras on JAX) share with the harness: precision and device."""

from typing import Any

from harness.frameworks.gpu_guard import require_gpu


def configure(device: str, dtype: str = "float32") -> Any:
    """Set JAX's precision for this process and return the jax.Device for `device`, or raise
    Unavailable when JAX sees no GPU. Thread counts come from XLA_FLAGS (harness.registry)."""
    import jax

    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)  # without it float64 arrays silently become float32
    # float32 means float32: no TF32 in GPU convolutions and matmuls (the cuDNN level's rule).
    jax.config.update("jax_default_matmul_precision", "highest")
    if device != "gpu":
        return jax.devices("cpu")[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    require_gpu(bool(gpus), f"JAX {jax.__version__}", "install 'jax[cuda12]' (or 'jax[cuda13]')",
                aside=f" (its backend is {jax.default_backend()})")
    return gpus[0]
