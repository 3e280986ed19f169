"""The hand-written CUDA level (lenet_cuda). Without a GPU: every kernel compiled by the real
NVRTC (the pip wheel) to PTX and cubin for sm_80 and sm_90, with ptxas' registers and shared
memory; the launch configuration and buffers against the oracle's shapes; the kernels run on the
CPU (tests/fake_cuda.py: g++ and one thread per CUDA thread) behind a fake CuPy, so the level's
own code runs end to end against the oracle. With a GPU: the real thing on 10,000 images."""

import functools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.data import mnist, weights
from harness.errors import Unavailable
from harness.machine import gpu, nvrtc
from harness.measure.store import results
from harness.report.claims import loc
from lenet_cuda import kernels, model
from lenet_cuda.explain import work
from lenet_numpy.model import NumpyLeNet, conv2d_relu, max_pool_2x2
from tests import fake_cuda
from tests.conftest import ROOT

ARCHS = ("compute_80", "compute_90", "sm_80", "sm_90")  # PTX, and cubins (ptxas ran) for A100, H100
FILES = sorted(set(kernels.SOURCES.values()))
BUILDS = [(cu, arch) for cu in FILES for arch in ARCHS if kernels.compiles_for(cu, arch)]  # cluster.cu: sm_90
VARIANTS = registry.spec("cuda").variants
THREADS = {"lenet_fused": kernels.FUSED_THREADS, "lenet_cluster": kernels.CLUSTER_THREADS,
           "lenet_persistent": kernels.CLUSTER_THREADS, "lenet_resident": kernels.CLUSTER_THREADS,
           "lenet_batch": kernels.BATCH_THREADS, "lenet_batch2": kernels.BATCH2_THREADS,
           "lenet_rows": kernels.ROWS_THREADS, "lenet_resident_rows": kernels.ROWS_THREADS,
           "lenet_overlap": kernels.OVERLAP_THREADS}  # else LAYER_THREADS
SHARED = {"lenet_fused": kernels.fused_shared_bytes, "lenet_cluster": kernels.cluster_shared_bytes,
          "lenet_persistent": kernels.cluster_shared_bytes, "lenet_resident": kernels.cluster_shared_bytes,
          "lenet_batch": kernels.batch_shared_bytes, "lenet_batch2": kernels.batch2_shared_bytes,
          "lenet_rows": kernels.rows_shared_bytes, "lenet_resident_rows": kernels.rows_shared_bytes,
          "lenet_overlap": kernels.overlap_shared_bytes}
NO_EVENTS = ("mapped", "persistent", "resident", "resident_rows", "overlap")  # the host polls host memory: no device time


def nvrtc_or_skip():
    try:
        return nvrtc.load()
    except Unavailable as exc:
        pytest.skip(f"NVRTC not installed here (pip install nvidia-cuda-nvrtc-cu12): {exc}")


def instances(cu: str) -> set[str]:
    """Every template instance of every variant whose kernels are in cu, both element types."""
    return {e for v, f in kernels.SOURCES.items() if f == cu for dtype in kernels.CTYPES
            for e in kernels.name_expressions(v, dtype)}


@pytest.fixture(scope="module")
def compiled():
    """{(file, arch): Compiled}: every .cu, every instance of both element types, for every arch. The
    units doctor and gpu-explain compile (kernels.nvrtc_units), so theirs for sm_80 and sm_90 are
    these compiles, found in NVRTC's cache."""
    lib = nvrtc_or_skip()
    units = {cu: (text, options, exprs) for text, cu, options, exprs in kernels.nvrtc_units()}
    out = {}
    for cu, arch in BUILDS:
        text, options, exprs = units[cu]
        options = (*options, *(("--ptxas-options=-v",) if arch.startswith("sm_") else ()))
        out[cu, arch] = lib.compile(text, cu, arch, options, exprs)
    return out


# --- NVRTC: every kernel compiles --------------------------------------------------------------
@pytest.mark.parametrize("cu,arch", BUILDS)
def test_every_kernel_compiles_with_nvrtc(compiled, cu, arch):
    result = compiled[cu, arch]
    assert set(result.lowered) == instances(cu)  # every template instance the model asks for
    if arch.startswith("compute_"):
        text = result.image.decode()
        assert f".target sm_{arch[-2:]}" in text
        for mangled in result.lowered.values():
            assert f".entry {mangled}(" in text
    else:
        assert result.image[:4] == b"\x7fELF"  # a cubin
        assert set(result.resources()) == set(result.lowered.values())


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_registers_and_shared_memory_fit_with_no_spills(compiled, arch):
    for cu in FILES:
        if (cu, arch) not in compiled:
            continue
        result = compiled[cu, arch]
        for expr, mangled in result.lowered.items():
            use = result.resources()[mangled]
            kernel = expr.partition("<")[0]
            threads = THREADS.get(kernel, kernels.LAYER_THREADS)
            assert use["registers"] * threads <= 65536, (expr, use)  # a block's registers fit an SM
            assert use["spill_stores"] == 0 and use["stack_bytes"] == 0, (expr, use)
            if kernel in SHARED:
                dtype = "float32" if "<float>" in expr else "float64"
                assert use["shared_bytes"] == SHARED[kernel](dtype) <= kernels.STATIC_SHARED_LIMIT
            else:
                assert use["shared_bytes"] == 0, (expr, use)


def test_the_cluster_kernel_needs_sm_90_and_uses_the_cluster_in_ptx(compiled):
    """Below sm_90 NVRTC refuses cluster.cu (no clusters), which is why kernels.MIN_ARCH says 90;
    at sm_90 its PTX holds the cluster's barriers and the mapped addresses of the others' memory."""
    lib = nvrtc_or_skip()
    with pytest.raises(nvrtc.NvrtcError):
        lib.compile(kernels.source("cluster"), "cluster.cu", "compute_80", kernels.OPTIONS,
                    sorted(instances("cluster.cu")))
    assert not kernels.compiles_for("cluster.cu", "sm_80") and kernels.compiles_for("cluster.cu", "sm_100")
    ptx = compiled["cluster.cu", "compute_90"].image.decode()
    assert ".reqnctapercluster 8, 1, 1" in ptx  # __cluster_dims__: a plain launch makes clusters of 8
    assert "barrier.cluster.wait" in ptx and "mapa.u64" in ptx and "%cluster_ctarank" in ptx


def test_a_compile_error_carries_the_compiler_log():
    lib = nvrtc_or_skip()
    with pytest.raises(nvrtc.NvrtcError, match=r'nvrtcCompileProgram failed(.|\n)*bad.cu\(1\): error: identifier "oops" is undefined'):
        lib.compile("__global__ void k(float* y) { y[0] = oops; }", "bad.cu", "compute_90")
    with pytest.raises(ValueError, match="arch: expected compute_XY"):
        lib.compile("", "x.cu", "90")


def test_resources_compile_once_a_process_and_answer_a_copy(monkeypatch):
    lib = nvrtc_or_skip()
    source = "template <typename T> __global__ void k(T* y) { y[threadIdx.x] = T(1); }"
    compiles = []
    real = lib.compile
    monkeypatch.setattr(lib, "compile", lambda *a, **k: compiles.append(a) or real(*a, **k))
    first = nvrtc.resources(lib, source, "once.cu", "sm_90", (), ["k<float>"])
    first["k<float>"]["registers"] = -1  # a caller changes its answer: the next is untouched
    again = nvrtc.resources(lib, source, "once.cu", "sm_90", (), ["k<float>"])
    assert len(compiles) == 1 and again["k<float>"]["registers"] > 0
    nvrtc.resources(lib, source, "once.cu", "sm_80", (), ["k<float>"])  # another arch: its own compile
    assert len(compiles) == 2


def test_a_compile_is_kept_on_disk_and_read_back_instead_of_compiled_again(monkeypatch, tmp_path):
    """NVRTC's cache (engine_setup.cache_dir("nvrtc")): the same compile is read back, not built again;
    another arch is a compile of its own; a file that is not a compile of its key is built again and
    replaced; where the cache cannot be written, compiles still answer."""
    lib = nvrtc_or_skip()
    monkeypatch.setenv("LENET_CACHE_DIR", str(tmp_path))
    source = "template <typename T> __global__ void k(T* y) { y[threadIdx.x] = T(2); }"
    builds = []
    real = lib.build
    monkeypatch.setattr(lib, "build", lambda *a, **k: builds.append(a[2]) or real(*a, **k))
    args = (source, "kept.cu", "sm_90", ("--ptxas-options=-v",), ["k<float>"])
    first = lib.compile(*args)
    assert lib.compile(*args) == first and builds == ["sm_90"]  # read back: the same image, log and names
    assert first.image[:4] == b"\x7fELF" and list(first.resources()) == list(first.lowered.values())
    (kept,) = (tmp_path / "nvrtc").glob("kept-sm_90-*.json")
    ptx = lib.compile(source, "kept.cu", "compute_90", (), ["k<float>"])
    assert builds == ["sm_90", "compute_90"] and b".entry" in ptx.image
    (ptx_file,) = (tmp_path / "nvrtc").glob("kept-compute_90-*.json")
    for wrong in ('{"arch": "sm_90", "image": "not base64", "log": "", "lowered": {}}', ptx_file.read_text(), "[]"):
        kept.write_text(wrong)  # bad base64; a compile of another arch; no compile at all
        again = lib.compile(*args)  # compiled again (ptxas' log names its own time) and kept
        assert again.image == first.image and nvrtc.read_kept(kept, "sm_90", ["k<float>"]) == again
    assert builds == ["sm_90", "compute_90"] + ["sm_90"] * 3
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("LENET_CACHE_DIR", str(tmp_path / "file"))  # a cache folder that cannot be made
    assert lib.compile(*args).image == lib.compile(*args).image == first.image and builds[-2:] == ["sm_90"] * 2


