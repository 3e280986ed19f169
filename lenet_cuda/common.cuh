// What every kernel file of lenet_cuda shares, prepended to each by kernels.source() (NVRTC, the
// CPU emulator and gpu-explain alike: CuPy's compile cache keys on the source text, not on -I
// headers). Guarded: the emulator compiles every file into one translation unit.
//
//   primitives   cluster (sm_90, PTX; cuda_emu.h has the CPU's twins), system-scope loads and
//                stores of mapped host memory, the global timer, LL pairs
//   math         lenet_relu, lenet_max, lenet_exp
//   stamps       STAMP(k): clock64 per stage when compiled with LENET_STAGE_CLOCKS (kernel-stages)
//   cluster      one image on a cluster of 8 blocks (cluster.cu's lenet_cluster and
//                lenet_persistent, resident.cu's lenet_resident): the shared struct, the weights'
//                loads, the image's scatter, stages 1-3 and block 0's stage 4
//   LL pairs     the resident kernels' wire: a value and its call's sequence in one 8-byte word
//   batch        several images a block (batch.cu, batch2.cu, overlap.cu): the conv weights staged,
//                conv1 and conv2 over C images at once, the dense layers over a block's G images,
//                the softmax
//
// Layouts (the weights file's own, nothing converted): image and activations HWC, conv kernels
// HWIO (R, S, C, K), dense kernels (in, out) row-major, pool2's (5, 5, 16) HWC = the 400-vector in
// Keras' flatten order.
#ifndef LENET_COMMON_CUH
#define LENET_COMMON_CUH

#define LENET_CLUSTER 8            // blocks per image in the cluster kernels (8: the portable most)
#define LENET_CLUSTER_THREADS 256  // threads per block there
#define LENET_STAMPS 8             // STAMP(0) .. STAMP(7)

