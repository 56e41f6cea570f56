// The CUDA backend's table (kernels/backend_iface.h): each op queues the launcher of
// cuda_kernels.h / cuda_backend.h on the table's stream (the context's, or a fork's own). Buffers
// are device memory; upload and download wait for their copy, so host buffers may be reused at
// once. Host code only (no kernels here): on the CUDA emulator the same table runs the emulated
// launchers.
#include <stdlib.h>

extern "C" {
#include "kernels/backend_iface.h"
}
#include "kernels/cuda/cuda_kernels.h"

namespace {

struct cuda_ctx {
    ig_cuda_ctx *c;
    int owns_ctx;
    ig_cuda_stream_t s; // the queue: the context's stream, or a fork's own
    int owns_stream;
    void *scratch; // x rounded to f16/bf16 for narrow-weight GEMMs, grown once
    size_t scratch_bytes;
    int owns_scratch;
    ig_cuda_qscratch qs; // compressed matrices' prefill scratch (buf NULL: none)
    int owns_qs;         // ig_be_cuda_create_sized's; a fork's never
};

cuda_ctx *C(ig_be *be) {
    return static_cast<cuda_ctx *>(be->ctx);
}

ig_cuda_stream_t S(ig_be *be) {
    return C(be)->s;
}

void cu_destroy(ig_be *be) {
    cuda_ctx *c = C(be);
    ig_error err;
    (void)ig_cuda_stream_sync(c->s, &err);
    if (c->owns_stream) ig_cuda_stream_destroy(c->s);
    if (c->owns_scratch) ig_cuda_free(c->scratch);
    if (c->owns_qs) ig_cuda_free(c->qs.buf);
    if (c->owns_ctx) ig_cuda_ctx_destroy(c->c);
    free(c);
    free(be);
}

void *cu_alloc(ig_be *be, size_t bytes, ig_error *err) {
    (void)be;
    void *p = NULL;
    if (ig_cuda_malloc(&p, bytes, err) != IG_OK) return NULL;
    return p;
}

void cu_free(ig_be *be, void *p) {
    ig_error err;
    (void)ig_cuda_stream_sync(S(be), &err); // queued work may still read it
    ig_cuda_free(p);
}

ig_status cu_upload(ig_be *be, void *dst, const void *src, size_t bytes, ig_error *err) {
    IG_TRY(ig_cuda_copy_h2d_async(dst, src, bytes, S(be), err));
    return ig_cuda_stream_sync(S(be), err);
}

ig_status cu_download(ig_be *be, void *dst, const void *src, size_t bytes, ig_error *err) {
    IG_TRY(ig_cuda_copy_d2h_async(dst, src, bytes, S(be), err));
    return ig_cuda_stream_sync(S(be), err);
}

ig_status cu_upload2d(ig_be *be, void *dst, size_t dpitch, const void *src, size_t spitch,
                      size_t width, size_t rows, ig_error *err) {
    IG_TRY(ig_cuda_copy_2d_async(dst, dpitch, src, spitch, width, rows, S(be), err));
    return ig_cuda_stream_sync(S(be), err);
}

ig_status cu_sync(ig_be *be, ig_error *err) {
    return ig_cuda_stream_sync(S(be), err);
}

ig_status cu_linear(ig_be *be, const float *x, int64_t M, int64_t K, const void *W, ig_dtype wt,
                    int64_t N, const float *bias, float *y, ig_error *err) {
    cuda_ctx *c = C(be);
    if (ig_dtype_is_quant(wt)) {
        IG_TRY(ig_cuda_qlinear(c->c, S(be), x, M, K, W, wt, N, y, c->qs.buf ? &c->qs : NULL, err));
    } else if (wt == IG_DTYPE_F32) {
        IG_TRY(
            ig_cuda_gemm(c->c, S(be), x, IG_DTYPE_F32, M, K, W, wt, N, y, IG_DTYPE_F32, 0.0f, err));
    } else { // f16 / bf16 weights: x rounded to their type, f32 accumulation
        size_t need = (size_t)M * (size_t)K * 2;
        if (need > c->scratch_bytes) {
            IG_TRY(ig_cuda_stream_sync(S(be), err));
            if (c->owns_scratch) ig_cuda_free(c->scratch);
            c->scratch = NULL;
            c->scratch_bytes = 0;
            c->owns_scratch = 1;
            IG_TRY(ig_cuda_malloc(&c->scratch, need, err));
            c->scratch_bytes = need;
        }
        IG_TRY(ig_cuda_convert(x, IG_DTYPE_F32, c->scratch, wt, M * K, S(be), err));
        IG_TRY(
            ig_cuda_gemm(c->c, S(be), c->scratch, wt, M, K, W, wt, N, y, IG_DTYPE_F32, 0.0f, err));
    }
    return bias ? ig_cuda_add_bias(y, bias, M, N, S(be), err) : IG_OK;
}

// One GEMM per matrix on the stream (they queue back to back; no fork/join to save on a GPU).
ig_status cu_linear_multi(ig_be *be, const float *x, int64_t M, int64_t K, ig_dtype wt,
                          const ig_linear_part *parts, int n_parts, ig_error *err) {
    for (int i = 0; i < n_parts; i++)
        IG_TRY(cu_linear(be, x, M, K, parts[i].W, wt, parts[i].N, parts[i].bias, parts[i].y, err));
    return IG_OK;
}

ig_status cu_rmsnorm(ig_be *be, const float *x, const float *w, int64_t rows, int64_t dim,
                     float eps, float *y, ig_error *err) {
    return ig_cuda_rmsnorm(x, w, rows, dim, eps, y, S(be), err);
}

ig_status cu_layernorm(ig_be *be, const float *x, const float *w, const float *b, int64_t rows,
                       int64_t dim, float eps, float *y, ig_error *err) {
    return ig_cuda_layernorm(x, w, b, rows, dim, eps, y, S(be), err);
}

ig_status cu_rope(ig_be *be, float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                  const int32_t *pos, const float *cos_tab, const float *sin_tab, ig_error *err) {
    return ig_cuda_rope(x, n_tok, n_heads, head_dim, rot_dim, pos, cos_tab, sin_tab, S(be), err);
}

ig_status cu_silu_mul(ig_be *be, const float *gate, const float *up, int64_t n, float *out,
                      ig_error *err) {
    return ig_cuda_silu_mul(gate, up, n, out, S(be), err);
}

ig_status cu_relu(ig_be *be, float *x, int64_t n, ig_error *err) {
    return ig_cuda_relu(x, n, S(be), err);
}

ig_status cu_add(ig_be *be, float *y, const float *x, int64_t n, ig_error *err) {
    return ig_cuda_add(y, x, n, S(be), err);
}

ig_status cu_softmax(ig_be *be, float *x, int64_t rows, int64_t n, ig_error *err) {
    return ig_cuda_softmax(x, rows, n, S(be), err);
}

ig_status cu_partial_scores(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                            int64_t keys_stride, int kc, int64_t n, const float *q, int64_t ldq,
                            int64_t q_stride, int nq, float *out, int64_t ldo, int64_t out_stride,
                            float *col_max, int64_t cm_stride, float *row_max, int tables,
                            ig_error *err) {
    return ig_cuda_partial_scores(keys, kt, ld, keys_stride, kc, n, q, ldq, q_stride, nq, out, ldo,
                                  out_stride, col_max, cm_stride, row_max, tables, S(be), err);
}

ig_status cu_count_greater(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                           const int32_t *n_rows, const float *thr_base, float thr_add,
                           int32_t *counts, ig_error *err) {
    return ig_cuda_count_greater(x, ldx, rows, n, n_rows, thr_base, thr_add, counts, S(be), err);
}

ig_status cu_topk(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                  const int32_t *n_rows, int64_t k, const int32_t *k_rows, int32_t *idx,
                  int64_t ld_idx, int32_t *counts, ig_error *err) {
    return ig_cuda_topk(x, ldx, rows, n, n_rows, k, k_rows, idx, ld_idx, counts, S(be), err);
}

ig_status cu_partial_scores_tab(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                                const int64_t *tab, int kc_max, int64_t n_max, const float *q,
                                int64_t ldq, int64_t q_stride, int nq, float *out, int64_t ldo,
                                int64_t out_stride, float *col_max, int64_t cm_stride,
                                float *row_max, int tables, ig_error *err) {
    return ig_cuda_partial_scores_tab(keys, kt, ld, tab, kc_max, n_max, q, ldq, q_stride, nq, out,
                                      ldo, out_stride, col_max, cm_stride, row_max, tables, S(be),
                                      err);
}

ig_status cu_mask_scores(ig_be *be, float *x, int64_t ldx, int rows, int64_t x_stride,
                         float *col_max, int64_t cm_stride, float *row_max, const int32_t *key,
                         int64_t key_stride, const int64_t *tab, int64_t n_max, int tables,
                         ig_error *err) {
    return ig_cuda_mask_scores(x, ldx, rows, x_stride, col_max, cm_stride, row_max, key, key_stride,
                               tab, n_max, tables, S(be), err);
}

ig_status cu_copy2d(ig_be *be, void *dst, size_t dpitch, const void *src, size_t spitch,
                    size_t width, size_t rows, ig_error *err) {
    return ig_cuda_copy_2d_async(dst, dpitch, src, spitch, width, rows, S(be), err);
}

size_t cu_attention_ws(ig_be *, int64_t, int64_t, int, int) {
    return 0;
}

ig_status cu_attention(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                       const float *v, int64_t stride_tokens, int n_head, int n_kv_head, int hd,
                       float scale, float *, size_t, float *out, ig_error *err) {
    return ig_cuda_attention_prefill(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale,
                                     out, S(be), err);
}

// Each query's softmax maximum and sum, kept for the column sums.
size_t cu_attention_colsum_ws(ig_be *, int64_t n_q, int64_t, int n_head, int) {
    return 2 * (size_t)n_q * (size_t)n_head;
}

ig_status cu_attention_colsum(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                              const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                              int hd, float scale, float *ws, size_t ws_floats, float *colsum,
                              int64_t colsum_stride, float *out, ig_error *err) {
    if (!ws || ws_floats < 2 * (size_t)n_q * (size_t)n_head)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "attention_colsum: workspace of %zu floats, %lld needed", ws_floats,
                            (long long)(2 * n_q * n_head));
    return ig_cuda_attention_prefill_colsum(q, n_q, p0, k, v, stride_tokens, n_head, n_kv_head, hd,
                                            scale, ws, colsum, colsum_stride, out, S(be), err);
}

