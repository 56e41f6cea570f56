/* Two backend tables over host memory (kernels/backend_iface.h): "cpu", the optimized CPU kernels,
 * and "cpu-ref", the scalar references of cpu_ref.c (double accumulation, sorting top-k), which
 * tests run beside the others as a third, independent backend. Both are the same table over a
 * different set of row kernels; the batched ops loop over rows and tables here, in parallel on the
 * cpu table (OpenMP, ig_cpu_get_threads() threads; rows are independent, so the results do not
 * depend on the thread count) and in order on the reference. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend_iface.h"
#include "kernels/cpu/attention_gather.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ref.h"
#include "kernels/cpu/kvquant.h"

typedef struct host_kernels {
    void (*linear)(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wt, int64_t N,
                   const float *bias, float *y);
    void (*rmsnorm)(const float *x, const float *w, int64_t rows, int64_t dim, float eps, float *y);
    void (*layernorm)(const float *x, const float *w, const float *b, int64_t rows, int64_t dim,
                      float eps, float *y);
    void (*rope)(float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                 const int32_t *pos, const float *cos_tab, const float *sin_tab);
    void (*silu_mul)(const float *gate, const float *up, int64_t n, float *out);
    void (*add)(float *y, const float *x, int64_t n);
    void (*softmax)(float *x, int64_t n);
    void (*partial_scores)(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t n,
                           const float *q, int64_t ldq, int nq, float *out, int64_t ldo,
                           float *col_max, float *row_max);
    int64_t (*count_greater)(const float *x, int64_t n, float thr);
    void (*relu)(float *x, int64_t n);
    float (*page_bound)(const float *q, const float *kmin, const float *kmax, int hd);
    int reference; /* topk by ig_ref_topk, else ig_cpu_topk with a workspace; serial loops */
} host_kernels;

typedef struct host_ctx {
    const host_kernels *k;
    void *ws; /* ig_cpu_topk's workspaces, one per thread, grown once */
    size_t ws_bytes;
    void *aws; /* attention_rows: ig_cpu_attention_gather's workspace (floats), grown once */
    size_t aws_bytes;
    void *ptrs; /* attention_rows: the per-KV-head pointer lists of one sequence, grown once */
    size_t ptrs_bytes;
} host_ctx;

/* Grows *p to at least `bytes` (never shrinks): a workspace kept for the next call. */
static ig_status grow(void **p, size_t *have, size_t bytes, const char *what, ig_error *err) {
    if (bytes <= *have) return IG_OK;
    void *n = realloc(*p, bytes);
    if (!n) return ig_error_set(err, IG_ERR_NOMEM, "%s: workspace of %zu bytes", what, bytes);
    *p = n;
    *have = bytes;
    return IG_OK;
}

/* Threads for a batched op of `items` independent rows or tables. */
static int host_threads(const ig_be *be, int items) {
    const host_ctx *c = be->ctx;
    if (c->k->reference || items < 2) return 1;
    int t = ig_cpu_get_threads();
    return t < items ? t : items;
}

static int64_t ref_count_greater(const float *x, int64_t n, float thr) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += x[i] > thr;
    return c;
}

static const host_kernels g_cpu_kernels = {
    ig_cpu_linear,        ig_cpu_rmsnorm, ig_cpu_layernorm,  ig_cpu_rope,
    ig_cpu_silu_mul,      ig_cpu_add,     ig_cpu_softmax,    ig_cpu_partial_scores,
    ig_cpu_count_greater, ig_cpu_relu,    ig_cpu_page_bound, 0,
};

static const host_kernels g_ref_kernels = {
    ig_ref_linear,     ig_ref_rmsnorm, ig_ref_layernorm,  ig_ref_rope,
    ig_ref_silu_mul,   ig_ref_add,     ig_ref_softmax,    ig_ref_partial_scores,
    ref_count_greater, ig_ref_relu,    ig_ref_page_bound, 1,
};

static const host_kernels *K(ig_be *be) {
    return ((host_ctx *)be->ctx)->k;
}

