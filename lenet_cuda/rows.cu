// LeNet-5 for one image on a cluster of 5 blocks split by rows (sm_90): block r computes pool2's row
// r from the image rows it needs, so no block waits for another until fc1. lenet_rows: a batch of N
// is a grid of 5N blocks of LENET_ROWS_THREADS threads, cluster c (blocks 5c .. 5c+4) image c.
// lenet_resident_rows: one cluster resident between calls on resident.cu's wire (LL pairs).
//
// Why (cluster.cu's lenet_cluster): its four cluster barriers an image (each every block of the 8
// waiting for the slowest, ~0.4 µs on the H100) and its image and activations copied into all 8
// blocks' memory. Here each block reads its own image rows and computes what pool2's row r needs,
// its neighbours' overlapping p1 rows computed again (conv1 is the small layer), in rows_stages:
//   stage 0  image rows 4r-2 .. 4r+13 into img (zero-padded: 16 x 32), the conv weights into shared
//            memory, fc1's 40 weights a thread into registers (rows 80r .. 80r+79 of fc1_w)
//   stage 1  conv1 + bias + ReLU + pool -> p1 rows 2r .. 2r+5 (504 outputs, 2 a thread)
//   stage 2  conv2 -> pool2 row r: 240 threads, a pool window and channel each a third of the input
//            channels (4 accumulators, 4 x 50 multiply-adds); then 80 threads add the thirds, the
//            bias, ReLU and the pool
//   stage 3  fc1's partial sums over this row's 80 inputs: 240 threads, an output and half the inputs
//            each; the halves added and stored into block 0's fc1_part (distributed shared memory),
//            then one arrival on block 0's mbarrier `full` (release, cluster scope)
//   stage 4  block 0: waits for the barrier's 5 arrivals (acquire), h1 = ReLU(bias + the 5 partial
//            sums), then common.cuh's cluster_head (fc2, fc3, softmax), fc2's and fc3's weights
//            loaded into registers while it waits (fc1's registers are dead by then)
// Shared memory per block: RowsShared, 5,828 elements and 4 mbarriers and 3 words (23,360 bytes in
// float, 46,672 in double).
//
// lenet_rows: one cluster barrier a launch, split: arrive once block 0's barriers are initialised,
// wait before the first arrival on them. Blocks 1..4 end after their arrival (nothing writes into
// their memory); block 0 ends after every arrival.
//
// lenet_resident_rows: no cluster barrier an image. Rounds (one an image, every block in every
// round, in order) alternate between two slots of fc1_part, each with its `full` barrier in block 0
// (5 arrivals) and an `empty` barrier in every block (block 0's one arrival once it has read the
// slot): a block waits for `empty` before it writes a slot it wrote two rounds before. A block whose
// pixels do not come within idle_ns (or that reads the quit word) votes instead of computing: it
// sets its bit in block 0's votes for the slot, stores the quit word (so every block stops polling
// soon), arrives, waits for block 0 to read the round, and ends. Block 0 answers a round only when
// nobody voted; after a vote it arrives for the blocks that have ended and ends itself once all four
// others have (no block ends while another may write into it or arrive on its barriers). The host
// then launches it again for the call (resident.py), as resident.cu's.

#define LENET_ROWS_CLUSTER 5
#define LENET_ROWS_THREADS 256
#define ROWS_PER_THREAD 2  // a block's image rows: 16 x 32 padded pixels, two a thread
static_assert(ROWS_PER_THREAD * LENET_ROWS_THREADS == 16 * 32, "every padded pixel of a block's rows, once");
static_assert(LENET_ROWS_THREADS % 32 == 0, "a thread's second pixel: the same column, 8 rows below");

template <typename T>
struct HeadShared {                 // cluster_head's arrays (block 0)
    T partial[LENET_ROWS_THREADS];
    T h1[120];
    T h2[84];
    T logits[10];
};

