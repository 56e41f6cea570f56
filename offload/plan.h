/* The placement planner: from a model's shape, a workload, FlexGen-style placement percentages, a
 * KV format/policy and a NUMA choice, decide where every weight tensor, KV sequence and activation
 * lives on a machine (ig_machine), and the peak bytes of every tier and NUMA node. A plan that does
 * not fit is rejected here, before anything is allocated. Pure computation: it never allocates
 * tier memory or touches the machine. Rules and granularity: docs/planner.md. */
#ifndef IG_PLAN_H
#define IG_PLAN_H

#include <stddef.h>

#include "core/model/model.h"
#include "core/base/status.h"
#include "offload/placement.h"

/* Element formats of planned bytes. INT4 is FlexGen's group-wise 4-bit format: groups of 64
 * values along a row (a shorter row is one group), two values per byte, an f16 scale and min per
 * group (igen's q4g64 weights and the int4 policy's rows); INT8 the same with one byte per value
 * (q8g64, int4 with bits=8). Q4_0, Q4_1 and Q8_0 are ggml's blocks of 32 (18, 20 and 34 bytes),
 * weights kept as a GGUF stores them. */
typedef enum ig_plan_dtype {
    IG_PLAN_F32 = 0,
    IG_PLAN_F16 = 1,
    IG_PLAN_BF16 = 2,
    IG_PLAN_INT4 = 3,
    IG_PLAN_INT8 = 4,
    IG_PLAN_Q4_0 = 5,
    IG_PLAN_Q4_1 = 6,
    IG_PLAN_Q8_0 = 7,
    IG_PLAN_DTYPE_COUNT,
} ig_plan_dtype;

const char *ig_plan_dtype_name(ig_plan_dtype t);
/* -1 if unknown ("f32", "f16", "bf16", "int4", "int8", "q4_0", "q4_1", "q8_0"). */
int ig_plan_dtype_from_name(const char *s);
/* The planned format of a weight storage type (q4g64 -> INT4, q8g64 -> INT8, ...; f32 for types
 * without one). */
ig_plan_dtype ig_plan_dtype_of_weight(ig_dtype t);
/* 1 for the compressed formats (INT4, INT8 and ggml's blocks): their vectors are planned f16. */
int ig_plan_dtype_is_compressed(ig_plan_dtype t);
/* Bytes of one row of `n` values. */
size_t ig_plan_row_bytes(ig_plan_dtype t, size_t n);

typedef struct ig_workload {
    int prompt_len;
    int gen_len; /* generated tokens, >= 1 */
    int gpu_batch_size;
    int num_gpu_batches; /* block = gpu_batch_size * num_gpu_batches sequences */
} ig_workload;

/* FlexGen's placement: percent of weights / KV cache / activations on the device and on the host;
 * the rest of each kind goes to disk. */
typedef struct ig_plan_percent {
    double w_gpu, w_cpu;
    double cache_gpu, cache_cpu;
    double act_gpu, act_cpu;
} ig_plan_percent;

typedef struct ig_plan_opts {
    ig_model_config model;
    ig_plan_dtype weight_dtype; /* matrices; vectors (norms, biases) are f16 when this is INT4 */
    ig_plan_dtype act_dtype;    /* hidden states and compute buffers (default F16) */
    ig_workload wl;
    ig_plan_percent pct;
    /* KV cache: format, the fraction of each sequence's rows kept at all (1 = all; H2O-like
     * budgets < 1), the fraction of the full cache a decode step fetches (1 = full attention), and
     * the partial-key-cache ratio of speculative policies (InfiniGen: columns per head kept on the
     * device, 0 = none). */
    ig_plan_dtype kv_dtype;
    /* A KV policy's own row format where kv_dtype cannot say it exactly (int4 with bits=2 or 8, or
     * a group size other than 64): the bytes of one head's key (or value) row, and its name for
     * reports. 0 and "": kv_dtype's. */
    size_t kv_head_row_bytes;
    char kv_format[48];
    double kv_keep_fraction;
    double fetch_fraction;
    double partial_ratio;
    /* A measured fetch profile (offload/fetchprof): the fraction a decode step reads at context
     * length fetch_profile_ctx[i], interpolated; n = 0: fetch_fraction at every length. Buffers
     * are sized by fetch_fraction (the cap) either way. fetch_source says which, in words. */
    int fetch_profile_n;
    double fetch_profile_ctx[64], fetch_profile_frac[64];
    char fetch_source[512];
    /* A policy's dense layers (InfiniGen's and Quest's dense_layers): layers 0..N-1 keep and read
     * every row each step (kv_keep_fraction is then the whole cache's share: the other layers
     * keep (keep L - N) / (L - N)); fetch_fraction (a cap) applies to each later layer, a fetch
     * profile (over all layers) to the model as a whole (ig_cost_layer_fetch_fraction). 0: none. */
    int dense_layers;
    /* The policy scores rows by their attention (H2O): decode attention also writes per-row
     * probabilities and the policy adds them up (priced at hwprof's attn_probs_gbps). */
    int attn_probs;
    int cpu_cache_compute; /* attention over host-resident KV runs on the CPU (FlexGen's flag) */
    int overlap;           /* the cost model overlaps activities (default 1) */
    ig_numa_mode numa_mode;
    int n_numa_nodes; /* for INTERLEAVE (0 = all nodes) and NODES */
    int numa_nodes[IG_MAX_NUMA];
} ig_plan_opts;

