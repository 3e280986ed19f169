"""The cudnn level's `frontend` variant: LeNet-5 on cuDNN's graph API, through NVIDIA's Python
frontend (the `nvidia-cudnn-frontend` wheel, import name `cudnn`), which drives the backend
graph API (cudnnBackend*) and its runtime fusion. NCHW on the device, as the legacy variants.

    x (N,1,28,28) -[conv1 -> bias -> relu]-> (N,6,28,28) -[pool: max of 4 strided views]-> (N,6,14,14)
      -[conv2 -> bias -> relu]-> (N,16,10,10) -[pool]-> (N,16,5,5) = (N,400) in (c,h,w) order
      -[matmul -> bias -> relu]-> (N,120) -[..]-> (N,84) -[matmul -> bias]-> (N,10) -softmax-> host

Each bracket is one cuDNN operation graph (a virtual tensor between its nodes: one fused kernel
where an engine takes it), except the dense layers: each is one cuBLASLt matmul with its bias (and
ReLU) in the epilogue (cublaslt.py, as the graph variant's), the graph forms below only where
cuBLASLt is missing or refuses. A stage lists its forms, fused first; the first whose graphs all get
a plan runs, and `stage_notes` says which ran and why the ones before it did not:
- convolution, dense: the fused graph, else the op's graph + a pointwise bias (+ReLU) graph; a dense
  layer also as a fused convolution (its kernel transposed to (out, C, H, W), second: float32
  matmul engines may all be TF32, the convolution engines are not); last, the op's graph alone
  with its bias and ReLU on the side (legacy cudnnAddTensor, cudnnActivationForward); refused in
  every form: Unavailable, with cuDNN's reasons (convolutions and dense layers are the graph API's).
- pooling: the frontend's Python bindings (1.32) have no resample node, so 2x2/2 max pooling is
  max(max(a, b), max(c, d)) over four strided views of the conv's output (offsets 0, 1, W, W+1;
  strides 2 and 2W): a pointwise graph. Where cuDNN refuses it: cudnnPoolingForward, on the side.
- softmax: the frontend has no softmax node outside attention: cudnnSoftmaxForward, on the side.
float32 stays float32: plans with the TENSOR_CORE or DOWN_CONVERT_INPUTS numerical notes (TF32)
are deselected. Every plan cuDNN offers a graph is built (build_plan_policy.ALL) and timed on the
plan's own buffers (PLAN_TIMING_CALLS executions each, at every batch size: batch 1 is the call the
targets judge); the fastest is pinned (select_plan) and the note names it. Everything is planned
once per batch size (graphs, workspace, buffers, mapped host memory): below COPY_INPUT_FROM images
conv1 reads the images where the host wrote them (mapped page-locked memory: no copy in), from it on
the call's first node copies them to the device (conv1 reads each pixel up to 25 times; zero-copy
reads are not cached); the softmax writes the answer where the host reads it (no copy out), and
the call's last node copies a device word of 1 into a flag in mapped memory, which the host polls
instead of waiting on an event. The first call runs it all
eagerly, then the whole call is captured into one CUDA graph (CuPy stream capture) and replayed, as
the legacy `graph` variant is; where capture is refused, calls stay eager (capture_note says why).

The public `cudnn.pygraph` is used with an explicit handle (`cudnn.create_handle`, bound to the
level's stream) and integer device pointers (CuPy's), so neither PyTorch nor cuda-python is needed.
"""

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.errors import Unavailable
from harness.frameworks import gpu_fault
from lenet_cudnn import binding as cu
from lenet_cudnn import cublas, cublaslt

