/* The igen command-line tool: shared option handling for its subcommands. */
#ifndef IG_CLI_H
#define IG_CLI_H

#include <getopt.h>

#include <json-c/json.h>

#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/base/status.h"
#include "kernels/backend.h"
#include "offload/fetchprof.h"
#include "offload/link.h"
#include "offload/plan.h"
#include "offload/wstream.h"
#include "policies/policy.h"

/* Exit status for any error: bad input, unusable file, does not fit. */
#define IG_EXIT_ERROR 2

typedef struct ig_cli_common {
    const char *model_path; /* NULL: the default model */
    int threads;
    ig_dtype dtype;
    int keep_stored; /* --dtype stored */
    int verbose;
    int quiet;
    const char *backend; /* auto, cpu, cuda */
    int act8;            /* --act-quant q8 (ig_cpu_set_act8) */
    int weights_mem;     /* --weights-mem: an ig_weights_mem */
} ig_cli_common;

/* Options every model command accepts; `longopts` entries with these ids are handled by
 * ig_cli_common_opt(). */
enum {
    IG_OPT_MODEL = 1000,
    IG_OPT_THREADS,
    IG_OPT_DTYPE,
    IG_OPT_VERBOSE,
    IG_OPT_QUIET,
    IG_OPT_BACKEND,
    IG_OPT_CUDA_GEMM,
    IG_OPT_ACT_QUANT,
    IG_OPT_WEIGHTS_MEM,
    IG_OPT_FIRST_FREE = 1100,
};
#define IG_CLI_COMMON_LONGOPTS                                                                     \
    {"model", required_argument, NULL, IG_OPT_MODEL},                                              \
        {"threads", required_argument, NULL, IG_OPT_THREADS},                                      \
        {"dtype", required_argument, NULL, IG_OPT_DTYPE},                                          \
        {"verbose", no_argument, NULL, IG_OPT_VERBOSE},                                            \
        {"quiet", no_argument, NULL, IG_OPT_QUIET},                                                \
        {"backend", required_argument, NULL, IG_OPT_BACKEND},                                      \
        {"cuda-gemm", required_argument, NULL, IG_OPT_CUDA_GEMM},                                  \
        {"act-quant", required_argument, NULL, IG_OPT_ACT_QUANT}, {                                \
        "weights-mem", required_argument, NULL, IG_OPT_WEIGHTS_MEM                                 \
    }

#define IG_CLI_COMMON_HELP                                                                         \
    "  --model PATH      GGUF file, Hugging Face directory, or dummy:SHAPE (random weights of a\n" \
    "                    configs/models shape, no tokenizer) (default: the installed "             \
    "SmolLM2-135M)\n"                                                                              \
    "  --threads N       compute threads (default: all cores)\n"                                   \
    "  --dtype T         weight storage: f32 (default), f16, bf16; q4g64 or q8g64 (FlexGen's\n"    \
    "                    group-wise 4/8-bit weights, made at load), q4_0, q4_1, q8_0 (ggml's);\n"  \
    "                    stored: each matrix as the file stores it (GGUF Q4_0/Q4_1/Q8_0 kept,\n"   \
    "                    other quantizations widened to f32)\n"                                    \
    "  --act-quant A     none (default) or q8: q4_0, q4_1 and q8_0 weights multiply int8\n"        \
    "                    activations (per block of 32) in decode steps, llama.cpp's arithmetic:\n" \
    "                    faster, not the exact result (CPU backend only)\n"                        \
    "  --weights-mem M   matrices that need no conversion at load: copy (into huge-page memory;\n" \
    "                    faster decode), map (read in place from the file: no load time, no\n"     \
    "                    memory beyond the page cache) or auto (default: copy when the model's\n"  \
    "                    files take at most half of the available memory)\n"                       \
    "  --backend B       auto (default, or $IGEN_BACKEND), cpu or cuda; without a usable GPU\n"    \
    "                    igen says so and uses the CPU\n"                                          \
    "  --cuda-gemm T     CUDA weights and GEMMs in f16 (default; bf16 models: bf16) or\n"          \
    "                    f32 (slower; matches the CPU backend to f32 rounding)\n"                  \
    "  --verbose         log loading and timing details to stderr\n"                               \
    "  --quiet           no progress lines on stderr\n"                                            \
    "  -h, --help        this help\n"

/* KV-policy options of commands that run one: --policy, --set, --kv-dtype, --kv-access, --recall.
 */
