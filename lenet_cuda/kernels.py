"""The kernels' host-side contract, in plain Python (no CuPy): which .cu file, which template
instances, each kernel's parameters, every launch's grid and block and every buffer's shape.
model.py launches exactly these; the tests check them against the oracle's shapes without a GPU.

    layers: x (N,28,28,1) -conv_bias_relu-> c1 (N,28,28,6) -max_pool_2x2-> p1 (N,14,14,6)
            -conv_bias_relu-> c2 (N,10,10,16) -max_pool_2x2-> p2 (N,5,5,16) = (N,400) NHWC order
            -dense_bias_act-> fc1 (N,120) -> fc2 (N,84) -> fc3 (N,10) -softmax_rows-> out (N,10)
    fused:  x (N,28,28,1) -lenet_fused, N blocks of FUSED_THREADS-> out (N,10)
    cluster, mapped: x (N,28,28,1) -lenet_cluster, 8N blocks of CLUSTER_THREADS in clusters of 8
            (sm_90)-> out (N,10); mapped: x and out in mapped host memory, a flag the host polls
    persistent: x (N,28,28,1) -lenet_persistent, one cluster of 8 blocks that stays resident and
            serves each call's images in turn-> out (N,10); x, out and ctl in mapped host memory
    resident: x (N,28,28,1) as LL pairs -lenet_resident, one cluster of 8 blocks resident between
            calls (resident.cu) that polls the image's {value, sequence} pairs and answers in pairs-> out
            (N,10); x, out and ctl in mapped host memory
    batch:  x (N,28,28,1) -lenet_batch, ceil(N/4) blocks of BATCH_THREADS, 4 images a block-> out (N,10);
            x and out in mapped host memory (no copies), an event as the others
    rows:   x (N,28,28,1) -lenet_rows, 5N blocks of ROWS_THREADS in clusters of 5 (sm_90), block r pool2's
            row r, fc1's partial sums into block 0 through an mbarrier-> out (N,10)
    batch2, batch2_device: x (N,28,28,1) -lenet_batch2, ceil(N/2) blocks of BATCH2_THREADS, 2 images a
            block computed at once (float)-> out (N,10); batch2: x the caller's own array, registered
            once and read across the bus, out mapped host memory; batch2_device: x and out on the
            device, copied in and out (the kernel's time is the device-resident throughput)
    overlap: x (N,28,28,1) at the address in a mapped word (src) -lenet_overlap, min(OVERLAP_SMS,
            ceil(N/4)) blocks of OVERLAP_THREADS, each looping over groups of images (float 4, double
            1), its next image's copy (cp.async) in flight while it computes one-> out (N,10) in
            mapped host memory; the last block adds 1 to flag (mapped), done (device) counts blocks
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCES = {"layers": "layers.cu", "fused": "fused.cu", "graph": "fused.cu",  # variant -> kernel file
           "cluster": "cluster.cu", "mapped": "cluster.cu", "persistent": "cluster.cu",
           "batch": "batch.cu", "batch2": "batch2.cu", "batch2_device": "batch2.cu"}
SOURCES["resident"] = "resident.cu"  # cuda/resident: LL pairs, one cluster resident between calls
SOURCES["rows"] = "rows.cu"  # cuda/rows: 5 blocks an image split by rows, no cluster barrier an image
SOURCES["overlap"] = "overlap.cu"  # cuda/overlap: one block an SM, its next images copied while it computes
SOURCES["resident_rows"] = "rows.cu"  # cuda/resident_rows: rows' kernel resident on resident's wire
RESIDENT_VARIANTS = ("resident", "resident_rows")  # resident.py's calls: LL pairs, a kernel resident
# thread-block clusters and distributed shared memory: sm_90 and up
MIN_ARCH = {"cluster.cu": 90, "resident.cu": 90, "rows.cu": 90}
OPTIONS = ("--std=c++17",)  # CuPy adds the architecture of the GPU it runs on
CTYPES = {"float32": "float", "float64": "double"}
LAYER_THREADS = 256  # threads per block of the layer kernels (one thread per output element)
FUSED_THREADS = 512  # must equal LENET_THREADS in fused.cu (the tests read it from there)
CLUSTER = 8  # blocks per image in cluster.cu (LENET_CLUSTER; 8 is the portable most)
CLUSTER_THREADS = 256  # threads per block in cluster.cu (LENET_CLUSTER_THREADS)
ROWS_CLUSTER = 5  # blocks per image in rows.cu (LENET_ROWS_CLUSTER): block r computes pool2's row r
ROWS_THREADS = 256  # threads per block in rows.cu (LENET_ROWS_THREADS)
CLUSTER_SIZE = {"cluster.cu": CLUSTER, "resident.cu": CLUSTER, "rows.cu": ROWS_CLUSTER}  # others: 1
BATCH_IMAGES = 4  # images per block in batch.cu (LENET_BATCH_IMAGES)
BATCH_THREADS = 512  # threads per block in batch.cu (LENET_BATCH_THREADS)
BATCH2_IMAGES = 2  # images per block in batch2.cu (LENET_BATCH2_IMAGES)
BATCH2_THREADS = 512  # threads per block in batch2.cu (LENET_BATCH2_THREADS)
BATCH2_CONCURRENT = {"float32": 2, "float64": 1}  # images a batch2 block computes at once (Batch2Shape)
OVERLAP_THREADS = 512  # threads per block in overlap.cu (LENET_OVERLAP_THREADS)
OVERLAP_IMAGES = {"float32": 4, "float64": 1}  # images a group in overlap.cu (OverlapShape<T>::G)
# overlap's most blocks: one an SM of an H100 or H200 (132 SMs); a GPU with fewer runs the rest after
# (each block loops over its groups: any grid is correct), the tests use a small one to loop
OVERLAP_SMS = 132
STATIC_SHARED_LIMIT = 48 * 1024  # bytes of static __shared__ per block, every architecture

# Each kernel's parameters, in the .cu's order: "T*" a device array of the element type, "u32*"
# one of uint32 (or None: a null pointer), "int" a 32-bit int (passed as numpy.int32, so its size
# is never CuPy's guess from a Python int).
PARAMS = {  # "u64*": uint64 (LL pairs, resident.cu)
    "conv_bias_relu": ("T*",) * 4 + ("int",) * 10,  # x, w, b, y, n h w c k r s pad ho wo
    "max_pool_2x2": ("T*",) * 2 + ("int",) * 4,  # x, y, n h w c
    "dense_bias_act": ("T*",) * 4 + ("int",) * 4,  # x, w, b, y, n fan_in fan_out relu
    "softmax_rows": ("T*",) * 2 + ("int",) * 2,  # x, y, n classes
    "lenet_fused": ("T*",) * 12 + ("int",),  # x, 5 x (kernel, bias), probs, n
    "lenet_cluster": ("T*",) * 12 + ("u32*", "u32*", "int"),  # x, 5 x (kernel, bias), probs, done, flag, n
    "lenet_persistent": ("T*",) * 12 + ("u32*", "int", "int"),  # x, 5 (kernel, bias), probs, ctl, n, idle_ns
    "lenet_batch": ("T*",) * 12 + ("int",),  # x, 5 x (kernel, bias), probs, n
    "lenet_batch2": ("T*",) * 12 + ("int",),  # x, 5 x (kernel, bias), probs, n
    "lenet_rows": ("T*",) * 12 + ("int",),  # x, 5 x (kernel, bias), probs, n
}
# x pairs, 5 x (kernel, bias), probs pairs, ctl, n, idle_ns
PARAMS["lenet_resident"] = ("u64*",) + ("T*",) * 10 + ("u64*", "u32*", "int", "int")
PARAMS["lenet_resident_rows"] = PARAMS["lenet_resident"]
# src (the images' address), 5 x (kernel, bias), probs, done, flag, n
PARAMS["lenet_overlap"] = ("u64*",) + ("T*",) * 11 + ("u32*", "u32*", "int")
KERNELS = {"layers": ("conv_bias_relu", "max_pool_2x2", "dense_bias_act", "softmax_rows"),
           "fused": ("lenet_fused",), "graph": ("lenet_fused",),
           "cluster": ("lenet_cluster",), "mapped": ("lenet_cluster",), "persistent": ("lenet_persistent",),
           "batch": ("lenet_batch",), "batch2": ("lenet_batch2",), "batch2_device": ("lenet_batch2",)}
KERNELS["resident"] = ("lenet_resident",)
KERNELS["rows"] = ("lenet_rows",)
KERNELS["resident_rows"] = ("lenet_resident_rows",)
KERNELS["overlap"] = ("lenet_overlap",)

# Buffers on the device, per image (the batch is the leading axis), NHWC.
LAYER_BUFFERS = {"x": (28, 28, 1), "c1": (28, 28, 6), "p1": (14, 14, 6), "c2": (10, 10, 16),
                 "p2": (5, 5, 16), "fc1": (120,), "fc2": (84,), "fc3": (10,), "out": (10,)}
FUSED_BUFFERS = {"x": (28, 28, 1), "out": (10,)}
# mapped: x and out in mapped page-locked host memory (the kernel reads and writes them across the
# bus), done (uint32, on the device) counts finished images, flag (uint32, host) the calls ended
MAPPED_HOST = ("x", "out", "flag", "ctl")
# persistent: ctl (4 uint32, mapped host memory), as cluster.cu's CTL_* name them: the host stores
# the call's number in GO, the kernel the calls it served in ENDED and 0 in ALIVE when it ends
# (the host 1 before it launches it); QUIT (host) ends it now
CTL_GO, CTL_ENDED, CTL_ALIVE, CTL_QUIT = range(4)
# persistent, resident: a cluster that waits this long for a call ends (frees its 8 SMs for other
# processes' work on a shared server; the next call launches it again, a few µs)
IDLE_NS = 200_000
BATCH_HOST = ("x", "out")  # batch: both in mapped page-locked host memory, nothing on the device
# overlap: src (the images' device address), x (staging for arrays that cannot be registered), out
# and flag in mapped page-locked host memory; done on the device
OVERLAP_HOST = ("src", "x", "out", "flag")
BATCH2_VARIANTS = ("batch2", "batch2_device")  # lenet_batch2's calls (model.py's batch2 section)
# The fused kernel's static shared arrays (elements), as declared in fused.cu
FUSED_SHARED = {"img": 784, "s_conv1_w": 150, "s_conv1_b": 6, "s_conv2_w": 2400, "s_conv2_b": 16,
                "p1": 1176, "p2": 400, "h1": 120, "h2": 84, "logits": 10, "partial": FUSED_THREADS}
WEIGHTS = ("conv1", "conv2", "fc1", "fc2", "fc3")


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: int  # blocks (1-D)
    block: int  # threads per block (1-D)
    args: tuple  # buffer names ("x", "conv1.kernel", ...) and ints, in PARAMS order
    threads: int  # threads with work: grid * block covers them (one per output; softmax: per row)


HEADER = "common.cuh"  # what every kernel file shares (device functions, primitives, constants)


def file_source(cu: str) -> str:
    """The text NVRTC, the emulator and gpu-explain compile for kernel file cu: common.cuh's, then
    the file's own from its first line (#line: errors name the file and line)."""
    return f'{(HERE / HEADER).read_text()}\n#line 1 "{cu}"\n{(HERE / cu).read_text()}'


