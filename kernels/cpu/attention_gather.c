/* Attention over selected rows (in place through an index list, or gathered) plus the new rows.
 * One query head per task; scores, softmax and the weighted sum in the task's slice of ws. */
#include "kernels/cpu/attention_gather.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kvquant.h"
#include "kernels/cpu/kvquant_simd.h"

#if IG_X86
#include <immintrin.h>
#endif

static int64_t rows_of(const ig_gather_attn *a, int g) {
    return a->n_sel[g] + a->n_extra;
}

static const float *row_k(const ig_gather_attn *a, int g, int64_t j) {
    if (j < a->n_sel[g]) return a->k_base[g] + (a->idx ? (int64_t)a->idx[g][j] : j) * a->row_stride;
    return a->k_extra + ((j - a->n_sel[g]) * a->n_kv_head + g) * a->hd;
}

static const float *row_v(const ig_gather_attn *a, int g, int64_t j) {
    if (j < a->n_sel[g]) return a->v_base[g] + (a->idx ? (int64_t)a->idx[g][j] : j) * a->row_stride;
    return a->v_extra + ((j - a->n_sel[g]) * a->n_kv_head + g) * a->hd;
}

/* Encoded rows: the widest head decoded on the stack. */
#define GATHER_MAX_HD 1024

/* The heads of KV group g over its rows; ws: `slice` floats per head of the group. */
typedef void (*group_fn)(const ig_vec_ops *v, const ig_gather_attn *a, const float *q, int g,
                         float *ws, size_t slice, float *probs, int64_t probs_stride, float *out);

/* Selected row j (< n_sel[g]) of KV head g, encoded. */
static const unsigned char *row_enc(const ig_gather_attn *a, int g, int64_t j, int is_v) {
    const unsigned char *b = is_v ? a->v_enc[g] : a->k_enc[g];
    return b + (size_t)(a->idx ? (int64_t)a->idx[g][j] : j) * a->enc_row_bytes;
}

/* One encoded row to f32, by the codec's own decoder (kvquant.c) or the f16 widening. */
static void decode_row(const ig_gather_attn *a, const unsigned char *p, float *out) {
    if (a->enc == IG_ROWS_F16)
        ig_convert(IG_DTYPE_F32, out, IG_DTYPE_F16, p, (size_t)a->hd);
    else
        ig_kvq_dequantize_row(p, a->hd, a->enc_bits, a->enc_group, out);
}

/* Row j of K (is_v 0) or V as f32: f32 rows and the new tokens' rows where they are, encoded rows
 * decoded into tmp. */
static const float *row_f32(const ig_gather_attn *a, int g, int64_t j, int is_v, float *tmp) {
    if (a->enc == IG_ROWS_F32 || j >= a->n_sel[g]) return is_v ? row_v(a, g, j) : row_k(a, g, j);
    decode_row(a, row_enc(a, g, j, is_v), tmp);
    return tmp;
}

size_t ig_cpu_attention_gather_ws_floats(int n_head, int64_t max_rows) {
    return (size_t)(n_head > 0 ? n_head : 1) * (size_t)((max_rows + 15) & ~(int64_t)15);
}

#if IG_X86
/* The row loops with the query and the output row held in registers (nc vectors of 16 floats, a
 * compile-time constant): one load per row chunk and no call per row. Scattered rows make the
 * generic path call dot/axpy per row, which costs more than the rows' bytes. */
