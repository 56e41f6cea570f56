/* The KV codec's AVX-512 decode of 16 codes, shared by the codec (kvquant.c) and attention over
 * encoded rows (attention_gather.c), so that both produce the same floats. Internal to kernels/cpu.
 */
#ifndef IG_KVQUANT_SIMD_H
#define IG_KVQUANT_SIMD_H

#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

#if IG_X86
#include <immintrin.h>

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
