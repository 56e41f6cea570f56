/* quest: query-aware page selection (Tang et al., ICML 2024). Tokens are grouped by position into
 * pages of page_size; per (layer, slot, KV head, page) the policy keeps the elementwise min and max
 * of the page's keys (after RoPE). At each decode step and layer it scores every page with an upper
 * bound of q . k, selects the best pages up to a token budget (always the last, partial page) and
 * the layer attends to those only. Nothing is evicted: the whole cache stays in the home tier and
 * the selection is what a GPU run would fetch. The policy keeps only page metadata, never KV rows.
 *
 * GQA: a page's score for a KV head is the max over the group's query heads of their bounds (an
 * upper bound of the largest logit any of them can give a key in the page); gqa=sum ranks by the
 * sum of the bounds instead.
 *
 * The page scores and the top pages run through a backend table (page_bounds, then topk over
 * every (sequence, KV head) at once; ties to the older page), next to the page metadata: on a
 * device table the metadata is mirrored there (the pages written since the last selection go up),
 * on a host table it is read in place. The table is the run's (env->be); where the engine gives
 * none (hooks driven by hand) or its table fails, a cpu table of the policy's own, the same
 * code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
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
    unsigned char *chosen; /* [n_pages] */
    /* selection through a backend table: the run's (env->be) or the policy's own (own_be) */
    ig_be *be;
    ig_be *own_be;
    int be_host;    /* the table reads host memory: metadata read in place */
    int dev_failed; /* the run's table failed: own_be from then on */
    int own_failed; /* own_be failed too (never expected): every entry selected */
    char failed_name[32];
    /* (sequence, KV head) selections of sparse layers: all, on the run's table, on own_be */
    long long selections, table_selections, own_selections, every_selections;
    float *kmin_d, *kmax_d; /* device tables: mirrors of kmin, kmax, page_rows */
    int32_t *rows_d;
    int32_t *dirty_lo, *dirty_hi;       /* [Ls][S][G]: pages written since the last upload */
    float *q_d;                         /* [S][H][hd] */
    int32_t *src_h, *np_h, *k_h, *mode; /* [S * G]: page table, pages scored, pages wanted */
    int32_t *src_d, *np_d, *k_d;
    float *ps_d; /* [S * G][n_pages] page scores */
    int32_t *idx_d, *cnt_d, *idx_h, *cnt_h;
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

static size_t page_index(const quest_state *s, int layer, int slot, int head, int64_t page) {
    return (((size_t)(layer - s->dense_layers) * (size_t)s->S + (size_t)slot) * (size_t)s->G +
            (size_t)head) *
               (size_t)s->n_pages +
           (size_t)page;
}

/* Releases the table's buffers (table_init's), leaving s->be NULL. */
static void table_free(quest_state *s) {
    if (s->be) {
        if (s->be_host) s->kmin_d = s->kmax_d = NULL, s->rows_d = NULL; /* the host arrays */
        void **bufs[] = {(void **)&s->q_d,   (void **)&s->src_d,  (void **)&s->np_d,
                         (void **)&s->k_d,   (void **)&s->ps_d,   (void **)&s->idx_d,
                         (void **)&s->cnt_d, (void **)&s->kmin_d, (void **)&s->kmax_d,
                         (void **)&s->rows_d};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
            if (*bufs[i]) ig_be_release(s->be, *bufs[i]);
            *bufs[i] = NULL;
        }
    }
    void **host[] = {(void **)&s->dirty_lo, (void **)&s->dirty_hi, (void **)&s->src_h,
                     (void **)&s->np_h,     (void **)&s->k_h,      (void **)&s->mode,
                     (void **)&s->idx_h,    (void **)&s->cnt_h};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(*host[i]);
        *host[i] = NULL;
    }
    s->be = NULL;
    s->be_host = 0;
}

static void quest_fini(void *st) {
    quest_state *s = st;
    table_free(s);
    ig_be_free(s->own_be);
    free(s->kmin);
    free(s->kmax);
    free(s->page_rows);
    free(s->chosen);
    memset(s, 0, sizeof *s);
}

/* The table's buffers: metadata mirrors on a device table (the page counts uploaded as they are,
 * so that nothing is dirty), the per-call arrays. On failure the caller releases what was made
 * (table_free). */
