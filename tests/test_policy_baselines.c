/* The baseline policies' mechanisms on inputs whose answer is known: h2o keeps exactly the top
 * accumulated scores plus the recent window (hooks driven directly over a real home-tier entry
 * table, against a plain reference, and through the engine with independently recomputed
 * attention), streaming keeps the sinks plus the last window, and quest's page bound holds for
 * every key while its chosen pages are the top pages by that bound. The conformance suite
 * (test_policies.c) covers what every policy must satisfy; this file covers what each one is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "core/model/io/safetensors.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_kernels.h"
#include "offload/kv_home.h"
#include "policies/baselines.h"
#include "policies/policy.h"
#include "tests/failing_table.h"
#include "tests/test_util.h"

/* ---- small helpers ---- */

static uint64_t g_rng = 88172645463325252ull;
static uint32_t rnd(void) { /* xorshift64: deterministic test data */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) {
    return (float)rnd() / 4294967296.0f * 2.0f - 1.0f;
}

static ig_policy_params *params_of(const char *policy, const char *const *sets, int n) {
    ig_policy_params *p = NULL;
    ig_error err;
    if (ig_policy_params_parse(ig_policy_find(policy), sets, n, &p, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    return p;
}

/* A policy instance over a hand-made model shape (one slot), with a real home-tier entry table
 * that reuses released entries as the engine's does. */
typedef struct rig {
    const ig_policy_ops *ops; /* = &res */
    ig_policy_ops res;        /* the table resolved as the core resolves it */
    void *st;
    ig_model_config cfg;
    ig_policy_caps caps;
    ig_kv_home *home;
    int max_ctx;
    int32_t victims[1024];
} rig;

/* The backend table a rig's policy gets (ig_policy_env.be); NULL: none (hooks driven by hand). */
static ig_be *g_rig_be;

static int rig_open(rig *r, const char *policy, const char *const *sets, int n_sets, int n_layer,
                    int n_head, int n_kv_head, int hd, int max_ctx) {
    memset(r, 0, sizeof *r);
    ig_error rerr;
    if (ig_policy_ops_resolve(ig_policy_find(policy), &r->res, &rerr) != IG_OK) return -1;
    r->ops = &r->res;
    if (!r->ops) return -1;
    r->cfg.arch = IG_ARCH_LLAMA;
    r->cfg.n_layer = n_layer;
    r->cfg.n_head = n_head;
    r->cfg.n_kv_head = n_kv_head;
    r->cfg.head_dim = hd;
    r->cfg.d_model = n_head * hd;
    r->max_ctx = max_ctx;
    ig_policy_env env = {NULL, &r->cfg, 1, max_ctx, IG_DTYPE_F32, g_rig_be, NULL};
    ig_policy_params *p = params_of(policy, sets, n_sets);
    if (!p) return -1;
    r->st = calloc(1, r->ops->state_size ? r->ops->state_size : 1);
    ig_error err;
    r->caps.codec.kind = IG_KV_CODEC_F32;
    ig_status rc = r->ops->init(r->st, &env, p, &r->caps, &err);
    ig_policy_params_free(p);
    if (rc != IG_OK) {
        free(r->st);
        r->st = NULL;
        return -1;
    }
    ig_kv_home_opts ho = {n_layer, 1, n_kv_head, hd, max_ctx, r->caps.codec, NULL, -1, NULL, 0};
    return ig_kv_home_create(&ho, &r->home, &err) == IG_OK ? 0 : -1;
}

static void rig_close(rig *r) {
    if (r->st) r->ops->fini(r->st);
    free(r->st);
    ig_kv_home_free(r->home);
}

/* Stores rows pos0 .. pos0+n-1 of `layer` as the engine does: one at a time, evicting the policy's
 * victims when the table holds capacity(n_after) entries. k: [n][G][hd] or NULL (zeros). */
static void rig_store(rig *r, int layer, int32_t pos0, int n, int64_t n_after, const float *k) {
    int G = r->cfg.n_kv_head, hd = r->cfg.head_dim;
    float zero[256] = {0};
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            const float *row = k ? k + ((size_t)i * (size_t)G + (size_t)g) * (size_t)hd : zero;
            int64_t cap = r->ops->capacity(r->st, layer, n_after);
            int64_t used = ig_kv_home_n_used(r->home, layer, 0, g);
            if (used + 1 > cap) {
                int want = (int)(used + 1 - cap);
                ig_entries_view v = {ig_kv_home_pos(r->home, layer, 0, g),
                                     ig_kv_home_high_water(r->home, layer, 0, g), used, n_after};
                int got = r->ops->evict(r->st, layer, 0, g, &v, want, r->victims);
                CU_ASSERT_EQUAL(got, want);
                for (int j = 0; j < got; j++) {
                    ig_kv_home_release(r->home, layer, 0, g, r->victims[j]);
                    if (r->ops->on_evict) r->ops->on_evict(r->st, layer, 0, g, r->victims[j]);
                }
            }
            int64_t e = ig_kv_home_take(r->home, layer, 0, g);
            CU_ASSERT_FATAL(e >= 0);
            ig_kv_home_write(r->home, layer, 0, g, e, pos0 + i, row, row);
            if (r->ops->on_append) r->ops->on_append(r->st, layer, 0, g, e, pos0 + i, row, row);
        }
}

/* Resident positions of (layer, head) as a 0/1 map over [0, max_ctx). */
static void rig_resident(const rig *r, int layer, int head, unsigned char *map) {
    memset(map, 0, (size_t)r->max_ctx);
    const int32_t *pos = ig_kv_home_pos(r->home, layer, 0, head);
    int64_t hw = ig_kv_home_high_water(r->home, layer, 0, head);
    for (int64_t e = 0; e < hw; e++)
        if (pos[e] >= 0) map[pos[e]] = 1;
}

/* ---- h2o, hooks driven directly ---- */

/* Expected h2o set after storing a prompt of n tokens with per-position scores sc[n]: the recent
 * window plus the `heavy` best of the rest (higher score first; among equals the newer stays). */
static void h2o_expected(const float *sc, int n, int64_t heavy, int64_t recent,
                         unsigned char *keep) {
    memset(keep, 0, (size_t)n);
    for (int p = (int)(n - recent); p < n; p++) keep[p] = 1;
    for (int64_t k = 0; k < heavy; k++) {
        int best = -1;
        for (int p = 0; p < n - recent; p++)
            if (!keep[p] && (best < 0 || sc[p] > sc[best] || (sc[p] == sc[best] && p > best)))
                best = p;
        if (best >= 0) keep[best] = 1;
    }
}

/* A prompt whose column sums are given (many exact ties): the resident set is the top scores
 * (summed over each KV head's two query heads) plus the window, ties evicting the oldest. */
static void test_h2o_prefill_given_colsum(void) {
    enum { N = 40, H = 4, G = 2, HD = 4 };
    const char *sets[] = {"heavy_ratio=0.25", "recent_ratio=0.25"};
    rig r;
    CU_ASSERT_FATAL(rig_open(&r, "h2o", sets, 2, 1, H, G, HD, 64) == 0);
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, N), 20);
    CU_ASSERT(r.caps.dense && r.caps.wants_probs && r.caps.wants_prefill_colsum);
    static float colsum[H][N], q[N][H][HD], k[N][G][HD];
    for (int h = 0; h < H; h++)
        for (int j = 0; j < N; j++) colsum[h][j] = (float)(rnd() % 2); /* 0 or 1: many ties */
    ig_prefill_view v = {N, 0, &q[0][0][0], &k[0][0][0], NULL, &colsum[0][0], 0, N};
    r.ops->on_prefill(r.st, 0, 0, &v);
    rig_store(&r, 0, 0, N, N, &k[0][0][0]);
    for (int g = 0; g < G; g++) {
        float sc[N];
        for (int j = 0; j < N; j++) sc[j] = colsum[2 * g][j] + colsum[2 * g + 1][j];
        unsigned char keep[N], got[64];
        h2o_expected(sc, N, 10, 10, keep);
        rig_resident(&r, 0, g, got);
        CU_ASSERT(!memcmp(keep, got, N));
        CU_ASSERT_EQUAL(ig_kv_home_n_used(r.home, 0, 0, g), 20);
        /* the scores the policy holds are the column sums */
        const int32_t *pos = ig_kv_home_pos(r.home, 0, 0, g);
        for (int64_t e = 0; e < ig_kv_home_high_water(r.home, 0, 0, g); e++)
            if (pos[e] >= 0) CU_ASSERT_EQUAL(ig_h2o_entry_score(r.st, 0, 0, g, e), sc[pos[e]]);
    }
    rig_close(&r);
}

