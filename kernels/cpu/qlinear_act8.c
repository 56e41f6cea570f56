/* The opt-in int8-activation decode path for q4_0, q4_1 and q8_0 weights: x is quantized per block
 * of 32 to int8 (llama.cpp's Q8_1 rule) and multiplied into the weights' codes with exact int32
 * dot products (AVX-512 VNNI vpdpbusd, or AVX2 maddubs/madd). Not the exact path of qlinear.c:
 * the result differs from it by the activations' rounding; it must never be used where that is
 * not wanted (the caller opts in).
 *
 * Per block b of x: dx = max|x| / 127, qx = round-half-even(x / dx) in [-127, 127] (0 where dx = 0
 * or x / dx is NaN), s = dx * sum(qx). Per weight block (d, [m,] codes c): isum = sum c * qx,
 * exact in int32, and y += (d * dx) * isum (+ m * s). The scalar kernel is that definition; the
 * SIMD ones split isum over int32 lanes, convert each (exactly, |lane| < 2^24) and fma it with
 * d * dx, so they differ from it only in the f32 summation order.
 *
 * Quantized x, one row of act8_geo's stride per row of x. The blocks past the row's last (to a
 * whole group or pair) are zero: codes, scales and corrections.
 * q4_0 / q4_1, in groups of 16 blocks (4 quads of 4 blocks), in the order in which a quad of
 * weight blocks' nibbles come out of [qs0 | qs1 | qs2 | qs3] & 15 and >> 4:
 *   qx    512 bytes per group, 128 per quad: codes 0..15 of its blocks 0, 1, 2, 3, then their
 *         codes 16..31.
 *   sc    32 floats per group: dx of its 16 blocks, then their s (s used by q4_1 only).
 *   corr  q4_0: 16 int32 per quad, lane i = -8 * (the sum of qx bytes 4i .. 4i + 3 of both
 *         halves of the quad): vpdpbusd, which sees the codes as unsigned, is fed the nibbles
 *         (q + 8); the correction, preloaded into its accumulator, makes every lane the exact
 *         partial dot product with the signed codes.
 * q8_0, in pairs of blocks:
 *   qx    64 bytes per pair, natural order [b0 | b1].
 *   sc    4 floats per pair: dx0, s0, dx1, s1 (s unused).
 *   corr  16 int32 per pair, lane i = -128 * (the sum of qx bytes 4i .. 4i + 3 of the pair): the
 *         codes are fed as q ^ 0x80 = q + 128.
 * Each section starts on 64 bytes; every byte of a row is written (padding 0), so that the bytes do
 * not depend on the SIMD level. */

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"

#if IG_X86
#define IG_TARGET_AVX512_VNNI                                                                      \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#endif

/* GCC 12.2 at -O3 -march=native miscompiles a vectorized signed int8 * int8 sum-reduction on
 * AVX-512 machines (/work/proto_int8/gccbug.c). The scalar kernel is the definition the others are
 * tested against: it is never vectorized, whatever flags the library is built with. */
#if defined(__GNUC__) && !defined(__clang__)
#define A8_NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define A8_NO_VECTORIZE
#endif

typedef struct act8_geo {
    int64_t nb, np, ng;                  /* blocks, pairs (q8_0) and groups of 16 (q4) per row */
    size_t sc_off, corr_off, row_stride; /* qx at 0; corr_off 0 for q4_1 */
} act8_geo;

static inline size_t align64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

static inline int a8_has_corr(ig_dtype t) {
    return t == IG_DTYPE_Q4_0 || t == IG_DTYPE_Q8_0;
}

static inline int a8_is_q4(ig_dtype t) {
    return t == IG_DTYPE_Q4_0 || t == IG_DTYPE_Q4_1;
}

static act8_geo act8_geometry(ig_dtype t, int64_t K) {
    act8_geo g;
    g.nb = K / 32;
    g.np = (g.nb + 1) / 2;
    g.ng = (g.nb + 15) / 16;
    if (a8_is_q4(t)) {
        g.sc_off = (size_t)g.ng * 512;
        g.corr_off = t == IG_DTYPE_Q4_0 ? g.sc_off + (size_t)g.ng * 128 : 0;
        g.row_stride = g.corr_off ? g.corr_off + (size_t)g.ng * 256 : g.sc_off + (size_t)g.ng * 128;
        return g;
    }
    g.sc_off = (size_t)g.np * 64;
    g.corr_off = a8_has_corr(t) ? g.sc_off + align64((size_t)g.np * 16) : 0;
    g.row_stride = a8_has_corr(t) ? g.corr_off + (size_t)g.np * 64 : g.sc_off + align64(16 * g.np);
    return g;
}

int ig_cpu_act8_supported(ig_dtype t) {
    return t == IG_DTYPE_Q4_0 || t == IG_DTYPE_Q4_1 || t == IG_DTYPE_Q8_0;
}

size_t ig_cpu_act8_bytes(ig_dtype t, int64_t M, int64_t K) {
    if (!ig_cpu_act8_supported(t) || M <= 0 || K <= 0 || K % 32) return 0;
    return (size_t)M * act8_geometry(t, K).row_stride;
}

/* Byte offset in qx of element j (0..31) of block b. */
static inline size_t a8_qx_pos(ig_dtype t, int64_t b, int j) {
    if (t == IG_DTYPE_Q8_0) return (size_t)(b / 2) * 64 + 32 * (size_t)(b & 1) + (size_t)j;
    size_t quad = (size_t)(b / 4) * 128, i = (size_t)(b & 3);
    return quad + 16 * i + (j < 16 ? (size_t)j : 64 + (size_t)(j - 16));
}

/* Byte offsets in a row of block b's dx and s. */
static inline size_t a8_dx_pos(ig_dtype t, const act8_geo *g, int64_t b) {
    if (!a8_is_q4(t)) return g->sc_off + (size_t)b * 8;
    return g->sc_off + (size_t)(b / 16) * 128 + (size_t)(b % 16) * 4;
}