// ---- primitives ---------------------------------------------------------------------------------
#ifndef CUDA_EMULATED
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}
// arrive + wait = a barrier of every thread of the cluster; writes before it (the cluster's shared
// memory included) are seen after it (arrive releases, wait acquires; relaxed: no release).
__device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
}
// The address of *p (this block's shared memory) in block `rank` of the cluster.
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
// The host's writes to mapped memory while the kernel runs, and a clock (ns) for idle waits.
__device__ __forceinline__ unsigned load_acquire_sys(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_volatile(unsigned* p, unsigned v) { *(volatile unsigned*)p = v; }
__device__ __forceinline__ float load_fresh(const float* p) { return __ldcv(p); }
__device__ __forceinline__ double load_fresh(const double* p) { return __ldcv(p); }
__device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}
// An mbarrier in shared memory (sm_90): init with the arrivals a phase takes; an arrival from any
// block of the cluster on block `rank`'s barrier releases (cluster scope) what the arriving thread
// has seen written, a wait for a phase's parity acquires it.
__device__ __forceinline__ unsigned shared_address(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(shared_address(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    return done != 0u;
}
// cp.async (sm_80): 16 bytes from global (or mapped host) memory into shared memory, landing while
// the thread computes; a commit closes the group of copies issued since the last; wait<N> returns
// once at most the newest N of the thread's groups are in flight (a barrier after it shows every
// thread's copies to all). Both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
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

// ---- math ---------------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ T lenet_relu(T v) { return v > T(0) ? v : T(0); }
template <typename T>
__device__ __forceinline__ T lenet_max(T a, T b) { return a > b ? a : b; }
__device__ __forceinline__ float lenet_exp(float v) { return expf(v); }
__device__ __forceinline__ double lenet_exp(double v) { return exp(v); }
// relu(max of a pool window + b) = max(relu(. + b)): rounding and ReLU are monotone
template <typename T>
__device__ __forceinline__ T pool_bias_relu(T a, T b, T c, T d, T bias) {
    return lenet_relu(lenet_max(lenet_max(a, b), lenet_max(c, d)) + bias);
}

// conv1 (5x5, 1 -> 6) + bias + ReLU + 2x2 pool for channel k at the pool window whose 6x6 input
// patch starts at img[y * 32 + x] (a zero-padded image 32 wide: no bounds checks). The patch goes
// into registers once: 36 loads for 100 multiply-adds, the window's 4 outputs in 4 accumulators.
template <typename T>
__device__ __forceinline__ T conv1_pool(const T* img, int y, int x, const T* conv1_w, const T* conv1_b, int k) {
    T patch[6][6];
#pragma unroll
    for (int u = 0; u < 6; ++u)
#pragma unroll
        for (int v = 0; v < 6; ++v) patch[u][v] = img[(y + u) * 32 + x + v];
    T acc[4] = {T(0), T(0), T(0), T(0)};
#pragma unroll
    for (int dy = 0; dy < 5; ++dy)
#pragma unroll
        for (int dx = 0; dx < 5; ++dx) {
            const T w = conv1_w[(dy * 5 + dx) * 6 + k];
#pragma unroll
            for (int a = 0; a < 4; ++a) acc[a] += patch[a / 2 + dy][a % 2 + dx] * w;
        }
    return pool_bias_relu(acc[0], acc[1], acc[2], acc[3], conv1_b[k]);
}

// ---- stamps -------------------------------------------------------------------------------------
// `python -m harness kernel-stages` compiles a cluster kernel with LENET_STAGE_CLOCKS: thread 0 of
// each block of the first cluster stamps clock64() (its SM's cycle counter) as it leaves stage k,
// into lenet_stage_clock[rank][k]; differences within a block are that block's stages.
#ifdef LENET_STAGE_CLOCKS
__device__ long long lenet_stage_clock[LENET_CLUSTER * LENET_STAMPS];
#define STAMP(k)                                                                              \
    do {                                                                                      \
        if (threadIdx.x == 0 && blockIdx.x < LENET_CLUSTER)                                   \
            lenet_stage_clock[blockIdx.x * LENET_STAMPS + (k)] = clock64();                   \
    } while (0)
#else
#define STAMP(k) \
    do {         \
    } while (0)
#endif

// ---- LL pairs: the resident kernels' wire (resident.cu's header) ----------------------------------
// ctl's words (mapped host memory); polls of a pair between reads of the quit word (a bus crossing each)
#define RESIDENT_NEXT 0
#define RESIDENT_ALIVE 1
#define RESIDENT_QUIT 2
#define RESIDENT_SERVED 3
#define RESIDENT_QUIT_POLLS 64

// A value as its W 32-bit words (double: low, then high), and back.
__device__ __forceinline__ void value_words(float v, unsigned* w) { w[0] = __float_as_uint(v); }
__device__ __forceinline__ void value_words(double v, unsigned* w) {
    w[0] = unsigned(__double2loint(v));
    w[1] = unsigned(__double2hiint(v));
}
__device__ __forceinline__ void words_value(const unsigned* w, float& v) { v = __uint_as_float(w[0]); }
__device__ __forceinline__ void words_value(const unsigned* w, double& v) { v = __hiloint2double(int(w[1]), int(w[0])); }

// N values of type T, value i from the W = sizeof(T) / 4 pairs at pairs + i * stride (where bit i of
// `present` is set; else none: out[i] left as it is), each pair carrying sequence `seq`. Every pair's
// load is issued before any is checked: the N * W loads cross the bus together, one round trip, not
// one a word; then the pairs not yet arrived are loaded again, together, until all have. False once
// idle_ns have passed since `since` (or the host set quit). (One base and a stride rather than N
// pointers, and loops with no loop inside, unrolled whole: the float64 resident kernels hold 254
// registers, and an address or a value more would spill.)
template <typename T, int N>
__device__ __forceinline__ bool resident_receive_n(const unsigned long long* pairs, long stride, unsigned present,
                                                   unsigned seq, T (&out)[N], unsigned long long since,
                                                   unsigned long long idle_ns, const unsigned* quit) {
    constexpr int W = sizeof(T) / 4;
    unsigned long long v[N][W];
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int w = 0; w < W; ++w) v[i][w] = (present >> i) & 1u ? load_pair(pairs + i * stride + w) : 0ull;
    for (unsigned polls = 1;; ++polls) {
        bool arrived = true;
#pragma unroll
        for (int i = 0; i < N; ++i)
#pragma unroll
            for (int w = 0; w < W; ++w)
                if ((present >> i) & 1u && unsigned(v[i][w] >> 32) != seq) {  // an absent pair: never polled
                    v[i][w] = load_pair(pairs + i * stride + w);
                    arrived = false;
                }
        if (arrived) break;
        if (globaltimer_ns() - since >= idle_ns) return false;
        if (polls % RESIDENT_QUIT_POLLS == 0 && load_acquire_sys(quit) != 0u) return false;
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
        unsigned words[W];
#pragma unroll
        for (int w = 0; w < W; ++w) words[w] = unsigned(v[i][w]);
        if ((present >> i) & 1u) words_value(words, out[i]);
    }
    return true;
}

// One value (resident_receive_n's N = 1: a double's two words cross the bus together).
template <typename T>
__device__ __forceinline__ bool resident_receive(const unsigned long long* pairs, unsigned seq, T& out,
                                                 unsigned long long since, unsigned long long idle_ns,
                                                 const unsigned* quit) {
    T got[1];
    if (!resident_receive_n<T, 1>(pairs, 0, 1u, seq, got, since, idle_ns, quit)) return false;
    out = got[0];
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

// ---- cluster: one image on 8 blocks -------------------------------------------------------------
// Block r does an eighth of every layer; no thread's dependent chain is longer than 40:
//   scatter  thread t < 98 of block r sends image element 98r + t into all 8 blocks' img
//   stage 1  conv1 + bias + ReLU + pool: p1 elements 147r .. 147r+146 (a thread each: the window's
//            6x6 patch in registers, 4 x 25 multiply-adds), each into all 8 blocks' p1
//   stage 2  conv2 + bias: channels 2r, 2r+1 (200 outputs, a thread each: 150 multiply-adds in 5
//            chains of 30); ReLU + pool: 50 threads write p2 into all 8 blocks
//   stage 3  fc1 + ReLU: outputs 15r .. 15r+14 (16 threads an output, 25 multiply-adds each, the
//            16 summed as a tree) into block 0's h1
//   stage 4  block 0 alone: fc2 + ReLU (3 threads an output, 40 each), fc3 (25 threads an output,
//            at most 4 each), softmax (each thread its class's exponential)
// A cluster barrier ends the scatter and stages 1-3: every write into another block's memory
// before it, every read of it after it.
template <typename T>
struct ClusterShared {
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
    T partial[LENET_CLUSTER_THREADS];  // the dense layers' partial sums, then the exponentials
    T logits[10];                      // fc3 (block 0)
    unsigned command;                  // persistent: the call to serve; resident: the round voted to end
};

// The dense weights one thread keeps in registers for the kernel's life. fc1: thread t of block r
// sums inputs part1, part1 + 16, ..., part1 + 384 of output 15r + t / 16 (t < 240); fc2 (block
// 0): inputs 40 part2 .. 40 part2 + 39 of output t % 84 (t < 252); fc3 (block 0): inputs part3,
// part3 + 25, ... (< 84) of output t % 10. Zeros where a thread has no such work.
template <typename T>
struct DenseRegisters {
    T w1[25], w2[40], w3[4];
    T b1, b2, b3;  // fc1's bias for output 15r + t (t < 15); fc2's and fc3's (block 0)
};

// Block 0's head weights into registers: fc2 (t < 252: inputs 40 part2 .. + 39 of output t % 84)
// and fc3 (t < 250: inputs part3, part3 + 25, ... of output t % 10) and their biases; zeros elsewhere.
template <typename T>
__device__ __forceinline__ void load_head(DenseRegisters<T>& d, unsigned r, int t,
                                          const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,
                                          const T* __restrict__ fc3_w, const T* __restrict__ fc3_b) {
    const int part2 = t / 84, j2 = t % 84, part3 = t / 10, j3 = t % 10;
    const bool fc2_on = r == 0 && t < 252, fc3_on = r == 0 && t < 250;
#pragma unroll
    for (int m = 0; m < 40; ++m) d.w2[m] = fc2_on ? fc2_w[(40 * part2 + m) * 84 + j2] : T(0);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        int f = part3 + 25 * m;
        d.w3[m] = fc3_on && f < 84 ? fc3_w[f * 10 + j3] : T(0);
    }
    d.b2 = r == 0 && t < 84 ? fc2_b[t] : T(0);
    d.b3 = r == 0 && t < 10 ? fc3_b[t] : T(0);
}

// The dense weights into registers (their loads issued first: used after the convolutions, their
// latency hides behind them), the conv weights into shared memory: all of conv1, two conv2 channels.
template <typename T>
__device__ __forceinline__ void cluster_load(ClusterShared<T>& s, DenseRegisters<T>& d, unsigned r, int t,
                                             const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,
                                             const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,
                                             const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,
                                             const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,
                                             const T* __restrict__ fc3_w, const T* __restrict__ fc3_b) {
    const int part1 = t % 16, j1 = 15 * r + t / 16;
#pragma unroll
    for (int m = 0; m < 25; ++m) d.w1[m] = t < 240 ? fc1_w[(part1 + 16 * m) * 120 + j1] : T(0);
    d.b1 = t < 15 ? fc1_b[15 * r + t] : T(0);
    load_head(d, r, t, fc2_w, fc2_b, fc3_w, fc3_b);
    if (t < 150) s.conv1_w[t] = conv1_w[t];
    if (t < 6) s.conv1_b[t] = conv1_b[t];
    for (int i = t; i < 300; i += LENET_CLUSTER_THREADS)  // conv2_w[dy, dx, c, 2r + i / 150]
        s.conv2_w[i] = conv2_w[(i % 150) * 16 + 2 * r + i / 150];
    if (t < 2) s.conv2_b[t] = conv2_b[2 * r + t];
}

// What the other blocks write into (img's interior, command) cleared before this block's first
// arrive, which must release it (cluster_arrive): no clearing store lands after another's write.
template <typename T>
__device__ __forceinline__ void cluster_clear(ClusterShared<T>& s, int t) {
    for (int i = t; i < 32 * 32; i += LENET_CLUSTER_THREADS) s.img[i] = T(0);  // the border stays 0
    if (t == 0) s.command = 0u;
}

// Image element e = 98r + t (t < 98) into every block's padded img.
template <typename T>
__device__ __forceinline__ void cluster_scatter(ClusterShared<T>& s, unsigned r, int t, T pixel) {
    const int e = 98 * r + t;
    for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(s.img, q)[(2 + e / 28) * 32 + 2 + e % 28] = pixel;
}

// Stages 1 to 3 of one image whose img is whole in every block (after the scatter's barrier):
// every block's part of fc1 lands in block 0's h1. The caller has seen no block still reading the
// previous image's p1, p2 or h1 (the scatter's barrier follows every read of them).
template <typename T>
__device__ __forceinline__ void cluster_stages(ClusterShared<T>& s, unsigned r, int t, const DenseRegisters<T>& d) {
    // stage 1: conv1 (5x5, 1 -> 6, padding 2) + bias + ReLU + 2x2 pool -> p1 (14, 14, 6)
    if (t < 147) {
        const int i = 147 * r + t, k = i % 6, px = (i / 6) % 14, py = i / 84;  // padded rows 2py .., cols 2px ..
        const T v = conv1_pool(s.img, 2 * py, 2 * px, s.conv1_w, s.conv1_b, k);
        for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(s.p1, q)[i] = v;
    }
    cluster_sync();  // 1|2: p1 whole in every block
    STAMP(4);

    // stage 2: conv2 (5x5, 6 -> 16, valid), channels 2r + c: (2, 10, 10) before bias
    if (t < 200) {
        const int c = t / 100, oy = (t % 100) / 10, ox = t % 10;
        T acc[5] = {T(0), T(0), T(0), T(0), T(0)};  // one chain per kernel row
#pragma unroll
        for (int dy = 0; dy < 5; ++dy)
#pragma unroll
            for (int dx = 0; dx < 5; ++dx) {
                const T* xp = s.p1 + ((oy + dy) * 14 + ox + dx) * 6;  // p1[oy + dy, ox + dx, :]
                const T* wp = s.conv2_w + c * 150 + (dy * 5 + dx) * 6;  // channel c's [dy, dx, :]
#pragma unroll
                for (int ch = 0; ch < 6; ++ch) acc[dy] += xp[ch] * wp[ch];
            }
        s.c2[t] = (acc[0] + acc[1]) + (acc[2] + acc[3]) + acc[4];
    }
    __syncthreads();
    if (t < 50) {  // + bias + ReLU + 2x2 pool -> p2[py, px, 2r + c] in every block
        const int c = t / 25, py = (t % 25) / 5, px = t % 5;
        const T* cp = s.c2 + c * 100 + 2 * py * 10 + 2 * px;
        const T v = pool_bias_relu(cp[0], cp[1], cp[10], cp[11], s.conv2_b[c]);
        for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(s.p2, q)[(py * 5 + px) * 16 + 2 * r + c] = v;
    }
    cluster_sync();  // 2|3: p2 whole in every block
    STAMP(5);

    // stage 3: fc1 (400 -> 120) + ReLU, outputs 15r .. 15r+14 -> block 0's h1
    const int part1 = t % 16;
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
        cluster_peer(s.h1, 0)[15 * r + t] = lenet_relu(d.b1 + ((q[0] + q[1]) + (q[2] + q[3])));
    }
    cluster_sync();  // 3|4: h1 whole in block 0
    STAMP(6);
}

