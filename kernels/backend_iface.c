/* Calls through a backend's table (backend_iface.h). The argument checks live here, once for every
 * backend, so that each table may assume valid sizes; an empty op returns before the table. */
#include "kernels/backend_iface.h"

#include "kernels/cpu/kvquant.h" /* the codec's row format (ig_kvq_row_bytes) */

#include <stdlib.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) return ig_error_set(err, IG_ERR_INVALID_ARG, __VA_ARGS__);                    \
    } while (0)

ig_status ig_be_iface_check(const ig_be_iface *t, const char *name, ig_error *err) {
    if (!t) return ig_error_set(err, IG_ERR_INVALID_ARG, "backend %s: no table", name);
    if (t->version != IG_BE_IFACE_VERSION)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "backend %s: interface version %d (this build has %d)", name,
                            t->version, IG_BE_IFACE_VERSION);
    const int set[] = {
        t->destroy != NULL,
        t->alloc != NULL,
        t->free != NULL,
        t->upload != NULL,
        t->download != NULL,
        t->upload2d != NULL,
        t->sync != NULL,
        t->linear != NULL,
        t->rmsnorm != NULL,
        t->layernorm != NULL,
        t->rope != NULL,
        t->silu_mul != NULL,
        t->add != NULL,
        t->softmax != NULL,
        t->partial_scores != NULL,
        t->count_greater != NULL,
        t->topk != NULL,
        t->partial_scores_tab != NULL,
        t->mask_scores != NULL,
        t->relu != NULL,
        t->copy2d != NULL,
        t->attention_ws != NULL,
        t->attention != NULL,
        t->gather_rows != NULL,
        t->attention_rows != NULL,
        t->convert != NULL,
        t->kvq_quantize != NULL,
        t->kvq_dequantize != NULL,
        t->fork != NULL,
        t->upload_async != NULL,
        t->event_new != NULL,
        t->event_free != NULL,
        t->event_record != NULL,
        t->event_wait != NULL,
        t->host_register != NULL,
        t->host_unregister != NULL,
        t->attention_colsum_ws != NULL,
        t->attention_colsum != NULL,
        t->page_bounds != NULL,
        t->embed != NULL,
    };
    static const char *names[] = {"destroy",
                                  "alloc",
                                  "free",
                                  "upload",
                                  "download",
                                  "upload2d",
                                  "sync",
                                  "linear",
                                  "rmsnorm",
                                  "layernorm",
                                  "rope",
                                  "silu_mul",
                                  "add",
                                  "softmax",
                                  "partial_scores",
                                  "count_greater",
                                  "topk",
                                  "partial_scores_tab",
                                  "mask_scores",
                                  "relu",
                                  "copy2d",
                                  "attention_ws",
                                  "attention",
                                  "gather_rows",
                                  "attention_rows",
                                  "convert",
                                  "kvq_quantize",
                                  "kvq_dequantize",
                                  "fork",
                                  "upload_async",
                                  "event_new",
                                  "event_free",
                                  "event_record",
                                  "event_wait",
                                  "host_register",
                                  "host_unregister",
                                  "attention_colsum_ws",
                                  "attention_colsum",
                                  "page_bounds",
                                  "embed"};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if (!set[i])
            return ig_error_set(err, IG_ERR_INVALID_ARG, "backend %s: no %s op", name, names[i]);
    return IG_OK;
}

void ig_be_free(ig_be *be) {
    if (be) be->iface->destroy(be);
}

void *ig_be_alloc(ig_be *be, size_t bytes, ig_error *err) {
    if (bytes == 0) bytes = 1;
    return be->iface->alloc(be, bytes, err);
}

void ig_be_release(ig_be *be, void *p) {
    if (p) be->iface->free(be, p);
}

ig_status ig_be_upload(ig_be *be, void *dst, const void *host_src, size_t bytes, ig_error *err) {
    if (bytes == 0) return IG_OK;
    CHECK(dst && host_src, "upload: NULL pointer");
    return be->iface->upload(be, dst, host_src, bytes, err);
}

ig_status ig_be_download(ig_be *be, void *host_dst, const void *src, size_t bytes, ig_error *err) {
    if (bytes == 0) return be->iface->sync(be, err);
    CHECK(host_dst && src, "download: NULL pointer");
    return be->iface->download(be, host_dst, src, bytes, err);
}