static inline size_t a8_s_pos(ig_dtype t, const act8_geo *g, int64_t b) {
    return a8_dx_pos(t, g, b) + (a8_is_q4(t) ? 64 : 4);
}

/* ---- quantization ------------------------------------------------------------------------------
 * Every level computes the same f32 operations per element (|x|, max ignoring NaN, one division
 * by dx, the clamp, round-half-even): the bytes are identical. */

/* The element's code, given dx != 0. A NaN quotient (NaN x, or inf / inf) is 0; the clamp only
 * matters where dx lost precision (subnormal) or a x is inf. */
static inline int a8_code(float x, float dx) {
    float v = x / dx;
    if (v != v) return 0;
    v = v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v;
    return (int)nearbyintf(v);
}

/* The block's scales (dx, s). */
static void a8_block_side(ig_dtype t, unsigned char *row, const act8_geo *g, int64_t b, float dx,
                          int32_t sq) {
    float s = dx * (float)sq;
    memcpy(row + a8_dx_pos(t, g, b), &dx, 4);
    memcpy(row + a8_s_pos(t, g, b), &s, 4);
}

/* corr lane i of a row: -off * (the 4 codes that lane i of the kernels' dot products sums), so
 * that every int32 lane holds the exact partial dot product of its 4 elements with the signed
 * codes (and the SIMD results differ from the definition only in the f32 summation order). */
static void a8_row_corr(ig_dtype t, unsigned char *row, const act8_geo *g) {
    const int8_t *qx = (const int8_t *)row;
    if (t == IG_DTYPE_Q4_0) {
        for (int64_t q = 0; q < 4 * g->ng; q++)
            for (int i = 0; i < 16; i++) {
                const int8_t *lo = qx + q * 128 + 4 * i, *hi = lo + 64;
                int32_t c = -8 * (lo[0] + lo[1] + lo[2] + lo[3] + hi[0] + hi[1] + hi[2] + hi[3]);
                memcpy(row + g->corr_off + (size_t)(q * 16 + i) * 4, &c, 4);
            }
        return;
    }
    for (int64_t i = 0; i < 16 * g->np; i++) {
        int32_t c = -128 * (qx[4 * i] + qx[4 * i + 1] + qx[4 * i + 2] + qx[4 * i + 3]);
        memcpy(row + g->corr_off + (size_t)i * 4, &c, 4);
    }
}

static float a8_absmax_scalar(const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = fabsf(x[j]);
        amax = a > amax ? a : amax; /* a NaN compares false: ignored, as vmaxps(a, amax) does */
    }
    return amax;
}

static void a8_quantize_block_scalar(ig_dtype t, const float *x, unsigned char *row,
                                     const act8_geo *g, int64_t b) {
    float dx = a8_absmax_scalar(x) / 127.0f;
    int32_t sq = 0;
    for (int j = 0; j < 32; j++) {
        int q = dx != 0.0f ? a8_code(x[j], dx) : 0;
        row[a8_qx_pos(t, b, j)] = (unsigned char)(int8_t)q;
        sq += q;
    }
    a8_block_side(t, row, g, b, dx, sq);
}

#if IG_X86

/* 16 codes of x / dx (dx != 0) as bytes, and their sum added to *sq. */
IG_TARGET_AVX512 IG_INLINE __m128i a8_codes16_avx512(__m512 x, __m512 dx, int32_t *sq) {
    __m512 v = _mm512_div_ps(x, dx);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    __m512i q = _mm512_cvtps_epi32(v);
    *sq += _mm512_reduce_add_epi32(q);
    return _mm512_cvtepi32_epi8(q);
}

IG_TARGET_AVX512 static void a8_quantize_block_avx512(ig_dtype t, const float *x,
                                                      unsigned char *row, const act8_geo *g,
                                                      int64_t b) {
    __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    __m512 a = _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps());
    a = _mm512_max_ps(_mm512_abs_ps(x1), a);
    float dx = _mm512_reduce_max_ps(a) / 127.0f;
    int32_t sq = 0;
    __m128i q0 = _mm_setzero_si128(), q1 = q0;
    if (dx != 0.0f) {
        q0 = a8_codes16_avx512(x0, _mm512_set1_ps(dx), &sq);
        q1 = a8_codes16_avx512(x1, _mm512_set1_ps(dx), &sq);
    }
    _mm_storeu_si128((__m128i *)(row + a8_qx_pos(t, b, 0)), q0);
    _mm_storeu_si128((__m128i *)(row + a8_qx_pos(t, b, 16)), q1);
    a8_block_side(t, row, g, b, dx, sq);
}

/* 8 codes of x / dx (dx != 0) as the low 8 bytes, their sum added to *sq. */
IG_TARGET_AVX2 IG_INLINE __m128i a8_codes8_avx2(__m256 x, __m256 dx, int32_t *sq) {
    __m256 v = _mm256_div_ps(x, dx);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    __m256i q = _mm256_cvtps_epi32(v);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    *sq += _mm_cvtsi128_si32(s) + _mm_extract_epi32(s, 1);
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    return _mm_packs_epi16(w, w);
}

IG_TARGET_AVX2 static void a8_quantize_block_avx2(ig_dtype t, const float *x, unsigned char *row,
                                                  const act8_geo *g, int64_t b) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 xv[4], a = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        xv[i] = _mm256_loadu_ps(x + 8 * i);
        a = _mm256_max_ps(_mm256_and_ps(xv[i], absmask), a);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float dx = _mm_cvtss_f32(m) / 127.0f;
    int32_t sq = 0;
    __m128i q[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(),
                    _mm_setzero_si128()};
    if (dx != 0.0f)
        for (int i = 0; i < 4; i++) q[i] = a8_codes8_avx2(xv[i], _mm256_set1_ps(dx), &sq);
    _mm_storeu_si128((__m128i *)(row + a8_qx_pos(t, b, 0)), _mm_unpacklo_epi64(q[0], q[1]));
    _mm_storeu_si128((__m128i *)(row + a8_qx_pos(t, b, 16)), _mm_unpacklo_epi64(q[2], q[3]));
    a8_block_side(t, row, g, b, dx, sq);
}

