/* dtype names, sizes and bulk conversion (portable; SIMD conversions live in kernels/cpu). */
#include "core/base/dtype.h"

#include <math.h>
#include <string.h>

#include "core/base/status.h"
#include "core/base/threads.h"

size_t ig_dtype_size(ig_dtype t) {
    switch (t) {
    case IG_DTYPE_F32:
        return 4;
    case IG_DTYPE_F16:
        return 2;
    case IG_DTYPE_BF16:
        return 2;
    case IG_DTYPE_I32:
        return 4;
    case IG_DTYPE_I64:
        return 8;
    case IG_DTYPE_U8:
        return 1;
    case IG_DTYPE_I8:
        return 1;
    case IG_DTYPE_F64:
        return 8;
    default:
        return 0;
    }
}

const char *ig_dtype_name(ig_dtype t) {
    switch (t) {
    case IG_DTYPE_F32:
        return "f32";
    case IG_DTYPE_F16:
        return "f16";
    case IG_DTYPE_BF16:
        return "bf16";
    case IG_DTYPE_I32:
        return "i32";
    case IG_DTYPE_I64:
        return "i64";
    case IG_DTYPE_U8:
        return "u8";
    case IG_DTYPE_I8:
        return "i8";
    case IG_DTYPE_F64:
        return "f64";
    case IG_DTYPE_Q4_0:
        return "q4_0";
    case IG_DTYPE_Q4_1:
        return "q4_1";
    case IG_DTYPE_Q8_0:
        return "q8_0";
    case IG_DTYPE_Q4G64:
        return "q4g64";
    case IG_DTYPE_Q8G64:
        return "q8g64";
    default:
        return "?";
    }
}

int ig_dtype_from_name(const char *name) {
    static const struct {
        const char *n;
        ig_dtype t;
    } names[] = {
        {"f32", IG_DTYPE_F32},     {"float32", IG_DTYPE_F32},   {"fp32", IG_DTYPE_F32},
        {"f16", IG_DTYPE_F16},     {"float16", IG_DTYPE_F16},   {"fp16", IG_DTYPE_F16},
        {"bf16", IG_DTYPE_BF16},   {"bfloat16", IG_DTYPE_BF16}, {"q4_0", IG_DTYPE_Q4_0},
        {"q4_1", IG_DTYPE_Q4_1},   {"q8_0", IG_DTYPE_Q8_0},     {"q4g64", IG_DTYPE_Q4G64},
        {"q8g64", IG_DTYPE_Q8G64},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].n)) return (int)names[i].t;
    return -1;
}

int ig_dtype_is_float_storage(ig_dtype t) {
    return t == IG_DTYPE_F32 || t == IG_DTYPE_F16 || t == IG_DTYPE_BF16;
}

int ig_dtype_is_quant(ig_dtype t) {
    return t == IG_DTYPE_Q4_0 || t == IG_DTYPE_Q4_1 || t == IG_DTYPE_Q8_0 || t == IG_DTYPE_Q4G64 ||
           t == IG_DTYPE_Q8G64;
}

int ig_dtype_is_weight_storage(ig_dtype t) {
    return ig_dtype_is_float_storage(t) || ig_dtype_is_quant(t);
}

int64_t ig_dtype_block_elems(ig_dtype t) {
    switch (t) {
    case IG_DTYPE_Q4_0:
        return IG_Q4_0_BLOCK;
    case IG_DTYPE_Q4_1:
        return IG_Q4_1_BLOCK;
    case IG_DTYPE_Q8_0:
        return IG_Q8_0_BLOCK;
    case IG_DTYPE_Q4G64:
        return IG_Q4G64_BLOCK;
    case IG_DTYPE_Q8G64:
        return IG_Q8G64_BLOCK;
    default:
        return ig_dtype_size(t) ? 1 : 0;
    }
}

size_t ig_dtype_block_bytes(ig_dtype t) {
    switch (t) {
    case IG_DTYPE_Q4_0:
        return IG_Q4_0_BYTES;
    case IG_DTYPE_Q4_1:
        return IG_Q4_1_BYTES;
    case IG_DTYPE_Q8_0:
        return IG_Q8_0_BYTES;
    case IG_DTYPE_Q4G64:
        return IG_Q4G64_BYTES;
    case IG_DTYPE_Q8G64:
        return IG_Q8G64_BYTES;
    default:
        return ig_dtype_size(t);
    }
}

int ig_dtype_row_ok(ig_dtype t, int64_t n) {
    int64_t b = ig_dtype_block_elems(t);
    return b > 0 && n >= 0 && n % b == 0;
}

size_t ig_dtype_row_bytes(ig_dtype t, int64_t n) {
    int64_t b = ig_dtype_block_elems(t);
    if (b <= 0 || n < 0) return 0;
    return (size_t)(n / b) * ig_dtype_block_bytes(t);
}

