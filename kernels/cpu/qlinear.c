/* Block-quantized weights (q4_0, q4_1, q8_0, q4g64, q8g64; layouts in core/base/dtype.h) on the
 * CPU: a SIMD row dequantizer, the row-parallel quantizer used at load, and the GEMV row kernels
 * that ig_cpu_linear runs for small M. Each block is decoded to f32 in registers, to exactly the
 * values ig_dequant_row_ref gives, and multiplied into f32 activations in the order linear.c's f32
 * GEMV uses at the same SIMD level: the result is bitwise ig_cpu_linear on the dequantized f32
 * matrix (tests/test_qlinear.c checks it). Activations are never quantized.
 *
 * Why the decoded values are exact: d is an f16 (11 significant bits) and q an integer of at most
 * 8 bits, so d * q has at most 19 significant bits and lies well inside f32's range (f16
 * subnormals included): the product is exact in f32, and fma(d, q, m) rounds once, exactly like
 * the reference's (d * q) + m. The 4-bit formats decode through a 16-entry table per block
 * (tab[q] = d * q + m, or d * (q - 8)) looked up with one lane permute per 16 elements. */
#include <omp.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

/* Elements below which quantizing rows stays on one thread. */

/* Block geometry as compile-time constants once t is (the kernels below are inlined per type). */
static inline int qblock_elems(ig_dtype t) {
    return t == IG_DTYPE_Q4G64 || t == IG_DTYPE_Q8G64 ? 64 : 32;
}

static inline int qblock_bytes(ig_dtype t) {
    switch (t) {
    case IG_DTYPE_Q4_0:
        return IG_Q4_0_BYTES;
    case IG_DTYPE_Q4_1:
        return IG_Q4_1_BYTES;
    case IG_DTYPE_Q8_0:
        return IG_Q8_0_BYTES;
    case IG_DTYPE_Q4G64:
        return IG_Q4G64_BYTES;
    default:
        return IG_Q8G64_BYTES;
    }
}

static inline int qtype_index(ig_dtype t) {
    switch (t) {
    case IG_DTYPE_Q4_0:
        return 0;
    case IG_DTYPE_Q4_1:
        return 1;
    case IG_DTYPE_Q8_0:
        return 2;
    case IG_DTYPE_Q4G64:
        return 3;
    default:
        return 4;
    }
}

/* ---- scalar: dequantize a chunk of the row with the reference, then dot ---------------------- */

/* Elements per chunk: a multiple of every block size, so chunks start at block boundaries. */
#define QSCALAR_CHUNK 256

static void qgemv_rows_scalar(const float *x, int64_t M, int64_t K, const void *W, ig_dtype t,
                              int64_t n0, int64_t n1, const float *bias, float *y, int64_t ldy) {
    const ig_vec_ops *v = ig_cpu_vec_ops(IG_SIMD_SCALAR); /* linear.c's scalar dot */
    size_t rb = ig_dtype_row_bytes(t, K);
    float buf[QSCALAR_CHUNK];
    for (int64_t n = n0; n < n1; n++) {
        const unsigned char *row = (const unsigned char *)W + (size_t)n * rb;
        for (int64_t m = 0; m < M; m++) y[m * ldy + n] = bias ? bias[n] : 0.0f;
        for (int64_t k = 0; k < K; k += QSCALAR_CHUNK) {
            int64_t len = K - k < QSCALAR_CHUNK ? K - k : QSCALAR_CHUNK;
            ig_dequant_row_ref(t, row + ig_dtype_row_bytes(t, k), buf, len);
            for (int64_t m = 0; m < M; m++) y[m * ldy + n] += v->dot(buf, x + m * K + k, len);
        }
    }
}

#define QGEMV_WRAP(suffix, T)                                                                      \
    static void qgemv_rows_scalar_##suffix(const float *x, int64_t M, int64_t K, const void *W,    \
                                           int64_t n0, int64_t n1, const float *bias, float *y,    \
                                           int64_t ldy) {                                          \
        qgemv_rows_scalar(x, M, K, W, T, n0, n1, bias, y, ldy);                                    \
    }
QGEMV_WRAP(q4_0, IG_DTYPE_Q4_0)
QGEMV_WRAP(q4_1, IG_DTYPE_Q4_1)
QGEMV_WRAP(q8_0, IG_DTYPE_Q8_0)
QGEMV_WRAP(q4g64, IG_DTYPE_Q4G64)
QGEMV_WRAP(q8g64, IG_DTYPE_Q8G64)
#undef QGEMV_WRAP

