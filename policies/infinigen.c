/* infinigen: InfiniGen (Lee et al., OSDI'24). While layer i-1 runs, rehearse layer i's attention
 * from layer i-1's attention input with a few columns of layer i's (skewed) query weight against
 * the same few columns of layer i's keys (the partial key cache), keep per head the tokens within
 * alpha of the best partial score, share the count, and fetch the top-n tokens per KV head. Layers
 * below dense_layers attend every token. Optionally the home tier is a memory-limited pool that
 * evicts by fifo / lru / counter. This file only decides; it never moves KV bytes.
 *
 * Per sequence (slot) and layer, the partial weight index (which rotated columns) is chosen from
 * the sequence's own prompt at prefill, as the artifact does (it uses batch item 0's prompt); the
 * rotations come from a skew file made by 'igen calibrate'. */
#include "policies/infinigen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "kernels/backend_iface.h"
#include "kernels/cpu/cpu_kernels.h"
#include "policies/infinigen_skew.h"

/* ---- the decision rules ---- */

int64_t ig_infinigen_count_above(const float *score, const int32_t *pos, int64_t n, float alpha,
                                 float *max_out) {
    float mx = -INFINITY;
    for (int64_t e = 0; e < n; e++)
        if ((!pos || pos[e] >= 0) && score[e] > mx) mx = score[e];
    *max_out = mx;
    if (mx == -INFINITY) return 0;
    float thr = mx - alpha;
    int64_t c = 0;
    for (int64_t e = 0; e < n; e++) c += (!pos || pos[e] >= 0) && score[e] > thr;
    return c;
}

int64_t ig_infinigen_fetch_count(double mean_fraction, int64_t n_used, int64_t n_tokens,
                                 double max_fetch) {
    if (n_used <= 0) return 0;
    int64_t n = (int64_t)floor(mean_fraction * (double)n_used + 1e-6);
    int64_t cap = (int64_t)floor(max_fetch * (double)n_tokens + 1e-9);
    if (n < 1) n = 1;
    if (cap < 1) cap = 1;
    if (n > cap) n = cap;
    if (n > n_used) n = n_used;
    return n;
}

/* Monotone map of floats to unsigned keys (larger float, larger key). */
static inline uint32_t order_key(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}

#define TOPN_BUCKET_SHIFT 21 /* 2048 buckets: sign, exponent and 2 mantissa bits */

int64_t ig_infinigen_top_n(const float *score, const int32_t *pos, int64_t hw, int64_t n,
                           int32_t *out, float *tmp) {
    int64_t m = 0;
    for (int64_t e = 0; e < hw; e++) m += !pos || pos[e] >= 0;
    if (n <= 0 || m == 0) return 0;
    if (n >= m) { /* every entry in use */
        int64_t w = 0;
        for (int64_t e = 0; e < hw; e++)
            if (!pos || pos[e] >= 0) out[w++] = (int32_t)e;
        return w;
    }
    float kth;
    if (m <= 512) { /* small: quickselect on a copy */
        int64_t c = 0;
        for (int64_t e = 0; e < hw; e++)
            if (!pos || pos[e] >= 0) tmp[c++] = isnan(score[e]) ? -INFINITY : score[e];
        kth = ig_cpu_kth_largest(tmp, m, n);
    } else {
        /* histogram of the keys' top bits, then quickselect inside the boundary bucket only */
        uint32_t hist[1u << (32 - TOPN_BUCKET_SHIFT)];
        memset(hist, 0, sizeof hist);
        for (int64_t e = 0; e < hw; e++)
            if (!pos || pos[e] >= 0)
                hist[order_key(isnan(score[e]) ? -INFINITY : score[e]) >> TOPN_BUCKET_SHIFT]++;
        int64_t above = 0;
        uint32_t b = (1u << (32 - TOPN_BUCKET_SHIFT)) - 1;
        while (above + hist[b] < n) above += hist[b--];
        int64_t c = 0;
        for (int64_t e = 0; e < hw; e++) {
            if (pos && pos[e] < 0) continue;
            float v = isnan(score[e]) ? -INFINITY : score[e];
            if (order_key(v) >> TOPN_BUCKET_SHIFT == b) tmp[c++] = v;
        }
        kth = ig_cpu_kth_largest(tmp, c, n - above);
    }
    int64_t above = 0;
    for (int64_t e = 0; e < hw; e++)
        if ((!pos || pos[e] >= 0) && score[e] > kth) above++;
    int64_t ties = n - above, w = 0; /* entries equal to the k-th value, lowest indices first */
    for (int64_t e = 0; e < hw && w < n; e++) {
        if (pos && pos[e] < 0) continue;
        float v = isnan(score[e]) ? -INFINITY : score[e];
        if (v > kth)
            out[w++] = (int32_t)e;
        else if (v == kth && ties > 0) {
            out[w++] = (int32_t)e;
            ties--;
        }
    }
    return w;
}

static inline float key_float(uint32_t k) {
    uint32_t b = (k & 0x80000000u) ? k & 0x7fffffffu : ~k;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Bisection on the threshold over the floats' order keys, each step one vectorised count, until
 * exactly n entries lie above it (usually well before the 32 steps that pin the n-th value); then
 * one vectorised compaction. Ties at the n-th value take the general path. */
int64_t ig_infinigen_top_n_scored(const float *score, const int32_t *pos, int64_t hw, int64_t n,
                                  int32_t *out, float *tmp) {
    if (n <= 0 || hw <= 64) return ig_infinigen_top_n(score, pos, hw, n, out, tmp);
    uint32_t lo = order_key(-INFINITY),
             hi = order_key(INFINITY); /* count(> lo) >= n > count(> hi) */
    if (ig_cpu_count_greater(score, hw, -INFINITY) < n)
        return ig_infinigen_top_n(score, pos, hw, n, out, tmp);
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        int64_t c = ig_cpu_count_greater(score, hw, key_float(mid));
        if (c == n) return ig_cpu_indices_greater(score, hw, key_float(mid), out);
        if (c > n)
            lo = mid;
        else
            hi = mid;
    }
    return ig_infinigen_top_n(score, pos, hw, n, out, tmp); /* ties at the n-th value */
}

int ig_infinigen_pool_victims(ig_pool_evict rule, const ig_entries_view *ev,
                              const int32_t *count_by_pos, const int32_t *last_by_pos,
                              int n_victims, int32_t *victims, unsigned char *mark) {
    int64_t half = ev->n_tokens / 2;
    int got = 0;
    while (got < n_victims) {
        int64_t best = -1;
        int64_t best_key = 0;
        int32_t best_pos = 0;
        /* pass 0: the older half (lru, counter); pass 1: every resident entry */
        for (int pass = rule == IG_POOL_FIFO ? 1 : 0; pass < 2 && best < 0; pass++)
            for (int64_t e = 0; e < ev->high_water; e++) {
                int32_t p = ev->pos[e];
                if (p < 0 || mark[e] || (pass == 0 && p >= half)) continue;
                int64_t key = rule == IG_POOL_FIFO  ? p
                              : rule == IG_POOL_LRU ? last_by_pos[p]
                                                    : count_by_pos[p];
                if (best < 0 || key < best_key || (key == best_key && p < best_pos)) {
                    best = e;
                    best_key = key;
                    best_pos = p;
                }
            }
        if (best < 0) break;
        mark[best] = 1;
        victims[got++] = (int32_t)best;
    }
    for (int i = 0; i < got; i++) mark[victims[i]] = 0;
    return got;
}

/* ---- parameters ---- */

enum { RULE_Q = 0, RULE_QK = 1, RULE_UNION = 2, RULE_QVAR = 3 };
enum { FETCH_THRESHOLD = 0, FETCH_FIXED = 1, FETCH_ADAPTIVE = 2 };
enum { SCOPE_BATCH = 0, SCOPE_SEQUENCE = 1 };

