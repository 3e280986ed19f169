"""The CUDA level without a GPU: its .cu kernels compiled by g++ for the CPU (cuda_emu/cuda_emu.h
runs every block and thread of a launch) behind a fake CuPy, so lenet_cuda.model runs end to end
here: its RawModule, launches, argument tuples, buffers, copies, events and graph capture.

Device arrays are host NumPy arrays with NaN guard zones on both sides: a kernel that reads past a
buffer gets NaN into its answer, one that writes past it spoils a guard, which `check_guards`
reports. Kernel arguments are checked against lenet_cuda.kernels.PARAMS (count, element type,
numpy.int32 for ints), as CuPy would pass them."""

import ctypes
import hashlib
import re
import shutil
import subprocess
import types

import numpy as np

from lenet_cuda import kernels
from tests.conftest import ROOT

EMU = ROOT / "tests" / "cuda_emu"
GUARD = 64  # elements of NaN (or 0xAB bytes) on each side of a device array
CPP_TYPES = {"T*": "{T}*", "int": "int"}


def wrapper(symbol: str, call: str, params: list[str], barriers: bool) -> str:
    """extern "C" int symbol(grid, block, params...): runs `call` as a launch (0 ok, 1 divergent barriers)."""
    decl = ", ".join(f"{p} a{i}" for i, p in enumerate(params))
    args = ", ".join(f"a{i}" for i in range(len(params)))
    return (f'extern "C" int {symbol}(unsigned grid, unsigned block, {decl}) '
            f'{{ return emu_launch(grid, block, {str(barriers).lower()}, [=] {{ {call}({args}); }}); }}')


def compile_emulated(folder, codes: list[str], wrappers: list[str]) -> ctypes.CDLL:
    """The CUDA sources `codes` and the wrappers as one shared library for the CPU (g++, C++20 for
    std::barrier), in folder/, cached by content."""
    if shutil.which("g++") is None:
        raise FileNotFoundError("g++ is not installed: the CPU emulation of the CUDA kernels needs it")
    key = hashlib.sha256("\0".join([(EMU / "cuda_emu.h").read_text(), *codes, *wrappers]).encode()).hexdigest()[:16]
    lib = folder / f"emu-{key}.so"
    if not lib.exists():
        includes = []
        for i, code in enumerate(codes):
            (folder / f"src-{key}-{i}.cu").write_text(code)
            includes.append(f'#include "src-{key}-{i}.cu"')
        cpp = folder / f"emu-{key}.cpp"
        cpp.write_text("\n".join(['#include "cuda_emu.h"', *includes, *wrappers]) + "\n")
        done = subprocess.run(["g++", "-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-Wall",
                               "-Wno-unused-function", "-I", str(EMU), str(cpp), "-o", str(lib)],
                              capture_output=True, text=True, timeout=300)
        if "barrier: No such file" in done.stderr:  # g++ older than 11: no C++20 std::barrier
            raise FileNotFoundError("this g++ has no C++20 <barrier>: the CPU emulation needs g++ >= 11")
        if done.returncode != 0:
            raise RuntimeError(f"g++ could not compile the kernels for the CPU:\n{done.stderr}")
    return ctypes.CDLL(str(lib))


def build(folder) -> ctypes.CDLL:
    """lenet_cuda's two .cu files, every template instance as emu_<kernel>_<type>."""
    wrappers = []
    for variant in ("layers", "fused"):
        barriers = "__syncthreads" in kernels.source(variant)
        for kernel in kernels.KERNELS[variant]:
            for ctype in kernels.CTYPES.values():
                params = [CPP_TYPES[p].format(T=ctype) for p in kernels.PARAMS[kernel]]
                wrappers.append(wrapper(f"emu_{kernel}_{ctype}", f"{kernel}<{ctype}>", params, barriers))
    return compile_emulated(folder, [kernels.source(v) for v in ("layers", "fused")], wrappers)


class DeviceArray(np.ndarray):
    """A host array standing in for cupy.ndarray: `.data.ptr` is its address."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self):
        """Device -> host, as cupy.ndarray.get: a plain NumPy copy."""
        return np.array(self).view(np.ndarray)


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

    def asarray(self, array, dtype=None):
        array = np.asarray(array, dtype)
        out = self.empty(array.shape, array.dtype)
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


# --- a lab submission: extern "C" kernels of its own, CuPy as a student's glue uses it ------------
def extern_c_kernels(code: str) -> dict[str, list[str]]:
    """{kernel name: parameter C types} of every extern "C" __global__ function in `code`."""
    code = re.sub(r"//[^\n]*", "", code)
    return {name: [" ".join(p.split()[:-1]) for p in params.split(",")]
            for name, params in re.findall(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', code)}


class LabCupy(FakeCupy):
    """cupy.RawModule(code=...) compiles the submission's own kernels for the CPU (g++)."""

    float32 = np.float32

    def __init__(self, folder):
        super().__init__(None)
        self.folder = folder
        self.RawModule = self.raw_module

    def raw_module(self, code, options=()):
        found = extern_c_kernels(code)
        barriers = "__syncthreads" in code
        lib = compile_emulated(self.folder, [code], [wrapper(f"emu_{name}", name, params, barriers)
                                                      for name, params in found.items()])
        return types.SimpleNamespace(get_function=lambda name: LabKernel(self, lib, name, found[name]))


class LabKernel:
    CTYPES = {"int": ctypes.c_int, "float": ctypes.c_float}

    def __init__(self, fake, lib, name, params):
        self.fake, self.name, self.params = fake, name, params
        self.fn = getattr(lib, f"emu_{name}")
        self.fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [
            ctypes.c_void_p if p.endswith("*") else self.CTYPES[p] for p in params]

    def __call__(self, grid, block, args, shared_mem=0):
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}: {len(args)} arguments, the kernel takes {len(self.params)}")
        values = []
        for i, (param, arg) in enumerate(zip(self.params, args, strict=True)):
            if param.endswith("*"):
                if not isinstance(arg, DeviceArray) or arg.dtype != np.float32:
                    raise TypeError(f"{self.name} argument {i}: expected a float32 device array")
                values.append(arg.data.ptr)
            else:
                if param == "int" and type(arg) is not np.int32:
                    raise TypeError(f"{self.name} argument {i}: expected numpy.int32, found {type(arg).__name__}")
                values.append(arg)
        if self.fn(grid[0], block[0], *values) != 0:
            raise AssertionError(f"{self.name}: threads of a block passed different numbers of barriers")
