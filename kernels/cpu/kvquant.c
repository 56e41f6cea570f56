/* KV-cache quantization codec: group-wise min/scale quantization of rows to 8, 4 or 2 bits and
 * back (layout and error bound in kvquant.h). SIMD paths compute codes and values with the same f32
 * operations as the reference, so bytes and floats are identical at every level. Rows are
 * independent; long calls are split over the kernel threads. Nothing here allocates. */
#include "kernels/cpu/kvquant.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kvquant_simd.h"

/* Values per call below which the codec stays on one thread. */
#define KVQ_MIN_PER_THREAD (64 * 1024)
#define KVQ_F16_MAX        65504.0f

static int kvq_valid(int hd, int bits, int group) {
    return hd > 0 && group > 0 && hd % group == 0 && (bits == 8 || bits == 4 || bits == 2) &&
           (group * bits) % 8 == 0;
}

size_t ig_kvq_row_bytes(int hd, int bits, int group) {
    if (!kvq_valid(hd, bits, group)) return 0;
    return (size_t)(hd / group) * (size_t)(4 + group * bits / 8);
}

/* ---- per-group parameters (shared by every level) -------------------------------------------- */

/* x rounded to f16 toward -inf / +inf (x finite, within the f16 range). */
static uint16_t f16_down(float x) {
    uint16_t h = ig_f32_to_f16(x);
    if (ig_f16_to_f32(h) > x) h = h == 0x0000u ? 0x8001u : (h & 0x8000u) ? h + 1u : h - 1u;
    return h;
}
static uint16_t f16_up(float x) {
    uint16_t h = ig_f32_to_f16(x);
    if (ig_f16_to_f32(h) < x) h = h == 0x8000u ? 0x0001u : (h & 0x8000u) ? h - 1u : h + 1u;
    return h;
}

static float clamp_f16(float x) {
    return fminf(fmaxf(x, -KVQ_F16_MAX), KVQ_F16_MAX);
}

typedef struct kvq_group {
    float min, scale, inv; /* as stored (widened from f16); inv = 1 / scale or 0 */
} kvq_group;

static kvq_group store_params(uint16_t mh, uint16_t sh, float min, float scale, uint8_t *blk) {
    kvq_group p = {min, scale, scale > 0.0f ? 1.0f / scale : 0.0f};
    blk[0] = (uint8_t)(mh & 0xffu);
    blk[1] = (uint8_t)(mh >> 8);
    blk[2] = (uint8_t)(sh & 0xffu);
    blk[3] = (uint8_t)(sh >> 8);
    return p;
}

/* From the group's (clamped) min and max: writes min and scale into the block header. */
static kvq_group group_params(float lo, float hi, int bits, uint8_t *blk) {
    lo += 0.0f; /* -0 -> +0: min(-0, +0) may come out either way, the bytes must not */
    hi += 0.0f;
    uint16_t mh = f16_down(lo);
    float mn = ig_f16_to_f32(mh);
    uint16_t sh = f16_up((hi - mn) / (float)((1 << bits) - 1));
    return store_params(mh, sh, mn, ig_f16_to_f32(sh), blk);
}

static kvq_group group_header(const uint8_t *blk) {
    kvq_group p;
    p.min = ig_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    p.scale = ig_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
    p.inv = 0.0f;
    return p;
}

static uint8_t code_of(float x, kvq_group p, int bits) {
    float t = (clamp_f16(x) - p.min) * p.inv;
    t = fminf(fmaxf(t, 0.0f), (float)((1 << bits) - 1));
    return (uint8_t)nearbyintf(t);
}

/* Codes and values i0 .. group-1 of one block, one at a time (tails of the SIMD paths). */
static void encode_tail(const float *x, int i0, int group, int bits, kvq_group p, uint8_t *codes) {
    for (int i = i0; i < group; i++) {
        int bit = i * bits;
        uint8_t c = code_of(x[i], p, bits);
        if (bit % 8 == 0) codes[bit / 8] = 0;
        codes[bit / 8] |= (uint8_t)(c << (bit % 8));
    }
}

static void decode_tail(const uint8_t *codes, int i0, int group, int bits, kvq_group p, float *y) {
    unsigned mask = (1u << bits) - 1u;
    for (int i = i0; i < group; i++) {
        int bit = i * bits;
        unsigned c = (codes[bit / 8] >> (bit % 8)) & mask;
        y[i] = fmaf((float)c, p.scale, p.min);
    }
}

/* ---- scalar --------------------------------------------------------------------------------- */

