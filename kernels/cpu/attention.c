/* Causal multi-head attention over a KV cache (prefill and decode, grouped-query heads) and the
 * gathered-rows decode variant used by KV policies. Few queries: a direct SIMD loop per (query,
 * head); many: two sgemm per (head, block of queries). Each OpenMP thread owns one slice of the
 * caller's workspace; nothing is allocated here. */
#include <omp.h>
#include <string.h>

#include <cblas.h>

#include "core/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

/* n_q up to this: the direct loop (one query row of scores per thread). Above: sgemm per block. */
#define ATTN_DIRECT_MAX_NQ 8
/* Queries per sgemm block: bounds the workspace at ATTN_QBLOCK * n_ctx floats per thread. */
#define ATTN_QBLOCK 32
/* Multiply-adds below which a call stays on one thread. */
#define ATTN_MIN_FLOPS_PER_THREAD (64 * 1024)

static int64_t pad16(int64_t n) {
    return (n + 15) & ~(int64_t)15;
}

static int64_t attn_qblock(int64_t n_q) {
    if (n_q <= ATTN_DIRECT_MAX_NQ) return 1;
    return n_q < ATTN_QBLOCK ? n_q : ATTN_QBLOCK;
}

/* Floats of workspace one thread needs. Monotone in n_q and n_ctx, so a workspace planned for the
 * largest batch and context serves every smaller call. */
static size_t attn_slice_floats(int64_t n_q, int64_t n_ctx) {
    if (n_q < 1) n_q = 1;
    if (n_ctx < 1) n_ctx = 1;
    return (size_t)attn_qblock(n_q) * (size_t)pad16(n_ctx);
}

size_t ig_cpu_attention_ws_floats(int64_t n_q, int64_t n_ctx, int n_threads) {
    if (n_threads <= 0) n_threads = ig_cpu_get_threads();
    return (size_t)n_threads * attn_slice_floats(n_q, n_ctx);
}

/* Threads for `tasks` independent tasks of about `flops_per_task`, limited by the workspace. */
static int attn_threads(int64_t tasks, int64_t flops_per_task, size_t ws_floats, size_t slice) {
    int64_t work = tasks * (flops_per_task > 0 ? flops_per_task : 1);
    int nt = ig_cpu_threads_for(work, ATTN_MIN_FLOPS_PER_THREAD);
    if (nt > tasks) nt = (int)tasks;
    size_t fit = ws_floats / slice;
    IG_ASSERT(fit >= 1); /* workspace smaller than ig_cpu_attention_ws_floats(n_q, n_ctx, 1) */
    if ((size_t)nt > fit) nt = (int)fit;
    return nt < 1 ? 1 : nt;
}

/* One query against L rows: s receives the probabilities, o the weighted sum of values. */
static void attend_one(const ig_vec_ops *v, const float *q, const float *k, const float *val,
                       int64_t L, int hd, float scale, float *s, float *o) {
    if (L <= 0) {
        memset(o, 0, (size_t)hd * sizeof(float));
        return;
    }
    v->dot_rows(q, k, L, hd, scale, s);
    ig_cpu_softmax_row(v, s, L);
    v->wsum_rows(s, val, L, hd, o);
}

static void attention_direct(const ig_vec_ops *v, const float *q, int64_t n_q, int64_t p0,
                             const float *k, const float *val, int64_t stride, int n_head,
                             int group, int hd, float scale, float *ws, size_t slice, int nt,
                             float *out) {
    int64_t tasks = n_q * n_head;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *s = ws + (size_t)omp_get_thread_num() * slice;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; t++) {
            int64_t i = t / n_head;
            int h = (int)(t % n_head);
            int g = h / group;
            const float *kg = k + (size_t)g * (size_t)stride * (size_t)hd;
            const float *vg = val + (size_t)g * (size_t)stride * (size_t)hd;
            size_t off = ((size_t)i * (size_t)n_head + (size_t)h) * (size_t)hd;
            attend_one(v, q + off, kg, vg, p0 + i + 1, hd, scale, s, out + off);
        }
    }
}

/* Queries i0 .. i0+qb-1 of head h: S = scale Q K^T over the L = p0+i0+qb keys the last of them
 * sees, a causal softmax per row (masked tail set to 0), then O = S V. */
static void attention_block(const ig_vec_ops *v, const float *q, int64_t p0, const float *kg,
                            const float *vg, int n_head, int h, int hd, float scale, int64_t i0,
                            int64_t qb, float *S, float *out) {
    int64_t L = p0 + i0 + qb;
    int ldq = n_head * hd;
    size_t off = ((size_t)i0 * (size_t)n_head + (size_t)h) * (size_t)hd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qb, (int)L, hd, scale, q + off, ldq,
                kg, hd, 0.0f, S, (int)L);
    for (int64_t r = 0; r < qb; r++) {
        int64_t valid = p0 + i0 + r + 1;
        float *row = S + r * L;
        ig_cpu_softmax_row(v, row, valid);
        if (L > valid) memset(row + valid, 0, (size_t)(L - valid) * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)qb, hd, (int)L, 1.0f, S, (int)L, vg,
                hd, 0.0f, out + off, ldq);
}

