/* Dequantization of ggml block formats to f32 (one row or a whole tensor at a time).
 * Layouts follow ggml: each block holds its scales and packed quants; n must be a multiple of the
 * block size (checked by the caller, see ig_ggml_block_size). */
#ifndef IG_DEQUANT_H
#define IG_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

/* Elements per block and bytes per block for a ggml type; 0 for unknown types. */
int64_t ig_ggml_block_size(int ggml_type);
size_t ig_ggml_block_bytes(int ggml_type);
/* Dequantizes n elements of the given ggml type to f32. Returns 0, or -1 for an unsupported type. */
int ig_dequantize_f32(int ggml_type, const void *src, float *dst, int64_t n);

#endif
