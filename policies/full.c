/* full: FlexGen's full fetch, the reference. Every step attends to every cached token; nothing is
 * evicted. On the CPU backend the core may attend in place over the home tier instead of copying
 * the whole cache into a working set (FlexGen's cpu_cache_compute); bytes a GPU run would move are
 * counted either way. */
#include "policies/policy.h"

typedef struct full_state {
    int unused;
} full_state;

static ig_status full_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                           ig_policy_caps *caps, ig_error *err) {
    (void)st;
    (void)env;
    (void)p;
    (void)err;
    caps->dense = 1;
    return IG_OK;
}

static void full_fini(void *st) {
    (void)st;
}

static int64_t full_capacity(const void *st, int layer, int64_t n_tokens) {
    (void)st;
    (void)layer;
    return n_tokens;
}

const ig_policy_ops ig_policy_full = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "full",
    /* .summary = */ "every token, every step (FlexGen full fetch; the reference)",
    /* .params = */ NULL,
    /* .n_params = */ 0,
    /* .state_size = */ sizeof(full_state),
    /* .init = */ full_init,
    /* .fini = */ full_fini,
    /* .capacity = */ full_capacity,
    /* .reset_slot = */ NULL,
    /* .on_prefill = */ NULL,
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