IG_TARGET_AVX512 IG_INLINE void rows_avx512(const ig_gather_attn *a, int g, const float *qh,
                                            float *s, int64_t n, const ig_vec_ops *v, float *oh,
                                            const int nc) {
    __m512 qv[8], o[8];
    IG_UNROLL(8)
    for (int c = 0; c < nc; c++) qv[c] = _mm512_loadu_ps(qh + 16 * c);
    for (int64_t j = 0; j < n; j++) {
        const float *k = row_k(a, g, j);
        __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(k));
        IG_UNROLL(8)
        for (int c = 1; c < nc; c++) acc = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(k + 16 * c), acc);
        s[j] = a->scale * _mm512_reduce_add_ps(acc);
    }
    ig_cpu_softmax_row(v, s, n);
    IG_UNROLL(8)
    for (int c = 0; c < nc; c++) o[c] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j++) {
        const float *r = row_v(a, g, j);
        __m512 p = _mm512_set1_ps(s[j]);
        IG_UNROLL(8)
        for (int c = 0; c < nc; c++) o[c] = _mm512_fmadd_ps(p, _mm512_loadu_ps(r + 16 * c), o[c]);
    }
    IG_UNROLL(8)
    for (int c = 0; c < nc; c++) _mm512_storeu_ps(oh + 16 * c, o[c]);
}

/* Row j of K or V as nc vectors, the same floats row_f32 gives: f16 widened and group-wise codes
 * (groups of a multiple of 16 values) decoded in registers, other codes through tmp. */
IG_TARGET_AVX512 IG_INLINE void load_row16(const ig_gather_attn *a, int g, int64_t j, int is_v,
                                           __m512 *x, const int nc, float *tmp) {
    if (j < a->n_sel[g] && a->enc == IG_ROWS_F16) {
        const unsigned char *p = row_enc(a, g, j, is_v);
        IG_UNROLL(8)
        for (int c = 0; c < nc; c++)
            x[c] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 32 * c)));
        return;
    }
    if (j < a->n_sel[g] && a->enc == IG_ROWS_KVQ && a->enc_group % 16 == 0) {
        const unsigned char *p = row_enc(a, g, j, is_v);
        const int group = a->enc_group, bits = a->enc_bits;
        const size_t bb = (size_t)(4 + group * bits / 8);
        __m512 mn = _mm512_setzero_ps(), sc = _mm512_setzero_ps();
        IG_UNROLL(8)
        for (int c = 0; c < nc; c++) {
            int i = (16 * c) % group;
            const unsigned char *blk = p + (size_t)(16 * c / group) * bb;
            if (i == 0) { /* the group's header: f16 min and scale */
                __m128 f = load_header2(blk);
                mn = _mm512_broadcastss_ps(f);
                sc = _mm512_broadcastss_ps(_mm_movehdup_ps(f));
            }
            x[c] = _mm512_fmadd_ps(load_codes16(blk + 4, i, bits), sc, mn);
        }
        return;
    }
    const float *r = row_f32(a, g, j, is_v, tmp);
    IG_UNROLL(8)
    for (int c = 0; c < nc; c++) x[c] = _mm512_loadu_ps(r + 16 * c);
}

/* rows_avx512 over encoded selected rows (the new tokens' rows are f32), for nh heads of KV group g
 * at once (nh * nc <= 16): each row is decoded once for those heads, and each head's operations are
 * rows_avx512's on the same floats, in the same order, so each head's result is the same bit for
 * bit as over the decoded rows. s[b], oh[b]: head b's scores and output. */
IG_TARGET_AVX512 IG_INLINE void group_avx512_enc(const ig_gather_attn *a, int g,
                                                 const float *const *qh, float *const *s, int nh,
                                                 int64_t n, const ig_vec_ops *v, float *const *oh,
                                                 const int nc) {
    __m512 qv[16], o[16], x[8];
    float tmp[128];
    for (int b = 0; b < nh; b++)
        for (int c = 0; c < nc; c++) qv[b * nc + c] = _mm512_loadu_ps(qh[b] + 16 * c);
    for (int64_t j = 0; j < n; j++) {
        load_row16(a, g, j, 0, x, nc, tmp);
        for (int b = 0; b < nh; b++) {
            __m512 acc = _mm512_mul_ps(qv[b * nc], x[0]);
            IG_UNROLL(8)
            for (int c = 1; c < nc; c++) acc = _mm512_fmadd_ps(qv[b * nc + c], x[c], acc);
            s[b][j] = a->scale * _mm512_reduce_add_ps(acc);
        }
    }
    for (int b = 0; b < nh; b++) ig_cpu_softmax_row(v, s[b], n);
    for (int k = 0; k < nh * nc; k++) o[k] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j++) {
        load_row16(a, g, j, 1, x, nc, tmp);
        for (int b = 0; b < nh; b++) {
            __m512 p = _mm512_set1_ps(s[b][j]);
            IG_UNROLL(8)
            for (int c = 0; c < nc; c++) o[b * nc + c] = _mm512_fmadd_ps(p, x[c], o[b * nc + c]);
        }
    }
    for (int b = 0; b < nh; b++)
        for (int c = 0; c < nc; c++) _mm512_storeu_ps(oh[b] + 16 * c, o[b * nc + c]);
}