double ig_dtype_bits(ig_dtype t) {
    int64_t b = ig_dtype_block_elems(t);
    return b > 0 ? 8.0 * (double)ig_dtype_block_bytes(t) / (double)b : 0.0;
}

static float f16_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ig_f16_to_f32(h);
}

static void put_f16(unsigned char *p, float f) {
    uint16_t h = ig_f32_to_f16(f);
    memcpy(p, &h, 2);
}

void ig_dequant_row_ref(ig_dtype t, const void *src, float *dst, int64_t n) {
    const unsigned char *b = src;
    switch (t) {
    case IG_DTYPE_Q4_0:
        for (int64_t i = 0; i < n; i += 32, b += IG_Q4_0_BYTES) {
            float d = f16_at(b);
            for (int j = 0; j < 16; j++) {
                dst[i + j] = d * (float)((b[2 + j] & 15) - 8);
                dst[i + j + 16] = d * (float)((b[2 + j] >> 4) - 8);
            }
        }
        return;
    case IG_DTYPE_Q4_1:
        for (int64_t i = 0; i < n; i += 32, b += IG_Q4_1_BYTES) {
            float d = f16_at(b), m = f16_at(b + 2);
            for (int j = 0; j < 16; j++) {
                dst[i + j] = d * (float)(b[4 + j] & 15) + m;
                dst[i + j + 16] = d * (float)(b[4 + j] >> 4) + m;
            }
        }
        return;
    case IG_DTYPE_Q8_0:
        for (int64_t i = 0; i < n; i += 32, b += IG_Q8_0_BYTES) {
            float d = f16_at(b);
            for (int j = 0; j < 32; j++) dst[i + j] = d * (float)(int8_t)b[2 + j];
        }
        return;
    case IG_DTYPE_Q4G64:
        for (int64_t i = 0; i < n; i += 64, b += IG_Q4G64_BYTES) {
            float d = f16_at(b), m = f16_at(b + 2);
            for (int j = 0; j < 32; j++) {
                dst[i + j] = d * (float)(b[4 + j] & 15) + m;
                dst[i + j + 32] = d * (float)(b[4 + j] >> 4) + m;
            }
        }
        return;
    case IG_DTYPE_Q8G64:
        for (int64_t i = 0; i < n; i += 64, b += IG_Q8G64_BYTES) {
            float d = f16_at(b), m = f16_at(b + 2);
            for (int j = 0; j < 64; j++) dst[i + j] = d * (float)b[4 + j] + m;
        }
        return;
    default:
        for (int64_t i = 0; i < n; i++) dst[i] = ig_load_f32(t, src, (size_t)i);
        return;
    }
}

/* FlexGen's asymmetric group rule with `levels` = 2^bits - 1, d and m rounded to f16 first so that
 * the codes are chosen against the values the kernels will use. */
static void quant_group_asym(const float *x, int g, int levels, unsigned char *blk, int bits) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < g; j++) {
        if (x[j] < mn) mn = x[j];
        if (x[j] > mx) mx = x[j];
    }
    put_f16(blk, (mx - mn) / (float)levels);
    put_f16(blk + 2, mn);
    float d = f16_at(blk), m = f16_at(blk + 2);
    float id = d > 0.0f ? 1.0f / d : 0.0f;
    unsigned char *q = blk + 4;
    if (bits == 4) memset(q, 0, (size_t)g / 2);
    for (int j = 0; j < g; j++) {
        float v = nearbyintf((x[j] - m) * id);
        int c = v < 0.0f ? 0 : v > (float)levels ? levels : (int)v;
        if (bits == 8)
            q[j] = (unsigned char)c;
        else if (j < g / 2)
            q[j] = (unsigned char)(q[j] | c);
        else
            q[j - g / 2] = (unsigned char)(q[j - g / 2] | (c << 4));
    }
}

