"""LeNet-5 as hand-written CUDA C kernels (layers.cu, fused.cu), compiled at run time by NVRTC
through CuPy (cupy.RawModule), CuPy device memory, NHWC on the device.

The weights go to the device as the shared file holds them (Keras layouts: HWIO conv kernels,
(in, out) dense kernels, fc1's rows in NHWC flatten order), only cast to the dtype: the kernels
index those layouts directly (kernels.py lists every launch and buffer).

Variants:
- layers: one kernel per layer (conv+bias+ReLU, max pool, dense+bias+ReLU, softmax): 8 launches.
- fused: the whole network in one kernel, one block per image, activations in shared memory.
- graph: fused, with its call (copy in, the kernel, copy out) captured once per batch size into
  a CUDA graph and replayed (the rules of cudnn/graph): one launch per call.
- cluster: one image on a cluster of 8 blocks on 8 SMs (cluster.cu, sm_90), its call (copy in,
  the kernel, copy out) in a CUDA graph as graph's.
- mapped: cluster's kernel reading the image from and writing the answer to mapped page-locked host
  memory (no copies), in a CUDA graph; the host polls a flag the kernel sets instead of waiting on
  an event (no wake-up of a sleeping thread), so it has no device time.
- persistent: no launch per call. One cluster of cluster.cu's stays resident, its weights in
  registers and shared memory, and serves each call from mapped page-locked host memory: the host
  writes the images and stores the call's number, the kernel (block 0's thread 0 polling across
  the bus) serves them and stores it back; the host polls that. A cluster idle for
  kernels.IDLE_NS ends (its 8 SMs freed for other work) and is launched again by the next call.
- resident: persistent's idea on LL pairs (resident.cu, lenet_cuda/resident.py): each value and
  each answer crosses the bus with its call's sequence number in one 8-byte store, so the kernel
  polls the image itself and the host the answer itself (no control words, no fences); it ends after
  kernels.IDLE_NS idle and is not launched while another process computes on the GPU (the call
  then goes to mapped's launched kernel).
- rows: one image on a cluster of 5 blocks split by rows (rows.cu, sm_90): block r computes pool2's
  row r from its own image rows, fc1's partial sums go to block 0 through an mbarrier; no cluster
  barrier an image. Its call as cluster's (copy in, the kernel, copy out in a CUDA graph).
- resident_rows: rows' split on resident's wire and manners (rows.cu's lenet_resident_rows, one
  cluster of 5 resident between calls, no cluster barrier an image: rounds through double-buffered
  slots with mbarriers; lenet_cuda/resident.py is its host side too).
- batch: for throughput (batch.cu): 4 images a block, conv weights staged once per block, fc1's
  weights read once per block for its 4 images, several multiply-adds per shared-memory load. Its
  x and out are mapped page-locked host memory (zero copy), the call a CUDA graph of the one kernel
  and an event: the blocks' reads of their next image cross the bus while their current image is
  computed, so the input's transfer overlaps the compute without splitting the copy into chunks on
  two streams (a graph of chunked copies and launches, the other way, adds a launch and a copy per
  chunk and overlaps only chunk k+1's copy with chunk k's kernel: the first copy and the last
  kernel stay exposed). The host's copy of the images into the pinned memory is part of the call,
  done before the graph's launch (the kernel may read any image as soon as it starts).
- batch2: batch's successor (batch2.cu): 2 images a block computed at once, two blocks an SM. No
  copy of the images by the host: the caller's array is registered once (cudaHostRegister, mapped;
  registered.py says which arrays and for how long) and the kernel reads it across the bus, its
  blocks' reads overlapping the others' compute; an array that cannot be registered (not
  C-contiguous, another dtype, seen once) is copied into mapped staging memory as batch does. The
  answer in mapped host memory; the kernel launched directly (the input's address changes every
  call, so no graph), an event pair around it.
- batch2_device: batch2's kernel on device memory: the images copied in (cudaMemcpyAsync from the
  registered array, at the bus's full rate), the kernel, the answer copied out. The kernels
  trace's kernel time is the device-resident throughput (input already on the GPU); its copy's
  time is the bus's rate for 1.6 MB.
- overlap: one block an SM (overlap.cu), each prefetching its next image with cp.async while it
  computes the current one (groups of 4 images for the dense layers), so the bus's transfer and
  the SMs' compute overlap inside the kernel. The images' address is a word in mapped memory the
  host writes before the launch (the caller's registered array, as batch2's, or the staging), so
  the launch's arguments are fixed and the call is a CUDA graph captured once per batch size; the
  answer in mapped host memory, the call waited on by the flag the last block sets (no event, no
  copy back).
All: buffers and pinned host memory allocated once per batch size, argument tuples built once per
batch size, asynchronous work on one stream of the level's own, one synchronization per call,
CUDA events around the work for the device time (mapped: none). float32 and float64 (the
kernels are templates; `name<float>` or `name<double>` is compiled).
"""

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.base import LeNet, check_images
from harness.data import weights
from harness.errors import Unavailable
from harness.frameworks import gpu_fault
from harness.frameworks.cupy_setup import import_cupy
from harness.registry import REGISTRY
from lenet_cuda import kernels, resident
from lenet_cuda.registered import Registered

