/* One transformer layer (OPT or Llama) over the rows of the current GPU batch, written once for
 * every backend: each op is a call through the backend table of the buffers it runs on
 * (ig_layer_bufs: host memory on the CPU engine, device memory on the CUDA engine). What differs
 * between the engines is where the buffers and weights are; with a KV policy the layer calls the
 * policy path's two steps (engine_kv.c) with its buffers, the same calls on both. */
#include <math.h>

#include "core/engine/engine_internal.h"
#include "core/base/log.h"

/* Ops on a host-memory backend finish before they return: their time is the op's. On an
 * asynchronous one it would be the time to queue it, so nothing is counted. */
static ig_status linear(ig_engine *e, const ig_layer_bufs *b, const float *x, int64_t M,
                        const ig_weight *w, const float *bias, float *y, ig_error *err) {
    if (b->be->caps.async)
        return ig_be_linear(b->be, x, M, w->cols, w->data, w->dtype, w->rows, bias, y, err);
    double t0 = ig_time_s();
    ig_status rc = ig_be_linear(b->be, x, M, w->cols, w->data, w->dtype, w->rows, bias, y, err);
    e->stats.linear_s += ig_time_s() - t0;
    return rc;
}

/* Several matrices over the same x in one call (q, k, v; gate, up) where they share K and a
 * storage type, else one linear each; the same outputs either way. */
static ig_status linear_n(ig_engine *e, const ig_layer_bufs *b, const float *x, int64_t M, int n,
                          const ig_weight *const *w, const float *const *bias, float *const *y,
                          ig_error *err) {
    int same = 1;
    for (int i = 1; i < n; i++) same &= w[i]->dtype == w[0]->dtype && w[i]->cols == w[0]->cols;
    if (!same) {
        for (int i = 0; i < n; i++) IG_TRY(linear(e, b, x, M, w[i], bias[i], y[i], err));
        return IG_OK;
    }
    ig_linear_part p[IG_LINEAR_MULTI_MAX];
    for (int i = 0; i < n; i++) p[i] = (ig_linear_part){w[i]->data, w[i]->rows, bias[i], y[i]};
    if (b->be->caps.async)
        return ig_be_linear_multi(b->be, x, M, w[0]->cols, w[0]->dtype, p, n, err);
    double t0 = ig_time_s();
    ig_status rc = ig_be_linear_multi(b->be, x, M, w[0]->cols, w[0]->dtype, p, n, err);
    e->stats.linear_s += ig_time_s() - t0;
    return rc;
}

ig_status ig_engine_norm(const ig_engine *e, ig_be *be, const float *x, const float *w,
                         const float *bias, int64_t rows, float *y, ig_error *err) {
    const ig_model_config *c = &e->cfg;
    if (c->arch == IG_ARCH_OPT)
        return ig_be_layernorm(be, x, w, bias, rows, c->d_model, c->norm_eps, y, err);
    return ig_be_rmsnorm(be, x, w, rows, c->d_model, c->norm_eps, y, err);
}

/* No policy: the new keys and values of each sequence into its cache slot at their positions
 * (one strided copy per KV head), then causal attention over the slot. */
static ig_status plain_attention(ig_engine *e, const ig_layer_bufs *b, ig_error *err) {
    const ig_model_config *c = &e->cfg;
    size_t hd = (size_t)c->head_dim, kvd = (size_t)c->n_kv_head * hd;
    size_t qd = (size_t)c->n_head * hd, ctx = (size_t)e->opts.max_ctx;
    float scale = 1.0f / sqrtf((float)c->head_dim);
    int timed = !b->be->caps.async;
    double t0 = timed ? ig_time_s() : 0.0;
    for (int s = e->bs0; s < e->bs1; s++) {
        const ig_seq_tokens *sq = &e->cur[s];
        size_t r0 = (size_t)e->row0[s], p0 = (size_t)e->p0[s];
        float *kc = b->kc + (size_t)sq->slot * e->slot_floats;
        float *vc = b->vc + (size_t)sq->slot * e->slot_floats;
        for (int g = 0; g < c->n_kv_head; g++) {
            IG_TRY(ig_be_copy2d(b->be, kc + ((size_t)g * ctx + p0) * hd, hd * sizeof(float),
                                b->k + r0 * kvd + (size_t)g * hd, kvd * sizeof(float),
                                hd * sizeof(float), (size_t)sq->n_tokens, err));
            IG_TRY(ig_be_copy2d(b->be, vc + ((size_t)g * ctx + p0) * hd, hd * sizeof(float),
                                b->v + r0 * kvd + (size_t)g * hd, kvd * sizeof(float),
                                hd * sizeof(float), (size_t)sq->n_tokens, err));
        }
        IG_TRY(ig_be_attention(b->be, b->q + r0 * qd, sq->n_tokens, (int64_t)p0, kc, vc,
                               (int64_t)ctx, c->n_head, c->n_kv_head, c->head_dim, scale,
                               b->attn_ws, b->attn_ws_floats, b->att + r0 * qd, err));
    }
    if (timed) e->stats.attention_s += ig_time_s() - t0;
    return IG_OK;
}