/* Whether group_rows_avx512 takes this shape: encoded rows, heads of 64 or 128, and a group whose
 * queries and outputs fit the registers. */
static int group_path_ok(const ig_gather_attn *a) {
    int group = a->n_head / a->n_kv_head;
    return a->enc != IG_ROWS_F32 && group > 1 && (a->hd == 64 || a->hd == 128) &&
           group * (a->hd / 16) <= 16;
}

/* The heads of KV group g over encoded rows (a shape group_path_ok accepts), one decode per row
 * for all of them. ws: a slice of `slice` floats per head of the group. */
IG_TARGET_AVX512 static void group_rows_avx512(const ig_vec_ops *v, const ig_gather_attn *a,
                                               const float *q, int g, float *ws, size_t slice,
                                               float *probs, int64_t probs_stride, float *out) {
    int group = a->n_head / a->n_kv_head, hd = a->hd, nc = hd / 16;
    const float *qh[16];
    float *s[16], *oh[16];
    for (int b = 0; b < group; b++) {
        int h = g * group + b;
        qh[b] = q + (size_t)h * (size_t)hd;
        oh[b] = out + (size_t)h * (size_t)hd;
        s[b] = ws + (size_t)b * slice;
    }
    int64_t n = rows_of(a, g);
    if (n > 0) {
        if (nc == 4)
            group_avx512_enc(a, g, qh, s, group, n, v, oh, 4);
        else
            group_avx512_enc(a, g, qh, s, group, n, v, oh, 8);
    } else {
        for (int b = 0; b < group; b++) memset(oh[b], 0, (size_t)hd * sizeof(float));
    }
    if (probs)
        for (int b = 0; b < group; b++)
            memcpy(probs + (size_t)(g * group + b) * (size_t)probs_stride, s[b],
                   (size_t)n * sizeof(float));
}

IG_TARGET_AVX512 static int head_rows_avx512(const ig_gather_attn *a, int g, const float *qh,
                                             float *s, int64_t n, const ig_vec_ops *v, float *oh) {
    if (a->hd == 64 && a->enc == IG_ROWS_F32)
        rows_avx512(a, g, qh, s, n, v, oh, 4);
    else if (a->hd == 128 && a->enc == IG_ROWS_F32)
        rows_avx512(a, g, qh, s, n, v, oh, 8);
    else if (a->hd == 64)
        group_avx512_enc(a, g, &qh, &s, 1, n, v, &oh, 4);
    else if (a->hd == 128)
        group_avx512_enc(a, g, &qh, &s, 1, n, v, &oh, 8);
    else
        return 0;
    return 1;
}
#endif

static void head_task(const ig_vec_ops *v, const ig_gather_attn *a, const float *q, int h, float *s,
                      float *probs, int64_t probs_stride, float *out) {
    int group = a->n_head / a->n_kv_head, g = h / group, hd = a->hd;
    const float *qh = q + (size_t)h * (size_t)hd;
    float *oh = out + (size_t)h * (size_t)hd;
    int64_t n = rows_of(a, g);
    int done = 0;
#if IG_X86
    if (n > 0 && ig_cpu_simd_level() == IG_SIMD_AVX512)
        done = head_rows_avx512(a, g, qh, s, n, v, oh);
#endif
    if (!done) {
        float tmp[GATHER_MAX_HD];
        for (int64_t j = 0; j < n; j++) s[j] = a->scale * v->dot(qh, row_f32(a, g, j, 0, tmp), hd);
        ig_cpu_softmax_row(v, s, n);
        memset(oh, 0, (size_t)hd * sizeof(float));
        for (int64_t j = 0; j < n; j++) v->axpy(oh, s[j], row_f32(a, g, j, 1, tmp), hd);
    }
    if (probs) memcpy(probs + (size_t)h * (size_t)probs_stride, s, (size_t)n * sizeof(float));
}