ig_status ig_be_upload2d(ig_be *be, void *dst, size_t dpitch, const void *host_src, size_t spitch,
                         size_t width, size_t rows, ig_error *err) {
    if (width == 0 || rows == 0) return IG_OK;
    CHECK(dst && host_src, "upload2d: NULL pointer");
    CHECK(dpitch >= width && spitch >= width,
          "upload2d: width %zu bytes is more than a pitch (dst %zu, src %zu)", width, dpitch,
          spitch);
    return be->iface->upload2d(be, dst, dpitch, host_src, spitch, width, rows, err);
}

ig_status ig_be_sync(ig_be *be, ig_error *err) {
    return be->iface->sync(be, err);
}

ig_status ig_be_linear(ig_be *be, const float *x, int64_t M, int64_t K, const void *W, ig_dtype wt,
                       int64_t N, const float *bias, float *y, ig_error *err) {
    CHECK(M >= 0 && K > 0 && N > 0, "linear: M=%lld K=%lld N=%lld", (long long)M, (long long)K,
          (long long)N);
    CHECK(wt == IG_DTYPE_F32 || wt == IG_DTYPE_F16 || wt == IG_DTYPE_BF16 || ig_dtype_is_quant(wt),
          "linear: weights of type %s", ig_dtype_name(wt));
    CHECK(!ig_dtype_is_quant(wt) || K % ig_dtype_block_elems(wt) == 0,
          "linear: K=%lld is not a multiple of %s's block of %lld", (long long)K, ig_dtype_name(wt),
          (long long)ig_dtype_block_elems(wt));
    if (M == 0) return IG_OK;
    CHECK(x && W && y, "linear: NULL x, W or y");
    return be->iface->linear(be, x, M, K, W, wt, N, bias, y, err);
}

ig_status ig_be_linear_multi(ig_be *be, const float *x, int64_t M, int64_t K, ig_dtype wt,
                             const ig_linear_part *parts, int n_parts, ig_error *err) {
    CHECK(n_parts >= 1 && n_parts <= IG_LINEAR_MULTI_MAX && parts,
          "linear_multi: %d matrices (1..%d)", n_parts, IG_LINEAR_MULTI_MAX);
    CHECK(M >= 0 && K > 0, "linear_multi: M=%lld K=%lld", (long long)M, (long long)K);
    CHECK(wt == IG_DTYPE_F32 || wt == IG_DTYPE_F16 || wt == IG_DTYPE_BF16 || ig_dtype_is_quant(wt),
          "linear_multi: weights of type %s", ig_dtype_name(wt));
    CHECK(!ig_dtype_is_quant(wt) || K % ig_dtype_block_elems(wt) == 0,
          "linear_multi: K=%lld is not a multiple of %s's block of %lld", (long long)K,
          ig_dtype_name(wt), (long long)ig_dtype_block_elems(wt));
    for (int i = 0; i < n_parts; i++)
        CHECK(parts[i].N > 0 && parts[i].N <= INT32_MAX, "linear_multi: matrix %d: N=%lld", i,
              (long long)parts[i].N);
    if (M == 0) return IG_OK;
    CHECK(x, "linear_multi: NULL x");
    for (int i = 0; i < n_parts; i++)
        CHECK(parts[i].W && parts[i].y, "linear_multi: matrix %d: NULL W or y", i);
    return be->iface->linear_multi(be, x, M, K, wt, parts, n_parts, err);
}

ig_status ig_be_rmsnorm(ig_be *be, const float *x, const float *w, int64_t rows, int64_t dim,
                        float eps, float *y, ig_error *err) {
    CHECK(rows >= 0 && dim > 0, "rmsnorm: rows=%lld dim=%lld", (long long)rows, (long long)dim);
    if (rows == 0) return IG_OK;
    CHECK(x && w && y, "rmsnorm: NULL x, w or y");
    return be->iface->rmsnorm(be, x, w, rows, dim, eps, y, err);
}

ig_status ig_be_layernorm(ig_be *be, const float *x, const float *w, const float *b, int64_t rows,
                          int64_t dim, float eps, float *y, ig_error *err) {
    CHECK(rows >= 0 && dim > 0, "layernorm: rows=%lld dim=%lld", (long long)rows, (long long)dim);
    if (rows == 0) return IG_OK;
    CHECK(x && w && y, "layernorm: NULL x, w or y");
    return be->iface->layernorm(be, x, w, b, rows, dim, eps, y, err);
}