#endif /* IG_X86 */

void ig_cpu_act8_quantize(ig_simd_level level, ig_dtype t, const float *x, int64_t M, int64_t K,
                          void *xq) {
    IG_ASSERT(ig_cpu_act8_supported(t) && K > 0 && K % 32 == 0 && M >= 0);
    const act8_geo g = act8_geometry(t, K);
    typedef void (*block_fn)(ig_dtype t, const float *x, unsigned char *row, const act8_geo *g,
                             int64_t b);
    block_fn f = a8_quantize_block_scalar;
#if IG_X86
    if (level == IG_SIMD_AVX512) f = a8_quantize_block_avx512;
    if (level == IG_SIMD_AVX2) f = a8_quantize_block_avx2;
#else
    (void)level;
#endif
    for (int64_t m = 0; m < M; m++) {
        unsigned char *row = (unsigned char *)xq + (size_t)m * g.row_stride;
        if (a8_is_q4(t)) { /* the padding: the blocks past the last to a whole group */
            memset(row, 0, g.row_stride);
            for (int64_t b = 0; b < g.nb; b++) f(t, x + m * K + b * 32, row, &g, b);
            if (g.corr_off) a8_row_corr(t, row, &g);
            continue;
        }
        /* the padding: the second block of an odd last pair, the gaps before 64-byte boundaries */
        if (g.nb & 1) {
            memset(row + (size_t)(g.np - 1) * 64, 0, 64);
            memset(row + g.sc_off + (size_t)(g.np - 1) * 16, 0, 16);
        }
        size_t sc_end = g.sc_off + (size_t)g.np * 16;
        size_t sc_pad_end = g.corr_off ? g.corr_off : g.row_stride;
        memset(row + sc_end, 0, sc_pad_end - sc_end);
        for (int64_t b = 0; b < g.nb; b++) f(t, x + m * K + b * 32, row, &g, b);
        if (g.corr_off) a8_row_corr(t, row, &g);
    }
}

/* ---- scalar: the definition ------------------------------------------------------------------ */

static inline float a8_f16_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ig_f16_to_f32(h);
}

A8_NO_VECTORIZE static void act8_rows_scalar(const void *xq, int64_t M, int64_t K, const void *W,
                                             ig_dtype t, int64_t n0, int64_t n1, const float *bias,
                                             float *y, int64_t ldy) {
    const act8_geo g = act8_geometry(t, K);
    const size_t rb = ig_dtype_row_bytes(t, K), bb = ig_dtype_block_bytes(t);
    for (int64_t n = n0; n < n1; n++) {
        const unsigned char *wrow = (const unsigned char *)W + (size_t)n * rb;
        for (int64_t m = 0; m < M; m++) {
            const unsigned char *xrow = (const unsigned char *)xq + (size_t)m * g.row_stride;
            float acc = 0.0f;
            for (int64_t b = 0; b < g.nb; b++) {
                const unsigned char *blk = wrow + (size_t)b * bb;
                const int8_t *qx = (const int8_t *)xrow;
                float sc[2];
                memcpy(&sc[0], xrow + a8_dx_pos(t, &g, b), 4);
                memcpy(&sc[1], xrow + a8_s_pos(t, &g, b), 4);
                int32_t isum = 0;
                if (t == IG_DTYPE_Q8_0) {
                    for (int j = 0; j < 32; j++)
                        isum += (int32_t)(int8_t)blk[2 + j] * qx[a8_qx_pos(t, b, j)];
                } else {
                    const unsigned char *qs = blk + (t == IG_DTYPE_Q4_0 ? 2 : 4);
                    const int off = t == IG_DTYPE_Q4_0 ? 8 : 0;
                    for (int j = 0; j < 16; j++) {
                        isum += ((qs[j] & 15) - off) * qx[a8_qx_pos(t, b, j)];
                        isum += ((qs[j] >> 4) - off) * qx[a8_qx_pos(t, b, j + 16)];
                    }
                }
                float f = (a8_f16_at(blk) * sc[0]) * (float)isum;
                if (t == IG_DTYPE_Q4_1) f += a8_f16_at(blk + 2) * sc[1];
                acc += f;
            }
            y[m * ldy + n] = acc + (bias ? bias[n] : 0.0f);
        }
    }
}

#if IG_X86

/* Rows of x per pass over a row of W (AVX-512 / AVX2): accumulators in registers. */
#define A8_MB_AVX512 8
#define A8_MB_AVX2   4
/* Software prefetch distance of the 4-bit kernels, in bytes of W ahead of the row being computed
 * (rows are contiguous, so it runs into the next rows; past the end of W it names addresses that
 * are never loaded, which a prefetch may: kept as an integer so that no pointer leaves the object).
 * Each row's lines are prefetched as the row starts. Without it the hardware prefetcher alone left
 * these kernels well short of the read bandwidth, as it did the exact ones (qlinear.c). SmolLM2's
 * Q4_1 file, --act-quant q8, 2 threads, `igen bench-decode --batch 1|8 --prompt-len 64 --random`,
 * builds without and with it in alternating rounds on the project's 2-core EPYC VM: batch 1
 * 225 -> 285 tok/s (median of 6, faster in 6 of 6; IG_SIMD=avx2: 174 -> 197, 5 of 6), batch 8
 * 387 -> 623 (4 of 4). Distances tried with batch 1: 2048 bytes like none, 8192 and 16384
 * between none and 4096. The Q8_0 kernel (the lm_head here) gained nothing and has none. */
