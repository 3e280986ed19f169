// LeNet-5's forward pass in one C call, image by image: as fast as this file can make it.
//
// The arithmetic of an image is 416,520 multiply-adds (conv1 117,600, conv2 240,000, fc1 48,000,
// fc2 10,080, fc3 840): 26,033 FMAs of 16 floats. The work is laid out so that it stays FMAs:
// - direct convolutions, no im2col (its copies cost more than the FMAs at these channel counts);
// - conv1 runs along the image's rows (32 columns: two 16-float vectors, 28 used), its filters'
//   weights broadcast; conv2 puts its 16 filters in one vector and broadcasts each input pixel;
//   both compute the two rows of a pooling window together, so every input loaded is used for
//   both, and pooling, bias and ReLU happen in registers before the one store;
// - the dense layers run across their outputs (padded to whole vectors: 128, 96, 16), one input
//   broadcast at a time, and skip the inputs that are zero (ReLU's): their time is the streaming
//   of their weights (fc1's 200 KB) from L2, not their FMAs, and a zero input's row is not read.
//   Where the outputs are more vectors than the registers hold (AVX's 16 for fc1's 128 floats)
//   they are streamed in blocks, each kernel packed once block by block (lenet_dense_block).
// Two paths: AVX-512 intrinsics where the compiler targets AVX-512F (-march=native on such a CPU),
// else the same work in GNU C's vector types at the target's width (any CPU; LENET_PORTABLE forces
// it; float64 always takes it). lenet_path() says which one this build is.
//
// Buffers (model.py allocates them once, 64-byte aligned, and passes their addresses in a table,
// in the order of lenet_params()):
//   conv1.kernel (6, 5, 5) [k, r, s]; conv1.bias (6); conv2.kernel (5, 5, 6, 16) HWIO as Keras has
//   it; conv2.bias (16); fc1.kernel (128 / B, 400, B), fc1.bias (128); fc2.kernel (96 / B, 128, B),
//   fc2.bias (96); fc3.kernel (16 / B, 96, B), fc3.bias (16): Keras' (in, out) kernels padded with
//   zeros to whole vectors, in blocks of B = lenet_dense_block(width) outputs (AVX-512: one block);
//   scratch (lenet_scratch_size() elements, zeroed once: the padded image's border stays zero).
// lenet_fused_timed() is the same pass with each stage's time added up (lenet_stages() names them).

#include <math.h>
#include <string.h>
#include <time.h>

#ifdef LENET_DOUBLE
typedef double real;
#define EXP exp
#else
typedef float real;
#define EXP expf
#endif

#if defined(__AVX512F__) && !defined(LENET_PORTABLE) && !defined(LENET_DOUBLE)
#define LENET_AVX512 1
#include <immintrin.h>
#endif

#define INLINE static inline __attribute__((always_inline))

enum { W1, B1, W2, B2, F1, G1, F2, G2, F3, G3, SCRATCH, NPARAMS };
const char *lenet_params(void) {
    return "conv1.kernel conv1.bias conv2.kernel conv2.bias fc1.kernel fc1.bias fc2.kernel fc2.bias "
           "fc3.kernel fc3.bias scratch";
}

// Scratch, one image's activations (elements; every offset a whole number of 64-byte lines):
#define PADW 48  // the padded image (32, 48): rows 2..29, columns 2..29 the image, zeros around
#define P1W 16   // pool1 (6, 14, 16) planar [k, y, x]: columns 14, 15 written, never read
enum {
    S_PAD = 0,                    // (32, 48) padded image
    S_P1 = S_PAD + 32 * PADW,     // (6, 14, 16) pool1
    S_P2 = S_P1 + 6 * 14 * P1W,   // (400,) pool2 in Keras' flatten order (y, x, k)
    S_H1 = S_P2 + 400,            // (128,) fc1
    S_H2 = S_H1 + 128,            // (96,) fc2
    S_Z = S_H2 + 96,              // (16,) fc3's logits
    S_END = S_Z + 16
};
int lenet_scratch_size(void) { return S_END; }

#ifdef LENET_AVX512
const char *lenet_path(void) { return "avx512"; }