static void host_destroy(ig_be *be) {
    host_ctx *c = be->ctx;
    free(c->ws);
    free(c->aws);
    free(c->ptrs);
    free(c);
    free(be);
}

static void *host_alloc(ig_be *be, size_t bytes, ig_error *err) {
    (void)be;
    void *p = malloc(bytes);
    if (!p) ig_error_set(err, IG_ERR_NOMEM, "backend %s: %zu bytes", be->caps.name, bytes);
    return p;
}

static void host_free(ig_be *be, void *p) {
    (void)be;
    free(p);
}

static ig_status host_copy(ig_be *be, void *dst, const void *src, size_t bytes, ig_error *err) {
    (void)be;
    (void)err;
    memmove(dst, src, bytes);
    return IG_OK;
}

static ig_status host_copy2d(ig_be *be, void *dst, size_t dpitch, const void *src, size_t spitch,
                             size_t width, size_t rows, ig_error *err) {
    (void)be;
    (void)err;
    for (size_t r = 0; r < rows; r++)
        memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return IG_OK;
}

static ig_status host_sync(ig_be *be, ig_error *err) {
    (void)be;
    (void)err;
    return IG_OK;
}

static ig_status host_linear(ig_be *be, const float *x, int64_t M, int64_t K_, const void *W,
                             ig_dtype wt, int64_t N, const float *bias, float *y, ig_error *err) {
    (void)err;
    K(be)->linear(x, M, K_, W, wt, N, bias, y);
    return IG_OK;
}

static ig_status host_linear_multi(ig_be *be, const float *x, int64_t M, int64_t K_, ig_dtype wt,
                                   const ig_linear_part *parts, int n, ig_error *err) {
    (void)err;
    if (K(be)->reference) {
        for (int i = 0; i < n; i++)
            K(be)->linear(x, M, K_, parts[i].W, wt, parts[i].N, parts[i].bias, parts[i].y);
        return IG_OK;
    }
    ig_cpu_linear_multi(x, M, K_, wt, parts, n);
    return IG_OK;
}

static ig_status host_rmsnorm(ig_be *be, const float *x, const float *w, int64_t rows, int64_t dim,
                              float eps, float *y, ig_error *err) {
    (void)err;
    K(be)->rmsnorm(x, w, rows, dim, eps, y);
    return IG_OK;
}

static ig_status host_layernorm(ig_be *be, const float *x, const float *w, const float *b,
                                int64_t rows, int64_t dim, float eps, float *y, ig_error *err) {
    (void)err;
    K(be)->layernorm(x, w, b, rows, dim, eps, y);
    return IG_OK;
}

static ig_status host_rope(ig_be *be, float *x, int64_t n_tok, int n_heads, int head_dim,
                           int rot_dim, const int32_t *pos, const float *cos_tab,
                           const float *sin_tab, ig_error *err) {
    (void)err;
    K(be)->rope(x, n_tok, n_heads, head_dim, rot_dim, pos, cos_tab, sin_tab);
    return IG_OK;
}

static ig_status host_silu_mul(ig_be *be, const float *gate, const float *up, int64_t n, float *out,
                               ig_error *err) {
    (void)err;
    K(be)->silu_mul(gate, up, n, out);
    return IG_OK;
}

static ig_status host_relu(ig_be *be, float *x, int64_t n, ig_error *err) {
    (void)err;
    K(be)->relu(x, n);
    return IG_OK;
}
static ig_status host_add(ig_be *be, float *y, const float *x, int64_t n, ig_error *err) {
    (void)err;
    K(be)->add(y, x, n);
    return IG_OK;
}

static ig_status host_softmax(ig_be *be, float *x, int64_t rows, int64_t n, ig_error *err) {
    (void)err;
    for (int64_t r = 0; r < rows; r++) K(be)->softmax(x + r * n, n);
    return IG_OK;
}

