/* The placement planner (plan.h): tensor sizes from a model shape, FlexGen's midpoint rule for
 * weights, whole-sequence KV and activation placement, NUMA assignment of host bytes, working
 * buffers, and the capacity check. Pure arithmetic over sizes; it never allocates tier memory. */
#include "offload/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ig_plan {
    ig_plan_opts o;
    ig_machine m;
    ig_weight_placement wp;
    size_t *tensor_bytes; /* n_layer * IG_WT_COUNT */
    size_t outer_bytes;
    ig_plan_layer_io *layers;
    int block; /* sequences */
    int kv_n[IG_TIER_COUNT], act_n[IG_TIER_COUNT];
    ig_tier_ref *kv_seq; /* block entries */
    size_t kv_seq_bytes;
    size_t act_seq_bytes;
    ig_plan_usage u;
};

static const char *const dtype_names[IG_PLAN_DTYPE_COUNT] = {"f32",  "f16",  "bf16", "int4",
                                                             "int8", "q4_0", "q4_1", "q8_0"};

const char *ig_plan_dtype_name(ig_plan_dtype t) {
    return (int)t >= 0 && t < IG_PLAN_DTYPE_COUNT ? dtype_names[t] : "?";
}

int ig_plan_dtype_from_name(const char *s) {
    for (int i = 0; i < IG_PLAN_DTYPE_COUNT; i++)
        if (!strcmp(s, dtype_names[i])) return i;
    return -1;
}

size_t ig_plan_row_bytes(ig_plan_dtype t, size_t n) {
    switch (t) {
    case IG_PLAN_F32:
        return 4 * n;
    case IG_PLAN_F16:
    case IG_PLAN_BF16:
        return 2 * n;
    case IG_PLAN_INT4: {
        size_t groups = (n + 63) / 64;
        return (n + 1) / 2 + 4 * groups; /* packed nibbles + f16 scale and min per group */
    }
    case IG_PLAN_INT8:
        return n + 4 * ((n + 63) / 64);
    case IG_PLAN_Q4_0: /* ggml's blocks, as core/base/dtype.h lays them out (a short tail padded) */
        return IG_Q4_0_BYTES * ((n + IG_Q4_0_BLOCK - 1) / IG_Q4_0_BLOCK);
    case IG_PLAN_Q4_1:
        return IG_Q4_1_BYTES * ((n + IG_Q4_1_BLOCK - 1) / IG_Q4_1_BLOCK);
    case IG_PLAN_Q8_0:
        return IG_Q8_0_BYTES * ((n + IG_Q8_0_BLOCK - 1) / IG_Q8_0_BLOCK);
    default:
        return 0;
    }
}

ig_plan_dtype ig_plan_dtype_of_weight(ig_dtype t) {
    switch (t) {
    case IG_DTYPE_F16:
        return IG_PLAN_F16;
    case IG_DTYPE_BF16:
        return IG_PLAN_BF16;
    case IG_DTYPE_Q4G64:
        return IG_PLAN_INT4;
    case IG_DTYPE_Q8G64:
        return IG_PLAN_INT8;
    case IG_DTYPE_Q4_0:
        return IG_PLAN_Q4_0;
    case IG_DTYPE_Q4_1:
        return IG_PLAN_Q4_1;
    case IG_DTYPE_Q8_0:
        return IG_PLAN_Q8_0;
    default:
        return IG_PLAN_F32;
    }
}

int ig_plan_dtype_is_compressed(ig_plan_dtype t) {
    return t == IG_PLAN_INT4 || t == IG_PLAN_INT8 || t == IG_PLAN_Q4_0 || t == IG_PLAN_Q4_1 ||
           t == IG_PLAN_Q8_0;
}

size_t ig_plan_bytes_total(const ig_plan_bytes *b) {
    return b->weights + b->kv + b->act + b->buffers + b->policy;
}

