/* InfiniGen's calibration pass: the statistics its skewing needs, gathered by running the model.
 * It runs an engine, so it lives in the engine's layer; the rotations and the skew file are the
 * policy's (policies/infinigen_skew.h). */
#ifndef IG_CALIBRATE_H
#define IG_CALIBRATE_H

#include <stdint.h>

#include "core/model/model.h"
#include "core/base/status.h"
#include "policies/infinigen_skew.h"

typedef void (*ig_skew_progress_fn)(void *user, int64_t tokens_done, int64_t tokens_total);

/* Runs the model (dense attention, no KV policy) over ids[0..n) in chunks of `chunk` tokens,
 * accumulating per layer and KV head the Gram matrices of the queries and keys the attention sees
 * (Llama: after RoPE; OPT: projected, bias included, unscaled), and derives the rotations. */
ig_status ig_calibrate_skew(const ig_model *m, const int32_t *ids, int64_t n, int chunk,
                            int threads, ig_skew_progress_fn progress, void *user, ig_skew **out,
                            ig_error *err);

#endif