static const ig_param_spec g_params[] = {
    {"partial_ratio", IG_PARAM_FLOAT, "0.2", 0.01, 1, NULL,
     "fraction of head_dim columns in the partial query/key (k = int(ratio * head_dim), >= 1)"},
    {"column_rule", IG_PARAM_ENUM, "union", 0, 0, "q|qk|union|qvar",
     "which rotated columns: top-k by sum |Q| (artifact speed path), by sum |Q|+|K| (paper), "
     "the union of both top-k (artifact accuracy path, up to 2k columns), or top-k by "
     "E[q^2] * Var[k] over the prompt (each column's share of the score's spread over keys)"},
    {"min_columns", IG_PARAM_INT, "0", 0, 512, NULL,
     "floor on the columns per top-k, in absolute columns: k = max(int(partial_ratio * "
     "head_dim), min_columns), at most head_dim"},
    {"alpha", IG_PARAM_FLOAT, "-1", -1, 10000, NULL,
     "keep tokens whose partial score is within alpha of the head's best (a weight ratio of "
     "e^alpha); -1 = by architecture: 4 for OPT, 5 for Llama"},
    {"max_fetch", IG_PARAM_FLOAT, "0.2", 0, 1, NULL,
     "the budget: most tokens fetched per KV head, as a fraction of the sequence so far "
     "(budget_of=current) or of the window (budget_of=window); at least 1"},
    {"fetch_rule", IG_PARAM_ENUM, "threshold", 0, 0, "threshold|fixed|adaptive",
     "tokens fetched per KV head: the paper's rule (within alpha of the best, the count shared "
     "over heads, at most the budget), exactly the budget (the top scores), or the threshold "
     "rule with alpha adapted per layer so that the fetched fraction tracks the budget (no cap)"},
    {"budget_of", IG_PARAM_ENUM, "current", 0, 0, "current|window",
     "what max_fetch is a fraction of: the tokens so far, or the window (the engine's context "
     "length; the artifact's accuracy path)"},
    {"dense_first", IG_PARAM_BOOL, "0", 0, 0, NULL,
     "while the sequence is no longer than the budget, fetch every token (the artifact's first "
     "rows attend densely; meaningful with budget_of=window)"},
    {"skew", IG_PARAM_STRING, NULL, 0, 0, NULL,
     "skew file from 'igen calibrate' (unset: unskewed, with a warning); in 'igen run', auto: "
     "calibrated on the point's text after its perplexity windows, cached in OUTPUT/skew/"},
    {"dense_layers", IG_PARAM_INT, "2", 0, 4096, NULL,
     "the first layers attend every token (never speculated)"},
    {"pool_capacity", IG_PARAM_FLOAT, "1", 0.01, 1, NULL,
     "host KV pool as a fraction of the whole KV cache (1 = unlimited); dense layers keep every "
     "token, the other layers share the rest"},
    {"pool_evict", IG_PARAM_ENUM, "counter", 0, 0, "fifo|lru|counter",
     "pool eviction: oldest, least recently selected or least often selected (older half)"},
    {"partial_dtype", IG_PARAM_ENUM, "f16", 0, 0, "f16|f32",
     "storage of the partial key cache (f16: half the bytes to stream, as a GPU run keeps it)"},
    {"fetch_profile", IG_PARAM_STRING, NULL, 0, 0, NULL,
     "for the cost model only (igen plan, modeled points): the policy's measured fetch profile "
     "from 'igen ppl --fetch-profile FILE', used instead of max_fetch; a run ignores it"},
    {"count_scope", IG_PARAM_ENUM, "batch", 0, 0, "batch|sequence",
     "the fetch count is shared over the heads and the batch (artifact) or per sequence"},
};

/* ---- state ---- */

typedef struct ig_state {
    const ig_policy_wq *wq; /* [L]: each layer's W_q, handed in by the engine (ig_policy_env) */
    ig_arch arch;
    int L, H, G, group, hd, d, S, C, rot_dim;
    float scale;
    int k;    /* columns per top-k */
    int kmax; /* most columns a KV head can have */
    int rule;
    float alpha;
    double max_fetch;
    int fetch_rule, budget_window, dense_first;
    float *alpha_l; /* [Ls]: the threshold per sparse layer (adapted with fetch_rule=adaptive) */
    double *ad_got, *ad_want; /* [Ls]: decayed sums of the counted and the wanted fractions */
    int dense, Ls;            /* dense layers; sparse layers = L - dense */
    double pool_frac; /* entries a sparse layer keeps, as a fraction of the sequence (1: all) */
    ig_pool_evict evict;
    int scope;
    ig_skew *skew;
    float *rope_cos, *rope_sin;
    /* per (sparse layer, slot, KV head) */
    unsigned char *ready; /* [Ls][S] partial weight index built */
    int32_t *ncols;       /* [Ls][S][G] */
    int32_t *cols;        /* [Ls][S][G][kmax], ascending */
    float *acols;         /* [Ls][S][G][kmax][hd]: the chosen columns of A, transposed */
    void *pkc;            /* partial key cache [Ls][S][G][kmax][C], by entry, f16 or f32 */
    ig_dtype pk_type;
    size_t pk_size;
    int32_t *sel_count; /* pool: [Ls][S][G][C] by position */
    int32_t *last_sel;  /* pool: [Ls][S][G][C], 1 + sequence length at the last selection */
    /* scratch (sized at init; hooks never allocate) */
    int32_t *qpos;       /* [S] */
    double *frac;        /* [S][H] count / entries in use */
    int64_t *nsel;       /* [S][G] */
    float *xrows;        /* prefill statistics: [ROW_CHUNK][hd] input rows, packed */
    float *rows;         /* [ROW_CHUNK][hd] the same rows rotated */
    float *at;           /* [hd][hd] A transposed (the rotation as a linear layer's weight) */
    float *mscore;       /* pool seeding: [G][C] group-max partial score per entry */
    float *hscore;       /* pool seeding: [group][C] */
    float *tmp;          /* pool seeding: [C] */
    float *seed_pk;      /* pool seeding: [G][C][kmax] */
    float *seed_pq;      /* [H][kmax] */
    int32_t *seed_idx;   /* [C] */
    unsigned char *mark; /* [C] */
    /* Every computation of the policy runs through a backend table: the speculation (the partial
     * query from W_q, partial scores, threshold counts, top-n) on `be`, the run's table
     * (env->be: on the CUDA engine the partial key cache mirrored on the device, its new entries
     * uploaded before each selection; on the CPU engine the cpu table reads it in place), and the
     * prefill statistics on `hbe`, a host table (the prefill view is host memory). Where the
     * engine gives no table (hooks driven by hand), none with host memory (the CUDA engine) or
     * its table fails, the policy uses a cpu table of its own (own_be): the same code. */
    ig_be *be;
    ig_be *hbe;    /* env->be when its buffers are host memory, else own_be */
    ig_be *own_be; /* created by the policy, or NULL */
    int cs, nch;   /* a group's query heads in nch sub-groups of cs <= 16 (the ops' limit) */
    int be_host;   /* be's buffers are host memory (the cpu table): pkc_d is pkc itself */
    void *pkc_d;   /* [Ls][S][G][kmax][C], as pkc */
    int64_t *tab_h, *tab_d; /* [S][G][3]: each (slot, KV head) table's place, columns, length */
    int32_t *pos_d;         /* [S][G][C]: the entries' positions, when a pool freed some */
    int64_t *pk_lo;         /* host [Ls][S][G]: first entry written since the last upload */
    float *pq_d;            /* [S][H][kmax] */
    float *hs_d;            /* [S][G][group][C] each query head's partial scores */
    float *ms_d;            /* [S][G][C] the group's max per entry */
    float *msv_d;           /* nch > 1: [S][G][nch][C] each sub-group's max, merged into ms_d */
    float *msv_h;           /* nch > 1: host [S][G][nch][C], then [S][G][C] merged */
    float *rmax_d;          /* [S][G][group] each query head's best score */
    int32_t *nrow_d;        /* [S][G][group] entries per score row */
    int32_t *cnt_d;         /* [S][G][group] threshold counts */
    int32_t *n_d, *k_d;     /* [S][G] entries and tokens to select per (slot, KV head) */
    int32_t *idx_d;         /* [S][G][C] */
    int32_t *tcnt_d;        /* [S][G] */
    int32_t *nrow_h;        /* [S][G][group], then counts */
    float *rmax_h;          /* [S][G][group] */
    int32_t *nk_h;          /* [S][G] */
    int32_t *idx_h;         /* [S][G][C] */
    /* the partial query on the device: W_q (+ bias) of each selected layer as stored, the input
     * rows, the full query (rotated on Llama), and per (sparse layer, slot, KV head) the chosen
     * columns of A transposed and scaled, [hd][kmax] (zero past ncols), re-uploaded when
     * set_columns changes them */
    void **wq_d;              /* [Ls] */
    ig_dtype *wq_t;           /* [Ls] */
    float **bq_d;             /* [Ls], NULL entries without a bias */
    float *x_d;               /* [S][d] */
    float *qf_d;              /* [S][H*hd] */
    float *pqmax_d;           /* [S][H] (partial_scores' row maxima, unused) */
    int32_t *qpos_d;          /* [S] Llama: each query's position */
    float *cos_d, *sin_d;     /* Llama: the RoPE tables, as rope_cos/rope_sin */
    float *act_d;             /* [Ls][S][G][hd][kmax] */
    unsigned char *act_dirty; /* host [Ls][S][G] */
    float *act_h;             /* host staging [hd][kmax] */
    long long dev_selections, own_selections, every_selections, selections;
    int dev_failed; /* the run's table failed: own_be took over */
    int own_failed; /* own_be failed too (never expected): every entry selected */
    char failed_name[32];
} ig_state;

#define ROW_CHUNK 256
/* fetch_rule=adaptive: alpha *= (wanted / counted fraction)^ADAPT_GAIN after every selection of a
 * layer, within [ALPHA_MIN, ALPHA_MAX] */
#define ADAPT_GAIN  0.3
#define ADAPT_DECAY 0.9
#define ALPHA_MIN   0.01f
#define ALPHA_MAX   10000.0f

static size_t lsg(const ig_state *s, int ls, int slot, int g) {
    return ((size_t)ls * (size_t)s->S + (size_t)slot) * (size_t)s->G + (size_t)g;
}

static int pool_on(const ig_state *s) {
    return s->pool_frac < 1.0;
}

