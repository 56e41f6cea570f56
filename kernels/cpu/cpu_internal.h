/* Private to kernels/cpu: the run-time SIMD level, target attributes for per-ISA functions, thread
 * helpers, and small vector primitives (one table per SIMD level) shared by the kernel files.
 * Nothing outside kernels/cpu includes this; OpenMP pragmas stay in generic (untargeted) code. */
#ifndef IG_CPU_INTERNAL_H
#define IG_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"

#if defined(__x86_64__) || defined(__i386__)
#define IG_X86           1
#define IG_TARGET_AVX2   __attribute__((target("avx2,fma,f16c")))
#define IG_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#else
#define IG_X86 0
#endif
#define IG_INLINE static inline __attribute__((always_inline))

#if IG_X86
#include <immintrin.h>

/* The sum of a vector's 8 floats, ((lo + hi) pairwise), then the last two: the order every AVX2
 * kernel's results depend on. */
IG_TARGET_AVX2 IG_INLINE float ig_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif
/* Full unrolling of a short constant loop, so that arrays of vectors indexed by it live in
 * registers (GCC and clang both read "GCC unroll"). */
#define IG_PRAGMA(x) _Pragma(#x)
#define IG_UNROLL(n) IG_PRAGMA(GCC unroll n)

typedef enum ig_simd_level {
    IG_SIMD_SCALAR = 0,
    IG_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C */
    IG_SIMD_AVX512 = 2, /* AVX-512 F/BW/VL/DQ + FMA + F16C */
} ig_simd_level;

/* The level kernels use now (hardware, capped by IG_SIMD, possibly lowered by ig_cpu_set_simd). */
ig_simd_level ig_cpu_simd_level(void);

/* Threads for a parallel region over `work` units when one thread should get at least
 * `min_per_thread` of them: 1 .. ig_cpu_get_threads(). */
int ig_cpu_threads_for(int64_t work, int64_t min_per_thread);

/* OpenBLAS must not start its own threads while our OpenMP threads call it. ig_cpu_set_threads
 * keeps it at one thread; these also hold it there around such regions, should anything have
 * raised it. Returns the previous count for ig_cpu_blas_threads_restore. */
int ig_cpu_blas_threads_single(void);
void ig_cpu_blas_threads_restore(int prev);

/* Vector primitives on f32 (n >= 0, no alignment required). exp is within ~2 ulp of expf on the
 * SIMD levels (expf itself on the scalar level), flushes below ~1e-45 to 0 and overflows to inf. */
typedef struct ig_vec_ops {
    float (*dot)(const float *a, const float *b, int64_t n);
    void (*axpy)(float *y, float a, const float *x, int64_t n); /* y += a * x */
    float (*max)(const float *x, int64_t n);                    /* -inf for n == 0 */
    float (*sumsq)(const float *x, int64_t n);
    /* x[i] = exp(x[i] - m); returns their sum (accumulated in double). */
    float (*exp_sub_sum)(float *x, int64_t n, float m);
    /* sum exp(x[i] - m) in double, x unchanged. */
    double (*exp_sub_sum_f64)(const float *x, int64_t n, float m);
    void (*scale)(float *x, float s, int64_t n);
    void (*silu_mul)(const float *g, const float *u, int64_t n, float *out);
    /* dst[0..n) = src as f32 (src type f32, f16 or bf16). */
    void (*widen)(const void *src, ig_dtype type, int64_t n, float *dst);
    /* Attention inner loops over n_rows rows of hd elements of type t (f32, f16 or bf16), row j at
     * rows + j * stride elements, for nh (1 .. IG_ROWS_MAX_HEADS) query heads at once so that each
     * row is loaded and widened once for all of them:
     *   dot_rows:  out[h][j] = scale * q[h] . row_j      for j < n_rows
     *   wsum_rows: out[h][d] = sum_j p[h][j] * row_j[d]  for d < hd (overwritten) */
    void (*dot_rows)(const float *const *q, int nh, const void *rows, ig_dtype t, int64_t stride,
                     int64_t n_rows, int64_t hd, float scale, float *const *out);
    void (*wsum_rows)(const float *const *p, int nh, const void *rows, ig_dtype t, int64_t stride,
                      int64_t n_rows, int64_t hd, float *const *out);
} ig_vec_ops;

/* Query heads one dot_rows / wsum_rows call takes. */
#define IG_ROWS_MAX_HEADS 4

const ig_vec_ops *ig_cpu_vec_ops(ig_simd_level level);
static inline const ig_vec_ops *ig_cpu_vec(void) {
    return ig_cpu_vec_ops(ig_cpu_simd_level());
}

/* Softmax of one row in place (max-subtracted, f32). A row of all -inf becomes all 0. */
void ig_cpu_softmax_row(const ig_vec_ops *v, float *x, int64_t n);

/* The GEMV of ig_cpu_linear (small M): y[m * ldy + n] = x[m] . W[n] (+ bias[n]) for m < M and n in
 * [n0, n1); W row n at n * ig_dtype_row_bytes(wtype, K) bytes. */
typedef void (*ig_gemv_rows_fn)(const float *x, int64_t M, int64_t K, const void *W, int64_t n0,
                                int64_t n1, const float *bias, float *y, int64_t ldy);
/* The kernel for block-quantized W of type t at a SIMD level (qlinear.c): blocks are decoded in
 * registers to exactly ig_dequant_row_ref's values; K must be a multiple of the block. */
ig_gemv_rows_fn ig_cpu_qgemv_rows(ig_simd_level level, ig_dtype t);

/* ---- int8 activations (qlinear_act8.c) ---- */
/* Weight types with an int8-activation kernel: IG_DTYPE_Q4_0, IG_DTYPE_Q4_1, IG_DTYPE_Q8_0. */
int ig_cpu_act8_supported(ig_dtype t);
/* Bytes of the quantized form of M rows of K activations (K a multiple of 32) for weight type t;
 * 0 when t is not supported or K is not a multiple of 32. */
size_t ig_cpu_act8_bytes(ig_dtype t, int64_t M, int64_t K);
/* Quantizes x (M rows of K, row stride K) for weight type t's kernel into xq (ig_cpu_act8_bytes,
 * 64-byte aligned). Per block of 32: dx = max|x| / 127, qx = round-half-even(x / dx) (0 where dx =
 * 0 or x / dx is NaN; clamped to [-127, 127]), and for types with a min (q4_1) the block's s = dx *
 * sum(qx). The bytes written are identical at every SIMD level (the layout depends on t:
 * pre-permuted for the nibble order, see qlinear_act8.c). */
void ig_cpu_act8_quantize(ig_simd_level level, ig_dtype t, const float *x, int64_t M, int64_t K,
                          void *xq);
/* y[m * ldy + n] = dot(xq row m, W row n) (+ bias[n]) for m < M, n in [n0, n1), W row n at
 * n * ig_dtype_row_bytes(t, K). Same signature shape as ig_gemv_rows_fn but xq instead of x. */
typedef void (*ig_act8_rows_fn)(const void *xq, int64_t M, int64_t K, const void *W, int64_t n0,
                                int64_t n1, const float *bias, float *y, int64_t ldy);
/* The kernel at a SIMD level (AVX-512 needs AVX-512 VNNI besides the level, checked at run time,
 * else the AVX2 kernel; AVX2: maddubs/madd; scalar: the reference, the definition of the result).
 * NULL when t is not supported. */
ig_act8_rows_fn ig_cpu_act8_rows(ig_simd_level level, ig_dtype t);

#endif
