"""LeNet-5 with TensorFlow ops (tf.nn.conv2d, bias_add, relu, max_pool2d, matmul, softmax).

tf.nn.conv2d takes NHWC input and HWIO filters, the shared file's layout, so the weights are
used as they are. Variants: `eager` (op by op), `function` (traced once into a graph),
`xla` (the graph compiled by XLA).
"""

import tensorflow as tf

from harness.base import LeNet
from harness.data import weights
from harness.frameworks import tf_setup
from harness.registry import REGISTRY


def logits(w, x):
    """w {"conv1": (kernel HWIO, bias), ...} constants or variables, x (N, 28, 28, 1) -> (N, 10)."""
    x = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w["conv1"][0], 1, "SAME"), w["conv1"][1]))
    x = tf.nn.max_pool2d(x, 2, 2, "VALID")                       # (N, 14, 14, 6)
    x = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w["conv2"][0], 1, "VALID"), w["conv2"][1]))
    x = tf.nn.max_pool2d(x, 2, 2, "VALID")                       # (N, 5, 5, 16)
    x = tf.reshape(x, (-1, 400))                                 # NHWC flatten order
    x = tf.nn.relu(tf.matmul(x, w["fc1"][0]) + w["fc1"][1])      # (N, 120)
    x = tf.nn.relu(tf.matmul(x, w["fc2"][0]) + w["fc2"][1])      # (N, 84)
    return tf.matmul(x, w["fc3"][0]) + w["fc3"][1]               # (N, 10) logits


class TFLeNet(LeNet):
    spec = REGISTRY["tf"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.tf_device = tf_setup.configure(device)  # "/CPU:0" or "/GPU:0"
        with tf.device(self.tf_device):
            self.w = {
                name: (tf.constant(layer.kernel, dtype=dtype), tf.constant(layer.bias, dtype=dtype))
                for name, layer in weights.read(weights_path).items()
            }
        forward = {
            "eager": self.forward,
            "function": tf.function(self.forward),
            "xla": tf.function(self.forward, jit_compile=True),
        }
        self.run = forward[self.variant]

    def forward(self, x):
        return tf.nn.softmax(logits(self.w, x))                      # (N, 10)

    def predict(self, images):
        with tf.device(self.tf_device):
            x = tf.convert_to_tensor(images, dtype=self.dtype)
            return self.run(x).numpy()  # .numpy() waits for the device and copies to the host