/* Releases the speculation's buffers on s->be (device_init's), leaving s->be NULL. */
static void table_free(ig_state *s) {
    if (s->be) {
        if (s->be_host) s->pkc_d = NULL; /* pkc's */
        void **dev[] = {&s->pkc_d,          (void **)&s->tab_d,   (void **)&s->pos_d,
                        (void **)&s->pq_d,  (void **)&s->hs_d,    (void **)&s->ms_d,
                        (void **)&s->msv_d, (void **)&s->rmax_d,  (void **)&s->nrow_d,
                        (void **)&s->cnt_d, (void **)&s->n_d,     (void **)&s->k_d,
                        (void **)&s->idx_d, (void **)&s->tcnt_d,  (void **)&s->x_d,
                        (void **)&s->qf_d,  (void **)&s->pqmax_d, (void **)&s->qpos_d,
                        (void **)&s->cos_d, (void **)&s->sin_d,   (void **)&s->act_d};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
            ig_be_release(s->be, *dev[i]);
            *dev[i] = NULL;
        }
    }
    void **host[] = {(void **)&s->wq_d,      (void **)&s->wq_t,   (void **)&s->bq_d,
                     (void **)&s->act_dirty, (void **)&s->act_h,  (void **)&s->pk_lo,
                     (void **)&s->tab_h,     (void **)&s->nrow_h, (void **)&s->rmax_h,
                     (void **)&s->nk_h,      (void **)&s->idx_h,  (void **)&s->msv_h};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(*host[i]);
        *host[i] = NULL;
    }
    s->be = NULL;
    s->be_host = 0;
}

static void free_state(ig_state *s) {
    table_free(s);
    ig_be_free(s->own_be);
    ig_skew_free(s->skew);
    free(s->alpha_l);
    free(s->ad_got);
    free(s->ad_want);
    free(s->rope_cos);
    free(s->rope_sin);
    free(s->ready);
    free(s->ncols);
    free(s->cols);
    free(s->acols);
    free(s->pkc);
    free(s->sel_count);
    free(s->last_sel);
    free(s->qpos);
    free(s->mscore);
    free(s->hscore);
    free(s->tmp);
    free(s->frac);
    free(s->nsel);
    free(s->xrows);
    free(s->rows);
    free(s->at);
    free(s->seed_pk);
    free(s->seed_pq);
    free(s->seed_idx);
    free(s->mark);
    memset(s, 0, sizeof *s);
}

static float dotf(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    float r = 0;
    for (; i < n; i++) r += a[i] * b[i];
    for (int j = 0; j < 8; j++) r += acc[j];
    return r;
}

/* The speculation's buffers on the table be (ig_state.be), sized once; W_q as be reads it (the
 * engine's device copy on a device table, as handed in on a host one). On failure the caller
 * releases what was made (table_free). */
static ig_status device_init(ig_state *s, ig_be *be, const ig_policy_wq *wq_dev, ig_error *err) {
    size_t Ls = (size_t)s->Ls, S = (size_t)s->S, G = (size_t)s->G, H = (size_t)s->H;
    size_t C = (size_t)s->C, km = (size_t)s->kmax, grp = (size_t)s->group, V = S * G * s->nch;
    s->be = be;
    s->be_host = !be->caps.device_memory;
    s->pk_lo = ig_malloc(Ls * S * G * sizeof(int64_t), err);
    s->tab_h = ig_malloc(V * 3 * sizeof(int64_t), err);
    s->nrow_h = ig_malloc(S * H * sizeof(int32_t), err);
    s->rmax_h = ig_malloc(S * H * sizeof(float), err);
    s->nk_h = ig_malloc(S * G * sizeof(int32_t), err);
    s->idx_h = ig_malloc(S * G * C * sizeof(int32_t), err);
    if (s->nch > 1) s->msv_h = ig_malloc(V * C * sizeof(float), err);
    if (!s->pk_lo || !s->tab_h || !s->nrow_h || !s->rmax_h || !s->nk_h || !s->idx_h ||
        (s->nch > 1 && !s->msv_h))
        return IG_ERR_NOMEM;
    for (size_t i = 0; i < Ls * S * G; i++) s->pk_lo[i] = 0;
    size_t pk_bytes = Ls * S * G * km * C * s->pk_size;
    if (s->be_host) s->pkc_d = s->pkc; /* host memory: the table reads the cache in place */
    if (!(s->pkc_d || (s->pkc_d = ig_be_alloc(be, pk_bytes, err))) ||
        !(s->tab_d = ig_be_alloc(be, V * 3 * sizeof(int64_t), err)) ||
        !(s->pos_d = ig_be_alloc(be, V * C * sizeof(int32_t), err)) ||
        (s->nch > 1 && !(s->msv_d = ig_be_alloc(be, V * C * sizeof(float), err))) ||
        !(s->pq_d = ig_be_alloc(be, S * H * km * sizeof(float), err)) ||
        !(s->hs_d = ig_be_alloc(be, S * G * grp * C * sizeof(float), err)) ||
        !(s->ms_d = ig_be_alloc(be, S * G * C * sizeof(float), err)) ||
        !(s->rmax_d = ig_be_alloc(be, S * H * sizeof(float), err)) ||
        !(s->nrow_d = ig_be_alloc(be, S * H * sizeof(int32_t), err)) ||
        !(s->cnt_d = ig_be_alloc(be, S * H * sizeof(int32_t), err)) ||
        !(s->n_d = ig_be_alloc(be, S * G * sizeof(int32_t), err)) ||
        !(s->k_d = ig_be_alloc(be, S * G * sizeof(int32_t), err)) ||
        !(s->idx_d = ig_be_alloc(be, S * G * C * sizeof(int32_t), err)) ||
        !(s->tcnt_d = ig_be_alloc(be, S * G * sizeof(int32_t), err))) {
        ig_error_prefix(err,
                        "infinigen: the speculation's buffers on the %s backend: ", be->caps.name);
        return err->code ? err->code : IG_ERR_NOMEM;
    }
    /* the partial query's buffers and the RoPE tables */
    size_t hd = (size_t)s->hd, qd = H * hd, d = (size_t)s->d;
    s->wq_d = ig_calloc(Ls, sizeof *s->wq_d, err);
    s->bq_d = ig_calloc(Ls, sizeof *s->bq_d, err);
    s->wq_t = ig_calloc(Ls, sizeof *s->wq_t, err);
    s->act_dirty = ig_malloc(Ls * S * G, err);
    s->act_h = ig_malloc(hd * km * sizeof(float), err);
    if (!s->wq_d || !s->bq_d || !s->wq_t || !s->act_dirty || !s->act_h) return IG_ERR_NOMEM;
    memset(s->act_dirty, 1, Ls * S * G);
    ig_status rc = IG_OK;
    if (!(s->x_d = ig_be_alloc(be, S * d * sizeof(float), err)) ||
        !(s->qf_d = ig_be_alloc(be, S * qd * sizeof(float), err)) ||
        !(s->pqmax_d = ig_be_alloc(be, S * H * sizeof(float), err)) ||
        !(s->act_d = ig_be_alloc(be, Ls * S * G * hd * km * sizeof(float), err)))
        rc = err->code ? err->code : IG_ERR_NOMEM;
    /* the engine's own device copies of W_q (the type it computes with): not this policy's */
    for (int ls = 0; ls < s->Ls; ls++) {
        const ig_policy_wq *v = &wq_dev[ls + s->dense];
        s->wq_d[ls] = (void *)v->data;
        s->wq_t[ls] = v->dtype;
        s->bq_d[ls] = (float *)v->bias;
    }
    if (rc == IG_OK && s->arch == IG_ARCH_LLAMA) {
        size_t tb = C * (size_t)(s->rot_dim / 2) * sizeof(float);
        if (!(s->qpos_d = ig_be_alloc(be, S * sizeof(int32_t), err)) ||
            !(s->cos_d = ig_be_alloc(be, tb, err)) || !(s->sin_d = ig_be_alloc(be, tb, err)))
            rc = err->code ? err->code : IG_ERR_NOMEM;
        if (rc == IG_OK) rc = ig_be_upload(be, s->cos_d, s->rope_cos, tb, err);
        if (rc == IG_OK) rc = ig_be_upload(be, s->sin_d, s->rope_sin, tb, err);
    }
    if (rc != IG_OK) {
        ig_error_prefix(
            err, "infinigen: the partial query's buffers on the %s backend: ", be->caps.name);
        return rc;
    }
    return IG_OK;
}