/* Without the core's column sums the policy computes them from the prompt's q and k; compared with
 * a double-precision causal softmax. */
static void test_h2o_prefill_computed_colsum(void) {
    enum { N = 48, H = 4, G = 2, HD = 8 };
    const char *sets[] = {"heavy_ratio=0.125", "recent_ratio=0.25"};
    rig r;
    CU_ASSERT_FATAL(rig_open(&r, "h2o", sets, 2, 1, H, G, HD, 64) == 0);
    static float q[N][H][HD], k[N][G][HD];
    for (int i = 0; i < N; i++) {
        for (int h = 0; h < H; h++)
            for (int d = 0; d < HD; d++) q[i][h][d] = 2.0f * frand();
        for (int g = 0; g < G; g++)
            for (int d = 0; d < HD; d++) k[i][g][d] = 2.0f * frand();
    }
    double ref[G][N];
    memset(ref, 0, sizeof ref);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < N; i++) {
            double lg[N], m = -1e300, sum = 0;
            for (int j = 0; j <= i; j++) {
                double d = 0;
                for (int t = 0; t < HD; t++) d += (double)q[i][h][t] * k[j][h / 2][t];
                lg[j] = d / sqrt((double)HD);
                if (lg[j] > m) m = lg[j];
            }
            for (int j = 0; j <= i; j++) sum += exp(lg[j] - m);
            for (int j = 0; j <= i; j++) ref[h / 2][j] += exp(lg[j] - m) / sum;
        }
    ig_prefill_view v = {N, 0, &q[0][0][0], &k[0][0][0], NULL, NULL, 0, N};
    r.ops->on_prefill(r.st, 0, 0, &v);
    rig_store(&r, 0, 0, N, N, &k[0][0][0]);
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, N), 6 + 12);
    for (int g = 0; g < G; g++) {
        float sc[N];
        for (int j = 0; j < N; j++) sc[j] = (float)ref[g][j];
        unsigned char keep[N], got[64];
        h2o_expected(sc, N, 6, 12, keep);
        /* the data must separate the 6th and 7th heavy candidates clearly */
        double kept_min = 1e300, drop_max = -1e300;
        for (int j = 0; j < N - 12; j++) {
            if (keep[j] && ref[g][j] < kept_min) kept_min = ref[g][j];
            if (!keep[j] && ref[g][j] > drop_max) drop_max = ref[g][j];
        }
        CU_ASSERT(kept_min - drop_max > 1e-4);
        rig_resident(&r, 0, g, got);
        CU_ASSERT(!memcmp(keep, got, N));
        const int32_t *pos = ig_kv_home_pos(r.home, 0, 0, g);
        for (int64_t e = 0; e < ig_kv_home_high_water(r.home, 0, 0, g); e++)
            if (pos[e] >= 0)
                IG_ASSERT_NEAR(ig_h2o_entry_score(r.st, 0, 0, g, e), ref[g][pos[e]], 1e-5);
    }
    rig_close(&r);
}

/* Decode: random attention probabilities step after step; the resident set and the scores follow a
 * plain reference of H2O (scores by position; evict the lowest non-recent, oldest first). */
