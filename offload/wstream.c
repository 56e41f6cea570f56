/* Weight residency and streaming (see wstream.h). */
#include "offload/wstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "offload/hostmem.h"
#include "offload/xfer.h"

#define WS_ALIGN 64

/* The arrays of a layer, each belonging to one placement group. */
typedef enum wfield {
    F_ATTN_NORM_W,
    F_ATTN_NORM_B,
    F_WQ,
    F_BQ,
    F_WK,
    F_BK,
    F_WV,
    F_BV,
    F_WO,
    F_BO,
    F_FFN_NORM_W,
    F_FFN_NORM_B,
    F_WGATE,
    F_WUP,
    F_BUP,
    F_WDOWN,
    F_BDOWN,
    F_COUNT,
} wfield;

static const ig_wtensor field_group[F_COUNT] = {
    IG_WT_ATTN_NORM, IG_WT_ATTN_NORM, IG_WT_Q,  IG_WT_Q,    IG_WT_K,        IG_WT_K,
    IG_WT_V,         IG_WT_V,         IG_WT_O,  IG_WT_O,    IG_WT_FFN_NORM, IG_WT_FFN_NORM,
    IG_WT_GATE,      IG_WT_UP,        IG_WT_UP, IG_WT_DOWN, IG_WT_DOWN,
};

static size_t mat_bytes(const ig_weight *w) {
    return w->data ? (size_t)w->rows * ig_dtype_row_bytes(w->dtype, w->cols) : 0;
}

/* The array behind field f of L and its size in bytes (0 and NULL when absent). */
static const void *field_get(const ig_layer *L, int d_model, wfield f, size_t *bytes) {
    size_t vd = (size_t)d_model * sizeof(float);
    const void *p = NULL;
    size_t n = 0;
    switch (f) {
    case F_ATTN_NORM_W:
        p = L->attn_norm_w, n = vd;
        break;
    case F_ATTN_NORM_B:
        p = L->attn_norm_b, n = vd;
        break;
    case F_WQ:
        p = L->wq.data, n = mat_bytes(&L->wq);
        break;
    case F_BQ:
        p = L->bq, n = (size_t)L->wq.rows * sizeof(float);
        break;
    case F_WK:
        p = L->wk.data, n = mat_bytes(&L->wk);
        break;
    case F_BK:
        p = L->bk, n = (size_t)L->wk.rows * sizeof(float);
        break;
    case F_WV:
        p = L->wv.data, n = mat_bytes(&L->wv);
        break;
    case F_BV:
        p = L->bv, n = (size_t)L->wv.rows * sizeof(float);
        break;
    case F_WO:
        p = L->wo.data, n = mat_bytes(&L->wo);
        break;
    case F_BO:
        p = L->bo, n = (size_t)L->wo.rows * sizeof(float);
        break;
    case F_FFN_NORM_W:
        p = L->ffn_norm_w, n = vd;
        break;
    case F_FFN_NORM_B:
        p = L->ffn_norm_b, n = vd;
        break;
    case F_WGATE:
        p = L->w_gate.data, n = mat_bytes(&L->w_gate);
        break;
    case F_WUP:
        p = L->w_up.data, n = mat_bytes(&L->w_up);
        break;
    case F_BUP:
        p = L->b_up, n = (size_t)L->w_up.rows * sizeof(float);
        break;
    case F_WDOWN:
        p = L->w_down.data, n = mat_bytes(&L->w_down);
        break;
    case F_BDOWN:
        p = L->b_down, n = (size_t)L->w_down.rows * sizeof(float);
        break;
    default:
        break;
    }
    *bytes = p ? n : 0;
    return p;
}

static void field_set(ig_layer *L, wfield f, const void *p) {
    switch (f) {
    case F_ATTN_NORM_W:
        L->attn_norm_w = p;
        break;
    case F_ATTN_NORM_B:
        L->attn_norm_b = p;
        break;
    case F_WQ:
        L->wq.data = p;
        break;
    case F_BQ:
        L->bq = p;
        break;
    case F_WK:
        L->wk.data = p;
        break;
    case F_BK:
        L->bk = p;
        break;
    case F_WV:
        L->wv.data = p;
        break;
    case F_BV:
        L->bv = p;
        break;
    case F_WO:
        L->wo.data = p;
        break;
    case F_BO:
        L->bo = p;
        break;
    case F_FFN_NORM_W:
        L->ffn_norm_w = p;
        break;
    case F_FFN_NORM_B:
        L->ffn_norm_b = p;
        break;
    case F_WGATE:
        L->w_gate.data = p;
        break;
    case F_WUP:
        L->w_up.data = p;
        break;
    case F_BUP:
        L->b_up = p;
        break;
    case F_WDOWN:
        L->w_down.data = p;
        break;
    case F_BDOWN:
        L->b_down = p;
        break;
    default:
        break;
    }
}

