/* The cost model: per layer, for prefill and for one decode step, the time of each activity the
 * schedule overlaps (device<-host, device->host, host<-disk, host->disk, compute), from a plan's
 * byte and FLOP counts and a hardware profile; the step is the max of them with overlap and their
 * sum without; the workload's time is FlexGen's objective. Plain functions over numbers, so tests
 * can check them by hand; also the policy search (ig_plan_search). Equations: docs/planner.md. */
#ifndef IG_COST_H
#define IG_COST_H

#include "offload/hwprof.h"
#include "offload/plan.h"

/* Hardware rates in SI units: bytes/s, flop/s, seconds. */
typedef struct ig_cost_hw {
    double gemm_flops;        /* device matmul, prefill shapes */
    double gemm_flops_decode; /* device matmul, decode shapes */
    double dev_bw;            /* device memory bandwidth */
    double host_bw;           /* host memory bandwidth (CPU attention) */
    double h2d_bw, d2h_bw;
    double h2d_lat, d2h_lat;
    double disk_read_bw, disk_write_bw; /* 0: no disk */
    /* measured rates of the device's decode kernels (hwprof attn_gbps, attn_int4_gbps,
     * select_gbps); 0: not measured, the bytes go at dev_bw */
    double attn_bw;        /* attention over f32 rows, f32-equivalent KV bytes/s */
    double attn_enc_bw;    /* attention over group-wise codes decoded in the kernel, same unit */
    double attn_sparse_bw; /* attention over a scattered selection of f32 rows, same unit */
    double attn_dense_bw;  /* every f32 row of a contiguous table, the dense kernel; 0: attn_bw */
    double attn_probs_bw;  /* f32 rows with the probabilities a scoring policy keeps; 0: attn_bw */
    double select_bw;      /* a speculating policy's selection, partial key bytes/s */
    /* measured rates of the model's own decode matmuls (hwprof gemm_tflops_layer, _logits, at
     * its matmul_shape); 0: not measured, gemm_flops_decode */
    double gemm_flops_layer;  /* a layer's chain of matmuls */
    double gemm_flops_logits; /* the lm_head */
} ig_cost_hw;

/* The rates of a profile. The kernel rates are taken only when the profile's kernel_shape is the
 * attention shape of `model` ("n_head,n_kv_head,head_dim"; model NULL: taken as they are); returns
 * 1 when they were taken, 0 when the profile has none or they were measured at another shape. */
int ig_cost_hw_from_profile_for(const ig_hwprof *p, const ig_model_config *model, ig_cost_hw *hw);
/* ig_cost_hw_from_profile_for(p, NULL, hw). */
void ig_cost_hw_from_profile(const ig_hwprof *p, ig_cost_hw *hw);
/* In words, for records: which kernel rates the cost model used (`taken`: the return of
 * ig_cost_hw_from_profile_for for the same profile and model). */
void ig_cost_kernel_rates_desc(const ig_hwprof *p, const ig_model_config *model, int taken,
                               char *buf, size_t n);
/* The kernel_shape string of a model's attention: "n_head,n_kv_head,head_dim". */
void ig_cost_kernel_shape(const ig_model_config *model, char *buf, size_t n);
/* The matmul_shape string of a model's decode matmuls at `rows` rows (the GPU batch):
 * "d_model,q_dim,kv_dim,d_ffn,ffn_mats,vocab,n_layer,rows" (ffn_mats 3 for gated MLPs, 2 for
 * OPT). */
void ig_cost_matmul_shape(const ig_model_config *model, int rows, char *buf, size_t n);
/* Takes the profile's matmul rates into hw when its matmul_shape is that of `model` at `rows` rows
 * and the weights are f32 (what profile-hw measures); returns 1 when taken, else 0 (hw's
 * gemm_flops_layer / _logits left 0). `desc` (may be NULL) says in words what was used. */
int ig_cost_hw_matmul_for(const ig_hwprof *p, const ig_model_config *model, int rows,
                          int f32_weights, ig_cost_hw *hw, char *desc, size_t n);

typedef enum ig_cost_activity {
    IG_COST_H2D = 0,   /* device <- host */
    IG_COST_D2H,       /* device -> host */
    IG_COST_DISK_READ, /* host <- disk */
    IG_COST_DISK_WRITE,
    IG_COST_COMPUTE,
    IG_COST_ACTIVITY_COUNT,
} ig_cost_activity;
const char *ig_cost_activity_name(ig_cost_activity a);

/* What one layer moves and computes in one step for the whole block (all GPU batches). */
typedef struct ig_cost_traffic {
    double h2d_bytes, d2h_bytes, disk_read_bytes, disk_write_bytes;
    double gemm_flops;      /* matmuls on the device */
    double gemm_bytes;      /* weight bytes those matmuls read from device memory (roofline) */
    double attn_flops;      /* prefill attention (matmul-like) on the device */
    double attn_dev_bytes;  /* decode attention: KV bytes the device reads */
    double attn_dev_f32;    /* the same rows as f32 (2 x n_kv_head x head_dim x 4 per row) */
    int attn_enc;           /* those rows are group-wise codes decoded by the kernel */
    int attn_sparse;        /* a selection scattered among the kept rows (fetch < keep) */
    int attn_dense;         /* f32 rows, all kept, all read, in place: the dense kernel */
    int attn_probs;         /* the policy scores rows by their attention (plan opts attn_probs) */
    double attn_host_bytes; /* decode attention on the CPU (cpu_cache_compute) */
    double spec_dev_bytes;  /* speculation: partial key cache bytes read on the device */
    double spec_flops;      /* speculation: partial query matmul */
    int outer;              /* the outer tensors (lm_head), not a layer */
} ig_cost_traffic;

