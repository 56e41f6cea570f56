/* The cost model and the policy search (cost.h). Every term is a byte or FLOP count from the plan
 * divided by a rate from the profile; nothing here measures or allocates tier memory. */
#include "offload/cost.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void ig_cost_kernel_shape(const ig_model_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%d,%d,%d", c->n_head, c->n_kv_head, c->head_dim);
}

void ig_cost_matmul_shape(const ig_model_config *c, int rows, char *buf, size_t n) {
    snprintf(buf, n, "%d,%d,%d,%d,%d,%d,%d,%d", c->d_model, c->n_head * c->head_dim,
             c->n_kv_head * c->head_dim, c->d_ffn, c->arch == IG_ARCH_OPT ? 2 : 3, c->vocab,
             c->n_layer, rows);
}

int ig_cost_hw_matmul_for(const ig_hwprof *p, const ig_model_config *model, int rows,
                          int f32_weights, ig_cost_hw *hw, char *desc, size_t n) {
    char want[128];
    ig_cost_matmul_shape(model, rows, want, sizeof want);
    int has = p->device.gemm_tflops_layer > 0 && p->device.gemm_tflops_logits > 0;
    int taken = has && f32_weights && !strcmp(want, p->device.matmul_shape);
    if (taken) {
        hw->gemm_flops_layer = p->device.gemm_tflops_layer * 1e12;
        hw->gemm_flops_logits = p->device.gemm_tflops_logits * 1e12;
    }
    if (!desc) return taken;
    if (taken)
        snprintf(desc, n,
                 "measured at the model's shapes %s (d_model,q,kv,ffn,ffn mats,vocab,layers,rows): "
                 "layer %.3g GFLOPS, logits %.3g GFLOPS",
                 want, p->device.gemm_tflops_layer * 1e3, p->device.gemm_tflops_logits * 1e3);
    else if (has && !f32_weights)
        snprintf(desc, n,
                 "none: the profile's model-shape rates are for f32 weights; decode matmuls at "
                 "gemm_tflops_decode (%.3g GFLOPS)",
                 p->device.gemm_tflops_decode * 1e3);
    else if (has)
        snprintf(desc, n,
                 "none: the profile's matmul rates were measured at shape %s, this point's is %s; "
                 "decode matmuls at gemm_tflops_decode (%.3g GFLOPS)",
                 p->device.matmul_shape[0] ? p->device.matmul_shape : "(not given)", want,
                 p->device.gemm_tflops_decode * 1e3);
    else
        snprintf(desc, n, "none in the profile: decode matmuls at gemm_tflops_decode (%.3g GFLOPS)",
                 p->device.gemm_tflops_decode * 1e3);
    return taken;
}

void ig_cost_kernel_rates_desc(const ig_hwprof *p, const ig_model_config *model, int taken,
                               char *buf, size_t n) {
    char want[64] = "";
    if (model) ig_cost_kernel_shape(model, want, sizeof want);
    if (taken)
        snprintf(buf, n,
                 "measured at shape %s (heads,KV heads,dims): attention %.3g GB/s (f32 rows), "
                 "%.3g GB/s (4-bit rows), %.3g GB/s (scattered f32 rows), %.3g GB/s (dense "
                 "kernel, contiguous f32 rows; 0: not measured), %.3g GB/s (f32 rows with "
                 "probabilities summed per row, a scoring policy's; 0: not measured), selection "
                 "%.3g GB/s",
                 p->device.kernel_shape, p->device.attn_gbps, p->device.attn_int4_gbps,
                 p->device.attn_sparse_gbps, p->device.attn_dense_gbps, p->device.attn_probs_gbps,
                 p->device.select_gbps);
    else if (p->device.attn_gbps > 0 || p->device.attn_int4_gbps > 0 ||
             p->device.attn_sparse_gbps > 0 || p->device.select_gbps > 0)
        snprintf(buf, n,
                 "none: the profile's kernel rates were measured at shape %s, this model's is %s; "
                 "KV and partial-key bytes at memory bandwidth",
                 p->device.kernel_shape[0] ? p->device.kernel_shape : "(not given)", want);
    else
        snprintf(buf, n, "none in the profile: KV and partial-key bytes at memory bandwidth");
}

