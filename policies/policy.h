/* KV-cache policies: the plug-in interface. A policy is an immutable, versioned table of hooks plus
 * per-run state that the core allocates (state_size bytes, zeroed). Policies DECIDE: which entries
 * a layer's attention uses (selection), which entries to drop when the home tier is full
 * (eviction), how rows are encoded (codec), what metadata to keep. They never copy KV bytes, never
 * allocate the KV cache and never call CUDA: the engine and the offload module do that, so every
 * policy runs and is tested on a CPU-only machine, and the bytes it causes to move are counted by
 * the core.
 *
 * Vocabulary. The KV cache of one (layer, slot = sequence, KV head) is a table of ENTRIES in the
 * home tier; entry e holds the key and value rows of token position pos[e] (-1: free). A policy's
 * CAPACITY (entries kept for a sequence of n tokens) may be less than n; then the core asks the
 * policy for victims to evict. A SELECTION is the subset of a head's entries that attention reads
 * at a decode step (the working set); the new token's own row is always attended and is not part of
 * the selection. Entries are identified by index; positions are available through the entries view.
 */
#ifndef IG_POLICY_H
#define IG_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/model/model_config.h"
#include "core/base/status.h"
#include "kernels/backend_iface.h"
#include "offload/kv_format.h"

/* The interface's version. History: 1, the first table; 2, cost_terms appended. A policy declares
 * the version it was written against; the core accepts any version from 1 to this one and reads
 * only the hooks that existed at the policy's version (a later hook is treated as NULL), so new
 * hooks are only ever appended. ig_policy_ops_check() says whether a table is usable. */
#define IG_POLICY_API_VERSION 2

/* ---- parameters: a table per policy; unknown or out-of-range values are rejected ---- */

typedef enum ig_param_type {
    IG_PARAM_INT = 0,
    IG_PARAM_FLOAT = 1,
    IG_PARAM_ENUM = 2, /* one of `choices`, '|'-separated */
    IG_PARAM_BOOL = 3,
    IG_PARAM_STRING = 4, /* e.g. a file path */
} ig_param_type;

typedef struct ig_param_spec {
    const char *name;
    ig_param_type type;
    const char *def; /* default, as text; NULL = no default (STRING only: unset) */
    double min, max; /* INT/FLOAT range, inclusive */
    const char *choices;
    const char *doc;
} ig_param_spec;

/* Parsed values of a policy's parameters (owned by the core). */
typedef struct ig_policy_params ig_policy_params;
double ig_params_num(const ig_policy_params *p, const char *name); /* INT, FLOAT, BOOL */
const char *ig_params_str(const ig_policy_params *p,
                          const char *name);                       /* ENUM, STRING; may be NULL */
int ig_params_is_set(const ig_policy_params *p, const char *name); /* given by the user */

/* ---- what the core tells a policy ---- */

/* One layer's W_q as the engine hands it to a policy that computes queries ahead (InfiniGen's
 * speculation): [rows = n_head * head_dim][cols = d_model], row-major, in any weight storage type
 * (f32, f16, bf16, block-quantized: core/base/dtype.h), with its f32 bias (rows) or NULL. */
typedef struct ig_policy_wq {
    const void *data;
    ig_dtype dtype;
    int64_t rows, cols;
    const float *bias;
} ig_policy_wq;

typedef struct ig_policy_env {
    /* [cfg->n_layer]: each layer's W_q, in host memory, valid from init to fini. A policy reads it
     * in place (on a device backend: wq_dev below) and does not count it in device_bytes: it is the
     * model's own copy, counted with the weights. A copy of its own (e.g. the artifact's partial
     * weights) it would count. With weights placed off the device, a policy that sets
     * caps.reads_wq has the engine count the W_q of its selected layers placed off the device as
     * held resident (a GPU run needs layer i+1's W_q during layer i, before the stream loads it):
     * ig_policy_budget_info.wq_device_bytes. NULL where a test drives hooks without a model. */
    const ig_policy_wq *wq;
    const ig_model_config *cfg;
    int n_slots;       /* sequences alive at once */
    int max_ctx;       /* tokens per sequence at most */
    ig_dtype kv_dtype; /* the run's KV storage type (f32 or f16) for raw codecs */
    /* The backend the run computes on (kernels/backend_iface.h): the engine's own table, "cpu" on
     * the CPU engine, "cuda" on the CUDA engine (its stream: the policy's ops are ordered with the
     * layer's). A policy that computes (scores, top-k) does it through this table, on
     * buffers it allocates from it, so the same policy code runs on either; its results come back
     * with ig_be_download. Owned by the core; valid from init to fini. NULL where a test drives a
     * policy's hooks without an engine: a policy that needs it refuses init then. */
    ig_be *be;
    /* [cfg->n_layer] or NULL: the same W_q as buffers of `be` (device memory), in the type the
     * engine computes with there (the CUDA engine's f16, or f32 in its f32 mode), owned by the
     * engine, valid from init to fini. Given where be has device memory; a policy computing on
     * the device uses these rather than a copy of `wq`. */
    const ig_policy_wq *wq_dev;
} ig_policy_env;

