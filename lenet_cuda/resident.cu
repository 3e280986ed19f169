// LeNet-5 at batch 1 on one resident thread-block cluster (sm_90) that talks to the host in LL
// packets (NCCL's "low latency" protocol, src/device/prims_ll.h): every 8 bytes that cross the bus
// carry their own sequence number. The stages are cluster.cu's (8 blocks of 256 threads, the work
// of each layer split eighths), with what a resident kernel can keep: weights loaded once, a
// zero-padded image (no bounds checks in conv1) and a softmax whose threads each compute one
// exponential.
//
// The wire (mapped page-locked host memory, W = sizeof(T) / 4 words per value):
//   x      (N, 784 * W) uint64 pairs: low word a 32-bit word of the image's value (float: the value,
//          double: its low then its high word), high word the call's sequence number (never 0)
//   probs  (N, 10 * W) uint64 pairs, the same for the answer
//   ctl    (4) uint32: RESIDENT_NEXT (host, before a launch: the sequence the kernel waits for
//          first), RESIDENT_ALIVE (host 1 before a launch, the kernel 0 as it ends), RESIDENT_QUIT
//          (host: end now), RESIDENT_SERVED (the kernel, as it ends: the calls it served)
// Each pair is written with one aligned 64-bit store and read with one 64-bit load, which are
// single-copy atomic on the GPU and on the host (x86-64 and Armv8 alike, vector stores per 8-byte
// element): a reader that sees the sequence sees the value stored with it, so there is no go word,
// no ended word, no fence and no ordering between pairs to rely on. Thread t < 98 of block r polls
// its own pairs (image element 98r + t) and sends the value into all 8 blocks' img; the cluster
// barrier that follows is the one the image needs anyway. The answer goes back the same way (block
// 0's threads 0..9: 10 W pairs), and the host polls the answer itself.
//
// Ending: a polling thread that waits idle_ns for its pair (the clock read every poll, a register
// read; the quit word every RESIDENT_QUIT_POLLS polls, a bus read) votes to end by storing the
// round's number into every block's `stop`; after the barrier every block sees the vote and the
// whole cluster ends together (a block never ends while another may write into its memory). A
// pair the kernel did not serve stays in host memory: the host relaunches and the new kernel
// (told the sequence in RESIDENT_NEXT) serves it.
//
// Barriers per image: 4 cluster barriers (cluster.cu's 0|1 .. 3|4); the persistent kernel's
// command broadcast and its trailing barrier are gone: the next image's writes into img, p1, p2 and
// h1 all follow the next 0|1 barrier, which no block passes before every block has left the current
// image's reads of them (img is read before 1|2, p1 before 2|3, p2 before 3|4, h1 by block 0 only).

#define LENET_CLUSTER 8
#define LENET_CLUSTER_THREADS 256
#define RESIDENT_NEXT 0
#define RESIDENT_ALIVE 1
#define RESIDENT_QUIT 2
#define RESIDENT_SERVED 3
#define RESIDENT_QUIT_POLLS 64  // polls between reads of the quit word (a bus crossing each)

