"""LeNet-5 in Keras 3, the level most students start at: one model, three backends.

Keras reads KERAS_BACKEND once, when it is first imported, so each backend runs in a process
of its own (the harness's workers set the variable from the registry). Variants, from most
convenient to fastest per image:
`predict` (model.predict: a data adapter, an iterator and a callback loop on every call),
`predict_on_batch`, `call` (model(x), eager), and each backend's compiled path:
TensorFlow `function` and `xla` (model(x) in a tf.function, without and with XLA), JAX `jit`
(a jitted stateless call), PyTorch `compile` (torch.compile of model(x)).
"""

import keras
import numpy as np
from keras import layers

from harness import registry
from harness.base import LeNet
from harness.errors import HarnessError
from harness.frameworks import jax_setup, tf_setup, torch_setup
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


def require_backend(name: str) -> None:
    wanted, found = registry.KERAS_BACKENDS[name], keras.backend.backend()
    if found != wanted:
        raise HarnessError(
            f"{name} needs Keras' {wanted} backend, but keras was imported in this process with "
            f"the {found} backend: set KERAS_BACKEND={wanted} before the first 'import keras' "
            "(the harness's workers do; one backend per process)"
        )


class KerasLeNet(LeNet):
    """Keras on TensorFlow."""

    spec = REGISTRY["keras"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        require_backend(self.spec.name)
        self.configure(device)
        self.scope = f"{device}:0"  # keras.device() names cpu:0 / gpu:0 alike on every backend
        with keras.device(self.scope):
            self.model = build_model()
            self.model.load_weights(weights_path)
        self.compiled = None
        if self.variant not in ("predict", "predict_on_batch", "call"):
            self.compiled = self.compile(self.variant)

    def configure(self, device):
        tf_setup.configure(device)  # threads, no TF32, Unavailable without a GPU

    def compile(self, variant):
        """images (N, 28, 28, 1) -> probabilities on the host, through the compiled path."""
        import tensorflow as tf

        forward = tf.function(lambda x: self.model(x, training=False), jit_compile=variant == "xla")
        return lambda images: forward(tf.convert_to_tensor(images)).numpy()

    def predict(self, images):
        with keras.device(self.scope):
            if self.variant == "predict":
                return self.model.predict(images, verbose=0)
            if self.variant == "predict_on_batch":
                return self.model.predict_on_batch(images)
            if self.variant == "call":
                return keras.ops.convert_to_numpy(self.model(images, training=False))
            return self.compiled(images)


class KerasJaxLeNet(KerasLeNet):
    """Keras on JAX."""

    spec = REGISTRY["keras_jax"]

    def configure(self, device):
        jax_setup.configure(device)

    def compile(self, variant):
        """`jit`: model.stateless_call, the pure function Keras keeps for JAX, under jax.jit."""
        import jax

        state = ([v.value for v in self.model.trainable_variables],
                 [v.value for v in self.model.non_trainable_variables])

        @jax.jit
        def forward(trainable, non_trainable, x):
            y, _ = self.model.stateless_call(trainable, non_trainable, x, training=False)
            return y

        return lambda images: np.asarray(forward(*state, images))


class KerasTorchLeNet(KerasLeNet):
    """Keras on PyTorch."""

    spec = REGISTRY["keras_torch"]

    def configure(self, device):
        self.torch_device = torch_setup.configure(device)

    def compile(self, variant):
        """`compile`: model(x) through torch.compile (inductor), without autograd."""
        import torch

        forward = torch.compile(lambda x: self.model(x, training=False), dynamic=False)

        def run(images):
            with torch.no_grad():
                return forward(torch.from_numpy(images).to(self.torch_device)).cpu().numpy()

        return run

    def close(self):
        torch_setup.free(self.torch_device)