ig_status cu_page_bounds(ig_be *be, const float *q, int group, int hd, const float *kmin,
                         const float *kmax, const int32_t *rows, int64_t pages_stride,
                         const int32_t *src, const int32_t *n_pages, int gqa_sum, float *out,
                         int64_t ldo, int tables, ig_error *err) {
    return ig_cuda_page_bounds(q, group, hd, kmin, kmax, rows, pages_stride, src, n_pages, gqa_sum,
                               out, ldo, tables, S(be), err);
}

ig_status cu_embed(ig_be *be, const void *table, ig_dtype tt, int64_t rows, int64_t dim,
                   const int32_t *ids, int64_t n, float *out, ig_error *err) {
    return ig_cuda_embed(table, tt, rows, dim, ids, n, out, S(be), err);
}

ig_status cu_gather_rows(ig_be *be, void *dst, int64_t dst_table_stride, const void *src,
                         int64_t src_table_stride, int64_t src_row_stride, const int32_t *src_table,
                         size_t row_bytes, const int32_t *idx, int64_t idx_stride,
                         const int32_t *n_sel, int tables, ig_error *err) {
    return ig_cuda_gather_rows(dst, dst_table_stride, src, src_table_stride, src_row_stride,
                               src_table, row_bytes, idx, idx_stride, n_sel, tables, S(be), err);
}