static size_t align_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

/* A streamed array of a layer: where it comes from and where it goes in a staging buffer. */
typedef struct stream_piece {
    wfield field;
    ig_tier_kind from; /* HOST or DISK */
    const void *src;   /* HOST: the host copy */
    size_t src_off;    /* DISK: offset in the layer's file (and in the relay buffer) */
    size_t bytes, stage_off;
} stream_piece;

typedef struct layer_plan {
    ig_layer base; /* device-resident arrays point into the device copy */
    stream_piece pieces[F_COUNT];
    int n_pieces;
    size_t host_bytes, disk_bytes; /* streamed per load, by source */
    ig_disk_file *file;
    size_t file_bytes;
} layer_plan;

typedef struct load_job {
    ig_wstream *ws;
    int layer, buf;
    double ready_at; /* when the layer's bytes are there (the link's modelled end): see run_load */
} load_job;

struct ig_wstream {
    ig_wstream_opts o;
    int n_layer;
    layer_plan *lp;
    unsigned char *dev_res, *stage[2];
    /* host memory: one NUMA-bound block per node named by the placement (-1: interleaved over all
     * nodes, or unbound without a topology), and the disk relay buffer */
    struct host_block {
        int numa;
        ig_hostmem *mem;
        size_t bytes, used;
    } hb[IG_MAX_NUMA + 1];
    int n_hb;
    ig_hostmem *relay_mem;
    unsigned char *relay;
    size_t dev_res_bytes, host_res_bytes, stage_bytes, relay_bytes, disk_bytes;
    size_t pass_bytes;
    ig_layer cur[2];
    int cur_layer[2]; /* layer held by each staging buffer, -1 none */
    ig_xfer *q;
    load_job job[2];
    uint64_t ticket[2]; /* pending load of each buffer (0 none) */
    double link_free;   /* when the link ends the loads queued so far (run_load's thread) */
    uint64_t k;         /* acquisitions so far */
    ig_wstream_stats st;
    int failed;
    ig_error load_err;
};

size_t ig_wstream_group_bytes(const ig_model *m, int layer, ig_wtensor t) {
    const ig_layer *L = ig_model_layer(m, layer);
    int d = ig_model_get_config(m)->d_model;
    size_t total = 0, n;
    for (int f = 0; f < F_COUNT; f++)
        if (field_group[f] == t && field_get(L, d, (wfield)f, &n)) total += n;
    return total;
}

static ig_tier_ref tier_of(const ig_wstream_opts *o, int l, ig_wtensor g) {
    if (!o->place) return (ig_tier_ref){IG_TIER_DEVICE, -1};
    return o->place->tensor[(size_t)l * IG_WT_COUNT + (size_t)g];
}

ig_tier_kind ig_wstream_tier(const ig_wstream *ws, int l, ig_wtensor t) {
    return tier_of(&ws->o, l, t).kind;
}

static struct host_block *host_block_of(ig_wstream *ws, int numa) {
    for (int i = 0; i < ws->n_hb; i++)
        if (ws->hb[i].numa == numa) return &ws->hb[i];
    if (ws->n_hb == IG_MAX_NUMA + 1) return NULL;
    ws->hb[ws->n_hb] = (struct host_block){numa, NULL, 0, 0};
    return &ws->hb[ws->n_hb++];
}

static ig_status host_alloc(const ig_wstream_opts *o, int numa, size_t bytes, ig_hostmem **out,
                            ig_error *err) {
    if (numa >= 0) return ig_hostmem_alloc(o->topo, IG_NUMA_NODES, &numa, 1, bytes, out, err);
    return ig_hostmem_alloc(o->topo, o->topo ? IG_NUMA_INTERLEAVE : IG_NUMA_LOCAL, NULL, 0, bytes,
                            out, err);
}

static void *alloc_aligned(size_t n, size_t a) {
    void *p = NULL;
    if (n == 0) return NULL;
    return posix_memalign(&p, a, align_up(n, a)) == 0 ? p : NULL;
}