void ig_plan_opts_init(ig_plan_opts *o) {
    memset(o, 0, sizeof *o);
    o->weight_dtype = IG_PLAN_F16;
    o->act_dtype = IG_PLAN_F16;
    o->kv_dtype = IG_PLAN_F16;
    o->kv_keep_fraction = 1.0;
    o->fetch_fraction = 1.0;
    o->overlap = 1;
    o->numa_mode = IG_NUMA_LOCAL;
    o->pct = (ig_plan_percent){100, 0, 100, 0, 100, 0};
    o->wl = (ig_workload){512, 32, 1, 1};
}

/* "12.3" GiB with a precision that keeps small numbers readable. */
static void fmt_gib(char *buf, size_t n, size_t bytes) {
    double g = (double)bytes / 1073741824.0;
    if (g >= 100)
        snprintf(buf, n, "%.0f", g);
    else if (g >= 1)
        snprintf(buf, n, "%.1f", g);
    else if (g >= 0.001)
        snprintf(buf, n, "%.3f", g);
    else
        snprintf(buf, n, "%.6f", g);
}

static void fmt_breakdown(char *buf, size_t n, const ig_plan_bytes *b) {
    const char *names[5] = {"weights", "KV", "activations", "buffers", "policy state"};
    size_t v[5] = {b->weights, b->kv, b->act, b->buffers, b->policy};
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < 5; i++) {
        if (!v[i]) continue;
        char g[32];
        fmt_gib(g, sizeof g, v[i]);
        o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "%s%s %s", o ? ", " : "", names[i], g);
        if (o >= n) break;
    }
}

static ig_status capacity_error(ig_error *err, const char *tier, const ig_plan_bytes *b, size_t cap,
                                int no_tier) {
    char need[32], has[32], bd[256];
    fmt_gib(need, sizeof need, ig_plan_bytes_total(b));
    fmt_gib(has, sizeof has, cap);
    fmt_breakdown(bd, sizeof bd, b);
    if (no_tier)
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "%s: needs %s GiB (%s) but the machine has no %s tier", tier, need, bd,
                            tier);
    return ig_error_set(err, IG_ERR_CAPACITY, "%s: needs %s GiB (%s) but has %s GiB", tier, need,
                        bd, has);
}

ig_status ig_plan_check_fits(const ig_plan_usage *u, const ig_machine *m, ig_error *err) {
    if (ig_plan_bytes_total(&u->device) > m->device_bytes)
        return capacity_error(err, "device", &u->device, m->device_bytes, 0);
    for (int i = 0; i < m->n_numa; i++)
        if (ig_plan_bytes_total(&u->host_node[i]) > m->numa_bytes[i]) {
            char t[48];
            snprintf(t, sizeof t, "host node %d", m->numa_os[i]);
            return capacity_error(err, t, &u->host_node[i], m->numa_bytes[i], 0);
        }
    if (ig_plan_bytes_total(&u->disk) > m->disk_bytes)
        return capacity_error(err, "disk", &u->disk, m->disk_bytes, m->disk_bytes == 0);
    return IG_OK;
}

/* ---- validation ---- */

static ig_status check_pct(double v, const char *name, ig_error *err) {
    if (!(v >= 0 && v <= 100))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "percent %s = %g: must be in [0, 100]", name,
                            v);
    return IG_OK;
}

static ig_status check_pair(double a, double b, const char *what, const char *na, const char *nb,
                            ig_error *err) {
    IG_TRY(check_pct(a, na, err));
    IG_TRY(check_pct(b, nb, err));
    if (a + b > 100 + 1e-9)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "percent of %s on device and host: %g + %g = %g is more than 100 (the "
                            "rest goes to disk)",
                            what, a, b, a + b);
    return IG_OK;
}

static int machine_node_index(const ig_machine *m, int os) {
    for (int i = 0; i < m->n_numa; i++)
        if (m->numa_os[i] == os) return i;
    return -1;
}

