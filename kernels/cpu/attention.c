/* Causal multi-head attention over a KV cache (prefill and decode, grouped-query heads) and the
 * gathered-rows decode variant used by KV policies. Few queries: SIMD loops over chunks of keys,
 * all query heads of a KV group per chunk (flash-decoding: partial softmax per chunk, merged);
 * many: two sgemm per (head, block of queries). Each OpenMP thread owns one slice of the caller's
 * workspace; nothing is allocated here. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include <cblas.h>

#include "core/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

/* n_q up to this: the decode path (chunks of keys, heads of a group together). Above: sgemm. */
#define ATTN_DIRECT_MAX_NQ 8
/* Queries per sgemm block: bounds the workspace at ATTN_QBLOCK * n_ctx floats per thread. */
#define ATTN_QBLOCK 32
/* Keys per decode work item: a chunk of K and V rows (2 * 256 * hd floats, 128 KiB at hd 64)
 * stays in L2 while every query head of the group goes over it. */
#define ATTN_CHUNK 256
/* Multiply-adds below which a call stays on one thread. */
#define ATTN_MIN_FLOPS_PER_THREAD (64 * 1024)

static int64_t pad16(int64_t n) {
    return (n + 15) & ~(int64_t)15;
}
static int64_t cdiv(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

static int64_t attn_qblock(int64_t n_q) {
    return n_q < ATTN_QBLOCK ? n_q : ATTN_QBLOCK;
}

/* Decode path: partial results (max, sum, weighted values) per (query, head, chunk), then one
 * slice of scores per thread. */
static size_t decode_partial_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd) {
    return (size_t)n_q * (size_t)cdiv(n_ctx, ATTN_CHUNK) * (size_t)n_head * (size_t)(hd + 2);
}
static size_t decode_slice_floats(int64_t n_ctx) {
    return (size_t)pad16(n_ctx < ATTN_CHUNK ? n_ctx : ATTN_CHUNK);
}
static size_t blas_slice_floats(int64_t n_q, int64_t n_ctx) {
    return (size_t)attn_qblock(n_q) * (size_t)pad16(n_ctx);
}

size_t ig_cpu_attention_ws_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd, int n_threads) {
    if (n_threads <= 0) n_threads = ig_cpu_get_threads();
    if (n_q < 1) n_q = 1;
    if (n_ctx < 1) n_ctx = 1;
    /* The largest need of any call with at most n_q queries and n_ctx keys: both paths. */
    int64_t nq_dec = n_q < ATTN_DIRECT_MAX_NQ ? n_q : ATTN_DIRECT_MAX_NQ;
    size_t need = decode_partial_floats(nq_dec, n_ctx, n_head, hd) +
                  (size_t)n_threads * decode_slice_floats(n_ctx);
    if (n_q > ATTN_DIRECT_MAX_NQ) {
        size_t blas = (size_t)n_threads * blas_slice_floats(n_q, n_ctx);
        if (blas > need) need = blas;
    }
    return need;
}

/* Threads for `tasks` tasks of about `flops_per_task` each, at most `fit` (what the workspace
 * holds). */
static int attn_threads(int64_t tasks, int64_t flops_per_task, size_t fit) {
    int64_t work = tasks * (flops_per_task > 0 ? flops_per_task : 1);
    int nt = ig_cpu_threads_for(work, ATTN_MIN_FLOPS_PER_THREAD);
    if (nt > tasks) nt = (int)tasks;
    IG_ASSERT(fit >= 1); /* workspace below ig_cpu_attention_ws_floats(..., 1) */
    if ((size_t)nt > fit) nt = (int)fit;
    return nt < 1 ? 1 : nt;
}

/* ---- decode: few queries, keys in chunks, the heads of a KV group together ------------------- */

/* A decode problem: segments (query i, KV group g), each a run of L rows of K and V (row stride
 * hd) split into chunks of ATTN_CHUNK rows. Causal attention and the gathered-rows variant differ
 * only in where a segment's rows are. */
typedef struct decode_problem {
    const float *q; /* query i, head h: q + (i * n_head + h) * hd */
    int64_t n_q;
    int n_head, n_kv, group, hd;
    float scale;
    /* causal cache (k_rows == NULL): rows 0 .. p0+i of k + g * stride * hd */
    const float *k, *v;
    int64_t stride, p0;
    /* gathered rows: n_rows[g] rows at k_rows[g], v_rows[g] */
    const float *const *k_rows, *const *v_rows;
    const int64_t *n_rows;
    float *probs; /* [n_head][probs_stride] or NULL (gathered rows only) */
    int64_t probs_stride;
    float *out;
    int64_t n_chunks; /* chunks per segment (the longest segment's) */
} decode_problem;