#ifndef CUDA_EMULATED
// cluster.cu's primitives (this file compiles on its own); cuda_emu.h has the CPU's twins.
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}
// arrive with release semantics: this block's writes before it are seen by every block after its wait
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
}
template <typename P>
__device__ __forceinline__ P* cluster_peer(P* p, unsigned rank) {
    unsigned long long out;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
    return reinterpret_cast<P*>(out);
}
template <typename S>
__device__ __forceinline__ S& block_shared() {
    __shared__ S shared;
    return shared;
}
__device__ __forceinline__ unsigned load_acquire_sys(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_volatile(unsigned* p, unsigned v) { *(volatile unsigned*)p = v; }
__device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}
// One LL pair: one 64-bit load or store, system scope (the host writes and reads it).
__device__ __forceinline__ unsigned long long load_pair(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_pair(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
#endif

#define RSTAMP_COUNT 8
#ifdef LENET_STAGE_CLOCKS
__device__ long long lenet_resident_clock[LENET_CLUSTER * RSTAMP_COUNT];
#define RSTAMP(k)                                                                             \
    do {                                                                                      \
        if (threadIdx.x == 0) lenet_resident_clock[cluster_rank() * RSTAMP_COUNT + (k)] = clock64(); \
    } while (0)
#else
#define RSTAMP(k) \
    do {          \
    } while (0)
#endif

template <typename T>
struct ResidentShared {
    T img[32 * 32];                    // (28, 28) with a border of 2 zeros: conv1's "same" padding
    T conv1_w[5 * 5 * 6];              // conv1 kernel (5, 5, 1, 6)
    T conv1_b[6];
    T conv2_w[2 * 5 * 5 * 6];          // this block's two conv2 channels, (2, 5, 5, 6)
    T conv2_b[2];
    T p1[14 * 14 * 6];                 // pool1 (14, 14, 6), gathered from every block
    T c2[2 * 10 * 10];                 // this block's conv2 channels before bias, (2, 10, 10)
    T p2[5 * 5 * 16];                  // pool2 (5, 5, 16) = the 400-vector, gathered
    T h1[120];                         // fc1, gathered in block 0
    T h2[84];                          // fc2 (block 0)
    T partial[LENET_CLUSTER_THREADS];  // the dense layers' partial sums
    T logits[10];                      // fc3 (block 0)
    T exps[10];                        // softmax: exp(logit - max), one per thread
    unsigned stop;                     // the round in which some thread voted to end
};

template <typename T>
__device__ __forceinline__ T resident_relu(T v) { return v > T(0) ? v : T(0); }
template <typename T>
__device__ __forceinline__ T resident_max(T a, T b) { return a > b ? a : b; }
__device__ __forceinline__ float resident_exp(float v) { return expf(v); }
__device__ __forceinline__ double resident_exp(double v) { return exp(v); }

// The dense weights one thread keeps in registers for the kernel's life: as cluster.cu's
// DenseRegisters (fc1: thread t of block r, inputs t % 16 + 16 m of output 15r + t / 16; fc2, fc3:
// block 0), loaded once per launch.
template <typename T>
struct ResidentDense {
    T w1[25], w2[40], w3[4];
    T b1, b2, b3;
};

template <typename T>
__device__ __forceinline__ void resident_load(ResidentShared<T>& s, ResidentDense<T>& d, unsigned r, int t,
                                              const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,
                                              const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,
                                              const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,
                                              const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,
                                              const T* __restrict__ fc3_w, const T* __restrict__ fc3_b) {
    const int part1 = t % 16, j1 = 15 * r + t / 16, part2 = t / 84, j2 = t % 84, part3 = t / 10, j3 = t % 10;
    const bool fc1_on = t < 240, fc2_on = r == 0 && t < 252, fc3_on = r == 0 && t < 250;
#pragma unroll
    for (int m = 0; m < 25; ++m) d.w1[m] = fc1_on ? fc1_w[(part1 + 16 * m) * 120 + j1] : T(0);
#pragma unroll
    for (int m = 0; m < 40; ++m) d.w2[m] = fc2_on ? fc2_w[(40 * part2 + m) * 84 + j2] : T(0);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        int f = part3 + 25 * m;
        d.w3[m] = fc3_on && f < 84 ? fc3_w[f * 10 + j3] : T(0);
    }
    d.b1 = t < 15 ? fc1_b[15 * r + t] : T(0);
    d.b2 = r == 0 && t < 84 ? fc2_b[t] : T(0);
    d.b3 = r == 0 && t < 10 ? fc3_b[t] : T(0);
    if (t < 150) s.conv1_w[t] = conv1_w[t];
    if (t < 6) s.conv1_b[t] = conv1_b[t];
    for (int i = t; i < 300; i += LENET_CLUSTER_THREADS)  // conv2_w[dy, dx, c, 2r + i / 150]
        s.conv2_w[i] = conv2_w[(i % 150) * 16 + 2 * r + i / 150];
    if (t < 2) s.conv2_b[t] = conv2_b[2 * r + t];
}

// What the other blocks will write into (img's interior, stop) cleared before this block's first
// arrive, which releases it: no clearing store can land after another block's write.
template <typename T>
__device__ __forceinline__ void resident_clear(ResidentShared<T>& s, int t) {
    for (int i = t; i < 32 * 32; i += LENET_CLUSTER_THREADS) s.img[i] = T(0);  // the border stays 0
    if (t == 0) s.stop = 0u;
}

// A value as its W 32-bit words (double: low, then high), and back.
__device__ __forceinline__ void value_words(float v, unsigned* w) { w[0] = __float_as_uint(v); }
__device__ __forceinline__ void value_words(double v, unsigned* w) {
    w[0] = unsigned(__double2loint(v));
    w[1] = unsigned(__double2hiint(v));
}
__device__ __forceinline__ void words_value(const unsigned* w, float& v) { v = __uint_as_float(w[0]); }
__device__ __forceinline__ void words_value(const unsigned* w, double& v) { v = __hiloint2double(int(w[1]), int(w[0])); }

// One value of type T from W = sizeof(T) / 4 pairs carrying sequence `seq`: each pair polled until
// its sequence arrives, or false once idle_ns have passed since `since` (or the host set quit).
template <typename T>
__device__ __forceinline__ bool resident_receive(const unsigned long long* pairs, unsigned seq, T& out,
                                                 unsigned long long since, unsigned long long idle_ns,
                                                 const unsigned* quit) {
    constexpr int W = sizeof(T) / 4;
    unsigned words[W];
    unsigned polls = 0;
    for (int w = 0; w < W; ++w) {
        unsigned long long v = load_pair(pairs + w);
        while (unsigned(v >> 32) != seq) {
            if (globaltimer_ns() - since >= idle_ns) return false;
            if (++polls % RESIDENT_QUIT_POLLS == 0 && load_acquire_sys(quit) != 0u) return false;
            v = load_pair(pairs + w);
        }
        words[w] = unsigned(v);
    }
    words_value(words, out);
    return true;
}

template <typename T>
__device__ __forceinline__ void resident_send(unsigned long long* pairs, unsigned seq, T value) {
    constexpr int W = sizeof(T) / 4;
    unsigned words[W];
    value_words(value, words);
#pragma unroll
    for (int w = 0; w < W; ++w) store_pair(pairs + w, (unsigned long long)seq << 32 | words[w]);
}

// Stages 1 to 4 of one image whose img is whole in every block (after the 0|1 barrier); block 0
// sends the answer's 10 values as pairs of sequence seq into out (10 W pairs).
template <typename T>
__device__ __forceinline__ void resident_image(ResidentShared<T>& s, unsigned r, int t, const ResidentDense<T>& d,
                                               unsigned long long* out, unsigned seq) {
    const int part1 = t % 16, part2 = t / 84, part3 = t / 10;
    // stage 1: conv1 (5x5, 1 -> 6, padding 2) + bias + ReLU + 2x2 pool -> p1 (14, 14, 6): the
    // pool window's 6x6 input patch into registers once (36 loads for 100 multiply-adds)
    if (t < 147) {
        const int i = 147 * r + t, k = i % 6, px = (i / 6) % 14, py = i / 84;
        T patch[6][6];  // padded img[2py + u, 2px + v]
#pragma unroll
        for (int u = 0; u < 6; ++u)
#pragma unroll
            for (int v = 0; v < 6; ++v) patch[u][v] = s.img[(2 * py + u) * 32 + 2 * px + v];
        T acc[4] = {T(0), T(0), T(0), T(0)};  // the pool window's four conv1 outputs
#pragma unroll
        for (int dy = 0; dy < 5; ++dy)
#pragma unroll
            for (int dx = 0; dx < 5; ++dx) {
                const T w = s.conv1_w[(dy * 5 + dx) * 6 + k];
#pragma unroll
                for (int a = 0; a < 4; ++a) acc[a] += patch[a / 2 + dy][a % 2 + dx] * w;
            }
        const T v = resident_relu(resident_max(resident_max(acc[0], acc[1]), resident_max(acc[2], acc[3])) + s.conv1_b[k]);
        for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(s.p1, q)[i] = v;
    }
    cluster_sync();  // 1|2: p1 whole in every block
    RSTAMP(4);

    // stage 2: conv2 (5x5, 6 -> 16, valid), channels 2r + c: (2, 10, 10) before bias
    if (t < 200) {
        const int c = t / 100, oy = (t % 100) / 10, ox = t % 10;
        T acc[5] = {T(0), T(0), T(0), T(0), T(0)};  // one chain per kernel row
#pragma unroll
        for (int dy = 0; dy < 5; ++dy)
#pragma unroll
            for (int dx = 0; dx < 5; ++dx) {
                const T* xp = s.p1 + ((oy + dy) * 14 + ox + dx) * 6;
                const T* wp = s.conv2_w + c * 150 + (dy * 5 + dx) * 6;
#pragma unroll
                for (int ch = 0; ch < 6; ++ch) acc[dy] += xp[ch] * wp[ch];
            }
        s.c2[t] = (acc[0] + acc[1]) + (acc[2] + acc[3]) + acc[4];
    }
    __syncthreads();
    if (t < 50) {  // + bias + ReLU + 2x2 pool -> p2[py, px, 2r + c] in every block
        const int c = t / 25, py = (t % 25) / 5, px = t % 5;
        const T* cp = s.c2 + c * 100 + 2 * py * 10 + 2 * px;
        const T v = resident_relu(resident_max(resident_max(cp[0], cp[1]), resident_max(cp[10], cp[11])) + s.conv2_b[c]);
        for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(s.p2, q)[(py * 5 + px) * 16 + 2 * r + c] = v;
    }
    cluster_sync();  // 2|3: p2 whole in every block
    RSTAMP(5);

    // stage 3: fc1 (400 -> 120) + ReLU, outputs 15r .. 15r+14 -> block 0's h1
    T acc1 = T(0);
#pragma unroll
    for (int m = 0; m < 25; ++m) acc1 += s.p2[part1 + 16 * m] * d.w1[m];
    s.partial[t] = acc1;
    __syncthreads();
    if (t < 15) {
        const T* pp = s.partial + 16 * t;  // a tree of 16: 4 levels, not a chain of 16
        T q[4];
#pragma unroll
        for (int p = 0; p < 4; ++p) q[p] = (pp[4 * p] + pp[4 * p + 1]) + (pp[4 * p + 2] + pp[4 * p + 3]);
        cluster_peer(s.h1, 0)[15 * r + t] = resident_relu(d.b1 + ((q[0] + q[1]) + (q[2] + q[3])));
    }
    cluster_sync();  // 3|4: h1 whole in block 0
    RSTAMP(6);
    if (r != 0) return;

    // stage 4, block 0: fc2 (120 -> 84) + ReLU, fc3 (84 -> 10), softmax
    if (t < 252) {
        T acc2 = T(0);
#pragma unroll
        for (int m = 0; m < 40; ++m) acc2 += s.h1[40 * part2 + m] * d.w2[m];
        s.partial[t] = acc2;
    }
    __syncthreads();
    if (t < 84) s.h2[t] = resident_relu(d.b2 + (s.partial[t] + s.partial[84 + t] + s.partial[168 + t]));
    __syncthreads();
    if (t < 250) {
        T acc3 = T(0);
#pragma unroll
        for (int m = 0; m < 4; ++m)
            if (part3 + 25 * m < 84) acc3 += s.h2[part3 + 25 * m] * d.w3[m];
        s.partial[t] = acc3;
    }
    __syncthreads();
    if (t < 10) {
        T sum = d.b3;
        for (int p = 0; p < 25; ++p) sum += s.partial[10 * p + t];
        s.logits[t] = sum;
    }
    __syncthreads();
    T top = T(0);
    if (t < 10) {  // softmax, max subtracted: each thread its own class's exponential
        top = s.logits[0];
        for (int j = 1; j < 10; ++j) top = resident_max(top, s.logits[j]);
        s.exps[t] = resident_exp(s.logits[t] - top);
    }
    __syncthreads();
    if (t < 10) {
        T sum = T(0);
        for (int j = 0; j < 10; ++j) sum += s.exps[j];
        RSTAMP(7);  // before the answer: the host reads the stamps once it has the answer
#ifdef LENET_STAGE_CLOCKS
        __threadfence();
#endif
        resident_send(out + t * (sizeof(T) / 4), seq, s.exps[t] / sum);
    }
}

template <typename T>
__global__ void __cluster_dims__(LENET_CLUSTER, 1, 1) __launch_bounds__(LENET_CLUSTER_THREADS)
lenet_resident(const unsigned long long* x,                                    // (N, 784 W) pairs, mapped
               const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
               const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
               const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
               const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
               const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
               unsigned long long* probs, unsigned* ctl, int n, int idle_ns) {  // (N, 10 W) pairs, (4): mapped
    constexpr int W = sizeof(T) / 4;
    ResidentShared<T>& s = block_shared<ResidentShared<T>>();
    const int t = threadIdx.x;
    const unsigned r = cluster_rank();
    RSTAMP(0);
    resident_clear(s, t);
    cluster_arrive();  // "this block runs, its img and stop cleared" (release)
    ResidentDense<T> d;
    resident_load(s, d, r, t, conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b);
    unsigned seq = load_acquire_sys(ctl + RESIDENT_NEXT);  // the call the host launched this kernel for
    unsigned served = 0, round = 0;
    unsigned long long since = globaltimer_ns();  // idle since: the launch, then each image's end
    RSTAMP(1);
    cluster_wait();  // every block runs, its img and stop cleared: they may be written
    RSTAMP(2);
    for (;;) {
        for (int b = 0; b < n; ++b) {
            ++round;
            if (t < 98) {  // element e = 98r + t of image b -> img[2 + e / 28, 2 + e % 28] in every block
                const int e = 98 * r + t;
                T pixel;
                if (resident_receive(x + (b * 784 + e) * W, seq, pixel, since, (unsigned long long)idle_ns,
                                     ctl + RESIDENT_QUIT)) {
                    for (unsigned q = 0; q < LENET_CLUSTER; ++q)
                        cluster_peer(s.img, q)[(2 + e / 28) * 32 + 2 + e % 28] = pixel;
                } else {  // idle (or told to quit): a vote every block sees after the barrier
                    for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(&s.stop, q)[0] = round;
                }
            }
            cluster_sync();  // 0|1: the whole image in every block, or a vote to end
            RSTAMP(3);
            if (s.stop == round) goto end;
            resident_image(s, r, t, d, probs + b * 10 * W, seq);
            since = globaltimer_ns();  // a batch's next image is waited for as long as a call
        }
        ++served;
        seq = seq == 0xFFFFFFFFu ? 1u : seq + 1u;  // 0 is never a call's (the wire starts zeroed)
    }
end:
    if (r == 0 && t == 0) {
        store_volatile(ctl + RESIDENT_SERVED, served);
        __threadfence_system();
        store_volatile(ctl + RESIDENT_ALIVE, 0u);
    }
}
