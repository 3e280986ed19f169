// LeNet-5 for throughput: block b computes images LENET_BATCH_IMAGES b .. + LENET_BATCH_IMAGES - 1
// (the last block's missing images are masked: never read, never written), so a batch of N is a
// grid of ceil(N / LENET_BATCH_IMAGES) blocks of LENET_BATCH_THREADS threads. At N = 512 that is
// 128 blocks, one wave on an H100's 132 SMs, each block 16 warps.
//
// Why not fused.cu (one block per image) or cluster.cu (8 blocks per image): both stage the conv
// weights and fetch fc1's 192 KB of weights once per image, and their threads do one multiply-add
// per shared-memory load or two. Here a block stages the conv weights once for its images, reads
// fc1's weights from global memory (L2) once for all of them, and every thread keeps several
// accumulators so one load feeds several multiply-adds:
//   stage 0  conv weights and biases into shared memory; image 0's pixels into registers (two a
//            thread); the p2 columns of missing images zeroed
//   per image g (the block's images one after another, conv weights reused):
//     store the pixels held in registers into img; barrier; issue the loads of image g + 1's
//     pixels (they cross the bus while image g's convolutions run: the kernel reads mapped host
//     memory in the batch variant, so the input's transfer overlaps the compute)
//     stage 1  conv1 (5x5, 1 -> 6, padding 2) + bias + ReLU + 2x2 pool -> p1 (14, 14, 6): 392
//              threads, a pool window and 3 channels each: the window's 6x6 input patch in
//              registers (36 loads), 12 accumulators, 300 multiply-adds; barrier
//     stage 2  conv2 (5x5, 6 -> 16) + bias + ReLU + pool -> p2[:, g]: 400 threads, a pool window
//              and one channel each: per input channel the 6x6 patch (36 loads, the same for the
//              16 threads of a window: broadcasts) and 25 weights, 4 accumulators (the window's
//              outputs), 600 multiply-adds. No barrier after it: the next image's first barrier
//              orders conv2's reads of p1 before conv1 writes it again
//   stage 3  fc1 (400 -> 120) + ReLU for every image at once: 480 threads, 4 per output, each a
//            strided quarter of the inputs; a weight is loaded once (coalesced over outputs) and
//            multiplied by every image's input (p2 is (400, LENET_BATCH_IMAGES), image fastest);
//            the 4 partial sums then the bias by one thread per (output, image)
//   stage 4  fc2 (120 -> 84) + ReLU: 5 threads an output; fc3 (84 -> 10): 12 threads an output,
//            the same way; softmax, one thread per (image, class)
//
// Layouts as fused.cu (the weights file's own): image and activations HWC, conv kernels HWIO
// (R, S, C, K), dense kernels (in, out) row-major, pool2's (5, 5, 16) HWC = the 400-vector in
// Keras' flatten order. Sums in the others' order: conv1's taps as fused.cu's, conv2 channel by
// channel (fused.cu: tap by tap), dense layers strided parts then the bias.
// Static shared memory per block (elements): conv weights and biases 150 + 6 + 2400 + 16, p2
// 400 x LENET_BATCH_IMAGES, and `work` (1960) that is img (784) + p1 (1176) while the convolutions
// run and the dense layers' partial sums after; h1, h2 and the logits reuse p2 once fc1 has read
// it. 6132 elements: 24,528 bytes in float and 49,056 in double, just under the 48 KiB static
// limit, which is what bounds LENET_BATCH_IMAGES at 4 (double) and why nothing else is staged.
// 512 threads x at most 128 registers fill an SM's 65,536. __launch_bounds__ says one block an SM
// (a batch of 512 is one wave of one block an SM): without the 1, ptxas (sm_90) squeezes float
// into 40 registers for three blocks an SM and spills; with 2, double spills. ptxas: 87 registers
// in float and 128 in double, no spills.

#define LENET_BATCH_IMAGES 4
#define LENET_BATCH_THREADS 512

