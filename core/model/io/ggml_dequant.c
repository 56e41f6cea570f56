/* Dequantization of ggml block formats to f32, bit-exact with gguf-py's gguf.quants.dequantize.
 * It runs at load time, so it is plain portable C (bytes read with memcpy: blocks need not be
 * aligned) parallelised over blocks with OpenMP. It never validates sizes: callers check bounds. */
#include "core/model/io/ggml_dequant.h"

#include <string.h>

#include "core/base/dtype.h"

/* Bit-exactness with the numpy reference: numpy rounds d * q, then adds m. For these formats the
 * products (an f16 scale times integers of at most 13 bits in all) are exact in f32, so a fused
 * multiply-add would give the same bits; contraction is still switched off (clang; GCC does not
 * contract in ISO C mode) so that exactness does not rest on that argument alone.
 * tests/test_dequant.c compares bit patterns. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK_K 256

typedef void (*ig_dequant_block_fn)(const uint8_t *blk, float *y);

static inline float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ig_f16_to_f32(h);
}

static inline uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* block_q4_0: d (f16), qs[16]; element j is the low nibble of qs[j], element j+16 the high one. */
static void deq_q4_0(const uint8_t *b, float *y) {
    const float d = half_at(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 0x0f) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

/* block_q4_1: d, m (f16), qs[16]: x = d * q + m. */
static void deq_q4_1(const uint8_t *b, float *y) {
    const float d = half_at(b), m = half_at(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        float p0 = d * (float)(qs[j] & 0x0f);
        float p1 = d * (float)(qs[j] >> 4);
        y[j] = p0 + m;
        y[j + 16] = p1 + m;
    }
}

/* block_q5_0: d (f16), qh (u32 LE, bit j is bit 4 of element j), qs[16]. */
static void deq_q5_0(const uint8_t *b, float *y) {
    const float d = half_at(b);
    const uint32_t qh = u32_at(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int x0 = (int)((qs[j] & 0x0f) | (((qh >> j) & 1u) << 4)) - 16;
        int x1 = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
        y[j] = d * (float)x0;
        y[j + 16] = d * (float)x1;
    }
}

/* block_q5_1: d, m (f16), qh (u32), qs[16]: x = d * q + m. */
static void deq_q5_1(const uint8_t *b, float *y) {
    const float d = half_at(b), m = half_at(b + 2);
    const uint32_t qh = u32_at(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        unsigned x0 = (qs[j] & 0x0fu) | (((qh >> j) & 1u) << 4);
        unsigned x1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
        float p0 = d * (float)x0;
        float p1 = d * (float)x1;
        y[j] = p0 + m;
        y[j + 16] = p1 + m;
    }
}

/* block_q8_0: d (f16), qs[32] (int8). */
static void deq_q8_0(const uint8_t *b, float *y) {
    const float d = half_at(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++) y[j] = d * (float)qs[j];
}

/* block_q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits), d, dmin (f16).
 * Each 128-element half reads 32 bytes of qs four times with shifts 0, 2, 4, 6; each group of 16
 * elements has its own scale byte. */
static void deq_q2_k(const uint8_t *b, float *y) {
    const uint8_t *scales = b;
    const uint8_t *q = b + QK_K / 16;
    const float d = half_at(b + QK_K / 16 + QK_K / 4);
    const float dmin = half_at(b + QK_K / 16 + QK_K / 4 + 2);
    int is = 0;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                const uint8_t sc = scales[is++];
                const float dl = d * (float)(sc & 0x0f);
                const float ml = dmin * (float)(sc >> 4);
                const uint8_t *qq = q + 16 * half;
                for (int l = 0; l < 16; l++) {
                    float p = dl * (float)((qq[l] >> shift) & 3);
                    *y++ = p - ml;
                }
            }
        }
        q += 32;
    }
}

/* block_q3_K: hmask[32], qs[64] (low 2 bits), scales[12] (16 six-bit scales), d (f16).
 * q = low2 - (hmask bit clear ? 4 : 0); the 6-bit scale i has its low nibble in byte i (i < 8) or
 * the high nibble of byte i-8, and its top two bits in byte 8 + i%4 at bit 2*(i/4). */