static ig_status ig_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                         ig_policy_caps *caps, ig_error *err) {
    ig_state *s = st;
    const ig_model_config *c = env->cfg;
    memset(s, 0, sizeof *s);
    s->wq = env->wq;
    s->arch = c->arch;
    s->L = c->n_layer;
    s->H = c->n_head;
    s->G = c->n_kv_head;
    s->hd = c->head_dim;
    s->d = c->d_model;
    s->S = env->n_slots;
    s->C = env->max_ctx;
    s->rot_dim = c->rot_dim;
    if (s->G <= 0 || s->H % s->G != 0 || s->hd > 512)
        return ig_error_set(
            err, IG_ERR_UNSUPPORTED,
            "infinigen: %d query heads over %d KV heads of %d dims is not supported", s->H, s->G,
            s->hd);
    if (!env->wq)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "infinigen: the engine handed in no W_q (its speculation projects the "
                            "next layer's query)");
    for (int v = 0; v < 2; v++) {
        const ig_policy_wq *w = v ? env->wq_dev : env->wq;
        for (int l = 0; w && l < s->L; l++)
            if (w[l].rows != (int64_t)s->H * s->hd || w[l].cols != s->d ||
                !ig_dtype_is_weight_storage(w[l].dtype) || !ig_dtype_row_ok(w[l].dtype, s->d))
                return ig_error_set(err, IG_ERR_SHAPE,
                                    "infinigen: layer %d's W_q%s is [%lld][%lld] %s, expected "
                                    "[%d][%d]",
                                    l, v ? " on the device" : "", (long long)w[l].rows,
                                    (long long)w[l].cols, ig_dtype_name(w[l].dtype), s->H * s->hd,
                                    s->d);
    }
    s->group = s->H / s->G;
    s->scale = 1.0f / sqrtf((float)s->hd);
    s->k = (int)(ig_params_num(p, "partial_ratio") * s->hd + 1e-9);
    int min_cols = (int)ig_params_num(p, "min_columns");
    if (s->k < min_cols) s->k = min_cols;
    if (s->k < 1) s->k = 1;
    if (s->k > s->hd) s->k = s->hd;
    const char *rule = ig_params_str(p, "column_rule");
    s->rule = !strcmp(rule, "q")      ? RULE_Q
              : !strcmp(rule, "qk")   ? RULE_QK
              : !strcmp(rule, "qvar") ? RULE_QVAR
                                      : RULE_UNION;
    s->kmax = s->rule == RULE_UNION ? (2 * s->k < s->hd ? 2 * s->k : s->hd) : s->k;
    double alpha = ig_params_num(p, "alpha");
    s->alpha = alpha < 0 ? (s->arch == IG_ARCH_OPT ? 4.0f : 5.0f) : (float)alpha;
    s->max_fetch = ig_params_num(p, "max_fetch");
    const char *fr = ig_params_str(p, "fetch_rule");
    s->fetch_rule = !strcmp(fr, "fixed")      ? FETCH_FIXED
                    : !strcmp(fr, "adaptive") ? FETCH_ADAPTIVE
                                              : FETCH_THRESHOLD;
    s->budget_window = !strcmp(ig_params_str(p, "budget_of"), "window");
    s->dense_first = ig_params_num(p, "dense_first") != 0;
    int dense = (int)ig_params_num(p, "dense_layers");
    s->dense = dense < s->L ? dense : s->L;
    s->Ls = s->L - s->dense;
    const char *ev = ig_params_str(p, "pool_evict");
    s->evict = !strcmp(ev, "fifo")  ? IG_POOL_FIFO
               : !strcmp(ev, "lru") ? IG_POOL_LRU
                                    : IG_POOL_COUNTER;
    s->scope = !strcmp(ig_params_str(p, "count_scope"), "batch") ? SCOPE_BATCH : SCOPE_SEQUENCE;
    s->pk_type = !strcmp(ig_params_str(p, "partial_dtype"), "f16") ? IG_DTYPE_F16 : IG_DTYPE_F32;
    s->pk_size = ig_dtype_size(s->pk_type);
    /* the ops take up to 16 query rows per table: larger groups (multi-query models) in equal
     * sub-groups */
    for (s->cs = s->group < 16 ? s->group : 16; s->group % s->cs; s->cs--) {
    }
    s->nch = s->group / s->cs;

    /* The pool holds pool_capacity of the whole KV cache; the dense layers keep every token, the
     * sparse layers share what is left equally. */
    double pool = ig_params_num(p, "pool_capacity");
    s->pool_frac = 1.0;
    if (pool < 1.0) {
        double need = (double)s->dense / (double)s->L;
        double frac = s->Ls > 0 ? (pool * s->L - s->dense) / s->Ls : 0;
        if (s->Ls == 0 || frac * s->C < 1.0)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "infinigen: pool capacity %g cannot hold the %d dense layers of %d "
                                "(they keep every token: %.4g of the KV cache) and a token per "
                                "other layer; raise pool_capacity or lower dense_layers",
                                pool, s->dense, s->L, need);
        s->pool_frac = frac;
    }

    caps->select_ahead = 1;
    caps->dense_layers = s->dense;
    if (s->Ls == 0) { /* every layer dense: the plain causal path */
        caps->dense = 1;
        return IG_OK;
    }
    caps->reads_wq = 1; /* the partial query of layers dense and up */
    ig_status rc = IG_OK;
    const char *path = ig_params_str(p, "skew");
    if (path && !strcmp(path, "auto")) {
        rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                          "infinigen: skew=auto is resolved by 'igen run' (it calibrates on the "
                          "point's text); here give a file made by 'igen calibrate'");
        goto fail;
    }
    if (path) {
        rc = ig_skew_load(path, &s->skew, err);
        if (rc == IG_OK) rc = ig_skew_check(s->skew, c, path, err);
        if (rc != IG_OK) {
            ig_error_prefix(err, "infinigen: ");
            goto fail;
        }
    } else {
        IG_WARN("infinigen: no skew file (--set skew=FILE, made by 'igen calibrate'): running "
                "unskewed, which selects less accurately");
        rc = ig_skew_identity(c, &s->skew, err);
        if (rc != IG_OK) goto fail;
    }

    size_t Ls = (size_t)s->Ls, S = (size_t)s->S, G = (size_t)s->G, H = (size_t)s->H;
    size_t C = (size_t)s->C, hd = (size_t)s->hd, km = (size_t)s->kmax;
    s->ready = ig_calloc(Ls * S, 1, err);
    s->ncols = ig_calloc(Ls * S * G, sizeof(int32_t), err);
    s->cols = ig_calloc(Ls * S * G * km, sizeof(int32_t), err);
    s->acols = ig_calloc(Ls * S * G * km * hd, sizeof(float), err);
    s->pkc = ig_aligned_alloc(Ls * S * G * km * C * s->pk_size, err);
    s->qpos = ig_calloc(S, sizeof(int32_t), err);
    s->frac = ig_calloc(S * H, sizeof(double), err);
    s->nsel = ig_calloc(S * G, sizeof(int64_t), err);
    s->xrows = ig_malloc(ROW_CHUNK * hd * sizeof(float), err);
    s->rows = ig_malloc(ROW_CHUNK * hd * sizeof(float), err);
    s->at = ig_malloc(hd * hd * sizeof(float), err);
    s->mark = ig_calloc(C, 1, err);
    s->alpha_l = ig_malloc(Ls * sizeof(float), err);
    s->ad_got = ig_calloc(Ls, sizeof(double), err);
    s->ad_want = ig_calloc(Ls, sizeof(double), err);
    rc = IG_ERR_NOMEM;
    if (!s->ready || !s->ncols || !s->cols || !s->acols || !s->pkc || !s->qpos || !s->frac ||
        !s->nsel || !s->xrows || !s->rows || !s->at || !s->mark || !s->alpha_l || !s->ad_got ||
        !s->ad_want)
        goto fail;
    for (size_t l = 0; l < Ls; l++) s->alpha_l[l] = s->alpha;
    if (pool_on(s)) {
        s->sel_count = ig_calloc(Ls * S * G * C, sizeof(int32_t), err);
        s->last_sel = ig_calloc(Ls * S * G * C, sizeof(int32_t), err);
        if (!s->sel_count || !s->last_sel) goto fail;
        if (s->evict != IG_POOL_FIFO) {
            s->seed_pk = ig_malloc(G * C * km * sizeof(float), err);
            s->seed_pq = ig_malloc(H * km * sizeof(float), err);
            s->seed_idx = ig_malloc(C * sizeof(int32_t), err);
            s->mscore = ig_malloc(G * C * sizeof(float), err);
            s->hscore = ig_malloc((size_t)s->group * C * sizeof(float), err);
            s->tmp = ig_malloc(C * sizeof(float), err);
            if (!s->seed_pk || !s->seed_pq || !s->seed_idx || !s->mscore || !s->hscore || !s->tmp)
                goto fail;
        }
    }
    if (s->arch == IG_ARCH_LLAMA) {
        size_t half = (size_t)s->rot_dim / 2;
        s->rope_cos = ig_malloc(C * half * sizeof(float), err);
        s->rope_sin = ig_malloc(C * half * sizeof(float), err);
        rc = IG_ERR_NOMEM;
        if (!s->rope_cos || !s->rope_sin) goto fail;
        ig_cpu_rope_table(c->rope_theta, s->rot_dim, s->C, s->rope_cos, s->rope_sin);
    }
    /* the speculation through the run's backend table: on a device backend with the engine's
     * device W_q, on a host one (the CPU engine's cpu table) with W_q as handed in; the policy's
     * own cpu table where the run has no table with host memory (the prefill statistics) or none
     * it can use for the speculation */
    const ig_policy_wq *wq_be = env->be && env->be->caps.device_memory ? env->wq_dev : env->wq;
    if (!env->be || env->be->caps.device_memory) {
        rc = ig_be_cpu_create(&s->own_be, err);
        if (rc != IG_OK) {
            ig_error_prefix(err, "infinigen: a cpu table of its own: ");
            goto fail;
        }
    }
    s->hbe = env->be && !env->be->caps.device_memory ? env->be : s->own_be;
    if (env->be && wq_be)
        rc = device_init(s, env->be, wq_be, err);
    else
        rc = device_init(s, s->own_be, env->wq, err);
    if (rc != IG_OK) goto fail;
    return IG_OK;
