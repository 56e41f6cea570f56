/* The forward pass on the CUDA backend, behind the engine interface (engine.h). C11 over the host
 * API of kernels/cuda/cuda_backend.h and the launchers of cuda_kernels.h; no CUDA header. The layer
 * is core/engine/layer.c's, run on the "cuda" backend table over this engine's context, stream,
 * buffers and uploaded weights (ig_be_cuda_wrap); this file keeps the device state, the upload,
 * the loop over layers, the logits and the policy path's device side.
 *
 * Weights are uploaded once at create as f16 (bf16 models stay bf16), converted on the device;
 * norms and biases stay f32. Block-quantized matrices (q4g64, q8g64, GGUF's Q4_0/Q4_1/Q8_0 kept
 * with --dtype stored) stay compressed on the device and run through ig_cuda_qlinear (a GEMV that
 * dequantizes in registers for decode; dequantized chunks and a GEMM for prefill). Activations are
 * f32 on the device; each other linear layer converts its input rows to the weight type and runs
 * ig_cuda_gemm (tensor cores, f32 accumulation). Without a
 * policy the KV cache is on the device, [layer][slot][kv_head][max_ctx][head_dim] f32 as on the
 * CPU. With a policy the KV home stays in host memory (offload/kv_home, registered pinned and
 * mapped); the policy runs on the CPU over the rows it needs, copied down each layer, and the
 * decode attention runs either on the GPU over the selected rows gathered from the mapped home on a
 * copy stream (overlapped with the previous layer), or on the CPU over the home (kv_access cpu,
 * FlexGen's cpu_cache_compute). Every kernel queues on the compute stream; the host waits only
 * where a policy hook needs data. */
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
void ig_cu_layer_wq(const ig_cu_engine *c, int l, const void **w, ig_dtype *t, int64_t *rows,
                    int64_t *cols, const float **bias) {
    (void)c;
    (void)l;
    *w = NULL;
    *t = IG_DTYPE_F32;
    *rows = *cols = 0;
    *bias = NULL;
}
void ig_cu_free(ig_cu_engine *c) {
    (void)c;
}
ig_be *ig_cu_backend(const ig_cu_engine *c) {
    (void)c;
    return NULL;
}
void ig_cu_release_home(ig_cu_engine *c) {
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
ig_status ig_cu_kv_setup(ig_engine *e, ig_kv_home *home, int64_t cap, size_t row_bytes,
                         ig_error *err) {
    (void)e;
    (void)home;
    (void)cap;
    (void)row_bytes;
    return no_cuda(err);
}
void ig_cu_kv_gather(ig_engine *e, int layer, int buf, int q, int i0, int n, const int *slots,
                     const int32_t *sel_e, const int64_t *sel_n) {
    (void)e;
    (void)layer;
    (void)buf;
    (void)q;
    (void)i0;
    (void)n;
    (void)slots;
    (void)sel_e;
    (void)sel_n;
}
void ig_cu_kv_wait(ig_engine *e, int q) {
    (void)e;
    (void)q;
}
const float *ig_cu_kv_decode(ig_engine *e, int buf, int i0, int n, const int *dec, int want_probs,
                             int64_t probs_stride) {
    (void)e;
    (void)buf;
    (void)i0;
    (void)n;
    (void)dec;
    (void)want_probs;
    (void)probs_stride;
    return NULL;
}
int ig_cu_prefill_on_device(const ig_engine *e, int s) {
    (void)e;
    (void)s;
    return 0;
}
ig_status ig_cu_kv_layer_begin(ig_engine *e, int layer, ig_error *err) {
    (void)e;
    (void)layer;
    return no_cuda(err);
}
ig_status ig_cu_kv_layer_attention(ig_engine *e, int layer, ig_error *err) {
    (void)e;
    (void)layer;
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
    ig_be *be_copy;  /* a fork of be: the copy queue of the policy path's gathers */
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
    /* policy path on the device */
    int dev_attn;
    int64_t cap;
    size_t row_bytes;
    const unsigned char *home_k, *home_v;     /* device addresses of the mapped home */
    void *reg_k, *reg_v;                      /* the home's host rows registered here, or NULL */
    size_t layer_bytes;                       /* bytes of one layer's home rows (K or V) */
    void *ws_k[2], *ws_v[2];                  /* [S][G][cap] rows in the home's format */
    float *wsf_k, *wsf_v;                     /* quantized homes: the working set decoded to f32 */
    int32_t *idx_h[2], *nsel_h[2], *tab_h[2]; /* pinned staging */
    int32_t *idx_d[2], *nsel_d[2], *tab_d[2];
    void **ev; /* [2 * S] events of be: gather (GPU batch, parity) done; NULL-terminated */
    float *dq, *dk, *dv, *datt, *dprobs; /* decode rows packed: [S][...] */
    uint8_t *codec_tmp;                  /* [S][G] encoded rows */
    float *probs_h;                      /* pinned */
    ig_status sticky;
    ig_error sticky_err;
};

/* ---- helpers ------------------------------------------------------------------------------- */

static void keep_err(ig_cu_engine *c, ig_status rc, const ig_error *err) {
    if (rc != IG_OK && c->sticky == IG_OK) {
        c->sticky = rc;
        c->sticky_err = *err;
    }
}

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

ig_be *ig_cu_backend(const ig_cu_engine *c) {
    return c->be;
}

void ig_cu_release_home(ig_cu_engine *c) {
    if (!c) return;
    ig_error err;
    if (c->cs) ig_cuda_stream_sync(c->cs, &err); /* gathers and decodes read the home */
    if (c->be_copy) ig_be_sync(c->be_copy, &err);
    if (c->reg_k) ig_be_host_unregister(c->be, c->reg_k, &err);
    if (c->reg_v) ig_be_host_unregister(c->be, c->reg_v, &err);
    c->reg_k = c->reg_v = NULL;
}

void ig_cu_free(ig_cu_engine *c) {
    if (!c) return;
    ig_cu_release_home(c); /* both queues synchronised; done already when the engine frees */
    if (c->ev) {
        for (int i = 0; c->ev[i]; i++) ig_be_event_free(c->be, c->ev[i]);
        free(c->ev);
    }
    ig_be_free(c->be_copy); /* a fork: before the table it came from */
    ig_be_free(c->be);      /* it syncs the stream; ctx and scratch stay c's */
    free(c->views);
    if (c->layers) {
        /* n_layer is not kept here: layers is calloc'd with one zeroed sentinel after the last */
        for (cu_layer *L = c->layers; L->wq.rows; L++) free_layer(L);
        free(c->layers);
    }
    ig_cuda_free(c->lm_head.d);
    ig_cuda_free(c->qs.buf);
    void *dev[] = {c->final_w,  c->final_b,  c->x,        c->h,         c->q,         c->k,
                   c->v,        c->att,      c->f1,       c->f2,        c->hidden,    c->xh,
                   c->pos,      c->rope_cos, c->rope_sin, c->kc,        c->vc,        c->logits,
                   c->lrows,    c->ws_k[0],  c->ws_k[1],  c->ws_v[0],   c->ws_v[1],   c->wsf_k,
                   c->wsf_v,    c->idx_d[0], c->idx_d[1], c->nsel_d[0], c->nsel_d[1], c->tab_d[0],
                   c->tab_d[1], c->dq,       c->dk,       c->dv,        c->datt,      c->dprobs,
                   c->codec_tmp};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) ig_cuda_free(dev[i]);
    void *pin[] = {c->idx_h[0], c->idx_h[1], c->nsel_h[0], c->nsel_h[1],
                   c->tab_h[0], c->tab_h[1], c->probs_h};
    for (size_t i = 0; i < sizeof pin / sizeof pin[0]; i++) ig_cuda_host_free(pin[i]);
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
    IG_TRY(ig_be_fork(c->be, &c->be_copy, err));
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

void ig_cu_layer_wq(const ig_cu_engine *c, int l, const void **w, ig_dtype *t, int64_t *rows,
                    int64_t *cols, const float **bias) {
    const cu_layer *L = &c->layers[l];
    *w = L->wq.d;
    *t = L->wq.t;
    *rows = L->wq.rows;
    *cols = L->wq.cols;
    *bias = L->bq;
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
    IG_INFO("CUDA engine: weights uploaded as %s in %.2f s", ig_dtype_name(c->wt),
            ig_time_s() - t0);
    return IG_OK;
}

/* ---- the layer ----------------------------------------------------------------------------- */

static int is_decode(const ig_engine *e, int s) {
    return e->cur[s].n_tokens == 1 && e->p0[s] > 0;
}

int ig_cu_prefill_on_device(const ig_engine *e, int s) {
    /* the new rows are laid out [kv_head][token][hd] in f1 (scratch of d_ffn floats per row) */
    size_t kvd = (size_t)e->cfg.n_kv_head * (size_t)e->cfg.head_dim;
    return e->cu && e->kv && ig_kv_run_device_attention(e->kv) && !is_decode(e, s) &&
           e->p0[s] == 0 && !ig_kv_run_wants_colsum(e->kv) && 2 * kvd <= (size_t)e->cfg.d_ffn;
}

/* Policy path: the policy's hooks run on the CPU (engine_kv.c) over host copies of the rows they
 * read; decode attention on the device or the CPU; prefill attention of a first chunk on the
 * device when the policy wants no column sums. */
ig_status ig_cu_kv_layer_attention(ig_engine *e, int l, ig_error *err) {
    ig_cu_engine *c = e->cu;
    const ig_model_config *cf = &e->cfg;
    size_t hd = (size_t)cf->head_dim, kvd = (size_t)cf->n_kv_head * hd;
    size_t qd = (size_t)cf->n_head * hd, r0 = (size_t)e->br0, T = (size_t)(e->br1 - e->br0);
    float scale = 1.0f / sqrtf((float)cf->head_dim);
    IG_TRY(
        ig_cuda_copy_d2h_async(e->q + r0 * qd, c->q + r0 * qd, T * qd * sizeof(float), c->cs, err));
    IG_TRY(ig_cuda_copy_d2h_async(e->k + r0 * kvd, c->k + r0 * kvd, T * kvd * sizeof(float), c->cs,
                                  err));
    IG_TRY(ig_cuda_copy_d2h_async(e->v + r0 * kvd, c->v + r0 * kvd, T * kvd * sizeof(float), c->cs,
                                  err));
    for (int s = e->bs0; s < e->bs1; s++) {
        if (!ig_cu_prefill_on_device(e, s)) continue;
        size_t sr = (size_t)e->row0[s];
        /* a first chunk: the new rows are the whole context, [token][kv_head][hd] with stride kvd
         * is not the kernel's [kv_head][token][hd]: go through f1 as scratch */
        int64_t n = e->cur[s].n_tokens;
        float *kt = c->f1, *vt = c->f1 + (size_t)n * kvd;
        for (int g = 0; g < cf->n_kv_head; g++) {
            IG_TRY(ig_cuda_copy_2d_async(kt + (size_t)g * (size_t)n * hd, hd * sizeof(float),
                                         c->k + sr * kvd + (size_t)g * hd, kvd * sizeof(float),
                                         hd * sizeof(float), (size_t)n, c->cs, err));
            IG_TRY(ig_cuda_copy_2d_async(vt + (size_t)g * (size_t)n * hd, hd * sizeof(float),
                                         c->v + sr * kvd + (size_t)g * hd, kvd * sizeof(float),
                                         hd * sizeof(float), (size_t)n, c->cs, err));
        }
        IG_TRY(ig_cuda_attention_prefill(c->q + sr * qd, n, 0, kt, vt, n, cf->n_head, cf->n_kv_head,
                                         cf->head_dim, scale, c->att + sr * qd, c->cs, err));
    }
    IG_TRY(ig_cuda_stream_sync(c->cs, err));
    ig_kv_layer_attention(e, l);
    if (c->sticky != IG_OK) {
        *err = c->sticky_err;
        return c->sticky;
    }
    /* attention rows computed on the CPU go up */
    int dev = ig_kv_run_device_attention(e->kv);
    for (int s = e->bs0; s < e->bs1; s++) {
        if (is_decode(e, s) ? dev : ig_cu_prefill_on_device(e, s)) continue;
        size_t sr = (size_t)e->row0[s], n = (size_t)e->cur[s].n_tokens;
        IG_TRY(ig_cuda_copy_h2d_async(c->att + sr * qd, e->att + sr * qd, n * qd * sizeof(float),
                                      c->cs, err));
    }
    /* e->att is rewritten by the next layer's hooks: the copies must be done by then */
    return ig_cuda_stream_sync(c->cs, err);
}

ig_status ig_cu_kv_layer_begin(ig_engine *e, int l, ig_error *err) {
    ig_cu_engine *c = e->cu;
    size_t d = (size_t)e->cfg.d_model, r0 = (size_t)e->br0, T = (size_t)(e->br1 - e->br0);
    IG_TRY(ig_cuda_copy_d2h_async(e->h + r0 * d, c->h + r0 * d, T * d * sizeof(float), c->cs, err));
    IG_TRY(ig_cuda_stream_sync(c->cs, err));
    ig_kv_layer_begin(e, l);
    if (c->sticky != IG_OK) {
        *err = c->sticky_err;
        return c->sticky;
    }
    return IG_OK;
}

ig_status ig_cu_forward(ig_engine *e, int gb, ig_error *err) {
    ig_cu_engine *c = e->cu;
    const ig_model_config *cf = &e->cfg;
    size_t d = (size_t)cf->d_model, T = (size_t)e->n_rows;
    int n_seqs = e->n_cur, n_gb = (n_seqs + gb - 1) / gb;
    c->sticky = IG_OK;
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
                          .rope_sin = c->rope_sin,
                          .kv_begin = ig_cu_kv_layer_begin,
                          .kv_attention = ig_cu_kv_layer_attention};
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

/* ---- the policy path's device side --------------------------------------------------------- */

ig_status ig_cu_kv_setup(ig_engine *e, ig_kv_home *home, int64_t cap, size_t row_bytes,
                         ig_error *err) {
    ig_cu_engine *c = e->cu;
    const ig_model_config *cf = &e->cfg;
    size_t S = (size_t)e->opts.max_seqs, G = (size_t)cf->n_kv_head, H = (size_t)cf->n_head;
    size_t hd = (size_t)cf->head_dim;
    c->dev_attn = 1;
    c->cap = cap;
    c->row_bytes = row_bytes;
    c->layer_bytes = S * G * (size_t)cap * row_bytes;
    /* the home's host rows, registered pinned and mapped so that gathers read them in place
     * (cudaHostRegister keeps the pages where they are: their NUMA binding, offload/hostmem);
     * unregistered by ig_cu_free, which the engine calls before it frees the home */
    void *hk = NULL, *hv = NULL, *kd = NULL, *vd = NULL;
    size_t hb = 0;
    ig_kv_home_row_memory(home, &hk, &hv, &hb);
    IG_TRY(ig_be_host_register(c->be, hk, hb, &kd, err));
    c->reg_k = hk;
    IG_TRY(ig_be_host_register(c->be, hv, hb, &vd, err));
    c->reg_v = hv;
    c->home_k = kd;
    c->home_v = vd;
    size_t ws = S * G * (size_t)cap * row_bytes;
    for (int b = 0; b < 2; b++) {
        IG_TRY(dalloc(&c->ws_k[b], ws, err));
        IG_TRY(dalloc(&c->ws_v[b], ws, err));
        IG_TRY(ig_cuda_host_alloc((void **)&c->idx_h[b], S * G * (size_t)cap * 4, 0, err));
        IG_TRY(ig_cuda_host_alloc((void **)&c->nsel_h[b], S * G * 4, 0, err));
        IG_TRY(ig_cuda_host_alloc((void **)&c->tab_h[b], S * G * 4, 0, err));
        IG_TRY(dalloc((void **)&c->idx_d[b], S * G * (size_t)cap * 4, err));
        IG_TRY(dalloc((void **)&c->nsel_d[b], S * G * 4, err));
        IG_TRY(dalloc((void **)&c->tab_d[b], S * G * 4, err));
    }
    const ig_kv_codec *codec = ig_kv_run_codec(e->kv);
    if (codec->kind == IG_KV_CODEC_QUANT) {
        IG_TRY(alloc_f(&c->wsf_k, S * G * (size_t)cap * hd, err));
        IG_TRY(alloc_f(&c->wsf_v, S * G * (size_t)cap * hd, err));
    }
    IG_TRY(alloc_f(&c->dq, S * H * hd, err));
    IG_TRY(alloc_f(&c->dk, S * G * hd, err));
    IG_TRY(alloc_f(&c->dv, S * G * hd, err));
    IG_TRY(alloc_f(&c->datt, S * H * hd, err));
    IG_TRY(alloc_f(&c->dprobs, S * H * (size_t)(cap + 1), err));
    IG_TRY(dalloc((void **)&c->codec_tmp, S * G * row_bytes * 2 + 16, err));
    IG_TRY(ig_cuda_host_alloc((void **)&c->probs_h, S * H * (size_t)(cap + 1) * sizeof(float), 0,
                              err));
    c->ev = ig_calloc(2 * S + 1, sizeof *c->ev, err); /* NULL-terminated */
    if (!c->ev) return IG_ERR_NOMEM;
    for (size_t i = 0; i < 2 * S; i++) IG_TRY(ig_be_event_new(c->be, &c->ev[i], err));
    return IG_OK;
}

void ig_cu_kv_gather(ig_engine *e, int layer, int buf, int q, int i0, int n, const int *slots,
                     const int32_t *sel_e, const int64_t *sel_n) {
    ig_cu_engine *c = e->cu;
    if (c->sticky != IG_OK || n <= 0) return;
    int G = e->cfg.n_kv_head;
    size_t cap = (size_t)c->cap, t0 = (size_t)i0 * (size_t)G;
    int32_t *idx = c->idx_h[buf] + t0 * cap, *ns = c->nsel_h[buf] + t0, *tab = c->tab_h[buf] + t0;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            size_t t = (size_t)i * (size_t)G + (size_t)g, st = (size_t)slots[i] * (size_t)G + g;
            ns[t] = (int32_t)sel_n[st];
            tab[t] = (int32_t)st;
            memcpy(idx + t * cap, sel_e + st * cap, (size_t)ns[t] * sizeof(int32_t));
        }
    size_t nt = (size_t)n * (size_t)G;
    ig_error err;
    /* on the copy queue: the staging (pinned, double-buffered by parity) goes up, the rows are
     * gathered from the mapped home, and the event tells the compute queue */
    ig_be *xq = c->be_copy;
    ig_status rc = ig_be_upload_async(xq, c->idx_d[buf] + t0 * cap, idx, nt * cap * 4, &err);
    if (rc == IG_OK) rc = ig_be_upload_async(xq, c->nsel_d[buf] + t0, ns, nt * 4, &err);
    if (rc == IG_OK) rc = ig_be_upload_async(xq, c->tab_d[buf] + t0, tab, nt * 4, &err);
    size_t tstride = cap * c->row_bytes, lo = (size_t)layer * c->layer_bytes;
    char *wk = (char *)c->ws_k[buf] + t0 * tstride, *wv = (char *)c->ws_v[buf] + t0 * tstride;
    if (rc == IG_OK)
        rc = ig_be_gather_rows(xq, wk, (int64_t)tstride, c->home_k + lo, (int64_t)tstride,
                               (int64_t)c->row_bytes, c->tab_d[buf] + t0, c->row_bytes,
                               c->idx_d[buf] + t0 * cap, (int64_t)cap, c->nsel_d[buf] + t0, (int)nt,
                               &err);
    if (rc == IG_OK)
        rc = ig_be_gather_rows(xq, wv, (int64_t)tstride, c->home_v + lo, (int64_t)tstride,
                               (int64_t)c->row_bytes, c->tab_d[buf] + t0, c->row_bytes,
                               c->idx_d[buf] + t0 * cap, (int64_t)cap, c->nsel_d[buf] + t0, (int)nt,
                               &err);
    if (rc == IG_OK) rc = ig_be_event_record(xq, c->ev[q], &err);
    keep_err(c, rc, &err);
}

