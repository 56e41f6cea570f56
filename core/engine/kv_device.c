/* The policy path's working set in the memory of the engine's backend table (kv_device.h). */
#include "core/engine/kv_device.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ig_kv_dev {
    ig_be *be;   /* the engine's table: decode attention, the codec; not owned */
    ig_be *copy; /* a fork of be: the gathers' queue */
    ig_kv_codec codec;
    int S, G, H, hd;
    int64_t cap;
    size_t row_bytes;
    size_t layer_bytes;                   /* bytes of one layer's home rows (K or V) */
    void *reg_k, *reg_v;                  /* the home's host rows, registered with be */
    const unsigned char *home_k, *home_v; /* their addresses for the table's ops */
    void *ws_k[2], *ws_v[2];              /* [S][G][cap] rows in the home's format, per parity */
    float *wsf_k, *wsf_v;                 /* quantized homes: the working set decoded to f32 */
    void *stage;                          /* host staging, registered: the arrays below */
    size_t stage_bytes;
    int32_t *idx_h[2], *nsel_h[2], *tab_h[2]; /* in stage */
    int32_t *idx_d[2], *nsel_d[2], *tab_d[2];
    void **ev;                  /* [2 * S] events of be: gather (GPU batch, parity) done */
    float *dq, *dk, *dv, *datt; /* decode rows packed: [S][...] */
    float *dprobs;              /* [S][H][cap + 1] */
    uint8_t *codec_tmp;         /* [S][G] encoded rows */
    float *probs_h;             /* host copy of dprobs */
    ig_status sticky;
    ig_error sticky_err;
};

static void keep_err(ig_kv_dev *d, ig_status rc, const ig_error *err) {
    if (rc != IG_OK && d->sticky == IG_OK) {
        d->sticky = rc;
        d->sticky_err = *err;
    }
}

static ig_status balloc(ig_kv_dev *d, void **p, size_t bytes, ig_error *err) {
    *p = ig_be_alloc(d->be, bytes ? bytes : 16, err);
    return *p ? IG_OK : IG_ERR_NOMEM;
}

ig_status ig_kv_dev_error(const ig_kv_dev *d, ig_error *err) {
    if (d->sticky != IG_OK) *err = d->sticky_err;
    return d->sticky;
}

void ig_kv_dev_clear_error(ig_kv_dev *d) {
    d->sticky = IG_OK;
}

void ig_kv_dev_free(ig_kv_dev *d) {
    if (!d) return;
    ig_error err;
    /* gathers (copy queue) and decodes (be) read the home and the staging */
    ig_be_sync(d->be, &err);
    if (d->copy) ig_be_sync(d->copy, &err);
    if (d->reg_k) ig_be_host_unregister(d->be, d->reg_k, &err);
    if (d->reg_v) ig_be_host_unregister(d->be, d->reg_v, &err);
    if (d->ev) {
        for (int i = 0; d->ev[i]; i++) ig_be_event_free(d->be, d->ev[i]);
        free(d->ev);
    }
    void *bufs[] = {d->ws_k[0],  d->ws_k[1],  d->ws_v[0],  d->ws_v[1],   d->wsf_k,
                    d->wsf_v,    d->idx_d[0], d->idx_d[1], d->nsel_d[0], d->nsel_d[1],
                    d->tab_d[0], d->tab_d[1], d->dq,       d->dk,        d->dv,
                    d->datt,     d->dprobs,   d->codec_tmp};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) ig_be_release(d->be, bufs[i]);
    ig_be_free(d->copy); /* a fork: before the table it came from (the engine's, freed later) */
    if (d->stage) {
        if (d->idx_h[0]) ig_be_host_unregister(d->be, d->stage, &err);
        free(d->stage);
    }
    free(d->probs_h);
    free(d);
}

