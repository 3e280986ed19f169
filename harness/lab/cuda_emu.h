// Runs CUDA C kernels on the CPU, for tests on a machine without a GPU: each block (or cluster of
// blocks) of a launch in turn; a kernel without __syncthreads runs its threads one after another,
// a kernel with them runs each CUDA thread as a fiber (its own stack, on one OS thread) that a barrier
// switches away from until every thread of the block (__syncthreads) or the cluster (cluster_sync)
// has arrived. __shared__ arrays are static: one block runs at a time.
// Thread-block clusters (sm_90): the blocks of a cluster run together, each with its own shared
// memory (block_shared<S>(), an arena filled with 0xFF, NaN, so a read of what no thread wrote
// shows), which the others reach through cluster_peer. What this checks: the kernels' index
// arithmetic, bounds and barriers, against the NumPy oracle. What it cannot: the GPU's memory
// model, warps, timing (the GPU tests do).
#pragma once
#include <math.h>
#include <string.h>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <vector>

#define CUDA_EMULATED 1

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline constexpr size_t EMU_SHARED_BYTES = 227 * 1024;  // an sm_90 block's most shared memory
inline constexpr size_t EMU_STACK_BYTES = 256 * 1024;  // each fiber's stack (touched pages only)
inline constexpr size_t EMU_GUARD_BYTES = 4096;         // below each stack, unmapped: an overflow faults

// A barrier of `expected` fibers: the last to arrive starts the next generation; a fiber that
// ends leaves it (expected - 1), so a divergent kernel finishes and is reported, not hung.
struct EmuBarrier {
    unsigned expected = 0, arrived = 0;
    unsigned long generation = 0;
};

// A cp.async copy issued and not yet waited for: 16 bytes, in commit group `group`.
struct EmuAsyncCopy {
    unsigned char* dst;
    const unsigned char* src;
    unsigned long group;
};

struct EmuFiber {
    ucontext_t ctx;
    void* sp = nullptr;  // its stack pointer while switched away (emu_switch)
    std::vector<EmuAsyncCopy> copies;  // cp.async's in flight (landed by cp_async_wait)
    unsigned long groups = 0;          // cp.async groups committed
    dim3 thread, block;
    unsigned rank = 0;
    long barriers = 0, cluster_barriers = 0;
    bool done = false, has_token = false;
    unsigned long token = 0;  // the cluster barrier's generation at cluster_arrive_relaxed
    unsigned long polls = 0;  // loads of host memory (emu_poll_yield)
};

inline dim3 threadIdx, blockIdx, blockDim, gridDim;
inline unsigned emu_cluster_size = 1;                 // blocks per cluster of the running launch
inline EmuFiber* emu_current = nullptr;               // the fiber running now
inline EmuBarrier* emu_block_bars = nullptr;          // the cluster's blocks' barriers, by rank
inline EmuBarrier* emu_cluster_bar = nullptr;         // the cluster's
inline unsigned char* const* emu_arenas = nullptr;   // the cluster's blocks' shared memory, by rank
inline ucontext_t emu_scheduler;
inline void* emu_scheduler_sp = nullptr;              // the scheduler's, while a fiber runs (emu_switch)
inline unsigned long emu_progress = 0;                // arrivals and ends: a pass without any is a hang
inline void (*emu_run_body)(void*) = nullptr;
inline void* emu_body = nullptr;

// Switching fibers. swapcontext saves and restores the signal mask (a system call each way) and the
// FPU's state: most of an emulated launch's time. On x86-64 emu_switch saves what the ABI says a call keeps
// (rbx, rbp, r12-r15; no fiber changes the FPU's control words or the signal mask) on the running
// stack, stores its stack pointer and continues on the other's. Where shadow stacks are on (a
// `ret` onto another stack would fault) and on other CPUs, swapcontext.
#if defined(__x86_64__) && defined(__linux__)
__attribute__((naked, noinline)) static void emu_switch(void** /*save_sp*/, void* /*to_sp*/) {
    asm volatile(
        "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
        "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
        "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret\n\t");
}
inline bool emu_shadow_stack() {
    unsigned long features = 0;  // ARCH_SHSTK_STATUS (0x5005); bit 0: the shadow stack is on
    return syscall(SYS_arch_prctl, 0x5005, &features) == 0 && (features & 1);
}
inline const bool emu_fast_switch = !emu_shadow_stack();
#else
static void emu_switch(void**, void*) { __builtin_trap(); }
inline const bool emu_fast_switch = false;
#endif