int ig_quantize_row_ref(ig_dtype t, const float *src, void *dst, int64_t n) {
    unsigned char *b = dst;
    switch (t) {
    case IG_DTYPE_Q4G64:
        for (int64_t i = 0; i < n; i += 64, b += IG_Q4G64_BYTES)
            quant_group_asym(src + i, 64, 15, b, 4);
        return 0;
    case IG_DTYPE_Q8G64:
        for (int64_t i = 0; i < n; i += 64, b += IG_Q8G64_BYTES)
            quant_group_asym(src + i, 64, 255, b, 8);
        return 0;
    case IG_DTYPE_Q4_1: /* ggml's quantize_row_q4_1_ref */
        for (int64_t i = 0; i < n; i += 32, b += IG_Q4_1_BYTES) {
            const float *x = src + i;
            float mn = x[0], mx = x[0];
            for (int j = 1; j < 32; j++) {
                if (x[j] < mn) mn = x[j];
                if (x[j] > mx) mx = x[j];
            }
            float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            put_f16(b, d);
            put_f16(b + 2, mn);
            for (int j = 0; j < 16; j++) {
                int q0 = (int)((x[j] - mn) * id + 0.5f), q1 = (int)((x[j + 16] - mn) * id + 0.5f);
                q0 = q0 > 15 ? 15 : q0;
                q1 = q1 > 15 ? 15 : q1;
                b[4 + j] = (unsigned char)(q0 | (q1 << 4));
            }
        }
        return 0;
    case IG_DTYPE_Q4_0: /* ggml's quantize_row_q4_0_ref */
        for (int64_t i = 0; i < n; i += 32, b += IG_Q4_0_BYTES) {
            const float *x = src + i;
            float amax = 0.0f, max = 0.0f;
            for (int j = 0; j < 32; j++)
                if (fabsf(x[j]) > amax) {
                    amax = fabsf(x[j]);
                    max = x[j];
                }
            float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            put_f16(b, d);
            for (int j = 0; j < 16; j++) {
                int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
                q0 = q0 > 15 ? 15 : q0 < 0 ? 0 : q0;
                q1 = q1 > 15 ? 15 : q1 < 0 ? 0 : q1;
                b[2 + j] = (unsigned char)(q0 | (q1 << 4));
            }
        }
        return 0;
    case IG_DTYPE_Q8_0: /* ggml's quantize_row_q8_0_ref */
        for (int64_t i = 0; i < n; i += 32, b += IG_Q8_0_BYTES) {
            const float *x = src + i;
            float amax = 0.0f;
            for (int j = 0; j < 32; j++)
                if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
            float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            put_f16(b, d);
            for (int j = 0; j < 32; j++) b[2 + j] = (unsigned char)(int8_t)roundf(x[j] * id);
        }
        return 0;
    default:
        return -1;
    }
}

float ig_load_f32(ig_dtype t, const void *data, size_t i) {
    if (ig_dtype_is_quant(t)) {
        int64_t be = ig_dtype_block_elems(t);
        float blk[64];
        const unsigned char *p =
            (const unsigned char *)data + (i / (size_t)be) * ig_dtype_block_bytes(t);
        ig_dequant_row_ref(t, p, blk, be);
        return blk[i % (size_t)be];
    }
    switch (t) {
    case IG_DTYPE_F32:
        return ((const float *)data)[i];
    case IG_DTYPE_F16:
        return ig_f16_to_f32(((const uint16_t *)data)[i]);
    case IG_DTYPE_BF16:
        return ig_bf16_to_f32(((const uint16_t *)data)[i]);
    default:
        return 0.0f;
    }
}

void ig_convert(ig_dtype dst_type, void *dst, ig_dtype src_type, const void *src, size_t n) {
    if (dst_type == src_type) {
        memcpy(dst, src, n * ig_dtype_size(src_type));
        return;
    }
    /* One loop per pair, so the per-element work has no type switch. */
    const float *sf = src;
    const uint16_t *sh = src;
    float *df = dst;
    uint16_t *dh = dst;
    if (dst_type == IG_DTYPE_F32 && src_type == IG_DTYPE_F16)
        for (size_t i = 0; i < n; i++) df[i] = ig_f16_to_f32(sh[i]);
    else if (dst_type == IG_DTYPE_F32 && src_type == IG_DTYPE_BF16)
        for (size_t i = 0; i < n; i++) df[i] = ig_bf16_to_f32(sh[i]);
    else if (dst_type == IG_DTYPE_F16 && src_type == IG_DTYPE_F32)
        for (size_t i = 0; i < n; i++) dh[i] = ig_f32_to_f16(sf[i]);
    else if (dst_type == IG_DTYPE_BF16 && src_type == IG_DTYPE_F32)
        for (size_t i = 0; i < n; i++) dh[i] = ig_f32_to_bf16(sf[i]);
    else if (dst_type == IG_DTYPE_F16 && src_type == IG_DTYPE_BF16)
        for (size_t i = 0; i < n; i++) dh[i] = ig_f32_to_f16(ig_bf16_to_f32(sh[i]));
    else if (dst_type == IG_DTYPE_BF16 && src_type == IG_DTYPE_F16)
        for (size_t i = 0; i < n; i++) dh[i] = ig_f32_to_bf16(ig_f16_to_f32(sh[i]));
}

/* Below this many values per thread a row loop stays on fewer threads. */
#define QUANT_MIN_PER_THREAD (64 * 1024)

void ig_quantize_rows(ig_dtype t, const float *src, int64_t rows, int64_t cols, void *dst) {
    IG_ASSERT(ig_dtype_is_quant(t) && rows >= 0 && ig_dtype_row_ok(t, cols));
    size_t rb = ig_dtype_row_bytes(t, cols);
    int nt = ig_threads_for(rows * cols, QUANT_MIN_PER_THREAD);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t r = 0; r < rows; r++)
        ig_quantize_row_ref(t, src + r * cols, (unsigned char *)dst + (size_t)r * rb, cols);
}