// conv1 + bias + ReLU + pool1: pad (32, 48) -> p1 (6, 14, 16). For each pooled row py, all six
// filters at once over the two conv rows 2py, 2py+1, 32 columns each: 24 accumulators [k][dy][half],
// each input vector loaded once and used by every filter, each weight broadcast once for both halves.
// Input row 2py + ir feeds conv row 2py through kernel row ir and 2py + 1 through ir - 1.
// BROADCAST(v, w, i): v = w[i] in every lane, where the code says (i a constant once unrolled). A
// volatile asm: gcc otherwise hoists the 150 broadcasts out of the loop over py and keeps them on
// the stack (24 accumulators leave no registers for them): every FMA then reads its weight from
// there, conv1 twice as long as with each broadcast where it is used (a volatile load and a
// broadcast instead: a sixth longer; measured on a Zen 5 core).
#define BROADCAST(v, w, i) __asm__ volatile("vbroadcastss %c2(%1), %0" : "=v"(v) : "r"(w), "i"(4 * (i)))
static void conv1_pool1(const float *restrict pad, const float *restrict w, const float *restrict b,
                        float *restrict p1) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#pragma GCC unroll 1
    for (int py = 0; py < 14; ++py) {
        __m512 acc[6][2][2];
#pragma GCC unroll 6
        for (int k = 0; k < 6; ++k)
            for (int dy = 0; dy < 2; ++dy) acc[k][dy][0] = acc[k][dy][1] = _mm512_setzero_ps();
#pragma GCC unroll 6
        for (int ir = 0; ir < 6; ++ir) {
            const float *row = pad + (2 * py + ir) * PADW;
#pragma GCC unroll 5
            for (int s = 0; s < 5; ++s) {
                __m512 lo = _mm512_loadu_ps(row + s), hi = _mm512_loadu_ps(row + s + 16);
#pragma GCC unroll 6
                for (int k = 0; k < 6; ++k)
#pragma GCC unroll 2
                    for (int dy = 0; dy < 2; ++dy) {
                        int r = ir - dy;  // kernel row
                        if (r < 0 || r > 4) continue;
                        __m512 wv;  // broadcast where it is used (BROADCAST)
                        BROADCAST(wv, w, (k * 5 + r) * 5 + s);
                        acc[k][dy][0] = _mm512_fmadd_ps(wv, lo, acc[k][dy][0]);
                        acc[k][dy][1] = _mm512_fmadd_ps(wv, hi, acc[k][dy][1]);
                    }
            }
        }
#pragma GCC unroll 6
        for (int k = 0; k < 6; ++k) {
            __m512 lo = _mm512_max_ps(acc[k][0][0], acc[k][1][0]);  // the window's rows: columns 0..15
            __m512 hi = _mm512_max_ps(acc[k][0][1], acc[k][1][1]);  // 16..31 (28..31 never read)
            __m512 m = _mm512_max_ps(_mm512_permutex2var_ps(lo, even, hi),  // its columns 2x, 2x+1
                                     _mm512_permutex2var_ps(lo, odd, hi));
            m = _mm512_max_ps(_mm512_add_ps(m, _mm512_set1_ps(b[k])), _mm512_setzero_ps());
            _mm512_store_ps(p1 + (k * 14 + py) * P1W, m);
        }
    }
}

// One input row of p1 (all 6 channels, kernel columns s = 0..4) into the conv rows it feeds: `top`
// (conv row 2py) through kernel row ra, `bottom` (2py + 1) through kernel row rb; rows < 0 or > 4
// feed nothing (the first and last input rows feed one conv row). Each pixel broadcast once, for both.
INLINE void conv2_row(__m512 top[10], __m512 bottom[10], const float *restrict in, const float *restrict w,
                      int ra, int rb) {
    for (int s = 0; s < 5; ++s)
        for (int c = 0; c < 6; ++c) {
            const float *px = in + c * 14 * P1W + s;  // channel c's row, from column s
            __m512 wa = _mm512_load_ps(w + ((ra * 5 + s) * 6 + c) * 16 * (ra >= 0 && ra <= 4));
            __m512 wb = _mm512_load_ps(w + ((rb * 5 + s) * 6 + c) * 16 * (rb >= 0 && rb <= 4));
#pragma GCC unroll 10
            for (int x = 0; x < 10; ++x) {
                __m512 v = _mm512_set1_ps(px[x]);
                if (ra >= 0 && ra <= 4) top[x] = _mm512_fmadd_ps(wa, v, top[x]);
                if (rb >= 0 && rb <= 4) bottom[x] = _mm512_fmadd_ps(wb, v, bottom[x]);
            }
        }
}

