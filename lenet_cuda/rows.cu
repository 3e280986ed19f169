// LeNet-5 for one image on a cluster of 5 blocks split by rows (sm_90): block r computes pool2's row
// r from the image rows it needs, so no block waits for another until fc1. A batch of N is a grid of
// 5N blocks of LENET_ROWS_THREADS threads; cluster c (blocks 5c .. 5c+4) computes image c.
//
// Why (cluster.cu's lenet_cluster): its four cluster barriers an image (each every block of the 8
// waiting for the slowest, ~0.4 µs on the H100) and its image and activations copied into all 8
// blocks' memory. Here each block reads its own image rows from global memory and computes what
// pool2's row r needs, the overlap of its neighbours' rows computed twice (conv1 is the small layer):
//   stage 0  image rows 4r-2 .. 4r+13 into img (zero-padded: 16 x 32), the conv weights into shared
//            memory, fc1's 40 weights a thread into registers (rows 80r .. 80r+79 of fc1_w)
//   stage 1  conv1 + bias + ReLU + pool -> p1 rows 2r .. 2r+5 (504 outputs, 2 a thread: the pool
//            window's 6x6 patch in registers, 4 x 25 multiply-adds)
//   stage 2  conv2 -> pool2 row r: 240 threads, a pool window and channel each a third of the input
//            channels (4 accumulators, 4 x 50 multiply-adds); then 80 threads add the thirds, the
//            bias, ReLU and the pool
//   stage 3  fc1's partial sums over this row's 80 inputs: 240 threads, an output and half the inputs
//            each, the halves added, the 120 sums stored into block 0's fc1_part[r] (distributed
//            shared memory), then one arrival on block 0's mbarrier (release, cluster scope)
//   stage 4  block 0: waits for the barrier's 5 arrivals (acquire), h1 = ReLU(bias + the 5 partial
//            sums), then common.cuh's cluster_head (fc2, fc3, softmax) with fc2's and fc3's weights
//            loaded into registers as it waits (fc1's registers are dead by then)
// One cluster barrier a launch, split: arrive after block 0's mbarrier is initialised, wait before
// the first arrival on it. Blocks 1..4 end after their arrival (nothing writes into their memory);
// block 0 ends after every arrival, so no write reaches a block that has ended.
// Shared memory per block: RowsShared, 5,938 elements and the mbarrier (23,760 bytes in float,
// 47,512 in double).

#define LENET_ROWS_CLUSTER 5
#define LENET_ROWS_THREADS 256

template <typename T>
struct RowsShared {
    T img[16 * 32];             // image rows 4r-2 .. 4r+13, cols -2 .. 29 (zero outside the image)
    T conv1_w[5 * 5 * 6];       // conv1 kernel (5, 5, 1, 6)
    T conv1_b[6];
    T conv2_w[5 * 5 * 6 * 16];  // conv2 kernel (5, 5, 6, 16)
    T conv2_b[16];
    T p1[6 * 14 * 6];           // p1 rows 2r .. 2r+5, (6, 14, 6)
    T c2part[240 * 4];          // stage 2's thirds: (window, channel, third) x the window's 4 outputs
    T p2row[5 * 16];            // pool2's row r, (5, 16): inputs 80r .. 80r+79 of fc1
    T half[240];                // fc1's half sums, (half, output)
    T fc1_part[5 * 120];        // block 0: each block's fc1 partial sums, (block, output)
    T h1[120];                  // block 0: fc1 + ReLU
    T h2[84];                   // block 0: fc2 (cluster_head)
    T partial[LENET_ROWS_THREADS];  // block 0: cluster_head's partial sums
    T logits[10];               // block 0: fc3
    unsigned long long full;    // block 0: the mbarrier of the 5 blocks' fc1_part stores
};

