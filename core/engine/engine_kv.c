/* The forward pass's KV path when a policy is active. Per layer: the policy selects entries (ahead,
 * from the previous layer's attention input, or at the layer from its queries), the selected rows
 * are read in place from the home tier or copied into a working set, attention runs over them plus
 * the new tokens' rows, the policy observes the probabilities, and the new rows are stored into the
 * home tier, evicting the policy's victims when it is full. Every byte a GPU run would move is
 * counted here; the policy itself never touches KV bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine/engine_internal.h"
#include "core/engine/kv_device.h"
#include "core/base/log.h"
#include "kernels/cpu/attention_gather.h"
#include "kernels/cpu/cpu_kernels.h"
#include "offload/link.h"
#include "offload/wstream.h"
#include "offload/xfer.h"

/* A prefetch: the selected rows of one layer for the call's decode slots, gathered on the transfer
 * queue's thread while the caller computes. */
typedef struct gather_job {
    ig_engine *e;
    int layer, buf, n;
    int slots[256];
    double seconds;  /* from its start on the link to ready_at (without the link: its run time) */
    double ready_at; /* when its rows are there: the consumer waits until then (link_done) */
} gather_job;

/* A decode store: the new rows of one layer for a GPU batch's decode slots, staged in st_k/st_v at
 * the entries st_ent the compute thread took for them, written into the home tier (encoded, or
 * pwrite for slots on disk) on the transfer queue's thread (FlexGen's store_cache). */
typedef struct store_job {
    ig_kv_run *r;
    int layer, n;
    int slots[256];
    double seconds;  /* as gather_job's */
    double ready_at; /* as gather_job's: the staging may be reused from then on */
} store_job;

struct ig_kv_run {
    ig_engine *e;
    const ig_policy_ops *ops; /* = &ops_res */
    ig_policy_ops ops_res;    /* the policy's table resolved: no NULL lifetime hooks */
    ig_be *be;            /* the engine's table, the policy's too (ig_policy_env.be); not owned */
    ig_policy_wq *wq;     /* [L]: each layer's W_q for the policy (ig_policy_env.wq) */
    ig_policy_wq *wq_dev; /* [L]: the CUDA engine's device copies (ig_policy_env.wq_dev) */
    size_t wq_dev_bytes;  /* W_q read ahead, held resident beside a weight stream (create) */
    const ig_link_model *link; /* on: gathers and decode stores of host slots are throttled */
    void *st;
    ig_policy_caps caps;
    ig_kv_home *home;
    int64_t cap; /* entries per (layer, slot, KV head) */
    int contig;  /* dense, f32 rows, never evicts: plain causal attention over the home table */
    int inplace; /* sparse attention reads f32 home rows through index lists */
    /* encoded home rows (f16, n-bit codes) read in place through index lists and decoded inside the
     * attention kernel, on the compute threads, as a GPU's attention kernel decodes the rows the
     * link brought; the transfer thread only times the link (copy access decodes there instead) */
    int decode_attn;
    int direct; /* inplace or decode_attn: the compute thread reads and writes the home rows */
    int dev; /* the working set is in the layer table's memory (kv_device.c): the selected rows are
              * gathered there, decode attention runs there (the CUDA engine's GPU) */
    ig_kv_dev *kd;
    int cpu_attn; /* kv_access cpu (FlexGen's cpu_cache_compute): decode attention on the CPU */
    int L, S, G, H, hd, d;
    int C; /* max_ctx */
    int max_new;
    size_t row_bytes;
    ig_dtype kv_dtype;
    int32_t *sel_e[2];        /* [S][G][cap] selection per layer parity */
    int64_t *sel_n[2];        /* [S][G] */
    unsigned char *sel_ok[2]; /* [S] selection filled for this layer */
    float *ws_k[2], *ws_v[2]; /* copy mode: [S][G][cap][hd] */
    float *pf_k, *pf_v;       /* prefill: [G][cap + max_new][hd] */
    float *colsum;            /* [H][cap + max_new] */
    float *dcolsum, *dcws;    /* dev with column sums: a first chunk's on the table, its ws */
    size_t dcws_floats;
    float *cws; /* workspace of the attention kernel with column sums */
    size_t cws_floats;
    float *gws;
    size_t gws_floats;
    float *probs; /* [H][cap + 1] */
    int64_t probs_stride;
    float *extra_k, *extra_v; /* [G][hd]: the new row as the codec would return it */
    ig_entries_view *views;   /* [S][G] */
    ig_selection *sels;       /* [S]: the decode sequences' selections, in call order */
    int n_dec;
    int *dec; /* indices into e->cur of the call's decode sequences */
    int *dec_slots;
    int64_t *dec_rows; /* [S]: row of each decode sequence of the current GPU batch, from i0 */
    float *xsel;       /* [S][d] */
    float *qsel;       /* [S][H][hd] */
    int32_t *victims;
    int32_t *all_idx; /* [cap] */
    float *shadow_k;  /* recall: [L][S][G][max_ctx][hd] */
    float *rscore;
    unsigned char *rmark;
    ig_xfer *xq; /* copy mode: the transfer queue */
    /* GPU batches of the call: decode sequences [bi[b], bi[b + 1]) of dec; the current one is cb,
     * its decode sequences [i0, i1) */
    int *bi;
    int cb, i0, i1;
    gather_job *jobs; /* [S][2]: one in flight per GPU batch and layer parity */
    uint64_t *ticket; /* [S][2] */
    /* Decode stores on the transfer queue (copy access with a transfer thread): the compute thread
     * takes the entries and updates every piece of metadata, the queue writes the bytes. */
    int async_store;
    store_job *sjobs;    /* [S]: one in flight per GPU batch */
    uint64_t *sticket;   /* [S] */
    float *st_k, *st_v;  /* [S][G][hd]: each decode slot's new rows, staged for its store job */
    int64_t *st_ent;     /* [S][G]: the entries they go to */
    double disk_base[2]; /* disk bytes read / written at the last stats reset */
    double link_free; /* when the link ends the transfers queued so far (the transfer thread's) */
    ig_kv_stats stats;
};

static float *falloc(size_t n, ig_error *err) {
    return ig_aligned_alloc(n * sizeof(float), err);
}

