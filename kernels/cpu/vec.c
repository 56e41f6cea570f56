/* Vector primitives (dot, axpy, exp, widen f16/bf16 -> f32, ...) for each SIMD level: plain C, AVX2
 * + FMA + F16C, AVX-512. The per-ISA functions carry target attributes, so this file builds for any
 * x86-64 and the caller picks a table at run time. No allocation, no threads here. */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_internal.h"

/* ---- scalar ---------------------------------------------------------------------------------- */

static float dot_scalar(const float *a, const float *b, int64_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static void axpy_scalar(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static float max_scalar(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

static float sumsq_scalar(const float *x, int64_t n) {
    float s0 = 0, s1 = 0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        s0 += x[i] * x[i];
        s1 += x[i + 1] * x[i + 1];
    }
    for (; i < n; i++) s0 += x[i] * x[i];
    return s0 + s1;
}

static float exp_sub_sum_scalar(float *x, int64_t n, float m) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    return (float)s;
}

static double exp_sub_sum_f64_scalar(const float *x, int64_t n, float m) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)expf(x[i] - m);
    return s;
}

static void scale_scalar(float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

static void silu_mul_scalar(const float *g, const float *u, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* f16 -> f32 without a loop for subnormals (ig_f16_to_f32 normalises them bit by bit): normal
 * numbers by rebiasing the exponent, subnormals as mant * 2^-24 (exact), inf/NaN kept. Exact for
 * every input, and simple enough for the compiler to vectorise with plain SSE2. */
static inline float f16_to_f32_branchless(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t normal = sign | ((em + 0x1c000u) << 13); /* exponent + (127 - 15) */
    uint32_t infnan = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
    float sub = (float)(em & 0x3ffu) * 0x1p-24f;
    uint32_t subb;
    memcpy(&subb, &sub, 4);
    subb |= sign;
    uint32_t bits = em >= 0x7c00u ? infnan : em >= 0x400u ? normal : subb;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void widen_scalar(const void *src, ig_dtype type, int64_t n, float *dst) {
    if (type == IG_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (type == IG_DTYPE_F16) {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = f16_to_f32_branchless(s[i]);
    } else {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = ig_bf16_to_f32(s[i]);
    }
}

static void dot_rows_scalar(const float *q, const float *rows, int64_t n_rows, int64_t hd,
                            float scale, float *out) {
    for (int64_t j = 0; j < n_rows; j++) out[j] = scale * dot_scalar(q, rows + j * hd, hd);
}

static void wsum_rows_scalar(const float *p, const float *rows, int64_t n_rows, int64_t hd,
                             float *out) {
    memset(out, 0, (size_t)hd * sizeof(float));
    for (int64_t j = 0; j < n_rows; j++) axpy_scalar(out, p[j], rows + j * hd, hd);
}

static const ig_vec_ops k_vec_scalar = {
    /* .dot = */ dot_scalar,
    /* .axpy = */ axpy_scalar,
    /* .max = */ max_scalar,
    /* .sumsq = */ sumsq_scalar,
    /* .exp_sub_sum = */ exp_sub_sum_scalar,
    /* .exp_sub_sum_f64 = */ exp_sub_sum_f64_scalar,
    /* .scale = */ scale_scalar,
    /* .silu_mul = */ silu_mul_scalar,
    /* .widen = */ widen_scalar,
    /* .dot_rows = */ dot_rows_scalar,
    /* .wsum_rows = */ wsum_rows_scalar,
};

#if IG_X86

/* Cephes expf: exp(x) = 2^n * exp(r), r = x - n ln2 in [-ln2/2, ln2/2], degree-6 polynomial. */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_C1    0.693359375f
#define EXP_C2    -2.12194440e-4f
#define EXP_P0    1.9875691500e-4f
#define EXP_P1    1.3981999507e-3f
#define EXP_P2    8.3334519073e-3f
#define EXP_P3    4.1665795894e-2f
#define EXP_P4    1.6666665459e-1f
#define EXP_P5    5.0000001201e-1f

/* ---- AVX2 ------------------------------------------------------------------------------------ */

IG_TARGET_AVX2 IG_INLINE float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

IG_TARGET_AVX2 IG_INLINE __m256 exp256(__m256 x) {
    /* max/min return their second operand when one is NaN: NaN propagates through the clamp. */
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_C1), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_C2), r);
    __m256 p = _mm256_set1_ps(EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
    __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n as two factors 2^(n>>1) * 2^(n - n>>1), each a normal float for n in [-151, 129], so
     * results that overflow become inf and subnormal results are rounded once. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

IG_TARGET_AVX2 IG_INLINE __m256 load8_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

IG_TARGET_AVX2 IG_INLINE __m256 load8_bf16(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

IG_TARGET_AVX2 static float dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    if (i + 8 <= n) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        i += 8;
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

IG_TARGET_AVX2 static void axpy_avx2(float *y, float a, const float *x, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

IG_TARGET_AVX2 static float max_avx2(const float *x, int64_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    float buf[8];
    _mm256_storeu_ps(buf, m);
    float r = -INFINITY;
    for (int j = 0; j < 8; j++)
        if (buf[j] > r) r = buf[j];
    for (; i < n; i++)
        if (x[i] > r) r = x[i];
    return r;
}

IG_TARGET_AVX2 static float sumsq_avx2(const float *x, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += x[i] * x[i];
    return s;
}

/* Tails go through a padded 8-float buffer so that every element sees the same exp. */
IG_TARGET_AVX2 static float exp_sub_sum_avx2(float *x, int64_t n, float m) {
    __m256 mv = _mm256_set1_ps(m);
    __m256d acc = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double b4[4];
    _mm256_storeu_pd(b4, acc);
    double s = (b4[0] + b4[1]) + (b4[2] + b4[3]);
    if (i < n) {
        float buf[8];
        for (int j = 0; j < 8; j++) buf[j] = i + j < n ? x[i + j] - m : -INFINITY;
        _mm256_storeu_ps(buf, exp256(_mm256_loadu_ps(buf)));
        for (int j = 0; i + j < n; j++) {
            x[i + j] = buf[j];
            s += buf[j];
        }
    }
    return (float)s;
}

IG_TARGET_AVX2 static double exp_sub_sum_f64_avx2(const float *x, int64_t n, float m) {
    __m256 mv = _mm256_set1_ps(m);
    __m256d acc = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double b4[4];
    _mm256_storeu_pd(b4, acc);
    double s = (b4[0] + b4[1]) + (b4[2] + b4[3]);
    if (i < n) {
        float buf[8];
        for (int j = 0; j < 8; j++) buf[j] = i + j < n ? x[i + j] - m : -INFINITY;
        _mm256_storeu_ps(buf, exp256(_mm256_loadu_ps(buf)));
        for (int j = 0; i + j < n; j++) s += buf[j];
    }
    return s;
}

IG_TARGET_AVX2 static void scale_avx2(float *x, float s, int64_t n) {
    __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
    for (; i < n; i++) x[i] *= s;
}

IG_TARGET_AVX2 IG_INLINE __m256 silu_mul8(__m256 g, __m256 u) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

IG_TARGET_AVX2 static void silu_mul_avx2(const float *g, const float *u, int64_t n, float *out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float bg[8] = {0}, bu[8] = {0}, bo[8];
        for (int j = 0; i + j < n; j++) {
            bg[j] = g[i + j];
            bu[j] = u[i + j];
        }
        _mm256_storeu_ps(bo, silu_mul8(_mm256_loadu_ps(bg), _mm256_loadu_ps(bu)));
        for (int j = 0; i + j < n; j++) out[i + j] = bo[j];
    }
}

IG_TARGET_AVX2 static void widen_avx2(const void *src, ig_dtype type, int64_t n, float *dst) {
    if (type == IG_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    int64_t i = 0;
    if (type == IG_DTYPE_F16) {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_f16(s + i));
        for (; i < n; i++) dst[i] = ig_f16_to_f32(s[i]);
    } else {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_bf16(s + i));
        for (; i < n; i++) dst[i] = ig_bf16_to_f32(s[i]);
    }
}

/* Four rows at a time share each load of q; their four sums come out of one hadd tree. */
IG_TARGET_AVX2 IG_INLINE __m128 hsum4x256(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

IG_TARGET_AVX2 static void dot_rows_avx2(const float *q, const float *rows, int64_t n_rows,
                                         int64_t hd, float scale, float *out) {
    int64_t j = 0;
    int64_t hv = hd & ~(int64_t)7;
    __m128 sv = _mm_set1_ps(scale);
    for (; j + 4 <= n_rows; j += 4) {
        const float *r0 = rows + j * hd, *r1 = r0 + hd, *r2 = r1 + hd, *r3 = r2 + hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int64_t d = 0; d < hv; d += 8) {
            __m256 qv = _mm256_loadu_ps(q + d);
            a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r0 + d), a0);
            a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r1 + d), a1);
            a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r2 + d), a2);
            a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r3 + d), a3);
        }
        __m128 s4 = hsum4x256(a0, a1, a2, a3);
        if (hv < hd) {
            float t[4] = {0, 0, 0, 0};
            for (int64_t d = hv; d < hd; d++) {
                t[0] += q[d] * r0[d];
                t[1] += q[d] * r1[d];
                t[2] += q[d] * r2[d];
                t[3] += q[d] * r3[d];
            }
            s4 = _mm_add_ps(s4, _mm_loadu_ps(t));
        }
        _mm_storeu_ps(out + j, _mm_mul_ps(s4, sv));
    }
    for (; j < n_rows; j++) {
        const float *r0 = rows + j * hd;
        __m256 a0 = _mm256_setzero_ps();
        for (int64_t d = 0; d < hv; d += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(r0 + d), a0);
        float s0 = hsum256(a0);
        for (int64_t d = hv; d < hd; d++) s0 += q[d] * r0[d];
        out[j] = scale * s0;
    }
}

