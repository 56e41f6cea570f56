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

static size_t row_elem_size(ig_dtype t) {
    return t == IG_DTYPE_F32 ? 4 : 2;
}

/* Element i of a row of type t as f32 (exact). */
static inline float row_elem(const void *row, int64_t i, ig_dtype t) {
    if (t == IG_DTYPE_F32) return ((const float *)row)[i];
    uint16_t h = ((const uint16_t *)row)[i];
    return t == IG_DTYPE_F16 ? f16_to_f32_branchless(h) : ig_bf16_to_f32(h);
}

/* Narrow rows are widened once per row, in pieces of ROW_PIECE, and shared by every head. */
#define ROW_PIECE 256

static void dot_rows_scalar(const float *const *q, int nh, const void *rows, ig_dtype t,
                            int64_t stride, int64_t n_rows, int64_t hd, float scale,
                            float *const *out) {
    size_t rb = (size_t)stride * row_elem_size(t);
    float buf[ROW_PIECE];
    for (int64_t j = 0; j < n_rows; j++) {
        const char *r = (const char *)rows + (size_t)j * rb;
        if (t == IG_DTYPE_F32) {
            for (int h = 0; h < nh; h++) out[h][j] = scale * dot_scalar(q[h], (const float *)r, hd);
            continue;
        }
        float acc[IG_ROWS_MAX_HEADS] = {0};
        for (int64_t d0 = 0; d0 < hd; d0 += ROW_PIECE) {
            int64_t n = hd - d0 < ROW_PIECE ? hd - d0 : ROW_PIECE;
            widen_scalar(r + (size_t)d0 * 2, t, n, buf);
            for (int h = 0; h < nh; h++) acc[h] += dot_scalar(q[h] + d0, buf, n);
        }
        for (int h = 0; h < nh; h++) out[h][j] = scale * acc[h];
    }
}

static void wsum_rows_scalar(const float *const *p, int nh, const void *rows, ig_dtype t,
                             int64_t stride, int64_t n_rows, int64_t hd, float *const *out) {
    size_t rb = (size_t)stride * row_elem_size(t);
    float buf[ROW_PIECE];
    for (int h = 0; h < nh; h++) memset(out[h], 0, (size_t)hd * sizeof(float));
    for (int64_t j = 0; j < n_rows; j++) {
        const char *r = (const char *)rows + (size_t)j * rb;
        for (int64_t d0 = 0; d0 < hd; d0 += ROW_PIECE) {
            int64_t n = hd - d0 < ROW_PIECE ? hd - d0 : ROW_PIECE;
            const float *x = (const float *)r + d0;
            if (t != IG_DTYPE_F32) {
                widen_scalar(r + (size_t)d0 * 2, t, n, buf);
                x = buf;
            }
            for (int h = 0; h < nh; h++) axpy_scalar(out[h] + d0, p[h][j], x, n);
        }
    }
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
    float s = ig_hsum8(_mm256_add_ps(s0, s1));
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
    float s = ig_hsum8(_mm256_add_ps(s0, s1));
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

/* 8 elements of a row of type t (a compile-time constant where this is inlined) as f32. */
IG_TARGET_AVX2 IG_INLINE __m256 ld8_row(const char *row, int64_t i, ig_dtype t) {
    if (t == IG_DTYPE_F32) return _mm256_loadu_ps((const float *)row + i);
    if (t == IG_DTYPE_F16) return load8_f16((const uint16_t *)row + i);
    return load8_bf16((const uint16_t *)row + i);
}

/* Up to two heads (the 16 ymm registers hold 4 rows x 2 heads of sums). Rows four at a time. */
IG_TARGET_AVX2 IG_INLINE void dot_rows8_k(const float *const *q, const int nh, const char *rows,
                                          const ig_dtype t, size_t rb, int64_t n_rows, int64_t hd,
                                          float scale, float *const *out) {
    int64_t hv = hd & ~(int64_t)7;
    __m128 sv = _mm_set1_ps(scale);
    int64_t j = 0;
    for (; j + 4 <= n_rows; j += 4) {
        const char *r[4];
        IG_UNROLL(4)
        for (int i = 0; i < 4; i++) r[i] = rows + (size_t)(j + i) * rb;
        __m256 a[2][4];
        IG_UNROLL(2)
        for (int h = 0; h < nh; h++) {
            IG_UNROLL(4)
            for (int i = 0; i < 4; i++) a[h][i] = _mm256_setzero_ps();
        }
        for (int64_t d = 0; d < hv; d += 8) {
            __m256 x[4];
            IG_UNROLL(4)
            for (int i = 0; i < 4; i++) x[i] = ld8_row(r[i], d, t);
            IG_UNROLL(2)
            for (int h = 0; h < nh; h++) {
                __m256 qv = _mm256_loadu_ps(q[h] + d);
                IG_UNROLL(4)
                for (int i = 0; i < 4; i++) a[h][i] = _mm256_fmadd_ps(qv, x[i], a[h][i]);
            }
        }
        IG_UNROLL(2)
        for (int h = 0; h < nh; h++) {
            __m128 s4 = hsum4x256(a[h][0], a[h][1], a[h][2], a[h][3]);
            if (hv < hd) {
                float tl[4] = {0, 0, 0, 0};
                for (int i = 0; i < 4; i++)
                    for (int64_t d = hv; d < hd; d++) tl[i] += q[h][d] * row_elem(r[i], d, t);
                s4 = _mm_add_ps(s4, _mm_loadu_ps(tl));
            }
            _mm_storeu_ps(out[h] + j, _mm_mul_ps(s4, sv));
        }
    }
    for (; j < n_rows; j++) {
        const char *r0 = rows + (size_t)j * rb;
        IG_UNROLL(2)
        for (int h = 0; h < nh; h++) {
            __m256 a0 = _mm256_setzero_ps();
            for (int64_t d = 0; d < hv; d += 8)
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + d), ld8_row(r0, d, t), a0);
            float s0 = ig_hsum8(a0);
            for (int64_t d = hv; d < hd; d++) s0 += q[h][d] * row_elem(r0, d, t);
            out[h][j] = scale * s0;
        }
    }
}