static void deq_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hm = b;
    const uint8_t *q = b + QK_K / 8;
    const uint8_t *sc = b + QK_K / 8 + QK_K / 4;
    const float d_all = half_at(b + QK_K / 8 + QK_K / 4 + 12);
    int8_t scales[16];
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? (sc[i] & 0x0f) : (sc[i - 8] >> 4);
        int hi = (sc[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        scales[i] = (int8_t)((lo | (hi << 4)) - 32);
    }
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                const float dl = d_all * (float)scales[is++];
                const uint8_t *qq = q + 16 * half;
                const uint8_t *hh = hm + 16 * half;
                for (int l = 0; l < 16; l++) {
                    int v = ((qq[l] >> shift) & 3) - ((hh[l] & m) ? 0 : 4);
                    *y++ = dl * (float)v;
                }
            }
            m = (uint8_t)(m << 1);
        }
        q += 32;
    }
}

/* The 12-byte packed 6-bit scales and mins of Q4_K and Q5_K (ggml's get_scale_min_k4). */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* block_q4_K: d, dmin (f16), scales[12], qs[128]; 8 groups of 32: x = d*sc*q - dmin*m. */
static void deq_q4_k(const uint8_t *b, float *y) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *q = b + 16;
    for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
        uint8_t sc, m;
        scale_min_k4(is, scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(is + 1, scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            float p = d1 * (float)(q[l] & 0x0f);
            *y++ = p - m1;
        }
        for (int l = 0; l < 32; l++) {
            float p = d2 * (float)(q[l] >> 4);
            *y++ = p - m2;
        }
        q += 32;
    }
}

/* block_q5_K: d, dmin (f16), scales[12], qh[32], qs[128]; the fifth bit of group g comes from
 * bit g of qh. */
static void deq_q5_k(const uint8_t *b, float *y) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *qh = b + 16;
    const uint8_t *ql = b + 16 + QK_K / 8;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
        uint8_t sc, m;
        scale_min_k4(is, scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(is + 1, scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            float p = d1 * (float)((ql[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0));
            *y++ = p - m1;
        }
        for (int l = 0; l < 32; l++) {
            float p = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0));
            *y++ = p - m2;
        }
        ql += 32;
        u1 = (uint8_t)(u1 << 2);
        u2 = (uint8_t)(u2 << 2);
    }
}

