/* InfiniGen's calibration pass (see calibrate.h): the engine runs the model with an unregistered
 * dense policy that observes q and k (the engine's plain causal path; no engine changes),
 * accumulating Gram matrices so that memory does not grow with the calibration length. It must
 * never alter the model or the attention it observes. */
#include "core/engine/calibrate.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "policies/policy.h"

/* ---- an observer policy that only accumulates Gram matrices ---- */

typedef struct calib_ctx {
    int L, H, G, hd;
    double *gq, *gk; /* [L][G][hd][hd], upper triangles accumulated */
    double *rows;    /* [chunk * group][hd] */
} calib_ctx;

typedef struct observer_state {
    calib_ctx *ctx;
} observer_state;

static void obs_on_prefill(void *st, int layer, int slot, const ig_prefill_view *v) {
    calib_ctx *c = ((observer_state *)st)->ctx;
    (void)slot;
    if (!c) return;
    int group = c->H / c->G;
    size_t hd = (size_t)c->hd;
    for (int g = 0; g < c->G; g++) {
        size_t lg = ((size_t)layer * (size_t)c->G + (size_t)g) * hd * hd;
        /* the group's query rows stacked: Q_g^T Q_g = sum over the group's heads */
        size_t nr = 0;
        for (int t = 0; t < v->n_new; t++)
            for (int hh = 0; hh < group; hh++) {
                const float *q = v->q + ((size_t)t * (size_t)c->H + (size_t)(g * group + hh)) * hd;
                for (size_t i = 0; i < hd; i++) c->rows[nr * hd + i] = q[i];
                nr++;
            }
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, c->hd, (int)nr, 1.0, c->rows, c->hd, 1.0,
                    c->gq + lg, c->hd);
        for (int t = 0; t < v->n_new; t++) {
            const float *k = v->k + ((size_t)t * (size_t)c->G + (size_t)g) * hd;
            for (size_t i = 0; i < hd; i++) c->rows[(size_t)t * hd + i] = k[i];
        }
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, c->hd, v->n_new, 1.0, c->rows, c->hd,
                    1.0, c->gk + lg, c->hd);
    }
}

static const ig_policy_ops g_observer = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "infinigen-calibrate",
    /* .summary = */ "observes q and k for skewing (not registered)",
    /* .params = */ NULL,
    /* .n_params = */ 0,
    /* .state_size = */ sizeof(observer_state),
    /* .init = */ NULL, /* dense: plain causal attention over every token */
    /* .fini = */ NULL,
    /* .capacity = */ NULL,
    /* .reset_slot = */ NULL,
    /* .on_prefill = */ obs_on_prefill,
    /* .on_append = */ NULL,
    /* .evict = */ NULL,
    /* .on_evict = */ NULL,
    /* .select_ahead = */ NULL,
    /* .select = */ NULL,
    /* .on_attention = */ NULL,
    /* .device_bytes = */ NULL,
    /* .host_bytes = */ NULL,
    /* .budget = */ NULL,
    /* .cost_terms = */ NULL,
};

ig_status ig_calibrate_skew(const ig_model *m, const int32_t *ids, int64_t n, int chunk,
                            int threads, ig_skew_progress_fn progress, void *user, ig_skew **out,
                            ig_error *err) {
    *out = NULL;
    const ig_model_config *cfg = ig_model_get_config(m);
    if (n < 1) return ig_error_set(err, IG_ERR_INVALID_ARG, "calibration needs at least 1 token");
    if (cfg->n_kv_head <= 0 || cfg->n_head % cfg->n_kv_head != 0 || cfg->head_dim > IG_SKEW_MAX_HD)
        return ig_error_set(err, IG_ERR_UNSUPPORTED, "calibration: unsupported head layout");
    if (chunk <= 0) chunk = 256;
    if (chunk > n) chunk = (int)n;
    calib_ctx c = {cfg->n_layer, cfg->n_head, cfg->n_kv_head, cfg->head_dim, NULL, NULL, NULL};
    size_t hd = (size_t)c.hd, lg = (size_t)c.L * (size_t)c.G;
    size_t group = (size_t)(c.H / c.G);
    c.gq = ig_calloc(lg * hd * hd, sizeof(double), err);
    c.gk = ig_calloc(lg * hd * hd, sizeof(double), err);
    c.rows = ig_malloc((size_t)chunk * group * hd * sizeof(double), err);
    ig_engine *e = NULL;
    ig_skew *s = NULL;
    ig_status rc = IG_ERR_NOMEM;
    if (!c.gq || !c.gk || !c.rows) goto done;
    ig_engine_opts eo = {.max_seqs = 1,
                         .max_ctx = (int)n,
                         .max_batch_tokens = chunk,
                         .threads = threads,
                         .policy = &g_observer};
    rc = ig_engine_create(m, &eo, &e, err);
    if (rc != IG_OK) goto done;
    ((observer_state *)ig_engine_policy_state(e))->ctx = &c;
    for (int64_t p = 0; p < n; p += chunk) {
        int len = (int)(n - p < chunk ? n - p : chunk);
        ig_seq_tokens seq = {0, ids + p, len};
        rc = ig_engine_forward(e, &seq, 1, err);
        if (rc != IG_OK) goto done;
        if (progress) progress(user, p + len, n);
    }
    rc = ig_skew_alloc(cfg, ig_model_name(m), &s, err);
    if (rc != IG_OK) goto done;
    s->calib_tokens = (int)n;
    for (size_t i = 0; i < lg; i++) {
        double *q = c.gq + i * hd * hd, *k = c.gk + i * hd * hd;
        for (size_t r = 0; r < hd; r++) /* mirror the upper triangles */
            for (size_t cc = 0; cc < r; cc++) {
                q[r * hd + cc] = q[cc * hd + r];
                k[r * hd + cc] = k[cc * hd + r];
            }
        ig_skew_rotation_from_gram(q, k, c.hd, s->A + i * hd * hd, s->sigma_q + i * hd,
                                   s->sigma_k + i * hd);
    }
    *out = s;
    s = NULL;
    rc = IG_OK;
done:
    ig_engine_free(e);
    ig_skew_free(s);
    free(c.gq);
    free(c.gk);
    free(c.rows);
    return rc;
}