// acc (nv vectors) += x (n_in: a multiple of 16, at most 400) @ w (n_in, 16 nv), skipping the inputs
// that are zero (ReLU's zeros: a third of pool2's, nearly half of fc1's and fc2's outputs), so their
// rows of w are never read: the dense layers' time is their weights' streaming from L2, not their
// FMAs. ROWS rows an iteration (with one row an iteration fc1 took 30% longer on a Zen 5 core:
// fewer of its rows' loads in flight at once), their sums in SUMS sets by row, added at the end
// (the chain of FMAs into one accumulator SUMS times shorter: fc3 has a single vector). The row
// AHEAD rows on is prefetched as each row is summed: fc1 a tenth shorter on a Zen 5 core (its rows
// skip, so the hardware's stream prefetcher runs behind; 4 or 16 rows ahead measured the same).
enum { ROWS = 8, SUMS = 2, AHEAD = 8 };
INLINE void dense_acc(const float *restrict x, int n_in, const float *restrict w, int nv,
                      float *restrict acc) {
    float val[400 + 16 + AHEAD];  // the nonzero inputs, in order, and their rows (16 lanes of slack)
    int row[400 + 16 + AHEAD], m = 0;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int i = 0; i < n_in; i += 16) {
        __m512 v = _mm512_load_ps(x + i);
        __mmask16 nz = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NEQ_UQ);  // NaN kept
        _mm512_storeu_ps(val + m, _mm512_maskz_compress_ps(nz, v));
        _mm512_storeu_si512(row + m, _mm512_maskz_compress_epi32(nz, _mm512_add_epi32(lane, _mm512_set1_epi32(i))));
        m += __builtin_popcount(nz);
    }
    __m512 a[SUMS][8];
#pragma GCC unroll 8
    for (int j = 0; j < nv; ++j) {
        a[0][j] = _mm512_load_ps(acc + 16 * j);
        for (int k = 1; k < SUMS; ++k) a[k][j] = _mm512_setzero_ps();
    }
    // whole groups (zeros add nothing), and rows to prefetch past the last (row 0's: harmless)
    for (int k = m; k < m + ROWS - 1 + AHEAD; ++k) val[k] = 0, row[k] = 0;
    for (int i = 0; i < m; i += ROWS)
#pragma GCC unroll 16
        for (int u = 0; u < ROWS; ++u) {
            __m512 v = _mm512_set1_ps(val[i + u]);
            const float *wr = w + row[i + u] * 16 * nv, *next = w + row[i + u + AHEAD] * 16 * nv;
#pragma GCC unroll 8
            for (int j = 0; j < nv; ++j) _mm_prefetch((const char *)(next + 16 * j), _MM_HINT_T0);
#pragma GCC unroll 8
            for (int j = 0; j < nv; ++j)
                a[u % SUMS][j] = _mm512_fmadd_ps(v, _mm512_load_ps(wr + 16 * j), a[u % SUMS][j]);
        }
#pragma GCC unroll 8
    for (int j = 0; j < nv; ++j) {
        __m512 t = a[0][j];
        for (int k = 1; k < SUMS; ++k) t = _mm512_add_ps(t, a[k][j]);
        _mm512_store_ps(acc + 16 * j, t);
    }
}