#if IG_X86

/* ---- AVX-512 scales of q4_1, q4g64, q8g64 -------------------------------------------------------
 * Converting a block's (d, m) pair in registers and broadcasting d and m costs three shuffles per
 * block on AVX-512's one shuffle port, which the 4-bit decode also uses (vpmovzxbd, vpermps). So
 * for the formats with an offset a row is walked in chunks of up to QCHUNK blocks whose scales are
 * first fetched with one 32-bit gather per 16 blocks, widened with one conversion per 8 and stored
 * to a small stack array; the block loop broadcasts them from there (loads). When a row is a
 * single chunk (K up to 2048 or 4096), the GEMV prepares row n + 1's scales before row n's block
 * loop, so that the stores have left the store buffer when they are read (preparing them right
 * before the loop was slower than converting per block). ds[2b] = d, ds[2b + 1] = m of block b.
 * Measured on a Sapphire Rapids VM, one thread, hot W: q4_1 and q4g64 10-15% faster at K = 1536,
 * even at K = 576. q4_0 and q8_0 (d alone: a broadcast and a conversion) gained nothing this way,
 * nor did AVX2 (three shuffle ports, slower gathers): those convert per block. */

#define QCHUNK 64

/* Prefetch distance of the M = 1 kernels, in groups of rows: the R rows of one step are contiguous
 * bytes; the bytes QGEMV_PF_GROUPS groups ahead are prefetched while a group is computed. Without
 * it the 4-bit kernels consume a cold W at well under the read bandwidth (the hardware prefetcher
 * alone did not keep up; docs/results/compressed_weights.md); 2 to 8 groups measured alike, 1
 * clearly worse. */
#define QGEMV_PF_GROUPS 2

static inline int qhas_m(ig_dtype t) {
    return t == IG_DTYPE_Q4_1 || t == IG_DTYPE_Q4G64 || t == IG_DTYPE_Q8G64;
}

static inline uint16_t u16_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

static inline int32_t i32_at(const unsigned char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

IG_TARGET_AVX512 IG_INLINE void scales_avx512(const unsigned char *blk, const ig_dtype t, int nb,
                                              float *ds) {
    const int bb = qblock_bytes(t);
    const __m512i off =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(bb));
    for (int i = 0; i < nb; i += 16) {
        __mmask16 k = nb - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nb - i)) - 1u);
        __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, off,
                                                  blk + (size_t)i * (size_t)bb, 1);
        _mm512_storeu_ps(ds + 2 * i, _mm512_cvtph_ps(_mm512_castsi512_si256(raw)));
        if (nb - i > 8)
            _mm512_storeu_ps(ds + 2 * i + 16, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(raw, 1)));
    }
}

/* ---- AVX-512: 16 lanes -------------------------------------------------------------------------
 * A block decodes to be / 16 vectors: w[h] holds elements 16h .. 16h + 15. The 4-bit formats look
 * their codes up in a 16-float table (vpermps reads the low 4 bits of each index, so the zero-
 * extended byte indexes its low nibble as it is and its high nibble after a shift by 4). */

IG_TARGET_AVX512 IG_INLINE __m512 iota16(void) {
    return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

IG_TARGET_AVX512 IG_INLINE __m512i bytes16_u32(const unsigned char *p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* Block b with scale d (and offset m: unused for q4_0 and q8_0). */
IG_TARGET_AVX512 IG_INLINE void qdec_avx512(const unsigned char *b, const ig_dtype t, __m512 d,
                                            __m512 m, __m512 *w) {
    if (t == IG_DTYPE_Q4_0) {
        const __m512 q8 = _mm512_sub_ps(iota16(), _mm512_set1_ps(8.0f)); /* -8 .. 7, exact */
        __m512 tab = _mm512_mul_ps(d, q8);
        __m512i v = bytes16_u32(b + 2);
        w[0] = _mm512_permutexvar_ps(v, tab);
        w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab);
    } else if (t == IG_DTYPE_Q4_1) {
        __m512 tab = _mm512_fmadd_ps(d, iota16(), m);
        __m512i v = bytes16_u32(b + 4);
        w[0] = _mm512_permutexvar_ps(v, tab);
        w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab);
    } else if (t == IG_DTYPE_Q8_0) {
        IG_UNROLL(2)
        for (int h = 0; h < 2; h++) {
            __m128i q = _mm_loadu_si128((const __m128i *)(b + 2 + 16 * h));
            w[h] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
        }
    } else if (t == IG_DTYPE_Q4G64) {
        __m512 tab = _mm512_fmadd_ps(d, iota16(), m);
        __m512i v0 = bytes16_u32(b + 4), v1 = bytes16_u32(b + 20);
        w[0] = _mm512_permutexvar_ps(v0, tab);
        w[1] = _mm512_permutexvar_ps(v1, tab);
        w[2] = _mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), tab);
        w[3] = _mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), tab);
    } else { /* q8g64 */
        IG_UNROLL(4)
        for (int h = 0; h < 4; h++)
            w[h] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(bytes16_u32(b + 4 + 16 * h)), m);
    }
}

