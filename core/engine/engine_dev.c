/* The forward pass on a device backend (a backend table whose buffers are device memory, today
 * the "cuda" table), behind the engine interface (engine.h). Table ops only: no CUDA header, no
 * call into a backend's own API but its constructor (dev_table below, one line per backend). The
 * layer is core/engine/layer.c's, run on the table over this engine's buffers and uploaded
 * weights; this file keeps the device state, the upload, the loop over layers and the logits. It
 * knows nothing of KV policies.
 *
 * Weights are uploaded once at create as f16 (bf16 models stay bf16; f32 with cuda_f32_weights),
 * converted on the device (the table's convert); norms and biases stay f32. Block-quantized
 * matrices (q4g64, q8g64, GGUF's Q4_0/Q4_1/Q8_0 kept with --dtype stored) stay compressed on the
 * device and the table's linear reads them as they are (on cuda: a GEMV that dequantizes in
 * registers for decode; dequantized chunks and a GEMM for prefill). Activations are f32 on the
 * device; linear layers over f16/bf16 weights round their input rows to the weight type (on cuda:
 * tensor cores, f32 accumulation). Without a policy the KV cache is on the device,
 * [layer][slot][kv_head][max_ctx][head_dim] f32 as on the CPU. With a policy the layer's policy
 * steps (engine_kv.c) run over this engine's table: the KV home stays in host memory, registered
 * with the table, the policy's hooks read host copies of their rows, and decode attention runs on
 * the device over the selected rows gathered from the home on a copy queue (kv_device.c), or on
 * the CPU over the home (kv_access cpu, FlexGen's cpu_cache_compute). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/engine/engine_internal.h"

struct ig_dev_engine {
    ig_be *be;   /* the device table: the layers' ops, the policy path's too */
    ig_dtype wt; /* uncompressed weights on the device: f16 (bf16 models: bf16; or f32) */
    int n_layer;
    ig_layer *views; /* [n_layer]: the uploaded layers (device pointers), what the layer reads */
    ig_weight lm_head;
    float *final_w, *final_b;
    /* activations [max_batch_tokens][...] */
    float *x, *h, *q, *k, *v, *att, *f1, *f2, *hidden;
    int32_t *pos;
    float *rope_cos, *rope_sin;
    /* plain path: the KV cache */
    float *kc, *vc;
    /* logits in chunks of logit_rows rows */
    float *logits, *lrows;
    int64_t logit_rows;
};

/* ---- helpers ------------------------------------------------------------------------------- */

static ig_status dalloc(ig_dev_engine *c, void **p, size_t n, ig_error *err) {
    *p = ig_be_alloc(c->be, n ? n : 16, err);
    return *p ? IG_OK : (err->code ? err->code : IG_ERR_NOMEM);
}

static ig_status alloc_f(ig_dev_engine *c, float **p, size_t n, ig_error *err) {
    return dalloc(c, (void **)p, n * sizeof(float), err);
}

static ig_status upload_f32(ig_dev_engine *c, float **d, const float *h, size_t n, ig_error *err) {
    *d = NULL;
    if (!h) return IG_OK;
    IG_TRY(alloc_f(c, d, n, err));
    return ig_be_upload(c->be, *d, h, n * sizeof(float), err);
}

/* A layer's vector (norm, bias) into its view's slot (NULL where the model has none). */
static ig_status upload_vec(ig_dev_engine *c, const float **d, const float *h, size_t n,
                            ig_error *err) {
    float *p = NULL;
    ig_status rc = upload_f32(c, &p, h, n, err);
    *d = p; /* also on failure: ig_dev_free releases it */
    return rc;
}

/* Uploads a matrix in the device weight type: block-quantized and matching ones as they are, the
 * others through a device staging buffer converted by the table. */
