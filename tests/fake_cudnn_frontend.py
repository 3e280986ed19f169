"""Stand-ins for what cudnn/frontend asks of a GPU (test fakes, not the level): the real frontend
builds each graph's IR; FakeGraph plans it by a test's rules (which graphs cuDNN "refuses", at
planning or at execution) and executes it in NumPy on the host addresses of its variant pack.
CuPy's copies, events and stream capture, and the legacy library's side calls, run on the host;
while a FakeStream captures, what is enqueued is recorded, and its graph's launch replays it.
"""

import ctypes
import time
import types
from collections.abc import Callable

import cudnn
import numpy as np

from harness import DEFAULT_WEIGHTS
from harness.data import weights
from lenet_cudnn import binding as cu
from lenet_cudnn import cublas, cublaslt, layout
from tests import fake_gpu

NodeType = cudnn.NodeType
CAPTURING: list = []  # the stream capturing now, if any
CLOCK = [0.0]  # seconds of 'device' time: each plan's execution adds Rules.slow (the level's clock: clock)


def enqueue(fn, *args):
    """Run `fn` now, or record it where a stream is capturing (what a CUDA graph replays)."""
    if CAPTURING:
        CAPTURING[0].recorded.append((fn, args))
    else:
        fn(*args)


# --- the graphs' arithmetic, in NumPy -----------------------------------------------------------


def xcorr(x, kcrs, pad):
    """(N, C, H, W) x (K, C, R, S) -> (N, K, H', W'), cuDNN's CROSS_CORRELATION."""
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    windows = np.lib.stride_tricks.sliding_window_view(x, kcrs.shape[2:], axis=(2, 3))  # (N,C,H',W',R,S)
    return np.einsum("nchwrs,kcrs->nkhw", windows, kcrs)


POINTWISE = {"bias": np.add, "max": np.maximum, "relu": lambda a: np.maximum(a, 0)}


def run_nodes(graph, read: Callable, write: Callable) -> None:
    """The graph's nodes in order: read(tensor) gives a non-virtual input, write(tensor, value)
    stores a non-virtual output (each checked to be a row-major tensor)."""
    values = {}
    for node in graph.nodes:
        ins = [values[t.uid] if t.uid in values else read(t) for t in node.inputs.values()]
        if node.node_type == NodeType.CONV_FPROP:
            y = xcorr(ins[0], ins[1], node.params["padding"])
        elif node.node_type == NodeType.MATMUL:
            y = ins[0] @ ins[1]
        else:
            assert node.node_type == NodeType.POINTWISE, node
            y = POINTWISE[node.params["mode"]](*ins)
        (out,) = node.outputs.values()
        values[out.uid] = y
        if not out.is_virtual:
            assert list(y.shape) == out.dim and out.stride == [int(np.prod(out.dim[i + 1:])) for i in
                                                               range(len(out.dim))]
            write(out, y)


def strided(address, t, dtype):
    """Tensor t's elements at a device address, through its dims and strides (inside one array)."""
    span = 1 + sum((d - 1) * s for d, s in zip(t.dim, t.stride, strict=True))
    flat = fake_gpu.device(address, span, dtype)
    return np.lib.stride_tricks.as_strided(flat, shape=t.dim, strides=[s * flat.itemsize for s in t.stride])


# --- the frontend -------------------------------------------------------------------------------


class Rules:
    """What cuDNN refuses: build(graph) and execute(graph, pack) return a reason, or None.
    plans: how many plans each graph gets; slow(graph, index): the seconds an execution of that
    plan takes on the fake clock (so the level's timing has a fastest to find, whatever the load)."""

    def __init__(self, build=None, execute=None, plans=3, slow=None):
        self.build = build or (lambda graph: None)
        self.execute = execute or (lambda graph, pack: None)
        self.plans = plans
        self.slow = slow or (lambda graph, index: 1e-5 if index == 1 else 2e-5)


class FakeGraph(cudnn.pygraph):
    rules = Rules()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        kind = kwargs["io_data_type"]
        self.np_dtype = np.float32 if kind == cudnn.data_type.FLOAT else np.float64
        self.steps: list[str] = []
        self.selected = 0  # the plan execute runs (heuristics' first until select_plan)
        self.executed: list[int] = []  # the plan of each execution, in order

    def validate(self):
        self.steps.append("validate")

    def build_operation_graph(self):
        self.steps.append("build_operation_graph")

    def create_execution_plans(self, heuristics=None):
        self.steps.append(f"plans {heuristics}")

    def deselect_numeric_notes(self, notes):
        self.steps.append(f"deselect {sorted(n.name for n in notes)}")
        return self

    def check_support(self):
        self.steps.append("check_support")

    def build_plans(self, *args, **kwargs):
        reason = self.rules.build(self)
        if reason:
            raise RuntimeError(f"CUDNN_STATUS_NOT_SUPPORTED: {reason}")
        self.steps.append("build_plans")

    def get_workspace_size(self, *args, **kwargs):
        return 96

    def get_execution_plan_count(self):
        assert "build_plans" in self.steps
        return self.rules.plans

    def get_workspace_size_plan_at_index(self, index, *args, **kwargs):
        assert 0 <= index < self.rules.plans
        return 96 + 32 * index

    def select_plan(self, index):
        assert 0 <= index < self.rules.plans
        self.selected = index
        self.steps.append(f"select {index}")
        return self

    def execute(self, pack, workspace=None, handle=None, *args, **kwargs):
        self.execute_plan_at_index(pack, workspace, self.selected, handle)

    def execute_plan_at_index(self, pack, workspace=None, index=0, handle=None, *args, **kwargs):
        reason = self.rules.execute(self, pack)
        if reason:
            raise RuntimeError(f"CUDNN_STATUS_BAD_PARAM: {reason}")
        assert workspace and handle is not None and handle.destroyed is False and 0 <= index < self.rules.plans
        enqueue(self.run_plan, index, dict(pack))

    def run_plan(self, index, pack):
        self.executed.append(index)
        CLOCK[0] += self.rules.slow(self, index)
        self.run(pack)

    def run(self, pack):
        def write(t, y):
            fake_gpu.device(pack[t.uid], y.size, self.np_dtype)[:] = y.ravel()

        run_nodes(self, lambda t: strided(pack[t.uid], t, self.np_dtype), write)