inline void emu_yield();  // the running fiber -> the scheduler (below)

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(x, y, z)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

inline unsigned long emu_arrive(EmuBarrier* b) {
    ++emu_progress;
    unsigned long generation = b->generation;
    if (++b->arrived == b->expected) {
        b->arrived = 0;
        ++b->generation;
    }
    return generation;
}
inline void emu_wait(EmuBarrier* b, unsigned long generation) {
    while (b->generation == generation) emu_yield();
}
inline void emu_leave(EmuBarrier* b) {
    --b->expected;
    if (b->expected > 0 && b->arrived == b->expected) {
        b->arrived = 0;
        ++b->generation;
    }
}

inline void __syncthreads() {
    if (emu_current == nullptr) __builtin_trap();  // a barrier in a kernel launched without threads
    ++emu_current->barriers;
    EmuBarrier* b = &emu_block_bars[emu_current->rank];
    emu_wait(b, emu_arrive(b));
}

// cp.async (sm_80): a copy lands only when its thread waits for its group (cp_async_wait), so a
// kernel that reads its buffer before the wait (or before the barrier after it: another thread's
// copies) reads what was there before. Both addresses 16-byte aligned, as the GPU requires.
inline void cp_async16(void* smem, const void* gmem) {
    if (reinterpret_cast<uintptr_t>(smem) % 16 != 0 || reinterpret_cast<uintptr_t>(gmem) % 16 != 0) __builtin_trap();
    if (emu_current == nullptr) __builtin_trap();  // launched without threads: no fiber to hold it
    emu_current->copies.push_back(
        {static_cast<unsigned char*>(smem), static_cast<const unsigned char*>(gmem), emu_current->groups});
}
inline void cp_async_commit() {
    if (emu_current == nullptr) __builtin_trap();
    ++emu_current->groups;
}
// Every group but the newest N committed has landed (uncommitted copies stay in flight).
template <int N>
inline void cp_async_wait() {
    if (emu_current == nullptr) __builtin_trap();
    std::vector<EmuAsyncCopy>& copies = emu_current->copies;
    size_t kept = 0;
    for (const EmuAsyncCopy& c : copies) {
        if (c.group + N < emu_current->groups)
            memcpy(c.dst, c.src, 16);
        else
            copies[kept++] = c;
    }
    copies.resize(kept);
}

inline void __threadfence_system() {}  // one thread of the CPU runs every fiber
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    unsigned old = *p;
    *p = old + v;
    return old;
}
inline unsigned atomicOr(unsigned* p, unsigned v) {
    unsigned old = *p;
    *p = old | v;
    return old;
}

inline unsigned cluster_rank() { return emu_current->rank; }
inline void cluster_arrive_relaxed() {
    if (emu_current == nullptr || emu_current->has_token) __builtin_trap();  // no threads; arrived twice
    ++emu_current->cluster_barriers;
    emu_current->token = emu_arrive(emu_cluster_bar);
    emu_current->has_token = true;
}
inline void cluster_arrive() { cluster_arrive_relaxed(); }  // one CPU thread: release is moot
inline void cluster_wait() {
    if (!emu_current->has_token) __builtin_trap();  // a wait with no arrive before it
    emu_current->has_token = false;
    emu_wait(emu_cluster_bar, emu_current->token);
}
inline void cluster_sync() {
    cluster_arrive_relaxed();
    cluster_wait();
}
template <typename S>
inline S& block_shared() {
    static_assert(sizeof(S) <= EMU_SHARED_BYTES, "more shared memory than a block has");
    if (emu_current == nullptr) __builtin_trap();  // a kernel launched without threads
    return *reinterpret_cast<S*>(emu_arenas[emu_current->rank]);
}
template <typename P>
inline P* cluster_peer(P* p, unsigned rank) {
    const auto offset = reinterpret_cast<unsigned char*>(p) - emu_arenas[emu_current->rank];
    if (offset < 0 || size_t(offset) >= EMU_SHARED_BYTES || rank >= emu_cluster_size) __builtin_trap();
    return reinterpret_cast<P*>(emu_arenas[rank] + offset);
}

