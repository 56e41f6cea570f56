/* The eval module's shared state: a loaded task is a flat list of requests (context +
 * continuation, text and tokens) grouped into items. Not part of the public API. */
#ifndef IG_EVAL_INTERNAL_H
#define IG_EVAL_INTERNAL_H

#include <stdint.h>

#include "core/app/eval/eval.h"

typedef enum eval_kind {
    EVAL_COPA = 0,
    EVAL_OPENBOOKQA,
    EVAL_WINOGRANDE,
    EVAL_PIQA,
    EVAL_RTE,
    EVAL_LAMBADA,
    EVAL_PASSKEY,
    EVAL_NIAH_SINGLE,
    EVAL_NIAH_MULTIKEY,
    EVAL_NIAH_MULTIVALUE,
} eval_kind;

#define EVAL_IS_NIAH(k)                                                                            \
    ((k) == EVAL_NIAH_SINGLE || (k) == EVAL_NIAH_MULTIKEY || (k) == EVAL_NIAH_MULTIVALUE)

typedef struct eval_req {
    char *ctx, *cont;            /* text, after the whitespace move */
    int32_t *ctx_ids, *cont_ids; /* malloc'd */
    int n_ctx, n_cont;
    double len_chars; /* the choice's length in code points (acc_norm) */
} eval_req;

typedef struct eval_item {
    int req0, n_req;
    int gold;
    int key, key_pos; /* passkey */
    int cell;         /* niah: index in the task's depth x length cells */
} eval_item;

struct ig_eval_task {
    eval_kind kind;
    const char *name;
    eval_item *items;
    int n_items;
    eval_req *reqs;
    int n_reqs;
    int max_tokens;
    int generate;            /* passkey, niah: tokens generated greedily per request */
    ig_eval_niah_item *niah; /* niah: per item */
    ig_eval_cell *cells;     /* niah: (length, depth) of each cell, lengths outer */
    int n_cells;
};

/* Builds passkey prompts (eval_passkey.c). */
ig_status ig_eval_passkey_build(ig_eval_task *t, const ig_eval_task_opts *o,
                                const ig_tokenizer *tok, ig_error *err);
/* Builds niah_* prompts (eval_niah.c). */
ig_status ig_eval_niah_build(ig_eval_task *t, const ig_eval_task_opts *o, const ig_tokenizer *tok,
                             ig_error *err);
/* Fills request r of a generated task (passkey, niah): its context is the n tokens `ids` (taken
 * over, freed on error too), its text their decoding; its continuation is `answer` and the
 * answer's tokens as they follow that context (encode(ctx + answer)[len(encode(ctx)):]), which size
 * the generation. */
ig_status ig_eval_gen_request(eval_req *r, const ig_tokenizer *tok, int32_t *ids, int n,
                              const char *answer, ig_error *err);
/* Tokenizes request r as lm-eval does (whole = encode(ctx + cont), context = encode(ctx),
 * continuation = whole[len(context):]), cutting the context from the left to max_len. */
ig_status ig_eval_req_encode(eval_req *r, const ig_tokenizer *tok, int add_bos, int max_len,
                             ig_error *err);

#endif