static int64_t seg_len(const decode_problem *d, int64_t i, int g) {
    return d->k_rows ? d->n_rows[g] : d->p0 + i + 1;
}
static const float *seg_k(const decode_problem *d, int g) {
    return d->k_rows ? d->k_rows[g] : d->k + (size_t)g * (size_t)d->stride * (size_t)d->hd;
}
static const float *seg_v(const decode_problem *d, int g) {
    return d->v_rows ? d->v_rows[g] : d->v + (size_t)g * (size_t)d->stride * (size_t)d->hd;
}

/* Partial of (segment, chunk, head of the group): (max score, sum of exp, weighted values[hd]). */
static float *partial_at(const decode_problem *d, float *parts, int64_t seg, int64_t c, int h) {
    size_t idx = ((size_t)seg * (size_t)d->n_chunks + (size_t)c) * (size_t)d->group + (size_t)h;
    return parts + idx * (size_t)(d->hd + 2);
}

/* Work item t: chunk c of segment (i, g), every head of the group over the same K/V rows. */
static void decode_item(const ig_vec_ops *v, const decode_problem *d, int64_t t, float *parts,
                        float *slice) {
    int64_t seg = t / d->n_chunks, c = t % d->n_chunks;
    int64_t i = seg / d->n_kv;
    int g = (int)(seg % d->n_kv);
    int64_t L = seg_len(d, i, g), j0 = c * ATTN_CHUNK;
    if (j0 >= L) return;
    int64_t n = L - j0 < ATTN_CHUNK ? L - j0 : ATTN_CHUNK;
    const float *kr = seg_k(d, g) + (size_t)j0 * (size_t)d->hd;
    const float *vr = seg_v(d, g) + (size_t)j0 * (size_t)d->hd;
    for (int hl = 0; hl < d->group; hl++) {
        int h = g * d->group + hl;
        const float *qh = d->q + ((size_t)i * (size_t)d->n_head + (size_t)h) * (size_t)d->hd;
        float *s = d->probs ? d->probs + (size_t)h * (size_t)d->probs_stride + (size_t)j0 : slice;
        float *part = partial_at(d, parts, seg, c, hl);
        v->dot_rows(qh, kr, n, d->hd, d->scale, s);
        float m = v->max(s, n);
        if (m == -INFINITY) { /* every score -inf: this chunk carries no weight */
            memset(s, 0, (size_t)n * sizeof(float));
            memset(part, 0, (size_t)(d->hd + 2) * sizeof(float));
            part[0] = -INFINITY;
            continue;
        }
        part[0] = m;
        part[1] = v->exp_sub_sum(s, n, m); /* s = exp(score - m) */
        v->wsum_rows(s, vr, n, d->hd, part + 2);
    }
}

/* Output u = (i, h): combine the chunks' partials, rescaled to the common max. */
static void decode_merge(const ig_vec_ops *v, const decode_problem *d, int64_t u, float *parts) {
    int64_t i = u / d->n_head;
    int h = (int)(u % d->n_head), g = h / d->group, hl = h % d->group;
    int64_t seg = i * d->n_kv + g;
    int64_t L = seg_len(d, i, g), nc = cdiv(L, ATTN_CHUNK);
    float *o = d->out + ((size_t)i * (size_t)d->n_head + (size_t)h) * (size_t)d->hd;
    float M = -INFINITY;
    for (int64_t c = 0; c < nc; c++) {
        float m = partial_at(d, parts, seg, c, hl)[0];
        if (m > M) M = m;
    }
    memset(o, 0, (size_t)d->hd * sizeof(float));
    float *pr = d->probs ? d->probs + (size_t)h * (size_t)d->probs_stride : NULL;
    if (M == -INFINITY) { /* no rows, or no finite score */
        if (pr) memset(pr, 0, (size_t)d->probs_stride * sizeof(float));
        return;
    }
    double den = 0;
    for (int64_t c = 0; c < nc; c++) {
        const float *part = partial_at(d, parts, seg, c, hl);
        den += (double)part[1] * exp((double)part[0] - M);
    }
    for (int64_t c = 0; c < nc; c++) {
        const float *part = partial_at(d, parts, seg, c, hl);
        float f = (float)(exp((double)part[0] - M) / den);
        v->axpy(o, f, part + 2, d->hd);
        if (pr) {
            int64_t j0 = c * ATTN_CHUNK, n = L - j0 < ATTN_CHUNK ? L - j0 : ATTN_CHUNK;
            v->scale(pr + j0, f, n);
        }
    }
    if (pr && d->probs_stride > L) memset(pr + L, 0, (size_t)(d->probs_stride - L) * sizeof(float));
}

