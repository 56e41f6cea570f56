/* InfiniGen's decision rules as plain functions (used by the policy, and tested on hand-made
 * numbers): the per-head threshold count, the shared fetch count, the per-KV-head top-n, and the
 * memory-limited pool's eviction choice. None of them allocates. */
#ifndef IG_INFINIGEN_H
#define IG_INFINIGEN_H

#include <stdint.h>

#include "policies/policy.h"

/* Number of in-use entries (pos[e] >= 0; pos NULL: all in use) whose score is strictly above
 * max - alpha, the maximum taken over in-use entries; *max_out receives it (-inf if none). */
int64_t ig_infinigen_count_above(const float *score, const int32_t *pos, int64_t n, float alpha,
                                 float *max_out);

/* How many entries a KV head fetches: the shared fraction (mean over query heads, and over the
 * batch or the sequence, of count / entries in use) times this head's entries in use, rounded down,
 * at least 1, at most floor(max_fetch * n_tokens) (at least 1) and at most n_used. 0 if n_used is
 * 0. With equal lengths this is the artifact's min(int(mean count), max_num_kv). */
int64_t ig_infinigen_fetch_count(double mean_fraction, int64_t n_used, int64_t n_tokens,
                                 double max_fetch);

/* The n in-use entries with the largest scores, written as ascending entry indices; ties at the
 * n-th score go to lower entry indices. O(hw) (quickselect on tmp[hw]). Returns the count written
 * (min(n, entries in use)). */
int64_t ig_infinigen_top_n(const float *score, const int32_t *pos, int64_t hw, int64_t n,
                           int32_t *out, float *tmp);

/* The same result when free entries (pos[e] < 0) already score -inf and n <= entries in use; the
 * policy's fast path (no per-entry checks of pos or NaN). */
int64_t ig_infinigen_top_n_scored(const float *score, const int32_t *pos, int64_t hw, int64_t n,
                                  int32_t *out, float *tmp);

typedef enum ig_pool_evict {
    IG_POOL_FIFO = 0,    /* the oldest position */
    IG_POOL_LRU = 1,     /* least recently selected among the older half of the sequence */
    IG_POOL_COUNTER = 2, /* least often selected among the older half of the sequence */
} ig_pool_evict;

/* Chooses n_victims distinct entries in use. Older half: positions < n_tokens / 2; when it has no
 * entry left the whole resident set is used. count_by_pos / last_by_pos are indexed by position
 * (last: 1 + the sequence length at the last selection, 0 = never selected). Ties go to the older
 * position. mark[high_water] is scratch, all zero on entry and on return. Returns the count
 * written. */
int ig_infinigen_pool_victims(ig_pool_evict rule, const ig_entries_view *ev,
                              const int32_t *count_by_pos, const int32_t *last_by_pos,
                              int n_victims, int32_t *victims, unsigned char *mark);

#endif
