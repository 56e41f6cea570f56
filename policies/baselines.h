/* Helpers shared by the baseline policies (h2o, streaming, quest) and the inspection entry points
 * their tests use. Nothing here allocates or touches KV bytes. */
#ifndef IG_POLICY_BASELINES_H
#define IG_POLICY_BASELINES_H

#include <math.h>
#include <stdint.h>

/* Tokens of a budget given as a fraction of a sequence of n tokens: floor(ratio * n), with a small
 * slack so that 0.1 * 30 counts as 3 despite binary rounding. Non-decreasing in n. */
static inline int64_t ig_budget_tokens(double ratio, int64_t n) {
    return (int64_t)floor(ratio * (double)n + 1e-9);
}

/* The accumulated attention (heavy_hitter_score) of the token in entry e of an h2o state. */
float ig_h2o_entry_score(const void *st, int layer, int slot, int head, int64_t e);

#endif