static float dotf(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

ig_status ig_kv_run_create(ig_engine *e, ig_error *err) {
    const ig_engine_opts *o = &e->opts;
    const ig_model_config *c = &e->cfg;
    ig_policy_ops resolved;
    IG_TRY(ig_policy_ops_resolve(o->policy, &resolved, err));
    if (o->kv_dtype != IG_DTYPE_F32 && o->kv_dtype != IG_DTYPE_F16)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "KV dtype %s is not supported (f32 or f16)",
                            ig_dtype_name(o->kv_dtype));
    ig_kv_run *r = ig_calloc(1, sizeof *r, err);
    if (!r) return IG_ERR_NOMEM;
    e->kv = r;
    r->e = e;
    r->ops_res = resolved;
    r->ops = &r->ops_res;
    const ig_policy_ops *ops = r->ops;
    r->L = c->n_layer;
    r->C = o->max_ctx;
    r->S = o->max_seqs;
    r->G = c->n_kv_head;
    r->H = c->n_head;
    r->hd = c->head_dim;
    r->d = c->d_model;
    r->max_new = o->max_batch_tokens;
    r->kv_dtype = o->kv_dtype;
    /* the policy's backend: the engine's own table (on CUDA its context and stream, so that the
     * policy's ops are ordered with the layer's) */
    r->be = e->layer_be;
    ig_policy_params *own_params = NULL;
    const ig_policy_params *params = o->policy_params;
    if (!params) {
        IG_TRY(ig_policy_params_parse(ops, NULL, 0, &own_params, err));
        params = own_params;
    }
    /* the state exists only once init is about to run, so that ig_kv_run_free calls fini only on
     * a state init has seen */
    r->st = ig_calloc(1, ops->state_size ? ops->state_size : 1, err);
    if (!r->st) {
        ig_policy_params_free(own_params);
        return IG_ERR_NOMEM;
    }
    r->wq = ig_calloc((size_t)r->L, sizeof *r->wq, err);
    if (!r->wq) {
        ig_policy_params_free(own_params);
        return IG_ERR_NOMEM;
    }
    for (int l = 0; l < r->L; l++) {
        const ig_layer *ly = ig_model_layer(e->model, l);
        r->wq[l] = (ig_policy_wq){ly->wq.data, ly->wq.dtype, ly->wq.rows, ly->wq.cols, ly->bq};
    }
    if (e->layer_views) { /* the layers as the table reads them: the policy's W_q there */
        r->wq_dev = ig_calloc((size_t)r->L, sizeof *r->wq_dev, err);
        if (!r->wq_dev) {
            ig_policy_params_free(own_params);
            return IG_ERR_NOMEM;
        }
        for (int l = 0; l < r->L; l++) {
            const ig_layer *ly = &e->layer_views[l];
            r->wq_dev[l] =
                (ig_policy_wq){ly->wq.data, ly->wq.dtype, ly->wq.rows, ly->wq.cols, ly->bq};
        }
    }
    ig_policy_env env = {r->wq, c, o->max_seqs, o->max_ctx, o->kv_dtype, r->be, r->wq_dev};
    r->caps.codec.kind = o->kv_dtype == IG_DTYPE_F16 ? IG_KV_CODEC_F16 : IG_KV_CODEC_F32;
    ig_status rc = ops->init(r->st, &env, params, &r->caps, err);
    ig_policy_params_free(own_params);
    if (rc != IG_OK) {
        /* fini is not called for a failed init: the policy cleans up after itself */
        free(r->st);
        r->st = NULL;
        return rc;
    }
    /* A policy that reads W_q one layer ahead (InfiniGen's speculation of layer l during layer
     * l-1) needs layer l's W_q before the weight stream brings layer l (FlexGen's order loads
     * layer l during layer l-1, after the speculation has run). So a GPU run keeps the W_q of
     * the selected layers resident, as the artifact keeps its partial weights; these are whole
     * W_q (this engine projects with the whole matrix: on Llama RoPE sits between projection and
     * skew), in the weights' own storage type. Counted as the policy's device metadata; only for
     * layers whose W_q is placed off the device (a resident one is counted with the weights).
     * Layer 0 is never read ahead: its selection runs inside layer 0, its weights loaded. */
    if (r->caps.reads_wq && o->weights) {
        for (int l = r->caps.dense_layers > 1 ? r->caps.dense_layers : 1; l < r->L; l++) {
            if (ig_wstream_tier(o->weights, l, IG_WT_Q) == IG_TIER_DEVICE) continue;
            const ig_policy_wq *w = &r->wq[l];
            r->wq_dev_bytes += (size_t)w->rows * ig_dtype_row_bytes(w->dtype, w->cols) +
                               (w->bias ? (size_t)w->rows * sizeof(float) : 0);
        }
        if (r->wq_dev_bytes)
            IG_INFO("%s reads each selected layer's W_q one layer ahead; those placed off the "
                    "device (%.1f MiB) are counted as the policy's device metadata, held "
                    "resident as a GPU run would",
                    ops->name, (double)r->wq_dev_bytes / (1 << 20));
    }
    int64_t cap = 1;
    for (int l = 0; l < r->L; l++) {
        int64_t cl = ops->capacity(r->st, l, o->max_ctx);
        if (cl > cap) cap = cl;
    }
    if (cap > o->max_ctx) cap = o->max_ctx;
    r->cap = cap;
    if (o->kv_disk_slots < 0 || o->kv_disk_slots > o->max_seqs - o->kv_device_slots ||
        (o->kv_disk_slots > 0 && !o->kv_disk))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "engine: kv_disk_slots %d needs a disk tier and at most max_seqs %d - "
                            "kv_device_slots %d slots",
                            o->kv_disk_slots, o->max_seqs, o->kv_device_slots);
    ig_kv_home_opts ho = {r->L,
                          r->S,
                          r->G,
                          r->hd,
                          cap,
                          r->caps.codec,
                          e->opts.kv_topo,
                          e->opts.kv_numa,
                          o->kv_disk_slots > 0 ? o->kv_disk : NULL,
                          r->S - o->kv_disk_slots};
    IG_TRY(ig_kv_home_create(&ho, &r->home, err));
    r->row_bytes = ig_kv_home_row_bytes(r->home);
    int never_evicts = 1;
    for (int l = 0; l < r->L; l++)
        if (ops->capacity(r->st, l, o->max_ctx) < o->max_ctx) never_evicts = 0;
    int f32_rows = r->caps.codec.kind == IG_KV_CODEC_F32;
    ig_kv_access acc = o->kv_access;
    if (acc == IG_KV_ACCESS_CPU) {
        r->cpu_attn = 1;
        acc = IG_KV_ACCESS_AUTO;
    }
    if (r->be->caps.device_memory && !r->cpu_attn) { /* the working set in the table's memory */
        if (o->kv_disk_slots > 0)
            return ig_error_set(err, IG_ERR_UNSUPPORTED,
                                "%s backend: KV homed on disk is not supported (use the CPU, or "
                                "kv_access cpu)",
                                r->be->caps.name);
        r->dev = 1;
        acc = IG_KV_ACCESS_COPY;
    }
    if (o->kv_disk_slots > 0) { /* rows on disk have no address: attention reads a working set */
        if (acc == IG_KV_ACCESS_INPLACE)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "KV on disk is read through a working set: in-place access is "
                                "not possible (use auto or copy)");
        acc = IG_KV_ACCESS_COPY;
    }
    /* The link model times the KV rows a policy fetches from host memory (see kv_link): with copy
     * access the transfer thread gathers them; with in-place access (attention reads the rows where
     * they live, as if already moved) it only times them, as a GPU's copy engine moves the bytes
     * without the host's cores. Either way the compute thread waits for the modelled end
     * (link_done). */
    if (o->kv_link && o->kv_link->on && !r->dev && !r->cpu_attn && r->S > o->kv_device_slots)
        r->link = o->kv_link;
    r->contig = r->caps.dense && never_evicts && f32_rows && acc != IG_KV_ACCESS_COPY &&
                !r->caps.wants_probs && !r->caps.wants_prefill_colsum;
    r->inplace = f32_rows && acc != IG_KV_ACCESS_COPY;
    r->decode_attn = !f32_rows && !r->dev && acc != IG_KV_ACCESS_COPY;
    r->direct = r->inplace || r->decode_attn;

    size_t S = (size_t)r->S, G = (size_t)r->G, H = (size_t)r->H, hd = (size_t)r->hd;
    size_t capz = (size_t)cap, pf_rows = capz + (size_t)r->max_new;
    for (int b = 0; b < 2; b++) {
        r->sel_e[b] = ig_malloc(S * G * capz * sizeof(int32_t), err);
        r->sel_n[b] = ig_calloc(S * G, sizeof(int64_t), err);
        r->sel_ok[b] = ig_calloc(S, 1, err);
        if (!r->sel_e[b] || !r->sel_n[b] || !r->sel_ok[b]) return IG_ERR_NOMEM;
        if (!r->direct && !r->dev) {
            r->ws_k[b] = falloc(S * G * capz * hd, err);
            r->ws_v[b] = falloc(S * G * capz * hd, err);
            if (!r->ws_k[b] || !r->ws_v[b]) return IG_ERR_NOMEM;
        }
    }
    if (!r->direct || r->link) {
        /* A transfer thread on a core that compute also uses slows both down (spinning OpenMP
         * threads lose their time slices): by default only start one on a spare core. */
        int threads = o->xfer_threads;
        if (threads == 0) threads = sysconf(_SC_NPROCESSORS_ONLN) > ig_cpu_get_threads() ? 1 : 0;
        /* a throttled copy mostly sleeps: on its own thread it overlaps compute, as a copy
         * stream does, even on a machine with no spare core */
        if (threads == 0 && r->link) threads = 1;
        if (r->dev) threads = 0; /* gathers go to the GPU's copy stream; stores stay inline */
        IG_TRY(ig_xfer_create(threads > 0 ? threads : 0, &r->xq, err));
        /* Without a thread a job would run inside submit: the stores stay as they were. */
        r->async_store = threads > 0 && (!r->contig || r->link);
        if (r->async_store) {
            r->sjobs = ig_calloc(S, sizeof *r->sjobs, err);
            r->sticket = ig_calloc(S, sizeof *r->sticket, err);
            r->st_k = falloc(S * G * hd, err);
            r->st_v = falloc(S * G * hd, err);
            r->st_ent = ig_calloc(S * G, sizeof(int64_t), err);
            if (!r->sjobs || !r->sticket || !r->st_k || !r->st_v || !r->st_ent) return IG_ERR_NOMEM;
        }
    }
    r->pf_k = falloc(G * pf_rows * hd, err);
    r->pf_v = falloc(G * pf_rows * hd, err);
    r->colsum = falloc(H * pf_rows, err);
    if (r->caps.wants_prefill_colsum) {
        r->cws_floats = ig_cpu_attention_colsum_ws_floats(r->max_new, (int64_t)pf_rows, r->H, r->hd,
                                                          ig_cpu_get_threads());
        r->cws = falloc(r->cws_floats, err);
        if (!r->cws) return IG_ERR_NOMEM;
    }
    r->probs_stride = (int64_t)capz + 1;
    r->probs = falloc(H * (size_t)r->probs_stride, err);
    r->gws_floats = ig_cpu_attention_gather_ws_floats(r->H, (int64_t)capz + 1);
    r->gws = falloc(r->gws_floats, err);
    r->extra_k = falloc(G * hd, err);
    r->extra_v = falloc(G * hd, err);
    r->views = ig_calloc(S * G, sizeof *r->views, err);
    r->sels = ig_calloc(S, sizeof *r->sels, err);
    r->dec = ig_calloc(S, sizeof(int), err);
    r->dec_slots = ig_calloc(S, sizeof(int), err);
    r->dec_rows = ig_calloc(S, sizeof(int64_t), err);
    r->bi = ig_calloc(S + 1, sizeof(int), err);
    r->jobs = ig_calloc(2 * S, sizeof *r->jobs, err);
    r->ticket = ig_calloc(2 * S, sizeof *r->ticket, err);
    r->xsel = falloc(S * (size_t)r->d, err);
    r->qsel = falloc(S * H * hd, err);
    r->victims = ig_malloc((capz + 1) * sizeof(int32_t), err);
    r->all_idx = ig_malloc(capz * sizeof(int32_t), err);
    if (!r->pf_k || !r->pf_v || !r->colsum || !r->probs || !r->gws || !r->extra_k || !r->extra_v ||
        !r->views || !r->sels || !r->dec || !r->dec_slots || !r->dec_rows || !r->bi || !r->jobs ||
        !r->ticket || !r->xsel || !r->qsel || !r->victims || !r->all_idx)
        return IG_ERR_NOMEM;
    if (o->recall) {
        r->shadow_k = falloc((size_t)r->L * S * G * (size_t)o->max_ctx * hd, err);
        r->rscore = falloc(2 * (size_t)o->max_ctx, err);
        r->rmark = ig_calloc((size_t)o->max_ctx, 1, err);
        if (!r->shadow_k || !r->rscore || !r->rmark) return IG_ERR_NOMEM;
    }
    if (r->dev)
        IG_TRY(ig_kv_dev_create(r->be, r->home, &r->caps.codec, r->S, r->G, r->H, r->hd, cap,
                                &r->kd, err));
    if (r->dev && r->caps.wants_prefill_colsum) { /* a first chunk's sums on the table */
        r->dcolsum = ig_be_alloc(r->be, H * (size_t)r->max_new * sizeof(float), err);
        if (!r->dcolsum) return IG_ERR_NOMEM;
        r->dcws_floats = ig_be_attention_colsum_ws(r->be, r->max_new, r->max_new, r->H, r->hd);
        if (r->dcws_floats) {
            r->dcws = ig_be_alloc(r->be, r->dcws_floats * sizeof(float), err);
            if (!r->dcws) return IG_ERR_NOMEM;
        }
    }
    return IG_OK;
}

