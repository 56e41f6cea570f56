/* The inference engine: batched prefill and decode over a model with a per-sequence KV cache.
 * A forward call takes new tokens for several sequences (of different lengths), appends their keys
 * and values to each sequence's cache slot, and leaves the final hidden states of every new token;
 * logits are computed on demand for the rows the caller needs. No allocation after create. */
#ifndef IG_ENGINE_H
#define IG_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/model/model.h"
#include "core/base/status.h"
#include "kernels/backend.h"
#include "policies/policy.h"

typedef struct ig_engine ig_engine;

typedef enum ig_kv_access {
    /* in place: attention reads the selected home rows where they are, f32 rows as they are,
     * encoded rows (f16, n-bit codes) decoded on the compute threads by the attention step (as a
     * GPU's attention kernel decodes the rows the link brought); KV on disk is always copied */
    IG_KV_ACCESS_AUTO = 0,    /* in place unless some KV slot is homed on disk */
    IG_KV_ACCESS_INPLACE = 1, /* in place (an error with KV on disk) */
    /* the selected rows are copied (and decoded) into a working set on the transfer thread */
    IG_KV_ACCESS_COPY = 2,
    /* FlexGen's cpu_cache_compute: decode attention runs on the CPU over the host-resident cache
     * (in place, encoded rows decoded by the attention step); only the query goes down and the
     * attention output back up, so the KV traffic counted is 4 * n_head * head_dim bytes each way
     * per token and layer. */
    IG_KV_ACCESS_CPU = 3,
} ig_kv_access;

typedef struct ig_engine_opts {
    int max_seqs;         /* KV-cache slots (sequences alive at once) */
    int max_ctx;          /* tokens per slot */
    int max_batch_tokens; /* new tokens per forward call, all sequences together */
    int threads;          /* <= 0: all cores */
    /* Where the forward pass runs: IG_BACKEND_CPU (0, the default) or IG_BACKEND_CUDA (weights
     * uploaded to the GPU as f16, activations and the plain KV cache on the device; with a policy
     * the KV home stays in host memory, pinned and mapped). A CUDA start-up failure falls back to
     * the CPU with one line on stderr. Set it from ig_backend_select's answer. */
    ig_backend_kind backend;
    /* CUDA backend only: keep the weights, and run GEMMs, in f32 (no tensor cores) instead of f16
     * (bf16 for bf16 models). Slower; for comparing with the CPU backend to f32 rounding. */
    int cuda_f32_weights;
    /* KV policy (NULL: the plain dense f32 cache, no policy machinery). With a policy, the KV cache
     * lives in a home tier (offload/kv_home) and attention runs over the policy's selection. */
    const ig_policy_ops *policy;
    const ig_policy_params *policy_params;
    ig_dtype kv_dtype; /* home rows of raw codecs: f32 (default when 0) or f16 */
    ig_kv_access kv_access;
    int recall; /* measure recall of each selection against the exact top-k (costs time) */
    /* Transfer-queue threads for copy access: 0 = auto (one when a core is left over beside the
     * compute threads, else transfers run inline, issued at the same points), -1 = none. */
    int xfer_threads;
    /* Weight residency (offload/wstream): NULL = the model's weights are read where they were
     * loaded. Otherwise each layer's weights come from this stream (placed on device, host or disk,
     * loaded ahead with overlap); not owned, must outlive the engine's forward calls. */
    struct ig_wstream *weights;
    /* KV placement in whole sequences (FlexGen's cache_gpu_percent): slots [0, kv_device_slots)
     * have their KV home on the device, so their rows never cross the link (no h2d/d2h bytes); the
     * other slots' homes are in host memory. With a policy only. */
    int kv_device_slots;
    /* The KV home's host memory: bound to NUMA node kv_numa of kv_topo (-1: interleaved); NULL:
     * plain memory. With a policy only. */
    const struct ig_topo *kv_topo;
    int kv_numa;
    /* FlexGen's zig-zag block schedule: a call's sequences are split into GPU batches of this many
     * sequences (in call order), and each layer runs over every GPU batch in turn before the next
     * layer starts, so a layer's weights are loaded once for the whole block. 0: one GPU batch.
     * Rows are independent, so the logits do not depend on it. */
    int gpu_batch_seqs;
    /* Activations (the hidden state between layers) of the sequences in the last act_host_seqs
     * slots live in host memory: stored there after every layer and loaded back before the next,
     * through the link model (FlexGen's act_cpu_percent). 0: all on the device. */
    int act_host_seqs;
    const struct ig_link_model *act_link; /* NULL: copies at memory speed */
    /* The link the KV rows of host-homed slots (kv_device_slots and up) cross, with a policy on
     * the CPU backend: each layer's fetch of selected rows (h2d) and store of new rows (d2h) per
     * GPU batch lasts at least what the model prescribes for its bytes (the bytes kv stats count),
     * queued on a transfer thread (one is started even with no spare core) so that it overlaps
     * compute as a GPU's copy stream would: one link clock, the compute thread waiting for each
     * job's modelled end when it needs the rows. Copy access gathers the rows on that thread;
     * in-place access only times them (attention reads the rows where they live, as a copy engine
     * would have moved them without the host's cores). NULL or off: no throttling. Not
     * throttled: prefill stores, and kv_access cpu (only the query and the output cross). */
    const struct ig_link_model *kv_link;
    /* The last act_disk_seqs slots (after the host ones) keep their activations in a file of this
     * disk tier, going through host memory on the way (counted as host traffic too). */
    struct ig_disk *act_disk;
    int act_disk_seqs;
    /* KV placement on disk (FlexGen's cache_disk_percent), with a policy only: the last
     * kv_disk_slots slots keep their KV rows in a file of this disk tier, read back for attention
     * through a working set (copy access). */
    struct ig_disk *kv_disk;
    int kv_disk_slots;
} ig_engine_opts;

