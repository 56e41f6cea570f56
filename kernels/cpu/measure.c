/* Memory bandwidth and sgemm throughput of this machine, measured the way the kernels use it: a
 * SIMD read stream split over OpenMP threads (each thread first-touches its own share), and the
 * sgemm call ig_cpu_linear makes. Allocates its own buffers; never called on a hot path. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/base/log.h"
#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/measure.h"

static float read_sum_scalar(const float *p, size_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return (s0 + s1) + (s2 + s3);
}

#if IG_X86
/* n is a multiple of 64 floats and p 64-byte aligned (the caller's split guarantees it). */
IG_TARGET_AVX2 static float read_sum_avx2(const float *p, size_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    float b[8];
    _mm256_storeu_ps(b, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return b[0] + b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7];
}

IG_TARGET_AVX512 static float read_sum_avx512(const float *p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#endif

typedef float (*read_sum_fn)(const float *p, size_t n);

static read_sum_fn pick_read_sum(void) {
#if IG_X86
    ig_simd_level l = ig_cpu_simd_level();
    if (l == IG_SIMD_AVX512) return read_sum_avx512;
    if (l == IG_SIMD_AVX2) return read_sum_avx2;
#endif
    return read_sum_scalar;
}

/* Thread t's share of n floats, in blocks of 64 floats (one 256-byte unit). */
static void share(size_t n, int t, int nt, size_t *i0, size_t *i1) {
    size_t blocks = n / 64;
    *i0 = blocks * (size_t)t / (size_t)nt * 64;
    *i1 = blocks * (size_t)(t + 1) / (size_t)nt * 64;
}

static volatile float g_sink;

double ig_cpu_measure_bandwidth_gbps(size_t bytes, int threads, int reps) {
    if (threads <= 0) threads = ig_cpu_get_threads();
    if (reps < 1) reps = 1;
    size_t n = bytes / sizeof(float) / 64 * 64;
    if (n == 0) return 0.0;
    float *buf = ig_aligned_alloc(n * sizeof(float), NULL);
    if (!buf) return 0.0;
    read_sum_fn fn = pick_read_sum();
#pragma omp parallel num_threads(threads)
    {
        size_t i0, i1;
        share(n, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
        for (size_t i = i0; i < i1; i++) buf[i] = (float)(i & 7) * 0.125f;
    }
    double best = 0;
    for (int r = -1; r < reps; r++) {
        float total = 0;
        double t0 = ig_time_s();
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            size_t i0, i1;
            share(n, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
            total += fn(buf + i0, i1 - i0);
        }
        double dt = ig_time_s() - t0;
        g_sink = total;
        double gbps = (double)(n * sizeof(float)) / dt * 1e-9;
        if (r >= 0 && gbps > best) best = gbps;
    }
    free(buf);
    return best;
}

double ig_cpu_measure_copy_bandwidth_gbps(size_t bytes, int threads, int reps) {
    if (threads <= 0) threads = ig_cpu_get_threads();
    if (reps < 1) reps = 1;
    size_t n = bytes / 2 / sizeof(float) / 64 * 64;
    if (n == 0) return 0.0;
    float *src = ig_aligned_alloc(n * sizeof(float), NULL);
    float *dst = ig_aligned_alloc(n * sizeof(float), NULL);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0.0;
    }
#pragma omp parallel num_threads(threads)
    {
        size_t i0, i1;
        share(n, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
        for (size_t i = i0; i < i1; i++) src[i] = (float)(i & 7);
        memset(dst + i0, 0, (i1 - i0) * sizeof(float));
    }
    double best = 0;
    for (int r = -1; r < reps; r++) {
        double t0 = ig_time_s();
#pragma omp parallel num_threads(threads)
        {
            size_t i0, i1;
            share(n, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
            memcpy(dst + i0, src + i0, (i1 - i0) * sizeof(float));
        }
        double dt = ig_time_s() - t0;
        g_sink = dst[n / 2];
        double gbps = 2.0 * (double)(n * sizeof(float)) / dt * 1e-9;
        if (r >= 0 && gbps > best) best = gbps;
    }
    free(src);
    free(dst);
    return best;
}

double ig_cpu_measure_linear_gflops(int M, int N, int K, int reps) {
    if (M <= 0 || N <= 0 || K <= 0) return 0.0;
    if (reps < 1) reps = 1;
    float *x = ig_aligned_alloc((size_t)M * K * sizeof(float), NULL);
    float *w = ig_aligned_alloc((size_t)N * K * sizeof(float), NULL);
    float *y = ig_aligned_alloc((size_t)M * N * sizeof(float), NULL);
    double best = 0;
    if (x && w && y) {
        for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < (size_t)N * K; i++) w[i] = (float)(i % 7) * 0.01f;
        for (int r = -1; r < reps; r++) {
            double t0 = ig_time_s();
            ig_cpu_linear(x, M, K, w, IG_DTYPE_F32, N, NULL, y);
            double dt = ig_time_s() - t0;
            double gf = 2.0 * M * (double)N * K / dt * 1e-9;
            if (r >= 0 && gf > best) best = gf;
        }
        g_sink = y[0];
    }
    free(x);
    free(w);
    free(y);
    return best;
}

double ig_cpu_measure_sgemm_gflops(int M, int N, int K, int reps) {
    if (M <= 0 || N <= 0 || K <= 0) return 0.0;
    if (reps < 1) reps = 1;
    ig_cpu_get_threads(); /* makes OpenBLAS follow the kernels' thread count */
    float *a = ig_aligned_alloc((size_t)M * K * sizeof(float), NULL);
    float *b = ig_aligned_alloc((size_t)N * K * sizeof(float), NULL);
    float *c = ig_aligned_alloc((size_t)M * N * sizeof(float), NULL);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 7) * 0.01f;
        for (int r = -1; r < reps; r++) {
            double t0 = ig_time_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c,
                        N);
            double dt = ig_time_s() - t0;
            double gf = 2.0 * M * (double)N * K / dt * 1e-9;
            if (r >= 0 && gf > best) best = gf;
        }
        g_sink = c[0];
    }
    free(a);
    free(b);
    free(c);
    return best;
}
