/* Element types for tensor storage and their conversions. Compute is f32; storage may be narrower.
 */
#ifndef IG_DTYPE_H
#define IG_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum ig_dtype {
    IG_DTYPE_F32 = 0,
    IG_DTYPE_F16 = 1,
    IG_DTYPE_BF16 = 2,
    IG_DTYPE_I32 = 3,
    IG_DTYPE_I64 = 4,
    IG_DTYPE_U8 = 5,
    IG_DTYPE_I8 = 6,
    IG_DTYPE_F64 = 7,
    IG_DTYPE_COUNT
} ig_dtype;

size_t ig_dtype_size(ig_dtype t);
const char *ig_dtype_name(ig_dtype t);
/* Parses "f32", "f16", "bf16", ... (also "float32", "float16", "bfloat16"); returns -1 if unknown.
 */
int ig_dtype_from_name(const char *name);
/* Storage types the engine accepts for weights and activations (f32, f16, bf16). */
int ig_dtype_is_float_storage(ig_dtype t);

static inline float ig_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest even, with overflow to inf and NaN preserved. */
static inline uint16_t ig_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) return (uint16_t)(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (absx < 0x38800000u) {                                   /* subnormal or zero in f16 */
        if (absx < 0x33000000u) return (uint16_t)sign;          /* < 2^-25 rounds to zero */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        /* value = m * 2^(e-150); the f16 subnormal unit is 2^-24, so q = m * 2^(e-126). */
        uint32_t shift = 126 - e; /* 14..24 here */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

static inline float ig_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t ig_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* Converts n elements between float storage types (f32, f16, bf16); other types are not handled.
 * src and dst must not overlap. */
void ig_convert(ig_dtype dst_type, void *dst, ig_dtype src_type, const void *src, size_t n);
/* Reads element i of a float-storage buffer as f32. */
float ig_load_f32(ig_dtype t, const void *data, size_t i);

#endif
