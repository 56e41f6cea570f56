/* KV-cache quantization codec (FlexGen / InfiniGen style): group-wise asymmetric min-max
 * quantization of K or V rows along head_dim, 8, 4 or 2 bits per value, f16 min and scale per
 * group. The byte layout below is the wire format a policy stores and an offload engine moves (a
 * GPU kernel decodes the same bytes), so it is fixed and exact; it never depends on the SIMD level.
 *
 * Row layout. A row of hd values is hd / group blocks, back to back, no padding; rows back to back:
 *   block_bytes = 4 + group * bits / 8          row_bytes = (hd / group) * block_bytes
 *   row r, block b starts at byte  r * row_bytes + b * block_bytes
 *   block bytes 0-1: min    IEEE binary16, little-endian
 *   block bytes 2-3: scale  IEEE binary16, little-endian (>= 0)
 *   block bytes 4.. : codes, value i (0 <= i < group) of the block in byte 4 + (i * bits) / 8,
 *                     bits (i * bits) % 8 .. + bits - 1 (low bits first: 4-bit value 2m is the low
 *                     nibble of byte m, 2-bit value 4m + s is bits 2s..2s+1 of byte m)
 * hd 64, group 64: 68 bytes (8 bits), 36 (4 bits), 20 (2 bits) per row, vs 128 as f16.
 *
 * Decoding: value i = fma((float)code_i, scale, min) in f32 (one rounding), scale and min widened
 * exactly from f16.
 *
 * Encoding (per group, in f32): values are clamped to the f16 range [-65504, 65504]; lo/hi = their
 * min/max; min = lo rounded DOWN to f16; scale = (hi - min) / (2^bits - 1) rounded UP to f16 (so
 * the grid min + [0, 2^bits - 1] * scale covers [lo, hi], and a constant group whose value is an
 * f16 gets scale 0 and decodes exactly); code = round-half-even(clamp((x - min) * inv, 0,
 * 2^bits - 1)) with inv = 1 / scale (0 when scale is 0), each operation rounded to f32.
 *
 * Error bound, per value x (within the f16 range) and its decoded y, with the group's stored scale
 * s and L = 2^bits - 1:
 *   |y - x| <= s * (1/2 + 4 * L * 2^-24) + 2^-24 * |y|
 * (half a step, plus the f32 rounding of the code computation, three roundings, and of the decoding
 * fma). The stored scale exceeds the ideal (hi - lo) / L only by the two f16 roundings:
 *   s <= ((hi - lo) + u(lo)) / L * (1 + 2^-9) + 2^-24,  u(lo) = the f16 spacing at lo
 * (at most 2^-10 |lo| for normal f16 values, 2^-24 below 2^-14). The bound is against the clamped
 * value: inputs beyond +-65504 decode near +-65504, and NaN is encoded as -65504 (the clamp's
 * fmaxf(NaN, -65504)), on every level alike.
 *
 * Because min rounds down and scale up, no f16 rounding term enters the bound against the stored
 * scale (it is 0.5000036 s at 4 bits, 0.500061 s at 8 bits); the roundings only make s slightly
 * larger than ideal, as stated.
 *
 * Requirements: group divides hd and group * bits is a multiple of 8. Rows are independent (a row
 * may be decoded alone); calls over many rows use the kernel threads. The SIMD paths (AVX2,
 * AVX-512; bits 8, 4 and 2; 16 values per step, a group's tail one at a time) give the same bytes
 * and floats as the plain reference (ig_ref_kvq_* in cpu_ref.c). */
#ifndef IG_KVQUANT_H
#define IG_KVQUANT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of one quantized row (see above); 0 if (hd, bits, group) is not a valid combination. */
size_t ig_kvq_row_bytes(int hd, int bits, int group);
/* x [n_rows][hd] f32 -> out [n_rows][row_bytes]. */
void ig_kvq_quantize_rows(const float *x, int64_t n_rows, int hd, int bits, int group,
                          uint8_t *out);
/* in [n_rows][row_bytes] -> out [n_rows][hd] f32. */
void ig_kvq_dequantize_rows(const uint8_t *in, int64_t n_rows, int hd, int bits, int group,
                            float *out);
/* One row, on the calling thread (no OpenMP region): for a kernel's inner loop, which is often
 * inside a parallel region already. The same floats as ig_kvq_dequantize_rows. */
void ig_kvq_dequantize_row(const uint8_t *in, int hd, int bits, int group, float *out);

#endif
