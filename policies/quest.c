/* quest: query-aware page selection (Tang et al., ICML 2024). Tokens are grouped by position into
 * pages of page_size; per (layer, slot, KV head, page) the policy keeps the elementwise min and max
 * of the page's keys (after RoPE). At each decode step and layer it scores every page with an upper
 * bound of q . k, selects the best pages up to a token budget (always the last, partial page) and
 * the layer attends to those only. Nothing is evicted: the whole cache stays in the home tier and
 * the selection is what a GPU run would fetch. The policy keeps only page metadata, never KV rows.
 *
 * GQA: a page's score for a KV head is the max over the group's query heads of their bounds (an
 * upper bound of the largest logit any of them can give a key in the page); gqa=sum ranks by the
 * sum of the bounds instead. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "policies/baselines.h"
#include "policies/policy.h"

typedef struct quest_state {
    int page_size, dense_layers, gqa_sum;
    int64_t token_budget; /* 0: budget_ratio of the context */
    double budget_ratio;
    int L, S, G, H, hd, group, max_ctx, n_pages, Ls;
    size_t elem_bytes;     /* what a GPU run stores per metadata value (the KV dtype) */
    float *kmin, *kmax;    /* [Ls][S][G][n_pages][hd], layers dense_layers .. L-1 */
    int32_t *page_rows;    /* [Ls][S][G][n_pages] rows seen per page */
    float *pscore, *tmp;   /* [n_pages] */
    unsigned char *chosen; /* [n_pages] */
} quest_state;

static const ig_param_spec quest_params[] = {
    {"page_size", IG_PARAM_INT, "16", 1, 1 << 16, NULL, "tokens per page (by position)"},
    {"token_budget", IG_PARAM_INT, "0", 0, 1e8, NULL,
     "tokens selected per KV head and step; 0: budget_ratio of the context"},
    {"budget_ratio", IG_PARAM_FLOAT, "0.2", 0, 1, NULL,
     "token budget as a fraction of the context length (when token_budget=0)"},
    {"dense_layers", IG_PARAM_INT, "2", 0, 1024, NULL, "layers 0..N-1 attend to every token"},
    {"gqa", IG_PARAM_ENUM, "max", 0, 0, "max|sum",
     "page score of a KV head from its query heads' bounds: max or sum"},
};

float ig_quest_page_bound(const float *q, const float *kmin, const float *kmax, int hd) {
    float s = 0;
    for (int i = 0; i < hd; i++) {
        float a = q[i] * kmin[i], b = q[i] * kmax[i];
        s += a > b ? a : b;
    }
    return s;
}

static size_t page_index(const quest_state *s, int layer, int slot, int head, int64_t page) {
    return (((size_t)(layer - s->dense_layers) * (size_t)s->S + (size_t)slot) * (size_t)s->G +
            (size_t)head) *
               (size_t)s->n_pages +
           (size_t)page;
}

static void quest_fini(void *st) {
    quest_state *s = st;
    free(s->kmin);
    free(s->kmax);
    free(s->page_rows);
    free(s->pscore);
    free(s->tmp);
    free(s->chosen);
    memset(s, 0, sizeof *s);
}

