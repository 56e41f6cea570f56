/* Conformance of every registered KV policy, through the same checks: selections lie within the
 * known tokens (entries in use, ascending, positions already seen), capacities are respected,
 * eviction frees what it reports (resident bytes follow), runs are deterministic, `full` is
 * bit-identical to the engine without a policy, in-place and copy access agree bit for bit, and a
 * policy at a 100% budget matches `full`. A checking proxy wraps each policy's hooks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "core/model/io/safetensors.h"
#include "core/model/model.h"
#include "policies/policy.h"
#include "tests/test_util.h"
#include "tests/toy_policy.h"

#define N_SEQ      3
#define MAX_LAYERS 8
#define MAX_HEADS  8
#define MAX_CTX    128

/* Settings under which a policy keeps and attends to every token (compared with `full`); NULL
 * marks a lossy policy, compared only within a bound. */
static const struct {
    const char *name;
    const char *sets[4];
    int n;
    int lossy;
} g_full_budget[] = {
    {"full", {NULL}, 0, 0},
    {"h2o", {"heavy_ratio=1", "recent_ratio=1"}, 2, 0},
    {"streaming", {"sinks=4", "window=100000"}, 2, 0},
    {"quest", {"token_budget=100000", "dense_layers=0"}, 2, 0},
    {"infinigen", {"max_fetch=1", "alpha=1000", "dense_layers=0"}, 3, 0},
    {"int4", {"bits=8"}, 1, 1},
    {"toy-random", {"fraction=1"}, 1, 0}, /* tests/toy_policy.c, registered by suite_init */
};

/* ---- the checking proxy ---- */

static const ig_policy_ops *g_real;
static ig_policy_ops g_proxy;
static int g_violations;
static const char *g_first_violation;
/* entries in use per (layer, slot, head), as the policy has been told */
static unsigned char g_inuse[MAX_LAYERS][N_SEQ][MAX_HEADS][MAX_CTX];
static int64_t g_count[MAX_LAYERS][N_SEQ][MAX_HEADS];
static int64_t g_tokens[N_SEQ];

static void violation(const char *what) {
    if (!g_violations++) g_first_violation = what;
}

static int64_t g_sel_entries, g_sel_resident; /* summed over every checked selection */

static void check_sel(const ig_entries_view *ev, const ig_selection *sel, int n_heads) {
    for (int g = 0; g < n_heads; g++) {
        const ig_entries_view *v = &ev[g];
        g_sel_entries += sel->n[g];
        g_sel_resident += v->n_used;
        if (sel->n[g] < 0 || sel->n[g] > v->n_used) violation("selection larger than resident");
        const int32_t *e = sel->entries + (size_t)g * (size_t)sel->max_per_head;
        for (int64_t j = 0; j < sel->n[g]; j++) {
            if (e[j] < 0 || e[j] >= v->high_water) {
                violation("selection outside the entry table");
                continue;
            }
            if (v->pos[e[j]] < 0) violation("selection of a free entry");
            if (v->pos[e[j]] >= v->n_tokens) violation("selection of an unseen position");
            if (j > 0 && e[j] <= e[j - 1]) violation("selection not ascending");
        }
    }
}

static int g_n_kv_head;

static void px_select_ahead(void *st, int layer, int n, const int *slots, const float *x,
                            const ig_entries_view *ev, ig_selection *out) {
    g_real->select_ahead(st, layer, n, slots, x, ev, out);
    for (int i = 0; i < n; i++)
        check_sel(ev + (size_t)i * (size_t)g_n_kv_head, &out[i], g_n_kv_head);
}

static void px_select(void *st, int layer, int n, const int *slots, const float *q,
                      const ig_entries_view *ev, ig_selection *out) {
    g_real->select(st, layer, n, slots, q, ev, out);
    for (int i = 0; i < n; i++)
        check_sel(ev + (size_t)i * (size_t)g_n_kv_head, &out[i], g_n_kv_head);
}