void ig_kv_run_free(ig_kv_run *r) {
    if (!r) return;
    ig_xfer_free(r->xq); /* runs the jobs still queued (stores included) before it returns */
    if (r->dcolsum) ig_be_release(r->be, r->dcolsum);
    if (r->dcws) ig_be_release(r->be, r->dcws);
    ig_kv_dev_free(r->kd); /* waits for the table's work reading the home, unregisters it */
    if (r->st && r->ops) r->ops->fini(r->st);
    free(r->st);
    free(r->wq);
    free(r->wq_dev);
    ig_kv_home_free(r->home);
    for (int b = 0; b < 2; b++) {
        free(r->sel_e[b]);
        free(r->sel_n[b]);
        free(r->sel_ok[b]);
        free(r->ws_k[b]);
        free(r->ws_v[b]);
    }
    free(r->pf_k);
    free(r->pf_v);
    free(r->colsum);
    free(r->cws);
    free(r->probs);
    free(r->gws);
    free(r->extra_k);
    free(r->extra_v);
    free(r->views);
    free(r->sels);
    free(r->dec);
    free(r->dec_slots);
    free(r->dec_rows);
    free(r->bi);
    free(r->jobs);
    free(r->ticket);
    free(r->sjobs);
    free(r->sticket);
    free(r->st_k);
    free(r->st_v);
    free(r->st_ent);
    free(r->xsel);
    free(r->qsel);
    free(r->victims);
    free(r->all_idx);
    free(r->shadow_k);
    free(r->rscore);
    free(r->rmark);
    free(r);
}

static void wait_stores(ig_kv_run *r);

void ig_kv_run_reset_slot(ig_engine *e, int slot) {
    ig_kv_run *r = e->kv;
    wait_stores(r); /* a store in flight must not land in the slot's next sequence */
    ig_kv_home_reset_slot(r->home, slot);
    if (r->ops->reset_slot) r->ops->reset_slot(r->st, slot);
}

ig_kv_stats ig_kv_run_stats(const ig_kv_run *r) {
    ig_kv_stats s = r->stats;
    s.disk_read_bytes = ig_kv_home_disk_read_bytes(r->home) - r->disk_base[0];
    s.disk_write_bytes = ig_kv_home_disk_write_bytes(r->home) - r->disk_base[1];
    return s;
}
void ig_kv_run_reset_stats(ig_kv_run *r) {
    memset(&r->stats, 0, sizeof r->stats);
    r->disk_base[0] = ig_kv_home_disk_read_bytes(r->home);
    r->disk_base[1] = ig_kv_home_disk_write_bytes(r->home);
}
const char *ig_kv_run_io_error(const ig_kv_run *r) {
    return ig_kv_home_io_error(r->home);
}
size_t ig_kv_run_home_bytes(const ig_kv_run *r) {
    return ig_kv_home_resident_bytes(r->home);
}
size_t ig_kv_run_home_bytes_slots(const ig_kv_run *r, int slot0, int slot1) {
    return ig_kv_home_resident_bytes_slots(r->home, slot0, slot1);
}
void *ig_kv_run_policy_state(const ig_kv_run *r) {
    return r->st;
}
size_t ig_kv_run_row_bytes(const ig_kv_run *r) {
    return r->row_bytes;
}

size_t ig_kv_run_device_bytes(const ig_kv_run *r) {
    /* The working set of one layer being computed plus one being prefetched, for every slot at the
     * policy's capacity, plus the policy's own device metadata. */
    size_t elem = ig_dtype_size(r->kv_dtype); /* a GPU run keeps the working set in the KV dtype */
    size_t ws = 2 * 2 * (size_t)r->S * (size_t)r->G * (size_t)r->cap * (size_t)r->hd * elem;
    if (r->cpu_attn) ws = 0; /* attention on the CPU: no working set on the device */
    return ws + (r->ops->device_bytes ? r->ops->device_bytes(r->st) : 0) + r->wq_dev_bytes;
}

void ig_kv_run_policy_budget(const ig_kv_run *r, ig_policy_budget_info *out) {
    out->dense_layers = r->caps.dense_layers;
    out->meta_device_bytes =
        (r->ops->device_bytes ? r->ops->device_bytes(r->st) : 0) + r->wq_dev_bytes;
    out->wq_device_bytes = r->wq_dev_bytes;
    out->meta_host_bytes = r->ops->host_bytes ? r->ops->host_bytes(r->st) : 0;
    out->kv_cache_bytes =
        2 * (size_t)r->L * (size_t)r->S * (size_t)r->G * (size_t)r->C * r->row_bytes;
    if (!r->ops->budget || !r->ops->budget(r->st, out->budget, sizeof out->budget))
        snprintf(out->budget, sizeof out->budget, "every token, every layer");
}

static int is_decode(const ig_engine *e, int s) {
    return e->cur[s].n_tokens == 1 && e->p0[s] > 0;
}

