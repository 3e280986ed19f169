"""LeNet-5 training step with TensorFlow ops: tf.GradientTape over model.logits, plain SGD.

The weights are tf.Variables in the shared file's layouts (HWIO, (in, out)). Variants:
`function` (the whole step traced once into a graph by tf.function), `eager` (op by op).
"""

import numpy as np
import tensorflow as tf

from harness.base import LEARNING_RATE, Trainer
from harness.data import weights
from harness.frameworks import tf_setup
from harness.registry import REGISTRY
from lenet_tf.model import logits


class TFTrainer(Trainer):
    spec = REGISTRY["tf"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        self.tf_device = tf_setup.configure(device)
        with tf.device(self.tf_device):
            self.w = {name: (tf.Variable(layer.kernel.astype(dtype)), tf.Variable(layer.bias.astype(dtype)))
                      for name, layer in weights.read(weights_path).items()}
        self.variables = [v for pair in self.w.values() for v in pair]
        self.step = tf.function(self.sgd_step) if self.variant == "function" else self.sgd_step

    def sgd_step(self, x, labels):
        """x (N, 28, 28, 1), labels (N,) int -> the mean loss before the update."""
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits(self.w, x)))
        for variable, grad in zip(self.variables, tape.gradient(loss, self.variables), strict=True):
            variable.assign_sub(self.learning_rate * grad)
        return loss

    def train_step(self, images, labels):
        with tf.device(self.tf_device):
            x = tf.convert_to_tensor(images, dtype=self.dtype)
            y = tf.convert_to_tensor(np.asarray(labels, dtype=np.int64))
            return float(self.step(x, y))  # float() waits for the step

    def weights(self):
        return {name: weights.Layer(kernel.numpy(), bias.numpy()) for name, (kernel, bias) in self.w.items()}