ig_status ig_kv_dev_create(ig_be *be, ig_kv_home *home, const ig_kv_codec *codec, int S, int G,
                           int H, int hd, int64_t cap, ig_kv_dev **out, ig_error *err) {
    *out = NULL;
    ig_kv_dev *d = ig_calloc(1, sizeof *d, err);
    if (!d) return IG_ERR_NOMEM;
    *out = d; /* the caller frees it, also after a failure here */
    d->be = be;
    d->codec = *codec;
    d->S = S;
    d->G = G;
    d->H = H;
    d->hd = hd;
    d->cap = cap;
    d->row_bytes = ig_kv_home_row_bytes(home);
    size_t Sz = (size_t)S, Gz = (size_t)G, Hz = (size_t)H, hdz = (size_t)hd, capz = (size_t)cap;
    d->layer_bytes = Sz * Gz * capz * d->row_bytes;
    IG_TRY(ig_be_fork(be, &d->copy, err));
    /* the home's host rows, registered so that gathers read them in place (CUDA: pinned and
     * mapped, cudaHostRegister, which keeps the pages where they are: their NUMA binding) */
    void *hk = NULL, *hv = NULL, *kd = NULL, *vd = NULL;
    size_t hb = 0;
    ig_kv_home_row_memory(home, &hk, &hv, &hb);
    IG_TRY(ig_be_host_register(be, hk, hb, &kd, err));
    d->reg_k = hk;
    IG_TRY(ig_be_host_register(be, hv, hb, &vd, err));
    d->reg_v = hv;
    d->home_k = kd;
    d->home_v = vd;
    /* the selections' staging, double-buffered by parity: one block of whole pages of its own
     * (registration locks whole pages; two registrations must not share one) */
    size_t n_idx = Sz * Gz * capz, n_tab = Sz * Gz;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    d->stage_bytes = 2 * (n_idx + 2 * n_tab) * sizeof(int32_t);
    d->stage_bytes = (d->stage_bytes + page - 1) / page * page;
    if (posix_memalign(&d->stage, page, d->stage_bytes) != 0) {
        d->stage = NULL;
        return ig_error_set(err, IG_ERR_NOMEM, "KV working set: out of memory (%zu bytes staging)",
                            d->stage_bytes);
    }
    memset(d->stage, 0, d->stage_bytes);
    void *stage_dev = NULL;
    IG_TRY(ig_be_host_register(be, d->stage, d->stage_bytes, &stage_dev, err));
    int32_t *p = d->stage;
    for (int b = 0; b < 2; b++) {
        d->idx_h[b] = p;
        p += n_idx;
        d->nsel_h[b] = p;
        p += n_tab;
        d->tab_h[b] = p;
        p += n_tab;
    }
    for (int b = 0; b < 2; b++) {
        IG_TRY(balloc(d, &d->ws_k[b], d->layer_bytes, err));
        IG_TRY(balloc(d, &d->ws_v[b], d->layer_bytes, err));
        IG_TRY(balloc(d, (void **)&d->idx_d[b], n_idx * sizeof(int32_t), err));
        IG_TRY(balloc(d, (void **)&d->nsel_d[b], n_tab * sizeof(int32_t), err));
        IG_TRY(balloc(d, (void **)&d->tab_d[b], n_tab * sizeof(int32_t), err));
    }
    if (codec->kind == IG_KV_CODEC_QUANT) {
        IG_TRY(balloc(d, (void **)&d->wsf_k, n_idx * hdz * sizeof(float), err));
        IG_TRY(balloc(d, (void **)&d->wsf_v, n_idx * hdz * sizeof(float), err));
    }
    size_t probs_bytes = Sz * Hz * (capz + 1) * sizeof(float);
    IG_TRY(balloc(d, (void **)&d->dq, Sz * Hz * hdz * sizeof(float), err));
    IG_TRY(balloc(d, (void **)&d->dk, Sz * Gz * hdz * sizeof(float), err));
    IG_TRY(balloc(d, (void **)&d->dv, Sz * Gz * hdz * sizeof(float), err));
    IG_TRY(balloc(d, (void **)&d->datt, Sz * Hz * hdz * sizeof(float), err));
    IG_TRY(balloc(d, (void **)&d->dprobs, probs_bytes, err));
    IG_TRY(balloc(d, (void **)&d->codec_tmp, Sz * Gz * d->row_bytes * 2 + 16, err));
    d->probs_h = ig_malloc(probs_bytes, err);
    if (!d->probs_h) return IG_ERR_NOMEM;
    d->ev = ig_calloc(2 * Sz + 1, sizeof *d->ev, err); /* NULL-terminated */
    if (!d->ev) return IG_ERR_NOMEM;
    for (size_t i = 0; i < 2 * Sz; i++) IG_TRY(ig_be_event_new(be, &d->ev[i], err));
    return IG_OK;
}