ig_status cu_attention_rows(ig_be *be, const ig_be_attn_rows *a, const float *q, float *out,
                            ig_error *err) {
    return ig_cuda_attention_rows(a, q, out, S(be), err);
}

ig_status cu_convert(ig_be *be, const void *src, ig_dtype st, void *dst, ig_dtype dt, int64_t n,
                     ig_error *err) {
    return ig_cuda_convert(src, st, dst, dt, n, S(be), err);
}

ig_status cu_kvq_quantize(ig_be *be, const float *x, int64_t rows, int hd, int bits, int group,
                          uint8_t *out, ig_error *err) {
    return ig_cuda_kvq_quantize_rows(x, rows, hd, bits, group, out, S(be), err);
}

ig_status cu_kvq_dequantize(ig_be *be, const uint8_t *in, int64_t rows, int hd, int bits, int group,
                            float *out, ig_error *err) {
    return ig_cuda_kvq_dequantize_rows(in, rows, hd, bits, group, out, S(be), err);
}

ig_status new_table(cuda_ctx *c, ig_be **out, ig_error *err);

ig_status cu_fork(ig_be *be, ig_be **out, ig_error *err) {
    cuda_ctx *c = static_cast<cuda_ctx *>(calloc(1, sizeof(cuda_ctx)));
    if (!c) return ig_error_set(err, IG_ERR_NOMEM, "backend cuda: fork");
    c->c = C(be)->c;
    c->qs = C(be)->qs;
    ig_status rc = ig_cuda_stream_create(&c->s, err);
    if (rc == IG_OK) {
        c->owns_stream = 1;
        rc = new_table(c, out, err);
        if (rc != IG_OK) ig_cuda_stream_destroy(c->s);
    }
    if (rc != IG_OK) free(c);
    return rc;
}