/* out[h] = sum_j p[h][j] row_j, 32 columns at a time held in registers across all rows. One head:
 * two rows per step into two sets of accumulators, so that the FMA latency is hidden; two heads
 * give that independence by themselves. */
IG_TARGET_AVX2 IG_INLINE void wsum_rows8_k(const float *const *p, const int nh, const char *rows,
                                           const ig_dtype t, size_t rb, int64_t n_rows, int64_t hd,
                                           float *const *out) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 o[2][4], e[4];
        IG_UNROLL(2)
        for (int h = 0; h < nh; h++) {
            IG_UNROLL(4)
            for (int c = 0; c < 4; c++) o[h][c] = _mm256_setzero_ps();
        }
        IG_UNROLL(4)
        for (int c = 0; c < 4; c++) e[c] = _mm256_setzero_ps();
        int64_t j = 0;
        if (nh == 1)
            for (; j + 2 <= n_rows; j += 2) {
                const char *r = rows + (size_t)j * rb, *s = r + rb;
                __m256 pj = _mm256_set1_ps(p[0][j]), pk = _mm256_set1_ps(p[0][j + 1]);
                IG_UNROLL(4)
                for (int c = 0; c < 4; c++) {
                    o[0][c] = _mm256_fmadd_ps(pj, ld8_row(r, d + 8 * c, t), o[0][c]);
                    e[c] = _mm256_fmadd_ps(pk, ld8_row(s, d + 8 * c, t), e[c]);
                }
            }
        for (; j < n_rows; j++) {
            const char *r = rows + (size_t)j * rb;
            __m256 x[4];
            IG_UNROLL(4)
            for (int c = 0; c < 4; c++) x[c] = ld8_row(r, d + 8 * c, t);
            IG_UNROLL(2)
            for (int h = 0; h < nh; h++) {
                __m256 ph = _mm256_set1_ps(p[h][j]);
                IG_UNROLL(4)
                for (int c = 0; c < 4; c++) o[h][c] = _mm256_fmadd_ps(ph, x[c], o[h][c]);
            }
        }
        IG_UNROLL(2)
        for (int h = 0; h < nh; h++) {
            IG_UNROLL(4)
            for (int c = 0; c < 4; c++)
                _mm256_storeu_ps(out[h] + d + 8 * c,
                                 h == 0 ? _mm256_add_ps(o[0][c], e[c]) : o[h][c]);
        }
    }
    for (; d + 8 <= hd; d += 8) {
        IG_UNROLL(2)
        for (int h = 0; h < nh; h++) {
            __m256 o0 = _mm256_setzero_ps();
            for (int64_t j = 0; j < n_rows; j++)
                o0 = _mm256_fmadd_ps(_mm256_set1_ps(p[h][j]), ld8_row(rows + (size_t)j * rb, d, t),
                                     o0);
            _mm256_storeu_ps(out[h] + d, o0);
        }
    }
    for (; d < hd; d++)
        for (int h = 0; h < nh; h++) {
            float o = 0;
            for (int64_t j = 0; j < n_rows; j++)
                o += p[h][j] * row_elem(rows + (size_t)j * rb, d, t);
            out[h][d] = o;
        }
}