static ig_status quest_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                            ig_policy_caps *caps, ig_error *err) {
    quest_state *s = st;
    const ig_model_config *c = env->cfg;
    if (ig_params_is_set(p, "token_budget") && ig_params_is_set(p, "budget_ratio"))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy quest: set token_budget (tokens) or budget_ratio, not both");
    s->page_size = (int)ig_params_num(p, "page_size");
    s->token_budget = (int64_t)ig_params_num(p, "token_budget");
    s->budget_ratio = ig_params_num(p, "budget_ratio");
    s->dense_layers = (int)ig_params_num(p, "dense_layers");
    caps->dense_layers = s->dense_layers;
    s->gqa_sum = !strcmp(ig_params_str(p, "gqa"), "sum");
    s->L = c->n_layer;
    s->S = env->n_slots;
    s->G = c->n_kv_head;
    s->H = c->n_head;
    s->hd = c->head_dim;
    s->group = c->n_head / c->n_kv_head;
    s->max_ctx = env->max_ctx;
    s->n_pages = (env->max_ctx + s->page_size - 1) / s->page_size;
    s->Ls = s->L > s->dense_layers ? s->L - s->dense_layers : 0;
    s->elem_bytes = ig_dtype_size(env->kv_dtype);
    size_t pages =
        (size_t)(s->Ls > 0 ? s->Ls : 1) * (size_t)s->S * (size_t)s->G * (size_t)s->n_pages;
    s->kmin = ig_malloc(pages * (size_t)s->hd * sizeof(float), err);
    s->kmax = ig_malloc(pages * (size_t)s->hd * sizeof(float), err);
    s->page_rows = ig_calloc(pages, sizeof(int32_t), err);
    s->pscore = ig_malloc((size_t)s->n_pages * sizeof(float), err);
    s->tmp = ig_malloc((size_t)s->n_pages * sizeof(float), err);
    s->chosen = ig_malloc((size_t)s->n_pages, err);
    if (!s->kmin || !s->kmax || !s->page_rows || !s->pscore || !s->tmp || !s->chosen) {
        quest_fini(s);
        return IG_ERR_NOMEM;
    }
    return IG_OK;
}

static void quest_reset_slot(void *st, int slot) {
    quest_state *s = st;
    for (int l = s->dense_layers; l < s->L; l++)
        for (int g = 0; g < s->G; g++)
            memset(s->page_rows + page_index(s, l, slot, g, 0), 0,
                   (size_t)s->n_pages * sizeof(int32_t));
}

static void quest_on_append(void *st, int layer, int slot, int head, int64_t e, int32_t pos,
                            const float *k, const float *v) {
    quest_state *s = st;
    (void)e;
    (void)v;
    if (layer < s->dense_layers) return;
    size_t pi = page_index(s, layer, slot, head, pos / s->page_size);
    float *mn = s->kmin + pi * (size_t)s->hd, *mx = s->kmax + pi * (size_t)s->hd;
    if (s->page_rows[pi]++ == 0) {
        memcpy(mn, k, (size_t)s->hd * sizeof(float));
        memcpy(mx, k, (size_t)s->hd * sizeof(float));
        return;
    }
    for (int i = 0; i < s->hd; i++) {
        if (k[i] < mn[i]) mn[i] = k[i];
        if (k[i] > mx[i]) mx[i] = k[i];
    }
}

static void select_all(const ig_entries_view *v, int32_t *out, int64_t *n_out) {
    int64_t n = 0;
    for (int64_t e = 0; e < v->high_water; e++)
        if (v->pos[e] >= 0) out[n++] = (int32_t)e;
    *n_out = n;
}

/* Pages of one KV head: the last (partial) page plus the top `extra` of the others by bound; ties
 * go to the older page. */