void ig_kv_call_begin(ig_engine *e, int gpu_batch_seqs) {
    ig_kv_run *r = e->kv;
    wait_stores(r); /* normally none: the previous call's end waited */
    r->n_dec = 0;
    for (int s = 0; s < e->n_cur; s++) {
        if (s % gpu_batch_seqs == 0) r->bi[s / gpu_batch_seqs] = r->n_dec;
        if (is_decode(e, s)) {
            r->dec[r->n_dec] = s;
            r->dec_slots[r->n_dec] = e->cur[s].slot;
            r->n_dec++;
        }
    }
    r->bi[(e->n_cur + gpu_batch_seqs - 1) / gpu_batch_seqs] = r->n_dec;
    ig_kv_gpu_batch(e, 0);
    memset(r->sel_ok[0], 0, (size_t)r->S);
    memset(r->sel_ok[1], 0, (size_t)r->S);
    if (r->n_dec > 0) r->stats.decode_calls++;
    if (r->kd) ig_kv_dev_clear_error(r->kd);
}

void ig_kv_gpu_batch(ig_engine *e, int b) {
    ig_kv_run *r = e->kv;
    r->cb = b;
    r->i0 = r->bi[b];
    r->i1 = r->bi[b + 1];
}

/* Entry views of the current GPU batch's decode sequences, from index 0. */
static void fill_views(ig_engine *e, int layer) {
    ig_kv_run *r = e->kv;
    for (int i = r->i0; i < r->i1; i++) {
        int s = r->dec[i], slot = e->cur[s].slot;
        for (int g = 0; g < r->G; g++) {
            ig_entries_view *v = &r->views[(size_t)(i - r->i0) * (size_t)r->G + (size_t)g];
            v->pos = ig_kv_home_pos(r->home, layer, slot, g);
            v->high_water = ig_kv_home_high_water(r->home, layer, slot, g);
            v->n_used = ig_kv_home_n_used(r->home, layer, slot, g);
            v->n_tokens = e->p0[s];
        }
    }
}

static ig_selection selection_of(ig_kv_run *r, int buf, int slot) {
    ig_selection sel = {r->sel_e[buf] + (size_t)slot * (size_t)r->G * (size_t)r->cap,
                        r->sel_n[buf] + (size_t)slot * (size_t)r->G, r->cap};
    return sel;
}

/* Checks a policy's selection: entries in range, in use, ascending. A broken selection is a bug in
 * the policy, not bad input. */
static void check_selection(ig_kv_run *r, int layer, int slot, const ig_selection *sel) {
    for (int g = 0; g < r->G; g++) {
        const int32_t *pos = ig_kv_home_pos(r->home, layer, slot, g);
        int64_t hw = ig_kv_home_high_water(r->home, layer, slot, g);
        IG_ASSERT(sel->n[g] >= 0 && sel->n[g] <= hw);
        const int32_t *ent = sel->entries + (size_t)g * (size_t)sel->max_per_head;
        for (int64_t j = 0; j < sel->n[g]; j++) {
            IG_ASSERT(ent[j] >= 0 && ent[j] < hw && pos[ent[j]] >= 0);
            IG_ASSERT(j == 0 || ent[j] > ent[j - 1]);
        }
    }
}

/* Dense selection: every entry in use, ascending. */
static void select_all(ig_kv_run *r, int layer, int slot, ig_selection *sel) {
    for (int g = 0; g < r->G; g++) {
        const int32_t *pos = ig_kv_home_pos(r->home, layer, slot, g);
        int64_t hw = ig_kv_home_high_water(r->home, layer, slot, g), n = 0;
        int32_t *ent = sel->entries + (size_t)g * (size_t)sel->max_per_head;
        for (int64_t i = 0; i < hw; i++)
            if (pos[i] >= 0) ent[n++] = (int32_t)i;
        sel->n[g] = n;
    }
}

/* Copy mode: the selected rows of (layer, slot) into the working set (decoded to f32). */
static void gather(ig_engine *e, int layer, int buf, int slot) {
    ig_kv_run *r = e->kv;
    ig_selection sel = selection_of(r, buf, slot);
    for (int g = 0; g < r->G; g++) {
        size_t off = ((size_t)slot * (size_t)r->G + (size_t)g) * (size_t)r->cap * (size_t)r->hd;
        ig_kv_home_read(r->home, layer, slot, g, sel.entries + (size_t)g * (size_t)r->cap, sel.n[g],
                        r->ws_k[buf] + off, r->ws_v[buf] + off);
    }
}

/* A job's end on the transfer thread: when its bytes are there on the link's one clock (every
 * transfer of this run in queue order, stores and gathers alike, as when each job waited out its
 * own time on the thread; ig_link_schedule), kept in ready_at for the thread that needs them
 * (link_wait), the transfer thread going on at once. Sleeping there until the end instead, beside
 * two compute threads on a 2-core machine, its wake-ups came ~150 us late, and the spin it used to
 * be on time took a core from the compute threads. Returns the job's time: from its start on the
 * link to ready_at (without link bytes, its own run time). */
static double link_done(ig_kv_run *r, ig_link_dir dir, double t0, size_t bytes, double *ready_at) {
    double start;
    *ready_at = ig_link_schedule(r->link, dir, &r->link_free, t0, bytes, ig_time_s(), &start);
    return *ready_at - start;
}

/* The consumer's side of link_done: waits until ready_at; returns the seconds waited. */
static double link_wait(double ready_at) {
    double now = ig_time_s();
    if (ready_at <= now) return 0;
    ig_link_wait_until(ready_at);
    return ig_time_s() - now;
}

static void gather_job_run(void *arg) {
    gather_job *j = arg;
    ig_kv_run *r = j->e->kv;
    double t0 = ig_time_s();
    size_t bytes = 0;
    for (int i = 0; i < j->n; i++) {
        if (!r->direct) gather(j->e, j->layer, j->buf, j->slots[i]);
        if (!r->link || j->slots[i] < j->e->opts.kv_device_slots) continue;
        if (r->contig) { /* every row in use, no selection made: as decode_seq counts them */
            for (int g = 0; g < r->G; g++)
                bytes +=
                    2 * (size_t)ig_kv_home_n_used(r->home, j->layer, j->slots[i], g) * r->row_bytes;
        } else {
            ig_selection sel = selection_of(r, j->buf, j->slots[i]);
            for (int g = 0; g < r->G; g++) bytes += 2 * (size_t)sel.n[g] * r->row_bytes;
        }
    }
    /* the job as one copy over the link: the bytes count_h2d counts for these slots (in place:
     * the time only, attention reads the rows where they are) */
    j->seconds = link_done(r, IG_LINK_H2D, t0, bytes, &j->ready_at);
}

/* Queues the gather of `layer`'s selected rows for the current GPU batch's decode slots. */
static void submit_gather(ig_engine *e, int layer) {
    ig_kv_run *r = e->kv;
    int buf = layer & 1, q = 2 * r->cb + buf, n = r->i1 - r->i0;
    gather_job *j = &r->jobs[q];
    IG_ASSERT(r->ticket[q] == 0 && n <= 256);
    if (r->dev) { /* on the table's copy queue, ordered by event q */
        ig_kv_dev_gather(r->kd, layer, buf, q, r->i0, n, r->dec_slots + r->i0, r->sel_e[buf],
                         r->sel_n[buf]);
        r->ticket[q] = 1;
        return;
    }
    j->e = e;
    j->layer = layer;
    j->buf = buf;
    j->n = n;
    memcpy(j->slots, r->dec_slots + r->i0, (size_t)n * sizeof(int));
    r->ticket[q] = ig_xfer_submit(r->xq, gather_job_run, j);
}

/* Waits for `layer`'s gather of the current GPU batch, if one is in flight. */
static void wait_gather(ig_kv_run *r, int layer) {
    int q = 2 * r->cb + (layer & 1);
    if (!r->ticket[q]) return;
    if (r->dev) { /* the table's queue waits for the copy queue (no host block) */
        ig_kv_dev_wait(r->kd, q);
        r->ticket[q] = 0;
        return;
    }
    r->stats.transfer_wait_s += ig_xfer_wait(r->xq, r->ticket[q]);
    r->stats.transfer_wait_s += link_wait(r->jobs[q].ready_at);
    r->stats.transfer_s += r->jobs[q].seconds;
    r->ticket[q] = 0;
}

