// The machine's multiply-add peak on one core, measured rather than assumed (the arithmetic floor
// of a forward pass is its multiply-adds at this rate): CHAINS independent chains of vector FMAs
// in registers, the widest this build's target has (AVX-512, else AVX2 + FMA, else scalar).
// Beside it the core's read bandwidth from a buffer of a given size (the memory floor of a stage is
// the bytes it must read at the bandwidth of the cache level they live in): READ_CHAINS chains of
// vector adds, each fed by one load, so the loads (and the level they come from) set the pace.

#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define LANES 16
#define ISA "avx512"
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define LOAD _mm512_load_ps
#define ADD _mm512_add_ps
#define FIRST(v) _mm512_cvtss_f32(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define LANES 8
#define ISA "avx2+fma"
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define LOAD _mm256_load_ps
#define ADD _mm256_add_ps
#define FIRST(v) _mm256_cvtss_f32(v)
#else
typedef float vec;
#define LANES 1
#define ISA "scalar"
#define SET1(x) (x)
#define FMA(a, b, c) ((a) * (b) + (c))
#define LOAD(p) (*(p))
#define ADD(a, b) ((a) + (b))
#define FIRST(v) (v)
#endif
#define CHAINS 12  // > FMA units x latency on every CPU we know (2 x 4, 2 x 5): throughput-bound
#define READ_CHAINS 8  // >= add units x latency (2 x 3, 2 x 4): the loads, not the adds, bound it

const char *lenet_peak_isa(void) { return ISA; }
int lenet_peak_lanes(void) { return LANES; }

// multiply-adds per second over `iterations` rounds of CHAINS vector FMAs (float32 lanes each)
double lenet_peak_macs(long iterations) {
    vec a[CHAINS];
    for (int j = 0; j < CHAINS; ++j) a[j] = SET1(0.001f * j);
    const vec m = SET1(0.9999f), c = SET1(0.0001f);  // a -> a m + c converges to 1: no overflow
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iterations; ++i)
#pragma GCC unroll 12
        for (int j = 0; j < CHAINS; ++j) a[j] = FMA(a[j], m, c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    float sum = 0;  // every chain's result used: none of them can be left out
    for (int j = 0; j < CHAINS; ++j) sum += FIRST(a[j]);
    double seconds = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    return sum > 0 && seconds > 0 ? (double)iterations * CHAINS * LANES / seconds : 0.0;
}

// each vector of buf (`floats` of them, 64-byte aligned, a multiple of READ_CHAINS * LANES) loaded
// once and added into its chain of a; the sum of a's chains, every chain's result used, so that
// none of the loads can be left out
static inline void read_once(const float *buf, long floats, vec a[READ_CHAINS]) {
    for (long i = 0; i < floats; i += READ_CHAINS * LANES)
#pragma GCC unroll 8
        for (int j = 0; j < READ_CHAINS; ++j) a[j] = ADD(a[j], LOAD(buf + i + j * LANES));
}
static inline float chains_sum(const vec a[READ_CHAINS]) {
    float sum = 0;
    for (int j = 0; j < READ_CHAINS; ++j) sum += FIRST(a[j]);
    return sum;
}

// bytes per second read over `passes` passes through buf (read_once's)
double lenet_peak_read(const float *buf, long floats, long passes) {
    vec a[READ_CHAINS];
    for (int j = 0; j < READ_CHAINS; ++j) a[j] = SET1(0.0f);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long p = 0; p < passes; ++p) read_once(buf, floats, a);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    return chains_sum(a) > 0 && seconds > 0 ? (double)passes * floats * sizeof(float) / seconds : 0.0;
}

// nanoseconds of one read through buf (`floats`, as lenet_peak_read's), timed after a read through
// `other` (as many floats, a multiple of READ_CHAINS * LANES) that leaves buf's lines in no cache
// nearer than they were: as a stage reads its weights once an image, in a burst, between the pass's
// other reads (lenet_peak_read's best run reads 2 MiB in a row; on a Zen 5 core one read of 125 KiB
// from L2 takes a median of 195 GB/s where that best is 265). The interval holds the clock's own
// cost, as lenet_peak_clocked's do (stages.py takes their median out); -1 where the sum was lost.
double lenet_peak_burst(const float *buf, long floats, const float *other, long other_floats) {
    vec a[READ_CHAINS];
    for (int j = 0; j < READ_CHAINS; ++j) a[j] = SET1(0.0f);
    read_once(other, other_floats, a);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    read_once(buf, floats, a);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return chains_sum(a) > 0 ? (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec) : -1.0;
}

// The Python call's own cost: the fused pass's signature, nothing done (stages.py times it through
// ctypes and through call.c's extension)
void lenet_peak_empty(const void *const *table, const void *x, void *out, int n) {
    (void)table, (void)x, (void)out, (void)n;
}

// The C call alone: nanoseconds of one call of the fused pass `fn` between two clock reads in C, no
// Python in the interval (stages.py calls it through ctypes for each image; with lenet_peak_empty as
// `fn` it times the clock's own cost)
typedef void (*pass_fn)(const void *const *table, const void *x, void *out, int n);
long long lenet_peak_clocked(pass_fn fn, const void *const *table, const void *x, void *out, int n) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fn(table, x, out, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
}
