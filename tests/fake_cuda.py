"""The CUDA level without a GPU: its .cu kernels compiled by g++ for the CPU (cuda_emu/cuda_emu.h
runs every block and thread of a launch) behind a fake CuPy, so lenet_cuda.model runs end to end
here: its RawModule, launches, argument tuples, buffers, copies, events and graph capture.

Device arrays are host NumPy arrays with NaN guard zones on both sides: a kernel that reads past a
buffer gets NaN into its answer, one that writes past it spoils a guard, which `check_guards`
reports. Kernel arguments are checked against lenet_cuda.kernels.PARAMS (count, element type,
numpy.int32 for ints), as CuPy would pass them."""

import ctypes
import hashlib
import shutil
import subprocess
import types

import numpy as np

from lenet_cuda import kernels
from tests.conftest import ROOT

EMU = ROOT / "tests" / "cuda_emu"
GUARD = 64  # elements of NaN (or 0xAB bytes) on each side of a device array
CPP_TYPES = {"T*": "{T}*", "int": "int"}


def wrapper_source() -> str:
    """C++ that includes both .cu files and exports emu_<kernel>_<type>(grid, block, params...)."""
    parts = ['#include "cuda_emu.h"']
    for cu in sorted(set(kernels.SOURCES.values())):
        parts.append(f'#include "{ROOT / "lenet_cuda" / cu}"')
    for variant, names in kernels.KERNELS.items():
        if variant == "graph":
            continue
        barriers = "__syncthreads" in kernels.source(variant)
        for kernel in names:
            for ctype in kernels.CTYPES.values():
                params = [CPP_TYPES[p].format(T=ctype) for p in kernels.PARAMS[kernel]]
                decl = ", ".join(f"{p} a{i}" for i, p in enumerate(params))
                call = ", ".join(f"a{i}" for i in range(len(params)))
                parts.append(f'extern "C" int emu_{kernel}_{ctype}(unsigned grid, unsigned block, {decl}) '
                             f'{{ return emu_launch(grid, block, {str(barriers).lower()}, '
                             f'[=] {{ {kernel}<{ctype}>({call}); }}); }}')
    return "\n".join(parts) + "\n"


def build(folder) -> ctypes.CDLL:
    """Compile the emulated kernels into folder/ (g++, C++20 for std::barrier); cached by source."""
    if shutil.which("g++") is None:
        raise FileNotFoundError("g++ is not installed: the CPU emulation of the CUDA kernels needs it")
    source = wrapper_source()
    text = source + (EMU / "cuda_emu.h").read_text() + "".join(
        kernels.source(v) for v in ("layers", "fused"))
    lib = folder / f"emu-{hashlib.sha256(text.encode()).hexdigest()[:16]}.so"
    if not lib.exists():
        cpp = folder / "emu.cpp"
        cpp.write_text(source)
        done = subprocess.run(["g++", "-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-Wall",
                               "-Wno-unused-function", "-I", str(EMU), str(cpp), "-o", str(lib)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"g++ could not compile the kernels for the CPU:\n{done.stderr}")
    return ctypes.CDLL(str(lib))


class DeviceArray(np.ndarray):
    """A host array standing in for cupy.ndarray: `.data.ptr` is its address."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


class FakeCupy:
    """What lenet_cuda.model uses of CuPy; kernel launches go to the emulated kernels."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib, self.guarded, self.launched, self.capturing = lib, [], [], None
        self.compiled = []  # (source file, options, name expressions) per RawModule
        fake = self
        self.cuda = types.SimpleNamespace(
            Stream=lambda non_blocking=False: FakeStream(fake, non_blocking),
            Event=FakeEvent,
            get_elapsed_time=lambda start, end: 0.25,  # ms
            alloc_pinned_memory=lambda nbytes: bytearray(nbytes),
            compiler=types.SimpleNamespace(CompileException=type("CompileException", (Exception,), {})),
            runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, memcpyAsync=self.memcpy_async))
        self.RawModule = lambda code, options=(), name_expressions=(): FakeModule(fake, code, options,
                                                                                  name_expressions)
        self.get_default_memory_pool = self.get_default_pinned_memory_pool = \
            lambda: types.SimpleNamespace(free_all_blocks=lambda: None)

    def empty(self, shape, dtype):
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        whole = np.full(count + 2 * GUARD, np.nan, dtype)
        self.guarded.append(whole)
        return whole[GUARD:GUARD + count].reshape(shape).view(DeviceArray)

    def asarray(self, array):
        out = self.empty(np.shape(array), np.asarray(array).dtype)
        out[...] = array
        return out

    def check_guards(self):
        """Every guard zone still NaN: no kernel wrote past its buffer."""
        for whole in self.guarded:
            if not (np.isnan(whole[:GUARD]).all() and np.isnan(whole[-GUARD:]).all()):
                raise AssertionError(f"a kernel wrote outside a device array of {len(whole) - 2 * GUARD} elements")

    def memcpy_async(self, dst, src, nbytes, kind, stream):
        self.record(("memcpy", kind, nbytes), lambda: ctypes.memmove(dst, src, nbytes))

    def record(self, what, run):
        if self.capturing is not None:
            self.capturing.append((what, run))
        else:
            self.launched.append(what)
            run()


class FakeModule:
    def __init__(self, fake, code, options, name_expressions):
        files = [cu for cu in set(kernels.SOURCES.values()) if kernels.HERE.joinpath(cu).read_text() == code]
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
            ctypes.c_void_p if p == "T*" else ctypes.c_int for p in self.params]

    def __call__(self, grid, block, args, shared_mem=0):
        if len(grid) != 1 or len(block) != 1 or shared_mem != 0:
            raise ValueError(f"{self.expr}: expected 1-D grid and block and no dynamic shared memory")
        if len(args) != len(self.params):
            raise TypeError(f"{self.expr}: {len(args)} arguments, the kernel takes {len(self.params)}")
        values = []
        for i, (param, arg) in enumerate(zip(self.params, args, strict=True)):
            if param == "T*":
                if not isinstance(arg, DeviceArray) or arg.dtype != self.dtype:
                    raise TypeError(f"{self.expr} argument {i}: expected a {self.dtype} device array, "
                                    f"found {type(arg).__name__} {getattr(arg, 'dtype', '')}")
                values.append(arg.data.ptr)
            else:
                if type(arg) is not np.int32:
                    raise TypeError(f"{self.expr} argument {i}: expected numpy.int32, found {type(arg).__name__}")
                values.append(int(arg))

        def run():
            if self.fn(grid[0], block[0], *values) != 0:
                raise AssertionError(f"{self.expr}: threads of a block passed different numbers of barriers")

        self.fake.record(("kernel", self.expr, grid[0], block[0]), run)


class FakeGraph:
    def __init__(self, fake, steps):
        self.fake, self.steps, self.launches = fake, steps, 0

    def launch(self, stream):
        self.launches += 1
        for what, run in self.steps:
            self.fake.launched.append(what)
            run()


class FakeStream:
    ptr = 0x5157

    def __init__(self, fake, non_blocking):
        self.fake, self.non_blocking = fake, non_blocking

    def synchronize(self):
        pass

    def begin_capture(self):
        if self.fake.capturing is not None:
            raise RuntimeError("already capturing")
        self.fake.capturing = []

    def end_capture(self):
        steps, self.fake.capturing = self.fake.capturing, None
        return FakeGraph(self.fake, steps)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeEvent:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass
