/* Task accuracy: the few-shot multiple-choice tasks of InfiniGen's accuracy study (COPA,
 * OpenBookQA, WinoGrande, PIQA, RTE), LAMBADA, a synthetic passkey retrieval task and RULER-style
 * needle-in-a-haystack retrieval (niah_single, niah_multikey, niah_multivalue), scored the
 * way lm-evaluation-harness scores them (docs/eval.md says which definition each follows), with
 * every scored token predicted by a decode step so that the engine's KV policy acts on the score.
 * This module builds prompts and computes metrics; it never prints, and never owns the engine. */
#ifndef IG_EVAL_H
#define IG_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine/engine.h"
#include "core/base/status.h"
#include "core/model/tokenizer/tokenizer.h"

typedef struct ig_eval_task ig_eval_task;

typedef struct ig_eval_task_opts {
    const char *name;     /* copa, openbookqa, winogrande, piqa, rte, lambada, passkey, niah_* */
    const char *data_dir; /* the folder holding the task's files (not used by passkey, niah) */
    int shots;            /* few-shot examples per item (0: zero-shot) */
    int limit;            /* <= 0: every item; else the first `limit` items */
    uint64_t seed;        /* few-shot sampling (lm-eval's default is 1234); passkey, niah keys */
    int add_bos;          /* prepend the tokenizer's BOS to every context (lm-eval: off) */
    int max_len;          /* > 0: contexts are cut from the left so context + continuation fit */
    /* passkey and niah_* */
    int passkey_length;           /* prompt length in tokens (niah: when niah_lengths is NULL) */
    const double *passkey_depths; /* relative depths of the key (niah: of needle 0) in [0, 1] */
    int passkey_n_depths;
    int passkey_seeds; /* keys per depth (niah: prompts per length and depth) */
    /* niah_* */
    const int *niah_lengths; /* prompt lengths in tokens */
    int niah_n_lengths;
    const char *haystack; /* UTF-8 text file the haystack spans are cut from */
} ig_eval_task_opts;

/* Reads the task's files (or generates the passkey prompts), builds every request's context and
 * continuation text and tokenizes them. Errors name the file and line (a malformed JSONL line), or
 * the folder and the files expected in it. */
ig_status ig_eval_task_load(const ig_eval_task_opts *opts, const ig_tokenizer *tok,
                            ig_eval_task **out, ig_error *err);
void ig_eval_task_free(ig_eval_task *t);

/* The files a task reads inside its data folder, space-separated ("" for the generated tasks:
 * passkey, niah_*). NULL for an unknown task name. */
const char *ig_eval_task_files(const char *name);
/* Comma-separated names of every task. */
const char *ig_eval_task_names(void);

const char *ig_eval_task_name(const ig_eval_task *t);
int ig_eval_task_n_items(const ig_eval_task *t);
/* Requests (continuations to score) of item i: one per choice, one for LAMBADA and passkey. */
int ig_eval_task_n_requests(const ig_eval_task *t, int item);
int ig_eval_task_gold(const ig_eval_task *t, int item);
/* Whether lm-eval reports acc_norm for this task (OpenBookQA and PIQA). */
int ig_eval_task_has_acc_norm(const ig_eval_task *t);
/* Text of request r of item i: the context (few-shot examples + query) and the continuation
 * (after lm-eval's move of the context's trailing whitespace into it). Owned by the task. */
const char *ig_eval_task_context(const ig_eval_task *t, int item, int r);
const char *ig_eval_task_continuation(const ig_eval_task *t, int item, int r);
/* Tokens of request r of item i (owned by the task). */
const int32_t *ig_eval_task_context_ids(const ig_eval_task *t, int item, int r, int *n);
const int32_t *ig_eval_task_continuation_ids(const ig_eval_task *t, int item, int r, int *n);
/* Longest context + continuation in tokens, and total requests. */
int ig_eval_task_max_tokens(const ig_eval_task *t);
int ig_eval_task_total_requests(const ig_eval_task *t);
/* Passkey: the key of item i and the token index where its sentence starts in the context. */
int ig_eval_passkey_key(const ig_eval_task *t, int item);
int ig_eval_passkey_key_pos(const ig_eval_task *t, int item);

/* Needle-in-a-haystack (RULER's niah tasks): needles "One of the special magic numbers for KEY is:
 * VALUE." in a contiguous token span of a text file. */