/* Block b of a chunk: d and m from ds (q4_1, q4g64, q8g64), or d converted here (q4_0, q8_0). */
IG_TARGET_AVX512 IG_INLINE void qdec_ds_avx512(const unsigned char *chunk, const ig_dtype t,
                                               const float *ds, int b, __m512 *w) {
    const unsigned char *blk = chunk + (size_t)b * (size_t)qblock_bytes(t);
    if (qhas_m(t))
        qdec_avx512(blk, t, _mm512_set1_ps(ds[2 * b]), _mm512_set1_ps(ds[2 * b + 1]), w);
    else
        qdec_avx512(blk, t, _mm512_cvtph_ps(_mm256_set1_epi16((short)u16_at(blk))),
                    _mm512_setzero_ps(), w);
}

IG_TARGET_AVX512 IG_INLINE void qdequant_avx512(const void *src, ig_dtype t, float *dst,
                                                int64_t n) {
    const unsigned char *p = src;
    const int be = qblock_elems(t), bb = qblock_bytes(t);
    const int64_t nblocks = n / be;
    float ds[2 * QCHUNK];
    for (int64_t b0 = 0; b0 < nblocks; b0 += QCHUNK) {
        int nb = nblocks - b0 < QCHUNK ? (int)(nblocks - b0) : QCHUNK;
        const unsigned char *chunk = p + (size_t)b0 * (size_t)bb;
        if (qhas_m(t)) scales_avx512(chunk, t, nb, ds);
        for (int b = 0; b < nb; b++) {
            __m512 w[4];
            qdec_ds_avx512(chunk, t, ds, b, w);
            float *o = dst + (b0 + b) * be;
            IG_UNROLL(4)
            for (int h = 0; h < be / 16; h++) _mm512_storeu_ps(o + 16 * h, w[h]);
        }
    }
}

#define QGEMV_MB_AVX512 8

/* y[m][n] for m < MB: row n of W (at `row`) against MB rows of x, 2 accumulators per x row: the
 * vectors of elements k .. k + 15 and k + 16 .. k + 31 of each 32 go to accumulators 0 and 1, as
 * in the f32 GEMV of linear.c, so that the result is bitwise that of ig_cpu_linear on the
 * dequantized f32 matrix. ds_row: the row's scales when it is a single chunk (prepared ahead), else
 * NULL. */
IG_TARGET_AVX512 IG_INLINE void qrow_avx512(const float *x, int64_t K, const unsigned char *row,
                                            const ig_dtype t, const int MB, const float *ds_row,
                                            float bias, float *y, int64_t ldy) {
    const int be = qblock_elems(t), bb = qblock_bytes(t);
    const int64_t nblocks = K / be;
    __m512 acc[QGEMV_MB_AVX512][2];
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    float ds_chunk[2 * QCHUNK];
    for (int64_t b0 = 0; b0 < nblocks; b0 += QCHUNK) {
        int nb = nblocks - b0 < QCHUNK ? (int)(nblocks - b0) : QCHUNK;
        const unsigned char *chunk = row + (size_t)b0 * (size_t)bb;
        const float *ds = ds_row;
        if (!ds && qhas_m(t)) {
            scales_avx512(chunk, t, nb, ds_chunk);
            ds = ds_chunk;
        }
        for (int b = 0; b < nb; b++) {
            const int64_t k = (b0 + b) * be;
            __m512 w[4];
            qdec_ds_avx512(chunk, t, ds, b, w);
            IG_UNROLL(4)
            for (int h = 0; h < be / 16; h++) {
                IG_UNROLL(8)
                for (int m = 0; m < MB; m++)
                    acc[m][h & 1] = _mm512_fmadd_ps(w[h], _mm512_loadu_ps(x + m * K + k + 16 * h),
                                                    acc[m][h & 1]);
            }
        }
    }
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++)
        y[m * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(acc[m][0], acc[m][1])) + bias;
}

