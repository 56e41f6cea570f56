/* The eval module's shared state: a loaded task is a flat list of requests (context +
 * continuation, text and tokens) grouped into items. Not part of the public API. */
#ifndef IG_EVAL_INTERNAL_H
#define IG_EVAL_INTERNAL_H

#include <stdint.h>

#include "core/eval/eval.h"

typedef enum eval_kind {
    EVAL_COPA = 0,
    EVAL_OPENBOOKQA,
    EVAL_WINOGRANDE,
    EVAL_PIQA,
    EVAL_RTE,
    EVAL_LAMBADA,
    EVAL_PASSKEY,
} eval_kind;

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
} eval_item;

struct ig_eval_task {
    eval_kind kind;
    const char *name;
    eval_item *items;
    int n_items;
    eval_req *reqs;
    int n_reqs;
    int max_tokens;
    int generate; /* passkey: tokens generated greedily per request */
};

/* Builds passkey prompts (eval_passkey.c). */
ig_status ig_eval_passkey_build(ig_eval_task *t, const ig_eval_task_opts *o,
                                const ig_tokenizer *tok, ig_error *err);
/* Tokenizes request r as lm-eval does (whole = encode(ctx + cont), context = encode(ctx),
 * continuation = whole[len(context):]), cutting the context from the left to max_len. */
ig_status ig_eval_req_encode(eval_req *r, const ig_tokenizer *tok, int add_bos, int max_len,
                             ig_error *err);

#endif
