/* y = x W^T (+ bias): the matrix product behind every projection. Small M (decode) streams the
 * weights once through a SIMD GEMV that widens f16/bf16 (or decodes quantized blocks, qlinear.c)
 * on the fly and splits N over OpenMP threads; large M (prefill) splits N over OpenMP threads too,
 * each calling a one-thread sgemm on f32 weights or on tiles of narrow or quantized weights widened
 * into its slice of a grow-once scratch owned by the calling thread. The GEMV is the batch-1 decode
 * hot path: keep it a pure stream. Opt-in (ig_cpu_set_act8): for q4_0, q4_1 and q8_0 weights the
 * GEMV quantizes x to int8 per block of 32 once per call and runs integer dot products
 * (qlinear_act8.c), llama.cpp's arithmetic: faster, not the exact result. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

/* Up to this many rows of x use the GEMV kernels; above, sgemm. The GEMV reads W once per call
 * but is FMA-bound from a few rows on; measured crossover (Zen 4, one thread, f16, K=576 N=1536):
 * GEMV M=16 518 us, widen+sgemm M=17 540 us, M=20 560 us, M=32 760 us. */
#define LINEAR_GEMV_MAX_M 16
/* Rows of W per thread's share are a multiple of this (whole cache lines of y). */
#define LINEAR_ROW_ALIGN 16
/* Bytes of weights below which a GEMV runs on one thread (fork/join costs a few microseconds). */
#define LINEAR_MIN_BYTES_PER_THREAD (96 * 1024)
/* Widened weight tile per thread for the sgemm path: about this many floats (1 MiB). */
#define LINEAR_TILE_FLOATS (256 * 1024)
/* Output columns below which a thread is not worth its own sgemm call. */
#define LINEAR_MIN_COLS_PER_THREAD 64

/* Computes y[m][n] for m < M and n in [n0, n1): rows n of W, all rows of x. */
typedef ig_gemv_rows_fn gemv_rows_fn;

/* ---- scalar: widen a chunk of each weight row, then dot -------------------------------------- */

#define SCALAR_CHUNK 256

static void gemv_rows_scalar(const float *x, int64_t M, int64_t K, const void *W, ig_dtype dt,
                             int64_t n0, int64_t n1, const float *bias, float *y, int64_t ldy) {
    const ig_vec_ops *v = ig_cpu_vec_ops(IG_SIMD_SCALAR);
    size_t es = ig_dtype_size(dt);
    float buf[SCALAR_CHUNK];
    for (int64_t n = n0; n < n1; n++) {
        const char *row = (const char *)W + (size_t)n * (size_t)K * es;
        for (int64_t m = 0; m < M; m++) y[m * ldy + n] = bias ? bias[n] : 0.0f;
        for (int64_t k = 0; k < K; k += SCALAR_CHUNK) {
            int64_t len = K - k < SCALAR_CHUNK ? K - k : SCALAR_CHUNK;
            const float *w;
            if (dt == IG_DTYPE_F32) {
                w = (const float *)row + k;
            } else {
                v->widen(row + (size_t)k * es, dt, len, buf);
                w = buf;
            }
            for (int64_t m = 0; m < M; m++) y[m * ldy + n] += v->dot(w, x + m * K + k, len);
        }
    }
}

static void gemv_rows_scalar_f32(const float *x, int64_t M, int64_t K, const void *W, int64_t n0,
                                 int64_t n1, const float *bias, float *y, int64_t ldy) {
    gemv_rows_scalar(x, M, K, W, IG_DTYPE_F32, n0, n1, bias, y, ldy);
}
static void gemv_rows_scalar_f16(const float *x, int64_t M, int64_t K, const void *W, int64_t n0,
                                 int64_t n1, const float *bias, float *y, int64_t ldy) {
    gemv_rows_scalar(x, M, K, W, IG_DTYPE_F16, n0, n1, bias, y, ldy);
}
static void gemv_rows_scalar_bf16(const float *x, int64_t M, int64_t K, const void *W, int64_t n0,
                                  int64_t n1, const float *bias, float *y, int64_t ldy) {
    gemv_rows_scalar(x, M, K, W, IG_DTYPE_BF16, n0, n1, bias, y, ldy);
}

#if IG_X86

