/* streaming: StreamingLLM's attention sinks (Xiao et al., ICLR 2024). Per (layer, slot, KV head)
 * the cache keeps the first `sinks` tokens plus a window of the most recent tokens and evicts the
 * oldest token outside the sinks; attention reads everything resident. The policy only names
 * victims; the core releases them and stores the new rows.
 *
 * The window is `window` tokens, or, when window=0, floor(window_ratio * n) of the current sequence
 * length n (at least the newest token), so that a 20% run keeps 20% + sinks. Keys are stored after
 * RoPE at their original positions: StreamingLLM's re-numbering of positions inside the cache (for
 * streams longer than the trained context) does not apply to a post-RoPE home tier. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/baselines.h"
#include "policies/policy.h"

typedef struct streaming_state {
    int64_t sinks;
    int64_t window; /* tokens; 0: window_ratio of the sequence */
    double window_ratio;
} streaming_state;

static const ig_param_spec streaming_params[] = {
    {"sinks", IG_PARAM_INT, "4", 0, 1e8, NULL, "first tokens always kept (attention sinks)"},
    {"window", IG_PARAM_INT, "0", 0, 1e8, NULL,
     "recent tokens kept; 0: window_ratio of the current sequence length"},
    {"window_ratio", IG_PARAM_FLOAT, "0.2", 0, 1, NULL,
     "recent window as a fraction of the current sequence length (when window=0)"},
};

static int64_t window_tokens(const streaming_state *s, int64_t n) {
    int64_t w = s->window > 0 ? s->window : ig_budget_tokens(s->window_ratio, n);
    return w < 1 ? 1 : w;
}

static int64_t streaming_capacity(const void *st, int layer, int64_t n_tokens) {
    const streaming_state *s = st;
    (void)layer;
    int64_t c = s->sinks + window_tokens(s, n_tokens);
    return c < n_tokens ? c : n_tokens;
}

static ig_status streaming_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                                ig_policy_caps *caps, ig_error *err) {
    streaming_state *s = st;
    (void)env;
    if (ig_params_is_set(p, "window") && ig_params_is_set(p, "window_ratio"))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy streaming: set window (tokens) or window_ratio, not both");
    s->sinks = (int64_t)ig_params_num(p, "sinks");
    s->window = (int64_t)ig_params_num(p, "window");
    s->window_ratio = ig_params_num(p, "window_ratio");
    caps->dense = 1;
    return IG_OK;
}

/* The oldest entries first, skipping the sinks; the sinks themselves only if nothing else is left
 * (the capacity rule keeps that from happening). Positions in a table are distinct, so each pass
 * takes the smallest position above the previous victim's. */
static int streaming_evict(void *st, int layer, int slot, int head, const ig_entries_view *ev,
                           int n_victims, int32_t *victims) {
    const streaming_state *s = st;
    (void)layer;
    (void)slot;
    (void)head;
    int got = 0;
    for (int pass = 0; pass < 2 && got < n_victims; pass++) {
        int64_t lo = pass == 0 ? s->sinks : 0, hi = pass == 0 ? INT64_MAX : s->sinks;
        int64_t prev = lo - 1;
        while (got < n_victims) {
            int64_t best = -1;
            for (int64_t e = 0; e < ev->high_water; e++) {
                int32_t p = ev->pos[e];
                if (p > prev && p < hi && (best < 0 || p < ev->pos[best])) best = e;
            }
            if (best < 0) break;
            victims[got++] = (int32_t)best;
            prev = ev->pos[best];
        }
    }
    return got;
}

static const char *streaming_budget(const void *st, char *buf, size_t n) {
    const streaming_state *s = st;
    if (s->window > 0)
        snprintf(buf, n, "%lld sinks + a window of %lld tokens kept and read, every layer",
                 (long long)s->sinks, (long long)s->window);
    else
        snprintf(buf, n,
                 "%lld sinks + window_ratio = %g of the current length kept and read, every layer",
                 (long long)s->sinks, s->window_ratio);
    return buf;
}

/* Keeps and reads window_ratio of the context. */
static ig_status streaming_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                                      ig_policy_cost_terms *t, ig_error *err) {
    (void)cfg;
    (void)err;
    t->keep = t->fetch = ig_params_num(p, "window_ratio");
    return IG_OK;
}

const ig_policy_ops ig_policy_streaming = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "streaming",
    /* .summary = */ "StreamingLLM: attention sinks + recent window, permanent eviction",
    /* .params = */ streaming_params,
    /* .n_params = */ (int)(sizeof streaming_params / sizeof streaming_params[0]),
    /* .state_size = */ sizeof(streaming_state),
    /* .init = */ streaming_init,
    /* .fini = */ NULL,
    /* .capacity = */ streaming_capacity,
    /* .reset_slot = */ NULL,
    /* .on_prefill = */ NULL,
    /* .on_append = */ NULL,
    /* .evict = */ streaming_evict,
    /* .on_evict = */ NULL,
    /* .select_ahead = */ NULL,
    /* .select = */ NULL,
    /* .on_attention = */ NULL,
    /* .device_bytes = */ NULL,
    /* .host_bytes = */ NULL,
    /* .budget = */ streaming_budget,
    /* .cost_terms = */ streaming_cost_terms,
};