/* out = sum_j p[j] rows[j], 32 columns at a time held in registers across all rows; two rows per
 * step into two sets of accumulators, so that the FMA latency is hidden. */
IG_TARGET_AVX2 static void wsum_rows_avx2(const float *p, const float *rows, int64_t n_rows,
                                          int64_t hd, float *out) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
        __m256 e0 = o0, e1 = o0, e2 = o0, e3 = o0;
        int64_t j = 0;
        for (; j + 2 <= n_rows; j += 2) {
            const float *r = rows + j * hd + d, *s = r + hd;
            __m256 pj = _mm256_set1_ps(p[j]), pk = _mm256_set1_ps(p[j + 1]);
            o0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r), o0);
            o1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r + 8), o1);
            o2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r + 16), o2);
            o3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r + 24), o3);
            e0 = _mm256_fmadd_ps(pk, _mm256_loadu_ps(s), e0);
            e1 = _mm256_fmadd_ps(pk, _mm256_loadu_ps(s + 8), e1);
            e2 = _mm256_fmadd_ps(pk, _mm256_loadu_ps(s + 16), e2);
            e3 = _mm256_fmadd_ps(pk, _mm256_loadu_ps(s + 24), e3);
        }
        if (j < n_rows) {
            const float *r = rows + j * hd + d;
            __m256 pj = _mm256_set1_ps(p[j]);
            o0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r), o0);
            o1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r + 8), o1);
            o2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r + 16), o2);
            o3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r + 24), o3);
        }
        _mm256_storeu_ps(out + d, _mm256_add_ps(o0, e0));
        _mm256_storeu_ps(out + d + 8, _mm256_add_ps(o1, e1));
        _mm256_storeu_ps(out + d + 16, _mm256_add_ps(o2, e2));
        _mm256_storeu_ps(out + d + 24, _mm256_add_ps(o3, e3));
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 o0 = _mm256_setzero_ps();
        for (int64_t j = 0; j < n_rows; j++)
            o0 = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(rows + j * hd + d), o0);
        _mm256_storeu_ps(out + d, o0);
    }
    for (; d < hd; d++) {
        float o = 0;
        for (int64_t j = 0; j < n_rows; j++) o += p[j] * rows[j * hd + d];
        out[d] = o;
    }
}

