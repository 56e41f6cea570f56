/* Causal multi-head attention over a KV cache (prefill and decode, grouped-query heads), with an
 * optional per-key sum of the attention received (H2O), and the gathered-rows decode variant used
 * by KV policies (rows f32, f16 or bf16, anywhere in memory). Few queries: SIMD loops over chunks
 * of keys, up to four query heads of a KV group per pass over a chunk (flash-decoding: partial
 * softmax per chunk, merged); many: two sgemm per (head, block of queries). Each OpenMP thread owns
 * one slice of the caller's workspace; nothing is allocated here. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include <cblas.h>

#include "core/base/status.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

/* n_q up to this: the decode path (chunks of keys, heads of a group together). Above: sgemm. */
#define ATTN_DIRECT_MAX_NQ 8
/* Queries per sgemm block: bounds the workspace at ATTN_QBLOCK * n_ctx floats per thread. */
#define ATTN_QBLOCK 32
/* Keys per decode work item: a chunk of K and V rows (2 * 256 * hd floats, 128 KiB at hd 64)
 * stays in L2 while the query heads of the group go over it. */
#define ATTN_CHUNK 256
/* Query heads that share one pass over a chunk (one dot_rows / wsum_rows call). */
#define ATTN_HEADS IG_ROWS_MAX_HEADS
/* Column sums on the sgemm path: slots per thread for the per-block sums of one round of tasks
 * (the rounds keep the order of additions fixed, whatever the thread count). Each round ends in
 * two barriers, which cost a wake-up each under a passive wait policy: 8 slots measured ~10% over
 * plain prefill at n = 1024 on 2 threads, 32 keeps it to a few percent. */
#define ATTN_COLSUM_SLOTS 32
/* Columns per work item when a round's slots are added into colsum. */
#define ATTN_COLSUM_COLS 1024
/* Multiply-adds below which a call stays on one thread. */
#define ATTN_MIN_FLOPS_PER_THREAD (64 * 1024)

static int64_t pad16(int64_t n) {
    return (n + 15) & ~(int64_t)15;
}
static int64_t cdiv(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}
static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

static int64_t attn_qblock(int64_t n_q) {
    return n_q < ATTN_QBLOCK ? n_q : ATTN_QBLOCK;
}

/* Decode path: partial results (max, sum, weighted values) per (query, head, chunk), then one
 * slice of scores per thread (one chunk for each head of a pass). */
static size_t decode_partial_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd) {
    return (size_t)n_q * (size_t)cdiv(n_ctx, ATTN_CHUNK) * (size_t)n_head * (size_t)(hd + 2);
}
static int64_t decode_chunk_pad(int64_t n_ctx) {
    return pad16(n_ctx < ATTN_CHUNK ? n_ctx : ATTN_CHUNK);
}
static size_t decode_slice_floats(int64_t n_ctx, int n_head) {
    return (size_t)(n_head < ATTN_HEADS ? n_head : ATTN_HEADS) * (size_t)decode_chunk_pad(n_ctx);
}
static size_t blas_slice_floats(int64_t n_q, int64_t n_ctx) {
    return (size_t)attn_qblock(n_q) * (size_t)pad16(n_ctx);
}
static size_t colsum_slots_floats(int64_t n_ctx) {
    return (size_t)ATTN_COLSUM_SLOTS * (size_t)pad16(n_ctx);
}

static size_t ws_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd, int n_threads, int colsum) {
    if (n_threads <= 0) n_threads = ig_cpu_get_threads();
    if (n_q < 1) n_q = 1;
    if (n_ctx < 1) n_ctx = 1;
    /* The largest need of any call with at most n_q queries and n_ctx keys: both paths. */
    int64_t nq_dec = n_q < ATTN_DIRECT_MAX_NQ ? n_q : ATTN_DIRECT_MAX_NQ;
    size_t need = decode_partial_floats(nq_dec, n_ctx, n_head, hd) +
                  (size_t)n_threads * decode_slice_floats(n_ctx, n_head);
    if (n_q > ATTN_DIRECT_MAX_NQ) {
        size_t per = blas_slice_floats(n_q, n_ctx) + (colsum ? colsum_slots_floats(n_ctx) : 0);
        size_t blas = (size_t)n_threads * per;
        if (blas > need) need = blas;
    }
    return need;
}