/* Rows of W decoded together against a single x row (M = 1, batch-1 decode). */
#define QGEMV_ROWS_M1 4

/* M = 1: R consecutive rows of W (row r at row0 + r * rb) against one x row. Each row keeps its own
 * two accumulators in qrow_avx512's order, so every y[r] is bitwise the single-row result; what
 * changes is that 2R FMA chains are in flight instead of 2 (with one x row, qrow_avx512 waits on
 * one FMA latency per block) and each x vector is loaded once for R rows. ds: the R rows' scales
 * (one chunk per row), or NULL for the formats that convert d per block. */
IG_TARGET_AVX512 IG_INLINE void qrows_m1_avx512(const float *x, int64_t K,
                                                const unsigned char *row0, size_t rb,
                                                const ig_dtype t, const int R, const float *ds,
                                                const float *bias, float *y) {
    const int be = qblock_elems(t);
    const int64_t nblocks = K / be;
    /* The R rows are contiguous; the next groups' bytes are prefetched spread over the block loop.
     */
    const size_t span = (size_t)R * rb;
    const int64_t pf_per_block = ((int64_t)(span + 63) / 64 + nblocks - 1) / nblocks;
    uintptr_t pf = (uintptr_t)row0 + QGEMV_PF_GROUPS * span; /* may pass the end of W: an integer */
    __m512 acc[QGEMV_ROWS_M1][2];
    IG_UNROLL(4)
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nblocks; b++) {
        const float *xk = x + b * be;
        for (int64_t i = 0; i < pf_per_block; i++, pf += 64)
            _mm_prefetch((const char *)pf, _MM_HINT_T0);
        IG_UNROLL(4)
        for (int r = 0; r < R; r++) {
            __m512 w[4];
            qdec_ds_avx512(row0 + (size_t)r * rb, t, ds ? ds + r * 2 * QCHUNK : NULL, (int)b, w);
            IG_UNROLL(4)
            for (int h = 0; h < be / 16; h++)
                acc[r][h & 1] = _mm512_fmadd_ps(w[h], _mm512_loadu_ps(xk + 16 * h), acc[r][h & 1]);
        }
    }
    IG_UNROLL(4)
    for (int r = 0; r < R; r++)
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])) + (bias ? bias[r] : 0.0f);
}

/* The R-row kernel over rows n0 .. n1 - 1 (M = 1), the scales of the next R rows prepared before
 * the block loop of the current ones, as qgemv_rows_avx512 does a row ahead. */
IG_TARGET_AVX512 IG_INLINE void qgemv_m1_avx512(const float *x, int64_t K, const void *W,
                                                const ig_dtype t, int64_t n0, int64_t n1,
                                                const float *bias, float *y) {
    const size_t rb = ig_dtype_row_bytes(t, K);
    const int nblocks = (int)(K / qblock_elems(t));
    const int hm = qhas_m(t);
    float ds[2][QGEMV_ROWS_M1 * 2 * QCHUNK];
    const unsigned char *base = (const unsigned char *)W;
    if (hm)
        for (int64_t r = n0; r < n1 && r < n0 + QGEMV_ROWS_M1; r++)
            scales_avx512(base + (size_t)r * rb, t, nblocks, ds[0] + (r - n0) * 2 * QCHUNK);
    int cur = 0;
    for (int64_t n = n0; n < n1; n += QGEMV_ROWS_M1, cur ^= 1) {
        const int R = n1 - n < QGEMV_ROWS_M1 ? (int)(n1 - n) : QGEMV_ROWS_M1;
        if (hm)
            for (int64_t r = n + QGEMV_ROWS_M1; r < n1 && r < n + 2 * QGEMV_ROWS_M1; r++)
                scales_avx512(base + (size_t)r * rb, t, nblocks,
                              ds[cur ^ 1] + (r - n - QGEMV_ROWS_M1) * 2 * QCHUNK);
        const unsigned char *row = base + (size_t)n * rb;
        const float *dsn = hm ? ds[cur] : NULL;
        const float *bn = bias ? bias + n : NULL;
        switch (R) {
        case 4:
            qrows_m1_avx512(x, K, row, rb, t, 4, dsn, bn, y + n);
            break;
        case 3:
            qrows_m1_avx512(x, K, row, rb, t, 3, dsn, bn, y + n);
            break;
        case 2:
            qrows_m1_avx512(x, K, row, rb, t, 2, dsn, bn, y + n);
            break;
        default:
            qrows_m1_avx512(x, K, row, rb, t, 1, dsn, bn, y + n);
            break;
        }
    }
}