#define IG_CLI_POLICY_MAX_SETS 64
typedef struct ig_cli_policy {
    const char *name; /* NULL: no policy */
    const char *sets[IG_CLI_POLICY_MAX_SETS];
    int n_sets;
    ig_dtype kv_dtype;
    ig_kv_access kv_access;
    int recall;
    const ig_policy_ops *ops; /* resolved by ig_cli_policy_resolve */
    ig_policy_params *params; /* owned */
} ig_cli_policy;
enum {
    IG_OPT_POLICY = 1050,
    IG_OPT_SET,
    IG_OPT_KV_DTYPE,
    IG_OPT_KV_ACCESS,
    IG_OPT_RECALL,
};
#define IG_CLI_POLICY_LONGOPTS                                                                     \
    {"policy", required_argument, NULL, IG_OPT_POLICY},                                            \
        {"set", required_argument, NULL, IG_OPT_SET},                                              \
        {"kv-dtype", required_argument, NULL, IG_OPT_KV_DTYPE},                                    \
        {"kv-access", required_argument, NULL, IG_OPT_KV_ACCESS}, {                                \
        "recall", no_argument, NULL, IG_OPT_RECALL                                                 \
    }
#define IG_CLI_POLICY_HELP                                                                         \
    "  --policy NAME     KV-cache policy (see 'igen policies'); default: none (dense f32 cache)\n" \
    "  --set KEY=VALUE   a policy parameter (repeatable)\n"                                        \
    "  --kv-dtype T      KV rows in the home tier: f32 (default) or f16\n"                         \
    "  --kv-access A     auto (default), inplace (attend where the rows live), copy (gather\n"     \
    "                    into a working set first, as a GPU run does) or cpu (decode attention\n"  \
    "                    on the CPU over the host-resident cache: FlexGen's cpu_cache_compute)\n"  \
    "  --recall          measure the recall of each selection against the exact top-k\n"

void ig_cli_policy_init(ig_cli_policy *p);
/* Handles one policy option: 1 if it was one, 0 if not, -1 on a bad value. */
int ig_cli_policy_opt(ig_cli_policy *p, int opt, const char *arg);
/* Looks the policy up and parses its settings; prints the error and returns -1 on failure. */
int ig_cli_policy_resolve(const char *cmd, ig_cli_policy *p);
void ig_cli_policy_free(ig_cli_policy *p);
/* Fills the engine options' policy fields. */
void ig_cli_policy_apply(const ig_cli_policy *p, ig_engine_opts *eo);
/* Adds "policy", "policy_params", "kv_*" fields (stats of the run) to a JSON object. */
void ig_cli_policy_json(const ig_cli_policy *p, const ig_engine *e, json_object *o);
/* The run's fetch profile (fraction of the KV rows read per decode step by context length). */
void ig_cli_fetch_profile_of(const ig_cli_policy *p, const ig_engine *e, ig_fetch_profile *out);
/* The budget accounting alone (read fraction in the selected layers, budget in words, metadata). */
void ig_cli_policy_budget_json(const ig_engine *e, json_object *o);
/* A KV policy's terms in the cost model (KV format, kept and fetched fractions, partial key
 * ratio) from its parameters ("k=v" settings; defaults for the rest): int4 stores 4-bit KV, h2o
 * keeps and reads heavy_ratio + recent_ratio, streaming window_ratio, quest reads budget_ratio,
 * infinigen reads max_fetch with partial_ratio columns and a pool of pool_capacity; full and the
 * rest change nothing. Used by `igen plan --policy` and modeled experiment points. */
ig_status ig_cli_policy_cost(const char *name, const char *const *settings, int n, ig_plan_opts *o,
                             ig_error *err);
/* The planner's KV row format from a policy's cost terms (ig_policy_get_cost_terms): a quantized
 * format is planned as the nearest named one (int4 up to 4 bits, int8 above) with its exact bytes
 * and a name in kv_head_row_bytes / kv_format where they differ; no codec: unchanged. */
void ig_cli_kv_format_apply(const ig_policy_cost_terms *t, ig_plan_opts *o);
/* One human line with the policy's KV traffic. */
void ig_cli_policy_print(const ig_cli_policy *p, const ig_engine *e, FILE *f);

/* Offloading options of commands that run a model: --percent (FlexGen's six numbers), --numa,
 * --disk-dir, --link, --no-overlap, --device-mem. Without --percent nothing is offloaded. */