class FakeHandle:
    def __init__(self):
        self.stream, self.destroyed = None, False


def clock():
    """The level's `time` module: perf_counter reads the fake clock, monotonic is the real one."""
    return types.SimpleNamespace(perf_counter=lambda: CLOCK[0], monotonic=time.monotonic)


def frontend_module(rules: Rules):
    """The `cudnn` module as cudnn/frontend uses it, its graphs FakeGraphs under `rules`."""
    graph = type("RuledGraph", (FakeGraph,), {"rules": rules})

    def set_stream(handle, stream):
        handle.stream = stream

    def destroy_handle(handle):
        handle.destroyed = True

    return types.SimpleNamespace(pygraph=graph, create_handle=FakeHandle, set_stream=set_stream,
                                 destroy_handle=destroy_handle, data_type=cudnn.data_type,
                                 heur_mode=cudnn.heur_mode, numerical_note=cudnn.numerical_note,
                                 build_plan_policy=cudnn.build_plan_policy,
                                 __version__="fake")


# --- CuPy and the level -------------------------------------------------------------------------


class FakeStream(fake_gpu.Stream):
    refuse_capture = False

    def __init__(self, non_blocking=False):
        super().__init__(non_blocking)
        self.recorded, self.launches = [], 0

    def begin_capture(self):
        if self.refuse_capture:
            raise RuntimeError("cudaErrorStreamCaptureUnsupported")
        self.recorded = []
        CAPTURING.append(self)

    def end_capture(self):
        CAPTURING.remove(self)
        return CudaGraph(self, list(self.recorded))


class CudaGraph:
    def __init__(self, stream, calls):
        self.stream, self.calls = stream, calls

    def launch(self, stream):
        stream.launches += 1
        for fn, args in self.calls:
            fn(*args)


class Event:
    def record(self, stream):
        pass

    def synchronize(self):
        pass


def fake_cupy():
    cp = fake_gpu.fake_cupy()
    cp.ascontiguousarray = cp.asarray  # a C-order copy in 'device' memory
    runtime = types.SimpleNamespace(memcpyAsync=lambda dst, src, n, kind, s: enqueue(ctypes.memmove, dst, src, n))
    cp.cuda = types.SimpleNamespace(Stream=FakeStream, Event=Event, runtime=runtime, PinnedMemory=mapped_memory,
                                    PinnedMemoryPointer=lambda memory, offset: memoryview(memory)[offset:])
    return cp


def mapped_memory(size, flags):
    """Page-locked host memory the 'device' reaches (cudaHostAllocMapped): a fake device array."""
    assert flags & 2, "not mapped: no kernel could read or write it"
    return fake_gpu.fake_cupy().empty(size, np.uint8)


class RecordingLib:
    """The legacy library, its calls enqueued like everything else (the side calls)."""

    def __init__(self, lib):
        self.lib = lib

    def __getattr__(self, name):
        fn = getattr(self.lib, name)
        return lambda *args: enqueue(fn, *args)


def fake_net(dtype: str, lt_library=None):
    """What FrontendNet reads of its CudnnLeNet: CuPy, the stream, the legacy library and handle,
    alpha and beta, the weights in cuDNN layouts; cuBLASLt (fake_gpu.FakeCublasLt: lt_library) or
    none, and its workspace."""
    cp = fake_cupy()
    lib = cu.Cudnn("fake-libcudnn", "test", fake_gpu.FakeCudnn())
    handle = cu.Handle()
    lib.cudnnCreate(ctypes.byref(handle))
    scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
    one, zero = scalar(1.0), scalar(0.0)
    w = {name: (cp.asarray(k), cp.asarray(b))
         for name, (k, b) in layout.convert(weights.read(DEFAULT_WEIGHTS), dtype).items()}
    lt = None  # cuBLASLt's matmuls enqueued as the legacy calls are
    if lt_library is not None:
        lt = cublaslt.CublasLt("fake-libcublasLt", "test", lt_library)
        lt.cublasLtMatmul = RecordingLib(types.SimpleNamespace(cublasLtMatmul=lt.cublasLtMatmul)).cublasLtMatmul
    lt_handle = cublaslt.Handle()
    if lt is not None:
        lt.cublasLtCreate(ctypes.byref(lt_handle))
    return types.SimpleNamespace(cp=cp, dtype=dtype, lib=RecordingLib(lib), raw_lib=lib, handle=handle,
                                 stream=FakeStream(), alpha=ctypes.addressof(one), beta=ctypes.addressof(zero),
                                 scalars=(one, zero), w=w, itemsize=np.dtype(dtype).itemsize, fusion_note=None,
                                 lt=lt, lt_handle=lt_handle, blas_ws=cp.empty(cublas.WORKSPACE_BYTES, np.uint8))