#define A8_PF_BYTES 4096

/* The weights of pair p (blocks 2p and 2p + 1; the second absent in a half pair) as scales and
 * codes. dm: [d0, m0, d1, m1] (q4_1) or [d0, 0, d1, 0]; absent values 0. */
static inline uint64_t a8_pair_scales_bits(const unsigned char *b0, const ig_dtype t,
                                           const int half) {
    const size_t bb = t == IG_DTYPE_Q4_0   ? IG_Q4_0_BYTES
                      : t == IG_DTYPE_Q4_1 ? IG_Q4_1_BYTES
                                           : IG_Q8_0_BYTES;
    uint32_t s0 = 0, s1 = 0;
    memcpy(&s0, b0, t == IG_DTYPE_Q4_1 ? 4 : 2);
    if (!half) memcpy(&s1, b0 + bb, t == IG_DTYPE_Q4_1 ? 4 : 2);
    return (uint64_t)s0 | (uint64_t)s1 << 32;
}

/* Bytes of a pair of weight blocks. */
static inline size_t a8_pair_bytes(const ig_dtype t) {
    return 2 * (size_t)(t == IG_DTYPE_Q4_0   ? IG_Q4_0_BYTES
                        : t == IG_DTYPE_Q4_1 ? IG_Q4_1_BYTES
                                             : IG_Q8_0_BYTES);
}

#if IG_X86
/* q4_1's offset terms of a row: lanes 1 and 3 of the two chains' [d dx, m s, d dx, m s] sums. */
IG_TARGET_AVX2 IG_INLINE float a8_mterm(__m128 a, __m128 b) {
    __m128 s = _mm_add_ps(a, b);
    return _mm_cvtss_f32(_mm_shuffle_ps(s, s, 1)) + _mm_cvtss_f32(_mm_shuffle_ps(s, s, 3));
}
#endif

/* ---- AVX-512 VNNI ------------------------------------------------------------------------------
 * q8_0: a pair of blocks per zmm, one vpdpbusd per pair and x row; M = 1 runs two chains (pairs
 * alternate between two accumulators), M >= 2 one per x row.
 * q4_0 / q4_1: a group of 16 blocks at a time. Each quad of weight blocks (4 bb bytes) comes in as
 * two loads, the second masked to the quad's end; one vpermt2w gathers its four 16-byte code runs
 * into [qs0 | qs1 | qs2 | qs3], & 15 and >> 4 give the quad's low and high codes against x's two
 * halves (two vpdpbusd: lanes 4i .. 4i + 3 are block i of the quad). The group's 16 scales (and
 * mins) come out of the quads' first loads with two more vpermt2w and a blend: d dx is one multiply
 * per group and x row, expanded to the quad's lanes by a vpermps. A group past the last whole one
 * (nb % 16 blocks) runs the same code over its quads with zero-masked loads. */

IG_TARGET_AVX512_VNNI IG_INLINE __m512i a8_codes_q8_avx512(const unsigned char *b0,
                                                           const int half) {
    __m256i lo = _mm256_loadu_si256((const __m256i *)(b0 + 2));
    __m256i hi = half ? _mm256_setzero_si256()
                      : _mm256_loadu_si256((const __m256i *)(b0 + IG_Q8_0_BYTES + 2));
    __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    /* the codes as unsigned q + 128 (corr holds -128 * sum(qx)); the absent block's x is 0 */
    return _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
}

/* Pair p of one q8_0 row of W against MB rows of x (row m at xq + m * stride), into chain c. */
IG_TARGET_AVX512_VNNI IG_INLINE void a8_pair_q8_avx512(const unsigned char *b0, const int half,
                                                       const unsigned char *xq, const act8_geo *g,
                                                       int64_t p, const int MB, const int c,
                                                       __m512 acc[][2]) {
    const __m512i sidx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    __m512i w = a8_codes_q8_avx512(b0, half);
    __m128 dm =
        _mm_cvtph_ps(_mm_cvtsi64_si128((long long)a8_pair_scales_bits(b0, IG_DTYPE_Q8_0, half)));
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++) {
        const unsigned char *xr = xq + (size_t)m * g->row_stride;
        __m512i init = _mm512_load_si512((const void *)(xr + g->corr_off + (size_t)p * 64));
        __m512i dot =
            _mm512_dpbusd_epi32(init, w, _mm512_load_si512((const void *)(xr + (size_t)p * 64)));
        __m128 qq = _mm_mul_ps(
            dm, _mm_load_ps((const float *)(const void *)(xr + g->sc_off + (size_t)p * 16)));
        __m512 ds = _mm512_permutexvar_ps(sidx, _mm512_castps128_ps512(qq));
        acc[m][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), ds, acc[m][c]);
    }
}

IG_TARGET_AVX512_VNNI IG_INLINE void a8_row_q8_avx512(const unsigned char *xq, const act8_geo *g,
                                                      const unsigned char *wrow, const int MB,
                                                      float bias, float *y, int64_t ldy) {
    const size_t pb = a8_pair_bytes(IG_DTYPE_Q8_0);
    const int C = MB == 1 ? 2 : 1;
    const int64_t nfull = g->nb / 2;
    __m512 acc[A8_MB_AVX512][2];
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + C <= nfull; p += C) {
        IG_UNROLL(2)
        for (int c = 0; c < C; c++)
            a8_pair_q8_avx512(wrow + (size_t)(p + c) * pb, 0, xq, g, p + c, MB, c, acc);
    }
    if (p < nfull) a8_pair_q8_avx512(wrow + (size_t)p * pb, 0, xq, g, p, MB, 0, acc);
    if (g->nb & 1) a8_pair_q8_avx512(wrow + (size_t)nfull * pb, 1, xq, g, nfull, MB, 0, acc);
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++)
        y[m * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(acc[m][0], acc[m][1])) + bias;
}

