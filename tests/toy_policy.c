/* A toy policy written as a newcomer would write one (docs/ARCHITECTURE.md, "How to add a
 * policy"): this file and one registration line (ig_policy_register(&ig_toy_random_policy, ...))
 * in the test that uses it. It keeps every token and, at each decode step, attends to a random
 * `fraction` of each KV head's cached entries: every entry gets a score hashed from (seed, layer,
 * slot, head, token position, tokens so far), and the k = round(fraction x entries in use) best
 * are read. The top-k runs through the run's backend (ig_policy_env.be): on the CPU engine the CPU
 * table, on the CUDA engine the GPU, with this same code; the scores are exact floats and top-k
 * breaks ties by the lower index on every backend, so the selections are the same everywhere.
 * No fini or capacity of its own (the defaults free nothing and keep every token). It is not
 * registered in policies/registry.c and not meant for results. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "policies/policy.h"
#include "tests/toy_policy.h"

static const ig_param_spec toy_params[] = {
    {"fraction", IG_PARAM_FLOAT, "0.5", 0, 1, NULL, "share of the cached entries read per step"},
    {"seed", IG_PARAM_INT, "1", 0, 2147483647, NULL, "seed of the entry hash"},
};

typedef struct toy_state {
    double fraction;
    uint64_t seed;
    int n_kv_head, rows, ctx;
    ig_be *be;
    /* host staging and backend buffers for rows = n_slots * n_kv_head tables of ctx entries */
    float *h_score;
    int32_t *h_n, *h_k, *h_idx, *h_cnt;
    float *d_score;
    int32_t *d_n, *d_k, *d_idx, *d_cnt;
} toy_state;

static void toy_fini(void *st) {
    toy_state *s = st;
    free(s->h_score);
    free(s->h_n);
    free(s->h_k);
    free(s->h_idx);
    free(s->h_cnt);
    if (s->be) {
        ig_be_release(s->be, s->d_score);
        ig_be_release(s->be, s->d_n);
        ig_be_release(s->be, s->d_k);
        ig_be_release(s->be, s->d_idx);
        ig_be_release(s->be, s->d_cnt);
    }
}

static ig_status toy_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                          ig_policy_caps *caps, ig_error *err) {
    toy_state *s = st;
    (void)caps; /* raw rows, every layer selected, no probabilities wanted */
    if (!env->be)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "policy toy-random: needs a backend");
    s->fraction = ig_params_num(p, "fraction");
    s->seed = (uint64_t)ig_params_num(p, "seed");
    s->n_kv_head = env->cfg->n_kv_head;
    s->rows = env->n_slots * s->n_kv_head;
    s->ctx = env->max_ctx;
    s->be = env->be;
    size_t cells = (size_t)s->rows * (size_t)s->ctx, r = (size_t)s->rows;
    s->h_score = malloc(cells * sizeof(float));
    s->h_idx = malloc(cells * sizeof(int32_t));
    s->h_n = malloc(r * sizeof(int32_t));
    s->h_k = malloc(r * sizeof(int32_t));
    s->h_cnt = malloc(r * sizeof(int32_t));
    s->d_score = ig_be_alloc(s->be, cells * sizeof(float), err);
    s->d_idx = ig_be_alloc(s->be, cells * sizeof(int32_t), err);
    s->d_n = ig_be_alloc(s->be, r * sizeof(int32_t), err);
    s->d_k = ig_be_alloc(s->be, r * sizeof(int32_t), err);
    s->d_cnt = ig_be_alloc(s->be, r * sizeof(int32_t), err);
    if (!s->h_score || !s->h_idx || !s->h_n || !s->h_k || !s->h_cnt || !s->d_score || !s->d_idx ||
        !s->d_n || !s->d_k || !s->d_cnt) {
        toy_fini(s); /* the core does not call fini after a failed init */
        return ig_error_set(err, IG_ERR_NOMEM, "policy toy-random: buffers for %d x %d entries",
                            s->rows, s->ctx);
    }
    return IG_OK;
}

