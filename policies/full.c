/* full: FlexGen's full fetch, the reference. Every step attends to every cached token; nothing is
 * evicted. On the CPU backend the core may attend in place over the home tier instead of copying
 * the whole cache into a working set (FlexGen's cpu_cache_compute); bytes a GPU run would move are
 * counted either way. */
#include "policies/policy.h"

const ig_policy_ops ig_policy_full = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "full",
    /* .summary = */ "every token, every step (FlexGen full fetch; the reference)",
    /* .params = */ NULL,
    /* .n_params = */ 0,
    /* .state_size = */ 0,
    /* .init = */ NULL, /* dense: no select hook */
    /* .fini = */ NULL,
    /* .capacity = */ NULL, /* every token */
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
