/* The engine over a ragged batch of sequences: create, the call's layout, the CPU engine's loop
 * over layers and GPU batches (weight stream, activations off the device), logits. The layer
 * itself is core/engine/layer.c, shared with the device engine (engine_dev.c). All buffers are
 * sized at create time from the options; forward never allocates. The KV cache is
 * [layer][slot][kv_head][max_ctx][head_dim] f32, so a head's keys are contiguous for attention. */
#include "core/engine/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine_internal.h"
#include "core/base/log.h"
#include "kernels/cpu/cpu_kernels.h"
#include "offload/disk.h"
#include "offload/link.h"
#include "offload/wstream.h"

static float *alloc_f(size_t n, ig_error *err) {
    return ig_aligned_alloc(n * sizeof(float), err);
}

static ig_status create(const ig_model *m, const ig_engine_opts *opts, int cuda, ig_engine **out,
                        ig_error *err) {
    *out = NULL;
    const ig_model_config *c = ig_model_get_config(m);
    ig_engine_opts o = *opts;
    if (o.kv_device_slots < 0 || o.kv_device_slots > o.max_seqs)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "engine: kv_device_slots %d outside [0, max_seqs %d]",
                            o.kv_device_slots, o.max_seqs);
    if (o.max_seqs <= 0 || o.max_seqs > 4096)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "max_seqs %d out of range 1..4096",
                            o.max_seqs);
    if (o.max_ctx <= 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "context length %d must be positive",
                            o.max_ctx);
    if (c->arch == IG_ARCH_OPT && o.max_ctx > c->max_pos)
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "context length %d exceeds the %d learned positions of this OPT model",
                            o.max_ctx, c->max_pos);
    if (o.max_batch_tokens <= 0) o.max_batch_tokens = o.max_seqs;
    if (o.gpu_batch_seqs < 0 || o.act_host_seqs < 0 || o.act_disk_seqs < 0 ||
        o.act_host_seqs + o.act_disk_seqs > o.max_seqs || (o.act_disk_seqs > 0 && !o.act_disk))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "engine: gpu_batch_seqs %d must be >= 0, act_host_seqs %d + "
                            "act_disk_seqs %d at most max_seqs %d (disk ones need a disk tier)",
                            o.gpu_batch_seqs, o.act_host_seqs, o.act_disk_seqs, o.max_seqs);
    /* CUDA: weights all on the device (uploaded from the model; a weight stream that places
     * every group on the device is not needed) and activations on the device */
    if (cuda &&
        ((o.weights && ig_wstream_host_bytes(o.weights) + ig_wstream_disk_bytes(o.weights) > 0) ||
         o.act_host_seqs + o.act_disk_seqs > 0))
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "CUDA engine: weights streamed from host or disk and activations off "
                            "the device are not supported");
    o.backend = cuda ? IG_BACKEND_CUDA : IG_BACKEND_CPU;
    ig_cpu_set_threads(o.threads);

    ig_engine *e = ig_calloc(1, sizeof *e, err);
    if (!e) return IG_ERR_NOMEM;
    e->model = m;
    e->cfg = *c;
    e->opts = o;
    ig_status brc = ig_be_cpu_create(&e->be, err);
    if (brc != IG_OK) {
        free(e);
        return brc;
    }
    e->layer_be = e->be; /* the device engine's own table replaces it (ig_dev_create) */
    size_t T = (size_t)o.max_batch_tokens, d = (size_t)c->d_model;
    size_t qd = (size_t)c->n_head * (size_t)c->head_dim;
    size_t kvd = (size_t)c->n_kv_head * (size_t)c->head_dim, f = (size_t)c->d_ffn;
    e->slot_floats = (size_t)c->n_kv_head * (size_t)o.max_ctx * (size_t)c->head_dim;
    size_t cache_floats = e->slot_floats * (size_t)o.max_seqs;

    e->seq_len = ig_calloc((size_t)o.max_seqs, sizeof(int), err);
    e->cur = ig_calloc((size_t)o.max_seqs, sizeof *e->cur, err);
    e->row0 = ig_calloc((size_t)o.max_seqs, sizeof *e->row0, err);
    e->p0 = ig_calloc((size_t)o.max_seqs, sizeof *e->p0, err);
    e->slot_seen = ig_calloc((size_t)o.max_seqs, 1, err);
    e->k_cache = ig_calloc((size_t)c->n_layer, sizeof(float *), err);
    e->v_cache = ig_calloc((size_t)c->n_layer, sizeof(float *), err);
    ig_status rc = IG_OK;
    if (!e->seq_len || !e->cur || !e->row0 || !e->p0 || !e->slot_seen || !e->k_cache ||
        !e->v_cache) {
        rc = IG_ERR_NOMEM;
        goto fail;
    }
    for (int l = 0; l < c->n_layer && !o.policy && !cuda; l++) { /* CUDA: on the device */
        e->k_cache[l] = alloc_f(cache_floats, err);
        e->v_cache[l] = alloc_f(cache_floats, err);
        if (!e->k_cache[l] || !e->v_cache[l]) {
            rc = IG_ERR_NOMEM;
            ig_error_prefix(
                err, "KV cache (%zu MiB per layer): ", 2 * cache_floats * sizeof(float) >> 20);
            goto fail;
        }
    }
    e->x = alloc_f(T * d, err);
    e->h = alloc_f(T * d, err);
    e->hidden = alloc_f(T * d, err);
    e->q = alloc_f(T * qd, err);
    e->k = alloc_f(T * kvd, err);
    e->v = alloc_f(T * kvd, err);
    e->att = alloc_f(T * qd, err);
    e->f1 = alloc_f(T * f, err);
    e->f2 = alloc_f(T * f, err);
    e->ids = ig_calloc(T, sizeof(int32_t), err);
    e->pos = ig_calloc(T, sizeof(int32_t), err);
    e->attn_ws_floats = ig_cpu_attention_ws_floats(o.max_batch_tokens, o.max_ctx, c->n_head,
                                                   c->head_dim, ig_cpu_get_threads());
    e->attn_ws = alloc_f(e->attn_ws_floats, err);
    if (o.act_host_seqs + o.act_disk_seqs > 0) {
        rc = ig_act_home_create(T * d * sizeof(float), o.act_link,
                                o.act_disk_seqs > 0 ? o.act_disk : NULL, &e->act, err);
        if (rc != IG_OK) {
            if (o.act_disk_seqs > 0)
                ig_error_prefix(err, "activations of %d sequences on disk: ", o.act_disk_seqs);
            goto fail;
        }
    }
    if (!e->x || !e->h || !e->hidden || !e->q || !e->k || !e->v || !e->att || !e->f1 || !e->f2 ||
        !e->ids || !e->pos || !e->attn_ws) {
        rc = IG_ERR_NOMEM;
        goto fail;
    }
    if (c->arch == IG_ARCH_LLAMA) {
        size_t half = (size_t)c->rot_dim / 2;
        e->rope_cos = alloc_f((size_t)o.max_ctx * half, err);
        e->rope_sin = alloc_f((size_t)o.max_ctx * half, err);
        if (!e->rope_cos || !e->rope_sin) {
            rc = IG_ERR_NOMEM;
            goto fail;
        }
        ig_cpu_rope_table(c->rope_theta, c->rot_dim, o.max_ctx, e->rope_cos, e->rope_sin);
    }
    if (cuda) {
        rc = ig_dev_create(e, err);
        if (rc != IG_OK) goto fail;
    }
    if (o.policy) {
        rc = ig_kv_run_create(e, err);
        if (rc != IG_OK) goto fail;
    }
    *out = e;
    return IG_OK;
