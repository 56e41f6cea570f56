/* Attention over selected rows (in place through an index list, or gathered) plus the new rows.
 * One query head per task; scores, softmax and the weighted sum in the task's slice of ws. */
#include "kernels/cpu/attention_gather.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

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

size_t ig_cpu_attention_gather_ws_floats(int n_head, int64_t max_rows, int n_threads) {
    if (n_threads <= 0) n_threads = ig_cpu_get_threads();
    int t = n_threads < n_head ? n_threads : n_head;
    return (size_t)(t > 0 ? t : 1) * (size_t)((max_rows + 15) & ~(int64_t)15);
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

IG_TARGET_AVX512 static int head_rows_avx512(const ig_gather_attn *a, int g, const float *qh,
                                             float *s, int64_t n, const ig_vec_ops *v, float *oh) {
    if (a->hd == 64)
        rows_avx512(a, g, qh, s, n, v, oh, 4);
    else if (a->hd == 128)
        rows_avx512(a, g, qh, s, n, v, oh, 8);
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
        for (int64_t j = 0; j < n; j++) s[j] = a->scale * v->dot(qh, row_k(a, g, j), hd);
        ig_cpu_softmax_row(v, s, n);
        memset(oh, 0, (size_t)hd * sizeof(float));
        for (int64_t j = 0; j < n; j++) v->axpy(oh, s[j], row_v(a, g, j), hd);
    }
    if (probs) memcpy(probs + (size_t)h * (size_t)probs_stride, s, (size_t)n * sizeof(float));
}

void ig_cpu_attention_gather(const ig_gather_attn *a, const float *q, float *ws, size_t ws_floats,
                             float *probs, int64_t probs_stride, float *out) {
    const ig_vec_ops *v = ig_cpu_vec();
    int64_t max_rows = 0;
    for (int g = 0; g < a->n_kv_head; g++)
        if (rows_of(a, g) > max_rows) max_rows = rows_of(a, g);
    size_t slice = (size_t)((max_rows + 15) & ~(int64_t)15);
    int fit = (int)(ws_floats / (slice ? slice : 1));
    IG_ASSERT(fit >= 1);
    int threads = ig_cpu_threads_for((int64_t)a->n_head * max_rows * a->hd, 16384);
    if (threads > fit) threads = fit;
    if (threads > a->n_head) threads = a->n_head;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int h = 0; h < a->n_head; h++)
        head_task(v, a, q, h, ws + (size_t)omp_get_thread_num() * slice, probs, probs_stride, out);
}

void ig_ref_attention_gather(const ig_gather_attn *a, const float *q, float *probs,
                             int64_t probs_stride, float *out) {
    int group = a->n_head / a->n_kv_head, hd = a->hd;
    for (int h = 0; h < a->n_head; h++) {
        int g = h / group;
        int64_t n = rows_of(a, g);
        double *s = malloc((size_t)(n ? n : 1) * sizeof(double));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            const float *k = row_k(a, g, j);
            double d = 0;
            for (int i = 0; i < hd; i++) d += (double)q[h * hd + i] * (double)k[i];
            s[j] = d * a->scale;
            if (s[j] > mx) mx = s[j];
        }
        for (int64_t j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
        for (int i = 0; i < hd; i++) {
            double acc = 0;
            for (int64_t j = 0; j < n; j++) acc += s[j] / sum * (double)row_v(a, g, j)[i];
            out[h * hd + i] = (float)acc;
        }
        if (probs)
            for (int64_t j = 0; j < n; j++) probs[h * probs_stride + j] = (float)(s[j] / sum);
        free(s);
    }
}