static void select_head(quest_state *s, int layer, int slot, int g, const float *q,
                        const ig_entries_view *v, int32_t *out, int64_t *n_out) {
    int64_t n_tok = v->n_tokens, ps = s->page_size;
    int64_t budget =
        s->token_budget > 0 ? s->token_budget : ig_budget_tokens(s->budget_ratio, n_tok);
    if (layer < s->dense_layers || n_tok <= 0 || budget >= n_tok) {
        select_all(v, out, n_out);
        return;
    }
    int64_t last = (n_tok - 1) / ps, last_rows = n_tok - last * ps;
    int64_t extra = budget > last_rows ? (budget - last_rows) / ps : 0;
    if (extra >= last) {
        select_all(v, out, n_out);
        return;
    }
    memset(s->chosen, 0, (size_t)(last + 1));
    s->chosen[last] = 1;
    if (extra > 0) {
        for (int64_t pg = 0; pg < last; pg++) {
            size_t pi = page_index(s, layer, slot, g, pg);
            if (s->page_rows[pi] == 0) {
                s->pscore[pg] = -INFINITY;
                continue;
            }
            const float *mn = s->kmin + pi * (size_t)s->hd, *mx = s->kmax + pi * (size_t)s->hd;
            float best = s->gqa_sum ? 0.0f : -INFINITY;
            for (int hh = 0; hh < s->group; hh++) {
                const float *qh = q + (size_t)(g * s->group + hh) * (size_t)s->hd;
                float b = ig_quest_page_bound(qh, mn, mx, s->hd);
                if (s->gqa_sum)
                    best += b;
                else if (b > best)
                    best = b;
            }
            s->pscore[pg] = best;
        }
        memcpy(s->tmp, s->pscore, (size_t)last * sizeof(float));
        float t = ig_cpu_kth_largest(s->tmp, last, extra);
        int64_t taken = 0;
        for (int64_t pg = 0; pg < last; pg++)
            if (s->pscore[pg] > t) {
                s->chosen[pg] = 1;
                taken++;
            }
        for (int64_t pg = 0; pg < last && taken < extra; pg++)
            if (s->pscore[pg] == t) {
                s->chosen[pg] = 1;
                taken++;
            }
    }
    int64_t n = 0;
    for (int64_t e = 0; e < v->high_water; e++) {
        int32_t p = v->pos[e];
        if (p >= 0 && s->chosen[p / ps]) out[n++] = (int32_t)e;
    }
    *n_out = n;
}

static void quest_select(void *st, int layer, int n, const int *slots, const float *q,
                         const ig_entries_view *ev, ig_selection *out) {
    quest_state *s = st;
    size_t qd = (size_t)s->H * (size_t)s->hd;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < s->G; g++)
            select_head(s, layer, slots[i], g, q + (size_t)i * qd,
                        &ev[(size_t)i * (size_t)s->G + g],
                        out[i].entries + (size_t)g * (size_t)out[i].max_per_head, &out[i].n[g]);
}

static size_t quest_device_bytes(const void *st) {
    /* Min and max keys per page of every sparse layer, in the run's KV dtype. */
    const quest_state *s = st;
    return (size_t)s->Ls * (size_t)s->S * (size_t)s->G * (size_t)s->n_pages * 2 * (size_t)s->hd *
           s->elem_bytes;
}

static const char *quest_budget(const void *st, char *buf, size_t n) {
    const quest_state *s = st;
    if (s->token_budget > 0)
        snprintf(buf, n,
                 "token_budget = %lld tokens read per KV head (pages of %d), layers %d and up",
                 (long long)s->token_budget, s->page_size, s->dense_layers);
    else
        snprintf(
            buf, n,
            "budget_ratio = %g of the current length read (whole pages of %d), layers %d and up",
            s->budget_ratio, s->page_size, s->dense_layers);
    return buf;
}

/* Keeps everything and reads budget_ratio of the context. */
static ig_status quest_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                                  ig_policy_cost_terms *t, ig_error *err) {
    (void)cfg;
    (void)err;
    t->fetch = ig_params_num(p, "budget_ratio");
    return IG_OK;
}

const ig_policy_ops ig_policy_quest = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "quest",
    /* .summary = */ "Quest: per-page min/max keys, top pages by q.k bound up to a token budget",
    /* .params = */ quest_params,
    /* .n_params = */ (int)(sizeof quest_params / sizeof quest_params[0]),
    /* .state_size = */ sizeof(quest_state),
    /* .init = */ quest_init,
    /* .fini = */ quest_fini,
    /* .capacity = */ NULL, /* every token */
    /* .reset_slot = */ quest_reset_slot,
    /* .on_prefill = */ NULL,
    /* .on_append = */ quest_on_append,
    /* .evict = */ NULL,
    /* .on_evict = */ NULL,
    /* .select_ahead = */ NULL,
    /* .select = */ quest_select,
    /* .on_attention = */ NULL,
    /* .device_bytes = */ quest_device_bytes,
    /* .host_bytes = */ NULL,
    /* .budget = */ quest_budget,
    /* .cost_terms = */ quest_cost_terms,
};
