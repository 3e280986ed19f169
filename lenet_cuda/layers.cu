// LeNet-5, one kernel per layer: what a student writes first.
//
// Layouts (the shared weights file's own, so no weight is converted):
//   activations NHWC, contiguous: (N, H, W, C), channel fastest;
//   conv kernels HWIO (R, S, C, K) as Keras stores them; dense kernels (in, out), row-major;
//   flatten: pool2's (N, 5, 5, 16) buffer *is* the (N, 400) matrix in NHWC order, Keras' order,
//   so fc1's rows are used as they are.
// One thread per output element, 1-D grids of 1-D blocks; a thread past the end returns.
// Templated on the element type T (float, double); the host picks `name<float>` / `name<double>`.
// lenet_relu and lenet_exp come from common.cuh, which kernels.source() puts before this file.

// y (N, HO, WO, K) = relu(x (N, H, W, C) conv w (R, S, C, K) + b (K))
// stride 1, zero padding `pad` on each side: HO = H + 2 pad - R + 1, WO = W + 2 pad - S + 1
template <typename T>
__global__ void conv_bias_relu(const T* __restrict__ x, const T* __restrict__ w,
                               const T* __restrict__ b, T* __restrict__ y,
                               int n, int h, int wd, int c, int k, int r, int s, int pad,
                               int ho, int wo) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // flat index into y
    if (i >= n * ho * wo * k) return;
    int kk = i % k;                                 // i = ((img * HO + oy) * WO + ox) * K + kk
    int t = i / k;
    int ox = t % wo;
    t /= wo;
    int oy = t % ho;
    int img = t / ho;
    T acc = T(0);
    for (int dy = 0; dy < r; ++dy) {
        int iy = oy + dy - pad;
        if (iy < 0 || iy >= h) continue;            // zero padding
        for (int dx = 0; dx < s; ++dx) {
            int ix = ox + dx - pad;
            if (ix < 0 || ix >= wd) continue;
            const T* xp = x + ((img * h + iy) * wd + ix) * c;  // x[img, iy, ix, :]
            const T* wp = w + (dy * s + dx) * c * k + kk;       // w[dy, dx, :, kk], stride K
            for (int cc = 0; cc < c; ++cc) acc += xp[cc] * wp[cc * k];
        }
    }
    y[i] = lenet_relu(acc + b[kk]);
}

// y (N, H/2, W/2, C) = the max of each 2x2 window of x (N, H, W, C), stride 2 (H, W even)
template <typename T>
__global__ void max_pool_2x2(const T* __restrict__ x, T* __restrict__ y, int n, int h, int wd, int c) {
    int ho = h / 2, wo = wd / 2;
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // flat index into y
    if (i >= n * ho * wo * c) return;
    int cc = i % c;
    int t = i / c;
    int ox = t % wo;
    t /= wo;
    int oy = t % ho;
    int img = t / ho;
    const T* p = x + ((img * h + 2 * oy) * wd + 2 * ox) * c + cc;  // x[img, 2 oy, 2 ox, cc]
    T top = p[0] > p[c] ? p[0] : p[c];                               // (2 oy, 2 ox .. 2 ox + 1)
    T bottom = p[wd * c] > p[wd * c + c] ? p[wd * c] : p[wd * c + c]; // (2 oy + 1, ...)
    y[i] = top > bottom ? top : bottom;
}

// y (N, OUT) = act(x (N, IN) @ w (IN, OUT) + b (OUT)); act = ReLU if relu != 0, else identity.
// Threads of a warp take neighbouring outputs j of one image: w's rows are read coalesced.
template <typename T>
__global__ void dense_bias_act(const T* __restrict__ x, const T* __restrict__ w,
                               const T* __restrict__ b, T* __restrict__ y,
                               int n, int fan_in, int fan_out, int relu_on) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // flat index into y: img * OUT + j
    if (i >= n * fan_out) return;
    int j = i % fan_out;
    const T* xp = x + (i / fan_out) * fan_in;       // x[img, :]
    T acc = T(0);
    for (int f = 0; f < fan_in; ++f) acc += xp[f] * w[f * fan_out + j];
    acc += b[j];
    y[i] = relu_on ? lenet_relu(acc) : acc;
}

// y (N, CLASSES) = softmax of each row of x (N, CLASSES): one thread per image, max subtracted
template <typename T>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, int n, int classes) {
    int img = blockIdx.x * blockDim.x + threadIdx.x;
    if (img >= n) return;
    const T* z = x + img * classes;
    T top = z[0];
    for (int j = 1; j < classes; ++j) top = z[j] > top ? z[j] : top;
    T sum = T(0);
    for (int j = 0; j < classes; ++j) sum += lenet_exp(z[j] - top);
    for (int j = 0; j < classes; ++j) y[img * classes + j] = lenet_exp(z[j] - top) / sum;
}
