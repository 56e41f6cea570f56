/* The inference engine: batched prefill and decode over a model with a per-sequence KV cache.
 * A forward call takes new tokens for several sequences (of different lengths), appends their keys
 * and values to each sequence's cache slot, and leaves the final hidden states of every new token;
 * logits are computed on demand for the rows the caller needs. No allocation after create. */
#ifndef IG_ENGINE_H
#define IG_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/model/model.h"
#include "core/status.h"

typedef struct ig_engine ig_engine;

typedef struct ig_engine_opts {
    int max_seqs;         /* KV-cache slots (sequences alive at once) */
    int max_ctx;          /* tokens per slot */
    int max_batch_tokens; /* new tokens per forward call, all sequences together */
    int threads;          /* <= 0: all cores */
} ig_engine_opts;

/* New tokens for one sequence in a forward call. */
typedef struct ig_seq_tokens {
    int slot;
    const int32_t *tokens;
    int n_tokens;
} ig_seq_tokens;

/* Time spent per part of the forward pass, accumulated since create (or the last reset). */
typedef struct ig_engine_stats {
    double linear_s, attention_s, other_s, logits_s;
    int64_t forward_calls, tokens;
} ig_engine_stats;

ig_status ig_engine_create(const ig_model *m, const ig_engine_opts *opts, ig_engine **out,
                           ig_error *err);
void ig_engine_free(ig_engine *e);

/* Runs the model over seqs[0..n_seqs) (distinct slots). The new tokens' rows are numbered in the
 * order given: seqs[0]'s tokens first. Fails without changing any cache on bad input (slot out of
 * range or repeated, token id out of range, context or batch capacity exceeded). */
ig_status ig_engine_forward(ig_engine *e, const ig_seq_tokens *seqs, int n_seqs, ig_error *err);
/* Logits [n][vocab] of rows row0 .. row0+n-1 of the last forward. */
void ig_engine_logits(ig_engine *e, int64_t row0, int64_t n, float *out);
/* Logits [n][vocab] of the listed rows of the last forward. */
void ig_engine_logits_rows(ig_engine *e, const int64_t *rows, int64_t n, float *out);
/* Rows produced by the last forward. */
int64_t ig_engine_n_rows(const ig_engine *e);

int ig_engine_seq_len(const ig_engine *e, int slot);
void ig_engine_seq_reset(ig_engine *e, int slot);
const ig_engine_opts *ig_engine_get_opts(const ig_engine *e);
const ig_model *ig_engine_model(const ig_engine *e);
ig_engine_stats ig_engine_get_stats(const ig_engine *e);
void ig_engine_reset_stats(ig_engine *e);
/* Bytes of KV cache allocated, and bytes used by a sequence of n tokens. */
size_t ig_engine_kv_bytes(const ig_engine *e);
size_t ig_engine_kv_bytes_per_token(const ig_engine *e);

#endif
