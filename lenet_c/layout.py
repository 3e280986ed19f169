"""The shared weights in the layouts fused.c reads (the layers variant needs none: layers.c indexes
Keras' layouts as they are), every array 64-byte aligned for the vector loads that require it.

    aligned(shape, dtype) -> array        zeros, starting at a 64-byte boundary
    blocked(kernel, shape, block, dtype) -> array  a dense kernel padded and cut into output blocks
    pack(layers, dtype, block) -> {name: array}  fused.c's weights, by the names of its lenet_params()
    arena(arrays, order) -> {name: view}  the arrays copied into one aligned block, in that order

Why one block: where the weights sit relative to the scratch (the activations) changes conv1's time
by a fifth on a Zen 4 core (2.8 against 3.35 µs, measured by moving conv1's kernel against the
scratch, 4 KiB apart: a load and an earlier store 4 KiB apart are taken to alias), and separate
numpy allocations land at a different distance in every process. In one block the distances are
the same in every process: scratch first, then the weights, conv1's kernel 14,080 bytes after the
scratch's start (1,792 bytes past a 4 KiB multiple, where it measured fast). The stack is ASLR's
draw in each process: where the compiler keeps vectors there (an earlier conv1 kept its image rows
on the stack), their distance to these buffers moves a stage's time from process to process.
"""

import numpy as np

ALIGN = 64  # bytes: one cache line, one AVX-512 vector


def aligned(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A zeroed array whose first element sits at a multiple of ALIGN bytes."""
    count, itemsize = int(np.prod(shape)), np.dtype(dtype).itemsize
    raw = np.zeros(count + ALIGN // itemsize, dtype)
    start = (-raw.ctypes.data % ALIGN) // itemsize
    return raw[start:start + count].reshape(shape)


def padded(array: np.ndarray, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """`array` in the leading corner of an aligned array of zeros of `shape`."""
    out = aligned(shape, dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


def blocked(kernel: np.ndarray, shape: tuple[int, int], block: int, dtype: str) -> np.ndarray:
    """A dense kernel (in, out) padded with zeros to `shape` (in, width), then cut into the blocks of
    `block` outputs fused.c streams one after the other: (width / block, in, block), each block's
    rows whole and in order. block == width: the padded kernel as it is, (1, in, width)."""
    rows, width = shape
    if width % block:
        raise ValueError(f"a dense block of {block} outputs does not divide {width}")
    full = padded(kernel, shape, dtype)  # (in, width)
    out = aligned((width // block, rows, block), dtype)
    out[...] = full.reshape(rows, width // block, block).transpose(1, 0, 2)
    return out


def pack(w: dict, dtype: str, block=lambda width: width) -> dict[str, np.ndarray]:
    """Keras layouts (harness.data.weights) -> fused.c's: conv1's kernel by filter, conv2's HWIO as it
    is (its 16 filters are one vector), the dense kernels (in, out) padded with zeros to whole
    16-float vectors (inputs and outputs) and cut into the blocks of outputs the library streams
    (`block(width)`: its lenet_dense_block), and the biases padded to the same widths."""
    conv1 = w["conv1"].kernel[:, :, 0, :].transpose(2, 0, 1)  # (5, 5, 1, 6) HWIO -> (6, 5, 5) [k, r, s]
    return {
        "conv1.kernel": padded(conv1, (6, 5, 5), dtype),
        "conv1.bias": padded(w["conv1"].bias, (6,), dtype),
        "conv2.kernel": padded(w["conv2"].kernel, (5, 5, 6, 16), dtype),  # [r, s, c, k]
        "conv2.bias": padded(w["conv2"].bias, (16,), dtype),
        "fc1.kernel": blocked(w["fc1"].kernel, (400, 128), block(128), dtype),  # (400, 120) -> 128 outputs
        "fc1.bias": padded(w["fc1"].bias, (128,), dtype),
        "fc2.kernel": blocked(w["fc2"].kernel, (128, 96), block(96), dtype),  # (120, 84) -> (128, 96)
        "fc2.bias": padded(w["fc2"].bias, (96,), dtype),
        "fc3.kernel": blocked(w["fc3"].kernel, (96, 16), block(16), dtype),  # (84, 10) -> (96, 16)
        "fc3.bias": padded(w["fc3"].bias, (16,), dtype),
    }


def arena(arrays: dict[str, np.ndarray], order: list[str]) -> dict[str, np.ndarray]:
    """Views of one ALIGN-aligned block holding a copy of each array, in `order`, each starting at
    an ALIGN boundary: the buffers' distances from one another fixed (the module's docstring)."""
    dtype = arrays[order[0]].dtype
    step = ALIGN // dtype.itemsize
    starts, size = [], 0
    for name in order:
        starts.append(size)
        size += -(-arrays[name].size // step) * step  # whole 64-byte lines
    block = aligned((size,), str(dtype))
    views = {}
    for name, start in zip(order, starts, strict=True):
        view = block[start:start + arrays[name].size].reshape(arrays[name].shape)
        view[...] = arrays[name]
        views[name] = view
    return views