/* One instance per row type and head count (1 or 2); more heads go two at a time. */
#define ROWS8_INSTANCES(T, TN)                                                                     \
    IG_TARGET_AVX2 static void dot_rows8_##TN(const float *const *q, int nh, const char *rows,     \
                                              size_t rb, int64_t n, int64_t hd, float scale,       \
                                              float *const *out) {                                 \
        for (int h = 0; h < nh; h += 2) {                                                          \
            if (nh - h >= 2)                                                                       \
                dot_rows8_k(q + h, 2, rows, T, rb, n, hd, scale, out + h);                         \
            else                                                                                   \
                dot_rows8_k(q + h, 1, rows, T, rb, n, hd, scale, out + h);                         \
        }                                                                                          \
    }                                                                                              \
    IG_TARGET_AVX2 static void wsum_rows8_##TN(const float *const *p, int nh, const char *rows,    \
                                               size_t rb, int64_t n, int64_t hd,                   \
                                               float *const *out) {                                \
        for (int h = 0; h < nh; h += 2) {                                                          \
            if (nh - h >= 2)                                                                       \
                wsum_rows8_k(p + h, 2, rows, T, rb, n, hd, out + h);                               \
            else                                                                                   \
                wsum_rows8_k(p + h, 1, rows, T, rb, n, hd, out + h);                               \
        }                                                                                          \
    }
ROWS8_INSTANCES(IG_DTYPE_F32, f32)
ROWS8_INSTANCES(IG_DTYPE_F16, f16)
ROWS8_INSTANCES(IG_DTYPE_BF16, bf16)

static void dot_rows_avx2(const float *const *q, int nh, const void *rows, ig_dtype t,
                          int64_t stride, int64_t n_rows, int64_t hd, float scale,
                          float *const *out) {
    size_t rb = (size_t)stride * row_elem_size(t);
    if (t == IG_DTYPE_F32)
        dot_rows8_f32(q, nh, rows, rb, n_rows, hd, scale, out);
    else if (t == IG_DTYPE_F16)
        dot_rows8_f16(q, nh, rows, rb, n_rows, hd, scale, out);
    else
        dot_rows8_bf16(q, nh, rows, rb, n_rows, hd, scale, out);
}

static void wsum_rows_avx2(const float *const *p, int nh, const void *rows, ig_dtype t,
                           int64_t stride, int64_t n_rows, int64_t hd, float *const *out) {
    size_t rb = (size_t)stride * row_elem_size(t);
    if (t == IG_DTYPE_F32)
        wsum_rows8_f32(p, nh, rows, rb, n_rows, hd, out);
    else if (t == IG_DTYPE_F16)
        wsum_rows8_f16(p, nh, rows, rb, n_rows, hd, out);
    else
        wsum_rows8_bf16(p, nh, rows, rb, n_rows, hd, out);
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

/* Row r's four 128-bit partial sums moved into 128-bit lane r: lane r of the result holds four
 * partials of a_r (two rounds of 128-bit block shuffles). */
IG_TARGET_AVX512 IG_INLINE __m512 rows_to_lanes(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 t0 =
        _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xee));
    __m512 t1 =
        _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(t0, t1, 0x88), _mm512_shuffle_f32x4(t0, t1, 0xdd));
}

/* The sums of four rows for two heads at once (a: ua, b: ub from rows_to_lanes), times scale:
 * in-lane transposes finish both heads with 512-bit operations, then one permute puts head a's four
 * sums in the low 128 bits and head b's in the next. */
IG_TARGET_AVX512 IG_INLINE __m512 finish_pair(__m512 ua, __m512 ub, __m512 sv) {
    __m512 w = _mm512_add_ps(_mm512_unpacklo_ps(ua, ub), _mm512_unpackhi_ps(ua, ub));
    w = _mm512_add_ps(w, _mm512_permute_ps(w, 0x4e)); /* lane r: (A_r, B_r, A_r, B_r) */
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 4, 8, 12, 1, 5, 9, 13);
    return _mm512_mul_ps(_mm512_permutexvar_ps(idx, w), sv);
}