/* block_q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d (f16). */
static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b;
    const uint8_t *qh = b + QK_K / 2;
    const int8_t *sc = (const int8_t *)(b + QK_K / 2 + QK_K / 4);
    const float d = half_at(b + QK_K / 2 + QK_K / 4 + QK_K / 16);
    for (int n = 0; n < QK_K; n += 128) {
        /* d * scale first, then * q: the numpy reference's rounding order. */
        float ds[8];
        for (int k = 0; k < 8; k++) ds[k] = d * (float)sc[k];
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = (int)((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = ds[is + 0] * (float)q1;
            y[l + 32] = ds[is + 2] * (float)q2;
            y[l + 64] = ds[is + 4] * (float)q3;
            y[l + 96] = ds[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

/* One "block" of a float type is one element. */
static void deq_f32(const uint8_t *b, float *y) {
    memcpy(y, b, 4);
}
static void deq_f16(const uint8_t *b, float *y) {
    *y = half_at(b);
}
static void deq_bf16(const uint8_t *b, float *y) {
    uint16_t h;
    memcpy(&h, b, 2);
    *y = ig_bf16_to_f32(h);
}

typedef struct ig_ggml_traits {
    int64_t block_size;
    size_t block_bytes;
    ig_dequant_block_fn dequant; /* NULL: the size is known (the file can be indexed) but igen
                                    cannot dequantize it */
} ig_ggml_traits;

/* Sizes of every type ggml defines (as of gguf-py 0.19 / ggml-common.h), so that a file holding a
 * type igen cannot dequantize still opens and fails only when that tensor is read. */
static const ig_ggml_traits *traits_of(int t) {
    static const ig_ggml_traits table[] = {
        [0] = {1, 4, deq_f32},    /* F32 */
        [1] = {1, 2, deq_f16},    /* F16 */
        [2] = {32, 18, deq_q4_0}, /* Q4_0 */
        [3] = {32, 20, deq_q4_1}, /* Q4_1 */
        [6] = {32, 22, deq_q5_0}, /* Q5_0 */
        [7] = {32, 24, deq_q5_1}, /* Q5_1 */
        [8] = {32, 34, deq_q8_0}, /* Q8_0 */
        [9] = {32, 36, NULL},     /* Q8_1: d, s (f16), qs[32] */
        [10] = {QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, deq_q2_k},
        [11] = {QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, deq_q3_k},
        [12] = {QK_K, 2 + 2 + QK_K / 2 + 12, deq_q4_k},
        [13] = {QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, deq_q5_k},
        [14] = {QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, deq_q6_k},
        [15] = {QK_K, 4 + QK_K + QK_K / 8, NULL},                     /* Q8_K */
        [16] = {QK_K, 2 + QK_K / 4, NULL},                            /* IQ2_XXS */
        [17] = {QK_K, 2 + QK_K / 4 + QK_K / 32, NULL},                /* IQ2_XS */
        [18] = {QK_K, 2 + QK_K / 4 + QK_K / 8, NULL},                 /* IQ3_XXS */
        [19] = {QK_K, 2 + QK_K / 8 + QK_K / 16, NULL},                /* IQ1_S */
        [20] = {32, 18, NULL},                                        /* IQ4_NL */
        [21] = {QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, NULL}, /* IQ3_S */
        [22] = {QK_K, 2 + QK_K / 4 + QK_K / 16, NULL},                /* IQ2_S */
        [23] = {QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, NULL},            /* IQ4_XS */
        [24] = {1, 1, NULL},                                          /* I8 */
        [25] = {1, 2, NULL},                                          /* I16 */
        [26] = {1, 4, NULL},                                          /* I32 */
        [27] = {1, 8, NULL},                                          /* I64 */
        [28] = {1, 8, NULL},                                          /* F64 */
        [29] = {QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, NULL},        /* IQ1_M */
        [30] = {1, 2, deq_bf16},                                      /* BF16 */
        [34] = {QK_K, 2 + 4 * 13, NULL},                              /* TQ1_0 */
        [35] = {QK_K, 2 + 64, NULL},                                  /* TQ2_0 */
        [39] = {32, 1 + 16, NULL},                                    /* MXFP4 */
        [40] = {64, 4 + 32, NULL},                                    /* NVFP4 */
        [41] = {128, 2 + 16, NULL},                                   /* Q1_0 */
    };
    if (t < 0 || (size_t)t >= sizeof table / sizeof table[0] || table[t].block_size == 0)
        return NULL;
    return &table[t];
}

int64_t ig_ggml_block_size(int ggml_type) {
    const ig_ggml_traits *tr = traits_of(ggml_type);
    return tr ? tr->block_size : 0;
}

size_t ig_ggml_block_bytes(int ggml_type) {
    const ig_ggml_traits *tr = traits_of(ggml_type);
    return tr ? tr->block_bytes : 0;
}

int ig_ggml_can_dequantize(int ggml_type) {
    const ig_ggml_traits *tr = traits_of(ggml_type);
    return tr && tr->dequant;
}

/* Below this many blocks a parallel region costs more than it saves (and callers that already run
 * in parallel pass small chunks, which then stay on their thread). */
#define IG_DEQUANT_PAR_MIN_ELEMS (1 << 16)

int ig_dequantize_f32(int ggml_type, const void *src, float *dst, int64_t n) {
    const ig_ggml_traits *tr = traits_of(ggml_type);
    if (!tr || !tr->dequant || n < 0 || n % tr->block_size != 0) return -1;
    const int64_t nb = n / tr->block_size;
    const int64_t bs = tr->block_size;
    const size_t bb = tr->block_bytes;
    const uint8_t *s = src;
    const ig_dequant_block_fn fn = tr->dequant;
    if (ggml_type == 0) { /* F32: a copy, no per-element call */
        memcpy(dst, src, (size_t)n * sizeof(float));
        return 0;
    }
#pragma omp parallel for schedule(static) if (n >= IG_DEQUANT_PAR_MIN_ELEMS)
    for (int64_t i = 0; i < nb; i++) fn(s + (size_t)i * bb, dst + i * bs);
    return 0;
}
