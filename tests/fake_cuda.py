"""The CUDA level without a GPU: its .cu kernels compiled by g++ for the CPU (harness/lab/cuda_emu.h
runs every block and thread of a launch) behind a fake CuPy, so lenet_cuda.model runs end to end
here: its RawModule, launches, argument tuples, buffers, copies, events and graph capture.

The emulation itself (g++, guarded device arrays, streams, events, graphs, a lab submission's own
kernels: LabCupy) is harness.lab.emucuda, which the CUDA lab's student kit ships too; this file
adds the level's side. Kernel arguments are checked against lenet_cuda.kernels.PARAMS (count,
element type, numpy.int32 for ints), as CuPy would pass them."""

import ctypes
import types

import numpy as np

from harness.lab.emucuda import (  # noqa: F401 (the tests' names for them)
    DeviceArray,
    EmuCupy,
    FakeEvent,
    LabCupy,
    LabKernel,
    compile_emulated,
    extern_c_kernels,
    wrapper,
)
from lenet_cuda import kernels

CPP_TYPES = {"T*": "{T}*", "u32*": "unsigned*", "u64*": "unsigned long long*", "int": "int"}
def build(folder) -> ctypes.CDLL:
    """lenet_cuda's .cu files, every kernel of every variant that uses each (cluster.cu: lenet_cluster
    and lenet_persistent), every template instance as emu_<kernel>_<type>; cluster.cu's launched in
    clusters of kernels.CLUSTER blocks."""
    files = dict.fromkeys(kernels.SOURCES.values())  # each .cu once
    wrappers = []
    for cu in files:
        code = kernels.file_source(cu)
        cluster = kernels.CLUSTER_SIZE.get(cu, 1)
        names = dict.fromkeys(k for v, source in kernels.SOURCES.items() if source == cu for k in kernels.KERNELS[v])
        for kernel in names:
            for ctype in kernels.CTYPES.values():
                params = [CPP_TYPES[p].format(T=ctype) for p in kernels.PARAMS[kernel]]
                wrappers.append(wrapper(f"emu_{kernel}_{ctype}", f"{kernel}<{ctype}>", params,
                                        "__syncthreads" in code, cluster))
    return compile_emulated(folder, [kernels.file_source(cu) for cu in files], wrappers)


class FakeCupy(EmuCupy):
    """What lenet_cuda.model uses of CuPy; kernel launches go to the emulated kernels. Host memory
    registered with hostRegister (batch2's caller arrays) is mapped: a kernel may read it, as the
    CUDA runtime does with cudaHostRegisterMapped; registering pages twice fails as it does there."""

    def __init__(self, lib: ctypes.CDLL):
        super().__init__(lib)
        self.RawModule = lambda code, options=(), name_expressions=(): FakeModule(self, code, options,
                                                                                  name_expressions)
        self.registered: dict[int, int] = {}  # base -> bytes, registered now
        self.registrations: list[tuple[str, int]] = []  # ("register" | "unregister", base), in order
        self.cuda.Event = DoneEvent
        rt = self.cuda.runtime
        rt.hostRegister, rt.hostUnregister = self.host_register, self.host_unregister
        rt.pointerGetAttributes = self.pointer_attributes

    def host_register(self, base: int, nbytes: int, flags: int) -> None:
        if not flags & 2:
            raise ValueError("hostRegister without cudaHostRegisterMapped: the kernel could not read it")
        page = 4096  # the runtime pins whole pages: two registrations of one page collide
        if any(b // page <= (base + nbytes - 1) // page and base // page <= (b + n - 1) // page
               for b, n in self.registered.items()):
            raise RuntimeError("cudaErrorHostMemoryAlreadyRegistered")
        self.registered[base] = nbytes
        self.registrations.append(("register", base))

    def host_unregister(self, base: int) -> None:
        if self.registered.pop(base, None) is None:
            raise RuntimeError("cudaErrorHostMemoryNotRegistered")
        self.registrations.append(("unregister", base))

    def pointer_attributes(self, ptr: int):
        if not any(b <= ptr < b + n for b, n in self.registered.items()):
            raise RuntimeError("cudaErrorInvalidValue: not registered host memory")
        return types.SimpleNamespace(devicePointer=ptr, hostPointer=ptr)  # unified addressing: the same

    def mapped_pointer(self, ptr: int, kernel: str, index: int) -> int:
        if any(b <= ptr < b + n for b, n in self.registered.items()):
            return ptr
        return super().mapped_pointer(ptr, kernel, index)


class DoneEvent(FakeEvent):
    """An event whose work has run (the emulator runs every launch at once): done, as CuPy's says."""

    done = True


class FakeModule:
    def __init__(self, fake, code, options, name_expressions):
        files = [cu for cu in set(kernels.SOURCES.values()) if kernels.file_source(cu) == code]
        if len(files) != 1:
            raise ValueError("RawModule: the code is not one of lenet_cuda's .cu files")
        self.fake, self.names = fake, list(name_expressions)
        fake.compiled.append((files[0], tuple(options), tuple(name_expressions)))

    def get_function(self, expr):
        if expr not in self.names:
            raise KeyError(f"{expr} was not among the module's name expressions {self.names}")
        return FakeKernel(self.fake, expr)


class FakeKernel:
    def __init__(self, fake, expr):
        self.fake, self.expr = fake, expr
        self.kernel, ctype = expr[:-1].split("<")
        self.dtype = np.dtype({v: k for k, v in kernels.CTYPES.items()}[ctype])
        self.params = kernels.PARAMS[self.kernel]
        self.fn = getattr(fake.lib, f"emu_{self.kernel}_{ctype}")
        self.fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [
            ctypes.c_int if p == "int" else ctypes.c_void_p for p in self.params]

    def __call__(self, grid, block, args, shared_mem=0):
        if len(grid) != 1 or len(block) != 1 or shared_mem != 0:
            raise ValueError(f"{self.expr}: expected 1-D grid and block and no dynamic shared memory")
        if len(args) != len(self.params):
            raise TypeError(f"{self.expr}: {len(args)} arguments, the kernel takes {len(self.params)}")
        values = []
        for i, (param, arg) in enumerate(zip(self.params, args, strict=True)):
            if param in ("T*", "u32*", "u64*"):
                dtype = self.dtype if param == "T*" else np.dtype(np.uint32 if param == "u32*" else np.uint64)
                if type(arg) is np.uint64:  # a host pointer: it must lie in mapped page-locked memory
                    values.append(self.fake.mapped_pointer(int(arg), self.expr, i))
                elif arg is None and param == "u32*":
                    values.append(None)
                elif not isinstance(arg, DeviceArray) or arg.dtype != dtype:
                    raise TypeError(f"{self.expr} argument {i}: expected a {dtype} device array, "
                                    f"found {type(arg).__name__} {getattr(arg, 'dtype', '')}")
                else:
                    values.append(arg.data.ptr)
            else:
                if type(arg) is not np.int32:
                    raise TypeError(f"{self.expr} argument {i}: expected numpy.int32, found {type(arg).__name__}")
                values.append(int(arg))

        def run():
            status = self.fn(grid[0], block[0], *values)
            if status == 2:
                size = kernels.CLUSTER_SIZE[kernels.SOURCES[next(v for v, k in kernels.KERNELS.items()
                                                                 if self.kernel in k)]]
                raise ValueError(f"{self.expr}: grid {grid[0]} is not a whole number of clusters of {size}")
            if status != 0:
                raise AssertionError(f"{self.expr}: threads of a block passed different numbers of barriers")

        self.fake.record(("kernel", self.expr, grid[0], block[0]), run)
