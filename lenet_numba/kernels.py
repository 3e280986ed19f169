"""The forward pass of one image as loops, compiled by Numba for this CPU (AVX2 / AVX-512 where it
has them). Written for the compiler, not transcribed from the maths:
- the convolutions' outputs are planar, rows computed as wide as their input's (the extra
  columns never read), so one channel's output is one contiguous run; the loop over it is the
  one LLVM vectorizes (16 pixels a pass), and the 25 taps inside it, unrolled, sum in a vector
  register: one load per FMA and one store per output, not a load and a store per FMA;
- the dense layers' loop over outputs is contiguous too (kernel rows, padded to whole vectors),
  8 inputs summed in a register per pass;
- pooling takes the max of two rows first (contiguous, vectorized), then of neighbours;
- every array argument is declared not to overlap any other (RESTRICT: C's `restrict`): without
  it LLVM must assume a store to an output may change a weight, and keeps the loops scalar;
- fastmath (reassociation, FMA contraction), no bounds checks, no exceptions for division.
Where the time goes (batch 1, one Zen 4 core): conv2 half of it, bound by its input loads (one
unaligned vector load per FMA: the 25 taps read 25 shifted windows), conv1 a fifth, fc1 a tenth.

Layouts: the image (28, 28, 1); conv1's kernel (6, 5, 5) [k, r, s], its output (6, 28 * 32)
planar; pool1 (6, 208) planar; conv2's kernel (5, 5, 6, 16) HWIO as Keras has it, its output
(16, 144) planar; pool2 (400,) in Keras' flatten order (y, x, k); the dense kernels (in, out) as
Keras has them, padded with zeros to 128, 96 and 16 outputs (and fc2, fc3 to 128, 96 inputs).
"""

import os

import numpy as np
from numba import njit
from numba.core.compiler import Compiler

# The vector loops' lengths, known when compiling, so LLVM sizes its vector loop to them
# exactly: conv1 28 rows x 32, conv2 10 rows x 14 rounded up to whole 16-float vectors (144).
CONV1_RUN, CONV2_RUN = 28 * 32, 144


class Restrict(Compiler):
    """Numba's compiler with every array argument marked noalias (C's `restrict`)."""

    def define_pipelines(self):
        self.state.flags.noalias = True
        return super().define_pipelines()


# The machine code kept between processes only where NUMBA_CACHE_DIR names a folder this process
# may write (the tests set one a session, as they do JAX's cache): the studies compile in every
# process, as a user's first run does. Compiling the kernels takes about 3 s of a core.
CACHE = os.access(os.environ.get("NUMBA_CACHE_DIR") or "/nonexistent", os.W_OK)


def kernel(fn):
    return njit(fastmath=True, boundscheck=False, error_model="numpy", pipeline_class=Restrict,
                cache=CACHE)(fn)


@kernel
def conv1(img, padded, w, b, out):
    """img (28, 28, 1) -> out (6, 28 * 32) planar, bias added, no ReLU yet (pool1 applies it).
    padded (36 * 32,): the image at rows 2..29, columns 2..29 of a 32-wide grid, zeros around
    (written once when the buffer was made). Each output row is computed 32 wide (columns
    28..31 are never read): then one channel's output is one contiguous run of 896, the loop
    over it is vectorized (16 pixels a pass), and the 25 taps inside it, unrolled, sum in a
    register: one load per FMA, no store until the pixel is done."""
    width, wide = 28, 32
    for y in range(width):
        for x in range(width):
            padded[(y + 2) * wide + x + 2] = img[y, x, 0]
    for k in range(out.shape[0]):
        for p in range(CONV1_RUN):  # 896 contiguous outputs
            acc = b[k]
            for r in range(5):
                for s in range(5):
                    acc += w[k, r, s] * padded[p + r * wide + s]
            out[k, p] = acc


@kernel
def pool1(c1, out, row):
    """c1 (6, 28 * 32) -> out (6, 208) planar, 14 x 14 used: ReLU of the 2x2 max (ReLU and max
    commute); the zeros after 196 let conv2 read its wide rows past the last pixel. The max of
    two rows first, contiguous and vectorized, into row (32,); then of neighbours in it."""
    for k in range(c1.shape[0]):
        for y in range(14):
            top, bottom = (2 * y) * 32, (2 * y + 1) * 32
            for x in range(32):
                row[x] = max(c1[k, top + x], c1[k, bottom + x])
            for x in range(14):
                out[k, y * 14 + x] = max(max(row[2 * x], row[2 * x + 1]), 0.0)