def test_ptxas_log_parsing():
    log = ("ptxas info    : Compiling entry function '_Z1kPf' for 'sm_80'\n"
           "ptxas info    : Function properties for _Z1kPf\n"
           "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]\n")
    assert nvrtc.ptxas_resources(log) == {"_Z1kPf": {
        "registers": 40, "shared_bytes": 1024, "constant_bytes": {0: 360},
        "stack_bytes": 8, "spill_stores": 4, "spill_loads": 4}}


def test_nvrtc_discovery_and_unavailable_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(nvrtc, "_loaded", None)
    monkeypatch.setenv("LENET_NVRTC_LIBRARY", str(tmp_path / "libnvrtc.so.12"))
    found = nvrtc.candidates()
    assert found[0] == (str(tmp_path / "libnvrtc.so.12"), "LENET_NVRTC_LIBRARY")
    assert found[-2:] == [("libnvrtc.so.13", "system"), ("libnvrtc.so.12", "system")]
    monkeypatch.setattr(nvrtc, "candidates", lambda: [(str(tmp_path / "nope.so"), "test")])
    with pytest.raises(Unavailable, match="no usable libnvrtc found; tried .*nope.so.*nvidia-cuda-nvrtc-cu12"):
        nvrtc.load()
    assert nvrtc.probe()["found"] is False
    monkeypatch.setattr(nvrtc, "_loaded", None)


# --- the host-side contract (kernels.py) against the .cu files and the oracle ------------------
def cu_signatures() -> dict[str, tuple]:
    """Each __global__ function's parameters as PARAMS writes them ("T*" or "int")."""
    found = {}
    for cu in FILES:
        text = re.sub(r"//[^\n]*", "", kernels.file_source(cu))  # comments out
        attributes = r"(?:__(?:launch_bounds|cluster_dims)__\([\w, <>:]+\)\s*)*"
        for name, params in re.findall(rf"__global__ void {attributes}(\w+)\(([^)]*)\)", text):
            found[name] = tuple("T*" if "T*" in p else "u32*" if "unsigned*" in p else
                                "u64*" if "unsigned long long*" in p else
                                "int" if p.split()[0] == "int" else p.strip() for p in params.split(","))
    return found


def test_params_table_matches_the_kernels_signatures():
    assert cu_signatures() == kernels.PARAMS


def test_cluster_shape_and_shared_memory_are_the_ones_in_common_cuh():
    text = (ROOT / "lenet_cuda" / kernels.HEADER).read_text()
    assert int(re.search(r"#define LENET_CLUSTER (\d+)", text).group(1)) == kernels.CLUSTER <= 8  # portable
    assert int(re.search(r"#define LENET_CLUSTER_THREADS (\d+)", text).group(1)) == kernels.CLUSTER_THREADS
    struct = text[text.index("struct ClusterShared"):text.index("};", text.index("struct ClusterShared"))]
    declared = re.findall(r"T (\w+)\[([^\]]+)\];", struct)
    sizes = {name: eval(size, {"LENET_CLUSTER_THREADS": kernels.CLUSTER_THREADS}) for name, size in declared}
    assert sizes == kernels.CLUSTER_SHARED and "unsigned command;" in struct
    # the work split the kernel's comment promises: 8 x 98 pixels, 8 x 147 p1, 8 x 2 channels, 8 x 15 fc1
    assert (8 * 98, 8 * 147, 8 * 2, 8 * 15) == (784, 14 * 14 * 6, 16, 120) and kernels.CLUSTER == 8
    assert 16 * 15 <= kernels.CLUSTER_THREADS and 3 * 84 <= kernels.CLUSTER_THREADS and 25 * 10 <= kernels.CLUSTER_THREADS
    assert kernels.cluster_shared_bytes("float64") <= kernels.STATIC_SHARED_LIMIT


def test_resident_control_words_are_the_ones_in_common_cuh():
    text = (ROOT / "lenet_cuda" / kernels.HEADER).read_text()
    defined = {name: int(v) for name, v in re.findall(r"#define RESIDENT_(NEXT|ALIVE|QUIT|SERVED) (\d+)", text)}
    assert defined == {"NEXT": kernels.RESIDENT_NEXT, "ALIVE": kernels.RESIDENT_ALIVE,
                       "QUIT": kernels.RESIDENT_QUIT, "SERVED": kernels.RESIDENT_SERVED}
    assert (kernels.pair_words("float32"), kernels.pair_words("float64")) == (1, 2)


def test_every_kernel_file_gets_the_shared_header_once_and_defines_no_device_function_twice():
    """kernels.source() puts common.cuh before each file (guarded: the emulator compiles every file
    into one unit); no __device__ function is defined in two files, by the same name or another."""
    header = (ROOT / "lenet_cuda" / kernels.HEADER).read_text()
    assert header.count("#ifndef LENET_COMMON_CUH") == 1 and header.rstrip().endswith("#endif  // LENET_COMMON_CUH")
    bodies: dict[str, str] = {}  # device function -> its body's shape
    where: dict[str, str] = {}  # device function -> the file defining it (overloads: one file)
    for cu in [kernels.HEADER, *FILES]:
        text = (ROOT / "lenet_cuda" / cu).read_text()
        if cu != kernels.HEADER:
            assert kernels.file_source(cu).startswith(header) and f'#line 1 "{cu}"' in kernels.file_source(cu)
        for name, body in re.findall(r"__device__ __forceinline__ [\w<>:*& ]+? (\w+)\([^)]*\)\s*\{(.*?)\n?\}\n",
                                     re.sub(r"//[^\n]*", "", text), re.S):
            shape = re.sub(r"\w+", "w", body)  # names and numbers alike: a prefixed copy shows
            if len(body) > 120:
                assert shape not in bodies.values() or name in bodies, (cu, name)
            assert where.setdefault(name, cu) == cu, (cu, name, where[name])
            bodies[name] = shape


def test_rows_shape_and_shared_memory_are_the_ones_in_rows_cu():
    text = (ROOT / "lenet_cuda" / "rows.cu").read_text()
    assert int(re.search(r"#define LENET_ROWS_CLUSTER (\d+)", text).group(1)) == kernels.ROWS_CLUSTER == 5
    assert int(re.search(r"#define LENET_ROWS_THREADS (\d+)", text).group(1)) == kernels.ROWS_THREADS
    struct = text[text.index("struct RowsShared"):text.index("};", text.index("struct RowsShared"))]
    union = struct[struct.index("union {"):struct.index("} work;")]
    head = text[text.index("struct HeadShared"):text.index("};", text.index("struct HeadShared"))]
    names = {"LENET_ROWS_THREADS": kernels.ROWS_THREADS}
    sizes = {name: eval(size, names) for name, size in re.findall(r"T (\w+)\[([^\]]+)\];", struct.replace(union, ""))}
    work = {name: eval(size, names) for name, size in re.findall(r"T (\w+)\[([^\]]+)\];", union)}
    work["head"] = sum(eval(size, names) for _, size in re.findall(r"T (\w+)\[([^\]]+)\];", head))
    assert sizes == kernels.ROWS_SHARED and work == kernels.ROWS_WORK
    assert re.findall(r"(unsigned long long|unsigned) (\w+)\[?(\d?)\]?;", struct) == [
        ("unsigned long long", "full", "2"), ("unsigned long long", "empty", "2"), ("unsigned", "votes", "2"),
        ("unsigned", "vote", "")]  # rows_shared_bytes' 4 mbarriers and 3 words
    # block r: pool2's row r (5 rows), from p1 rows 2r .. 2r + 5 (6 x 14 x 6) and image rows 4r - 2 ..
    # 4r + 13 (16); stage 2's 240 threads (5 windows x 16 channels x 3 thirds), fc1's 240 (120 x 2)
    assert 5 * kernels.ROWS_CLUSTER * 16 == 400 and sizes["p1"] == 6 * 14 * 6 and sizes["img"] == 16 * 32
    assert 5 * 16 * 3 == 240 <= kernels.ROWS_THREADS and sizes["fc1_part"] == 2 * kernels.ROWS_CLUSTER * 120
    assert kernels.rows_shared_bytes("float64") <= kernels.STATIC_SHARED_LIMIT
    assert kernels.CLUSTER_SIZE["rows.cu"] == kernels.ROWS_CLUSTER and kernels.compiles_for("rows.cu", "sm_90")


