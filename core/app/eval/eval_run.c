/* Scoring with the policy active: requests run as sequences in engine slots (continuous batching:
 * a slot is refilled as soon as its request is done); each request's prompt is prefilled, then the
 * rest of its context and its continuation are fed one token per forward call, and the logits of
 * those decode steps score the continuation (or, for passkey and niah, choose the next token
 * greedily). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/eval/eval_internal.h"
#include "core/base/log.h"
#include "kernels/cpu/cpu_kernels.h"

#define LOGIT_ROWS 64

typedef struct slot_run {
    int req;      /* request index, -1 when the slot is free */
    int P;        /* prompt tokens */
    int fed;      /* decode tokens fed so far */
    int n_feeds;  /* decode tokens to feed */
    int32_t next; /* generation: the token to feed next */
    double ll;
    int greedy;
    int32_t *gen; /* generated tokens (passkey) */
    int n_gen;
} slot_run;

/* The token fed at decode step f of request q (absolute position P + f). */
static int32_t feed_token(const ig_eval_task *t, const eval_req *q, const slot_run *s) {
    int pos = s->P + s->fed;
    if (pos < q->n_ctx) return q->ctx_ids[pos];
    if (t->generate) return s->next;
    return q->cont_ids[pos - q->n_ctx];
}

/* The logits row predicting absolute position `pos` of request q. */
static void score_row(const ig_eval_task *t, const eval_req *q, slot_run *s, int pos,
                      const float *logits, int vocab) {
    if (pos < q->n_ctx) return;
    int32_t am = ig_sample_argmax(logits, vocab);
    if (t->generate) {
        s->gen[s->n_gen++] = am;
        s->next = am;
        return;
    }
    int32_t target = q->cont_ids[pos - q->n_ctx];
    s->ll += ig_cpu_log_prob(logits, vocab, target);
    if (am != target) s->greedy = 0;
}

/* The score of a generated answer: passkey, niah_single, niah_multikey: exact match (its first
 * run of digits is the key or the asked value); niah_multivalue: the fraction of the values it
 * holds (RULER's string_match_all). */
static double answer_score(const ig_eval_task *t, const ig_tokenizer *tok, int item,
                           const int32_t *gen, int n) {
    char buf[1024];
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t l = 0;
        const char *b = ig_tokenizer_token_bytes(tok, gen[i], &l);
        if (!b) continue;
        if (len + l >= sizeof buf) l = sizeof buf - 1 - len;
        memcpy(buf + len, b, l);
        len += l;
    }
    buf[len] = '\0';
    if (t->kind == EVAL_PASSKEY) return ig_eval_digits_match(buf, t->items[item].key, 5);
    const ig_eval_niah_item *ni = &t->niah[item];
    if (t->kind != EVAL_NIAH_MULTIVALUE) return ig_eval_digits_match(buf, ni->needles[0].value, 7);
    int values[IG_EVAL_NIAH_NEEDLES], nv = 0;
    for (int j = 0; j < ni->n_needles; j++)
        if (ni->needles[j].asked) values[nv++] = ni->needles[j].value;
    return ig_eval_niah_score(buf, values, nv);
}

void ig_eval_result_free(ig_eval_result *r) {
    if (!r) return;
    free(r->req_ll);
    free(r->req_greedy);
    free(r->item_correct);
    free(r->item_correct_norm);
    free(r->item_score);
    free(r->grid);
    memset(r, 0, sizeof *r);
}