@kernel
def conv2(p1, w, b, out):
    """p1 (6, 208) planar -> out (16, 144) planar, bias added, "valid"; w (5, 5, 6, 16) HWIO.
    Rows 14 wide as p1's (columns 10..13 and the last 4 never read): one run of 144 per channel,
    vectorized as conv1's, the 25 taps of one input channel summed in a register."""
    for k in range(w.shape[3]):
        for p in range(CONV2_RUN):
            out[k, p] = b[k]
        for c in range(w.shape[2]):
            for p in range(CONV2_RUN):  # 144 contiguous outputs: 9 passes of 16
                acc = out[k, p]
                for r in range(5):
                    for s in range(5):
                        acc += w[r, s, c, k] * p1[c, p + r * 14 + s]
                out[k, p] = acc


@kernel
def pool2_flatten(c2, out):
    """c2 (16, 144) -> out (400,): ReLU of the 2x2 max, in Keras' flatten order (y, x, k)."""
    kk = c2.shape[0]
    for y in range(5):
        for x in range(5):
            top, bottom = (2 * y) * 14 + 2 * x, (2 * y + 1) * 14 + 2 * x
            for k in range(kk):
                out[(y * 5 + x) * kk + k] = max(max(max(c2[k, top], c2[k, top + 1]),
                                                    max(c2[k, bottom], c2[k, bottom + 1])), 0.0)


@kernel
def dense(x, w, b, out, relu):
    """x (in,), w (in, out), b (out,) -> out (out,) = x @ w + b, ReLU where asked. in is a
    multiple of 8 and out of 16 (the model pads the kernels with zeros): the loop over outputs
    is vectorized, 8 inputs summed in a register each pass."""
    for j in range(out.shape[0]):
        out[j] = b[j]
    for q in range(0, x.shape[0], 8):
        for j in range(out.shape[0]):  # rows of the kernel: contiguous, 16 outputs a pass
            acc = out[j]
            for t in range(8):
                acc += x[q + t] * w[q + t, j]
            out[j] = acc
    if relu:
        for j in range(out.shape[0]):
            out[j] = max(out[j], 0.0)


@kernel
def softmax(z, out):
    """z (16,) logits, 10 used -> out (10,) probabilities."""
    n = out.shape[0]
    top = z[0]
    for j in range(n):
        top = max(top, z[j])
    total = z[0] - z[0]
    for j in range(n):
        out[j] = np.exp(z[j] - top)
        total += out[j]
    for j in range(n):
        out[j] /= total


@kernel
def image(x, w, buf, out):
    """One image x (28, 28, 1) through every layer; w the 10 weight arrays, buf the 9 buffers."""
    w1, b1, w2, b2, f1, g1, f2, g2, f3, g3 = w
    padded, c1, row, p1, c2, p2, h1, h2, z = buf
    conv1(x, padded, w1, b1, c1)       # (6, 28 * 32)
    pool1(c1, p1, row)                 # (6, 208)
    conv2(p1, w2, b2, c2)              # (16, 144)
    pool2_flatten(c2, p2)              # (400,)
    dense(p2, f1, g1, h1, True)        # (128,): 120 and 8 zeros
    dense(h1, f2, g2, h2, True)        # (96,): 84 and 12 zeros
    dense(h2, f3, g3, z, False)        # (16,): 10 logits and 6 zeros
    softmax(z, out)                    # (10,)


@kernel
def forward(x, w, buf, out):
    """fused: the whole batch x (N, 28, 28, 1) -> out (N, 10) in one call, one image at a time
    through the same buffers (they stay in L1)."""
    for i in range(x.shape[0]):
        image(x[i], w, buf, out[i])


# layers: one compiled call per layer over the whole batch (N leading every buffer), as a
# framework runs a network; the same per-image loops inside.
@kernel
def conv1_layer(x, padded, w, b, out):
    for i in range(x.shape[0]):
        conv1(x[i], padded, w, b, out[i])


@kernel
def pool1_layer(c1, out, row):
    for i in range(c1.shape[0]):
        pool1(c1[i], out[i], row)


@kernel
def conv2_layer(p1, w, b, out):
    for i in range(p1.shape[0]):
        conv2(p1[i], w, b, out[i])


@kernel
def pool2_layer(c2, out):
    for i in range(c2.shape[0]):
        pool2_flatten(c2[i], out[i])


@kernel
def dense_layer(x, w, b, out, relu):
    for i in range(x.shape[0]):
        dense(x[i], w, b, out[i], relu)


@kernel
def softmax_layer(z, out):
    for i in range(z.shape[0]):
        softmax(z[i], out[i])
