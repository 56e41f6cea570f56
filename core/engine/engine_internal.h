/* Internal to core/engine: the engine struct and the KV-policy path (engine_kv.c). */
#ifndef IG_ENGINE_INTERNAL_H
#define IG_ENGINE_INTERNAL_H

#include "core/engine/engine.h"
#include "kernels/backend_iface.h"
#include "offload/acthome.h"
#include "offload/kv_home.h"

typedef struct ig_kv_run ig_kv_run;
typedef struct ig_dev_engine ig_dev_engine;

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
    ig_act_home *act; /* [max_batch_tokens][d_model] f32 rows off the device (act_*_seqs) */
    ig_engine_stats stats;
    ig_kv_run *kv;      /* with a policy */
    ig_dev_engine *dev; /* a device backend's state (engine_dev.c), NULL on the CPU */
    ig_be *be;          /* the host table ("cpu"): the CPU engine's layers and logits */
    /* the table the layers run on and the layers as it reads them (the policy's too): be and NULL
     * (the model's own) on the CPU engine; the device engine's table and uploaded weights, set by
     * ig_dev_create */
    ig_be *layer_be;
    const ig_layer *layer_views;
};

/* What one layer runs on (core/engine/layer.c): a backend table and buffers of that backend, all
 * [max_batch_tokens][...] as in struct ig_engine. kc, vc: the layer's dense KV cache without a
 * policy (slot s at + s * slot_floats, [kv_head][max_ctx][head_dim]); attn_ws: the attention
 * workspace (ig_be_attention_ws floats; NULL where the backend needs none). */
typedef struct ig_layer_bufs {
    ig_be *be;
    float *x, *h, *q, *k, *v, *att, *f1, *f2;
    const int32_t *pos;
    const float *rope_cos, *rope_sin;
    float *kc, *vc;
    float *attn_ws;
    size_t attn_ws_floats;
} ig_layer_bufs;

/* Layer l over the rows of the current GPU batch (e->bs0 .. bs1), weights L in memory b->be
 * computes on, x updated in place. The one layer of both engines. */
ig_status ig_engine_layer_forward(ig_engine *e, int l, const ig_layer *L, const ig_layer_bufs *b,
                                  ig_error *err);
/* The model's norm (LayerNorm on OPT, RMSNorm on Llama) over rows of d_model on be. */
ig_status ig_engine_norm(const ig_engine *e, ig_be *be, const float *x, const float *w,
                         const float *bias, int64_t rows, float *y, ig_error *err);

ig_status ig_kv_run_create(ig_engine *e, ig_error *err);
void ig_kv_run_free(ig_kv_run *r);
void ig_kv_run_reset_slot(ig_engine *e, int slot);
/* The forward pass's two steps with a policy, on the layer's buffers b (core/engine/layer.c): after
 * the attention norm (b->h holds the layer's attention input), and in place of the dense store +
 * attention (q, k, v computed, RoPE applied). The policy's hooks read host rows: where b's buffers
 * are not the engine's host ones (a device table) the rows they read are copied down and the
 * attention rows computed on the host copied up. Each returns the first error of the path. */
ig_status ig_kv_layer_begin(ig_engine *e, int layer, const ig_layer_bufs *b, ig_error *err);
ig_status ig_kv_layer_attention(ig_engine *e, int layer, const ig_layer_bufs *b, ig_error *err);
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
void ig_kv_run_policy_budget(const ig_kv_run *r, ig_policy_budget_info *out);
void *ig_kv_run_policy_state(const ig_kv_run *r);
size_t ig_kv_run_row_bytes(const ig_kv_run *r);

/* ---- a device backend (engine_dev.c: table ops only; the CUDA table today, whose constructor
 * fails as unsupported in a build without CUDA) ----
 * The host buffers of struct ig_engine stay as host mirrors: the embedding is gathered into e->x on
 * the host, and with a policy the policy path copies the rows its hooks read (engine_kv.c).
 * Creating sets e->dev, e->layer_be and e->layer_views. */
ig_status ig_dev_create(ig_engine *e, ig_error *err);
void ig_dev_free(ig_dev_engine *c);
/* Runs the layers and the final norm of the call laid out in e (rows, sequences, GPU batches;
 * e->x holds the embeddings on the host). */
ig_status ig_dev_forward(ig_engine *e, int gpu_batch_seqs, ig_error *err);
/* Logits of rows (or row0 .. row0+n-1 when rows is NULL) into host out [n][vocab]. */
ig_status ig_dev_logits(ig_engine *e, const int64_t *rows, int64_t row0, int64_t n, float *out,
                        ig_error *err);

#endif
