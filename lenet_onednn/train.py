"""LeNet-5 training on the oneDNN v3 C API (ctypes), on the CPU: one plain SGD step at a time.

The heavy work is oneDNN's (train_plan.py): convolution forward_training, backward data and
backward weights (with the bias gradient); max pooling forward_training with its workspace and
pooling backward; ReLU as eltwise forward_training / backward (use_dst_for_bwd); inner product
forward_training, backward data and backward weights; softmax forward; the cross-entropy
gradient (probs - onehot) / N as a binary sub with a linear post-op; the SGD update
w += (-lr) * grad as a binary add in place with a runtime scale (a sum primitive with scales
where oneDNN has only reference code for the binary on a weight layout; on this machine fc2's and
fc3's blocked brgemm kernels end up on `ref:` code either way, 8k and 1k numbers). On the host
(NumPy): copying the images in, the one-hot rows from the labels, and the loss from the (N, 10)
logits (a float64 logsumexp, 10 numbers a row: the loss is returned, nothing depends on it).

Primitives and memories are built once per batch size (like the tuned inference variant). The
weights live in the plan last used, in the layouts its forward primitives chose; a step at
another batch size moves them (reorder to the Keras arrays, then into that plan's layouts).
`weights()` reorders back to Keras layouts: conv HWIO, dense (in, out), fc1's rows in NHWC
flatten order. float32 only (oneDNN 3.2 has no f64 convolution on the CPU).
"""


import numpy as np

from harness.base import LEARNING_RATE, Trainer, check_batch
from harness.data import weights
from harness.registry import REGISTRY
from lenet_onednn import binding as dnnl
from lenet_onednn import primitives as P
from lenet_onednn.train_plan import TrainPlan


class OnednnTrainer(Trainer):
    spec = REGISTRY["onednn"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32",
                 learning_rate=LEARNING_RATE):
        super().__init__(weights_path, device, variant, dtype, learning_rate)
        self.lib = lib = dnnl.load()
        # Keras layouts; where the weights are while no plan holds them
        self.host = {name: weights.Layer(np.ascontiguousarray(layer.kernel, np.float32),
                                         np.ascontiguousarray(layer.bias, np.float32))
                     for name, layer in weights.read(weights_path).items()}
        self.cpu = P.CpuEngine(lib)
        self.engine, self.stream = self.cpu.engine, self.cpu.stream
        self.plans = {}  # batch size -> TrainPlan
        self.active = None  # the plan that holds the current weights

    def plan(self, n) -> TrainPlan:
        """The plan for batch size n, holding the current weights."""
        if n not in self.plans:
            self.plans[n] = TrainPlan(self.lib, self.engine, self.stream, n, self.learning_rate)
        p = self.plans[n]
        if p is not self.active:
            if self.active is not None:
                self.host = self.active.export()
            p.load(self.host)
            self.active = p
        return p

    def train_step(self, images, labels):
        images, labels = check_batch(images, labels)
        return self.plan(len(images)).train(images, labels, update=True)

    def gradients(self, images, labels):
        """The loss and the gradients of the current weights, Keras layouts; no update."""
        images, labels = check_batch(images, labels)
        p = self.plan(len(images))
        loss = p.train(images, labels, update=False)
        return loss, p.gradients()

    def weights(self):
        if self.active is None:
            return {name: weights.Layer(k.copy(), b.copy()) for name, (k, b) in self.host.items()}
        return self.active.export()

    def impl_info(self, n=1) -> dict[str, str]:
        """primitive name -> the implementation oneDNN picked (`ref:` is its slow reference code)."""
        if n not in self.plans:
            self.plans[n] = TrainPlan(self.lib, self.engine, self.stream, n, self.learning_rate)
        return dict(self.plans[n].impl)

    def close(self):
        if self.active is not None:
            self.host = self.active.export()
            self.active = None
        for p in self.plans.values():
            p.close()
        self.plans.clear()
        self.cpu.close()