// Stage 4, block 0 alone (every thread of it calls; h1 whole in s): fc2 (120 -> 84) + ReLU, fc3
// (84 -> 10), softmax, with load_head's registers. Returns class t's probability to thread t < 10
// (0 to the others); STAMP(7) before. S: a shared struct with h1, h2, partial (>= 252), logits.
template <typename T, typename S>
__device__ __forceinline__ T cluster_head(S& s, int t, const DenseRegisters<T>& d) {
    const int part2 = t / 84, part3 = t / 10;
    if (t < 252) {
        T acc2 = T(0);
#pragma unroll
        for (int m = 0; m < 40; ++m) acc2 += s.h1[40 * part2 + m] * d.w2[m];
        s.partial[t] = acc2;
    }
    __syncthreads();
    if (t < 84) s.h2[t] = lenet_relu(d.b2 + (s.partial[t] + s.partial[84 + t] + s.partial[168 + t]));
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
    if (t < 10) {  // softmax, max subtracted: each thread its class's exponential, into partial
        T top = s.logits[0];
        for (int j = 1; j < 10; ++j) top = lenet_max(top, s.logits[j]);
        s.partial[t] = lenet_exp(s.logits[t] - top);
    }
    __syncthreads();
    T prob = T(0);
    if (t < 10) {
        T sum = T(0);
        for (int j = 0; j < 10; ++j) sum += s.partial[j];
        prob = s.partial[t] / sum;
    }
    STAMP(7);
    return prob;
}

