/* KV home tier: entry tables with encoded rows. No policy logic here. */
#include "offload/kv_home.h"

#include "kernels/cpu/kvquant.h"
#include "offload/disk.h"
#include "offload/hostmem.h"

#ifdef IG_HAVE_CUDA
#endif

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ig_kv_home {
    ig_kv_home_opts o;
    size_t row_bytes;
    size_t n_tables; /* n_layer * n_slots * n_kv_head */
    unsigned char *k, *v;
    ig_hostmem *k_mem, *v_mem; /* NUMA-bound rows (with a topology) */
    size_t mem_bytes;          /* bytes of k (and of v) */
    int32_t *pos;              /* [table][capacity] */
    int32_t *free_list;        /* [table][capacity] stack of released entries */
    int64_t *n_free, *n_used, *high;
    int mem_slots;      /* slots [0, mem_slots) in memory, the rest on disk */
    ig_disk_file *file; /* disk slots: all K rows, then all V rows */
    size_t disk_v_off;  /* byte offset of the V rows in the file */
    pthread_mutex_t mu; /* the first I/O error */
    char io_err[IG_ERROR_MSG_MAX];
    double disk_read, disk_write; /* bytes, under mu */
};

/* Row index of (layer, slot, head) entry 0 in its region: memory slots in memory, disk slots in
 * the file. */
static size_t region_table(const ig_kv_home *h, int layer, int slot, int head) {
    int mem = slot < h->mem_slots;
    size_t n = mem ? (size_t)h->mem_slots : (size_t)(h->o.n_slots - h->mem_slots);
    size_t sl = mem ? (size_t)slot : (size_t)(slot - h->mem_slots);
    return ((size_t)layer * n + sl) * (size_t)h->o.n_kv_head + (size_t)head;
}

static void io_fail(ig_kv_home *h, const ig_error *err) {
    pthread_mutex_lock(&h->mu);
    if (!h->io_err[0]) snprintf(h->io_err, sizeof h->io_err, "%s", err->msg);
    pthread_mutex_unlock(&h->mu);
}

size_t ig_kv_codec_row_bytes(const ig_kv_codec *c, int hd) {
    switch (c->kind) {
    case IG_KV_CODEC_F32:
        return (size_t)hd * 4;
    case IG_KV_CODEC_F16:
        return (size_t)hd * 2;
    case IG_KV_CODEC_QUANT:
        return ig_kvq_row_bytes(hd, c->bits, c->group);
    }
    return 0;
}

int ig_kv_codec_is_exact(const ig_kv_codec *c) {
    return c->kind == IG_KV_CODEC_F32;
}

const char *ig_kv_codec_name(const ig_kv_codec *c, char *buf, size_t n) {
    if (c->kind == IG_KV_CODEC_F32)
        snprintf(buf, n, "f32");
    else if (c->kind == IG_KV_CODEC_F16)
        snprintf(buf, n, "f16");
    else
        snprintf(buf, n, "int%d/g%d", c->bits, c->group);
    return buf;
}

void ig_kv_codec_encode(const ig_kv_codec *c, const float *x, int64_t n_rows, int hd, void *out) {
    size_t n = (size_t)n_rows * (size_t)hd;
    if (c->kind == IG_KV_CODEC_F32)
        memcpy(out, x, n * sizeof(float));
    else if (c->kind == IG_KV_CODEC_F16)
        ig_convert(IG_DTYPE_F16, out, IG_DTYPE_F32, x, n);
    else
        ig_kvq_quantize_rows(x, n_rows, hd, c->bits, c->group, out);
}

void ig_kv_codec_decode(const ig_kv_codec *c, const void *in, int64_t n_rows, int hd, float *out) {
    size_t n = (size_t)n_rows * (size_t)hd;
    if (c->kind == IG_KV_CODEC_F32)
        memcpy(out, in, n * sizeof(float));
    else if (c->kind == IG_KV_CODEC_F16)
        ig_convert(IG_DTYPE_F32, out, IG_DTYPE_F16, in, n);
    else
        ig_kvq_dequantize_rows(in, n_rows, hd, c->bits, c->group, out);
}

