/* Memory bandwidth and sgemm throughput of this machine, measured the way the kernels use it: a
 * SIMD read stream split over OpenMP threads (each thread first-touches its own share), and the
 * sgemm call ig_cpu_linear makes. Allocates its own buffers; never called on a hot path. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/base/arena.h"
#include "core/base/log.h"
#include "core/base/status.h"
#include "core/base/dtype.h"
#include "kernels/cpu/attention_gather.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kvquant.h"
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
    return ig_cpu_measure_bandwidth_pages_gbps(bytes, threads, reps, 0);
}

double ig_cpu_measure_bandwidth_pages_gbps(size_t bytes, int threads, int reps, int huge) {
    if (threads <= 0) threads = ig_cpu_get_threads();
    if (reps < 1) reps = 1;
    size_t n = bytes / sizeof(float) / 64 * 64;
    if (n == 0) return 0.0;
    ig_arena *arena = NULL;
    float *buf = NULL;
    if (huge) {
        if (ig_arena_create(&arena, NULL) != IG_OK) return 0.0;
        buf = ig_arena_alloc(arena, n * sizeof(float), NULL);
    } else {
        buf = ig_aligned_alloc(n * sizeof(float), NULL);
    }
    if (!buf) {
        ig_arena_free(arena);
        return 0.0;
    }
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
    if (arena)
        ig_arena_free(arena);
    else
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
    /* OpenBLAS's own threads, as many as the kernels use, for this call only (igen keeps it at
     * one thread otherwise: threads.c) */
    int nt = ig_cpu_get_threads();
    int blas_prev = openblas_get_num_threads();
    openblas_set_num_threads(nt);
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
    openblas_set_num_threads(blas_prev);
    free(a);
    free(b);
    free(c);
    return best;
}

/* ---- the decode kernels a policy's step runs, at one model's attention shape ---- */

static uint32_t lcg_next(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s;
}

#define MEASURE_REPS_MAX 1024

static double g_min_seconds = 0;

void ig_cpu_measure_set_min_seconds(double s) {
    g_min_seconds = s > 0 ? s : 0;
}

/* Whether a probe runs another timed pass: until `reps` are done, then on (at most
 * MEASURE_REPS_MAX) while the timed passes, begun at t_start, have taken less than the minimum
 * time (ig_cpu_measure_set_min_seconds). */
static int more_passes(int done, int reps, double t_start) {
    if (done < reps) return 1;
    return done < MEASURE_REPS_MAX && g_min_seconds > 0 && ig_time_s() - t_start < g_min_seconds;
}

