/* Token selection: an O(n) top-k by radix selection (speculative KV fetch, page and heavy-hitter
 * choices). Partial scores live in partial_scores.c. Nothing here allocates. */
#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

/* ---- top-k by radix selection ---------------------------------------------------------------- */

/* Buckets per radix level: each level narrows the candidates' key range by 2^11. */
#define TOPK_BITS    11
#define TOPK_BUCKETS (1 << TOPK_BITS)

size_t ig_cpu_topk_ws_bytes(int64_t n) {
    return ((size_t)TOPK_BUCKETS + 2 * (size_t)(n > 0 ? n : 0)) * sizeof(uint32_t);
}

/* An unsigned key with the order of the floats: larger value, larger key. NaN is below -inf (key
 * 0) and -0 equals +0, so that ties are exactly the values that compare equal. */
static inline uint32_t order_key(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if (x != x) return 0;
    if (u == 0x80000000u) u = 0;
    return u ^ ((u & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}

/* The three passes over all n elements, per SIMD level: keys (with their min and max), the
 * compaction of the indices whose key lies in [lo, hi], and the final selection of the indices with
 * key > T, or key == T and index <= cut (in index order; exactly k of them). */
typedef struct topk_ops {
    void (*keys)(const float *s, int64_t n, uint32_t *keys, uint32_t *kmin, uint32_t *kmax);
    int64_t (*compact)(const uint32_t *keys, int64_t n, uint32_t lo, uint32_t hi, uint32_t *out);
    void (*select)(const uint32_t *keys, int64_t n, uint32_t T, uint32_t cut, int64_t k,
                   int32_t *out);
} topk_ops;

static void keys_scalar(const float *s, int64_t n, uint32_t *keys, uint32_t *kmin, uint32_t *kmax) {
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t k = order_key(s[i]);
        keys[i] = k;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    *kmin = lo;
    *kmax = hi;
}

static int64_t compact_scalar(const uint32_t *keys, int64_t n, uint32_t lo, uint32_t hi,
                              uint32_t *out) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) { /* branch-free: always write, advance when selected */
        out[m] = (uint32_t)i;
        m += keys[i] - lo <= hi - lo;
    }
    return m;
}

static void select_scalar(const uint32_t *keys, int64_t n, uint32_t T, uint32_t cut, int64_t k,
                          int32_t *out) {
    int64_t j = 0;
    for (int64_t i = 0; i < n && j < k; i++) {
        out[j] = (int32_t)i;
        j += keys[i] > T || (keys[i] == T && (uint32_t)i <= cut);
    }
}

static const topk_ops k_topk_scalar = {keys_scalar, compact_scalar, select_scalar};

#if IG_X86
IG_TARGET_AVX512 IG_INLINE __mmask16 mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* key = u ^ (sign ? 0xffffffff : 0x80000000) after -0 -> +0; NaN -> 0. */
IG_TARGET_AVX2 static void keys_avx2(const float *s, int64_t n, uint32_t *keys, uint32_t *kmin,
                                     uint32_t *kmax) {
    __m256i lo = _mm256_set1_epi32(-1), hi = _mm256_setzero_si256();
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(s + i);
        __m256i u = _mm256_castps_si256(x);
        u = _mm256_andnot_si256(_mm256_cmpeq_epi32(u, sign), u);
        __m256i k = _mm256_xor_si256(u, _mm256_or_si256(_mm256_srai_epi32(u, 31), sign));
        k = _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)), k);
        _mm256_storeu_si256((__m256i *)(keys + i), k);
        lo = _mm256_min_epu32(lo, k);
        hi = _mm256_max_epu32(hi, k);
    }
    uint32_t lb[8], hb[8], l, h;
    _mm256_storeu_si256((__m256i *)lb, lo);
    _mm256_storeu_si256((__m256i *)hb, hi);
    keys_scalar(s + i, n - i, keys + i, &l, &h);
    for (int j = 0; j < 8; j++) {
        l = lb[j] < l ? lb[j] : l;
        h = hb[j] > h ? hb[j] : h;
    }
    *kmin = l;
    *kmax = h;
}

static const topk_ops k_topk_avx2 = {keys_avx2, compact_scalar, select_scalar};

IG_TARGET_AVX512 static void keys_avx512(const float *s, int64_t n, uint32_t *keys, uint32_t *kmin,
                                         uint32_t *kmax) {
    __m512i lo = _mm512_set1_epi32(-1), hi = _mm512_setzero_si512();
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(m, s + i);
        __m512i u = _mm512_castps_si512(x);
        u = _mm512_maskz_mov_epi32(_mm512_cmpneq_epi32_mask(u, sign), u);
        __m512i k = _mm512_xor_si512(u, _mm512_or_si512(_mm512_srai_epi32(u, 31), sign));
        k = _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), k);
        _mm512_mask_storeu_epi32(keys + i, m, k);
        lo = _mm512_mask_min_epu32(lo, m, lo, k);
        hi = _mm512_mask_max_epu32(hi, m, hi, k);
    }
    *kmin = (uint32_t)_mm512_reduce_min_epu32(lo);
    *kmax = (uint32_t)_mm512_reduce_max_epu32(hi);
}

/* Indices of the selected lanes, packed in registers and stored with a mask (no write past them).
 */