def test_fused_block_size_is_the_one_in_fused_cu():
    text = (ROOT / "lenet_cuda" / "fused.cu").read_text()
    assert int(re.search(r"#define LENET_THREADS (\d+)", text).group(1)) == kernels.FUSED_THREADS
    declared = re.findall(r"__shared__ T (\w+)\[([^\]]+)\]", text)  # name, size expression
    sizes = {name: eval(size, {"LENET_THREADS": kernels.FUSED_THREADS}) for name, size in declared}
    assert sizes == kernels.FUSED_SHARED
    # dense_block splits each output over blockDim / fan_out threads: at least one per output
    assert kernels.FUSED_THREADS >= 120 and kernels.FUSED_THREADS % 32 == 0


def test_batch_shape_and_shared_memory_are_the_ones_in_batch_cu():
    text = kernels.file_source("batch.cu")
    assert int(re.search(r"#define LENET_BATCH_IMAGES (\d+)", text).group(1)) == kernels.BATCH_IMAGES
    assert int(re.search(r"#define LENET_BATCH_THREADS (\d+)", text).group(1)) == kernels.BATCH_THREADS
    declared = re.findall(r"__shared__ T (\w+)\[([^\]]+)\]", text)
    sizes = {name: eval(size, {"LENET_BATCH_IMAGES": kernels.BATCH_IMAGES}) for name, size in declared}
    assert sizes == kernels.BATCH_SHARED
    g = kernels.BATCH_IMAGES
    # work holds img + p1, then each dense layer's partial sums (parts x outputs x images); p2 holds
    # h1, h2 and the logits after fc1; the threads the kernel's comment promises exist
    assert sizes["work"] == 784 + 1176 >= max(4 * 120 * g, 5 * 84 * g, 12 * 10 * g)
    assert sizes["p2"] == 400 * g >= (120 + 84 + 10) * g
    assert max(392, 400, 4 * 120, 5 * 84, 120 * g, 10 * g) <= kernels.BATCH_THREADS and 784 <= 2 * kernels.BATCH_THREADS
    assert kernels.batch_shared_bytes("float64") <= kernels.STATIC_SHARED_LIMIT


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch2_shape_and_shared_memory_are_the_ones_in_batch2_cu(dtype):
    text = kernels.file_source("batch2.cu")
    assert int(re.search(r"#define LENET_BATCH2_IMAGES (\d+)", text).group(1)) == kernels.BATCH2_IMAGES
    assert int(re.search(r"#define LENET_BATCH2_THREADS (\d+)", text).group(1)) == kernels.BATCH2_THREADS
    both = re.search(r"CONCURRENT = sizeof\(T\) == 4 \? (\d) : (\d);", text)
    assert {"float32": int(both[1]), "float64": int(both[2])} == kernels.BATCH2_CONCURRENT
    c = kernels.BATCH2_CONCURRENT[dtype]
    declared = re.findall(r"__shared__ T (\w+)\[([^\]]+)\]", text)
    sizes = {name: eval(size, {"G": kernels.BATCH2_IMAGES, "C": c}) for name, size in declared}
    assert sizes == kernels.batch2_shared(dtype)
    g = kernels.BATCH2_IMAGES
    # work: img + p1 of the images at once, then each dense layer's partial sums; p2: h1, h2, logits
    assert sizes["work"] >= max(4 * 120 * g, 5 * 84 * g, 12 * 10 * g) and sizes["p2"] >= (120 + 84 + 10) * g
    assert c <= g and g % c == 0  # whole rounds: a block's images in g / c rounds
    assert max(400, 4 * 120, 5 * 84, 12 * 10, 10 * g) <= kernels.BATCH2_THREADS  # one thread an item
    assert kernels.batch2_shared_bytes(dtype) <= kernels.STATIC_SHARED_LIMIT
    if dtype == "float32":  # two blocks an SM (__launch_bounds__(512, 2)): an H100 SM's 228 KB
        assert 2 * kernels.batch2_shared_bytes(dtype) <= 228 * 1024


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overlap_shape_and_shared_memory_are_the_ones_in_overlap_cu(dtype):
    text = kernels.file_source("overlap.cu")
    assert int(re.search(r"#define LENET_OVERLAP_THREADS (\d+)", text).group(1)) == kernels.OVERLAP_THREADS
    both = re.search(r"G = sizeof\(T\) == 4 \? (\d) : (\d);", text)
    assert {"float32": int(both[1]), "float64": int(both[2])} == kernels.OVERLAP_IMAGES
    g = kernels.OVERLAP_IMAGES[dtype]
    assert "static constexpr int P1 = 4 * 120 * G > 1176 ? 4 * 120 * G : 1176;" in text
    declared = re.findall(r"__shared__ (?:__align__\(16\) )?T (\w+)\[([^\]]+)\]", text)
    sizes = {name: eval(size.replace("OverlapShape<T>::P1", "P1"), {"G": g, "P1": max(1176, 480 * g)})
             for name, size in declared}
    assert sizes == kernels.overlap_shared(dtype) and "__shared__ __align__(16) T buf[" in text
    # p1 holds an image's pool1, then each dense layer's partial sums; p2: h1, h2, logits; the
    # images' 16-byte pieces are whole; one thread an item of every stage
    assert sizes["p1"] >= max(1176, 4 * 120 * g, 5 * 84 * g, 12 * 10 * g) and sizes["p2"] >= (120 + 84 + 10) * g
    assert 784 * np.dtype(dtype).itemsize % 16 == 0
    assert max(392, 400, 4 * 120, 5 * 84, 12 * 10, 120 * g, 10 * g) <= kernels.OVERLAP_THREADS
    assert kernels.overlap_shared_bytes(dtype) <= kernels.STATIC_SHARED_LIMIT


@functools.cache
def oracle_image_shapes():
    """The NumPy oracle's activation shapes of one image (NHWC), from a run on a batch of 2 whose
    every activation keeps the batch axis (the oracle's layers are the same for any batch)."""
    w = weights.read(DEFAULT_WEIGHTS)
    x = np.zeros((2, 28, 28, 1), np.float32)
    c1 = conv2d_relu(x, *w["conv1"], pad=2)
    p1 = max_pool_2x2(c1)
    c2 = conv2d_relu(p1, *w["conv2"], pad=0)
    p2 = max_pool_2x2(c2)
    shapes = {"x": x.shape, "c1": c1.shape, "p1": p1.shape, "c2": c2.shape, "p2": p2.shape}
    assert all(shape[0] == 2 for shape in shapes.values()), shapes
    return {**{name: shape[1:] for name, shape in shapes.items()}, "fc1": (120,), "fc2": (84,), "fc3": (10,),
            "out": (10,)}


def oracle_shapes(n):
    """The oracle's activation shapes for a batch of n: n images of oracle_image_shapes'."""
    return {name: (n, *shape) for name, shape in oracle_image_shapes().items()}