size_t ig_cpu_attention_ws_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd, int n_threads) {
    return ws_floats(n_q, n_ctx, n_head, hd, n_threads, 0);
}

size_t ig_cpu_attention_colsum_ws_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd,
                                         int n_threads) {
    return ws_floats(n_q, n_ctx, n_head, hd, n_threads, 1);
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

/* A decode problem: segments (query i, KV group g), each a run of L rows of K and V split into
 * chunks of ATTN_CHUNK rows. Causal attention and the gathered-rows variant differ only in where a
 * segment's rows are and in their type. */
typedef struct decode_problem {
    const float *q; /* query i, head h: q + (i * n_head + h) * hd */
    int64_t n_q;
    int n_head, n_kv, group, hd;
    float scale;
    ig_dtype kv_type;   /* of the rows: f32 (causal cache), f32/f16/bf16 (gathered rows) */
    int64_t row_stride; /* elements from one row to the next */
    /* causal cache (n_rows == NULL): rows 0 .. p0+i of k + g * stride * hd */
    const float *k, *v;
    int64_t stride, p0;
    /* gathered rows: n_rows[g] rows at k_rows[g], v_rows[g] (typed, or f32 from the old API) */
    const void *const *k_rows, *const *v_rows;
    const float *const *k_rows_f32, *const *v_rows_f32;
    const int64_t *n_rows;
    float *probs; /* [n_head][probs_stride] or NULL (gathered rows only) */
    int64_t probs_stride;
    float *colsum; /* [n_head][colsum_stride] or NULL (causal only): += the probabilities */
    int64_t colsum_stride;
    float *out;
    int64_t n_chunks; /* chunks per segment (the longest segment's) */
    int64_t chunk_pad;
} decode_problem;

static int64_t seg_len(const decode_problem *d, int64_t i, int g) {
    return d->n_rows ? d->n_rows[g] : d->p0 + i + 1;
}
/* Row j0 of segment (., g) in K or V. */
static const void *seg_row(const decode_problem *d, int g, int64_t j0, int is_v) {
    size_t es = d->kv_type == IG_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
    const char *base;
    if (d->k_rows)
        base = (const char *)(is_v ? d->v_rows[g] : d->k_rows[g]);
    else if (d->k_rows_f32)
        base = (const char *)(is_v ? d->v_rows_f32[g] : d->k_rows_f32[g]);
    else
        base = (const char *)(is_v ? d->v : d->k) +
               (size_t)g * (size_t)d->stride * (size_t)d->hd * sizeof(float);
    return base + (size_t)j0 * (size_t)d->row_stride * es;
}

/* Partial of (segment, chunk, head of the group): (max score, sum of exp, weighted values[hd]).
 * After the merge, the sum is replaced by the chunk's factor exp(max - M) / den. */
static float *partial_at(const decode_problem *d, float *parts, int64_t seg, int64_t c, int h) {
    size_t idx = ((size_t)seg * (size_t)d->n_chunks + (size_t)c) * (size_t)d->group + (size_t)h;
    return parts + idx * (size_t)(d->hd + 2);
}

/* Scores of heads hl0 .. hl0+nb-1 of group g for query i over n rows at kr into s[b]. */
static void decode_scores(const ig_vec_ops *v, const decode_problem *d, int64_t i, int g, int hl0,
                          int nb, const void *kr, int64_t n, float *const *s) {
    const float *qp[ATTN_HEADS];
    for (int b = 0; b < nb; b++) {
        int h = g * d->group + hl0 + b;
        qp[b] = d->q + ((size_t)i * (size_t)d->n_head + (size_t)h) * (size_t)d->hd;
    }
    v->dot_rows(qp, nb, kr, d->kv_type, d->row_stride, n, d->hd, d->scale, s);
}

/* Work item t: chunk c of segment (i, g); the heads of the group, ATTN_HEADS at a time, over the
 * same K and V rows. */
static void decode_item(const ig_vec_ops *v, const decode_problem *d, int64_t t, float *parts,
                        float *slice) {
    int64_t seg = t / d->n_chunks, c = t % d->n_chunks;
    int64_t i = seg / d->n_kv;
    int g = (int)(seg % d->n_kv);
    int64_t L = seg_len(d, i, g), j0 = c * ATTN_CHUNK;
    if (j0 >= L) return;
    int64_t n = min64(L - j0, ATTN_CHUNK);
    const void *kr = seg_row(d, g, j0, 0), *vr = seg_row(d, g, j0, 1);
    for (int hl0 = 0; hl0 < d->group; hl0 += ATTN_HEADS) {
        int nb = d->group - hl0 < ATTN_HEADS ? d->group - hl0 : ATTN_HEADS;
        float *s[ATTN_HEADS];
        for (int b = 0; b < nb; b++) {
            int h = g * d->group + hl0 + b;
            s[b] = d->probs ? d->probs + (size_t)h * (size_t)d->probs_stride + (size_t)j0
                            : slice + (size_t)b * (size_t)d->chunk_pad;
        }
        decode_scores(v, d, i, g, hl0, nb, kr, n, s);
        /* Heads with a finite max go on to the weighted sum of V; s = exp(score - max). */
        const float *pw[ATTN_HEADS];
        float *ow[ATTN_HEADS];
        int nw = 0;
        for (int b = 0; b < nb; b++) {
            float *part = partial_at(d, parts, seg, c, hl0 + b);
            float m = v->max(s[b], n);
            if (m == -INFINITY) { /* every score -inf: this chunk carries no weight */
                memset(s[b], 0, (size_t)n * sizeof(float));
                memset(part, 0, (size_t)(d->hd + 2) * sizeof(float));
                part[0] = -INFINITY;
                continue;
            }
            part[0] = m;
            part[1] = v->exp_sub_sum(s[b], n, m);
            pw[nw] = s[b];
            ow[nw++] = part + 2;
        }
        if (nw > 0) v->wsum_rows(pw, nw, vr, d->kv_type, d->row_stride, n, d->hd, ow);
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
        float *part = partial_at(d, parts, seg, c, hl);
        float f = (float)(exp((double)part[0] - M) / den);
        v->axpy(o, f, part + 2, d->hd);
        part[1] = f; /* for the column sums */
        if (pr) {
            int64_t j0 = c * ATTN_CHUNK, n = min64(L - j0, ATTN_CHUNK);
            v->scale(pr + j0, f, n);
        }
    }
    if (pr && d->probs_stride > L) memset(pr + L, 0, (size_t)(d->probs_stride - L) * sizeof(float));
}

/* Column sums, item t = (g, chunk c): the probabilities of that chunk's keys, recomputed from the
 * scores (one more pass over K, none over V) as exp(score - chunk max) * factor, added into
 * colsum over the queries in order. Items own disjoint parts of colsum. */
static void decode_colsum_item(const ig_vec_ops *v, const decode_problem *d, int64_t t,
                               float *parts, float *slice) {
    int g = (int)(t / d->n_chunks);
    int64_t c = t % d->n_chunks, j0 = c * ATTN_CHUNK;
    for (int64_t i = 0; i < d->n_q; i++) {
        int64_t seg = i * d->n_kv + g, L = seg_len(d, i, g);
        if (j0 >= L) continue;
        int64_t n = min64(L - j0, ATTN_CHUNK);
        const void *kr = seg_row(d, g, j0, 0);
        for (int hl0 = 0; hl0 < d->group; hl0 += ATTN_HEADS) {
            int nb = d->group - hl0 < ATTN_HEADS ? d->group - hl0 : ATTN_HEADS;
            float *s[ATTN_HEADS];
            for (int b = 0; b < nb; b++) s[b] = slice + (size_t)b * (size_t)d->chunk_pad;
            decode_scores(v, d, i, g, hl0, nb, kr, n, s);
            for (int b = 0; b < nb; b++) {
                const float *part = partial_at(d, parts, seg, c, hl0 + b);
                if (part[0] == -INFINITY) continue;
                int h = g * d->group + hl0 + b;
                v->exp_sub_sum(s[b], n, part[0]);
                v->axpy(d->colsum + (size_t)h * (size_t)d->colsum_stride + (size_t)j0, part[1],
                        s[b], n);
            }
        }
    }
}

static void decode_run(decode_problem *d, int64_t n_ctx, float *ws, size_t ws_floats) {
    const ig_vec_ops *v = ig_cpu_vec();
    if (n_ctx < 1) n_ctx = 1;
    d->n_chunks = cdiv(n_ctx, ATTN_CHUNK);
    d->chunk_pad = decode_chunk_pad(n_ctx);
    size_t parts_n = decode_partial_floats(d->n_q, n_ctx, d->n_head, d->hd);
    size_t slice = decode_slice_floats(n_ctx, d->n_head);
    IG_ASSERT(ws_floats >= parts_n + slice);
    float *parts = ws, *slices = ws + parts_n;
    int64_t items = d->n_q * d->n_kv * d->n_chunks;
    int64_t chunk_rows = n_ctx < ATTN_CHUNK ? n_ctx : ATTN_CHUNK;
    int nt = attn_threads(items, 2 * chunk_rows * d->group * (int64_t)d->hd,
                          (ws_floats - parts_n) / slice);
    int64_t outs = d->n_q * d->n_head;
    int64_t col_items = d->colsum ? d->n_kv * d->n_chunks : 0;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *s = slices + (size_t)omp_get_thread_num() * slice;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < items; t++) decode_item(v, d, t, parts, s);
#pragma omp for schedule(static)
        for (int64_t u = 0; u < outs; u++) decode_merge(v, d, u, parts);
        if (col_items > 0) {
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < col_items; t++) decode_colsum_item(v, d, t, parts, s);
        }
    }
}