/* The median of x[0..n) (n <= MEASURE_REPS_MAX), reordering x. */
static double median_of(double *x, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static float lcg_unit(uint32_t *s) { /* in [-1, 1) */
    return (float)(lcg_next(s) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

int ig_cpu_measure_step_matmuls(int M, const int *out, const int *in, const int *call, int n_mats,
                                int sets, int tail_out, int tail_in, int reps, double *chain_gflops,
                                double *tail_gflops) {
    *chain_gflops = *tail_gflops = 0;
    if (M <= 0 || M > 4096 || !out || !in || n_mats <= 0 || n_mats > 16 || sets <= 0 ||
        sets > 4096 || tail_out <= 0 || tail_in <= 0 || tail_out > (1 << 21) || tail_in > (1 << 20))
        return -1;
    size_t maxdim = (size_t)(tail_out > tail_in ? tail_out : tail_in), per_set = 0;
    double flops = 0, tflops = 2.0 * M * (double)tail_out * (double)tail_in;
    for (int i = 0; i < n_mats; i++) {
        if (out[i] <= 0 || in[i] <= 0 || out[i] > (1 << 20) || in[i] > (1 << 20)) return -1;
        if (call && i > 0 && call[i] == call[i - 1] && in[i] != in[i - 1]) return -1;
        /* a call's outputs side by side in one buffer */
        size_t run = (size_t)out[i];
        for (int j = i - 1; call && j >= 0 && call[j] == call[j + 1]; j--) run += (size_t)out[j];
        if (run > maxdim) maxdim = run;
        if ((size_t)in[i] > maxdim) maxdim = (size_t)in[i];
        per_set += (size_t)out[i] * (size_t)in[i];
        flops += 2.0 * M * (double)out[i] * (double)in[i];
    }
    size_t tail = (size_t)tail_out * (size_t)tail_in;
    if (((double)per_set * sets + (double)tail) * sizeof(float) > 8.0 * 1073741824.0) return -1;
    if (reps < 1) reps = 1;
    if (reps > MEASURE_REPS_MAX) reps = MEASURE_REPS_MAX;
    double rate[MEASURE_REPS_MAX], trate[MEASURE_REPS_MAX];
    float *x = ig_aligned_alloc((size_t)M * maxdim * sizeof(float), NULL);
    float *y = ig_aligned_alloc((size_t)M * maxdim * sizeof(float), NULL);
    float *w = ig_aligned_alloc((per_set * (size_t)sets + tail) * sizeof(float), NULL);
    int rc = -1;
    if (x && y && w) {
        for (size_t i = 0; i < (size_t)M * maxdim; i++) x[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < per_set * (size_t)sets + tail; i++) w[i] = (float)(i % 7) * 0.01f;
        int done = 0;
        double t_start = 0;
        for (int r = -1; r < 0 || more_passes(done, reps, t_start); r++) {
            double t0 = ig_time_s();
            if (r == 0) t_start = t0;
            const float *ws = w;
            for (int s = 0; s < sets; s++)
                for (int i = 0, c = 0; i < n_mats; c++) {
                    /* one call's matrices (equal call ids in a row: ig_cpu_linear_multi over the
                     * same input, as the layer runs q/k/v and gate/up); each call's input is
                     * the previous call's output buffer */
                    const float *src = (c & 1) ? y : x;
                    float *dst = (c & 1) ? x : y;
                    ig_linear_part p[IG_LINEAR_MULTI_MAX];
                    int n = 0;
                    size_t off = 0;
                    do {
                        p[n] = (ig_linear_part){ws, out[i], NULL, dst + off * (size_t)M};
                        off += (size_t)out[i];
                        ws += (size_t)out[i] * (size_t)in[i];
                        n++;
                        i++;
                    } while (call && i < n_mats && call[i] == call[i - 1] &&
                             n < IG_LINEAR_MULTI_MAX);
                    ig_cpu_linear_multi(src, M, in[i - 1], IG_DTYPE_F32, p, n);
                }
            double t1 = ig_time_s();
            ig_cpu_linear(x, M, tail_in, ws, IG_DTYPE_F32, tail_out, NULL, y);
            double t2 = ig_time_s();
            if (r >= 0) {
                rate[r] = flops * sets / (t1 - t0) * 1e-9;
                trate[r] = tflops / (t2 - t1) * 1e-9;
                done = r + 1;
            }
        }
        g_sink = x[0] + y[0];
        *chain_gflops = median_of(rate, done);
        *tail_gflops = median_of(trate, done);
        rc = 0;
    }
    free(x);
    free(y);
    free(w);
    return rc;
}

static double measure_attention(int n_head, int n_kv_head, int hd, int seqs, int64_t rows,
                                int stride, int enc_bits, int probs, int reps) {
    if (n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head || hd <= 0 || hd > 1024 ||
        n_kv_head > 64 || seqs <= 0 || rows <= 0 || stride < 0 || stride > rows ||
        !(enc_bits == 0 || enc_bits == 4) || (stride == 0 && enc_bits) || (stride == 0 && probs))
        return 0.0;
    if (reps < 1) reps = 1;
    if (reps > MEASURE_REPS_MAX) reps = MEASURE_REPS_MAX;
    double rate[MEASURE_REPS_MAX];
    int group = hd < 64 ? hd : 64;
    if (enc_bits && hd % group) return 0.0;
    size_t G = (size_t)n_kv_head, R = (size_t)rows, S = (size_t)seqs, H = (size_t)n_head;
    size_t hdz = (size_t)hd;
    size_t rb = enc_bits ? ig_kvq_row_bytes(hd, enc_bits, group) : hdz * sizeof(float);
    int dense = stride == 0; /* every row through ig_cpu_attention: no index lists */
    if (dense) stride = 1;
    size_t n_read = (R + (size_t)stride - 1) / (size_t)stride; /* rows 0, stride, 2 stride, ... */
    size_t per_seq = 2 * G * R * rb;                           /* K and V of every KV head */
    unsigned char *kv = ig_aligned_alloc(S * per_seq, NULL);
    int32_t *idx = ig_aligned_alloc(R * sizeof(int32_t), NULL);
    float *q = ig_aligned_alloc(S * H * hdz * sizeof(float), NULL);
    float *out = ig_aligned_alloc(H * hdz * sizeof(float), NULL);
    float *extra = ig_aligned_alloc(2 * G * hdz * sizeof(float), NULL);
    float *row = ig_aligned_alloc(hdz * sizeof(float), NULL);
    size_t wsf = dense ? ig_cpu_attention_ws_floats(1, rows, n_head, hd, 0)
                       : ig_cpu_attention_gather_ws_floats(n_head, rows + 1);
    float *ws = ig_aligned_alloc(wsf * sizeof(float), NULL);
    /* with probs: each query head's probabilities over the rows and the new token, and per-row
     * sums of them over the KV head's query heads, kept across passes as a score would be */
    size_t pstride = R + 1;
    float *pr = probs ? ig_aligned_alloc(H * pstride * sizeof(float), NULL) : NULL;
    float *psum = probs ? ig_aligned_alloc(S * G * R * sizeof(float), NULL) : NULL;
    double best = 0;
    if (kv && idx && q && out && extra && row && ws && (!probs || (pr && psum))) {
        if (psum) memset(psum, 0, S * G * R * sizeof(float));
        uint32_t st = 12345u;
        for (size_t i = 0; i < S * 2 * G * R; i++) { /* row by row: encoded rows need codes */
            for (size_t j = 0; j < hdz; j++) row[j] = lcg_unit(&st);
            if (enc_bits)
                ig_kvq_quantize_rows(row, 1, hd, enc_bits, group, kv + i * rb);
            else
                memcpy(kv + i * rb, row, rb);
        }
        for (size_t i = 0; i < S * H * hdz; i++) q[i] = lcg_unit(&st);
        for (size_t i = 0; i < 2 * G * hdz; i++) extra[i] = lcg_unit(&st);
        for (size_t i = 0; i < n_read; i++) idx[i] = (int32_t)(i * (size_t)stride);
        const float *kb[64], *vb[64];
        const unsigned char *ke[64], *ve[64];
        const int32_t *ix[64];
        int64_t nsel[64];
        int done = 0;
        double t_start = 0;
        for (int r = -1; r < 0 || more_passes(done, reps, t_start); r++) {
            double t0 = ig_time_s();
            if (r == 0) t_start = t0;
            for (size_t s = 0; s < S; s++) {
                unsigned char *base = kv + s * per_seq;
                if (dense) { /* [K: G][R][hd], [V: G][R][hd]: the home table's layout */
                    ig_cpu_attention(q + s * H * hdz, 1, rows - 1, (const float *)base,
                                     (const float *)(base + G * R * rb), rows, n_head, n_kv_head,
                                     hd, 1.0f / sqrtf((float)hd), ws, wsf, out);
                    continue;
                }
                for (size_t g = 0; g < G; g++) {
                    unsigned char *k = base + g * R * rb, *v = base + (G + g) * R * rb;
                    kb[g] = (const float *)k;
                    vb[g] = (const float *)v;
                    ke[g] = k;
                    ve[g] = v;
                    ix[g] = idx;
                    nsel[g] = (int64_t)n_read;
                }
                ig_gather_attn a = {.n_head = n_head,
                                    .n_kv_head = n_kv_head,
                                    .hd = hd,
                                    .scale = 1.0f / sqrtf((float)hd),
                                    .k_base = kb,
                                    .v_base = vb,
                                    .row_stride = hd,
                                    .idx = ix,
                                    .n_sel = nsel,
                                    .k_extra = extra,
                                    .v_extra = extra + G * hdz,
                                    .n_extra = 1};
                if (enc_bits) {
                    a.enc = IG_ROWS_KVQ;
                    a.enc_bits = enc_bits;
                    a.enc_group = group;
                    a.k_enc = ke;
                    a.v_enc = ve;
                    a.enc_row_bytes = rb;
                }
                ig_cpu_attention_gather(&a, q + s * H * hdz, ws, wsf, pr, (int64_t)pstride, out);
                if (pr) /* the policy's bookkeeping: every probability added to its row's sum */
                    for (size_t h = 0; h < H; h++) {
                        float *sum = psum + (s * G + h / (H / G)) * R;
                        const float *ph = pr + h * pstride;
                        for (size_t j = 0; j < n_read; j++) sum[idx[j]] += ph[j];
                    }
            }
            double dt = ig_time_s() - t0;
            if (r >= 0) {
                rate[r] =
                    (double)S * (double)n_read * (double)G * 2.0 * (double)hd * 4.0 / dt * 1e-9;
                done = r + 1;
            }
        }
        g_sink = out[0];
        best = median_of(rate, done);
    }
    free(kv);
    free(idx);
    free(q);
    free(out);
    free(extra);
    free(row);
    free(ws);
    free(pr);
    free(psum);
    return best;
}

double ig_cpu_measure_attention_gbps(int n_head, int n_kv_head, int hd, int seqs, int64_t rows,
                                     int stride, int enc_bits, int reps) {
    return measure_attention(n_head, n_kv_head, hd, seqs, rows, stride, enc_bits, 0, reps);
}

double ig_cpu_measure_attention_probs_gbps(int n_head, int n_kv_head, int hd, int seqs,
                                           int64_t rows, int reps) {
    return measure_attention(n_head, n_kv_head, hd, seqs, rows, 1, 0, 1, reps);
}

double ig_cpu_measure_select_gbps(int n_head, int n_kv_head, int kc, int seqs, int64_t rows,
                                  double keep, int reps) {
    if (n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head || n_head / n_kv_head > 16 || kc <= 0 ||
        kc > 1024 || seqs <= 0 || rows <= 0 || !(keep > 0 && keep <= 1))
        return 0.0;
    if (reps < 1) reps = 1;
    if (reps > MEASURE_REPS_MAX) reps = MEASURE_REPS_MAX;
    double rate[MEASURE_REPS_MAX];
    int grp = n_head / n_kv_head, T = seqs * n_kv_head;
    size_t R = (size_t)rows, K = (size_t)kc;
    int64_t k = (int64_t)ceil(keep * (double)rows);
    uint16_t *keys = ig_aligned_alloc((size_t)T * K * R * sizeof(uint16_t), NULL);
    float *q = ig_aligned_alloc((size_t)T * (size_t)grp * K * sizeof(float), NULL);
    float *sc = ig_aligned_alloc((size_t)T * (size_t)grp * R * sizeof(float), NULL);
    float *cm = ig_aligned_alloc((size_t)T * R * sizeof(float), NULL);
    float *rm = ig_aligned_alloc((size_t)T * (size_t)grp * sizeof(float), NULL);
    int32_t *cnt = ig_aligned_alloc((size_t)T * (size_t)grp * sizeof(int32_t), NULL);
    int32_t *sel = ig_aligned_alloc((size_t)T * R * sizeof(int32_t), NULL);
    int nt = ig_cpu_get_threads();
    size_t per = (ig_cpu_topk_ws_bytes(rows) + 63) / 64 * 64;
    void *tws = ig_aligned_alloc(per * (size_t)nt, NULL);
    double best = 0;
    if (keys && q && sc && cm && rm && cnt && sel && tws) {
        uint32_t st = 777u;
        for (size_t i = 0; i < (size_t)T * K * R; i++) keys[i] = ig_f32_to_f16(lcg_unit(&st));
        for (size_t i = 0; i < (size_t)T * (size_t)grp * K; i++) q[i] = lcg_unit(&st);
        int done = 0;
        double t_start = 0;
        /* as the CPU backend runs InfiniGen's selection: the partial scores of every table, each
         * query head's count above its maximum less a margin, each table's top entries */
        for (int r = -1; r < 0 || more_passes(done, reps, t_start); r++) {
            double t0 = ig_time_s();
            if (r == 0) t_start = t0;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
            for (int t = 0; t < T; t++)
                ig_cpu_partial_scores(keys + (size_t)t * K * R, IG_DTYPE_F16, rows, kc, rows,
                                      q + (size_t)t * (size_t)grp * K, kc, grp,
                                      sc + (size_t)t * (size_t)grp * R, rows, cm + (size_t)t * R,
                                      rm + (size_t)t * (size_t)grp);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
            for (int h = 0; h < T * grp; h++)
                cnt[h] = (int32_t)ig_cpu_count_greater(sc + (size_t)h * R, rows, rm[h] - 4.0f);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
            for (int t = 0; t < T; t++)
                ig_cpu_topk(cm + (size_t)t * R, rows, k, sel + (size_t)t * R,
                            (char *)tws + per * (size_t)omp_get_thread_num(), per);
            double dt = ig_time_s() - t0;
            if (r >= 0) {
                rate[r] = (double)T * (double)R * (double)K * 2.0 / dt * 1e-9;
                done = r + 1;
            }
        }
        g_sink = (float)cnt[0] + (float)sel[0];
        best = median_of(rate, done);
    }
    free(keys);
    free(q);
    free(sc);
    free(cm);
    free(rm);
    free(cnt);
    free(sel);
    free(tws);
    return best;
}