static int px_evict(void *st, int layer, int slot, int head, const ig_entries_view *ev,
                    int n_victims, int32_t *victims) {
    int got = g_real->evict(st, layer, slot, head, ev, n_victims, victims);
    if (got != n_victims) violation("evict returned a different count than asked");
    for (int i = 0; i < got; i++) {
        if (victims[i] < 0 || victims[i] >= ev->high_water || ev->pos[victims[i]] < 0)
            violation("victim is not an entry in use");
        for (int j = 0; j < i; j++)
            if (victims[j] == victims[i]) violation("victim reported twice");
    }
    return got;
}

static void px_on_evict(void *st, int layer, int slot, int head, int64_t e) {
    if (layer < MAX_LAYERS && slot < N_SEQ && head < MAX_HEADS && e < MAX_CTX) {
        if (!g_inuse[layer][slot][head][e]) violation("evicted an entry not in use");
        g_inuse[layer][slot][head][e] = 0;
        g_count[layer][slot][head]--;
    }
    if (g_real->on_evict) g_real->on_evict(st, layer, slot, head, e);
}

static void px_on_append(void *st, int layer, int slot, int head, int64_t e, int32_t pos,
                         const float *k, const float *v) {
    if (layer < MAX_LAYERS && slot < N_SEQ && head < MAX_HEADS && e < MAX_CTX) {
        if (g_inuse[layer][slot][head][e]) violation("stored into an entry still in use");
        g_inuse[layer][slot][head][e] = 1;
        int64_t c = ++g_count[layer][slot][head];
        int64_t cap = g_real->capacity(st, layer, g_tokens[slot]);
        if (c > cap) violation("more entries than the policy's capacity");
    }
    if (g_real->on_append) g_real->on_append(st, layer, slot, head, e, pos, k, v);
}

static void px_reset_slot(void *st, int slot) {
    memset(g_inuse, 0, sizeof g_inuse); /* only used between whole runs here */
    memset(g_count, 0, sizeof g_count);
    if (g_real->reset_slot) g_real->reset_slot(st, slot);
}

static const ig_policy_ops *make_proxy(const ig_policy_ops *real) {
    /* the proxy calls the real hooks as the core would: through the resolved table */
    static ig_policy_ops resolved;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_policy_ops_resolve(real, &resolved, &err), IG_OK);
    g_real = &resolved;
    g_proxy = *real;
    g_proxy.select_ahead = real->select_ahead ? px_select_ahead : NULL;
    g_proxy.select = real->select ? px_select : NULL;
    g_proxy.evict = real->evict ? px_evict : NULL;
    g_proxy.on_evict = px_on_evict;
    g_proxy.on_append = px_on_append;
    g_proxy.reset_slot = px_reset_slot;
    return &g_proxy;
}

/* ---- workload: reference token sequences, prefill then teacher-forced decode ---- */

typedef struct workload {
    ig_safetensors *st;
    const int32_t *tokens[N_SEQ];
    int len[N_SEQ];
    int prefill[N_SEQ];
} workload;

static int load_workload(const char *model_fixture, workload *w) {
    char path[4200];
    snprintf(path, sizeof path, "%s/reference.safetensors", ig_test_fixture(model_fixture));
    ig_error err;
    if (ig_safetensors_open(path, &w->st, &err) != IG_OK) return -1;
    static const int which[N_SEQ] = {1, 2, 3}; /* lengths 17, 33, 64 */
    static const int pre[N_SEQ] = {5, 12, 9};
    for (int i = 0; i < N_SEQ; i++) {
        char name[32];
        snprintf(name, sizeof name, "tokens_%d", which[i]);
        const ig_st_tensor *t = ig_safetensors_find(w->st, name);
        if (!t) return -1;
        w->tokens[i] = t->data;
        w->len[i] = (int)t->shape[0];
        w->prefill[i] = pre[i];
    }
    return 0;
}