/* Defaults: f16 weights/activations/KV, keep 1, fetch 1, no partial cache, overlap on, NUMA local,
 * all weights/KV/activations on the device (100, 0, 100, 0, 100, 0). */
void ig_plan_opts_init(ig_plan_opts *o);

/* Byte breakdown of one tier (or NUMA node). `policy` is a KV policy's own device state
 * (InfiniGen's partial key cache and partial query weights). */
typedef struct ig_plan_bytes {
    size_t weights, kv, act, buffers, policy;
} ig_plan_bytes;
size_t ig_plan_bytes_total(const ig_plan_bytes *b);

typedef struct ig_plan_usage {
    ig_plan_bytes device;
    ig_plan_bytes host;                   /* all nodes together */
    ig_plan_bytes host_node[IG_MAX_NUMA]; /* per machine node, index as ig_machine.numa_os */
    ig_plan_bytes disk;
} ig_plan_usage;

/* Per-layer quantities the cost model needs (byte and FLOP counts), the same for every layer of a
 * uniform model; see docs/planner.md for each term. */
typedef struct ig_plan_layer_io {
    size_t w_bytes[IG_TIER_COUNT]; /* this layer's weight bytes per tier */
    size_t w_total;
    double gemm_flops_per_token; /* 2 x matrix parameters of the layer */
    size_t kv_row_bytes;         /* K + V of one token of one sequence in the KV format */
    size_t partial_row_bytes;    /* partial key cache of one token of one sequence */
    size_t partial_w_bytes;      /* partial query weights of the layer */
} ig_plan_layer_io;

typedef struct ig_plan ig_plan;

/* Validates the options against the machine and builds the plan. Errors: IG_ERR_INVALID_ARG for
 * bad percentages, shapes, workloads or NUMA nodes; IG_ERR_CAPACITY when a tier does not fit, with
 * a message "TIER: needs X GiB (weights a, KV b, ...) but has Y GiB". */
ig_status ig_plan_create(const ig_plan_opts *o, const ig_machine *m, ig_plan **out, ig_error *err);
void ig_plan_free(ig_plan *p);

const ig_plan_opts *ig_plan_get_opts(const ig_plan *p);
const ig_machine *ig_plan_get_machine(const ig_plan *p);
const ig_weight_placement *ig_plan_weights(const ig_plan *p);
const ig_plan_usage *ig_plan_get_usage(const ig_plan *p);
/* Bytes of tensor t of layer l as planned (weight_dtype). */
size_t ig_plan_tensor_bytes(const ig_plan *p, int layer, ig_wtensor t);
/* Bytes of the outer tensors (embeddings, final norm, lm_head). */
size_t ig_plan_outer_bytes(const ig_plan *p);
/* KV placement in whole sequences of the block: counts per tier, and where sequence i lives. */
int ig_plan_kv_sequences(const ig_plan *p, ig_tier_kind k);
ig_tier_ref ig_plan_kv_sequence(const ig_plan *p, int seq);
/* Activation (hidden state) placement in whole sequences, as for KV. */
int ig_plan_act_sequences(const ig_plan *p, ig_tier_kind k);
/* KV bytes of one sequence over all layers at full length (prompt_len + gen_len - 1 tokens). */
size_t ig_plan_kv_bytes_per_sequence(const ig_plan *p);
const ig_plan_layer_io *ig_plan_layer(const ig_plan *p, int layer);

/* A one-line capacity check of usage against the machine: IG_OK or IG_ERR_CAPACITY with the
 * message (used by ig_plan_create; public for tests). */
ig_status ig_plan_check_fits(const ig_plan_usage *u, const ig_machine *m, ig_error *err);

#endif