/* Filled by init: what the policy needs from the core. */
typedef struct ig_policy_caps {
    ig_kv_codec codec;        /* how home rows are encoded (default: the run's kv_dtype) */
    int select_ahead;         /* 1: selection for layer i runs during layer i-1 (prefetch) */
    int wants_prefill_colsum; /* on_prefill receives per-key attention sums */
    int wants_probs;          /* on_attention receives decode attention probabilities */
    int dense;                /* selection is always every resident entry (full, h2o, ...) */
    /* Layers 0 .. dense_layers-1 keep and attend every token by the policy's own rule; the budget
     * accounting reports the other layers (the policy's selected layers) beside all layers. */
    int dense_layers;
    /* 1: the policy reads env->wq of its selected layers (speculation ahead of the layer). The
     * engine counts those placed off the device as held resident (env->wq above). */
    int reads_wq;
} ig_policy_caps;

/* A read-only view of one (layer, slot, KV head) entry table. */
typedef struct ig_entries_view {
    const int32_t *pos; /* [high_water]: token position of entry e, -1 if free */
    int64_t high_water; /* entries 0 .. high_water-1 may be in use */
    int64_t n_used;
    int64_t n_tokens; /* tokens of the sequence so far (positions 0 .. n_tokens-1) */
} ig_entries_view;

/* Selection output for one slot: for KV head g, n[g] entry indices at entries + g * max_per_head,
 * ascending. max_per_head >= the head's high water mark. */
typedef struct ig_selection {
    int32_t *entries;
    int64_t *n;
    int64_t max_per_head;
} ig_selection;

/* Prefill of one layer for one slot: the new tokens' rows (after RoPE), their positions, and, when
 * asked for, the attention each key received, summed over the call's queries. The keys of a call
 * are the slot's existing entries (n_exist of them, in ascending entry order: an earlier chunk of
 * the prompt, fewer than pos0 if some were evicted) followed by the n_new new rows. on_prefill runs
 * before the new rows are stored, except for dense policies that never evict and want neither
 * probabilities nor column sums (there the order cannot matter). */
typedef struct ig_prefill_view {
    int n_new;           /* tokens in this call */
    int32_t pos0;        /* position of the first new token */
    const float *q;      /* [n_new][n_head][head_dim] */
    const float *k;      /* [n_new][n_kv_head][head_dim] */
    const float *x;      /* [n_new][d_model]: the layer's attention input (after its norm) */
    const float *colsum; /* [n_head][colsum_stride] or NULL: key j < n_exist is the j-th existing
                        entry, key n_exist + i is new row i */
    int64_t n_exist;
    int64_t colsum_stride; /* = n_exist + n_new */
} ig_prefill_view;

/* Decode attention of one slot at one layer: probabilities over the selected entries followed by
 * the new token, per query head: probs + h * stride, entries of KV head h / group. */
typedef struct ig_attn_view {
    const float *probs;
    int64_t stride;
    const int32_t *entries; /* the selection (see ig_selection) */
    const int64_t *n;
    int64_t max_per_head;
    int32_t new_pos;           /* the new token's position; its probability follows the selection */
    const int32_t *const *pos; /* [n_kv_head]: entry -> token position tables */
} ig_attn_view;

/* What the planner and the cost model need to know about a policy, from its parameters alone (no
 * run): the home row format, the fraction of each sequence's rows kept at all, the fraction a
 * decode step reads at most, the partial key cache kept on the device, and where a measured fetch
 * profile may replace the cap. Fractions are averages over all layers (dense layers count as 1). */
typedef struct ig_policy_cost_terms {
    ig_kv_codec codec;       /* the home row format, when codec_set */
    int codec_set;           /* 0: the run's dtype (the codec field is unused) */
    double keep;             /* default 1 */
    double fetch;            /* default 1 */
    double partial;          /* fraction of head_dim; default 0 */
    int fetch_is_cap;        /* 1: fetch is an upper bound that a measured fetch profile refines */
    char fetch_profile[512]; /* a file given by the user, or "" */
    int dense_layers; /* layers 0..N-1 read every kept row; fetch (a cap) is per later layer */
    int attn_probs;   /* 1: decode attention writes per-row probabilities the policy sums (H2O) */
} ig_policy_cost_terms;