static void run_load(void *arg) {
    load_job *j = arg;
    ig_wstream *ws = j->ws;
    layer_plan *lp = &ws->lp[j->layer];
    unsigned char *dst = ws->stage[j->buf];
    double t0 = ig_time_s();
    if (lp->disk_bytes && !ws->failed) {
        ig_error err;
        if (ig_disk_read_parallel(lp->file, 0, ws->relay, lp->file_bytes, &err) != IG_OK) {
            ws->failed = 1;
            ws->load_err = err;
        } else {
            ws->st.disk_read_bytes += (double)lp->file_bytes;
        }
    }
    double t_link = ig_time_s();
    size_t moved = 0;
    for (int i = 0; i < lp->n_pieces && !ws->failed; i++) {
        const stream_piece *p = &lp->pieces[i];
        const void *src = p->from == IG_TIER_HOST ? p->src : ws->relay + p->src_off;
        memcpy(dst + p->stage_off, src, p->bytes);
        moved += p->bytes;
    }
    double t_copied = ig_time_s();
    double modelled = moved ? ig_link_time(ws->o.link, IG_LINK_H2D, moved) : 0;
    /* The bytes are there on the link's clock (after the loads before them, ig_link_schedule):
     * this thread records that moment and goes on, ig_wstream_layer waits until then. Sleeping here
     * until the end, on a machine with no spare core, made this thread's wake-ups late and its spin
     * to be on time took a core from the compute threads (engine_kv.c, link_done). */
    j->ready_at =
        ig_link_schedule(ws->o.link, IG_LINK_H2D, &ws->link_free, t_link, moved, t_copied, NULL);
    ws->st.link_modelled_s += modelled;
    ws->st.h2d_bytes += (double)moved;
    ws->st.transfer_s += j->ready_at - t0;
    ws->st.link_model_s += j->ready_at - t_copied;
    ws->st.layer_loads++;
}

