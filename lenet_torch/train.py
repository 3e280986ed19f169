"""LeNet-5 training step with PyTorch: autograd through model.logits, F.cross_entropy, plain SGD
under torch.no_grad. Variants: `eager`, `compile` (the forward through torch.compile; AOTAutograd
compiles its backward too).

The weights are leaf tensors in PyTorch layouts (layout.convert); weights() converts them back.
"""

import numpy as np
import torch
import torch.nn.functional as F

from harness.base import LEARNING_RATE, Trainer
from harness.data import weights
from harness.frameworks import torch_setup
from harness.registry import REGISTRY
from lenet_torch import layout
from lenet_torch.model import logits


class TorchTrainer(Trainer):
    spec = REGISTRY["torch"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        self.torch_device = torch_setup.configure(device)
        self.w = {name: tuple(torch.from_numpy(a).to(self.torch_device).requires_grad_() for a in pair)
                  for name, pair in layout.convert(weights.read(weights_path), dtype).items()}
        self.params = [p for pair in self.w.values() for p in pair]
        self.forward = torch.compile(logits, dynamic=False) if self.variant == "compile" else logits

    def train_step(self, images, labels):
        x = torch.from_numpy(np.ascontiguousarray(images, dtype=self.dtype)).to(self.torch_device)
        x = x.permute(0, 3, 1, 2)                                    # NHWC -> NCHW: (N, 1, 28, 28)
        y = torch.from_numpy(np.asarray(labels, dtype=np.int64)).to(self.torch_device)
        loss = F.cross_entropy(self.forward(self.w, x), y)           # mean over the batch
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            for p, g in zip(self.params, grads, strict=True):
                p -= self.learning_rate * g
        return loss.item()  # .item() waits for the device

    def weights(self):
        host = {name: tuple(t.detach().cpu().numpy() for t in pair) for name, pair in self.w.items()}
        return {name: weights.Layer(*pair) for name, pair in layout.to_keras(host).items()}

    def close(self):
        torch_setup.free(self.torch_device)