static size_t table(const ig_kv_home *h, int layer, int slot, int head) {
    IG_ASSERT(layer >= 0 && layer < h->o.n_layer && slot >= 0 && slot < h->o.n_slots && head >= 0 &&
              head < h->o.n_kv_head);
    return ((size_t)layer * (size_t)h->o.n_slots + (size_t)slot) * (size_t)h->o.n_kv_head +
           (size_t)head;
}

ig_status ig_kv_home_create(const ig_kv_home_opts *o, ig_kv_home **out, ig_error *err) {
    *out = NULL;
    if (o->n_layer <= 0 || o->n_slots <= 0 || o->n_kv_head <= 0 || o->head_dim <= 0 ||
        o->capacity <= 0 || o->capacity > (1LL << 30))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "KV home: invalid shape (%d layers, %d slots, %d heads, head_dim %d, "
                            "capacity %lld)",
                            o->n_layer, o->n_slots, o->n_kv_head, o->head_dim,
                            (long long)o->capacity);
    if (o->codec.kind == IG_KV_CODEC_QUANT &&
        ig_kvq_row_bytes(o->head_dim, o->codec.bits, o->codec.group) == 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "KV codec: %d bits in groups of %d do not fit head_dim %d (bits 8, 4 "
                            "or 2; the group must divide head_dim)",
                            o->codec.bits, o->codec.group, o->head_dim);
    ig_kv_home *h = ig_calloc(1, sizeof *h, err);
    if (!h) return IG_ERR_NOMEM;
    h->o = *o;
    h->row_bytes = ig_kv_codec_row_bytes(&o->codec, o->head_dim);
    h->n_tables = (size_t)o->n_layer * (size_t)o->n_slots * (size_t)o->n_kv_head;
    pthread_mutex_init(&h->mu, NULL);
    h->mem_slots = o->n_slots;
    if (o->disk) {
        if (o->disk_slot0 < 0 || o->disk_slot0 > o->n_slots) {
            ig_kv_home_free(h);
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "KV home: disk slots from %d outside [0, %d]", o->disk_slot0,
                                o->n_slots);
        }
        h->mem_slots = o->disk_slot0;
        size_t drows = (size_t)o->n_layer * (size_t)(o->n_slots - h->mem_slots) *
                       (size_t)o->n_kv_head * (size_t)o->capacity;
        h->disk_v_off = drows * h->row_bytes;
        if (drows > 0) {
            ig_status st = ig_disk_file_create_rows(o->disk, "kv-cache", 2 * drows * h->row_bytes,
                                                    &h->file, err);
            if (st != IG_OK) {
                ig_error_prefix(err,
                                "KV cache of %d sequences on disk: ", o->n_slots - h->mem_slots);
                ig_kv_home_free(h);
                return st;
            }
        }
    }
    /* memory rows: the memory slots only (at least one row, so the pointers are valid) */
    size_t rows =
        (size_t)o->n_layer * (size_t)h->mem_slots * (size_t)o->n_kv_head * (size_t)o->capacity;
    if (rows == 0) rows = 1;
    h->mem_bytes = rows * h->row_bytes;
    size_t meta = h->n_tables * (size_t)o->capacity;
    if (o->topo) {
        ig_numa_mode mode = o->numa >= 0 ? IG_NUMA_NODES : IG_NUMA_INTERLEAVE;
        int node = o->numa;
        ig_status st = ig_hostmem_alloc(o->topo, mode, &node, o->numa >= 0, rows * h->row_bytes,
                                        &h->k_mem, err);
        if (st == IG_OK)
            st = ig_hostmem_alloc(o->topo, mode, &node, o->numa >= 0, rows * h->row_bytes,
                                  &h->v_mem, err);
        if (st != IG_OK) {
            ig_kv_home_free(h);
            return st;
        }
        h->k = ig_hostmem_ptr(h->k_mem);
        h->v = ig_hostmem_ptr(h->v_mem);
    } else {
        h->k = ig_aligned_alloc(rows * h->row_bytes, err);
        h->v = ig_aligned_alloc(rows * h->row_bytes, err);
    }
    h->pos = ig_malloc(meta * sizeof(int32_t), err);
    h->free_list = ig_malloc(meta * sizeof(int32_t), err);
    h->n_free = ig_calloc(h->n_tables, sizeof(int64_t), err);
    h->n_used = ig_calloc(h->n_tables, sizeof(int64_t), err);
    h->high = ig_calloc(h->n_tables, sizeof(int64_t), err);
    if (!h->k || !h->v || !h->pos || !h->free_list || !h->n_free || !h->n_used || !h->high) {
        ig_kv_home_free(h);
        return ig_error_set(err, IG_ERR_NOMEM, "KV home: out of memory for %zu MiB of KV cache",
                            2 * rows * ig_kv_codec_row_bytes(&o->codec, o->head_dim) >> 20);
    }
    for (size_t i = 0; i < meta; i++) h->pos[i] = -1;
    *out = h;
    return IG_OK;
}