ig_status cu_upload_async(ig_be *be, void *dst, const void *src, size_t bytes, ig_error *err) {
    return ig_cuda_copy_h2d_async(dst, src, bytes, S(be), err);
}

ig_status cu_event_new(ig_be *, void **ev, ig_error *err) {
    ig_cuda_event_t e = NULL;
    IG_TRY(ig_cuda_event_create(&e, 0, err));
    *ev = e;
    return IG_OK;
}

void cu_event_free(ig_be *, void *ev) {
    ig_cuda_event_destroy(static_cast<ig_cuda_event_t>(ev));
}

ig_status cu_event_record(ig_be *be, void *ev, ig_error *err) {
    return ig_cuda_event_record(static_cast<ig_cuda_event_t>(ev), S(be), err);
}

ig_status cu_event_wait(ig_be *be, void *ev, ig_error *err) {
    return ig_cuda_stream_wait_event(S(be), static_cast<ig_cuda_event_t>(ev), err);
}

ig_status cu_host_register(ig_be *, void *p, size_t bytes, void **dev, ig_error *err) {
    IG_TRY(ig_cuda_host_register(p, bytes, 1, err));
    ig_status rc = ig_cuda_host_device_ptr(dev, p, err);
    if (rc != IG_OK) {
        ig_error e2;
        (void)ig_cuda_host_unregister(p, &e2);
        *dev = NULL;
    }
    return rc;
}

ig_status cu_host_unregister(ig_be *, void *p, ig_error *err) {
    return ig_cuda_host_unregister(p, err);
}