void ig_cost_hw_from_profile(const ig_hwprof *p, ig_cost_hw *hw) {
    ig_cost_hw_from_profile_for(p, NULL, hw);
}

int ig_cost_hw_from_profile_for(const ig_hwprof *p, const ig_model_config *model, ig_cost_hw *hw) {
    memset(hw, 0, sizeof *hw);
    hw->gemm_flops = p->device.gemm_tflops * 1e12;
    hw->gemm_flops_decode =
        (p->device.gemm_tflops_decode > 0 ? p->device.gemm_tflops_decode : p->device.gemm_tflops) *
        1e12;
    hw->dev_bw = p->device.mem_bandwidth_gbps * 1e9;
    hw->host_bw = p->host.mem_bandwidth_gbps * 1e9;
    hw->h2d_bw = p->link.h2d_gbps * 1e9;
    hw->d2h_bw = p->link.d2h_gbps * 1e9;
    hw->h2d_lat = p->link.h2d_latency_us * 1e-6;
    hw->d2h_lat = p->link.d2h_latency_us * 1e-6;
    if (p->has_disk) {
        hw->disk_read_bw = p->disk.read_gbps * 1e9;
        hw->disk_write_bw = p->disk.write_gbps * 1e9;
    }
    int has = p->device.attn_gbps > 0 || p->device.attn_int4_gbps > 0 ||
              p->device.attn_sparse_gbps > 0 || p->device.select_gbps > 0;
    if (has && model) {
        char want[64];
        ig_cost_kernel_shape(model, want, sizeof want);
        if (strcmp(want, p->device.kernel_shape)) has = 0;
    }
    if (!has) return 0;
    hw->attn_bw = p->device.attn_gbps * 1e9;
    hw->attn_enc_bw = p->device.attn_int4_gbps * 1e9;
    hw->attn_sparse_bw = p->device.attn_sparse_gbps * 1e9;
    hw->attn_dense_bw = p->device.attn_dense_gbps * 1e9;
    hw->attn_probs_bw = p->device.attn_probs_gbps * 1e9;
    hw->select_bw = p->device.select_gbps * 1e9;
    return 1;
}

const char *ig_cost_activity_name(ig_cost_activity a) {
    static const char *const n[IG_COST_ACTIVITY_COUNT] = {"h2d", "d2h", "disk_read", "disk_write",
                                                          "compute"};
    return (int)a >= 0 && a < IG_COST_ACTIVITY_COUNT ? n[a] : "?";
}

double ig_cost_transfer_s(double bytes, double bw, double latency_s) {
    if (bytes <= 0) return 0;
    return latency_s + bytes / bw;
}

static double div0(double a, double b) {
    return a > 0 ? a / b : 0;
}

/* Decode attention on the device: the KV bytes it reads at memory bandwidth, or, where the
 * profile measured the attention kernel, the rows at its rate when that is slower. */
static double attn_s(const ig_cost_traffic *tr, const ig_cost_hw *hw) {
    double t = div0(tr->attn_dev_bytes, hw->dev_bw);
    double rate = tr->attn_enc      ? hw->attn_enc_bw
                  : tr->attn_probs  ? (hw->attn_probs_bw > 0 ? hw->attn_probs_bw : hw->attn_bw)
                  : tr->attn_sparse ? (hw->attn_sparse_bw > 0 ? hw->attn_sparse_bw : hw->attn_bw)
                  : tr->attn_dense  ? (hw->attn_dense_bw > 0 ? hw->attn_dense_bw : hw->attn_bw)
                                    : hw->attn_bw;
    double k = rate > 0 ? div0(tr->attn_dev_f32, rate) : 0;
    return k > t ? k : t;
}