template <typename T>
struct RowsShared {
    T img[16 * 32];             // image rows 4r-2 .. 4r+13, cols -2 .. 29 (zero outside the image)
    T conv1_w[5 * 5 * 6];       // conv1 kernel (5, 5, 1, 6)
    T conv1_b[6];
    T conv2_w[5 * 5 * 6 * 16];  // conv2 kernel (5, 5, 6, 16)
    T conv2_b[16];
    T p1[6 * 14 * 6];           // p1 rows 2r .. 2r+5, (6, 14, 6)
    T p2row[5 * 16];            // pool2's row r, (5, 16): inputs 80r .. 80r+79 of fc1
    T fc1_part[2 * 5 * 120];    // block 0: each block's fc1 partial sums, (slot, block, output)
    union {                     // one stage's work at a time:
        T c2part[240 * 4];      //   stage 2's thirds: (window, channel, third) x the window's 4 outputs
        T half[240];            //   stage 3's half sums, (half, output)
        HeadShared<T> head;     //   stage 4 (block 0)
    } work;
    unsigned long long full[2];   // block 0: a slot's 5 arrivals
    unsigned long long empty[2];  // every block: block 0 has read the slot this block wrote
    unsigned votes[2];            // block 0: the blocks that voted in a slot's round (bits)
    unsigned vote;                // this block's pollers: the round (+ 1) they gave up in
};

// Stages 1 to 3 for pool2's row r of the image in s.img; every thread of the block calls. Leaves
// the 120 partial sums of fc1 as work.half[t] + work.half[120 + t] (t < 120).
template <typename T>
__device__ __forceinline__ void rows_stages(RowsShared<T>& s, int t, const T (&w1)[40], int half1) {
    // stage 1: conv1 (5x5, 1 -> 6, padding 2) + bias + ReLU + 2x2 pool -> p1 local rows 0..5
    for (int i = t; i < 6 * 14 * 6; i += LENET_ROWS_THREADS) {
        const int k = i % 6, px = (i / 6) % 14, row = i / 84;  // p1[2r + row, px, k]
        // its patch: img local rows 2 row .. + 5 (image rows 4r + 2 row - 2 ..), padded cols 2px .. + 5
        s.p1[i] = conv1_pool(s.img, 2 * row, 2 * px, s.conv1_w, s.conv1_b, k);
    }
    __syncthreads();

    // stage 2: conv2 (5x5, 6 -> 16, valid) over input channels 2 third, 2 third + 1 of pool2 row r's
    // window px, channel k: conv2 rows 2r, 2r + 1 (p1 local rows a / 2 + dy), cols 2px, 2px + 1
    if (t < 240) {
        const int third = t % 3, k = (t / 3) % 16, px = t / 48;
        T acc[4] = {T(0), T(0), T(0), T(0)};  // the window's outputs
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
        for (int a = 0; a < 4; ++a) s.work.c2part[t * 4 + a] = acc[a];
    }
    __syncthreads();
    if (t < 80) {  // thirds added, + bias + ReLU + pool -> p2row[px, k]
        const int k = t % 16, px = t / 16, q = (px * 16 + k) * 3;
        const T* c = s.work.c2part;
        T v[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) v[a] = c[q * 4 + a] + c[(q + 1) * 4 + a] + c[(q + 2) * 4 + a];
        s.p2row[px * 16 + k] = pool_bias_relu(v[0], v[1], v[2], v[3], s.conv2_b[k]);
    }
    __syncthreads();

    // stage 3: fc1's half sums over inputs 80r + 40 half1 .. + 39 of output t % 120
    if (t < 240) {
        T acc[4] = {T(0), T(0), T(0), T(0)};  // 4 chains of 10
#pragma unroll
        for (int m = 0; m < 40; ++m) acc[m % 4] += s.p2row[40 * half1 + m] * w1[m];
        s.work.half[t] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    __syncthreads();
}

// Once a launch: fc1's weights for thread t (registers), the conv weights, the image's zero border
// (every position; the rows inside the image are written per image).
template <typename T>
__device__ __forceinline__ void rows_load(RowsShared<T>& s, unsigned r, int t, T (&w1)[40],
                                          const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,
                                          const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,
                                          const T* __restrict__ fc1_w) {
    const int j1 = t % 120, half1 = t / 120;  // fc1: output j1, inputs 80r + 40 half1 .. + 39
#pragma unroll
    for (int m = 0; m < 40; ++m) w1[m] = t < 240 ? fc1_w[(80 * r + 40 * half1 + m) * 120 + j1] : T(0);
    for (int e = t; e < 16 * 32; e += LENET_ROWS_THREADS) s.img[e] = T(0);
    if (t < 150) s.conv1_w[t] = conv1_w[t];
    if (t < 6) s.conv1_b[t] = conv1_b[t];
    for (int i = t; i < 5 * 5 * 6 * 16; i += LENET_ROWS_THREADS) s.conv2_w[i] = conv2_w[i];
    if (t < 16) s.conv2_b[t] = conv2_b[t];
}

// The image position of padded img element e of block r: image row y, column col (inside or not).
__device__ __forceinline__ bool rows_pixel(unsigned r, int e, int& y, int& col) {
    y = 4 * int(r) - 2 + e / 32;
    col = e % 32 - 2;
    return y >= 0 && y < 28 && col >= 0 && col < 28;
}

// Block 0, every thread: h1 from slot `slot`'s 5 partial sums (+ bias, ReLU), then fc2, fc3 and
// softmax; class t's probability to thread t < 10.
template <typename T>
__device__ __forceinline__ T rows_head(RowsShared<T>& s, int t, int slot, T b1, const DenseRegisters<T>& d) {
    if (t < 120) {
        const T* part = s.fc1_part + 600 * slot + t;
        s.work.head.h1[t] = lenet_relu(b1 + ((part[0] + part[120]) + (part[240] + part[360]) + part[480]));
    }
    __syncthreads();
    STAMP(6);
    return cluster_head(s.work.head, t, d);
}

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
    if (r == 0 && t == 0) mbar_init(&s.full[0], LENET_ROWS_CLUSTER);
    cluster_arrive();  // block 0's barrier initialised (release): the others may arrive after their wait

    T w1[40];
    rows_load(s, r, t, w1, conv1_w, conv1_b, conv2_w, conv2_b, fc1_w);
    const T* xi = x + (long)image * 784;
    for (int e = t; e < 16 * 32; e += LENET_ROWS_THREADS) {
        int y, col;
        if (rows_pixel(r, e, y, col)) s.img[e] = xi[y * 28 + col];
    }
    __syncthreads();
    rows_stages(s, t, w1, t / 120);
    DenseRegisters<T> d;  // block 0's fc2 and fc3 weights: their loads in flight while it waits
    if (r == 0) load_head(d, r, t, fc2_w, fc2_b, fc3_w, fc3_b);
    cluster_wait();  // block 0's barrier is initialised: arrivals may come
    if (t < 120) cluster_peer(s.fc1_part, 0)[120 * r + t] = s.work.half[t] + s.work.half[120 + t];
    __syncthreads();  // every thread's store before the block's one arrival (release, cluster scope)
    if (t == 0) mbar_arrive_cluster(&s.full[0], 0);
    if (r != 0) return;

    const T b1 = t < 120 ? fc1_b[t] : T(0);
    while (!mbar_try_wait(&s.full[0], 0)) {
    }
    const T prob = rows_head(s, t, 0, b1, d);
    if (t < 10) probs[image * 10 + t] = prob;
}

