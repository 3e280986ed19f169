"""CUDA kernels on the CPU, for a machine without a GPU (the CUDA lab's student kit, and the tests):
the .cu source compiled by g++ with cuda_emu.h (every block and thread of a launch run in turn)
behind a fake CuPy that does what a submission's glue asks of CuPy.

Device arrays are host NumPy arrays with NaN guard zones on both sides: a kernel that reads past a
buffer gets NaN into its answer, one that writes past it spoils a guard, which `check_guards`
reports. What this checks: the kernels' index arithmetic, bounds and barriers. What it cannot: the
GPU's memory model, warps, timing.

    wrapper(symbol, call, params, barriers), compile_emulated(folder, codes, wrappers)   g++
    DeviceArray, EmuCupy (arrays, copies, streams, events, graph capture, mapped page-locked memory),
    FakeStream, FakeEvent, FakeGraph                                                      CuPy's parts
    guard_value(dtype)                          what a guard zone holds: NaN, or 0xAB bytes in an int array
    extern_c_kernels(code), LabCupy, LabKernel     a submission's own extern "C" kernels (RawModule(code=...))
"""

import ctypes
import hashlib
import re
import shutil
import subprocess
import types
from pathlib import Path
from typing import Any

import numpy as np

EMU = Path(__file__).resolve().parent  # holds cuda_emu.h
GUARD = 64  # elements of NaN (or 0xAB bytes) on each side of a device array


def wrapper(symbol: str, call: str, params: list[str], barriers: bool, cluster: int = 1) -> str:
    """extern "C" int symbol(grid, block, params...): runs `call` as a launch in clusters of `cluster`
    blocks (0 ok, 1 divergent barriers, 2 a grid that is not a whole number of clusters)."""
    decl = ", ".join(f"{p} a{i}" for i, p in enumerate(params))
    args = ", ".join(f"a{i}" for i in range(len(params)))
    return (f'extern "C" int {symbol}(unsigned grid, unsigned block, {decl}) '
            f'{{ return emu_launch(grid, block, {cluster}, {str(barriers).lower()}, '
            f'[=] {{ {call}({args}); }}); }}')


def compile_emulated(folder: Path, codes: list[str], wrappers: list[str]) -> ctypes.CDLL:
    """The CUDA sources `codes` and the wrappers as one shared library for the CPU (g++, C++20 for
    std::barrier), in folder/, cached by content."""
    if shutil.which("g++") is None:
        raise FileNotFoundError("g++ is not installed: the CPU emulation of the CUDA kernels needs it")
    folder = Path(folder)
    text = "\0".join([(EMU / "cuda_emu.h").read_text(), *codes, *wrappers])
    key = hashlib.sha256(text.encode()).hexdigest()
    lib = folder / f"emu-{key[:16]}.so"
    if not lib.exists():
        includes = []
        for i, code in enumerate(codes):
            (folder / f"src-{key[:16]}-{i}.cu").write_text(code)
            includes.append(f'#include "src-{key[:16]}-{i}.cu"')
        cpp = folder / f"emu-{key[:16]}.cpp"
        cpp.write_text("\n".join(['#include "cuda_emu.h"', *includes, *wrappers]) + "\n")
        done = subprocess.run(["g++", "-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-Wall",
                               "-Wno-unused-function", "-I", str(EMU), str(cpp), "-o", str(lib)],
                              capture_output=True, text=True, timeout=300)
        if "barrier: No such file" in done.stderr:  # g++ older than 11: no C++20 std::barrier
            raise FileNotFoundError("this g++ has no C++20 <barrier>: the CPU emulation needs g++ >= 11")
        if done.returncode != 0:
            raise RuntimeError(f"g++ could not compile the kernels for the CPU:\n{done.stderr}")
    return ctypes.CDLL(str(lib))


def guard_value(dtype: np.dtype) -> Any:
    """What a guard zone holds: NaN in a float array, 0xAB bytes in any other."""
    return np.nan if dtype.kind == "f" else np.frombuffer(b"\xab" * dtype.itemsize, dtype)[0]


class DeviceArray(np.ndarray):
    """A host array standing in for cupy.ndarray: `.data.ptr` is its address."""

    @property
    def data(self) -> Any:
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self) -> np.ndarray:
        """Device -> host, as cupy.ndarray.get: a plain NumPy copy."""
        return np.array(self).view(np.ndarray)