static ig_status table_init(quest_state *s, ig_be *be, size_t pages, ig_error *err) {
    size_t SG = (size_t)s->S * (size_t)s->G, P = (size_t)s->n_pages, hd = (size_t)s->hd;
    size_t tables = (size_t)s->Ls * SG;
    s->be = be;
    s->be_host = !be->caps.device_memory;
    s->dirty_lo = ig_malloc(tables * sizeof(int32_t), err);
    s->dirty_hi = ig_calloc(tables, sizeof(int32_t), err);
    s->src_h = ig_malloc(SG * sizeof(int32_t), err);
    s->np_h = ig_malloc(SG * sizeof(int32_t), err);
    s->k_h = ig_malloc(SG * sizeof(int32_t), err);
    s->mode = ig_malloc(SG * sizeof(int32_t), err);
    s->idx_h = ig_malloc(SG * P * sizeof(int32_t), err);
    s->cnt_h = ig_malloc(SG * sizeof(int32_t), err);
    if (!s->dirty_lo || !s->dirty_hi || !s->src_h || !s->np_h || !s->k_h || !s->mode || !s->idx_h ||
        !s->cnt_h)
        return IG_ERR_NOMEM;
    for (size_t t = 0; t < tables; t++) s->dirty_lo[t] = s->n_pages; /* none */
    if (s->be_host) {
        s->kmin_d = s->kmin;
        s->kmax_d = s->kmax;
        s->rows_d = s->page_rows;
    } else {
        if (!(s->kmin_d = ig_be_alloc(be, pages * hd * sizeof(float), err)) ||
            !(s->kmax_d = ig_be_alloc(be, pages * hd * sizeof(float), err)) ||
            !(s->rows_d = ig_be_alloc(be, pages * sizeof(int32_t), err)))
            return IG_ERR_NOMEM;
        IG_TRY(ig_be_upload(be, s->rows_d, s->page_rows, pages * sizeof(int32_t), err));
    }
    if (!(s->q_d = ig_be_alloc(be, (size_t)s->S * (size_t)s->H * hd * sizeof(float), err)) ||
        !(s->src_d = ig_be_alloc(be, SG * sizeof(int32_t), err)) ||
        !(s->np_d = ig_be_alloc(be, SG * sizeof(int32_t), err)) ||
        !(s->k_d = ig_be_alloc(be, SG * sizeof(int32_t), err)) ||
        !(s->ps_d = ig_be_alloc(be, SG * P * sizeof(float), err)) ||
        !(s->idx_d = ig_be_alloc(be, SG * P * sizeof(int32_t), err)) ||
        !(s->cnt_d = ig_be_alloc(be, SG * sizeof(int32_t), err)))
        return IG_ERR_NOMEM;
    return IG_OK;
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
    s->chosen = ig_malloc((size_t)s->n_pages, err);
    if (!s->kmin || !s->kmax || !s->page_rows || !s->chosen) {
        quest_fini(s);
        return IG_ERR_NOMEM;
    }
    if (s->Ls > 0) { /* the run's table, or a cpu table of the policy's own */
        ig_status rc = env->be ? IG_OK : ig_be_cpu_create(&s->own_be, err);
        if (rc == IG_OK) rc = table_init(s, env->be ? env->be : s->own_be, pages, err);
        if (rc != IG_OK) {
            ig_error_prefix(err, "policy quest: the page selection's table: ");
            quest_fini(s);
            return rc;
        }
    }
    return IG_OK;
}

/* Pages [p0, p1) of the page table holding `pi0` (its first page) changed on the host. */
static void mark_dirty(quest_state *s, size_t pi0, int32_t p0, int32_t p1) {
    if (!s->be || s->be_host) return;
    size_t t = pi0 / (size_t)s->n_pages;
    if (p0 < s->dirty_lo[t]) s->dirty_lo[t] = p0;
    if (p1 > s->dirty_hi[t]) s->dirty_hi[t] = p1;
}

static void quest_reset_slot(void *st, int slot) {
    quest_state *s = st;
    for (int l = s->dense_layers; l < s->L; l++)
        for (int g = 0; g < s->G; g++) {
            memset(s->page_rows + page_index(s, l, slot, g, 0), 0,
                   (size_t)s->n_pages * sizeof(int32_t));
            mark_dirty(s, page_index(s, l, slot, g, 0), 0, s->n_pages);
        }
}