/* KV traffic and time, accumulated over decode tokens (one token of one sequence) since create or
 * the last reset. "h2d" is what a GPU run moves home -> device (selected rows, encoded); "read" is
 * what this run actually read to compute attention. */
#define IG_KV_PROFILE_STEP    128
#define IG_KV_PROFILE_BUCKETS 64
typedef struct ig_kv_stats {
    int64_t decode_tokens, decode_calls;
    double h2d_bytes, d2h_bytes, read_bytes, prefill_d2h_bytes;
    double selected_rows, resident_rows, context_rows; /* summed over (token, layer, KV head) */
    /* The same over the policy's selected layers only (caps.dense_layers and up) */
    double sel_layer_selected_rows, sel_layer_context_rows;
    /* Selected and context rows over all layers by the context length of the step: bucket b holds
     * the steps with b * IG_KV_PROFILE_STEP <= context < (b + 1) * IG_KV_PROFILE_STEP (the last
     * bucket everything longer): the policy's fetch profile. */
    double len_selected_rows[IG_KV_PROFILE_BUCKETS], len_context_rows[IG_KV_PROFILE_BUCKETS];
    double len_steps[IG_KV_PROFILE_BUCKETS]; /* (sequence, layer) decode steps in the bucket */
    double select_s, attention_s, store_s, recall_s;
    double transfer_s;      /* time the transfer queue spent copying (overlapped with compute) */
    double transfer_wait_s; /* time compute waited for a transfer to finish */
    /* Decode store jobs on the transfer queue (one per GPU batch and layer), their time counted in
     * transfer_s; store_s is the part on the compute thread. With copy access and a transfer
     * thread the job writes the rows; with in-place access and the link model (kv_link) the
     * compute thread writes them and the job only times their link transfer. 0 when stores run
     * synchronously. */
    int64_t store_jobs;
    double recall_sum;
    int64_t recall_n;
    int64_t evictions;
    double disk_read_bytes, disk_write_bytes; /* KV rows homed on disk (kv_disk_slots) */
} ig_kv_stats;

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
    int64_t gpu_batches; /* GPU batches run (per layer pass), summed over calls */
    double act_h2d_bytes, act_d2h_bytes, act_transfer_s; /* activations off the device */
    double act_disk_read_bytes, act_disk_write_bytes;    /* activations homed on disk */
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
/* The backend the engine runs on (CPU when a CUDA engine fell back at create). */
ig_backend_kind ig_engine_backend(const ig_engine *e);
void ig_engine_reset_stats(ig_engine *e);
ig_kv_stats ig_engine_get_kv_stats(const ig_engine *e);
/* KV bytes resident now: home tier entries in use, and the working set plus policy metadata that a
 * GPU run would hold on the device. */
size_t ig_engine_kv_home_bytes(const ig_engine *e);
/* Of those, the bytes homed on the device (slots below kv_device_slots). */
size_t ig_engine_kv_home_device_bytes(const ig_engine *e);
size_t ig_engine_kv_device_bytes(const ig_engine *e);
/* Bytes of one encoded K (or V) row of one head in the home tier (with a policy). */
size_t ig_engine_kv_row_bytes(const ig_engine *e);
/* The policy's state (NULL without a policy), for tests and tools that inspect a policy. */
void *ig_engine_policy_state(const ig_engine *e);

/* What a run's policy costs beside the rows it reads (zero without a policy). */
typedef struct ig_policy_budget_info {
    int dense_layers;         /* layers the policy attends densely by its own rule */
    size_t meta_device_bytes; /* metadata a GPU run holds on the device (partial keys, bounds),
                                 wq_device_bytes included */
    /* W_q a policy reads one layer ahead (caps.reads_wq) of the layers whose W_q is placed off
     * the device: a GPU run keeps those resident beside the stream (engine_kv.c) */
    size_t wq_device_bytes;
    size_t meta_host_bytes; /* metadata in host memory (pool counters) */
    size_t kv_cache_bytes;  /* the whole KV cache at the engine's capacity (K and V, every
                               layer, slot and KV head at max_ctx, home row encoding) */
    char budget[256];       /* the policy's budget in words ("every token" for dense ones) */
} ig_policy_budget_info;
void ig_engine_policy_budget(const ig_engine *e, ig_policy_budget_info *out);
/* Bytes of KV cache allocated, and bytes used by a sequence of n tokens. */
size_t ig_engine_kv_bytes(const ig_engine *e);
size_t ig_engine_kv_bytes_per_token(const ig_engine *e);

#endif
