"""What each hand-written CUDA kernel does for one image, stage by stage, as its source does it:
multiply-adds, threads, the busiest thread's share, the longest dependent chain, global loads.
The static GPU explain (harness.explain.gpu_static, which imports it by name: it serves this level)
reads it; it is no part of the level's call (kept apart, like lenet_c/explain, so editing it
leaves the level's measured sources as they were).
"""

from dataclasses import dataclass, replace

from lenet_cuda.kernels import (
    BATCH2_IMAGES,
    BATCH2_THREADS,
    BATCH_IMAGES,
    BATCH_THREADS,
    CLUSTER,
    CLUSTER_THREADS,
    FUSED_THREADS,
    OVERLAP_IMAGES,
    OVERLAP_THREADS,
    ROWS_CLUSTER,
    ROWS_THREADS,
    layer_launches,
)


@dataclass(frozen=True)
class Stage:
    """One step of a kernel's work on one image. Multiply-adds are nominal (conv1's padded taps
    counted, as in the model's 416,520); reads are the elements its threads load from global memory."""
    name: str
    macs: int  # multiply-adds per image
    threads: int  # threads sharing them, per image
    per_thread: int  # multiply-adds of the busiest thread
    chain: int  # the longest dependent chain of multiply-adds in one thread (one accumulator's)
    reads: int  # elements loaded from global memory per image


@dataclass(frozen=True)
class Work:
    kernel: str  # the .cu's kernel ("conv_bias_relu", ...), or the layer a layers launch computes
    variants: tuple[str, ...]
    blocks: int  # blocks working on one image (a batch-1 launch's grid: the SMs it can use)
    threads: int  # threads per block
    stages: tuple[Stage, ...]
    part: str = "the whole network"  # a layers launch: its layer


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def dense_stage(name: str, fan_in: int, fan_out: int, threads: int) -> Stage:
    """fused.cu's dense_block: threads // fan_out threads per output, each a strided share of the inputs."""
    parts = threads // fan_out
    share = ceil_div(fan_in, parts)
    return Stage(name, fan_in * fan_out, parts * fan_out, share, share, fan_in * fan_out + fan_out)


def batch_dense_stage(name: str, fan_in: int, fan_out: int, parts: int, images: int) -> Stage:
    """batch.cu's dense_batch: parts threads per output, each a strided share of the inputs for every
    image of the block (one accumulator an image); the weights read once for the block's images."""
    share = ceil_div(fan_in, parts)
    reads = ceil_div(fan_in * fan_out + fan_out, images)
    return Stage(name, fan_in * fan_out, parts * fan_out, share, share, reads)