#if IG_X86
/* ---- AVX2: the heads of a KV group over chunks of rows ----------------------------------------
 * Rows come a chunk at a time: encoded rows decoded into a chunk buffer once for all the group's
 * heads (f32 rows read where they are), then each head runs over the chunk with its query (scores)
 * or its output columns (weighted sum) in registers, 8 floats a vector. A head's operations do not
 * depend on where its rows came from, so encoded and decoded rows give the same bits. */
#define GATHER_AVX2_CHUNK  32
#define GATHER_AVX2_MAX_HD 128

/* Scores of rows r[0 .. m) for one head: s[i] = scale * q . r[i], nc vectors of 8. */
IG_TARGET_AVX2 IG_INLINE void scores_avx2(const float *qh, const float *const *r, int m,
                                          float scale, float *s, const int nc) {
    __m256 qv[16];
    IG_UNROLL(16)
    for (int c = 0; c < nc; c++) qv[c] = _mm256_loadu_ps(qh + 8 * c);
    for (int i = 0; i < m; i++) {
        __m256 acc = _mm256_mul_ps(qv[0], _mm256_loadu_ps(r[i]));
        IG_UNROLL(16)
        for (int c = 1; c < nc; c++)
            acc = _mm256_fmadd_ps(qv[c], _mm256_loadu_ps(r[i] + 8 * c), acc);
        s[i] = scale * ig_hsum8(acc);
    }
}

/* oh[c0 * 8 .. (c0 + nc) * 8) += sum over rows i of p[i] * r[i] (same columns), in row order. */
IG_TARGET_AVX2 IG_INLINE void wsum_avx2(const float *p, const float *const *r, int m, float *oh,
                                        int c0, const int nc) {
    __m256 o[8];
    IG_UNROLL(8)
    for (int c = 0; c < nc; c++) o[c] = _mm256_loadu_ps(oh + 8 * (c0 + c));
    for (int i = 0; i < m; i++) {
        __m256 pv = _mm256_set1_ps(p[i]);
        IG_UNROLL(8)
        for (int c = 0; c < nc; c++)
            o[c] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(r[i] + 8 * (c0 + c)), o[c]);
    }
    IG_UNROLL(8)
    for (int c = 0; c < nc; c++) _mm256_storeu_ps(oh + 8 * (c0 + c), o[c]);
}

/* Whether group_avx2 takes this head size. */
static int avx2_hd_ok(int hd) {
    return hd == 32 || hd == 64 || hd == 96 || hd == 128;
}

