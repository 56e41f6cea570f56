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
    /* Block-quantized weight storage (matrices only; kernels read the blocks and compute in f32).
     * Layouts, one block after another along a row (the input dimension), little-endian:
     *   q4_0   ggml's Q4_0: 32 elements in 18 bytes: f16 d, 16 bytes of nibbles; x = d (q - 8)
     *   q4_1   ggml's Q4_1: 32 elements in 20 bytes: f16 d, f16 m, 16 bytes; x = d q + m
     *   q8_0   ggml's Q8_0: 32 elements in 34 bytes: f16 d, 32 int8; x = d q
     *   In the 4-bit ggml blocks byte j holds element j (low nibble) and element j + 16 (high).
     *   q4g64  FlexGen's group-wise 4-bit (asymmetric, groups of 64): 36 bytes: f16 d, f16 m,
     *          32 bytes; byte j holds element j (low nibble) and element j + 32 (high); x = d q + m
     *   q8g64  the same with 8 bits: 68 bytes: f16 d, f16 m, 64 uint8; x = d q + m
     * d and m are the stored f16 values widened to f32; x is computed as d * q + m in f32 (gguf-py
     * and ggml's dequantization: the same rounding). */
    IG_DTYPE_Q4_0 = 8,
    IG_DTYPE_Q4_1 = 9,
    IG_DTYPE_Q8_0 = 10,
    IG_DTYPE_Q4G64 = 11,
    IG_DTYPE_Q8G64 = 12,
    IG_DTYPE_COUNT
} ig_dtype;

/* Block geometry of the quantized types (bytes of one block, elements in it). */
#define IG_Q4_0_BLOCK  32
#define IG_Q4_0_BYTES  18
#define IG_Q4_1_BLOCK  32
#define IG_Q4_1_BYTES  20
#define IG_Q8_0_BLOCK  32
#define IG_Q8_0_BYTES  34
#define IG_Q4G64_BLOCK 64
#define IG_Q4G64_BYTES 36
#define IG_Q8G64_BLOCK 64
#define IG_Q8G64_BYTES 68

/* Bytes of one element; 0 for the block-quantized types (use ig_dtype_row_bytes). */
size_t ig_dtype_size(ig_dtype t);
const char *ig_dtype_name(ig_dtype t);
/* Parses "f32", "f16", "bf16", ... (also "float32", "float16", "bfloat16"), and the weight
 * formats "q4_0", "q4_1", "q8_0", "q4g64", "q8g64"; returns -1 if unknown. */
int ig_dtype_from_name(const char *name);
/* Storage types the engine accepts for weights and activations (f32, f16, bf16). */
int ig_dtype_is_float_storage(ig_dtype t);
/* 1 for the block-quantized weight types (q4_0, q4_1, q8_0, q4g64, q8g64). */
int ig_dtype_is_quant(ig_dtype t);
/* Storage types a weight matrix may have: the float storage types and the quantized ones. */
int ig_dtype_is_weight_storage(ig_dtype t);
/* Elements per block (1 for element types, 0 for unknown). */
int64_t ig_dtype_block_elems(ig_dtype t);
/* Bytes per block (the element size for element types). */
size_t ig_dtype_block_bytes(ig_dtype t);
/* Bytes of n elements in a row; n must be a multiple of ig_dtype_block_elems(t) (callers check:
 * ig_dtype_row_ok). */
size_t ig_dtype_row_bytes(ig_dtype t, int64_t n);
int ig_dtype_row_ok(ig_dtype t, int64_t n);
/* Bits per element, block overhead included (4.5 for q4_0 and q4g64, 5 for q4_1, ...). */
double ig_dtype_bits(ig_dtype t);

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
/* Reads element i of a float-storage buffer as f32 (quantized types: element i of a row buffer
 * starting at a block boundary). */
float ig_load_f32(ig_dtype t, const void *data, size_t i);

/* Reference dequantization of n elements (a multiple of the block) of a quantized or float type
 * into f32: plain C, the definition every kernel is tested against. */
void ig_dequant_row_ref(ig_dtype t, const void *src, float *dst, int64_t n);
/* Quantizes n elements (a multiple of the block) of f32 into q4g64 / q8g64 (FlexGen's rule: per
 * group min and max, d = (max - min) / (2^bits - 1) and m = min rounded to f16, q = round((x - m)
 * / d) clamped), or q8_0 / q4_0 / q4_1 (ggml's reference rules). Returns 0, -1 for another type. */
int ig_quantize_row_ref(ig_dtype t, const float *src, void *dst, int64_t n);
/* Quantizes rows x cols f32 (row-major) into rows of ig_dtype_row_bytes(t, cols) bytes with
 * ig_quantize_row_ref (t quantized, cols a multiple of its block); rows in parallel (OpenMP, at
 * most ig_threads_get() threads). For model load (q4g64 / q8g64 from a float checkpoint); the bytes
 * do not depend on the threads. */
void ig_quantize_rows(ig_dtype t, const float *src, int64_t rows, int64_t cols, void *dst);

#endif
