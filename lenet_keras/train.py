"""LeNet-5 training step in Keras 3, as a student writes it: the model of model.py compiled with
SGD and sparse categorical cross-entropy, one batch per call. One class per backend, as in
model.py. Variants: `train_on_batch` (returns the batch's loss, computed before the update) and
`fit` (model.fit on the one batch, epochs=1; history's loss is the mean over its one batch).

The model outputs softmax probabilities (model.py), so the loss is from_logits=False: Keras on
TensorFlow recovers the logits behind the softmax; on JAX and PyTorch it takes log(clip(p)).
"""

import keras
import numpy as np

from harness.base import LEARNING_RATE, Trainer
from harness.data import weights
from harness.frameworks import jax_setup, tf_setup, torch_setup
from harness.registry import REGISTRY
from lenet_keras.model import build_model, require_backend


class KerasTrainer(Trainer):
    """Keras on TensorFlow."""

    spec = REGISTRY["keras"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        require_backend(self.spec.name)
        self.configure(device)
        self.scope = self.device_scope(device)
        with keras.device(self.scope):
            self.model = build_model()
            for name, layer in weights.read(weights_path).items():
                self.model.get_layer(name).set_weights([layer.kernel, layer.bias])
            self.model.compile(optimizer=keras.optimizers.SGD(learning_rate=self.learning_rate),
                               loss=keras.losses.SparseCategoricalCrossentropy())

    def configure(self, device):
        tf_setup.configure(device)

    def device_scope(self, device):
        return f"{device}:0"  # keras.device() names cpu:0 / gpu:0 alike on every backend

    def train_step(self, images, labels):
        x = np.asarray(images, dtype=self.dtype)                     # (N, 28, 28, 1)
        y = np.asarray(labels, dtype=np.int64)                       # (N,)
        with keras.device(self.scope):
            if self.variant == "train_on_batch":
                return float(self.model.train_on_batch(x, y))
            history = self.model.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
            return float(history.history["loss"][0])

    def weights(self):
        return {name: weights.Layer(*self.model.get_layer(name).get_weights()) for name in weights.SHAPES}


class KerasJaxTrainer(KerasTrainer):
    """Keras on JAX."""

    spec = REGISTRY["keras_jax"]

    def configure(self, device):
        jax_setup.configure(device)


class KerasTorchTrainer(KerasTrainer):
    """Keras on PyTorch."""

    spec = REGISTRY["keras_torch"]

    def configure(self, device):
        self.torch_device = torch_setup.configure(device)

    def device_scope(self, device):
        """"cpu", not "cpu:0": Keras on PyTorch makes each weight a Parameter, then .to(the scope's
        device); "cpu:0" is another device to torch than "cpu", so .to copies it into a tensor that
        is no leaf, backward fills no .grad, and fit fails: "No gradients provided for any variable"."""
        return "cpu" if device == "cpu" else "gpu:0"

    def close(self):
        torch_setup.free(self.torch_device)