static void test_h2o_decode_matches_reference(void) {
    enum { P = 20, T = 120, H = 4, G = 2, HD = 4, CTX = 128 };
    const char *sets[] = {"heavy_ratio=0.2", "recent_ratio=0.1"};
    rig r;
    CU_ASSERT_FATAL(rig_open(&r, "h2o", sets, 2, 1, H, G, HD, CTX) == 0);
    static float ref[G][CTX];
    static unsigned char res[G][CTX];
    memset(ref, 0, sizeof ref);
    memset(res, 0, sizeof res);
    static float colsum[H][P], q[P][H][HD], k[P][G][HD];
    for (int h = 0; h < H; h++)
        for (int j = 0; j < P; j++) colsum[h][j] = (float)(rnd() % 1000) / 100.0f;
    ig_prefill_view pv = {P, 0, &q[0][0][0], &k[0][0][0], NULL, &colsum[0][0], 0, P};
    r.ops->on_prefill(r.st, 0, 0, &pv);
    rig_store(&r, 0, 0, P, P, &k[0][0][0]);
    for (int g = 0; g < G; g++) {
        for (int j = 0; j < P; j++) ref[g][j] = colsum[2 * g][j] + colsum[2 * g + 1][j];
        unsigned char keep[P];
        h2o_expected(ref[g], P, 4, 2, keep);
        memcpy(res[g], keep, P);
    }
    int mismatches = 0;
    static int32_t sel[G][CTX];
    static float probs[H][CTX + 1];
    for (int32_t t = P; t < T; t++) {
        int64_t n_sel[G];
        for (int g = 0; g < G; g++) { /* dense selection: every entry in use, ascending */
            const int32_t *pos = ig_kv_home_pos(r.home, 0, 0, g);
            n_sel[g] = 0;
            for (int64_t e = 0; e < ig_kv_home_high_water(r.home, 0, 0, g); e++)
                if (pos[e] >= 0) sel[g][n_sel[g]++] = (int32_t)e;
        }
        for (int h = 0; h < H; h++) {
            int g = h / 2;
            const int32_t *pos = ig_kv_home_pos(r.home, 0, 0, g);
            for (int64_t j = 0; j <= n_sel[g]; j++) {
                probs[h][j] = (float)(rnd() % 64) / 256.0f; /* exact sums: ties stay ties */
                if (j < n_sel[g]) ref[g][pos[sel[g][j]]] += probs[h][j];
            }
        }
        ig_attn_view av = {&probs[0][0], CTX + 1, &sel[0][0], n_sel, CTX, t, NULL};
        r.ops->on_attention(r.st, 0, 0, &av);
        rig_store(&r, 0, t, 1, t + 1, NULL);
        /* reference step */
        int64_t n_after = t + 1, recent = (int64_t)floor(0.1 * (double)n_after + 1e-9);
        if (recent < 1) recent = 1;
        int64_t cap = (int64_t)floor(0.2 * (double)n_after + 1e-9) + recent;
        for (int g = 0; g < G; g++) {
            ref[g][t] = probs[2 * g][n_sel[g]] + probs[2 * g + 1][n_sel[g]];
            int64_t used = 0;
            for (int p = 0; p < t; p++) used += res[g][p];
            while (used + 1 > cap) {
                int best = -1;
                for (int p = 0; p < n_after - recent; p++)
                    if (res[g][p] && (best < 0 || ref[g][p] < ref[g][best])) best = p;
                res[g][best] = 0;
                used--;
            }
            res[g][t] = 1;
            unsigned char got[CTX];
            rig_resident(&r, 0, g, got);
            if (memcmp(got, res[g], (size_t)t + 1)) mismatches++;
            const int32_t *pos = ig_kv_home_pos(r.home, 0, 0, g);
            for (int64_t e = 0; e < ig_kv_home_high_water(r.home, 0, 0, g); e++)
                if (pos[e] >= 0 && ig_h2o_entry_score(r.st, 0, 0, g, e) != ref[g][pos[e]])
                    mismatches++;
        }
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    rig_close(&r);
}

/* Several victims at once: the lowest scores outside the window, oldest first among equals; the
 * window only when nothing else is left. */
static void test_h2o_evict_several(void) {
    enum { N = 10 };
    const char *sets[] = {"heavy_ratio=1", "recent_ratio=0.2"};
    rig r;
    CU_ASSERT_FATAL(rig_open(&r, "h2o", sets, 2, 1, 1, 1, 4, 16) == 0);
    static const float sc[N] = {5, 1, 3, 1, 0.5f, 7, 2, 9, 0, 0};
    static float q[N][4], k[N][4];
    ig_prefill_view v = {N, 0, &q[0][0], &k[0][0], NULL, sc, 0, N};
    r.ops->on_prefill(r.st, 0, 0, &v);
    rig_store(&r, 0, 0, N, N, &k[0][0]); /* capacity N: nothing evicted */
    CU_ASSERT_EQUAL(ig_kv_home_n_used(r.home, 0, 0, 0), N);
    const int32_t *pos = ig_kv_home_pos(r.home, 0, 0, 0);
    ig_entries_view ev = {pos, ig_kv_home_high_water(r.home, 0, 0, 0), N, N};
    int32_t victims[N];
    CU_ASSERT_EQUAL(r.ops->evict(r.st, 0, 0, 0, &ev, 3, victims), 3);
    CU_ASSERT(pos[victims[0]] == 4 && pos[victims[1]] == 1 && pos[victims[2]] == 3);
    CU_ASSERT_EQUAL(r.ops->evict(r.st, 0, 0, 0, &ev, 9, victims), 9);
    CU_ASSERT_EQUAL(pos[victims[7]], 7); /* the best-scored old token goes last of the old ones */
    CU_ASSERT_EQUAL(pos[victims[8]], 8); /* then the window's oldest */
    rig_close(&r);
}

/* dense_layers: those layers never evict; the others follow the budget. */
static void test_h2o_dense_layers(void) {
    const char *sets[] = {"dense_layers=1"};
    rig r;
    CU_ASSERT_FATAL(rig_open(&r, "h2o", sets, 1, 2, 2, 1, 4, 256) == 0);
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, 200), 200);
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 1, 200), 40);
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 1, 5), 1); /* at least the newest token */
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 1, 1), 1);
    for (int64_t n = 1; n < 256; n++)
        CU_ASSERT(r.ops->capacity(r.st, 1, n + 1) >= r.ops->capacity(r.st, 1, n));
    /* device bytes: one float per resident entry of the sparse layer */
    CU_ASSERT_EQUAL(r.ops->device_bytes(r.st), (size_t)(25 + 25) * sizeof(float));
    rig_close(&r);
}

