/* Perplexity over a token stream: cut into non-overlapping windows of ctx tokens (the incomplete
 * tail is dropped), each window evaluated from an empty cache, NLL summed over positions 1..ctx-1
 * of every window; ppl = exp(nll_sum / predicted tokens). Several windows run as one batch. */
#ifndef IG_PPL_H
#define IG_PPL_H

#include <stdint.h>

#include "core/engine/engine.h"

typedef struct ig_ppl_opts {
    int ctx;         /* window length in tokens */
    int batch;       /* windows per forward call (<= engine slots) */
    int max_windows; /* <= 0: all complete windows */
    /* > 0: decode mode. Each window's first `prefill` tokens are a prompt; the rest are decoded one
     * token per step (teacher-forced) with the engine's KV policy active, and the NLL is counted
     * over the predictions those decode steps make (tokens prefill+1 .. ctx-1 of each window). */
    int prefill;
} ig_ppl_opts;

typedef struct ig_ppl_result {
    double ppl;
    double nll_sum;
    int64_t tokens; /* predicted tokens: windows * (ctx - 1), or windows * (ctx - 1 - prefill) */
    int windows;
    int ctx;
    double seconds;
    double *window_nll; /* [windows], malloc'd; free with ig_ppl_result_free */
} ig_ppl_result;

typedef void (*ig_ppl_progress_fn)(void *user, int windows_done, int windows_total,
                                   double elapsed_s);

/* Needs an engine with >= batch slots and a context >= ctx. Fails if ids hold less than one
 * window. */
ig_status ig_ppl_run(ig_engine *e, const int32_t *ids, int64_t n_ids, const ig_ppl_opts *opts,
                     ig_ppl_progress_fn progress, void *user, ig_ppl_result *res, ig_error *err);
void ig_ppl_result_free(ig_ppl_result *r);

#endif