/* Waits for the store job of GPU batch b, if one is in flight. */
static void wait_store(ig_kv_run *r, int b) {
    if (!r->async_store || !r->sticket[b]) return;
    r->stats.transfer_wait_s += ig_xfer_wait(r->xq, r->sticket[b]);
    r->stats.transfer_wait_s += link_wait(r->sjobs[b].ready_at);
    r->stats.transfer_s += r->sjobs[b].seconds;
    r->sticket[b] = 0;
}

static void wait_stores(ig_kv_run *r) {
    if (!r->async_store) return;
    for (int b = 0; b < r->S; b++) wait_store(r, b);
}

void ig_kv_call_end(ig_engine *e) {
    ig_kv_run *r = e->kv;
    wait_stores(r);
    /* a call that failed midway (a disk error) may leave the next layer's gather queued: wait
     * for it, so the next call starts with no ticket held */
    for (int q = 0; q < 2 * r->S; q++)
        if (r->ticket[q]) {
            r->stats.transfer_wait_s += ig_xfer_wait(r->xq, r->ticket[q]);
            r->stats.transfer_wait_s += link_wait(r->jobs[q].ready_at);
            r->stats.transfer_s += r->jobs[q].seconds;
            r->ticket[q] = 0;
        }
}

static void store_job_run(void *arg) {
    store_job *j = arg;
    ig_kv_run *r = j->r;
    double t0 = ig_time_s();
    size_t G = (size_t)r->G, hd = (size_t)r->hd, bytes = 0;
    for (int i = 0; i < j->n; i++) {
        size_t slot = (size_t)j->slots[i];
        for (size_t g = 0; g < G && !r->direct; g++) { /* direct: written by store_new */
            size_t k = slot * G + g;
            ig_kv_home_write_rows(r->home, j->layer, (int)slot, (int)g, r->st_ent[k],
                                  r->st_k + k * hd, r->st_v + k * hd);
        }
        if (r->link && (int)slot >= r->e->opts.kv_device_slots) bytes += 2 * G * r->row_bytes;
    }
    j->seconds = link_done(r, IG_LINK_D2H, t0, bytes, &j->ready_at);
}

/* Queues the store of `layer`'s new rows of the current GPU batch's decode slots (staged by
 * store_new). Later gathers of these rows are queued after it (FIFO). On the compute thread, copy
 * access reads home rows only in prefill_seq, of a slot that is not decoding in this call, so of
 * rows whose stores the previous call's end (ig_kv_call_end) has waited for; a slot reset waits
 * too. */
static void submit_store(ig_engine *e, int layer) {
    ig_kv_run *r = e->kv;
    int n = r->i1 - r->i0;
    store_job *j = &r->sjobs[r->cb];
    IG_ASSERT(r->sticket[r->cb] == 0 && n <= 256);
    j->r = r;
    j->layer = layer;
    j->n = n;
    memcpy(j->slots, r->dec_slots + r->i0, (size_t)n * sizeof(int));
    r->sticket[r->cb] = ig_xfer_submit(r->xq, store_job_run, j);
    r->stats.store_jobs++;
}

static void run_select_ahead(ig_engine *e, int layer) {
    ig_kv_run *r = e->kv;
    int buf = layer & 1;
    double t0 = ig_time_s();
    fill_views(e, layer);
    int n = r->i1 - r->i0;
    for (int i = 0; i < n; i++) {
        int s = r->dec[r->i0 + i];
        memcpy(r->xsel + (size_t)i * (size_t)r->d, e->h + (size_t)e->row0[s] * (size_t)r->d,
               (size_t)r->d * sizeof(float));
    }
    for (int i = 0; i < n; i++) r->sels[i] = selection_of(r, buf, r->dec_slots[r->i0 + i]);
    r->ops->select_ahead(r->st, layer, n, r->dec_slots + r->i0, r->xsel, r->views, r->sels);
    r->stats.select_s += ig_time_s() - t0;
    for (int i = r->i0; i < r->i1; i++) {
        int slot = r->dec_slots[i];
        ig_selection sel = selection_of(r, buf, slot);
        check_selection(r, layer, slot, &sel);
        r->sel_ok[buf][slot] = 1;
    }
    if (!r->direct || r->link) submit_gather(e, layer);
}

/* Dense selection of `layer` made ahead (its resident set cannot change before the layer runs),
 * with its gather queued: copy mode then overlaps the transfer with the previous layer. */
static void dense_ahead(ig_engine *e, int layer) {
    ig_kv_run *r = e->kv;
    int buf = layer & 1;
    double t0 = ig_time_s();
    for (int i = r->i0; i < r->i1; i++) {
        ig_selection sel = selection_of(r, buf, r->dec_slots[i]);
        select_all(r, layer, r->dec_slots[i], &sel);
        r->sel_ok[buf][r->dec_slots[i]] = 1;
    }
    r->stats.select_s += ig_time_s() - t0;
    submit_gather(e, layer);
}

static void begin_step(ig_engine *e, int layer) {
    ig_kv_run *r = e->kv;
    if (r->i1 == r->i0) return;
    if (r->contig) { /* no selection: only the link's time for the rows, ahead as below */
        if (!r->link) return;
        if (layer == 0) submit_gather(e, 0);
        if (layer + 1 < r->L) submit_gather(e, layer + 1);
        return;
    }
    if (r->caps.dense) {
        if (r->direct && !r->link) return;
        if (layer == 0) dense_ahead(e, 0);
        if (layer + 1 < r->L) dense_ahead(e, layer + 1);
        return;
    }
    if (!r->ops->select_ahead) return;
    if (layer == 0) run_select_ahead(e, 0);
    if (layer + 1 < r->L) run_select_ahead(e, layer + 1);
}

/* Makes room for one more entry in (layer, slot, head) for a sequence of n_after tokens. */
static void ensure_room(ig_engine *e, int layer, int slot, int head, int64_t n_after) {
    ig_kv_run *r = e->kv;
    int64_t cap = r->ops->capacity(r->st, layer, n_after);
    if (cap > r->cap) cap = r->cap;
    IG_ASSERT(cap >= 1);
    int64_t used = ig_kv_home_n_used(r->home, layer, slot, head);
    if (used + 1 <= cap) return;
    int want = (int)(used + 1 - cap);
    IG_ASSERT(r->ops->evict != NULL); /* a policy that limits capacity must choose victims */
    ig_entries_view v = {ig_kv_home_pos(r->home, layer, slot, head),
                         ig_kv_home_high_water(r->home, layer, slot, head), used, n_after};
    int got = r->ops->evict(r->st, layer, slot, head, &v, want, r->victims);
    IG_ASSERT(got == want);
    for (int i = 0; i < got; i++) {
        const int32_t *pos = ig_kv_home_pos(r->home, layer, slot, head);
        IG_ASSERT(r->victims[i] >= 0 && r->victims[i] < v.high_water && pos[r->victims[i]] >= 0);
        ig_kv_home_release(r->home, layer, slot, head, r->victims[i]);
        if (r->ops->on_evict) r->ops->on_evict(r->st, layer, slot, head, r->victims[i]);
    }
    r->stats.evictions += got;
}

/* Stores the new rows of sequence s (rows row0.. of e->k / e->v) into the home tier. A decode
 * sequence with async stores only takes its entries and updates the metadata here: its rows are
 * staged for the GPU batch's store job (submit_store), which writes the bytes. */
