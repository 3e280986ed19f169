// LeNet-5 for throughput, several images at once per SM (batch.cu's successor, kept beside it so
// one GPU run compares both). Block b computes images LENET_BATCH2_IMAGES b .. + 1 (the last block's
// missing image masked: read as zeros, never written), a batch of N a grid of ceil(N / 2) blocks of
// LENET_BATCH2_THREADS threads. At N = 512 that is 256 blocks: two on each of an H100's 132 SMs.
//
// What batch.cu left on the table (issue 73: ~13% of the SMs' FMA peak): one block an SM running its
// 4 images one after another, 16 warps an SM, conv1 and conv2 each a barrier-bounded pass of 392 or
// 400 threads. Here, in float:
//   - both of a block's images are computed at once (img and p1 hold two images; conv1's 784 work
//     items over 512 threads; conv2's 400 threads each compute their (window, channel) for both
//     images, so a weight loaded from shared memory feeds 8 multiply-adds, not 4);
//   - __launch_bounds__(512, 2): two blocks an SM (32 warps), the registers capped at 64 a thread;
//     conv1 and conv2 hold one patch row (6 values an image) at a time, not the 6x6 patch, to fit
//     (no spills on sm_80 or sm_90);
//   - fc1's weights are read once per 2 images (batch.cu: per 4), the price of twice the blocks.
// In double the shared arrays for two images at once pass the 48 KiB static limit, so double runs
// the two images one after another (CONCURRENT 1) in one block an SM; it is here for agreement.
//
// Stages per round of CONCURRENT images (the block's images, float: one round):
//   stage 0  the round's pixels into registers (PIX a thread), the conv weights into shared memory
//   stage 1  conv1 (5x5, 1 -> 6, padding 2) + bias + ReLU + 2x2 pool -> p1 (14, 14, 6) per image:
//            work item (image, pool window, 3 channels), 12 accumulators, one patch row in registers at a time
//   stage 2  conv2 (5x5, 6 -> 16) + bias + ReLU + pool -> p2[:, g]: thread t < 400 the window t / 16,
//            channel t % 16, of every image of the round (4 accumulators an image), sums in batch.cu's
//            order (channel by channel, then dy, dx)
//   stage 3  fc1, fc2, fc3 for both images at once (batch.cu's dense_batch with G = 2), softmax
// Layouts as batch.cu's (the weights file's own). Static shared memory (elements): conv weights and
// biases 2572, p2 400 x 2, work CONCURRENT x 1960: 10,688 bytes + 15,680 = 29,168 in float (two blocks:
// 58 KB of an SM's 228 KB), 42,656 in double.

#define LENET_BATCH2_IMAGES 2
#define LENET_BATCH2_THREADS 512

// Images whose convolutions run at once, and blocks an SM (__launch_bounds__): see above.
template <typename T> struct Batch2Shape {
    static constexpr int CONCURRENT = sizeof(T) == 4 ? 2 : 1;
    static constexpr int BLOCKS_PER_SM = sizeof(T) == 4 ? 2 : 1;
};

// x (N, 28, 28, 1) -> probabilities (N, 10); the weights in Keras layouts.
template <typename T>
__global__ void __launch_bounds__(LENET_BATCH2_THREADS, Batch2Shape<T>::BLOCKS_PER_SM)
lenet_batch2(const T* __restrict__ x,
             const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
             const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
             const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
             const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
             const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
             T* __restrict__ probs, int n) {                                // (N, 10)
    constexpr int G = LENET_BATCH2_IMAGES, NT = LENET_BATCH2_THREADS;
    constexpr int C = Batch2Shape<T>::CONCURRENT;
    constexpr int PIX = (C * 784 + NT - 1) / NT;  // pixels a thread stages a round
    __shared__ T s_conv1_w[5 * 5 * 6];
    __shared__ T s_conv1_b[6];
    __shared__ T s_conv2_w[5 * 5 * 6 * 16];
    __shared__ T s_conv2_b[16];
    __shared__ T p2[400 * G];                     // pool2 (400, G), image fastest; then h1, h2, logits
    __shared__ T work[C * (784 + 1176)];          // img (C, 784) + p1 (C, 1176); then partial sums
    T* img = work;
    T* p1 = work + C * 784;
    T* h1 = p2;
    T* h2 = p2 + 120 * G;
    T* logits = h2 + 84 * G;
    const int t = threadIdx.x;
    const long first = (long)blockIdx.x * G;
    const int count = n - first < G ? int(n - first) : G;  // the block's images (the last: fewer)

    // stage 0: the first round's pixels (an image past count reads as zeros), then the weights
    T pix[PIX];
    {
        const int valid = (count < C ? count : C) * 784;
#pragma unroll
        for (int j = 0; j < PIX; ++j) {
            const int i = t + j * NT;
            pix[j] = i < valid ? x[first * 784 + i] : T(0);
        }
    }
    batch_stage_weights<T, G, NT>(s_conv1_w, s_conv1_b, s_conv2_w, s_conv2_b, p2, count, conv1_w, conv1_b,
                                  conv2_w, conv2_b);  // and a missing image's p2 columns zeroed

    for (int g0 = 0; g0 < count; g0 += C) {       // float: one round (C = G); count is every thread's
#pragma unroll
        for (int j = 0; j < PIX; ++j) {
            const int i = t + j * NT;
            if (i < C * 784) img[i] = pix[j];
        }
        __syncthreads();                          // img whole; every thread past the last round's conv2
        if (C < G && g0 + C < count) {            // double: the next round's loads, in flight meanwhile
            const int rest = count - g0 - C, valid = (rest < C ? rest : C) * 784;
            const T* next = x + (first + g0 + C) * 784;
#pragma unroll
            for (int j = 0; j < PIX; ++j) {
                const int i = t + j * NT;
                pix[j] = i < valid ? next[i] : T(0);
            }
        }

        batch_conv1<T, C, NT>(img, p1, s_conv1_w, s_conv1_b);  // stage 1 -> p1, every image of the round
        __syncthreads();                          // p1 whole
        batch_conv2<T, C, G>(p1, p2, s_conv2_w, s_conv2_b, g0, count);  // stage 2 -> p2[:, g0 ..]
    }
    __syncthreads();                              // p2 whole (missing images: zeros)

    dense_batch<T, G, NT, 400, 120, 4>(p2, fc1_w, fc1_b, h1, work, true);     // fc1 + ReLU -> h1 (120, G)
    dense_batch<T, G, NT, 120, 84, 5>(h1, fc2_w, fc2_b, h2, work, true);      // fc2 + ReLU -> h2 (84, G)
    dense_batch<T, G, NT, 84, 10, 12>(h2, fc3_w, fc3_b, logits, work, false); // fc3 -> logits (10, G)

    softmax_batch<T, G>(logits, probs, first, count);  // thread (image, class)
}