static ig_status host_partial_scores(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                                     int64_t keys_stride, int kc, int64_t n, const float *q,
                                     int64_t ldq, int64_t q_stride, int nq, float *out, int64_t ldo,
                                     int64_t out_stride, float *col_max, int64_t cm_stride,
                                     float *row_max, int tables, ig_error *err) {
    (void)err;
    size_t esz = kt == IG_DTYPE_F16 ? 2 : 4;
    int nt = host_threads(be, tables);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int t = 0; t < tables; t++)
        K(be)->partial_scores((const char *)keys + (size_t)t * (size_t)keys_stride * esz, kt, ld,
                              kc, n, q + (size_t)t * (size_t)q_stride, ldq, nq,
                              out + (size_t)t * (size_t)out_stride, ldo,
                              col_max ? col_max + (size_t)t * (size_t)cm_stride : NULL,
                              row_max + (size_t)t * (size_t)nq);
    return IG_OK;
}

static ig_status host_partial_scores_tab(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                                         const int64_t *tab, int kc_max, int64_t n_max,
                                         const float *q, int64_t ldq, int64_t q_stride, int nq,
                                         float *out, int64_t ldo, int64_t out_stride,
                                         float *col_max, int64_t cm_stride, float *row_max,
                                         int tables, ig_error *err) {
    (void)err;
    size_t esz = kt == IG_DTYPE_F16 ? 2 : 4;
    int nt = host_threads(be, tables);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int t = 0; t < tables; t++) {
        int64_t kc = tab[3 * t + 1], n = tab[3 * t + 2];
        kc = kc < 0 ? 0 : kc > kc_max ? kc_max : kc;
        n = n < 0 ? 0 : n > n_max ? n_max : n;
        K(be)->partial_scores((const char *)keys + (size_t)tab[3 * t] * esz, kt, ld, (int)kc, n,
                              q + (size_t)t * (size_t)q_stride, ldq, nq,
                              out + (size_t)t * (size_t)out_stride, ldo,
                              col_max ? col_max + (size_t)t * (size_t)cm_stride : NULL,
                              row_max + (size_t)t * (size_t)nq);
    }
    return IG_OK;
}

static ig_status host_mask_scores(ig_be *be, float *x, int64_t ldx, int rows, int64_t x_stride,
                                  float *col_max, int64_t cm_stride, float *row_max,
                                  const int32_t *key, int64_t key_stride, const int64_t *tab,
                                  int64_t n_max, int tables, ig_error *err) {
    (void)err;
    int nt = host_threads(be, tables);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int t = 0; t < tables; t++) {
        int64_t n = tab[3 * t + 2];
        n = n < 0 ? 0 : n > n_max ? n_max : n;
        const int32_t *kt = key + (size_t)t * (size_t)key_stride;
        float *xt = x + (size_t)t * (size_t)x_stride;
        for (int h = 0; h < rows; h++) {
            float *xr = xt + (size_t)h * (size_t)ldx, m = -INFINITY;
            for (int64_t e = 0; e < n; e++) {
                if (kt[e] < 0)
                    xr[e] = -INFINITY;
                else if (xr[e] > m)
                    m = xr[e];
            }
            row_max[(size_t)t * (size_t)rows + (size_t)h] = m;
        }
        if (col_max)
            for (int64_t e = 0; e < n; e++)
                if (kt[e] < 0) col_max[(size_t)t * (size_t)cm_stride + (size_t)e] = -INFINITY;
    }
    return IG_OK;
}

static ig_status host_count_greater(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                                    const int32_t *n_rows, const float *thr_base, float thr_add,
                                    int32_t *counts, ig_error *err) {
    (void)err;
    int nt = host_threads(be, rows);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int r = 0; r < rows; r++) {
        int64_t nr = n_rows ? n_rows[r] : n;
        if (nr > n) nr = n;
        float thr = (thr_base ? thr_base[r] : 0.0f) + thr_add;
        counts[r] =
            nr > 0 ? (int32_t)K(be)->count_greater(x + (size_t)r * (size_t)ldx, nr, thr) : 0;
    }
    return IG_OK;
}

