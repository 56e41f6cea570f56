/* dtype names, sizes and bulk conversion (portable; SIMD conversions live in kernels/cpu). */
#include "core/dtype.h"

#include <string.h>

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
    default:
        return "?";
    }
}

int ig_dtype_from_name(const char *name) {
    static const struct {
        const char *n;
        ig_dtype t;
    } names[] = {
        {"f32", IG_DTYPE_F32},   {"float32", IG_DTYPE_F32},   {"fp32", IG_DTYPE_F32},
        {"f16", IG_DTYPE_F16},   {"float16", IG_DTYPE_F16},   {"fp16", IG_DTYPE_F16},
        {"bf16", IG_DTYPE_BF16}, {"bfloat16", IG_DTYPE_BF16},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].n)) return (int)names[i].t;
    return -1;
}

int ig_dtype_is_float_storage(ig_dtype t) {
    return t == IG_DTYPE_F32 || t == IG_DTYPE_F16 || t == IG_DTYPE_BF16;
}

float ig_load_f32(ig_dtype t, const void *data, size_t i) {
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