/* The SIMD GEMV walks W one row at a time, front to back: a single sequential stream per thread.
 * (Measured on Zen 4: interleaving even two rows halves the bandwidth the prefetchers deliver; one
 * row at a time reaches the read bandwidth.) Each step loads 2 vectors of the row, widens them and
 * multiplies them into MB rows of x, with 2 accumulators per x row; dt and MB are compile-time
 * constants after inlining, so the accumulators live in registers. qlinear.c's kernels for
 * quantized W accumulate in this same order (the tests check bitwise equality): change both. */

/* ---- AVX-512: 16 lanes, MB <= 8 (16 accumulators of 32 registers) ---------------------------- */

#define GEMV_MB_AVX512 8
#define GEMV_MB_AVX2   4
/* Software prefetch distance of the GEMV, in bytes of W ahead of the loads (rows are contiguous, so
 * it runs into the next rows; past the end of W it names addresses that are never loaded, which a
 * prefetch may: kept as an integer so that no pointer leaves the object). The hardware prefetchers
 * alone left the FMA-heavier cases short of the read bandwidth: on the project's 2-core Xeon VM,
 * bench_engine --dtype f16 --batches 1 went from 74 to 96 tok/s with it. */
#define GEMV_PF_BYTES 2048

IG_TARGET_AVX512 IG_INLINE __m512 w16_load(const void *W, size_t i, ig_dtype dt) {
    if (dt == IG_DTYPE_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)W + i)));
    if (dt == IG_DTYPE_BF16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)W + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_loadu_ps((const float *)W + i);
}

IG_TARGET_AVX512 IG_INLINE __m512 w16_load_mask(const void *W, size_t i, ig_dtype dt, __mmask16 k) {
    if (dt == IG_DTYPE_F16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)W + i));
    if (dt == IG_DTYPE_BF16) {
        __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)W + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_maskz_loadu_ps(k, (const float *)W + i);
}

/* y[m][n] for m < MB: row n of W against MB rows of x. */
IG_TARGET_AVX512 IG_INLINE void row_avx512(const float *x, int64_t K, const void *W, ig_dtype dt,
                                           int64_t n, const int MB, const float *bias, float *y,
                                           int64_t ldy) {
    __m512 acc[GEMV_MB_AVX512][2];
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    const size_t base = (size_t)n * (size_t)K;
    const size_t es = dt == IG_DTYPE_F32 ? 4 : 2;
    const uintptr_t pf = (uintptr_t)W + base * es + GEMV_PF_BYTES;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        _mm_prefetch((const char *)(pf + (size_t)k * es), _MM_HINT_T0);
        if (es == 4) _mm_prefetch((const char *)(pf + (size_t)k * 4 + 64), _MM_HINT_T0);
        __m512 w0 = w16_load(W, base + k, dt), w1 = w16_load(W, base + k + 16, dt);
        IG_UNROLL(8)
        for (int m = 0; m < MB; m++) {
            acc[m][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + m * K + k), acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + m * K + k + 16), acc[m][1]);
        }
    }
    for (; k < K; k += 16) {
        __mmask16 km = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1u);
        __m512 w0 = w16_load_mask(W, base + k, dt, km);
        IG_UNROLL(8)
        for (int m = 0; m < MB; m++)
            acc[m][0] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(km, x + m * K + k), acc[m][0]);
    }
    float b = bias ? bias[n] : 0.0f;
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++)
        y[m * ldy + n] = _mm512_reduce_add_ps(_mm512_add_ps(acc[m][0], acc[m][1])) + b;
}

IG_TARGET_AVX512 IG_INLINE void gemv_rows_avx512(const float *x, int64_t M, int64_t K,
                                                 const void *W, ig_dtype dt, int64_t n0, int64_t n1,
                                                 const float *bias, float *y, int64_t ldy) {
    for (int64_t n = n0; n < n1; n++) {
        int64_t m = 0;
        for (; m + 8 <= M; m += 8) row_avx512(x + m * K, K, W, dt, n, 8, bias, y + m * ldy, ldy);
        const float *xm = x + m * K;
        float *ym = y + m * ldy;
        switch (M - m) {
        case 7:
            row_avx512(xm, K, W, dt, n, 7, bias, ym, ldy);
            break;
        case 6:
            row_avx512(xm, K, W, dt, n, 6, bias, ym, ldy);
            break;
        case 5:
            row_avx512(xm, K, W, dt, n, 5, bias, ym, ldy);
            break;
        case 4:
            row_avx512(xm, K, W, dt, n, 4, bias, ym, ldy);
            break;
        case 3:
            row_avx512(xm, K, W, dt, n, 3, bias, ym, ldy);
            break;
        case 2:
            row_avx512(xm, K, W, dt, n, 2, bias, ym, ldy);
            break;
        case 1:
            row_avx512(xm, K, W, dt, n, 1, bias, ym, ldy);
            break;
        default:
            break;
        }
    }
}

