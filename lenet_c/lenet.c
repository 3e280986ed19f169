/* LeNet-5 forward pass in C, compiled at run time for this CPU (lenet_c/build.py) and called through
 * ctypes (lenet_c/model.py). float32, one thread. The weights arrive packed by model.py:
 *   w1 (25, 8)        conv1 HWIO (5, 5, 1, 6), its 6 filters padded to 8 lanes     b1 (8,)
 *   w2 (5, 5, 6, 16)  conv2 HWIO as it is: the 16 filters of a tap contiguous       b2 (16,)
 *   f1 (400, 128)     fc1 (400, 120) padded to 128 outputs                          g1 (128,)
 *   f2 (128, 96)      fc2 (120, 84) padded                                          g2 (96,)
 *   f3 (96, 16)       fc3 (84, 10) padded                                           g3 (16,)
 * Activations are channel-last (NHWC), so the innermost loop of every layer runs over 8 or 16
 * contiguous output channels: the compiler turns it into one vector FMA (one 512-bit register holds
 * conv2's 16 filters on an AVX-512 CPU, `-mprefer-vector-width=512`).
 *
 * Two variants, as a student would write them and as fast as they go:
 *   layers: one function per layer over the batch, each writing its whole output (conv, then ReLU and
 *           pooling as separate passes), the shape of the NumPy reference;
 *   fused:  one pass per image: pooling folded into the convolutions (the max of four outputs, then
 *           bias and ReLU), the dense layers and softmax on registers' worth of data, no batch buffers.
 */
#include <math.h>
#include <stddef.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define RESTRICT __restrict__

const char *lenet_path(void) {  /* which vector path the compiler took, for the rows */
#if defined(__AVX512F__)
    return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
    return "avx2";
#else
    return "portable";
#endif
}

/* ---- shared pieces -------------------------------------------------------------------------- */
static void pad_image(const float *RESTRICT x, float *RESTRICT padded) {  /* (28, 28) -> (32, 32) */
    for (int i = 0; i < 32 * 32; i++) padded[i] = 0.0f;
    for (int r = 0; r < 28; r++)
        for (int c = 0; c < 28; c++) padded[(r + 2) * 32 + c + 2] = x[r * 28 + c];
}

static void dense(const float *RESTRICT x, int n_in, const float *RESTRICT w, const float *RESTRICT b,
                  float *RESTRICT out, int n_out, int relu) {  /* out (n_out,) = x (n_in,) @ w + b */
    for (int k = 0; k < n_out; k++) out[k] = b[k];
    for (int i = 0; i < n_in; i++) {
        const float xi = x[i];
        const float *RESTRICT row = w + (size_t)i * n_out;
        for (int k = 0; k < n_out; k++) out[k] += xi * row[k];
    }
    if (relu)
        for (int k = 0; k < n_out; k++) out[k] = out[k] > 0.0f ? out[k] : 0.0f;
}

static void softmax10(const float *RESTRICT z, float *RESTRICT out) {  /* the first 10 of z */
    float m = z[0], s = 0.0f;
    for (int k = 1; k < 10; k++) m = z[k] > m ? z[k] : m;
    for (int k = 0; k < 10; k++) { out[k] = expf(z[k] - m); s += out[k]; }
    for (int k = 0; k < 10; k++) out[k] /= s;
}

/* ---- fused: one image at a time --------------------------------------------------------------- */
#if defined(__AVX512F__)
/* AVX-512: the four outputs of a pooling window in four independent accumulators (four FMA chains in
 * flight), each tap's weights loaded once for all four; conv2's 16 filters are one zmm register. */
static void conv1_pool(const float *RESTRICT padded, const float *RESTRICT w1, const float *RESTRICT b1,
                       float *RESTRICT p1) {  /* padded (32, 32) -> p1 (14, 14, 8) */
    const __m256 bias = _mm256_loadu_ps(b1), zero = _mm256_setzero_ps();
    for (int i = 0; i < 14; i++)
        for (int j = 0; j < 14; j++) {
            __m256 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
            const float *base = padded + (2 * i) * 32 + 2 * j;
            for (int r = 0; r < 5; r++)
                for (int s = 0; s < 5; s++) {
                    const __m256 w = _mm256_loadu_ps(w1 + (r * 5 + s) * 8);
                    const float *p = base + r * 32 + s;
                    a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[0]), w, a0);
                    a1 = _mm256_fmadd_ps(_mm256_set1_ps(p[1]), w, a1);
                    a2 = _mm256_fmadd_ps(_mm256_set1_ps(p[32]), w, a2);
                    a3 = _mm256_fmadd_ps(_mm256_set1_ps(p[33]), w, a3);
                }
            const __m256 best = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
            _mm256_storeu_ps(p1 + (i * 14 + j) * 8, _mm256_max_ps(_mm256_add_ps(best, bias), zero));
        }
}