fail:
    free_state(s);
    return rc;
}

static void ig_fini(void *st) {
    free_state(st);
}

static int64_t ig_capacity(const void *st, int layer, int64_t n_tokens) {
    const ig_state *s = st;
    if (!pool_on(s) || layer < s->dense) return n_tokens;
    int64_t c = (int64_t)ceil(s->pool_frac * (double)n_tokens - 1e-9);
    if (c < 1) c = 1;
    return c < n_tokens ? c : n_tokens;
}

/* ---- partial weight index (at prefill, from the prompt) ---- */

/* The k largest of x[0..n) (ties: lower index), marked in used[]. */
static void top_k_columns(const double *x, int n, int k, unsigned char *used) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!used[i] && (best < 0 || x[i] > x[best])) best = i;
        if (best < 0) return;
        used[best] = 1;
    }
}

/* Column statistics of the rotated rows X A (X: n rows of hd at stride ld; A as s->at, transposed,
 * the weight of a linear layer): per column c, the sum of |(X A)[row][c]| into abs_sum, of
 * (X A)[row][c] into sum and of its square into sq (each may be NULL). The products run on the
 * host table (the prefill view is host memory); the sums in double here. Returns the table's
 * status. */
static ig_status column_stats_rotated(ig_state *s, const float *X, int n, int ld, double *abs_sum,
                                      double *sum, double *sq, ig_error *err) {
    size_t hd = (size_t)s->hd;
    for (int r0 = 0; r0 < n; r0 += ROW_CHUNK) {
        int nr = n - r0 < ROW_CHUNK ? n - r0 : ROW_CHUNK;
        for (int r = 0; r < nr; r++)
            memcpy(s->xrows + (size_t)r * hd, X + (size_t)(r0 + r) * (size_t)ld,
                   hd * sizeof(float));
        IG_TRY(ig_be_linear(s->hbe, s->xrows, nr, s->hd, s->at, IG_DTYPE_F32, s->hd, NULL, s->rows,
                            err));
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < s->hd; c++) {
                double x = s->rows[(size_t)r * (size_t)s->hd + (size_t)c];
                if (abs_sum) abs_sum[c] += fabs(x);
                if (sum) sum[c] += x;
                if (sq) sq[c] += x * x;
            }
    }
    return IG_OK;
}

static void set_columns(ig_state *s, int ls, int slot, int g, const unsigned char *used) {
    size_t i = lsg(s, ls, slot, g), hd = (size_t)s->hd, km = (size_t)s->kmax;
    int32_t *cols = s->cols + i * km;
    float *ac = s->acols + i * km * hd;
    const float *A = ig_skew_A(s->skew, ls + s->dense, g);
    int n = 0;
    for (int c = 0; c < s->hd && n < s->kmax; c++)
        if (used[c]) cols[n++] = c;
    s->ncols[i] = n;
    if (s->act_dirty) s->act_dirty[i] = 1;
    for (int j = 0; j < n; j++)
        for (size_t r = 0; r < hd; r++) ac[(size_t)j * hd + r] = A[r * hd + (size_t)cols[j]];
}

static void default_index(ig_state *s, int ls, int slot);

static void build_index(ig_state *s, int ls, int slot, const ig_prefill_view *v) {
    double colq[512], colk[512];
    unsigned char used[512];
    int hd = s->hd;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = IG_OK;
    for (int g = 0; g < s->G && rc == IG_OK; g++) {
        const float *A = ig_skew_A(s->skew, ls + s->dense, g);
        for (int o = 0; o < hd; o++)
            for (int r = 0; r < hd; r++)
                s->at[(size_t)o * (size_t)hd + (size_t)r] = A[(size_t)r * (size_t)hd + (size_t)o];
        memset(colq, 0, sizeof colq);
        memset(colk, 0, sizeof colk);
        memset(used, 0, sizeof used);
        if (s->rule == RULE_QVAR) {
            /* score = sum_c q_c k_c: over the keys, column c spreads it by q_c^2 Var[k_c] */
            double qs[512] = {0}, qq[512] = {0}, ks[512] = {0}, kk[512] = {0}, w[512];
            for (int hh = 0; hh < s->group && rc == IG_OK; hh++)
                rc = column_stats_rotated(s, v->q + (size_t)(g * s->group + hh) * (size_t)hd,
                                          v->n_new, s->H * hd, NULL, qs, qq, &err);
            if (rc == IG_OK)
                rc = column_stats_rotated(s, v->k + (size_t)g * (size_t)hd, v->n_new, s->G * hd,
                                          NULL, ks, kk, &err);
            double nq = (double)v->n_new * s->group, nk = (double)v->n_new;
            for (int c = 0; c < hd; c++) {
                double mk = ks[c] / nk, var = kk[c] / nk - mk * mk;
                w[c] = qq[c] / nq * (var > 0 ? var : 0);
            }
            top_k_columns(w, hd, s->k, used);
            set_columns(s, ls, slot, g, used);
            continue;
        }
        for (int hh = 0; hh < s->group && rc == IG_OK; hh++)
            rc = column_stats_rotated(s, v->q + (size_t)(g * s->group + hh) * (size_t)hd, v->n_new,
                                      s->H * hd, colq, NULL, NULL, &err);
        if (rc == IG_OK)
            rc = column_stats_rotated(s, v->k + (size_t)g * (size_t)hd, v->n_new, s->G * hd, colk,
                                      NULL, NULL, &err);
        if (s->rule == RULE_Q) {
            top_k_columns(colq, hd, s->k, used);
        } else if (s->rule == RULE_QK) {
            /* the paper's |Q| + |K| per column; the group's queries averaged over its heads so
             * that Q and K weigh as in the per-head rule */
            double sum[512];
            for (int c = 0; c < hd; c++) sum[c] = colq[c] / s->group + colk[c];
            top_k_columns(sum, hd, s->k, used);
        } else {
            top_k_columns(colq, hd, s->k, used);
            unsigned char used_k[512] = {0};
            top_k_columns(colk, hd, s->k, used_k);
            for (int c = 0; c < hd; c++) used[c] |= used_k[c];
        }
        set_columns(s, ls, slot, g, used);
    }
    if (rc != IG_OK) { /* never expected: the host table refused its arguments */
        IG_WARN("infinigen: prompt statistics of layer %d on the %s backend failed, its first "
                "rotated columns are used: %s",
                ls + s->dense, s->hbe->caps.name, err.msg);
        default_index(s, ls, slot);
        return;
    }
    s->ready[(size_t)ls * (size_t)s->S + (size_t)slot] = 1;
}

/* Without prompt statistics (never expected: prefill precedes every append): the first k
 * rotated columns, those of the largest singular values. */
static void default_index(ig_state *s, int ls, int slot) {
    unsigned char used[512] = {0};
    for (int c = 0; c < s->k; c++) used[c] = 1;
    for (int g = 0; g < s->G; g++) set_columns(s, ls, slot, g, used);
    s->ready[(size_t)ls * (size_t)s->S + (size_t)slot] = 1;
}

/* ---- selection ---- */

static void select_every(const ig_entries_view *ev, int32_t *out, int64_t *n) {
    int64_t w = 0;
    for (int64_t e = 0; e < ev->high_water; e++)
        if (ev->pos[e] >= 0) out[w++] = (int32_t)e;
    *n = w;
}

/* The fetch count per (slot, KV head) from the threshold fractions (s->frac) of one selection,
 * and fetch_rule=adaptive's step of alpha. */
