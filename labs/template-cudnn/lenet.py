"""LeNet-5 for the cuDNN lab: fill in predict (and anything it needs) with the cuDNN C API on the
GPU, then check it before handing in:

    python -m harness lab check cudnn path/to/lenet.py

The grader imports this file in a fresh process, builds the one harness.base.LeNet subclass in
it with the shared weights on the GPU (device "gpu"), and calls predict. Keep everything you need
in this folder. cuDNN through ctypes (ctypes.CDLL("libcudnn.so.9"): cudnnCreate, the tensor,
filter, convolution, pooling and activation descriptors, cudnnConvolutionForward, ...), device
memory through CuPy (cupy.empty, .data.ptr for a raw pointer); the dense layers may use cuBLAS
(ctypes) or CuPy's matmul. Layouts of the weights file: conv kernels (5, 5, C_in, C_out) HWIO,
dense kernels (inputs, outputs); cuDNN's NCHW wants the conv kernels as (C_out, C_in, 5, 5).
"""

import numpy as np

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec


class StudentLeNet(LeNet):
    spec = ImplSpec("student", "lenet:StudentLeNet", "cudnn", devices=("gpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def __init__(self, weights_path, device="gpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        # {"conv1": Layer(kernel, bias), ..., "fc3": ...} in Keras layouts (see above)
        self.w = weights.read(weights_path)

    def predict(self, images):
        """images (N, 28, 28, 1) float32 in [0, 1] -> class probabilities (N, 10), a NumPy array.

        conv1 6x5x5 "same" + ReLU -> max pool 2x2 -> conv2 16x5x5 "valid" + ReLU -> max pool 2x2
        -> flatten in NHWC order (400) -> dense 120 ReLU -> dense 84 ReLU -> dense 10 softmax
        """
        x = np.asarray(images, dtype=self.dtype)  # noqa: F841 (yours from here)
        raise NotImplementedError("your LeNet-5 on cuDNN goes here")