H2D, D2H = 1, 2  # cudaMemcpyKind
HOST_ALLOC_MAPPED = 2  # cudaHostAllocMapped: page-locked host memory the device reads and writes
PLAN_TIMING_CALLS = 10  # executions of each of a graph's plans, timed, after one untimed
# From this batch size on, the call's first node copies the images from the mapped staging into device
# memory (one transfer at the bus's rate) and conv1 reads them there: zero-copy reads are not cached,
# and conv1 reads each pixel up to 25 times, 25 bus crossings a pixel at batch 512. Below it (batch 1:
# 3 KB) the copy's own launch would cost more than the reads it saves.
COPY_INPUT_FROM = 16
POLL_TIMEOUT_S = 5.0  # a flag not set by then is a failed call, not a slow one
QUIT_WAIT_S = 1.0  # after a flag's deadline: how long the stream is given to end (then: hung)
CLOSE_WAIT_S = 10.0  # close(): the stream's work waited for (polled) at most this long
INSTALL = "pip install nvidia-cudnn-frontend (the offline bundle carries it)"
# (name, input buffer, (C, H, W) in, K out, padding): conv1 "same", conv2 "valid"
CONVS = (("conv1", "x", (1, 28, 28), 6, 2), ("conv2", "p1", (6, 14, 14), 16, 0))
POOLS = (("pool1", "c1", "p1", (6, 28, 28)), ("pool2", "c2", "p2", (16, 10, 10)))
# (name, input buffer, fan in, fan out, ReLU); fc1's rows are in (c, h, w) order (layout.convert)
DENSE = (("fc1", "p2", 400, 120, True), ("fc2", "fc1", 120, 84, True), ("fc3", "fc2", 84, 10, False))
# a dense layer's input as an NCHW image (C, H, W): fc1 reads pool2's (16, 5, 5), the others 1x1
DENSE_IMAGE = {"fc1": (16, 5, 5), "fc2": (120, 1, 1), "fc3": (84, 1, 1)}
COUNTS = {"x": 784, "c1": 6 * 784, "p1": 6 * 196, "c2": 1600, "p2": 400, "fc1": 120, "fc2": 84,
          "fc3": 10, "out": 10}  # elements per image of each device buffer


def contiguous(dim: list[int]) -> list[int]:
    """Row-major strides of `dim`: [2, 3, 4] -> [12, 4, 1]."""
    strides, step = [], 1
    for d in reversed(dim):
        strides.insert(0, step)
        step *= d
    return strides


@dataclass
class Graph:
    """One built operation graph and where its tensors live: uid -> (buffer name, element offset);
    buffer names are the plan's device buffers or a layer's weights ("w:conv1", "b:conv1")."""

    name: str
    graph: Any  # cudnn.pygraph
    binds: dict[int, tuple[str, int]]


@dataclass
class Stage:
    name: str
    graphs: list = field(default_factory=list)  # [Graph]: the form that built
    note: str = ""
    epilogue: bool = False  # its bias (and ReLU) on the side: the last-resort form (with_side_epilogue)
    lt: Any = None  # a dense layer as one cuBLASLt matmul (cublaslt.DenseMatmul): no graph


def import_frontend(lib: cu.Cudnn):
    """The frontend module, sharing the libcudnn the legacy binding loaded (its own loader looks
    only in this interpreter's purelib, LD_LIBRARY_PATH and libcudnn.so.9: a venv over a server's
    system site-packages finds none), or Unavailable with the reason."""
    try:
        import cudnn
    except Exception as exc:  # ImportError; its loader's OSError on a broken library
        raise Unavailable(f"no cuDNN Python frontend ({type(exc).__name__}: {exc}): {INSTALL}") from None
    set_handle = getattr(getattr(cudnn, "_pybind_module", None), "_set_dlhandle_cudnn", None)
    if set_handle is not None:
        set_handle(lib.lib._handle)
    try:
        version = cudnn.backend_version()
    except Exception as exc:
        raise Unavailable(f"the cuDNN frontend {cudnn.__version__} cannot reach libcudnn: {exc}") from None
    if version != lib.version:
        raise Unavailable(f"the cuDNN frontend reaches cuDNN {version}, the level loaded {lib.version} "
                          f"({lib.path}): two libraries in one process")
    return cudnn


def tensor(g, binds, name, dim, buffer, offset=0, stride=None):
    t = g.tensor(name=name, dim=dim, stride=stride or contiguous(dim))
    binds[t.uid] = (buffer, offset)
    return t


def output(t, binds, dim, buffer, kind):
    t.set_output(True).set_dim(dim).set_stride(contiguous(dim)).set_data_type(kind)
    binds[t.uid] = (buffer, 0)
    return t


