/* The forward pass on the CUDA backend, behind the engine interface (engine.h). C11 over the host
 * API of kernels/cuda/cuda_backend.h and the launchers of cuda_kernels.h; no CUDA header. The layer
 * is core/engine/layer.c's, run on the "cuda" backend table over this engine's context, stream,
 * buffers and uploaded weights (ig_be_cuda_wrap); this file keeps the device state, the upload,
 * the loop over layers and the logits. It knows nothing of KV policies.
 *
 * Weights are uploaded once at create as f16 (bf16 models stay bf16), converted on the device;
 * norms and biases stay f32. Block-quantized matrices (q4g64, q8g64, GGUF's Q4_0/Q4_1/Q8_0 kept
 * with --dtype stored) stay compressed on the device and run through ig_cuda_qlinear (a GEMV that
 * dequantizes in registers for decode; dequantized chunks and a GEMM for prefill). Activations are
 * f32 on the device; each other linear layer converts its input rows to the weight type and runs
 * ig_cuda_gemm (tensor cores, f32 accumulation). Without a policy the KV cache is on the device,
 * [layer][slot][kv_head][max_ctx][head_dim] f32 as on the CPU. With a policy the layer's policy
 * steps (engine_kv.c) run over this engine's table: the KV home stays in host memory, registered
 * with the table, the policy's hooks read host copies of their rows, and decode attention runs on
 * the GPU over the selected rows gathered from the home on a copy queue (kv_device.c), or on the
 * CPU over the home (kv_access cpu, FlexGen's cpu_cache_compute). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine_internal.h"
#include "core/base/log.h"

#ifndef IG_HAVE_CUDA

static ig_status no_cuda(ig_error *err) {
    return ig_error_set(err, IG_ERR_UNSUPPORTED, "this build has no CUDA backend (IG_CUDA=OFF)");
}
ig_status ig_cu_create(ig_engine *e, ig_error *err) {
    (void)e;
    return no_cuda(err);
}
void ig_cu_free(ig_cu_engine *c) {
    (void)c;
}
ig_status ig_cu_forward(ig_engine *e, int gpu_batch_seqs, ig_error *err) {
    (void)e;
    (void)gpu_batch_seqs;
    return no_cuda(err);
}
ig_status ig_cu_logits(ig_engine *e, const int64_t *rows, int64_t row0, int64_t n, float *out,
                       ig_error *err) {
    (void)e;
    (void)rows;
    (void)row0;
    (void)n;
    (void)out;
    return no_cuda(err);
}
#else

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_iface.h"
#include "kernels/cuda/cuda_kernels.h"

typedef struct cu_weight {
    void *d;    /* [rows][cols] of t */
    ig_dtype t; /* cu->wt, or a block-quantized type kept compressed (ig_cuda_qlinear) */
    int64_t rows, cols;
} cu_weight;

typedef struct cu_layer {
    float *attn_norm_w, *attn_norm_b, *ffn_norm_w, *ffn_norm_b;
    float *bq, *bk, *bv, *bo, *b_up, *b_down;
    cu_weight wq, wk, wv, wo, w_gate, w_up, w_down;
} cu_layer;

struct ig_cu_engine {
    ig_cuda_ctx *ctx;
    ig_cuda_stream_t cs; /* compute: be's queue */
    ig_dtype wt;         /* weights on the device: f16 (bf16 models: bf16) */
    ig_cuda_qscratch qs; /* prefill scratch of the compressed matrices (none: qs.buf NULL) */
    cu_layer *layers;
    ig_layer *views; /* [n_layer]: layers as ig_layer (device pointers), what the layer reads */
    ig_be *be;       /* the "cuda" table over ctx, its stream and scratch: the layer's ops */
    cu_weight lm_head;
    float *final_w, *final_b;
    /* activations [max_batch_tokens][...] */
    float *x, *h, *q, *k, *v, *att, *f1, *f2, *hidden;
    void *xh; /* GEMM input in the weight type, [T][max(d, qd, f)] */
    int32_t *pos;
    float *rope_cos, *rope_sin;
    /* plain path: the KV cache */
    float *kc, *vc;
    /* logits in chunks of logit_rows rows */
    float *logits, *lrows;
    int64_t logit_rows;
};

/* ---- helpers ------------------------------------------------------------------------------- */

static ig_status dalloc(void **p, size_t n, ig_error *err) {
    *p = NULL;
    return ig_cuda_malloc(p, n ? n : 16, err);
}

static ig_status upload_f32(float **d, const float *h, size_t n, ig_cu_engine *c, ig_error *err) {
    *d = NULL;
    if (!h) return IG_OK;
    IG_TRY(dalloc((void **)d, n * sizeof(float), err));
    IG_TRY(ig_cuda_copy_h2d_async(*d, h, n * sizeof(float), c->cs, err));
    return ig_cuda_stream_sync(c->cs, err);
}

