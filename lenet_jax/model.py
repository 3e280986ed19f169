"""LeNet-5 with JAX ops (lax.conv_general_dilated, lax.reduce_window, matmul, jax.nn).

lax convolutions take any layout by name, so NHWC input and HWIO kernels (the shared file's
layouts) are used as they are. Variants: `jit` (the forward traced once per input shape and
compiled by XLA), `eager` (op by op, each op dispatched on its own).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from harness.base import LeNet
from harness.data import weights
from harness.frameworks import jax_setup
from harness.registry import REGISTRY

LAYOUT = ("NHWC", "HWIO", "NHWC")


def conv_relu(x, kernel, bias, padding):
    """x (N, H, W, C), kernel (R, S, C, K) -> relu(x * kernel + bias) (N, H', W', K)."""
    y = lax.conv_general_dilated(x, kernel, (1, 1), padding, dimension_numbers=LAYOUT)
    return jax.nn.relu(y + bias)


def max_pool_2x2(x):
    """(N, H, W, C) -> (N, H/2, W/2, C)."""
    # A Python -inf as the initial value: JAX then knows the max monoid, which it can differentiate
    # (an array there, traced under jit and grad, makes a generic reduce_window with no gradient).
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def logits(w, x):
    """w {"conv1": (kernel HWIO, bias), ...}, x (N, 28, 28, 1) -> (N, 10) logits."""
    x = max_pool_2x2(conv_relu(x, *w["conv1"], "SAME"))      # (N, 14, 14, 6)
    x = max_pool_2x2(conv_relu(x, *w["conv2"], "VALID"))     # (N, 5, 5, 16)
    x = x.reshape(x.shape[0], -1)                            # (N, 400), NHWC order
    x = jax.nn.relu(x @ w["fc1"][0] + w["fc1"][1])           # (N, 120)
    x = jax.nn.relu(x @ w["fc2"][0] + w["fc2"][1])           # (N, 84)
    return x @ w["fc3"][0] + w["fc3"][1]                     # (N, 10)


def forward(w, x):
    return jax.nn.softmax(logits(w, x))                      # (N, 10) probabilities


class JaxLeNet(LeNet):
    spec = REGISTRY["jax"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.jax_device = jax_setup.configure(device, dtype)
        self.w = {
            name: tuple(jax.device_put(np.asarray(a, dtype), self.jax_device) for a in layer)
            for name, layer in weights.read(weights_path).items()
        }
        self.run = jax.jit(forward) if self.variant == "jit" else forward

    def predict(self, images):
        x = jax.device_put(np.asarray(images, dtype=self.dtype), self.jax_device)
        return np.asarray(self.run(self.w, x))  # waits for the device and copies to the host
