/* The passkey retrieval task (Mohtashami & Jaggi, "Landmark Attention", 2023): repeated filler
 * sentences with one sentence holding a random 5-digit key at a chosen relative depth, then the
 * question; the model must generate the key. Prompts are built from token sequences so that the
 * length is exact; no data file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/eval/eval_internal.h"
#include "kernels/cpu/cpu_kernels.h"

static const char *HEADER = "There is an important info hidden inside a lot of irrelevant text. "
                            "Find it and memorize it. I will quiz you about the important "
                            "information there.";
static const char *FILLER = " The grass is green. The sky is blue. The sun is yellow. Here we go. "
                            "There and back again.";
static const char *QUESTION = " What is the pass key? The pass key is";

/* Tokens the model generates per answer: the key's tokens plus a little slack. */
#define PASSKEY_SLACK 2

typedef struct toks {
    int32_t *ids;
    size_t n;
} toks;

static ig_status enc(const ig_tokenizer *tok, const char *s, toks *t, ig_error *err) {
    return ig_tokenizer_encode(tok, s, strlen(s), 0, &t->ids, &t->n, err);
}

ig_status ig_eval_gen_request(eval_req *r, const ig_tokenizer *tok, int32_t *ids, int n,
                              const char *answer, ig_error *err) {
    r->ctx_ids = ids;
    r->n_ctx = n;
    r->len_chars = (double)ig_eval_utf8_len(answer);
    ig_status rc = ig_tokenizer_decode(tok, ids, (size_t)n, &r->ctx, err);
    if (rc != IG_OK) return rc;
    size_t al = strlen(answer), cl = strlen(r->ctx);
    r->cont = malloc(al + 1);
    char *wt = malloc(cl + al + 1);
    if (!r->cont || !wt) {
        free(wt);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    memcpy(r->cont, answer, al + 1);
    memcpy(wt, r->ctx, cl);
    memcpy(wt + cl, answer, al + 1);
    /* The answer's tokens as they follow this context (for the generation length). */
    toks whole = {0}, ctx = {0};
    rc = enc(tok, wt, &whole, err);
    if (rc == IG_OK) rc = enc(tok, r->ctx, &ctx, err);
    free(wt);
    if (rc == IG_OK) {
        r->n_cont = whole.n > ctx.n ? (int)(whole.n - ctx.n) : 1;
        r->cont_ids = malloc((size_t)r->n_cont * sizeof(int32_t));
        if (!r->cont_ids)
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        else if (whole.n > ctx.n)
            memcpy(r->cont_ids, whole.ids + ctx.n, (size_t)r->n_cont * sizeof(int32_t));
        else
            r->cont_ids[0] = 0;
    }
    free(whole.ids);
    free(ctx.ids);
    return rc;
}

ig_status ig_eval_passkey_build(ig_eval_task *t, const ig_eval_task_opts *o,
                                const ig_tokenizer *tok, ig_error *err) {
    static const double half = 0.5;
    const double *depths = o->passkey_depths ? o->passkey_depths : &half;
    int n_depths = o->passkey_depths ? o->passkey_n_depths : 1;
    int seeds = o->passkey_seeds > 0 ? o->passkey_seeds : 1;
    int L = o->passkey_length;
    for (int i = 0; i < n_depths; i++)
        if (!(depths[i] >= 0 && depths[i] <= 1))
            return ig_error_set(err, IG_ERR_INVALID_ARG, "passkey depth %g is not in [0, 1]",
                                depths[i]);
    int n = n_depths * seeds;
    if (o->limit > 0 && n > o->limit) n = o->limit;
    toks hdr = {0}, fill = {0}, q = {0};
    ig_status rc = enc(tok, HEADER, &hdr, err);
    if (rc == IG_OK) rc = enc(tok, FILLER, &fill, err);
    if (rc == IG_OK) rc = enc(tok, QUESTION, &q, err);
    if (rc == IG_OK && o->add_bos && ig_tokenizer_bos(tok) >= 0) {
        int32_t *h = realloc(hdr.ids, (hdr.n + 1) * sizeof *h);
        if (!h) {
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        } else {
            memmove(h + 1, h, hdr.n * sizeof *h);
            h[0] = ig_tokenizer_bos(tok);
            hdr.ids = h;
            hdr.n++;
        }
    }
    if (rc == IG_OK && fill.n == 0)
        rc = ig_error_set(err, IG_ERR_INTERNAL, "the filler sentence has no tokens");
    if (rc == IG_OK) {
        t->items = ig_calloc((size_t)n, sizeof *t->items, err);
        t->reqs = ig_calloc((size_t)n, sizeof *t->reqs, err);
        if (!t->items || !t->reqs) rc = IG_ERR_NOMEM;
    }
    for (int i = 0; i < n && rc == IG_OK; i++) {
        double depth = depths[i / seeds];
        int s = i % seeds;
        ig_rng rng;
        ig_rng_seed(&rng, o->seed * 0x9E3779B97F4A7C15ull + (uint64_t)s + 1);
        int key = 10000 + (int)(ig_rng_next(&rng) % 90000);
        char ks[160];
        snprintf(ks, sizeof ks, " The pass key is %d. Remember it. %d is the pass key.", key, key);
        toks kt = {0};
        if ((rc = enc(tok, ks, &kt, err)) != IG_OK) break;
        long fixed = (long)(hdr.n + kt.n + q.n);
        long filler = (long)L - fixed;
        if (filler < (long)fill.n) {
            free(kt.ids);
            rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                              "passkey length %d is too short: the header, key and question alone "
                              "take %ld tokens (need at least %ld)",
                              L, fixed, fixed + (long)fill.n);
            break;
        }
        /* The key sentence goes between whole filler sentences, after round(depth x units) of
         * them; the filler is cut to the exact length at its end, before the question. */
        long units = filler / (long)fill.n;
        long before = (long)(depth * (double)units + 0.5);
        int32_t *ids = malloc((size_t)L * sizeof(int32_t));
        if (!ids) {
            free(kt.ids);
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
            break;
        }
        int32_t *p = ids;
        memcpy(p, hdr.ids, hdr.n * sizeof *p);
        p += hdr.n;
        long f = 0;
        for (; f < before * (long)fill.n; f++) *p++ = fill.ids[f % (long)fill.n];
        t->items[i].key_pos = (int)(p - ids);
        memcpy(p, kt.ids, kt.n * sizeof *p);
        p += kt.n;
        for (; f < filler; f++) *p++ = fill.ids[f % (long)fill.n];
        memcpy(p, q.ids, q.n * sizeof *p);
        free(kt.ids);
        t->items[i].key = key;
        t->items[i].req0 = i;
        t->items[i].n_req = 1;
        t->items[i].gold = 0;
        t->n_items++;
        t->n_reqs++;
        char ans[16];
        snprintf(ans, sizeof ans, " %d", key);
        eval_req *r = &t->reqs[i];
        if ((rc = ig_eval_gen_request(r, tok, ids, L, ans, err)) != IG_OK) break;
        if (r->n_cont + PASSKEY_SLACK > t->generate) t->generate = r->n_cont + PASSKEY_SLACK;
        if (L > t->max_tokens) t->max_tokens = L;
    }
    free(hdr.ids);
    free(fill.ids);
    free(q.ids);
    return rc;
}