// e^z in each lane, z <= 0 (a logit less the largest): z = n ln 2 + r with |r| <= ln 2 / 2, e^r by
// its Taylor series to r^7 / 7! (the next term under 6e-9, a tenth of float's epsilon), times 2^n by
// vscalefps (0 where e^z is below float's range). One vector for fc3's ten outputs, where expf is
// ten calls: fc3's stage a fifth shorter on a Zen 5 core.
INLINE __m512 exp_nonpositive(__m512 z) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(z, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT);
    // z - n ln 2 in two steps: 0.693359375 has few bits, so n times it is exact
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), z);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);  // ln 2 = 0.693359375 - 2.12194440e-4
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    const float c[7] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    for (int i = 0; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c[i]));
    return _mm512_scalef_ps(p, n);
}

// probs (10) = softmax of the logits z (16: 10 and zeros), the max subtracted first, in one vector
INLINE void softmax10(const float *restrict z, float *restrict probs) {
    const __mmask16 ten = 0x3ff;
    __m512 v = _mm512_load_ps(z);
    __m512 top = _mm512_set1_ps(_mm512_mask_reduce_max_ps(ten, v));
    __m512 e = _mm512_maskz_mov_ps(ten, exp_nonpositive(_mm512_sub_ps(v, top)));  // lanes 10..15: 0
    _mm512_mask_storeu_ps(probs, ten, _mm512_div_ps(e, _mm512_set1_ps(_mm512_reduce_add_ps(e))));
}

// conv2 + bias + ReLU + pool2: p1 (6, 14, 16) -> p2 (400). Per pooled row py, conv rows 2py and
// 2py+1, 10 pixels each, the 16 filters in one vector: 20 accumulators; input row 2py + ir feeds
// both (kernel rows ir and ir - 1).
static void conv2_pool2(const float *restrict p1, const float *restrict w, const float *restrict b,
                        float *restrict p2) {
    const __m512 bias = _mm512_load_ps(b);
    for (int py = 0; py < 5; ++py) {
        __m512 top[10], bottom[10];  // conv rows 2py and 2py + 1, (x, 16 filters)
        for (int x = 0; x < 10; ++x) top[x] = bottom[x] = _mm512_setzero_ps();
        const float *in = p1 + 2 * py * P1W;  // input row 2py + ir at in + ir * P1W
        conv2_row(top, bottom, in, w, 0, -1);  // the first input row feeds conv row 2py only
        for (int ir = 1; ir < 5; ++ir) conv2_row(top, bottom, in + ir * P1W, w, ir, ir - 1);
        conv2_row(top, bottom, in + 5 * P1W, w, -1, 4);  // the last, conv row 2py + 1 only
        for (int px = 0; px < 5; ++px) {
            __m512 m = _mm512_max_ps(_mm512_max_ps(top[2 * px], top[2 * px + 1]),
                                     _mm512_max_ps(bottom[2 * px], bottom[2 * px + 1]));
            m = _mm512_max_ps(_mm512_add_ps(m, bias), _mm512_setzero_ps());
            _mm512_store_ps(p2 + (py * 5 + px) * 16, m);  // (y, x, k): Keras' flatten order
        }
    }
}

// The input stage: the image into the padded grid's interior, (32, 48) with two columns and rows of
// zeros around it
INLINE void load_image(const float *restrict image, float *restrict pad) {
    for (int y = 0; y < 28; ++y) memcpy(pad + (y + 2) * PADW + 2, image + y * 28, 28 * sizeof(float));
}

// acc (16 nv) += x (n_in) @ w (n_in, 16 nv): dense_acc, its weights in one block (lenet_dense_block)
INLINE void dense_layer(const float *restrict x, int n_in, const float *restrict w, int width,
                        float *restrict acc) {
    dense_acc(x, n_in, w, width / 16, acc);
}

#else  // the portable path: the same loops in GNU C's vector types, no intrinsics
const char *lenet_path(void) { return "portable"; }

// Vectors as wide as the target's (AVX-512: 64 bytes, AVX: 32, else 16); the compiler lowers them
// to whatever the CPU has. VL lanes of `real`.
#if defined(__AVX512F__)
#define VBYTES 64
#elif defined(__AVX__)
#define VBYTES 32
#else
#define VBYTES 16
#endif
#define VL ((int)(VBYTES / sizeof(real)))
typedef real vec __attribute__((vector_size(VBYTES)));
#ifdef LENET_DOUBLE
typedef long long ivec __attribute__((vector_size(VBYTES)));
#else
typedef int ivec __attribute__((vector_size(VBYTES)));
#endif