static ig_status host_page_bounds(ig_be *be, const float *q, int group, int hd, const float *kmin,
                                  const float *kmax, const int32_t *rows, int64_t pages_stride,
                                  const int32_t *src, const int32_t *n_pages, int gqa_sum,
                                  float *out, int64_t ldo, int tables, ig_error *err) {
    (void)err;
    int nt = host_threads(be, tables);
    float (*bound)(const float *, const float *, const float *, int) = K(be)->page_bound;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int t = 0; t < tables; t++) {
        size_t base = (size_t)src[t] * (size_t)pages_stride;
        const float *qt = q + (size_t)t * (size_t)group * (size_t)hd;
        float *o = out + (size_t)t * (size_t)ldo;
        int64_t np = n_pages[t] < ldo ? n_pages[t] : ldo;
        for (int64_t p = 0; p < np; p++) {
            size_t pi = base + (size_t)p;
            if (rows[pi] == 0) {
                o[p] = -INFINITY;
                continue;
            }
            const float *mn = kmin + pi * (size_t)hd, *mx = kmax + pi * (size_t)hd;
            float best = gqa_sum ? 0.0f : -INFINITY;
            for (int h = 0; h < group; h++) {
                float b = bound(qt + (size_t)h * (size_t)hd, mn, mx, hd);
                if (gqa_sum)
                    best += b;
                else if (b > best)
                    best = b;
            }
            o[p] = best;
        }
    }
    return IG_OK;
}

static ig_status host_embed(ig_be *be, const void *table, ig_dtype tt, int64_t rows, int64_t dim,
                            const int32_t *ids, int64_t n, float *out, ig_error *err) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= rows)
            return ig_error_set(err, IG_ERR_INVALID_ARG, "embed: id %d at %lld outside [0, %lld)",
                                (int)ids[i], (long long)i, (long long)rows);
    if (!K(be)->reference) {
        ig_cpu_embed(table, tt, dim, ids, n, out);
        return IG_OK;
    }
    size_t rb = ig_dtype_row_bytes(tt, dim);
    for (int64_t i = 0; i < n; i++)
        ig_dequant_row_ref(tt, (const char *)table + (size_t)ids[i] * rb,
                           out + (size_t)i * (size_t)dim, dim);
    return IG_OK;
}

static ig_status host_topk(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                           const int32_t *n_rows, int64_t k, const int32_t *k_rows, int32_t *idx,
                           int64_t ld_idx, int32_t *counts, ig_error *err) {
    host_ctx *c = be->ctx;
    for (int r = 0; r < rows; r++) { /* the sizes first: a refused row leaves every row alone */
        int64_t nr = n_rows ? n_rows[r] : n, kr = k_rows ? k_rows[r] : k;
        if (nr > n) nr = n;
        if (kr > nr) kr = nr;
        if (kr > ld_idx)
            return ig_error_set(err, IG_ERR_INVALID_ARG, "topk: row %d: k=%lld > ld_idx=%lld", r,
                                (long long)kr, (long long)ld_idx);
    }
    int nt = host_threads(be, rows);
    size_t per = c->k->reference ? 0 : (ig_cpu_topk_ws_bytes(n) + 63) / 64 * 64;
    IG_TRY(grow(&c->ws, &c->ws_bytes, per * (size_t)nt, "topk", err));
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int r = 0; r < rows; r++) {
        int64_t nr = n_rows ? n_rows[r] : n, kr = k_rows ? k_rows[r] : k;
        if (nr > n) nr = n;
        if (nr < 0) nr = 0;
        if (kr > nr) kr = nr;
        if (kr < 0) kr = 0;
        const float *xr = x + (size_t)r * (size_t)ldx;
        int32_t *out = idx + (size_t)r * (size_t)ld_idx;
        if (c->k->reference)
            counts[r] = (int32_t)ig_ref_topk(xr, nr, kr, out);
        else
            counts[r] = (int32_t)ig_cpu_topk(
                xr, nr, kr, out, (char *)c->ws + per * (size_t)omp_get_thread_num(), per);
    }
    return IG_OK;
}

