/* h2o: Heavy-Hitter Oracle (Zhang et al., NeurIPS 2023). Per (layer, slot, KV head) the cache keeps
 * the tokens that have received the most attention so far (heavy hitters) plus the most recent
 * tokens, and evicts the others for good. This file only scores entries and names victims: the core
 * releases them and stores the new rows; it never reads or moves KV bytes.
 *
 * Budgets are fractions of the CURRENT sequence length n (the convention of InfiniGen's max_fetch,
 * so "20%" means the same for both): a layer keeps floor(heavy_ratio * n) heavy hitters plus
 * max(1, floor(recent_ratio * n)) recent tokens. The score of a token is the softmax probability it
 * received, summed over queries and steps and, under GQA, over the query heads that share its KV
 * head. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "policies/baselines.h"
#include "policies/policy.h"

typedef struct h2o_cand {
    float score;
    int32_t pos;
    int32_t entry;
    int recent;
} h2o_cand;

typedef struct h2o_state {
    double heavy_ratio, recent_ratio;
    int dense_layers;
    int L, S, G, H, hd, group, max_ctx;
    int64_t cap; /* entries per (layer, slot, KV head) table: capacity(max_ctx) at most */
    float scale;
    float *score;  /* [L][S][G][cap] heavy_hitter_score of the token held by each entry */
    int32_t *epos; /* [L][S][G][cap] position held by each entry, -1 when free */
    /* Scores of rows about to be stored (a prompt before its rows are written, or the decode
     * token's own probability): on_append moves them onto the entries. */
    float *stage; /* [G][max_ctx] */
    int stage_layer, stage_slot, stage_n;
    int32_t stage_pos0;
    h2o_cand *cand; /* [cap] */
    /* Hooks driven without an engine (env->be NULL) get no column sums from the core: the policy
     * computes them on a cpu table of its own (attention_colsum; its attention output, over the
     * keys as values, is not used). */
    ig_be *own_be;
    float *colsum_ws; /* [H][max_ctx] */
    float *kt;        /* [G][max_ctx][hd]: the prompt's keys in the op's layout */
    float *att;       /* [max_ctx][H][hd]: the op's attention output (unused) */
    float *ws;        /* the op's workspace, ws_floats */
    size_t ws_floats;
    int warned;
} h2o_state;

static const ig_param_spec h2o_params[] = {
    {"heavy_ratio", IG_PARAM_FLOAT, "0.1", 0, 1, NULL,
     "heavy hitters kept, a fraction of the current sequence length"},
    {"recent_ratio", IG_PARAM_FLOAT, "0.1", 0, 1, NULL,
     "recent tokens kept, a fraction of the current sequence length (at least the newest)"},
    {"dense_layers", IG_PARAM_INT, "0", 0, 1024, NULL,
     "layers 0..N-1 keep every token (2: as InfiniGen's artifact runs H2O)"},
};

static int64_t recent_tokens(const h2o_state *s, int64_t n) {
    int64_t r = ig_budget_tokens(s->recent_ratio, n);
    return r < 1 ? 1 : r;
}

static int64_t h2o_capacity(const void *st, int layer, int64_t n_tokens) {
    const h2o_state *s = st;
    if (layer < s->dense_layers) return n_tokens;
    int64_t c = ig_budget_tokens(s->heavy_ratio, n_tokens) + recent_tokens(s, n_tokens);
    return c < n_tokens ? c : n_tokens;
}

static size_t table_of(const h2o_state *s, int layer, int slot, int head) {
    return (((size_t)layer * (size_t)s->S + (size_t)slot) * (size_t)s->G + (size_t)head) *
           (size_t)s->cap;
}

static void h2o_fini(void *st) {
    h2o_state *s = st;
    free(s->score);
    free(s->epos);
    free(s->stage);
    free(s->colsum_ws);
    free(s->kt);
    free(s->att);
    free(s->ws);
    ig_be_free(s->own_be);
    free(s->cand);
    memset(s, 0, sizeof *s);
}