INLINE vec load(const real *p) { vec v; memcpy(&v, p, sizeof v); return v; }  // any alignment
INLINE void store(real *p, vec v) { memcpy(p, &v, sizeof v); }
INLINE vec vmax(vec a, vec b) {  // lane by lane a > b ? a : b
    ivec gt = a > b;
    return (vec)((gt & (ivec)a) | (~gt & (ivec)b));
}

// The padded image as two planes by column parity, each (32, PLW): padded column 2x + q at plane
// q's column x (x = 0..15, 16..23 zeros). A pooling window's left conv column 2x with kernel
// column s reads padded column 2x + s, its right one 2x + 1 + s: plane (d + s) & 1, column
// x + ((d + s) >> 1) for d = 0, 1. Whole vectors of pooled columns are contiguous loads, and the
// pool is a lane-wise max of the left and right columns' vectors: no shuffles.
#define PLW 24
#define PLANE (32 * PLW)

INLINE void load_image(const real *restrict image, real *restrict pad) {
    for (int y = 0; y < 28; ++y) {  // padded column i + 2: plane i & 1, column (i >> 1) + 1
        real *even = pad + (y + 2) * PLW + 1, *odd = even + PLANE;
        const real *row = image + y * 28;
        for (int j = 0; j < 14; ++j) {
            even[j] = row[2 * j];
            odd[j] = row[2 * j + 1];
        }
    }
}

// conv1 + bias + ReLU + pool1: the planes -> p1 (6, 14, 16). For each pooled row py, VL pooled
// columns and two filters at a time: the window's 2 conv rows x 2 conv columns x 2 filters, 8
// accumulators; input row 2py + ir feeds conv row 2py through kernel row ir and 2py + 1 through ir - 1.
static void conv1_pool1(const real *restrict pad, const real *restrict w, const real *restrict b,
                        real *restrict p1) {
    for (int py = 0; py < 14; ++py)
        for (int x0 = 0; x0 < 14; x0 += VL)
#pragma GCC unroll 1
            for (int k0 = 0; k0 < 6; k0 += 2) {
                vec acc[2][2][2] = {{{{0}}}};  // [k][dy][dx]
#pragma GCC unroll 6
                for (int ir = 0; ir < 6; ++ir)
#pragma GCC unroll 5
                    for (int s = 0; s < 5; ++s) {
                        vec in[2];
                        for (int d = 0; d < 2; ++d)
                            in[d] = load(pad + ((d + s) & 1) * PLANE + (2 * py + ir) * PLW + x0 + ((d + s) >> 1));
#pragma GCC unroll 2
                        for (int k = 0; k < 2; ++k)
#pragma GCC unroll 2
                            for (int dy = 0; dy < 2; ++dy) {
                                int r = ir - dy;  // kernel row
                                if (r < 0 || r > 4) continue;
                                real wk = w[((k0 + k) * 5 + r) * 5 + s];
                                acc[k][dy][0] += in[0] * wk;
                                acc[k][dy][1] += in[1] * wk;
                            }
                    }
                for (int k = 0; k < 2; ++k) {
                    vec m = vmax(vmax(acc[k][0][0], acc[k][0][1]), vmax(acc[k][1][0], acc[k][1][1]));
                    store(p1 + ((k0 + k) * 14 + py) * P1W + x0, vmax(m + b[k0 + k], (vec){0}));
                }
            }
}

#define NF (16 / VL > 0 ? 16 / VL : 1)  // conv2's 16 filters in vectors (1 where VL > 16: never)