/* Runs the workload; returns all logits in order of production (malloc'd), *n_out floats. */
static float *run(const ig_model *m, const workload *w, const ig_policy_ops *ops,
                  const ig_policy_params *params, ig_kv_access access, size_t *n_out,
                  size_t *home_bytes_ok) {
    const ig_model_config *c = ig_model_get_config(m);
    ig_engine_opts o = {.max_seqs = N_SEQ,
                        .max_ctx = MAX_CTX,
                        .max_batch_tokens = 64,
                        .threads = 2,
                        .policy = ops,
                        .policy_params = params,
                        .kv_access = access};
    ig_engine *e = NULL;
    ig_error err;
    memset(g_inuse, 0, sizeof g_inuse);
    memset(g_count, 0, sizeof g_count);
    if (ig_engine_create(m, &o, &e, &err) != IG_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return NULL;
    }
    size_t cap = 0, n = 0;
    for (int i = 0; i < N_SEQ; i++) cap += (size_t)w->len[i];
    float *out = malloc(cap * (size_t)c->vocab * sizeof(float));
    ig_seq_tokens seqs[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        seqs[i] = (ig_seq_tokens){i, w->tokens[i], w->prefill[i]};
        g_tokens[i] = w->prefill[i];
    }
    int ok = ig_engine_forward(e, seqs, N_SEQ, &err) == IG_OK;
    if (ok) {
        ig_engine_logits(e, 0, ig_engine_n_rows(e), out);
        n += (size_t)ig_engine_n_rows(e) * (size_t)c->vocab;
    }
    int done[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) done[i] = w->prefill[i];
    for (int step = 0; ok; step++) {
        int ns = 0;
        for (int i = 0; i < N_SEQ; i++)
            if (done[i] < w->len[i]) {
                seqs[ns++] = (ig_seq_tokens){i, w->tokens[i] + done[i], 1};
                g_tokens[i] = done[i] + 1;
            }
        if (ns == 0) break;
        if (ig_engine_forward(e, seqs, ns, &err) != IG_OK) {
            fprintf(stderr, "forward: %s\n", err.msg);
            ok = 0;
            break;
        }
        ig_engine_logits(e, 0, ns, out + n);
        n += (size_t)ns * (size_t)c->vocab;
        for (int k = 0; k < ns; k++) done[seqs[k].slot]++;
        /* resident bytes must equal the entries the policy was told about */
        if (home_bytes_ok && ops == &g_proxy) {
            int64_t entries = 0;
            for (int l = 0; l < c->n_layer && l < MAX_LAYERS; l++)
                for (int s = 0; s < N_SEQ; s++)
                    for (int g = 0; g < c->n_kv_head && g < MAX_HEADS; g++)
                        entries += g_count[l][s][g];
            size_t home = ig_engine_kv_home_bytes(e);
            if (home != 2 * (size_t)entries * ig_engine_kv_row_bytes(e)) *home_bytes_ok = 0;
        }
    }
    ig_engine_free(e);
    if (!ok) {
        free(out);
        return NULL;
    }
    *n_out = n;
    return out;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static ig_model *g_models[2];
static workload g_work[2];
static const char *g_fixtures[2] = {"tiny_llama", "tiny_opt"};

static int suite_init(void) {
    /* A policy written outside policies/ joins every test below that walks the registry. */
    ig_error rerr;
    if (!ig_policy_find(ig_toy_random_policy.name) &&
        ig_policy_register(&ig_toy_random_policy, &rerr) != IG_OK) {
        fprintf(stderr, "%s\n", rerr.msg);
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_AUTO};
        ig_error err;
        if (ig_model_load(ig_test_fixture(g_fixtures[i]), &o, &g_models[i], &err) != IG_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        if (load_workload(g_fixtures[i], &g_work[i]) != 0) return 1;
        const ig_model_config *c = ig_model_get_config(g_models[i]);
        if (c->n_layer > MAX_LAYERS || c->n_kv_head > MAX_HEADS) return 1;
    }
    return 0;
}

static int suite_clean(void) {
    for (int i = 0; i < 2; i++) {
        ig_model_free(g_models[i]);
        ig_safetensors_close(g_work[i].st);
    }
    return 0;
}

static ig_policy_params *params_of(const ig_policy_ops *ops, const char *const *sets, int n) {
    ig_policy_params *p = NULL;
    ig_error err;
    if (ig_policy_params_parse(ops, sets, n, &p, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    return p;
}

/* Every policy, default parameters: the proxy's checks, determinism, copy == in place. */
static void test_conformance(void) {
    const ig_policy_ops *const *all = ig_policy_list();
    for (int pi = 0; all[pi]; pi++) {
        for (int mi = 0; mi < 2; mi++) {
            const ig_model *m = g_models[mi];
            g_n_kv_head = ig_model_get_config(m)->n_kv_head;
            ig_policy_params *params = params_of(all[pi], NULL, 0);
            CU_ASSERT_PTR_NOT_NULL_FATAL(params);
            g_violations = 0;
            size_t n1 = 0, n2 = 0, n3 = 0, bytes_ok = 1;
            float *a =
                run(m, &g_work[mi], make_proxy(all[pi]), params, IG_KV_ACCESS_AUTO, &n1, &bytes_ok);
            float *b =
                run(m, &g_work[mi], make_proxy(all[pi]), params, IG_KV_ACCESS_AUTO, &n2, NULL);
            float *c =
                run(m, &g_work[mi], make_proxy(all[pi]), params, IG_KV_ACCESS_COPY, &n3, NULL);
            printf("\n    %-10s %-10s violations %d%s%s, deterministic %s, copy==inplace %s",
                   all[pi]->name, g_fixtures[mi], g_violations, g_violations ? ": " : "",
                   g_violations ? g_first_violation : "",
                   a && b && n1 == n2 && !memcmp(a, b, n1 * sizeof(float)) ? "yes" : "NO",
                   a && c && n1 == n3 && !memcmp(a, c, n1 * sizeof(float)) ? "yes" : "no");
            if (a && c && n1 == n3) printf(" (max diff %.3g)", max_diff(a, c, n1));
            CU_ASSERT_PTR_NOT_NULL(a);
            CU_ASSERT_EQUAL(g_violations, 0);
            CU_ASSERT(bytes_ok);
            CU_ASSERT(a && b && n1 == n2 && !memcmp(a, b, n1 * sizeof(float)));
            CU_ASSERT(a && c && n1 == n3 && max_diff(a, c, n1) <= 1e-4);
            /* Encoded rows: attention decodes them in place to the same floats copy access
             * decodes into its working set, and both run the same kernel: bit for bit. */
            ig_policy_cost_terms ct;
            ig_error cerr;
            CU_ASSERT_FATAL(ig_policy_get_cost_terms(all[pi], params, ig_model_get_config(m), &ct,
                                                     &cerr) == IG_OK);
            if (ct.codec_set && !ig_kv_codec_is_exact(&ct.codec))
                CU_ASSERT(a && c && n1 == n3 && !memcmp(a, c, n1 * sizeof(float)));
            free(a);
            free(b);
            free(c);
            ig_policy_params_free(params);
        }
    }
    printf("\n    ");
}

/* `full` equals the engine without a policy bit for bit; each policy at a 100% budget equals
 * `full` (lossy codecs within a bound). */
static void test_full_budget_matches(void) {
    const ig_policy_ops *const *all = ig_policy_list();
    for (int pi = 0; all[pi]; pi++) {
        int k = -1;
        for (size_t j = 0; j < sizeof g_full_budget / sizeof g_full_budget[0]; j++)
            if (!strcmp(g_full_budget[j].name, all[pi]->name)) k = (int)j;
        if (k < 0)
            fprintf(stderr, "\n    policy %s has no 100%% budget setting here\n", all[pi]->name);
        CU_ASSERT_FATAL(k >= 0);
        for (int mi = 0; mi < 2; mi++) {
            const ig_model *m = g_models[mi];
            size_t n0 = 0, n1 = 0;
            float *dense = run(m, &g_work[mi], NULL, NULL, IG_KV_ACCESS_AUTO, &n0, NULL);
            ig_policy_params *p = params_of(all[pi], g_full_budget[k].sets, g_full_budget[k].n);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            float *got = run(m, &g_work[mi], all[pi], p, IG_KV_ACCESS_AUTO, &n1, NULL);
            CU_ASSERT_FATAL(dense && got && n0 == n1);
            double d = max_diff(dense, got, n0);
            printf("\n    %-10s %-10s at 100%% budget: max |logit - dense| %.3g", all[pi]->name,
                   g_fixtures[mi], d);
            int exact = !strcmp(all[pi]->name, "full");
            /* A lossy codec at its finest setting: within 2% of the largest |logit| (8-bit KV on
             * the tiny models moves logits by about 1%). */
            double maxabs = 0;
            for (size_t i = 0; i < n0; i++)
                if (fabs(dense[i]) > maxabs) maxabs = fabs(dense[i]);
            double bound = g_full_budget[k].lossy ? 0.02 * maxabs : 1e-4;
            if (exact) CU_ASSERT(!memcmp(dense, got, n0 * sizeof(float)));
            CU_ASSERT(d <= bound);
            free(dense);
            free(got);
            ig_policy_params_free(p);
        }
    }
    printf("\n    ");
}

/* Every policy with a dense_layers parameter, dense_layers 0, 1 and 2, on 4-layer models (random
 * weights, the fixtures' shapes): in-place and copy access give the same logits. Layer l + 2
 * shares layer l's selection buffer, so a selection left over from two layers back (a bug fixed
 * in the engine) shows here; a policy whose in-place path attends through the dense causal kernel
 * (every layer dense) is compared within 1e-4, every other case bit for bit. */
static void test_dense_layers_access(void) {
    const ig_policy_ops *const *all = ig_policy_list();
    for (int mi = 0; mi < 2; mi++) {
        ig_model_config c = *ig_model_get_config(g_models[mi]);
        c.n_layer = 4;
        ig_model *m = NULL;
        ig_error err;
        CU_ASSERT_FATAL(
            ig_model_create_dummy(&c, IG_DTYPE_F32, 7 + (uint64_t)mi, "deep", &m, &err) == IG_OK);
        g_n_kv_head = c.n_kv_head;
        for (int pi = 0; all[pi]; pi++) {
            int has = 0;
            for (int k = 0; k < all[pi]->n_params; k++)
                has |= !strcmp(all[pi]->params[k].name, "dense_layers");
            for (int dl = 0; dl <= 2; dl++) {
                if (!has && dl > 0) break;
                char set[32];
                snprintf(set, sizeof set, "dense_layers=%d", dl);
                const char *sets[] = {set};
                ig_policy_params *p = params_of(all[pi], sets, has);
                CU_ASSERT_PTR_NOT_NULL_FATAL(p);
                g_violations = 0;
                size_t n1 = 0, n2 = 0;
                /* encoded rows (int4) cannot be read in place: auto is copy there */
                float *a =
                    run(m, &g_work[mi], make_proxy(all[pi]), p, IG_KV_ACCESS_AUTO, &n1, NULL);
                float *b =
                    run(m, &g_work[mi], make_proxy(all[pi]), p, IG_KV_ACCESS_COPY, &n2, NULL);
                int same = a && b && n1 == n2 && !memcmp(a, b, n1 * sizeof(float));
                double d = a && b && n1 == n2 ? max_diff(a, b, n1) : INFINITY;
                printf("\n    %-10s %-10s dense_layers=%d: in place vs copy max diff %.3g%s",
                       all[pi]->name, g_fixtures[mi], dl, d, same ? " (identical)" : "");
                CU_ASSERT_EQUAL(g_violations, 0);
                /* dense policies, and infinigen with every layer dense, attend in place through
                 * the causal kernel (another summation order than the gathered rows) */
                int dense_path = !strcmp(all[pi]->name, "full") ||
                                 (!strcmp(all[pi]->name, "infinigen") && dl >= c.n_layer);
                if (dense_path) {
                    CU_ASSERT(d <= 1e-4);
                } else {
                    CU_ASSERT(same);
                }
                free(a);
                free(b);
                ig_policy_params_free(p);
            }
        }
        ig_model_free(m);
    }
    printf("\n    ");
}

/* Parameter tables: unknown names and out-of-range values are refused, naming the valid ones. */
static void test_params_rejected(void) {
    const ig_policy_ops *const *all = ig_policy_list();
    ig_error err;
    ig_policy_params *p = NULL;
    for (int pi = 0; all[pi]; pi++) {
        const char *bad[] = {"no_such_param=1"};
        CU_ASSERT_EQUAL(ig_policy_params_parse(all[pi], bad, 1, &p, &err), IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no parameter 'no_such_param'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "parameters:"));
        for (int k = 0; k < all[pi]->n_params; k++) {
            const ig_param_spec *s = &all[pi]->params[k];
            char set[160];
            if (s->type == IG_PARAM_INT || s->type == IG_PARAM_FLOAT)
                snprintf(set, sizeof set, "%s=%g", s->name, s->max + 1e9);
            else if (s->type == IG_PARAM_ENUM)
                snprintf(set, sizeof set, "%s=not-a-choice", s->name);
            else if (s->type == IG_PARAM_BOOL)
                snprintf(set, sizeof set, "%s=maybe", s->name);
            else
                continue;
            const char *one[] = {set};
            CU_ASSERT_EQUAL(ig_policy_params_parse(all[pi], one, 1, &p, &err), IG_ERR_INVALID_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, s->name));
        }
    }
    const char *notkv[] = {"alpha"};
    CU_ASSERT_EQUAL(ig_policy_params_parse(ig_policy_find("full"), notkv, 1, &p, &err),
                    IG_ERR_INVALID_ARG);
}

static ig_status fake_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                                 ig_policy_cost_terms *t, ig_error *err) {
    (void)p;
    (void)cfg;
    (void)err;
    t->fetch = 0.5;
    return IG_OK;
}

