// LeNet-5 for one image on a thread-block cluster (sm_90): LENET_CLUSTER blocks of
// LENET_CLUSTER_THREADS threads, on 8 SMs, share the image's work through distributed shared
// memory (a block writes into the others' shared memory). A batch of N is a grid of 8N blocks;
// cluster c (blocks 8c .. 8c+7, ranks 0..7) computes image c.
//
// Why not one block per image (fused.cu): at batch 1 it leaves 131 of the H100's 132 SMs idle,
// its conv2 threads run 600 multiply-adds in chains of 150 behind two shared-memory loads each,
// and fc1's 192 KB of weights are fetched from global memory only after the convolutions end.
// Here block r does an eighth of every layer (common.cuh's cluster stages):
//   stage 0  the dense weights each thread will use go into registers (loads issued first, used
//            after the convolutions, so their latency hides behind them); thread t < 98 loads
//            image element 98r + t; conv weights into its own memory
//   scatter, stages 1-4 as common.cuh says; blocks 1..7 end after the 3|4 barrier; no block's
//            memory is written once its block may have ended.
//
// Shared memory per block: ClusterShared (common.cuh), 3,728 elements and a word (14,916 bytes in
// float, 29,832 in double). The mapped variant passes host pointers (mapped page-locked memory)
// for x and probs and a `flag` the host polls: see the end of the kernel.

// x (N, 28, 28, 1) -> probs (N, 10); done (1) counts finished images on the device and flag (1),
// in mapped host memory, tells the host a call has ended (both null: the plain call).
template <typename T>
__global__ void __cluster_dims__(LENET_CLUSTER, 1, 1) __launch_bounds__(LENET_CLUSTER_THREADS)
lenet_cluster(const T* __restrict__ x,
              const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
              const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
              const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
              const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
              const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
              T* __restrict__ probs, unsigned* done, unsigned* flag, int n) {  // (N, 10), (1), (1)
    ClusterShared<T>& s = block_shared<ClusterShared<T>>();
    const int t = threadIdx.x, b = blockIdx.x / LENET_CLUSTER;
    const unsigned r = cluster_rank();
    STAMP(0);
    cluster_clear(s, t);
    cluster_arrive();  // "this block runs, its img cleared": the others may write into it after their wait

    // stage 0: this block's part of the image, the weights (registers and shared memory)
    const T pixel = t < 98 ? x[b * 784 + 98 * r + t] : T(0);
    DenseRegisters<T> d;
    cluster_load(s, d, r, t, conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b);
    STAMP(1);
    cluster_wait();  // every block of the cluster runs: its shared memory may be written
    STAMP(2);
    if (t < 98) cluster_scatter(s, r, t, pixel);
    cluster_sync();  // 0|1: the whole image in every block
    STAMP(3);
    cluster_stages(s, r, t, d);
    if (r != 0) return;
    const T prob = cluster_head(s, t, d);
    if (t < 10) probs[b * 10 + t] = prob;
    if (flag != nullptr) {
        // The mapped variant: probs is in the host's memory, and the host polls *flag instead of
        // waiting on an event. The image's answers are made visible to the host, then counted;
        // the count's last image of a call (every call has n) stores the number of calls ended.
        __syncthreads();
        if (t == 0) {
            __threadfence_system();
            const unsigned images = atomicAdd(done, 1u) + 1u;
            if (images % unsigned(n) == 0) {
                __threadfence_system();
                *(volatile unsigned*)flag = images / unsigned(n);
            }
        }
    }
}

// The persistent variant: one cluster that stays resident between calls, its weights loaded once
// (registers and shared memory), waiting for the host instead of being launched. ctl (4 uint32)
// is in mapped host memory: the host stores the call's number in ctl[CTL_GO] after the call's
// images in x; the kernel serves the images of x one after another, then stores that number in
// ctl[CTL_ENDED] after their probs. A cluster that sees no new call for idle_ns (or ctl[CTL_QUIT]
// set) ends and stores 0 in ctl[CTL_ALIVE]; the host then launches it again for the next call
// (it sets CTL_ALIVE to 1 before each launch). Only block 0's thread 0 polls, across the bus;
// the others wait at the cluster barrier (no issue slots spent). x and ctl are read past the
// caches (ld.cv, ld.acquire.sys): the host rewrites them while the kernel runs.
#define CTL_GO 0
#define CTL_ENDED 1
#define CTL_ALIVE 2
#define CTL_QUIT 3

template <typename T>
__global__ void __cluster_dims__(LENET_CLUSTER, 1, 1) __launch_bounds__(LENET_CLUSTER_THREADS)
lenet_persistent(const T* x,                                                    // (N, 28, 28, 1), mapped
                 const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
                 const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
                 const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
                 const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
                 const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
                 T* probs, unsigned* ctl, int n, int idle_ns) {                  // (N, 10), (4): mapped
    ClusterShared<T>& s = block_shared<ClusterShared<T>>();
    const int t = threadIdx.x;
    const unsigned r = cluster_rank();
    cluster_clear(s, t);
    cluster_arrive();
    DenseRegisters<T> d;
    cluster_load(s, d, r, t, conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b);
    unsigned served = load_acquire_sys(ctl + CTL_ENDED);  // the calls this kernel's predecessors served
    cluster_wait();
    for (;;) {
        if (r == 0 && t == 0) {  // wait for the next call; tell every block its number
            const unsigned long long since = globaltimer_ns();
            unsigned go = load_acquire_sys(ctl + CTL_GO);
            while (go == served && globaltimer_ns() - since < (unsigned long long)idle_ns &&
                   load_acquire_sys(ctl + CTL_QUIT) == 0u)
                go = load_acquire_sys(ctl + CTL_GO);
            if (load_acquire_sys(ctl + CTL_QUIT) != 0u) go = served;
            for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(&s.command, q)[0] = go;
        }
        cluster_sync();  // the call's number in every block (or the last one served: end)
        const unsigned go = s.command;
        if (go == served) break;
        for (int b = 0; b < n; ++b) {
            if (t < 98) cluster_scatter(s, r, t, load_fresh(x + b * 784 + 98 * r + t));
            cluster_sync();  // 0|1: the whole image in every block
            cluster_stages(s, r, t, d);
            if (r == 0) {
                const T prob = cluster_head(s, t, d);
                if (t < 10) probs[b * 10 + t] = prob;
            }
            cluster_sync();  // image b done in every block: its buffers may be rewritten
        }
        served = go;
        if (r == 0 && t == 0) {  // block 0's probs stores came before the last cluster barrier
            __threadfence_system();
            store_volatile(ctl + CTL_ENDED, go);
        }
    }
    if (r == 0 && t == 0) {
        __threadfence_system();
        store_volatile(ctl + CTL_ALIVE, 0u);
    }
}
