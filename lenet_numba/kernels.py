"""The forward pass of one image as loops, compiled by Numba for this CPU (AVX2 / AVX-512 where it
has them). Written for the compiler, not transcribed from the maths:
- the innermost loop runs over a contiguous axis of the output (channels in conv2 and the
  dense layers, output pixels in conv1) with a trip count read from the arrays, so LLVM's loop
  vectorizer turns it into vector FMAs instead of unrolling it into scalar code;
- each pass of a reduction step (one weight, or one input value) updates a whole row of
  outputs (28 pixels, or 10 pixels x 16 channels), so FMAs on different outputs overlap;
- every array argument is declared not to overlap any other (RESTRICT: C's `restrict`): without
  it LLVM must assume a store to an output may change a weight, and keeps the loops scalar;
- fastmath (reassociation, FMA contraction), no bounds checks, no exceptions for division.

Layouts: the image (28, 28, 1); conv1's kernel (6, 5, 5) [k, r, s] and its output planar
(6, 28, 28), so its inner loop runs along a row of pixels; everything after is channels-last as
Keras has it: pool1 (14, 14, 6), conv2's kernel (5, 5, 6, 16) HWIO, conv2 (10, 10, 16), pool2
(400,) in Keras' flatten order, dense kernels (in, out).
"""

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


def kernel(fn):
    return njit(fastmath=True, boundscheck=False, error_model="numpy", pipeline_class=Restrict)(fn)


@kernel
def conv1(img, padded, w, b, out):
    """img (28, 28, 1) -> out (6, 28 * 32) planar, bias added, no ReLU yet (pool1 applies it).
    padded (36 * 32,): the image at rows 2..29, columns 2..29 of a 32-wide grid, zeros around
    (written once when the buffer was made). Each output row is computed 32 wide (columns
    28..31 are never read): then one channel's whole output is one contiguous run of 896, and
    each of the 25 taps is one long vector FMA loop over it."""
    width, wide = 28, 32
    for y in range(width):
        for x in range(width):
            padded[(y + 2) * wide + x + 2] = img[y, x, 0]
    n = CONV1_RUN
    for k in range(out.shape[0]):
        for p in range(n):
            out[k, p] = b[k]
        for r in range(5):
            for s in range(5):
                wk, shift = w[k, r, s], r * wide + s
                for p in range(n):  # 896 contiguous outputs: vector FMAs
                    out[k, p] += wk * padded[p + shift]


@kernel
def pool1(c1, out):
    """c1 (6, 28 * 32) -> out (6, 208) planar, 14 x 14 used: ReLU of the 2x2 max (ReLU and max
    commute); the zeros after 196 let conv2 read its wide rows past the last pixel."""
    for k in range(c1.shape[0]):
        for y in range(14):
            for x in range(14):
                top, bottom = (2 * y) * 32 + 2 * x, (2 * y + 1) * 32 + 2 * x
                out[k, y * 14 + x] = max(max(max(c1[k, top], c1[k, top + 1]),
                                             max(c1[k, bottom], c1[k, bottom + 1])), 0.0)


@kernel
def conv2(p1, w, b, out):
    """p1 (6, 208) planar -> out (16, 144) planar, bias added, "valid"; w (5, 5, 6, 16) HWIO.
    Rows 14 wide as p1's (columns 10..13 and the last 4 never read): one run of 144 per channel."""
    n = CONV2_RUN
    for k in range(w.shape[3]):
        for p in range(n):
            out[k, p] = b[k]
        for c in range(w.shape[2]):
            for r in range(5):
                for s in range(5):
                    wk, shift = w[r, s, c, k], r * 14 + s
                    for p in range(n):  # 144 contiguous outputs: 9 vector FMAs
                        out[k, p] += wk * p1[c, p + shift]


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
    """x (in,), w (in, out), b (out,) -> out (out,) = x @ w + b, ReLU where asked."""
    for j in range(out.shape[0]):
        out[j] = b[j]
    for q in range(x.shape[0]):
        v = x[q]
        for j in range(out.shape[0]):  # a row of the kernel: contiguous, vector FMAs
            out[j] += v * w[q, j]
    if relu:
        for j in range(out.shape[0]):
            out[j] = max(out[j], 0.0)


@kernel
def softmax(z, out):
    """z (10,) logits -> out (10,) probabilities."""
    top = z[0]
    for j in range(z.shape[0]):
        top = max(top, z[j])
    total = 0.0
    for j in range(z.shape[0]):
        out[j] = np.exp(z[j] - top)
        total += out[j]
    for j in range(z.shape[0]):
        out[j] /= total


@kernel
def image(x, w, buf, out):
    """One image x (28, 28, 1) through every layer; w the 10 weight arrays, buf the 8 buffers."""
    w1, b1, w2, b2, f1, g1, f2, g2, f3, g3 = w
    padded, c1, p1, c2, p2, h1, h2, z = buf
    conv1(x, padded, w1, b1, c1)       # (6, 28 * 32)
    pool1(c1, p1)                      # (6, 208)
    conv2(p1, w2, b2, c2)              # (16, 144)
    pool2_flatten(c2, p2)              # (400,)
    dense(p2, f1, g1, h1, True)        # (120,)
    dense(h1, f2, g2, h2, True)        # (84,)
    dense(h2, f3, g3, z, False)        # (10,) logits
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
def pool1_layer(c1, out):
    for i in range(c1.shape[0]):
        pool1(c1[i], out[i])


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