IG_TARGET_AVX512 static void gemv_rows_avx512_f32(const float *x, int64_t M, int64_t K,
                                                  const void *W, int64_t n0, int64_t n1,
                                                  const float *bias, float *y, int64_t ldy) {
    gemv_rows_avx512(x, M, K, W, IG_DTYPE_F32, n0, n1, bias, y, ldy);
}
IG_TARGET_AVX512 static void gemv_rows_avx512_f16(const float *x, int64_t M, int64_t K,
                                                  const void *W, int64_t n0, int64_t n1,
                                                  const float *bias, float *y, int64_t ldy) {
    gemv_rows_avx512(x, M, K, W, IG_DTYPE_F16, n0, n1, bias, y, ldy);
}
IG_TARGET_AVX512 static void gemv_rows_avx512_bf16(const float *x, int64_t M, int64_t K,
                                                   const void *W, int64_t n0, int64_t n1,
                                                   const float *bias, float *y, int64_t ldy) {
    gemv_rows_avx512(x, M, K, W, IG_DTYPE_BF16, n0, n1, bias, y, ldy);
}

/* ---- AVX2: 8 lanes, MB <= 4 (8 accumulators, 2 weights, 1 x of 16 registers) ---------------- */

IG_TARGET_AVX2 IG_INLINE __m256 w8_load(const void *W, size_t i, ig_dtype dt) {
    if (dt == IG_DTYPE_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)W + i)));
    if (dt == IG_DTYPE_BF16) {
        __m256i w =
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)W + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    return _mm256_loadu_ps((const float *)W + i);
}

IG_TARGET_AVX2 IG_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

IG_TARGET_AVX2 IG_INLINE void row_avx2(const float *x, int64_t K, const void *W, ig_dtype dt,
                                       int64_t n, const int MB, const float *bias, float *y,
                                       int64_t ldy) {
    __m256 acc[GEMV_MB_AVX2][2];
    IG_UNROLL(4)
    for (int m = 0; m < MB; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    const size_t base = (size_t)n * (size_t)K;
    const size_t es = dt == IG_DTYPE_F32 ? 4 : 2;
    const uintptr_t pf = (uintptr_t)W + base * es + GEMV_PF_BYTES;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        _mm_prefetch((const char *)(pf + (size_t)k * es), _MM_HINT_T0);
        __m256 w0 = w8_load(W, base + k, dt), w1 = w8_load(W, base + k + 8, dt);
        IG_UNROLL(4)
        for (int m = 0; m < MB; m++) {
            acc[m][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * K + k), acc[m][0]);
            acc[m][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + m * K + k + 8), acc[m][1]);
        }
    }
    if (k + 8 <= K) {
        __m256 w0 = w8_load(W, base + k, dt);
        IG_UNROLL(4)
        for (int m = 0; m < MB; m++)
            acc[m][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * K + k), acc[m][0]);
        k += 8;
    }
    float b = bias ? bias[n] : 0.0f;
    IG_UNROLL(4)
    for (int m = 0; m < MB; m++) {
        float s = hsum8(_mm256_add_ps(acc[m][0], acc[m][1]));
        for (int64_t kk = k; kk < K; kk++) s += ig_load_f32(dt, W, base + kk) * x[m * K + kk];
        y[m * ldy + n] = s + b;
    }
}

IG_TARGET_AVX2 IG_INLINE void gemv_rows_avx2(const float *x, int64_t M, int64_t K, const void *W,
                                             ig_dtype dt, int64_t n0, int64_t n1, const float *bias,
                                             float *y, int64_t ldy) {
    for (int64_t n = n0; n < n1; n++) {
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) row_avx2(x + m * K, K, W, dt, n, 4, bias, y + m * ldy, ldy);
        const float *xm = x + m * K;
        float *ym = y + m * ldy;
        switch (M - m) {
        case 3:
            row_avx2(xm, K, W, dt, n, 3, bias, ym, ldy);
            break;
        case 2:
            row_avx2(xm, K, W, dt, n, 2, bias, ym, ldy);
            break;
        case 1:
            row_avx2(xm, K, W, dt, n, 1, bias, ym, ldy);
            break;
        default:
            break;
        }
    }
}

