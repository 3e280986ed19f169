// The GPU's floor, probed (`python -m harness gpu-floor`, harness/explain/gpu_floor.py): what the
// hardware gives a call before any LeNet runs. Each kernel measures one thing:
//   probe_echo      the bus round trip: thread 0 polls a word in mapped host memory for the host's
//                   next number and stores it back in another (host write -> kernel -> host read)
//   probe_empty     nothing: a launch's and a graph's cost with no work
//   probe_fma       FP32 multiply-adds, 8 independent chains a thread (one block: one SM's peak;
//                   two blocks an SM on every SM: the GPU's)
//   probe_cluster   barrier.cluster arrive + wait, ITERS times, on a cluster of 8 blocks (sm_90),
//                   timed inside by block 0's globaltimer

__device__ __forceinline__ unsigned load_acquire_sys(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_release_sys(unsigned* p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

#define PROBE_QUIT 0xffffffffu

// go, back: one uint32 each in mapped host memory. Ends on PROBE_QUIT or idle_ns without a new number.
extern "C" __global__ void probe_echo(const unsigned* go, unsigned* back, unsigned long long idle_ns) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned last = 0;
    unsigned long long since = global_ns();
    for (;;) {
        unsigned v = load_acquire_sys(go);
        if (v == PROBE_QUIT) break;
        if (v != last) {
            last = v;
            store_release_sys(back, v);
            since = global_ns();
        } else if (global_ns() - since > idle_ns) {
            break;
        }
    }
}

extern "C" __global__ void probe_empty() {}

#define FMA_CHAINS 8

// out: one float a thread (keeps the chains alive). iters x FMA_CHAINS multiply-adds a thread.
extern "C" __global__ void probe_fma(float* out, int iters) {
    float a[FMA_CHAINS];
#pragma unroll
    for (int j = 0; j < FMA_CHAINS; ++j) a[j] = threadIdx.x * 1e-3f + j;
    const float b = 0.999999f, c = 1e-6f;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < FMA_CHAINS; ++j) a[j] = fmaf(a[j], b, c);
    }
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < FMA_CHAINS; ++j) sum += a[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

#if __CUDA_ARCH__ >= 900 || !defined(__CUDA_ARCH__)
// ns: block 0's globaltimer before and after iters cluster barriers (all threads of all 8 blocks)
extern "C" __global__ void __cluster_dims__(8, 1, 1) probe_cluster(unsigned long long* ns, int iters) {
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
    unsigned long long start = global_ns();
    for (int i = 0; i < iters; ++i) {
        asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
    }
    unsigned long long end = global_ns();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        ns[0] = start;
        ns[1] = end;
    }
}
#endif
