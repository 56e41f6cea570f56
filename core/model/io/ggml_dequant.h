/* Dequantization of ggml block formats to f32 (one row or a whole tensor at a time).
 * Layouts follow ggml: each block holds its scales and packed quants; n must be a multiple of the
 * block size (checked by the caller, see ig_ggml_block_size). */
#ifndef IG_GGML_DEQUANT_H
#define IG_GGML_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

/* Elements per block and bytes per block for a ggml type; 0 for unknown types. */
int64_t ig_ggml_block_size(int ggml_type);
size_t ig_ggml_block_bytes(int ggml_type);
/* 1 if ig_dequantize_f32 handles the type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q2_K..Q6_K. Other ggml types have known sizes (a file holding them can be indexed) but no
 * dequantizer. */
int ig_ggml_can_dequantize(int ggml_type);
/* Dequantizes n elements of the given ggml type to f32, bit-exact with gguf-py's dequantize; src
 * needs no alignment. Parallel (OpenMP) over blocks for large n. Returns 0, or -1 for a type
 * without a dequantizer or n not a multiple of the block size. */
int ig_dequantize_f32(int ggml_type, const void *src, float *dst, int64_t n);

#endif