static ig_status upload_w(ig_dev_engine *c, ig_weight *dw, const ig_weight *w, void *stage,
                          size_t stage_bytes, ig_error *err) {
    *dw = (ig_weight){NULL, c->wt, w->rows, w->cols};
    if (!w->data) return IG_OK;
    if (ig_dtype_is_quant(w->dtype)) { /* kept compressed: its bytes as they are */
        size_t bytes = (size_t)w->rows * ig_dtype_row_bytes(w->dtype, w->cols);
        dw->dtype = w->dtype;
        IG_TRY(dalloc(c, (void **)&dw->data, bytes, err));
        return ig_be_upload(c->be, (void *)dw->data, w->data, bytes, err);
    }
    size_t n = (size_t)w->rows * (size_t)w->cols, es = ig_dtype_size(c->wt);
    IG_TRY(dalloc(c, (void **)&dw->data, n * es, err));
    if (w->dtype == c->wt) return ig_be_upload(c->be, (void *)dw->data, w->data, n * es, err);
    if (w->dtype != IG_DTYPE_F32 && w->dtype != IG_DTYPE_F16 && w->dtype != IG_DTYPE_BF16)
        return ig_error_set(err, IG_ERR_UNSUPPORTED, "weights of type %s", ig_dtype_name(w->dtype));
    size_t in_es = ig_dtype_size(w->dtype), chunk = stage_bytes / in_es;
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        /* the upload waits for the previous convert (the table's upload is ordered after the
         * queue's work), so the staging buffer is reused safely */
        IG_TRY(ig_be_upload(c->be, stage, (const char *)w->data + off * in_es, m * in_es, err));
        IG_TRY(ig_be_convert(c->be, stage, w->dtype, (char *)dw->data + off * es, c->wt, (int64_t)m,
                             err));
    }
    return ig_be_sync(c->be, err);
}

static void release(ig_dev_engine *c, const void *p) {
    if (p) ig_be_release(c->be, (void *)p);
}

void ig_dev_free(ig_dev_engine *c) {
    if (!c) return;
    if (c->be) {
        ig_error err;
        (void)ig_be_sync(c->be, &err);
        for (int l = 0; c->views && l < c->n_layer; l++) {
            const ig_layer *L = &c->views[l];
            const void *v[] = {L->attn_norm_w, L->attn_norm_b, L->ffn_norm_w,  L->ffn_norm_b,
                               L->bq,          L->bk,          L->bv,          L->bo,
                               L->b_up,        L->b_down,      L->wq.data,     L->wk.data,
                               L->wv.data,     L->wo.data,     L->w_gate.data, L->w_up.data,
                               L->w_down.data};
            for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) release(c, v[i]);
        }
        const void *dev[] = {c->lm_head.data,
                             c->final_w,
                             c->final_b,
                             c->x,
                             c->h,
                             c->q,
                             c->k,
                             c->v,
                             c->att,
                             c->f1,
                             c->f2,
                             c->hidden,
                             c->pos,
                             c->rope_cos,
                             c->rope_sin,
                             c->kc,
                             c->vc,
                             c->logits,
                             c->lrows};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) release(c, dev[i]);
        ig_be_free(c->be);
    }
    free(c->views);
    free(c);
}

/* The device table of the engine's backend, its linear's scratch sized for the engine's calls.
 * Adding a device backend: one case here (and its table, kernels/). */
static ig_status dev_table(const ig_engine *e, ig_dtype wt, ig_be **out, ig_error *err) {
    const ig_model_config *cf = &e->cfg;
    int64_t qd = (int64_t)cf->n_head * cf->head_dim, wide = cf->d_model > qd ? cf->d_model : qd;
    if (cf->d_ffn > wide) wide = cf->d_ffn;
    ig_be_sizing z = {e->opts.max_batch_tokens, wide, wt,
                      ig_dtype_is_quant(ig_model_dtype(e->model)) ||
                          ig_dtype_is_quant(ig_model_lm_head(e->model).dtype)};
    switch (e->opts.backend) {
    case IG_BACKEND_CUDA:
        return ig_be_cuda_create_sized(0, &z, out, err);
    default:
        return ig_error_set(err, IG_ERR_INVALID_ARG, "no device backend of kind %d",
                            (int)e->opts.backend);
    }
}