static size_t host_attention_ws(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd) {
    if (K(be)->reference) return 0;
    return ig_cpu_attention_ws_floats(n_q, n_ctx, n_head, hd, 0);
}

static ig_status host_attention(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                                const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                                int hd, float scale, float *ws, size_t ws_floats, float *out,
                                ig_error *err) {
    if (K(be)->reference) {
        ig_ref_attention(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale, out);
        return IG_OK;
    }
    size_t need = ig_cpu_attention_ws_floats(n_q, p0 + n_q, n_head, hd, 1);
    if (!ws || ws_floats < need)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "attention: workspace of %zu floats, one thread needs %zu", ws_floats,
                            need);
    ig_cpu_attention(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale, ws, ws_floats,
                     out);
    return IG_OK;
}

static size_t host_attention_colsum_ws(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd) {
    if (K(be)->reference) return 0;
    return ig_cpu_attention_colsum_ws_floats(n_q, n_ctx, n_head, hd, 0);
}

static ig_status host_attention_colsum(ig_be *be, const float *q, int64_t n_q, int64_t p0,
                                       const float *k, const float *v, int64_t stride_tokens,
                                       int n_head, int n_kv_head, int hd, float scale, float *ws,
                                       size_t ws_floats, float *colsum, int64_t colsum_stride,
                                       float *out, ig_error *err) {
    if (K(be)->reference) {
        ig_ref_attention_colsum(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale,
                                colsum, colsum_stride, out);
        return IG_OK;
    }
    size_t need = ig_cpu_attention_colsum_ws_floats(n_q, p0 + n_q, n_head, hd, 1);
    if (!ws || ws_floats < need)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "attention_colsum: workspace of %zu floats, one thread needs %zu",
                            ws_floats, need);
    ig_cpu_attention_colsum(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale, ws,
                            ws_floats, colsum, colsum_stride, out);
    return IG_OK;
}

static ig_status host_gather_rows(ig_be *be, void *dst, int64_t dst_table_stride, const void *src,
                                  int64_t src_table_stride, int64_t src_row_stride,
                                  const int32_t *src_table, size_t row_bytes, const int32_t *idx,
                                  int64_t idx_stride, const int32_t *n_sel, int tables,
                                  ig_error *err) {
    for (int t = 0; t < tables; t++) { /* the indices first: a refused call copies nothing */
        const int32_t *it = idx + (size_t)t * (size_t)idx_stride;
        if (n_sel[t] < 0 || (src_table && src_table[t] < 0))
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "gather_rows: table %d: n_sel %d, source %d", t, n_sel[t],
                                src_table ? src_table[t] : t);
        for (int32_t j = 0; j < n_sel[t]; j++)
            if (it[j] < 0)
                return ig_error_set(err, IG_ERR_INVALID_ARG,
                                    "gather_rows: table %d row %d: index %d", t, j, it[j]);
    }
    int nt = host_threads(be, tables);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int t = 0; t < tables; t++) {
        int64_t st = src_table ? src_table[t] : t;
        const unsigned char *s = (const unsigned char *)src + st * src_table_stride;
        unsigned char *d = (unsigned char *)dst + (int64_t)t * dst_table_stride;
        const int32_t *it = idx + (size_t)t * (size_t)idx_stride;
        for (int32_t j = 0; j < n_sel[t]; j++)
            memcpy(d + (size_t)j * row_bytes, s + (int64_t)it[j] * src_row_stride, row_bytes);
    }
    return IG_OK;
}

/* One sequence at a time through ig_cpu_attention_gather (parallel over its heads inside) or its
 * reference, the sequence's tables given as the per-KV-head lists the kernel reads. */