static void quant_row_scalar(const float *x, int hd, int bits, int group, uint8_t *out) {
    size_t bb = (size_t)(4 + group * bits / 8);
    for (int b = 0; b < hd / group; b++) {
        const float *xg = x + b * group;
        uint8_t *blk = out + (size_t)b * bb;
        float lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < group; i++) {
            float c = clamp_f16(xg[i]);
            lo = fminf(lo, c);
            hi = fmaxf(hi, c);
        }
        kvq_group p = group_params(lo, hi, bits, blk);
        encode_tail(xg, 0, group, bits, p, blk + 4);
    }
}

static void dequant_row_scalar(const uint8_t *in, int hd, int bits, int group, float *y) {
    size_t bb = (size_t)(4 + group * bits / 8);
    for (int b = 0; b < hd / group; b++) {
        const uint8_t *blk = in + (size_t)b * bb;
        decode_tail(blk + 4, 0, group, bits, group_header(blk), y + b * group);
    }
}

#if IG_X86

/* 16 codes, already shifted to their bit offset within a byte (c_i << (i * bits % 8)), as bytes
 * in order -> the group's packed bytes (16 * bits / 8 of them). */
IG_TARGET_AVX2 IG_INLINE void pack16(__m128i b, int bits, uint8_t *dst) {
    if (bits == 8) {
        _mm_storeu_si128((__m128i *)dst, b);
        return;
    }
    /* Codes of one byte occupy disjoint bits: adding them is OR. */
    __m128i pairs = _mm_maddubs_epi16(b, _mm_set1_epi8(1)); /* 8 x u16: b[2m] + b[2m+1] */
    if (bits == 4) {
        _mm_storel_epi64((__m128i *)dst, _mm_packus_epi16(pairs, pairs));
        return;
    }
    __m128i quads = _mm_madd_epi16(pairs, _mm_set1_epi16(1)); /* 4 x u32 */
    __m128i w = _mm_packus_epi16(_mm_packus_epi32(quads, quads), _mm_setzero_si128());
    int32_t v = _mm_cvtsi128_si32(w);
    memcpy(dst, &v, 4);
}

/* ---- AVX2 ----------------------------------------------------------------------------------- */

/* group_params with F16C: vcvtps2ph rounds toward -inf / +inf by itself (the same bits as
 * f16_down / f16_up, which take most of a row's time in software). */
IG_TARGET_AVX2 static kvq_group group_params_f16c(float lo, float hi, int bits, uint8_t *blk) {
    lo += 0.0f;
    hi += 0.0f;
    uint16_t mh = (uint16_t)_cvtss_sh(lo, _MM_FROUND_TO_NEG_INF);
    float mn = _cvtsh_ss(mh);
    uint16_t sh = (uint16_t)_cvtss_sh((hi - mn) / (float)((1 << bits) - 1), _MM_FROUND_TO_POS_INF);
    return store_params(mh, sh, mn, _cvtsh_ss(sh), blk);
}

IG_TARGET_AVX2 IG_INLINE __m256 clamp8(__m256 x) {
    return _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-KVQ_F16_MAX)),
                         _mm256_set1_ps(KVQ_F16_MAX));
}

/* 8 codes as epi32: round-half-even(clamp((x - min) * inv, 0, L)). max/min return their second
 * operand for NaN, so NaN becomes 0 as fmaxf does. */
IG_TARGET_AVX2 IG_INLINE __m256i codes8(__m256 x, __m256 mn, __m256 inv, __m256 lv) {
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(clamp8(x), mn), inv);
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), lv);
    return _mm256_cvtps_epi32(t);
}

/* Per-lane left shifts that place 8 consecutive codes at their bit offsets within a byte. */
IG_TARGET_AVX2 IG_INLINE __m256i shifts8(int bits) {
    if (bits == 4) return _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
    if (bits == 2) return _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    return _mm256_setzero_si256();
}