static ig_status finish_metrics(const ig_eval_task *t, ig_eval_result *res, ig_error *err) {
    int n = t->n_items;
    double *x = ig_malloc((size_t)(n > 0 ? n : 1) * sizeof *x, err);
    double *y = ig_malloc((size_t)(n > 0 ? n : 1) * sizeof *y, err);
    double lens[8];
    if (!x || !y) {
        free(x);
        free(y);
        return IG_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        const eval_item *it = &t->items[i];
        if (t->generate) {
            /* item_score was set when the answer was generated */
            res->item_correct[i] = res->req_greedy[it->req0];
            res->item_correct_norm[i] = res->item_correct[i];
        } else if (t->kind == EVAL_LAMBADA) {
            res->item_correct[i] = res->req_greedy[it->req0];
            res->item_correct_norm[i] = res->item_correct[i];
            y[i] = res->req_ll[it->req0];
        } else {
            for (int c = 0; c < it->n_req && c < 8; c++) lens[c] = t->reqs[it->req0 + c].len_chars;
            res->item_correct[i] =
                ig_eval_argmax(res->req_ll + it->req0, NULL, it->n_req) == it->gold;
            res->item_correct_norm[i] =
                ig_eval_argmax(res->req_ll + it->req0, lens, it->n_req) == it->gold;
        }
        if (!t->generate) res->item_score[i] = res->item_correct[i];
        x[i] = res->item_score[i];
    }
    res->n = n;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    res->acc = n > 0 ? sum / n : 0;
    res->acc_stderr = ig_eval_mean_stderr(x, n);
    res->has_acc_norm = ig_eval_task_has_acc_norm(t);
    if (res->has_acc_norm) {
        sum = 0;
        for (int i = 0; i < n; i++) sum += (x[i] = res->item_correct_norm[i]);
        res->acc_norm = n > 0 ? sum / n : 0;
        res->acc_norm_stderr = ig_eval_mean_stderr(x, n);
    }
    if (t->kind == EVAL_LAMBADA) {
        res->has_ppl = 1;
        res->ppl = ig_eval_perplexity(y, n);
        /* lm-eval bootstraps 100000 resamples; the cap keeps n x iters bounded (docs/eval.md). */
        long iters = n > 0 ? 20000000L / n : 1000;
        if (iters > 100000) iters = 100000;
        if (iters < 1000) iters = 1000;
        res->ppl_stderr = ig_eval_perplexity_stderr(y, n, (int)iters, 1234);
    }
    if (t->kind == EVAL_NIAH_MULTIVALUE) {
        res->has_acc_all = 1;
        sum = 0;
        for (int i = 0; i < n; i++) sum += (x[i] = res->item_correct[i]);
        res->acc_all = n > 0 ? sum / n : 0;
        res->acc_all_stderr = ig_eval_mean_stderr(x, n);
    }
    if (t->n_cells > 0) {
        res->grid = ig_calloc((size_t)t->n_cells, sizeof *res->grid, err);
        if (!res->grid) {
            free(x);
            free(y);
            return IG_ERR_NOMEM;
        }
        res->n_grid = t->n_cells;
        for (int c = 0; c < t->n_cells; c++) {
            res->grid[c].length = t->cells[c].length;
            res->grid[c].depth = t->cells[c].depth;
        }
        for (int i = 0; i < n; i++) {
            ig_eval_cell *g = &res->grid[t->items[i].cell];
            g->n++;
            g->acc += res->item_score[i];
            g->acc_all += res->item_correct[i];
        }
        for (int c = 0; c < t->n_cells; c++)
            if (res->grid[c].n > 0) {
                res->grid[c].acc /= res->grid[c].n;
                res->grid[c].acc_all /= res->grid[c].n;
            }
    }
    free(x);
    free(y);
    return IG_OK;
}