void ig_cost_times_of(const ig_cost_traffic *tr, int decode, const ig_cost_hw *hw, int overlap,
                      ig_cost_times *out) {
    out->t[IG_COST_H2D] = ig_cost_transfer_s(tr->h2d_bytes, hw->h2d_bw, hw->h2d_lat);
    out->t[IG_COST_D2H] = ig_cost_transfer_s(tr->d2h_bytes, hw->d2h_bw, hw->d2h_lat);
    out->t[IG_COST_DISK_READ] = ig_cost_transfer_s(tr->disk_read_bytes, hw->disk_read_bw, 0);
    out->t[IG_COST_DISK_WRITE] = ig_cost_transfer_s(tr->disk_write_bytes, hw->disk_write_bw, 0);
    double rate = decode ? hw->gemm_flops_decode : hw->gemm_flops;
    double shaped = tr->outer ? hw->gemm_flops_logits : hw->gemm_flops_layer;
    if (decode && shaped > 0) rate = shaped; /* measured at the model's own shapes */
    /* matmuls: a roofline, FLOPs at the measured rate or the weights read at memory bandwidth */
    double mm = div0(tr->gemm_flops, rate), mb = div0(tr->gemm_bytes, hw->dev_bw);
    out->t[IG_COST_COMPUTE] =
        (mm > mb ? mm : mb) + div0(tr->attn_flops, hw->gemm_flops) + attn_s(tr, hw) +
        div0(tr->attn_host_bytes, hw->host_bw) +
        div0(tr->spec_dev_bytes,
             hw->select_bw > 0 && hw->select_bw < hw->dev_bw ? hw->select_bw : hw->dev_bw) +
        div0(tr->spec_flops, hw->gemm_flops_decode);
    double s = 0, mx = 0;
    for (int i = 0; i < IG_COST_ACTIVITY_COUNT; i++) {
        s += out->t[i];
        if (out->t[i] > mx) mx = out->t[i];
    }
    out->step = overlap ? mx : s;
}

/* The fraction of the context a decode step reads: the measured profile where there is one
 * (linear between its points, its end values beyond them), else the policy's cap; never more
 * than what is kept. */
double ig_cost_fetch_fraction(const ig_plan_opts *o, double ctx) {
    double f = o->fetch_fraction;
    int n = o->fetch_profile_n;
    if (n > 0) {
        const double *x = o->fetch_profile_ctx, *y = o->fetch_profile_frac;
        if (ctx <= x[0]) {
            f = y[0];
        } else if (ctx >= x[n - 1]) {
            f = y[n - 1];
        } else {
            for (int i = 1; i < n; i++)
                if (ctx <= x[i]) {
                    double t = (ctx - x[i - 1]) / (x[i] - x[i - 1]);
                    f = (1 - t) * y[i - 1] + t * y[i];
                    break;
                }
        }
    }
    return f < o->kv_keep_fraction ? f : o->kv_keep_fraction;
}

double ig_cost_layer_fetch_fraction(const ig_plan_opts *o, int layer, double ctx) {
    int L = o->model.n_layer, D = o->dense_layers < L ? o->dense_layers : L;
    double keep = o->kv_keep_fraction, f = ig_cost_fetch_fraction(o, ctx);
    if (D <= 0 || layer < 0) return f;
    /* the dense layers keep every token; the other layers share what the whole cache's keep
     * leaves (InfiniGen's pool: pool_capacity of the cache, dense layers in full) */
    if (layer < D || D >= L) return 1.0;
    double ks = (keep * L - D) / (L - D);
    if (ks > keep) ks = keep; /* keep = 1: ks = 1 */
    if (ks < 0) ks = 0;       /* a keep the dense layers alone exceed (a policy refuses it) */
    if (o->fetch_profile_n > 0) f = (f * L - D) / (L - D);
    return f < 0 ? 0 : f < ks ? f : ks;
}