static ig_status host_attention_rows(ig_be *be, const ig_be_attn_rows *a, const float *q,
                                     float *out, ig_error *err) {
    host_ctx *c = be->ctx;
    int B = a->batch, G = a->n_kv_head, H = a->n_head, hd = a->hd, group = H / G;
    int64_t max_rows = 0;
    for (int t = 0; t < B * G; t++) {
        int64_t rows = (int64_t)a->n_sel[t] + a->n_extra;
        if (a->n_sel[t] < 0 || rows < 1)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "attention_rows: sequence %d KV head %d: %d selected + %d extra "
                                "rows (at least one row)",
                                t / G, t % G, a->n_sel[t], a->n_extra);
        if (a->probs && rows > a->probs_stride)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "attention_rows: sequence %d KV head %d: %lld rows > probs_stride "
                                "%lld",
                                t / G, t % G, (long long)rows, (long long)a->probs_stride);
        if (rows > max_rows) max_rows = rows;
    }
    size_t per = 3 * sizeof(void *) + sizeof(int64_t); /* k, v, idx pointers and a count */
    IG_TRY(grow(&c->ptrs, &c->ptrs_bytes, per * (size_t)G, "attention_rows", err));
    const void **kp = c->ptrs, **vp = kp + G;
    const int32_t **ip = (const int32_t **)(vp + G);
    int64_t *ns = (int64_t *)(ip + G);
    if (!c->k->reference) {
        size_t f = ig_cpu_attention_gather_ws_floats(H, max_rows);
        IG_TRY(grow(&c->aws, &c->aws_bytes, f * sizeof(float), "attention_rows", err));
    }
    size_t es = ig_dtype_size(a->kv_dtype);
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < G; g++) {
            size_t t = (size_t)b * (size_t)G + (size_t)g;
            kp[g] = (const unsigned char *)a->k + t * (size_t)a->table_stride * es;
            vp[g] = (const unsigned char *)a->v + t * (size_t)a->table_stride * es;
            ip[g] = a->idx ? a->idx + t * (size_t)a->idx_stride : NULL;
            ns[g] = a->n_sel[t];
        }
        ig_gather_attn ga = {0};
        ga.n_head = H;
        ga.n_kv_head = G;
        ga.hd = hd;
        ga.scale = a->scale;
        ga.idx = a->idx ? ip : NULL;
        ga.n_sel = ns;
        size_t xo = (size_t)b * (size_t)a->n_extra * (size_t)G * (size_t)hd;
        ga.k_extra = a->n_extra ? a->k_extra + xo : NULL;
        ga.v_extra = a->n_extra ? a->v_extra + xo : NULL;
        ga.n_extra = a->n_extra;
        if (a->kv_dtype == IG_DTYPE_F32) {
            ga.enc = IG_ROWS_F32;
            ga.k_base = (const float *const *)kp;
            ga.v_base = (const float *const *)vp;
            ga.row_stride = a->row_stride;
        } else {
            ga.enc = IG_ROWS_F16;
            ga.k_enc = (const unsigned char *const *)kp;
            ga.v_enc = (const unsigned char *const *)vp;
            ga.enc_row_bytes = (size_t)a->row_stride * es;
        }
        const float *qb = q + (size_t)b * (size_t)H * (size_t)hd;
        float *ob = out + (size_t)b * (size_t)H * (size_t)hd;
        float *pb = a->probs ? a->probs + (size_t)b * (size_t)H * (size_t)a->probs_stride : NULL;
        if (c->k->reference)
            ig_ref_attention_gather(&ga, qb, pb, a->probs_stride, ob);
        else
            ig_cpu_attention_gather(&ga, qb, c->aws, c->aws_bytes / sizeof(float), pb,
                                    a->probs_stride, ob);
        for (int h = 0; pb && h < H; h++) {
            int64_t rows = ns[h / group] + a->n_extra;
            memset(pb + (size_t)h * (size_t)a->probs_stride + (size_t)rows, 0,
                   (size_t)(a->probs_stride - rows) * sizeof(float));
        }
    }
    return IG_OK;
}

/* The codec and conversions are exact (a byte format): both host tables run the one
 * implementation (core/base/dtype's ig_convert, kvquant.c), which test_kvquant checks. */