def source(variant: str) -> str:
    """The source of a variant's kernel file, common.cuh prepended (file_source)."""
    return file_source(SOURCES[variant])


def name_expressions(variant: str, dtype: str) -> list[str]:
    """The template instances CuPy compiles and looks up: ["lenet_fused<float>"]."""
    if dtype not in CTYPES:
        raise ValueError(f"dtype: expected one of {list(CTYPES)}, found {dtype!r}")
    return [f"{kernel}<{CTYPES[dtype]}>" for kernel in KERNELS[variant]]


def compiles_for(cu: str, arch: str) -> bool:
    """Whether the kernel file cu compiles for arch ("sm_90", "compute_80"): cluster.cu needs sm_90."""
    return int(arch.rpartition("_")[2]) >= MIN_ARCH.get(cu, 0)


def nvrtc_units(arch: str | None = None) -> list[tuple[str, str, tuple[str, ...], list[str]]]:
    """What doctor compiles (the registry's "kernels" hook): per kernel file that compiles for arch
    (every one when None), its source, name, options and the template instances of every dtype."""
    files = dict.fromkeys(SOURCES.values())  # each file once, in SOURCES' order
    return [(file_source(cu), cu, OPTIONS,
             list(dict.fromkeys(e for dtype in CTYPES for v in SOURCES if SOURCES[v] == cu
                                for e in name_expressions(v, dtype))))
            for cu in files if arch is None or compiles_for(cu, arch)]