/* ---- streaming, hooks driven directly ---- */

static void test_streaming_sinks_and_window(void) {
    {
        const char *sets[] = {"sinks=2", "window=5"};
        rig r;
        CU_ASSERT_FATAL(rig_open(&r, "streaming", sets, 2, 1, 2, 1, 4, 64) == 0);
        CU_ASSERT(r.caps.dense && !r.caps.wants_probs);
        int bad = 0;
        for (int32_t t = 0; t < 40; t++) {
            rig_store(&r, 0, t, 1, t + 1, NULL);
            unsigned char got[64];
            rig_resident(&r, 0, 0, got);
            for (int p = 0; p <= t; p++)
                if (got[p] != (p < 2 || p > t - 5)) bad++;
        }
        CU_ASSERT_EQUAL(bad, 0);
        rig_close(&r);
    }
    {
        /* window as a fraction: a prompt of 40 then decode to 80 */
        const char *sets[] = {"sinks=4", "window_ratio=0.25"};
        rig r;
        CU_ASSERT_FATAL(rig_open(&r, "streaming", sets, 2, 1, 2, 2, 4, 128) == 0);
        rig_store(&r, 0, 0, 40, 40, NULL);
        int bad = 0;
        for (int32_t t = 40; t < 80; t++) {
            rig_store(&r, 0, t, 1, t + 1, NULL);
            int64_t w = (t + 1) / 4;
            for (int g = 0; g < 2; g++) {
                unsigned char got[128];
                rig_resident(&r, 0, g, got);
                for (int p = 0; p <= t; p++)
                    if (got[p] != (p < 4 || p > t - w)) bad++;
            }
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, 3), 3);
        CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, 100), 29);
        rig_close(&r);
    }
}

/* ---- quest, hooks driven directly ---- */

static void test_quest_bound(void) {
    enum { HD = 16, ROWS = 16 };
    int violations = 0, not_tight = 0;
    for (int trial = 0; trial < 2000; trial++) {
        float k[ROWS][HD], mn[HD], mx[HD], q[HD];
        int rows = 1 + (int)(rnd() % ROWS);
        for (int i = 0; i < rows; i++)
            for (int d = 0; d < HD; d++) k[i][d] = 4.0f * frand();
        for (int d = 0; d < HD; d++) {
            mn[d] = mx[d] = k[0][d];
            for (int i = 1; i < rows; i++) {
                if (k[i][d] < mn[d]) mn[d] = k[i][d];
                if (k[i][d] > mx[d]) mx[d] = k[i][d];
            }
            q[d] = 4.0f * frand();
        }
        float b = ig_cpu_page_bound(q, mn, mx, HD);
        for (int i = 0; i < rows; i++) {
            float dot = 0;
            for (int d = 0; d < HD; d++) dot += q[d] * k[i][d];
            if (dot > b) violations++;
            if (rows == 1 && dot != b) not_tight++;
        }
    }
    CU_ASSERT_EQUAL(violations, 0);
    CU_ASSERT_EQUAL(not_tight, 0); /* a one-key page: the bound is that key's logit */
}

/* Keys appended in a shuffled entry order (entries map to positions through the view); the
 * selection is the last page plus the top pages by the group's bound, up to the token budget. */
static void quest_check_selection(const char *gqa, int n_tok, int budget) {
    enum { H = 4, G = 2, HD = 8, PS = 4, CTX = 64 };
    char bset[40], gset[40];
    snprintf(bset, sizeof bset, "token_budget=%d", budget);
    snprintf(gset, sizeof gset, "gqa=%s", gqa);
    const char *sets[] = {"page_size=4", "dense_layers=0", bset, gset};
    rig r;
    CU_ASSERT_FATAL(rig_open(&r, "quest", sets, 4, 1, H, G, HD, CTX) == 0);
    CU_ASSERT(!r.caps.dense && !r.caps.select_ahead);
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, 1000), 1000);
    CU_ASSERT_EQUAL(r.ops->device_bytes(r.st), (size_t)G * (CTX / PS) * 2 * HD * sizeof(float));
    static float k[CTX][G][HD], q[H][HD];
    int32_t pos_of[CTX];
    for (int e = 0; e < n_tok; e++) pos_of[e] = e;
    for (int e = n_tok - 1; e > 0; e--) { /* shuffle */
        int j = (int)(rnd() % (uint32_t)(e + 1));
        int32_t t = pos_of[e];
        pos_of[e] = pos_of[j];
        pos_of[j] = t;
    }
    for (int p = 0; p < n_tok; p++)
        for (int g = 0; g < G; g++)
            for (int d = 0; d < HD; d++) k[p][g][d] = 3.0f * frand();
    for (int h = 0; h < H; h++)
        for (int d = 0; d < HD; d++) q[h][d] = 3.0f * frand();
    for (int e = 0; e < n_tok; e++)
        for (int g = 0; g < G; g++)
            r.ops->on_append(r.st, 0, 0, g, e, pos_of[e], k[pos_of[e]][g], k[pos_of[e]][g]);
    ig_entries_view ev[G];
    for (int g = 0; g < G; g++) ev[g] = (ig_entries_view){pos_of, n_tok, n_tok, n_tok};
    int32_t entries[G * CTX];
    int64_t n_sel[G];
    ig_selection sel = {entries, n_sel, CTX};
    int slot = 0;
    r.ops->select(r.st, 0, 1, &slot, &q[0][0], ev, &sel);
    int last = (n_tok - 1) / PS, last_rows = n_tok - last * PS;
    int extra = budget > last_rows ? (budget - last_rows) / PS : 0;
    for (int g = 0; g < G; g++) {
        /* the test's own page scores from the keys */
        float score[CTX / PS];
        for (int pg = 0; pg < last; pg++) {
            float mn[HD], mx[HD];
            for (int d = 0; d < HD; d++) {
                mn[d] = mx[d] = k[pg * PS][g][d];
                for (int i = 1; i < PS; i++) {
                    float x = k[pg * PS + i][g][d];
                    if (x < mn[d]) mn[d] = x;
                    if (x > mx[d]) mx[d] = x;
                }
            }
            float b0 = ig_cpu_page_bound(q[2 * g], mn, mx, HD);
            float b1 = ig_cpu_page_bound(q[2 * g + 1], mn, mx, HD);
            score[pg] = !strcmp(gqa, "sum") ? b0 + b1 : (b0 > b1 ? b0 : b1);
        }
        unsigned char want[CTX / PS] = {0};
        want[last] = 1;
        for (int i = 0; i < extra && i < last; i++) {
            int best = -1;
            for (int pg = 0; pg < last; pg++)
                if (!want[pg] && (best < 0 || score[pg] > score[best])) best = pg;
            want[best] = 1;
        }
        const int32_t *ent = entries + (size_t)g * CTX;
        unsigned char got[CTX / PS] = {0};
        int64_t rows = 0;
        for (int64_t j = 0; j < n_sel[g]; j++) {
            CU_ASSERT(j == 0 || ent[j] > ent[j - 1]);
            got[pos_of[ent[j]] / PS] = 1;
            rows++;
        }
        CU_ASSERT(!memcmp(got, want, sizeof want));
        int64_t want_rows = 0;
        for (int pg = 0; pg <= last; pg++)
            if (want[pg]) want_rows += pg == last ? last_rows : PS;
        CU_ASSERT_EQUAL(rows, want_rows); /* whole pages */
        CU_ASSERT(extra >= last || rows <= (budget > last_rows ? budget : last_rows));
    }
    char buf[512], want_on[128];
    if (g_rig_be && g_rig_be->iface->topk == ig_test_failing_topk && extra > 0 && extra < last)
        /* a top-k was needed and failed: the policy's own table took over */
        snprintf(want_on, sizeof want_on,
                 "on the policy's own cpu table in %d of %d (after the run's table failed)", G, G);
    else if (g_rig_be) /* the selection ran on the run's table */
        snprintf(want_on, sizeof want_on, "on the %s backend in %d of %d selections",
                 g_rig_be->caps.name, G, G);
    else /* no table from an engine: on the policy's own */
        snprintf(want_on, sizeof want_on, "on the policy's own cpu table in %d of %d", G, G);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.ops->budget(r.st, buf, sizeof buf), want_on));
    rig_close(&r);
}