/* The interface's versions: a table is usable from version 1 to IG_POLICY_API_VERSION with its
 * required hooks; a hook newer than the table's version is not read (a version-1 table's
 * cost_terms slot is ignored, so the defaults apply). int4's cost terms give the row format its
 * init chooses. */
static void test_versions_and_cost_terms(void) {
    ig_error err;
    ig_policy_ops r;
    ig_policy_ops t = *ig_policy_find("int4");
    CU_ASSERT_EQUAL(ig_policy_ops_check(&t, &err), IG_OK);
    t.version = 0;
    CU_ASSERT_EQUAL(ig_policy_ops_check(&t, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "policy int4: interface version 0"));
    t.version = IG_POLICY_API_VERSION + 1;
    CU_ASSERT_EQUAL(ig_policy_ops_check(&t, &err), IG_ERR_INVALID_ARG);
    t.version = 1;
    CU_ASSERT_EQUAL(ig_policy_ops_check(&t, &err), IG_OK);
    t.capacity = NULL; /* int4 has no evict hook: the trivial capacity is right for it */
    CU_ASSERT_EQUAL(ig_policy_ops_check(&t, &err), IG_OK);
    t = *ig_policy_find("h2o");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t.evict);
    t.capacity = NULL; /* evicting without a bound makes no sense */
    CU_ASSERT_EQUAL(ig_policy_ops_check(&t, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "policy h2o: an evict hook without the capacity"));
    CU_ASSERT_EQUAL(ig_policy_ops_resolve(&t, &r, &err), IG_ERR_INVALID_ARG);

    ig_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.head_dim = 32;
    ig_policy_params *p = NULL;
    ig_policy_cost_terms ct;
    t = *ig_policy_find("full");
    t.cost_terms = fake_cost_terms;
    CU_ASSERT_EQUAL_FATAL(ig_policy_params_parse(&t, NULL, 0, &p, &err), IG_OK);
    t.version = 1; /* written before cost_terms existed: the slot is not read */
    CU_ASSERT_EQUAL(ig_policy_get_cost_terms(&t, p, &cfg, &ct, &err), IG_OK);
    CU_ASSERT(ct.fetch == 1 && ct.keep == 1 && ct.partial == 0 && !ct.codec_set);
    t.version = 2;
    CU_ASSERT_EQUAL(ig_policy_get_cost_terms(&t, p, &cfg, &ct, &err), IG_OK);
    CU_ASSERT(ct.fetch == 0.5 && ct.keep == 1);
    ig_policy_params_free(p);

    /* a policy that takes the decode probabilities (an on_attention hook: it scores rows by them)
     * tells the cost model so, and no other does */
    const ig_policy_ops *const *all = ig_policy_list();
    for (int i = 0; all[i]; i++) {
        CU_ASSERT_EQUAL_FATAL(ig_policy_params_parse(all[i], NULL, 0, &p, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_policy_get_cost_terms(all[i], p, &cfg, &ct, &err), IG_OK);
        CU_ASSERT_EQUAL(ct.attn_probs, all[i]->on_attention != NULL);
        ig_policy_params_free(p);
    }

    /* resolve: a hook newer than the table's version is cleared; the NULL lifetime hooks become
     * the trivial ones (dense init only without selection hooks, no-op fini, every token). */
    t = *ig_policy_find("full");
    CU_ASSERT(!t.init && !t.fini && !t.capacity); /* full relies on the defaults */
    t.cost_terms = fake_cost_terms;
    t.version = 1;
    CU_ASSERT_EQUAL_FATAL(ig_policy_ops_resolve(&t, &r, &err), IG_OK);
    CU_ASSERT_PTR_NULL(r.cost_terms);
    CU_ASSERT(r.init && r.fini && r.capacity);
    ig_policy_caps caps0;
    memset(&caps0, 0, sizeof caps0);
    CU_ASSERT_EQUAL(r.init(NULL, NULL, NULL, &caps0, &err), IG_OK);
    CU_ASSERT_EQUAL(caps0.dense, 1);
    CU_ASSERT_EQUAL(r.capacity(NULL, 3, 777), 777);
    r.fini(NULL);
    t.version = 2;
    CU_ASSERT_EQUAL_FATAL(ig_policy_ops_resolve(&t, &r, &err), IG_OK);
    CU_ASSERT(r.cost_terms == fake_cost_terms);
    t.select = ig_policy_find("quest")->select; /* a selecting table's default init is not dense */
    CU_ASSERT_EQUAL_FATAL(ig_policy_ops_resolve(&t, &r, &err), IG_OK);
    memset(&caps0, 0, sizeof caps0);
    CU_ASSERT_EQUAL(r.init(NULL, NULL, NULL, &caps0, &err), IG_OK);
    CU_ASSERT_EQUAL(caps0.dense, 0);
    t = *ig_policy_find("infinigen"); /* a table's own hooks are kept */
    CU_ASSERT_EQUAL_FATAL(ig_policy_ops_resolve(&t, &r, &err), IG_OK);
    CU_ASSERT(r.init == t.init && r.fini == t.fini && r.capacity == t.capacity);

    const ig_policy_ops *i4 = ig_policy_find("int4");
    const char *sets[][1] = {{"bits=2"}, {"bits=4"}, {"bits=8"}};
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_EQUAL_FATAL(ig_policy_params_parse(i4, sets[k], 1, &p, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_policy_get_cost_terms(i4, p, &cfg, &ct, &err), IG_OK);
        void *st = calloc(1, i4->state_size ? i4->state_size : 1);
        ig_policy_env env = {NULL, &cfg, 1, 16, IG_DTYPE_F32, NULL, NULL};
        ig_policy_caps caps;
        memset(&caps, 0, sizeof caps);
        CU_ASSERT_EQUAL(i4->init(st, &env, p, &caps, &err), IG_OK);
        CU_ASSERT(ct.codec_set && ct.codec.kind == caps.codec.kind &&
                  ct.codec.bits == caps.codec.bits && ct.codec.group == caps.codec.group);
        CU_ASSERT_EQUAL(ct.codec.group, 32); /* a head smaller than the default group of 64 */
        CU_ASSERT_EQUAL(ig_policy_ops_resolve(i4, &r, &err), IG_OK);
        r.fini(st);
        free(st);
        ig_policy_params_free(p);
    }
}