// One input row of p1 (6 channels, kernel columns 0..4) into a 2x2 pooling window of conv2's
// outputs: acc[0] (conv row 2py) through kernel row ra, acc[1] (2py + 1) through rb (-1, 5: none).
// Each (r, s, c)'s 16 filters are NF vectors; each input pixel is broadcast.
INLINE void conv2_window_row(vec acc[2][2][NF], const real *restrict in, const real *restrict w, int ra, int rb) {
    for (int s = 0; s < 5; ++s)
        for (int c = 0; c < 6; ++c) {
            const real *px = in + c * 14 * P1W + s;  // channel c, columns 2px + s, 2px + 1 + s
            const real *wa = w + ((ra * 5 + s) * 6 + c) * 16 * (ra >= 0 && ra <= 4);
            const real *wb = w + ((rb * 5 + s) * 6 + c) * 16 * (rb >= 0 && rb <= 4);
#pragma GCC unroll 4
            for (int f = 0; f < NF; ++f) {
                vec va = load(wa + f * VL), vb = load(wb + f * VL);
#pragma GCC unroll 2
                for (int dx = 0; dx < 2; ++dx) {
                    if (ra >= 0 && ra <= 4) acc[0][dx][f] += va * px[dx];
                    if (rb >= 0 && rb <= 4) acc[1][dx][f] += vb * px[dx];
                }
            }
        }
}

// conv2 + bias + ReLU + pool2: p1 (6, 14, 16) -> p2 (400), one pooling window at a time
static void conv2_pool2(const real *restrict p1, const real *restrict w, const real *restrict b,
                        real *restrict p2) {
    for (int py = 0; py < 5; ++py)
        for (int px = 0; px < 5; ++px) {
            vec acc[2][2][NF] = {0};  // the window: [conv row 2py + dy][column 2px + dx][filters]
            const real *in = p1 + 2 * py * P1W + 2 * px;  // input row 2py + ir at in + ir * P1W
            conv2_window_row(acc, in, w, 0, -1);
            for (int ir = 1; ir < 5; ++ir) conv2_window_row(acc, in + ir * P1W, w, ir, ir - 1);
            conv2_window_row(acc, in + 5 * P1W, w, -1, 4);
            for (int f = 0; f < NF; ++f) {
                vec m = vmax(vmax(acc[0][0][f], acc[0][1][f]), vmax(acc[1][0][f], acc[1][1][f]));
                store(p2 + (py * 5 + px) * 16 + f * VL, vmax(m + load(b + f * VL), (vec){0}));
            }
        }
}

// A dense layer's outputs are streamed in blocks of BV(width) vectors (at most 8: the accumulators
// stay in registers), its kernel packed block by block (lenet_dense_block; layout.pack)
INLINE int dense_vectors(int width) {
    int nv = width / VL, bv = 8;
    while (nv % bv) --bv;
    return bv;
}

// acc (width) += x (n_in) @ w, w (width / B, n_in, B) with B = dense_vectors(width) * VL: the
// nonzero inputs listed first (ReLU's zeros: their rows are never read), then each block of
// outputs summed over them in registers, its weight rows read in order, ROWS rows an iteration (as
// the AVX-512 path: one row an iteration, fc1 took a quarter longer at 16 lanes on a Zen 5 core)
enum { ROWS = 8 };
INLINE void dense_layer(const real *restrict x, int n_in, const real *restrict w, int width,
                        real *restrict acc) {
    real val[400 + ROWS];
    int row[400 + ROWS], m = 0;
    for (int i = 0; i < n_in; ++i) {  // no branch: the zeros are a third to a half, at random
        val[m] = x[i];
        row[m] = i;
        m += x[i] != 0;
    }
    for (int k = m; k < m + ROWS - 1; ++k) val[k] = 0, row[k] = 0;  // whole groups: zeros add nothing
    const int bv = dense_vectors(width), block = bv * VL;
    for (int j0 = 0; j0 < width; j0 += block) {
        const real *wb = w + j0 * n_in;
        vec a[8];
#pragma GCC unroll 8
        for (int j = 0; j < bv; ++j) a[j] = load(acc + j0 + j * VL);
        for (int i = 0; i < m; i += ROWS)
#pragma GCC unroll 8
            for (int u = 0; u < ROWS; ++u) {
                const real *wr = wb + row[i + u] * block, v = val[i + u];
#pragma GCC unroll 8
                for (int j = 0; j < bv; ++j) a[j] += load(wr + j * VL) * v;
            }
#pragma GCC unroll 8
        for (int j = 0; j < bv; ++j) store(acc + j0 + j * VL, a[j]);
    }
}
#endif