/* The q4 kernels' constants for weight type t (block bytes bb, codes at byte off of a block). */
typedef struct a8_q4_consts {
    __m512i codes;  /* vpermt2w over a quad's two loads: [qs0 | qs1 | qs2 | qs3] */
    __m512i scales; /* over quads 0 and 1's first loads: d0..d7 in words 0..7, m0..m7 in 16..23;
                     * over quads 2 and 3's, d8..d15 in words 8..15, m8..m15 in 24..31 */
    __m512i
        expand; /* vpermps of quad k's scales: lanes 4i .. 4i + 3 <- 4k + i (k added per quad) */
} a8_q4_consts;

IG_TARGET_AVX512_VNNI static a8_q4_consts a8_q4_make_consts(ig_dtype t) {
    const int bb = t == IG_DTYPE_Q4_0 ? IG_Q4_0_BYTES : IG_Q4_1_BYTES;
    const int off = t == IG_DTYPE_Q4_0 ? 2 : 4;
    uint16_t codes[32], scales[32];
    int32_t ex[16];
    for (int w = 0; w < 32; w++) {
        codes[w] = (uint16_t)((bb * (w / 8) + off) / 2 + w % 8);
        /* word w of the result: block j = w % 16, its d (w < 16) or m; quad j / 4 is the first
         * table (words 0..31) or the second (32..63) */
        int j = w % 16, word = (bb * (j % 4)) / 2 + (w >= 16 && t == IG_DTYPE_Q4_1 ? 1 : 0);
        scales[w] = (uint16_t)((j / 4) % 2 * 32 + word);
    }
    for (int i = 0; i < 16; i++) ex[i] = i / 4;
    a8_q4_consts c;
    c.codes = _mm512_loadu_si512((const void *)codes);
    c.scales = _mm512_loadu_si512((const void *)scales);
    c.expand = _mm512_loadu_si512((const void *)ex);
    return c;
}

/* One group (NQ quads; nblk blocks, masked loads when tail) of one row of W at w against MB rows of
 * x; accumulators acc[m][a] (NA per row) and, q4_1, accm[m]. */
IG_TARGET_AVX512_VNNI IG_INLINE void
a8_group_q4_avx512(const unsigned char *w, const ig_dtype t, const int NQ, const __mmask64 *tmask,
                   const a8_q4_consts *k, const unsigned char *xq, const act8_geo *g, int64_t G,
                   const int MB, const int NA, __m512 acc[][4], __m512 accm[]) {
    const int bb = t == IG_DTYPE_Q4_0 ? IG_Q4_0_BYTES : IG_Q4_1_BYTES;
    const __mmask64 second = ((__mmask64)1 << (4 * bb - 64)) - 1; /* a quad's last bytes */
    __m512i a[4], b[4];
    IG_UNROLL(4)
    for (int q = 0; q < NQ; q++) {
        const unsigned char *p = w + (size_t)(4 * bb * q);
        a[q] = tmask ? _mm512_maskz_loadu_epi8(tmask[2 * q], p) : _mm512_loadu_si512(p);
        b[q] = _mm512_maskz_loadu_epi8(tmask ? tmask[2 * q + 1] : second, p + 64);
    }
    /* d (words 0..15) and m (16..31) of the group's blocks; absent quads' are zero */
    __m512i z = _mm512_setzero_si512();
    __m512i dm = _mm512_permutex2var_epi16(a[0], k->scales, NQ > 1 ? a[1] : z);
    if (NQ > 2)
        dm = _mm512_mask_blend_epi16(0xFF00FF00u, dm,
                                     _mm512_permutex2var_epi16(a[2], k->scales, NQ > 3 ? a[3] : z));
    else
        dm = _mm512_maskz_mov_epi16(0x00FF00FFu, dm);
    __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
    __m512 mn = _mm512_setzero_ps();
    if (t == IG_DTYPE_Q4_1) mn = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1));
    __m512i lo[4], hi[4];
    const __m512i f = _mm512_set1_epi8(0x0f);
    IG_UNROLL(4)
    for (int q = 0; q < NQ; q++) {
        __m512i c = _mm512_permutex2var_epi16(a[q], k->codes, b[q]);
        lo[q] = _mm512_and_si512(c, f);
        hi[q] = _mm512_and_si512(_mm512_srli_epi16(c, 4), f);
    }
    IG_UNROLL(8)
    for (int m = 0; m < MB; m++) {
        const unsigned char *xr = xq + (size_t)m * g->row_stride;
        const float *sc = (const float *)(const void *)(xr + g->sc_off + (size_t)G * 128);
        __m512 dd = _mm512_mul_ps(d, _mm512_load_ps(sc));
        if (t == IG_DTYPE_Q4_1) accm[m] = _mm512_fmadd_ps(mn, _mm512_load_ps(sc + 16), accm[m]);
        const unsigned char *qx = xr + (size_t)G * 512;
        IG_UNROLL(4)
        for (int q = 0; q < NQ; q++) {
            __m512i init =
                t == IG_DTYPE_Q4_0
                    ? _mm512_load_si512((const void *)(xr + g->corr_off + (size_t)(4 * G + q) * 64))
                    : _mm512_setzero_si512();
            __m512i dot =
                _mm512_dpbusd_epi32(init, lo[q], _mm512_load_si512((const void *)(qx + 128 * q)));
            dot = _mm512_dpbusd_epi32(dot, hi[q],
                                      _mm512_load_si512((const void *)(qx + 128 * q + 64)));
            __m512 s =
                _mm512_permutexvar_ps(_mm512_add_epi32(k->expand, _mm512_set1_epi32(4 * q)), dd);
            const int ai = NA == 4 ? q : NA == 2 ? q & 1 : 0;
            acc[m][ai] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[m][ai]);
        }
    }
}