def conv_forms(new, n, name, src, chw, k, pad, dst):
    """The conv stage's forms, each a list of (graph name, graph, binds) made by `new()`."""
    c, h, w = chw
    ho, wo = h + 2 * pad - 4, w + 2 * pad - 4
    y_dim = [n, k, ho, wo]

    def conv(fused):
        g, b = new(), {}
        x = tensor(g, b, "X", [n, c, h, w], src)
        f = tensor(g, b, "W", [k, c, 5, 5], f"w:{name}")
        y = g.conv_fprop(x, f, padding=[pad, pad], stride=[1, 1], dilation=[1, 1], name=f"{name}_conv")
        if fused:
            y = g.relu(g.bias(y, tensor(g, b, "B", [1, k, 1, 1], f"b:{name}"), name=f"{name}_bias"),
                       name=f"{name}_relu")
        output(y, b, y_dim, dst, new.kind)
        return (f"{name}" if fused else f"{name}_conv", g, b)

    return [lambda: [conv(True)],
            lambda: [conv(False), bias_relu(new, name, dst, y_dim, [1, k, 1, 1], True)],
            with_side_epilogue(lambda: [conv(False)])]


def with_side_epilogue(form):
    """Mark a stage's last-resort form: its graph computes the op alone and the bias (and ReLU) run
    on the side (cudnnAddTensor, cudnnActivationForward), where cuDNN plans neither the fused graph
    nor a pointwise one."""
    form.side_epilogue = True
    return form


def dense_forms(new, n, name, src, fan_in, fan_out, relu, dst):
    y_dim = [1, n, fan_out]  # cuDNN's matmul is batched: (1, N, in) @ (1, in, out)

    def matmul(fused):
        g, b = new(), {}
        a = tensor(g, b, "A", [1, n, fan_in], src)
        w = tensor(g, b, "W", [1, fan_in, fan_out], f"w:{name}")
        y = g.matmul(a, w, name=f"{name}_matmul")
        if fused:
            y = g.bias(y, tensor(g, b, "B", [1, 1, fan_out], f"b:{name}"), name=f"{name}_bias")
            if relu:
                y = g.relu(y, name=f"{name}_relu")
        output(y, b, y_dim, dst, new.kind)
        return (name if fused else f"{name}_matmul", g, b)

    def as_conv(fused=True):
        # y (N, out, 1, 1) = x (N, C, H, W) convolved "valid" with W^T (out, C, H, W) ("t:": the dense
        # kernel transposed, FrontendNet.transposed): the same numbers, on the convolution engines
        c, h, w = DENSE_IMAGE[name]
        g, b = new(), {}
        x = tensor(g, b, "X", [n, c, h, w], src)
        f = tensor(g, b, "W", [fan_out, c, h, w], f"t:{name}")
        y = g.conv_fprop(x, f, padding=[0, 0], stride=[1, 1], dilation=[1, 1], name=f"{name}_conv")
        if fused:
            y = g.bias(y, tensor(g, b, "B", [1, fan_out, 1, 1], f"b:{name}"), name=f"{name}_bias")
            if relu:
                y = g.relu(y, name=f"{name}_relu")
        output(y, b, [n, fan_out, 1, 1], dst, new.kind)
        return (f"{name}_as_conv" if fused else f"{name}_as_conv_alone", g, b)

    return [lambda: [matmul(True)], lambda: [as_conv()],
            lambda: [matmul(False), bias_relu(new, name, dst, y_dim, [1, 1, fan_out], relu)],
            with_side_epilogue(lambda: [as_conv(fused=False)])]


def bias_relu(new, name, buf, dim, bias_dim, relu):
    """y = relu(y + b) in place on `buf`: the unfused forms' epilogue, a pointwise graph."""
    g, b = new(), {}
    y = g.bias(tensor(g, b, "Y", dim, buf), tensor(g, b, "B", bias_dim, f"b:{name}"), name=f"{name}_bias")
    if relu:
        y = g.relu(y, name=f"{name}_relu")
    output(y, b, dim, buf, new.kind)
    return (f"{name}_bias_relu", g, b)