/* No table from an engine (the policy's own cpu table), the page scores and top pages on the cpu
 * and cpu-ref tables, and on a table whose top-k fails (the policy's own takes over): the same
 * selections, from the test's own page scores. */
static void test_quest_selects_top_pages(void) {
    ig_be *tables[4] = {NULL, NULL, NULL, NULL};
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_be_cpu_create(&tables[1], &err), IG_OK);
    CU_ASSERT_EQUAL_FATAL(ig_be_ref_create(&tables[2], &err), IG_OK);
    static ig_be_iface fail_if;
    static struct ig_be fail_be;
    ig_test_failing_table(tables[1], &fail_if, &fail_be);
    tables[3] = &fail_be;
    for (int b = 0; b < 4; b++) {
        g_rig_be = tables[b];
        quest_check_selection("max", 64, 20);
        quest_check_selection("max", 62, 20);
        quest_check_selection("sum", 61, 24);
        quest_check_selection("max", 50, 3);   /* budget below the last page: that page alone */
        quest_check_selection("max", 40, 100); /* budget above the context: everything */
    }
    g_rig_be = NULL;
    ig_be_free(tables[1]);
    ig_be_free(tables[2]);
}

static void test_quest_dense_layers(void) {
    enum { CTX = 64 };
    const char *sets[] = {"dense_layers=1", "token_budget=4"};
    rig r;
    CU_ASSERT_FATAL(rig_open(&r, "quest", sets, 2, 2, 2, 1, 4, CTX) == 0);
    int32_t pos[CTX];
    float row[4] = {1, 2, 3, 4}, q[2][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}};
    for (int e = 0; e < 50; e++) {
        pos[e] = e;
        for (int l = 0; l < 2; l++) r.ops->on_append(r.st, l, 0, 0, e, e, row, row);
    }
    ig_entries_view ev = {pos, 50, 50, 50};
    int32_t entries[CTX];
    int64_t n = 0;
    ig_selection sel = {entries, &n, CTX};
    int slot = 0;
    r.ops->select(r.st, 0, 1, &slot, &q[0][0], &ev, &sel);
    CU_ASSERT_EQUAL(n, 50);
    r.ops->select(r.st, 1, 1, &slot, &q[0][0], &ev, &sel);
    CU_ASSERT_EQUAL(n, 2); /* the last page alone (rows 48, 49) */
    /* metadata only for the sparse layer */
    CU_ASSERT_EQUAL(r.ops->device_bytes(r.st), (size_t)(CTX / 16) * 2 * 4 * sizeof(float));
    rig_close(&r);
}

/* A budget given both as tokens and as a fraction is refused rather than silently resolved. */
static void test_budget_given_twice(void) {
    rig r;
    const char *s1[] = {"window=8", "window_ratio=0.1"};
    CU_ASSERT_EQUAL(rig_open(&r, "streaming", s1, 2, 1, 2, 1, 4, 16), -1);
    const char *s2[] = {"token_budget=8", "budget_ratio=0.1"};
    CU_ASSERT_EQUAL(rig_open(&r, "quest", s2, 2, 1, 2, 1, 4, 16), -1);
    const char *s3[] = {"window=8"};
    CU_ASSERT_EQUAL(rig_open(&r, "streaming", s3, 1, 1, 2, 1, 4, 16), 0);
    CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, 1000), 4 + 8);
    rig_close(&r);
}

/* ---- through the engine on the tiny fixtures ---- */

#define N_SEQ      3
#define MAX_LAYERS 8
#define MAX_HEADS  8
#define MAX_CTX    128