/* Rows [n0, n1) of W against MB rows of x (y at column n of ym). */
IG_TARGET_AVX512_VNNI IG_INLINE void
a8_rows_q4_avx512(const unsigned char *xq, const act8_geo *g, const void *W, const ig_dtype t,
                  const int MB, const a8_q4_consts *k, const __mmask64 *tmask, int64_t n0,
                  int64_t n1, const float *bias_v, float *ym, int64_t ldy) {
    const int NA = MB == 1 ? 4 : MB <= 3 ? 2 : 1;
    const size_t gb = 16 * (size_t)(t == IG_DTYPE_Q4_0 ? IG_Q4_0_BYTES : IG_Q4_1_BYTES);
    const size_t rb = (size_t)g->nb * gb / 16;
    for (int64_t n = n0; n < n1; n++) {
        const unsigned char *wrow = (const unsigned char *)W + (size_t)n * rb;
        const uintptr_t pf = (uintptr_t)wrow + A8_PF_BYTES;
        for (size_t c = 0; c < rb; c += 64) _mm_prefetch((const char *)(pf + c), _MM_HINT_T0);
        float *y = ym + n;
        const float bias = bias_v ? bias_v[n] : 0.0f;
        __m512 acc[A8_MB_AVX512][4], accm[A8_MB_AVX512];
        IG_UNROLL(8)
        for (int m = 0; m < MB; m++) {
            acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = accm[m] = _mm512_setzero_ps();
        }
        const int64_t nfull = g->nb / 16;
        for (int64_t G = 0; G < nfull; G++)
            a8_group_q4_avx512(wrow + (size_t)G * gb, t, 4, NULL, k, xq, g, G, MB, NA, acc, accm);
        const unsigned char *wt = wrow + (size_t)nfull * gb;
        switch ((g->nb % 16 + 3) / 4) {
        case 1:
            a8_group_q4_avx512(wt, t, 1, tmask, k, xq, g, nfull, MB, NA, acc, accm);
            break;
        case 2:
            a8_group_q4_avx512(wt, t, 2, tmask, k, xq, g, nfull, MB, NA, acc, accm);
            break;
        case 3:
            a8_group_q4_avx512(wt, t, 3, tmask, k, xq, g, nfull, MB, NA, acc, accm);
            break;
        case 4:
            a8_group_q4_avx512(wt, t, 4, tmask, k, xq, g, nfull, MB, NA, acc, accm);
            break;
        default:
            break;
        }
        IG_UNROLL(8)
        for (int m = 0; m < MB; m++) {
            __m512 s = _mm512_add_ps(_mm512_add_ps(acc[m][0], acc[m][1]),
                                     _mm512_add_ps(acc[m][2], acc[m][3]));
            y[m * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(s, accm[m])) + bias;
        }
    }
}

/* The masks of the tail group's loads: quad q's bytes of the nb % 16 blocks left, its first load's
 * in tmask[2q], its second's in tmask[2q + 1]. */
static void a8_q4_tail_masks(ig_dtype t, const act8_geo *g, __mmask64 tmask[8]) {
    const int bb = t == IG_DTYPE_Q4_0 ? IG_Q4_0_BYTES : IG_Q4_1_BYTES;
    const int r = (int)(g->nb % 16);
    for (int q = 0; q < 4; q++) {
        int n = (r - 4 * q) * bb;
        n = n < 0 ? 0 : n > 4 * bb ? 4 * bb : n;
        int n0 = n > 64 ? 64 : n, n1 = n - n0;
        tmask[2 * q] = n0 == 64 ? ~(__mmask64)0 : ((__mmask64)1 << n0) - 1;
        tmask[2 * q + 1] = ((__mmask64)1 << n1) - 1;
    }
}

#define A8_ROWS_SWITCH(MB_MAX, CALL)                                                               \
    switch (M - m < (MB_MAX) ? M - m : (MB_MAX)) {                                                 \
    case 8:                                                                                        \
        CALL(8);                                                                                   \
        break;                                                                                     \
    case 7:                                                                                        \
        CALL(7);                                                                                   \
        break;                                                                                     \
    case 6:                                                                                        \
        CALL(6);                                                                                   \
        break;                                                                                     \
    case 5:                                                                                        \
        CALL(5);                                                                                   \
        break;                                                                                     \
    case 4:                                                                                        \
        CALL(4);                                                                                   \
        break;                                                                                     \
    case 3:                                                                                        \
        CALL(3);                                                                                   \
        break;                                                                                     \
    case 2:                                                                                        \
        CALL(2);                                                                                   \
        break;                                                                                     \
    default:                                                                                       \
        CALL(1);                                                                                   \
        break;                                                                                     \
    }

IG_TARGET_AVX512_VNNI IG_INLINE void act8_rows_avx512(const void *xq, int64_t M, int64_t K,
                                                      const void *W, const ig_dtype t, int64_t n0,
                                                      int64_t n1, const float *bias, float *y,
                                                      int64_t ldy) {
    const act8_geo g = act8_geometry(t, K);
    const size_t rb = ig_dtype_row_bytes(t, K);
    if (t != IG_DTYPE_Q8_0) {
        const a8_q4_consts k = a8_q4_make_consts(t);
        __mmask64 tmask[8];
        a8_q4_tail_masks(t, &g, tmask);
        for (int64_t m = 0; m < M; m += A8_MB_AVX512) {
            const unsigned char *xm = (const unsigned char *)xq + (size_t)m * g.row_stride;
            float *ym = y + m * ldy;
#define A8_CALL_Q4(mb) a8_rows_q4_avx512(xm, &g, W, t, mb, &k, tmask, n0, n1, bias, ym, ldy)
            A8_ROWS_SWITCH(A8_MB_AVX512, A8_CALL_Q4)
#undef A8_CALL_Q4
        }
        return;
    }
    for (int64_t n = n0; n < n1; n++) {
        const unsigned char *wrow = (const unsigned char *)W + (size_t)n * rb;
        float b = bias ? bias[n] : 0.0f;
        for (int64_t m = 0; m < M; m += A8_MB_AVX512) {
            const unsigned char *xm = (const unsigned char *)xq + (size_t)m * g.row_stride;
            float *ym = y + m * ldy + n;
#define A8_CALL_Q8(mb) a8_row_q8_avx512(xm, &g, wrow, mb, b, ym, ldy)
            A8_ROWS_SWITCH(A8_MB_AVX512, A8_CALL_Q8)
#undef A8_CALL_Q8
        }
    }
}

