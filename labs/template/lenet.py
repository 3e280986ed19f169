"""LeNet-5 for the lab: fill in predict (and anything it needs), then check it before handing in:

    python -m harness lab check cpu_numpy path/to/lenet.py

The grader imports this file in a fresh process, builds the one harness.base.LeNet subclass in
it with the shared weights, and calls predict. Keep everything you need in this folder.
"""

import numpy as np

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec


class StudentLeNet(LeNet):
    spec = ImplSpec("student", "lenet:StudentLeNet", "numpy", devices=("cpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        # {"conv1": Layer(kernel, bias), ..., "fc3": ...} in Keras layouts:
        # conv kernels (5, 5, C_in, C_out) HWIO, dense kernels (inputs, outputs)
        self.w = weights.read(weights_path)

    def predict(self, images):
        """images (N, 28, 28, 1) float32 in [0, 1] -> class probabilities (N, 10), a NumPy array.

        conv1 6x5x5 "same" + ReLU -> max pool 2x2 -> conv2 16x5x5 "valid" + ReLU -> max pool 2x2
        -> flatten in NHWC order (400) -> dense 120 ReLU -> dense 84 ReLU -> dense 10 softmax
        """
        x = np.asarray(images, dtype=self.dtype)  # noqa: F841 (yours from here)
        raise NotImplementedError("your LeNet-5 goes here")
