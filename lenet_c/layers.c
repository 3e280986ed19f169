// LeNet-5, one C function per layer: what a student writes first (lenet_cuda/layers.cu's twin,
// the same functions and parameters, a loop over the outputs where CUDA has a thread per output).
//
// Layouts (the shared weights file's own, so no weight is converted):
//   activations NHWC, contiguous: (N, H, W, C), channel fastest;
//   conv kernels HWIO (R, S, C, K) as Keras stores them; dense kernels (in, out), row-major;
//   flatten: pool2's (N, 5, 5, 16) buffer *is* the (N, 400) matrix in NHWC order, Keras' order,
//   so fc1's rows are used as they are.
// The element type is `real`: float, or double where the build defines LENET_DOUBLE.

#include <math.h>

#ifdef LENET_DOUBLE
typedef double real;
#define EXP exp
#else
typedef float real;
#define EXP expf
#endif

static real relu(real v) { return v > 0 ? v : 0; }

// y (N, HO, WO, K) = relu(x (N, H, W, C) conv w (R, S, C, K) + b (K))
// stride 1, zero padding `pad` on each side: HO = H + 2 pad - R + 1, WO = W + 2 pad - S + 1
void conv_bias_relu(const real *restrict x, const real *restrict w, const real *restrict b,
                    real *restrict y, int n, int h, int wd, int c, int k, int r, int s, int pad,
                    int ho, int wo) {
    for (int img = 0; img < n; ++img)
        for (int oy = 0; oy < ho; ++oy)
            for (int ox = 0; ox < wo; ++ox)
                for (int kk = 0; kk < k; ++kk) {
                    real acc = 0;
                    for (int dy = 0; dy < r; ++dy) {
                        int iy = oy + dy - pad;
                        if (iy < 0 || iy >= h) continue;  // zero padding
                        for (int dx = 0; dx < s; ++dx) {
                            int ix = ox + dx - pad;
                            if (ix < 0 || ix >= wd) continue;
                            const real *xp = x + ((img * h + iy) * wd + ix) * c;  // x[img, iy, ix, :]
                            const real *wp = w + (dy * s + dx) * c * k + kk;       // w[dy, dx, :, kk]
                            for (int cc = 0; cc < c; ++cc) acc += xp[cc] * wp[cc * k];
                        }
                    }
                    y[((img * ho + oy) * wo + ox) * k + kk] = relu(acc + b[kk]);
                }
}

// y (N, H/2, W/2, C) = the max of each 2x2 window of x (N, H, W, C), stride 2 (H, W even)
void max_pool_2x2(const real *restrict x, real *restrict y, int n, int h, int wd, int c) {
    int ho = h / 2, wo = wd / 2;
    for (int img = 0; img < n; ++img)
        for (int oy = 0; oy < ho; ++oy)
            for (int ox = 0; ox < wo; ++ox)
                for (int cc = 0; cc < c; ++cc) {
                    const real *p = x + ((img * h + 2 * oy) * wd + 2 * ox) * c + cc;  // x[img, 2oy, 2ox, cc]
                    real top = p[0] > p[c] ? p[0] : p[c];
                    real bottom = p[wd * c] > p[wd * c + c] ? p[wd * c] : p[wd * c + c];
                    y[((img * ho + oy) * wo + ox) * c + cc] = top > bottom ? top : bottom;
                }
}

// y (N, OUT) = act(x (N, IN) @ w (IN, OUT) + b (OUT)); act = ReLU if relu_on != 0, else identity
void dense_bias_act(const real *restrict x, const real *restrict w, const real *restrict b,
                    real *restrict y, int n, int fan_in, int fan_out, int relu_on) {
    for (int img = 0; img < n; ++img)
        for (int j = 0; j < fan_out; ++j) {
            const real *xp = x + img * fan_in;  // x[img, :]
            real acc = 0;
            for (int f = 0; f < fan_in; ++f) acc += xp[f] * w[f * fan_out + j];
            acc += b[j];
            y[img * fan_out + j] = relu_on ? relu(acc) : acc;
        }
}

// y (N, CLASSES) = softmax of each row of x (N, CLASSES), the row's max subtracted first
void softmax_rows(const real *restrict x, real *restrict y, int n, int classes) {
    for (int img = 0; img < n; ++img) {
        const real *z = x + img * classes;
        real top = z[0];
        for (int j = 1; j < classes; ++j) top = z[j] > top ? z[j] : top;
        real sum = 0;
        for (int j = 0; j < classes; ++j) sum += EXP(z[j] - top);
        for (int j = 0; j < classes; ++j) y[img * classes + j] = EXP(z[j] - top) / sum;
    }
}

const char *lenet_path(void) { return "portable"; }  // plain C only: what the compiler makes of it