def work() -> list[Work]:
    """What each kernel does for one image: lenet_fused (one block), lenet_cluster (a cluster of
    CLUSTER blocks), lenet_persistent and lenet_resident (the same, resident), lenet_rows (5 blocks
    split by rows), lenet_batch (a block shared by
    BATCH_IMAGES images) and the layers variant's launches, stage by stage."""
    t = FUSED_THREADS
    conv_in = 784 + 150 + 6 + 2400 + 16  # the image and the conv weights, staged into shared memory once
    fused = Work("lenet_fused", ("fused", "graph"), 1, t, (
        Stage("stage in", 0, t, 0, 0, conv_in),
        Stage("conv1+pool", 117_600, t, ceil_div(1176, t) * 4 * 25, 25, 0),  # 1176 windows, 4 x 25 each
        Stage("conv2+pool", 240_000, 400, 4 * 150, 150, 0),  # 400 windows of 4 x 150, one accumulator
        dense_stage("fc1", 400, 120, t), dense_stage("fc2", 120, 84, t), dense_stage("fc3", 84, 10, t)))
    c, ct = CLUSTER, CLUSTER_THREADS
    cluster = Work("lenet_cluster", ("cluster", "mapped"), c, ct, (
        Stage("stage in", 0, c * ct, 0, 0, 784 + c * 156 + c * 302),  # image once; conv weights per block
        Stage("conv1+pool", 117_600, 1176, 4 * 25, 25, 0),  # a window's 4 outputs in 4 accumulators
        Stage("conv2", 240_000, 1600, 150, 30, 0),  # one output each, 5 accumulators of 30
        Stage("fc1", 48_000, c * 240, 25, 25, 48_000 + 120),  # 16 threads an output
        Stage("fc2", 10_080, 252, 40, 40, 10_080 + 84),  # block 0: 3 threads an output
        Stage("fc3", 840, 250, 4, 4, 840 + 10)))  # block 0: 25 threads an output
    # persistent: cluster's stages, but the weights stay in registers and shared memory between
    # calls (loaded once a launch): a call reads only its image (across the bus)
    persistent = Work("lenet_persistent", ("persistent",), c, ct,
                      (Stage("stage in", 0, c * ct, 0, 0, 784),
                       *(replace(stage, reads=0) for stage in cluster.stages[1:])))
    # resident (resident.cu): persistent's stages and reads (its conv1 loads a 6x6 patch into
    # registers once, which changes loads, not multiply-adds or chains)
    resident = Work("lenet_resident", ("resident",), c, ct, persistent.stages)
    # lenet_rows (rows.cu): block r of 5 computes pool2's row r from image rows 4r-2 .. 4r+13 (76 rows
    # inside the image over the 5 blocks) and p1 rows 2r .. 2r+5: conv1's nominal multiply-adds, done
    # 30 / 14 times over (the busiest thread's two windows say so), conv2's once
    rc, rt = ROWS_CLUSTER, ROWS_THREADS
    rows = Work("lenet_rows", ("rows",), rc, rt, (
        Stage("stage in", 0, rc * rt, 0, 0, 76 * 28 + rc * (156 + 2416)),  # rows; conv weights per block
        Stage("conv1+pool", 117_600, rc * rt, 2 * 4 * 25, 25, 0),  # 504 windows a block, 2 a thread
        Stage("conv2+pool", 240_000, rc * 240, 4 * 50, 50, 0),  # a window x channel x third of the inputs
        Stage("fc1", 48_000, rc * 240, 40, 10, 48_000 + 120),  # an output x half a row's 80 inputs
        Stage("fc2", 10_080, 252, 40, 40, 10_080 + 84),  # block 0: cluster_head
        Stage("fc3", 840, 250, 4, 4, 840 + 10)))
    # lenet_resident_rows: rows' stages, the weights loaded once a launch: a call reads its image rows
    resident_rows = Work("lenet_resident_rows", ("resident_rows",), rc, rt,
                         (Stage("stage in", 0, rc * rt, 0, 0, 76 * 28),
                          *(replace(stage, reads=0) for stage in rows.stages[1:])))
    g, bt = BATCH_IMAGES, BATCH_THREADS
    # lenet_batch, per image: its block does this for each of its g images, one after another for the
    # convolutions and all at once for the dense layers; weights loaded once per block count 1/g here
    batch = Work("lenet_batch", ("batch",), 1, bt, (
        Stage("stage in", 0, bt, 0, 0, 784 + ceil_div(156 + 2416, g)),  # image; conv weights per block
        Stage("conv1+pool", 117_600, 392, 3 * 4 * 25, 25, 0),  # a window x 3 channels: 12 accumulators
        Stage("conv2+pool", 240_000, 400, 4 * 150, 150, 0),  # a window x 1 channel: 4 accumulators
        batch_dense_stage("fc1", 400, 120, 4, g), batch_dense_stage("fc2", 120, 84, 5, g),
        batch_dense_stage("fc3", 84, 10, 12, g)))
    g2, bt2 = BATCH2_IMAGES, BATCH2_THREADS
    # lenet_batch2, per image (float): both of its block's images at once; conv1's 784 items over
    # 512 threads (the busiest thread does two), conv2's 400 threads each both images' window
    batch2 = Work("lenet_batch2", ("batch2", "batch2_device"), 1, bt2, (
        Stage("stage in", 0, bt2, 0, 0, 784 + ceil_div(156 + 2416, g2)),
        Stage("conv1+pool", 117_600, 392, ceil_div(g2 * 392, bt2) * 3 * 4 * 25 // g2, 25, 0),
        Stage("conv2+pool", 240_000, 400, 4 * 150, 150, 0),  # per image: 4 accumulators of 150
        batch_dense_stage("fc1", 400, 120, 4, g2), batch_dense_stage("fc2", 120, 84, 5, g2),
        batch_dense_stage("fc3", 84, 10, 12, g2)))
    g3, bt3 = OVERLAP_IMAGES["float32"], OVERLAP_THREADS
    # lenet_overlap, per image (float): its group's images one after another through the convolutions
    # (conv1's 392 items, conv2's 400 threads), the dense layers over the group's 4; the weights loaded
    # once a block, for all of its groups (at batch 512 one group a block: counted per group here)
    overlap = Work("lenet_overlap", ("overlap",), 1, bt3, (
        Stage("stage in", 0, bt3, 0, 0, 784 + ceil_div(156 + 2416, g3)),
        Stage("conv1+pool", 117_600, 392, 3 * 4 * 25, 25, 0),
        Stage("conv2+pool", 240_000, 400, 4 * 150, 150, 0),
        batch_dense_stage("fc1", 400, 120, 4, g3), batch_dense_stage("fc2", 120, 84, 5, g3),
        batch_dense_stage("fc3", 84, 10, 12, g3)))
    layers = []
    names = ("conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3", "softmax")  # layer_launches' order
    for name, launch in zip(names, layer_launches(1), strict=True):
        a = launch.args
        if launch.kernel == "conv_bias_relu":  # one output a thread: every tap of every channel
            taps = a[9] * a[10] * a[7]
            stage = Stage("conv", launch.threads * taps, launch.threads, taps, taps,
                          launch.threads * (2 * taps + 1))
        elif launch.kernel == "dense_bias_act":  # one output a thread: the whole fan-in
            stage = Stage("dense", a[5] * a[6], launch.threads, a[5], a[5], a[6] * (2 * a[5] + 1))
        elif launch.kernel == "max_pool_2x2":
            stage = Stage("pool", 0, launch.threads, 0, 0, 4 * launch.threads)
        else:
            stage = Stage("softmax", 0, launch.threads, 0, 0, a[3])
        layers.append(Work(launch.kernel, ("layers",), launch.grid, launch.block, (stage,), name))
    return [fused, cluster, persistent, resident, rows, resident_rows, batch, batch2, overlap, *layers]