/* ---- AVX2: maddubs / madd ----------------------------------------------------------------------
 * q4_0 / q4_1 a pair per step as [qs0 | qs1] & 15 and >> 4 against the pair's 32 bytes in each
 * half of its quad (lanes 0-3 block 0, 4-7 block 1; q4_0's correction is the quad's corr lanes of
 * the pair, which madd's lanes match); q8_0 a block per ymm with llama.cpp's sign trick (|w| as
 * unsigned, x negated where w < 0): every maddubs pair sum is at most 2 * 128 * 127 < 2^15 (x is at
 * most 127 in magnitude), the 4-bit ones 2 * 15 * 127 (lo and hi added as int16: 7620). */

IG_TARGET_AVX2 IG_INLINE __m256i a8_q8_dot_avx2(__m256i w, __m256i x) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

IG_TARGET_AVX2 IG_INLINE void a8_pair_avx2(const unsigned char *b0, const ig_dtype t,
                                           const int half, const unsigned char *xq,
                                           const act8_geo *g, int64_t p, const int MB, const int c,
                                           __m256 acc[][2], __m128 accm[][2]) {
    __m128 dm = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)a8_pair_scales_bits(b0, t, half)));
    if (t == IG_DTYPE_Q8_0) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
        __m256i w1 = half ? _mm256_setzero_si256()
                          : _mm256_loadu_si256((const __m256i *)(b0 + IG_Q8_0_BYTES + 2));
        IG_UNROLL(4)
        for (int m = 0; m < MB; m++) {
            const unsigned char *xr = xq + (size_t)m * g->row_stride + (size_t)p * 64;
            __m128 qq = _mm_mul_ps(
                dm, _mm_load_ps((const float *)(const void *)(xq + (size_t)m * g->row_stride +
                                                              g->sc_off + (size_t)p * 16)));
            __m256i d0 = a8_q8_dot_avx2(w0, _mm256_load_si256((const __m256i *)xr));
            acc[m][c] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_broadcastss_ps(qq), acc[m][c]);
            if (!half) {
                __m256i d1 = a8_q8_dot_avx2(w1, _mm256_load_si256((const __m256i *)(xr + 32)));
                acc[m][c] = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(d1),
                    _mm256_permutevar8x32_ps(_mm256_castps128_ps256(qq), _mm256_set1_epi32(2)),
                    acc[m][c]);
            }
        }
        return;
    }
    const int off = t == IG_DTYPE_Q4_0 ? 2 : 4, bb = t == IG_DTYPE_Q4_0 ? 18 : 20;
    __m128i q0 = _mm_loadu_si128((const __m128i *)(b0 + off));
    __m128i q1 = half ? _mm_setzero_si128() : _mm_loadu_si128((const __m128i *)(b0 + bb + off));
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    __m256i wlo = _mm256_and_si256(v, lo4), whi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
    const __m256i sidx = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2);
    IG_UNROLL(4)
    for (int m = 0; m < MB; m++) {
        const unsigned char *xr = xq + (size_t)m * g->row_stride;
        /* blocks 2p, 2p + 1: half p & 1 of quad p / 2 */
        const unsigned char *xp = xr + (size_t)(p / 2) * 128 + 32 * (size_t)(p & 1);
        __m256i s16 = _mm256_add_epi16(
            _mm256_maddubs_epi16(wlo, _mm256_load_si256((const __m256i *)xp)),
            _mm256_maddubs_epi16(whi, _mm256_load_si256((const __m256i *)(xp + 64))));
        __m256i dot = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
        if (t == IG_DTYPE_Q4_0)
            dot = _mm256_add_epi32(
                dot, _mm256_load_si256((const __m256i *)(xr + g->corr_off + (size_t)(p / 2) * 64 +
                                                         32 * (size_t)(p & 1))));
        const unsigned char *sp = xr + a8_dx_pos(t, g, 2 * p); /* dx0 dx1, s0 s1 64 bytes on */
        __m128 qq = _mm_mul_ps(
            dm, _mm_unpacklo_ps(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)sp)),
                                _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(sp + 64)))));
        if (t == IG_DTYPE_Q4_1) accm[m][c] = _mm_add_ps(accm[m][c], qq);
        __m256 ds = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(qq), sidx);
        acc[m][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), ds, acc[m][c]);
    }
}

IG_TARGET_AVX2 IG_INLINE float a8_hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