@pytest.mark.parametrize("n", [1, 7, 512, 10000])
@pytest.mark.parametrize("variant", VARIANTS)
def test_launches_cover_every_output_and_name_real_buffers(shared_weights, variant, n):
    shapes = kernels.buffer_shapes(variant, n)
    oracle = oracle_shapes(n)
    assert all(oracle[name] == shape for name, shape in shapes.items() if name in oracle)
    weight_buffers = {f"{name}.{part}": getattr(layer, part).shape
                      for name, layer in shared_weights.items() for part in ("kernel", "bias")}
    launches = kernels.launches(variant, n)
    assert [k.kernel for k in launches] == (
        ["lenet_fused"] if variant in ("fused", "graph") else ["lenet_cluster"] if variant in ("cluster", "mapped")
        else ["lenet_persistent"] if variant == "persistent" else ["lenet_resident"] if variant == "resident"
        else ["lenet_resident_rows"] if variant == "resident_rows"
        else ["lenet_batch"] if variant == "batch" else ["lenet_rows"] if variant == "rows"
        else ["lenet_batch2"] if variant in kernels.BATCH2_VARIANTS
        else ["lenet_overlap"] if variant == "overlap"
        else ["conv_bias_relu", "max_pool_2x2", "conv_bias_relu", "max_pool_2x2"] + ["dense_bias_act"] * 3
        + ["softmax_rows"])
    for k in launches:
        assert len(k.args) == len(kernels.PARAMS[k.kernel])
        for param, arg in zip(kernels.PARAMS[k.kernel], k.args, strict=True):
            pointer = param in ("T*", "u32*", "u64*")
            assert pointer == isinstance(arg, str) or (param == "u32*" and arg is None), (k.kernel, arg)
            assert not isinstance(arg, str) or arg in shapes or arg in weight_buffers, arg
            assert pointer or 0 <= arg < 2**31
        assert 1 <= k.block <= 1024 and k.block % 32 == 0 and 1 <= k.grid < 2**31
        if k.kernel == "lenet_fused":
            assert k.grid == n and k.threads == n * kernels.FUSED_THREADS
            continue
        if k.kernel == "lenet_batch":  # every image in a block, no block without one
            g = kernels.BATCH_IMAGES
            assert k.block == kernels.BATCH_THREADS and k.grid * g >= n > (k.grid - 1) * g
            assert k.args[0] == "x" and k.args[11:] == ("out", n) and set(shapes) == {"x", "out"}
            continue
        if k.kernel == "lenet_rows":  # a cluster of 5 blocks an image: block r pool2's row r
            assert k.block == kernels.ROWS_THREADS and k.grid == kernels.ROWS_CLUSTER * n
            assert k.args[0] == "x" and k.args[11:] == ("out", n) and set(shapes) == {"x", "out"}
            continue
        if k.kernel == "lenet_batch2":  # every image in a block, no block without one
            g = kernels.BATCH2_IMAGES
            assert k.block == kernels.BATCH2_THREADS and k.grid * g >= n > (k.grid - 1) * g
            assert k.args[0] == "x" and k.args[11:] == ("out", n) and set(shapes) == {"x", "out"}
            continue
        if k.kernel == "lenet_overlap":  # at most one block an SM, none without a float tile of 4
            g = kernels.OVERLAP_IMAGES["float32"]
            assert k.block == kernels.OVERLAP_THREADS and k.grid == min(kernels.OVERLAP_SMS, -(-n // g))
            assert k.args[0] == "src" and k.args[11:] == ("out", "done", "flag", n)
            assert shapes == {"src": (1,), "x": (n, 28, 28, 1), "out": (n, 10), "done": (1,), "flag": (1,)}
            continue
        if k.kernel == "lenet_cluster":  # a whole number of clusters, one per image; the flag only when mapped
            assert k.grid == kernels.CLUSTER * n and k.block == kernels.CLUSTER_THREADS
            assert (k.args[12:14] == ("done", "flag")) == (variant == "mapped")
            assert variant == "mapped" or k.args[12:14] == (None, None)
            continue
        if k.kernel == "lenet_persistent":  # one cluster for any batch, its ctl words in mapped memory
            assert (k.grid, k.block) == (kernels.CLUSTER, kernels.CLUSTER_THREADS)
            assert k.args[12:] == ("ctl", n, kernels.IDLE_NS) and shapes["ctl"] == (4,)
            continue
        if k.kernel in ("lenet_resident", "lenet_resident_rows"):  # one cluster for any batch; LL pairs
            assert (k.grid, k.block) == ((kernels.CLUSTER, kernels.CLUSTER_THREADS) if variant == "resident"
                                         else (kernels.ROWS_CLUSTER, kernels.ROWS_THREADS))
            assert k.args[0] == "x_pairs" and k.args[11:] == ("out_pairs", "ctl", n, kernels.IDLE_NS)
            assert shapes == {"x_pairs": (n, 784), "out_pairs": (n, 10), "ctl": (4,)}
            continue
        pointer_args = [a for a in k.args if isinstance(a, str)]
        out = pointer_args[-1]  # every layer kernel's last pointer is its output
        per_thread = k.args[-1] if k.kernel == "softmax_rows" else 1  # a row of classes, or one element
        assert k.threads * per_thread == np.prod(shapes[out]), k  # every output has its thread ...
        assert k.grid * k.block >= k.threads > (k.grid - 1) * k.block  # ... and no block is idle


def test_layer_launch_arguments_are_the_oracles_layer_shapes():
    conv1, pool1, conv2, pool2, fc1, fc2, fc3, soft = kernels.layer_launches(3)
    # x, w, b, y, n, h, w, c, k, r, s, pad, ho, wo
    assert conv1.args[4:] == (3, 28, 28, 1, 6, 5, 5, 2, 28, 28)  # "same": padding 2
    assert conv2.args[4:] == (3, 14, 14, 6, 16, 5, 5, 0, 10, 10)  # "valid"
    assert pool1.args == ("c1", "p1", 3, 28, 28, 6) and pool2.args == ("c2", "p2", 3, 10, 10, 16)
    assert [k.args[4:] for k in (fc1, fc2, fc3)] == [(3, 400, 120, 1), (3, 120, 84, 1), (3, 84, 10, 0)]
    assert fc1.args[:4] == ("p2", "fc1.kernel", "fc1.bias", "fc1")  # p2 (3, 5, 5, 16) read as (3, 400)
    assert soft.args == ("fc3", "out", 3, 10)


def test_bad_batch_and_dtype_are_value_errors():
    with pytest.raises(ValueError, match="batch size: expected >= 1, found 0"):
        kernels.launches("fused", 0)
    with pytest.raises(ValueError, match="dtype: expected one of"):
        kernels.name_expressions("fused", "float16")


def test_registry_entry():
    spec = registry.spec("cuda")
    assert spec.api_level == "cuda" and spec.devices == ("gpu",) and spec.package == "lenet_cuda"
    assert spec.variants == ("fused", "layers", "graph", "cluster", "mapped", "persistent", "resident", "batch",
                             "batch2", "batch2_device", "rows", "resident_rows", "overlap")
    assert spec.resident == ("persistent", "resident", "resident_rows") and spec.variants[0] not in spec.resident
    assert spec.dtypes == ("float32", "float64")
    with pytest.raises(ValueError, match="unknown device 'cpu'"):
        registry.create("cuda", DEFAULT_WEIGHTS, device="cpu")


# --- the level's own code, end to end, on the CPU-emulated kernels -----------------------------
@pytest.fixture(scope="module")
def sample():
    x = mnist.to_input(mnist.load("test")[0][:12])
    return x, {dtype: NumpyLeNet(DEFAULT_WEIGHTS, dtype=dtype).predict(x.astype(dtype))
               for dtype in ("float32", "float64")}


@pytest.fixture(scope="module")
def many():
    x = mnist.to_input(mnist.load("test")[0][:600])
    return x, {dtype: NumpyLeNet(DEFAULT_WEIGHTS, dtype=dtype).predict(x.astype(dtype))
               for dtype in ("float32", "float64")}


def emulated(monkeypatch, emulator, variant, dtype):
    fake = fake_cuda.FakeCupy(emulator)
    monkeypatch.setattr(model, "import_cupy", lambda: fake)
    impl = model.CudaLeNet(DEFAULT_WEIGHTS, variant=variant, dtype=dtype)
    if impl.resident is not None:  # the real NVML (on a GPU machine) knows nothing of the fake GPU
        impl.resident.gpu_processes = lambda bus_id: []
    return fake, impl


@pytest.mark.parametrize("dtype,tolerance", [("float32", 1e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("variant", VARIANTS)
def test_emulated_kernels_agree_with_the_oracle(monkeypatch, emulator, sample, variant, dtype, tolerance):
    x, reference = sample[0], sample[1][dtype]
    fake, impl = emulated(monkeypatch, emulator, variant, dtype)
    assert fake.compiled == [(kernels.SOURCES[variant], kernels.OPTIONS,
                              tuple(kernels.name_expressions(variant, dtype)))]
    probs = impl.predict(x)
    assert probs.shape == (12, 10) and probs.dtype == np.dtype(dtype)
    assert np.array_equal(probs.argmax(1), reference.argmax(1))
    assert np.max(np.abs(probs - reference)) <= tolerance
    one = impl.predict(x[5:6])  # a second batch size: a plan of its own
    assert np.max(np.abs(one - reference[5:6])) <= tolerance
    fake.check_guards()  # no kernel wrote outside its buffer
    assert set(impl.plans if impl.resident is None else impl.resident.plans) == {12, 1}
    # mapped, persistent, resident: no events
    assert impl.last_device_time_ns() == (None if variant in NO_EVENTS else 250_000)
    impl.close()


@pytest.mark.parametrize("variant,dtype,sizes", [
    # cluster and mapped: a cluster of 8 blocks per image, emulated image by image, stop at 64;
    # the batch variants, which tile the batch over blocks, go to 512
    ("cluster", "float32", (1, 3, 13, 64)),  # 13: a multiple of no block or cluster size
    ("cluster", "float64", (1, 3, 13, 64)),
    ("mapped", "float32", (1, 3, 13, 64)),
    ("mapped", "float64", (1, 3, 13, 64)),
    ("rows", "float32", (1, 3, 13, 64)),  # a cluster of 5 per image: block 0 waits on its mbarrier
    ("resident_rows", "float32", (1, 3, 13, 1)),  # rounds through both slots; back to 1: the other plan
    # (both in float64: test_emulated_kernels_agree_with_the_oracle's 12 and 1 images; make test-emulation)
    ("persistent", "float32", (1, 3, 13)),  # one cluster serves the batch's images in turn
    ("resident", "float32", (1, 3, 13, 1)),  # the same on LL pairs; back to 1: the other plan's kernel
    ("resident", "float64", (1, 3, 13)),  # two pairs a value
    ("batch", "float32", (1, 3, 13, 64, 512, 6)),  # 13, 6, 3, 1: the last block's images masked
    ("batch", "float64", (1, 3, 13, 64, 512)),
    ("batch2", "float32", (1, 3, 13, 64, 512, 7)),  # 13, 7, 3, 1: the last block's second image masked
    ("batch2", "float64", (1, 3, 13, 64, 512)),  # one image at a time: two rounds a block
    ("batch2_device", "float32", (1, 3, 64, 512, 5)),
    ("batch2_device", "float64", (1, 3, 64, 512, 5)),
    ("overlap", "float32", (1, 3, 64, 512, 13)),  # 13: the last group's 1 image of 4; 512: 128 blocks
    ("overlap", "float64", (1, 3, 64, 512, 13)),  # groups of 1: 512 is 128 blocks of 4 images each
])
def test_emulated_cluster_kernel_at_every_batch_size(monkeypatch, emulator, many, variant, dtype, sizes):
    """Every cluster of 8 blocks computes its own image, every batch block its 4: batch sizes
    from 1 to 512, new images each; no kernel reads or writes outside its buffers."""
    agree_at_sizes(monkeypatch, emulator, many, variant, dtype, sizes)


def agree_at_sizes(monkeypatch, emulator, many, variant, dtype, sizes):
    """The emulated variant against the oracle at each batch size (new images each), then its guards."""
    x, reference = many[0], many[1][dtype]
    fake, impl = emulated(monkeypatch, emulator, variant, dtype)
    for n in sizes:
        start = 7 * n % (len(x) - n + 1)
        probs = impl.predict(x[start:start + n])
        assert np.array_equal(probs.argmax(1), reference[start:start + n].argmax(1)), n
        assert np.max(np.abs(probs - reference[start:start + n])) <= (1e-5 if dtype == "float32" else 1e-12), n
    fake.check_guards()
    impl.close()


FULL_EMULATION = "LENET_EMULATE_ALL"  # =1: every variant, both dtypes, every batch size (make test-emulation)


@pytest.mark.skipif(os.environ.get(FULL_EMULATION) != "1",
                    reason=f"opt-in: {FULL_EMULATION}=1 (make test-emulation); "
                           "make test emulates every variant at 12 and 1 images and the tiled ones to 512")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_emulated_every_variant_at_every_batch_size(monkeypatch, emulator, many, variant, dtype):
    """The slow check: 1, 3, 13 (a multiple of no block's images), 64 and 512 images, each variant
    and dtype, against the oracle; no kernel reads or writes outside its buffers."""
    agree_at_sizes(monkeypatch, emulator, many, variant, dtype, (1, 3, 13, 64, 512))


def test_emulated_call_sequences(monkeypatch, emulator, sample):
    x = sample[0]
    for variant, kernel_count in (("layers", 8), ("fused", 1)):
        fake, impl = emulated(monkeypatch, emulator, variant, "float32")
        impl.predict(x[:2])
        kinds = [w[0] for w in fake.launched]
        assert kinds == ["memcpy"] + ["kernel"] * kernel_count + ["memcpy"], fake.launched
        assert fake.launched[0][1:] == (model.H2D, 2 * 784 * 4) and fake.launched[-1][1:] == (model.D2H, 2 * 10 * 4)


def test_emulated_cluster_call_copies_and_mapped_call_polls_the_flag(monkeypatch, emulator, sample):
    """cluster: copy in, one launch of 8 blocks per image, copy out, captured once; mapped: the
    kernel alone, reading and writing mapped host memory, and the flag counts the calls."""
    x, reference = sample[0], sample[1]["float32"]
    fake, impl = emulated(monkeypatch, emulator, "cluster", "float32")
    impl.predict(x[:2])
    assert fake.launched == [("memcpy", model.H2D, 2 * 784 * 4), ("kernel", "lenet_cluster<float>", 16, 256),
                             ("memcpy", model.D2H, 2 * 10 * 4)] * 2  # the eager run, then the graph's
    fake, impl = emulated(monkeypatch, emulator, "mapped", "float32")
    for i in range(3):
        assert np.max(np.abs(impl.predict(x[i:i + 1]) - reference[i:i + 1])) <= 1e-5
    plan = impl.plans[1]
    assert [w[0] for w in fake.launched] == ["kernel"] * 4 and int(plan.flag[0]) == plan.calls == 4
    assert plan.graph.launches == 3 and int(plan.arrays["done"][0]) == 4  # images ended on the device
    assert all(type(a) is np.uint64 for a in np.array(plan.launches[0][3], dtype=object)[[0, 11, 13]])


def test_emulated_batch_call_is_one_kernel_on_mapped_memory_in_a_graph(monkeypatch, emulator, sample):
    """batch: no copies, one launch of ceil(n / 4) blocks reading x and writing out in mapped host
    memory (numpy.uint64 host pointers), captured once per batch size, an event per call."""
    x, reference = sample[0], sample[1]["float32"]
    fake, impl = emulated(monkeypatch, emulator, "batch", "float32")
    for i in range(3):
        assert np.max(np.abs(impl.predict(x[i:i + 5]) - reference[i:i + 5])) <= 1e-5  # the replay reads anew
    assert fake.launched == [("kernel", "lenet_batch<float>", 2, kernels.BATCH_THREADS)] * 4  # eager, then 3 replays
    plan = impl.plans[5]
    assert plan.zero_copy and plan.arrays == {} and plan.flag is None and plan.graph.launches == 3
    assert all(type(a) is np.uint64 for a in np.array(plan.launches[0][3], dtype=object)[[0, 11]])
    assert plan.launches[0][3][12] == np.int32(5) and impl.last_device_time_ns() == 250_000
    impl.close()


def test_emulated_batch2_reads_the_callers_registered_array_from_its_second_call(monkeypatch, emulator, many):
    """batch2: the first call with an array copies it into mapped staging; from the second the
    array's owner is registered and the kernel gets the caller's own address (no copy); a
    non-contiguous array or another dtype is copied; close unregisters. No memcpy ever."""
    x, reference = many[0], many[1]["float32"]
    fake, impl = emulated(monkeypatch, emulator, "batch2", "float32")
    staging = int(np.uint64(0))
    for i in range(3):
        probs = impl.predict(x[10 * i:10 * i + 5])
        assert np.max(np.abs(probs - reference[10 * i:10 * i + 5])) <= 1e-5
        plan = impl.plans[5]
        staging = plan.host_in.ctypes.data
    assert fake.launched == [("kernel", "lenet_batch2<float>", 3, kernels.BATCH2_THREADS)] * 3  # no copies
    assert fake.registrations == [("register", x.ctypes.data)] and fake.registered == {x.ctypes.data: x.nbytes}
    seen = []
    monkeypatch.setattr(plan, "launches", tuple((lambda g, b, args, fn=fn: (seen.append(args[0]), fn(g, b, args)),
                                                 g, b, a) for fn, g, b, a in plan.launches))
    impl.predict(x[20:25])  # registered: the caller's address
    impl.predict(np.ascontiguousarray(x[:10:2]))  # a fresh array: copied
    impl.predict(x[:10:2])  # not contiguous: copied
    impl.predict(x[20:25].astype(np.float64))  # another dtype: cast into the staging
    assert seen == [np.uint64(x[20:25].ctypes.data)] + [np.uint64(staging)] * 3
    assert all(type(a) is np.uint64 for a in seen)
    np.testing.assert_allclose(impl.predict(x[:10:2]), reference[:10:2], atol=1e-5)
    impl.close()
    assert fake.registrations[-1] == ("unregister", x.ctypes.data) and fake.registered == {}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_emulated_overlap_blocks_loop_over_tiles_prefetching_the_next(monkeypatch, emulator, many, dtype):
    """With a grid of 3 blocks (an H100's 132 would give every group of these batches a block of its
    own) each block computes group after group, each image's successor's cp.async copies in flight
    (the next group's first during the dense layers): the emulated copies land only at their wait,
    so an image read before its copies landed would be wrong here."""
    monkeypatch.setattr(kernels, "OVERLAP_SMS", 3)
    assert [launch.grid for n in (1, 13, 64) for launch in kernels.launches("overlap", n)] == [1, 3, 3]
    agree_at_sizes(monkeypatch, emulator, many, "overlap", dtype, (1, 3, 13, 64, 29))


def test_emulated_overlap_reads_the_address_word_and_waits_on_the_flag(monkeypatch, emulator, many):
    """overlap: a graph captured at a batch size's first call (run once eagerly); from the second call
    with slices of one array the kernel reads the caller's registered memory, its address in the
    mapped word src; an address cp.async cannot use (not 16-byte aligned) is copied into the
    staging; each call ends when the flag counts it, the device's block counter back at zero."""
    x, reference = many[0], many[1]["float32"]
    fake, impl = emulated(monkeypatch, emulator, "overlap", "float32")
    for i in range(3):
        probs = impl.predict(x[10 * i:10 * i + 5])
        assert np.max(np.abs(probs - reference[10 * i:10 * i + 5])) <= 1e-5
        plan = impl.plans[5]
        assert int(plan.flag[0]) == plan.calls == i + 1 and int(plan.arrays["done"].get()[0]) == 0
    src = int(plan.arrays["src"][0])
    assert src == x[20:25].ctypes.data != plan.host_in.ctypes.data  # the caller's own, registered
    assert fake.launched == [("kernel", "lenet_overlap<float>", 2, kernels.OVERLAP_THREADS)] * 3  # no copies
    assert fake.registrations == [("register", x.ctypes.data)]
    owner = np.zeros(5 * 784 + 1, np.float32)
    shifted = owner[1:].reshape(5, 28, 28, 1)  # 4 bytes past a 16-byte boundary
    shifted[:] = x[30:35]
    for _ in range(2):  # the second call registers the owner; its address is still misaligned
        np.testing.assert_allclose(impl.predict(shifted), reference[30:35], atol=1e-5)
        assert int(plan.arrays["src"][0]) == plan.host_in.ctypes.data
    assert ("register", owner.ctypes.data) in fake.registrations
    impl.close()
    assert fake.registered == {}


def test_emulated_batch2_device_copies_from_the_registered_array_then_runs_on_device_memory(monkeypatch, emulator, many):
    x, reference = many[0], many[1]["float64"]
    x64 = x.astype(np.float64)
    fake, impl = emulated(monkeypatch, emulator, "batch2_device", "float64")
    for i in range(2):
        np.testing.assert_allclose(impl.predict(x64[i:i + 3]), reference[i:i + 3], atol=1e-12)
    copy_in, copy_out = ("memcpy", model.H2D, 3 * 784 * 8), ("memcpy", model.D2H, 3 * 10 * 8)
    assert fake.launched == [copy_in, ("kernel", "lenet_batch2<double>", 2, kernels.BATCH2_THREADS), copy_out] * 2
    plan = impl.plans[3]
    assert not plan.zero_copy and set(plan.arrays) == {"x", "out"} and plan.launches[0][3][0] is plan.arrays["x"]
    assert fake.registered == {x64.ctypes.data: x64.nbytes}  # the second call's copy ran from the caller's pages
    fake.check_guards()
    impl.close()
    assert fake.registered == {}


def test_emulated_batch2_call_that_never_finishes_times_out(monkeypatch, emulator, sample):
    fake, impl = emulated(monkeypatch, emulator, "batch2", "float32")
    impl.predict(sample[0][:2])
    monkeypatch.setattr(fake_cuda.DoneEvent, "done", False)  # a kernel that never ends
    monkeypatch.setattr(model, "POLL_TIMEOUT_S", 0.05)
    with pytest.raises(RuntimeError, match=r"lenet_batch2 did not finish in 0.05 s"):
        impl.predict(sample[0][:2])


def test_emulated_mapped_call_that_never_sets_its_flag_times_out(monkeypatch, emulator, sample):
    fake, impl = emulated(monkeypatch, emulator, "mapped", "float32")
    impl.predict(sample[0][:1])
    monkeypatch.setattr(impl.plans[1].graph, "launch", lambda stream: None)  # a kernel that never ends
    monkeypatch.setattr(model, "POLL_TIMEOUT_S", 0.05)
    with pytest.raises(RuntimeError, match=r"lenet_cluster did not set its flag in 0.05 s \(flag 2, expected 3\)"):
        impl.predict(sample[0][:1])


def test_persistent_control_words_are_cluster_cu_s():
    text = (ROOT / "lenet_cuda" / "cluster.cu").read_text()
    defined = {name: int(v) for name, v in re.findall(r"#define CTL_(\w+) (\d+)", text)}
    assert defined == {"GO": kernels.CTL_GO, "ENDED": kernels.CTL_ENDED, "ALIVE": kernels.CTL_ALIVE,
                       "QUIT": kernels.CTL_QUIT}


def test_emulated_persistent_kernel_serves_calls_ends_when_idle_and_is_launched_again(monkeypatch, emulator, sample):
    """The host stores each call's number; the resident kernel serves it and stores it back. In the
    emulation a launch runs to its end (it serves the call, waits IDLE_NS, ends), so every call
    finds the kernel ended and launches it again: the relaunch path, with the count carried over."""
    x, reference = sample[0], sample[1]["float32"]
    fake, impl = emulated(monkeypatch, emulator, "persistent", "float32")
    for i in range(3):
        assert np.max(np.abs(impl.predict(x[i:i + 1]) - reference[i:i + 1])) <= 1e-5
    plan = impl.plans[1]
    assert list(plan.ctl) == [3, 3, 0, 0]  # go, ended, alive (ended), quit
    assert fake.launched == [("kernel", "lenet_persistent<float>", 8, 256)] * 3  # no copies, no graph
    assert all(type(a) is np.uint64 for a in np.array(plan.launches[0][3], dtype=object)[[0, 11, 12]])
    np.testing.assert_allclose(impl.predict(x[:5]), reference[:5], atol=1e-5)  # a second batch size
    assert impl.serving is impl.plans[5] and plan.ctl[kernels.CTL_QUIT] == 1  # the first told to end
    assert impl.predict(x[7:8]).argmax() == reference[7].argmax() and plan.ctl[kernels.CTL_QUIT] == 0
    plans = list(impl.plans.values())
    impl.close()
    assert all(p.ctl[kernels.CTL_QUIT] == 1 for p in plans)  # close ends every resident kernel


def test_emulated_persistent_kernel_already_resident_is_not_launched_again(monkeypatch, emulator, sample):
    """A kernel still resident (ALIVE) gets the call through ctl alone: no launch."""
    fake, impl = emulated(monkeypatch, emulator, "persistent", "float32")
    impl.predict(sample[0][:1])
    plan = impl.plans[1]
    plan.ctl[kernels.CTL_ALIVE] = 1  # as if it were still waiting for a call ...
    fn, grid, block, args = plan.launches[0]
    monkeypatch.setattr(model.time, "monotonic", iter(range(0, 100, 1)).__next__)  # ... polls run out
    monkeypatch.setattr(model, "POLL_TIMEOUT_S", 5)
    with pytest.raises(RuntimeError, match=r"lenet_persistent did not serve call 2 in 5 s \(ended 1, alive 1\)"):
        impl.predict(sample[0][:1])
    assert len(fake.launched) == 1  # the first call's launch only


def test_cluster_variants_on_a_gpu_before_sm_90_are_unavailable(monkeypatch, emulator):
    fake = fake_cuda.FakeCupy(emulator)
    fake.compute_capability = "80"
    monkeypatch.setattr(model, "import_cupy", lambda: fake)
    with pytest.raises(Unavailable, match=r"resident.cu needs compute capability 9.0 \(thread-block clusters\)"):
        model.CudaLeNet(DEFAULT_WEIGHTS, variant="resident")
    for variant in ("cluster", "mapped", "persistent"):
        with pytest.raises(Unavailable, match=r"cluster.cu needs compute capability 9.0 \(thread-block clusters\); this GPU is sm_80"):
            model.CudaLeNet(DEFAULT_WEIGHTS, variant=variant)
    model.CudaLeNet(DEFAULT_WEIGHTS, variant="graph").close()  # the one-block kernels run there


def test_the_emulator_refuses_what_the_gpu_refuses(emulator):
    """A grid that is not a whole number of clusters, and a host pointer outside mapped memory."""
    fake = fake_cuda.FakeCupy(emulator)
    fn = fake.RawModule(kernels.source("cluster"), kernels.OPTIONS,
                        kernels.name_expressions("cluster", "float32")).get_function("lenet_cluster<float>")
    w = [fake.zeros((1,), np.float32) for _ in range(10)]
    x, out = fake.zeros((1, 28, 28, 1), np.float32), fake.zeros((1, 10), np.float32)
    with pytest.raises(ValueError, match="grid 12 is not a whole number of clusters of 8"):
        fn((12,), (256,), (x, *w, out, None, None, np.int32(1)))
    loose = np.zeros(784, np.float32)
    with pytest.raises(TypeError, match="argument 0: a host pointer outside mapped page-locked memory"):
        fn((8,), (256,), (np.uint64(loose.ctypes.data), *w, out, None, None, np.int32(1)))


def test_emulated_graph_is_captured_once_per_batch_size_and_replays_new_inputs(monkeypatch, emulator, sample):
    x, reference = sample[0], sample[1]["float32"]
    fake, impl = emulated(monkeypatch, emulator, "graph", "float32")
    for i in (0, 3, 7):
        one = impl.predict(x[i:i + 1])
        assert np.max(np.abs(one - reference[i:i + 1])) <= 1e-5  # the replay reads the new input
    graph = impl.plans[1].graph
    assert graph.launches == 3 and len(graph.steps) == 3  # copy in, lenet_fused, copy out
    impl.predict(x[:4])
    assert impl.plans[1].graph is graph and set(impl.plans) == {1, 4}


def test_predict_refuses_a_wrong_shape(monkeypatch, emulator):
    _, impl = emulated(monkeypatch, emulator, "fused", "float32")
    with pytest.raises(ValueError, match=r"expected images \(N, 28, 28, 1\)"):
        impl.predict(np.zeros((2, 28, 28)))


def test_a_wrong_kernel_argument_is_caught_by_the_fake(emulator):
    fake = fake_cuda.FakeCupy(emulator)
    module = fake.RawModule(kernels.source("layers"), kernels.OPTIONS, kernels.name_expressions("layers", "float32"))
    fn = module.get_function("softmax_rows<float>")
    a = fake.empty((2, 10), "float32")
    with pytest.raises(TypeError, match="expected numpy.int32, found int"):
        fn((1,), (32,), (a, a, 2, np.int32(10)))
    with pytest.raises(TypeError, match="expected a float32 device array"):
        fn((1,), (32,), (a, np.zeros((2, 10), np.float64), np.int32(2), np.int32(10)))


# --- without a GPU: unavailable, with the reason -----------------------------------------------
@pytest.mark.skipif(gpu.absent_reason() is None, reason="a GPU is present: the GPU tests below run instead")
def test_verify_lists_every_variant_as_unavailable_with_the_reason(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "verify", "--implementations", "cuda",
                           "--device", "gpu", "--limit", "20"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    text = done.stdout + done.stderr
    for variant in registry.spec("cuda").variants:
        assert re.search(rf"cuda/{variant}.*unavailable", text), text


# --- on a GPU ----------------------------------------------------------------------------------
needs_gpu = pytest.mark.skipif(gpu.absent_reason() is not None, reason=f"needs an NVIDIA GPU: {gpu.absent_reason()}")


@pytest.fixture(scope="module")
def test_set():
    x = mnist.to_input(mnist.load("test")[0])
    return x, {dtype: NumpyLeNet(DEFAULT_WEIGHTS, dtype=dtype).predict(x.astype(dtype))
               for dtype in ("float32", "float64")}


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_level_agrees_with_the_oracle_on_10000_images(test_set, variant, dtype):
    x, reference = test_set[0], test_set[1][dtype]
    impl = registry.create("cuda", DEFAULT_WEIGHTS, device="gpu", variant=variant, dtype=dtype)
    try:
        probs = np.concatenate([impl.predict(x[i:i + 1000]) for i in range(0, len(x), 1000)])
        assert probs.shape == (10000, 10) and probs.dtype == np.dtype(dtype)
        assert np.array_equal(probs.argmax(1), reference.argmax(1))
        assert np.max(np.abs(probs - reference)) <= 1e-5
        for i in (0, 1, 9999):  # batch 1, the latency cell's size
            assert np.max(np.abs(impl.predict(x[i:i + 1]) - reference[i:i + 1])) <= 1e-5
        assert variant in NO_EVENTS or impl.last_device_time_ns() > 0
    finally:
        impl.close()


@pytest.mark.gpu
@needs_gpu
def test_gpu_persistent_kernel_stays_resident_ends_when_idle_and_comes_back(test_set):
    x, reference = test_set[0], test_set[1]["float32"]
    impl = registry.create("cuda", DEFAULT_WEIGHTS, device="gpu", variant="persistent")

    def alive_becomes(value):  # the kernel's own store, within a generous second
        deadline = time.monotonic() + 1.0
        while plan.ctl[kernels.CTL_ALIVE] != value and time.monotonic() < deadline:
            time.sleep(0.001)
        return plan.ctl[kernels.CTL_ALIVE] == value

    try:
        for i in range(20):
            assert np.max(np.abs(impl.predict(x[i:i + 1]) - reference[i:i + 1])) <= 1e-5
        plan = impl.plans[1]
        assert plan.ctl[kernels.CTL_ENDED] == 20
        assert alive_becomes(0)  # idle for IDLE_NS: it ended by itself ...
        assert np.max(np.abs(impl.predict(x[20:21]) - reference[20:21])) <= 1e-5  # ... and came back
        assert plan.ctl[kernels.CTL_ENDED] == 21
    finally:
        impl.close()
    assert alive_becomes(0)


@pytest.mark.gpu
@needs_gpu
def test_gpu_graph_is_captured_once_per_batch_size(test_set):
    x, reference = test_set[0], test_set[1]["float32"]
    impl = registry.create("cuda", DEFAULT_WEIGHTS, device="gpu", variant="graph")
    try:
        assert impl.stream.ptr != 0  # never the legacy default stream
        for _ in range(3):
            for i in (0, 5, 9):
                assert np.max(np.abs(impl.predict(x[i:i + 1]) - reference[i:i + 1])) <= 1e-5
        graph = impl.plans[1].graph
        np.testing.assert_allclose(impl.predict(x[:16]), reference[:16], atol=1e-5)
        assert impl.plans[1].graph is graph and set(impl.plans) == {1, 16}
    finally:
        impl.close()


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_batch2_reads_the_callers_array_in_place(test_set, dtype):
    """batch2 and batch2_device: from the second call with slices of one array, that array is
    registered (the kernel or the copy reads it in place); close ends the registration."""
    x, reference = test_set[0].astype(dtype), test_set[1][dtype]
    for variant in kernels.BATCH2_VARIANTS:
        impl = registry.create("cuda", DEFAULT_WEIGHTS, device="gpu", variant=variant, dtype=dtype)
        try:
            for i in range(0, 2048, 512):
                assert np.max(np.abs(impl.predict(x[i:i + 512]) - reference[i:i + 512])) <= 1e-5, (variant, i)
            assert len(impl.registered.live) == 1 and impl.last_device_time_ns() > 0
        finally:
            impl.close()
        assert not impl.registered.live


@pytest.mark.gpu
@needs_gpu
def test_gpu_kernels_load_within_the_devices_limits():
    """The compiled module's attributes on this GPU: registers and static shared memory per
    kernel, as the driver reports them (what doctor prints)."""
    for variant, kernel in (("fused", "lenet_fused"), ("cluster", "lenet_cluster"), ("batch", "lenet_batch")):
        impl = registry.create("cuda", DEFAULT_WEIGHTS, device="gpu", variant=variant)
        try:
            fn = impl.fn[kernel]
            assert fn.shared_size_bytes == SHARED[kernel]("float32")
            assert fn.max_threads_per_block >= THREADS[kernel] and fn.num_regs > 0
        finally:
            impl.close()


# --- doctor ------------------------------------------------------------------------------------
def test_doctor_names_nvrtc_and_each_kernels_registers_and_shared_memory():
    from harness.machine import doctor

    nvrtc_or_skip()
    lines = doctor.cuda_lines(caps=["9.0"])
    assert re.match(r"NVRTC: version 1\d\.\d+ from .*libnvrtc\.so.* compiles for sm_\d+ to sm_\d+$", lines[0])
    assert lines[1].startswith("CUDA kernels for compute capability 9.0 (sm_90): ")
    for dtype, shared in (("float", 22632), ("double", 45264)):
        assert re.search(rf"lenet_fused<{dtype}> \d+ regs {shared} B shared", lines[1]), lines[1]
    assert re.search(r"conv_bias_relu<float> \d+ regs 0 B shared", lines[1])
    for dtype, shared in (("float", 14916), ("double", 29832)):  # 3,728 elements and a command word
        for kernel in ("lenet_cluster", "lenet_persistent", "lenet_resident"):
            assert re.search(rf"{kernel}<{dtype}> \d+ regs {shared} B shared", lines[1]), lines[1]
    for dtype, shared in (("float", 24528), ("double", 49056)):
        assert re.search(rf"lenet_batch<{dtype}> \d+ regs {shared} B shared", lines[1]), lines[1]
    for dtype, shared in (("float", 29168), ("double", 42656)):  # batch2: 2 images' img + p1 in float
        assert re.search(rf"lenet_batch2<{dtype}> \d+ regs {shared} B shared", lines[1]), lines[1]
    a100 = doctor.cuda_lines(caps=["8.0"])[1]  # no clusters before sm_90: cluster.cu is left out, not an error
    assert a100.startswith("CUDA kernels for compute capability 8.0 (sm_80): ") and "lenet_cluster" not in a100
    assert "do not compile" in doctor.cuda_lines(caps=["1.0"])[1]  # an arch NVRTC does not know
    assert "no GPU here" in doctor.cuda_lines(caps=[])[1]


def test_doctor_without_nvrtc_says_how_to_install_it(monkeypatch):
    from harness.machine import doctor

    monkeypatch.setattr(nvrtc, "probe", lambda: {"found": False, "reason": "no usable libnvrtc found; tried x"})
    assert doctor.cuda_lines(caps=["9.0"]) == ["NVRTC: no usable libnvrtc found; tried x"]


# --- lines of code -----------------------------------------------------------------------------
def test_loc_counts_kernel_source_and_python_glue_apart_as_pygount_does(loc_rows):
    mine = [r for r in loc_rows if r["package"] == "lenet_cuda" and r["part"] != loc.FIRST]  # a row a file
    parts = {part: [r for r in mine if r["part"] == part] for part in {r["part"] for r in mine}}
    assert set(parts) == {"forward", "kernel source"} and len(parts["kernel source"]) == len(FILES) + 1  # and common.cuh
    assert all(r["api_level"] == "cuda" for r in mine)
    rows = {part: {"code": sum(int(r["code"]) for r in found)} for part, found in parts.items()}
    pygount_cli = str(Path(sys.executable).parent / "pygount")  # the command a person runs
    done = subprocess.run([pygount_cli, "--format=summary", "--folders-to-skip=...,explain", "lenet_cuda"], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    sums = {line.split()[1]: int(re.findall(r"\d+(?:\.\d+)?", line)[2])
            for line in done.stdout.splitlines() if re.match(r"\W*(Python|CUDA|C|Sum)\b", line)}
    # forward: the Python and cuda/resident's host side in C (resident_host.c, the package's one C file)
    assert rows["kernel source"]["code"] == sums["CUDA"] and rows["forward"]["code"] == sums["Python"] + sums["C"]


def test_no_nvrtc_is_unavailable_and_a_bad_source_is_an_error(monkeypatch, emulator):
    fake = fake_cuda.FakeCupy(emulator)
    monkeypatch.setattr(model, "import_cupy", lambda: fake)

    def missing(**_):
        raise OSError("libnvrtc.so.12: cannot open shared object file")

    fake.RawModule = missing
    with pytest.raises(Unavailable, match=r"cannot compile or load the CUDA kernels here \(OSError: libnvrtc"):
        model.CudaLeNet(DEFAULT_WEIGHTS, variant="fused")

    def bad(**_):
        raise fake.cuda.compiler.CompileException("fused.cu(3): error")

    fake.RawModule = bad
    with pytest.raises(RuntimeError, match=r"NVRTC could not compile fused.cu: fused.cu\(3\): error"):
        model.CudaLeNet(DEFAULT_WEIGHTS, variant="fused")


def test_env_records_the_nvrtc_that_compiles_the_kernels():
    from harness.machine import env

    found = env.collect_nvrtc()["nvrtc"]
    assert set(found) in ({"found", "path", "how", "version"}, {"found", "reason"})


@pytest.mark.parametrize("count,reason", [(0, "CuPy 13.0 sees no GPU; on a GPU server install CuPy"),
                                          (RuntimeError("no driver"), "CuPy 13.0 sees no GPU (no driver); ")])
def test_import_cupy_without_a_device_is_the_frameworks_one_refusal(monkeypatch, count, reason):
    """harness.frameworks.gpu_guard: the same 'sees no GPU' sentence as TF, JAX and PyTorch give."""
    import types

    from harness.frameworks import cupy_setup

    def device_count():
        if isinstance(count, Exception):
            raise count
        return count

    fake = types.SimpleNamespace(__version__="13.0", cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=device_count)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(Unavailable, match=re.escape(reason)):
        cupy_setup.import_cupy()


# --- the kernels' work (kernels.work) and the static GPU explain -------------------------------
LAYER_MACS = {"conv1": 28 * 28 * 6 * 5 * 5, "conv2": 10 * 10 * 16 * 5 * 5 * 6, "fc1": 400 * 120, "fc2": 120 * 84,
              "fc3": 84 * 10}  # from the layer shapes: 416,520 in all


def test_every_design_does_the_models_multiply_adds_and_no_thread_more_than_it_can():
    designs = work.work()
    whole = {w.kernel: w for w in designs if w.part == "the whole network"}
    assert set(whole) == {k.kernel for v in VARIANTS if v != "layers" for k in kernels.launches(v, 1)}
    assert sum(s.reads for s in whole["lenet_persistent"].stages) == 784  # resident weights: the image only
    for w in whole.values():
        assert sum(s.macs for s in w.stages) == sum(LAYER_MACS.values()) == 416_520
    layers = {w.part: w for w in designs if w.variants == ("layers",)}
    assert list(layers) == ["conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3", "softmax"]
    assert {p: sum(s.macs for s in w.stages) for p, w in layers.items() if p in LAYER_MACS} == LAYER_MACS
    for w in designs:
        assert [launch.block for launch in kernels.launches(w.variants[0], 1)][0] in (w.threads, kernels.LAYER_THREADS)
        for s in w.stages:
            assert s.threads <= w.blocks * w.threads, (w.kernel, s)  # the threads it names exist
            assert s.per_thread * s.threads >= s.macs, (w.kernel, s)  # the busiest thread bounds the share
            assert s.chain <= s.per_thread
    assert whole["lenet_cluster"].blocks == kernels.CLUSTER and whole["lenet_fused"].blocks == 1
    # the dense weights are read once per image in both designs; the image once (cluster) or per block
    dense = 400 * 120 + 120 + 120 * 84 + 84 + 84 * 10 + 10
    assert sum(s.reads for s in whole["lenet_fused"].stages) == dense + 784 + 156 + 2416
    # lenet_batch: every weight once per block of BATCH_IMAGES images, the image once
    g = kernels.BATCH_IMAGES
    assert abs(sum(s.reads for s in whole["lenet_batch"].stages) - (784 + (dense + 156 + 2416) / g)) < 3


def test_gpu_explain_rows_join_the_work_with_ptxas(tmp_path):
    nvrtc_or_skip()
    from harness.explain import gpu_static

    rows = gpu_static.rows("sm_90")
    assert len(rows) == 2 * len(work.work())  # every kernel, float32 and float64
    cluster = {r["dtype"]: r for r in rows if r["kernel"] == "lenet_cluster"}
    assert cluster["float32"]["macs"] == 416_520 and cluster["float32"]["blocks_per_image"] == 8
    assert cluster["float64"]["global_bytes"] == 2 * cluster["float32"]["global_bytes"]
    assert cluster["float32"]["shared_bytes"] == kernels.cluster_shared_bytes("float32")
    assert all(r["registers"] > 0 and r["spill_bytes"] == 0 for r in rows)
    assert cluster["float32"]["chain"] < next(r["chain"] for r in rows if r["kernel"] == "lenet_fused")
    done = subprocess.run([sys.executable, "-m", "harness", "gpu-explain", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert re.search(r"lenet_cluster\s+the whole network\s+8\s+416,520", done.stdout)
    assert re.search(r"lenet_batch\s+the whole network\s+1\s+416,520", done.stdout)
    batch = {r["dtype"]: r for r in rows if r["kernel"] == "lenet_batch"}
    assert batch["float64"]["shared_bytes"] == kernels.batch_shared_bytes("float64")
    assert batch["float32"]["global_bytes"] < cluster["float32"]["global_bytes"] / 3  # weights per 4 images
    written = list(tmp_path.glob("gpu_explain/*/"))
    assert len(written) == 1 and len(results.read_rows(written[0])) == len(rows)


def test_details_puts_the_measured_kernel_time_beside_the_static_row():
    from harness.report.sections import gpu_static_section

    static = [{"kind": "gpu_explain", "status": "ok", "kernel": "lenet_cluster", "part": "the whole network",
               "order": 1, "variants": ["cluster", "mapped"], "dtype": dtype, "arch": "sm_90", "blocks_per_image": 8,
               "macs": 416520, "global_bytes": 254_328 * k, "busiest_thread_macs": 319, "chain": 124,
               "registers": 128 * k, "spill_bytes": 0, "shared_bytes": 13952 * k} for k, dtype in ((1, "float32"), (2, "float64"))]
    traced = {"kind": "kernels", "status": "ok", "implementation": "cuda", "variant": "mapped", "batch": 1,
              "device_ops_per_call": 1.0,
              "ops": [{"category": "kernel", "name": "lenet_cluster", "ns_per_call": 10_800.0, "per_call": 1.0}]}
    runs = [{"study": "gpu_explain", "machine": "cpu", "started": 1.0, "order": 1.0, "rows": static},
            {"study": "kernels", "machine": "H100", "started": 2.0, "order": 2.0, "rows": [traced]}]
    text = "\n".join(gpu_static_section.section(runs))
    assert "| lenet_cluster | the whole network | cluster, mapped | 8 | 416,520 | 254.3 | 319 | 124 | 128 / 256 | 0 / 0 | 13952 | 10.8 µs (cuda/mapped, H100) |" in text
    traced["batch"] = 512  # a large batch's kernel time is not the batch-1 one
    assert "| 13952 | not measured |" in "\n".join(gpu_static_section.section(runs))