IG_TARGET_AVX512 IG_INLINE void qgemv_rows_avx512(const float *x, int64_t M, int64_t K,
                                                  const void *W, const ig_dtype t, int64_t n0,
                                                  int64_t n1, const float *bias, float *y,
                                                  int64_t ldy) {
    const size_t rb = ig_dtype_row_bytes(t, K);
    const int64_t nblocks = K / qblock_elems(t);
    const int ahead = qhas_m(t) && nblocks <= QCHUNK; /* one chunk per row: scales a row ahead */
    if (M == 1 && (ahead || !qhas_m(t))) {
        qgemv_m1_avx512(x, K, W, t, n0, n1, bias, y);
        return;
    }
    float ds[2][2 * QCHUNK];
    if (ahead && n0 < n1)
        scales_avx512((const unsigned char *)W + (size_t)n0 * rb, t, (int)nblocks, ds[0]);
    for (int64_t n = n0; n < n1; n++) {
        const unsigned char *row = (const unsigned char *)W + (size_t)n * rb;
        const float *dsr = NULL;
        if (ahead) {
            if (n + 1 < n1) scales_avx512(row + rb, t, (int)nblocks, ds[(n + 1 - n0) & 1]);
            dsr = ds[(n - n0) & 1];
        }
        float b = bias ? bias[n] : 0.0f;
        int64_t m = 0;
        for (; m + 8 <= M; m += 8)
            qrow_avx512(x + m * K, K, row, t, 8, dsr, b, y + m * ldy + n, ldy);
        const float *xm = x + m * K;
        float *ym = y + m * ldy + n;
        switch (M - m) {
        case 7:
            qrow_avx512(xm, K, row, t, 7, dsr, b, ym, ldy);
            break;
        case 6:
            qrow_avx512(xm, K, row, t, 6, dsr, b, ym, ldy);
            break;
        case 5:
            qrow_avx512(xm, K, row, t, 5, dsr, b, ym, ldy);
            break;
        case 4:
            qrow_avx512(xm, K, row, t, 4, dsr, b, ym, ldy);
            break;
        case 3:
            qrow_avx512(xm, K, row, t, 3, dsr, b, ym, ldy);
            break;
        case 2:
            qrow_avx512(xm, K, row, t, 2, dsr, b, ym, ldy);
            break;
        case 1:
            qrow_avx512(xm, K, row, t, 1, dsr, b, ym, ldy);
            break;
        default:
            break;
        }
    }
}

/* ---- AVX2 + FMA + F16C: 8 lanes
 * ------------------------------------------------------------------ A block decodes in parts of 32
 * elements (4 vectors; q4g64/q8g64 have two parts), so that the accumulators, the part and an x
 * vector fit the 16 registers. */

/* 8 bytes (the low half of v) as f32. */
IG_TARGET_AVX2 IG_INLINE __m256 u8x8_ps(__m128i v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
}

/* 16 codes (one per byte of v, 0 .. 15) times d, plus m (or minus 8 first for q4_0). */
IG_TARGET_AVX2 IG_INLINE void nib16_avx2(__m128i v, const ig_dtype t, __m256 d, __m256 m,
                                         __m256 *w) {
    __m256 q0 = u8x8_ps(v), q1 = u8x8_ps(_mm_unpackhi_epi64(v, v));
    if (t == IG_DTYPE_Q4_0) {
        const __m256 eight = _mm256_set1_ps(8.0f);
        w[0] = _mm256_mul_ps(d, _mm256_sub_ps(q0, eight));
        w[1] = _mm256_mul_ps(d, _mm256_sub_ps(q1, eight));
    } else {
        w[0] = _mm256_fmadd_ps(d, q0, m);
        w[1] = _mm256_fmadd_ps(d, q1, m);
    }
}