IG_TARGET_AVX2 static void quant_row_avx2(const float *x, int hd, int bits, int group,
                                          uint8_t *out) {
    size_t bb = (size_t)(4 + group * bits / 8);
    int gv = group & ~15;
    __m256 lv = _mm256_set1_ps((float)((1 << bits) - 1));
    __m256i sh = shifts8(bits);
    for (int b = 0; b < hd / group; b++) {
        const float *xg = x + b * group;
        uint8_t *blk = out + (size_t)b * bb;
        __m256 lo8 = _mm256_set1_ps(INFINITY), hi8 = _mm256_set1_ps(-INFINITY);
        int i = 0;
        for (; i + 8 <= group; i += 8) {
            __m256 c = clamp8(_mm256_loadu_ps(xg + i));
            lo8 = _mm256_min_ps(lo8, c);
            hi8 = _mm256_max_ps(hi8, c);
        }
        float lb[8], hb[8], lo = INFINITY, hi = -INFINITY;
        _mm256_storeu_ps(lb, lo8);
        _mm256_storeu_ps(hb, hi8);
        for (int j = 0; j < 8; j++) {
            lo = fminf(lo, lb[j]);
            hi = fmaxf(hi, hb[j]);
        }
        for (; i < group; i++) {
            lo = fminf(lo, clamp_f16(xg[i]));
            hi = fmaxf(hi, clamp_f16(xg[i]));
        }
        kvq_group p = group_params_f16c(lo, hi, bits, blk);
        __m256 mn = _mm256_set1_ps(p.min), inv = _mm256_set1_ps(p.inv);
        uint8_t *codes = blk + 4;
        for (i = 0; i < gv; i += 16) {
            __m256i a = _mm256_sllv_epi32(codes8(_mm256_loadu_ps(xg + i), mn, inv, lv), sh);
            __m256i c = _mm256_sllv_epi32(codes8(_mm256_loadu_ps(xg + i + 8), mn, inv, lv), sh);
            /* 16 x u16 in order, then 16 bytes in order */
            __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, c), 0xd8);
            __m128i bytes =
                _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
            pack16(bytes, bits, codes + i * bits / 8);
        }
        encode_tail(xg, gv, group, bits, p, codes);
    }
}

/* 8 codes starting at code index i (a multiple of 8) of a block as f32. */
IG_TARGET_AVX2 IG_INLINE __m256 load_codes8(const uint8_t *codes, int i, int bits) {
    __m128i raw;
    if (bits == 8) {
        raw = _mm_loadl_epi64((const __m128i *)(codes + i));
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(raw));
    }
    __m256i sh, mask;
    if (bits == 4) {
        int32_t v;
        memcpy(&v, codes + i / 2, 4);
        raw = _mm_shuffle_epi8(_mm_cvtsi32_si128(v),
                               _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0));
        sh = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
        mask = _mm256_set1_epi32(15);
    } else {
        uint16_t v;
        memcpy(&v, codes + i / 4, 2);
        raw = _mm_shuffle_epi8(_mm_cvtsi32_si128(v),
                               _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0));
        sh = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
        mask = _mm256_set1_epi32(3);
    }
    __m256i c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(raw), sh), mask);
    return _mm256_cvtepi32_ps(c);
}

IG_TARGET_AVX2 static void dequant_row_avx2(const uint8_t *in, int hd, int bits, int group,
                                            float *y) {
    size_t bb = (size_t)(4 + group * bits / 8);
    int gv = group & ~7;
    for (int b = 0; b < hd / group; b++) {
        const uint8_t *blk = in + (size_t)b * bb;
        float *yg = y + b * group;
        if (gv > 0) {
            __m128 h = load_header2(blk);
            __m256 mn = _mm256_broadcastss_ps(h), sc = _mm256_broadcastss_ps(_mm_movehdup_ps(h));
            for (int i = 0; i < gv; i += 8)
                _mm256_storeu_ps(yg + i, _mm256_fmadd_ps(load_codes8(blk + 4, i, bits), sc, mn));
        }
        if (gv < group) decode_tail(blk + 4, gv, group, bits, group_header(blk), yg);
    }
}

/* ---- AVX-512 -------------------------------------------------------------------------------- */

IG_TARGET_AVX512 IG_INLINE __m512 clamp16(__m512 x) {
    return _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-KVQ_F16_MAX)),
                         _mm512_set1_ps(KVQ_F16_MAX));
}

IG_TARGET_AVX512 static void quant_row_avx512(const float *x, int hd, int bits, int group,
                                              uint8_t *out) {
    size_t bb = (size_t)(4 + group * bits / 8);
    int gv = group & ~15;
    __m512 lv = _mm512_set1_ps((float)((1 << bits) - 1));
    __m512i sh = bits == 4   ? _mm512_set4_epi32(4, 0, 4, 0)
                 : bits == 2 ? _mm512_set4_epi32(6, 4, 2, 0)
                             : _mm512_setzero_si512();
    for (int b = 0; b < hd / group; b++) {
        const float *xg = x + b * group;
        uint8_t *blk = out + (size_t)b * bb;
        __m512 lo16 = _mm512_set1_ps(INFINITY), hi16 = _mm512_set1_ps(-INFINITY);
        for (int i = 0; i < group; i += 16) {
            __mmask16 k =
                group - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (group - i)) - 1u);
            __m512 c = clamp16(_mm512_maskz_loadu_ps(k, xg + i));
            lo16 = _mm512_mask_min_ps(lo16, k, lo16, c);
            hi16 = _mm512_mask_max_ps(hi16, k, hi16, c);
        }
        kvq_group p =
            group_params_f16c(_mm512_reduce_min_ps(lo16), _mm512_reduce_max_ps(hi16), bits, blk);
        __m512 mn = _mm512_set1_ps(p.min), inv = _mm512_set1_ps(p.inv);
        uint8_t *codes = blk + 4;
        for (int i = 0; i < gv; i += 16) {
            __m512 t = _mm512_mul_ps(_mm512_sub_ps(clamp16(_mm512_loadu_ps(xg + i)), mn), inv);
            t = _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), lv);
            __m512i c = _mm512_sllv_epi32(_mm512_cvtps_epi32(t), sh);
            pack16(_mm512_cvtepi32_epi8(c), bits, codes + i * bits / 8);
        }
        encode_tail(xg, gv, group, bits, p, codes);
    }
}