/* 16 elements of a row of type t (a compile-time constant where this is inlined) as f32; the
 * masked form reads only the lanes in k. */
IG_TARGET_AVX512 IG_INLINE __m512 ld16_row(const char *row, int64_t i, ig_dtype t) {
    if (t == IG_DTYPE_F32) return _mm512_loadu_ps((const float *)row + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
    if (t == IG_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

IG_TARGET_AVX512 IG_INLINE __m512 ld16m_row(const char *row, int64_t i, ig_dtype t, __mmask16 k) {
    if (t == IG_DTYPE_F32) return _mm512_maskz_loadu_ps(k, (const float *)row + i);
    __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)row + i);
    if (t == IG_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Software prefetch distance of the row kernels below (dot_rows / wsum_rows over contiguous KV
 * rows, the dense decode attention), in bytes of rows ahead of the row being read: the hardware
 * prefetchers alone left the attention short of the read bandwidth, as they did the GEMV
 * (linear.c). Past the last row it names addresses that are never loaded, which a prefetch may:
 * kept as an integer so that no pointer leaves the object. `igen bench-decode --policy full
 * --batch 8 --prompt-len 512 --gen-len 64 --random` on the project's 2-core EPYC VM, alternating:
 * with a throwaway switch, attention 10.1-10.4 ms a step without it, 7.3-8.2 with 2048 or 4096
 * bytes (4 of 4 rounds each; decode 254-271 -> 270-289 tok/s); builds without and with it, in a
 * faster window, 7.2-8.4 -> 6.6-7.5 ms (4 of 4; decode alike). Behind a 12 GB/s link (the
 * quickstart's setting) the step waits on the link and decode is unchanged. Not in the gathered-row
 * kernels (attention_gather.c): there the same prefetch (a throwaway change, measured with the
 * probes `igen profile-hw --kernel-shape 9,3,64` reports, ig_cpu_measure_attention_gbps) helped
 * rows read in order and slowed scattered ones (every fifth row of 1 GiB) by half in two rounds of
 * three. */
#define ROWS_PF_BYTES 4096

/* Prefetches the lines of [p, p + n). */
IG_TARGET_AVX512 IG_INLINE void pf_span(uintptr_t p, size_t n) {
    for (size_t c = 0; c < n; c += 64) _mm_prefetch((const char *)(p + c), _MM_HINT_T0);
    if (n) _mm_prefetch((const char *)(p + n - 1), _MM_HINT_T0);
}

/* Four rows at a time against up to four heads: each row vector is loaded (and widened) once for
 * every head; 16 sums in registers, reduced four at a time. */
IG_TARGET_AVX512 IG_INLINE void dot_rows16_k(const float *const *q, const int nh, const char *rows,
                                             const ig_dtype t, size_t rb, int64_t n_rows,
                                             int64_t hd, float scale, float *const *out) {
    int64_t hv = hd & ~(int64_t)15;
    __mmask16 kt = tail_mask16(hd - hv);
    __m512 sv512 = _mm512_set1_ps(scale);
    const size_t es = t == IG_DTYPE_F32 ? 4 : 2, bytes = (size_t)hd * es;
    const size_t pd = rb ? (ROWS_PF_BYTES + rb - 1) / rb : 0; /* rows ahead */
    int64_t j = 0;
    for (; j + 4 <= n_rows; j += 4) {
        const char *r[4];
        IG_UNROLL(4)
        for (int i = 0; i < 4; i++) r[i] = rows + (size_t)(j + i) * rb;
        if (pd)
            for (int i = 0; i < 4; i++) pf_span((uintptr_t)r[i] + pd * rb, bytes);
        __m512 a[4][4];
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) {
            IG_UNROLL(4)
            for (int i = 0; i < 4; i++) a[h][i] = _mm512_setzero_ps();
        }
        for (int64_t d = 0; d < hv; d += 16) {
            __m512 x[4];
            IG_UNROLL(4)
            for (int i = 0; i < 4; i++) x[i] = ld16_row(r[i], d, t);
            IG_UNROLL(4)
            for (int h = 0; h < nh; h++) {
                __m512 qv = _mm512_loadu_ps(q[h] + d);
                IG_UNROLL(4)
                for (int i = 0; i < 4; i++) a[h][i] = _mm512_fmadd_ps(qv, x[i], a[h][i]);
            }
        }
        if (hv < hd) {
            __m512 x[4];
            IG_UNROLL(4)
            for (int i = 0; i < 4; i++) x[i] = ld16m_row(r[i], hv, t, kt);
            IG_UNROLL(4)
            for (int h = 0; h < nh; h++) {
                __m512 qv = _mm512_maskz_loadu_ps(kt, q[h] + hv);
                IG_UNROLL(4)
                for (int i = 0; i < 4; i++) a[h][i] = _mm512_fmadd_ps(qv, x[i], a[h][i]);
            }
        }
        __m512 u[4];
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) u[h] = rows_to_lanes(a[h][0], a[h][1], a[h][2], a[h][3]);
        IG_UNROLL(2)
        for (int h = 0; h < nh; h += 2) {
            __m512 f = finish_pair(u[h], h + 1 < nh ? u[h + 1] : u[h], sv512);
            _mm_storeu_ps(out[h] + j, _mm512_castps512_ps128(f));
            if (h + 1 < nh) _mm_storeu_ps(out[h + 1] + j, _mm512_extractf32x4_ps(f, 1));
        }
    }
    for (; j < n_rows; j++) {
        const char *r0 = rows + (size_t)j * rb;
        __m512 a[4];
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) a[h] = _mm512_setzero_ps();
        for (int64_t d = 0; d < hd; d += 16) {
            __mmask16 k = tail_mask16(hd - d);
            __m512 x = ld16m_row(r0, d, t, k);
            IG_UNROLL(4)
            for (int h = 0; h < nh; h++)
                a[h] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, q[h] + d), x, a[h]);
        }
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) out[h][j] = scale * _mm512_reduce_add_ps(a[h]);
    }
}

