"""LeNet-5 as an exported ONNX model (export.py) run by an inference engine, on the CPU.

Variants:
- run: ONNX Runtime's plain `session.run(None, {"images": x})`, as its tutorial writes it.
- iobinding: ONNX Runtime with the input and output bound once per batch size to NumPy buffers
  (IOBinding): a call copies the images in, runs, and copies the probabilities out.
- openvino: OpenVINO, the model compiled once per batch size (a static shape) with float32
  asked for explicitly (on a CPU with AMX or AVX512-BF16 its default is bf16, off by up to 0.013
  in probability), the latency hint, one stream; the input tensor shares the NumPy buffer.
Threads: the harness's rule (engine_setup.threads), never the engines' default of every core.
The GPU: ONNX Runtime's CUDA provider or OpenVINO's GPU device where the installed build has
one; otherwise Unavailable, saying which build to install. Never a silent fall back to the CPU.
"""

import numpy as np

from harness.base import LeNet, check_images
from harness.data import weights
from harness.errors import HarnessError, Unavailable
from harness.frameworks import engine_setup
from harness.registry import REGISTRY
from lenet_onnx import export


def ort_session(path, device):
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise Unavailable(f"ONNX Runtime is not installed ({exc}): pip install onnxruntime") from None
    intra, inter = engine_setup.threads()
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = intra, inter
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    provider = "CUDAExecutionProvider" if device == "gpu" else "CPUExecutionProvider"
    if provider not in ort.get_available_providers():
        raise Unavailable(f"onnxruntime {ort.__version__} has no {provider} (it has "
                          f"{ort.get_available_providers()}): pip install onnxruntime-gpu")
    return ort.InferenceSession(str(path), options, providers=[provider])


def ov_model(path, device):
    try:
        import openvino as ov
    except ImportError as exc:
        raise Unavailable(f"OpenVINO is not installed ({exc}): pip install openvino") from None
    core = ov.Core()
    target = "GPU" if device == "gpu" else "CPU"
    if target not in core.available_devices:
        raise Unavailable(f"OpenVINO {ov.__version__} sees no {target} device (it has "
                          f"{core.available_devices}; its GPU plugin drives Intel GPUs only)")
    intra, _ = engine_setup.threads()
    config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
              "INFERENCE_NUM_THREADS": str(intra)}
    return core, core.read_model(str(path)), target, config


class OnnxLeNet(LeNet):
    spec = REGISTRY["onnx"]

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        weights.read(weights_path)  # a file that is not LeNet-5's weights: its error, before an export
        self.path = export.cached_model(weights_path)
        self.plans = {}  # batch size -> (input buffer, output buffer, bound call)
        if self.variant == "openvino":
            self.core, self.model, self.target, self.config = ov_model(self.path, device)
            return
        self.session = ort_session(self.path, device)
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1 or inputs[0].shape[1:] != [28, 28, 1] or outputs[0].shape[1:] != [10]:
            raise HarnessError(f"{self.path}: not LeNet-5's graph: inputs {[i.shape for i in inputs]}, "
                               f"outputs {[o.shape for o in outputs]}")
        self.input_name, self.output_name = inputs[0].name, outputs[0].name

    def bound(self, n):
        """iobinding: (N, 28, 28, 1) and (N, 10) NumPy buffers bound to the session once."""
        x, out = np.zeros((n, 28, 28, 1), np.float32), np.zeros((n, 10), np.float32)
        binding = self.session.io_binding()
        binding.bind_cpu_input(self.input_name, x)
        binding.bind_output(self.output_name, "cpu", 0, np.float32, [n, 10], out.ctypes.data)
        return x, out, lambda: self.session.run_with_iobinding(binding)

    def compiled(self, n):
        """openvino: the model reshaped to batch n, compiled, and its request's input tensor
        sharing an (N, 28, 28, 1) NumPy buffer."""
        import openvino as ov

        model = self.model.clone()
        model.reshape([n, 28, 28, 1])
        request = self.core.compile_model(model, self.target, self.config).create_infer_request()
        x = np.zeros((n, 28, 28, 1), np.float32)
        request.set_input_tensor(ov.Tensor(x, shared_memory=True))
        return x, request.get_output_tensor(0).data, request.infer  # out: (N, 10), the request's own

    def predict(self, images):
        images = check_images(images).astype(np.float32, copy=False)
        if self.variant == "run":
            return self.session.run([self.output_name], {self.input_name: images})[0]
        n = len(images)
        if n not in self.plans:
            self.plans[n] = self.bound(n) if self.variant == "iobinding" else self.compiled(n)
        x, out, run = self.plans[n]
        np.copyto(x, images)
        run()
        return out.copy()

    def close(self):
        self.plans.clear()
        self.session = self.model = None