void ig_cu_kv_wait(ig_engine *e, int q) {
    ig_cu_engine *c = e->cu;
    if (c->sticky != IG_OK) return;
    ig_error err;
    keep_err(c, ig_be_event_wait(c->be, c->ev[q], &err), &err);
}

/* The new rows as attention sees them: through the codec (f16 rounding, or quantized), as the
 * CPU path's decode_seq does. */
static ig_status codec_roundtrip(ig_cu_engine *c, const ig_kv_codec *codec, float *x, int64_t rows,
                                 int hd, ig_error *err) {
    if (codec->kind == IG_KV_CODEC_F32) return IG_OK;
    if (codec->kind == IG_KV_CODEC_F16) {
        IG_TRY(ig_be_convert(c->be, x, IG_DTYPE_F32, c->codec_tmp, IG_DTYPE_F16, rows * hd, err));
        return ig_be_convert(c->be, c->codec_tmp, IG_DTYPE_F16, x, IG_DTYPE_F32, rows * hd, err);
    }
    IG_TRY(ig_be_kvq_quantize(c->be, x, rows, hd, codec->bits, codec->group, c->codec_tmp, err));
    return ig_be_kvq_dequantize(c->be, c->codec_tmp, rows, hd, codec->bits, codec->group, x, err);
}

