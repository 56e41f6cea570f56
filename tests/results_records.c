/* Synthetic results records for the results-store and plot tests. */
#include <stdio.h>
#include <string.h>

#include "tests/results_records.h"

/* A record in the shape the runner writes. */
json_object *ig_test_make_record(int point, const char *key, const char *status, const char *policy,
                                 int batch, int prompt_len, double tp) {
    json_object *r = json_object_new_object();
    json_object_object_add(r, "experiment", json_object_new_string("unit"));
    json_object_object_add(r, "point", json_object_new_int(point));
    json_object_object_add(r, "n_points", json_object_new_int(12));
    json_object_object_add(r, "key", json_object_new_string(key));
    char label[128];
    snprintf(label, sizeof label, "policy=%s workload.batch=%d workload.prompt_len=%d", policy,
             batch, prompt_len);
    json_object_object_add(r, "label", json_object_new_string(label));
    json_object *cfg = json_object_new_object();
    json_object *wl = json_object_new_object();
    json_object_object_add(wl, "batch", json_object_new_int(batch));
    json_object_object_add(wl, "prompt_len", json_object_new_int(prompt_len));
    json_object_object_add(wl, "gen_len", json_object_new_int(32));
    json_object_object_add(cfg, "workload", wl);
    json_object *pol = json_object_new_object();
    json_object_object_add(pol, "name", json_object_new_string(policy));
    json_object_object_add(pol, "params", json_object_new_object());
    json_object_object_add(cfg, "policy", pol);
    json_object *ms = json_object_new_array();
    json_object_array_add(ms, json_object_new_string("throughput"));
    json_object_array_add(ms, json_object_new_string("ppl"));
    json_object_object_add(cfg, "metrics", ms);
    json_object_object_add(r, "config", cfg);
    json_object_object_add(r, "mode", json_object_new_string("measured"));
    json_object_object_add(r, "status", json_object_new_string(status));
    json_object_object_add(r, "error",
                           strcmp(status, "ok") ? json_object_new_string("engine failed") : NULL);
    json_object_object_add(r, "elapsed_s", json_object_new_double(1.5));
    json_object_object_add(r, "link_model", json_object_new_boolean(0));
    json_object *m = json_object_new_object();
    json_object_object_add(m, "throughput_tok_s", json_object_new_double(tp));
    json_object_object_add(m, "ppl", json_object_new_double(22.1));
    json_object_object_add(m, "h2d_bytes", json_object_new_int64(123456789));
    json_object_object_add(r, "metrics", m);
    return r;
}