/* ---- prefill: blocks of queries, two sgemm each --------------------------------------------- */

/* Queries i0 .. i0+qb-1 of head h: S = scale Q K^T over the L = p0+i0+qb keys the last of them
 * sees, a causal softmax per row (masked tail set to 0), then O = S V. With csum: csum[j] = the
 * sum over the block's rows of S[r][j], j < L (each row added while it is in L1). */
static void attention_block(const ig_vec_ops *v, const float *q, int64_t p0, const float *kg,
                            const float *vg, int n_head, int h, int hd, float scale, int64_t i0,
                            int64_t qb, float *S, float *csum, float *out) {
    int64_t L = p0 + i0 + qb;
    int ldq = n_head * hd;
    size_t off = ((size_t)i0 * (size_t)n_head + (size_t)h) * (size_t)hd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qb, (int)L, hd, scale, q + off, ldq,
                kg, hd, 0.0f, S, (int)L);
    if (csum) memset(csum, 0, (size_t)L * sizeof(float));
    for (int64_t r = 0; r < qb; r++) {
        int64_t valid = p0 + i0 + r + 1;
        float *row = S + r * L;
        ig_cpu_softmax_row(v, row, valid);
        if (L > valid) memset(row + valid, 0, (size_t)(L - valid) * sizeof(float));
        if (csum) v->axpy(csum, 1.0f, row, valid);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)qb, hd, (int)L, 1.0f, S, (int)L, vg,
                hd, 0.0f, out + off, ldq);
}