// The resident variant (see the top): x and probs LL pairs, ctl resident.cu's words, all mapped.
template <typename T>
__global__ void __cluster_dims__(LENET_ROWS_CLUSTER, 1, 1) __launch_bounds__(LENET_ROWS_THREADS)
lenet_resident_rows(const unsigned long long* x,                                    // (N, 784 W) pairs
                    const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
                    const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
                    const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
                    const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
                    const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
                    unsigned long long* probs, unsigned* ctl, int n, int idle_ns) {  // (N, 10 W) pairs, (4)
    constexpr int W = sizeof(T) / 4;
    constexpr unsigned OTHERS = ((1u << LENET_ROWS_CLUSTER) - 1u) & ~1u;  // blocks 1..4
    RowsShared<T>& s = block_shared<RowsShared<T>>();
    const int t = threadIdx.x;
    const unsigned r = cluster_rank();
    if (t == 0) {
        mbar_init(&s.empty[0], 1);
        mbar_init(&s.empty[1], 1);
        s.vote = 0u;
        if (r == 0) {
            mbar_init(&s.full[0], LENET_ROWS_CLUSTER);
            mbar_init(&s.full[1], LENET_ROWS_CLUSTER);
            s.votes[0] = s.votes[1] = 0u;
        }
    }
    T w1[40];
    rows_load(s, r, t, w1, conv1_w, conv1_b, conv2_w, conv2_b, fc1_w);
    const T b1 = r == 0 && t < 120 ? fc1_b[t] : T(0);
    cluster_sync();  // every block's barriers and words set before any arrival or remote write
    unsigned seq = load_acquire_sys(ctl + RESIDENT_NEXT);  // the call the host launched this kernel for
    unsigned served = 0, round = 0, gone = 0u;  // gone (block 0): the blocks that have voted and ended
    bool ending = false;                         // block 0: a vote seen, or its own
    unsigned long long since = globaltimer_ns();
    for (;;) {
        for (int b = 0; b < n; ++b, ++round) {
            const int slot = int(round & 1u);
            const unsigned use = round >> 1;  // the slot's use: its barriers' phase parity is use & 1
            if (!ending) {  // this block's image rows of image b (pixels t and t + 256), or a vote
                // both pixels' loads issued before either is checked: pixel t + 256 lies 8 image rows
                // (224 pixels) below pixel t; `present`: which of the two are image, not padding
                int y, col;
                unsigned present = 0u;
#pragma unroll
                for (int i = ROWS_PER_THREAD - 1; i >= 0; --i)  // ends on pixel t: y, col are its (padding too)
                    present = present << 1 | unsigned(rows_pixel(r, t + i * LENET_ROWS_THREADS, y, col));
                T v[ROWS_PER_THREAD];
                if (resident_receive_n<T, ROWS_PER_THREAD>(x + ((long)b * 784 + y * 28 + col) * W, 224L * W,
                                                           present, seq, v, since, (unsigned long long)idle_ns,
                                                           ctl + RESIDENT_QUIT)) {
#pragma unroll
                    for (int i = 0; i < ROWS_PER_THREAD; ++i)
                        if ((present >> i) & 1u) s.img[t + i * LENET_ROWS_THREADS] = v[i];
                } else {
                    s.vote = round + 1u;
                }
            }
            __syncthreads();
            const bool vote = ending || s.vote == round + 1u;  // the block's, the same in every thread
            if (!vote) {  // (a vote round stamps nothing: the stamps stay the last answer's)
                STAMP(3);
                rows_stages(s, t, w1, t / 120);
                STAMP(4);
            }
            DenseRegisters<T> d;
            if (r == 0 && !vote) load_head(d, r, t, fc2_w, fc2_b, fc3_w, fc3_b);
            if (round >= 2)  // block 0 has read what this block wrote into the slot two rounds ago
                while (!mbar_try_wait(&s.empty[slot], (use - 1u) & 1u)) {
                }
            if (!vote && t < 120)
                cluster_peer(s.fc1_part, 0)[600 * slot + 120 * r + t] = s.work.half[t] + s.work.half[120 + t];
            if (vote && t == 0) {
                atomicOr(cluster_peer(&s.votes[slot], 0), 1u << r);
                store_volatile(ctl + RESIDENT_QUIT, 1u);  // every block stops polling soon
                __threadfence_system();  // seen before block 0's ALIVE 0 (the relaunch clears it)
            }
            __syncthreads();  // the block's stores before its one arrival (release, cluster scope)
            if (t == 0) mbar_arrive_cluster(&s.full[slot], 0);
            if (r != 0) {
                if (vote) {  // end once block 0 has read this round (its last arrival on this block)
                    while (!mbar_try_wait(&s.empty[slot], use & 1u)) {
                    }
                    return;
                }
                since = globaltimer_ns();
                continue;
            }
            // block 0: the blocks that have ended arrive no more; it arrives for them
            if (t == 0)
                for (unsigned q = 1; q < LENET_ROWS_CLUSTER; ++q)
                    if (gone >> q & 1u) mbar_arrive_cluster(&s.full[slot], 0);
            while (!mbar_try_wait(&s.full[slot], use & 1u)) {
            }
            const unsigned votes = s.votes[slot];
            if (votes == 0u && !ending) {
                STAMP(5);
                const T prob = rows_head(s, t, slot, b1, d);  // stamps 6 and 7
#ifdef LENET_STAGE_CLOCKS
                __threadfence();  // the host reads the stamps once it has the answer
#endif
                if (t < 10) resident_send(probs + (b * 10 + t) * W, seq, prob);
                since = globaltimer_ns();
            }
            __syncthreads();  // every thread has read the slot and its votes
            if (t == 0) s.votes[slot] = 0u;
            __syncthreads();
            if (t < LENET_ROWS_CLUSTER && !(gone >> t & 1u))  // block t may write the slot again, or end
                mbar_arrive_cluster(&s.empty[slot], unsigned(t));
            ending = ending || votes != 0u;
            gone |= votes & OTHERS;
            if (ending && gone == OTHERS) goto end;
        }
        ++served;
        seq = seq == 0xFFFFFFFFu ? 1u : seq + 1u;  // 0 is never a call's (the wire starts zeroed)
    }
end:
    if (t == 0) {
        store_volatile(ctl + RESIDENT_SERVED, served);
        __threadfence_system();
        store_volatile(ctl + RESIDENT_ALIVE, 0u);
    }
}