static void store_new(ig_engine *e, int layer, int s) {
    ig_kv_run *r = e->kv;
    const ig_seq_tokens *q = &e->cur[s];
    size_t kvd = (size_t)r->G * (size_t)r->hd;
    int64_t n_after = e->p0[s] + q->n_tokens;
    int async = r->async_store && is_decode(e, s) && !r->direct;
    double t0 = ig_time_s();
    for (int i = 0; i < q->n_tokens; i++) {
        size_t row = (size_t)(e->row0[s] + i);
        int32_t pos = e->p0[s] + i;
        for (int g = 0; g < r->G; g++) {
            const float *k = e->k + row * kvd + (size_t)g * (size_t)r->hd;
            const float *v = e->v + row * kvd + (size_t)g * (size_t)r->hd;
            if (!r->contig) ensure_room(e, layer, q->slot, g, n_after);
            int64_t ent = ig_kv_home_take(r->home, layer, q->slot, g);
            IG_ASSERT(ent >= 0);
            if (async) {
                /* The job copies from a staged copy, not from e->k / e->v: the next layer's
                 * projections of this GPU batch overwrite those rows while the job may still be
                 * queued. The other choice, waiting for the job before those projections, would
                 * also wait there for the next layer's gather queued ahead of it; with staging
                 * (G x hd x 2 floats per sequence) the wait moves to the next layer's store of
                 * the batch, after its attention (ig_kv_layer_attention), when the job has had a
                 * whole layer to run. */
                size_t st = (size_t)q->slot * (size_t)r->G + (size_t)g;
                memcpy(r->st_k + st * (size_t)r->hd, k, (size_t)r->hd * sizeof(float));
                memcpy(r->st_v + st * (size_t)r->hd, v, (size_t)r->hd * sizeof(float));
                r->st_ent[st] = ent;
                ig_kv_home_set_pos(r->home, layer, q->slot, g, ent, pos);
            } else {
                ig_kv_home_write(r->home, layer, q->slot, g, ent, pos, k, v);
            }
            if (r->ops->on_append) r->ops->on_append(r->st, layer, q->slot, g, ent, pos, k, v);
            if (r->shadow_k)
                memcpy(r->shadow_k +
                           ((((size_t)layer * (size_t)r->S + (size_t)q->slot) * (size_t)r->G +
                             (size_t)g) *
                                (size_t)e->opts.max_ctx +
                            (size_t)pos) *
                               (size_t)r->hd,
                       k, (size_t)r->hd * sizeof(float));
        }
    }
    double bytes = 2.0 * (double)q->n_tokens * (double)r->G * (double)r->row_bytes;
    if (q->slot < e->opts.kv_device_slots) /* homed on the device: nothing crosses the link */
        bytes = 0;
    if (is_decode(e, s))
        r->stats.d2h_bytes += bytes;
    else
        r->stats.prefill_d2h_bytes += bytes;
    r->stats.store_s += ig_time_s() - t0;
}

/* Whether sequence s's prefill attention runs on the layer's table (a first chunk, the working set
 * in the table's memory) instead of on the host over a copy of the rows. The new rows are laid out
 * [kv_head][token][hd] in the table's f1 (d_ffn floats per row). */
static int prefill_on_table(const ig_engine *e, int s) {
    const ig_kv_run *r = e->kv;
    size_t kvd = (size_t)r->G * (size_t)r->hd;
    return r->dev && !is_decode(e, s) && e->p0[s] == 0 && 2 * kvd <= (size_t)e->cfg.d_ffn;
}

/* That attention: the new rows are the whole context; [token][kv_head][hd] rows are not the
 * kernel's [kv_head][token][hd], so they go through f1 as scratch. With column sums wanted they are
 * computed there too and come down into r->colsum, [H][n_tokens]. */
static ig_status prefill_table(ig_engine *e, const ig_layer_bufs *b, int s, ig_error *err) {
    const ig_kv_run *r = e->kv;
    size_t hd = (size_t)r->hd, kvd = (size_t)r->G * hd, qd = (size_t)r->H * hd;
    size_t sr = (size_t)e->row0[s];
    int64_t n = e->cur[s].n_tokens;
    float *kt = b->f1, *vt = b->f1 + (size_t)n * kvd;
    for (int g = 0; g < r->G; g++) {
        IG_TRY(ig_be_copy2d(b->be, kt + (size_t)g * (size_t)n * hd, hd * sizeof(float),
                            b->k + sr * kvd + (size_t)g * hd, kvd * sizeof(float),
                            hd * sizeof(float), (size_t)n, err));
        IG_TRY(ig_be_copy2d(b->be, vt + (size_t)g * (size_t)n * hd, hd * sizeof(float),
                            b->v + sr * kvd + (size_t)g * hd, kvd * sizeof(float),
                            hd * sizeof(float), (size_t)n, err));
    }
    float scale = 1.0f / sqrtf((float)r->hd);
    if (!r->caps.wants_prefill_colsum)
        return ig_be_attention(b->be, b->q + sr * qd, n, 0, kt, vt, n, r->H, r->G, r->hd, scale,
                               b->attn_ws, b->attn_ws_floats, b->att + sr * qd, err);
    size_t cs_bytes = (size_t)r->H * (size_t)n * sizeof(float);
    memset(r->colsum, 0, cs_bytes);
    IG_TRY(ig_be_upload(b->be, r->dcolsum, r->colsum, cs_bytes, err));
    IG_TRY(ig_be_attention_colsum(b->be, b->q + sr * qd, n, 0, kt, vt, n, r->H, r->G, r->hd, scale,
                                  r->dcws, r->dcws_floats, r->dcolsum, n, b->att + sr * qd, err));
    return ig_be_download(b->be, r->colsum, r->dcolsum, cs_bytes, err);
}

/* Prefill (or a chunk of it) of sequence s: dense causal attention over the existing entries and
 * the new rows, then the policy sees it, then the rows are stored. */
static ig_status prefill_seq(ig_engine *e, int layer, int s, const ig_layer_bufs *b,
                             ig_error *err) {
    ig_kv_run *r = e->kv;
    const ig_seq_tokens *q = &e->cur[s];
    const ig_model_config *c = &e->cfg;
    size_t qd = (size_t)r->H * (size_t)r->hd, kvd = (size_t)r->G * (size_t)r->hd;
    size_t hd = (size_t)r->hd, r0 = (size_t)e->row0[s];
    float scale = 1.0f / sqrtf((float)c->head_dim);
    if (r->contig) {
        store_new(e, layer, s);
        double t0 = ig_time_s();
        IG_TRY(ig_be_attention(e->be, e->q + r0 * qd, q->n_tokens, e->p0[s],
                               ig_kv_home_k_base(r->home, layer, q->slot, 0),
                               ig_kv_home_v_base(r->home, layer, q->slot, 0), r->cap, c->n_head,
                               c->n_kv_head, c->head_dim, scale, e->attn_ws, e->attn_ws_floats,
                               e->att + r0 * qd, err));
        r->stats.attention_s += ig_time_s() - t0;
        if (r->ops->on_prefill) {
            ig_prefill_view v = {q->n_tokens,
                                 e->p0[s],
                                 e->q + r0 * qd,
                                 e->k + r0 * kvd,
                                 e->h + r0 * (size_t)r->d,
                                 NULL,
                                 e->p0[s],
                                 e->p0[s] + q->n_tokens};
            r->ops->on_prefill(r->st, layer, q->slot, &v);
        }
        return IG_OK;
    }
    /* Existing entries (a previous chunk) in entry order, then the new rows; one table per head. */
    int64_t n_exist = 0;
    ig_selection all = selection_of(r, layer & 1, q->slot);
    select_all(r, layer, q->slot, &all);
    for (int g = 0; g < r->G; g++) {
        IG_ASSERT(all.n[g] == all.n[0]); /* chunked prefill needs equal entry counts per head */
        n_exist = all.n[g];
    }
    int64_t stride = n_exist + q->n_tokens;
    /* a first chunk with the working set on the layer's table: attention (and column sums) there */
    int dev_pf = prefill_on_table(e, s);
    double t0 = ig_time_s();
    for (int g = 0; g < r->G && !dev_pf; g++) {
        float *kd = r->pf_k + (size_t)g * (size_t)stride * hd;
        float *vd = r->pf_v + (size_t)g * (size_t)stride * hd;
        ig_kv_home_read(r->home, layer, q->slot, g, all.entries + (size_t)g * (size_t)r->cap,
                        n_exist, kd, vd);
        for (int i = 0; i < q->n_tokens; i++) {
            memcpy(kd + (size_t)(n_exist + i) * hd, e->k + (r0 + (size_t)i) * kvd + (size_t)g * hd,
                   hd * sizeof(float));
            memcpy(vd + (size_t)(n_exist + i) * hd, e->v + (r0 + (size_t)i) * kvd + (size_t)g * hd,
                   hd * sizeof(float));
        }
    }
    r->stats.transfer_s += ig_time_s() - t0;
    t0 = ig_time_s();
    float *colsum = NULL;
    if (dev_pf) {
        IG_TRY(prefill_table(e, b, s, err));
        if (r->caps.wants_prefill_colsum) colsum = r->colsum;
    } else if (r->caps.wants_prefill_colsum) {
        colsum = r->colsum;
        memset(colsum, 0, (size_t)r->H * (size_t)stride * sizeof(float));
        IG_TRY(ig_be_attention_colsum(e->be, e->q + r0 * qd, q->n_tokens, n_exist, r->pf_k, r->pf_v,
                                      stride, c->n_head, c->n_kv_head, c->head_dim, scale, r->cws,
                                      r->cws_floats, colsum, stride, e->att + r0 * qd, err));
    } else {
        IG_TRY(ig_be_attention(e->be, e->q + r0 * qd, q->n_tokens, n_exist, r->pf_k, r->pf_v,
                               stride, c->n_head, c->n_kv_head, c->head_dim, scale, e->attn_ws,
                               e->attn_ws_floats, e->att + r0 * qd, err));
    }
    r->stats.attention_s += ig_time_s() - t0;
    if (r->ops->on_prefill) {
        ig_prefill_view v = {
            q->n_tokens, e->p0[s], e->q + r0 * qd, e->k + r0 * kvd, e->h + r0 * (size_t)r->d,
            colsum,      n_exist,  stride};
        r->ops->on_prefill(r->st, layer, q->slot, &v);
    }
    store_new(e, layer, s);
    return IG_OK;
}

