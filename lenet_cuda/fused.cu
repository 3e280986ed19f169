// LeNet-5, the whole network for one image in one kernel: block b computes image b, so a
// batch of N is a grid of N blocks of LENET_THREADS threads. Every activation lives in shared
// memory; conv weights are staged there once per block, dense weights are read from global
// memory once per block (coalesced: neighbouring threads read neighbouring outputs' columns).
//
// Layouts (the shared weights file's own, nothing converted): the image (28, 28, 1) and every
// activation HWC (channel fastest); conv kernels HWIO (R, S, C, K); dense kernels (in, out)
// row-major; pool2's (5, 5, 16) HWC buffer is the 400-vector in Keras' NHWC flatten order.
// conv + bias + ReLU + 2x2 max pool are one step: each thread computes the four conv outputs
// of a pool window and keeps the largest (relu(max) = max(relu): ReLU is monotone).
// Templated on the element type T (float, double). Static shared memory per block:
// (784 + 150 + 6 + 2400 + 16 + 1176 + 400 + 120 + 84 + 10 + LENET_THREADS) elements,
// 22,632 bytes in float and 45,264 in double (under the 48 KiB static limit).
// 512 threads: at batch 1 the block is the whole GPU's work, and its longest thread bounds the
// time: conv2's 400 pool windows (4 x 150 multiply-adds each) then take one pass, not two.
// Registers: 512 threads x at most 128 per thread fit an SM's 65,536.

#define LENET_THREADS 512

// out (OUT) = act(in (IN) @ w (IN, OUT) + b (OUT)) for one image, in and out in shared memory.
// Split over the block: PARTS = blockDim / OUT threads per output (4 for fc1, 6 for fc2, 51 for
// fc3); thread t sums inputs part, part + PARTS, ... of output j = t % OUT into partial[t],
// then the first OUT threads add their output's PARTS partial sums and the bias.
template <typename T>
__device__ void dense_block(const T* in, const T* __restrict__ w, const T* __restrict__ b, T* out,
                            T* partial, int fan_in, int fan_out, bool relu_on) {
    int parts = blockDim.x / fan_out;
    int j = threadIdx.x % fan_out, part = threadIdx.x / fan_out;
    if (part < parts) {
        T acc = T(0);
        for (int f = part; f < fan_in; f += parts) acc += in[f] * w[f * fan_out + j];
        partial[part * fan_out + j] = acc;
    }
    __syncthreads();
    if (threadIdx.x < fan_out) {
        T acc = T(0);
        for (int p = 0; p < parts; ++p) acc += partial[p * fan_out + j];
        acc += b[j];
        out[j] = relu_on ? lenet_relu(acc) : acc;
    }
    __syncthreads();
}

// x (N, 28, 28, 1) -> probabilities (N, 10); the weights in Keras layouts (see above).
template <typename T>
__global__ void __launch_bounds__(LENET_THREADS)
lenet_fused(const T* __restrict__ x,
            const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
            const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
            const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
            const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
            const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
            T* __restrict__ probs, int n) {                       // (N, 10)
    __shared__ T img[28 * 28];            // (28, 28, 1)
    __shared__ T s_conv1_w[5 * 5 * 6];     // conv1 kernel (5, 5, 1, 6)
    __shared__ T s_conv1_b[6];
    __shared__ T s_conv2_w[5 * 5 * 6 * 16];  // conv2 kernel (5, 5, 6, 16)
    __shared__ T s_conv2_b[16];
    __shared__ T p1[14 * 14 * 6];         // pool1 (14, 14, 6)
    __shared__ T p2[5 * 5 * 16];          // pool2 (5, 5, 16) = the 400-vector, NHWC order
    __shared__ T h1[120];                 // fc1
    __shared__ T h2[84];                  // fc2
    __shared__ T logits[10];              // fc3
    __shared__ T partial[LENET_THREADS];  // dense_block's partial sums
    int b = blockIdx.x, t = threadIdx.x, nt = blockDim.x;
    if (b >= n) return;                   // the whole block: no thread waits at a barrier alone

    for (int i = t; i < 28 * 28; i += nt) img[i] = x[b * 28 * 28 + i];
    for (int i = t; i < 5 * 5 * 6; i += nt) s_conv1_w[i] = conv1_w[i];
    for (int i = t; i < 5 * 5 * 6 * 16; i += nt) s_conv2_w[i] = conv2_w[i];
    if (t < 6) s_conv1_b[t] = conv1_b[t];
    if (t < 16) s_conv2_b[t] = conv2_b[t];
    __syncthreads();

    // conv1 (5x5, 1 -> 6, padding 2: "same") + bias + ReLU + pool -> p1 (14, 14, 6)
    for (int i = t; i < 14 * 14 * 6; i += nt) {
        int k = i % 6, px = (i / 6) % 14, py = i / (6 * 14);
        T best = T(0);  // every candidate is >= 0 after ReLU
        for (int a = 0; a < 4; ++a) {
            int oy = 2 * py + a / 2, ox = 2 * px + a % 2;   // conv1 output (oy, ox) in the window
            T acc = T(0);
            for (int dy = 0; dy < 5; ++dy) {
                int iy = oy + dy - 2;
                if (iy < 0 || iy >= 28) continue;
                for (int dx = 0; dx < 5; ++dx) {
                    int ix = ox + dx - 2;
                    if (ix < 0 || ix >= 28) continue;
                    acc += img[iy * 28 + ix] * s_conv1_w[(dy * 5 + dx) * 6 + k];
                }
            }
            T v = lenet_relu(acc + s_conv1_b[k]);
            best = v > best ? v : best;
        }
        p1[i] = best;
    }
    __syncthreads();

    // conv2 (5x5, 6 -> 16, no padding) + bias + ReLU + pool -> p2 (5, 5, 16)
    for (int i = t; i < 5 * 5 * 16; i += nt) {
        int k = i % 16, px = (i / 16) % 5, py = i / (16 * 5);
        T best = T(0);
        for (int a = 0; a < 4; ++a) {
            int oy = 2 * py + a / 2, ox = 2 * px + a % 2;   // conv2 output (oy, ox), 0..9
            T acc = T(0);
            for (int dy = 0; dy < 5; ++dy)
                for (int dx = 0; dx < 5; ++dx) {
                    const T* xp = p1 + ((oy + dy) * 14 + (ox + dx)) * 6;  // p1[oy+dy, ox+dx, :]
                    const T* wp = s_conv2_w + (dy * 5 + dx) * 6 * 16 + k;  // conv2_w[dy, dx, :, k]
                    for (int c = 0; c < 6; ++c) acc += xp[c] * wp[c * 16];
                }
            T v = lenet_relu(acc + s_conv2_b[k]);
            best = v > best ? v : best;
        }
        p2[i] = best;
    }
    __syncthreads();

    dense_block(p2, fc1_w, fc1_b, h1, partial, 400, 120, true);      // fc1 + ReLU -> (120)
    dense_block(h1, fc2_w, fc2_b, h2, partial, 120, 84, true);       // fc2 + ReLU -> (84)
    dense_block(h2, fc3_w, fc3_b, logits, partial, 84, 10, false);   // fc3 -> (10)

    if (t < 10) {  // softmax over the 10 logits, max subtracted; each thread writes its class
        T top = logits[0];
        for (int j = 1; j < 10; ++j) top = logits[j] > top ? logits[j] : top;
        T sum = T(0);
        for (int j = 0; j < 10; ++j) sum += lenet_exp(logits[j] - top);
        probs[b * 10 + t] = lenet_exp(logits[t] - top) / sum;
    }
}