struct ig_topo;
struct ig_plan;
struct ig_disk;
struct ig_wstream;
typedef struct ig_cli_offload {
    const char *percent, *numa, *disk_dir, *link_spec;
    int no_overlap;
    double device_gib;
    int gpu_batch; /* sequences per GPU batch (0: the whole block) */
    /* set up by ig_cli_offload_setup */
    int active;
    int kv_numa; /* NUMA node of the host KV home (-1 interleaved / none) */
    ig_link_model link;
    struct ig_topo *topo;
    struct ig_plan *plan;
    struct ig_disk *disk;
    struct ig_wstream *ws;
} ig_cli_offload;
enum {
    IG_OPT_PERCENT = 1070,
    IG_OPT_NUMA,
    IG_OPT_DISK_DIR,
    IG_OPT_LINK,
    IG_OPT_NO_OVERLAP,
    IG_OPT_DEVICE_MEM,
    IG_OPT_GPU_BATCH,
};
#define IG_CLI_OFFLOAD_LONGOPTS                                                                    \
    {"percent", required_argument, NULL, IG_OPT_PERCENT},                                          \
        {"numa", required_argument, NULL, IG_OPT_NUMA},                                            \
        {"disk-dir", required_argument, NULL, IG_OPT_DISK_DIR},                                    \
        {"link", required_argument, NULL, IG_OPT_LINK},                                            \
        {"no-overlap", no_argument, NULL, IG_OPT_NO_OVERLAP},                                      \
        {"device-mem", required_argument, NULL, IG_OPT_DEVICE_MEM}, {                              \
        "gpu-batch", required_argument, NULL, IG_OPT_GPU_BATCH                                     \
    }
#define IG_CLI_OFFLOAD_HELP                                                                        \
    "  --percent W_GPU,W_CPU,C_GPU,C_CPU,A_GPU,A_CPU\n"                                            \
    "                    FlexGen placement: percent of weights / KV cache / activations on the\n"  \
    "                    device and in host memory, the rest on disk (see 'igen plan')\n"          \
    "  --numa MODE       host memory: local (default), interleave, or a node list N,M\n"           \
    "  --disk-dir DIR    the disk tier's directory (a fresh subdirectory, removed at exit)\n"      \
    "  --link SPEC       link model for device<->host copies, e.g. h2d=12,d2h=12,lat=10 (GB/s,\n"  \
    "                    us); default off (memory speed)\n"                                        \
    "  --no-overlap      load each layer's weights when needed instead of one layer ahead\n"       \
    "  --device-mem GIB  capacity of the device tier (default: this machine's memory)\n"           \
    "  --gpu-batch N     FlexGen's zig-zag: run each layer over GPU batches of N sequences\n"      \
    "                    (must divide the number of sequences; default: all in one)\n"

int ig_cli_parse_percent(const char *cmd, const char *s, ig_plan_percent *p);
int ig_cli_parse_numa(const char *cmd, const char *s, ig_plan_opts *o);
void ig_cli_offload_init(ig_cli_offload *o);
/* Handles one offloading option: 1 if it was one, 0 if not, -1 on a bad value. */
int ig_cli_offload_opt(ig_cli_offload *o, int opt, const char *arg);
/* Plans the placement for n_seqs sequences of prompt_len + gen_len tokens on this machine and sets
 * up the tiers and the weight stream; fills eo->weights and eo->kv_device_slots. Prints the error
 * and returns -1 on failure (nothing left allocated); 0 also when no --percent was given. */
int ig_cli_offload_setup(const char *cmd, ig_cli_offload *o, const ig_model *m, int n_seqs,
                         int prompt_len, int gen_len, const ig_cli_policy *pol, ig_engine_opts *eo);
/* The same, returning the error instead of printing it (errors of --percent/--numa parsing are
 * printed by the parser and leave err->msg empty). */
ig_status ig_cli_offload_setup_err(const char *cmd, ig_cli_offload *o, const ig_model *m,
                                   int n_seqs, int prompt_len, int gen_len,
                                   const ig_cli_policy *pol, ig_engine_opts *eo, ig_error *err);
void ig_cli_offload_free(ig_cli_offload *o);
/* Adds "offload", "placement_percent", "link_model", "weight_*" fields to a JSON object. */
void ig_cli_offload_json(const ig_cli_offload *o, json_object *j);
void ig_cli_offload_print(const ig_cli_offload *o, FILE *f);

