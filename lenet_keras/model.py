"""LeNet-5 in Keras, the level most students start at.

Variants, from most convenient to fastest per image:
`predict` (model.predict: builds a tf.data pipeline and a callback loop on every call),
`predict_on_batch`, `call` (model(x), eager), `function` (model(x) in a tf.function),
`xla` (the same, compiled with XLA).
"""

import keras
import tensorflow as tf
from keras import layers

from harness import tfsupport
from harness.base import LeNet
from harness.registry import REGISTRY


def build_model() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            layers.Conv2D(6, 5, padding="same", activation="relu", name="conv1"),
            layers.MaxPooling2D(2, name="pool1"),
            layers.Conv2D(16, 5, padding="valid", activation="relu", name="conv2"),
            layers.MaxPooling2D(2, name="pool2"),
            layers.Flatten(name="flatten"),
            layers.Dense(120, activation="relu", name="fc1"),
            layers.Dense(84, activation="relu", name="fc2"),
            layers.Dense(10, activation="softmax", name="fc3"),
        ],
        name="lenet5",
    )


class KerasLeNet(LeNet):
    spec = REGISTRY["keras"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.tf_device = tfsupport.configure(device)  # "/CPU:0" or "/GPU:0"
        with tf.device(self.tf_device):
            self.model = build_model()
            self.model.load_weights(weights_path)
        forward = lambda x: self.model(x, training=False)  # noqa: E731
        if self.variant == "function":
            forward = tf.function(forward)
        elif self.variant == "xla":
            forward = tf.function(forward, jit_compile=True)
        self.forward = forward

    def predict(self, images):
        with tf.device(self.tf_device):
            if self.variant == "predict":
                return self.model.predict(images, verbose=0)
            if self.variant == "predict_on_batch":
                return self.model.predict_on_batch(images)
            return self.forward(tf.convert_to_tensor(images)).numpy()