// outputs per streamed block of a dense layer `width` wide (128, 96, 16): how layout.pack lays out
// its kernel, (width / block, inputs, block)
int lenet_dense_block(int width) {
#ifdef LENET_AVX512
    return width;
#else
    return dense_vectors(width) * VL;
#endif
}

INLINE void relu_n(real *restrict v, int n) {
    for (int i = 0; i < n; ++i) v[i] = v[i] > 0 ? v[i] : 0;
}

#ifndef LENET_AVX512
// probs (10) = softmax of the logits z (10), the max subtracted first
INLINE void softmax10(const real *restrict z, real *restrict probs) {
    real top = z[0], sum = 0, e[10];
    for (int j = 1; j < 10; ++j) top = z[j] > top ? z[j] : top;
    for (int j = 0; j < 10; ++j) sum += e[j] = EXP(z[j] - top);
    for (int j = 0; j < 10; ++j) probs[j] = e[j] / sum;
}
#endif

const char *lenet_stages(void) { return "input conv1 conv2 fc1 fc2 fc3"; }  // pools in the convs

INLINE long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

// x (n, 28, 28, 1) -> out (n, 10); p: the buffers' table (lenet_params() order); ns: NULL, or each
// stage's nanoseconds added up over the n images (lenet_stages() order)
INLINE void forward(const void *const *p, const real *restrict x, real *restrict out, int n, long long *ns) {
    const real *w1 = p[W1], *b1 = p[B1], *w2 = p[W2], *b2 = p[B2];
    const real *f1 = p[F1], *g1 = p[G1], *f2 = p[F2], *g2 = p[G2], *f3 = p[F3], *g3 = p[G3];
    real *scratch = (real *)p[SCRATCH];
    real *pad = scratch + S_PAD, *p1 = scratch + S_P1, *p2 = scratch + S_P2;
    real *h1 = scratch + S_H1, *h2 = scratch + S_H2, *z = scratch + S_Z;
    long long t0 = ns ? now_ns() : 0;
#define STAGE(i) if (ns) { long long t = now_ns(); ns[i] += t - t0; t0 = t; }
    for (int img = 0; img < n; ++img) {
        load_image(x + img * 784, pad);  // into the padded grid's interior (its border stays zero)
        STAGE(0)
        conv1_pool1(pad, w1, b1, p1);  // (6, 14, 16) planar
        STAGE(1)
        conv2_pool2(p1, w2, b2, p2);   // (400): (5, 5, 16) in Keras' flatten order
        STAGE(2)
        memcpy(h1, g1, 128 * sizeof(real));  // each layer's sums start at its bias
        dense_layer(p2, 400, f1, 128, h1);
        relu_n(h1, 128);  // (128): 120 and zeros
        STAGE(3)
        memcpy(h2, g2, 96 * sizeof(real));
        dense_layer(h1, 128, f2, 96, h2);
        relu_n(h2, 96);  // (96): 84 and zeros
        STAGE(4)
        memcpy(z, g3, 16 * sizeof(real));
        dense_layer(h2, 96, f3, 16, z);  // (16): 10 logits and zeros
        softmax10(z, out + img * 10);
        STAGE(5)
    }
#undef STAGE
}

void lenet_fused(const void *const *p, const real *x, real *out, int n) { forward(p, x, out, n, 0); }

void lenet_fused_timed(const void *const *p, const real *x, real *out, int n, long long *ns) {
    forward(p, x, out, n, ns);
}

// counts (3): the nonzero inputs of fc1 (pool2's 400), fc2 (fc1's 120) and fc3 (fc2's 84) in the
// last image the scratch holds: the weight rows the dense layers read (they skip the others)
void lenet_dense_inputs(const void *const *p, int *counts) {
    const real *scratch = (const real *)p[SCRATCH];
    const int offset[3] = {S_P2, S_H1, S_H2}, size[3] = {400, 120, 84};
    for (int layer = 0; layer < 3; ++layer) {
        counts[layer] = 0;
        for (int i = 0; i < size[layer]; ++i) counts[layer] += scratch[offset[layer] + i] != 0;
    }
}