// An mbarrier (sm_90): the 64-bit word holds the arrivals a phase takes (bits 32..62), those still
// pending (bits 0..31) and the phase's parity (bit 63). An arrival may come from any block of the
// cluster (cluster_peer's address of the barrier); the last one of a phase flips the parity and
// re-arms it. A wait that finds the phase not yet complete lets the other fibers run (no progress:
// a wait that no arrival will ever end is a hang, reported).
inline void mbar_init(unsigned long long* bar, unsigned arrivals) {
    *bar = (unsigned long long)arrivals << 32 | arrivals;
}
inline void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
    unsigned long long* b = cluster_peer(bar, rank);
    const unsigned long long arrivals = *b >> 32 & 0x7FFFFFFFu, pending = (*b & 0xFFFFFFFFu) - 1;
    const unsigned long long parity = *b >> 63;
    *b = pending == 0 ? ((parity ^ 1) << 63 | arrivals << 32 | arrivals) : (parity << 63 | arrivals << 32 | pending);
    ++emu_progress;
}
inline bool mbar_try_wait(unsigned long long* bar, unsigned parity) {
    if ((*bar >> 63) != parity) return true;  // the phase of that parity has completed
    if (emu_current != nullptr) emu_yield();
    return false;
}

// Every EMU_POLLS_PER_YIELD-th poll of host memory by a fiber lets the cluster's other fibers run
// (on a GPU they run beside the poller: a block that polls for the next call must not starve one
// still answering this one); it counts as progress, since the kernel's own deadline (idle_ns) ends
// a wait that is never answered.
inline constexpr unsigned long EMU_POLLS_PER_YIELD = 16;
inline void emu_poll_yield() {
    if (emu_current == nullptr || ++emu_current->polls % EMU_POLLS_PER_YIELD != 0) return;
    ++emu_progress;
    emu_yield();
}

// The resident kernels' reads of what the host rewrites, and their clock: plain volatile accesses
// (the host's stores land whole, from this thread between launches or from another while one runs)
// and the steady clock.
inline unsigned load_acquire_sys(const unsigned* p) {
    emu_poll_yield();
    return *(const volatile unsigned*)p;
}
inline void store_volatile(unsigned* p, unsigned v) { *(volatile unsigned*)p = v; }
template <typename T>
inline T load_fresh(const T* p) { return *(const volatile T*)p; }
inline unsigned long long globaltimer_ns() {
    return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}
// resident.cu's LL pairs: one 64-bit load or store (the host's writes land between launches here)
inline unsigned long long load_pair(const unsigned long long* p) {
    emu_poll_yield();
    return *(const volatile unsigned long long*)p;
}
inline void store_pair(unsigned long long* p, unsigned long long v) { *(volatile unsigned long long*)p = v; }
// CUDA's bit casts (resident.cu's values as 32-bit words)
inline unsigned __float_as_uint(float v) { unsigned u; memcpy(&u, &v, 4); return u; }
inline float __uint_as_float(unsigned u) { float v; memcpy(&v, &u, 4); return v; }
inline int __double2loint(double v) { unsigned long long u; memcpy(&u, &v, 8); return int(unsigned(u)); }
inline int __double2hiint(double v) { unsigned long long u; memcpy(&u, &v, 8); return int(unsigned(u >> 32)); }
inline double __hiloint2double(int hi, int lo) {
    const unsigned long long u = (unsigned long long)unsigned(hi) << 32 | unsigned(lo);
    double v;
    memcpy(&v, &u, 8);
    return v;
}
inline long long clock64() { return (long long)globaltimer_ns(); }  // a cycle counter: ns here

inline void emu_yield() {
    if (emu_fast_switch)
        emu_switch(&emu_current->sp, emu_scheduler_sp);
    else
        swapcontext(&emu_current->ctx, &emu_scheduler);
}

inline void emu_fiber_main() {
    emu_run_body(emu_body);
    EmuFiber* f = emu_current;
    if (f->has_token) cluster_wait();  // arrived, never waited: wait now
    emu_leave(&emu_block_bars[f->rank]);
    emu_leave(emu_cluster_bar);
    f->done = true;
    ++emu_progress;
}  // returns to emu_scheduler (uc_link); emu_fiber_start switches there

// A fiber's first instruction under emu_switch (its `ret` lands here): run it, then leave it for good.
inline void emu_fiber_start() {
    emu_fiber_main();
    emu_yield();       // a done fiber is never switched to again
    __builtin_trap();
}

