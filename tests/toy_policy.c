/* A toy policy written as a newcomer would write one (docs/ARCHITECTURE.md, "How to add a
 * policy"): this file and one registration line (ig_policy_register(&ig_toy_random_policy, ...))
 * in the test that uses it. It keeps every token and, at each decode step, attends to a random
 * `fraction` of each KV head's cached entries: entry e is read when a hash of (seed, layer, slot,
 * head, token position, tokens so far) falls below fraction, so the choice is reproducible run to
 * run and independent of thread counts. Nothing else: no init, fini or capacity of its own (the
 * defaults), no metadata. It is not registered in policies/registry.c and not meant for results. */
#include <stdint.h>

#include "policies/policy.h"
#include "tests/toy_policy.h"

static const ig_param_spec toy_params[] = {
    {"fraction", IG_PARAM_FLOAT, "0.5", 0, 1, NULL, "share of the cached entries read per step"},
    {"seed", IG_PARAM_INT, "1", 0, 2147483647, NULL, "seed of the entry hash"},
};

typedef struct toy_state {
    double fraction;
    uint64_t seed;
    int n_kv_head;
} toy_state;

static ig_status toy_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                          ig_policy_caps *caps, ig_error *err) {
    toy_state *s = st;
    (void)caps; /* raw rows, every layer selected, no probabilities wanted */
    (void)err;
    s->fraction = ig_params_num(p, "fraction");
    s->seed = (uint64_t)ig_params_num(p, "seed");
    s->n_kv_head = env->cfg->n_kv_head;
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
    const toy_state *s = st;
    (void)q;
    uint64_t cut = (uint64_t)(s->fraction * 18446744073709551615.0);
    for (int i = 0; i < n; i++)
        for (int g = 0; g < s->n_kv_head; g++) {
            const ig_entries_view *v = &ev[(size_t)i * (size_t)s->n_kv_head + (size_t)g];
            int32_t *dst = out[i].entries + (size_t)g * (size_t)out[i].max_per_head;
            int64_t k = 0;
            for (int64_t e = 0; e < v->high_water; e++) {
                if (v->pos[e] < 0) continue;
                uint64_t h = mix(
                    mix(mix(mix(mix(s->seed, (uint64_t)layer), (uint64_t)slots[i]), (uint64_t)g),
                        (uint64_t)v->pos[e]),
                    (uint64_t)v->n_tokens);
                if (s->fraction >= 1 || h < cut) dst[k++] = (int32_t)e;
            }
            out[i].n[g] = k;
        }
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
    /* .fini = */ NULL,
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
    /* .budget = */ NULL,
    /* .cost_terms = */ toy_cost_terms,
};