ig_status ig_wstream_create(const ig_wstream_opts *o, ig_wstream **out, ig_error *err) {
    *out = NULL;
    const ig_model_config *c = ig_model_get_config(o->model);
    if (o->place && o->place->n_layer != c->n_layer)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "weight placement: %d layers, the model has %d", o->place->n_layer,
                            c->n_layer);
    ig_wstream *ws = ig_calloc(1, sizeof *ws, err);
    if (!ws) return IG_ERR_NOMEM;
    ws->o = *o;
    ws->n_layer = c->n_layer;
    ws->cur_layer[0] = ws->cur_layer[1] = -1;
    ig_status st = IG_OK;
    ws->lp = ig_calloc((size_t)c->n_layer, sizeof *ws->lp, err);
    if (!ws->lp) {
        free(ws);
        return IG_ERR_NOMEM;
    }
    /* sizes: device-resident, host-resident, per-layer streamed (staging) and disk (relay) */
    for (int l = 0; l < c->n_layer; l++) {
        const ig_layer *L = ig_model_layer(o->model, l);
        layer_plan *lp = &ws->lp[l];
        lp->base = *L;
        size_t stage = 0;
        for (int f = 0; f < F_COUNT; f++) {
            size_t n;
            const void *src = field_get(L, c->d_model, (wfield)f, &n);
            if (!src || !n) continue;
            ig_tier_ref t = tier_of(o, l, field_group[f]);
            if (t.kind == IG_TIER_DEVICE) {
                ws->dev_res_bytes += align_up(n, WS_ALIGN);
                continue;
            }
            if (t.kind == IG_TIER_DISK && !o->disk) {
                st = ig_error_set(err, IG_ERR_INVALID_ARG,
                                  "weight placement: layer %d %s is on disk but no disk tier "
                                  "directory was given",
                                  l, ig_wtensor_name(field_group[f]));
                goto fail;
            }
            stream_piece *p = &lp->pieces[lp->n_pieces++];
            p->field = (wfield)f;
            p->from = t.kind;
            p->bytes = n;
            p->stage_off = stage;
            stage += align_up(n, WS_ALIGN);
            if (t.kind == IG_TIER_HOST) {
                struct host_block *hb = host_block_of(ws, t.numa);
                if (!hb) {
                    st = ig_error_set(err, IG_ERR_INVALID_ARG,
                                      "weight placement: too many NUMA nodes");
                    goto fail;
                }
                hb->bytes += align_up(n, WS_ALIGN);
                ws->host_res_bytes += align_up(n, WS_ALIGN);
                lp->host_bytes += n;
            } else {
                p->src_off = lp->file_bytes;
                lp->file_bytes += align_up(n, IG_DISK_ALIGN);
                lp->disk_bytes += n;
            }
            ws->pass_bytes += n;
        }
        if (stage > ws->stage_bytes) ws->stage_bytes = stage;
        if (lp->file_bytes > ws->relay_bytes) ws->relay_bytes = lp->file_bytes;
        ws->disk_bytes += lp->file_bytes;
    }
    size_t dev_total = ig_wstream_device_bytes(ws);
    if (o->device_capacity && dev_total > o->device_capacity) {
        st = ig_error_set(err, IG_ERR_CAPACITY,
                          "device tier: weights need %.1f MiB (%.1f MiB resident + 2 x %.1f MiB "
                          "staging) but the tier holds %.1f MiB",
                          (double)dev_total / 1048576.0, (double)ws->dev_res_bytes / 1048576.0,
                          (double)ws->stage_bytes / 1048576.0,
                          (double)o->device_capacity / 1048576.0);
        goto fail;
    }
    if (o->host_capacity && ig_wstream_host_bytes(ws) > o->host_capacity) {
        st = ig_error_set(
            err, IG_ERR_CAPACITY,
            "host tier: weights need %.1f MiB (%.1f MiB placed + %.1f MiB disk relay) "
            "but the tier holds %.1f MiB",
            (double)ig_wstream_host_bytes(ws) / 1048576.0, (double)ws->host_res_bytes / 1048576.0,
            (double)ws->relay_bytes / 1048576.0, (double)o->host_capacity / 1048576.0);
        goto fail;
    }
    ws->dev_res = alloc_aligned(ws->dev_res_bytes, WS_ALIGN);
    for (int i = 0; i < ws->n_hb; i++) {
        st = host_alloc(o, ws->hb[i].numa, ws->hb[i].bytes, &ws->hb[i].mem, err);
        if (st != IG_OK) goto fail;
    }
    if (ws->relay_bytes) {
        st = host_alloc(o, -1, ws->relay_bytes, &ws->relay_mem, err);
        if (st != IG_OK) goto fail;
        ws->relay = ig_hostmem_ptr(ws->relay_mem);
    }
    ws->stage[0] = alloc_aligned(ws->stage_bytes, WS_ALIGN);
    ws->stage[1] = alloc_aligned(ws->stage_bytes, WS_ALIGN);
    if ((ws->dev_res_bytes && !ws->dev_res) ||
        (ws->stage_bytes && (!ws->stage[0] || !ws->stage[1]))) {
        st = ig_error_set(err, IG_ERR_NOMEM, "weight tiers: cannot allocate %.1f MiB",
                          (double)(ws->dev_res_bytes + ws->host_res_bytes + 2 * ws->stage_bytes +
                                   ws->relay_bytes) /
                              1048576.0);
        goto fail;
    }
    /* fill the tiers: device and host copies, disk files (built in the relay buffer) */
    size_t doff = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const ig_layer *L = ig_model_layer(o->model, l);
        layer_plan *lp = &ws->lp[l];
        for (int f = 0; f < F_COUNT; f++) {
            size_t n;
            const void *src = field_get(L, c->d_model, (wfield)f, &n);
            if (!src || !n) continue;
            if (tier_of(o, l, field_group[f]).kind == IG_TIER_DEVICE) {
                memcpy(ws->dev_res + doff, src, n);
                field_set(&lp->base, (wfield)f, ws->dev_res + doff);
                doff += align_up(n, WS_ALIGN);
            }
        }
        for (int i = 0; i < lp->n_pieces; i++) {
            stream_piece *p = &lp->pieces[i];
            size_t n;
            const void *src = field_get(L, c->d_model, p->field, &n);
            field_set(&lp->base, p->field, NULL); /* only valid once loaded */
            if (p->from == IG_TIER_HOST) {
                struct host_block *hb =
                    host_block_of(ws, tier_of(o, l, field_group[p->field]).numa);
                unsigned char *dst = (unsigned char *)ig_hostmem_ptr(hb->mem) + hb->used;
                memcpy(dst, src, n);
                p->src = dst;
                hb->used += align_up(n, WS_ALIGN);
            } else {
                memset(ws->relay + p->src_off, 0, align_up(n, IG_DISK_ALIGN));
                memcpy(ws->relay + p->src_off, src, n);
            }
        }
        if (lp->file_bytes) {
            char name[64];
            snprintf(name, sizeof name, "weights-layer%03d.bin", l);
            st = ig_disk_file_create(o->disk, name, lp->file_bytes, &lp->file, err);
            if (st == IG_OK) st = ig_disk_write(lp->file, 0, ws->relay, lp->file_bytes, err);
            if (st != IG_OK) goto fail;
        }
    }
    if (ws->pass_bytes && o->overlap) {
        st = ig_xfer_create(1, &ws->q, err);
        if (st != IG_OK) goto fail;
    }
    for (int b = 0; b < 2; b++) ws->job[b] = (load_job){ws, -1, b, 0};
    *out = ws;
    return IG_OK;
fail:
    ig_wstream_free(ws);
    return st;
}

