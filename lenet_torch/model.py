"""LeNet-5 with PyTorch ops (F.conv2d, max_pool2d, linear, relu, softmax).

PyTorch works in NCHW with OIHW filters (layout.py converts the shared weights once). Variants:
`eager` (op by op), `compile` (torch.compile with its default inductor backend, one graph per
batch size), and on the GPU `cudagraph` (the forward captured once per batch size into a CUDA
graph and replayed: one launch per call, the same floor the cuDNN level's graph variant aims at).
"""

import numpy as np
import torch
import torch.nn.functional as F

from harness.base import LeNet
from harness.data import weights
from harness.frameworks import torch_setup
from harness.registry import REGISTRY
from lenet_torch import layout


def logits(w, x):
    """w {"conv1": (kernel OIHW, bias), ...} (layout.convert), x (N, 1, 28, 28) -> (N, 10) logits."""
    x = F.max_pool2d(F.relu(F.conv2d(x, *w["conv1"], padding=2)), 2)  # (N, 6, 14, 14)
    x = F.max_pool2d(F.relu(F.conv2d(x, *w["conv2"])), 2)             # (N, 16, 5, 5)
    x = x.flatten(1)                          # (N, 400) in (c, h, w) order, as fc1's columns
    x = F.relu(F.linear(x, *w["fc1"]))                                 # (N, 120)
    x = F.relu(F.linear(x, *w["fc2"]))                                 # (N, 84)
    return F.linear(x, *w["fc3"])                                      # (N, 10)


class TorchLeNet(LeNet):
    spec = REGISTRY["torch"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        self.torch_device = torch_setup.configure(device)
        self.w = {
            name: tuple(torch.from_numpy(a).to(self.torch_device) for a in pair)
            for name, pair in layout.convert(weights.read(weights_path), dtype).items()
        }
        self.graphs = {}  # batch size -> (static input, static output, torch.cuda.CUDAGraph)
        self.run = {"eager": self.forward, "compile": torch.compile(self.forward, dynamic=False),
                    "cudagraph": self.replay}[self.variant]
        self.events = None
        if self.torch_device.type == "cuda":  # device time of each call
            self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        self.device_ns = None

    def forward(self, x):
        return F.softmax(logits(self.w, x), dim=1)                         # (N, 10)

    def replay(self, x):
        """Capture the forward for this batch size once (after a warm-up on a side stream, so
        cuDNN has chosen its algorithms), then replay the graph on a copy of the input."""
        n = x.shape[0]
        if n not in self.graphs:
            static_x = x.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.forward(static_x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_y = self.forward(static_x)
            self.graphs[n] = (static_x, static_y, graph)
        static_x, static_y, graph = self.graphs[n]
        static_x.copy_(x)
        graph.replay()
        return static_y

    def predict(self, images):
        with torch.no_grad():
            x = torch.from_numpy(np.ascontiguousarray(images, dtype=self.dtype))
            x = x.to(self.torch_device).permute(0, 3, 1, 2)  # NHWC -> NCHW: (N, 1, 28, 28)
            if self.events is None:
                return self.run(x).cpu().numpy()
            start, end = self.events
            start.record()
            y = self.run(x)
            end.record()
            probs = y.cpu().numpy()  # waits for the device and copies to the host
            end.synchronize()
            self.device_ns = int(start.elapsed_time(end) * 1e6)  # ms -> ns
            return probs

    def last_device_time_ns(self):
        return self.device_ns

    def close(self):
        self.graphs.clear()
        torch_setup.free(self.torch_device)