H2D, D2H = 1, 2  # cudaMemcpyKind
HOST_ALLOC_MAPPED = 2  # cudaHostAllocMapped: page-locked host memory the device reads and writes
GRAPHED = ("graph", "cluster", "mapped", "batch", "rows")  # variants whose call is a CUDA graph
ZERO_COPY = ("batch",)  # kernels reading x and writing out in mapped host memory, waited on by an event
POLL_TIMEOUT_S = 5.0  # mapped: a flag not set by then is a failed kernel, not a slow one
QUIT_WAIT_S = resident.QUIT_WAIT_S  # after a wait's deadline: how long the stream is given to end
CLOSE_WAIT_S = 10.0  # close(): the stream's work (a resident kernel told to quit) waited for, at most


@dataclass
class Plan:
    """Everything a call of batch size n needs, built once (CudaLeNet.plan); graph: captured later."""

    arrays: dict  # name -> cupy array on the device (kernels.buffer_shapes)
    pinned: tuple  # (in, out) pinned host memory, kept alive
    host_in: np.ndarray  # (N, 28, 28, 1) in pinned memory
    host_out: np.ndarray  # (N, 10) in pinned memory
    launches: tuple  # (kernel, grid, block, args): args prebuilt, device arrays and numpy.int32
    events: tuple  # (start, end) CUDA events around the work
    graph: Any = None  # graph, cluster, mapped: the captured cupy.cuda.graph.Graph
    flag: Any = None  # mapped: (1,) uint32 in mapped host memory, the number of calls ended
    ctl: Any = None  # persistent: (4,) uint32 in mapped host memory, kernels.CTL_* (go, ended, alive, quit)
    calls: int = 0  # mapped, persistent: calls made
    zero_copy: bool = False  # batch: x and out in mapped host memory, no copies