#define IG_EVAL_NIAH_NEEDLES 4
typedef struct ig_eval_needle {
    char key[32]; /* word-like id, "adjective-noun" */
    int value;    /* 7 digits */
    int pos;      /* token index in the context where the needle's tokens start */
    int n_tokens;
    int asked; /* 1: an answer the question asks for; 0: a distractor (niah_multikey) */
} ig_eval_needle;
typedef struct ig_eval_niah_item {
    int length;     /* prompt tokens */
    double depth;   /* relative depth of needles[0] in the haystack */
    int seed_index; /* 0 .. seeds - 1: decides the keys, values, other depths, haystack offset */
    int hay_offset; /* the span's first token: its index in the tokenized haystack file */
    int hay_tokens; /* haystack tokens in the prompt (= length - header - needles - question) */
    int header_tokens, question_tokens;
    int n_needles;
    ig_eval_needle needles[IG_EVAL_NIAH_NEEDLES]; /* [0] at `depth`; the others at random depths */
} ig_eval_niah_item;
/* Item i of a niah task (NULL for other tasks). */
const ig_eval_niah_item *ig_eval_niah_info(const ig_eval_task *t, int item);
/* Whether a task name is generated (passkey, niah_*: no data folder). */
int ig_eval_task_is_generated(const char *name);
/* Whether it is one of the niah tasks. */
int ig_eval_task_is_niah(const char *name);

typedef struct ig_eval_run_opts {
    int batch;   /* sequences (requests) alive at once, each in its own engine slot */
    int prefill; /* > 0: only the first `prefill` context tokens are a prompt; the rest of the
                    context is decoded too (teacher-forced, not scored). 0: the whole context
                    except its last token is the prompt */
} ig_eval_run_opts;

/* One cell of the depth x length table (niah). */
typedef struct ig_eval_cell {
    int length;
    double depth;
    int n;          /* items scored in the cell */
    double acc;     /* mean item score */
    double acc_all; /* niah_multivalue: fraction of items with every value found */
} ig_eval_cell;

typedef struct ig_eval_result {
    int n;        /* items scored */
    int requests; /* continuations scored */
    double acc, acc_stderr;
    int has_acc_norm;
    double acc_norm, acc_norm_stderr;
    int has_ppl; /* LAMBADA */
    double ppl, ppl_stderr;
    /* niah_multivalue: acc is the mean fraction of the values found (RULER's score), acc_all the
     * fraction of items with all of them found */
    int has_acc_all;
    double acc_all, acc_all_stderr;
    int64_t prompt_tokens, decode_tokens, scored_tokens;
    double seconds;
    /* Per request (in item order): the continuation's log-likelihood and whether every
     * continuation token was the argmax; per item: correct (acc) and correct after normalisation.
     * Passkey, niah: req_greedy is the exact match of the generated answer (niah_multivalue: all
     * values found). item_score: the item's score (0/1, or niah_multivalue's fraction of values
     * found) whose mean is acc. malloc'd. */
    double *req_ll;
    int *req_greedy;
    int *item_correct, *item_correct_norm;
    double *item_score;
    /* niah: accuracy per (length, depth), lengths outer, in the order given; malloc'd */
    ig_eval_cell *grid;
    int n_grid;
} ig_eval_result;

typedef void (*ig_eval_progress_fn)(void *user, int items_done, int items_total, double elapsed_s);

/* Scores every request of the task with the engine (which needs >= batch slots, a context >=
 * ig_eval_task_max_tokens and a batch capacity >= the longest prompt). For each request the prompt
 * is prefilled, then the remaining context token(s) and the continuation are fed one token per
 * forward call, so that every scored prediction is a decode step with the engine's KV policy
 * active. Passkey answers are generated greedily the same way. */
ig_status ig_eval_run(ig_engine *e, const ig_eval_task *t, const ig_eval_run_opts *opts,
                      ig_eval_progress_fn progress, void *user, ig_eval_result *res, ig_error *err);
void ig_eval_result_free(ig_eval_result *r);

/* Metrics (exposed for tests). The index of the best log-likelihood (first among ties); with
 * `lens`, of ll[i] / lens[i] (lm-eval's acc_norm: lens = the choice's length in characters). */
int ig_eval_argmax(const double *ll, const double *lens, int n);
/* lm-eval's mean_stderr: the sample standard deviation (n - 1) over sqrt(n); 0 for n < 2. */
double ig_eval_mean_stderr(const double *x, int n);
/* exp(-mean(ll)), lm-eval's perplexity aggregation of per-item log-likelihoods. */
double ig_eval_perplexity(const double *ll, int n);
/* Bootstrap standard error of that perplexity (lm-eval's method for perplexity): `iters`
 * resamples of n items with replacement from a seeded generator; the sample standard deviation of
 * the resampled perplexities. */
double ig_eval_perplexity_stderr(const double *ll, int n, int iters, uint64_t seed);
/* Exact match of a generated answer (passkey, niah_single, niah_multikey): the first run of decimal
 * digits in text is `value` written with exactly `digits` digits. */
int ig_eval_digits_match(const char *text, long value, int digits);
/* RULER's multi-value score (string_match_all): the fraction of the n values whose decimal form
 * occurs in text. */
double ig_eval_niah_score(const char *text, const int *values, int n);
/* Code points of a UTF-8 string (Python's len(), what lm-eval's acc_norm divides by). */
size_t ig_eval_utf8_len(const char *s);

#endif
