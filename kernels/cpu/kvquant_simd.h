/* The KV codec's group header read (AVX2 and AVX-512) and AVX-512 decode of 16 codes, shared by the
 * codec (kvquant.c) and attention over encoded rows (attention_gather.c), so that both produce the
 * same floats. Internal to kernels/cpu.
 */
#ifndef IG_KVQUANT_SIMD_H
#define IG_KVQUANT_SIMD_H

#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

#if IG_X86
#include <immintrin.h>

/* A block's header, f16 min then f16 scale, widened by F16C: [min, scale, 0, 0], the same floats
 * as ig_f16_to_f32 (the conversion is exact). The scalar routine, called per row and group, cost
 * int4's decode attention 19.6-21.9 ms a step against 12.4-17.1 with this (bench-decode --policy
 * int4 --batch 8 --prompt-len 1024 behind a 12 GB/s link, alternating builds, 4 of 4). */
IG_TARGET_AVX2 IG_INLINE __m128 load_header2(const uint8_t *blk) {
    int32_t h;
    memcpy(&h, blk, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(h));
}

/* 16 codes starting at code index i (a multiple of 16) of a block as f32. */
IG_TARGET_AVX512 IG_INLINE __m512 load_codes16(const uint8_t *codes, int i, int bits) {
    if (bits == 8)
        return _mm512_cvtepi32_ps(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(codes + i))));
    __m128i raw;
    __m512i sh, mask;
    if (bits == 4) {
        raw = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(codes + i / 2)),
                               _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
        sh = _mm512_set4_epi32(4, 0, 4, 0);
        mask = _mm512_set1_epi32(15);
    } else {
        int32_t v;
        memcpy(&v, codes + i / 4, 4);
        raw = _mm_shuffle_epi8(_mm_cvtsi32_si128(v),
                               _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
        sh = _mm512_set4_epi32(6, 4, 2, 0);
        mask = _mm512_set1_epi32(3);
    }
    __m512i c = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(raw), sh), mask);
    return _mm512_cvtepi32_ps(c);
}

#endif /* IG_X86 */

#endif