static ig_status host_convert(ig_be *be, const void *src, ig_dtype st, void *dst, ig_dtype dt,
                              int64_t n, ig_error *err) {
    (void)be;
    (void)err;
    ig_convert(dt, dst, st, src, (size_t)n);
    return IG_OK;
}

static ig_status host_kvq_quantize(ig_be *be, const float *x, int64_t rows, int hd, int bits,
                                   int group, uint8_t *out, ig_error *err) {
    (void)be;
    (void)err;
    ig_kvq_quantize_rows(x, rows, hd, bits, group, out);
    return IG_OK;
}

static ig_status host_kvq_dequantize(ig_be *be, const uint8_t *in, int64_t rows, int hd, int bits,
                                     int group, float *out, ig_error *err) {
    (void)be;
    (void)err;
    ig_kvq_dequantize_rows(in, rows, hd, bits, group, out);
    return IG_OK;
}

/* Queues on the host: every op has finished when it returns. */
static ig_status host_create(const host_kernels *k, const char *name, int reference, ig_be **out,
                             ig_error *err);

static ig_status host_fork(ig_be *be, ig_be **out, ig_error *err) {
    return host_create(K(be), be->caps.name, be->caps.reference, out, err);
}

static ig_status host_event_new(ig_be *be, void **ev, ig_error *err) {
    *ev = malloc(1); /* a token: nothing to order */
    return *ev ? IG_OK : ig_error_set(err, IG_ERR_NOMEM, "backend %s: event", be->caps.name);
}

static void host_event_free(ig_be *be, void *ev) {
    (void)be;
    free(ev);
}

static ig_status host_event_op(ig_be *be, void *ev, ig_error *err) {
    (void)be;
    (void)ev;
    (void)err;
    return IG_OK;
}

static ig_status host_register(ig_be *be, void *p, size_t bytes, void **dev, ig_error *err) {
    (void)be;
    (void)bytes;
    (void)err;
    *dev = p;
    return IG_OK;
}

static ig_status host_unregister(ig_be *be, void *p, ig_error *err) {
    (void)be;
    (void)p;
    (void)err;
    return IG_OK;
}

static const ig_be_iface g_host_iface = {
    IG_BE_IFACE_VERSION,
    host_destroy,
    host_alloc,
    host_free,
    host_copy,
    host_copy,
    host_copy2d,
    host_sync,
    host_linear,
    host_rmsnorm,
    host_layernorm,
    host_rope,
    host_silu_mul,
    host_add,
    host_softmax,
    host_partial_scores,
    host_count_greater,
    host_topk,
    host_partial_scores_tab,
    host_mask_scores,
    host_relu,
    host_copy2d,
    host_attention_ws,
    host_attention,
    host_gather_rows,
    host_attention_rows,
    host_convert,
    host_kvq_quantize,
    host_kvq_dequantize,
    host_fork,
    host_copy,
    host_event_new,
    host_event_free,
    host_event_op,
    host_event_op,
    host_register,
    host_unregister,
    host_attention_colsum_ws,
    host_attention_colsum,
    host_page_bounds,
    host_embed,
    host_linear_multi,
};

static ig_status host_create(const host_kernels *k, const char *name, int reference, ig_be **out,
                             ig_error *err) {
    *out = NULL;
    IG_TRY(ig_be_iface_check(&g_host_iface, name, err));
    ig_be *be = calloc(1, sizeof *be);
    host_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return ig_error_set(err, IG_ERR_NOMEM, "backend %s", name);
    }
    c->k = k;
    be->iface = &g_host_iface;
    be->ctx = c;
    be->caps = (ig_be_caps){name, 0, 0, reference};
    *out = be;
    return IG_OK;
}

ig_status ig_be_cpu_create(ig_be **out, ig_error *err) {
    return host_create(&g_cpu_kernels, "cpu", 0, out, err);
}

ig_status ig_be_ref_create(ig_be **out, ig_error *err) {
    return host_create(&g_ref_kernels, "cpu-ref", 1, out, err);
}
