/* int4: group-wise asymmetric low-bit KV (FlexGen's compress_cache; InfiniGen's quantization
 * baseline). Every token is kept and attended; rows are stored and moved encoded (an f16 min and
 * scale per group along head_dim, then `bits`-bit codes) and decoded for attention, the new
 * token's own row included. The policy only chooses the codec: the core encodes and decodes. */
#include <stdio.h>

#include "policies/policy.h"

static const ig_param_spec int4_params[] = {
    {"bits", IG_PARAM_INT, "4", 2, 8, NULL, "bits per value: 8, 4 or 2"},
    {"group_size", IG_PARAM_INT, "64", 1, 4096, NULL,
     "values per quantization group along head_dim (must divide head_dim; a head smaller than "
     "the default group is one group)"},
};

typedef struct int4_state {
    int bits, group;
} int4_state;

/* The row format from the parameters for heads of head_dim values (a head smaller than the
 * default group is one group); used by init and by the cost terms alike. head_dim 0: unknown. */
static ig_status int4_codec(const ig_policy_params *p, int head_dim, ig_kv_codec *c,
                            ig_error *err) {
    int bits = (int)ig_params_num(p, "bits"), group = (int)ig_params_num(p, "group_size");
    if (!ig_params_is_set(p, "group_size") && head_dim > 0 && head_dim < group) group = head_dim;
    if (bits != 8 && bits != 4 && bits != 2)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "policy int4: bits=%d (expected 8, 4 or 2)",
                            bits);
    if (head_dim > 0 && head_dim % group != 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "policy int4: group_size=%d does not divide head_dim %d", group,
                            head_dim);
    *c = (ig_kv_codec){IG_KV_CODEC_QUANT, bits, group};
    return IG_OK;
}

static ig_status int4_init(void *st, const ig_policy_env *env, const ig_policy_params *p,
                           ig_policy_caps *caps, ig_error *err) {
    int4_state *s = st;
    IG_TRY(int4_codec(p, env->cfg->head_dim, &caps->codec, err));
    s->bits = caps->codec.bits;
    s->group = caps->codec.group;
    caps->dense = 1;
    return IG_OK;
}

static ig_status int4_cost_terms(const ig_policy_params *p, const ig_model_config *cfg,
                                 ig_policy_cost_terms *t, ig_error *err) {
    IG_TRY(int4_codec(p, cfg->head_dim, &t->codec, err));
    t->codec_set = 1;
    return IG_OK;
}

const ig_policy_ops ig_policy_int4 = {
    /* .version = */ IG_POLICY_API_VERSION,
    /* .name = */ "int4",
    /* .summary = */ "every token, stored and moved as group-wise 8/4/2-bit codes (FlexGen)",
    /* .params = */ int4_params,
    /* .n_params = */ (int)(sizeof int4_params / sizeof int4_params[0]),
    /* .state_size = */ sizeof(int4_state),
    /* .init = */ int4_init,
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
    /* .cost_terms = */ int4_cost_terms,
};