/* out[h] = sum_j p[h][j] row_j: 64 columns of every head in registers, each row vector loaded once
 * for all heads. One or two heads: two rows per step into two accumulator sets (FMA latency). */
IG_TARGET_AVX512 IG_INLINE void wsum_rows16_k(const float *const *p, const int nh, const char *rows,
                                              const ig_dtype t, size_t rb, int64_t n_rows,
                                              int64_t hd, float *const *out) {
    const size_t es = t == IG_DTYPE_F32 ? 4 : 2;
    const size_t pd = rb ? (ROWS_PF_BYTES + rb - 1) / rb : 0; /* rows ahead */
    int64_t d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m512 o[4][4], e[2][4];
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) {
            IG_UNROLL(4)
            for (int c = 0; c < 4; c++) o[h][c] = _mm512_setzero_ps();
        }
        IG_UNROLL(2)
        for (int h = 0; h < 2; h++) {
            IG_UNROLL(4)
            for (int c = 0; c < 4; c++) e[h][c] = _mm512_setzero_ps();
        }
        int64_t j = 0;
        if (nh <= 2)
            for (; j + 2 <= n_rows; j += 2) {
                const char *r = rows + (size_t)j * rb, *s = r + rb;
                if (pd) {
                    pf_span((uintptr_t)r + pd * rb + (size_t)d * es, 64 * es);
                    pf_span((uintptr_t)s + pd * rb + (size_t)d * es, 64 * es);
                }
                __m512 x[4], y[4];
                IG_UNROLL(4)
                for (int c = 0; c < 4; c++) {
                    x[c] = ld16_row(r, d + 16 * c, t);
                    y[c] = ld16_row(s, d + 16 * c, t);
                }
                IG_UNROLL(2)
                for (int h = 0; h < nh && h < 2; h++) {
                    __m512 pj = _mm512_set1_ps(p[h][j]), pk = _mm512_set1_ps(p[h][j + 1]);
                    IG_UNROLL(4)
                    for (int c = 0; c < 4; c++) {
                        o[h][c] = _mm512_fmadd_ps(pj, x[c], o[h][c]);
                        e[h][c] = _mm512_fmadd_ps(pk, y[c], e[h][c]);
                    }
                }
            }
        for (; j < n_rows; j++) {
            const char *r = rows + (size_t)j * rb;
            if (pd) pf_span((uintptr_t)r + pd * rb + (size_t)d * es, 64 * es);
            __m512 x[4];
            IG_UNROLL(4)
            for (int c = 0; c < 4; c++) x[c] = ld16_row(r, d + 16 * c, t);
            IG_UNROLL(4)
            for (int h = 0; h < nh; h++) {
                __m512 ph = _mm512_set1_ps(p[h][j]);
                IG_UNROLL(4)
                for (int c = 0; c < 4; c++) o[h][c] = _mm512_fmadd_ps(ph, x[c], o[h][c]);
            }
        }
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) {
            IG_UNROLL(4)
            for (int c = 0; c < 4; c++)
                _mm512_storeu_ps(out[h] + d + 16 * c, _mm512_add_ps(o[h][c], e[h & 1][c]));
        }
    }
    for (; d < hd; d += 16) {
        __mmask16 k = tail_mask16(hd - d);
        __m512 o[4];
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) o[h] = _mm512_setzero_ps();
        for (int64_t j = 0; j < n_rows; j++) {
            __m512 x = ld16m_row(rows + (size_t)j * rb, d, t, k);
            IG_UNROLL(4)
            for (int h = 0; h < nh; h++) o[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[h][j]), x, o[h]);
        }
        IG_UNROLL(4)
        for (int h = 0; h < nh; h++) _mm512_mask_storeu_ps(out[h] + d, k, o[h]);
    }
}