def pool_forms(new, n, name, src, chw, dst):
    """2x2/2 max pooling as a pointwise graph over four strided views of `src` (N, C, H, W)."""
    c, h, w = chw
    dim, stride = [n, c, h // 2, w // 2], [c * h * w, h * w, 2 * w, 2]

    def views():
        g, b = new(), {}
        a, p, q, r = (tensor(g, b, f"V{i}", dim, src, offset, stride)
                      for i, offset in enumerate((0, 1, w, w + 1)))
        y = g.max(g.max(a, p, name=f"{name}_max0"), g.max(q, r, name=f"{name}_max1"), name=f"{name}_max")
        output(y, b, dim, dst, new.kind)
        return (name, g, b)

    return [lambda: [views()]]


class GraphMaker:
    """new(): an empty graph of the level's dtype (io, intermediate and compute alike) on its
    handle, or for a serialized device's properties (deviceless compilation); `kind` is the
    dtype's cudnn.data_type, which the forms give their outputs."""

    def __init__(self, cudnn, dtype, handle=None, device_property=None):
        self.cudnn, self.handle, self.device_property = cudnn, handle, device_property
        self.kind = cudnn.data_type.FLOAT if dtype == "float32" else cudnn.data_type.DOUBLE

    def __call__(self):
        return self.cudnn.pygraph(io_data_type=self.kind, intermediate_data_type=self.kind,
                                  compute_data_type=self.kind, handle=self.handle,
                                  device_property=self.device_property)


def stage_forms(new, n) -> dict[str, list]:
    """Every stage of the forward pass, in order: name -> its forms (fused first)."""
    stages: dict[str, list] = {}
    for (name, src, chw, k, pad), (pool, psrc, pdst, pchw) in zip(CONVS, POOLS, strict=True):
        dst = "c1" if name == "conv1" else "c2"
        stages[name] = conv_forms(new, n, name, src, chw, k, pad, dst)
        stages[pool] = pool_forms(new, n, pool, psrc, pchw, pdst)
    for name, src, fan_in, fan_out, relu in DENSE:
        stages[name] = dense_forms(new, n, name, src, fan_in, fan_out, relu, name)
    return stages


def build(cudnn, g, dtype: str) -> None:
    """validate -> operation graph -> plans (heuristics A, then the fallback list) -> no TF32 in
    float32 -> support -> the first plan that builds. Raises what cuDNN raised."""
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    if dtype == "float32":
        g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE, cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)  # every plan: the fastest is timed and pinned at execution


def workspace_size(graph) -> int:
    """The most workspace any of the graph's plans needs (any may be the one pinned)."""
    plans = range(graph.get_execution_plan_count())
    return max([graph.get_workspace_size(), *(graph.get_workspace_size_plan_at_index(i) for i in plans)])


def plan_stage(cudnn, name, forms, dtype) -> Stage:
    """The first form whose graphs all build; Stage.graphs empty (and the reasons in its note)
    where none does."""
    reasons = []
    for i, form in enumerate(forms):
        try:
            made = form()
            for _, g, _ in made:
                build(cudnn, g, dtype)
        except Exception as exc:  # cudnnGraphNotSupportedError, RuntimeError, ValueError: cuDNN's refusal
            first_line = (str(exc).splitlines() or [""])[0]
            reasons.append(f"form {i + 1}: {type(exc).__name__}: {first_line}")
            continue
        graphs = [Graph(gname, g, binds) for gname, g, binds in made]
        epilogue = getattr(form, "side_epilogue", False)
        note = " + ".join(gr.name for gr in graphs) + (
            " + bias/ReLU on the side (cudnnAddTensor, cudnnActivationForward)" if epilogue else "") + (
            "" if i == 0 else f" (fused refused: {reasons[0]})")
        return Stage(name, graphs, note=note, epilogue=epilogue)
    return Stage(name, [], note="; ".join(reasons))


@dataclass
class Plan:
    """Everything a call of batch size n needs, built once."""

    stages: list  # [Stage], in order
    arrays: dict  # name -> cupy uint8 array: the activations, kept alive
    buf: dict  # name -> device pointer
    ws: Any  # cupy uint8 array: the largest workspace any graph's any plan needs
    pinned: tuple  # (in, out, flag) mapped page-locked host memory, kept alive
    host_in: np.ndarray  # (N, 1, 28, 28) NCHW in mapped memory: conv1 reads it there
    host_out: np.ndarray  # (N, 10) in mapped memory: the softmax writes it there
    flag: np.ndarray  # (1,) uint32 in mapped memory: 0 from the host before a call, 1 from its last node
    calls: tuple  # (function, argument tuple) of the whole call, in order
    graph: Any = None  # the captured cupy.cuda.graph.Graph, or None: eager
    capture_tried: bool = False  # after the first (eager) call of this batch size