/* Uploads a matrix in the device weight type: f16 / bf16 as they are when they match, f32 through
 * a device staging buffer converted by ig_cuda_convert. */
static ig_status upload_w(cu_weight *dw, const ig_weight *w, ig_cu_engine *c, float *stage,
                          size_t stage_floats, ig_error *err) {
    dw->d = NULL;
    dw->t = c->wt;
    dw->rows = w->rows;
    dw->cols = w->cols;
    if (!w->data) return IG_OK;
    if (ig_dtype_is_quant(w->dtype)) { /* kept compressed: its bytes as they are */
        size_t bytes = (size_t)w->rows * ig_dtype_row_bytes(w->dtype, w->cols);
        dw->t = w->dtype;
        IG_TRY(dalloc(&dw->d, bytes, err));
        IG_TRY(ig_cuda_copy_h2d_async(dw->d, w->data, bytes, c->cs, err));
        return ig_cuda_stream_sync(c->cs, err);
    }
    size_t n = (size_t)w->rows * (size_t)w->cols, es = ig_dtype_size(c->wt);
    IG_TRY(dalloc(&dw->d, n * es, err));
    if (w->dtype == c->wt) {
        IG_TRY(ig_cuda_copy_h2d_async(dw->d, w->data, n * es, c->cs, err));
        return ig_cuda_stream_sync(c->cs, err);
    }
    if (w->dtype != IG_DTYPE_F32 && w->dtype != IG_DTYPE_F16 && w->dtype != IG_DTYPE_BF16)
        return ig_error_set(err, IG_ERR_UNSUPPORTED, "CUDA engine: weights of type %s",
                            ig_dtype_name(w->dtype));
    size_t in_es = ig_dtype_size(w->dtype), chunk = stage_floats * sizeof(float) / in_es;
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        IG_TRY(ig_cuda_copy_h2d_async(stage, (const char *)w->data + off * in_es, m * in_es, c->cs,
                                      err));
        IG_TRY(ig_cuda_convert(stage, w->dtype, (char *)dw->d + off * es, c->wt, (int64_t)m, c->cs,
                               err));
        IG_TRY(ig_cuda_stream_sync(c->cs, err)); /* the staging buffer is reused */
    }
    return IG_OK;
}

static void free_layer(cu_layer *L) {
    float *v[] = {L->attn_norm_w, L->attn_norm_b, L->ffn_norm_w, L->ffn_norm_b, L->bq,
                  L->bk,          L->bv,          L->bo,         L->b_up,       L->b_down};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) ig_cuda_free(v[i]);
    cu_weight *w[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) ig_cuda_free(w[i]->d);
}

void ig_cu_free(ig_cu_engine *c) {
    if (!c) return;
    ig_be_free(c->be); /* it syncs the stream; ctx and scratch stay c's */
    free(c->views);
    if (c->layers) {
        /* n_layer is not kept here: layers is calloc'd with one zeroed sentinel after the last */
        for (cu_layer *L = c->layers; L->wq.rows; L++) free_layer(L);
        free(c->layers);
    }
    ig_cuda_free(c->lm_head.d);
    ig_cuda_free(c->qs.buf);
    void *dev[] = {c->final_w,  c->final_b, c->x,  c->h,      c->q,    c->k,   c->v,
                   c->att,      c->f1,      c->f2, c->hidden, c->xh,   c->pos, c->rope_cos,
                   c->rope_sin, c->kc,      c->vc, c->logits, c->lrows};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) ig_cuda_free(dev[i]);
    ig_cuda_ctx_destroy(c->ctx);
    free(c);
}

static ig_status alloc_f(float **p, size_t n, ig_error *err) {
    return dalloc((void **)p, n * sizeof(float), err);
}