static void node_list(const ig_machine *m, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < m->n_numa && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%d", i ? ", " : "", m->numa_os[i]);
}

static ig_status validate(const ig_plan_opts *o, const ig_machine *m, ig_error *err) {
    const ig_model_config *c = &o->model;
    if (c->n_layer < 1 || c->n_layer > 100000 || c->d_model < 1 || c->n_head < 1 ||
        c->n_kv_head < 1 || c->head_dim < 1 || c->d_ffn < 1 || c->vocab < 1 || c->max_pos < 0 ||
        c->d_model > (1 << 20) || c->d_ffn > (1 << 22) || c->vocab > (1 << 24) ||
        c->n_head > 65536 || c->head_dim > 65536)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "model shape: layers %d, d_model %d, heads %d/%d, head_dim %d, ffn %d, "
                            "vocab %d: every size must be positive and plausible",
                            c->n_layer, c->d_model, c->n_head, c->n_kv_head, c->head_dim, c->d_ffn,
                            c->vocab);
    if (c->n_head % c->n_kv_head)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "model shape: %d query heads are not a multiple of %d KV heads",
                            c->n_head, c->n_kv_head);
    if ((int)o->weight_dtype < 0 || o->weight_dtype >= IG_PLAN_DTYPE_COUNT ||
        (int)o->kv_dtype < 0 || o->kv_dtype >= IG_PLAN_DTYPE_COUNT || (int)o->act_dtype < 0 ||
        o->act_dtype >= IG_PLAN_DTYPE_COUNT || ig_plan_dtype_is_compressed(o->act_dtype))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "bad weight, KV or activation format");
    const ig_workload *w = &o->wl;
    if (w->prompt_len < 1 || w->prompt_len > 10000000 || w->gen_len < 1 || w->gen_len > 10000000)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "workload: prompt length %d and generation length %d must be in "
                            "1..10000000",
                            w->prompt_len, w->gen_len);
    if (w->gpu_batch_size < 1 || w->num_gpu_batches < 1 || w->gpu_batch_size > 65536 ||
        w->num_gpu_batches > 65536 || (long)w->gpu_batch_size * w->num_gpu_batches > 1000000)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "workload: gpu batch size %d x %d gpu batches: each must be >= 1 and "
                            "the block at most 1000000 sequences",
                            w->gpu_batch_size, w->num_gpu_batches);
    IG_TRY(check_pair(o->pct.w_gpu, o->pct.w_cpu, "weights", "w_gpu", "w_cpu", err));
    IG_TRY(check_pair(o->pct.cache_gpu, o->pct.cache_cpu, "the KV cache", "cache_gpu", "cache_cpu",
                      err));
    IG_TRY(check_pair(o->pct.act_gpu, o->pct.act_cpu, "activations", "act_gpu", "act_cpu", err));
    if (!(o->kv_keep_fraction > 0 && o->kv_keep_fraction <= 1))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "KV keep fraction %g: must be in (0, 1]",
                            o->kv_keep_fraction);
    if (!(o->fetch_fraction >= 0 && o->fetch_fraction <= o->kv_keep_fraction + 1e-12))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "fetch fraction %g: must be in [0, keep fraction %g] (a step cannot "
                            "fetch rows that are not kept)",
                            o->fetch_fraction, o->kv_keep_fraction);
    if (!(o->partial_ratio >= 0 && o->partial_ratio <= 1))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "partial ratio %g: must be in [0, 1]",
                            o->partial_ratio);
    if (m->n_numa < 1 || m->n_numa > IG_MAX_NUMA)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "machine: %d NUMA nodes (need 1..%d)",
                            m->n_numa, IG_MAX_NUMA);
    if ((int)o->numa_mode < IG_NUMA_LOCAL || o->numa_mode > IG_NUMA_NODES)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "bad NUMA mode %d", (int)o->numa_mode);
    if (o->n_numa_nodes < 0 || o->n_numa_nodes > IG_MAX_NUMA)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "NUMA node list of %d entries",
                            o->n_numa_nodes);
    if (o->numa_mode == IG_NUMA_NODES && o->n_numa_nodes == 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "NUMA: an explicit node list is empty");
    char nodes[512];
    node_list(m, nodes, sizeof nodes);
    for (int i = 0; i < o->n_numa_nodes; i++) {
        if (machine_node_index(m, o->numa_nodes[i]) < 0)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "NUMA node %d is not in the machine (nodes: %s)", o->numa_nodes[i],
                                nodes);
        for (int j = 0; j < i; j++)
            if (o->numa_nodes[j] == o->numa_nodes[i])
                return ig_error_set(err, IG_ERR_INVALID_ARG, "NUMA node %d is listed twice",
                                    o->numa_nodes[i]);
    }
    if (o->numa_mode == IG_NUMA_LOCAL && m->device_numa >= 0 &&
        machine_node_index(m, m->device_numa) < 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "NUMA local: the device's node %d is not in the machine (nodes: %s)",
                            m->device_numa, nodes);
    return IG_OK;
}

