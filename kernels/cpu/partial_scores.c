/* Partial attention scores over a column-major key table (a speculating policy's few-column key
 * cache, e.g. InfiniGen's partial key cache), and two row reductions the selection needs. One pass
 * over the keys, a block of entries at a time, all query rows of the block accumulated in
 * registers. Single-threaded: callers parallelise over tables. */
#include <math.h>
#include <string.h>

#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ref.h"

#if IG_X86
#include <immintrin.h>
#endif

#define PS_MAX_ROWS 16

/* ---- scalar ---- */

static void ps_scalar(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t e0, int64_t e1,
                      const float *q, int64_t ldq, int nq, float *out, int64_t ldo, float *col_max,
                      float *row_max) {
    const float *kf = keys;
    const uint16_t *kh = keys;
    for (int64_t e = e0; e < e1; e++) {
        float cm = -INFINITY;
        for (int h = 0; h < nq; h++) {
            float s = 0;
            for (int j = 0; j < kc; j++) {
                size_t o = (size_t)j * (size_t)ld + (size_t)e;
                s += q[(size_t)h * (size_t)ldq + (size_t)j] *
                     (kt == IG_DTYPE_F16 ? ig_f16_to_f32(kh[o]) : kf[o]);
            }
            out[(size_t)h * (size_t)ldo + (size_t)e] = s;
            if (s > cm) cm = s;
            if (s > row_max[h]) row_max[h] = s;
        }
        if (col_max) col_max[e] = cm;
    }
}

static int64_t count_greater_scalar(const float *x, int64_t n, float thr) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += x[i] > thr;
    return c;
}

static int64_t indices_greater_scalar(const float *x, int64_t i0, int64_t n, float thr,
                                      int32_t *out) {
    int64_t w = 0;
    for (int64_t i = i0; i < n; i++) {
        out[w] = (int32_t)i; /* branchless compaction */
        w += x[i] > thr;
    }
    return w;
}

#if IG_X86

/* ---- AVX-512: 16 entries per block, query rows 4 at a time ---- */

IG_TARGET_AVX512 IG_INLINE __m512 load16(const void *keys, int f16, size_t off, __mmask16 m) {
    if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)keys + off));
    return _mm512_maskz_loadu_ps(m, (const float *)keys + off);
}

IG_TARGET_AVX512 IG_INLINE void ps_avx512_body(const void *keys, int f16, int64_t ld, int kc,
                                               int64_t n, const float *q, int64_t ldq, int nq,
                                               float *out, int64_t ldo, float *col_max,
                                               float *row_max) {
    __m512 rmax[PS_MAX_ROWS];
    for (int h = 0; h < nq; h++) rmax[h] = _mm512_set1_ps(-INFINITY);
    for (int64_t e0 = 0; e0 < n; e0 += 16) {
        __mmask16 m = n - e0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - e0)) - 1);
        __m512 cm = _mm512_set1_ps(-INFINITY);
        for (int h0 = 0; h0 < nq; h0 += 4) {
            /* rows past nq repeat the last row (computed, not stored) */
            const float *q0 = q + (size_t)h0 * (size_t)ldq;
            const float *q1 = q + (size_t)(h0 + 1 < nq ? h0 + 1 : nq - 1) * (size_t)ldq;
            const float *q2 = q + (size_t)(h0 + 2 < nq ? h0 + 2 : nq - 1) * (size_t)ldq;
            const float *q3 = q + (size_t)(h0 + 3 < nq ? h0 + 3 : nq - 1) * (size_t)ldq;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int j = 0; j < kc; j++) {
                __m512 kv = load16(keys, f16, (size_t)j * (size_t)ld + (size_t)e0, m);
                a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[j]), kv, a0);
                a1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[j]), kv, a1);
                a2 = _mm512_fmadd_ps(_mm512_set1_ps(q2[j]), kv, a2);
                a3 = _mm512_fmadd_ps(_mm512_set1_ps(q3[j]), kv, a3);
            }
            __m512 a[4] = {a0, a1, a2, a3};
            for (int r = 0; r < 4 && h0 + r < nq; r++) {
                _mm512_mask_storeu_ps(out + (size_t)(h0 + r) * (size_t)ldo + (size_t)e0, m, a[r]);
                rmax[h0 + r] = _mm512_mask_max_ps(rmax[h0 + r], m, rmax[h0 + r], a[r]);
                cm = _mm512_max_ps(cm, a[r]);
            }
        }
        if (col_max) _mm512_mask_storeu_ps(col_max + e0, m, cm);
    }
    for (int h = 0; h < nq; h++) {
        float r = _mm512_reduce_max_ps(rmax[h]);
        if (r > row_max[h]) row_max[h] = r;
    }
}