typedef struct blas_problem {
    const float *q, *k, *v;
    int64_t n_q, p0, stride;
    int n_head, group, hd;
    float scale;
    float *colsum;
    int64_t colsum_stride;
    float *out;
    int64_t qblock, n_blocks;
} blas_problem;

/* Task t: block n_blocks-1 - t/n_head (later blocks see more keys: they go first), head t%n_head.
 */
static void blas_task(const blas_problem *b, int64_t t, int64_t *i0, int64_t *qb, int *h) {
    int64_t blk = b->n_blocks - 1 - t / b->n_head;
    *h = (int)(t % b->n_head);
    *i0 = blk * b->qblock;
    *qb = min64(b->n_q - *i0, b->qblock);
}

static void attention_blas(const blas_problem *b, float *ws, size_t ws_floats) {
    const ig_vec_ops *v = ig_cpu_vec();
    int64_t n_ctx = b->p0 + b->n_q;
    int64_t tasks = b->n_blocks * b->n_head;
    size_t slice = blas_slice_floats(b->n_q, n_ctx);
    size_t slot = b->colsum ? (size_t)pad16(n_ctx) : 0;
    size_t per_thread = slice + ATTN_COLSUM_SLOTS * slot;
    int nt = attn_threads(tasks, 2 * b->qblock * n_ctx * (int64_t)b->hd, ws_floats / per_thread);
    float *slots = ws + (size_t)nt * slice;
    /* Column sums: tasks run in rounds of nt * ATTN_COLSUM_SLOTS, each writing its block's sums
     * into a slot; after a round the slots are added into colsum in task order, so colsum gets
     * the same additions in the same order whatever the thread count and schedule. */
    int64_t round = b->colsum ? (int64_t)nt * ATTN_COLSUM_SLOTS : tasks;
    int64_t col_items = cdiv(n_ctx, ATTN_COLSUM_COLS);
    int blas_prev = nt > 1 ? ig_cpu_blas_threads_single() : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *S = ws + (size_t)omp_get_thread_num() * slice;
        for (int64_t r0 = 0; r0 < tasks; r0 += round) {
            int64_t r1 = min64(tasks, r0 + round);
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = r0; t < r1; t++) {
                int64_t i0, qb;
                int h;
                blas_task(b, t, &i0, &qb, &h);
                int g = h / b->group;
                size_t kv_off = (size_t)g * (size_t)b->stride * (size_t)b->hd;
                float *csum = b->colsum ? slots + (size_t)(t - r0) * slot : NULL;
                attention_block(v, b->q, b->p0, b->k + kv_off, b->v + kv_off, b->n_head, h, b->hd,
                                b->scale, i0, qb, S, csum, b->out);
            }
            if (b->colsum) {
#pragma omp for schedule(dynamic, 1)
                for (int64_t ci = 0; ci < col_items; ci++) {
                    int64_t c0 = ci * ATTN_COLSUM_COLS;
                    for (int64_t t = r0; t < r1; t++) {
                        int64_t i0, qb;
                        int h;
                        blas_task(b, t, &i0, &qb, &h);
                        int64_t L = b->p0 + i0 + qb;
                        if (c0 >= L) continue;
                        int64_t n = min64(L - c0, ATTN_COLSUM_COLS);
                        float *dst = b->colsum + (size_t)h * (size_t)b->colsum_stride + (size_t)c0;
                        v->axpy(dst, 1.0f, slots + (size_t)(t - r0) * slot + (size_t)c0, n);
                    }
                }
            }
        }
    }
    if (nt > 1) ig_cpu_blas_threads_restore(blas_prev);
}