void ig_kv_dev_gather(ig_kv_dev *d, int layer, int buf, int ev, int i0, int n, const int *slots,
                      const int32_t *sel_e, const int64_t *sel_n) {
    if (d->sticky != IG_OK || n <= 0) return;
    int G = d->G;
    size_t cap = (size_t)d->cap, t0 = (size_t)i0 * (size_t)G;
    int32_t *idx = d->idx_h[buf] + t0 * cap, *ns = d->nsel_h[buf] + t0, *tab = d->tab_h[buf] + t0;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            size_t t = (size_t)i * (size_t)G + (size_t)g, st = (size_t)slots[i] * (size_t)G + g;
            ns[t] = (int32_t)sel_n[st];
            tab[t] = (int32_t)st;
            memcpy(idx + t * cap, sel_e + st * cap, (size_t)ns[t] * sizeof(int32_t));
        }
    size_t nt = (size_t)n * (size_t)G;
    ig_error err;
    /* on the copy queue: the staging goes up, the rows are gathered from the registered home,
     * and the event tells the table's queue */
    ig_be *xq = d->copy;
    ig_status rc = ig_be_upload_async(xq, d->idx_d[buf] + t0 * cap, idx, nt * cap * 4, &err);
    if (rc == IG_OK) rc = ig_be_upload_async(xq, d->nsel_d[buf] + t0, ns, nt * 4, &err);
    if (rc == IG_OK) rc = ig_be_upload_async(xq, d->tab_d[buf] + t0, tab, nt * 4, &err);
    size_t tstride = cap * d->row_bytes, lo = (size_t)layer * d->layer_bytes;
    char *wk = (char *)d->ws_k[buf] + t0 * tstride, *wv = (char *)d->ws_v[buf] + t0 * tstride;
    if (rc == IG_OK)
        rc = ig_be_gather_rows(xq, wk, (int64_t)tstride, d->home_k + lo, (int64_t)tstride,
                               (int64_t)d->row_bytes, d->tab_d[buf] + t0, d->row_bytes,
                               d->idx_d[buf] + t0 * cap, (int64_t)cap, d->nsel_d[buf] + t0, (int)nt,
                               &err);
    if (rc == IG_OK)
        rc = ig_be_gather_rows(xq, wv, (int64_t)tstride, d->home_v + lo, (int64_t)tstride,
                               (int64_t)d->row_bytes, d->tab_d[buf] + t0, d->row_bytes,
                               d->idx_d[buf] + t0 * cap, (int64_t)cap, d->nsel_d[buf] + t0, (int)nt,
                               &err);
    if (rc == IG_OK) rc = ig_be_event_record(xq, d->ev[ev], &err);
    keep_err(d, rc, &err);
}

void ig_kv_dev_wait(ig_kv_dev *d, int ev) {
    if (d->sticky != IG_OK) return;
    ig_error err;
    keep_err(d, ig_be_event_wait(d->be, d->ev[ev], &err), &err);
}

/* The new rows as attention sees them: through the codec (f16 rounding, or quantized), as the
 * host path's decode_seq does. */
static ig_status codec_roundtrip(ig_kv_dev *d, float *x, int64_t rows, ig_error *err) {
    const ig_kv_codec *cd = &d->codec;
    int hd = d->hd;
    if (cd->kind == IG_KV_CODEC_F32) return IG_OK;
    if (cd->kind == IG_KV_CODEC_F16) {
        IG_TRY(ig_be_convert(d->be, x, IG_DTYPE_F32, d->codec_tmp, IG_DTYPE_F16, rows * hd, err));
        return ig_be_convert(d->be, d->codec_tmp, IG_DTYPE_F16, x, IG_DTYPE_F32, rows * hd, err);
    }
    IG_TRY(ig_be_kvq_quantize(d->be, x, rows, hd, cd->bits, cd->group, d->codec_tmp, err));
    return ig_be_kvq_dequantize(d->be, d->codec_tmp, rows, hd, cd->bits, cd->group, x, err);
}

