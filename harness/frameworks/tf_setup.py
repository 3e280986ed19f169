"""What the TF and Keras levels share with the harness: device choice and thread pools."""

import os

from harness.frameworks.gpu_guard import require_gpu


def configure(device: str) -> str:
    """Apply thread settings from the environment (harness.machine.procenv) and return the TF device
    name for `device`, or raise Unavailable when TF sees no GPU."""
    import tensorflow as tf

    threading = tf.config.threading
    for name, setter in (("TF_NUM_INTRAOP_THREADS", threading.set_intra_op_parallelism_threads),
                         ("TF_NUM_INTEROP_THREADS", threading.set_inter_op_parallelism_threads)):
        if os.environ.get(name):
            try:
                setter(int(os.environ[name]))
            except RuntimeError:
                pass  # TF already initialised in this process: its pools are fixed
    # float32 means float32: no TF32 tensor-core matmuls/convolutions (on by default on Ampere+),
    # the same rule as the cuDNN level, so every level agrees with the reference to 1e-5.
    tf.config.experimental.enable_tensor_float_32_execution(False)
    if device != "gpu":
        return "/CPU:0"
    build = "a CUDA build" if tf.test.is_built_with_cuda() else "the CPU-only build"
    require_gpu(bool(tf.config.list_physical_devices("GPU")), f"TensorFlow {tf.__version__} ({build})",
                "install 'tensorflow[and-cuda]' in place of tensorflow-cpu")
    return "/GPU:0"