class FrontendNet:
    """The variant's state, owned by a CudnnLeNet (`net`: its CuPy, stream, legacy library and
    handle for the side calls, the weights in cuDNN layouts, dtype)."""

    def __init__(self, net):
        self.net, self.cp, self.dtype = net, net.cp, net.dtype
        self.cudnn = import_frontend(net.lib)
        try:
            self.handle = self.cudnn.create_handle()
            self.cudnn.set_stream(self.handle, net.stream.ptr)
        except Exception as exc:
            raise Unavailable(f"the cuDNN frontend could not make a handle: {exc}") from None
        self.plans: dict[int, Plan] = {}
        self.stage_notes: dict[str, str] = {}
        self._descriptors: dict = {}  # batch size -> the legacy descriptors of the side calls
        self._transposed: dict = {}  # dense layer -> its kernel transposed (the convolution form's filter)
        self.lt_refused: dict[str, str] = {}  # dense layer -> why cuBLASLt did not take it
        self.plan_notes: dict[str, str] = {}  # "graph (batch n)" -> the plan pinned and its time
        self.capture_note = ""
        self.last_device_ns = None

    def pointer(self, buf: dict, where: tuple[str, int]) -> int:
        name, offset = where
        if name.startswith("t:"):
            return self.transposed(name[2:]).data.ptr
        if name.startswith(("w:", "b:")):
            kernel, bias = self.net.w[name[2:]]
            return (kernel if name[0] == "w" else bias).data.ptr
        return buf[name] + offset * self.net.itemsize

    def transposed(self, name: str):
        """Dense layer `name`'s kernel (in, out) as the filter (out, in) of its convolution form, made
        once (device memory, kept)."""
        if name not in self._transposed:
            kernel = self.net.w[name][0]
            with self.net.stream:
                self._transposed[name] = self.cp.ascontiguousarray(kernel.T)
            self.net.stream.synchronize()
        return self._transposed[name]

    def epilogue_calls(self, name, n, buf) -> list:
        """y += b, then y = relu(y) (not fc3), in place, by the legacy API: a last-resort form's side."""
        net, d = self.net, self.legacy_descriptors(n)
        y_desc = {"conv1": d.c1, "conv2": d.c2}.get(name) or d.fc[name]
        y = buf[{"conv1": "c1", "conv2": "c2"}.get(name, name)]
        calls = [(net.lib.cudnnAddTensor, (net.handle, net.alpha, d.bias[name].ptr, net.w[name][1].data.ptr,
                                           net.alpha, y_desc.ptr, y))]
        if name != "fc3":
            calls.append((net.lib.cudnnActivationForward, (net.handle, d.relu.ptr, net.alpha, y_desc.ptr, y,
                                                           net.beta, y_desc.ptr, y)))
        return calls

    def side_calls(self, name, n, buf) -> list:
        """The legacy calls for a stage no graph form took (pooling; softmax always)."""
        net, d = self.net, self.legacy_descriptors(n)
        if name.startswith("pool"):
            src, dst = ("c1", "p1") if name == "pool1" else ("c2", "p2")
            return [(net.lib.cudnnPoolingForward, (net.handle, d.pool.ptr, net.alpha, getattr(d, src).ptr,
                                                   buf[src], net.beta, getattr(d, dst).ptr, buf[dst]))]
        d3 = d.fc["fc3"]
        return [(net.lib.cudnnSoftmaxForward, (net.handle, cu.SOFTMAX_ACCURATE, cu.SOFTMAX_MODE_CHANNEL,
                                               net.alpha, d3.ptr, buf["fc3"], net.beta, d3.ptr, buf["out"]))]

    def legacy_descriptors(self, n):
        from lenet_cudnn.descriptors import LeNetDescriptors

        if n not in self._descriptors:
            self._descriptors[n] = LeNetDescriptors(self.net.lib, n, self.dtype)
        return self._descriptors[n]

    def plan(self, n: int) -> Plan:
        if n not in self.plans:
            self.plans[n] = self.make_plan(n)
        return self.plans[n]

    def make_plan(self, n: int) -> Plan:
        cp, cudnn, size = self.cp, self.cudnn, self.net.itemsize
        # x, out and the flag in mapped page-locked host memory: the kernels read and write them there
        pinned = tuple(cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(nbytes, HOST_ALLOC_MAPPED), 0)
                       for nbytes in (n * 784 * size, n * 10 * size, 4))
        host_in = np.frombuffer(pinned[0], self.dtype, n * 784).reshape(n, 1, 28, 28)
        host_out = np.frombuffer(pinned[1], self.dtype, n * 10).reshape(n, 10)
        flag = np.frombuffer(pinned[2], np.uint32, 1)
        copy_in = n >= COPY_INPUT_FROM  # the images copied to the device first (COPY_INPUT_FROM)
        with self.net.stream:  # the activations on the device; one word of 1, the flag's source
            arrays = {name: cp.empty(n * count * size, cp.uint8) for name, count in COUNTS.items()
                      if name != "out" and (name != "x" or copy_in)}
            arrays["one"] = cp.asarray(np.ones(1, np.uint32))
        self.net.stream.synchronize()
        buf = {name: a.data.ptr for name, a in arrays.items()}
        buf["out"] = host_out.ctypes.data  # mapped: the same address (UVA)
        if not copy_in:
            buf["x"] = host_in.ctypes.data  # conv1 reads the images across the bus
        new = GraphMaker(cudnn, self.dtype, self.handle)
        stages = [self.dense_stage(name, n, buf) or plan_stage(cudnn, name, forms, self.dtype)
                  for name, forms in stage_forms(new, n).items()]
        for stage in stages:
            if stage.name in self.lt_refused and stage.lt is None:
                stage.note += f" ({self.lt_refused[stage.name]})"
        ws_size = max([workspace_size(gr.graph) for s in stages for gr in s.graphs] + [1])
        with self.net.stream:
            ws = cp.empty(ws_size, cp.uint8)
        s = self.net.stream.ptr
        calls: list = []
        if copy_in:  # (N, 1, 28, 28) from the mapped staging into device memory, at the bus's rate
            copy = (buf["x"], host_in.ctypes.data, n * 784 * size, H2D, s)
            calls.append((cp.cuda.runtime.memcpyAsync, copy))
        self.plan_notes[f"input (batch {n})"] = (f"copied to the device by the call's first node (from batch "
                                                 f"{COPY_INPUT_FROM})" if copy_in else
                                                 f"read by conv1 from mapped host memory (below batch "
                                                 f"{COPY_INPUT_FROM})")
        for stage in stages:
            calls += self.stage_calls(stage, n, buf, ws.data.ptr)
            self.stage_notes[stage.name] = stage.note
        calls += self.side_calls("softmax", n, buf)
        self.stage_notes["softmax"] = "cudnnSoftmaxForward on the side (no softmax node in the frontend)"
        calls.append((cp.cuda.runtime.memcpyAsync, (flag.ctypes.data, buf["one"], 4, D2H, s)))  # the flag: 1
        return Plan(stages, arrays, buf, ws, pinned, host_in, host_out, flag, tuple(calls))

    def dense_stage(self, name: str, n: int, buf: dict) -> Stage | None:
        """Dense layer `name` as one cuBLASLt matmul, bias (and ReLU) in its epilogue, checked by one
        run; None (the graph forms then) where the stage is no dense layer, there is no cuBLASLt,
        or cuBLASLt refuses (the reason kept for the stage's note)."""
        layer = next((d for d in DENSE if d[0] == name), None)
        net = self.net
        if layer is None or getattr(net, "lt", None) is None:
            return None
        _, src, fan_in, fan_out, relu = layer
        kernel, bias = net.w[name]
        matmul = None
        try:
            matmul = cublaslt.DenseMatmul(  # cuBLAS' workspace: the same stream, in order
                net.lt, net.lt_handle, self.dtype, n, fan_in, fan_out, relu, kernel.data.ptr, buf[src],
                buf[name], bias.data.ptr, net.alpha, net.beta, net.blas_ws.data.ptr, cublas.WORKSPACE_BYTES,
                net.stream.ptr)
            matmul.run()
            net.stream.synchronize()
        except cublas.CublasError as exc:
            self.probe(f"{name}'s cuBLASLt matmul (batch {n})", exc)  # a fault ends here, no fallback
            if matmul is not None:
                matmul.close()
            self.lt_refused[name] = f"cuBLASLt refused: {exc}"
            return None
        epilogue = "bias and ReLU" if relu else "bias"
        return Stage(name, [], note=f"one cublasLtMatmul, {epilogue} in its epilogue", lt=matmul)

    def stage_calls(self, stage: Stage, n: int, buf: dict, ws: int) -> list:
        """A stage's calls, each graph's plans timed and the fastest pinned, then run once here (on
        the plan's buffers: cuDNN checks pointer alignment at execution, not at build); a pooling
        graph refused now goes on the side, any other stage refused is Unavailable with cuDNN's
        reason. A cuBLASLt stage: its matmul."""
        if stage.lt is not None:
            return [(self.net.lt.cublasLtMatmul, stage.lt.args)]
        calls = []
        try:
            for gr in stage.graphs:  # the variant pack: uid -> device pointer, resolved once
                pack = {uid: self.pointer(buf, where) for uid, where in gr.binds.items()}
                self.plan_notes[f"{gr.name} (batch {n})"] = self.pin_fastest(gr.graph, pack, ws)
                calls.append((gr.graph.execute, (pack, ws, self.handle)))
                gr.graph.execute(pack, ws, self.handle)
            self.net.stream.synchronize()
        except Exception as exc:  # cuDNN's refusal at execution
            self.probe(f"{stage.name}'s graph (batch {n})", exc)  # a fault ends here, no fallback
            stage.graphs, stage.note = [], f"executing {stage.note} failed: {type(exc).__name__}: {exc}"
        if stage.graphs:
            return calls + (self.epilogue_calls(stage.name, n, buf) if stage.epilogue else [])
        if not stage.name.startswith("pool"):
            raise Unavailable(f"cuDNN's graph API refused {stage.name} (batch {n}, {self.dtype}): "
                              f"{stage.note}")
        stage.note = f"cudnnPoolingForward on the side (the pointwise graph refused: {stage.note})"
        return self.side_calls(stage.name, n, buf)

    def pin_fastest(self, graph, pack: dict, ws: int) -> str:
        """Every plan of the graph run once, then timed over PLAN_TIMING_CALLS executions (the host's
        clock around them and a synchronize: what a call waits for); the fastest selected, what
        graph.execute runs from now on; what was pinned, said."""
        count = graph.get_execution_plan_count()
        if count < 2:
            return f"its one plan of {count}"
        times, refused = [], 0
        for index in range(count):
            try:
                graph.execute_plan_at_index(pack, ws, index, self.handle)
                self.net.stream.synchronize()
                start = time.perf_counter()
                for _ in range(PLAN_TIMING_CALLS):
                    graph.execute_plan_at_index(pack, ws, index, self.handle)
                self.net.stream.synchronize()
                times.append(((time.perf_counter() - start) / PLAN_TIMING_CALLS, index))
            except Exception as exc:  # a plan that refuses these pointers at execution: not a candidate
                self.probe(f"plan {index} of {count}", exc)  # a fault ends here: no next plan
                refused += 1
        if not times:
            return f"none of its {count} plans ran here: heuristics' first kept"
        seconds, best = min(times)
        graph.select_plan(best)
        return (f"plan {best} of {count} pinned, the fastest at {seconds * 1e6:.1f} µs"
                + (f" ({refused} refused at execution)" if refused else ""))

    def enqueue(self, p: Plan) -> None:
        for fn, args in p.calls:
            fn(*args)

    def capture(self, p: Plan):
        """The plan's call captured into a CUDA graph after one eager run (kernels loaded); None
        where the capture is refused (capture_note says why; calls then stay eager)."""
        s, begun = self.net.stream, False
        with s:
            try:
                s.begin_capture()
                begun = True
                self.enqueue(p)
                graph, begun = s.end_capture(), False
            except Exception as exc:  # capture refused, a call refused while captured, an invalidated capture
                if begun:
                    try:
                        s.end_capture()  # leave the stream usable; the first error is the one to see
                    except Exception:  # an invalidated capture also fails to end
                        pass
                self.probe("the CUDA graph capture", exc)  # a fault ends here: no eager calls after it
                self.capture_note = f"eager calls: the CUDA graph capture failed: {exc}"
                return None
        self.capture_note = "the whole call replayed as one CUDA graph"
        return graph

    def predict(self, images: np.ndarray) -> np.ndarray:
        p = self.plan(len(images))
        np.copyto(p.host_in, images.transpose(0, 3, 1, 2))  # NHWC -> NCHW into mapped memory
        p.flag[0] = 0  # before the launch (x86 keeps the stores in order)
        if p.graph is not None:
            p.graph.launch(self.net.stream)
        else:
            with self.net.stream:
                self.enqueue(p)
        self.wait_for_flag(p)  # the one synchronization per call: no events, no device time
        out = p.host_out.copy()
        if not p.capture_tried:  # the eager call's answer stands; the next calls replay its capture
            p.capture_tried = True
            p.graph = self.capture(p)
            # what ran, where the harness reads a cuDNN level's notes (kernels rows)
            self.net.fusion_note = "; ".join([*(f"{k}: {v}" for k, v in self.stage_notes.items()),
                                              *(f"{k}: {v}" for k, v in self.plan_notes.items()),
                                              self.capture_note])
        return out

    def wait_for_flag(self, p: Plan) -> None:
        """Spin until the call's last node has set the flag (its answer is then in host_out); a call
        that failed never sets it, so after POLL_TIMEOUT_S the stream says why."""
        deadline = None
        while p.flag[0] == 0:
            if deadline is None:
                deadline = time.monotonic() + POLL_TIMEOUT_S
            elif time.monotonic() > deadline:  # still running: hung; a failed call's error: a fault
                gpu_fault.drain(self.net.stream, QUIT_WAIT_S, f"cudnn/frontend ({self.dtype})'s call")
                raise RuntimeError(f"cudnn/frontend's call did not set its flag in {POLL_TIMEOUT_S:g} s")

    def probe(self, where: str, exc: BaseException) -> None:
        """After exc on a fallback path: the context probed (harness.frameworks.gpu_fault.probe); a
        sticky error (an illegal or misaligned address: a mapped pointer, say) ends the process as a
        fault named by it, never a refusal and a fallback that the poisoned context would fail too."""
        gpu_fault.probe(self.net.stream, f"cudnn/frontend ({self.dtype}): {where}", exc)

    def close(self) -> None:
        gpu_fault.drain(self.net.stream, CLOSE_WAIT_S, f"cudnn/frontend ({self.dtype})'s close")
        for p in self.plans.values():
            p.graph = None  # the executable goes before the memory it points at
            for stage in p.stages:
                if stage.lt is not None:
                    stage.lt.close()
        self.plans.clear()
        for d in self._descriptors.values():
            d.close()
        self._descriptors.clear()
        self._transposed.clear()
        if getattr(self, "handle", None) is not None:
            self.cudnn.destroy_handle(self.handle)
            self.handle = None