static void fetch_counts(ig_state *s, int ls, int n, const ig_entries_view *ev) {
    int G = s->G, H = s->H;
    /* the fetch count: the mean over query heads (and the batch) of count / entries */
    double all = 0, target = 0;
    for (int i = 0; i < n * H; i++) all += s->frac[i];
    for (int i = 0; i < n; i++) {
        double mean = all / (double)(n * H);
        if (s->scope == SCOPE_SEQUENCE) {
            mean = 0;
            for (int h = 0; h < H; h++) mean += s->frac[(size_t)i * (size_t)H + (size_t)h];
            mean /= H;
        }
        for (int g = 0; g < G; g++) {
            const ig_entries_view *v = &ev[(size_t)i * (size_t)G + (size_t)g];
            int64_t base = s->budget_window ? (int64_t)s->C : v->n_tokens;
            int64_t cap = (int64_t)floor(s->max_fetch * (double)base + 1e-9), m;
            if (cap < 1) cap = 1;
            if (s->dense_first && v->n_tokens <= cap)
                m = v->n_used; /* the first rows attend densely */
            else if (s->fetch_rule == FETCH_FIXED)
                m = cap < v->n_used ? cap : v->n_used;
            else if (s->fetch_rule == FETCH_ADAPTIVE)
                m = ig_infinigen_fetch_count(mean, v->n_used, v->n_tokens, 1.0);
            else
                m = ig_infinigen_fetch_count(mean, v->n_used, base, s->max_fetch);
            s->nsel[(size_t)i * (size_t)G + (size_t)g] = m;
            target += v->n_tokens > 0 ? (double)cap / (double)v->n_tokens : 0;
        }
    }
    if (s->fetch_rule == FETCH_ADAPTIVE) {
        /* the fraction counted by the threshold against the budget's, both as decayed
         * sums (so that the arithmetic mean of the fetched fraction tracks the budget, not
         * its geometric mean); the count grows monotonically with alpha, so a damped
         * multiplicative step converges */
        s->ad_got[ls] = ADAPT_DECAY * s->ad_got[ls] + all / (double)(n * H);
        s->ad_want[ls] = ADAPT_DECAY * s->ad_want[ls] + target / (double)(n * G);
        double r = s->ad_got[ls] > 0 ? s->ad_want[ls] / s->ad_got[ls] : 2.0;
        float a = s->alpha_l[ls] * (float)exp(ADAPT_GAIN * log(r));
        s->alpha_l[ls] = a < ALPHA_MIN ? ALPHA_MIN : a > ALPHA_MAX ? ALPHA_MAX : a;
    }
}

/* Step 1: the full query of layer ls + dense from the previous layer's attention
 * input with the layer's W_q (rotated at each sequence's new position on Llama), then each query
 * head's partial query, its dot products with the chosen columns of A (scaled), as partial scores
 * of one table per KV head: pq_d[i][h][j] = sum_r scale A[r][cols_j] q[i][h][r]. */
static ig_status partial_query(ig_state *s, int ls, int n, const int *slots, const float *x_prev,
                               const ig_entries_view *ev, ig_error *err) {
    ig_be *be = s->be;
    int G = s->G, H = s->H, hd = s->hd, km = s->kmax, grp = s->group;
    size_t qd = (size_t)H * (size_t)hd, tb = (size_t)hd * (size_t)km;
    IG_TRY(ig_be_upload(be, s->x_d, x_prev, (size_t)n * (size_t)s->d * sizeof(float), err));
    IG_TRY(ig_be_linear(be, s->x_d, n, s->d, s->wq_d[ls], s->wq_t[ls], (int64_t)qd, s->bq_d[ls],
                        s->qf_d, err));
    if (s->arch == IG_ARCH_LLAMA) {
        for (int i = 0; i < n; i++) s->qpos[i] = (int32_t)ev[(size_t)i * (size_t)G].n_tokens;
        IG_TRY(ig_be_upload(be, s->qpos_d, s->qpos, (size_t)n * sizeof(int32_t), err));
        IG_TRY(ig_be_rope(be, s->qf_d, n, H, hd, s->rot_dim, s->qpos_d, s->cos_d, s->sin_d, err));
    }
    for (int i = 0; i < n; i++) {
        for (int g = 0; g < G; g++) {
            size_t ix = lsg(s, ls, slots[i], g);
            if (!s->act_dirty[ix]) continue;
            const float *ac = s->acols + ix * (size_t)km * (size_t)hd;
            memset(s->act_h, 0, tb * sizeof(float));
            for (int j = 0; j < s->ncols[ix]; j++)
                for (int r = 0; r < hd; r++)
                    s->act_h[(size_t)r * (size_t)km + (size_t)j] =
                        s->scale * ac[(size_t)j * (size_t)hd + (size_t)r];
            IG_TRY(ig_be_upload(be, s->act_d + ix * tb, s->act_h, tb * sizeof(float), err));
            s->act_dirty[ix] = 0;
        }
        /* the slot's G tables are consecutive: one call per sub-group of cs query heads (one in
         * all but multi-query models), every column of kmax (zero past ncols) */
        size_t ix0 = lsg(s, ls, slots[i], 0);
        for (int c = 0; c < s->nch; c++)
            IG_TRY(ig_be_partial_scores(
                be, s->act_d + ix0 * tb, IG_DTYPE_F32, km, (int64_t)tb, hd, km,
                s->qf_d + (size_t)i * qd + (size_t)c * (size_t)s->cs * (size_t)hd, hd,
                (int64_t)grp * hd, s->cs,
                s->pq_d + ((size_t)i * (size_t)H + (size_t)c * (size_t)s->cs) * (size_t)km, km,
                (int64_t)grp * km, NULL, 0, s->pqmax_d + (size_t)i * (size_t)H, G, err));
    }
    return IG_OK;
}

/* One selection through the table s->be: 1. the partial queries, then the partial key cache's
 * entries written since the last selection (a device table's mirror); 2. the partial scores of
 * every (slot, KV head) in one call; 3. the threshold counts of every query head at once, the
 * fetch counts on the host (a few numbers); 4. the top-n of every (slot, KV head) at once; the
 * selected entries come back. A group of more than 16 query heads (the ops' limit) is scored as
 * nch sub-groups of cs, each a table of its own over the same keys, whose maxima per entry are
 * merged on the host. On failure returns the table's status with alpha as before the call. */
static ig_status select_on_table(ig_state *s, int ls, int n, const int *slots, const float *x_prev,
                                 const ig_entries_view *ev, ig_selection *out, ig_error *err) {
    int G = s->G, H = s->H, grp = s->group, km = s->kmax, tasks = n * G;
    int cs = s->cs, nch = s->nch, V = tasks * nch;
    ig_be *be = s->be;
    size_t C = (size_t)s->C, psz = s->pk_size, tab = (size_t)km * C * psz;
    /* 1. */
    IG_TRY(partial_query(s, ls, n, slots, x_prev, ev, err));
    for (int t = 0; t < tasks && !s->be_host; t++) {
        size_t ix = lsg(s, ls, slots[t / G], t % G);
        int64_t lo = s->pk_lo[ix], hw = ev[t].high_water;
        if (lo >= hw) continue;
        size_t off = ix * tab + (size_t)lo * psz;
        IG_TRY(ig_be_upload2d(be, (char *)s->pkc_d + off, C * psz, (const char *)s->pkc + off,
                              C * psz, (size_t)(hw - lo) * psz, (size_t)s->ncols[ix], err));
        s->pk_lo[ix] = INT64_MAX;
    }
    /* 2. each (slot, KV head, sub-group)'s query heads against its partial keys, one call for
     * every table (each with its own place, column count and length) */
    int64_t n_max = 0;
    for (int t = 0; t < tasks; t++) {
        size_t ix = lsg(s, ls, slots[t / G], t % G);
        int64_t hw = ev[t].high_water;
        for (int hh = 0; hh < grp; hh++) s->nrow_h[t * grp + hh] = (int32_t)hw;
        for (int c = 0; c < nch; c++) {
            int64_t *tv = s->tab_h + 3 * ((size_t)t * (size_t)nch + (size_t)c);
            tv[0] = (int64_t)(ix * (size_t)km * C);
            tv[1] = s->ncols[ix];
            tv[2] = hw;
        }
        if (hw > n_max) n_max = hw;
    }
    float *ms = nch > 1 ? s->msv_d : s->ms_d; /* [V][C] */
    IG_TRY(ig_be_upload(be, s->tab_d, s->tab_h, (size_t)V * 3 * sizeof(int64_t), err));
    IG_TRY(ig_be_partial_scores_tab(be, s->pkc_d, s->pk_type, s->C, s->tab_d, km, n_max, s->pq_d,
                                    km, (int64_t)cs * km, cs, s->hs_d, s->C, (int64_t)cs * s->C, ms,
                                    s->C, s->rmax_d, V, err));
    /* a pool freed entries: out of the scores, the maxima over the rest (the entries' positions,
     * -1 where free, are the mask) */
    int masked = 0;
    for (int t = 0; t < tasks; t++) masked |= ev[t].n_used < ev[t].high_water;
    for (int v = 0; v < V && masked; v++)
        IG_TRY(ig_be_upload(be, s->pos_d + (size_t)v * C, ev[v / nch].pos,
                            (size_t)ev[v / nch].high_water * sizeof(int32_t), err));
    if (masked)
        IG_TRY(ig_be_mask_scores(be, s->hs_d, s->C, cs, (int64_t)cs * s->C, ms, s->C, s->rmax_d,
                                 s->pos_d, s->C, s->tab_d, n_max, V, err));
    if (nch > 1) { /* the group's maximum per entry over its sub-groups */
        IG_TRY(ig_be_download(be, s->msv_h, s->msv_d, (size_t)V * C * sizeof(float), err));
        for (int t = 0; t < tasks; t++) {
            float *m = s->msv_h + (size_t)t * C; /* written over sub-group 0 of t's, or earlier */
            const float *src = s->msv_h + (size_t)t * (size_t)nch * C;
            for (int64_t e = 0; e < ev[t].high_water; e++) {
                float x = src[e];
                for (int c = 1; c < nch; c++)
                    if (src[(size_t)c * C + (size_t)e] > x) x = src[(size_t)c * C + (size_t)e];
                m[e] = x;
            }
        }
        IG_TRY(ig_be_upload(be, s->ms_d, s->msv_h, (size_t)tasks * C * sizeof(float), err));
    }
    /* 3. every query head's count within alpha of its best, then the fetch counts */
    size_t rows = (size_t)tasks * (size_t)grp;
    IG_TRY(ig_be_upload(be, s->nrow_d, s->nrow_h, rows * sizeof(int32_t), err));
    IG_TRY(ig_be_count_greater(be, s->hs_d, s->C, (int)rows, s->C, s->nrow_d, s->rmax_d,
                               -s->alpha_l[ls], s->cnt_d, err));
    IG_TRY(ig_be_download(be, s->rmax_h, s->rmax_d, rows * sizeof(float), err));
    IG_TRY(ig_be_download(be, s->nrow_h, s->cnt_d, rows * sizeof(int32_t), err));
    for (int t = 0; t < tasks; t++)
        for (int hh = 0; hh < grp; hh++) {
            size_t r = (size_t)t * (size_t)grp + (size_t)hh;
            int64_t c = ev[t].high_water == 0 || s->rmax_h[r] == -INFINITY ? 0 : s->nrow_h[r];
            s->frac[(size_t)(t / G) * (size_t)H + (size_t)(t % G) * (size_t)grp + (size_t)hh] =
                ev[t].n_used > 0 ? (double)c / (double)ev[t].n_used : 0;
        }
    /* fetch_rule=adaptive steps the layer's alpha here: kept, so that a failure below leaves the
     * step to the selection made instead */
    float alpha0 = s->alpha_l[ls];
    double got0 = s->ad_got[ls], want0 = s->ad_want[ls];
    fetch_counts(s, ls, n, ev);
    /* 4. the top-n of every (slot, KV head) by its group's best score per entry */
    int32_t ld = 1;
    for (int t = 0; t < tasks; t++) {
        s->nk_h[t] = (int32_t)s->nsel[t];
        if (s->nk_h[t] > ld) ld = s->nk_h[t];
    }
    ig_status rc = ig_be_upload(be, s->k_d, s->nk_h, (size_t)tasks * sizeof(int32_t), err);
    for (int t = 0; t < tasks; t++) s->nk_h[t] = (int32_t)ev[t].high_water;
    if (rc == IG_OK) rc = ig_be_upload(be, s->n_d, s->nk_h, (size_t)tasks * sizeof(int32_t), err);
    if (rc == IG_OK)
        rc = ig_be_topk(be, s->ms_d, s->C, tasks, s->C, s->n_d, 0, s->k_d, s->idx_d, ld, s->tcnt_d,
                        err);
    if (rc == IG_OK)
        rc = ig_be_download(be, s->idx_h, s->idx_d, (size_t)tasks * (size_t)ld * sizeof(int32_t),
                            err);
    if (rc == IG_OK)
        rc = ig_be_download(be, s->nk_h, s->tcnt_d, (size_t)tasks * sizeof(int32_t), err);
    if (rc != IG_OK) {
        s->alpha_l[ls] = alpha0;
        s->ad_got[ls] = got0;
        s->ad_want[ls] = want0;
        return rc;
    }
    for (int t = 0; t < tasks; t++) {
        int i = t / G, g = t % G;
        out[i].n[g] = s->nk_h[t];
        memcpy(out[i].entries + (size_t)g * (size_t)out[i].max_per_head,
               s->idx_h + (size_t)t * (size_t)ld, (size_t)s->nk_h[t] * sizeof(int32_t));
    }
    return IG_OK;
}