ig_status ig_be_rope(ig_be *be, float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                     const int32_t *pos, const float *cos_tab, const float *sin_tab,
                     ig_error *err) {
    CHECK(n_tok >= 0 && n_heads > 0 && head_dim > 0 && rot_dim > 0 && rot_dim <= head_dim &&
              rot_dim % 2 == 0,
          "rope: n_tok=%lld n_heads=%d head_dim=%d rot_dim=%d", (long long)n_tok, n_heads, head_dim,
          rot_dim);
    if (n_tok == 0) return IG_OK;
    CHECK(x && pos && cos_tab && sin_tab, "rope: NULL x, pos or table");
    return be->iface->rope(be, x, n_tok, n_heads, head_dim, rot_dim, pos, cos_tab, sin_tab, err);
}

ig_status ig_be_silu_mul(ig_be *be, const float *gate, const float *up, int64_t n, float *out,
                         ig_error *err) {
    CHECK(n >= 0, "silu_mul: n=%lld", (long long)n);
    if (n == 0) return IG_OK;
    CHECK(gate && up && out, "silu_mul: NULL pointer");
    return be->iface->silu_mul(be, gate, up, n, out, err);
}

ig_status ig_be_add(ig_be *be, float *y, const float *x, int64_t n, ig_error *err) {
    CHECK(n >= 0, "add: n=%lld", (long long)n);
    if (n == 0) return IG_OK;
    CHECK(y && x, "add: NULL pointer");
    return be->iface->add(be, y, x, n, err);
}

ig_status ig_be_softmax(ig_be *be, float *x, int64_t rows, int64_t n, ig_error *err) {
    CHECK(rows >= 0 && n > 0, "softmax: rows=%lld n=%lld", (long long)rows, (long long)n);
    if (rows == 0) return IG_OK;
    CHECK(x, "softmax: NULL x");
    return be->iface->softmax(be, x, rows, n, err);
}

ig_status ig_be_partial_scores(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                               int64_t keys_stride, int kc, int64_t n, const float *q, int64_t ldq,
                               int64_t q_stride, int nq, float *out, int64_t ldo,
                               int64_t out_stride, float *col_max, int64_t cm_stride,
                               float *row_max, int tables, ig_error *err) {
    CHECK(kt == IG_DTYPE_F32 || kt == IG_DTYPE_F16, "partial_scores: keys of type %s",
          ig_dtype_name(kt));
    CHECK(tables >= 0 && n >= 0 && kc >= 0 && nq >= 1 && nq <= 16,
          "partial_scores: tables=%d n=%lld kc=%d nq=%d (1 to 16)", tables, (long long)n, kc, nq);
    CHECK(ld >= n && ldq >= kc && ldo >= n, "partial_scores: ld=%lld ldq=%lld ldo=%lld",
          (long long)ld, (long long)ldq, (long long)ldo);
    /* a stride matters only between tables: one table may give any */
    CHECK(!col_max || tables <= 1 || cm_stride >= n, "partial_scores: cm_stride=%lld < n=%lld",
          (long long)cm_stride, (long long)n);
    if (tables == 0) return IG_OK;
    CHECK(keys && q && out && row_max, "partial_scores: NULL keys, q, out or row_max");
    return be->iface->partial_scores(be, keys, kt, ld, keys_stride, kc, n, q, ldq, q_stride, nq,
                                     out, ldo, out_stride, col_max, cm_stride, row_max, tables,
                                     err);
}

