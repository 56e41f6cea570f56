/* Internal to core/engine: the engine struct and the KV-policy path (engine_kv.c). */
#ifndef IG_ENGINE_INTERNAL_H
#define IG_ENGINE_INTERNAL_H

#include "core/engine/engine.h"
#include "kernels/backend_iface.h"
#include "offload/acthome.h"
#include "offload/kv_home.h"

typedef struct ig_kv_run ig_kv_run;
typedef struct ig_cu_engine ig_cu_engine;

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
    ig_kv_run *kv;    /* with a policy */
    ig_cu_engine *cu; /* the CUDA backend's state (engine_cuda.c), NULL on the CPU */
    ig_be *be;        /* the CPU engine's backend table ("cpu"): the layer's ops and the policy's */
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
    /* with a policy, the engine's two steps of its policy path: after the attention norm (h holds
     * the layer's attention input) and in place of the dense store + attention (q, k, v computed,
     * RoPE applied); each returns the first error of the path */
    ig_status (*kv_begin)(ig_engine *e, int layer, ig_error *err);
    ig_status (*kv_attention)(ig_engine *e, int layer, ig_error *err);
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
/* Layer hooks of the forward pass with a policy: after the attention norm (h holds the layer's
 * attention input), and in place of the dense store + attention (q, k, v computed, RoPE applied).
 */
void ig_kv_layer_begin(ig_engine *e, int layer);
void ig_kv_layer_attention(ig_engine *e, int layer);
/* The two as ig_layer_bufs hooks (the CPU engine's: they cannot fail). */
ig_status ig_kv_layer_begin_hook(ig_engine *e, int layer, ig_error *err);
ig_status ig_kv_layer_attention_hook(ig_engine *e, int layer, ig_error *err);
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

/* ---- the CUDA backend (engine_cuda.c; without IG_HAVE_CUDA every call fails as unsupported) ----
 * The host buffers of struct ig_engine stay as host mirrors: the embedding is gathered into e->x on
 * the host, and with a policy the rows its hooks read (e->h, e->q, e->k, e->v) are copied down
 * each layer, e->att rows computed on the CPU copied up. */
ig_status ig_cu_create(ig_engine *e, ig_error *err);
/* Layer l's W_q on the device, in the type the engine computes with (f16/bf16, f32 with
 * cuda_f32_weights, or block-quantized kept compressed), and its bias on the device (NULL: none):
 * what the engine hands a policy that projects queries ahead (ig_policy_env.wq_dev). */
void ig_cu_layer_wq(const ig_cu_engine *c, int l, const void **w, ig_dtype *t, int64_t *rows,
                    int64_t *cols, const float **bias);
void ig_cu_free(ig_cu_engine *c);
/* The CUDA engine's backend table (the layer's, and the policy's: ig_policy_env.be). */
ig_be *ig_cu_backend(const ig_cu_engine *c);
/* Waits for the device work reading the KV home and unregisters its rows: before the KV run frees
 * the home (ig_engine_free: this, then ig_kv_run_free, then ig_cu_free, so that the policy's
 * buffers are released on a table still alive). */
void ig_cu_release_home(ig_cu_engine *c);
/* The policy path's layer hooks on the CUDA engine (its ig_layer_bufs kv_begin and kv_attention):
 * ig_kv_layer_begin and ig_kv_layer_attention with the rows the host hooks read copied down and
 * the attention rows computed on the host copied up; the first error of the device side is
 * returned. */
ig_status ig_cu_kv_layer_begin(ig_engine *e, int layer, ig_error *err);
ig_status ig_cu_kv_layer_attention(ig_engine *e, int layer, ig_error *err);
/* Runs the layers and the final norm of the call laid out in e (rows, sequences, GPU batches;
 * e->x holds the embeddings on the host). */
ig_status ig_cu_forward(ig_engine *e, int gpu_batch_seqs, ig_error *err);
/* Logits of rows (or row0 .. row0+n-1 when rows is NULL) into host out [n][vocab]. */
ig_status ig_cu_logits(ig_engine *e, const int64_t *rows, int64_t row0, int64_t n, float *out,
                       ig_error *err);
/* KV policy path on the device (engine_kv.c calls these when e->cu and the decode attention runs
 * on the GPU; the first error is kept and returned by ig_cu_forward). */
/* Mapped device addresses of the home's K and V rows (the home registered pinned+mapped). */
ig_status ig_cu_kv_setup(ig_engine *e, ig_kv_home *home, int64_t cap, size_t row_bytes,
                         ig_error *err);
/* Queues on the copy stream the gather of `layer`'s selected entries for decode sequences
 * [i0, i0 + n) of the call (slots[i], selections sel_e / sel_n as engine_kv.c keeps them) into
 * working-set buffer buf, and records event (q) after it. */
void ig_cu_kv_gather(ig_engine *e, int layer, int buf, int q, int i0, int n, const int *slots,
                     const int32_t *sel_e, const int64_t *sel_n);
/* The compute stream waits for event q (no host block). */
void ig_cu_kv_wait(ig_engine *e, int q);
/* Decode attention of decode sequences [i0, i0 + n) (dec[i] = index into e->cur) over working set
 * buf plus their new rows (through the codec), writing their attention rows on the device.
 * Synchronises; with want_probs returns their probabilities (host, [n][n_head][probs_stride], valid
 * until the next call), else NULL (also after an error, kept for ig_cu_forward). */
const float *ig_cu_kv_decode(ig_engine *e, int buf, int i0, int n, const int *dec, int want_probs,
                             int64_t probs_stride);
/* Whether the CUDA engine computes sequence s's prefill attention (a first chunk, no column sums
 * wanted) on the device, so that engine_kv.c skips it. */
int ig_cu_prefill_on_device(const ig_engine *e, int s);
/* Whether the decode attention of the policy path runs on the device (else on the CPU). */
int ig_kv_run_device_attention(const ig_kv_run *r);
int ig_kv_run_wants_colsum(const ig_kv_run *r);
const ig_kv_codec *ig_kv_run_codec(const ig_kv_run *r);

#endif