static void conv2_pool(const float *RESTRICT p1, const float *RESTRICT w2, const float *RESTRICT b2,
                       float *RESTRICT p2) {  /* p1 (14, 14, 8) -> p2 (5, 5, 16) = 400, NHWC flatten */
    const __m512 bias = _mm512_loadu_ps(b2), zero = _mm512_setzero_ps();
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
            const float *base = p1 + ((2 * i) * 14 + 2 * j) * 8;
            for (int r = 0; r < 5; r++)
                for (int s = 0; s < 5; s++) {
                    const float *p = base + (r * 14 + s) * 8;
                    const float *w = w2 + (r * 5 + s) * 6 * 16;
                    for (int c = 0; c < 6; c++) {
                        const __m512 wc = _mm512_loadu_ps(w + c * 16);
                        a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[c]), wc, a0);
                        a1 = _mm512_fmadd_ps(_mm512_set1_ps(p[8 + c]), wc, a1);
                        a2 = _mm512_fmadd_ps(_mm512_set1_ps(p[14 * 8 + c]), wc, a2);
                        a3 = _mm512_fmadd_ps(_mm512_set1_ps(p[15 * 8 + c]), wc, a3);
                    }
                }
            const __m512 best = _mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3));
            _mm512_storeu_ps(p2 + (i * 5 + j) * 16, _mm512_max_ps(_mm512_add_ps(best, bias), zero));
        }
}

static void dense_fused(const float *RESTRICT x, int n_in, const float *RESTRICT w, const float *RESTRICT b,
                        float *RESTRICT out, int n_out, int relu) {  /* n_out a multiple of 16, <= 128 */
    __m512 acc[8];
    const int blocks = n_out / 16;
    for (int q = 0; q < blocks; q++) acc[q] = _mm512_loadu_ps(b + 16 * q);
    for (int i = 0; i < n_in; i++) {
        const __m512 xi = _mm512_set1_ps(x[i]);
        const float *row = w + (size_t)i * n_out;
        for (int q = 0; q < blocks; q++) acc[q] = _mm512_fmadd_ps(xi, _mm512_loadu_ps(row + 16 * q), acc[q]);
    }
    for (int q = 0; q < blocks; q++)
        _mm512_storeu_ps(out + 16 * q, relu ? _mm512_max_ps(acc[q], _mm512_setzero_ps()) : acc[q]);
}
#else
/* the portable path: the same loops, left to the compiler */
static void conv1_pool(const float *RESTRICT padded, const float *RESTRICT w1, const float *RESTRICT b1,
                       float *RESTRICT p1) {  /* padded (32, 32) -> p1 (14, 14, 8) */
    for (int i = 0; i < 14; i++)
        for (int j = 0; j < 14; j++) {
            float best[8];
            for (int k = 0; k < 8; k++) best[k] = -INFINITY;
            for (int d = 0; d < 4; d++) {
                const int y = 2 * i + (d >> 1), x = 2 * j + (d & 1);
                float acc[8] = {0};
                for (int r = 0; r < 5; r++)
                    for (int s = 0; s < 5; s++) {
                        const float v = padded[(y + r) * 32 + x + s];
                        const float *RESTRICT w = w1 + (r * 5 + s) * 8;
                        for (int k = 0; k < 8; k++) acc[k] += v * w[k];
                    }
                for (int k = 0; k < 8; k++) best[k] = acc[k] > best[k] ? acc[k] : best[k];
            }
            float *RESTRICT o = p1 + (i * 14 + j) * 8;
            for (int k = 0; k < 8; k++) { const float v = best[k] + b1[k]; o[k] = v > 0.0f ? v : 0.0f; }
        }
}

static void conv2_pool(const float *RESTRICT p1, const float *RESTRICT w2, const float *RESTRICT b2,
                       float *RESTRICT p2) {  /* p1 (14, 14, 8) -> p2 (5, 5, 16) = 400, NHWC flatten */
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            float best[16];
            for (int k = 0; k < 16; k++) best[k] = -INFINITY;
            for (int d = 0; d < 4; d++) {
                const int y = 2 * i + (d >> 1), x = 2 * j + (d & 1);
                float acc[16] = {0};
                for (int r = 0; r < 5; r++)
                    for (int s = 0; s < 5; s++) {
                        const float *RESTRICT in = p1 + ((y + r) * 14 + x + s) * 8;
                        const float *RESTRICT w = w2 + (r * 5 + s) * 6 * 16;
                        for (int c = 0; c < 6; c++)
                            for (int k = 0; k < 16; k++) acc[k] += in[c] * w[c * 16 + k];
                    }
                for (int k = 0; k < 16; k++) best[k] = acc[k] > best[k] ? acc[k] : best[k];
            }
            float *RESTRICT o = p2 + (i * 5 + j) * 16;
            for (int k = 0; k < 16; k++) { const float v = best[k] + b2[k]; o[k] = v > 0.0f ? v : 0.0f; }
        }
}

#define dense_fused dense
#endif