ig_status ig_be_partial_scores_tab(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                                   const int64_t *tab, int kc_max, int64_t n_max, const float *q,
                                   int64_t ldq, int64_t q_stride, int nq, float *out, int64_t ldo,
                                   int64_t out_stride, float *col_max, int64_t cm_stride,
                                   float *row_max, int tables, ig_error *err) {
    CHECK(kt == IG_DTYPE_F32 || kt == IG_DTYPE_F16, "partial_scores_tab: keys of type %s",
          ig_dtype_name(kt));
    CHECK(tables >= 0 && n_max >= 0 && kc_max >= 0 && kc_max <= 512 && nq >= 1 && nq <= 16,
          "partial_scores_tab: tables=%d n_max=%lld kc_max=%d (0 to 512) nq=%d (1 to 16)", tables,
          (long long)n_max, kc_max, nq);
    CHECK(ld >= n_max && ldq >= kc_max && ldo >= n_max,
          "partial_scores_tab: ld=%lld ldq=%lld ldo=%lld", (long long)ld, (long long)ldq,
          (long long)ldo);
    CHECK(!col_max || tables <= 1 || cm_stride >= n_max,
          "partial_scores_tab: cm_stride=%lld < n_max=%lld", (long long)cm_stride,
          (long long)n_max);
    if (tables == 0) return IG_OK;
    CHECK(keys && tab && q && out && row_max,
          "partial_scores_tab: NULL keys, tab, q, out or row_max");
    return be->iface->partial_scores_tab(be, keys, kt, ld, tab, kc_max, n_max, q, ldq, q_stride, nq,
                                         out, ldo, out_stride, col_max, cm_stride, row_max, tables,
                                         err);
}

ig_status ig_be_mask_scores(ig_be *be, float *x, int64_t ldx, int rows, int64_t x_stride,
                            float *col_max, int64_t cm_stride, float *row_max, const int32_t *key,
                            int64_t key_stride, const int64_t *tab, int64_t n_max, int tables,
                            ig_error *err) {
    CHECK(tables >= 0 && rows >= 1 && n_max >= 0 && ldx >= n_max && key_stride >= n_max,
          "mask_scores: tables=%d rows=%d n_max=%lld ldx=%lld key_stride=%lld", tables, rows,
          (long long)n_max, (long long)ldx, (long long)key_stride);
    CHECK(tables <= 1 || (x_stride >= (int64_t)rows * ldx && (!col_max || cm_stride >= n_max)),
          "mask_scores: x_stride=%lld cm_stride=%lld overlap", (long long)x_stride,
          (long long)cm_stride);
    if (tables == 0) return IG_OK;
    CHECK(x && row_max && key && tab, "mask_scores: NULL x, row_max, key or tab");
    return be->iface->mask_scores(be, x, ldx, rows, x_stride, col_max, cm_stride, row_max, key,
                                  key_stride, tab, n_max, tables, err);
}

ig_status ig_be_relu(ig_be *be, float *x, int64_t n, ig_error *err) {
    CHECK(n >= 0, "relu: n=%lld", (long long)n);
    if (n == 0) return IG_OK;
    CHECK(x, "relu: NULL x");
    return be->iface->relu(be, x, n, err);
}

ig_status ig_be_count_greater(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                              const int32_t *n_rows, const float *thr_base, float thr_add,
                              int32_t *counts, ig_error *err) {
    CHECK(rows >= 0 && n >= 0 && ldx >= n && n <= INT32_MAX,
          "count_greater: rows=%d n=%lld ldx=%lld", rows, (long long)n, (long long)ldx);
    if (rows == 0) return IG_OK;
    CHECK(x && counts, "count_greater: NULL x or counts");
    return be->iface->count_greater(be, x, ldx, rows, n, n_rows, thr_base, thr_add, counts, err);
}

ig_status ig_be_topk(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                     const int32_t *n_rows, int64_t k, const int32_t *k_rows, int32_t *idx,
                     int64_t ld_idx, int32_t *counts, ig_error *err) {
    CHECK(rows >= 0 && n >= 0 && ldx >= n && n <= INT32_MAX && ld_idx >= 0,
          "topk: rows=%d n=%lld ldx=%lld ld_idx=%lld", rows, (long long)n, (long long)ldx,
          (long long)ld_idx);
    CHECK(k_rows || ld_idx >= (k < n ? k : n), "topk: ld_idx=%lld < k=%lld", (long long)ld_idx,
          (long long)k);
    if (rows == 0) return IG_OK;
    CHECK(x && idx && counts, "topk: NULL x, idx or counts");
    return be->iface->topk(be, x, ldx, rows, n, n_rows, k, k_rows, idx, ld_idx, counts, err);
}

#ifndef IG_HAVE_CUDA
ig_status ig_be_cuda_create(int device, ig_be **out, ig_error *err) {
    (void)device;
    *out = NULL;
    return ig_error_set(err, IG_ERR_UNSUPPORTED, "the CUDA backend is not compiled in");
}
ig_status ig_be_cuda_create_sized(int device, const ig_be_sizing *z, ig_be **out, ig_error *err) {
    *out = NULL;
    IG_TRY(ig_be_sizing_check(z, err));
    return ig_be_cuda_create(device, out, err);
}
#endif