/* One instance per row type and head count 1 .. 4 (IG_ROWS_MAX_HEADS). */
#define ROWS16_INSTANCES(T, TN)                                                                    \
    IG_TARGET_AVX512 static void dot_rows16_##TN(const float *const *q, int nh, const char *rows,  \
                                                 size_t rb, int64_t n, int64_t hd, float scale,    \
                                                 float *const *out) {                              \
        switch (nh) {                                                                              \
        case 1:                                                                                    \
            dot_rows16_k(q, 1, rows, T, rb, n, hd, scale, out);                                    \
            break;                                                                                 \
        case 2:                                                                                    \
            dot_rows16_k(q, 2, rows, T, rb, n, hd, scale, out);                                    \
            break;                                                                                 \
        case 3:                                                                                    \
            dot_rows16_k(q, 3, rows, T, rb, n, hd, scale, out);                                    \
            break;                                                                                 \
        default:                                                                                   \
            dot_rows16_k(q, 4, rows, T, rb, n, hd, scale, out);                                    \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    IG_TARGET_AVX512 static void wsum_rows16_##TN(const float *const *p, int nh, const char *rows, \
                                                  size_t rb, int64_t n, int64_t hd,                \
                                                  float *const *out) {                             \
        switch (nh) {                                                                              \
        case 1:                                                                                    \
            wsum_rows16_k(p, 1, rows, T, rb, n, hd, out);                                          \
            break;                                                                                 \
        case 2:                                                                                    \
            wsum_rows16_k(p, 2, rows, T, rb, n, hd, out);                                          \
            break;                                                                                 \
        case 3:                                                                                    \
            wsum_rows16_k(p, 3, rows, T, rb, n, hd, out);                                          \
            break;                                                                                 \
        default:                                                                                   \
            wsum_rows16_k(p, 4, rows, T, rb, n, hd, out);                                          \
            break;                                                                                 \
        }                                                                                          \
    }
ROWS16_INSTANCES(IG_DTYPE_F32, f32)
ROWS16_INSTANCES(IG_DTYPE_F16, f16)
ROWS16_INSTANCES(IG_DTYPE_BF16, bf16)

static void dot_rows_avx512(const float *const *q, int nh, const void *rows, ig_dtype t,
                            int64_t stride, int64_t n_rows, int64_t hd, float scale,
                            float *const *out) {
    size_t rb = (size_t)stride * row_elem_size(t);
    if (t == IG_DTYPE_F32)
        dot_rows16_f32(q, nh, rows, rb, n_rows, hd, scale, out);
    else if (t == IG_DTYPE_F16)
        dot_rows16_f16(q, nh, rows, rb, n_rows, hd, scale, out);
    else
        dot_rows16_bf16(q, nh, rows, rb, n_rows, hd, scale, out);
}

static void wsum_rows_avx512(const float *const *p, int nh, const void *rows, ig_dtype t,
                             int64_t stride, int64_t n_rows, int64_t hd, float *const *out) {
    size_t rb = (size_t)stride * row_elem_size(t);
    if (t == IG_DTYPE_F32)
        wsum_rows16_f32(p, nh, rows, rb, n_rows, hd, out);
    else if (t == IG_DTYPE_F16)
        wsum_rows16_f16(p, nh, rows, rb, n_rows, hd, out);
    else
        wsum_rows16_bf16(p, nh, rows, rb, n_rows, hd, out);
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