// ---- batch: G images a block ---------------------------------------------------------------------
// The conv weights and biases into shared memory by NT threads; the p2 columns of a block's
// missing images (count .. G - 1) zeroed: fc1 reads them as inputs.
template <typename T, int G, int NT>
__device__ __forceinline__ void batch_stage_weights(T* s_conv1_w, T* s_conv1_b, T* s_conv2_w, T* s_conv2_b,
                                                    T* p2, int count,
                                                    const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,
                                                    const T* __restrict__ conv2_w, const T* __restrict__ conv2_b) {
    const int t = threadIdx.x;
    for (int i = t; i < 5 * 5 * 6 * 16; i += NT) s_conv2_w[i] = conv2_w[i];
    if (t < 150) s_conv1_w[t] = conv1_w[t];
    if (t < 6) s_conv1_b[t] = conv1_b[t];
    if (t < 16) s_conv2_b[t] = conv2_b[t];
    for (int i = t; i < 400 * G; i += NT)
        if (i % G >= count) p2[i] = T(0);
}

// conv1 + bias + ReLU + pool of C images at once: img (C, 784) -> p1 (C, 1176), NT threads; work
// item (image ci, pool window, channels k0 .. k0 + 2), 12 accumulators, one patch row in registers
// at a time (zero outside the image).
template <typename T, int C, int NT>
__device__ __forceinline__ void batch_conv1(const T* img, T* p1, const T* s_conv1_w, const T* s_conv1_b) {
    for (int item = threadIdx.x; item < C * 392; item += NT) {
        const int ci = item / 392, r = item % 392;
        const int win = r / 2, k0 = 3 * (r % 2), py = win / 14, px = win % 14;
        const T* im = img + ci * 784;
        T acc[3][4];                          // channel k0 + k, window position (ay, ax)
#pragma unroll
        for (int k = 0; k < 3; ++k)
#pragma unroll
            for (int a = 0; a < 4; ++a) acc[k][a] = T(0);
#pragma unroll
        for (int rr = 0; rr < 6; ++rr) {      // img row 2py-2+rr feeds output row ay with dy = rr - ay
            const int iy = 2 * py - 2 + rr;
            T row[6];                         // cols 2px-2 .. 2px+3, zero outside the image
#pragma unroll
            for (int c = 0; c < 6; ++c) {
                const int ix = 2 * px - 2 + c;
                row[c] = iy >= 0 && iy < 28 && ix >= 0 && ix < 28 ? im[iy * 28 + ix] : T(0);
            }
#pragma unroll
            for (int ay = 0; ay < 2; ++ay) {
                const int dy = rr - ay;
                if (dy < 0 || dy > 4) continue;
#pragma unroll
                for (int dx = 0; dx < 5; ++dx)
#pragma unroll
                    for (int k = 0; k < 3; ++k) {
                        const T w = s_conv1_w[(dy * 5 + dx) * 6 + k0 + k];
#pragma unroll
                        for (int ax = 0; ax < 2; ++ax) acc[k][ay * 2 + ax] += row[dx + ax] * w;
                    }
            }
        }
#pragma unroll
        for (int k = 0; k < 3; ++k)
            p1[ci * 1176 + win * 6 + k0 + k] =
                pool_bias_relu(acc[k][0], acc[k][1], acc[k][2], acc[k][3], s_conv1_b[k0 + k]);
    }
}

