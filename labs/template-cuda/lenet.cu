// LeNet-5's layers as CUDA kernels: yours. lenet.py launches each with one thread per output
// element (1-D grid of 1-D blocks); a thread whose index is past the end must return.
// Layouts: activations NHWC, conv kernels HWIO (5, 5, C, K), dense kernels (in, out) row-major.
// extern "C": lenet.py finds each kernel by its plain name.

// y (N, HO, WO, K) = relu(x (N, H, W, C) conv w (5, 5, C, K) + b (K)), stride 1, zero padding
// `pad` on each side: HO = H + 2 pad - 4 (conv1: pad 2, "same"; conv2: pad 0, "valid").
extern "C" __global__ void conv_bias_relu(const float* x, const float* w, const float* b, float* y,
                                          int n, int h, int wd, int c, int k, int pad) {
    int ho = h + 2 * pad - 4, wo = wd + 2 * pad - 4;
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // y[i], i = ((img * HO + oy) * WO + ox) * K + kk
    if (i >= n * ho * wo * k) return;
    // TODO: split i into (img, oy, ox, kk); sum x[img, oy + dy - pad, ox + dx - pad, cc] *
    // w[dy, dx, cc, kk] over dy, dx < 5 and cc < C, skipping positions outside the image;
    // add b[kk]; write the ReLU of it.
    y[i] = 0.0f;
}

// y (N, H/2, W/2, C) = the max of each 2x2 window of x (N, H, W, C), stride 2
extern "C" __global__ void max_pool_2x2(const float* x, float* y, int n, int h, int wd, int c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * (h / 2) * (wd / 2) * c) return;
    // TODO
    y[i] = 0.0f;
}

// y (N, OUT) = x (N, IN) @ w (IN, OUT) + b (OUT), then ReLU if relu != 0
extern "C" __global__ void dense_bias_act(const float* x, const float* w, const float* b, float* y,
                                          int n, int fan_in, int fan_out, int relu) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // y[i], i = img * OUT + j
    if (i >= n * fan_out) return;
    // TODO
    y[i] = 0.0f;
}

// y (N, CLASSES) = softmax of each row of x: one thread per image (subtract the row's max first)
extern "C" __global__ void softmax_rows(const float* x, float* y, int n, int classes) {
    int img = blockIdx.x * blockDim.x + threadIdx.x;
    if (img >= n) return;
    // TODO
    for (int j = 0; j < classes; ++j) y[img * classes + j] = 0.0f;
}