/* Recall of the selection of KV head g against the exact top-k of the true scores over every
 * position so far (from the shadow cache), averaged over the group's query heads. */
static void measure_recall(ig_engine *e, int layer, int s, const ig_selection *sel) {
    ig_kv_run *r = e->kv;
    int slot = e->cur[s].slot, n_ctx = e->p0[s], group = r->H / r->G;
    size_t qd = (size_t)r->H * (size_t)r->hd;
    const float *q = e->q + (size_t)e->row0[s] * qd;
    double t0 = ig_time_s();
    for (int g = 0; g < r->G; g++) {
        int64_t k = sel->n[g];
        if (k <= 0) continue;
        const int32_t *pos = ig_kv_home_pos(r->home, layer, slot, g);
        const int32_t *ent = sel->entries + (size_t)g * (size_t)sel->max_per_head;
        const float *sk =
            r->shadow_k +
            (((size_t)layer * (size_t)r->S + (size_t)slot) * (size_t)r->G + (size_t)g) *
                (size_t)e->opts.max_ctx * (size_t)r->hd;
        for (int hh = 0; hh < group; hh++) {
            int h = g * group + hh;
            double rec = 1.0;
            if (k < n_ctx) {
                for (int p = 0; p < n_ctx; p++)
                    r->rscore[p] =
                        dotf(q + (size_t)h * (size_t)r->hd, sk + (size_t)p * (size_t)r->hd, r->hd);
                memcpy(r->rscore + n_ctx, r->rscore, (size_t)n_ctx * sizeof(float));
                float kth = ig_cpu_kth_largest(r->rscore + n_ctx, n_ctx, k);
                int64_t hits = 0;
                for (int64_t j = 0; j < k; j++) {
                    int p = pos[ent[j]];
                    if (dotf(q + (size_t)h * (size_t)r->hd, sk + (size_t)p * (size_t)r->hd,
                             r->hd) >= kth)
                        hits++;
                }
                rec = (double)(hits < k ? hits : k) / (double)k;
            }
            r->stats.recall_sum += rec;
            r->stats.recall_n++;
        }
    }
    r->stats.recall_s += ig_time_s() - t0;
}

/* KV bytes of one decode token's attention (slot homed in host memory): the selected rows to the
 * GPU, or with kv_access cpu the query down and the attention output up. */
static void count_h2d(ig_kv_run *r, double selected) {
    if (r->cpu_attn) {
        r->stats.h2d_bytes += 4.0 * r->H * r->hd;
        r->stats.d2h_bytes += 4.0 * r->H * r->hd;
    } else {
        r->stats.h2d_bytes += 2.0 * selected * (double)r->row_bytes;
    }
}

static void profile_add(ig_kv_run *r, int64_t ctx, double selected) {
    int64_t b = ctx / IG_KV_PROFILE_STEP;
    if (b >= IG_KV_PROFILE_BUCKETS) b = IG_KV_PROFILE_BUCKETS - 1;
    r->stats.len_selected_rows[b] += selected;
    r->stats.len_context_rows[b] += (double)ctx * r->G;
    r->stats.len_steps[b] += 1;
}

/* dev_probs: the attention ran on the layer's table (ig_kv_dev_decode); its probabilities. */
static ig_status decode_seq(ig_engine *e, int layer, int i, const float *dev_probs, ig_error *err) {
    ig_kv_run *r = e->kv;
    int s = r->dec[i], slot = e->cur[s].slot, buf = layer & 1;
    const ig_model_config *c = &e->cfg;
    size_t qd = (size_t)r->H * (size_t)r->hd, kvd = (size_t)r->G * (size_t)r->hd;
    size_t hd = (size_t)r->hd, row = (size_t)e->row0[s];
    float scale = 1.0f / sqrtf((float)c->head_dim);
    if (r->contig) {
        /* Dense over f32 rows that never move: the same kernel as the engine without a policy. */
        int64_t n_res = ig_kv_home_n_used(r->home, layer, slot, 0);
        store_new(e, layer, s);
        double t0 = ig_time_s();
        IG_TRY(ig_be_attention(
            e->be, e->q + row * qd, 1, e->p0[s], ig_kv_home_k_base(r->home, layer, slot, 0),
            ig_kv_home_v_base(r->home, layer, slot, 0), r->cap, c->n_head, c->n_kv_head,
            c->head_dim, scale, e->attn_ws, e->attn_ws_floats, e->att + row * qd, err));
        r->stats.attention_s += ig_time_s() - t0;
        double rows = (double)n_res * r->G;
        r->stats.selected_rows += rows;
        r->stats.resident_rows += rows;
        r->stats.context_rows += (double)e->p0[s] * r->G;
        if (layer >= r->caps.dense_layers) {
            r->stats.sel_layer_selected_rows += rows;
            r->stats.sel_layer_context_rows += (double)e->p0[s] * r->G;
        }
        profile_add(r, e->p0[s], rows);
        if (slot >= e->opts.kv_device_slots) count_h2d(r, rows);
        r->stats.read_bytes += 2.0 * (rows + r->G) * (double)r->row_bytes;
        if (r->shadow_k) { /* every token attended: the exact top-k is always contained */
            r->stats.recall_sum += r->H;
            r->stats.recall_n += r->H;
        }
        return IG_OK;
    }
    ig_selection sel = selection_of(r, buf, slot);
    /* Resident rows before this token is stored (for the fetched fraction). */
    double resident = 0;
    for (int g = 0; g < r->G; g++) resident += (double)ig_kv_home_n_used(r->home, layer, slot, g);
    const float *kb[64], *vb[64];
    const unsigned char *kenc[64], *venc[64];
    const int32_t *idx[64];
    IG_ASSERT(r->G <= 64);
    const float *probs = dev_probs;
    if (!r->dev) { /* else the table attended (ig_kv_dev_decode) */
        for (int g = 0; g < r->G; g++) {
            kb[g] = vb[g] = NULL;
            kenc[g] = venc[g] = NULL;
            if (r->inplace) {
                kb[g] = ig_kv_home_k_base(r->home, layer, slot, g);
                vb[g] = ig_kv_home_v_base(r->home, layer, slot, g);
            } else if (r->decode_attn) {
                kenc[g] = ig_kv_home_k_base(r->home, layer, slot, g);
                venc[g] = ig_kv_home_v_base(r->home, layer, slot, g);
            } else {
                size_t off = ((size_t)slot * (size_t)r->G + (size_t)g) * (size_t)r->cap * hd;
                kb[g] = r->ws_k[buf] + off;
                vb[g] = r->ws_v[buf] + off;
            }
            idx[g] = sel.entries + (size_t)g * (size_t)r->cap;
        }
        /* The new token's rows as attention sees them: through the codec, as a GPU run that stores
         * them encoded and decodes them inside attention would. */
        const float *ek = e->k + row * kvd, *ev = e->v + row * kvd;
        if (!ig_kv_codec_is_exact(&r->caps.codec)) {
            unsigned char tmp[4096];
            IG_ASSERT(r->row_bytes * (size_t)r->G <= sizeof tmp);
            ig_kv_codec_encode(&r->caps.codec, ek, r->G, r->hd, tmp);
            ig_kv_codec_decode(&r->caps.codec, tmp, r->G, r->hd, r->extra_k);
            ig_kv_codec_encode(&r->caps.codec, ev, r->G, r->hd, tmp);
            ig_kv_codec_decode(&r->caps.codec, tmp, r->G, r->hd, r->extra_v);
            ek = r->extra_k;
            ev = r->extra_v;
        }
        ig_gather_attn a = {.n_head = r->H,
                            .n_kv_head = r->G,
                            .hd = r->hd,
                            .scale = scale,
                            .k_base = kb,
                            .v_base = vb,
                            .row_stride = (int64_t)hd,
                            .idx = r->direct ? idx : NULL,
                            .n_sel = sel.n,
                            .k_extra = ek,
                            .v_extra = ev,
                            .n_extra = 1};
        if (r->decode_attn) { /* decoded by the attention kernel, row by row */
            const ig_kv_codec *cd = &r->caps.codec;
            a.enc = cd->kind == IG_KV_CODEC_F16 ? IG_ROWS_F16 : IG_ROWS_KVQ;
            a.enc_bits = cd->bits;
            a.enc_group = cd->group;
            a.k_enc = kenc;
            a.v_enc = venc;
            a.enc_row_bytes = r->row_bytes;
        }
        double t0 = ig_time_s();
        probs = r->caps.wants_probs ? r->probs : NULL;
        ig_cpu_attention_gather(&a, e->q + row * qd, r->gws, r->gws_floats,
                                r->caps.wants_probs ? r->probs : NULL, r->probs_stride,
                                e->att + row * qd);
        r->stats.attention_s += ig_time_s() - t0;
    }
    if (probs && r->ops->on_attention) {
        const float *pr = probs;
        const int32_t *pos[64];
        for (int g = 0; g < r->G; g++) pos[g] = ig_kv_home_pos(r->home, layer, slot, g);
        ig_attn_view v = {pr, r->probs_stride, sel.entries, sel.n, r->cap, e->p0[s], pos};
        r->ops->on_attention(r->st, layer, slot, &v);
    }
    if (r->shadow_k) measure_recall(e, layer, s, &sel);
    double selected = 0;
    for (int g = 0; g < r->G; g++) selected += (double)sel.n[g];
    r->stats.selected_rows += selected;
    r->stats.resident_rows += resident;
    r->stats.context_rows += (double)e->p0[s] * r->G;
    if (layer >= r->caps.dense_layers) {
        r->stats.sel_layer_selected_rows += selected;
        r->stats.sel_layer_context_rows += (double)e->p0[s] * r->G;
    }
    profile_add(r, e->p0[s], selected);
    if (slot >= e->opts.kv_device_slots) count_h2d(r, selected);
    r->stats.read_bytes += r->direct ? 2.0 * (selected + r->G) * (double)r->row_bytes
                                     : 2.0 * selected * ((double)r->row_bytes + 4.0 * r->hd) +
                                           2.0 * r->G * 4.0 * r->hd;
    store_new(e, layer, s);
    return IG_OK;
}