// conv2 + bias + ReLU + pool of C images at once: p1 (C, 1176) -> p2 (400, G) columns g0 .. g0 + C - 1
// (those below count); thread t < 400 the window t / 16, channel t % 16, of every image, one row of
// each image's 6x6 patch in registers at a time, sums channel by channel, then dy, dx.
template <typename T, int C, int G>
__device__ __forceinline__ void batch_conv2(const T* p1, T* p2, const T* s_conv2_w, const T* s_conv2_b,
                                            int g0, int count) {
    const int t = threadIdx.x;
    if (t >= 400) return;
    const int k = t % 16, win = t / 16, py = win / 5, px = win % 5;
    T acc[C][4];                              // image ci's window outputs (ay, ax)
#pragma unroll
    for (int ci = 0; ci < C; ++ci)
#pragma unroll
        for (int a = 0; a < 4; ++a) acc[ci][a] = T(0);
#pragma unroll 1
    for (int c = 0; c < 6; ++c) {
#pragma unroll
        for (int r = 0; r < 6; ++r) {         // patch row r feeds output row ay with dy = r - ay
            T row[C][6];
#pragma unroll
            for (int ci = 0; ci < C; ++ci)
#pragma unroll
                for (int q = 0; q < 6; ++q)
                    row[ci][q] = p1[ci * 1176 + ((2 * py + r) * 14 + 2 * px + q) * 6 + c];
#pragma unroll
            for (int ay = 0; ay < 2; ++ay) {
                const int dy = r - ay;
                if (dy < 0 || dy > 4) continue;
#pragma unroll
                for (int dx = 0; dx < 5; ++dx) {
                    const T w = s_conv2_w[((dy * 5 + dx) * 6 + c) * 16 + k];  // conv2_w[dy, dx, c, k]
#pragma unroll
                    for (int ci = 0; ci < C; ++ci)
#pragma unroll
                        for (int ax = 0; ax < 2; ++ax) acc[ci][ay * 2 + ax] += row[ci][dx + ax] * w;
                }
            }
        }
    }
#pragma unroll
    for (int ci = 0; ci < C; ++ci)
        if (g0 + ci < count)
            p2[((py * 5 + px) * 16 + k) * G + g0 + ci] =
                pool_bias_relu(acc[ci][0], acc[ci][1], acc[ci][2], acc[ci][3], s_conv2_b[k]);
}