ig_status ig_eval_run(ig_engine *e, const ig_eval_task *t, const ig_eval_run_opts *opts,
                      ig_eval_progress_fn progress, void *user, ig_eval_result *res,
                      ig_error *err) {
    memset(res, 0, sizeof *res);
    const ig_engine_opts *eo = ig_engine_get_opts(e);
    const ig_model *m = ig_engine_model(e);
    const ig_model_config *c = ig_model_get_config(m);
    const ig_tokenizer *tok = ig_model_tokenizer(m);
    int B = opts->batch > 0 ? opts->batch : 1;
    if (B > eo->max_seqs) B = eo->max_seqs;
    if (ig_eval_task_max_tokens(t) > eo->max_ctx)
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "task %s needs %d tokens per sequence, the engine holds %d", t->name,
                            ig_eval_task_max_tokens(t), eo->max_ctx);
    int V = c->vocab;
    slot_run *slots = ig_calloc((size_t)B, sizeof *slots, err);
    ig_seq_tokens *seqs = ig_calloc((size_t)B, sizeof *seqs, err);
    int *seq_slot = ig_calloc((size_t)B, sizeof *seq_slot, err);
    int32_t *feed = ig_calloc((size_t)B, sizeof *feed, err);
    int *left = ig_calloc((size_t)(t->n_items > 0 ? t->n_items : 1), sizeof *left, err);
    int *item_of = ig_calloc((size_t)(t->n_reqs > 0 ? t->n_reqs : 1), sizeof *item_of, err);
    float *logits = ig_malloc((size_t)LOGIT_ROWS * (size_t)V * sizeof(float), err);
    res->req_ll = ig_calloc((size_t)(t->n_reqs > 0 ? t->n_reqs : 1), sizeof(double), err);
    res->req_greedy = ig_calloc((size_t)(t->n_reqs > 0 ? t->n_reqs : 1), sizeof(int), err);
    res->item_correct = ig_calloc((size_t)(t->n_items > 0 ? t->n_items : 1), sizeof(int), err);
    res->item_correct_norm = ig_calloc((size_t)(t->n_items > 0 ? t->n_items : 1), sizeof(int), err);
    res->item_score = ig_calloc((size_t)(t->n_items > 0 ? t->n_items : 1), sizeof(double), err);
    ig_status rc = IG_OK;
    if (!slots || !seqs || !seq_slot || !feed || !left || !item_of || !logits || !res->req_ll ||
        !res->req_greedy || !res->item_correct || !res->item_correct_norm || !res->item_score) {
        rc = IG_ERR_NOMEM;
        goto out;
    }
    for (int s = 0; s < B; s++) {
        slots[s].req = -1;
        if (t->generate) {
            slots[s].gen = ig_malloc((size_t)t->generate * sizeof(int32_t), err);
            if (!slots[s].gen) {
                rc = IG_ERR_NOMEM;
                goto out;
            }
        }
    }
    for (int i = 0; i < t->n_items; i++) {
        left[i] = t->items[i].n_req;
        for (int r = 0; r < t->items[i].n_req; r++) item_of[t->items[i].req0 + r] = i;
    }
    double t0 = ig_time_s();
    int next = 0, active = 0, items_done = 0;
    while (rc == IG_OK && (next < t->n_reqs || active > 0)) {
        /* Start requests in free slots: their prompts in one prefill call (up to the engine's
         * batch capacity). */
        int ns = 0, tokens = 0;
        for (int s = 0; s < B && next < t->n_reqs; s++) {
            if (slots[s].req >= 0) continue;
            const eval_req *q = &t->reqs[next];
            int P = q->n_ctx - 1;
            if (opts->prefill > 0 && opts->prefill < P) P = opts->prefill;
            if (P < 1) P = 1;
            if (ns > 0 && tokens + P > eo->max_batch_tokens) break;
            if (P > eo->max_batch_tokens) {
                rc = ig_error_set(err, IG_ERR_CAPACITY,
                                  "a prompt of %d tokens exceeds the batch capacity %d", P,
                                  eo->max_batch_tokens);
                break;
            }
            slot_run *sr = &slots[s];
            sr->req = next++;
            sr->P = P;
            sr->fed = 0;
            sr->ll = 0;
            sr->greedy = 1;
            sr->n_gen = 0;
            int gen = t->generate ? t->generate : q->n_cont;
            /* Positions P .. n_ctx + gen - 2 are fed; the last prediction needs no feed. */
            sr->n_feeds = q->n_ctx + gen - 1 - P;
            ig_engine_seq_reset(e, s);
            seqs[ns].slot = s;
            seqs[ns].tokens = q->ctx_ids;
            seqs[ns].n_tokens = P;
            seq_slot[ns++] = s;
            tokens += P;
            active++;
            res->prompt_tokens += P;
        }
        if (rc != IG_OK) break;
        if (ns > 0) {
            rc = ig_engine_forward(e, seqs, ns, err);
            if (rc != IG_OK) break;
            /* A one-token context: its prompt row predicts the first continuation token. */
            int64_t row = 0;
            for (int i = 0; i < ns; i++) {
                slot_run *sr = &slots[seq_slot[i]];
                row += sr->P;
                const eval_req *q = &t->reqs[sr->req];
                if (sr->P == q->n_ctx) {
                    int64_t r = row - 1;
                    ig_engine_logits_rows(e, &r, 1, logits);
                    score_row(t, q, sr, sr->P, logits, V);
                }
            }
        }
        /* One decode step of every active request. */
        int nd = 0;
        for (int s = 0; s < B; s++) {
            slot_run *sr = &slots[s];
            if (sr->req < 0 || sr->fed >= sr->n_feeds) continue;
            feed[nd] = feed_token(t, &t->reqs[sr->req], sr);
            seq_slot[nd++] = s;
        }
        for (int i = 0; i < nd; i++) {
            seqs[i].slot = seq_slot[i];
            seqs[i].tokens = &feed[i];
            seqs[i].n_tokens = 1;
        }
        if (nd > 0) {
            rc = ig_engine_forward(e, seqs, nd, err);
            if (rc != IG_OK) break;
            res->decode_tokens += nd;
            for (int r0 = 0; r0 < nd; r0 += LOGIT_ROWS) {
                int nr = nd - r0 < LOGIT_ROWS ? nd - r0 : LOGIT_ROWS;
                ig_engine_logits(e, r0, nr, logits);
                for (int r = 0; r < nr; r++) {
                    slot_run *sr = &slots[seq_slot[r0 + r]];
                    score_row(t, &t->reqs[sr->req], sr, sr->P + sr->fed + 1,
                              logits + (size_t)r * (size_t)V, V);
                    sr->fed++;
                }
            }
        }
        /* Retire finished requests. */
        int before = items_done;
        for (int s = 0; s < B; s++) {
            slot_run *sr = &slots[s];
            if (sr->req < 0 || sr->fed < sr->n_feeds) continue;
            const eval_req *q = &t->reqs[sr->req];
            if (t->generate) {
                int it = item_of[sr->req];
                double sc = answer_score(t, tok, it, sr->gen, sr->n_gen);
                res->item_score[it] = sc;
                res->req_greedy[sr->req] = sc == 1.0;
                res->req_ll[sr->req] = 0;
                res->scored_tokens += sr->n_gen;
            } else {
                res->req_ll[sr->req] = sr->ll;
                res->req_greedy[sr->req] = sr->greedy;
                res->scored_tokens += q->n_cont;
            }
            if (--left[item_of[sr->req]] == 0) items_done++;
            sr->req = -1;
            active--;
        }
        if (progress && items_done != before)
            progress(user, items_done, t->n_items, ig_time_s() - t0);
    }
    if (rc == IG_OK) {
        res->requests = t->n_reqs;
        rc = finish_metrics(t, res, err);
        res->seconds = ig_time_s() - t0;
    }
out:
    if (slots)
        for (int s = 0; s < B; s++) free(slots[s].gen);
    free(slots);
    free(seqs);
    free(seq_slot);
    free(feed);
    free(left);
    free(item_of);
    free(logits);
    if (rc != IG_OK) ig_eval_result_free(res);
    return rc;
}