class CudaLeNet(LeNet):
    spec = REGISTRY["cuda"]

    def __init__(self, weights_path, device="gpu", variant=None, dtype="float32"):
        super().__init__(weights_path, device, variant, dtype)
        gpu_fault.refuse_quarantined("cuda", self.variant, dtype)  # the smoke found it hung or faulted
        self.cp = cp = import_cupy()
        self.stream = cp.cuda.Stream(non_blocking=True)  # a graph cannot be captured on the legacy one
        cu = kernels.SOURCES[self.variant]
        arch = "sm_" + str(cp.cuda.Device().compute_capability)
        if not kernels.compiles_for(cu, arch):
            raise Unavailable(f"{cu} needs compute capability {kernels.MIN_ARCH[cu] / 10:.1f} "
                              f"(thread-block clusters); this GPU is {arch}")
        try:
            module = cp.RawModule(code=kernels.source(self.variant), options=kernels.OPTIONS,
                                  name_expressions=kernels.name_expressions(self.variant, dtype))
            self.fn = {expr.partition("<")[0]: module.get_function(expr)  # compiles (NVRTC) here
                       for expr in kernels.name_expressions(self.variant, dtype)}
        except cp.cuda.compiler.CompileException as exc:  # the source: a bug, not this machine
            raise RuntimeError(f"NVRTC could not compile {kernels.SOURCES[self.variant]}: {exc}") from None
        except Exception as exc:  # no libnvrtc, a driver too old for the PTX: this machine
            raise Unavailable(f"CuPy cannot compile or load the CUDA kernels here ({type(exc).__name__}: "
                              f"{exc}); install NVRTC: pip install 'cupy-cuda12x[ctk]' or "
                              "nvidia-cuda-nvrtc-cu12") from None
        self.module = module
        # {"conv1.kernel": (5, 5, 1, 6) HWIO, "conv1.bias": (6,), "conv2.kernel": (5, 5, 6, 16), ...,
        #  "fc1.kernel": (400, 120) rows in NHWC flatten order, "fc2.kernel": (120, 84),
        #  "fc3.kernel": (84, 10), each bias (out,)}
        with self.stream:
            self.w = {f"{name}.{part}": cp.asarray(np.ascontiguousarray(array, dtype))
                      for name, layer in weights.read(weights_path).items()
                      for part, array in (("kernel", layer.kernel), ("bias", layer.bias))}
        self.stream.synchronize()
        self.plans = {}  # batch size -> buffers, pinned memory, argument tuples, events, graph
        self.serving = None  # persistent: the plan whose kernel served the last call
        self.resident = resident.Resident(self) if self.variant in kernels.RESIDENT_VARIANTS else None
        # batch2, batch2_device: the caller's arrays registered with the device (registered.py)
        self.registered = (Registered(cp.cuda.runtime, dtype)
                           if self.variant in (*kernels.BATCH2_VARIANTS, "overlap") else None)
        self.last_device_ns = None

    def plan(self, n):
        """Everything a call of batch size n needs, allocated and built once."""
        if n not in self.plans and self.variant in ZERO_COPY:
            self.plans[n] = self.plan_zero_copy(n)
        if n not in self.plans and self.variant in kernels.BATCH2_VARIANTS:
            self.plans[n] = self.plan_batch2(n)
        if n not in self.plans and self.variant == "overlap":
            self.plans[n] = self.plan_overlap(n)
        if n not in self.plans:
            cp, itemsize = self.cp, np.dtype(self.dtype).itemsize
            mapped = self.variant in ("mapped", "persistent")
            signal_name = "ctl" if self.variant == "persistent" else "flag"  # uint32 words the host reads
            shapes = kernels.buffer_shapes(self.variant, n)
            words = shapes[signal_name][0] if mapped else 0
            with self.stream:  # only mapped's image count starts at zero; the rest is written before read
                arrays = {name: (cp.zeros if name == "done" else cp.empty)(
                              shape, np.uint32 if name in ("done", "flag") else self.dtype)
                          for name, shape in shapes.items() if not (mapped and name in kernels.MAPPED_HOST)}
            if mapped:  # the kernel's x, out and flag (ctl): host memory it reads and writes across the bus
                pinned = tuple(cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(size, HOST_ALLOC_MAPPED), 0)
                               for size in (n * 784 * itemsize, n * 10 * itemsize, 4 * words))
            else:
                pinned = (cp.cuda.alloc_pinned_memory(n * 784 * itemsize),
                          cp.cuda.alloc_pinned_memory(n * 10 * itemsize))
            host_in = np.frombuffer(pinned[0], self.dtype, n * 784).reshape(n, 28, 28, 1)
            host_out = np.frombuffer(pinned[1], self.dtype, n * 10).reshape(n, 10)
            signal = np.frombuffer(pinned[2], np.uint32, words) if mapped else None
            if signal is not None:
                signal[:] = 0
            host = {"x": host_in, "out": host_out, signal_name: signal} if mapped else {}
            named = {**self.w, **arrays, **{k: np.uint64(a.ctypes.data) for k, a in host.items()}}
            self.plans[n] = Plan(
                arrays=arrays, pinned=pinned, host_in=host_in, host_out=host_out,
                **({signal_name: signal} if mapped else {}),
                launches=tuple((self.fn[k.kernel], (k.grid,), (k.block,),
                                tuple(named[a] if isinstance(a, str) else None if a is None else np.int32(a)
                                      for a in k.args))
                               for k in kernels.launches(self.variant, n)),
                events=(cp.cuda.Event(), cp.cuda.Event()))  # done's zeros: on the stream, before any call
        return self.plans[n]

    def plan_zero_copy(self, n):
        """batch: x and out in mapped page-locked host memory (the kernel reads and writes them across
        the bus), nothing on the device but the weights; an event pair as the copying variants."""
        cp, itemsize = self.cp, np.dtype(self.dtype).itemsize
        pinned = tuple(cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(size, HOST_ALLOC_MAPPED), 0)
                       for size in (n * 784 * itemsize, n * 10 * itemsize))
        host_in = np.frombuffer(pinned[0], self.dtype, n * 784).reshape(n, 28, 28, 1)
        host_out = np.frombuffer(pinned[1], self.dtype, n * 10).reshape(n, 10)
        host = dict(zip(kernels.BATCH_HOST, (host_in, host_out), strict=True))  # host pointers: numpy.uint64
        named = {**self.w, **{name: np.uint64(a.ctypes.data) for name, a in host.items()}}
        return Plan(arrays={}, pinned=pinned, host_in=host_in, host_out=host_out, zero_copy=True,
                    launches=tuple((self.fn[k.kernel], (k.grid,), (k.block,),
                                    tuple(named[a] if isinstance(a, str) else np.int32(a) for a in k.args))
                                   for k in kernels.launches(self.variant, n)),
                    events=(cp.cuda.Event(), cp.cuda.Event()))

    def plan_batch2(self, n):
        """batch2: staging for x (used when the caller's array cannot be registered) and out in mapped
        host memory; batch2_device: x and out on the device, page-locked staging on the host. The
        launch's args with the staging x; a call puts its own x first (predict_batch2)."""
        cp, itemsize = self.cp, np.dtype(self.dtype).itemsize
        device = self.variant == "batch2_device"
        if device:
            with self.stream:
                arrays = {name: cp.empty(shape, self.dtype)
                          for name, shape in kernels.buffer_shapes(self.variant, n).items()}
            pinned = tuple(cp.cuda.alloc_pinned_memory(n * size * itemsize) for size in (784, 10))
        else:
            arrays = {}
            pinned = tuple(cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(size, HOST_ALLOC_MAPPED), 0)
                           for size in (n * 784 * itemsize, n * 10 * itemsize))
        host_in = np.frombuffer(pinned[0], self.dtype, n * 784).reshape(n, 28, 28, 1)
        host_out = np.frombuffer(pinned[1], self.dtype, n * 10).reshape(n, 10)
        host = {"x": np.uint64(host_in.ctypes.data), "out": np.uint64(host_out.ctypes.data)}  # mapped
        named = {**self.w, **(arrays if device else host)}
        return Plan(arrays=arrays, pinned=pinned, host_in=host_in, host_out=host_out, zero_copy=not device,
                    launches=tuple((self.fn[k.kernel], (k.grid,), (k.block,),
                                    tuple(named[a] if isinstance(a, str) else np.int32(a) for a in k.args))
                                   for k in kernels.launches(self.variant, n)),
                    events=(cp.cuda.Event(), cp.cuda.Event()))

    def plan_overlap(self, n):
        """overlap: src, the staging x, out and flag in mapped host memory (kernels.OVERLAP_HOST),
        done on the device (zero: the kernel's last block leaves it so); the graph captured at the
        first call."""
        cp, itemsize = self.cp, np.dtype(self.dtype).itemsize
        with self.stream:
            done = cp.zeros((1,), np.uint32)
        pinned = tuple(cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(size, HOST_ALLOC_MAPPED), 0)
                       for size in (8, n * 784 * itemsize, n * 10 * itemsize, 4))
        src = np.frombuffer(pinned[0], np.uint64, 1)
        host_in = np.frombuffer(pinned[1], self.dtype, n * 784).reshape(n, 28, 28, 1)
        host_out = np.frombuffer(pinned[2], self.dtype, n * 10).reshape(n, 10)
        flag = np.frombuffer(pinned[3], np.uint32, 1)
        flag[:] = 0
        host = dict(zip(kernels.OVERLAP_HOST, (src, host_in, host_out, flag), strict=True))
        named = {**self.w, "done": done, **{name: np.uint64(a.ctypes.data) for name, a in host.items()}}
        self.stream.synchronize()  # done's zero written before any launch reads it
        return Plan(arrays={"done": done, "src": src}, pinned=pinned, host_in=host_in, host_out=host_out,
                    flag=flag, zero_copy=True,
                    launches=tuple((self.fn[k.kernel], (k.grid,), (k.block,),
                                    tuple(named[a] if isinstance(a, str) else np.int32(a) for a in k.args))
                                   for k in kernels.launches(self.variant, n)),
                    events=())

    def predict_overlap(self, images):
        """One call of overlap: the images' address into src (the caller's registered array, or the
        staging after a copy: cp.async needs 16-byte alignment), the graph launched, the flag
        waited on; the first call of a batch size captures the graph after running it eagerly."""
        with self.stream:
            p = self.plan(len(images))
            device = self.registered.device_pointer(images)  # None: copy into the staging memory
            if device is None or device % 16 != 0:
                np.copyto(p.host_in, images)
                device = p.host_in.ctypes.data  # mapped: the device's address is the host's (UVA)
            p.arrays["src"][0] = device  # before the launch (x86 keeps the stores in order)
            if p.graph is None:
                p.graph = self.capture(p)  # its eager run answered this call (the flag says 1)
            else:
                p.graph.launch(self.stream)
                self.wait_for_flag(p)  # the one synchronization per call
        return p.host_out.copy()

    def predict_batch2(self, images):
        """One call of batch2 or batch2_device (see the module's docstring); images checked."""
        rt, s = self.cp.cuda.runtime, self.stream.ptr
        with self.stream:
            p = self.plan(len(images))
            (fn, grid, block, args), = p.launches
            device = self.registered.device_pointer(images)  # None: copy into the staging memory
            if device is None:
                np.copyto(p.host_in, images)
            start, end = p.events
            start.record(self.stream)
            if p.zero_copy:  # batch2: the kernel reads the caller's registered array, or the staging
                fn(grid, block, (np.uint64(device), *args[1:]) if device is not None else args)
            else:  # batch2_device: from registered memory the copy runs at the bus's rate, no staging
                src = images.ctypes.data if device is not None else p.host_in.ctypes.data
                rt.memcpyAsync(p.arrays["x"].data.ptr, src, p.host_in.nbytes, H2D, s)
                fn(grid, block, args)
                rt.memcpyAsync(p.host_out.ctypes.data, p.arrays["out"].data.ptr, p.host_out.nbytes, D2H, s)
            end.record(self.stream)
            self.wait_for_event(end)  # the one synchronization per call
        self.last_device_ns = int(self.cp.cuda.get_elapsed_time(start, end) * 1e6)
        return p.host_out.copy()

    def wait_for_event(self, end):
        """Spin until the event has happened (cudaEventQuery: a failed kernel's error is raised by
        the query itself); after POLL_TIMEOUT_S a RuntimeError, without a blocking wait that could
        hang: a wait with a limit."""
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while not end.done:
            if time.monotonic() > deadline:
                self.settle()  # a kernel still running, or one that failed, ends the process
                raise RuntimeError(f"lenet_batch2 did not finish in {POLL_TIMEOUT_S:g} s")

    def enqueue(self, p):
        """One call's work on the stream: pinned input -> device, the kernels, device -> pinned
        output. Every address is the plan's, fixed for its lifetime: what a CUDA graph replays."""
        rt, s = self.cp.cuda.runtime, self.stream.ptr
        if p.zero_copy:  # batch: the kernel reads and writes the host's memory itself
            for fn, grid, block, args in p.launches:
                fn(grid, block, args)
            return
        if p.flag is None:
            rt.memcpyAsync(p.arrays["x"].data.ptr, p.host_in.ctypes.data, p.host_in.nbytes, H2D, s)
        for fn, grid, block, args in p.launches:
            fn(grid, block, args)  # on CuPy's current stream: self.stream (predict enters it)
        if p.flag is None:
            rt.memcpyAsync(p.host_out.ctypes.data, p.arrays["out"].data.ptr, p.host_out.nbytes, D2H, s)

    def capture(self, p):
        """The plan's call captured into a CUDA graph, once per batch size, after one eager run
        (the module loaded on the device, nothing left to allocate)."""
        s = self.stream
        self.enqueue(p)
        gpu_fault.drain(s, POLL_TIMEOUT_S, f"cuda/{self.variant}'s first call")  # hung or faulted: ends here
        p.calls += 1  # mapped: that run counted as a call ended (the flag now says 1)
        s.begin_capture()
        try:
            self.enqueue(p)
        except BaseException:
            try:
                s.end_capture()  # leave the stream usable; the first error is the one to see
            except Exception:
                pass
            raise
        return s.end_capture()  # cupy.cuda.graph.Graph, instantiated

    def predict(self, images):
        images = check_images(images)
        if self.resident is not None:  # resident: LL pairs, no stream work a call
            return self.resident.predict(images)
        if self.variant == "overlap":
            return self.predict_overlap(images)
        if self.registered is not None:  # batch2, batch2_device
            return self.predict_batch2(images)
        if self.variant == "persistent":  # no stream work a call (a launch only when the kernel has ended)
            p = self.plan(len(images))
            np.copyto(p.host_in, images)
            self.serve(p)  # the one synchronization per call: the kernel's answer
            return p.host_out.copy()
        with self.stream:  # CuPy's current stream: the kernels launch on it
            p = self.plan(len(images))
            np.copyto(p.host_in, images)  # (N, 28, 28, 1) NHWC as it is, cast to the dtype
            if self.variant in GRAPHED and p.graph is None:
                p.graph = self.capture(p)
            if p.flag is not None:
                p.graph.launch(self.stream)
                self.wait_for_flag(p)  # the one synchronization per call
                return p.host_out.copy()
            start, end = p.events
            start.record(self.stream)
            if p.graph is not None:
                p.graph.launch(self.stream)
            else:
                self.enqueue(p)
            end.record(self.stream)
            end.synchronize()  # the one synchronization per call
        self.last_device_ns = int(self.cp.cuda.get_elapsed_time(start, end) * 1e6)
        return p.host_out.copy()

    def wait_for_flag(self, p):
        """mapped: spin until the kernel's flag counts this call (its answers are then in host_out);
        a kernel that failed never sets it, so after POLL_TIMEOUT_S the stream says why."""
        p.calls += 1
        flag, want = p.flag, p.calls
        deadline = None
        while flag[0] != want:
            if deadline is None:
                deadline = time.monotonic() + POLL_TIMEOUT_S
            elif time.monotonic() > deadline:
                self.settle()  # a kernel still running, or one that failed, ends the process
                raise RuntimeError(f"{kernels.KERNELS[self.variant][0]} did not set its flag in "
                                   f"{POLL_TIMEOUT_S:g} s (flag {int(flag[0])}, expected {want})")

    def serve(self, p):
        """persistent: store the call's number for the resident kernel (launching it first when it
        has ended), then spin until it stores the number back (its answers are then in host_out);
        a kernel that ends without serving the call is launched again; a failed one never answers,
        so after POLL_TIMEOUT_S the stream says why."""
        ctl = p.ctl
        if self.serving is not None and self.serving is not p:
            self.serving.ctl[kernels.CTL_QUIT] = 1  # the other batch size's kernel: end it now
        self.serving = p
        p.calls += 1
        want = p.calls
        ctl[kernels.CTL_GO] = want  # after the images (x86 keeps the stores in order)
        deadline = None
        while ctl[kernels.CTL_ENDED] != want:
            if ctl[kernels.CTL_ALIVE] == 0:  # ended (idle, told to), or never launched: launch it
                self.launch_resident(p)
            if deadline is None:
                deadline = time.monotonic() + POLL_TIMEOUT_S
            elif time.monotonic() > deadline:
                ctl[kernels.CTL_QUIT] = 1  # a kernel that still polls ends at its next quit check
                self.settle()  # a kernel still running, or one that failed, ends the process
                ended, alive = int(ctl[kernels.CTL_ENDED]), int(ctl[kernels.CTL_ALIVE])
                raise RuntimeError(f"lenet_persistent did not serve call {want} in {POLL_TIMEOUT_S:g} s "
                                   f"(ended {ended}, alive {alive})")

    def settle(self):
        """A wait past its deadline: the stream given QUIT_WAIT_S to end (polled, never a blocking
        synchronize); still running, the process ends as hung; a kernel's sticky error ends it as a
        fault (harness.frameworks.gpu_fault). Returns where the stream ended clean."""
        gpu_fault.drain(self.stream, QUIT_WAIT_S, f"cuda/{self.variant} ({self.dtype})")

    def launch_resident(self, p):
        """persistent: launch the resident kernel on the level's stream (after any ending one)."""
        p.ctl[kernels.CTL_QUIT] = 0
        p.ctl[kernels.CTL_ALIVE] = 1  # the kernel stores 0 as it ends
        with self.stream:
            for fn, grid, block, args in p.launches:
                fn(grid, block, args)

    def last_device_time_ns(self):
        return self.last_device_ns

    def close(self):
        if self.resident is not None:
            self.resident.close()
        for p in self.plans.values():
            if p.ctl is not None:
                p.ctl[kernels.CTL_QUIT] = 1  # a resident kernel ends at its next poll
        # polled with a deadline: a kernel still running then ends the process as hung, before any
        # memory it may touch is freed (harness.frameworks.gpu_fault)
        gpu_fault.drain(self.stream, CLOSE_WAIT_S, f"cuda/{self.variant} ({self.dtype})'s close")
        if self.resident is not None:  # its kernel has ended: its mapped memory may go
            self.resident.plans.clear()
        if self.registered is not None:  # no kernel reads a caller's array any more
            self.registered.close()
        for p in self.plans.values():
            p.graph = None  # the graph's executable goes before the memory it points at
        self.plans.clear()
        self.w = {}
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()