void lenet_fused(const float *RESTRICT x, int n, const float *RESTRICT w1, const float *RESTRICT b1,
                 const float *RESTRICT w2, const float *RESTRICT b2, const float *RESTRICT f1,
                 const float *RESTRICT g1, const float *RESTRICT f2, const float *RESTRICT g2,
                 const float *RESTRICT f3, const float *RESTRICT g3, float *RESTRICT out) {
    float padded[32 * 32], p1[14 * 14 * 8], p2[400], h1[128], h2[96], z[16];
    for (int m = 0; m < n; m++) {
        pad_image(x + (size_t)m * 784, padded);
        conv1_pool(padded, w1, b1, p1);       /* (14, 14, 8) */
        conv2_pool(p1, w2, b2, p2);           /* (400,) */
        dense_fused(p2, 400, f1, g1, h1, 128, 1);   /* (128,): 120 and zeros */
        dense_fused(h1, 128, f2, g2, h2, 96, 1);    /* (96,): 84 and zeros */
        dense_fused(h2, 96, f3, g3, z, 16, 0);      /* (16,): 10 logits and zeros */
        softmax10(z, out + (size_t)m * 10);   /* (10,) */
    }
}

/* ---- layers: one function per layer over the batch ----------------------------------------- */
/* -O3 unrolls these plain loops completely and runs them four times slower than -O2 does (gcc 12,
 * measured: 161 against about 40 us per image): the layers are compiled as -O2 would. */
#pragma GCC optimize("O2")
void conv1_layer(const float *RESTRICT x, int n, const float *RESTRICT w1, const float *RESTRICT b1,
                 float *RESTRICT c1) {  /* x (n, 28, 28) -> c1 (n, 28, 28, 8), ReLU applied */
    float padded[32 * 32];
    for (int m = 0; m < n; m++) {
        pad_image(x + (size_t)m * 784, padded);
        for (int y = 0; y < 28; y++)
            for (int xx = 0; xx < 28; xx++) {
                float *RESTRICT o = c1 + (((size_t)m * 28 + y) * 28 + xx) * 8;
                for (int k = 0; k < 8; k++) o[k] = b1[k];
                for (int r = 0; r < 5; r++)
                    for (int s = 0; s < 5; s++) {
                        const float v = padded[(y + r) * 32 + xx + s];
                        for (int k = 0; k < 8; k++) o[k] += v * w1[(r * 5 + s) * 8 + k];
                    }
                for (int k = 0; k < 8; k++) o[k] = o[k] > 0.0f ? o[k] : 0.0f;
            }
    }
}

void pool_layer(const float *RESTRICT in, int n, int h, int w, int ch, float *RESTRICT out) {
    /* in (n, h, w, ch) -> out (n, h/2, w/2, ch): max over 2x2 windows */
    for (int m = 0; m < n; m++)
        for (int i = 0; i < h / 2; i++)
            for (int j = 0; j < w / 2; j++)
                for (int k = 0; k < ch; k++) {
                    const float *a = in + (((size_t)m * h + 2 * i) * w + 2 * j) * ch + k;
                    float v = a[0];
                    v = a[ch] > v ? a[ch] : v;
                    v = a[w * ch] > v ? a[w * ch] : v;
                    v = a[w * ch + ch] > v ? a[w * ch + ch] : v;
                    out[(((size_t)m * (h / 2) + i) * (w / 2) + j) * ch + k] = v;
                }
}

void conv2_layer(const float *RESTRICT p1, int n, const float *RESTRICT w2, const float *RESTRICT b2,
                 float *RESTRICT c2) {  /* p1 (n, 14, 14, 8) -> c2 (n, 10, 10, 16), ReLU applied */
    for (int m = 0; m < n; m++)
        for (int y = 0; y < 10; y++)
            for (int xx = 0; xx < 10; xx++) {
                float *RESTRICT o = c2 + (((size_t)m * 10 + y) * 10 + xx) * 16;
                for (int k = 0; k < 16; k++) o[k] = b2[k];
                for (int r = 0; r < 5; r++)
                    for (int s = 0; s < 5; s++)
                        for (int c = 0; c < 6; c++) {
                            const float v = p1[(((size_t)m * 14 + y + r) * 14 + xx + s) * 8 + c];
                            for (int k = 0; k < 16; k++) o[k] += v * w2[((r * 5 + s) * 6 + c) * 16 + k];
                        }
                for (int k = 0; k < 16; k++) o[k] = o[k] > 0.0f ? o[k] : 0.0f;
            }
}

void dense_layer(const float *RESTRICT x, int n, int n_in, const float *RESTRICT w, const float *RESTRICT b,
                 float *RESTRICT out, int n_out, int relu) {  /* (n, n_in) -> (n, n_out) */
    for (int m = 0; m < n; m++) dense(x + (size_t)m * n_in, n_in, w, b, out + (size_t)m * n_out, n_out, relu);
}

void softmax_layer(const float *RESTRICT z, int n, float *RESTRICT out) {  /* (n, 16) -> (n, 10) */
    for (int m = 0; m < n; m++) softmax10(z + (size_t)m * 16, out + (size_t)m * 10);
}