/* Elements 32 * part .. 32 * part + 31 of block b (scales d, m) as 4 vectors. */
IG_TARGET_AVX2 IG_INLINE void qdec_avx2(const unsigned char *b, const ig_dtype t, const int part,
                                        __m256 d, __m256 m, __m256 *w) {
    const __m128i lo4 = _mm_set1_epi8(0x0f);
    if (t == IG_DTYPE_Q4_0 || t == IG_DTYPE_Q4_1) {
        __m128i v = _mm_loadu_si128((const __m128i *)(b + (t == IG_DTYPE_Q4_0 ? 2 : 4)));
        nib16_avx2(_mm_and_si128(v, lo4), t, d, m, w);
        nib16_avx2(_mm_and_si128(_mm_srli_epi16(v, 4), lo4), t, d, m, w + 2);
    } else if (t == IG_DTYPE_Q4G64) {
        __m128i v0 = _mm_loadu_si128((const __m128i *)(b + 4));
        __m128i v1 = _mm_loadu_si128((const __m128i *)(b + 20));
        if (part) {
            v0 = _mm_srli_epi16(v0, 4);
            v1 = _mm_srli_epi16(v1, 4);
        }
        nib16_avx2(_mm_and_si128(v0, lo4), t, d, m, w);
        nib16_avx2(_mm_and_si128(v1, lo4), t, d, m, w + 2);
    } else if (t == IG_DTYPE_Q8_0) {
        IG_UNROLL(4)
        for (int h = 0; h < 4; h++) {
            __m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + 8 * h));
            w[h] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
        }
    } else { /* q8g64 */
        IG_UNROLL(4)
        for (int h = 0; h < 4; h++) {
            __m128i q = _mm_loadl_epi64((const __m128i *)(b + 4 + 32 * part + 8 * h));
            w[h] = _mm256_fmadd_ps(d, u8x8_ps(q), m);
        }
    }
}

/* Block b's scales: d (and m) broadcast. */
IG_TARGET_AVX2 IG_INLINE void scales8(const unsigned char *blk, const ig_dtype t, __m256 *d,
                                      __m256 *m) {
    if (qhas_m(t)) {
        __m256 dm = _mm256_cvtph_ps(_mm_set1_epi32(i32_at(blk))); /* d, m, d, m, ... */
        *d = _mm256_moveldup_ps(dm);
        *m = _mm256_movehdup_ps(dm);
    } else {
        *d = _mm256_cvtph_ps(_mm_set1_epi16((short)u16_at(blk)));
        *m = _mm256_setzero_ps();
    }
}

IG_TARGET_AVX2 IG_INLINE void qdequant_avx2(const void *src, ig_dtype t, float *dst, int64_t n) {
    const unsigned char *blk = src;
    const int be = qblock_elems(t), bb = qblock_bytes(t);
    for (int64_t i = 0; i < n; i += be, blk += bb) {
        __m256 d, m;
        scales8(blk, t, &d, &m);
        IG_UNROLL(2)
        for (int part = 0; part < be / 32; part++) {
            __m256 w[4];
            qdec_avx2(blk, t, part, d, m, w);
            IG_UNROLL(4)
            for (int h = 0; h < 4; h++) _mm256_storeu_ps(dst + i + 32 * part + 8 * h, w[h]);
        }
    }
}

#define QGEMV_MB_AVX2 4

/* As qrow_avx512 with parts of 32 elements and scales converted per block; elements k .. k + 7 and
 * k + 8 .. k + 15 of each 16 go to accumulators 0 and 1, as in linear.c's f32 GEMV. */