typedef struct workload {
    ig_safetensors *st;
    const int32_t *tokens[N_SEQ];
    int len[N_SEQ];
    int prefill[N_SEQ];
} workload;

static ig_model *g_models[2];
static workload g_work[2];
static const char *g_fixtures[2] = {"tiny_llama", "tiny_opt"};

static int suite_init(void) {
    for (int i = 0; i < 2; i++) {
        ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_AUTO};
        ig_error err;
        if (ig_model_load(ig_test_fixture(g_fixtures[i]), &o, &g_models[i], &err) != IG_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/reference.safetensors", ig_test_fixture(g_fixtures[i]));
        if (ig_safetensors_open(path, &g_work[i].st, &err) != IG_OK) return 1;
        static const int which[N_SEQ] = {1, 2, 3}; /* lengths 17, 33, 64 */
        static const int pre[N_SEQ] = {5, 12, 9};
        for (int s = 0; s < N_SEQ; s++) {
            char name[32];
            snprintf(name, sizeof name, "tokens_%d", which[s]);
            const ig_st_tensor *t = ig_safetensors_find(g_work[i].st, name);
            if (!t) return 1;
            g_work[i].tokens[s] = t->data;
            g_work[i].len[s] = (int)t->shape[0];
            g_work[i].prefill[s] = pre[s];
        }
        const ig_model_config *c = ig_model_get_config(g_models[i]);
        if (c->n_layer > MAX_LAYERS || c->n_kv_head > MAX_HEADS || c->n_head > MAX_HEADS) return 1;
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

/* A recording proxy: mirrors each table's entry -> position map and, for h2o, accumulates an
 * independent reference score per position (double precision, attention recomputed from the
 * prompt's q and k). */
static const ig_policy_ops *g_real;
static ig_policy_ops g_proxy;
static int32_t g_epos[MAX_LAYERS][N_SEQ][MAX_HEADS][MAX_CTX];
static double g_ref[MAX_LAYERS][N_SEQ][MAX_HEADS][MAX_CTX];
static const ig_model_config *g_cfg;
static double g_recent_ratio;
static int g_bad, g_evict_calls, g_attn_calls, g_sel_calls;
static int g_quest_budget, g_quest_ps;

static void px_reset(void) {
    for (int l = 0; l < MAX_LAYERS; l++)
        for (int s = 0; s < N_SEQ; s++)
            for (int g = 0; g < MAX_HEADS; g++)
                for (int e = 0; e < MAX_CTX; e++) g_epos[l][s][g][e] = -1;
    memset(g_ref, 0, sizeof g_ref);
    g_bad = g_evict_calls = g_attn_calls = g_sel_calls = 0;
}

static void px_on_append(void *st, int layer, int slot, int head, int64_t e, int32_t pos,
                         const float *k, const float *v) {
    g_epos[layer][slot][head][e] = pos;
    if (g_real->on_append) g_real->on_append(st, layer, slot, head, e, pos, k, v);
}

static void px_on_evict(void *st, int layer, int slot, int head, int64_t e) {
    g_epos[layer][slot][head][e] = -1;
    if (g_real->on_evict) g_real->on_evict(st, layer, slot, head, e);
}

static void px_on_prefill(void *st, int layer, int slot, const ig_prefill_view *v) {
    int H = g_cfg->n_head, G = g_cfg->n_kv_head, hd = g_cfg->head_dim, grp = H / G;
    if (v->pos0 != 0) g_bad++; /* the workload prefills in one call */
    for (int h = 0; h < H; h++)
        for (int i = 0; i < v->n_new; i++) {
            double lg[MAX_CTX], m = -1e300, sum = 0;
            for (int j = 0; j <= i; j++) {
                double d = 0;
                for (int t = 0; t < hd; t++)
                    d += (double)v->q[((size_t)i * H + h) * hd + t] *
                         v->k[((size_t)j * G + h / grp) * hd + t];
                lg[j] = d / sqrt((double)hd);
                if (lg[j] > m) m = lg[j];
            }
            for (int j = 0; j <= i; j++) sum += exp(lg[j] - m);
            for (int j = 0; j <= i; j++) g_ref[layer][slot][h / grp][j] += exp(lg[j] - m) / sum;
        }
    g_real->on_prefill(st, layer, slot, v);
}

static void px_on_attention(void *st, int layer, int slot, const ig_attn_view *v) {
    int H = g_cfg->n_head, G = g_cfg->n_kv_head, grp = H / G;
    g_attn_calls++;
    for (int h = 0; h < H; h++) {
        int g = h / grp;
        const float *p = v->probs + (size_t)h * (size_t)v->stride;
        const int32_t *ent = v->entries + (size_t)g * (size_t)v->max_per_head;
        for (int64_t j = 0; j < v->n[g]; j++)
            g_ref[layer][slot][g][g_epos[layer][slot][g][ent[j]]] += p[j];
        g_ref[layer][slot][g][v->new_pos] += p[v->n[g]];
    }
    g_real->on_attention(st, layer, slot, v);
}

/* h2o: every victim lies outside the recent window and has the lowest reference score among the
 * non-recent residents (within float-vs-double accumulation error). */
static int px_h2o_evict(void *st, int layer, int slot, int head, const ig_entries_view *ev,
                        int n_victims, int32_t *victims) {
    int got = g_real->evict(st, layer, slot, head, ev, n_victims, victims);
    g_evict_calls++;
    int64_t recent = (int64_t)floor(g_recent_ratio * (double)ev->n_tokens + 1e-9);
    if (recent < 1) recent = 1;
    int64_t boundary = ev->n_tokens - recent;
    const double *ref = g_ref[layer][slot][head];
    double worst_victim = -1e300;
    for (int i = 0; i < got; i++) {
        int32_t p = ev->pos[victims[i]];
        if (p >= boundary) g_bad++;
        if (ref[p] > worst_victim) worst_victim = ref[p];
    }
    for (int64_t e = 0; e < ev->high_water; e++) {
        int32_t p = ev->pos[e];
        int victim = 0;
        for (int i = 0; i < got; i++) victim |= victims[i] == e;
        if (p >= 0 && p < boundary && !victim && ref[p] < worst_victim - 1e-4) g_bad++;
    }
    return got;
}

/* quest: whole pages, the last page always, at most the budget (or the last page alone). */
static void px_quest_select(void *st, int layer, int n, const int *slots, const float *q,
                            const ig_entries_view *ev, ig_selection *out) {
    g_real->select(st, layer, n, slots, q, ev, out);
    int G = g_cfg->n_kv_head, ps = g_quest_ps;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            const ig_entries_view *v = &ev[(size_t)i * (size_t)G + (size_t)g];
            const int32_t *ent = out[i].entries + (size_t)g * (size_t)out[i].max_per_head;
            int64_t last = (v->n_tokens - 1) / ps, last_rows = v->n_tokens - last * ps;
            int pages[MAX_CTX] = {0};
            for (int64_t j = 0; j < out[i].n[g]; j++) pages[v->pos[ent[j]] / ps]++;
            if (pages[last] != last_rows) g_bad++;
            for (int64_t pg = 0; pg < last; pg++)
                if (pages[pg] != 0 && pages[pg] != ps) g_bad++;
            int64_t limit = g_quest_budget > last_rows ? g_quest_budget : last_rows;
            if (out[i].n[g] > limit) g_bad++;
            g_sel_calls++;
        }
}

static const ig_policy_ops *make_proxy(const char *name) {
    static ig_policy_ops resolved;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_policy_ops_resolve(ig_policy_find(name), &resolved, &err), IG_OK);
    g_real = &resolved;
    g_proxy = *g_real;
    g_proxy.on_append = px_on_append;
    g_proxy.on_evict = px_on_evict;
    if (g_real->on_prefill) g_proxy.on_prefill = px_on_prefill;
    if (g_real->on_attention) g_proxy.on_attention = px_on_attention;
    if (!strcmp(name, "h2o")) g_proxy.evict = px_h2o_evict;
    if (!strcmp(name, "quest")) g_proxy.select = px_quest_select;
    px_reset();
    return &g_proxy;
}