typedef struct ig_cost_times {
    double t[IG_COST_ACTIVITY_COUNT];
    double step; /* max (overlap) or sum (no overlap) of t */
} ig_cost_times;

/* bytes / bw + latency; 0 when nothing moves. */
double ig_cost_transfer_s(double bytes, double bw, double latency_s);
/* The activity times of one step and their combination. decode selects the decode matmul rate. */
void ig_cost_times_of(const ig_cost_traffic *tr, int decode, const ig_cost_hw *hw, int overlap,
                      ig_cost_times *out);
/* Traffic of layer `layer` (or, with layer == -1, the outer tensors: lm_head matmul and their
 * transfers) at prefill (decode = 0) or at a decode step attending over ctx tokens. */
void ig_cost_layer_traffic(const ig_plan *p, int layer, int decode, int ctx, ig_cost_traffic *out);

typedef struct ig_cost_result {
    double prefill_s;         /* all layers + outer, the whole block's prompts */
    double decode_s;          /* all gen_len - 1 decode steps */
    double total_s;           /* prefill_s + decode_s (FlexGen's objective) */
    double decode_step_s;     /* decode_s / (gen_len - 1): time per generated token of the block */
    double throughput;        /* block x gen_len / total_s, tokens/s */
    double decode_throughput; /* block x (gen_len - 1) / decode_s */
    /* the last layer (a policy's dense layers come first: the last is a typical one) */
    ig_cost_times prefill_layer;
    ig_cost_times decode_layer; /* at the last decode step's context */
    ig_cost_traffic prefill_traffic, decode_traffic;
    /* the last decode step's transfers summed over all layers (the outer tensors not included) */
    double decode_step_h2d_bytes, decode_step_d2h_bytes, decode_step_disk_read_bytes;
} ig_cost_result;

/* Predicts the workload's time for a plan. Fails (IG_ERR_INVALID_ARG) only when the plan needs a
 * rate the profile lacks (e.g. disk traffic without a disk). */
ig_status ig_cost_estimate(const ig_plan *p, const ig_cost_hw *hw, ig_cost_result *out,
                           ig_error *err);

/* ---- search ---- */

typedef struct ig_plan_search_opts {
    int max_gpu_batch;       /* powers of two 1..max (default 64) */
    int max_num_gpu_batches; /* powers of two 1..max (default 16) */
    int fixed_gpu_batch;     /* > 0: only this gpu batch size */
    int fixed_num_gpu_batches;
    double step_percent; /* grid step for weight and KV percentages (default 10; must divide 100) */
    int top_k;           /* candidates returned (<= 16) */
} ig_plan_search_opts;
void ig_plan_search_opts_init(ig_plan_search_opts *so);

typedef struct ig_plan_candidate {
    ig_workload wl;
    ig_plan_percent pct;
    ig_cost_result cost;
} ig_plan_candidate;

#define IG_PLAN_SEARCH_TOP_MAX 16

/* Enumerates gpu batch sizes x numbers of gpu batches x placements on the grid (weights and KV:
 * every (gpu, cpu) pair of multiples of the step with gpu + cpu <= 100, rest on disk; activations
 * all on the device or all on the host), keeps the plans that fit and returns the fastest (highest
 * throughput) first in top[0..*n_top). Deterministic; ties keep the earlier plan in enumeration
 * order (docs/planner.md). base supplies everything else (model, lengths, KV policy, NUMA). */
ig_status ig_plan_search(const ig_plan_opts *base, const ig_machine *m, const ig_cost_hw *hw,
                         const ig_plan_search_opts *so, ig_plan_candidate *top, int *n_top,
                         long *n_feasible, long *n_tried, ig_error *err);

/* The fraction of the context one decode step reads at context length ctx: the plan options'
 * measured fetch profile where they have one (linear between its points, its end values beyond
 * them), else their fetch_fraction (the policy's cap); at most kv_keep_fraction. */
double ig_cost_fetch_fraction(const ig_plan_opts *o, double ctx);
/* The fraction layer `layer` reads: every row in a dense layer (a dense layer keeps every token:
 * kv_keep_fraction, the whole cache's share, leaves (keep L - D) / (L - D) to each other layer); in
 * the others the cap, or what a measured profile's all-layer fraction leaves once the dense
 * layers' reads are taken out: (f L - D) / (L - D), never below 0 nor above what they keep. */
double ig_cost_layer_fetch_fraction(const ig_plan_opts *o, int layer, double ctx);

#endif
