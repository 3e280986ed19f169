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

    def stage(self, name, x):
        """Optional, for partial credit where the lab gives points per stage: one layer on its own.
        The grader hands each stage the reference's input to it, so a wrong layer costs only its
        own points. Arrays are NumPy, NHWC (channels last), N images:

            "conv1"    (N, 28, 28, 1)  -> (N, 28, 28, 6)    5x5 "same" + bias + ReLU
            "pool1"    (N, 28, 28, 6)  -> (N, 14, 14, 6)    max 2x2, stride 2
            "conv2"    (N, 14, 14, 6)  -> (N, 10, 10, 16)   5x5 "valid" + bias + ReLU
            "pool2"    (N, 10, 10, 16) -> (N, 5, 5, 16)     max 2x2, stride 2
            "fc1"      (N, 5, 5, 16)   -> (N, 120)          flatten in NHWC order, dense + ReLU
            "fc2"      (N, 120)        -> (N, 84)           dense + ReLU
            "fc3"      (N, 84)         -> (N, 10)           dense (logits: no softmax)
            "softmax"  (N, 10)         -> (N, 10)           probabilities

        A stage left out (this NotImplementedError) gets no points of its own; predict is graded
        whole either way.
        """
        raise NotImplementedError(name)