def blocks(count: int, threads: int) -> int:
    return (count + threads - 1) // threads


def buffer_shapes(variant: str, n: int) -> dict[str, tuple]:
    if n < 1:
        raise ValueError(f"batch size: expected >= 1, found {n}")
    if variant in ("batch", *BATCH2_VARIANTS):  # batch, batch2: host memory; batch2_device: the device's
        return {"x": (n, 28, 28, 1), "out": (n, 10)}
    if variant == "overlap":
        return {"src": (1,), "x": (n, 28, 28, 1), "out": (n, 10), "done": (1,), "flag": (1,)}
    if variant == "mapped":
        return {"x": (n, 28, 28, 1), "out": (n, 10), "done": (1,), "flag": (1,)}
    if variant in ("cluster", "rows"):
        return {"x": (n, 28, 28, 1), "out": (n, 10)}
    if variant == "persistent":
        return {"x": (n, 28, 28, 1), "out": (n, 10), "ctl": (4,)}
    if variant in RESIDENT_VARIANTS:
        return resident_buffer_shapes(n)
    per_image = FUSED_BUFFERS if variant in ("fused", "graph") else LAYER_BUFFERS
    return {name: (n, *shape) for name, shape in per_image.items()}


def layer_launches(n: int) -> list[Launch]:
    """The eight launches of the layers variant for a batch of n, in order."""
    t = LAYER_THREADS

    def conv(x, name, y, h, c, k, pad):  # 5x5 kernel, stride 1
        ho = h + 2 * pad - 4
        count = n * ho * ho * k
        return Launch("conv_bias_relu", blocks(count, t), t,
                      (x, f"{name}.kernel", f"{name}.bias", y, n, h, h, c, k, 5, 5, pad, ho, ho), count)

    def pool(x, y, h, c):
        count = n * (h // 2) * (h // 2) * c
        return Launch("max_pool_2x2", blocks(count, t), t, (x, y, n, h, h, c), count)

    def dense(x, name, fan_in, fan_out, relu):
        count = n * fan_out
        return Launch("dense_bias_act", blocks(count, t), t,
                      (x, f"{name}.kernel", f"{name}.bias", name, n, fan_in, fan_out, int(relu)), count)

    return [conv("x", "conv1", "c1", 28, 1, 6, 2),  # "same": (N, 28, 28, 6)
            pool("c1", "p1", 28, 6),  # (N, 14, 14, 6)
            conv("p1", "conv2", "c2", 14, 6, 16, 0),  # "valid": (N, 10, 10, 16)
            pool("c2", "p2", 10, 16),  # (N, 5, 5, 16) = (N, 400)
            dense("p2", "fc1", 400, 120, True),
            dense("fc1", "fc2", 120, 84, True),
            dense("fc2", "fc3", 84, 10, False),
            Launch("softmax_rows", blocks(n, t), t, ("fc3", "out", n, 10), n)]


def fused_launches(n: int) -> list[Launch]:
    """One block per image; its threads share the image's work (fused.cu)."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    return [Launch("lenet_fused", n, FUSED_THREADS, ("x", *weights, "out", n), n * FUSED_THREADS)]


def cluster_launches(n: int, mapped: bool) -> list[Launch]:
    """8 blocks per image in clusters of 8 (cluster.cu); done and flag only for mapped (else null)."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    signal = ("done", "flag") if mapped else (None, None)
    return [Launch("lenet_cluster", CLUSTER * n, CLUSTER_THREADS, ("x", *weights, "out", *signal, n),
                   n * CLUSTER * CLUSTER_THREADS)]


def rows_launches(n: int) -> list[Launch]:
    """5 blocks per image in clusters of 5 (rows.cu): block r computes pool2's row r."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    return [Launch("lenet_rows", ROWS_CLUSTER * n, ROWS_THREADS, ("x", *weights, "out", n),
                   n * ROWS_CLUSTER * ROWS_THREADS)]


def persistent_launches(n: int) -> list[Launch]:
    """One cluster of 8 blocks for any batch: it serves the call's n images one after another."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    return [Launch("lenet_persistent", CLUSTER, CLUSTER_THREADS, ("x", *weights, "out", "ctl", n, IDLE_NS),
                   CLUSTER * CLUSTER_THREADS)]
