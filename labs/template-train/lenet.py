"""One SGD step of LeNet-5 for the training lab: fill in train_step (forward, backward, update),
then check it before handing in, from the unzipped kit's folder (lab-kit-cpu_train):

    python -m lenet_lab check path/to/lenet.py

(or, with the kit installed, `lenet-lab check path/to/lenet.py` from anywhere)

The grader imports this file in a fresh process, builds the one harness.base.Trainer subclass in
it from the shared initial weights (weights/lenet5_init.weights.h5), runs three steps of 32
training images and compares, after each step, your loss first and then every weight with the
NumPy reference's. Keep everything you need in this folder: only the files this one imports count
as your lines of code.

The rules the reference keeps (where two reasonable codes differ):
  - the loss is softmax cross-entropy averaged over the batch, taken before the update; every
    gradient is of that mean (divide by N once, at the loss)
  - ReLU's gradient is 1 above 0 and 0 below; at a pre-activation of exactly 0 the reference takes
    0, and 1 is accepted too (for the whole step): at the initial weights, whose biases are 0, a
    5x5 window of background pixels is exactly 0
  - a max pool's gradient goes to the first maximum of its 2x2 window, in row-major order
  - fc1's input is flattened in NHWC order: reshape (N, 5, 5, 16) to (N, 400) as it is
  - kernels: conv (5, 5, C_in, C_out) HWIO, dense (inputs, outputs); biases (outputs,)
"""

import numpy as np

from harness.base import LEARNING_RATE, Trainer
from harness.data import weights
from harness.registry import ImplSpec


class StudentTrainer(Trainer):
    spec = ImplSpec("student", "lenet:StudentTrainer", "numpy", devices=("cpu",), variants=("default",),
                    dtypes=("float32",), package=None, trainer="lenet:StudentTrainer",
                    train_variants=("default",))

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        # {"conv1": Layer(kernel, bias), ..., "fc3": ...} in Keras layouts:
        # conv kernels (5, 5, C_in, C_out) HWIO, dense kernels (inputs, outputs)
        self.w = {name: weights.Layer(k.astype(dtype), b.astype(dtype))
                  for name, (k, b) in weights.read(weights_path).items()}

    def train_step(self, images, labels):
        """images (N, 28, 28, 1) float32 in [0, 1], labels (N,) int64 -> the batch's mean loss (a float),
        computed before the update.

        Forward as in inference (conv1 6x5x5 "same" + ReLU -> max pool 2x2 -> conv2 16x5x5 "valid"
        + ReLU -> max pool 2x2 -> flatten in NHWC order (400) -> dense 120 ReLU -> dense 84 ReLU ->
        dense 10), the loss softmax cross-entropy averaged over the batch, its gradients by hand
        (a max pool's gradient goes to the first maximum of its 2x2 window, in row-major order),
        then plain SGD on every kernel and bias: w -= self.learning_rate * dw.
        """
        x = np.asarray(images, dtype=self.dtype)  # noqa: F841 (yours from here)
        raise NotImplementedError("your forward, backward and update go here")

    def backward(self, name, x, upstream, kernel, bias):
        """Optional, for partial credit where the lab gives points per stage: one layer's backward
        pass on its own. The grader hands each layer the reference's input to it (x), the reference's
        gradient of the loss with respect to its output (upstream) and its weights (the initial ones:
        use these, not self.w, which your steps have moved), so a wrong layer costs only its own
        points. Return (dx, dkernel, dbias): the gradients of the batch's mean loss with respect to
        x, the kernel and the bias, shaped as they are. NumPy arrays, NHWC, N images:

            "fc3"    x (N, 84)          upstream: the labels (N,) int64   dense, then softmax
                                                  cross-entropy averaged over the batch
            "fc2"    x (N, 120)         upstream (N, 84)          dense + ReLU
            "fc1"    x (N, 5, 5, 16)    upstream (N, 120)         flatten in NHWC order, dense + ReLU
            "conv2"  x (N, 14, 14, 6)   upstream (N, 5, 5, 16)    5x5 "valid" + ReLU, max pool 2x2
            "conv1"  x (N, 28, 28, 1)   upstream (N, 14, 14, 6)   5x5 "same" + ReLU, max pool 2x2
                                                                  (its dx is not graded: None will do)

        Kernels as in self.w: conv (5, 5, C_in, C_out), dense (inputs, outputs). The points of the
        layers right here count when train_step fails the gate, whatever stopped it (a wrong step, a
        weight of the wrong shape, an error). A layer left out (this NotImplementedError) gets no points
        of its own; train_step is graded whole either way.
        """
        raise NotImplementedError(name)

    def stage(self, name, x):
        """Optional, no points: one layer's forward output on its own, at the initial weights (use
        the kernels weights.read gave you, not the ones your steps moved). Where your loss differs
        from the reference's, the grader asks each stage on the reference's input to it and names the
        first layer that departs (without it: "the forward pass or the loss"). NumPy, NHWC, N images:

            "conv1"    (N, 28, 28, 1)  -> (N, 28, 28, 6)    5x5 "same" + bias + ReLU
            "pool1"    (N, 28, 28, 6)  -> (N, 14, 14, 6)    max 2x2, stride 2
            "conv2"    (N, 14, 14, 6)  -> (N, 10, 10, 16)   5x5 "valid" + bias + ReLU
            "pool2"    (N, 10, 10, 16) -> (N, 5, 5, 16)     max 2x2, stride 2
            "fc1"      (N, 5, 5, 16)   -> (N, 120)          flatten in NHWC order, dense + ReLU
            "fc2"      (N, 120)        -> (N, 84)           dense + ReLU
            "fc3"      (N, 84)         -> (N, 10)           dense (logits: no softmax)
            "softmax"  (N, 10)         -> (N, 10)           probabilities
        """
        raise NotImplementedError(name)

    def weights(self):
        """The current weights, as read: {"conv1": Layer(kernel, bias), ...} in Keras layouts, each
        kernel and bias in its own shape (a bias (120,), never (1, 120))."""
        return {name: weights.Layer(k.copy(), b.copy()) for name, (k, b) in self.w.items()}