static const ig_vec_ops k_vec_avx2 = {
    /* .dot = */ dot_avx2,
    /* .axpy = */ axpy_avx2,
    /* .max = */ max_avx2,
    /* .sumsq = */ sumsq_avx2,
    /* .exp_sub_sum = */ exp_sub_sum_avx2,
    /* .exp_sub_sum_f64 = */ exp_sub_sum_f64_avx2,
    /* .scale = */ scale_avx2,
    /* .silu_mul = */ silu_mul_avx2,
    /* .widen = */ widen_avx2,
    /* .dot_rows = */ dot_rows_avx2,
    /* .wsum_rows = */ wsum_rows_avx2,
};

/* ---- AVX-512 --------------------------------------------------------------------------------- */

IG_TARGET_AVX512 IG_INLINE __mmask16 tail_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

IG_TARGET_AVX512 IG_INLINE __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_C1), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_C2), r);
    __m512 p = _mm512_set1_ps(EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
    __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, n); /* y * 2^n with IEEE overflow and gradual underflow */
}

IG_TARGET_AVX512 static float dot_avx512(const float *a, const float *b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 k = tail_mask16(n - i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

IG_TARGET_AVX512 static void axpy_avx512(float *y, float a, const float *x, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask16(n - i);
        __m512 r =
            _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i));
        _mm512_mask_storeu_ps(y + i, k, r);
    }
}

