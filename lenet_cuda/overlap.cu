// LeNet-5 for throughput with the images' copy overlapped by compute. A launch of at most one block
// an SM (the host's grid: min(SMs, tiles)); block b computes tiles b, b + grid, ... of
// OVERLAP_G images each (float 4, double 1: the static shared memory), and while it computes a tile
// its threads' cp.async copies bring the next one into the other half of a double buffer, so the
// bus (or HBM) and the SM work at once: batch2 loads its images, then computes them.
//
//   - the images' address is read from a word in mapped host memory (src[0], the device's address
//     of the caller's registered array or of the staging), so the launch's arguments never change;
//   - probs is mapped host memory; the block that ends last (a device counter, `done`, reset by it)
//     adds 1 to `flag` (mapped host memory), which the host polls: no event, no copy back;
//   - fc1, fc2 and fc3 run over a whole tile at once (dense_batch): each weight is read once per
//     OVERLAP_G images.
//
// Per tile (count images, the last tile fewer; missing images' p2 columns zero):
//   prefetch  the next tile's images (count x 784 values, 16-byte pieces) -> buf[next], one group
//   wait      this tile's group landed (cp_async_wait<1>: the next one stays in flight), barrier
//   per image g: conv1 (batch_conv1, one image) -> p1, barrier, conv2 (batch_conv2) -> p2[:, g], barrier
//   dense     fc1 + ReLU, fc2 + ReLU, fc3 over the tile (partial sums in this tile's buffer, whose
//             images are consumed), softmax -> probs
// Static shared memory (elements): buf 2 x OVERLAP_G x 784, conv weights and biases 2572, p1 1176,
// p2 400 x OVERLAP_G: float 46,480 bytes, double 45,728.

#define LENET_OVERLAP_THREADS 512

template <typename T> struct OverlapShape {
    static constexpr int G = sizeof(T) == 4 ? 4 : 1;  // images a tile
};

// Issue the copies of tile `tile`'s images (if it is one of the batch's) into buf (G x 784), then
// commit a group (empty past the last tile: every thread commits, so every wait counts alike).
template <typename T, int G, int NT>
__device__ __forceinline__ void overlap_prefetch(T* buf, const T* x, long tile, int n) {
    const long first = tile * G;
    const int count = first >= n ? 0 : (n - first < G ? int(n - first) : G);
    constexpr int PER = 16 / sizeof(T);  // values a 16-byte piece
    const int pieces = count * 784 / PER;
    for (int i = threadIdx.x; i < pieces; i += NT) cp_async16(buf + i * PER, x + first * 784 + i * PER);
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
    __shared__ __align__(16) T buf[2 * G * 784];  // two tiles' images; a computed tile's: partial sums
    __shared__ T s_conv1_w[5 * 5 * 6];
    __shared__ T s_conv1_b[6];
    __shared__ T s_conv2_w[5 * 5 * 6 * 16];
    __shared__ T s_conv2_b[16];
    __shared__ T p1[1176];
    __shared__ T p2[400 * G];                    // pool2 (400, G), image fastest; then h1, h2, logits
    T* h1 = p2;
    T* h2 = p2 + 120 * G;
    T* logits = h2 + 84 * G;
    const int t = threadIdx.x;
    const T* x = reinterpret_cast<const T*>(src[0]);  // written before the launch
    const long tiles = (n + G - 1) / G;

    overlap_prefetch<T, G, NT>(buf, x, blockIdx.x, n);  // the first tile's copies, in flight meanwhile
    batch_stage_weights<T, G, NT>(s_conv1_w, s_conv1_b, s_conv2_w, s_conv2_b, p2, G, conv1_w, conv1_b,
                                  conv2_w, conv2_b);
    int k = 0;
    for (long tile = blockIdx.x; tile < tiles; tile += gridDim.x, k ^= 1) {
        overlap_prefetch<T, G, NT>(buf + (k ^ 1) * G * 784, x, tile + gridDim.x, n);
        cp_async_wait<1>();                      // this tile's copies (this thread's) landed
        __syncthreads();                         // every thread's; the last tile's softmax done
        T* img = buf + k * G * 784;
        const long first = tile * G;
        const int count = n - first < G ? int(n - first) : G;
        for (int i = t; i < 400 * G; i += NT)
            if (i % G >= count) p2[i] = T(0);    // a missing image's column: fc1 reads it
        for (int g = 0; g < count; ++g) {
            batch_conv1<T, 1, NT>(img + g * 784, p1, s_conv1_w, s_conv1_b);
            __syncthreads();                     // p1 whole
            batch_conv2<T, 1, G>(p1, p2, s_conv2_w, s_conv2_b, g, count);
            __syncthreads();                     // p2[:, g] whole; p1 free for the next image
        }
        dense_batch<T, G, NT, 400, 120, 4>(p2, fc1_w, fc1_b, h1, img, true);     // fc1 + ReLU -> h1 (120, G)
        dense_batch<T, G, NT, 120, 84, 5>(h1, fc2_w, fc2_b, h2, img, true);      // fc2 + ReLU -> h2 (84, G)
        dense_batch<T, G, NT, 84, 10, 12>(h2, fc3_w, fc3_b, logits, img, false); // fc3 -> logits (10, G)
        softmax_batch<T, G>(logits, probs, first, count);  // thread (image, class)
    }
    cp_async_wait<0>();                          // the empty groups past the last tile

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