fail:
    ig_engine_free(e);
    return rc;
}

ig_status ig_engine_create(const ig_model *m, const ig_engine_opts *opts, ig_engine **out,
                           ig_error *err) {
    if (opts->backend != IG_BACKEND_CUDA) return create(m, opts, 0, out, err);
    ig_status rc = create(m, opts, 1, out, err);
    if (rc == IG_OK || rc == IG_ERR_INVALID_ARG || rc == IG_ERR_CAPACITY)
        return rc; /* bad options fail the same on the CPU */
    IG_WARN("%s: running on the CPU", err->msg[0] ? err->msg : ig_status_to_string(rc));
    ig_error_clear(err);
    return create(m, opts, 0, out, err);
}

ig_backend_kind ig_engine_backend(const ig_engine *e) {
    return e->dev ? IG_BACKEND_CUDA : IG_BACKEND_CPU;
}

void ig_engine_free(ig_engine *e) {
    if (!e) return;
    /* first the KV run: its working set waits for the table's work reading the KV home and
     * unregisters it, the policy releases its buffers, on the table still alive */
    ig_kv_run_free(e->kv);
    ig_dev_free(e->dev);
    if (e->k_cache)
        for (int l = 0; l < e->cfg.n_layer; l++) free(e->k_cache[l]);
    if (e->v_cache)
        for (int l = 0; l < e->cfg.n_layer; l++) free(e->v_cache[l]);
    free(e->k_cache);
    free(e->v_cache);
    free(e->seq_len);
    free(e->cur);
    free(e->row0);
    free(e->p0);
    free(e->slot_seen);
    free(e->x);
    free(e->h);
    free(e->hidden);
    free(e->q);
    free(e->k);
    free(e->v);
    free(e->att);
    free(e->f1);
    free(e->f2);
    free(e->ids);
    free(e->pos);
    free(e->attn_ws);
    ig_act_home_free(e->act);
    ig_be_free(e->be);
    free(e->rope_cos);
    free(e->rope_sin);
    free(e);
}