// x (N, 28, 28, 1) -> probs (N, 10)
template <typename T>
__global__ void __cluster_dims__(LENET_ROWS_CLUSTER, 1, 1) __launch_bounds__(LENET_ROWS_THREADS)
lenet_rows(const T* __restrict__ x,
           const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
           const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
           const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
           const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
           const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
           T* __restrict__ probs, int n) {                                // (N, 10)
    RowsShared<T>& s = block_shared<RowsShared<T>>();
    const int t = threadIdx.x, image = blockIdx.x / LENET_ROWS_CLUSTER;
    const unsigned r = cluster_rank();
    if (r == 0 && t == 0) mbar_init(&s.full, LENET_ROWS_CLUSTER);
    cluster_arrive();  // block 0's barrier initialised (release): the others may arrive after their wait

    // stage 0: fc1's weights (registers), the image's rows, the conv weights
    const int j1 = t % 120, half1 = t / 120;  // fc1: output j1, inputs 80r + 40 half1 .. + 39
    T w1[40];
#pragma unroll
    for (int m = 0; m < 40; ++m) w1[m] = t < 240 ? fc1_w[(80 * r + 40 * half1 + m) * 120 + j1] : T(0);
    const T* xi = x + (long)image * 784;
    for (int e = t; e < 16 * 32; e += LENET_ROWS_THREADS) {
        const int y = 4 * int(r) - 2 + e / 32, col = e % 32 - 2;
        s.img[e] = y >= 0 && y < 28 && col >= 0 && col < 28 ? xi[y * 28 + col] : T(0);
    }
    if (t < 150) s.conv1_w[t] = conv1_w[t];
    if (t < 6) s.conv1_b[t] = conv1_b[t];
    for (int i = t; i < 5 * 5 * 6 * 16; i += LENET_ROWS_THREADS) s.conv2_w[i] = conv2_w[i];
    if (t < 16) s.conv2_b[t] = conv2_b[t];
    __syncthreads();

    // stage 1: conv1 (5x5, 1 -> 6, padding 2) + bias + ReLU + 2x2 pool -> p1 local rows 0..5
    for (int i = t; i < 6 * 14 * 6; i += LENET_ROWS_THREADS) {
        const int k = i % 6, px = (i / 6) % 14, row = i / 84;  // p1[2r + row, px, k]
        // its patch: img local rows 2 row .. + 5 (image rows 4r + 2 row - 2 ..), padded cols 2px .. + 5
        s.p1[i] = conv1_pool(s.img, 2 * row, 2 * px, s.conv1_w, s.conv1_b, k);
    }
    __syncthreads();

    // stage 2: conv2 (5x5, 6 -> 16, valid) over input channels 2 third, 2 third + 1 of pool2 row r's
    // window px, channel k: conv2 rows 2r, 2r + 1 (p1 local rows a + dy), cols 2px, 2px + 1
    if (t < 240) {
        const int third = t % 3, k = (t / 3) % 16, px = t / 48;
        T acc[4] = {T(0), T(0), T(0), T(0)};  // the window's outputs (a, b)
#pragma unroll
        for (int dy = 0; dy < 5; ++dy)
#pragma unroll
            for (int dx = 0; dx < 5; ++dx)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int ch = 2 * third + c;
                    const T w = s.conv2_w[((dy * 5 + dx) * 6 + ch) * 16 + k];  // conv2_w[dy, dx, ch, k]
#pragma unroll
                    for (int a = 0; a < 4; ++a)
                        acc[a] += s.p1[((a / 2 + dy) * 14 + 2 * px + a % 2 + dx) * 6 + ch] * w;
                }
#pragma unroll
        for (int a = 0; a < 4; ++a) s.c2part[t * 4 + a] = acc[a];
    }
    __syncthreads();
    if (t < 80) {  // thirds added, + bias + ReLU + pool -> p2row[px, k]
        const int k = t % 16, px = t / 16, q = (px * 16 + k) * 3;
        T v[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) v[a] = s.c2part[q * 4 + a] + s.c2part[(q + 1) * 4 + a] + s.c2part[(q + 2) * 4 + a];
        s.p2row[px * 16 + k] = pool_bias_relu(v[0], v[1], v[2], v[3], s.conv2_b[k]);
    }
    __syncthreads();

    // stage 3: fc1's partial sums over inputs 80r .. 80r + 79 -> block 0's fc1_part[r]
    if (t < 240) {
        T acc[4] = {T(0), T(0), T(0), T(0)};  // 4 chains of 10
#pragma unroll
        for (int m = 0; m < 40; ++m) acc[m % 4] += s.p2row[40 * half1 + m] * w1[m];
        s.half[t] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    DenseRegisters<T> d;  // block 0's fc2 and fc3 weights: their loads in flight while it waits
    if (r == 0) load_head(d, r, t, fc2_w, fc2_b, fc3_w, fc3_b);
    __syncthreads();
    cluster_wait();  // block 0's barrier is initialised: arrivals may come
    if (t < 120) cluster_peer(s.fc1_part, 0)[120 * r + t] = s.half[t] + s.half[120 + t];
    __syncthreads();  // every thread's store before the block's one arrival (release, cluster scope)
    if (t == 0) mbar_arrive_cluster(&s.full, 0);
    if (r != 0) return;

    // stage 4, block 0: the 5 partial sums, + bias + ReLU -> h1, then fc2, fc3, softmax
    const T b1 = t < 120 ? fc1_b[t] : T(0);
    while (!mbar_try_wait(&s.full, 0)) {
    }
    if (t < 120) {
        const T* part = s.fc1_part + t;
        s.h1[t] = lenet_relu(b1 + ((part[0] + part[120]) + (part[240] + part[360]) + part[480]));
    }
    __syncthreads();
    const T prob = cluster_head(s, t, d);
    if (t < 10) probs[image * 10 + t] = prob;
}