IG_TARGET_AVX2 static void gemv_rows_avx2_f32(const float *x, int64_t M, int64_t K, const void *W,
                                              int64_t n0, int64_t n1, const float *bias, float *y,
                                              int64_t ldy) {
    gemv_rows_avx2(x, M, K, W, IG_DTYPE_F32, n0, n1, bias, y, ldy);
}
IG_TARGET_AVX2 static void gemv_rows_avx2_f16(const float *x, int64_t M, int64_t K, const void *W,
                                              int64_t n0, int64_t n1, const float *bias, float *y,
                                              int64_t ldy) {
    gemv_rows_avx2(x, M, K, W, IG_DTYPE_F16, n0, n1, bias, y, ldy);
}
IG_TARGET_AVX2 static void gemv_rows_avx2_bf16(const float *x, int64_t M, int64_t K, const void *W,
                                               int64_t n0, int64_t n1, const float *bias, float *y,
                                               int64_t ldy) {
    gemv_rows_avx2(x, M, K, W, IG_DTYPE_BF16, n0, n1, bias, y, ldy);
}

#endif /* IG_X86 */

static gemv_rows_fn pick_gemv(ig_simd_level level, ig_dtype dt) {
    if (ig_dtype_is_quant(dt)) return ig_cpu_qgemv_rows(level, dt);
    int t = dt == IG_DTYPE_F32 ? 0 : dt == IG_DTYPE_F16 ? 1 : 2;
#if IG_X86
    static const gemv_rows_fn k_avx512[3] = {gemv_rows_avx512_f32, gemv_rows_avx512_f16,
                                             gemv_rows_avx512_bf16};
    static const gemv_rows_fn k_avx2[3] = {gemv_rows_avx2_f32, gemv_rows_avx2_f16,
                                           gemv_rows_avx2_bf16};
    if (level == IG_SIMD_AVX512) return k_avx512[t];
    if (level == IG_SIMD_AVX2) return k_avx2[t];
#else
    (void)level;
#endif
    static const gemv_rows_fn k_scalar[3] = {gemv_rows_scalar_f32, gemv_rows_scalar_f16,
                                             gemv_rows_scalar_bf16};
    return k_scalar[t];
}