static ig_status decode(ig_engine *e, int buf, int i0, int n, const int *dec, int probs,
                        int64_t probs_stride, ig_error *err) {
    ig_cu_engine *c = e->cu;
    const ig_model_config *cf = &e->cfg;
    int G = cf->n_kv_head, H = cf->n_head, hd = cf->head_dim;
    size_t qd = (size_t)H * (size_t)hd, kvd = (size_t)G * (size_t)hd, cap = (size_t)c->cap;
    size_t t0 = (size_t)i0 * (size_t)G, tstride = cap * c->row_bytes;
    for (int i = 0; i < n; i++) { /* pack the decode rows (not contiguous in a mixed call) */
        size_t row = (size_t)e->row0[dec[i0 + i]];
        IG_TRY(ig_cuda_copy_d2d_async(c->dq + (size_t)i * qd, c->q + row * qd, qd * 4, c->cs, err));
        IG_TRY(
            ig_cuda_copy_d2d_async(c->dk + (size_t)i * kvd, c->k + row * kvd, kvd * 4, c->cs, err));
        IG_TRY(
            ig_cuda_copy_d2d_async(c->dv + (size_t)i * kvd, c->v + row * kvd, kvd * 4, c->cs, err));
    }
    const ig_kv_codec *codec = ig_kv_run_codec(e->kv);
    IG_TRY(codec_roundtrip(c, codec, c->dk, (int64_t)n * G, hd, err));
    IG_TRY(codec_roundtrip(c, codec, c->dv, (int64_t)n * G, hd, err));
    ig_be_attn_rows a; /* through the engine's table: the same launcher on the compute stream */
    memset(&a, 0, sizeof a);
    a.batch = n;
    a.n_head = H;
    a.n_kv_head = G;
    a.hd = hd;
    a.scale = 1.0f / sqrtf((float)hd);
    a.k = (char *)c->ws_k[buf] + t0 * tstride;
    a.v = (char *)c->ws_v[buf] + t0 * tstride;
    a.kv_dtype = codec->kind == IG_KV_CODEC_F16 ? IG_DTYPE_F16 : IG_DTYPE_F32;
    a.table_stride = (int64_t)cap * hd;
    a.row_stride = hd;
    if (codec->kind == IG_KV_CODEC_QUANT) {
        int64_t rows = (int64_t)n * G * (int64_t)cap;
        IG_TRY(ig_be_kvq_dequantize(c->be, (const uint8_t *)a.k, rows, hd, codec->bits,
                                    codec->group, c->wsf_k, err));
        IG_TRY(ig_be_kvq_dequantize(c->be, (const uint8_t *)a.v, rows, hd, codec->bits,
                                    codec->group, c->wsf_v, err));
        a.k = c->wsf_k;
        a.v = c->wsf_v;
    }
    a.idx = NULL;
    a.n_sel = c->nsel_d[buf] + t0;
    a.k_extra = c->dk;
    a.v_extra = c->dv;
    a.n_extra = 1;
    a.probs = probs ? c->dprobs : NULL;
    a.probs_stride = probs_stride;
    IG_TRY(ig_be_attention_rows(c->be, &a, c->dq, c->datt, err));
    for (int i = 0; i < n; i++) {
        size_t row = (size_t)e->row0[dec[i0 + i]];
        IG_TRY(ig_cuda_copy_d2d_async(c->att + row * qd, c->datt + (size_t)i * qd, qd * 4, c->cs,
                                      err));
    }
    if (probs) {
        size_t nb = (size_t)n * (size_t)H * (size_t)probs_stride * sizeof(float);
        IG_TRY(ig_cuda_copy_d2h_async(c->probs_h, c->dprobs, nb, c->cs, err));
    }
    /* the stores that follow on the CPU may reuse entries this layer's gather read */
    return ig_cuda_stream_sync(c->cs, err);
}

const float *ig_cu_kv_decode(ig_engine *e, int buf, int i0, int n, const int *dec, int want_probs,
                             int64_t probs_stride) {
    ig_cu_engine *c = e->cu;
    if (c->sticky != IG_OK || n <= 0) return NULL;
    ig_error err;
    keep_err(c, decode(e, buf, i0, n, dec, want_probs, probs_stride, &err), &err);
    return c->sticky == IG_OK && want_probs ? c->probs_h : NULL;
}

#endif