static ig_status check_batch(ig_engine *e, const ig_seq_tokens *seqs, int n_seqs, ig_error *err) {
    if (n_seqs <= 0 || n_seqs > e->opts.max_seqs)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%d sequences in one call (expected 1..%d)",
                            n_seqs, e->opts.max_seqs);
    memset(e->slot_seen, 0, (size_t)e->opts.max_seqs);
    int64_t total = 0;
    ig_status rc = IG_OK;
    for (int s = 0; s < n_seqs && rc == IG_OK; s++) {
        const ig_seq_tokens *q = &seqs[s];
        if (q->slot < 0 || q->slot >= e->opts.max_seqs)
            rc = ig_error_set(err, IG_ERR_INVALID_ARG, "slot %d out of range 0..%d", q->slot,
                              e->opts.max_seqs - 1);
        else if (e->slot_seen[q->slot])
            rc =
                ig_error_set(err, IG_ERR_INVALID_ARG, "slot %d appears twice in one call", q->slot);
        else if (q->n_tokens <= 0 || !q->tokens)
            rc = ig_error_set(err, IG_ERR_INVALID_ARG, "sequence %d has no tokens", s);
        else if ((int64_t)e->seq_len[q->slot] + q->n_tokens > e->opts.max_ctx)
            rc = ig_error_set(err, IG_ERR_CAPACITY,
                              "slot %d: %d cached + %d new tokens exceed the context of %d",
                              q->slot, e->seq_len[q->slot], q->n_tokens, e->opts.max_ctx);
        if (rc != IG_OK) break;
        e->slot_seen[q->slot] = 1;
        for (int i = 0; i < q->n_tokens; i++)
            if (q->tokens[i] < 0 || q->tokens[i] >= e->cfg.vocab)
                return ig_error_set(err, IG_ERR_INVALID_ARG,
                                    "token id %d at position %d of sequence %d is outside the "
                                    "vocabulary (0..%d)",
                                    q->tokens[i], i, s, e->cfg.vocab - 1);
        total += q->n_tokens;
    }
    if (rc == IG_OK && total > e->opts.max_batch_tokens)
        rc = ig_error_set(err, IG_ERR_CAPACITY,
                          "%lld tokens in one call exceed the batch capacity of %d",
                          (long long)total, e->opts.max_batch_tokens);
    return rc;
}

/* Activations off the device: the rows of the current GPU batch's sequences in the last
 * act_host_seqs + act_disk_seqs slots (the engine's choice) moved between the device's x and their
 * home by offload/acthome (through the link, and the disk tier for the disk slots). A disk error
 * is returned; the rows are then not valid. */
static ig_status act_move(ig_engine *e, int to_host, ig_error *err) {
    int n_off = e->opts.act_host_seqs + e->opts.act_disk_seqs;
    if (n_off <= 0) return IG_OK;
    int first = e->opts.max_seqs - n_off, first_disk = e->opts.max_seqs - e->opts.act_disk_seqs;
    size_t d = (size_t)e->cfg.d_model;
    for (int s = e->bs0; s < e->bs1; s++) {
        int slot = e->cur[s].slot;
        if (slot < first) continue;
        size_t r0 = (size_t)e->row0[s], n = (size_t)e->cur[s].n_tokens * d * sizeof(float);
        size_t off = r0 * d * sizeof(float);
        if (to_host)
            IG_TRY(ig_act_home_store(e->act, off, e->x + r0 * d, n, slot >= first_disk, err));
        else
            IG_TRY(ig_act_home_load(e->act, off, e->x + r0 * d, n, slot >= first_disk, err));
    }
    return IG_OK;
}