static ig_status create(ig_engine *e, ig_cu_engine *c, ig_error *err) {
    const ig_model_config *cf = &e->cfg;
    const ig_engine_opts *o = &e->opts;
    char why[256];
    ig_cuda_info info;
    if (ig_cuda_probe(&info, why, sizeof why) <= 0)
        return ig_error_set(err, IG_ERR_DEVICE, "no usable GPU: %s", why);
    IG_TRY(ig_cuda_ctx_create(0, &c->ctx, err));
    c->cs = ig_cuda_ctx_stream(c->ctx);
    ig_weight te = ig_model_tok_embd(e->model);
    c->wt = o->cuda_f32_weights         ? IG_DTYPE_F32
            : te.dtype == IG_DTYPE_BF16 ? IG_DTYPE_BF16
                                        : IG_DTYPE_F16;
    size_t stage_floats = (size_t)16 << 20;
    float *stage = NULL;
    IG_TRY(alloc_f(&stage, stage_floats, err));
    ig_status rc = IG_OK;
    c->layers = ig_calloc((size_t)cf->n_layer + 1, sizeof *c->layers, err);
    if (!c->layers) rc = IG_ERR_NOMEM;
    for (int l = 0; l < cf->n_layer && rc == IG_OK; l++) {
        const ig_layer *L = ig_model_layer(e->model, l);
        cu_layer *D = &c->layers[l];
        size_t d = (size_t)cf->d_model, f = (size_t)cf->d_ffn;
        size_t qd = (size_t)cf->n_head * (size_t)cf->head_dim;
        size_t kvd = (size_t)cf->n_kv_head * (size_t)cf->head_dim;
        const ig_weight *hw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        cu_weight *dw[] = {&D->wq, &D->wk, &D->wv, &D->wo, &D->w_gate, &D->w_up, &D->w_down};
        for (size_t i = 0; i < 7 && rc == IG_OK; i++)
            rc = upload_w(dw[i], hw[i], c, stage, stage_floats, err);
        if (rc == IG_OK) rc = upload_f32(&D->attn_norm_w, L->attn_norm_w, d, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->attn_norm_b, L->attn_norm_b, d, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->ffn_norm_w, L->ffn_norm_w, d, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->ffn_norm_b, L->ffn_norm_b, d, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->bq, L->bq, qd, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->bk, L->bk, kvd, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->bv, L->bv, kvd, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->bo, L->bo, d, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->b_up, L->b_up, f, c, err);
        if (rc == IG_OK) rc = upload_f32(&D->b_down, L->b_down, d, c, err);
        if (rc == IG_OK && D->wq.rows == 0) D->wq.rows = 1; /* the sentinel test of ig_cu_free */
    }
    if (rc == IG_OK) {
        ig_weight lm = ig_model_lm_head(e->model);
        rc = upload_w(&c->lm_head, &lm, c, stage, stage_floats, err);
    }
    if (rc == IG_OK)
        rc = upload_f32(&c->final_w, ig_model_final_norm_w(e->model), (size_t)cf->d_model, c, err);
    if (rc == IG_OK)
        rc = upload_f32(&c->final_b, ig_model_final_norm_b(e->model), (size_t)cf->d_model, c, err);
    ig_cuda_free(stage);
    IG_TRY(rc);

    size_t T = (size_t)o->max_batch_tokens, d = (size_t)cf->d_model, f = (size_t)cf->d_ffn;
    size_t qd = (size_t)cf->n_head * (size_t)cf->head_dim;
    size_t kvd = (size_t)cf->n_kv_head * (size_t)cf->head_dim;
    size_t wide = d > qd ? d : qd;
    if (f > wide) wide = f;
    IG_TRY(alloc_f(&c->x, T * d, err));
    IG_TRY(alloc_f(&c->h, T * d, err));
    IG_TRY(alloc_f(&c->hidden, T * d, err));
    IG_TRY(alloc_f(&c->q, T * qd, err));
    IG_TRY(alloc_f(&c->k, T * kvd, err));
    IG_TRY(alloc_f(&c->v, T * kvd, err));
    IG_TRY(alloc_f(&c->att, T * qd, err));
    IG_TRY(alloc_f(&c->f1, T * f, err));
    IG_TRY(alloc_f(&c->f2, T * f, err));
    IG_TRY(dalloc(&c->xh, T * wide * ig_dtype_size(c->wt), err));
    if (ig_dtype_is_quant(ig_model_dtype(e->model)) ||
        ig_dtype_is_quant(ig_model_lm_head(e->model).dtype)) {
        /* compressed matrices: the prefill path dequantizes up to `chunk` rows of W at a time into
         * this scratch (in the GEMM type) beside the input rows; sized once for the widest call */
        int64_t chunk = (int64_t)((wide + 63) / 64 * 64);
        c->qs.gemm_type = c->wt == IG_DTYPE_F32 ? IG_DTYPE_F32 : IG_DTYPE_F16;
        c->qs.bytes =
            ig_cuda_qlinear_scratch_bytes((int64_t)T, (int64_t)wide, chunk, c->qs.gemm_type);
        IG_TRY(dalloc(&c->qs.buf, c->qs.bytes, err));
    }
    IG_TRY(dalloc((void **)&c->pos, T * sizeof(int32_t), err));
    c->logit_rows = T < 256 ? (int64_t)T : 256;
    IG_TRY(alloc_f(&c->logits, (size_t)c->logit_rows * (size_t)cf->vocab, err));
    IG_TRY(alloc_f(&c->lrows, (size_t)c->logit_rows * d, err));
    if (cf->arch == IG_ARCH_LLAMA) {
        size_t half = (size_t)cf->rot_dim / 2 * (size_t)o->max_ctx;
        IG_TRY(upload_f32(&c->rope_cos, e->rope_cos, half, c, err));
        IG_TRY(upload_f32(&c->rope_sin, e->rope_sin, half, c, err));
    }
    c->views = ig_calloc((size_t)cf->n_layer, sizeof *c->views, err);
    if (!c->views) return IG_ERR_NOMEM;
    for (int l = 0; l < cf->n_layer; l++) {
        const cu_layer *D = &c->layers[l];
        ig_layer *V = &c->views[l];
        const cu_weight *dw[] = {&D->wq, &D->wk, &D->wv, &D->wo, &D->w_gate, &D->w_up, &D->w_down};
        ig_weight *vw[] = {&V->wq, &V->wk, &V->wv, &V->wo, &V->w_gate, &V->w_up, &V->w_down};
        for (size_t i = 0; i < 7; i++)
            *vw[i] = (ig_weight){dw[i]->d, dw[i]->t, dw[i]->rows, dw[i]->cols};
        V->attn_norm_w = D->attn_norm_w;
        V->attn_norm_b = D->attn_norm_b;
        V->ffn_norm_w = D->ffn_norm_w;
        V->ffn_norm_b = D->ffn_norm_b;
        V->bq = D->bq;
        V->bk = D->bk;
        V->bv = D->bv;
        V->bo = D->bo;
        V->b_up = D->b_up;
        V->b_down = D->b_down;
    }
    IG_TRY(ig_be_cuda_wrap(c->ctx, &c->qs, c->xh, T * wide * ig_dtype_size(c->wt), &c->be, err));
    if (!o->policy) {
        size_t n = e->slot_floats * (size_t)o->max_seqs * (size_t)cf->n_layer;
        rc = alloc_f(&c->kc, n, err);
        if (rc == IG_OK) rc = alloc_f(&c->vc, n, err);
        if (rc != IG_OK) {
            ig_error_prefix(err, "device KV cache (%zu MiB): ", 2 * n * sizeof(float) >> 20);
            return rc;
        }
    }
    return ig_cuda_stream_sync(c->cs, err);
}