ig_status ig_engine_layer_forward(ig_engine *e, int l, const ig_layer *L, const ig_layer_bufs *b,
                                  ig_error *err) {
    const ig_model_config *c = &e->cfg;
    ig_be *be = b->be;
    size_t d = (size_t)c->d_model, f = (size_t)c->d_ffn;
    size_t qd = (size_t)c->n_head * (size_t)c->head_dim, kvd = (size_t)c->n_kv_head * c->head_dim;
    size_t r0 = (size_t)e->br0;
    int64_t T = e->br1 - e->br0;
    float *x = b->x + r0 * d, *h = b->h + r0 * d, *q = b->q + r0 * qd;
    float *k = b->k + r0 * kvd, *v = b->v + r0 * kvd, *att = b->att + r0 * qd;
    float *f1 = b->f1 + r0 * f, *f2 = b->f2 + r0 * f;
    IG_TRY(ig_engine_norm(e, be, x, L->attn_norm_w, L->attn_norm_b, T, h, err));
    if (e->kv) IG_TRY(ig_kv_layer_begin(e, l, b, err)); /* select_ahead and on_prefill read h */
    {
        const ig_weight *w[3] = {&L->wq, &L->wk, &L->wv};
        const float *bs[3] = {L->bq, L->bk, L->bv};
        float *ys[3] = {q, k, v};
        IG_TRY(linear_n(e, b, h, T, 3, w, bs, ys, err));
    }
    if (c->arch == IG_ARCH_LLAMA) {
        IG_TRY(ig_be_rope(be, q, T, c->n_head, c->head_dim, c->rot_dim, b->pos + r0, b->rope_cos,
                          b->rope_sin, err));
        IG_TRY(ig_be_rope(be, k, T, c->n_kv_head, c->head_dim, c->rot_dim, b->pos + r0, b->rope_cos,
                          b->rope_sin, err));
    }
    if (e->kv) {
        double t_kv = ig_time_s();
        IG_TRY(ig_kv_layer_attention(e, l, b, err));
        e->stats.attention_s += ig_time_s() - t_kv;
    } else {
        IG_TRY(plain_attention(e, b, err));
    }
    IG_TRY(linear(e, b, att, T, &L->wo, L->bo, h, err));
    IG_TRY(ig_be_add(be, x, h, T * (int64_t)d, err));
    IG_TRY(ig_engine_norm(e, be, x, L->ffn_norm_w, L->ffn_norm_b, T, h, err));
    if (c->arch == IG_ARCH_OPT) {
        IG_TRY(linear(e, b, h, T, &L->w_up, L->b_up, f1, err));
        IG_TRY(ig_be_relu(be, f1, T * (int64_t)f, err));
        IG_TRY(linear(e, b, f1, T, &L->w_down, L->b_down, h, err));
    } else {
        const ig_weight *w[2] = {&L->w_gate, &L->w_up};
        const float *bs[2] = {NULL, L->b_up};
        float *ys[2] = {f1, f2};
        IG_TRY(linear_n(e, b, h, T, 2, w, bs, ys, err));
        IG_TRY(ig_be_silu_mul(be, f1, f2, T * (int64_t)f, f1, err));
        IG_TRY(linear(e, b, f1, T, &L->w_down, L->b_down, h, err));
    }
    return ig_be_add(be, x, h, T * (int64_t)d, err);
}