IG_TARGET_AVX512 static void dequant_row_avx512(const uint8_t *in, int hd, int bits, int group,
                                                float *y) {
    size_t bb = (size_t)(4 + group * bits / 8);
    int gv = group & ~15;
    for (int b = 0; b < hd / group; b++) {
        const uint8_t *blk = in + (size_t)b * bb;
        __m128 h = load_header2(blk);
        __m512 mn = _mm512_broadcastss_ps(h), sc = _mm512_broadcastss_ps(_mm_movehdup_ps(h));
        float *yg = y + b * group;
        for (int i = 0; i < gv; i += 16)
            _mm512_storeu_ps(yg + i, _mm512_fmadd_ps(load_codes16(blk + 4, i, bits), sc, mn));
        if (gv < group) decode_tail(blk + 4, gv, group, bits, group_header(blk), yg);
    }
}

#endif /* IG_X86 */

/* ---- entry points --------------------------------------------------------------------------- */

typedef void (*quant_row_fn)(const float *x, int hd, int bits, int group, uint8_t *out);

/* Threads for n_rows rows: one, with no OpenMP region at all, when called inside a parallel region
 * (an attention task decoding its rows): a nested region, even of one thread, allocates a team
 * per call, which 4-bit attention on machines without AVX-512 paid for every row it decoded. */
static int kvq_threads(int64_t n_rows, int hd) {
    if (omp_in_parallel()) return 1;
    return ig_cpu_threads_for(n_rows * hd, KVQ_MIN_PER_THREAD);
}
typedef void (*dequant_row_fn)(const uint8_t *in, int hd, int bits, int group, float *y);

void ig_kvq_quantize_rows(const float *x, int64_t n_rows, int hd, int bits, int group,
                          uint8_t *out) {
    IG_ASSERT(kvq_valid(hd, bits, group) && n_rows >= 0);
    quant_row_fn f = quant_row_scalar;
#if IG_X86
    ig_simd_level l = ig_cpu_simd_level();
    if (l == IG_SIMD_AVX512) f = quant_row_avx512;
    if (l == IG_SIMD_AVX2) f = quant_row_avx2;
#endif
    size_t rb = ig_kvq_row_bytes(hd, bits, group);
    int nt = kvq_threads(n_rows, hd);
    if (nt <= 1) {
        for (int64_t r = 0; r < n_rows; r++) f(x + r * hd, hd, bits, group, out + (size_t)r * rb);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < n_rows; r++) f(x + r * hd, hd, bits, group, out + (size_t)r * rb);
}

static dequant_row_fn dequant_fn(void) {
#if IG_X86
    ig_simd_level l = ig_cpu_simd_level();
    if (l == IG_SIMD_AVX512) return dequant_row_avx512;
    if (l == IG_SIMD_AVX2) return dequant_row_avx2;
#endif
    return dequant_row_scalar;
}

void ig_kvq_dequantize_rows(const uint8_t *in, int64_t n_rows, int hd, int bits, int group,
                            float *out) {
    IG_ASSERT(kvq_valid(hd, bits, group) && n_rows >= 0);
    dequant_row_fn f = dequant_fn();
    size_t rb = ig_kvq_row_bytes(hd, bits, group);
    int nt = kvq_threads(n_rows, hd);
    if (nt <= 1) {
        for (int64_t r = 0; r < n_rows; r++) f(in + (size_t)r * rb, hd, bits, group, out + r * hd);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < n_rows; r++) f(in + (size_t)r * rb, hd, bits, group, out + r * hd);
}

void ig_kvq_dequantize_row(const uint8_t *in, int hd, int bits, int group, float *out) {
    IG_ASSERT(kvq_valid(hd, bits, group));
    dequant_fn()(in, hd, bits, group, out);
}