/* The run's table failed: its buffers go and the policy's own cpu table takes over (the partial
 * key cache read in place, W_q as handed in). Returns 0 when that cannot be set up. */
static int switch_to_own(ig_state *s, ig_error *err) {
    snprintf(s->failed_name, sizeof s->failed_name, "%s", s->be->caps.name);
    s->dev_failed = 1;
    table_free(s);
    if (!s->own_be && ig_be_cpu_create(&s->own_be, err) != IG_OK) return 0;
    s->hbe = s->own_be; /* the prefill statistics too, where they ran on the failed table */
    if (device_init(s, s->own_be, s->wq, err) != IG_OK) {
        table_free(s);
        return 0;
    }
    return 1;
}

static void ig_select_ahead(void *st, int layer, int n, const int *slots, const float *x_prev,
                            const ig_entries_view *ev, ig_selection *out) {
    ig_state *s = st;
    int G = s->G, tasks = n * G;
    if (layer < s->dense) {
        for (int i = 0; i < n; i++)
            for (int g = 0; g < G; g++)
                select_every(&ev[(size_t)i * (size_t)G + (size_t)g],
                             out[i].entries + (size_t)g * (size_t)out[i].max_per_head,
                             &out[i].n[g]);
        return;
    }
    int ls = layer - s->dense;
    for (int i = 0; i < n; i++)
        if (!s->ready[(size_t)ls * (size_t)s->S + (size_t)slots[i]]) default_index(s, ls, slots[i]);
    s->selections++;
    int ok = 0;
    if (s->be && !s->own_failed) {
        ig_error err;
        ig_error_clear(&err);
        int on_run = s->be != s->own_be;
        if (select_on_table(s, ls, n, slots, x_prev, ev, out, &err) == IG_OK) {
            ok = 1;
            if (on_run)
                s->dev_selections++;
            else
                s->own_selections++;
        } else if (on_run) {
            IG_WARN("infinigen: speculation on the %s backend failed, a cpu table of the "
                    "policy's own takes over: %s",
                    s->be->caps.name, err.msg);
            ig_error_clear(&err);
            if (switch_to_own(s, &err) &&
                select_on_table(s, ls, n, slots, x_prev, ev, out, &err) == IG_OK) {
                ok = 1;
                s->own_selections++;
            }
        }
        if (!ok) {
            IG_WARN("infinigen: speculation on the policy's own cpu table failed, every entry is "
                    "selected from now on: %s",
                    err.msg);
            s->own_failed = 1;
        }
    }
    if (!ok) { /* never expected: no table works; dense attention is correct, only not sparse */
        s->every_selections++;
        for (int i = 0; i < n; i++)
            for (int g = 0; g < G; g++)
                select_every(&ev[(size_t)i * (size_t)G + (size_t)g],
                             out[i].entries + (size_t)g * (size_t)out[i].max_per_head,
                             &out[i].n[g]);
    }

    /* the pool's counters, from this selection */
    if (pool_on(s))
        for (int t = 0; t < tasks; t++) {
            int i = t / G, g = t % G;
            size_t base = lsg(s, ls, slots[i], g) * (size_t)s->C;
            const int32_t *e = out[i].entries + (size_t)g * (size_t)out[i].max_per_head;
            int32_t stamp = (int32_t)ev[t].n_tokens + 1;
            for (int64_t j = 0; j < out[i].n[g]; j++) {
                int32_t p = ev[t].pos[e[j]];
                s->sel_count[base + (size_t)p]++;
                s->last_sel[base + (size_t)p] = stamp;
            }
        }
}

/* ---- prefill, appends, pool ---- */

/* Pool counters from the prompt itself: each prompt row (with its exact query, rotated) selects
 * among the call's earlier rows by the decode rule, as the artifact's simulation counts every row's
 * fetches. Costs O(rows^2 * kmax * heads); only with a pool that evicts by lru or counter. */
static void seed_counters(ig_state *s, int ls, int slot, const ig_prefill_view *v) {
    int n = v->n_new, G = s->G, H = s->H, hd = s->hd, km = s->kmax;
    size_t C = (size_t)s->C;
    for (int g = 0; g < G; g++) {
        size_t ix = lsg(s, ls, slot, g);
        const float *ac = s->acols + ix * (size_t)km * (size_t)hd;
        for (int u = 0; u < n; u++)
            for (int j = 0; j < s->ncols[ix]; j++)
                s->seed_pk[((size_t)g * C + (size_t)u) * (size_t)km + (size_t)j] =
                    dotf(ac + (size_t)j * (size_t)hd,
                         v->k + ((size_t)u * (size_t)G + (size_t)g) * hd, hd);
    }
    float *hs = s->hscore, *ms = s->mscore;
    for (int t = 1; t < n; t++) {
        for (int h = 0; h < H; h++) {
            size_t ix = lsg(s, ls, slot, h / s->group);
            const float *ac = s->acols + ix * (size_t)km * (size_t)hd;
            for (int j = 0; j < s->ncols[ix]; j++)
                s->seed_pq[(size_t)h * (size_t)km + (size_t)j] =
                    s->scale * dotf(ac + (size_t)j * (size_t)hd,
                                    v->q + ((size_t)t * (size_t)H + (size_t)h) * (size_t)hd, hd);
        }
        double mean = 0;
        for (int g = 0; g < G; g++) {
            size_t ix = lsg(s, ls, slot, g);
            for (int hh = 0; hh < s->group; hh++) {
                const float *q = s->seed_pq + (size_t)(g * s->group + hh) * (size_t)km;
                float *o = hs + (size_t)hh * C;
                for (int u = 0; u < t; u++)
                    o[u] = dotf(q, s->seed_pk + ((size_t)g * C + (size_t)u) * (size_t)km,
                                s->ncols[ix]);
                float mx;
                mean += (double)ig_infinigen_count_above(o, NULL, t, s->alpha, &mx) / t;
            }
            for (int u = 0; u < t; u++) {
                float m = hs[u];
                for (int hh = 1; hh < s->group; hh++)
                    if (hs[(size_t)hh * C + (size_t)u] > m) m = hs[(size_t)hh * C + (size_t)u];
                ms[(size_t)g * C + (size_t)u] = m;
            }
        }
        mean /= H;
        int64_t want = ig_infinigen_fetch_count(mean, t, v->pos0 + t, s->max_fetch);
        for (int g = 0; g < G; g++) {
            int64_t got =
                ig_infinigen_top_n(ms + (size_t)g * C, NULL, t, want, s->seed_idx, s->tmp);
            size_t base = lsg(s, ls, slot, g) * C;
            for (int64_t j = 0; j < got; j++) {
                size_t p = (size_t)v->pos0 + (size_t)s->seed_idx[j];
                s->sel_count[base + p]++;
                s->last_sel[base + p] = v->pos0 + t + 1;
            }
        }
    }
}

