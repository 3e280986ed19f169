"""LeNet-5 for the CUDA lab: the glue. Your kernels go in lenet.cu, next to this file; this file
compiles it (NVRTC, through CuPy), puts the weights on the GPU and launches your kernels, one per
layer, one thread per output element. You may change this file too (fuse kernels, keep buffers,
use a CUDA graph): the grader only calls predict. Check before handing in:

    python -m harness lab check cuda path/to/your/folder/lenet.py

Layouts (the weights file's, used as they are): activations NHWC (N, H, W, C), channel fastest;
conv kernels HWIO (5, 5, C_in, C_out); dense kernels (inputs, outputs), row-major; pool2's
(N, 5, 5, 16) buffer is the (N, 400) input of fc1, in Keras' NHWC flatten order.
"""

from pathlib import Path

import numpy as np

from harness.base import LeNet
from harness.data import weights
from harness.registry import ImplSpec

THREADS = 256  # per block
KERNELS = ("conv_bias_relu", "max_pool_2x2", "dense_bias_act", "softmax_rows")


class StudentLeNet(LeNet):
    spec = ImplSpec("student", "lenet:StudentLeNet", "cuda", devices=("gpu",),
                    variants=("default",), dtypes=("float32",), package=None)

    def __init__(self, weights_path, device="gpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        import cupy  # here, not at the top: the file imports on a machine without a GPU

        self.cp = cupy
        code = Path(__file__).with_name("lenet.cu").read_text()
        module = cupy.RawModule(code=code, options=("--std=c++17",))
        self.kernel = {name: module.get_function(name) for name in KERNELS}  # NVRTC compiles here
        self.w = {name: (cupy.asarray(layer.kernel, cupy.float32), cupy.asarray(layer.bias, cupy.float32))
                  for name, layer in weights.read(weights_path).items()}

    def launch(self, name, outputs, *args):
        """One thread per output element; ints go to the kernel as 32-bit ints."""
        blocks = (outputs + THREADS - 1) // THREADS
        args = tuple(np.int32(a) if isinstance(a, int) else a for a in args)
        self.kernel[name]((blocks,), (THREADS,), args)

    def predict(self, images):
        """images (N, 28, 28, 1) float32 in [0, 1] -> class probabilities (N, 10), a NumPy array."""
        cp, w, n = self.cp, self.w, len(images)
        x = cp.asarray(images, cp.float32)                                 # (N, 28, 28, 1)
        c1 = cp.empty((n, 28, 28, 6), cp.float32)
        self.launch("conv_bias_relu", c1.size, x, *w["conv1"], c1, n, 28, 28, 1, 6, 2)  # "same": pad 2
        p1 = cp.empty((n, 14, 14, 6), cp.float32)
        self.launch("max_pool_2x2", p1.size, c1, p1, n, 28, 28, 6)
        c2 = cp.empty((n, 10, 10, 16), cp.float32)
        self.launch("conv_bias_relu", c2.size, p1, *w["conv2"], c2, n, 14, 14, 6, 16, 0)  # "valid"
        p2 = cp.empty((n, 5, 5, 16), cp.float32)                           # = (N, 400), NHWC order
        self.launch("max_pool_2x2", p2.size, c2, p2, n, 10, 10, 16)
        h1 = cp.empty((n, 120), cp.float32)
        self.launch("dense_bias_act", h1.size, p2, *w["fc1"], h1, n, 400, 120, 1)
        h2 = cp.empty((n, 84), cp.float32)
        self.launch("dense_bias_act", h2.size, h1, *w["fc2"], h2, n, 120, 84, 1)
        logits = cp.empty((n, 10), cp.float32)
        self.launch("dense_bias_act", logits.size, h2, *w["fc3"], logits, n, 84, 10, 0)
        probs = cp.empty((n, 10), cp.float32)
        self.launch("softmax_rows", n, logits, probs, n, 10)               # one thread per image
        return probs.get()                                                 # waits for the GPU