/* The toy policy of tests/toy_policy.c, added by one ig_policy_register line in suite_init: it is
 * found by name and listed, a second table of its name or an unusable table is refused, and it
 * runs through the engine reading about its fraction of the resident entries, which moves the
 * logits away from the dense run's (the conformance and 100%-budget tests above cover it too). */
static void test_toy_policy(void) {
    const ig_policy_ops *toy = ig_policy_find("toy-random");
    CU_ASSERT_PTR_EQUAL_FATAL(toy, &ig_toy_random_policy);
    int listed = 0;
    for (const ig_policy_ops *const *l = ig_policy_list(); *l; l++) listed += *l == toy;
    CU_ASSERT_EQUAL(listed, 1);
    ig_error err;
    CU_ASSERT_EQUAL(ig_policy_register(&ig_toy_random_policy, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "toy-random: a policy of that name"));
    ig_policy_ops bad = *ig_policy_find("h2o");
    bad.name = "h2o-without-capacity";
    bad.capacity = NULL;
    CU_ASSERT_EQUAL(ig_policy_register(&bad, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(ig_policy_find("h2o-without-capacity"));

    const char *half[] = {"fraction=0.5"};
    for (int mi = 0; mi < 2; mi++) {
        const ig_model *m = g_models[mi];
        g_n_kv_head = ig_model_get_config(m)->n_kv_head;
        ig_policy_params *p = params_of(toy, half, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        size_t n0 = 0, n1 = 0;
        float *dense = run(m, &g_work[mi], NULL, NULL, IG_KV_ACCESS_AUTO, &n0, NULL);
        g_violations = 0;
        g_sel_entries = g_sel_resident = 0;
        float *got = run(m, &g_work[mi], make_proxy(toy), p, IG_KV_ACCESS_AUTO, &n1, NULL);
        CU_ASSERT_FATAL(dense && got && n0 == n1);
        double share = g_sel_resident ? (double)g_sel_entries / (double)g_sel_resident : 0;
        double d = max_diff(dense, got, n0);
        printf("\n    toy-random %-10s fraction=0.5: read %.3f of %lld resident entries, max "
               "|logit - dense| %.3g",
               g_fixtures[mi], share, (long long)g_sel_resident, d);
        CU_ASSERT_EQUAL(g_violations, 0);
        CU_ASSERT(g_sel_resident > 1000);
        CU_ASSERT(share > 0.4 && share < 0.6);
        CU_ASSERT(d > 1e-3);
        free(dense);
        free(got);
        ig_policy_params_free(p);
    }
    printf("\n    ");
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("policies", suite_init, suite_clean);
    CU_add_test(s, "conformance", test_conformance);
    CU_add_test(s, "full_budget_matches", test_full_budget_matches);
    CU_add_test(s, "dense_layers_access", test_dense_layers_access);
    CU_add_test(s, "params_rejected", test_params_rejected);
    CU_add_test(s, "versions_and_cost_terms", test_versions_and_cost_terms);
    CU_add_test(s, "toy_policy", test_toy_policy);
}