IG_TARGET_AVX512 static float max_avx512(const float *x, int64_t n) {
    __m512 ninf = _mm512_set1_ps(-INFINITY), m = ninf;
    for (int64_t i = 0; i < n; i += 16)
        m = _mm512_max_ps(m, _mm512_mask_loadu_ps(ninf, tail_mask16(n - i), x + i));
    return _mm512_reduce_max_ps(m);
}

IG_TARGET_AVX512 static float sumsq_avx512(const float *x, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        s0 = _mm512_fmadd_ps(a, a, s0);
        s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < n; i += 16) {
        __m512 a = _mm512_maskz_loadu_ps(tail_mask16(n - i), x + i);
        s0 = _mm512_fmadd_ps(a, a, s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

IG_TARGET_AVX512 static float exp_sub_sum_avx512(float *x, int64_t n, float m) {
    __m512 mv = _mm512_set1_ps(m);
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask16(n - i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv));
        e = _mm512_maskz_mov_ps(k, e);
        _mm512_mask_storeu_ps(x + i, k, e);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    return (float)_mm512_reduce_add_pd(acc);
}

IG_TARGET_AVX512 static double exp_sub_sum_f64_avx512(const float *x, int64_t n, float m) {
    __m512 mv = _mm512_set1_ps(m);
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask16(n - i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv));
        e = _mm512_maskz_mov_ps(k, e);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    return _mm512_reduce_add_pd(acc);
}

IG_TARGET_AVX512 static void scale_avx512(float *x, float s, int64_t n) {
    __m512 sv = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask16(n - i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sv));
    }
}

IG_TARGET_AVX512 static void silu_mul_avx512(const float *g, const float *u, int64_t n,
                                             float *out) {
    __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask16(n - i);
        __m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        __m512 r = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), uv);
        _mm512_mask_storeu_ps(out + i, k, r);
    }
}

IG_TARGET_AVX512 static void widen_avx512(const void *src, ig_dtype type, int64_t n, float *dst) {
    if (type == IG_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask16(n - i);
        __m256i h = _mm256_maskz_loadu_epi16(k, s + i);
        __m512 f = type == IG_DTYPE_F16
                       ? _mm512_cvtph_ps(h)
                       : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        _mm512_mask_storeu_ps(dst + i, k, f);
    }
}

/* The four sums of a0..a3 as one vector: two rounds of 128-bit block shuffles, then in-lane adds.
 */
IG_TARGET_AVX512 IG_INLINE __m128 hsum4x512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 t0 =
        _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xee));
    __m512 t1 =
        _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xee));
    /* u: 128-bit block b holds 4 partial sums of row b */
    __m512 u =
        _mm512_add_ps(_mm512_shuffle_f32x4(t0, t1, 0x88), _mm512_shuffle_f32x4(t0, t1, 0xdd));
    /* 4x4 transpose-and-add inside the 512 bits: hadd within 256-bit halves, then fold */
    __m256 lo = _mm512_castps512_ps256(u), hi = _mm512_extractf32x8_ps(u, 1);
    __m256 h = _mm256_hadd_ps(lo, hi); /* (r0 r0 r2 r2 | r1 r1 r3 r3) pairs */
    h = _mm256_hadd_ps(h, h);          /* (r0 r2 r0 r2 | r1 r3 r1 r3) */
    __m128 a = _mm256_castps256_ps128(h), b = _mm256_extractf128_ps(h, 1);
    return _mm_unpacklo_ps(a, b); /* (r0 r1 r2 r3) */
}

IG_TARGET_AVX512 static void dot_rows_avx512(const float *q, const float *rows, int64_t n_rows,
                                             int64_t hd, float scale, float *out) {
    int64_t j = 0;
    int64_t hv = hd & ~(int64_t)15;
    __mmask16 kt = tail_mask16(hd - hv);
    __m128 sv = _mm_set1_ps(scale);
    for (; j + 4 <= n_rows; j += 4) {
        const float *r0 = rows + j * hd, *r1 = r0 + hd, *r2 = r1 + hd, *r3 = r2 + hd;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
        for (int64_t d = 0; d < hv; d += 16) {
            __m512 qv = _mm512_loadu_ps(q + d);
            a0 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(r0 + d), a0);
            a1 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(r1 + d), a1);
            a2 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(r2 + d), a2);
            a3 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(r3 + d), a3);
        }
        if (hv < hd) {
            __m512 qv = _mm512_maskz_loadu_ps(kt, q + hv);
            a0 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(kt, r0 + hv), a0);
            a1 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(kt, r1 + hv), a1);
            a2 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(kt, r2 + hv), a2);
            a3 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(kt, r3 + hv), a3);
        }
        _mm_storeu_ps(out + j, _mm_mul_ps(hsum4x512(a0, a1, a2, a3), sv));
    }
    for (; j < n_rows; j++) {
        const float *r0 = rows + j * hd;
        __m512 a0 = _mm512_setzero_ps();
        for (int64_t d = 0; d < hd; d += 16) {
            __mmask16 k = tail_mask16(hd - d);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, q + d), _mm512_maskz_loadu_ps(k, r0 + d),
                                 a0);
        }
        out[j] = scale * _mm512_reduce_add_ps(a0);
    }
}