/* bench-decode's measurement on an engine with B slots and room for P + warmup_steps + G tokens:
 * an untimed warm-up forward (the first prompt's first 16 tokens, then its slot is reset), each of
 * the B prompts ([B][P] tokens) prefilled in its own call, then warmup_steps untimed and G timed
 * greedy decode steps of the whole batch. The stats cover the timed steps (ws may be NULL).
 * progress: a command name to print prefill progress on stderr under, or NULL. */
typedef struct ig_decode_measure {
    double prefill_s, decode_s;
    ig_engine_stats es;
    ig_kv_stats kv;
    ig_wstream_stats ws;
} ig_decode_measure;
ig_status ig_cli_measure_decode(ig_engine *e, struct ig_wstream *ws, const int32_t *prompt, int B,
                                int P, int G, int warmup_steps, const char *progress,
                                ig_decode_measure *out, ig_error *err);
/* Its two halves. Prefill: the untimed warm-up forward, then the B prompts, timed into
 * *prefill_s; next[B] receives each sequence's first generated token. Steps: warmup_steps untimed
 * and G timed decode steps of the whole batch from next[] (updated to the tokens after them), with
 * the stats and out->decode_s of the timed steps (out->prefill_s is left 0). Steps may be called
 * again on the same engine to decode further, while the engine has room. */
ig_status ig_cli_measure_prefill(ig_engine *e, const int32_t *prompt, int B, int P,
                                 const char *progress, int32_t *next, double *prefill_s,
                                 ig_error *err);
ig_status ig_cli_measure_steps(ig_engine *e, struct ig_wstream *ws, int B, int warmup_steps, int G,
                               int32_t *next, ig_decode_measure *out, ig_error *err);

/* igen profile-hw's probe of one model's decode matmuls at its shape (--matmul-shape D,Q,KV,FF,
 * NF,V,L,M): GFLOP/s of a layer's chain and of the logits. 0, or -1 when it failed. */
int ig_cli_measure_matmul_shape(int md, int mq, int mkv, int mff, int mnf, int mv, int ml, int mm,
                                int quick, double *layer, double *logits, int *sets);
void ig_cli_common_init(ig_cli_common *c);
/* Handles one of the common options; returns 1 if it was one, 0 if not, -1 on a bad value. */
int ig_cli_common_opt(ig_cli_common *c, int opt, const char *arg);
/* One option of a model command through the common, policy and offload handlers in turn (pol and
 * off may be NULL for commands without them): 1 handled, 0 none of theirs, -1 a bad value
 * (message printed). */
int ig_cli_model_opt(ig_cli_common *c, ig_cli_policy *pol, ig_cli_offload *off, int opt,
                     const char *arg);
/* After getopt: 0 if no operands are left, else prints "igen CMD: unexpected argument" and -1. */
int ig_cli_no_operands(const char *cmd, int argc, char **argv);
/* Loads the model named by the options (or the default one); prints the error and returns NULL. */
ig_model *ig_cli_load_model(const ig_cli_common *c);
/* The backend for a name (auto, cpu, cuda) through ig_backend_select, which prints its one-line
 * fallback the first time a name falls back; remembered as the one ig_cli_backend returns.
 * ig_cli_load_model calls it with the --backend value. */
ig_backend_kind ig_cli_select_backend(const char *name);
/* The backend chosen last (CPU before any choice): what commands put in ig_engine_opts.backend. */
ig_backend_kind ig_cli_backend(void);
/* --cuda-gemm f32 was given: what commands put in ig_engine_opts.cuda_f32_weights. */
int ig_cli_cuda_f32(void);
/* Prints "igen CMD: message" for an error. */
void ig_cli_error(const char *cmd, const ig_error *err);
/* Parses an integer/float option value strictly; prints an error naming the option on failure. */
int ig_cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int ig_cli_parse_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
                       double *out);
/* Whether stderr is a terminal (progress lines are redrawn in place there). */
int ig_cli_stderr_is_tty(void);

int ig_cmd_generate(int argc, char **argv);
int ig_cmd_ppl(int argc, char **argv);
int ig_cmd_info(int argc, char **argv);
int ig_cmd_policies(int argc, char **argv);
int ig_cmd_bench_decode(int argc, char **argv);
int ig_cmd_calibrate(int argc, char **argv);
int ig_cmd_topo(int argc, char **argv);
int ig_cmd_plan(int argc, char **argv);
int ig_cmd_profile_hw(int argc, char **argv);
int ig_cmd_run(int argc, char **argv);
int ig_cmd_plot(int argc, char **argv);
int ig_cmd_eval(int argc, char **argv);

#endif