static ig_status attention_step(ig_engine *e, int layer, const ig_layer_bufs *b, ig_error *err) {
    ig_kv_run *r = e->kv;
    int buf = layer & 1;
    int n = r->i1 - r->i0;
    if (n > 0 && !r->contig) {
        double t0 = ig_time_s();
        int need_gather = 0;
        if (!r->caps.dense && r->ops->select && !r->ops->select_ahead) {
            need_gather = 1;
            fill_views(e, layer);
            size_t qd = (size_t)r->H * (size_t)r->hd;
            for (int i = 0; i < n; i++)
                memcpy(r->qsel + (size_t)i * qd, e->q + (size_t)e->row0[r->dec[r->i0 + i]] * qd,
                       qd * sizeof(float));
            for (int i = 0; i < n; i++) r->sels[i] = selection_of(r, buf, r->dec_slots[r->i0 + i]);
            r->ops->select(r->st, layer, n, r->dec_slots + r->i0, r->qsel, r->views, r->sels);
            for (int i = r->i0; i < r->i1; i++) r->sel_ok[buf][r->dec_slots[i]] = 1;
        }
        for (int i = r->i0; i < r->i1; i++) {
            int slot = r->dec_slots[i];
            ig_selection sel = selection_of(r, buf, slot);
            if (r->caps.dense && !r->sel_ok[buf][slot]) {
                select_all(r, layer, slot, &sel);
                r->sel_ok[buf][slot] = 1;
                need_gather = 1;
            }
            IG_ASSERT(r->sel_ok[buf][slot]); /* a sparse policy must implement a select hook */
            check_selection(r, layer, slot, &sel);
        }
        r->stats.select_s += ig_time_s() - t0;
        if ((!r->direct || r->link) && need_gather) submit_gather(e, layer);
        if (!r->direct || r->link) wait_gather(r, layer);
    }
    if (n > 0 && r->contig && r->link) wait_gather(r, layer);
    for (int s = e->bs0; s < e->bs1; s++)
        if (!is_decode(e, s)) IG_TRY(prefill_seq(e, layer, s, b, err));
    /* the batch's previous store job (of the previous layer): its staging is reused below */
    if (n > 0 && r->async_store) wait_store(r, r->cb);
    if (r->dev && n > 0) { /* one batched attention on the table, then the hooks and stores here */
        for (int i = 0; i < n; i++) r->dec_rows[i] = e->row0[r->dec[r->i0 + i]];
        const float *pr = ig_kv_dev_decode(r->kd, buf, r->i0, n, r->dec_rows, b->q, b->k, b->v,
                                           b->att, r->caps.wants_probs);
        size_t per = (size_t)r->H * (size_t)r->probs_stride;
        for (int i = r->i0; i < r->i1; i++)
            IG_TRY(decode_seq(e, layer, i, pr ? pr + (size_t)(i - r->i0) * per : NULL, err));
    } else {
        for (int i = r->i0; i < r->i1; i++) IG_TRY(decode_seq(e, layer, i, NULL, err));
    }
    if (n > 0 && r->async_store) submit_store(e, layer);
    if (layer == r->L - 1) r->stats.decode_tokens += n;
    /* This layer's selection is used: layer + 2 shares its buffer and must select anew (left set,
     * a dense policy reused the selection of two layers back, sized for that layer's capacity). */
    for (int i = r->i0; i < r->i1; i++) r->sel_ok[buf][r->dec_slots[i]] = 0;
    return IG_OK;
}

ig_status ig_kv_layer_begin(ig_engine *e, int layer, const ig_layer_bufs *b, ig_error *err) {
    ig_kv_run *r = e->kv;
    if (b->h != e->h) { /* the policy's hooks read the attention input on the host */
        size_t d = (size_t)r->d, r0 = (size_t)e->br0, T = (size_t)(e->br1 - e->br0);
        IG_TRY(ig_be_download(b->be, e->h + r0 * d, b->h + r0 * d, T * d * sizeof(float), err));
    }
    begin_step(e, layer);
    return r->kd ? ig_kv_dev_error(r->kd, err) : IG_OK;
}

ig_status ig_kv_layer_attention(ig_engine *e, int layer, const ig_layer_bufs *b, ig_error *err) {
    ig_kv_run *r = e->kv;
    size_t hd = (size_t)r->hd, kvd = (size_t)r->G * hd, qd = (size_t)r->H * hd;
    size_t r0 = (size_t)e->br0, T = (size_t)(e->br1 - e->br0);
    int mirror = b->q != e->q; /* the table's buffers are not the host ones */
    if (mirror) {              /* what the policy's hooks, the host attention and the stores read */
        IG_TRY(ig_be_download(b->be, e->q + r0 * qd, b->q + r0 * qd, T * qd * sizeof(float), err));
        IG_TRY(
            ig_be_download(b->be, e->k + r0 * kvd, b->k + r0 * kvd, T * kvd * sizeof(float), err));
        IG_TRY(
            ig_be_download(b->be, e->v + r0 * kvd, b->v + r0 * kvd, T * kvd * sizeof(float), err));
    }
    IG_TRY(attention_step(e, layer, b, err));
    if (r->kd) IG_TRY(ig_kv_dev_error(r->kd, err));
    if (mirror) /* attention rows computed on the host go up */
        for (int s = e->bs0; s < e->bs1; s++) {
            if (is_decode(e, s) ? r->dev : prefill_on_table(e, s)) continue;
            size_t sr = (size_t)e->row0[s], n = (size_t)e->cur[s].n_tokens;
            IG_TRY(ig_be_upload(b->be, b->att + sr * qd, e->att + sr * qd, n * qd * sizeof(float),
                                err));
        }
    return IG_OK;
}
