"""LeNet-5 training step with JAX: jax.value_and_grad of the mean cross-entropy over model.logits,
plain SGD as a tree_map, the whole step under jax.jit (variant `jit`; `eager` runs it op by op).

The weights are a pytree {"conv1": (kernel HWIO, bias), ...} in the shared file's layouts; a step
returns new arrays (JAX arrays are immutable).
"""

import jax
import jax.numpy as jnp
import numpy as np

from harness.base import LEARNING_RATE, Trainer
from harness.data import weights
from harness.frameworks import jax_setup
from harness.registry import REGISTRY
from lenet_jax.model import logits


def mean_loss(w, x, labels):
    """Softmax cross-entropy of logits (N, 10) against labels (N,), averaged over the batch."""
    log_probs = jax.nn.log_softmax(logits(w, x))
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=1))


def sgd_step(w, x, labels, learning_rate):
    loss, grads = jax.value_and_grad(mean_loss)(w, x, labels)
    return loss, jax.tree.map(lambda p, g: p - learning_rate * g, w, grads)


class JaxTrainer(Trainer):
    spec = REGISTRY["jax"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        self.jax_device = jax_setup.configure(device, dtype)
        self.w = {name: tuple(jax.device_put(np.asarray(a, dtype), self.jax_device) for a in layer)
                  for name, layer in weights.read(weights_path).items()}
        self.step = jax.jit(sgd_step) if self.variant == "jit" else sgd_step
        self.lr = jax.device_put(np.asarray(self.learning_rate, dtype), self.jax_device)

    def train_step(self, images, labels):
        x = jax.device_put(np.asarray(images, dtype=self.dtype), self.jax_device)
        y = jax.device_put(np.asarray(labels, dtype=np.int32), self.jax_device)
        loss, self.w = self.step(self.w, x, y, self.lr)
        return float(loss)  # float() waits for the device

    def weights(self):
        return {name: weights.Layer(*(np.asarray(a) for a in pair)) for name, pair in self.w.items()}