void ig_cpu_attention_colsum(const float *q, int64_t n_q, int64_t p0, const float *k,
                             const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                             int hd, float scale, float *ws, size_t ws_floats, float *colsum,
                             int64_t colsum_stride, float *out) {
    IG_ASSERT(n_q >= 0 && p0 >= 0 && n_head > 0 && n_kv_head > 0 && hd > 0);
    IG_ASSERT(n_head % n_kv_head == 0);
    IG_ASSERT(p0 + n_q <= stride_tokens);
    IG_ASSERT(p0 + n_q <= INT32_MAX);
    IG_ASSERT(!colsum || colsum_stride >= p0 + n_q);
    if (n_q == 0) return;
    int group = n_head / n_kv_head;
    if (n_q > ATTN_DIRECT_MAX_NQ) {
        blas_problem b = {0};
        b.q = q;
        b.k = k;
        b.v = v;
        b.n_q = n_q;
        b.p0 = p0;
        b.stride = stride_tokens;
        b.n_head = n_head;
        b.group = group;
        b.hd = hd;
        b.scale = scale;
        b.colsum = colsum;
        b.colsum_stride = colsum_stride;
        b.out = out;
        b.qblock = attn_qblock(n_q);
        b.n_blocks = cdiv(n_q, b.qblock);
        attention_blas(&b, ws, ws_floats);
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
    d.kv_type = IG_DTYPE_F32;
    d.row_stride = hd;
    d.k = k;
    d.v = v;
    d.stride = stride_tokens;
    d.p0 = p0;
    d.colsum = colsum;
    d.colsum_stride = colsum_stride;
    d.out = out;
    decode_run(&d, p0 + n_q, ws, ws_floats);
}

void ig_cpu_attention(const float *q, int64_t n_q, int64_t p0, const float *k, const float *v,
                      int64_t stride_tokens, int n_head, int n_kv_head, int hd, float scale,
                      float *ws, size_t ws_floats, float *out) {
    ig_cpu_attention_colsum(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale, ws,
                            ws_floats, NULL, 0, out);
}

static void attention_rows(const float *q, ig_dtype kv_dtype, const void *const *k_rows,
                           const void *const *v_rows, const float *const *k_rows_f32,
                           const float *const *v_rows_f32, int64_t row_stride,
                           const int64_t *n_rows, int64_t max_rows, int n_head, int n_kv_head,
                           int hd, float scale, float *ws, size_t ws_floats, float *probs_out,
                           float *out) {
    IG_ASSERT(n_head > 0 && n_kv_head > 0 && hd > 0 && max_rows >= 0 && row_stride >= hd);
    IG_ASSERT(n_head % n_kv_head == 0);
    IG_ASSERT(kv_dtype == IG_DTYPE_F32 || kv_dtype == IG_DTYPE_F16 || kv_dtype == IG_DTYPE_BF16);
    for (int g = 0; g < n_kv_head; g++) IG_ASSERT(n_rows[g] >= 0 && n_rows[g] <= max_rows);
    decode_problem d = {0};
    d.q = q;
    d.n_q = 1;
    d.n_head = n_head;
    d.n_kv = n_kv_head;
    d.group = n_head / n_kv_head;
    d.hd = hd;
    d.scale = scale;
    d.kv_type = kv_dtype;
    d.row_stride = row_stride;
    d.k_rows = k_rows;
    d.v_rows = v_rows;
    d.k_rows_f32 = k_rows_f32;
    d.v_rows_f32 = v_rows_f32;
    d.n_rows = n_rows;
    d.probs = probs_out;
    d.probs_stride = max_rows;
    d.out = out;
    decode_run(&d, max_rows, ws, ws_floats);
}

void ig_cpu_attention_rows_t(const float *q, ig_dtype kv_dtype, const void *const *k_rows,
                             const void *const *v_rows, int64_t row_stride, const int64_t *n_rows,
                             int64_t max_rows, int n_head, int n_kv_head, int hd, float scale,
                             float *ws, size_t ws_floats, float *probs_out, float *out) {
    attention_rows(q, kv_dtype, k_rows, v_rows, NULL, NULL, row_stride, n_rows, max_rows, n_head,
                   n_kv_head, hd, scale, ws, ws_floats, probs_out, out);
}

void ig_cpu_attention_rows(const float *q, const float *const *k_rows, const float *const *v_rows,
                           const int64_t *n_rows, int64_t max_rows, int n_head, int n_kv_head,
                           int hd, float scale, float *ws, size_t ws_floats, float *probs_out,
                           float *out) {
    attention_rows(q, IG_DTYPE_F32, NULL, NULL, k_rows, v_rows, hd, n_rows, max_rows, n_head,
                   n_kv_head, hd, scale, ws, ws_floats, probs_out, out);
}