/* One row of `bytes` between buffers of the table, queued like an op. */
static ig_status copy_row(ig_be *be, void *dst, const void *src, size_t bytes, ig_error *err) {
    return ig_be_copy2d(be, dst, bytes, src, bytes, bytes, 1, err);
}

static ig_status decode(ig_kv_dev *d, int buf, int i0, int n, const int64_t *rows, const float *q,
                        const float *k, const float *v, float *att, int probs, ig_error *err) {
    ig_be *be = d->be;
    int G = d->G, H = d->H, hd = d->hd;
    size_t qd = (size_t)H * (size_t)hd, kvd = (size_t)G * (size_t)hd, cap = (size_t)d->cap;
    size_t t0 = (size_t)i0 * (size_t)G, tstride = cap * d->row_bytes;
    for (int i = 0; i < n; i++) { /* pack the decode rows (not contiguous in a mixed call) */
        size_t row = (size_t)rows[i];
        IG_TRY(copy_row(be, d->dq + (size_t)i * qd, q + row * qd, qd * 4, err));
        IG_TRY(copy_row(be, d->dk + (size_t)i * kvd, k + row * kvd, kvd * 4, err));
        IG_TRY(copy_row(be, d->dv + (size_t)i * kvd, v + row * kvd, kvd * 4, err));
    }
    IG_TRY(codec_roundtrip(d, d->dk, (int64_t)n * G, err));
    IG_TRY(codec_roundtrip(d, d->dv, (int64_t)n * G, err));
    const ig_kv_codec *cd = &d->codec;
    ig_be_attn_rows a;
    memset(&a, 0, sizeof a);
    a.batch = n;
    a.n_head = H;
    a.n_kv_head = G;
    a.hd = hd;
    a.scale = 1.0f / sqrtf((float)hd);
    a.k = (char *)d->ws_k[buf] + t0 * tstride;
    a.v = (char *)d->ws_v[buf] + t0 * tstride;
    a.kv_dtype = cd->kind == IG_KV_CODEC_F16 ? IG_DTYPE_F16 : IG_DTYPE_F32;
    a.table_stride = (int64_t)cap * hd;
    a.row_stride = hd;
    if (cd->kind == IG_KV_CODEC_QUANT) {
        int64_t nrows = (int64_t)n * G * (int64_t)cap;
        IG_TRY(ig_be_kvq_dequantize(be, (const uint8_t *)a.k, nrows, hd, cd->bits, cd->group,
                                    d->wsf_k, err));
        IG_TRY(ig_be_kvq_dequantize(be, (const uint8_t *)a.v, nrows, hd, cd->bits, cd->group,
                                    d->wsf_v, err));
        a.k = d->wsf_k;
        a.v = d->wsf_v;
    }
    a.idx = NULL;
    a.n_sel = d->nsel_d[buf] + t0;
    a.k_extra = d->dk;
    a.v_extra = d->dv;
    a.n_extra = 1;
    a.probs = probs ? d->dprobs : NULL;
    a.probs_stride = d->cap + 1;
    IG_TRY(ig_be_attention_rows(be, &a, d->dq, d->datt, err));
    for (int i = 0; i < n; i++)
        IG_TRY(copy_row(be, att + (size_t)rows[i] * qd, d->datt + (size_t)i * qd, qd * 4, err));
    if (probs) {
        size_t nb = (size_t)n * (size_t)H * (size_t)(d->cap + 1) * sizeof(float);
        IG_TRY(ig_be_download(be, d->probs_h, d->dprobs, nb, err));
    }
    /* the stores that follow on the host may reuse entries this layer's gather read */
    return ig_be_sync(be, err);
}

const float *ig_kv_dev_decode(ig_kv_dev *d, int buf, int i0, int n, const int64_t *rows,
                              const float *q, const float *k, const float *v, float *att,
                              int want_probs) {
    if (d->sticky != IG_OK || n <= 0) return NULL;
    ig_error err;
    keep_err(d, decode(d, buf, i0, n, rows, q, k, v, att, want_probs, &err), &err);
    return d->sticky == IG_OK && want_probs ? d->probs_h : NULL;
}