ig_status ig_be_sizing_check(const ig_be_sizing *z, ig_error *err) {
    int wt_ok = z->weight_type == IG_DTYPE_F32 || z->weight_type == IG_DTYPE_F16 ||
                z->weight_type == IG_DTYPE_BF16;
    if (!wt_ok || z->max_rows < 1 || z->max_cols < 1)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "backend sizing: %lld rows x %lld columns of %s (f32, f16 or bf16 "
                            "weights, at least one row and column)",
                            (long long)z->max_rows, (long long)z->max_cols,
                            ig_dtype_name(z->weight_type));
    return IG_OK;
}

ig_status ig_be_copy2d(ig_be *be, void *dst, size_t dpitch, const void *src, size_t spitch,
                       size_t width, size_t rows, ig_error *err) {
    if (width == 0 || rows == 0) return IG_OK;
    CHECK(dst && src, "copy2d: NULL pointer");
    CHECK(dpitch >= width && spitch >= width,
          "copy2d: width %zu bytes is more than a pitch (dst %zu, src %zu)", width, dpitch, spitch);
    return be->iface->copy2d(be, dst, dpitch, src, spitch, width, rows, err);
}

size_t ig_be_attention_ws(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd) {
    if (n_q <= 0 || n_ctx <= 0 || n_head <= 0 || hd <= 0) return 0;
    return be->iface->attention_ws(be, n_q, n_ctx, n_head, hd);
}

ig_status ig_be_attention(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                          const float *v, int64_t stride_tokens, int n_head, int n_kv_head, int hd,
                          float scale, float *ws, size_t ws_floats, float *out, ig_error *err) {
    CHECK(n_q >= 0 && p0 >= 0 && n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0 && hd > 0,
          "attention: n_q=%lld p0=%lld n_head=%d n_kv_head=%d hd=%d", (long long)n_q, (long long)p0,
          n_head, n_kv_head, hd);
    CHECK(stride_tokens >= p0 + n_q, "attention: stride_tokens=%lld < p0 + n_q = %lld",
          (long long)stride_tokens, (long long)(p0 + n_q));
    if (n_q == 0) return IG_OK;
    CHECK(q && k && v && out, "attention: NULL q, k, v or out");
    return be->iface->attention(be, q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale,
                                ws, ws_floats, out, err);
}

size_t ig_be_attention_colsum_ws(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd) {
    if (n_q <= 0 || n_ctx <= 0 || n_head <= 0 || hd <= 0) return 0;
    return be->iface->attention_colsum_ws(be, n_q, n_ctx, n_head, hd);
}

ig_status ig_be_attention_colsum(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                                 const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                                 int hd, float scale, float *ws, size_t ws_floats, float *colsum,
                                 int64_t colsum_stride, float *out, ig_error *err) {
    CHECK(n_q >= 0 && p0 >= 0 && n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0 && hd > 0,
          "attention_colsum: n_q=%lld p0=%lld n_head=%d n_kv_head=%d hd=%d", (long long)n_q,
          (long long)p0, n_head, n_kv_head, hd);
    CHECK(stride_tokens >= p0 + n_q && colsum_stride >= p0 + n_q,
          "attention_colsum: stride_tokens=%lld or colsum_stride=%lld < p0 + n_q = %lld",
          (long long)stride_tokens, (long long)colsum_stride, (long long)(p0 + n_q));
    if (n_q == 0) return IG_OK;
    CHECK(q && k && v && out && colsum, "attention_colsum: NULL q, k, v, colsum or out");
    return be->iface->attention_colsum(be, q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd,
                                       scale, ws, ws_floats, colsum, colsum_stride, out, err);
}