def batch_launches(n: int) -> list[Launch]:
    """BATCH_IMAGES images per block (batch.cu): the last block's missing images masked."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    grid = blocks(n, BATCH_IMAGES)
    return [Launch("lenet_batch", grid, BATCH_THREADS, ("x", *weights, "out", n), grid * BATCH_THREADS)]


def batch2_launches(n: int) -> list[Launch]:
    """BATCH2_IMAGES images per block (batch2.cu): the last block's missing image masked."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    grid = blocks(n, BATCH2_IMAGES)
    return [Launch("lenet_batch2", grid, BATCH2_THREADS, ("x", *weights, "out", n), grid * BATCH2_THREADS)]


def overlap_launches(n: int) -> list[Launch]:
    """At most OVERLAP_SMS blocks (overlap.cu), one per float group of 4 images; each loops over its
    groups (in float64 groups of 1: four times as many a block)."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    grid = min(OVERLAP_SMS, blocks(n, OVERLAP_IMAGES["float32"]))
    return [Launch("lenet_overlap", grid, OVERLAP_THREADS, ("src", *weights, "out", "done", "flag", n),
                   grid * OVERLAP_THREADS)]


def launches(variant: str, n: int) -> list[Launch]:
    if n < 1:
        raise ValueError(f"batch size: expected >= 1, found {n}")
    if variant in RESIDENT_VARIANTS:
        return resident_launches(n, variant)
    if variant == "rows":
        return rows_launches(n)
    if variant == "overlap":
        return overlap_launches(n)
    if variant == "persistent":
        return persistent_launches(n)
    if variant == "batch":
        return batch_launches(n)
    if variant in BATCH2_VARIANTS:
        return batch2_launches(n)
    if variant in ("cluster", "mapped"):
        return cluster_launches(n, variant == "mapped")
    return fused_launches(n) if variant in ("fused", "graph") else layer_launches(n)


# common.cuh's ClusterShared (elements), as declared there (cluster.cu's kernels and resident.cu's)
CLUSTER_SHARED = {"img": 32 * 32, "conv1_w": 150, "conv1_b": 6, "conv2_w": 300, "conv2_b": 2, "p1": 1176,
                  "c2": 200, "p2": 400, "h1": 120, "h2": 84, "partial": CLUSTER_THREADS, "logits": 10}


def cluster_shared_bytes(dtype: str) -> int:
    """Shared memory of one lenet_cluster, lenet_persistent or lenet_resident block (ptxas reports
    the same number): the arrays, then the command word, the struct padded to the element's alignment."""
    itemsize = np.dtype(dtype).itemsize
    return -(-(sum(CLUSTER_SHARED.values()) * itemsize + 4) // itemsize) * itemsize


def fused_shared_bytes(dtype: str) -> int:
    """Static shared memory of one lenet_fused block (ptxas reports the same number)."""
    return sum(FUSED_SHARED.values()) * np.dtype(dtype).itemsize


# rows.cu's RowsShared (elements), as declared there: its arrays, its union `work` (one of ROWS_WORK
# at a time), then 4 mbarriers (8 bytes each) and 3 words (4 each), the struct padded to 8 bytes
ROWS_SHARED = {"img": 16 * 32, "conv1_w": 150, "conv1_b": 6, "conv2_w": 2400, "conv2_b": 16, "p1": 504,
               "p2row": 80, "fc1_part": 2 * 5 * 120}
ROWS_WORK = {"c2part": 240 * 4, "half": 240, "head": ROWS_THREADS + 120 + 84 + 10}


def rows_shared_bytes(dtype: str) -> int:
    """Shared memory of one lenet_rows or lenet_resident_rows block (ptxas reports the same number)."""
    arrays = (sum(ROWS_SHARED.values()) + max(ROWS_WORK.values())) * np.dtype(dtype).itemsize
    return -(-(arrays + 4 * 8 + 3 * 4) // 8) * 8


# batch.cu's static shared arrays (elements), as declared there: p2 holds BATCH_IMAGES images;
# work is img + p1 during the convolutions, the dense layers' partial sums after
BATCH_SHARED = {"s_conv1_w": 150, "s_conv1_b": 6, "s_conv2_w": 2400, "s_conv2_b": 16,
                "p2": 400 * BATCH_IMAGES, "work": 784 + 1176}


def batch_shared_bytes(dtype: str) -> int:
    """Static shared memory of one lenet_batch block (ptxas reports the same number)."""
    return sum(BATCH_SHARED.values()) * np.dtype(dtype).itemsize


# --- resident (resident.cu): LL pairs in mapped host memory -----------------------------------
# Each value crosses the bus as W = itemsize / 4 uint64 pairs {32-bit word of the value, sequence}
# (W = 1 in float32, 2 in float64); ctl (4 uint32) as resident.cu's RESIDENT_* name them.
RESIDENT_NEXT, RESIDENT_ALIVE, RESIDENT_QUIT, RESIDENT_SERVED = range(4)
RESIDENT_HOST = ("x_pairs", "out_pairs", "ctl")  # all three in mapped page-locked host memory


def pair_words(dtype: str) -> int:
    """W: the LL pairs (32-bit words) one value of dtype takes on the wire."""
    return np.dtype(dtype).itemsize // 4


def resident_buffer_shapes(n: int) -> dict[str, tuple]:
    """Values (each W pairs): the images' (N, 784) and the answer's (N, 10); ctl's 4 words."""
    return {"x_pairs": (n, 784), "out_pairs": (n, 10), "ctl": (4,)}


def resident_launches(n: int, variant: str = "resident") -> list[Launch]:
    """One cluster for any batch, resident between calls: it serves the call's n images one after
    another and ends after IDLE_NS without a call. resident: 8 blocks (resident.cu); resident_rows:
    5 split by rows (rows.cu)."""
    weights = tuple(f"{name}.{part}" for name in WEIGHTS for part in ("kernel", "bias"))
    size, threads = (CLUSTER, CLUSTER_THREADS) if variant == "resident" else (ROWS_CLUSTER, ROWS_THREADS)
    return [Launch(KERNELS[variant][0], size, threads,
                   ("x_pairs", *weights, "out_pairs", "ctl", n, IDLE_NS), size * threads)]


def batch2_shared(dtype: str) -> dict[str, int]:
    """batch2.cu's static shared arrays (elements), as declared there: work holds img + p1 for the
    images computed at once (BATCH2_CONCURRENT), the dense layers' partial sums after."""
    return {"s_conv1_w": 150, "s_conv1_b": 6, "s_conv2_w": 2400, "s_conv2_b": 16,
            "p2": 400 * BATCH2_IMAGES, "work": BATCH2_CONCURRENT[dtype] * (784 + 1176)}


def batch2_shared_bytes(dtype: str) -> int:
    """Static shared memory of one lenet_batch2 block (ptxas reports the same number)."""
    return sum(batch2_shared(dtype).values()) * np.dtype(dtype).itemsize


# overlap.cu's static shared arrays (elements), as declared there: buf two images (the one computed,
# the next in flight), p1 one image's pool1 and then fc1's partial sums (4 parts x 120 x G), p2 a
# group's pool2
def overlap_shared(dtype: str) -> dict[str, int]:
    g = OVERLAP_IMAGES[dtype]
    return {"buf": 2 * 784, "s_conv1_w": 150, "s_conv1_b": 6, "s_conv2_w": 2400, "s_conv2_b": 16,
            "p1": max(1176, 4 * 120 * g), "p2": 400 * g}


def overlap_shared_bytes(dtype: str) -> int:
    """Static shared memory of one lenet_overlap block (ptxas reports the same number)."""
    return sum(overlap_shared(dtype).values()) * np.dtype(dtype).itemsize
