// A wrong submission: the correct kernels but for one porting bug, the conv kernel read as
// PyTorch's OIHW (K, C, 5, 5) instead of the weights file's HWIO (5, 5, C, K). It compiles and
// runs; the gate catches it (the answers disagree with the NumPy oracle).

extern "C" __global__ void conv_bias_relu(const float* x, const float* w, const float* b, float* y,
                                          int n, int h, int wd, int c, int k, int pad) {
    int ho = h + 2 * pad - 4, wo = wd + 2 * pad - 4;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * ho * wo * k) return;
    int kk = i % k, ox = (i / k) % wo, oy = (i / (k * wo)) % ho, img = i / (k * wo * ho);
    float acc = 0.0f;
    for (int dy = 0; dy < 5; ++dy) {
        int iy = oy + dy - pad;
        if (iy < 0 || iy >= h) continue;
        for (int dx = 0; dx < 5; ++dx) {
            int ix = ox + dx - pad;
            if (ix < 0 || ix >= wd) continue;
            for (int cc = 0; cc < c; ++cc)
                acc += x[((img * h + iy) * wd + ix) * c + cc] * w[((kk * c + cc) * 5 + dy) * 5 + dx];
        }
    }
    acc += b[kk];
    y[i] = acc > 0.0f ? acc : 0.0f;
}

extern "C" __global__ void max_pool_2x2(const float* x, float* y, int n, int h, int wd, int c) {
    int ho = h / 2, wo = wd / 2;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * ho * wo * c) return;
    int cc = i % c, ox = (i / c) % wo, oy = (i / (c * wo)) % ho, img = i / (c * wo * ho);
    float best = -3.0e38f;
    for (int a = 0; a < 2; ++a)
        for (int bb = 0; bb < 2; ++bb)
            best = fmaxf(best, x[((img * h + 2 * oy + a) * wd + 2 * ox + bb) * c + cc]);
    y[i] = best;
}

extern "C" __global__ void dense_bias_act(const float* x, const float* w, const float* b, float* y,
                                          int n, int fan_in, int fan_out, int relu) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * fan_out) return;
    int j = i % fan_out, img = i / fan_out;
    float acc = 0.0f;
    for (int f = 0; f < fan_in; ++f) acc += x[img * fan_in + f] * w[f * fan_out + j];
    acc += b[j];
    y[i] = (relu && acc < 0.0f) ? 0.0f : acc;
}

extern "C" __global__ void softmax_rows(const float* x, float* y, int n, int classes) {
    int img = blockIdx.x * blockDim.x + threadIdx.x;
    if (img >= n) return;
    float top = x[img * classes];
    for (int j = 1; j < classes; ++j) top = fmaxf(top, x[img * classes + j]);
    float sum = 0.0f;
    for (int j = 0; j < classes; ++j) sum += expf(x[img * classes + j] - top);
    for (int j = 0; j < classes; ++j) y[img * classes + j] = expf(x[img * classes + j] - top) / sum;
}