static ig_status create(ig_engine *e, ig_dev_engine *c, ig_error *err) {
    const ig_model_config *cf = &e->cfg;
    const ig_engine_opts *o = &e->opts;
    ig_weight te = ig_model_tok_embd(e->model);
    c->wt = o->cuda_f32_weights         ? IG_DTYPE_F32
            : te.dtype == IG_DTYPE_BF16 ? IG_DTYPE_BF16
                                        : IG_DTYPE_F16;
    IG_TRY(dev_table(e, c->wt, &c->be, err));
    if (!c->be->caps.device_memory)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "the %s table has no device memory",
                            c->be->caps.name);
    size_t stage_bytes = (size_t)64 << 20;
    void *stage = NULL;
    IG_TRY(dalloc(c, &stage, stage_bytes, err));
    ig_status rc = IG_OK;
    c->n_layer = cf->n_layer;
    c->views = ig_calloc((size_t)cf->n_layer, sizeof *c->views, err);
    if (!c->views) rc = IG_ERR_NOMEM;
    for (int l = 0; l < cf->n_layer && rc == IG_OK; l++) {
        const ig_layer *L = ig_model_layer(e->model, l);
        ig_layer *D = &c->views[l];
        size_t d = (size_t)cf->d_model, f = (size_t)cf->d_ffn;
        size_t qd = (size_t)cf->n_head * (size_t)cf->head_dim;
        size_t kvd = (size_t)cf->n_kv_head * (size_t)cf->head_dim;
        const ig_weight *hw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        ig_weight *dw[] = {&D->wq, &D->wk, &D->wv, &D->wo, &D->w_gate, &D->w_up, &D->w_down};
        for (size_t i = 0; i < 7 && rc == IG_OK; i++)
            rc = upload_w(c, dw[i], hw[i], stage, stage_bytes, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->attn_norm_w, L->attn_norm_w, d, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->attn_norm_b, L->attn_norm_b, d, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->ffn_norm_w, L->ffn_norm_w, d, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->ffn_norm_b, L->ffn_norm_b, d, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->bq, L->bq, qd, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->bk, L->bk, kvd, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->bv, L->bv, kvd, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->bo, L->bo, d, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->b_up, L->b_up, f, err);
        if (rc == IG_OK) rc = upload_vec(c, &D->b_down, L->b_down, d, err);
    }
    if (rc == IG_OK) {
        ig_weight lm = ig_model_lm_head(e->model);
        rc = upload_w(c, &c->lm_head, &lm, stage, stage_bytes, err);
    }
    if (rc == IG_OK)
        rc = upload_f32(c, &c->final_w, ig_model_final_norm_w(e->model), (size_t)cf->d_model, err);
    if (rc == IG_OK)
        rc = upload_f32(c, &c->final_b, ig_model_final_norm_b(e->model), (size_t)cf->d_model, err);
    ig_error serr;
    if (ig_be_sync(c->be, &serr) == IG_OK) ig_be_release(c->be, stage);
    IG_TRY(rc);

    size_t T = (size_t)o->max_batch_tokens, d = (size_t)cf->d_model, f = (size_t)cf->d_ffn;
    size_t qd = (size_t)cf->n_head * (size_t)cf->head_dim;
    size_t kvd = (size_t)cf->n_kv_head * (size_t)cf->head_dim;
    IG_TRY(alloc_f(c, &c->x, T * d, err));
    IG_TRY(alloc_f(c, &c->h, T * d, err));
    IG_TRY(alloc_f(c, &c->hidden, T * d, err));
    IG_TRY(alloc_f(c, &c->q, T * qd, err));
    IG_TRY(alloc_f(c, &c->k, T * kvd, err));
    IG_TRY(alloc_f(c, &c->v, T * kvd, err));
    IG_TRY(alloc_f(c, &c->att, T * qd, err));
    IG_TRY(alloc_f(c, &c->f1, T * f, err));
    IG_TRY(alloc_f(c, &c->f2, T * f, err));
    IG_TRY(dalloc(c, (void **)&c->pos, T * sizeof(int32_t), err));
    c->logit_rows = T < 256 ? (int64_t)T : 256;
    IG_TRY(alloc_f(c, &c->logits, (size_t)c->logit_rows * (size_t)cf->vocab, err));
    IG_TRY(alloc_f(c, &c->lrows, (size_t)c->logit_rows * d, err));
    if (cf->arch == IG_ARCH_LLAMA) {
        size_t half = (size_t)cf->rot_dim / 2 * (size_t)o->max_ctx;
        IG_TRY(upload_f32(c, &c->rope_cos, e->rope_cos, half, err));
        IG_TRY(upload_f32(c, &c->rope_sin, e->rope_sin, half, err));
    }
    if (!o->policy) {
        size_t n = e->slot_floats * (size_t)o->max_seqs * (size_t)cf->n_layer;
        rc = alloc_f(c, &c->kc, n, err);
        if (rc == IG_OK) rc = alloc_f(c, &c->vc, n, err);
        if (rc != IG_OK) {
            ig_error_prefix(err, "device KV cache (%zu MiB): ", 2 * n * sizeof(float) >> 20);
            return rc;
        }
    }
    return ig_be_sync(c->be, err);
}

