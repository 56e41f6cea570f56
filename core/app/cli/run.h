/* igen run: one experiment point (run_point.c). */
#ifndef IG_CLI_RUN_H
#define IG_CLI_RUN_H

#include <json-c/json.h>

#include "core/app/exp/exp.h"
#include "core/app/exp/results.h"
#include "core/base/status.h"

/* Runs point pt (measured with the engine, or modeled with the cost model) and adds its metrics
 * to `metrics`; *link_on says whether the link model throttled copies. On error the metrics may
 * be partial. Keeps the last model and text tokens loaded for the next point. */
ig_status ig_run_point(const ig_exp_point *pt, json_object *metrics, int *link_on, ig_error *err);
/* Runs the points idx[0 .. n) as one group (points that differ only in their policy), with
 * igen run's protocol: one warm-up run, measure.repeat timed rounds interleaved over the group,
 * the summary of the repeats, the baseline speedups, then the perplexity of each point; recs[i]
 * receives point idx[i]'s record (new reference). Progress (pg may be NULL) names member i as
 * point pg_idx[i] of pg. See run_group.c. */
void ig_run_group(const ig_exp *x, const int *idx, int n, json_object **recs, ig_progress *pg,
                  const int *pg_idx);
/* The two halves of ig_run_point: the timed measurement (throughput, bytes, recall; or the
 * modeled prediction), which igen run repeats, and the policy-active perplexity, which is
 * deterministic and runs once. */
ig_status ig_run_point_timed(const ig_exp_point *pt, json_object *metrics, int *link_on,
                             ig_error *err);
ig_status ig_run_point_ppl(const ig_exp_point *pt, json_object *metrics, ig_error *err);
/* measure.prefill: once. A measured point's engine, its prompts prefilled once (timed: the
 * prefill_s of every measurement) and warmup_steps untimed decode steps run, kept for `repeats`
 * measurements of gen_len decode steps each, every one continuing the same sequences: measurement
 * r decodes the steps [warmup_steps + r * gen_len, + gen_len) after the prompt (the record's
 * decode_context). The point's pt must outlive the session. */
typedef struct ig_run_session ig_run_session;
/* The untimed decode steps igen run's groups run after a once-prefilled point's prompt (with
 * measure.warmup on), before its first measurement; its modeled twin predicts the same steps. */
#define IG_RUN_WARMUP_STEPS 2
ig_status ig_run_session_open(const ig_exp_point *pt, int repeats, int warmup_steps,
                              ig_run_session **out, int *link_on, ig_error *err);
/* The next measurement's metrics (the same names as ig_run_point_timed's). */
ig_status ig_run_session_decode(ig_run_session *s, json_object *metrics, ig_error *err);
void ig_run_session_close(ig_run_session *s);
/* The repeat the next timed measurement is (-1: the warm-up); for IGEN_RUN_INJECT_DELAY. */
void ig_run_set_repeat(int r);
/* Where skew=auto keeps the skew files it calibrates (OUTPUT/skew/); "results" by default. */
void ig_run_set_output_dir(const char *dir);
/* hardware: this: one sample of the point's model's decode matmul rates (measured points of a
 * shape only; igen run calls it after every timed round of a group); later modeled points of the
 * same shape are priced at the samples' median (their records' matmul_samples). */
void ig_run_sample_matmuls(const ig_exp_point *pt);
/* Frees what ig_run_point kept loaded. */
void ig_run_cache_free(void);

#endif