IG_TARGET_AVX2 static void group_avx2(const ig_vec_ops *v, const ig_gather_attn *a, const float *q,
                                      int g, float *ws, size_t slice, float *probs,
                                      int64_t probs_stride, float *out) {
    const int group = a->n_head / a->n_kv_head, hd = a->hd, nc = hd / 8;
    const int64_t n = rows_of(a, g);
    float buf[GATHER_AVX2_CHUNK * GATHER_AVX2_MAX_HD];
    const float *r[GATHER_AVX2_CHUNK];
    for (int64_t j0 = 0; j0 < n; j0 += GATHER_AVX2_CHUNK) {
        int m = n - j0 < GATHER_AVX2_CHUNK ? (int)(n - j0) : GATHER_AVX2_CHUNK;
        for (int i = 0; i < m; i++) r[i] = row_f32(a, g, j0 + i, 0, buf + (size_t)i * hd);
        for (int b = 0; b < group; b++) {
            const float *qh = q + (size_t)(g * group + b) * (size_t)hd;
            float *s = ws + (size_t)b * slice + (size_t)j0;
            switch (nc) {
            case 4:
                scores_avx2(qh, r, m, a->scale, s, 4);
                break;
            case 8:
                scores_avx2(qh, r, m, a->scale, s, 8);
                break;
            case 12:
                scores_avx2(qh, r, m, a->scale, s, 12);
                break;
            default:
                scores_avx2(qh, r, m, a->scale, s, 16);
                break;
            }
        }
    }
    for (int b = 0; b < group; b++) {
        ig_cpu_softmax_row(v, ws + (size_t)b * slice, n);
        memset(out + (size_t)(g * group + b) * (size_t)hd, 0, (size_t)hd * sizeof(float));
    }
    for (int64_t j0 = 0; j0 < n; j0 += GATHER_AVX2_CHUNK) {
        int m = n - j0 < GATHER_AVX2_CHUNK ? (int)(n - j0) : GATHER_AVX2_CHUNK;
        for (int i = 0; i < m; i++) r[i] = row_f32(a, g, j0 + i, 1, buf + (size_t)i * hd);
        for (int b = 0; b < group; b++) {
            const float *p = ws + (size_t)b * slice + (size_t)j0;
            float *oh = out + (size_t)(g * group + b) * (size_t)hd;
            for (int c0 = 0; c0 < nc; c0 += 8) { /* 8 vectors of output a pass */
                if (nc - c0 >= 8)
                    wsum_avx2(p, r, m, oh, c0, 8);
                else
                    wsum_avx2(p, r, m, oh, c0, 4);
            }
        }
    }
    if (probs)
        for (int b = 0; b < group; b++)
            memcpy(probs + (size_t)(g * group + b) * (size_t)probs_stride, ws + (size_t)b * slice,
                   (size_t)n * sizeof(float));
}
#endif

/* Whether head_task computes with the vector ops (dot and axpy per row) rather than a register
 * kernel. */
static int head_generic(const ig_gather_attn *a) {
#if IG_X86
    if (ig_cpu_simd_level() == IG_SIMD_AVX512 && (a->hd == 64 || a->hd == 128)) return 0;
#endif
    (void)a;
    return 1;
}

/* head_task for the heads of KV group g at once over encoded rows: each row decoded once for all of
 * them instead of once per head (GQA), each head's operations head_task's generic ones on the same
 * floats in the same order, so that each head's result is the same bit for bit. ws: `slice`
 * floats per head of the group. */
static void group_task(const ig_vec_ops *v, const ig_gather_attn *a, const float *q, int g,
                       float *ws, size_t slice, float *probs, int64_t probs_stride, float *out) {
    int group = a->n_head / a->n_kv_head, hd = a->hd;
    int64_t n = rows_of(a, g);
    float tmp[GATHER_MAX_HD];
    for (int64_t j = 0; j < n; j++) {
        const float *r = row_f32(a, g, j, 0, tmp);
        for (int b = 0; b < group; b++) {
            const float *qh = q + (size_t)(g * group + b) * (size_t)hd;
            ws[(size_t)b * slice + (size_t)j] = a->scale * v->dot(qh, r, hd);
        }
    }
    for (int b = 0; b < group; b++) {
        ig_cpu_softmax_row(v, ws + (size_t)b * slice, n);
        memset(out + (size_t)(g * group + b) * (size_t)hd, 0, (size_t)hd * sizeof(float));
    }
    for (int64_t j = 0; j < n; j++) {
        const float *r = row_f32(a, g, j, 1, tmp);
        for (int b = 0; b < group; b++)
            v->axpy(out + (size_t)(g * group + b) * (size_t)hd, ws[(size_t)b * slice + (size_t)j],
                    r, hd);
    }
    if (probs)
        for (int b = 0; b < group; b++)
            memcpy(probs + (size_t)(g * group + b) * (size_t)probs_stride, ws + (size_t)b * slice,
                   (size_t)n * sizeof(float));
}

