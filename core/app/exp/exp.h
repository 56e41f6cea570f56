/* Experiment files (docs/config.md): one YAML file describes a set of runs (the model, the machine,
 * the placement, the workload, the KV policies and the metrics), any scalar of which may be a list
 * (a sweep). ig_exp_load parses the file with libyaml, applies `--set key.path=VALUE` overrides,
 * resolves the referenced model-shape and hardware files, validates everything and expands the
 * sweeps into points, before anything runs. Every error is one line
 * "FILE:LINE:COL: key.path: what is wrong" (1-based), or "--set KEY: ..." for an override.
 *
 * Each point has a resolved config: a json-c object with every key of the schema (defaults filled,
 * absent optional keys null), no lists left except `metrics`, and `policy` (one policy with the
 * params given in the file) in place of `policies`. Its key is the FNV-1a 64 hash of the config's
 * canonical JSON text (keys sorted at every level, no whitespace). */
#ifndef IG_EXP_H
#define IG_EXP_H

#include <stdio.h>

#include <json-c/json.h>

#include "core/base/status.h"

typedef struct ig_exp ig_exp;

typedef enum ig_exp_mode {
    IG_EXP_MEASURED = 0, /* run the engine on this machine */
    IG_EXP_MODELED = 1,  /* predict with the cost model (needs model.shape and hardware) */
} ig_exp_mode;

/* Most points an experiment may expand to. */
#define IG_EXP_MAX_POINTS 100000

/* One point, typed. Every string is borrowed from the ig_exp (valid until ig_exp_free); optional
 * ones are NULL when absent. Paths are resolved: a relative path is found relative to the current
 * directory, then the experiment file's directory, then $IGEN_HOME, then the source tree. */
typedef struct ig_exp_point {
    int index;         /* 0-based point index */
    const char *key;   /* 16 lowercase hex digits (see ig_exp_point_key) */
    const char *label; /* the swept axes' values (see ig_exp_point_label) */
    ig_exp_mode mode;
    const char *model_path;    /* "default" (the installed default model) or a file / directory */
    const char *shape_path;    /* configs/models/NAME.yaml resolved, or NULL */
    const char *dtype;         /* model.dtype: "f32" | "f16" | ... | "stored" */
    int act8;                  /* model.act_quant: q8 (ig_cpu_set_act8) */
    const char *weights_mem;   /* model.weights_mem: auto (NULL), map, copy */
    const char *hardware_path; /* configs/hardware/NAME.yaml resolved, or NULL */
    int threads;               /* 0 = all cores */
    const char *backend;       /* "cpu" (default) | "cuda" | "auto" (no GPU: the CPU, one line) */
    const char *kv_access;     /* placement.kv_access: "auto" | "inplace" | "copy" | "cpu" */
    struct {
        double gpu, cpu; /* percent; disk = 100 - gpu - cpu */
    } weights, kv, activations;
    int gpu_batch_size; /* 0 = the whole batch in one GPU batch */
    int num_gpu_batches;
    const char *numa;     /* "local" | "interleave" | a node list such as "0,1" */
    const char *disk_dir; /* or NULL */
    int overlap;          /* 0 / 1 */
    int link;             /* 1: link model on (the three numbers below), 0: off */
    double link_h2d_gbps, link_d2h_gbps, link_latency_us;
    int batch, prompt_len, gen_len;
    const char *text_path; /* workload.text resolved, or NULL */
    int ppl_ctx, ppl_windows, ppl_prefill;
    const char *policy;          /* a registered policy name ("full" is the dense baseline) */
    const char *const *settings; /* "key=value" for ig_policy_params_parse */
    int n_settings;
    int metric_throughput, metric_ppl, metric_recall, metric_bytes; /* 0 / 1 */
    /* measure: timed repetitions of a measured point (after an untimed warm-up), the relative
     * spread above which it is marked noisy, and the policy speedups are computed against */
    int repeat, warmup;
    double noise;
    const char *baseline; /* or NULL */
    /* measure.prefill: once = each point of a group prefilled once, its repeats decoding on from
     * there (ig_run_session); 0 = every repeat prefills afresh */
    int prefill_once;
} ig_exp_point;

/* Loads, overrides (sets[0 .. n_sets-1], each "key.path=VALUE", VALUE a YAML flow scalar or
 * list), validates and expands an experiment file. On error *out is NULL and err says where. */
ig_status ig_exp_load(const char *path, const char *const *sets, int n_sets, ig_exp **out,
                      ig_error *err);
void ig_exp_free(ig_exp *e);

const char *ig_exp_name(const ig_exp *e);
/* The `output` key, or results/<name> (relative to the current directory). */
const char *ig_exp_output_dir(const ig_exp *e);
/* The path the experiment was loaded from. */
const char *ig_exp_path(const ig_exp *e);
int ig_exp_n_points(const ig_exp *e);

/* Swept axes in document order (the first varies slowest): every list-valued key, by its key path
 * ("workload.prompt_len"), and always the policies, named "policy". */
int ig_exp_n_axes(const ig_exp *e);
const char *ig_exp_axis_name(const ig_exp *e, int i);
int ig_exp_axis_len(const ig_exp *e, int i);

/* The resolved config of point i (borrowed; do not modify). */
json_object *ig_exp_point_config(const ig_exp *e, int i);
/* The point's typed settings; IG_ERR_INVALID_ARG if i is out of range. */
ig_status ig_exp_point_get(const ig_exp *e, int i, ig_exp_point *out);
/* "AXIS=VALUE ..." over the swept axes, e.g. "policy=h2o(heavy_ratio=0.2) workload.prompt_len=1024"
 * (borrowed). */
const char *ig_exp_point_label(const ig_exp *e, int i);
/* FNV-1a 64 of the canonical JSON of point i's config, as 16 lowercase hex digits. */
void ig_exp_point_key(const ig_exp *e, int i, char out[17]);

/* The canonical JSON text of a config (object keys sorted at every level, no whitespace, numbers as
 * json-c prints them; malloc'ed, NULL if out of memory) and its FNV-1a 64 key. */
char *ig_exp_canonical_json(json_object *config);
void ig_exp_config_key(json_object *config, char out[17]);

/* Lists the points: a header with the experiment's name and point count, then "INDEX  LABEL" per
 * point (for `igen run --dry-run`). */
void ig_exp_print_points(const ig_exp *e, FILE *f);
/* The same, with "[done] " before the points whose done[i] is set (done may be NULL). */
void ig_exp_print_points_marked(const ig_exp *e, FILE *f, const unsigned char *done);

#endif