IG_TARGET_AVX2 IG_INLINE void a8_row_avx2(const unsigned char *xq, const act8_geo *g,
                                          const unsigned char *wrow, const ig_dtype t, const int MB,
                                          float bias, float *y, int64_t ldy) {
    const size_t pb = a8_pair_bytes(t);
    const int C = MB == 1 ? 2 : 1;
    const int64_t nfull = g->nb / 2;
    __m256 acc[A8_MB_AVX2][2];
    __m128 accm[A8_MB_AVX2][2];
    IG_UNROLL(4)
    for (int m = 0; m < MB; m++) {
        acc[m][0] = acc[m][1] = _mm256_setzero_ps();
        accm[m][0] = accm[m][1] = _mm_setzero_ps();
    }
    int64_t p = 0;
    for (; p + C <= nfull; p += C) {
        IG_UNROLL(2)
        for (int c = 0; c < C; c++)
            a8_pair_avx2(wrow + (size_t)(p + c) * pb, t, 0, xq, g, p + c, MB, c, acc, accm);
    }
    if (p < nfull) a8_pair_avx2(wrow + (size_t)p * pb, t, 0, xq, g, p, MB, 0, acc, accm);
    if (g->nb & 1) a8_pair_avx2(wrow + (size_t)nfull * pb, t, 1, xq, g, nfull, MB, 0, acc, accm);
    IG_UNROLL(4)
    for (int m = 0; m < MB; m++) {
        float v = a8_hsum_avx2(_mm256_add_ps(acc[m][0], acc[m][1]));
        if (t == IG_DTYPE_Q4_1) v += a8_mterm(accm[m][0], accm[m][1]);
        y[m * ldy] = v + bias;
    }
}

IG_TARGET_AVX2 IG_INLINE void act8_rows_avx2(const void *xq, int64_t M, int64_t K, const void *W,
                                             const ig_dtype t, int64_t n0, int64_t n1,
                                             const float *bias, float *y, int64_t ldy) {
    const act8_geo g = act8_geometry(t, K);
    const size_t rb = ig_dtype_row_bytes(t, K);
    for (int64_t n = n0; n < n1; n++) {
        const unsigned char *wrow = (const unsigned char *)W + (size_t)n * rb;
        if (t != IG_DTYPE_Q8_0) {
            const uintptr_t pf = (uintptr_t)wrow + A8_PF_BYTES;
            for (size_t c = 0; c < rb; c += 64) _mm_prefetch((const char *)(pf + c), _MM_HINT_T0);
        }
        float b = bias ? bias[n] : 0.0f;
        for (int64_t m = 0; m < M; m += A8_MB_AVX2) {
            const unsigned char *xm = (const unsigned char *)xq + (size_t)m * g.row_stride;
            float *ym = y + m * ldy + n;
            switch (M - m < A8_MB_AVX2 ? M - m : A8_MB_AVX2) {
            case 4:
                a8_row_avx2(xm, &g, wrow, t, 4, b, ym, ldy);
                break;
            case 3:
                a8_row_avx2(xm, &g, wrow, t, 3, b, ym, ldy);
                break;
            case 2:
                a8_row_avx2(xm, &g, wrow, t, 2, b, ym, ldy);
                break;
            default:
                a8_row_avx2(xm, &g, wrow, t, 1, b, ym, ldy);
                break;
            }
        }
    }
}

#endif /* IG_X86 */

/* One out-of-line function per (level, type), so that the type is a constant inside. */
#define A8_WRAP_SCALAR(suffix, T)                                                                  \
    static void act8_rows_scalar_##suffix(const void *xq, int64_t M, int64_t K, const void *W,     \
                                          int64_t n0, int64_t n1, const float *bias, float *y,     \
                                          int64_t ldy) {                                           \
        act8_rows_scalar(xq, M, K, W, T, n0, n1, bias, y, ldy);                                    \
    }
A8_WRAP_SCALAR(q4_0, IG_DTYPE_Q4_0)
A8_WRAP_SCALAR(q4_1, IG_DTYPE_Q4_1)
A8_WRAP_SCALAR(q8_0, IG_DTYPE_Q8_0)
#undef A8_WRAP_SCALAR

#if IG_X86
#define A8_WRAP(suffix, T)                                                                         \
    IG_TARGET_AVX512_VNNI static void act8_rows_avx512_##suffix(                                   \
        const void *xq, int64_t M, int64_t K, const void *W, int64_t n0, int64_t n1,               \
        const float *bias, float *y, int64_t ldy) {                                                \
        act8_rows_avx512(xq, M, K, W, T, n0, n1, bias, y, ldy);                                    \
    }                                                                                              \
    IG_TARGET_AVX2 static void act8_rows_avx2_##suffix(const void *xq, int64_t M, int64_t K,       \
                                                       const void *W, int64_t n0, int64_t n1,      \
                                                       const float *bias, float *y, int64_t ldy) { \
        act8_rows_avx2(xq, M, K, W, T, n0, n1, bias, y, ldy);                                      \
    }
A8_WRAP(q4_0, IG_DTYPE_Q4_0)
A8_WRAP(q4_1, IG_DTYPE_Q4_1)
A8_WRAP(q8_0, IG_DTYPE_Q8_0)
#undef A8_WRAP
#endif

ig_act8_rows_fn ig_cpu_act8_rows(ig_simd_level level, ig_dtype t) {
    if (!ig_cpu_act8_supported(t)) return NULL;
    int i = t == IG_DTYPE_Q4_0 ? 0 : t == IG_DTYPE_Q4_1 ? 1 : 2;
#if IG_X86
    static const ig_act8_rows_fn k_avx512[3] = {act8_rows_avx512_q4_0, act8_rows_avx512_q4_1,
                                                act8_rows_avx512_q8_0};
    static const ig_act8_rows_fn k_avx2[3] = {act8_rows_avx2_q4_0, act8_rows_avx2_q4_1,
                                              act8_rows_avx2_q8_0};
    /* vpdpbusd is AVX-512 VNNI, which the AVX-512 level does not include */
    if (level == IG_SIMD_AVX512 && __builtin_cpu_supports("avx512vnni")) return k_avx512[i];
    if (level >= IG_SIMD_AVX2) return k_avx2[i];
#else
    (void)level;
#endif
    static const ig_act8_rows_fn k_scalar[3] = {act8_rows_scalar_q4_0, act8_rows_scalar_q4_1,
                                                act8_rows_scalar_q8_0};
    return k_scalar[i];
}