IG_TARGET_AVX2 IG_INLINE void qrow_avx2(const float *x, int64_t K, const unsigned char *row,
                                        const ig_dtype t, const int MB, float bias, float *y,
                                        int64_t ldy) {
    const int be = qblock_elems(t), bb = qblock_bytes(t);
    __m256 acc[QGEMV_MB_AVX2][2];
    IG_UNROLL(4)
    for (int m = 0; m < MB; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += be, row += bb) {
        __m256 d, mm;
        scales8(row, t, &d, &mm);
        IG_UNROLL(2)
        for (int part = 0; part < be / 32; part++) {
            __m256 w[4];
            qdec_avx2(row, t, part, d, mm, w);
            IG_UNROLL(4)
            for (int h = 0; h < 4; h++) {
                IG_UNROLL(4)
                for (int m = 0; m < MB; m++)
                    acc[m][h & 1] = _mm256_fmadd_ps(
                        w[h], _mm256_loadu_ps(x + m * K + k + 32 * part + 8 * h), acc[m][h & 1]);
            }
        }
    }
    IG_UNROLL(4)
    for (int m = 0; m < MB; m++) y[m * ldy] = ig_hsum8(_mm256_add_ps(acc[m][0], acc[m][1])) + bias;
}

/* M = 1: two rows of W at once, each with qrow_avx2's two accumulators in its order (bitwise the
 * single-row result), so that four FMA chains are in flight instead of two (see qrows_m1_avx512).
 */
IG_TARGET_AVX2 IG_INLINE void qrows2_m1_avx2(const float *x, int64_t K, const unsigned char *row0,
                                             size_t rb, const ig_dtype t, const float *bias,
                                             float *y) {
    const int be = qblock_elems(t), bb = qblock_bytes(t);
    const int64_t nblocks = K / be;
    const int64_t pf_per_block = ((int64_t)(2 * rb + 63) / 64 + nblocks - 1) / nblocks;
    uintptr_t pf = (uintptr_t)row0 + QGEMV_PF_GROUPS * 2 * rb; /* as in qrows_m1_avx512 */
    __m256 acc[2][2];
    acc[0][0] = acc[0][1] = acc[1][0] = acc[1][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += be, row0 += bb) {
        for (int64_t i = 0; i < pf_per_block; i++, pf += 64)
            _mm_prefetch((const char *)pf, _MM_HINT_T0);
        IG_UNROLL(2)
        for (int part = 0; part < be / 32; part++) {
            IG_UNROLL(2)
            for (int r = 0; r < 2; r++) {
                const unsigned char *blk = row0 + (size_t)r * rb;
                __m256 d, mm, w[4];
                scales8(blk, t, &d, &mm);
                qdec_avx2(blk, t, part, d, mm, w);
                IG_UNROLL(4)
                for (int h = 0; h < 4; h++)
                    acc[r][h & 1] = _mm256_fmadd_ps(
                        w[h], _mm256_loadu_ps(x + k + 32 * part + 8 * h), acc[r][h & 1]);
            }
        }
    }
    IG_UNROLL(2)
    for (int r = 0; r < 2; r++)
        y[r] = ig_hsum8(_mm256_add_ps(acc[r][0], acc[r][1])) + (bias ? bias[r] : 0.0f);
}

IG_TARGET_AVX2 IG_INLINE void qgemv_rows_avx2(const float *x, int64_t M, int64_t K, const void *W,
                                              const ig_dtype t, int64_t n0, int64_t n1,
                                              const float *bias, float *y, int64_t ldy) {
    size_t rb = ig_dtype_row_bytes(t, K);
    if (M == 1)
        for (; n0 + 2 <= n1; n0 += 2)
            qrows2_m1_avx2(x, K, (const unsigned char *)W + (size_t)n0 * rb, rb, t,
                           bias ? bias + n0 : NULL, y + n0);
    for (int64_t n = n0; n < n1; n++) {
        const unsigned char *row = (const unsigned char *)W + (size_t)n * rb;
        float b = bias ? bias[n] : 0.0f;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) qrow_avx2(x + m * K, K, row, t, 4, b, y + m * ldy + n, ldy);
        const float *xm = x + m * K;
        float *ym = y + m * ldy + n;
        switch (M - m) {
        case 3:
            qrow_avx2(xm, K, row, t, 3, b, ym, ldy);
            break;
        case 2:
            qrow_avx2(xm, K, row, t, 2, b, ym, ldy);
            break;
        case 1:
            qrow_avx2(xm, K, row, t, 1, b, ym, ldy);
            break;
        default:
            break;
        }
    }
}