static void set_gpu_batch(ig_engine *e, int s0, int s1) {
    e->bs0 = s0;
    e->bs1 = s1;
    e->br0 = e->row0[s0];
    e->br1 = e->row0[s1 - 1] + e->cur[s1 - 1].n_tokens;
}

static ig_status forward(ig_engine *e, const ig_seq_tokens *seqs, int n_seqs, ig_error *err) {
    IG_TRY(check_batch(e, seqs, n_seqs, err));
    if (e->kv && ig_kv_run_io_error(e->kv)) /* the cache on disk is not valid since then */
        return ig_error_set(err, IG_ERR_IO,
                            "forward: the KV cache on disk failed in an earlier call (%s); "
                            "create a new engine",
                            ig_kv_run_io_error(e->kv));
    const ig_model_config *c = &e->cfg;
    int64_t T = 0;
    e->n_cur = n_seqs;
    for (int s = 0; s < n_seqs; s++) {
        e->cur[s] = seqs[s];
        e->row0[s] = T;
        e->p0[s] = e->seq_len[seqs[s].slot];
        for (int i = 0; i < seqs[s].n_tokens; i++) {
            e->ids[T + i] = seqs[s].tokens[i];
            e->pos[T + i] = e->p0[s] + i;
        }
        T += seqs[s].n_tokens;
    }
    e->n_rows = T;
    size_t d = (size_t)c->d_model;
    double t_start = ig_time_s();
    double lin0 = e->stats.linear_s, att0 = e->stats.attention_s;
    int gb = e->opts.gpu_batch_seqs > 0 && e->opts.gpu_batch_seqs < n_seqs ? e->opts.gpu_batch_seqs
                                                                           : n_seqs;
    int n_gb = (n_seqs + gb - 1) / gb;

    if (e->kv) ig_kv_call_begin(e, gb);
    /* the embedding rows, on the host table for both engines (the CUDA engine copies them up) */
    ig_weight te = ig_model_tok_embd(e->model);
    IG_TRY(ig_be_embed(e->be, te.data, te.dtype, te.rows, c->d_model, e->ids, T, e->x, err));
    if (c->arch == IG_ARCH_OPT) {
        ig_weight pe = ig_model_pos_embd(e->model);
        for (int64_t t = 0; t < T; t++) {
            int32_t p = e->pos[t] + c->pos_offset;
            IG_TRY(ig_be_embed(e->be, pe.data, pe.dtype, pe.rows, c->d_model, &p, 1, e->h, err));
            IG_TRY(ig_be_add(e->be, e->x + (size_t)t * d, e->h, c->d_model, err));
        }
    }
    if (e->dev) {
        IG_TRY(ig_dev_forward(e, gb, err));
        if (e->kv) {
            ig_kv_call_end(e);
            if (ig_kv_run_io_error(e->kv))
                return ig_error_set(err, IG_ERR_IO, "forward: KV cache: %s",
                                    ig_kv_run_io_error(e->kv));
        }
        for (int s = 0; s < n_seqs; s++) e->seq_len[seqs[s].slot] += seqs[s].n_tokens;
        double total = ig_time_s() - t_start;
        e->stats.other_s += total - (e->stats.attention_s - att0);
        e->stats.forward_calls++;
        e->stats.tokens += T;
        return IG_OK;
    }
    for (int b = 0; b < n_gb; b++) { /* the embeddings go to their home */
        set_gpu_batch(e, b * gb, b * gb + gb < n_seqs ? b * gb + gb : n_seqs);
        IG_TRY(act_move(e, 1, err));
    }
    /* FlexGen's zig-zag: layers outside, GPU batches inside; the layer's weights stay resident
     * for all its GPU batches */
    ig_layer_bufs bufs = {.be = e->be,
                          .x = e->x,
                          .h = e->h,
                          .q = e->q,
                          .k = e->k,
                          .v = e->v,
                          .att = e->att,
                          .f1 = e->f1,
                          .f2 = e->f2,
                          .pos = e->pos,
                          .rope_cos = e->rope_cos,
                          .rope_sin = e->rope_sin,
                          .attn_ws = e->attn_ws,
                          .attn_ws_floats = e->attn_ws_floats};
    for (int l = 0; l < c->n_layer; l++) {
        bufs.kc = e->k_cache[l];
        bufs.vc = e->v_cache[l];
        const ig_layer *L =
            e->opts.weights ? ig_wstream_layer(e->opts.weights, l) : ig_model_layer(e->model, l);
        if (!L) /* a weight load failed (disk I/O); the caches of this call are not valid */
            return ig_error_set(err, IG_ERR_IO, "forward: layer %d weights: %s", l,
                                ig_wstream_error(e->opts.weights));
        for (int b = 0; b < n_gb; b++) {
            set_gpu_batch(e, b * gb, b * gb + gb < n_seqs ? b * gb + gb : n_seqs);
            if (e->kv) ig_kv_gpu_batch(e, b);
            IG_TRY(act_move(e, 0, err));
            IG_TRY(ig_engine_layer_forward(e, l, L, &bufs, err));
            IG_TRY(act_move(e, 1, err));
            e->stats.gpu_batches++;
        }
        if (e->kv && ig_kv_run_io_error(e->kv)) /* KV on disk: a read or write failed */
            return ig_error_set(err, IG_ERR_IO, "forward: layer %d KV cache: %s", l,
                                ig_kv_run_io_error(e->kv));
    }
    if (e->kv) { /* the last stores (on the transfer queue) may still be writing */
        ig_kv_call_end(e);
        if (ig_kv_run_io_error(e->kv))
            return ig_error_set(err, IG_ERR_IO, "forward: KV cache: %s", ig_kv_run_io_error(e->kv));
    }
    for (int b = 0; b < n_gb; b++) {
        set_gpu_batch(e, b * gb, b * gb + gb < n_seqs ? b * gb + gb : n_seqs);
        IG_TRY(act_move(e, 0, err));
    }
    IG_TRY(ig_engine_norm(e, e->be, e->x, ig_model_final_norm_w(e->model),
                          ig_model_final_norm_b(e->model), T, e->hidden, err));
    for (int s = 0; s < n_seqs; s++) e->seq_len[seqs[s].slot] += seqs[s].n_tokens;
    double total = ig_time_s() - t_start;
    e->stats.other_s += total - (e->stats.linear_s - lin0) - (e->stats.attention_s - att0);
    e->stats.forward_calls++;
    e->stats.tokens += T;
    return IG_OK;
}