void ig_cpu_attention_gather(const ig_gather_attn *a, const float *q, float *ws, size_t ws_floats,
                             float *probs, int64_t probs_stride, float *out) {
    const ig_vec_ops *v = ig_cpu_vec();
    IG_ASSERT(a->enc == IG_ROWS_F32 || a->enc == IG_ROWS_F16 ||
              (a->enc == IG_ROWS_KVQ &&
               ig_kvq_row_bytes(a->hd, a->enc_bits, a->enc_group) == a->enc_row_bytes));
    IG_ASSERT(a->enc == IG_ROWS_F32 || a->hd <= GATHER_MAX_HD);
    int64_t max_rows = 0;
    for (int g = 0; g < a->n_kv_head; g++)
        if (rows_of(a, g) > max_rows) max_rows = rows_of(a, g);
    size_t slice = (size_t)((max_rows + 15) & ~(int64_t)15);
    int fit = (int)(ws_floats / (slice ? slice : 1));
    IG_ASSERT(fit >= 1);
    int threads = ig_cpu_threads_for((int64_t)a->n_head * max_rows * a->hd, 16384);
    /* a task per KV group where a kernel takes the group's heads together: AVX-512 over encoded
     * rows (each decoded once in registers), AVX2 over any rows in chunks, and the vector ops over
     * encoded rows (each decoded once for the group's heads) */
    group_fn gf = NULL;
#if IG_X86
    if (group_path_ok(a) && ig_cpu_simd_level() == IG_SIMD_AVX512) gf = group_rows_avx512;
    if (ig_cpu_simd_level() == IG_SIMD_AVX2 && avx2_hd_ok(a->hd)) gf = group_avx2;
#endif
    if (!gf && a->enc != IG_ROWS_F32 && a->n_head / a->n_kv_head > 1 && head_generic(a))
        gf = group_task;
    if (gf) {
        int group = a->n_head / a->n_kv_head;
        int gt = threads < a->n_kv_head ? threads : a->n_kv_head;
        if (gt * group > fit) gt = fit / group;
        if (gt >= 1) {
#pragma omp parallel for num_threads(gt) schedule(static)
            for (int g = 0; g < a->n_kv_head; g++)
                gf(v, a, q, g, ws + (size_t)omp_get_thread_num() * group * slice, slice, probs,
                   probs_stride, out);
            return;
        }
    }
    if (threads > fit) threads = fit;
    if (threads > a->n_head) threads = a->n_head;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int h = 0; h < a->n_head; h++)
        head_task(v, a, q, h, ws + (size_t)omp_get_thread_num() * slice, probs, probs_stride, out);
}

void ig_ref_attention_gather(const ig_gather_attn *a, const float *q, float *probs,
                             int64_t probs_stride, float *out) {
    int group = a->n_head / a->n_kv_head, hd = a->hd;
    IG_ASSERT(a->enc == IG_ROWS_F32 || hd <= GATHER_MAX_HD);
    float tmp[GATHER_MAX_HD];
    for (int h = 0; h < a->n_head; h++) {
        int g = h / group;
        int64_t n = rows_of(a, g);
        double *s = malloc((size_t)(n ? n : 1) * sizeof(double));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            const float *k = row_f32(a, g, j, 0, tmp);
            double d = 0;
            for (int i = 0; i < hd; i++) d += (double)q[h * hd + i] * (double)k[i];
            s[j] = d * a->scale;
            if (s[j] > mx) mx = s[j];
        }
        for (int64_t j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
        for (int i = 0; i < hd; i++) {
            double acc = 0;
            for (int64_t j = 0; j < n; j++) acc += s[j] / sum * (double)row_f32(a, g, j, 1, tmp)[i];
            out[h * hd + i] = (float)acc;
        }
        if (probs)
            for (int64_t j = 0; j < n; j++) probs[h * probs_stride + j] = (float)(s[j] / sum);
        free(s);
    }
}