/* Runs the workload (prefill, then teacher-forced decode); returns the logits of every row. */
static float *run(int mi, const ig_policy_ops *ops, const ig_policy_params *params,
                  ig_kv_access access, size_t *n_out, ig_engine **keep) {
    const ig_model *m = g_models[mi];
    const workload *w = &g_work[mi];
    const ig_model_config *c = ig_model_get_config(m);
    g_cfg = c;
    ig_engine_opts o = {.max_seqs = N_SEQ,
                        .max_ctx = MAX_CTX,
                        .max_batch_tokens = 64,
                        .threads = 2,
                        .policy = ops,
                        .policy_params = params,
                        .kv_access = access};
    ig_engine *e = NULL;
    ig_error err;
    if (ig_engine_create(m, &o, &e, &err) != IG_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return NULL;
    }
    size_t cap = 0, n = 0;
    for (int i = 0; i < N_SEQ; i++) cap += (size_t)w->len[i];
    float *out = malloc(cap * (size_t)c->vocab * sizeof(float));
    ig_seq_tokens seqs[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) seqs[i] = (ig_seq_tokens){i, w->tokens[i], w->prefill[i]};
    int ok = ig_engine_forward(e, seqs, N_SEQ, &err) == IG_OK;
    if (ok) {
        ig_engine_logits(e, 0, ig_engine_n_rows(e), out);
        n += (size_t)ig_engine_n_rows(e) * (size_t)c->vocab;
    }
    int done[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) done[i] = w->prefill[i];
    while (ok) {
        int ns = 0;
        for (int i = 0; i < N_SEQ; i++)
            if (done[i] < w->len[i]) seqs[ns++] = (ig_seq_tokens){i, w->tokens[i] + done[i], 1};
        if (ns == 0) break;
        ok = ig_engine_forward(e, seqs, ns, &err) == IG_OK;
        if (!ok) break;
        ig_engine_logits(e, 0, ns, out + n);
        n += (size_t)ns * (size_t)c->vocab;
        for (int k = 0; k < ns; k++) done[seqs[k].slot]++;
    }
    if (!ok) fprintf(stderr, "forward: %s\n", err.msg);
    if (keep && ok)
        *keep = e;
    else
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

/* h2o through the engine: each eviction removes the lowest independently recomputed score; at the
 * end each table holds capacity(n) entries: the recent window plus heavy hitters. */
static void test_h2o_engine_evicts_lowest(void) {
    const char *sets[] = {"heavy_ratio=0.2", "recent_ratio=0.15"};
    for (int mi = 0; mi < 2; mi++) {
        ig_policy_params *p = params_of("h2o", sets, 2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        g_recent_ratio = 0.15;
        const ig_policy_ops *ops = make_proxy("h2o");
        size_t n = 0;
        ig_engine *e = NULL;
        float *out = run(mi, ops, p, IG_KV_ACCESS_AUTO, &n, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        const ig_model_config *c = ig_model_get_config(g_models[mi]);
        void *st = ig_engine_policy_state(e);
        int wrong_count = 0, window_missing = 0;
        for (int l = 0; l < c->n_layer; l++)
            for (int s = 0; s < N_SEQ; s++)
                for (int g = 0; g < c->n_kv_head; g++) {
                    int len = g_work[mi].len[s], used = 0;
                    unsigned char seen[MAX_CTX] = {0};
                    for (int en = 0; en < MAX_CTX; en++)
                        if (g_epos[l][s][g][en] >= 0) {
                            used++;
                            seen[g_epos[l][s][g][en]] = 1;
                        }
                    if (used != g_real->capacity(st, l, len)) wrong_count++;
                    int recent = (int)floor(0.15 * len + 1e-9);
                    for (int pp = len - recent; pp < len; pp++) window_missing += !seen[pp];
                }
        printf("\n    h2o %-10s %d evictions checked, %d violations", g_fixtures[mi], g_evict_calls,
               g_bad);
        CU_ASSERT(g_evict_calls > 0 && g_attn_calls > 0);
        CU_ASSERT_EQUAL(g_bad, 0);
        CU_ASSERT_EQUAL(wrong_count, 0);
        CU_ASSERT_EQUAL(window_missing, 0);
        ig_engine_free(e);
        free(out);
        ig_policy_params_free(p);
    }
    printf("\n    ");
}

/* Budgets of 100% on the paths the conformance suite does not reach: h2o with copy access (so the
 * core gathers and reports probabilities instead of attending in place over a table that never
 * evicts), quest with no dense layers; both must equal full attention. */
static void test_full_budget_sparse_paths(void) {
    static const struct {
        const char *policy;
        const char *sets[3];
        int n;
        ig_kv_access access;
    } cases[] = {
        {"h2o", {"heavy_ratio=1", "recent_ratio=1"}, 2, IG_KV_ACCESS_COPY},
        {"quest", {"token_budget=100000", "dense_layers=0"}, 2, IG_KV_ACCESS_AUTO},
        {"quest", {"budget_ratio=1", "dense_layers=0", "page_size=1"}, 3, IG_KV_ACCESS_COPY},
        {"streaming", {"sinks=0", "window_ratio=1"}, 2, IG_KV_ACCESS_COPY},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int mi = 0; mi < 2; mi++) {
            size_t n0 = 0, n1 = 0;
            float *dense = run(mi, NULL, NULL, IG_KV_ACCESS_AUTO, &n0, NULL);
            ig_policy_params *p = params_of(cases[ci].policy, cases[ci].sets, cases[ci].n);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            const ig_policy_ops *ops = make_proxy(cases[ci].policy);
            g_quest_budget = 100000;
            g_quest_ps = 1;
            if (!strcmp(cases[ci].policy, "quest")) g_quest_ps = (int)ig_params_num(p, "page_size");
            float *got = run(mi, ops, p, cases[ci].access, &n1, NULL);
            CU_ASSERT_FATAL(dense && got && n0 == n1);
            double d = max_diff(dense, got, n0);
            printf("\n    %-9s %-10s 100%% budget (%s): max |logit - dense| %.3g", cases[ci].policy,
                   g_fixtures[mi], cases[ci].sets[0], d);
            CU_ASSERT(d <= 1e-4);
            CU_ASSERT_EQUAL(g_bad, 0);
            if (!strcmp(cases[ci].policy, "h2o")) CU_ASSERT(g_attn_calls > 0);
            if (!strcmp(cases[ci].policy, "quest")) CU_ASSERT(g_sel_calls > 0);
            free(dense);
            free(got);
            ig_policy_params_free(p);
        }
    printf("\n    ");
}

/* streaming through the engine: at the end each table holds the sinks and the last window. */
static void test_streaming_engine_resident(void) {
    const char *sets[] = {"sinks=2", "window=6"};
    for (int mi = 0; mi < 2; mi++) {
        ig_policy_params *p = params_of("streaming", sets, 2);
        const ig_policy_ops *ops = make_proxy("streaming");
        size_t n = 0;
        float *out = run(mi, ops, p, IG_KV_ACCESS_AUTO, &n, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        const ig_model_config *c = ig_model_get_config(g_models[mi]);
        int bad = 0;
        for (int l = 0; l < c->n_layer; l++)
            for (int s = 0; s < N_SEQ; s++)
                for (int g = 0; g < c->n_kv_head; g++) {
                    int len = g_work[mi].len[s];
                    unsigned char seen[MAX_CTX] = {0};
                    for (int en = 0; en < MAX_CTX; en++)
                        if (g_epos[l][s][g][en] >= 0) seen[g_epos[l][s][g][en]] = 1;
                    for (int pp = 0; pp < len; pp++) bad += seen[pp] != (pp < 2 || pp >= len - 6);
                }
        CU_ASSERT_EQUAL(bad, 0);
        free(out);
        ig_policy_params_free(p);
    }
}

/* quest through the engine with a small budget: whole pages, the last one always, within budget;
 * recall of the selection is reported by the core and must be a fraction. */
static void test_quest_engine_selection(void) {
    const char *sets[] = {"token_budget=8", "page_size=4", "dense_layers=0"};
    for (int mi = 0; mi < 2; mi++) {
        ig_policy_params *p = params_of("quest", sets, 3);
        const ig_policy_ops *ops = make_proxy("quest");
        g_quest_budget = 8;
        g_quest_ps = 4;
        size_t n = 0;
        float *out = run(mi, ops, p, IG_KV_ACCESS_AUTO, &n, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        printf("\n    quest %-10s %d selections checked, %d violations", g_fixtures[mi],
               g_sel_calls, g_bad);
        CU_ASSERT(g_sel_calls > 0);
        CU_ASSERT_EQUAL(g_bad, 0);
        free(out);
        ig_policy_params_free(p);
    }
    printf("\n    ");
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("baselines_hooks", NULL, NULL);
    CU_add_test(s, "h2o_prefill_given_colsum", test_h2o_prefill_given_colsum);
    CU_add_test(s, "h2o_prefill_computed_colsum", test_h2o_prefill_computed_colsum);
    CU_add_test(s, "h2o_decode_matches_reference", test_h2o_decode_matches_reference);
    CU_add_test(s, "h2o_evict_several", test_h2o_evict_several);
    CU_add_test(s, "h2o_dense_layers", test_h2o_dense_layers);
    CU_add_test(s, "streaming_sinks_and_window", test_streaming_sinks_and_window);
    CU_add_test(s, "quest_bound", test_quest_bound);
    CU_add_test(s, "quest_selects_top_pages", test_quest_selects_top_pages);
    CU_add_test(s, "quest_dense_layers", test_quest_dense_layers);
    CU_add_test(s, "budget_given_twice", test_budget_given_twice);
    CU_pSuite e = CU_add_suite("baselines_engine", suite_init, suite_clean);
    CU_add_test(e, "h2o_engine_evicts_lowest", test_h2o_engine_evicts_lowest);
    CU_add_test(e, "full_budget_sparse_paths", test_full_budget_sparse_paths);
    CU_add_test(e, "streaming_engine_resident", test_streaming_engine_resident);
    CU_add_test(e, "quest_engine_selection", test_quest_engine_selection);
}
