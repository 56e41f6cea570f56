/* igen run: one experiment point (run_point.c). */
#ifndef IG_CLI_RUN_H
#define IG_CLI_RUN_H

#include <json-c/json.h>

#include "core/exp/exp.h"
#include "core/status.h"

/* Runs point pt (measured with the engine, or modeled with the cost model) and adds its metrics
 * to `metrics`; *link_on says whether the link model throttled copies. On error the metrics may
 * be partial. Keeps the last model and text tokens loaded for the next point. */
ig_status ig_run_point(const ig_exp_point *pt, json_object *metrics, int *link_on, ig_error *err);
/* Where skew=auto keeps the skew files it calibrates (OUTPUT/skew/); "results" by default. */
void ig_run_set_output_dir(const char *dir);
/* Frees what ig_run_point kept loaded. */
void ig_run_cache_free(void);

#endif