/* out = sum_j p[j] rows[j]: 64 columns in registers, two rows per step into two accumulator sets.
 */
IG_TARGET_AVX512 static void wsum_rows_avx512(const float *p, const float *rows, int64_t n_rows,
                                              int64_t hd, float *out) {
    int64_t d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m512 o0 = _mm512_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
        __m512 e0 = o0, e1 = o0, e2 = o0, e3 = o0;
        int64_t j = 0;
        for (; j + 2 <= n_rows; j += 2) {
            const float *r = rows + j * hd + d, *s = r + hd;
            __m512 pj = _mm512_set1_ps(p[j]), pk = _mm512_set1_ps(p[j + 1]);
            o0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r), o0);
            o1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 16), o1);
            o2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 32), o2);
            o3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 48), o3);
            e0 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(s), e0);
            e1 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(s + 16), e1);
            e2 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(s + 32), e2);
            e3 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(s + 48), e3);
        }
        if (j < n_rows) {
            const float *r = rows + j * hd + d;
            __m512 pj = _mm512_set1_ps(p[j]);
            o0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r), o0);
            o1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 16), o1);
            o2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 32), o2);
            o3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 48), o3);
        }
        _mm512_storeu_ps(out + d, _mm512_add_ps(o0, e0));
        _mm512_storeu_ps(out + d + 16, _mm512_add_ps(o1, e1));
        _mm512_storeu_ps(out + d + 32, _mm512_add_ps(o2, e2));
        _mm512_storeu_ps(out + d + 48, _mm512_add_ps(o3, e3));
    }
    for (; d < hd; d += 16) {
        __mmask16 k = tail_mask16(hd - d);
        __m512 o0 = _mm512_setzero_ps(), e0 = o0;
        int64_t j = 0;
        for (; j + 2 <= n_rows; j += 2) {
            o0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(k, rows + j * hd + d),
                                 o0);
            e0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 1]),
                                 _mm512_maskz_loadu_ps(k, rows + (j + 1) * hd + d), e0);
        }
        if (j < n_rows)
            o0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(k, rows + j * hd + d),
                                 o0);
        _mm512_mask_storeu_ps(out + d, k, _mm512_add_ps(o0, e0));
    }
}

static const ig_vec_ops k_vec_avx512 = {
    /* .dot = */ dot_avx512,
    /* .axpy = */ axpy_avx512,
    /* .max = */ max_avx512,
    /* .sumsq = */ sumsq_avx512,
    /* .exp_sub_sum = */ exp_sub_sum_avx512,
    /* .exp_sub_sum_f64 = */ exp_sub_sum_f64_avx512,
    /* .scale = */ scale_avx512,
    /* .silu_mul = */ silu_mul_avx512,
    /* .widen = */ widen_avx512,
    /* .dot_rows = */ dot_rows_avx512,
    /* .wsum_rows = */ wsum_rows_avx512,
};

#endif /* IG_X86 */

const ig_vec_ops *ig_cpu_vec_ops(ig_simd_level level) {
#if IG_X86
    if (level == IG_SIMD_AVX512) return &k_vec_avx512;
    if (level == IG_SIMD_AVX2) return &k_vec_avx2;
#else
    (void)level;
#endif
    return &k_vec_scalar;
}

void ig_cpu_softmax_row(const ig_vec_ops *v, float *x, int64_t n) {
    if (n <= 0) return;
    float m = v->max(x, n);
    if (m == -INFINITY) { /* every entry masked: no mass anywhere */
        memset(x, 0, (size_t)n * sizeof(float));
        return;
    }
    float s = v->exp_sub_sum(x, n, m);
    v->scale(x, 1.0f / s, n);
}