void ig_cost_layer_traffic(const ig_plan *p, int layer, int decode, int ctx, ig_cost_traffic *tr) {
    memset(tr, 0, sizeof *tr);
    const ig_plan_opts *o = ig_plan_get_opts(p);
    const ig_model_config *c = &o->model;
    double B = (double)o->wl.gpu_batch_size * o->wl.num_gpu_batches;
    double d = c->d_model, actb = (double)ig_plan_row_bytes(o->act_dtype, 1);
    if (layer < 0) { /* outer tensors: logits of one position per sequence per step */
        double ob = (double)ig_plan_outer_bytes(p);
        ig_tier_kind k = ig_plan_weights(p)->outer.kind;
        if (k != IG_TIER_DEVICE) tr->h2d_bytes = ob;
        if (k == IG_TIER_DISK) tr->disk_read_bytes = ob;
        tr->outer = 1;
        tr->gemm_flops = 2 * d * c->vocab * B;
        tr->gemm_bytes = (double)c->vocab * (double)ig_plan_row_bytes(o->weight_dtype, c->d_model) *
                         o->wl.num_gpu_batches;
        return;
    }
    const ig_plan_layer_io *io = ig_plan_layer(p, layer);
    double nd = ig_plan_kv_sequences(p, IG_TIER_DEVICE), nh = ig_plan_kv_sequences(p, IG_TIER_HOST);
    double nk = ig_plan_kv_sequences(p, IG_TIER_DISK);
    double ah = ig_plan_act_sequences(p, IG_TIER_HOST), ak = ig_plan_act_sequences(p, IG_TIER_DISK);
    double kvr = (double)io->kv_row_bytes;
    double P = o->wl.prompt_len, tok = decode ? 1 : P;
    int cc = o->cpu_cache_compute;
    double qdim = (double)c->n_head * c->head_dim;

    tr->h2d_bytes = (double)(io->w_bytes[IG_TIER_HOST] + io->w_bytes[IG_TIER_DISK]);
    tr->disk_read_bytes = (double)io->w_bytes[IG_TIER_DISK];
    double rows_new = decode ? 1 : ceil(o->kv_keep_fraction * P - 1e-9);
    double frac = ig_cost_layer_fetch_fraction(o, layer, ctx);
    double fetch_rows = decode ? frac * ctx : 0;
    tr->h2d_bytes += ((cc ? 0 : nh) + nk) * fetch_rows * kvr;
    tr->disk_read_bytes += nk * fetch_rows * kvr;
    tr->d2h_bytes += (nh + nk) * rows_new * kvr;
    tr->disk_write_bytes += nk * rows_new * kvr;
    double hid = tok * d * actb;
    tr->h2d_bytes += (ah + ak) * hid;
    tr->d2h_bytes += (ah + ak) * hid;
    tr->disk_read_bytes += ak * hid;
    tr->disk_write_bytes += ak * hid;
    tr->gemm_flops = io->gemm_flops_per_token * B * tok;
    tr->gemm_bytes = (double)io->w_total * o->wl.num_gpu_batches; /* once per GPU batch */
    if (!decode) {
        tr->attn_flops = 4 * B * qdim * P * P;
        return;
    }
    if (cc && nh > 0) { /* the query goes to the CPU, the attention output comes back */
        tr->d2h_bytes += nh * qdim * actb;
        tr->h2d_bytes += nh * qdim * actb;
    }
    tr->attn_dev_bytes = (nd + nk + (cc ? 0 : nh)) * fetch_rows * kvr;
    tr->attn_dev_f32 =
        (nd + nk + (cc ? 0 : nh)) * fetch_rows * 2.0 * c->n_kv_head * c->head_dim * 4;
    tr->attn_enc = o->kv_dtype == IG_PLAN_INT4 || o->kv_dtype == IG_PLAN_INT8;
    tr->attn_sparse = frac < o->kv_keep_fraction - 1e-9;
    /* the engine's dense path (engine_kv.c, contig): f32 rows, none evicted, every one read where
     * it lives; H2O's kept fifth and rows on disk (a working set) go through index lists */
    tr->attn_dense = o->kv_dtype == IG_PLAN_F32 && o->kv_keep_fraction >= 1 - 1e-9 &&
                     !tr->attn_sparse && nk == 0 && o->dense_layers <= 0 && o->partial_ratio <= 0 &&
                     ig_cost_fetch_fraction(o, ctx) >= 1 - 1e-9;
    tr->attn_host_bytes = cc ? nh * fetch_rows * kvr : 0;
    tr->attn_probs = o->attn_probs;
    if (io->partial_row_bytes && o->partial_ratio > 0 && layer >= o->dense_layers) {
        tr->spec_dev_bytes = B * ctx * (double)io->partial_row_bytes;
        /* igen's speculation projects the full query of the next layer (its W_q, d_model x
         * n_head x head_dim) before taking the partial columns */
        tr->spec_flops = 2 * B * d * qdim;
    }
}