IG_TARGET_AVX512 static void ps_avx512(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t n,
                                       const float *q, int64_t ldq, int nq, float *out, int64_t ldo,
                                       float *col_max, float *row_max) {
    if (kt == IG_DTYPE_F16)
        ps_avx512_body(keys, 1, ld, kc, n, q, ldq, nq, out, ldo, col_max, row_max);
    else
        ps_avx512_body(keys, 0, ld, kc, n, q, ldq, nq, out, ldo, col_max, row_max);
}

IG_TARGET_AVX512 static int64_t count_greater_avx512(const float *x, int64_t n, float thr) {
    __m512 t = _mm512_set1_ps(thr);
    int64_t c = 0, i = 0;
    for (; i + 16 <= n; i += 16)
        c += __builtin_popcount(_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), t, _CMP_GT_OQ));
    return c + count_greater_scalar(x + i, n - i, thr);
}

IG_TARGET_AVX512 static int64_t indices_greater_avx512(const float *x, int64_t n, float thr,
                                                       int32_t *out) {
    __m512 t = _mm512_set1_ps(thr);
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i step = _mm512_set1_epi32(16);
    int64_t w = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), t, _CMP_GT_OQ);
        _mm512_mask_compressstoreu_epi32(out + w, m, idx);
        w += __builtin_popcount(m);
        idx = _mm512_add_epi32(idx, step);
    }
    return w + indices_greater_scalar(x, i, n, thr, out + w);
}

/* ---- AVX2: 8 entries per block, the tail in scalar code ---- */

IG_TARGET_AVX2 IG_INLINE __m256 load8(const void *keys, int f16, size_t off) {
    if (f16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)keys + off)));
    return _mm256_loadu_ps((const float *)keys + off);
}

IG_TARGET_AVX2 IG_INLINE float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

IG_TARGET_AVX2 IG_INLINE void ps_avx2_body(const void *keys, int f16, int64_t ld, int kc, int64_t n,
                                           const float *q, int64_t ldq, int nq, float *out,
                                           int64_t ldo, float *col_max, float *row_max) {
    __m256 rmax[PS_MAX_ROWS];
    for (int h = 0; h < nq; h++) rmax[h] = _mm256_set1_ps(-INFINITY);
    int64_t e0 = 0;
    for (; e0 + 8 <= n; e0 += 8) {
        __m256 cm = _mm256_set1_ps(-INFINITY);
        for (int h0 = 0; h0 < nq; h0 += 4) {
            const float *q0 = q + (size_t)h0 * (size_t)ldq;
            const float *q1 = q + (size_t)(h0 + 1 < nq ? h0 + 1 : nq - 1) * (size_t)ldq;
            const float *q2 = q + (size_t)(h0 + 2 < nq ? h0 + 2 : nq - 1) * (size_t)ldq;
            const float *q3 = q + (size_t)(h0 + 3 < nq ? h0 + 3 : nq - 1) * (size_t)ldq;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int j = 0; j < kc; j++) {
                __m256 kv = load8(keys, f16, (size_t)j * (size_t)ld + (size_t)e0);
                a0 = _mm256_fmadd_ps(_mm256_set1_ps(q0[j]), kv, a0);
                a1 = _mm256_fmadd_ps(_mm256_set1_ps(q1[j]), kv, a1);
                a2 = _mm256_fmadd_ps(_mm256_set1_ps(q2[j]), kv, a2);
                a3 = _mm256_fmadd_ps(_mm256_set1_ps(q3[j]), kv, a3);
            }
            __m256 a[4] = {a0, a1, a2, a3};
            for (int r = 0; r < 4 && h0 + r < nq; r++) {
                _mm256_storeu_ps(out + (size_t)(h0 + r) * (size_t)ldo + (size_t)e0, a[r]);
                rmax[h0 + r] = _mm256_max_ps(rmax[h0 + r], a[r]);
                cm = _mm256_max_ps(cm, a[r]);
            }
        }
        if (col_max) _mm256_storeu_ps(col_max + e0, cm);
    }
    for (int h = 0; h < nq; h++) {
        float r = hmax8(rmax[h]);
        if (r > row_max[h]) row_max[h] = r;
    }
    ps_scalar(keys, f16 ? IG_DTYPE_F16 : IG_DTYPE_F32, ld, kc, e0, n, q, ldq, nq, out, ldo, col_max,
              row_max);
}