static void quest_on_append(void *st, int layer, int slot, int head, int64_t e, int32_t pos,
                            const float *k, const float *v) {
    quest_state *s = st;
    (void)e;
    (void)v;
    if (layer < s->dense_layers) return;
    int32_t page = pos / s->page_size;
    size_t pi = page_index(s, layer, slot, head, page);
    float *mn = s->kmin + pi * (size_t)s->hd, *mx = s->kmax + pi * (size_t)s->hd;
    mark_dirty(s, page_index(s, layer, slot, head, 0), page, page + 1);
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

/* What one KV head reads: every entry (0), or the last (partial) page `last` plus the top `extra`
 * of the pages before it by bound (1). */
static int plan_head(const quest_state *s, int layer, const ig_entries_view *v, int64_t *last,
                     int64_t *extra) {
    int64_t n_tok = v->n_tokens, ps = s->page_size;
    int64_t budget =
        s->token_budget > 0 ? s->token_budget : ig_budget_tokens(s->budget_ratio, n_tok);
    if (layer < s->dense_layers || n_tok <= 0 || budget >= n_tok) return 0;
    *last = (n_tok - 1) / ps;
    int64_t last_rows = n_tok - *last * ps;
    *extra = budget > last_rows ? (budget - last_rows) / ps : 0;
    return *extra < *last;
}

/* The entries of the chosen pages (s->chosen, pages 0 .. last). */
static void chosen_entries(const quest_state *s, const ig_entries_view *v, int32_t *out,
                           int64_t *n_out) {
    int64_t n = 0, ps = s->page_size;
    for (int64_t e = 0; e < v->high_water; e++) {
        int32_t p = v->pos[e];
        if (p >= 0 && s->chosen[p / ps]) out[n++] = (int32_t)e;
    }
    *n_out = n;
}

/* The selections of n <= S sequences through the table: the pages written since the last upload
 * go up (device tables), then one page_bounds and one topk over every (sequence, KV head), the
 * top pages come down: the last (partial) page plus the top `extra` of the others by bound, ties
 * to the older page. Returns the first error. */
static ig_status select_on_table(quest_state *s, int layer, int n, const int *slots, const float *q,
                                 const ig_entries_view *ev, ig_selection *out, ig_error *err) {
    ig_be *be = s->be;
    int G = s->G, T = n * G;
    size_t P = (size_t)s->n_pages, hd = (size_t)s->hd, qd = (size_t)s->H * hd;
    int any = 0;
    for (int t = 0; t < T; t++) {
        int i = t / G, g = t % G;
        int64_t last = 0, extra = 0;
        s->mode[t] = plan_head(s, layer, &ev[t], &last, &extra);
        size_t pi0 = page_index(s, layer, slots[i], g, 0);
        s->src_h[t] = (int32_t)(pi0 / P);
        s->np_h[t] = s->mode[t] ? (int32_t)last : 0;
        s->k_h[t] = s->mode[t] ? (int32_t)extra : 0;
        if (s->k_h[t] > 0) any = 1;
        if (s->mode[t] && !s->be_host) { /* this page table's changed pages go up */
            size_t tb = pi0 / P;
            int32_t lo = s->dirty_lo[tb], hi = s->dirty_hi[tb];
            if (lo < hi) {
                size_t a = pi0 + (size_t)lo, m = (size_t)(hi - lo);
                IG_TRY(ig_be_upload(be, s->kmin_d + a * hd, s->kmin + a * hd,
                                    m * hd * sizeof(float), err));
                IG_TRY(ig_be_upload(be, s->kmax_d + a * hd, s->kmax + a * hd,
                                    m * hd * sizeof(float), err));
                IG_TRY(ig_be_upload(be, s->rows_d + a, s->page_rows + a, m * sizeof(int32_t), err));
                s->dirty_lo[tb] = s->n_pages;
                s->dirty_hi[tb] = 0;
            }
        }
    }
    if (any) {
        size_t tb = (size_t)T * sizeof(int32_t);
        IG_TRY(ig_be_upload(be, s->q_d, q, (size_t)n * qd * sizeof(float), err));
        IG_TRY(ig_be_upload(be, s->src_d, s->src_h, tb, err));
        IG_TRY(ig_be_upload(be, s->np_d, s->np_h, tb, err));
        IG_TRY(ig_be_upload(be, s->k_d, s->k_h, tb, err));
        IG_TRY(ig_be_page_bounds(be, s->q_d, s->group, s->hd, s->kmin_d, s->kmax_d, s->rows_d,
                                 (int64_t)P, s->src_d, s->np_d, s->gqa_sum, s->ps_d, (int64_t)P, T,
                                 err));
        IG_TRY(ig_be_topk(be, s->ps_d, (int64_t)P, T, (int64_t)P, s->np_d, 0, s->k_d, s->idx_d,
                          (int64_t)P, s->cnt_d, err));
        IG_TRY(ig_be_download(be, s->idx_h, s->idx_d, (size_t)T * P * sizeof(int32_t), err));
        IG_TRY(ig_be_download(be, s->cnt_h, s->cnt_d, tb, err));
    }
    for (int t = 0; t < T; t++) {
        int i = t / G, g = t % G;
        int32_t *o = out[i].entries + (size_t)g * (size_t)out[i].max_per_head;
        if (!s->mode[t]) {
            select_all(&ev[t], o, &out[i].n[g]);
            continue;
        }
        memset(s->chosen, 0, (size_t)s->np_h[t] + 1);
        s->chosen[s->np_h[t]] = 1;
        if (s->k_h[t] > 0)
            for (int32_t j = 0; j < s->cnt_h[t]; j++) s->chosen[s->idx_h[(size_t)t * P + j]] = 1;
        chosen_entries(s, &ev[t], o, &out[i].n[g]);
    }
    return IG_OK;
}

/* The run's table failed: its buffers go (the host arrays are complete: nothing to mirror back)
 * and the policy's own cpu table takes over, reading them in place. 0 when that cannot be set up.
 */
static int switch_to_own(quest_state *s, ig_error *err) {
    snprintf(s->failed_name, sizeof s->failed_name, "%s", s->be->caps.name);
    s->dev_failed = 1;
    table_free(s);
    size_t pages = (size_t)s->Ls * (size_t)s->S * (size_t)s->G * (size_t)s->n_pages;
    if (!s->own_be && ig_be_cpu_create(&s->own_be, err) != IG_OK) return 0;
    if (table_init(s, s->own_be, pages, err) != IG_OK) {
        table_free(s);
        return 0;
    }
    return 1;
}

static void quest_select(void *st, int layer, int n, const int *slots, const float *q,
                         const ig_entries_view *ev, ig_selection *out) {
    quest_state *s = st;
    int G = s->G;
    size_t qd = (size_t)s->H * (size_t)s->hd;
    int ok = 0;
    if (layer >= s->dense_layers) {
        s->selections += (long long)n * G;
        if (s->be && !s->own_failed) {
            ig_error err;
            ig_error_clear(&err);
            /* the table's arrays hold S sequences: a larger call in parts */
            for (int tries = 0; tries < 2 && !ok; tries++) {
                ig_status rc = IG_OK;
                for (int i0 = 0; i0 < n && rc == IG_OK; i0 += s->S)
                    rc = select_on_table(s, layer, n - i0 < s->S ? n - i0 : s->S, slots + i0,
                                         q + (size_t)i0 * qd, ev + (size_t)i0 * (size_t)G, out + i0,
                                         &err);
                if (rc == IG_OK) {
                    ok = 1;
                    if (s->be == s->own_be)
                        s->own_selections += (long long)n * G;
                    else
                        s->table_selections += (long long)n * G;
                } else if (s->be != s->own_be) {
                    IG_WARN("quest: page scores on the %s backend failed, a cpu table of the "
                            "policy's own takes over: %s",
                            s->be->caps.name, err.msg);
                    ig_error_clear(&err);
                    if (!switch_to_own(s, &err)) break;
                } else {
                    break;
                }
            }
            if (!ok) {
                IG_WARN("quest: page scores on the policy's own cpu table failed, every entry is "
                        "selected from now on: %s",
                        err.msg);
                s->own_failed = 1;
            }
        }
    }
    if (ok) return;
    if (layer >= s->dense_layers) s->every_selections += (long long)n * G;
    for (int i = 0; i < n; i++) /* dense layers (and, never expected, no table that works) */
        for (int g = 0; g < G; g++)
            select_all(&ev[(size_t)i * (size_t)G + (size_t)g],
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
    const char *run = s->dev_failed                 ? s->failed_name
                      : s->be && s->be != s->own_be ? s->be->caps.name
                                                    : NULL;
    ig_policy_tables_note(buf, n, "page scores and top pages", run, s->table_selections,
                          s->own_be != NULL, s->own_selections, s->dev_failed, s->every_selections,
                          s->selections);
    return buf;
}

/* Keeps everything and reads budget_ratio of the context. */
static ig_status quest_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                                  ig_policy_cost_terms *t, ig_error *err) {
    (void)cfg;
    (void)err;
    t->fetch = ig_params_num(p, "budget_ratio");
    t->dense_layers = (int)ig_params_num(p, "dense_layers");
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