ig_status ig_cu_create(ig_engine *e, ig_error *err) {
    ig_cu_engine *c = ig_calloc(1, sizeof *c, err);
    if (!c) return IG_ERR_NOMEM;
    e->cu = c;
    double t0 = ig_time_s();
    ig_status rc = create(e, c, err);
    if (rc != IG_OK) {
        ig_error_prefix(err, "CUDA engine: ");
        return rc; /* the caller frees e (and e->cu) */
    }
    e->layer_be = c->be; /* the layers' table, the policy path's too */
    e->layer_views = c->views;
    IG_INFO("CUDA engine: weights uploaded as %s in %.2f s", ig_dtype_name(c->wt),
            ig_time_s() - t0);
    return IG_OK;
}

ig_status ig_cu_forward(ig_engine *e, int gb, ig_error *err) {
    ig_cu_engine *c = e->cu;
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
    IG_TRY(ig_cuda_copy_h2d_async(c->x, e->x, T * d * sizeof(float), c->cs, err));
    IG_TRY(ig_cuda_copy_h2d_async(c->pos, e->pos, T * sizeof(int32_t), c->cs, err));
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
    return ig_cuda_stream_sync(c->cs, err);
}

ig_status ig_cu_logits(ig_engine *e, const int64_t *rows, int64_t row0, int64_t n, float *out,
                       ig_error *err) {
    ig_cu_engine *c = e->cu;
    size_t d = (size_t)e->cfg.d_model, V = (size_t)e->cfg.vocab;
    for (int64_t i0 = 0; i0 < n; i0 += c->logit_rows) {
        int64_t m = n - i0 < c->logit_rows ? n - i0 : c->logit_rows;
        const float *src = c->hidden + (size_t)(row0 + i0) * d;
        if (rows) {
            for (int64_t i = 0; i < m; i++)
                IG_TRY(ig_cuda_copy_d2d_async(c->lrows + (size_t)i * d,
                                              c->hidden + (size_t)rows[i0 + i] * d,
                                              d * sizeof(float), c->cs, err));
            src = c->lrows;
        }
        IG_TRY(ig_be_linear(c->be, src, m, c->lm_head.cols, c->lm_head.d, c->lm_head.t,
                            c->lm_head.rows, NULL, c->logits, err));
        IG_TRY(ig_cuda_copy_d2h_async(out + (size_t)i0 * V, c->logits,
                                      (size_t)m * V * sizeof(float), c->cs, err));
        IG_TRY(ig_cuda_stream_sync(c->cs, err));
    }
    return IG_OK;
}

#endif