// A new fiber on the stack [base, base + bytes) for emu_switch: what its first switch pops (six
// registers, then emu_fiber_start as the return address), 16-byte aligned as at a call.
inline void* emu_fiber_stack(char* base, size_t bytes) {
    void** top = reinterpret_cast<void**>(base + bytes);  // page-aligned
    top[-1] = nullptr;                                    // emu_fiber_start's own return address
    top[-2] = reinterpret_cast<void*>(&emu_fiber_start);
    for (int r = 3; r <= 8; ++r) top[-r] = nullptr;       // rbp, rbx, r12-r15
    return top - 8;
}

// Run one cluster's fibers until all have ended: false if they hang (every one waiting).
inline bool emu_run_cluster(std::vector<EmuFiber>& fibers) {
    for (size_t live = fibers.size(); live > 0;) {
        const unsigned long before = emu_progress;
        live = 0;
        for (auto& f : fibers) {
            if (f.done) continue;
            emu_current = &f;
            threadIdx = f.thread;
            blockIdx = f.block;
            if (emu_fast_switch)
                emu_switch(&emu_scheduler_sp, f.sp);
            else
                swapcontext(&emu_scheduler, &f.ctx);
            live += !f.done;
        }
        if (live > 0 && emu_progress == before) return false;
    }
    return true;
}

// 0: ran; 1: the threads of a block passed different numbers of barriers (a divergent
// __syncthreads, undefined behaviour on a GPU), or a cluster's threads different numbers of
// cluster barriers, or they hung at one; 2: the grid is not a whole number of clusters (the GPU
// refuses the launch).
template <class Body>
int emu_launch(unsigned grid, unsigned block, unsigned cluster, bool barriers, Body body) {
    if (cluster == 0 || grid % cluster != 0) return 2;
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    emu_cluster_size = cluster;
    if (!barriers) {
        for (unsigned b = 0; b < grid; ++b) {
            blockIdx = {b, 1, 1};
            for (unsigned t = 0; t < block; ++t) {
                threadIdx = {t, 1, 1};
                body();
            }
        }
        return 0;
    }
    const unsigned width = cluster * block;
    std::vector<std::vector<unsigned char>> arenas(cluster, std::vector<unsigned char>(EMU_SHARED_BYTES));
    std::vector<unsigned char*> arena_of(cluster);
    for (unsigned q = 0; q < cluster; ++q) arena_of[q] = arenas[q].data();
    std::vector<EmuBarrier> block_bars(cluster);
    EmuBarrier cluster_bar;
    const size_t stride = EMU_GUARD_BYTES + EMU_STACK_BYTES;
    void* stacks = mmap(nullptr, width * stride, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stacks == MAP_FAILED) __builtin_trap();
    for (unsigned i = 0; i < width; ++i)  // a stack grows down: its guard is the page below it
        mprotect(static_cast<char*>(stacks) + i * stride, EMU_GUARD_BYTES, PROT_NONE);
    emu_body = &body;
    emu_run_body = [](void* b) { (*static_cast<Body*>(b))(); };
    emu_block_bars = block_bars.data();
    emu_cluster_bar = &cluster_bar;
    emu_arenas = arena_of.data();
    int status = 0;
    std::vector<EmuFiber> fibers(width);
    for (unsigned c = 0; c < grid / cluster && status == 0; ++c) {
        for (auto& bar : block_bars) bar = EmuBarrier{block};
        cluster_bar = EmuBarrier{width};
        for (auto& arena : arenas) memset(arena.data(), 0xFF, arena.size());
        for (unsigned i = 0; i < width; ++i) {
            EmuFiber& f = fibers[i];
            f = EmuFiber{};
            f.rank = i / block;
            f.thread = {i % block, 1, 1};
            f.block = {c * cluster + f.rank, 1, 1};
            char* stack = static_cast<char*>(stacks) + i * stride + EMU_GUARD_BYTES;
            if (emu_fast_switch) {
                f.sp = emu_fiber_stack(stack, EMU_STACK_BYTES);
                continue;
            }
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = stack;
            f.ctx.uc_stack.ss_size = EMU_STACK_BYTES;
            f.ctx.uc_link = &emu_scheduler;
            makecontext(&f.ctx, emu_fiber_main, 0);
        }
        if (!emu_run_cluster(fibers)) status = 1;
        for (unsigned i = 0; i < width && status == 0; ++i)
            if (fibers[i].barriers != fibers[i - i % block].barriers ||
                fibers[i].cluster_barriers != fibers[0].cluster_barriers)
                status = 1;
    }
    munmap(stacks, width * stride);
    emu_current = nullptr;
    return status;
}