ig_status ig_dev_create(ig_engine *e, ig_error *err) {
    ig_dev_engine *c = ig_calloc(1, sizeof *c, err);
    if (!c) return IG_ERR_NOMEM;
    e->dev = c;
    double t0 = ig_time_s();
    ig_status rc = create(e, c, err);
    if (rc != IG_OK) {
        ig_error_prefix(err, "%s engine: ", e->opts.backend == IG_BACKEND_CUDA ? "CUDA" : "device");
        return rc; /* the caller frees e (and e->dev) */
    }
    e->layer_be = c->be; /* the layers' table, the policy path's too */
    e->layer_views = c->views;
    IG_INFO("%s engine: weights uploaded as %s in %.2f s",
            e->opts.backend == IG_BACKEND_CUDA ? "CUDA" : "device", ig_dtype_name(c->wt),
            ig_time_s() - t0);
    return IG_OK;
}

ig_status ig_dev_forward(ig_engine *e, int gb, ig_error *err) {
    ig_dev_engine *c = e->dev;
    const ig_model_config *cf = &e->cfg;
    size_t d = (size_t)cf->d_model, T = (size_t)e->n_rows;
    int n_seqs = e->n_cur, n_gb = (n_seqs + gb - 1) / gb;
    size_t layer_floats = e->slot_floats * (size_t)e->opts.max_seqs;
    ig_layer_bufs bufs = {.be = c->be,
                          .x = c->x,
                          .h = c->h,
                          .q = c->q,
                          .k = c->k,
                          .v = c->v,
                          .att = c->att,
                          .f1 = c->f1,
                          .f2 = c->f2,
                          .pos = c->pos,
                          .rope_cos = c->rope_cos,
                          .rope_sin = c->rope_sin};
    IG_TRY(ig_be_upload(c->be, c->x, e->x, T * d * sizeof(float), err));
    IG_TRY(ig_be_upload(c->be, c->pos, e->pos, T * sizeof(int32_t), err));
    for (int l = 0; l < cf->n_layer; l++) {
        if (c->kc) {
            bufs.kc = c->kc + (size_t)l * layer_floats;
            bufs.vc = c->vc + (size_t)l * layer_floats;
        }
        for (int b = 0; b < n_gb; b++) {
            int s0 = b * gb, s1 = s0 + gb < n_seqs ? s0 + gb : n_seqs;
            e->bs0 = s0;
            e->bs1 = s1;
            e->br0 = e->row0[s0];
            e->br1 = e->row0[s1 - 1] + e->cur[s1 - 1].n_tokens;
            if (e->kv) ig_kv_gpu_batch(e, b);
            IG_TRY(ig_engine_layer_forward(e, l, &c->views[l], &bufs, err));
            e->stats.gpu_batches++;
        }
    }
    IG_TRY(ig_engine_norm(e, c->be, c->x, c->final_w, c->final_b, (int64_t)T, c->hidden, err));
    return ig_be_sync(c->be, err);
}

ig_status ig_dev_logits(ig_engine *e, const int64_t *rows, int64_t row0, int64_t n, float *out,
                        ig_error *err) {
    ig_dev_engine *c = e->dev;
    size_t d = (size_t)e->cfg.d_model, V = (size_t)e->cfg.vocab;
    for (int64_t i0 = 0; i0 < n; i0 += c->logit_rows) {
        int64_t m = n - i0 < c->logit_rows ? n - i0 : c->logit_rows;
        const float *src = c->hidden + (size_t)(row0 + i0) * d;
        if (rows) {
            for (int64_t i = 0; i < m; i++)
                IG_TRY(ig_be_copy2d(c->be, c->lrows + (size_t)i * d, d * sizeof(float),
                                    c->hidden + (size_t)rows[i0 + i] * d, d * sizeof(float),
                                    d * sizeof(float), 1, err));
            src = c->lrows;
        }
        IG_TRY(ig_be_linear(c->be, src, m, c->lm_head.cols, c->lm_head.data, c->lm_head.dtype,
                            c->lm_head.rows, NULL, c->logits, err));
        IG_TRY(ig_be_download(c->be, out + (size_t)i0 * V, c->logits, (size_t)m * V * sizeof(float),
                              err));
    }
    return IG_OK;
}
