/* Windowed perplexity, batched over windows and chunked to the engine's batch capacity. */
#include "core/engine/ppl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "kernels/cpu/cpu_kernels.h"

#define LOGIT_ROWS 64 /* rows of logits computed at once (64 x vocab floats) */

/* Decode mode: prefill the first P tokens of each window of a batch, then feed one token per window
 * per step; the logits of step t (token t fed) predict token t+1. */
static ig_status decode_windows(ig_engine *e, const int32_t *ids, int64_t n_windows,
                                const ig_ppl_opts *opts, float *logits, ig_seq_tokens *seqs,
                                ig_ppl_progress_fn progress, void *user, ig_ppl_result *res,
                                double t0, ig_error *err) {
    const ig_engine_opts *eo = ig_engine_get_opts(e);
    const ig_model_config *c = ig_model_get_config(ig_engine_model(e));
    int ctx = opts->ctx, P = opts->prefill, batch = opts->batch > 0 ? opts->batch : 1;
    size_t V = (size_t)c->vocab;
    if (P >= ctx - 1)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "prefill %d leaves nothing to decode in windows of %d tokens", P, ctx);
    for (int64_t w0 = 0; w0 < n_windows; w0 += batch) {
        int nw = (int)(n_windows - w0 < batch ? n_windows - w0 : batch);
        if (nw * P > eo->max_batch_tokens)
            return ig_error_set(err, IG_ERR_CAPACITY,
                                "%d windows x %d prefill tokens exceed the batch capacity %d", nw,
                                P, eo->max_batch_tokens);
        for (int s = 0; s < nw; s++) {
            ig_engine_seq_reset(e, s);
            seqs[s].slot = s;
            seqs[s].tokens = ids + (w0 + s) * (int64_t)ctx;
            seqs[s].n_tokens = P;
        }
        IG_TRY(ig_engine_forward(e, seqs, nw, err));
        for (int t = P; t < ctx - 1; t++) {
            for (int s = 0; s < nw; s++) {
                seqs[s].tokens = ids + (w0 + s) * (int64_t)ctx + t;
                seqs[s].n_tokens = 1;
            }
            IG_TRY(ig_engine_forward(e, seqs, nw, err));
            for (int r0 = 0; r0 < nw; r0 += LOGIT_ROWS) {
                int nr = nw - r0 < LOGIT_ROWS ? nw - r0 : LOGIT_ROWS;
                ig_engine_logits(e, r0, nr, logits);
                for (int r = 0; r < nr; r++) {
                    int s = r0 + r;
                    int32_t target = ids[(w0 + s) * (int64_t)ctx + t + 1];
                    res->window_nll[w0 + s] -=
                        ig_cpu_log_prob(logits + (size_t)r * V, c->vocab, target);
                }
            }
        }
        if (progress) progress(user, (int)(w0 + nw), (int)n_windows, ig_time_s() - t0);
    }
    return IG_OK;
}

void ig_ppl_result_free(ig_ppl_result *r) {
    if (!r) return;
    free(r->window_nll);
    r->window_nll = NULL;
}

ig_status ig_ppl_run(ig_engine *e, const int32_t *ids, int64_t n_ids, const ig_ppl_opts *opts,
                     ig_ppl_progress_fn progress, void *user, ig_ppl_result *res, ig_error *err) {
    memset(res, 0, sizeof *res);
    const ig_engine_opts *eo = ig_engine_get_opts(e);
    const ig_model_config *c = ig_model_get_config(ig_engine_model(e));
    int ctx = opts->ctx, batch = opts->batch > 0 ? opts->batch : 1;
    if (ctx < 2)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "window length %d is too short (need >= 2)",
                            ctx);
    if (ctx > eo->max_ctx || batch > eo->max_seqs)
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "engine too small for %d windows of %d tokens (%d slots of %d)", batch,
                            ctx, eo->max_seqs, eo->max_ctx);
    int64_t n_windows = n_ids / ctx;
    if (opts->max_windows > 0 && n_windows > opts->max_windows) n_windows = opts->max_windows;
    if (n_windows < 1)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "the text has %lld tokens, fewer than one window of %d",
                            (long long)n_ids, ctx);
    size_t V = (size_t)c->vocab;
    float *logits = ig_malloc(LOGIT_ROWS * V * sizeof(float), err);
    res->window_nll = ig_calloc((size_t)n_windows, sizeof(double), err);
    ig_seq_tokens *seqs = ig_malloc((size_t)batch * sizeof *seqs, err);
    if (!logits || !res->window_nll || !seqs) {
        free(logits);
        free(seqs);
        ig_ppl_result_free(res);
        return IG_ERR_NOMEM;
    }
    double t0 = ig_time_s();
    ig_status rc = IG_OK;
    if (opts->prefill > 0) {
        rc = decode_windows(e, ids, n_windows, opts, logits, seqs, progress, user, res, t0, err);
        goto finish;
    }
    for (int64_t w0 = 0; w0 < n_windows && rc == IG_OK; w0 += batch) {
        int nw = (int)(n_windows - w0 < batch ? n_windows - w0 : batch);
        for (int s = 0; s < nw; s++) ig_engine_seq_reset(e, s);
        int chunk = eo->max_batch_tokens / nw;
        if (chunk < 1) chunk = 1;
        for (int pos = 0; pos < ctx && rc == IG_OK; pos += chunk) {
            int len = ctx - pos < chunk ? ctx - pos : chunk;
            for (int s = 0; s < nw; s++) {
                seqs[s].slot = s;
                seqs[s].tokens = ids + (w0 + s) * (int64_t)ctx + pos;
                seqs[s].n_tokens = len;
            }
            rc = ig_engine_forward(e, seqs, nw, err);
            if (rc != IG_OK) break;
            /* Rows: window s occupies rows s*len .. s*len+len-1, positions pos .. pos+len-1. */
            int64_t total = (int64_t)nw * len;
            for (int64_t r0 = 0; r0 < total; r0 += LOGIT_ROWS) {
                int64_t nr = total - r0 < LOGIT_ROWS ? total - r0 : LOGIT_ROWS;
                ig_engine_logits(e, r0, nr, logits);
                for (int64_t r = 0; r < nr; r++) {
                    int64_t row = r0 + r;
                    int s = (int)(row / len);
                    int p = pos + (int)(row % len);
                    if (p + 1 >= ctx) continue;
                    int32_t target = ids[(w0 + s) * (int64_t)ctx + p + 1];
                    res->window_nll[w0 + s] -=
                        ig_cpu_log_prob(logits + (size_t)r * V, c->vocab, target);
                }
            }
        }
        if (progress && rc == IG_OK)
            progress(user, (int)(w0 + nw), (int)n_windows, ig_time_s() - t0);
    }
finish:
    free(logits);
    free(seqs);
    if (rc != IG_OK) {
        ig_ppl_result_free(res);
        return rc;
    }
    res->windows = (int)n_windows;
    res->ctx = ctx;
    res->tokens = n_windows * (int64_t)(ctx - 1 - (opts->prefill > 0 ? opts->prefill : 0));
    for (int64_t w = 0; w < n_windows; w++) res->nll_sum += res->window_nll[w];
    res->ppl = exp(res->nll_sum / (double)res->tokens);
    res->seconds = ig_time_s() - t0;
    return IG_OK;
}