/* ---- sizes ---- */

static void layer_sizes(const ig_plan_opts *o, size_t sz[IG_WT_COUNT], double *flops_per_tok) {
    const ig_model_config *c = &o->model;
    ig_plan_dtype wd = o->weight_dtype;
    ig_plan_dtype vd = ig_plan_dtype_is_compressed(wd) ? IG_PLAN_F16 : wd;
    size_t d = (size_t)c->d_model, q = (size_t)c->n_head * (size_t)c->head_dim;
    size_t kv = (size_t)c->n_kv_head * (size_t)c->head_dim, f = (size_t)c->d_ffn;
    int opt = c->arch == IG_ARCH_OPT;
    size_t norm = ig_plan_row_bytes(vd, d) * (opt ? 2 : 1);
#define MAT(out, in) ((out)*ig_plan_row_bytes(wd, (in)))
#define VEC(n)       ig_plan_row_bytes(vd, (n))
    sz[IG_WT_ATTN_NORM] = norm;
    sz[IG_WT_Q] = MAT(q, d) + (c->attn_bias ? VEC(q) : 0);
    sz[IG_WT_K] = MAT(kv, d) + (c->attn_bias ? VEC(kv) : 0);
    sz[IG_WT_V] = MAT(kv, d) + (c->attn_bias ? VEC(kv) : 0);
    sz[IG_WT_O] = MAT(d, q) + (c->attn_bias ? VEC(d) : 0);
    sz[IG_WT_FFN_NORM] = norm;
    sz[IG_WT_GATE] = opt ? 0 : MAT(f, d) + (c->mlp_bias ? VEC(f) : 0);
    sz[IG_WT_UP] = MAT(f, d) + (c->mlp_bias ? VEC(f) : 0);
    sz[IG_WT_DOWN] = MAT(d, f) + (c->mlp_bias ? VEC(d) : 0);
    double params = (double)d * (double)q * 2 + (double)d * (double)kv * 2 +
                    (double)d * (double)f * (opt ? 2 : 3);
    *flops_per_tok = 2 * params;
#undef MAT
#undef VEC
}

static size_t outer_sizes(const ig_plan_opts *o) {
    const ig_model_config *c = &o->model;
    ig_plan_dtype wd = o->weight_dtype;
    ig_plan_dtype vd = ig_plan_dtype_is_compressed(wd) ? IG_PLAN_F16 : wd;
    size_t d = (size_t)c->d_model, v = (size_t)c->vocab;
    size_t s = v * ig_plan_row_bytes(wd, d);
    if (c->arch == IG_ARCH_OPT)
        s += ((size_t)c->max_pos + (size_t)c->pos_offset) * ig_plan_row_bytes(wd, d);
    s += ig_plan_row_bytes(vd, d) * (c->arch == IG_ARCH_OPT ? 2 : 1);
    if (!c->tied_embeddings) s += v * ig_plan_row_bytes(wd, d);
    return s;
}