static void decode_run(decode_problem *d, int64_t n_ctx, float *ws, size_t ws_floats) {
    const ig_vec_ops *v = ig_cpu_vec();
    d->n_chunks = n_ctx > 0 ? cdiv(n_ctx, ATTN_CHUNK) : 1;
    size_t parts_n = decode_partial_floats(d->n_q, n_ctx > 0 ? n_ctx : 1, d->n_head, d->hd);
    size_t slice = decode_slice_floats(n_ctx > 0 ? n_ctx : 1);
    IG_ASSERT(ws_floats >= parts_n + slice);
    float *parts = ws, *slices = ws + parts_n;
    int64_t items = d->n_q * d->n_kv * d->n_chunks;
    int64_t chunk_rows = n_ctx < ATTN_CHUNK ? n_ctx : ATTN_CHUNK;
    int nt = attn_threads(items, 2 * chunk_rows * d->group * (int64_t)d->hd,
                          (ws_floats - parts_n) / slice);
    int64_t outs = d->n_q * d->n_head;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *s = slices + (size_t)omp_get_thread_num() * slice;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < items; t++) decode_item(v, d, t, parts, s);
#pragma omp for schedule(static)
        for (int64_t u = 0; u < outs; u++) decode_merge(v, d, u, parts);
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

static void attention_blas(const float *q, int64_t n_q, int64_t p0, const float *k,
                           const float *val, int64_t stride, int n_head, int group, int hd,
                           float scale, float *ws, size_t ws_floats, float *out) {
    const ig_vec_ops *v = ig_cpu_vec();
    int64_t qblock = attn_qblock(n_q);
    int64_t n_blocks = (n_q + qblock - 1) / qblock;
    int64_t tasks = n_blocks * n_head;
    size_t slice = blas_slice_floats(n_q, p0 + n_q);
    int nt = attn_threads(tasks, 2 * qblock * (p0 + n_q) * (int64_t)hd, ws_floats / slice);
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
    int group = n_head / n_kv_head;
    if (n_q > ATTN_DIRECT_MAX_NQ) {
        attention_blas(q, n_q, p0, k, v, stride_tokens, n_head, group, hd, scale, ws, ws_floats,
                       out);
        return;
    }
    decode_problem d = {0};
    d.q = q;
    d.n_q = n_q;
    d.n_head = n_head;
    d.n_kv = n_kv_head;
    d.group = group;
    d.hd = hd;
    d.scale = scale;
    d.k = k;
    d.v = v;
    d.stride = stride_tokens;
    d.p0 = p0;
    d.out = out;
    decode_run(&d, p0 + n_q, ws, ws_floats);
}

void ig_cpu_attention_rows(const float *q, const float *const *k_rows, const float *const *v_rows,
                           const int64_t *n_rows, int64_t max_rows, int n_head, int n_kv_head,
                           int hd, float scale, float *ws, size_t ws_floats, float *probs_out,
                           float *out) {
    IG_ASSERT(n_head > 0 && n_kv_head > 0 && hd > 0 && max_rows >= 0);
    IG_ASSERT(n_head % n_kv_head == 0);
    for (int g = 0; g < n_kv_head; g++) IG_ASSERT(n_rows[g] >= 0 && n_rows[g] <= max_rows);
    decode_problem d = {0};
    d.q = q;
    d.n_q = 1;
    d.n_head = n_head;
    d.n_kv = n_kv_head;
    d.group = n_head / n_kv_head;
    d.hd = hd;
    d.scale = scale;
    d.k_rows = k_rows;
    d.v_rows = v_rows;
    d.n_rows = n_rows;
    d.probs = probs_out;
    d.probs_stride = max_rows;
    d.out = out;
    decode_run(&d, max_rows, ws, ws_floats);
}
