// Runs CUDA C kernels on the CPU, for tests on a machine without a GPU: each block of a launch
// in turn; a kernel without __syncthreads runs its threads one after another, a kernel with
// them runs one std::thread per CUDA thread and __syncthreads is a std::barrier. __shared__
// arrays are static: one block runs at a time. What this checks: the kernels' index arithmetic,
// bounds and barriers, against the NumPy oracle. What it cannot: the GPU's memory model, warps,
// timing (the GPU tests do).
#pragma once
#include <math.h>

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local dim3 threadIdx, blockIdx;
inline thread_local long emu_barriers_passed = 0;
inline dim3 blockDim, gridDim;
inline std::barrier<>* emu_barrier = nullptr;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __shared__ static

inline void __syncthreads() {
    if (emu_barrier == nullptr) __builtin_trap();  // a barrier in a kernel launched without threads
    ++emu_barriers_passed;
    emu_barrier->arrive_and_wait();
}

// 0: ran; 1: the threads of a block passed different numbers of barriers (a divergent
// __syncthreads, undefined behaviour on a GPU). A thread that ends leaves the barrier
// (arrive_and_drop), so a divergent kernel finishes here and is reported instead of hanging.
template <class Body>
int emu_launch(unsigned grid, unsigned block, bool barriers, Body body) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; ++b) {
        if (!barriers) {
            blockIdx = {b, 1, 1};
            for (unsigned t = 0; t < block; ++t) {
                threadIdx = {t, 1, 1};
                body();
            }
            continue;
        }
        std::barrier<> bar(block);
        emu_barrier = &bar;
        std::vector<long> passed(block);
        std::vector<std::thread> threads;
        threads.reserve(block);
        for (unsigned t = 0; t < block; ++t)
            threads.emplace_back([&, t] {
                blockIdx = {b, 1, 1};
                threadIdx = {t, 1, 1};
                emu_barriers_passed = 0;
                body();
                passed[t] = emu_barriers_passed;
                bar.arrive_and_drop();
            });
        for (auto& th : threads) th.join();
        emu_barrier = nullptr;
        for (unsigned t = 1; t < block; ++t)
            if (passed[t] != passed[0]) return 1;
    }
    return 0;
}
