/* Batched generation: chunked prefill of every prompt, then lock-step decode of the live ones. */
#include "core/engine/generate.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "kernels/cpu/cpu_kernels.h"

void ig_gen_result_free(ig_gen_result *r, int n) {
    if (!r) return;
    for (int i = 0; i < n; i++) {
        free(r[i].tokens);
        r[i].tokens = NULL;
    }
}

ig_status ig_generate(ig_engine *e, const int32_t *const *prompts, const int *n_prompt, int n,
                      const ig_gen_params *p, ig_gen_token_fn on_token, void *user,
                      ig_gen_result *results, ig_gen_timing *timing, ig_error *err) {
    const ig_engine_opts *o = ig_engine_get_opts(e);
    const ig_model_config *c = ig_model_get_config(ig_engine_model(e));
    if (n <= 0 || n > o->max_seqs)
        return ig_error_set(err, IG_ERR_CAPACITY, "%d prompts but the engine has %d slots", n,
                            o->max_seqs);
    for (int i = 0; i < n; i++) {
        if (n_prompt[i] <= 0) return ig_error_set(err, IG_ERR_INVALID_ARG, "prompt %d is empty", i);
        if (n_prompt[i] + p->max_new_tokens > o->max_ctx)
            return ig_error_set(err, IG_ERR_CAPACITY,
                                "prompt %d: %d tokens + %d new exceed the context of %d", i,
                                n_prompt[i], p->max_new_tokens, o->max_ctx);
    }
    memset(results, 0, (size_t)n * sizeof *results);
    ig_gen_timing tm = {0};
    size_t V = (size_t)c->vocab;
    float *logits = ig_malloc((size_t)n * V * sizeof(float), err);
    float *ws = ig_malloc(V * sizeof(float), err);
    int32_t *idx = ig_malloc(V * sizeof(int32_t), err);
    ig_seq_tokens *seqs = ig_malloc((size_t)n * sizeof *seqs, err);
    float *step_logits = ig_malloc((size_t)n * V * sizeof(float), err);
    int *live = ig_malloc((size_t)n * sizeof *live, err);
    int32_t *next = ig_malloc((size_t)n * sizeof *next, err);
    ig_rng *rng = ig_malloc((size_t)n * sizeof *rng, err);
    ig_status rc = IG_OK;
    if (!logits || !ws || !idx || !seqs || !step_logits || !live || !next || !rng) {
        rc = IG_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        ig_engine_seq_reset(e, i);
        ig_rng_seed(&rng[i], p->seed + (uint64_t)i);
        results[i].tokens = ig_malloc(
            (size_t)(p->max_new_tokens > 0 ? p->max_new_tokens : 1) * sizeof(int32_t), err);
        if (!results[i].tokens) {
            rc = IG_ERR_NOMEM;
            goto done;
        }
        live[i] = p->max_new_tokens > 0;
    }
    if (p->max_new_tokens <= 0) goto done;

    /* Prefill: pack prompt chunks into calls of at most max_batch_tokens; keep each prompt's last
     * row's logits. */
    double t0 = ig_time_s();
    int *done_tok = calloc((size_t)n, sizeof(int));
    if (!done_tok) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (;;) {
        int ns = 0;
        int64_t budget = o->max_batch_tokens;
        for (int i = 0; i < n && budget > 0; i++) {
            int left = n_prompt[i] - done_tok[i];
            if (left <= 0) continue;
            int take = left < budget ? left : (int)budget;
            seqs[ns].slot = i;
            seqs[ns].tokens = prompts[i] + done_tok[i];
            seqs[ns].n_tokens = take;
            ns++;
            budget -= take;
        }
        if (ns == 0) break;
        rc = ig_engine_forward(e, seqs, ns, err);
        if (rc != IG_OK) break;
        int64_t row = 0;
        for (int s = 0; s < ns; s++) {
            int i = seqs[s].slot;
            done_tok[i] += seqs[s].n_tokens;
            row += seqs[s].n_tokens;
            if (done_tok[i] == n_prompt[i]) ig_engine_logits(e, row - 1, 1, logits + (size_t)i * V);
        }
        tm.prefill_tokens += o->max_batch_tokens - budget;
    }
    free(done_tok);
    tm.prefill_s = ig_time_s() - t0;
    if (rc != IG_OK) goto done;

    t0 = ig_time_s();
    for (int step = 0;; step++) {
        int ns = 0;
        for (int i = 0; i < n; i++) {
            if (!live[i]) continue;
            int32_t tok = ig_sample(logits + (size_t)i * V, c->vocab, p->temperature, p->top_p,
                                    &rng[i], ws, idx);
            results[i].tokens[results[i].n_tokens++] = tok;
            if (on_token) on_token(user, i, tok);
            if (p->stop_at_eos && tok == c->eos) {
                results[i].stopped_at_eos = 1;
                live[i] = 0;
            } else if (results[i].n_tokens >= p->max_new_tokens) {
                live[i] = 0;
            }
            if (live[i]) {
                next[i] = tok;
                seqs[ns].slot = i;
                seqs[ns].tokens = &next[i];
                seqs[ns].n_tokens = 1;
                ns++;
            }
        }
        if (ns == 0) break;
        /* Decode steps fit max_batch_tokens (>= max_seqs, see the engine options). */
        rc = ig_engine_forward(e, seqs, ns, err);
        if (rc != IG_OK) break;
        /* One GEMM for all rows, then each row to its sequence's place. */
        ig_engine_logits(e, 0, ns, step_logits);
        for (int s = 0; s < ns; s++)
            memcpy(logits + (size_t)seqs[s].slot * V, step_logits + (size_t)s * V,
                   V * sizeof(float));
        tm.decode_steps++;
        tm.decode_tokens += ns;
    }
    tm.decode_s = ig_time_s() - t0;
done:
    free(logits);
    free(ws);
    free(idx);
    free(seqs);
    free(step_logits);
    free(live);
    free(next);
    free(rng);
    if (rc != IG_OK) ig_gen_result_free(results, n);
    if (timing) *timing = tm;
    return rc;
}