IG_TARGET_AVX2 static void ps_avx2(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t n,
                                   const float *q, int64_t ldq, int nq, float *out, int64_t ldo,
                                   float *col_max, float *row_max) {
    if (kt == IG_DTYPE_F16)
        ps_avx2_body(keys, 1, ld, kc, n, q, ldq, nq, out, ldo, col_max, row_max);
    else
        ps_avx2_body(keys, 0, ld, kc, n, q, ldq, nq, out, ldo, col_max, row_max);
}

IG_TARGET_AVX2 static int64_t count_greater_avx2(const float *x, int64_t n, float thr) {
    __m256 t = _mm256_set1_ps(thr);
    int64_t c = 0, i = 0;
    for (; i + 8 <= n; i += 8)
        c += __builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ)));
    return c + count_greater_scalar(x + i, n - i, thr);
}

#endif

void ig_cpu_partial_scores(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t n,
                           const float *q, int64_t ldq, int nq, float *out, int64_t ldo,
                           float *col_max, float *row_max) {
    IG_ASSERT(kt == IG_DTYPE_F32 || kt == IG_DTYPE_F16);
    IG_ASSERT(nq >= 1 && nq <= PS_MAX_ROWS && kc >= 0 && n >= 0 && ld >= n && ldo >= n);
    for (int h = 0; h < nq; h++) row_max[h] = -INFINITY;
#if IG_X86
    switch (ig_cpu_simd_level()) {
    case IG_SIMD_AVX512:
        ps_avx512(keys, kt, ld, kc, n, q, ldq, nq, out, ldo, col_max, row_max);
        return;
    case IG_SIMD_AVX2:
        ps_avx2(keys, kt, ld, kc, n, q, ldq, nq, out, ldo, col_max, row_max);
        return;
    default:
        break;
    }
#endif
    ps_scalar(keys, kt, ld, kc, 0, n, q, ldq, nq, out, ldo, col_max, row_max);
}

int64_t ig_cpu_count_greater(const float *x, int64_t n, float thr) {
#if IG_X86
    switch (ig_cpu_simd_level()) {
    case IG_SIMD_AVX512:
        return count_greater_avx512(x, n, thr);
    case IG_SIMD_AVX2:
        return count_greater_avx2(x, n, thr);
    default:
        break;
    }
#endif
    return count_greater_scalar(x, n, thr);
}

int64_t ig_cpu_indices_greater(const float *x, int64_t n, float thr, int32_t *out) {
#if IG_X86
    if (ig_cpu_simd_level() == IG_SIMD_AVX512) return indices_greater_avx512(x, n, thr, out);
#endif
    return indices_greater_scalar(x, 0, n, thr, out);
}

void ig_ref_partial_scores(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t n,
                           const float *q, int64_t ldq, int nq, float *out, int64_t ldo,
                           float *col_max, float *row_max) {
    for (int h = 0; h < nq; h++) row_max[h] = -INFINITY;
    for (int64_t e = 0; e < n; e++) {
        double cm = -INFINITY;
        for (int h = 0; h < nq; h++) {
            double s = 0;
            for (int j = 0; j < kc; j++) {
                size_t o = (size_t)j * (size_t)ld + (size_t)e;
                double k = kt == IG_DTYPE_F16 ? (double)ig_f16_to_f32(((const uint16_t *)keys)[o])
                                              : (double)((const float *)keys)[o];
                s += (double)q[(size_t)h * (size_t)ldq + (size_t)j] * k;
            }
            out[(size_t)h * (size_t)ldo + (size_t)e] = (float)s;
            cm = fmax(cm, s);
            if ((float)s > row_max[h]) row_max[h] = (float)s;
        }
        if (col_max) col_max[e] = (float)cm;
    }
}