static void attention_blas(const ig_vec_ops *v, const float *q, int64_t n_q, int64_t p0,
                           const float *k, const float *val, int64_t stride, int n_head, int group,
                           int hd, float scale, float *ws, size_t slice, int nt, float *out) {
    int64_t qblock = attn_qblock(n_q);
    int64_t n_blocks = (n_q + qblock - 1) / qblock;
    int64_t tasks = n_blocks * n_head;
    /* Later blocks see more keys: hand them out first, dynamically. */
    int blas_prev = nt > 1 ? ig_cpu_blas_threads_single() : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *S = ws + (size_t)omp_get_thread_num() * slice;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; t++) {
            int64_t b = n_blocks - 1 - t / n_head;
            int h = (int)(t % n_head);
            int g = h / group;
            int64_t i0 = b * qblock;
            int64_t qb = n_q - i0 < qblock ? n_q - i0 : qblock;
            attention_block(v, q, p0, k + (size_t)g * (size_t)stride * (size_t)hd,
                            val + (size_t)g * (size_t)stride * (size_t)hd, n_head, h, hd, scale, i0,
                            qb, S, out);
        }
    }
    if (nt > 1) ig_cpu_blas_threads_restore(blas_prev);
}

void ig_cpu_attention(const float *q, int64_t n_q, int64_t p0, const float *k, const float *v,
                      int64_t stride_tokens, int n_head, int n_kv_head, int hd, float scale,
                      float *ws, size_t ws_floats, float *out) {
    IG_ASSERT(n_q >= 0 && p0 >= 0 && n_head > 0 && n_kv_head > 0 && hd > 0);
    IG_ASSERT(n_head % n_kv_head == 0);
    IG_ASSERT(p0 + n_q <= stride_tokens);
    IG_ASSERT(p0 + n_q <= INT32_MAX);
    if (n_q == 0) return;
    const ig_vec_ops *vo = ig_cpu_vec();
    int group = n_head / n_kv_head;
    size_t slice = attn_slice_floats(n_q, p0 + n_q);
    int64_t tasks, flops;
    if (n_q <= ATTN_DIRECT_MAX_NQ) {
        tasks = n_q * n_head;
        flops = 2 * (p0 + n_q) * (int64_t)hd;
    } else {
        int64_t qb = attn_qblock(n_q);
        tasks = (n_q + qb - 1) / qb * n_head;
        flops = 2 * qb * (p0 + n_q) * (int64_t)hd;
    }
    int nt = attn_threads(tasks, flops, ws_floats, slice);
    if (n_q <= ATTN_DIRECT_MAX_NQ)
        attention_direct(vo, q, n_q, p0, k, v, stride_tokens, n_head, group, hd, scale, ws, slice,
                         nt, out);
    else
        attention_blas(vo, q, n_q, p0, k, v, stride_tokens, n_head, group, hd, scale, ws, slice, nt,
                       out);
}

void ig_cpu_attention_rows(const float *q, const float *const *k_rows, const float *const *v_rows,
                           const int64_t *n_rows, int64_t max_rows, int n_head, int n_kv_head,
                           int hd, float scale, float *ws, size_t ws_floats, float *probs_out,
                           float *out) {
    IG_ASSERT(n_head > 0 && n_kv_head > 0 && hd > 0 && max_rows >= 0);
    IG_ASSERT(n_head % n_kv_head == 0);
    for (int g = 0; g < n_kv_head; g++) IG_ASSERT(n_rows[g] >= 0 && n_rows[g] <= max_rows);
    const ig_vec_ops *vo = ig_cpu_vec();
    int group = n_head / n_kv_head;
    size_t slice = attn_slice_floats(1, max_rows);
    int nt = attn_threads(n_head, 2 * max_rows * (int64_t)hd, ws_floats, slice);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int h = 0; h < n_head; h++) {
        int g = h / group;
        int64_t L = n_rows[g];
        float *s = probs_out ? probs_out + (size_t)h * (size_t)max_rows
                             : ws + (size_t)omp_get_thread_num() * slice;
        attend_one(vo, q + (size_t)h * hd, k_rows[g], v_rows[g], L, hd, scale, s,
                   out + (size_t)h * hd);
        if (probs_out && max_rows > L) memset(s + L, 0, (size_t)(max_rows - L) * sizeof(float));
    }
}