ig_status ig_be_page_bounds(ig_be *be, const float *q, int group, int hd, const float *kmin,
                            const float *kmax, const int32_t *rows, int64_t pages_stride,
                            const int32_t *src, const int32_t *n_pages, int gqa_sum, float *out,
                            int64_t ldo, int tables, ig_error *err) {
    CHECK(tables >= 0 && group > 0 && hd > 0 && pages_stride >= 0 && ldo >= 0,
          "page_bounds: tables=%d group=%d hd=%d pages_stride=%lld ldo=%lld", tables, group, hd,
          (long long)pages_stride, (long long)ldo);
    if (tables == 0) return IG_OK;
    CHECK(q && kmin && kmax && rows && src && n_pages && out,
          "page_bounds: NULL q, kmin, kmax, rows, src, n_pages or out");
    return be->iface->page_bounds(be, q, group, hd, kmin, kmax, rows, pages_stride, src, n_pages,
                                  gqa_sum, out, ldo, tables, err);
}

ig_status ig_be_embed(ig_be *be, const void *table, ig_dtype tt, int64_t rows, int64_t dim,
                      const int32_t *ids, int64_t n, float *out, ig_error *err) {
    CHECK(rows >= 0 && dim > 0 && n >= 0, "embed: rows=%lld dim=%lld n=%lld", (long long)rows,
          (long long)dim, (long long)n);
    CHECK(tt == IG_DTYPE_F32 || tt == IG_DTYPE_F16 || tt == IG_DTYPE_BF16 || ig_dtype_is_quant(tt),
          "embed: table of type %s", ig_dtype_name(tt));
    CHECK(!ig_dtype_is_quant(tt) || dim % ig_dtype_block_elems(tt) == 0,
          "embed: dim %lld is not a multiple of %s's block", (long long)dim, ig_dtype_name(tt));
    if (n == 0) return IG_OK;
    CHECK(table && ids && out, "embed: NULL table, ids or out");
    return be->iface->embed(be, table, tt, rows, dim, ids, n, out, err);
}

ig_status ig_be_gather_rows(ig_be *be, void *dst, int64_t dst_table_stride, const void *src,
                            int64_t src_table_stride, int64_t src_row_stride,
                            const int32_t *src_table, size_t row_bytes, const int32_t *idx,
                            int64_t idx_stride, const int32_t *n_sel, int tables, ig_error *err) {
    CHECK(tables >= 0 && row_bytes > 0 && dst_table_stride >= 0 && src_table_stride >= 0 &&
              src_row_stride >= 0 && idx_stride >= 0,
          "gather_rows: tables=%d row_bytes=%zu strides dst %lld src %lld/%lld idx %lld", tables,
          row_bytes, (long long)dst_table_stride, (long long)src_table_stride,
          (long long)src_row_stride, (long long)idx_stride);
    /* a table's rows fit its slot of dst (up to idx_stride of them) and do not overlap in src */
    CHECK(tables <= 65535 && dst_table_stride >= idx_stride * (int64_t)row_bytes &&
              src_row_stride >= (int64_t)row_bytes,
          "gather_rows: tables=%d (at most 65535), dst_table_stride %lld < idx_stride %lld x "
          "row_bytes %zu, or src_row_stride %lld < row_bytes",
          tables, (long long)dst_table_stride, (long long)idx_stride, row_bytes,
          (long long)src_row_stride);
    if (tables == 0) return IG_OK;
    CHECK(dst && src && idx && n_sel, "gather_rows: NULL dst, src, idx or n_sel");
    return be->iface->gather_rows(be, dst, dst_table_stride, src, src_table_stride, src_row_stride,
                                  src_table, row_bytes, idx, idx_stride, n_sel, tables, err);
}

ig_status ig_be_attention_rows(ig_be *be, const ig_be_attn_rows *a, const float *q, float *out,
                               ig_error *err) {
    CHECK(a, "attention_rows: no arguments");
    CHECK(a->batch >= 0 && a->n_head > 0 && a->n_kv_head > 0 && a->n_head % a->n_kv_head == 0 &&
              a->hd > 0 && a->n_extra >= 0,
          "attention_rows: batch=%d n_head=%d n_kv_head=%d hd=%d n_extra=%d", a->batch, a->n_head,
          a->n_kv_head, a->hd, a->n_extra);
    CHECK(a->kv_dtype == IG_DTYPE_F32 || a->kv_dtype == IG_DTYPE_F16,
          "attention_rows: rows of type %s (f32 or f16)", ig_dtype_name(a->kv_dtype));
    CHECK(a->row_stride >= a->hd && a->table_stride >= 0 && a->idx_stride >= 0,
          "attention_rows: row_stride=%lld (hd %d) table_stride=%lld idx_stride=%lld",
          (long long)a->row_stride, a->hd, (long long)a->table_stride, (long long)a->idx_stride);
    CHECK(!a->probs || a->probs_stride > 0, "attention_rows: probs_stride=%lld",
          (long long)a->probs_stride);
    if (a->batch == 0) return IG_OK;
    CHECK(a->k && a->v && a->n_sel && q && out, "attention_rows: NULL k, v, n_sel, q or out");
    CHECK(a->n_extra == 0 || (a->k_extra && a->v_extra), "attention_rows: NULL extra rows");
    return be->iface->attention_rows(be, a, q, out, err);
}