static int64_t cdiv64(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* Thread t's share of n rows among nt threads, in whole blocks of LINEAR_ROW_ALIGN rows. */
static void split_rows(int64_t n, int t, int nt, int64_t *n0, int64_t *n1) {
    int64_t blocks = (n + LINEAR_ROW_ALIGN - 1) / LINEAR_ROW_ALIGN;
    int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
    *n0 = b0 * LINEAR_ROW_ALIGN < n ? b0 * LINEAR_ROW_ALIGN : n;
    *n1 = b1 * LINEAR_ROW_ALIGN < n ? b1 * LINEAR_ROW_ALIGN : n;
}

/* ---- int8 activations (opt-in, ig_cpu_set_act8) ------------------------------------------------
 */

static int g_act8;

void ig_cpu_set_act8(int on) {
    g_act8 = on != 0;
}

int ig_cpu_get_act8(void) {
    return g_act8;
}

/* The calling thread's grow-once buffer for the quantized activations (a few KiB: M <= 16 rows). */
static _Thread_local void *t_act8;
static _Thread_local size_t t_act8_bytes;

/* With ig_cpu_set_act8 on and an int8-activation kernel for wtype: x quantized into the calling
 * thread's buffer (once for every matrix of the call) and the kernel; else NULL (the exact path).
 */
static ig_act8_rows_fn act8_prepare(const float *x, int64_t M, int64_t K, ig_dtype wtype,
                                    const void **xq) {
    if (!g_act8 || !ig_cpu_act8_supported(wtype)) return NULL;
    ig_simd_level level = ig_cpu_simd_level();
    ig_act8_rows_fn fn = ig_cpu_act8_rows(level, wtype);
    size_t need = ig_cpu_act8_bytes(wtype, M, K);
    if (!fn || !need) return NULL;
    if (need > t_act8_bytes) {
        free(t_act8);
        t_act8 = ig_aligned_alloc(need, NULL);
        t_act8_bytes = t_act8 ? need : 0;
        if (!t_act8) return NULL; /* out of memory for a few KiB: the exact path needs none */
    }
    ig_cpu_act8_quantize(level, wtype, x, M, K, t_act8);
    *xq = t_act8;
    return fn;
}

static void linear_gemv(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wtype,
                        int64_t N, const float *bias, float *y) {
    const void *xq = NULL;
    ig_act8_rows_fn qfn = act8_prepare(x, M, K, wtype, &xq);
    gemv_rows_fn fn = qfn ? NULL : pick_gemv(ig_cpu_simd_level(), wtype);
    int64_t bytes = N * (int64_t)ig_dtype_row_bytes(wtype, K); /* compressed bytes if quantized */
    int nt = ig_cpu_threads_for(bytes, LINEAR_MIN_BYTES_PER_THREAD);
    int64_t max_nt = (N + LINEAR_ROW_ALIGN - 1) / LINEAR_ROW_ALIGN;
    if (nt > max_nt) nt = (int)max_nt;
    if (nt <= 1) {
        if (qfn)
            qfn(xq, M, K, W, 0, N, bias, y, N);
        else
            fn(x, M, K, W, 0, N, bias, y, N);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t n0, n1;
        split_rows(N, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
        if (n1 > n0) {
            if (qfn)
                qfn(xq, M, K, W, n0, n1, bias, y, N);
            else
                fn(x, M, K, W, n0, n1, bias, y, N);
        }
    }
}

/* ---- large M: sgemm -------------------------------------------------------------------------- */

static _Thread_local float *t_scratch;
static _Thread_local size_t t_scratch_floats;

static float *scratch_get(size_t floats) {
    if (floats <= t_scratch_floats) return t_scratch;
    free(t_scratch);
    t_scratch = ig_aligned_alloc(floats * sizeof(float), NULL);
    t_scratch_floats = t_scratch ? floats : 0;
    return t_scratch;
}

void ig_cpu_release_scratch(void) {
    free(t_scratch);
    t_scratch = NULL;
    t_scratch_floats = 0;
    free(t_act8);
    t_act8 = NULL;
    t_act8_bytes = 0;
}

static void fill_bias(float *y, int64_t M, int64_t ldy, const float *bias, int64_t n) {
    for (int64_t m = 0; m < M; m++) memcpy(y + m * ldy, bias, (size_t)n * sizeof(float));
}

/* Large M: each OpenMP thread takes a contiguous share of the N outputs, widens its weight rows
 * tile by tile into its slice of the scratch (narrow weights only) and calls sgemm on them with
 * OpenBLAS held to one thread. One thread pool at a time: OpenBLAS's own threads would compete for
 * the cores with OpenMP threads still spinning after the previous kernel. */
static void linear_sgemm(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wtype,
                         int64_t N, const float *bias, float *y) {
    int nt = ig_cpu_threads_for(N, LINEAR_MIN_COLS_PER_THREAD);
    int64_t nb_max = LINEAR_TILE_FLOATS / K;
    nb_max = nb_max < 16 ? 16 : nb_max & ~(int64_t)15;
    int64_t share = cdiv64(cdiv64(N, nt), LINEAR_ROW_ALIGN) * LINEAR_ROW_ALIGN;
    if (nb_max > share) nb_max = share;
    float *scratch = NULL;
    if (wtype != IG_DTYPE_F32) {
        scratch = scratch_get((size_t)nt * (size_t)nb_max * (size_t)K);
        if (!scratch) { /* out of memory for the tiles: the GEMV path needs none */
            linear_gemv(x, M, K, W, wtype, N, bias, y);
            return;
        }
    }
    const ig_vec_ops *v = ig_cpu_vec();
    const int quant = ig_dtype_is_quant(wtype);
    size_t rb = ig_dtype_row_bytes(wtype, K);
    float beta = bias ? 1.0f : 0.0f;
    int blas_prev = nt > 1 ? ig_cpu_blas_threads_single() : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num();
        int64_t n0, n1;
        split_rows(N, t, omp_get_num_threads(), &n0, &n1);
        float *tile = scratch ? scratch + (size_t)t * (size_t)nb_max * (size_t)K : NULL;
        for (int64_t c0 = n0; c0 < n1; c0 += nb_max) {
            int64_t nb = n1 - c0 < nb_max ? n1 - c0 : nb_max;
            const float *w;
            if (wtype == IG_DTYPE_F32) {
                w = (const float *)W + (size_t)c0 * (size_t)K;
            } else {
                const char *src = (const char *)W + (size_t)c0 * rb;
                for (int64_t r = 0; r < nb; r++) {
                    if (quant)
                        ig_cpu_dequant_row(wtype, src + (size_t)r * rb, tile + r * K, K);
                    else
                        v->widen(src + (size_t)r * rb, wtype, K, tile + r * K);
                }
                w = tile;
            }
            if (bias) fill_bias(y + c0, M, N, bias + c0, nb);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nb, (int)K, 1.0f, x,
                        (int)K, w, (int)K, beta, y + c0, (int)N);
        }
    }
    if (nt > 1) ig_cpu_blas_threads_restore(blas_prev);
}