def record_device_properties(device: int = 0) -> str:
    """The serialized device-properties descriptor of GPU `device` (cuDNN >= 9.8): what deviceless
    ahead-of-time compilation builds plans against (see tests/test_cudnn_frontend.py)."""
    cudnn = import_frontend(cu.load())
    try:
        return cudnn.create_device_properties(device).serialize()
    except Exception as exc:  # cuDNN < 9.8 has no device-properties descriptor
        raise Unavailable(f"cuDNN {cudnn.backend_version()} records no device properties: {exc}") from None


def build_deviceless(serialized: str, n: int = 1, dtype: str = "float32") -> dict[str, str]:
    """Every stage's graphs built for the device `serialized` describes, without a GPU: stage ->
    what built (or why not). Needs libcudnn, not a device."""
    cudnn = import_frontend(cu.load())
    try:
        props = cudnn.create_device_properties(serialized)
    except Exception as exc:  # cuDNN < 9.8, or a descriptor this cuDNN cannot read
        raise Unavailable(f"cuDNN {cudnn.backend_version()} cannot read the device properties: "
                          f"{exc}") from None
    new = GraphMaker(cudnn, dtype, device_property=props)
    stages = [plan_stage(cudnn, name, forms, dtype) for name, forms in stage_forms(new, n).items()]
    return {s.name: s.note if s.graphs else f"refused: {s.note}" for s in stages}