IG_TARGET_AVX512 static int64_t compact_avx512(const uint32_t *keys, int64_t n, uint32_t lo,
                                               uint32_t hi, uint32_t *out) {
    const __m512i lov = _mm512_set1_epi32((int)lo), span = _mm512_set1_epi32((int)(hi - lo));
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 t = mask16(n - i);
        __m512i k = _mm512_maskz_loadu_epi32(t, keys + i);
        __mmask16 sel = _mm512_mask_cmple_epu32_mask(t, _mm512_sub_epi32(k, lov), span);
        int c = __builtin_popcount(sel);
        _mm512_mask_storeu_epi32(out + m, (__mmask16)((1u << c) - 1u),
                                 _mm512_maskz_compress_epi32(sel, idx));
        m += c;
        idx = _mm512_add_epi32(idx, step);
    }
    return m;
}

IG_TARGET_AVX512 static void select_avx512(const uint32_t *keys, int64_t n, uint32_t T,
                                           uint32_t cut, int64_t k, int32_t *out) {
    const __m512i tv = _mm512_set1_epi32((int)T), cv = _mm512_set1_epi32((int)cut);
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    int64_t j = 0;
    for (int64_t i = 0; i < n && j < k; i += 16) {
        __mmask16 t = mask16(n - i);
        __m512i kv = _mm512_maskz_loadu_epi32(t, keys + i);
        __mmask16 sel =
            _mm512_mask_cmpgt_epu32_mask(t, kv, tv) |
            (_mm512_mask_cmpeq_epi32_mask(t, kv, tv) & _mm512_cmple_epu32_mask(idx, cv));
        int c = __builtin_popcount(sel); /* never past k: cut bounds the ties */
        _mm512_mask_storeu_epi32(out + j, (__mmask16)((1u << c) - 1u),
                                 _mm512_maskz_compress_epi32(sel, idx));
        j += c;
        idx = _mm512_add_epi32(idx, step);
    }
}

static const topk_ops k_topk_avx512 = {keys_avx512, compact_avx512, select_avx512};
#endif

static const topk_ops *pick_topk(void) {
#if IG_X86
    ig_simd_level l = ig_cpu_simd_level();
    if (l == IG_SIMD_AVX512) return &k_topk_avx512;
    if (l == IG_SIMD_AVX2) return &k_topk_avx2;
#endif
    return &k_topk_scalar;
}

static int bit_width(uint32_t x) {
    return x ? 32 - __builtin_clz(x) : 0;
}

int64_t ig_cpu_topk(const float *s, int64_t n, int64_t k, int32_t *idx_out, void *ws,
                    size_t ws_bytes) {
    IG_ASSERT(n >= 0 && n <= INT32_MAX);
    if (k <= 0 || n == 0) return 0;
    if (k >= n) {
        for (int64_t i = 0; i < n; i++) idx_out[i] = (int32_t)i;
        return n;
    }
    IG_ASSERT(ws_bytes >= ig_cpu_topk_ws_bytes(n));
    const topk_ops *ops = pick_topk();
    uint32_t *hist = ws, *keys = hist + TOPK_BUCKETS, *cand = keys + n;
    uint32_t lo, hi;
    ops->keys(s, n, keys, &lo, &hi);
    /* The k-th largest key T lies in [lo, hi] among the candidates, `need`-th from the top there.
     * Each level: buckets of the range's width / 2^11 (so clustered values still spread over
     * the buckets), find T's bucket, keep its candidates (in index order), tighten the range. */
    int64_t need = k, m = n;
    int first = 1;
    while (lo < hi) {
        int shift = bit_width(hi - lo) > TOPK_BITS ? bit_width(hi - lo) - TOPK_BITS : 0;
        uint32_t nb = ((hi - lo) >> shift) + 1;
        memset(hist, 0, nb * sizeof *hist);
        if (first)
            for (int64_t i = 0; i < n; i++) hist[(keys[i] - lo) >> shift]++;
        else
            for (int64_t c = 0; c < m; c++) hist[(keys[cand[c]] - lo) >> shift]++;
        uint32_t b = nb - 1;
        while ((int64_t)hist[b] < need) need -= hist[b--];
        uint32_t blo = lo + (b << shift);
        uint64_t end = (uint64_t)blo + ((1ull << shift) - 1u); /* the bucket's last key */
        uint32_t bhi = end < hi ? (uint32_t)end : hi;
        if (first) {
            m = ops->compact(keys, n, blo, bhi, cand);
            first = 0;
        } else {
            int64_t w = 0;
            for (int64_t c = 0; c < m; c++) {
                cand[w] = cand[c];
                w += keys[cand[c]] - blo <= bhi - blo;
            }
            m = w;
        }
        lo = UINT32_MAX;
        hi = 0;
        for (int64_t c = 0; c < m; c++) {
            uint32_t kc = keys[cand[c]];
            lo = kc < lo ? kc : lo;
            hi = kc > hi ? kc : hi;
        }
    }
    /* T = lo; ties at T are taken in index order up to the need-th. */
    uint32_t T = lo, cut;
    if (first) { /* every key equal */
        cut = (uint32_t)(need - 1);
    } else {
        IG_ASSERT(need >= 1 && need <= m);
        cut = cand[need - 1];
    }
    ops->select(keys, n, T, cut, k, idx_out);
    return k;
}

float ig_cpu_page_bound(const float *q, const float *kmin, const float *kmax, int hd) {
    float s = 0;
    for (int i = 0; i < hd; i++) {
        float a = q[i] * kmin[i], b = q[i] * kmax[i];
        s += a > b ? a : b;
    }
    return s;
}

float ig_cpu_kth_largest(float *x, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = x[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] > pivot) i++;
            while (x[j] < pivot) j--;
            if (i <= j) {
                float t = x[i];
                x[i++] = x[j];
                x[j--] = t;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return x[want];
}
