/* Text generation over a batch of prompts of different lengths: prefill all prompts, then decode
 * one token per live sequence per step (greedy, or temperature/top-p with a seed per sequence). */
#ifndef IG_GENERATE_H
#define IG_GENERATE_H

#include <stdint.h>

#include "core/engine/engine.h"

typedef struct ig_gen_params {
    int max_new_tokens;
    float temperature; /* <= 0: greedy */
    float top_p;       /* >= 1: no nucleus cut */
    uint64_t seed;     /* sequence i draws from seed + i */
    int stop_at_eos;
} ig_gen_params;

typedef struct ig_gen_result {
    int32_t *tokens; /* generated ids (malloc'd) */
    int n_tokens;
    int stopped_at_eos;
} ig_gen_result;

typedef struct ig_gen_timing {
    double prefill_s, decode_s;
    int64_t prefill_tokens, decode_tokens, decode_steps;
} ig_gen_timing;

/* Called after each decode step for each sequence that produced a token. */
typedef void (*ig_gen_token_fn)(void *user, int seq, int32_t token);

/* prompts[i] (n_prompt[i] tokens) -> results[i]; the engine needs >= n slots and a context of at
 * least max(n_prompt) + max_new_tokens. Slots 0..n-1 are reset first. */
ig_status ig_generate(ig_engine *e, const int32_t *const *prompts, const int *n_prompt, int n,
                      const ig_gen_params *p, ig_gen_token_fn on_token, void *user,
                      ig_gen_result *results, ig_gen_timing *timing, ig_error *err);
void ig_gen_result_free(ig_gen_result *r, int n);

#endif
