"""conv2's backward pass of LeNet-5, and nothing else: fill in `backward`.

The grader imports this file in a fresh process, builds the one harness.base.Trainer subclass in it
and calls `backward("conv2", x, upstream, kernel, bias)` with the NumPy reference's input to conv2
and its gradient of the loss with respect to conv2's output (after its ReLU and max pool), on the
first 32 training images at the shared initial weights (weights/lenet5_init.weights.h5). It compares
your three gradients with the reference's, then times your call beside the reference's on fresh
images. Keep everything you need in this folder: only the files this one imports count as your
lines of code.

conv2 is a 5x5 "valid" convolution with 16 filters, plus bias, then ReLU, then a 2x2 max pool of
stride 2. The rules the reference keeps (where two reasonable codes differ):
  - ReLU's gradient is 1 above 0 and 0 below; at a pre-activation of exactly 0 the reference takes
    0, and 1 is accepted too
  - a max pool's gradient goes to the first maximum of its 2x2 window, in row-major order
  - NHWC arrays; the kernel (5, 5, C_in, C_out) HWIO, as Keras keeps it; the bias (16,)
"""

import numpy as np  # noqa: F401 (yours from here)

from harness.base import Trainer
from harness.registry import ImplSpec


class StudentConv2(Trainer):
    spec = ImplSpec("student", "lenet:StudentConv2", "numpy", devices=("cpu",), variants=("default",),
                    dtypes=("float32",), package=None, trainer="lenet:StudentConv2",
                    train_variants=("default",))

    def backward(self, name, x, upstream, kernel, bias):
        """conv2's backward ("conv2" is the only name asked). NumPy arrays, N images:

            x         (N, 14, 14, 6)   conv2's input (pool1's output)
            upstream  (N, 5, 5, 16)    the gradient of the batch's mean loss with respect to conv2's
                                       output after its ReLU and max pool
            kernel    (5, 5, 6, 16)    bias (16,)

        Return (dx, dkernel, dbias): the gradients of the batch's mean loss with respect to x, the
        kernel and the bias, shaped as they are (the upstream gradient is already of the mean: sum
        over the batch, never divide again). Recompute the forward pass you need (the
        pre-activation, the pool's choices) from x, kernel and bias.
        """
        raise NotImplementedError("your conv2 backward goes here")