static void ig_on_prefill(void *st, int layer, int slot, const ig_prefill_view *v) {
    ig_state *s = st;
    if (layer < s->dense || v->n_new <= 0) return;
    int ls = layer - s->dense;
    /* the first prefill call of a sequence fixes its columns (later chunks keep them: the partial
     * keys already stored use them) */
    if (!s->ready[(size_t)ls * (size_t)s->S + (size_t)slot]) build_index(s, ls, slot, v);
    if (pool_on(s) && s->evict != IG_POOL_FIFO) seed_counters(s, ls, slot, v);
}

static void ig_on_append(void *st, int layer, int slot, int head, int64_t e, int32_t pos,
                         const float *k, const float *v) {
    ig_state *s = st;
    (void)pos;
    (void)v;
    if (layer < s->dense) return;
    int ls = layer - s->dense;
    if (!s->ready[(size_t)ls * (size_t)s->S + (size_t)slot]) default_index(s, ls, slot);
    size_t ix = lsg(s, ls, slot, head);
    const float *ac = s->acols + ix * (size_t)s->kmax * (size_t)s->hd;
    size_t base = ix * (size_t)s->kmax * (size_t)s->C + (size_t)e;
    if (s->pk_lo && e < s->pk_lo[ix]) s->pk_lo[ix] = e;
    for (int j = 0; j < s->ncols[ix]; j++) {
        float pk = dotf(ac + (size_t)j * (size_t)s->hd, k, s->hd);
        size_t o = base + (size_t)j * (size_t)s->C;
        if (s->pk_type == IG_DTYPE_F16)
            ((uint16_t *)s->pkc)[o] = ig_f32_to_f16(pk);
        else
            ((float *)s->pkc)[o] = pk;
    }
}

static int ig_evict(void *st, int layer, int slot, int head, const ig_entries_view *ev,
                    int n_victims, int32_t *victims) {
    ig_state *s = st;
    if (layer < s->dense || !s->sel_count) /* never asked: dense layers keep every token */
        return ig_infinigen_pool_victims(IG_POOL_FIFO, ev, NULL, NULL, n_victims, victims, s->mark);
    size_t base = lsg(s, layer - s->dense, slot, head) * (size_t)s->C;
    return ig_infinigen_pool_victims(s->evict, ev, s->sel_count + base, s->last_sel + base,
                                     n_victims, victims, s->mark);
}

static void ig_on_evict(void *st, int layer, int slot, int head, int64_t e) {
    ig_state *s = st;
    if (layer < s->dense) return;
    size_t ix = lsg(s, layer - s->dense, slot, head);
    char *pk = (char *)s->pkc + (ix * (size_t)s->kmax * (size_t)s->C + (size_t)e) * s->pk_size;
    if (s->pk_lo && e < s->pk_lo[ix]) s->pk_lo[ix] = e;
    for (int j = 0; j < s->ncols[ix]; j++)
        memset(pk + (size_t)j * (size_t)s->C * s->pk_size, 0, s->pk_size);
}

static void ig_reset_slot(void *st, int slot) {
    ig_state *s = st;
    for (int ls = 0; ls < s->Ls; ls++) {
        s->ready[(size_t)ls * (size_t)s->S + (size_t)slot] = 0;
        for (int g = 0; s->pk_lo && g < s->G; g++) s->pk_lo[lsg(s, ls, slot, g)] = 0;
        if (s->sel_count) {
            size_t base = lsg(s, ls, slot, 0) * (size_t)s->C, n = (size_t)s->G * (size_t)s->C;
            memset(s->sel_count + base, 0, n * sizeof(int32_t));
            memset(s->last_sel + base, 0, n * sizeof(int32_t));
        }
    }
}

/* Device, as the device path holds it: the partial key cache and the chosen columns of A per
 * (layer, slot, KV head). W_q is the engine's (handed in, on the CUDA engine its own device copy),
 * counted with the model's weights, not here. Host: the pool's counters. */
static size_t ig_device_bytes(const void *st) {
    const ig_state *s = st;
    size_t lsg_n = (size_t)s->Ls * (size_t)s->S * (size_t)s->G, km = (size_t)s->kmax;
    return lsg_n * km * (size_t)s->C * s->pk_size + lsg_n * km * (size_t)s->hd * sizeof(float);
}

static size_t ig_host_bytes(const void *st) {
    const ig_state *s = st;
    return s->sel_count
               ? 2 * (size_t)s->Ls * (size_t)s->S * (size_t)s->G * (size_t)s->C * sizeof(int32_t)
               : 0;
}

static const char *ig_budget(const void *st, char *buf, size_t n) {
    const ig_state *s = st;
    static const char *rules[] = {"at most", "exactly", "tracking (adaptive alpha)"};
    snprintf(buf, n, "%s max_fetch = %g of the %s read per KV head%s, layers %d and up",
             rules[s->fetch_rule], s->max_fetch,
             s->budget_window ? "window (the engine's context length)" : "current length",
             s->dense_first ? ", every token while the sequence is within the budget" : "",
             s->dense);
    const char *run = s->dev_failed                 ? s->failed_name
                      : s->be && s->be != s->own_be ? s->be->caps.name
                                                    : NULL;
    ig_policy_tables_note(buf, n, "partial query, scores, counts and top-n", run, s->dev_selections,
                          s->own_be != NULL, s->own_selections, s->dev_failed, s->every_selections,
                          s->selections);
    return buf;
}

/* Reads at most max_fetch of the context (the threshold rule's count is data-dependent: a measured
 * fetch_profile refines it), keeps pool_capacity, and holds partial_ratio of each key on the
 * device. */
static ig_status ig_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                               ig_policy_cost_terms *t, ig_error *err) {
    t->fetch = ig_params_num(p, "max_fetch");
    t->fetch_is_cap = 1;
    t->partial = ig_params_num(p, "partial_ratio");
    t->keep = ig_params_num(p, "pool_capacity");
    t->dense_layers = (int)ig_params_num(p, "dense_layers");
    /* as init refuses it: a pool that the dense layers' every token alone would fill */
    int L = cfg->n_layer, D = t->dense_layers < L ? t->dense_layers : L;
    if (t->keep < 1.0 && (D >= L || t->keep * L - D <= 0))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "infinigen: pool capacity %g cannot hold the %d dense layers of %d "
                            "(they keep every token: %.4g of the KV cache) and a token per other "
                            "layer; raise pool_capacity or lower dense_layers",
                            t->keep, D, L, (double)D / L);
    const char *fp = ig_params_str(p, "fetch_profile");
    if (fp && strlen(fp) >= sizeof t->fetch_profile)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy infinigen: fetch_profile path longer than %zu bytes",
                            sizeof t->fetch_profile - 1);
    if (fp) memcpy(t->fetch_profile, fp, strlen(fp) + 1);
    return IG_OK;
}

const ig_policy_ops ig_policy_infinigen = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "infinigen",
    /* .summary = */
    "speculates the next layer's attention with skewed partial weights and "
    "fetches the top tokens (Lee et al., OSDI'24), optional memory-limited pool",
    /* .params = */ g_params,
    /* .n_params = */ (int)(sizeof g_params / sizeof g_params[0]),
    /* .state_size = */ sizeof(ig_state),
    /* .init = */ ig_init,
    /* .fini = */ ig_fini,
    /* .capacity = */ ig_capacity,
    /* .reset_slot = */ ig_reset_slot,
    /* .on_prefill = */ ig_on_prefill,
    /* .on_append = */ ig_on_append,
    /* .evict = */ ig_evict,
    /* .on_evict = */ ig_on_evict,
    /* .select_ahead = */ ig_select_ahead,
    /* .select = */ NULL,
    /* .on_attention = */ NULL,
    /* .device_bytes = */ ig_device_bytes,
    /* .host_bytes = */ ig_host_bytes,
    /* .budget = */ ig_budget,
    /* .cost_terms = */ ig_cost_terms,
};