const ig_be_iface g_cuda_iface = {
    IG_BE_IFACE_VERSION,
    cu_destroy,
    cu_alloc,
    cu_free,
    cu_upload,
    cu_download,
    cu_upload2d,
    cu_sync,
    cu_linear,
    cu_rmsnorm,
    cu_layernorm,
    cu_rope,
    cu_silu_mul,
    cu_add,
    cu_softmax,
    cu_partial_scores,
    cu_count_greater,
    cu_topk,
    cu_partial_scores_tab,
    cu_mask_scores,
    cu_relu,
    cu_copy2d,
    cu_attention_ws,
    cu_attention,
    cu_gather_rows,
    cu_attention_rows,
    cu_convert,
    cu_kvq_quantize,
    cu_kvq_dequantize,
    cu_fork,
    cu_upload_async,
    cu_event_new,
    cu_event_free,
    cu_event_record,
    cu_event_wait,
    cu_host_register,
    cu_host_unregister,
    cu_attention_colsum_ws,
    cu_attention_colsum,
    cu_page_bounds,
    cu_embed,
    cu_linear_multi,
};

// A table over c (its fields set by the caller; ig_be_free frees c with it, the caller frees c
// when this fails).
ig_status new_table(cuda_ctx *c, ig_be **out, ig_error *err) {
    ig_be *be = static_cast<ig_be *>(calloc(1, sizeof *be));
    if (!be) return ig_error_set(err, IG_ERR_NOMEM, "backend cuda");
    be->iface = &g_cuda_iface;
    be->ctx = c;
    be->caps.name = "cuda";
    be->caps.device_memory = 1;
    be->caps.async = 1;
    be->caps.reference = 0;
    *out = be;
    return IG_OK;
}

} // namespace

extern "C" ig_status ig_be_cuda_create(int device, ig_be **out, ig_error *err) {
    *out = NULL;
    IG_TRY(ig_be_iface_check(&g_cuda_iface, "cuda", err));
    char why[256];
    if (ig_cuda_probe(NULL, why, sizeof why) <= 0)
        return ig_error_set(err, IG_ERR_DEVICE, "the CUDA backend has no GPU: %s", why);
    cuda_ctx *c = static_cast<cuda_ctx *>(calloc(1, sizeof *c));
    if (!c) return ig_error_set(err, IG_ERR_NOMEM, "backend cuda");
    ig_status rc = ig_cuda_ctx_create(device, &c->c, err);
    if (rc == IG_OK) {
        c->owns_ctx = 1;
        c->s = ig_cuda_ctx_stream(c->c);
        rc = new_table(c, out, err);
        if (rc != IG_OK) ig_cuda_ctx_destroy(c->c);
    }
    if (rc != IG_OK) free(c);
    return rc;
}

extern "C" ig_status ig_be_cuda_create_sized(int device, const ig_be_sizing *z, ig_be **out,
                                             ig_error *err) {
    *out = NULL;
    IG_TRY(ig_be_sizing_check(z, err));
    IG_TRY(ig_be_cuda_create(device, out, err));
    cuda_ctx *c = C(*out);
    ig_status rc = IG_OK;
    if (z->weight_type != IG_DTYPE_F32) { /* x rounded to the weights' type */
        size_t bytes = (size_t)z->max_rows * (size_t)z->max_cols * ig_dtype_size(z->weight_type);
        rc = ig_cuda_malloc(&c->scratch, bytes, err);
        if (rc == IG_OK) {
            c->scratch_bytes = bytes;
            c->owns_scratch = 1;
        }
    }
    if (rc == IG_OK && z->compressed) { /* dequantized chunks of up to max_cols rows of W */
        int64_t chunk = (z->max_cols + 63) / 64 * 64;
        c->qs.gemm_type = z->weight_type == IG_DTYPE_F32 ? IG_DTYPE_F32 : IG_DTYPE_F16;
        c->qs.bytes =
            ig_cuda_qlinear_scratch_bytes(z->max_rows, z->max_cols, chunk, c->qs.gemm_type);
        rc = ig_cuda_malloc(&c->qs.buf, c->qs.bytes, err);
        if (rc == IG_OK) c->owns_qs = 1;
    }
    if (rc != IG_OK) {
        ig_be_free(*out);
        *out = NULL;
    }
    return rc;
}