static ig_status h2o_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                          ig_policy_caps *caps, ig_error *err) {
    h2o_state *s = st;
    const ig_model_config *c = env->cfg;
    s->heavy_ratio = ig_params_num(p, "heavy_ratio");
    s->recent_ratio = ig_params_num(p, "recent_ratio");
    s->dense_layers = (int)ig_params_num(p, "dense_layers");
    s->L = c->n_layer;
    s->S = env->n_slots;
    s->G = c->n_kv_head;
    s->H = c->n_head;
    s->hd = c->head_dim;
    s->group = c->n_head / c->n_kv_head;
    s->max_ctx = env->max_ctx;
    s->scale = 1.0f / sqrtf((float)c->head_dim);
    /* The same bound as the core's entry tables: the largest capacity over layers. */
    s->cap = 1;
    for (int l = 0; l < s->L; l++) {
        int64_t cl = h2o_capacity(s, l, env->max_ctx);
        if (cl > s->cap) s->cap = cl;
    }
    if (s->cap > env->max_ctx) s->cap = env->max_ctx;
    size_t tables = (size_t)s->L * (size_t)s->S * (size_t)s->G, n = tables * (size_t)s->cap;
    size_t ctx = (size_t)env->max_ctx;
    s->score = ig_calloc(n, sizeof(float), err);
    s->epos = ig_malloc(n * sizeof(int32_t), err);
    s->stage = ig_calloc((size_t)s->G * ctx, sizeof(float), err);
    s->cand = ig_calloc((size_t)s->cap, sizeof(h2o_cand), err);
    if (!s->score || !s->epos || !s->stage || !s->cand) {
        h2o_fini(s);
        return IG_ERR_NOMEM;
    }
    if (!env->be) { /* no engine: the prompt's column sums on a table of the policy's own */
        ig_status rc = ig_be_cpu_create(&s->own_be, err);
        if (rc != IG_OK) {
            ig_error_prefix(err, "policy h2o: a cpu table of its own: ");
            h2o_fini(s);
            return rc;
        }
        size_t hd = (size_t)s->hd;
        s->ws_floats =
            ig_be_attention_colsum_ws(s->own_be, env->max_ctx, env->max_ctx, s->H, s->hd);
        s->colsum_ws = ig_malloc((size_t)s->H * ctx * sizeof(float), err);
        s->kt = ig_malloc((size_t)s->G * ctx * hd * sizeof(float), err);
        s->att = ig_malloc(ctx * (size_t)s->H * hd * sizeof(float), err);
        s->ws = ig_malloc((s->ws_floats ? s->ws_floats : 1) * sizeof(float), err);
        if (!s->colsum_ws || !s->kt || !s->att || !s->ws) {
            h2o_fini(s);
            return IG_ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) s->epos[i] = -1;
    s->stage_n = 0;
    caps->dense = 1;
    caps->dense_layers = s->dense_layers < s->L ? s->dense_layers : s->L;
    caps->wants_probs = 1;
    caps->wants_prefill_colsum = 1;
    return IG_OK;
}

static void h2o_reset_slot(void *st, int slot) {
    h2o_state *s = st;
    for (int l = 0; l < s->L; l++)
        for (int g = 0; g < s->G; g++) {
            size_t t = table_of(s, l, slot, g);
            memset(s->score + t, 0, (size_t)s->cap * sizeof(float));
            for (int64_t e = 0; e < s->cap; e++) s->epos[t + (size_t)e] = -1;
        }
    if (s->stage_slot == slot) s->stage_n = 0;
}

/* Column sums of causal softmax attention among the call's own rows, per query head, into
 * colsum_ws [H][max_ctx]: what the core's colsum holds when there is no earlier chunk. Keys of an
 * earlier chunk are not available to a policy, so a later chunk's queries only count within the
 * chunk (documented limitation). The op reads the keys as [G][n][hd] (and the same rows as
 * values: its attention output is not used). */
static ig_status prompt_colsum(h2o_state *s, const ig_prefill_view *v, ig_error *err) {
    int n = v->n_new, G = s->G;
    size_t hd = (size_t)s->hd, ctx = (size_t)s->max_ctx;
    for (int g = 0; g < G; g++)
        for (int i = 0; i < n; i++)
            memcpy(s->kt + ((size_t)g * (size_t)n + (size_t)i) * hd,
                   v->k + ((size_t)i * (size_t)G + (size_t)g) * hd, hd * sizeof(float));
    for (int h = 0; h < s->H; h++)
        memset(s->colsum_ws + (size_t)h * ctx, 0, (size_t)n * sizeof(float));
    return ig_be_attention_colsum(s->own_be, v->q, n, 0, s->kt, s->kt, n, s->H, G, s->hd, s->scale,
                                  s->ws, s->ws_floats, s->colsum_ws, (int64_t)ctx, s->att, err);
}

static void h2o_on_prefill(void *st, int layer, int slot, const ig_prefill_view *v) {
    h2o_state *s = st;
    if (layer < s->dense_layers || v->n_new <= 0) return; /* dense layers never evict */
    size_t ctx = (size_t)s->max_ctx;
    int n = v->n_new;
    s->stage_layer = layer;
    s->stage_slot = slot;
    s->stage_pos0 = v->pos0;
    s->stage_n = n;
    memset(s->stage, 0, (size_t)s->G * ctx * sizeof(float));
    if (v->colsum) {
        /* [n_head][colsum_stride]: keys 0 .. n_exist-1 are the existing entries in ascending
         * entry order (the core's prefill table), then the new rows. */
        size_t stride = (size_t)v->colsum_stride;
        for (int g = 0; g < s->G; g++) {
            size_t t = table_of(s, layer, slot, g);
            int64_t j = 0;
            for (int64_t e = 0; e < s->cap && j < v->n_exist; e++)
                if (s->epos[t + (size_t)e] >= 0) {
                    for (int hh = 0; hh < s->group; hh++)
                        s->score[t + (size_t)e] +=
                            v->colsum[(size_t)(g * s->group + hh) * stride + (size_t)j];
                    j++;
                }
            for (int i = 0; i < n; i++)
                for (int hh = 0; hh < s->group; hh++)
                    s->stage[(size_t)g * ctx + (size_t)i] +=
                        v->colsum[(size_t)(g * s->group + hh) * stride + (size_t)v->n_exist +
                                  (size_t)i];
        }
    } else {
        ig_error err;
        ig_error_clear(&err);
        ig_status rc = s->own_be ? prompt_colsum(s, v, &err)
                                 : ig_error_set(&err, IG_ERR_INVALID_ARG,
                                                "the engine gave no column sums (it must)");
        if (rc != IG_OK) { /* never expected: the prompt's rows start unscored */
            if (!s->warned)
                IG_WARN("h2o: the prompt's attention sums are missing, its rows start at score 0: "
                        "%s",
                        err.msg);
            s->warned = 1;
            return;
        }
        for (int g = 0; g < s->G; g++)
            for (int hh = 0; hh < s->group; hh++) {
                const float *cs = s->colsum_ws + (size_t)(g * s->group + hh) * ctx;
                for (int i = 0; i < n; i++) s->stage[(size_t)g * ctx + (size_t)i] += cs[i];
            }
    }
    /* Rows the core stored before calling us (a dense run that never evicts) take their scores
     * now; otherwise on_append picks them up from the stage. */
    for (int g = 0; g < s->G; g++) {
        size_t t = table_of(s, layer, slot, g);
        for (int64_t e = 0; e < s->cap; e++) {
            int32_t p = s->epos[t + (size_t)e];
            if (p >= v->pos0 && p < v->pos0 + n)
                s->score[t + (size_t)e] += s->stage[(size_t)g * ctx + (size_t)(p - v->pos0)];
        }
    }
}

static void h2o_on_append(void *st, int layer, int slot, int head, int64_t e, int32_t pos,
                          const float *k, const float *v) {
    h2o_state *s = st;
    (void)k;
    (void)v;
    IG_ASSERT(e >= 0 && e < s->cap);
    size_t t = table_of(s, layer, slot, head) + (size_t)e;
    s->epos[t] = pos;
    s->score[t] = 0;
    if (s->stage_n > 0 && s->stage_layer == layer && s->stage_slot == slot &&
        pos >= s->stage_pos0 && pos < s->stage_pos0 + s->stage_n)
        s->score[t] = s->stage[(size_t)head * (size_t)s->max_ctx + (size_t)(pos - s->stage_pos0)];
}

static void h2o_on_evict(void *st, int layer, int slot, int head, int64_t e) {
    h2o_state *s = st;
    IG_ASSERT(e >= 0 && e < s->cap);
    size_t t = table_of(s, layer, slot, head) + (size_t)e;
    s->epos[t] = -1;
    s->score[t] = 0;
}

static void h2o_on_attention(void *st, int layer, int slot, const ig_attn_view *v) {
    h2o_state *s = st;
    if (layer < s->dense_layers) return;
    size_t ctx = (size_t)s->max_ctx;
    for (int g = 0; g < s->G; g++) s->stage[(size_t)g * ctx] = 0;
    for (int h = 0; h < s->H; h++) {
        int g = h / s->group;
        const float *p = v->probs + (size_t)h * (size_t)v->stride;
        const int32_t *ent = v->entries + (size_t)g * (size_t)v->max_per_head;
        float *sc = s->score + table_of(s, layer, slot, g);
        int64_t n = v->n[g];
        for (int64_t j = 0; j < n; j++) sc[ent[j]] += p[j];
        s->stage[(size_t)g * ctx] += p[n]; /* the new token, stored right after this call */
    }
    s->stage_layer = layer;
    s->stage_slot = slot;
    s->stage_pos0 = v->new_pos;
    s->stage_n = 1;
}

/* Victims first: non-recent before recent (the latter only if the window alone overflows, which
 * the capacity rule prevents), lowest score first, then oldest. */
static int cand_cmp(const void *a, const void *b) {
    const h2o_cand *x = a, *y = b;
    if (x->recent != y->recent) return x->recent - y->recent;
    if (!x->recent && x->score != y->score) return x->score < y->score ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int h2o_evict(void *st, int layer, int slot, int head, const ig_entries_view *ev,
                     int n_victims, int32_t *victims) {
    h2o_state *s = st;
    const float *sc = s->score + table_of(s, layer, slot, head);
    int64_t boundary = ev->n_tokens - recent_tokens(s, ev->n_tokens);
    if (n_victims == 1) { /* the common case: one linear scan */
        int64_t best = -1;
        for (int64_t e = 0; e < ev->high_water; e++) {
            int32_t p = ev->pos[e];
            if (p < 0 || p >= boundary) continue;
            if (best < 0 || sc[e] < sc[best] || (sc[e] == sc[best] && p < ev->pos[best])) best = e;
        }
        if (best >= 0) {
            victims[0] = (int32_t)best;
            return 1;
        }
    }
    int64_t nc = 0;
    for (int64_t e = 0; e < ev->high_water; e++) {
        int32_t p = ev->pos[e];
        if (p < 0) continue;
        IG_ASSERT(nc < s->cap);
        s->cand[nc++] = (h2o_cand){sc[e], p, (int32_t)e, p >= boundary};
    }
    qsort(s->cand, (size_t)nc, sizeof *s->cand, cand_cmp);
    int got = 0;
    for (; got < n_victims && got < nc; got++) victims[got] = s->cand[got].entry;
    return got;
}

static size_t h2o_device_bytes(const void *st) {
    /* A GPU run keeps one float score per resident entry. */
    const h2o_state *s = st;
    size_t n = 0;
    for (int l = s->dense_layers; l < s->L; l++) {
        int64_t c = h2o_capacity(s, l, s->max_ctx);
        n += (size_t)(c < s->cap ? c : s->cap);
    }
    return n * (size_t)s->S * (size_t)s->G * sizeof(float);
}

float ig_h2o_entry_score(const void *st, int layer, int slot, int head, int64_t e) {
    const h2o_state *s = st;
    IG_ASSERT(e >= 0 && e < s->cap);
    return s->score[table_of(s, layer, slot, head) + (size_t)e];
}

static const char *h2o_budget(const void *st, char *buf, size_t n) {
    const h2o_state *s = st;
    snprintf(buf, n,
             "heavy_ratio + recent_ratio = %g of the current length kept and read, layers %d and "
             "up",
             s->heavy_ratio + s->recent_ratio, s->dense_layers);
    return buf;
}

/* Keeps and reads heavy_ratio + recent_ratio of the context (every layer counted alike). */
static ig_status h2o_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                                ig_policy_cost_terms *t, ig_error *err) {
    (void)cfg;
    (void)err;
    t->keep = t->fetch = ig_params_num(p, "heavy_ratio") + ig_params_num(p, "recent_ratio");
    t->attn_probs = 1; /* its hook adds every decode probability to its row's score */
    return IG_OK;
}

const ig_policy_ops ig_policy_h2o = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "h2o",
    /* .summary = */ "heavy hitters by accumulated attention + recent window, permanent eviction",
    /* .params = */ h2o_params,
    /* .n_params = */ (int)(sizeof h2o_params / sizeof h2o_params[0]),
    /* .state_size = */ sizeof(h2o_state),
    /* .init = */ h2o_init,
    /* .fini = */ h2o_fini,
    /* .capacity = */ h2o_capacity,
    /* .reset_slot = */ h2o_reset_slot,
    /* .on_prefill = */ h2o_on_prefill,
    /* .on_append = */ h2o_on_append,
    /* .evict = */ h2o_evict,
    /* .on_evict = */ h2o_on_evict,
    /* .select_ahead = */ NULL,
    /* .select = */ NULL,
    /* .on_attention = */ h2o_on_attention,
    /* .device_bytes = */ h2o_device_bytes,
    /* .host_bytes = */ NULL,
    /* .budget = */ h2o_budget,
    /* .cost_terms = */ h2o_cost_terms,
};
