// The machine's multiply-add peak on one core, measured rather than assumed (the arithmetic floor
// of a forward pass is its multiply-adds at this rate): CHAINS independent chains of vector FMAs
// in registers, the widest this build's target has (AVX-512, else AVX2 + FMA, else scalar).

#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define LANES 16
#define ISA "avx512"
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define FIRST(v) _mm512_cvtss_f32(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define LANES 8
#define ISA "avx2+fma"
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define FIRST(v) _mm256_cvtss_f32(v)
#else
typedef float vec;
#define LANES 1
#define ISA "scalar"
#define SET1(x) (x)
#define FMA(a, b, c) ((a) * (b) + (c))
#define FIRST(v) (v)
#endif
#define CHAINS 12  // > FMA units x latency on every CPU we know (2 x 4, 2 x 5): throughput-bound

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