typedef struct ig_policy_ops {
    int version; /* IG_POLICY_API_VERSION; new hooks are only ever appended */
    const char *name;
    const char *summary;
    const ig_param_spec *params;
    int n_params;
    size_t state_size;

    /* The three lifetime hooks may be NULL, meaning the trivial one (see ig_policy_ops_resolve):
     * init sets nothing but caps->dense, which is 1 when the table has neither select nor
     * select_ahead; fini does nothing; capacity keeps every token. A policy with an evict hook
     * must give capacity. */
    ig_status (*init)(void *st, const ig_policy_env *env, const ig_policy_params *p,
                      ig_policy_caps *caps, ig_error *err);
    void (*fini)(void *st);
    /* Entries to keep for layer `layer` of a sequence of n_tokens tokens (>= 1; return >= n_tokens
     * for no limit). Must be non-decreasing in n_tokens. */
    int64_t (*capacity)(const void *st, int layer, int64_t n_tokens);

    /* Optional (NULL: not needed). */
    void (*reset_slot)(void *st, int slot);
    void (*on_prefill)(void *st, int layer, int slot, const ig_prefill_view *v);
    /* A token's rows were stored into entry e (k, v: its rows after RoPE, f32). */
    void (*on_append)(void *st, int layer, int slot, int head, int64_t e, int32_t pos,
                      const float *k, const float *v);
    /* Chooses n_victims entries of (layer, slot, head) to evict; returns how many it wrote. The
     * core releases them and then stores the new token(s). */
    int (*evict)(void *st, int layer, int slot, int head, const ig_entries_view *ev, int n_victims,
                 int32_t *victims);
    void (*on_evict)(void *st, int layer, int slot, int head, int64_t e);
    /* Selection for `layer` of n slots. select_ahead runs during layer-1 with that layer's
     * attention input x_prev [n][d_model] (after its norm); select runs at `layer` with its queries
     * q [n][n_head][head_dim] (after RoPE). ev: [n][n_kv_head] entry views. A dense policy needs
     * neither. */
    void (*select_ahead)(void *st, int layer, int n, const int *slots, const float *x_prev,
                         const ig_entries_view *ev, ig_selection *out);
    void (*select)(void *st, int layer, int n, const int *slots, const float *q,
                   const ig_entries_view *ev, ig_selection *out);
    void (*on_attention)(void *st, int layer, int slot, const ig_attn_view *v);
    /* Metadata the policy keeps (partial key cache, page bounds, scores), in bytes, that a GPU run
     * would hold on the device / in host memory. */
    size_t (*device_bytes)(const void *st);
    size_t (*host_bytes)(const void *st);
    /* The read budget in words for result files: what the policy's budget parameters are a
     * fraction of and which layers they apply to (NULL: "every token"). */
    const char *(*budget)(const void *st, char *buf, size_t n);

    /* Version 2. Optional (NULL: a dense policy with raw rows: t keeps its defaults). Fills t from
     * the parameters for a model of shape cfg; rejects parameters that cannot apply to it. */
    ig_status (*cost_terms)(const ig_policy_params *p, const ig_model_config *cfg,
                            ig_policy_cost_terms *t, ig_error *err);
} ig_policy_ops;

/* IG_OK if the table can be used: a version from 1 to IG_POLICY_API_VERSION, a name, and capacity
 * wherever evict is given; otherwise a message naming the policy and what is wrong. */
ig_status ig_policy_ops_check(const ig_policy_ops *ops, ig_error *err);
/* The table the core calls: checks ops, copies it to *out with every hook newer than its version
 * cleared (never read), and fills the NULL lifetime hooks with the trivial ones, so that init,
 * fini and capacity of *out are never NULL. */
ig_status ig_policy_ops_resolve(const ig_policy_ops *ops, ig_policy_ops *out, ig_error *err);
/* The policy's cost terms: the defaults (keep 1, fetch 1, partial 0, the run's row format), then
 * the policy's cost_terms hook where its version has one. */
ig_status ig_policy_get_cost_terms(const ig_policy_ops *ops, const ig_policy_params *p,
                                   const ig_model_config *cfg, ig_policy_cost_terms *t,
                                   ig_error *err);

/* ---- registry ---- */

const ig_policy_ops *ig_policy_find(const char *name);
/* All registered policies, NULL-terminated: the built-in ones, then those added at run time. */
const ig_policy_ops *const *ig_policy_list(void);
/* Adds a policy for the rest of the process (one written outside policies/, or a test's): the
 * table must pass ig_policy_ops_check and its name must be new; up to 16 such tables. Call before
 * any run starts (the registry is not locked). */
ig_status ig_policy_register(const ig_policy_ops *ops, ig_error *err);

/* Parses "key=value" settings against a policy's table (defaults for the rest). Unknown keys and
 * out-of-range or malformed values fail with a message listing the valid parameters. */
ig_status ig_policy_params_parse(const ig_policy_ops *ops, const char *const *settings, int n,
                                 ig_policy_params **out, ig_error *err);
void ig_policy_params_free(ig_policy_params *p);
/* "name=value, ..." of every parameter (effective values), for result files. */
const char *ig_policy_params_describe(const ig_policy_params *p, char *buf, size_t n);

/* For a budget hook: appends to buf (n bytes) where a policy's computation ran, out of `total`
 * selections: "; WHAT on the RUN backend in A of TOTAL selections" where the run's table (named
 * run; NULL: none) was used, and "; on the policy's own cpu table in B of TOTAL (why)" where a
 * table of the policy's own (have_own) ran some, or all for want of the run's; run_failed says
 * why; "; every entry in E (no table worked)" where E > 0 selections fell back to every entry. */
void ig_policy_tables_note(char *buf, size_t n, const char *what, const char *run, long long on_run,
                           int have_own, long long on_own, int run_failed, long long every,
                           long long total);

#endif