void ig_wstream_free(ig_wstream *ws) {
    if (!ws) return;
    if (ws->q) {
        for (int b = 0; b < 2; b++)
            if (ws->ticket[b]) ig_xfer_wait(ws->q, ws->ticket[b]);
        ig_xfer_free(ws->q);
    }
    for (int l = 0; ws->lp && l < ws->n_layer; l++) ig_disk_file_free(ws->lp[l].file);
    free(ws->lp);
    free(ws->dev_res);
    for (int i = 0; i < ws->n_hb; i++) ig_hostmem_free(ws->hb[i].mem);
    ig_hostmem_free(ws->relay_mem);
    free(ws->stage[0]);
    free(ws->stage[1]);
    free(ws);
}

static void submit(ig_wstream *ws, int layer, int buf) {
    ws->job[buf].layer = layer;
    ws->cur_layer[buf] = layer;
    if (ws->q)
        ws->ticket[buf] = ig_xfer_submit(ws->q, run_load, &ws->job[buf]);
    else
        run_load(&ws->job[buf]);
}

/* With overlap: starts loading the layer after l into the buffer the next acquisition will use
 * (free: the layers it held have finished computing), unless it is resident or already coming. */
static void prefetch_next(ig_wstream *ws, int l) {
    int nl = (l + 1) % ws->n_layer, nb = (int)(ws->k % 2);
    if (!ws->q || !ws->lp[nl].n_pieces) return;
    if (ws->ticket[nb] && ws->cur_layer[nb] == nl) return;
    if (ws->ticket[nb]) ig_xfer_wait(ws->q, ws->ticket[nb]);
    submit(ws, nl, nb);
}

const ig_layer *ig_wstream_layer(ig_wstream *ws, int l) {
    layer_plan *lp = &ws->lp[l];
    if (lp->n_pieces == 0) { /* everything on the device */
        prefetch_next(ws, l);
        return &lp->base;
    }
    int b = (int)(ws->k % 2);
    ws->k++;
    int ahead = ws->q && ws->ticket[b] && ws->cur_layer[b] == l; /* prefetched */
    double t0 = ig_time_s();
    if (!ahead) {
        if (ws->q && ws->ticket[b]) ig_xfer_wait(ws->q, ws->ticket[b]); /* a stale prefetch */
        t0 = ig_time_s();
        submit(ws, l, b);
    }
    /* the layer after l into the other buffer before waiting for l: that buffer's layer (l - 1)
     * has finished computing, and the transfer queue then runs the two loads back to back. Queued
     * after the wait, as before, the link stood idle between two loads for as long as this thread
     * took to wake from the wait and the transfer thread to wake for the new job (w50-host at 4
     * GB/s on a 2-core VM: 5-11 ms of a 53 ms step) */
    prefetch_next(ws, l);
    if (ws->q) ig_xfer_wait(ws->q, ws->ticket[b]);
    ig_link_wait_until(ws->job[b].ready_at); /* returns at once when it has passed */
    ws->st.wait_s += ig_time_s() - t0;
    ws->ticket[b] = 0;
    if (ws->failed) return NULL;
    ws->cur[b] = lp->base;
    for (int i = 0; i < lp->n_pieces; i++)
        field_set(&ws->cur[b], lp->pieces[i].field, ws->stage[b] + lp->pieces[i].stage_off);
    return &ws->cur[b];
}

const char *ig_wstream_error(const ig_wstream *ws) {
    return ws->failed ? ws->load_err.msg : NULL;
}

size_t ig_wstream_device_bytes(const ig_wstream *ws) {
    return ws->dev_res_bytes + 2 * ws->stage_bytes;
}
size_t ig_wstream_host_bytes(const ig_wstream *ws) {
    return ws->host_res_bytes + ws->relay_bytes;
}
size_t ig_wstream_disk_bytes(const ig_wstream *ws) {
    return ws->disk_bytes;
}
size_t ig_wstream_bytes_per_pass(const ig_wstream *ws) {
    return ws->pass_bytes;
}
ig_wstream_stats ig_wstream_get_stats(ig_wstream *ws) {
    if (ws->q) /* a load in flight updates the counters: let it finish */
        for (int b = 0; b < 2; b++)
            if (ws->ticket[b]) ig_xfer_wait(ws->q, ws->ticket[b]);
    return ws->st;
}
void ig_wstream_reset_stats(ig_wstream *ws) {
    if (ws->q)
        for (int b = 0; b < 2; b++)
            if (ws->ticket[b]) ig_xfer_wait(ws->q, ws->ticket[b]);
    memset(&ws->st, 0, sizeof ws->st);
}