// x (N, 28, 28, 1) -> probabilities (N, 10); the weights in Keras layouts (see above).
template <typename T>
__global__ void __launch_bounds__(LENET_BATCH_THREADS, 1)
lenet_batch(const T* __restrict__ x,
            const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
            const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
            const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
            const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
            const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
            T* __restrict__ probs, int n) {                       // (N, 10)
    constexpr int G = LENET_BATCH_IMAGES, NT = LENET_BATCH_THREADS;
    __shared__ T s_conv1_w[5 * 5 * 6];            // conv1 kernel (5, 5, 1, 6)
    __shared__ T s_conv1_b[6];
    __shared__ T s_conv2_w[5 * 5 * 6 * 16];       // conv2 kernel (5, 5, 6, 16)
    __shared__ T s_conv2_b[16];
    __shared__ T p2[400 * LENET_BATCH_IMAGES];    // pool2 (400, G), image fastest; then h1, h2, logits
    __shared__ T work[784 + 1176];                // img (28, 28, 1) + p1 (14, 14, 6); then partial sums
    T* img = work;
    T* p1 = work + 784;
    T* h1 = p2;                // (120, G), written once fc1 has read p2
    T* h2 = p2 + 120 * G;      // (84, G)
    T* logits = h2 + 84 * G;   // (10, G)
    const int t = threadIdx.x;
    const long first = (long)blockIdx.x * G;      // the block's first image
    const int count = n - first < G ? int(n - first) : G;  // its images (the last block: fewer)

    // stage 0: image 0's pixels into registers first (the longest wait), then the conv weights
    T pix0 = x[first * 784 + t];                  // t < 512 < 784
    T pix1 = t + NT < 784 ? x[first * 784 + t + NT] : T(0);
    batch_stage_weights<T, G, NT>(s_conv1_w, s_conv1_b, s_conv2_w, s_conv2_b, p2, count, conv1_w, conv1_b,
                                  conv2_w, conv2_b);  // and a missing image's p2 columns zeroed

    for (int g = 0; g < count; ++g) {             // count is the same for every thread
        img[t] = pix0;
        if (t + NT < 784) img[t + NT] = pix1;
        __syncthreads();                          // img whole; every thread past image g - 1's conv2
        if (g + 1 < count) {                      // the next image's loads, in flight during the convs
            const T* next = x + (first + g + 1) * 784;
            pix0 = next[t];
            if (t + NT < 784) pix1 = next[t + NT];
        }

        // stage 1: conv1 + bias + ReLU + 2x2 pool; thread t < 392: window t / 2, channels k0 .. k0+2
        if (t < 392) {
            const int win = t / 2, k0 = 3 * (t % 2), py = win / 14, px = win % 14;
            T patch[6][6];                        // img rows 2py-2 .. 2py+3, cols 2px-2 .. 2px+3
#pragma unroll
            for (int r = 0; r < 6; ++r)
#pragma unroll
                for (int c = 0; c < 6; ++c) {
                    const int iy = 2 * py - 2 + r, ix = 2 * px - 2 + c;
                    patch[r][c] = iy >= 0 && iy < 28 && ix >= 0 && ix < 28 ? img[iy * 28 + ix] : T(0);
                }
            T acc[3][4];                          // channel k0 + k, window position a
#pragma unroll
            for (int k = 0; k < 3; ++k)
#pragma unroll
                for (int a = 0; a < 4; ++a) acc[k][a] = T(0);
#pragma unroll
            for (int dy = 0; dy < 5; ++dy)
#pragma unroll
                for (int dx = 0; dx < 5; ++dx)
#pragma unroll
                    for (int k = 0; k < 3; ++k) {
                        const T w = s_conv1_w[(dy * 5 + dx) * 6 + k0 + k];
#pragma unroll
                        for (int a = 0; a < 4; ++a) acc[k][a] += patch[dy + a / 2][dx + a % 2] * w;
                    }
#pragma unroll
            for (int k = 0; k < 3; ++k)  // relu(max + b) = max(relu(. + b)): rounding and ReLU are monotone
                p1[win * 6 + k0 + k] = pool_bias_relu(acc[k][0], acc[k][1], acc[k][2], acc[k][3], s_conv1_b[k0 + k]);
        }
        __syncthreads();                          // p1 whole

        // stage 2: conv2 + bias + ReLU + 2x2 pool; thread t < 400: window t / 16, channel t % 16
        if (t < 400) {
            const int k = t % 16, win = t / 16, py = win / 5, px = win % 5;
            T acc[4] = {T(0), T(0), T(0), T(0)};  // the window's four conv2 outputs
#pragma unroll 1
            for (int c = 0; c < 6; ++c) {
                T patch[6][6];                    // p1[2py .. 2py+5, 2px .. 2px+5, c]
#pragma unroll
                for (int r = 0; r < 6; ++r)
#pragma unroll
                    for (int q = 0; q < 6; ++q) patch[r][q] = p1[((2 * py + r) * 14 + 2 * px + q) * 6 + c];
#pragma unroll
                for (int dy = 0; dy < 5; ++dy)
#pragma unroll
                    for (int dx = 0; dx < 5; ++dx) {
                        const T w = s_conv2_w[((dy * 5 + dx) * 6 + c) * 16 + k];  // conv2_w[dy, dx, c, k]
#pragma unroll
                        for (int a = 0; a < 4; ++a) acc[a] += patch[dy + a / 2][dx + a % 2] * w;
                    }
            }
            p2[((py * 5 + px) * 16 + k) * G + g] =
                pool_bias_relu(acc[0], acc[1], acc[2], acc[3], s_conv2_b[k]);
        }
    }
    __syncthreads();                              // p2 whole (missing images: zeros)

    // stages 3 and 4: the dense layers, every image at once (partial sums in work)
    dense_batch<T, G, NT, 400, 120, 4>(p2, fc1_w, fc1_b, h1, work, true);   // fc1 + ReLU -> h1 (120, G)
    dense_batch<T, G, NT, 120, 84, 5>(h1, fc2_w, fc2_b, h2, work, true);    // fc2 + ReLU -> h2 (84, G)
    dense_batch<T, G, NT, 84, 10, 12>(h2, fc3_w, fc3_b, logits, work, false);  // fc3 -> logits (10, G)

    softmax_batch<T, G>(logits, probs, first, count);  // thread (image, class)
}
