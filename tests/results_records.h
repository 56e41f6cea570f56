/* Synthetic results records (the shape `igen run` writes) shared by test_results and test_plot. */
#ifndef IG_TEST_RESULTS_RECORDS_H
#define IG_TEST_RESULTS_RECORDS_H

#include <json-c/json.h>

/* A record of experiment "unit": point, key, status, config.policy.name, config.workload.batch
 * and prompt_len (gen_len 32), metrics throughput_tok_s = tp, ppl and h2d_bytes. New reference.
 */
json_object *ig_test_make_record(int point, const char *key, const char *status, const char *policy,
                                 int batch, int prompt_len, double tp);

#endif