/* splitmix64's finalizer over the fields folded in one by one */
static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static void toy_select(void *st, int layer, int n, const int *slots, const float *q,
                       const ig_entries_view *ev, ig_selection *out) {
    toy_state *s = st;
    (void)q;
    int rows = n * s->n_kv_head;
    for (int t = 0; t < rows; t++) {
        int i = t / s->n_kv_head, g = t % s->n_kv_head;
        const ig_entries_view *v = &ev[t];
        float *sc = s->h_score + (size_t)t * (size_t)s->ctx;
        for (int64_t e = 0; e < v->high_water; e++) {
            uint64_t h =
                mix(mix(mix(mix(mix(s->seed, (uint64_t)layer), (uint64_t)slots[i]), (uint64_t)g),
                        (uint64_t)(v->pos[e] < 0 ? 0 : v->pos[e])),
                    (uint64_t)v->n_tokens);
            /* 24 random bits: an exact float in [0, 1); free entries never chosen */
            sc[e] = v->pos[e] < 0 ? -INFINITY : (float)(h >> 40) * (1.0f / 16777216.0f);
        }
        int64_t k = (int64_t)floor(s->fraction * (double)v->n_used + 0.5);
        if (k < 1 && s->fraction > 0 && v->n_used > 0) k = 1;
        s->h_n[t] = (int32_t)v->high_water;
        s->h_k[t] = (int32_t)(k < v->n_used ? k : v->n_used);
    }
    /* one top-k over every (slot, KV head) row, on the run's backend */
    ig_error err;
    size_t cells = (size_t)rows * (size_t)s->ctx;
    ig_status rc = ig_be_upload(s->be, s->d_score, s->h_score, cells * sizeof(float), &err);
    if (rc == IG_OK) rc = ig_be_upload(s->be, s->d_n, s->h_n, (size_t)rows * sizeof(int32_t), &err);
    if (rc == IG_OK) rc = ig_be_upload(s->be, s->d_k, s->h_k, (size_t)rows * sizeof(int32_t), &err);
    if (rc == IG_OK)
        rc = ig_be_topk(s->be, s->d_score, s->ctx, rows, s->ctx, s->d_n, 0, s->d_k, s->d_idx,
                        s->ctx, s->d_cnt, &err);
    if (rc == IG_OK)
        rc = ig_be_download(s->be, s->h_cnt, s->d_cnt, (size_t)rows * sizeof(int32_t), &err);
    if (rc == IG_OK) rc = ig_be_download(s->be, s->h_idx, s->d_idx, cells * sizeof(int32_t), &err);
    if (rc != IG_OK) fprintf(stderr, "toy-random: backend %s: %s\n", s->be->caps.name, err.msg);
    for (int t = 0; t < rows; t++) {
        int i = t / s->n_kv_head, g = t % s->n_kv_head;
        int32_t *dst = out[i].entries + (size_t)g * (size_t)out[i].max_per_head;
        int64_t c = rc == IG_OK ? s->h_cnt[t] : 0; /* a failed backend reads nothing */
        for (int64_t j = 0; j < c; j++) dst[j] = s->h_idx[(size_t)t * (size_t)s->ctx + (size_t)j];
        out[i].n[g] = c;
    }
}

static const char *toy_budget(const void *st, char *buf, size_t n) {
    const toy_state *s = st;
    snprintf(buf, n, "fraction = %g of the entries in use, top-k on the %s backend", s->fraction,
             s->be->caps.name);
    return buf;
}

static ig_status toy_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                                ig_policy_cost_terms *t, ig_error *err) {
    (void)cfg;
    (void)err;
    t->fetch = ig_params_num(p, "fraction");
    return IG_OK;
}

const ig_policy_ops ig_toy_random_policy = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "toy-random",
    /* .summary = */ "a test's toy: a random share of the cached entries per step",
    /* .params = */ toy_params,
    /* .n_params = */ (int)(sizeof toy_params / sizeof toy_params[0]),
    /* .state_size = */ sizeof(toy_state),
    /* .init = */ toy_init,
    /* .fini = */ toy_fini,
    /* .capacity = */ NULL,
    /* .reset_slot = */ NULL,
    /* .on_prefill = */ NULL,
    /* .on_append = */ NULL,
    /* .evict = */ NULL,
    /* .on_evict = */ NULL,
    /* .select_ahead = */ NULL,
    /* .select = */ toy_select,
    /* .on_attention = */ NULL,
    /* .device_bytes = */ NULL,
    /* .host_bytes = */ NULL,
    /* .budget = */ toy_budget,
    /* .cost_terms = */ toy_cost_terms,
};