class EmuCupy:
    """What CuPy code uses besides kernels: guarded arrays, copies, streams, events, graph capture;
    `launched` lists what ran (kernels and copies), in order."""

    float32 = np.float32

    def __init__(self, lib: ctypes.CDLL | None) -> None:
        self.lib = lib
        self.guarded: list[np.ndarray] = []  # each array whole, guard zones included
        self.launched: list[tuple] = []
        self.capturing: list | None = None  # the steps of a graph being captured
        self.compiled: list = []  # (source file, options, name expressions) per RawModule
        self.mapped: list[bytearray] = []  # PinnedMemory(size, cudaHostAllocMapped): a kernel reaches it
        self.compute_capability = "90"
        fake = self
        self.cuda = types.SimpleNamespace(
            Stream=lambda non_blocking=False: FakeStream(fake, non_blocking),
            Event=FakeEvent,
            Device=lambda: types.SimpleNamespace(compute_capability=fake.compute_capability),
            get_elapsed_time=lambda start, end: 0.25,  # ms
            alloc_pinned_memory=lambda nbytes: bytearray(nbytes),
            PinnedMemory=self.pinned_memory,
            PinnedMemoryPointer=lambda memory, offset: memoryview(memory)[offset:],
            compiler=types.SimpleNamespace(CompileException=type("CompileException", (Exception,), {})),
            runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, memcpyAsync=self.memcpy_async))
        self.get_default_memory_pool = self.get_default_pinned_memory_pool = \
            lambda: types.SimpleNamespace(free_all_blocks=lambda: None)

    def empty(self, shape: Any, dtype: Any) -> DeviceArray:
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        whole = np.full(count + 2 * GUARD, guard_value(dtype), dtype)
        self.guarded.append(whole)
        return whole[GUARD:GUARD + count].reshape(shape).view(DeviceArray)

    def zeros(self, shape: Any, dtype: Any) -> DeviceArray:
        out = self.empty(shape, dtype)
        out[...] = 0
        return out

    def pinned_memory(self, nbytes: int, flags: int = 0) -> bytearray:
        memory = bytearray(nbytes)
        if flags & 2:  # cudaHostAllocMapped
            self.mapped.append(memory)
        return memory

    def mapped_pointer(self, ptr: int, kernel: str, index: int) -> int:
        """A host pointer passed to a kernel: it must point into mapped page-locked memory."""
        for memory in self.mapped:
            start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
            if start <= ptr < start + len(memory):
                return ptr
        raise TypeError(f"{kernel} argument {index}: a host pointer outside mapped page-locked memory")

    def asarray(self, array: Any, dtype: Any = None) -> DeviceArray:
        array = np.asarray(array, dtype)
        out = self.empty(array.shape, array.dtype)
        out[...] = array
        return out

    def check_guards(self) -> None:
        """Every guard zone still NaN: no kernel wrote past its buffer (AssertionError otherwise)."""
        for whole in self.guarded:
            guards = np.concatenate([whole[:GUARD], whole[-GUARD:]])
            intact = np.isnan(guards) if whole.dtype.kind == "f" else guards == guard_value(whole.dtype)
            if not intact.all():
                raise AssertionError(f"a kernel wrote outside a device array of "
                                     f"{len(whole) - 2 * GUARD} elements")

    def memcpy_async(self, dst: int, src: int, nbytes: int, kind: int, stream: Any) -> None:
        self.record(("memcpy", kind, nbytes), lambda: ctypes.memmove(dst, src, nbytes))

    def record(self, what: tuple, run: Any) -> None:
        if self.capturing is not None:
            self.capturing.append((what, run))
        else:
            self.launched.append(what)
            run()


class FakeGraph:
    def __init__(self, fake: EmuCupy, steps: list) -> None:
        self.fake, self.steps, self.launches = fake, steps, 0

    def launch(self, stream: Any) -> None:
        self.launches += 1
        for what, run in self.steps:
            self.fake.launched.append(what)
            run()


class FakeStream:
    ptr = 0x5157

    def __init__(self, fake: EmuCupy, non_blocking: bool) -> None:
        self.fake, self.non_blocking = fake, non_blocking

    def synchronize(self) -> None:
        pass

    def begin_capture(self) -> None:
        if self.fake.capturing is not None:
            raise RuntimeError("already capturing")
        self.fake.capturing = []

    def end_capture(self) -> FakeGraph:
        steps, self.fake.capturing = self.fake.capturing, None
        return FakeGraph(self.fake, steps or [])

    def __enter__(self) -> "FakeStream":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class FakeEvent:
    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass


# --- a lab submission: extern "C" kernels of its own, CuPy as a student's glue uses it ------------
def extern_c_kernels(code: str) -> dict[str, list[str]]:
    """{kernel name: parameter C types} of every extern "C" __global__ function in `code`."""
    code = re.sub(r"//[^\n]*", "", code)
    return {name: [" ".join(p.split()[:-1]) for p in params.split(",")]
            for name, params in re.findall(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', code)}


class LabCupy(EmuCupy):
    """cupy.RawModule(code=...) compiles the submission's own kernels for the CPU (g++), in `folder`."""

    def __init__(self, folder: Path) -> None:
        super().__init__(None)
        self.folder = folder
        self.RawModule = self.raw_module

    def raw_module(self, code: str, options: tuple = ()) -> Any:
        found = extern_c_kernels(code)
        barriers = "__syncthreads" in code
        lib = compile_emulated(self.folder, [code], [wrapper(f"emu_{name}", name, params, barriers)
                                                      for name, params in found.items()])
        return types.SimpleNamespace(get_function=lambda name: LabKernel(self, lib, name, found[name]))


class LabKernel:
    CTYPES = {"int": ctypes.c_int, "float": ctypes.c_float}

    def __init__(self, fake: LabCupy, lib: ctypes.CDLL, name: str, params: list[str]) -> None:
        self.fake, self.name, self.params = fake, name, params
        self.fn = getattr(lib, f"emu_{name}")
        self.fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [
            ctypes.c_void_p if p.endswith("*") else self.CTYPES[p] for p in params]

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
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
                    raise TypeError(f"{self.name} argument {i}: expected numpy.int32, "
                                    f"found {type(arg).__name__}")
                values.append(arg)
        if self.fn(grid[0], block[0], *values) != 0:
            raise AssertionError(f"{self.name}: threads of a block passed different numbers of barriers")