// out (OUT, G) = act(in (IN, G) @ w (IN, OUT) + b (OUT)) for a block's G images, in and out in
// shared memory (image fastest). PARTS threads per output: thread t < PARTS * OUT sums inputs
// part, part + PARTS, ... of output j = t % OUT for every image into partial (PARTS, OUT, G); a
// weight is loaded once (coalesced over outputs) for every image. After a barrier thread (j, g)
// adds output j's PARTS partial sums, then the bias.
template <typename T, int G, int NT, int IN, int OUT, int PARTS>
__device__ __forceinline__ void dense_batch(const T* in, const T* __restrict__ w, const T* __restrict__ b,
                                            T* out, T* partial, bool relu_on) {
    static_assert(IN % PARTS == 0, "every part sums the same number of inputs");
    static_assert(PARTS * OUT <= NT && OUT * G <= NT, "one thread a (part, output) and an (output, image)");
    const int t = threadIdx.x;
    if (t < PARTS * OUT) {
        const int j = t % OUT, part = t / OUT;
        T acc[G];
#pragma unroll
        for (int g = 0; g < G; ++g) acc[g] = T(0);
#pragma unroll 10
        for (int m = 0; m < IN / PARTS; ++m) {  // a constant trip count: 10 weight loads in flight at a time
            const int f = part + m * PARTS;
            const T wf = w[f * OUT + j];  // one weight, every image
#pragma unroll
            for (int g = 0; g < G; ++g) acc[g] += in[f * G + g] * wf;
        }
#pragma unroll
        for (int g = 0; g < G; ++g) partial[(part * OUT + j) * G + g] = acc[g];
    }
    __syncthreads();
    if (t < OUT * G) {
        const int j = t / G, g = t % G;
        T acc = T(0);
#pragma unroll
        for (int p = 0; p < PARTS; ++p) acc += partial[(p * OUT + j) * G + g];
        acc += b[j];
        out[j * G + g] = relu_on ? lenet_relu(acc) : acc;
    }
    __syncthreads();
}

// Softmax over each of the block's count images' 10 logits (10, G), max subtracted; thread
// (g, class j) writes probs[(first + g) * 10 + j].
template <typename T, int G>
__device__ __forceinline__ void softmax_batch(const T* logits, T* __restrict__ probs, long first, int count) {
    const int t = threadIdx.x;
    if (t < 10 * G) {
        const int g = t / 10, j = t % 10;
        if (g < count) {
            T top = logits[g];
            for (int i = 1; i < 10; ++i) top = lenet_max(top, logits[i * G + g]);
            T sum = T(0);
            for (int i = 0; i < 10; ++i) sum += lenet_exp(logits[i * G + g] - top);
            probs[(first + g) * 10 + j] = lenet_exp(logits[j * G + g] - top) / sum;
        }
    }
}

#endif  // LENET_COMMON_CUH