/* Layers with identical byte and FLOP counts cost the same: group them (usually one group). */
#define MAX_GROUPS 8

ig_status ig_cost_estimate(const ig_plan *p, const ig_cost_hw *hw, ig_cost_result *out,
                           ig_error *err) {
    memset(out, 0, sizeof *out);
    const ig_plan_opts *o = ig_plan_get_opts(p);
    const ig_plan_usage *u = ig_plan_get_usage(p);
    if ((ig_plan_bytes_total(&u->disk) > 0) && !(hw->disk_read_bw > 0 && hw->disk_write_bw > 0))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "the plan puts bytes on disk but the hardware profile has no disk "
                            "bandwidths");
    if (!(hw->gemm_flops > 0 && hw->gemm_flops_decode > 0 && hw->dev_bw > 0 && hw->host_bw > 0 &&
          hw->h2d_bw > 0 && hw->d2h_bw > 0))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "hardware rates must be positive (matmul, memory and link bandwidths)");
    int L = o->model.n_layer;
    int rep[MAX_GROUPS], cnt[MAX_GROUPS], ng = 0, per_layer = 0;
    int D = o->dense_layers, glast = -1;
    for (int l = 0; l < L && !per_layer; l++) {
        int g = 0;
        for (; g < ng; g++) /* a policy's dense layers read more: their own group */
            if (!memcmp(ig_plan_layer(p, rep[g]), ig_plan_layer(p, l), sizeof(ig_plan_layer_io)) &&
                (rep[g] < D) == (l < D))
                break;
        if (g < ng) {
            cnt[g]++;
        } else if (ng < MAX_GROUPS) {
            rep[ng] = l;
            cnt[ng++] = 1;
        } else {
            per_layer = 1;
        }
        if (l == L - 1) glast = g;
    }
    if (per_layer) { /* heterogeneous layers: every layer on its own */
        ng = 0;
    }
    int n_units = per_layer ? L : ng;
    int P = o->wl.prompt_len, G = o->wl.gen_len;
    ig_cost_traffic tr;
    ig_cost_times tm;
    for (int i = 0; i < n_units; i++) {
        int l = per_layer ? i : rep[i], k = per_layer ? 1 : cnt[i];
        int last = per_layer ? l == L - 1 : i == glast;
        ig_cost_layer_traffic(p, l, 0, P, &tr);
        ig_cost_times_of(&tr, 0, hw, o->overlap, &tm);
        out->prefill_s += k * tm.step;
        if (last) {
            out->prefill_layer = tm;
            out->prefill_traffic = tr;
        }
        for (int j = 1; j < G; j++) {
            ig_cost_layer_traffic(p, l, 1, P + j, &tr);
            ig_cost_times_of(&tr, 1, hw, o->overlap, &tm);
            out->decode_s += k * tm.step;
            if (j < G - 1) continue;
            if (last) {
                out->decode_layer = tm;
                out->decode_traffic = tr;
            }
            out->decode_step_h2d_bytes += k * tr.h2d_bytes;
            out->decode_step_d2h_bytes += k * tr.d2h_bytes;
            out->decode_step_disk_read_bytes += k * tr.disk_read_bytes;
        }
    }
    ig_cost_layer_traffic(p, -1, 0, P, &tr);
    ig_cost_times_of(&tr, 0, hw, o->overlap, &tm);
    out->prefill_s += tm.step;
    ig_cost_layer_traffic(p, -1, 1, P, &tr);
    ig_cost_times_of(&tr, 1, hw, o->overlap, &tm);
    out->decode_s += (G - 1) * tm.step;
    double B = (double)o->wl.gpu_batch_size * o->wl.num_gpu_batches;
    out->total_s = out->prefill_s + out->decode_s;
    out->decode_step_s = G > 1 ? out->decode_s / (G - 1) : 0;
    out->throughput = out->total_s > 0 ? B * G / out->total_s : 0;
    out->decode_throughput = out->decode_s > 0 ? B * (G - 1) / out->decode_s : 0;
    return IG_OK;
}

/* ---- search ---- */

void ig_plan_search_opts_init(ig_plan_search_opts *so) {
    memset(so, 0, sizeof *so);
    so->max_gpu_batch = 64;
    so->max_num_gpu_batches = 16;
    so->step_percent = 10;
    so->top_k = 5;
}