void ig_kv_home_row_memory(const ig_kv_home *h, void **k, void **v, size_t *bytes) {
    *k = h->k;
    *v = h->v;
    *bytes = h->mem_bytes;
}

void ig_kv_home_free(ig_kv_home *h) {
    if (!h) return;
    if (h->k_mem || h->v_mem) {
        ig_hostmem_free(h->k_mem);
        ig_hostmem_free(h->v_mem);
    } else {
        free(h->k);
        free(h->v);
    }
    free(h->pos);
    free(h->free_list);
    free(h->n_free);
    free(h->n_used);
    free(h->high);
    ig_disk_file_free(h->file);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

const ig_kv_home_opts *ig_kv_home_get_opts(const ig_kv_home *h) {
    return &h->o;
}
size_t ig_kv_home_row_bytes(const ig_kv_home *h) {
    return h->row_bytes;
}
int ig_kv_home_numa(const ig_kv_home *h) {
    return h->k_mem ? ig_hostmem_numa(h->k_mem) : -1;
}

const int32_t *ig_kv_home_pos(const ig_kv_home *h, int layer, int slot, int head) {
    return h->pos + table(h, layer, slot, head) * (size_t)h->o.capacity;
}

int64_t ig_kv_home_n_used(const ig_kv_home *h, int layer, int slot, int head) {
    return h->n_used[table(h, layer, slot, head)];
}

int64_t ig_kv_home_high_water(const ig_kv_home *h, int layer, int slot, int head) {
    return h->high[table(h, layer, slot, head)];
}

int64_t ig_kv_home_take(ig_kv_home *h, int layer, int slot, int head) {
    size_t t = table(h, layer, slot, head);
    int64_t e;
    if (h->n_free[t] > 0)
        e = h->free_list[t * (size_t)h->o.capacity + (size_t)--h->n_free[t]];
    else if (h->high[t] < h->o.capacity)
        e = h->high[t]++;
    else
        return -1;
    h->n_used[t]++;
    /* Mark taken (position set by write) so that a second take cannot return it. */
    h->pos[t * (size_t)h->o.capacity + (size_t)e] = -2;
    return e;
}

void ig_kv_home_write_rows(ig_kv_home *h, int layer, int slot, int head, int64_t e, const float *k,
                           const float *v) {
    /* no metadata here (another thread may be changing it): only the immutable layout */
    IG_ASSERT(e >= 0 && e < h->o.capacity);
    (void)table(h, layer, slot, head); /* its range checks */
    size_t off =
        (region_table(h, layer, slot, head) * (size_t)h->o.capacity + (size_t)e) * h->row_bytes;
    if (slot < h->mem_slots) {
        ig_kv_codec_encode(&h->o.codec, k, 1, h->o.head_dim, h->k + off);
        ig_kv_codec_encode(&h->o.codec, v, 1, h->o.head_dim, h->v + off);
    } else {
        unsigned char row[2][4096];
        IG_ASSERT(h->row_bytes <= sizeof row[0]);
        ig_kv_codec_encode(&h->o.codec, k, 1, h->o.head_dim, row[0]);
        ig_kv_codec_encode(&h->o.codec, v, 1, h->o.head_dim, row[1]);
        ig_error err;
        if (ig_disk_pwrite(h->file, off, row[0], h->row_bytes, &err) != IG_OK ||
            ig_disk_pwrite(h->file, h->disk_v_off + off, row[1], h->row_bytes, &err) != IG_OK)
            io_fail(h, &err);
        pthread_mutex_lock(&h->mu);
        h->disk_write += 2.0 * (double)h->row_bytes;
        pthread_mutex_unlock(&h->mu);
    }
}

void ig_kv_home_set_pos(ig_kv_home *h, int layer, int slot, int head, int64_t e, int32_t pos) {
    size_t t = table(h, layer, slot, head);
    IG_ASSERT(e >= 0 && e < h->high[t] && h->pos[t * (size_t)h->o.capacity + (size_t)e] != -1);
    h->pos[t * (size_t)h->o.capacity + (size_t)e] = pos;
}

void ig_kv_home_write(ig_kv_home *h, int layer, int slot, int head, int64_t e, int32_t pos,
                      const float *k, const float *v) {
    size_t t = table(h, layer, slot, head);
    IG_ASSERT(e >= 0 && e < h->high[t] && h->pos[t * (size_t)h->o.capacity + (size_t)e] != -1);
    ig_kv_home_write_rows(h, layer, slot, head, e, k, v);
    ig_kv_home_set_pos(h, layer, slot, head, e, pos);
}

void ig_kv_home_release(ig_kv_home *h, int layer, int slot, int head, int64_t e) {
    size_t t = table(h, layer, slot, head);
    int32_t *p = &h->pos[t * (size_t)h->o.capacity + (size_t)e];
    IG_ASSERT(e >= 0 && e < h->high[t] && *p != -1);
    *p = -1;
    h->free_list[t * (size_t)h->o.capacity + (size_t)h->n_free[t]++] = (int32_t)e;
    h->n_used[t]--;
}

void ig_kv_home_reset_slot(ig_kv_home *h, int slot) {
    for (int l = 0; l < h->o.n_layer; l++)
        for (int g = 0; g < h->o.n_kv_head; g++) {
            size_t t = table(h, l, slot, g);
            int32_t *p = h->pos + t * (size_t)h->o.capacity;
            for (int64_t e = 0; e < h->high[t]; e++) p[e] = -1;
            h->n_free[t] = h->n_used[t] = h->high[t] = 0;
        }
}

int ig_kv_home_on_disk(const ig_kv_home *h, int slot) {
    return slot >= h->mem_slots;
}
double ig_kv_home_disk_read_bytes(const ig_kv_home *h) {
    return h->file ? h->disk_read : 0;
}
double ig_kv_home_disk_write_bytes(const ig_kv_home *h) {
    return h->file ? h->disk_write : 0;
}
const char *ig_kv_home_io_error(const ig_kv_home *h) {
    return h->io_err[0] ? h->io_err : NULL;
}

const void *ig_kv_home_k_base(const ig_kv_home *h, int layer, int slot, int head) {
    IG_ASSERT(slot < h->mem_slots);
    return h->k + region_table(h, layer, slot, head) * (size_t)h->o.capacity * h->row_bytes;
}

const void *ig_kv_home_v_base(const ig_kv_home *h, int layer, int slot, int head) {
    IG_ASSERT(slot < h->mem_slots);
    return h->v + region_table(h, layer, slot, head) * (size_t)h->o.capacity * h->row_bytes;
}

/* Disk slots: runs of consecutive entries are read with one pread each into a bounce buffer. */
static void read_disk(const ig_kv_home *h, int layer, int slot, int head, const int32_t *entries,
                      int64_t n, float *k_out, float *v_out) {
    ig_kv_home *hm = (ig_kv_home *)h; /* the I/O error and counters are the home's own state */
    size_t base = region_table(h, layer, slot, head) * (size_t)h->o.capacity * h->row_bytes;
    int hd = h->o.head_dim;
    /* f32 rows are stored as they are returned: a run is read straight into the output, however
     * long; other codecs go through a bounce buffer and are decoded */
    int direct = h->o.codec.kind == IG_KV_CODEC_F32;
    unsigned char buf[64 * 1024];
    int64_t max_run = direct ? n : (int64_t)(sizeof buf / h->row_bytes);
    IG_ASSERT(max_run >= 1 || n == 0);
    double bytes = 0;
    for (int64_t i = 0, run; i < n; i += run) {
        for (run = 1; run < max_run && i + run < n && entries[i + run] == entries[i] + run;) run++;
        size_t off = base + (size_t)entries[i] * h->row_bytes, len = (size_t)run * h->row_bytes;
        ig_error err;
        for (int kv = 0; kv < 2; kv++) {
            float *out = (kv ? v_out : k_out) + (size_t)i * (size_t)hd;
            void *dst = direct ? (void *)out : (void *)buf;
            if (ig_disk_pread(h->file, off + (kv ? h->disk_v_off : 0), dst, len, &err) != IG_OK) {
                io_fail(hm, &err);
                memset(dst, 0, len);
            }
            if (!direct) ig_kv_codec_decode(&h->o.codec, buf, run, hd, out);
        }
        bytes += 2.0 * (double)len;
    }
    pthread_mutex_lock(&hm->mu);
    hm->disk_read += bytes;
    pthread_mutex_unlock(&hm->mu);
}

void ig_kv_home_read(const ig_kv_home *h, int layer, int slot, int head, const int32_t *entries,
                     int64_t n, float *k_out, float *v_out) {
    if (slot >= h->mem_slots) {
        read_disk(h, layer, slot, head, entries, n, k_out, v_out);
        return;
    }
    const unsigned char *kb = ig_kv_home_k_base(h, layer, slot, head);
    const unsigned char *vb = ig_kv_home_v_base(h, layer, slot, head);
    int hd = h->o.head_dim;
    /* runs of consecutive entries decode in one call (whole tables for dense policies) */
    for (int64_t i = 0, run; i < n; i += run) {
        /* up to 64 rows per call amortise the call; longer runs showed no consistent gain in
         * bench-decode on the 2-core machine (its run-to-run variance is larger than the effect) */
        for (run = 1; run < 64 && i + run < n && entries[i + run] == entries[i] + run;) run++;
        size_t off = (size_t)entries[i] * h->row_bytes;
        ig_kv_codec_decode(&h->o.codec, kb + off, run, hd, k_out + (size_t)i * (size_t)hd);
        ig_kv_codec_decode(&h->o.codec, vb + off, run, hd, v_out + (size_t)i * (size_t)hd);
    }
}

size_t ig_kv_home_resident_bytes(const ig_kv_home *h) {
    size_t n = 0;
    for (size_t t = 0; t < h->n_tables; t++) n += (size_t)h->n_used[t];
    return 2 * n * h->row_bytes;
}

size_t ig_kv_home_resident_bytes_slots(const ig_kv_home *h, int slot0, int slot1) {
    size_t n = 0;
    for (int l = 0; l < h->o.n_layer; l++)
        for (int s = slot0 < 0 ? 0 : slot0; s < slot1 && s < h->o.n_slots; s++)
            for (int g = 0; g < h->o.n_kv_head; g++) n += (size_t)h->n_used[table(h, l, s, g)];
    return 2 * n * h->row_bytes;
}

size_t ig_kv_home_allocated_bytes(const ig_kv_home *h) {
    return 2 * h->n_tables * (size_t)h->o.capacity * h->row_bytes;
}