ig_status ig_engine_forward(ig_engine *e, const ig_seq_tokens *seqs, int n_seqs, ig_error *err) {
    ig_status rc = forward(e, seqs, n_seqs, err);
    if (e->kv) ig_kv_call_end(e); /* also after a failed call: no store of it stays in flight */
    return rc;
}

/* CUDA: the logits come from the device; a device error there (the call has no status) is logged
 * and leaves NaN logits. */
static void cu_logits(ig_engine *e, const int64_t *rows, int64_t row0, int64_t n, float *out) {
    ig_error err;
    ig_error_clear(&err);
    double t0 = ig_time_s();
    if (ig_dev_logits(e, rows, row0, n, out, &err) != IG_OK) {
        IG_WARN("logits: %s", err.msg);
        for (int64_t i = 0; i < n * (int64_t)e->cfg.vocab; i++) out[i] = NAN;
    }
    e->stats.logits_s += ig_time_s() - t0;
}

/* CPU: one GEMM of rows of the hidden states against the lm_head, on the engine's table (host
 * memory: out is written in place). An argument error there is an engine bug. */
static void logits(ig_engine *e, const float *x, int64_t n, float *out) {
    ig_weight w = ig_model_lm_head(e->model);
    ig_error err;
    double t0 = ig_time_s();
    if (ig_be_linear(e->be, x, n, w.cols, w.data, w.dtype, w.rows, NULL, out, &err) != IG_OK)
        ig_assert_fail(err.msg, __FILE__, __LINE__);
    e->stats.logits_s += ig_time_s() - t0;
}

