/* Internal to core/engine: the engine struct and the KV-policy path (engine_kv.c). */
#ifndef IG_ENGINE_INTERNAL_H
#define IG_ENGINE_INTERNAL_H

#include "core/engine/engine.h"
#include "offload/kv_home.h"

typedef struct ig_kv_run ig_kv_run;

struct ig_engine {
    const ig_model *model;
    ig_model_config cfg;
    ig_engine_opts opts;
    int *seq_len;    /* [max_seqs] tokens in each slot's cache */
    float **k_cache; /* no policy: [n_layer] -> [max_seqs][n_kv_head][max_ctx][head_dim] */
    float **v_cache;
    size_t slot_floats; /* floats per (layer, slot) */
    /* activations, [max_batch_tokens][...] */
    float *x, *h, *q, *k, *v, *att, *f1, *f2, *hidden;
    int32_t *ids, *pos;
    float *attn_ws;
    size_t attn_ws_floats;
    float *rope_cos, *rope_sin;
    /* the last forward's layout */
    int64_t n_rows;
    ig_seq_tokens *cur; /* [max_seqs] copy of the call's sequences */
    int64_t *row0;      /* [max_seqs] first row of each sequence */
    int *p0;            /* [max_seqs] cache length before the call */
    int n_cur;
    unsigned char *slot_seen; /* [max_seqs] */
    /* the GPU batch being computed: sequences [bs0, bs1) of cur, rows [br0, br1) */
    int bs0, bs1;
    int64_t br0, br1;
    float *act_host; /* [max_batch_tokens][d_model]: host home / disk relay of activations */
    struct ig_disk_file *act_file; /* [max_batch_tokens][d_model] f32: disk home (act_disk_seqs) */
    ig_engine_stats stats;
    ig_kv_run *kv; /* with a policy */
};

ig_status ig_kv_run_create(ig_engine *e, ig_error *err);
void ig_kv_run_free(ig_kv_run *r);
void ig_kv_run_reset_slot(ig_engine *e, int slot);
/* Layer hooks of the forward pass with a policy: after the attention norm (h holds the layer's
 * attention input), and in place of the dense store + attention (q, k, v computed, RoPE applied).
 */
void ig_kv_layer_begin(ig_engine *e, int layer);
void ig_kv_layer_attention(ig_engine *e, int layer);
/* Call start: the call's sequences form GPU batches of gpu_batch_seqs (the last may be short). */
void ig_kv_call_begin(ig_engine *e, int gpu_batch_seqs);
/* Call end (also after a failed call): waits for the call's KV stores still on the transfer queue,
 * so that nothing reads or rewrites home rows with a store of them in flight. */
void ig_kv_call_end(ig_engine *e);
/* The hooks below act on GPU batch b of the call (sequences [e->bs0, e->bs1)). */
void ig_kv_gpu_batch(ig_engine *e, int b);
ig_kv_stats ig_kv_run_stats(const ig_kv_run *r);
/* The first I/O error of the KV home on disk, or NULL. */
const char *ig_kv_run_io_error(const ig_kv_run *r);
void ig_kv_run_reset_stats(ig_kv_run *r);
size_t ig_kv_run_home_bytes(const ig_kv_run *r);
size_t ig_kv_run_home_bytes_slots(const ig_kv_run *r, int slot0, int slot1);
size_t ig_kv_run_device_bytes(const ig_kv_run *r);
void *ig_kv_run_policy_state(const ig_kv_run *r);
size_t ig_kv_run_row_bytes(const ig_kv_run *r);

#endif