static void insert_top(ig_plan_candidate *top, int *n, int k, const ig_plan_candidate *c) {
    int pos = *n;
    /* strictly faster moves ahead: among equals the earlier-enumerated plan stays first */
    while (pos > 0 && c->cost.throughput > top[pos - 1].cost.throughput) pos--;
    if (pos >= k) return;
    int last = *n < k ? *n : k - 1;
    for (int i = last; i > pos; i--) top[i] = top[i - 1];
    top[pos] = *c;
    if (*n < k) (*n)++;
}

ig_status ig_plan_search(const ig_plan_opts *base, const ig_machine *m, const ig_cost_hw *hw,
                         const ig_plan_search_opts *so, ig_plan_candidate *top, int *n_top,
                         long *n_feasible, long *n_tried, ig_error *err) {
    *n_top = 0;
    *n_feasible = 0;
    *n_tried = 0;
    double step = so->step_percent;
    if (!(step >= 1 && step <= 100) || fabs(100 / step - floor(100 / step + 0.5)) > 1e-9)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "search: grid step %g%% must divide 100 (e.g. 5, 10, 20, 25, 50)",
                            step);
    int k = so->top_k < 1                        ? 1
            : so->top_k > IG_PLAN_SEARCH_TOP_MAX ? IG_PLAN_SEARCH_TOP_MAX
                                                 : so->top_k;
    int nsteps = (int)floor(100 / step + 0.5);
    int gb_lo = so->fixed_gpu_batch > 0 ? so->fixed_gpu_batch : 1;
    int gb_hi = so->fixed_gpu_batch > 0 ? so->fixed_gpu_batch : so->max_gpu_batch;
    int nb_lo = so->fixed_num_gpu_batches > 0 ? so->fixed_num_gpu_batches : 1;
    int nb_hi = so->fixed_num_gpu_batches > 0 ? so->fixed_num_gpu_batches : so->max_num_gpu_batches;
    if (gb_hi < 1 || nb_hi < 1)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "search: batch limits must be >= 1");
    ig_error first_fail;
    ig_error_clear(&first_fail);
    ig_error e;
    for (int gb = gb_lo; gb <= gb_hi; gb = so->fixed_gpu_batch > 0 ? gb_hi + 1 : gb * 2) {
        for (int nb = nb_lo; nb <= nb_hi; nb = so->fixed_num_gpu_batches > 0 ? nb_hi + 1 : nb * 2) {
            for (int wg = nsteps; wg >= 0; wg--)
                for (int wc = nsteps - wg; wc >= 0; wc--)
                    for (int cg = nsteps; cg >= 0; cg--)
                        for (int ccp = nsteps - cg; ccp >= 0; ccp--)
                            for (int act = 0; act < 2; act++) {
                                ig_plan_opts o = *base;
                                o.wl.gpu_batch_size = gb;
                                o.wl.num_gpu_batches = nb;
                                o.pct = (ig_plan_percent){wg * step,  wc * step,     cg * step,
                                                          ccp * step, act ? 0 : 100, act ? 100 : 0};
                                (*n_tried)++;
                                ig_plan *p = NULL;
                                ig_error_clear(&e);
                                ig_status st = ig_plan_create(&o, m, &p, &e);
                                if (st == IG_ERR_CAPACITY) {
                                    if (gb == gb_lo && nb == nb_lo) first_fail = e;
                                    continue;
                                }
                                if (st != IG_OK) {
                                    if (err) *err = e;
                                    return st;
                                }
                                ig_plan_candidate c = {.wl = o.wl, .pct = o.pct};
                                st = ig_cost_estimate(p, hw, &c.cost, &e);
                                ig_plan_free(p);
                                if (st != IG_OK) continue; /* e.g. disk bytes without a disk */
                                (*n_feasible)++;
                                insert_top(top, n_top, k, &c);
                            }
        }
    }
    if (*n_top == 0)
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "search: no placement on the grid fits (%ld tried); e.g. %s", *n_tried,
                            first_fail.msg[0] ? first_fail.msg : "no plan has a cost");
    return IG_OK;
}