void ig_engine_logits(ig_engine *e, int64_t row0, int64_t n, float *out) {
    IG_ASSERT(row0 >= 0 && n >= 0 && row0 + n <= e->n_rows);
    if (e->dev) {
        cu_logits(e, NULL, row0, n, out);
        return;
    }
    logits(e, e->hidden + (size_t)row0 * (size_t)e->cfg.d_model, n, out);
}

void ig_engine_logits_rows(ig_engine *e, const int64_t *rows, int64_t n, float *out) {
    /* Gather the rows into the scratch h (free after forward), then one GEMM. */
    size_t d = (size_t)e->cfg.d_model;
    IG_ASSERT(n <= e->opts.max_batch_tokens);
    if (e->dev) {
        for (int64_t i = 0; i < n; i++) IG_ASSERT(rows[i] >= 0 && rows[i] < e->n_rows);
        cu_logits(e, rows, 0, n, out);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        IG_ASSERT(rows[i] >= 0 && rows[i] < e->n_rows);
        memcpy(e->h + (size_t)i * d, e->hidden + (size_t)rows[i] * d, d * sizeof(float));
    }
    logits(e, e->h, n, out);
}

int64_t ig_engine_n_rows(const ig_engine *e) {
    return e->n_rows;
}
int ig_engine_seq_len(const ig_engine *e, int slot) {
    return e->seq_len[slot];
}
void ig_engine_seq_reset(ig_engine *e, int slot) {
    e->seq_len[slot] = 0;
    if (e->kv) ig_kv_run_reset_slot(e, slot);
}
const ig_engine_opts *ig_engine_get_opts(const ig_engine *e) {
    return &e->opts;
}
const ig_model *ig_engine_model(const ig_engine *e) {
    return e->model;
}
ig_engine_stats ig_engine_get_stats(const ig_engine *e) {
    ig_engine_stats st = e->stats;
    if (e->act) {
        ig_act_home_stats a = ig_act_home_get_stats(e->act);
        st.act_h2d_bytes = a.h2d_bytes;
        st.act_d2h_bytes = a.d2h_bytes;
        st.act_transfer_s = a.transfer_s;
        st.act_disk_read_bytes = a.disk_read_bytes;
        st.act_disk_write_bytes = a.disk_write_bytes;
    }
    return st;
}
void ig_engine_reset_stats(ig_engine *e) {
    memset(&e->stats, 0, sizeof e->stats);
    if (e->act) ig_act_home_reset_stats(e->act);
    if (e->kv) ig_kv_run_reset_stats(e->kv);
}

ig_kv_stats ig_engine_get_kv_stats(const ig_engine *e) {
    ig_kv_stats z;
    memset(&z, 0, sizeof z);
    return e->kv ? ig_kv_run_stats(e->kv) : z;
}

size_t ig_engine_kv_home_bytes(const ig_engine *e) {
    if (e->kv) return ig_kv_run_home_bytes(e->kv);
    size_t n = 0;
    for (int s = 0; s < e->opts.max_seqs; s++) n += (size_t)e->seq_len[s];
    return n * ig_engine_kv_bytes_per_token(e);
}

size_t ig_engine_kv_home_device_bytes(const ig_engine *e) {
    return e->kv ? ig_kv_run_home_bytes_slots(e->kv, 0, e->opts.kv_device_slots) : 0;
}

size_t ig_engine_kv_device_bytes(const ig_engine *e) {
    return e->kv ? ig_kv_run_device_bytes(e->kv) : 0;
}

size_t ig_engine_kv_row_bytes(const ig_engine *e) {
    return e->kv ? ig_kv_run_row_bytes(e->kv) : (size_t)e->cfg.head_dim * sizeof(float);
}

void ig_engine_policy_budget(const ig_engine *e, ig_policy_budget_info *out) {
    memset(out, 0, sizeof *out);
    if (e->kv) ig_kv_run_policy_budget(e->kv, out);
}

void *ig_engine_policy_state(const ig_engine *e) {
    return e->kv ? ig_kv_run_policy_state(e->kv) : NULL;
}

size_t ig_engine_kv_bytes_per_token(const ig_engine *e) {
    return 2 * (size_t)e->cfg.n_layer * (size_t)e->cfg.n_kv_head * (size_t)e->cfg.head_dim *
           sizeof(float);
}

size_t ig_engine_kv_bytes(const ig_engine *e) {
    return ig_engine_kv_bytes_per_token(e) * (size_t)e->opts.max_ctx * (size_t)e->opts.max_seqs;
}