/* Tier of an item whose cumulative-size midpoint is at fraction `mid` of its group. */
static ig_tier_kind tier_at(double mid, double gpu_pct, double cpu_pct) {
    if (mid < gpu_pct / 100.0) return IG_TIER_DEVICE;
    if (mid < (gpu_pct + cpu_pct) / 100.0) return IG_TIER_HOST;
    return IG_TIER_DISK;
}

/* Whole-sequence split with cumulative rounding (half up): n_dev = round(B gpu%), n_dev + n_host =
 * round(B (gpu% + cpu%)), the rest on disk. */
static void split_sequences(int B, double gpu_pct, double cpu_pct, int n[IG_TIER_COUNT]) {
    double a = (double)B * gpu_pct / 100.0, b = (double)B * (gpu_pct + cpu_pct) / 100.0;
    int na = (int)floor(a + 0.5 + 1e-9), nb = (int)floor(b + 0.5 + 1e-9);
    if (na > B) na = B;
    if (nb > B) nb = B;
    if (nb < na) nb = na;
    n[IG_TIER_DEVICE] = na;
    n[IG_TIER_HOST] = nb - na;
    n[IG_TIER_DISK] = B - nb;
}

static void add_cat(ig_plan_bytes *b, int cat, size_t v) {
    switch (cat) {
    case 0:
        b->weights += v;
        break;
    case 1:
        b->kv += v;
        break;
    case 2:
        b->act += v;
        break;
    case 3:
        b->buffers += v;
        break;
    default:
        b->policy += v;
        break;
    }
}

/* Host-memory assignment state for the NUMA modes. */
typedef struct host_assign {
    const ig_plan_opts *o;
    const ig_machine *m;
    ig_plan_usage *u;
    int local_idx;        /* LOCAL: machine index of the node */
    int set[IG_MAX_NUMA]; /* INTERLEAVE / NODES: machine indices in order */
    int n_set;
    ig_error *err;
    ig_status st;
} host_assign;

/* Places one host item of `bytes` (category cat); returns the NUMA OS index it went to (-1 when
 * interleaved). Records a capacity error in ha->st for explicit lists where no node has room. */
static int host_put(host_assign *ha, int cat, size_t bytes) {
    ig_plan_usage *u = ha->u;
    add_cat(&u->host, cat, bytes);
    switch (ha->o->numa_mode) {
    case IG_NUMA_LOCAL:
        add_cat(&u->host_node[ha->local_idx], cat, bytes);
        return ha->m->numa_os[ha->local_idx];
    case IG_NUMA_INTERLEAVE: {
        size_t share = bytes / (size_t)ha->n_set, rem = bytes % (size_t)ha->n_set;
        for (int i = 0; i < ha->n_set; i++)
            add_cat(&u->host_node[ha->set[i]], cat, share + ((size_t)i < rem ? 1 : 0));
        return ha->n_set == 1 ? ha->m->numa_os[ha->set[0]] : -1;
    }
    default: {
        for (int i = 0; i < ha->n_set; i++) {
            int k = ha->set[i];
            size_t used = ig_plan_bytes_total(&u->host_node[k]);
            if (used + bytes <= ha->m->numa_bytes[k]) {
                add_cat(&u->host_node[k], cat, bytes);
                return ha->m->numa_os[k];
            }
        }
        /* nowhere: charge the last node so the capacity check names it */
        int k = ha->set[ha->n_set - 1];
        add_cat(&u->host_node[k], cat, bytes);
        if (ha->st == IG_OK) {
            char list[256] = "", need[32];
            size_t o = 0;
            for (int i = 0; i < ha->n_set && o < sizeof list; i++)
                o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? "," : "",
                                      ha->m->numa_os[ha->set[i]]);
            fmt_gib(need, sizeof need, bytes);
            const char *what[5] = {"weight tensor", "KV sequence", "activation sequence", "buffer",
                                   "policy state"};
            ha->st = ig_error_set(ha->err, IG_ERR_CAPACITY,
                                  "host nodes %s: a %s GiB %s fits on none of them (filled in "
                                  "order)",
                                  list, need, what[cat < 5 ? cat : 4]);
        }
        return ha->m->numa_os[k];
    }
    }
}