void ig_cpu_linear_multi(const float *x, int64_t M, int64_t K, ig_dtype wtype,
                         const ig_linear_part *parts, int n_parts) {
    IG_ASSERT(M >= 0 && K > 0 && n_parts >= 0 && n_parts <= IG_LINEAR_MULTI_MAX);
    IG_ASSERT(ig_dtype_is_weight_storage(wtype) && ig_dtype_row_ok(wtype, K));
    if (M == 0 || n_parts == 0) return;
    int64_t bytes = 0, blocks = 0, first[IG_LINEAR_MULTI_MAX + 1];
    for (int i = 0; i < n_parts; i++) {
        IG_ASSERT(parts[i].N > 0 && parts[i].N <= INT32_MAX);
        first[i] = blocks;
        blocks += cdiv64(parts[i].N, LINEAR_ROW_ALIGN);
        bytes += parts[i].N * (int64_t)ig_dtype_row_bytes(wtype, K);
    }
    first[n_parts] = blocks;
    if (M > LINEAR_GEMV_MAX_M || M > INT32_MAX || K > INT32_MAX) {
        for (int i = 0; i < n_parts; i++)
            ig_cpu_linear(x, M, K, parts[i].W, wtype, parts[i].N, parts[i].bias, parts[i].y);
        return;
    }
    /* the parts' row blocks as one range split among the threads: each output row computed by
     * the same kernel as in ig_cpu_linear, so bitwise the same */
    const void *xq = NULL;
    ig_act8_rows_fn qfn = act8_prepare(x, M, K, wtype, &xq);
    gemv_rows_fn fn = qfn ? NULL : pick_gemv(ig_cpu_simd_level(), wtype);
    int nt = ig_cpu_threads_for(bytes, LINEAR_MIN_BYTES_PER_THREAD);
    if (nt > blocks) nt = (int)blocks;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t b0 = blocks * t / n, b1 = blocks * (t + 1) / n;
        for (int i = 0; i < n_parts; i++) {
            int64_t lo = b0 > first[i] ? b0 : first[i], hi = b1 < first[i + 1] ? b1 : first[i + 1];
            if (hi <= lo) continue;
            const ig_linear_part *p = &parts[i];
            int64_t n0 = (lo - first[i]) * LINEAR_ROW_ALIGN,
                    n1 = (hi - first[i]) * LINEAR_ROW_ALIGN;
            if (n1 > p->N) n1 = p->N;
            if (qfn)
                qfn(xq, M, K, p->W, n0, n1, p->bias, p->y, p->N);
            else
                fn(x, M, K, p->W, n0, n1, p->bias, p->y, p->N);
        }
    }
}

void ig_cpu_linear(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wtype, int64_t N,
                   const float *bias, float *y) {
    IG_ASSERT(M >= 0 && K >= 0 && N >= 0);
    IG_ASSERT(ig_dtype_is_weight_storage(wtype));
    IG_ASSERT(ig_dtype_row_ok(wtype, K)); /* quantized: K a multiple of the block */
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) y[m * N + n] = bias ? bias[n] : 0.0f;
        return;
    }
    if (M <= LINEAR_GEMV_MAX_M || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) {
        linear_gemv(x, M, K, W, wtype, N, bias, y);
        return;
    }
    linear_sgemm(x, M, K, W, wtype, N, bias, y);
}