/* One out-of-line function per (level, type), so the type is a constant inside. */
#define QWRAP(suffix, T)                                                                           \
    IG_TARGET_AVX512 static void qgemv_rows_avx512_##suffix(                                       \
        const float *x, int64_t M, int64_t K, const void *W, int64_t n0, int64_t n1,               \
        const float *bias, float *y, int64_t ldy) {                                                \
        qgemv_rows_avx512(x, M, K, W, T, n0, n1, bias, y, ldy);                                    \
    }                                                                                              \
    IG_TARGET_AVX2 static void qgemv_rows_avx2_##suffix(                                           \
        const float *x, int64_t M, int64_t K, const void *W, int64_t n0, int64_t n1,               \
        const float *bias, float *y, int64_t ldy) {                                                \
        qgemv_rows_avx2(x, M, K, W, T, n0, n1, bias, y, ldy);                                      \
    }                                                                                              \
    IG_TARGET_AVX512 static void qdequant_avx512_##suffix(const void *src, float *dst,             \
                                                          int64_t n) {                             \
        qdequant_avx512(src, T, dst, n);                                                           \
    }                                                                                              \
    IG_TARGET_AVX2 static void qdequant_avx2_##suffix(const void *src, float *dst, int64_t n) {    \
        qdequant_avx2(src, T, dst, n);                                                             \
    }
QWRAP(q4_0, IG_DTYPE_Q4_0)
QWRAP(q4_1, IG_DTYPE_Q4_1)
QWRAP(q8_0, IG_DTYPE_Q8_0)
QWRAP(q4g64, IG_DTYPE_Q4G64)
QWRAP(q8g64, IG_DTYPE_Q8G64)
#undef QWRAP

#endif /* IG_X86 */

/* ---- dispatch ----------------------------------------------------------------------------------
 */

ig_gemv_rows_fn ig_cpu_qgemv_rows(ig_simd_level level, ig_dtype t) {
    IG_ASSERT(ig_dtype_is_quant(t));
    int i = qtype_index(t);
#if IG_X86
    static const ig_gemv_rows_fn k_avx512[5] = {qgemv_rows_avx512_q4_0, qgemv_rows_avx512_q4_1,
                                                qgemv_rows_avx512_q8_0, qgemv_rows_avx512_q4g64,
                                                qgemv_rows_avx512_q8g64};
    static const ig_gemv_rows_fn k_avx2[5] = {qgemv_rows_avx2_q4_0, qgemv_rows_avx2_q4_1,
                                              qgemv_rows_avx2_q8_0, qgemv_rows_avx2_q4g64,
                                              qgemv_rows_avx2_q8g64};
    if (level == IG_SIMD_AVX512) return k_avx512[i];
    if (level == IG_SIMD_AVX2) return k_avx2[i];
#else
    (void)level;
#endif
    static const ig_gemv_rows_fn k_scalar[5] = {qgemv_rows_scalar_q4_0, qgemv_rows_scalar_q4_1,
                                                qgemv_rows_scalar_q8_0, qgemv_rows_scalar_q4g64,
                                                qgemv_rows_scalar_q8g64};
    return k_scalar[i];
}

void ig_cpu_dequant_row(ig_dtype t, const void *src, float *dst, int64_t n) {
    if (!ig_dtype_is_quant(t)) {
        IG_ASSERT(ig_dtype_is_float_storage(t));
        ig_cpu_vec()->widen(src, t, n, dst);
        return;
    }
    IG_ASSERT(n >= 0 && ig_dtype_row_ok(t, n));
#if IG_X86
    typedef void (*deq_fn)(const void *src, float *dst, int64_t n);
    static const deq_fn k_avx512[5] = {qdequant_avx512_q4_0, qdequant_avx512_q4_1,
                                       qdequant_avx512_q8_0, qdequant_avx512_q4g64,
                                       qdequant_avx512_q8g64};
    static const deq_fn k_avx2[5] = {qdequant_avx2_q4_0, qdequant_avx2_q4_1, qdequant_avx2_q8_0,
                                     qdequant_avx2_q4g64, qdequant_avx2_q8g64};
    ig_simd_level level = ig_cpu_simd_level();
    if (level == IG_SIMD_AVX512) {
        k_avx512[qtype_index(t)](src, dst, n);
        return;
    }
    if (level == IG_SIMD_AVX2) {
        k_avx2[qtype_index(t)](src, dst, n);
        return;
    }
#endif
    ig_dequant_row_ref(t, src, dst, n);
}
