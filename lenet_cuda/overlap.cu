// LeNet-5 for throughput with the images' copy overlapped by compute. A launch of at most one block
// an SM (the host's grid: min(SMs, groups of 4)); block b computes groups b, b + grid, ... of
// OVERLAP_G images each (float 4; double 1, for agreement: its registers), streaming their images one
// at a time through a double buffer: while the convolutions run on image s, its threads' cp.async
// copies bring image s + 1 (the group's next, or the next group's first) into the other half, so
// the bus (or HBM) and the SM work at once (batch2 loads its images, then computes them). At batch
// 512 in float every block has one group: its first image's copy is waited for, the other three's
// land while the one before is computed.
//
//   - the images' address is read from a word in mapped host memory (src[0], the device's address
//     of the caller's registered array or of the staging), so the launch's arguments never change;
//   - probs is mapped host memory; the block that ends last (a device counter, `done`, reset by it)
//     adds 1 to `flag` (mapped host memory), which the host polls: no event, no copy back;
//   - fc1, fc2 and fc3 run over a whole group at once (dense_batch): each weight is read once per
//     OVERLAP_G images.
//
// Per group (count images, the last group fewer; missing images' p2 columns zero), per image g:
//   prefetch  the block's next image (784 values, 16-byte pieces) -> buf[the other half], one group
//   wait      this image's copies landed (cp_async_wait<1>: the next stays in flight), barrier
//   conv1     batch_conv1 (one image) -> p1, barrier; conv2 (batch_conv2) -> p2[:, g], barrier
// then fc1 + ReLU, fc2 + ReLU, fc3 over the group (partial sums in p1, free after the last conv2),
// softmax -> probs.
// Static shared memory (elements): buf 2 x 784, conv weights and biases 2572, p1 max(1176, fc1's
// 4 x 120 x OVERLAP_G partial sums), p2 400 x OVERLAP_G: float 30,640 bytes, double 45,728.

#define LENET_OVERLAP_THREADS 512

template <typename T> struct OverlapShape {
    static constexpr int G = sizeof(T) == 4 ? 4 : 1;  // images a group (double: 2 spill on sm_80)
    static constexpr int P1 = 4 * 120 * G > 1176 ? 4 * 120 * G : 1176;  // p1, then the partial sums
};

// Issue the copies of the image at `from` (784 values; none when null) into buf, then commit a
// group (empty without an image: every thread commits, so every wait counts alike).
template <typename T, int NT>
__device__ __forceinline__ void overlap_prefetch(T* buf, const T* from) {
    constexpr int PER = 16 / sizeof(T);  // values a 16-byte piece
    if (from != nullptr)
        for (int i = threadIdx.x; i < 784 / PER; i += NT) cp_async16(buf + i * PER, from + i * PER);
    cp_async_commit();
}

// src[0]: the address of x (N, 28, 28, 1), 16-byte aligned -> probs (N, 10) in mapped host memory;
// done (1, device, zero between launches), flag (1, mapped host): the launches ended.
template <typename T>
__global__ void __launch_bounds__(LENET_OVERLAP_THREADS, 1)
lenet_overlap(const unsigned long long* __restrict__ src,
              const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
              const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
              const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
              const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
              const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
              T* __restrict__ probs, unsigned* done, unsigned* flag, int n) {
    constexpr int G = OverlapShape<T>::G, NT = LENET_OVERLAP_THREADS;
    __shared__ __align__(16) T buf[2 * 784];     // the image computed now and the next, in flight
    __shared__ T s_conv1_w[5 * 5 * 6];
    __shared__ T s_conv1_b[6];
    __shared__ T s_conv2_w[5 * 5 * 6 * 16];
    __shared__ T s_conv2_b[16];
    __shared__ T p1[OverlapShape<T>::P1];        // pool1 of one image; the dense layers' partial sums
    __shared__ T p2[400 * G];                    // pool2 (400, G), image fastest; then h1, h2, logits
    T* h1 = p2;
    T* h2 = p2 + 120 * G;
    T* logits = h2 + 84 * G;
    const int t = threadIdx.x;
    const T* x = reinterpret_cast<const T*>(src[0]);  // written before the launch
    const long groups = (n + G - 1) / G;

    const long start = (long)blockIdx.x * G;
    overlap_prefetch<T, NT>(buf, start < n ? x + start * 784 : nullptr);  // the first image, in flight meanwhile
    batch_stage_weights<T, G, NT>(s_conv1_w, s_conv1_b, s_conv2_w, s_conv2_b, p2, G, conv1_w, conv1_b,
                                  conv2_w, conv2_b);
    int half = 0;                                // buf's half holding the image computed now
    for (long group = blockIdx.x; group < groups; group += gridDim.x) {
        const long first = group * G;
        const int count = n - first < G ? int(n - first) : G;
#pragma unroll 1
        for (int g = 0; g < count; ++g, half ^= 1) {
            const long next = g + 1 < count ? first + g + 1 : (group + gridDim.x) * G;  // past n: none
            overlap_prefetch<T, NT>(buf + (half ^ 1) * 784, next < n ? x + next * 784 : nullptr);
            cp_async_wait<1>();                  // this image's copies (this thread's) landed
            __syncthreads();                     // every thread's; the last group's softmax done
            if (G > 1 && g == 0 && count < G)    // the last group: a missing image's column, read by fc1
                for (int i = t; i < 400 * G; i += NT)
                    if (i % G >= count) p2[i] = T(0);
            batch_conv1<T, 1, NT>(buf + half * 784, p1, s_conv1_w, s_conv1_b);
            __syncthreads();                     // p1 whole; buf's half read (the next prefetch's)
            batch_conv2<T, 1, G>(p1, p2, s_conv2_w, s_conv2_b, g, count);
            __syncthreads();                     // p2[:, g] whole; p1 free for the next image
        }
        dense_batch<T, G, NT, 400, 120, 4>(p2, fc1_w, fc1_b, h1, p1, true);     // fc1 + ReLU -> h1 (120, G)
        dense_batch<T, G, NT, 120, 84, 5>(h1, fc2_w, fc2_b, h2, p1, true);      // fc2 + ReLU -> h2 (84, G)
        dense_batch<T, G, NT, 84, 10, 12>(h2, fc3_w, fc3_b, logits, p1, false); // fc3 -> logits (10, G)
        softmax_batch<T, G>(logits, probs, first, count);  // thread (image, class)
    }
    cp_async_wait<0>();                          // the empty group past the last image

    // The block's answers seen by the host before its count (each thread fences its own stores);
    // the last block's count resets done for the next launch and tells the host.
    __threadfence_system();
    __syncthreads();
    if (t == 0 && atomicAdd(done, 1u) == gridDim.x - 1) {
        *done = 0;
        __threadfence_system();
        store_volatile(flag, load_acquire_sys(flag) + 1u);
    }
}