ig_status ig_be_convert(ig_be *be, const void *src, ig_dtype st, void *dst, ig_dtype dt, int64_t n,
                        ig_error *err) {
    int ok_s = st == IG_DTYPE_F32 || st == IG_DTYPE_F16 || st == IG_DTYPE_BF16;
    int ok_d = dt == IG_DTYPE_F32 || dt == IG_DTYPE_F16 || dt == IG_DTYPE_BF16;
    CHECK(ok_s && ok_d && n >= 0, "convert: %s -> %s, n=%lld (f32, f16, bf16)", ig_dtype_name(st),
          ig_dtype_name(dt), (long long)n);
    if (n == 0) return IG_OK;
    CHECK(src && dst, "convert: NULL src or dst");
    return be->iface->convert(be, src, st, dst, dt, n, err);
}

ig_status ig_be_kvq_quantize(ig_be *be, const float *x, int64_t rows, int hd, int bits, int group,
                             uint8_t *out, ig_error *err) {
    CHECK(rows >= 0 && ig_kvq_row_bytes(hd, bits, group) > 0,
          "kvq_quantize: rows=%lld hd=%d bits=%d group=%d", (long long)rows, hd, bits, group);
    if (rows == 0) return IG_OK;
    CHECK(x && out, "kvq_quantize: NULL x or out");
    return be->iface->kvq_quantize(be, x, rows, hd, bits, group, out, err);
}

ig_status ig_be_kvq_dequantize(ig_be *be, const uint8_t *in, int64_t rows, int hd, int bits,
                               int group, float *out, ig_error *err) {
    CHECK(rows >= 0 && ig_kvq_row_bytes(hd, bits, group) > 0,
          "kvq_dequantize: rows=%lld hd=%d bits=%d group=%d", (long long)rows, hd, bits, group);
    if (rows == 0) return IG_OK;
    CHECK(in && out, "kvq_dequantize: NULL in or out");
    return be->iface->kvq_dequantize(be, in, rows, hd, bits, group, out, err);
}

ig_status ig_be_fork(ig_be *be, ig_be **out, ig_error *err) {
    *out = NULL;
    return be->iface->fork(be, out, err);
}

ig_status ig_be_upload_async(ig_be *be, void *dst, const void *host_src, size_t bytes,
                             ig_error *err) {
    if (bytes == 0) return IG_OK;
    CHECK(dst && host_src, "upload_async: NULL pointer");
    return be->iface->upload_async(be, dst, host_src, bytes, err);
}

ig_status ig_be_event_new(ig_be *be, void **ev, ig_error *err) {
    *ev = NULL;
    return be->iface->event_new(be, ev, err);
}

void ig_be_event_free(ig_be *be, void *ev) {
    if (ev) be->iface->event_free(be, ev);
}

ig_status ig_be_event_record(ig_be *be, void *ev, ig_error *err) {
    CHECK(ev, "event_record: no event");
    return be->iface->event_record(be, ev, err);
}

ig_status ig_be_event_wait(ig_be *be, void *ev, ig_error *err) {
    CHECK(ev, "event_wait: no event");
    return be->iface->event_wait(be, ev, err);
}

ig_status ig_be_host_register(ig_be *be, void *p, size_t bytes, void **dev, ig_error *err) {
    *dev = NULL;
    CHECK(p && bytes > 0, "host_register: %zu bytes at %p", bytes, p);
    return be->iface->host_register(be, p, bytes, dev, err);
}

ig_status ig_be_host_unregister(ig_be *be, void *p, ig_error *err) {
    CHECK(p, "host_unregister: NULL pointer");
    return be->iface->host_unregister(be, p, err);
}