static void put_bytes(host_assign *ha, ig_plan_usage *u, ig_tier_kind k, int cat, size_t bytes,
                      ig_tier_ref *ref) {
    ig_tier_ref r = {k, -1};
    if (k == IG_TIER_DEVICE)
        add_cat(&u->device, cat, bytes);
    else if (k == IG_TIER_DISK)
        add_cat(&u->disk, cat, bytes);
    else
        r.numa = host_put(ha, cat, bytes);
    if (ref) *ref = r;
}

ig_status ig_plan_create(const ig_plan_opts *o, const ig_machine *m, ig_plan **out, ig_error *err) {
    *out = NULL;
    IG_TRY(validate(o, m, err));
    const ig_model_config *c = &o->model;
    int L = c->n_layer;
    int B = o->wl.gpu_batch_size * o->wl.num_gpu_batches;
    ig_plan *p = ig_calloc(1, sizeof *p, err);
    if (!p) return IG_ERR_NOMEM;
    p->o = *o;
    p->m = *m;
    p->block = B;
    p->wp.n_layer = L;
    p->wp.tensor = ig_calloc((size_t)L * IG_WT_COUNT, sizeof *p->wp.tensor, err);
    p->tensor_bytes = ig_calloc((size_t)L * IG_WT_COUNT, sizeof *p->tensor_bytes, err);
    p->layers = ig_calloc((size_t)L, sizeof *p->layers, err);
    p->kv_seq = ig_calloc((size_t)B, sizeof *p->kv_seq, err);
    if (!p->wp.tensor || !p->tensor_bytes || !p->layers || !p->kv_seq) {
        ig_plan_free(p);
        return IG_ERR_NOMEM;
    }
    ig_plan_usage *u = &p->u;
    host_assign ha = {.o = o, .m = m, .u = u, .err = err, .st = IG_OK};
    int dn = m->device_numa >= 0 ? machine_node_index(m, m->device_numa) : 0;
    ha.local_idx = dn >= 0 ? dn : 0;
    if (o->n_numa_nodes > 0) {
        for (int i = 0; i < o->n_numa_nodes; i++)
            ha.set[ha.n_set++] = machine_node_index(m, o->numa_nodes[i]);
    } else {
        for (int i = 0; i < m->n_numa; i++) ha.set[ha.n_set++] = i;
    }
    const double tokens = (double)o->wl.prompt_len + o->wl.gen_len - 1;

    /* weights: midpoint rule within each layer */
    size_t sz[IG_WT_COUNT];
    double flops;
    layer_sizes(o, sz, &flops);
    size_t layer_total = 0, max_off = 0, max_disk = 0;
    for (int t = 0; t < IG_WT_COUNT; t++) layer_total += sz[t];
    size_t hd = (size_t)c->head_dim, nkv = (size_t)c->n_kv_head;
    size_t kv_row =
        2 * nkv *
        (o->kv_head_row_bytes ? o->kv_head_row_bytes : ig_plan_row_bytes(o->kv_dtype, hd));
    size_t pk = o->partial_ratio > 0 ? (size_t)ceil(o->partial_ratio * (double)hd - 1e-9) : 0;
    if (o->partial_ratio > 0 && pk == 0) pk = 1;
    for (int l = 0; l < L; l++) {
        ig_plan_layer_io *io = &p->layers[l];
        size_t cum = 0;
        for (int t = 0; t < IG_WT_COUNT; t++) {
            double mid = layer_total ? ((double)cum + (double)sz[t] / 2) / (double)layer_total : 0;
            ig_tier_kind k = tier_at(mid, o->pct.w_gpu, o->pct.w_cpu);
            cum += sz[t];
            p->tensor_bytes[(size_t)l * IG_WT_COUNT + t] = sz[t];
            io->w_bytes[k] += sz[t];
            put_bytes(&ha, u, k, 0, sz[t], &p->wp.tensor[(size_t)l * IG_WT_COUNT + t]);
        }
        io->w_total = layer_total;
        io->gemm_flops_per_token = flops;
        io->kv_row_bytes = kv_row;
        io->partial_row_bytes = nkv * ig_plan_row_bytes(IG_PLAN_F16, pk);
        io->partial_w_bytes = pk ? (size_t)c->d_model * (size_t)c->n_head * pk * 2 : 0;
        size_t off = io->w_bytes[IG_TIER_HOST] + io->w_bytes[IG_TIER_DISK];
        if (off > max_off) max_off = off;
        if (io->w_bytes[IG_TIER_DISK] > max_disk) max_disk = io->w_bytes[IG_TIER_DISK];
    }
    /* The outer tensors (embeddings, final norm, lm_head) as one unit on the device, whatever the
     * weight percentages: both engines keep them resident there (the CUDA engine uploads them at
     * load; neither streams them), so a plan that put them on the host or disk (FlexGen's midpoint
     * rule at 50%) would count device memory the run uses as free and price a stream the run
     * never makes. */
    p->outer_bytes = outer_sizes(o);
    put_bytes(&ha, u, IG_TIER_DEVICE, 0, p->outer_bytes, &p->wp.outer);

    /* KV cache: whole sequences; each keeps ceil(keep x tokens) rows of every layer */
    split_sequences(B, o->pct.cache_gpu, o->pct.cache_cpu, p->kv_n);
    size_t rows = (size_t)ceil(o->kv_keep_fraction * tokens - 1e-9);
    p->kv_seq_bytes = (size_t)L * rows * kv_row;
    for (int s = 0; s < B; s++) {
        ig_tier_kind k = s < p->kv_n[0]                ? IG_TIER_DEVICE
                         : s < p->kv_n[0] + p->kv_n[1] ? IG_TIER_HOST
                                                       : IG_TIER_DISK;
        put_bytes(&ha, u, k, 1, p->kv_seq_bytes, &p->kv_seq[s]);
    }
    /* activations: the hidden states of the prompt, whole sequences */
    split_sequences(B, o->pct.act_gpu, o->pct.act_cpu, p->act_n);
    size_t actb = ig_plan_row_bytes(o->act_dtype, 1);
    size_t d = (size_t)c->d_model, gb = (size_t)o->wl.gpu_batch_size;
    size_t P = (size_t)o->wl.prompt_len;
    p->act_seq_bytes = P * d * actb;
    for (int s = 0; s < B; s++) {
        ig_tier_kind k = s < p->act_n[0]                 ? IG_TIER_DEVICE
                         : s < p->act_n[0] + p->act_n[1] ? IG_TIER_HOST
                                                         : IG_TIER_DISK;
        put_bytes(&ha, u, k, 2, p->act_seq_bytes, NULL);
    }

    /* device working buffers */
    size_t dbuf = 0;
    if (max_off) dbuf += 2 * max_off; /* next layer's streamed weights, double-buffered */
    int kv_off_dev = p->kv_n[IG_TIER_DISK] + (o->cpu_cache_compute ? 0 : p->kv_n[IG_TIER_HOST]);
    if (kv_off_dev > 0 || p->kv_n[IG_TIER_HOST] > 0) {
        size_t fetch_rows = (size_t)ceil(o->fetch_fraction * tokens - 1e-9);
        size_t dec = kv_off_dev > 0 ? 2 * gb * fetch_rows * kv_row : 0;
        size_t pre = gb * P * kv_row; /* one GPU batch's new rows before they are stored */
        dbuf += dec > pre ? dec : pre;
    }
    if (p->act_n[IG_TIER_HOST] + p->act_n[IG_TIER_DISK] > 0) dbuf += 2 * gb * p->act_seq_bytes;
    {
        size_t H = (size_t)c->n_head, q = H * hd, f = (size_t)c->d_ffn;
        size_t scores = gb * H * P * P * actb;
        size_t inner = gb * P * (q + 2 * nkv * hd + (f > d ? f : d)) * actb;
        size_t logits = gb * (size_t)c->vocab * 4;
        dbuf += scores + inner + logits;
    }
    add_cat(&u->device, 3, dbuf);
    /* policy state on the device: partial key cache of every cached token + partial weights */
    if (pk) {
        size_t pol = (size_t)L * ((size_t)B * (size_t)tokens * p->layers[0].partial_row_bytes +
                                  p->layers[0].partial_w_bytes);
        add_cat(&u->device, 4, pol);
    }
    /* host relay buffers for disk traffic (pinned, double-buffered) */
    size_t hbuf = 0;
    if (max_disk) hbuf += 2 * max_disk;
    if (p->kv_n[IG_TIER_DISK])
        hbuf += 2 * gb * (size_t)ceil(o->fetch_fraction * tokens - 1e-9) * kv_row;
    if (hbuf) host_put(&ha, 3, hbuf);

    if (ha.st != IG_OK) {
        ig_plan_free(p);
        return ha.st;
    }
    ig_status st = ig_plan_check_fits(u, m, err);
    if (st != IG_OK) {
        ig_plan_free(p);
        return st;
    }
    *out = p;
    return IG_OK;
}

void ig_plan_free(ig_plan *p) {
    if (!p) return;
    free(p->wp.tensor);
    free(p->tensor_bytes);
    free(p->layers);
    free(p->kv_seq);
    free(p);
}

const ig_plan_opts *ig_plan_get_opts(const ig_plan *p) {
    return &p->o;
}
const ig_machine *ig_plan_get_machine(const ig_plan *p) {
    return &p->m;
}
const ig_weight_placement *ig_plan_weights(const ig_plan *p) {
    return &p->wp;
}
const ig_plan_usage *ig_plan_get_usage(const ig_plan *p) {
    return &p->u;
}

size_t ig_plan_tensor_bytes(const ig_plan *p, int layer, ig_wtensor t) {
    if (layer < 0 || layer >= p->wp.n_layer || (int)t < 0 || t >= IG_WT_COUNT) return 0;
    return p->tensor_bytes[(size_t)layer * IG_WT_COUNT + t];
}

size_t ig_plan_outer_bytes(const ig_plan *p) {
    return p->outer_bytes;
}

int ig_plan_kv_sequences(const ig_plan *p, ig_tier_kind k) {
    return (int)k >= 0 && k < IG_TIER_COUNT ? p->kv_n[k] : 0;
}

ig_tier_ref ig_plan_kv_sequence(const ig_plan *p, int seq) {
    if (seq < 0 || seq >= p->block) return (ig_tier_ref){IG_TIER_COUNT, -1};
    return p->kv_seq[seq];
}

int ig_plan_act_sequences(const ig_plan *p, ig_tier_kind k) {
    return (int)k >= 0 && k < IG_TIER_COUNT ? p->act_n[k] : 0;
}

size_t ig_plan_kv_bytes_per_sequence(const ig_plan *p) {
    return p->kv_seq_bytes;
}

const ig_plan_layer_io *ig_plan_layer(const ig_plan *p, int layer) {
    if (layer < 0 || layer >= p->wp.n_layer) return NULL;
    return &p->layers[layer];
}
