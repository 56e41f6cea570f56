/* kernels/cuda: every CUDA kernel against its CPU counterpart on random inputs (odd sizes, GQA,
 * ties, NaN, -0), plus the backend's memory, copies, streams, events and cuBLAS GEMM. Needs a GPU:
 * without one (no driver, no device, cuBLAS cannot start) every test calls ig_test_skip with the
 * probe's reason, nothing is asserted, and ctest reports the program SKIPPED (exit 77), never
 * passed. Host-side checks that need no device are in test_cuda_host.c. Built as test_cuda_emu,
 * the same program runs on the CUDA emulator (tests/cuda_emu) on any machine.
 *
 * Error bounds, as max |gpu - cpu| / max(|cpu|, 1e-30) over the output (normalised max error):
 *   rmsnorm, layernorm, softmax, silu*up, gelu:  1e-5 (f32 reductions / expf in another order)
 *   attention (gathered rows, prefill):         1e-5 against the double reference; probs 1e-5
 *   partial scores:                             1e-5 (f32 sums; FMA vs separate rounding)
 *   GEMM f32: 1e-5; f16 inputs (exact f16 values, f32 accumulation): 1e-4
 *   qlinear (block-quantized W), as max |gpu - dot| / sum_k |w x| per output, the dot in double
 *   over the reference's dequantized weights: 1e-5 for the GEMV and the f32 GEMM (f32
 *   accumulation of random-sign products in another order); 2e-3 for the f16 GEMM (x and w
 *   rounded to f16: each product within 2^-10 |w x|, plus at most K 2^-23 of accumulation, 1.2e-3
 *   at K = 1536 in the worst case).
 *   dequantized rows: f32 bitwise ig_dequant_row_ref, f16 bitwise its rounding.
 *   RoPE, relu, add, bias, convert, count/indices above a threshold, top-k, gather, KV codec
 *   (bytes and floats), argmax: bitwise / exactly equal.
 *   sampling: the same token as ig_sample for the same draw.
 * Every float output is also checked for NaN/Inf (inputs are finite unless a test says so). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dtype.h"
#include "kernels/cpu/attention_gather.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ref.h"
#include "kernels/cpu/kvquant.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/test_util.h"

/* ---- GPU availability ------------------------------------------------------------------------ */

static int g_probed, g_ok;
static char g_why[1200];
static ig_cuda_ctx *g_ctx;
static ig_cuda_stream_t g_s;

/* 1 when a GPU is usable; otherwise marks the test skipped (with the probe's reason) and
 * returns 0. */
static int need_gpu(void) {
    if (!g_probed) {
        g_probed = 1;
        char why[1100] = "";
        ig_cuda_info info;
        if (ig_cuda_probe(&info, why, sizeof why) > 0) {
            ig_error err = {0};
            if (ig_cuda_ctx_create(0, &g_ctx, &err) == IG_OK) {
                g_ok = 1;
                g_s = ig_cuda_ctx_stream(g_ctx);
                fprintf(stderr, "test_cuda: %s, %zu MiB, cc %d.%d\n", info.name,
                        info.total_mem >> 20, info.cc_major, info.cc_minor);
            } else {
                snprintf(why, sizeof why, "context: %.1000s", err.msg);
            }
        }
        if (!g_ok) snprintf(g_why, sizeof g_why, "no usable GPU: %s", why);
    }
    if (!g_ok) ig_test_skip(g_why);
    return g_ok;
}

static int suite_clean(void) {
    ig_cuda_ctx_destroy(g_ctx);
    g_ctx = NULL;
    return 0;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static void ok(ig_status st, const ig_error *err) {
    if (st != IG_OK) fprintf(stderr, "CUDA error: %s\n", err->msg);
    CU_ASSERT_FATAL(st == IG_OK);
}

static void *dev(size_t n) {
    ig_error err = {0};
    void *p = NULL;
    ok(ig_cuda_malloc(&p, n ? n : 1, &err), &err);
    return p;
}

static void *up(const void *h, size_t n) {
    ig_error err = {0};
    void *p = dev(n);
    ok(ig_cuda_copy_h2d_async(p, h, n, g_s, &err), &err);
    ok(ig_cuda_stream_sync(g_s, &err), &err);
    return p;
}

static void down(void *h, const void *d, size_t n) {
    ig_error err = {0};
    ok(ig_cuda_copy_d2h_async(h, d, n, g_s, &err), &err);
    ok(ig_cuda_stream_sync(g_s, &err), &err);
}

static void sync_ok(void) {
    ig_error err = {0};
    ok(ig_cuda_stream_sync(g_s, &err), &err);
}

static float frand(ig_rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)ig_rng_uniform(r);
}

static float *rnd(ig_rng *r, int64_t n, float lo, float hi) {
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    CU_ASSERT_FATAL(p != NULL);
    for (int64_t i = 0; i < n; i++) p[i] = frand(r, lo, hi);
    return p;
}

static int all_finite(const float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return 0;
    return 1;
}

/* max |a - b| / max |b|: the normalised max error. */
static double nmax_err(const float *a, const float *b, int64_t n) {
    double e = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= e)) e = d; /* NaN propagates */
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return e / m;
}

/* Compares a GPU output with the CPU's: finite, and within the normalised bound. */
static void check_close(const char *what, const float *gpu, const float *cpu, int64_t n,
                        double bound) {
    double e = nmax_err(gpu, cpu, n);
    int fin = all_finite(gpu, n);
    if (!(e <= bound) || !fin)
        fprintf(stderr, "%s: normalised max error %.3g (bound %.1g)%s\n", what, e, bound,
                fin ? "" : ", non-finite output");
    CU_ASSERT(fin);
    CU_ASSERT(e <= bound);
}

static void check_equal_bytes(const char *what, const void *gpu, const void *cpu, size_t n) {
    int same = memcmp(gpu, cpu, n) == 0;
    if (!same) {
        const unsigned char *a = gpu, *b = cpu;
        size_t i = 0;
        while (i < n && a[i] == b[i]) i++;
        fprintf(stderr, "%s: first difference at byte %zu of %zu\n", what, i, n);
    }
    CU_ASSERT(same);
}

/* ---- norms, RoPE, element-wise, softmax ------------------------------------------------------ */

static void test_rmsnorm(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 1);
    const int64_t dims[] = {1, 31, 576, 4096};
    for (int di = 0; di < 4; di++) {
        int64_t rows = 7, dim = dims[di];
        float *x = rnd(&r, rows * dim, -3, 3), *w = rnd(&r, dim, -2, 2);
        float *ref = malloc((size_t)(rows * dim) * sizeof *ref),
              *got = malloc(sizeof *got * (size_t)(rows * dim));
        ig_cpu_rmsnorm(x, w, rows, dim, 1e-5f, ref);
        float *dx = up(x, sizeof *x * (size_t)(rows * dim)), *dw = up(w, sizeof *w * (size_t)dim);
        float *dy = dev(sizeof *dy * (size_t)(rows * dim));
        ig_error err = {0};
        ok(ig_cuda_rmsnorm(dx, dw, rows, dim, 1e-5f, dy, g_s, &err), &err);
        down(got, dy, sizeof *got * (size_t)(rows * dim));
        check_close("rmsnorm", got, ref, rows * dim, 1e-5);
        ig_cuda_free(dx);
        ig_cuda_free(dw);
        ig_cuda_free(dy);
        free(x);
        free(w);
        free(ref);
        free(got);
    }
}

static void test_layernorm(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 2);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        int64_t rows = 5, dim = 768;
        float *x = rnd(&r, rows * dim, 10, 14); /* a large mean: the two-pass variance matters */
        float *w = rnd(&r, dim, -2, 2), *b = rnd(&r, dim, -1, 1);
        size_t nb = sizeof(float) * (size_t)(rows * dim);
        float *ref = malloc(nb), *got = malloc(nb);
        ig_cpu_layernorm(x, w, with_bias ? b : NULL, rows, dim, 1e-5f, ref);
        float *dx = up(x, nb), *dw = up(w, sizeof(float) * (size_t)dim);
        float *db = up(b, sizeof(float) * (size_t)dim), *dy = dev(nb);
        ig_error err = {0};
        ok(ig_cuda_layernorm(dx, dw, with_bias ? db : NULL, rows, dim, 1e-5f, dy, g_s, &err), &err);
        down(got, dy, nb);
        check_close("layernorm", got, ref, rows * dim, 1e-5);
        ig_cuda_free(dx);
        ig_cuda_free(dw);
        ig_cuda_free(db);
        ig_cuda_free(dy);
        free(x);
        free(w);
        free(b);
        free(ref);
        free(got);
    }
}

static void test_rope(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 3);
    const int hd = 64, rot = 64, heads = 9, max_pos = 300;
    const int64_t n_tok = 11;
    float *cs = malloc(sizeof(float) * (size_t)(max_pos * rot / 2));
    float *sn = malloc(sizeof(float) * (size_t)(max_pos * rot / 2));
    ig_cpu_rope_table(10000.0f, rot, max_pos, cs, sn);
    int32_t pos[11];
    for (int i = 0; i < 11; i++) pos[i] = (int32_t)(ig_rng_next(&r) % (uint64_t)max_pos);
    int64_t n = n_tok * heads * hd;
    float *x = rnd(&r, n, -4, 4), *got = malloc(sizeof(float) * (size_t)n);
    float *dx = up(x, sizeof(float) * (size_t)n),
          *dc = up(cs, sizeof(float) * (size_t)(max_pos * rot / 2));
    float *ds = up(sn, sizeof(float) * (size_t)(max_pos * rot / 2));
    int32_t *dp = up(pos, sizeof pos);
    ig_cpu_rope(x, n_tok, heads, hd, rot, pos, cs, sn);
    ig_error err = {0};
    ok(ig_cuda_rope(dx, n_tok, heads, hd, rot, dp, dc, ds, g_s, &err), &err);
    down(got, dx, sizeof(float) * (size_t)n);
    check_equal_bytes("rope", got, x, sizeof(float) * (size_t)n);
    /* partial rotation (rot_dim < head_dim, as some models): the tail is untouched */
    float *x2 = rnd(&r, n, -4, 4), *got2 = malloc(sizeof(float) * (size_t)n);
    float *dx2 = up(x2, sizeof(float) * (size_t)n);
    float *cs2 = malloc(sizeof(float) * (size_t)(max_pos * 16)),
          *sn2 = malloc(sizeof(float) * (size_t)(max_pos * 16));
    ig_cpu_rope_table(10000.0f, 32, max_pos, cs2, sn2);
    float *dc2 = up(cs2, sizeof(float) * (size_t)(max_pos * 16)),
          *ds2 = up(sn2, sizeof(float) * (size_t)(max_pos * 16));
    ig_cpu_rope(x2, n_tok, heads, hd, 32, pos, cs2, sn2);
    ok(ig_cuda_rope(dx2, n_tok, heads, hd, 32, dp, dc2, ds2, g_s, &err), &err);
    down(got2, dx2, sizeof(float) * (size_t)n);
    check_equal_bytes("rope (partial)", got2, x2, sizeof(float) * (size_t)n);
    ig_cuda_free(dx);
    ig_cuda_free(dc);
    ig_cuda_free(ds);
    ig_cuda_free(dp);
    ig_cuda_free(dx2);
    ig_cuda_free(dc2);
    ig_cuda_free(ds2);
    free(cs);
    free(sn);
    free(cs2);
    free(sn2);
    free(x);
    free(got);
    free(x2);
    free(got2);
}

static void test_elementwise(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 4);
    const int64_t n = 100003;
    size_t nb = sizeof(float) * (size_t)n;
    float *g = rnd(&r, n, -12, 12), *u = rnd(&r, n, -3, 3);
    float *ref = malloc(nb), *got = malloc(nb);
    float *dg = up(g, nb), *du = up(u, nb), *dy = dev(nb);
    ig_error err = {0};

    ig_cpu_silu_mul(g, u, n, ref);
    ok(ig_cuda_silu_mul(dg, du, n, dy, g_s, &err), &err);
    down(got, dy, nb);
    check_close("silu_mul", got, ref, n, 1e-5);

    memcpy(ref, g, nb);
    ig_cpu_relu(ref, n);
    ok(ig_cuda_copy_d2d_async(dy, dg, nb, g_s, &err), &err);
    ok(ig_cuda_relu(dy, n, g_s, &err), &err);
    down(got, dy, nb);
    check_equal_bytes("relu", got, ref, nb);

    memcpy(ref, g, nb);
    ig_cpu_gelu(ref, n);
    ok(ig_cuda_copy_d2d_async(dy, dg, nb, g_s, &err), &err);
    ok(ig_cuda_gelu(dy, n, g_s, &err), &err);
    down(got, dy, nb);
    check_close("gelu", got, ref, n, 1e-5);

    memcpy(ref, g, nb);
    ig_cpu_add(ref, u, n);
    ok(ig_cuda_copy_d2d_async(dy, dg, nb, g_s, &err), &err);
    ok(ig_cuda_add(dy, du, n, g_s, &err), &err);
    down(got, dy, nb);
    check_equal_bytes("add", got, ref, nb);

    /* bias over rows: rows x dim = 7 x 1000 (< n) */
    memcpy(ref, g, nb);
    for (int64_t i = 0; i < 7 * 1000; i++) ref[i] += u[i % 1000];
    ok(ig_cuda_copy_d2d_async(dy, dg, nb, g_s, &err), &err);
    ok(ig_cuda_add_bias(dy, du, 7, 1000, g_s, &err), &err);
    down(got, dy, nb);
    check_equal_bytes("add_bias", got, ref, nb);

    /* f32 -> f16 -> f32 and f32 -> bf16, as core/base/dtype.h rounds */
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n), *hg = malloc(sizeof(uint16_t) * (size_t)n);
    void *dh = dev(sizeof(uint16_t) * (size_t)n);
    for (ig_dtype t = IG_DTYPE_F16; t <= IG_DTYPE_BF16; t++) {
        for (int64_t i = 0; i < n; i++)
            h[i] = t == IG_DTYPE_F16 ? ig_f32_to_f16(g[i]) : ig_f32_to_bf16(g[i]);
        ok(ig_cuda_convert(dg, IG_DTYPE_F32, dh, t, n, g_s, &err), &err);
        down(hg, dh, sizeof(uint16_t) * (size_t)n);
        check_equal_bytes(t == IG_DTYPE_F16 ? "convert f16" : "convert bf16", hg, h,
                          sizeof(uint16_t) * (size_t)n);
        ok(ig_cuda_convert(dh, t, dy, IG_DTYPE_F32, n, g_s, &err), &err);
        down(got, dy, nb);
        for (int64_t i = 0; i < n; i++)
            ref[i] = t == IG_DTYPE_F16 ? ig_f16_to_f32(h[i]) : ig_bf16_to_f32(h[i]);
        check_equal_bytes("convert back", got, ref, nb);
    }
    ig_cuda_free(dg);
    ig_cuda_free(du);
    ig_cuda_free(dy);
    ig_cuda_free(dh);
    free(g);
    free(u);
    free(ref);
    free(got);
    free(h);
    free(hg);
}

static void test_softmax(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 5);
    const int64_t rows = 6, n = 5003;
    size_t nb = sizeof(float) * (size_t)(rows * n);
    float *x = rnd(&r, rows * n, -20, 20), *got = malloc(nb);
    for (int64_t i = 0; i < n; i++) x[3 * n + i] = -INFINITY; /* a fully masked row */
    for (int64_t i = 0; i < n; i += 3) x[4 * n + i] = -INFINITY;
    float *dx = up(x, nb);
    for (int64_t rr = 0; rr < rows; rr++) ig_cpu_softmax(x + rr * n, n);
    ig_error err = {0};
    ok(ig_cuda_softmax(dx, rows, n, g_s, &err), &err);
    down(got, dx, nb);
    check_close("softmax", got, x, rows * n, 1e-5);
    int zero = 1;
    for (int64_t i = 0; i < n; i++) zero &= got[3 * n + i] == 0.0f;
    CU_ASSERT(zero);
    ig_cuda_free(dx);
    free(x);
    free(got);
}

/* ---- attention ------------------------------------------------------------------------------- */

/* A random ascending subset of [0, cap) of size k (k <= cap). */
static void subset(ig_rng *r, int32_t *out, int k, int cap) {
    int w = 0;
    for (int i = 0; i < cap && w < k; i++)
        if (ig_rng_next(r) % (uint64_t)(cap - i) < (uint64_t)(k - w)) out[w++] = i;
}

static void attention_rows_case(int batch, int H, int G, int hd, int cap, int n_extra, ig_dtype kvt,
                                uint64_t seed) {
    ig_rng r;
    ig_rng_seed(&r, seed);
    int T = batch * G;
    int64_t tab = (int64_t)cap * hd, rows_total = (int64_t)T * tab;
    float *k = rnd(&r, rows_total, -1, 1), *v = rnd(&r, rows_total, -1, 1);
    /* f16 tables: round the values first, so the CPU sees exactly what the GPU widens */
    uint16_t *kh = malloc(sizeof(uint16_t) * (size_t)rows_total);
    uint16_t *vh = malloc(sizeof(uint16_t) * (size_t)rows_total);
    for (int64_t i = 0; i < rows_total; i++) {
        kh[i] = ig_f32_to_f16(k[i]);
        vh[i] = ig_f32_to_f16(v[i]);
        if (kvt == IG_DTYPE_F16) {
            k[i] = ig_f16_to_f32(kh[i]);
            v[i] = ig_f16_to_f32(vh[i]);
        }
    }
    int32_t *idx = calloc((size_t)T * (size_t)cap, sizeof *idx);
    int32_t *nsel = malloc(sizeof *nsel * (size_t)T);
    for (int t = 0; t < T; t++) {
        nsel[t] = (int32_t)(ig_rng_next(&r) % (uint64_t)(cap + 1));
        if (t == 1) nsel[t] = 0; /* an empty selection */
        if (t == 2) nsel[t] = cap;
        subset(&r, idx + (int64_t)t * cap, nsel[t], cap);
    }
    float *ke = rnd(&r, (int64_t)batch * (n_extra ? n_extra : 1) * G * hd, -1, 1);
    float *ve = rnd(&r, (int64_t)batch * (n_extra ? n_extra : 1) * G * hd, -1, 1);
    float *q = rnd(&r, (int64_t)batch * H * hd, -1, 1);
    int64_t ps = cap + n_extra + 3;
    size_t ob = sizeof(float) * (size_t)batch * (size_t)H * (size_t)hd;
    size_t pb = sizeof(float) * (size_t)batch * (size_t)H * (size_t)ps;
    float *ref = malloc(ob), *got = malloc(ob), *pref = malloc(pb), *pgot = malloc(pb);
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < batch; b++) {
        const float *kb[64], *vb[64];
        const int32_t *ib[64];
        int64_t ns[64];
        for (int g = 0; g < G; g++) {
            int t = b * G + g;
            kb[g] = k + (int64_t)t * tab;
            vb[g] = v + (int64_t)t * tab;
            ib[g] = idx + (int64_t)t * cap;
            ns[g] = nsel[t];
        }
        ig_gather_attn a = {.n_head = H,
                            .n_kv_head = G,
                            .hd = hd,
                            .scale = scale,
                            .k_base = kb,
                            .v_base = vb,
                            .row_stride = hd,
                            .idx = ib,
                            .n_sel = ns,
                            .k_extra = ke + (int64_t)b * n_extra * G * hd,
                            .v_extra = ve + (int64_t)b * n_extra * G * hd,
                            .n_extra = n_extra};
        ig_ref_attention_gather(&a, q + (int64_t)b * H * hd, pref + (int64_t)b * H * ps, ps,
                                ref + (int64_t)b * H * hd);
        /* entries past each head's rows: the GPU zeroes them; the reference leaves them */
        for (int h = 0; h < H; h++)
            for (int64_t j = nsel[b * G + h / (H / G)] + n_extra; j < ps; j++)
                pref[((int64_t)b * H + h) * ps + j] = 0.0f;
    }
    size_t kvb = (kvt == IG_DTYPE_F16 ? 2 : 4) * (size_t)rows_total;
    void *dk = up(kvt == IG_DTYPE_F16 ? (void *)kh : (void *)k, kvb);
    void *dv = up(kvt == IG_DTYPE_F16 ? (void *)vh : (void *)v, kvb);
    int32_t *di = up(idx, sizeof *idx * (size_t)T * (size_t)cap),
            *dn = up(nsel, sizeof *nsel * (size_t)T);
    size_t eb =
        sizeof(float) * (size_t)batch * (size_t)(n_extra ? n_extra : 1) * (size_t)G * (size_t)hd;
    float *dke = up(ke, eb), *dve = up(ve, eb);
    float *dq = up(q, sizeof(float) * (size_t)batch * (size_t)H * (size_t)hd);
    float *dout = dev(ob), *dp = dev(pb);
    ig_cuda_attn_rows a = {batch, H,  G,   hd, scale, kvt, dk,      dv, tab,
                           hd,    di, cap, dn, dke,   dve, n_extra, dp, ps};
    if (!n_extra) a.k_extra = a.v_extra = NULL;
    ig_error err = {0};
    ok(ig_cuda_attention_rows(&a, dq, dout, g_s, &err), &err);
    down(got, dout, ob);
    down(pgot, dp, pb);
    char what[96];
    snprintf(what, sizeof what, "attention_rows %s hd %d G %d/%d", ig_dtype_name(kvt), hd, G, H);
    check_close(what, got, ref, (int64_t)batch * H * hd, 1e-5);
    check_close("attention_rows probs", pgot, pref, (int64_t)batch * H * ps, 1e-5);
    /* without probabilities: the same output */
    a.probs = NULL;
    ok(ig_cuda_attention_rows(&a, dq, dout, g_s, &err), &err);
    down(got, dout, ob);
    check_close("attention_rows (no probs)", got, ref, (int64_t)batch * H * hd, 1e-5);
    ig_cuda_free(dk);
    ig_cuda_free(dv);
    ig_cuda_free(di);
    ig_cuda_free(dn);
    ig_cuda_free(dke);
    ig_cuda_free(dve);
    ig_cuda_free(dq);
    ig_cuda_free(dout);
    ig_cuda_free(dp);
    free(k);
    free(v);
    free(kh);
    free(vh);
    free(idx);
    free(nsel);
    free(ke);
    free(ve);
    free(q);
    free(ref);
    free(got);
    free(pref);
    free(pgot);
}

static void test_attention_rows(void) {
    if (!need_gpu()) return;
    attention_rows_case(3, 8, 2, 64, 301, 1, IG_DTYPE_F32, 10);
    attention_rows_case(2, 9, 3, 64, 1000, 0, IG_DTYPE_F32, 11);
    attention_rows_case(2, 32, 32, 128, 517, 1, IG_DTYPE_F32, 12);
    attention_rows_case(3, 8, 2, 64, 301, 1, IG_DTYPE_F16, 13);
    attention_rows_case(1, 4, 1, 256, 77, 2, IG_DTYPE_F16, 14);
    attention_rows_case(2, 6, 2, 40, 50, 1, IG_DTYPE_F32, 15); /* hd not a multiple of 32 */
}

static void test_attention_prefill(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 20);
    const int H = 6, G = 2, hd = 64;
    const int64_t p0 = 13, n_q = 37, stride = 64;
    int64_t kvn = (int64_t)G * stride * hd;
    float *k = rnd(&r, kvn, -1, 1), *v = rnd(&r, kvn, -1, 1), *q = rnd(&r, n_q * H * hd, -1, 1);
    size_t ob = sizeof(float) * (size_t)(n_q * H * hd);
    float *ref = malloc(ob), *got = malloc(ob);
    float scale = 1.0f / 8.0f;
    ig_ref_attention(q, n_q, p0, k, v, stride, H, G, hd, scale, ref);
    float *dk = up(k, sizeof(float) * (size_t)kvn), *dv = up(v, sizeof(float) * (size_t)kvn);
    float *dq = up(q, ob), *dout = dev(ob);
    ig_error err = {0};
    ok(ig_cuda_attention_prefill(dq, n_q, p0, dk, dv, stride, H, G, hd, scale, dout, g_s, &err),
       &err);
    down(got, dout, ob);
    check_close("attention_prefill", got, ref, n_q * H * hd, 1e-5);
    ig_cuda_free(dk);
    ig_cuda_free(dv);
    ig_cuda_free(dq);
    ig_cuda_free(dout);
    free(k);
    free(v);
    free(q);
    free(ref);
    free(got);
}

/* ---- InfiniGen selection --------------------------------------------------------------------- */

static void test_partial_scores_select(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 30);
    const int T = 5, nq = 3, kc = 19;
    const int64_t n = 1999, ld = 2048, ldq = 24, ldo = 2001;
    for (ig_dtype kt = IG_DTYPE_F32; kt <= IG_DTYPE_F16; kt++) {
        int64_t kn = (int64_t)T * kc * ld;
        float *kf = rnd(&r, kn, -2, 2);
        uint16_t *kh = malloc(sizeof(uint16_t) * (size_t)kn);
        for (int64_t i = 0; i < kn; i++) kh[i] = ig_f32_to_f16(kf[i]);
        float *q = rnd(&r, (int64_t)T * nq * ldq, -1, 1);
        size_t ob = sizeof(float) * (size_t)T * (size_t)nq * (size_t)ldo;
        float *ref = malloc(ob), *got = malloc(ob);
        float *cref = malloc(sizeof(float) * (size_t)(T * ldo)),
              *cgot = malloc(sizeof(float) * (size_t)(T * ldo));
        float rref[5 * 3], rgot[5 * 3];
        for (int t = 0; t < T; t++) {
            const void *kp = kt == IG_DTYPE_F32 ? (const void *)(kf + (int64_t)t * kc * ld)
                                                : (const void *)(kh + (int64_t)t * kc * ld);
            ig_cpu_partial_scores(kp, kt, ld, kc, n, q + (int64_t)t * nq * ldq, ldq, nq,
                                  ref + (int64_t)t * nq * ldo, ldo, cref + (int64_t)t * ldo,
                                  rref + t * nq);
        }
        void *dk = kt == IG_DTYPE_F32 ? up(kf, sizeof(float) * (size_t)kn)
                                      : up(kh, sizeof(uint16_t) * (size_t)kn);
        float *dq = up(q, sizeof(float) * (size_t)T * (size_t)nq * (size_t)ldq);
        float *dout = dev(ob), *dcm = dev(sizeof(float) * (size_t)(T * ldo));
        float *drm = dev(sizeof rgot);
        ig_error err = {0};
        ok(ig_cuda_partial_scores(dk, kt, ld, (int64_t)kc * ld, kc, n, dq, ldq, nq * ldq, nq, dout,
                                  ldo, nq * ldo, dcm, ldo, drm, T, g_s, &err),
           &err);
        down(got, dout, ob);
        down(cgot, dcm, sizeof(float) * (size_t)(T * ldo));
        down(rgot, drm, sizeof rgot);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nq; h++)
                check_close("partial scores", got + ((int64_t)t * nq + h) * ldo,
                            ref + ((int64_t)t * nq + h) * ldo, n, 1e-5);
        for (int t = 0; t < T; t++)
            check_close("partial scores col_max", cgot + (int64_t)t * ldo, cref + (int64_t)t * ldo,
                        n, 1e-5);
        check_close("partial scores row_max", rgot, rref, T * nq, 1e-5);

        /* InfiniGen's count above (row max - alpha) and the indices above it, on the GPU's own
         * scores (so the comparison with the CPU is exact) */
        const float alpha = 1.5f;
        int32_t cnt[15], cnt_ref[15];
        int32_t *ix = malloc(sizeof(int32_t) * (size_t)(T * nq) * (size_t)ldo);
        int32_t *ix_ref = malloc(sizeof(int32_t) * (size_t)n);
        int32_t *dcnt = dev(sizeof cnt),
                *dix = dev(sizeof(int32_t) * (size_t)(T * nq) * (size_t)ldo);
        ok(ig_cuda_count_greater(dout, ldo, T * nq, n, NULL, drm, -alpha, dcnt, g_s, &err), &err);
        down(cnt, dcnt, sizeof cnt);
        for (int i = 0; i < T * nq; i++)
            cnt_ref[i] = (int32_t)ig_cpu_count_greater(got + (int64_t)i * ldo, n, rgot[i] - alpha);
        CU_ASSERT(memcmp(cnt, cnt_ref, sizeof cnt) == 0);
        ok(ig_cuda_indices_greater(dout, ldo, T * nq, n, NULL, drm, -alpha, dix, ldo, dcnt, g_s,
                                   &err),
           &err);
        down(cnt, dcnt, sizeof cnt);
        down(ix, dix, sizeof(int32_t) * (size_t)(T * nq) * (size_t)ldo);
        for (int i = 0; i < T * nq; i++) {
            int64_t c = ig_cpu_indices_greater(got + (int64_t)i * ldo, n, rgot[i] - alpha, ix_ref);
            CU_ASSERT(cnt[i] == c);
            if (cnt[i] == c)
                check_equal_bytes("indices_greater", ix + (int64_t)i * ldo, ix_ref,
                                  sizeof(int32_t) * (size_t)c);
        }
        ig_cuda_free(dk);
        ig_cuda_free(dq);
        ig_cuda_free(dout);
        ig_cuda_free(dcm);
        ig_cuda_free(drm);
        ig_cuda_free(dcnt);
        ig_cuda_free(dix);
        free(kf);
        free(kh);
        free(q);
        free(ref);
        free(got);
        free(cref);
        free(cgot);
        free(ix);
        free(ix_ref);
    }
}

static void test_topk(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 40);
    const int rows = 9;
    const int64_t n = 4099, ld = 4100;
    float *x = malloc(sizeof(float) * (size_t)(rows * ld));
    for (int rr = 0; rr < rows; rr++)
        for (int64_t i = 0; i < n; i++) {
            float v = frand(&r, -5, 5);
            if (rr % 3 == 1) v = floorf(v * 2.0f) / 2.0f; /* many ties */
            if (rr % 3 == 2 && i % 17 == 0) v = NAN;
            if (rr == 5 && i % 5 == 0) v = (i % 10 == 0) ? -0.0f : 0.0f;
            x[rr * ld + i] = v;
        }
    int32_t nr[9], kr[9];
    for (int rr = 0; rr < rows; rr++) {
        nr[rr] = (int32_t)(n - (int64_t)(ig_rng_next(&r) % 500));
        kr[rr] = (int32_t)(ig_rng_next(&r) % 600);
    }
    kr[0] = 0;
    kr[1] = nr[1];      /* everything */
    kr[2] = nr[2] + 10; /* more than there is */
    kr[3] = -3;
    int32_t *got = malloc(sizeof(int32_t) * (size_t)(rows * ld)), cnt[9];
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)n);
    void *ws = malloc(ig_cpu_topk_ws_bytes(n));
    float *dx = up(x, sizeof(float) * (size_t)(rows * ld));
    int32_t *dnr = up(nr, sizeof nr), *dkr = up(kr, sizeof kr);
    int32_t *dix = dev(sizeof(int32_t) * (size_t)(rows * ld)), *dcnt = dev(sizeof cnt);
    ig_error err = {0};
    ok(ig_cuda_topk(dx, ld, rows, n, dnr, 0, dkr, dix, ld, dcnt, g_s, &err), &err);
    down(got, dix, sizeof(int32_t) * (size_t)(rows * ld));
    down(cnt, dcnt, sizeof cnt);
    for (int rr = 0; rr < rows; rr++) {
        int64_t c = ig_cpu_topk(x + rr * ld, nr[rr], kr[rr], ref, ws, ig_cpu_topk_ws_bytes(n));
        CU_ASSERT(cnt[rr] == c);
        if (cnt[rr] == c)
            check_equal_bytes("topk", got + rr * ld, ref, sizeof(int32_t) * (size_t)c);
    }
    /* a uniform k and n */
    ok(ig_cuda_topk(dx, ld, rows, n, NULL, 257, NULL, dix, ld, dcnt, g_s, &err), &err);
    down(got, dix, sizeof(int32_t) * (size_t)(rows * ld));
    down(cnt, dcnt, sizeof cnt);
    for (int rr = 0; rr < rows; rr++) {
        int64_t c = ig_cpu_topk(x + rr * ld, n, 257, ref, ws, ig_cpu_topk_ws_bytes(n));
        CU_ASSERT(cnt[rr] == c);
        if (cnt[rr] == c)
            check_equal_bytes("topk (uniform k)", got + rr * ld, ref, sizeof(int32_t) * (size_t)c);
    }
    ig_cuda_free(dx);
    ig_cuda_free(dnr);
    ig_cuda_free(dkr);
    ig_cuda_free(dix);
    ig_cuda_free(dcnt);
    free(x);
    free(got);
    free(ref);
    free(ws);
}

/* ---- transfer of selected rows --------------------------------------------------------------- */

/* Host home tables in pinned mapped memory (or registered malloc'd memory), gathered by index
 * lists into a packed device working set; compared with the same gather done by memcpy. */
static void gather_case(size_t row_bytes, int registered, uint64_t seed) {
    ig_rng r;
    ig_rng_seed(&r, seed);
    const int T = 6, src_tables = 8, cap = 211;
    size_t srs = row_bytes + (row_bytes % 16 ? 0 : 16); /* a padded source row stride */
    size_t sts = srs * cap, home_bytes = sts * src_tables;
    ig_error err = {0};
    unsigned char *home = NULL;
    void *raw = NULL;
    if (registered) {
        raw = malloc(home_bytes + 4096);
        home = (unsigned char *)(((uintptr_t)raw + 4095) & ~(uintptr_t)4095);
        ok(ig_cuda_host_register(home, home_bytes, 1, &err), &err);
    } else {
        ok(ig_cuda_host_alloc((void **)&home, home_bytes, 1, &err), &err);
    }
    for (size_t i = 0; i < home_bytes; i++) home[i] = (unsigned char)(ig_rng_next(&r) >> 56);
    void *dhome = NULL;
    ok(ig_cuda_host_device_ptr(&dhome, home, &err), &err);
    int32_t idx[6 * 211], nsel[6], stab[6];
    for (int t = 0; t < T; t++) {
        nsel[t] = (int32_t)(ig_rng_next(&r) % (uint64_t)(cap + 1));
        stab[t] = (int32_t)((t * 5 + 3) % src_tables);
        subset(&r, idx + t * cap, nsel[t], cap);
        for (int j = 0; j + 1 < nsel[t]; j += 7) { /* unsorted lists work too */
            int32_t tmp = idx[t * cap + j];
            idx[t * cap + j] = idx[t * cap + j + 1];
            idx[t * cap + j + 1] = tmp;
        }
    }
    size_t dts = row_bytes * cap, ws_bytes = dts * T;
    unsigned char *ref = calloc(ws_bytes, 1), *got = calloc(ws_bytes, 1);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < nsel[t]; j++)
            memcpy(ref + t * dts + (size_t)j * row_bytes,
                   home + (size_t)stab[t] * sts + (size_t)idx[t * cap + j] * srs, row_bytes);
    int32_t *di = up(idx, sizeof idx), *dn = up(nsel, sizeof nsel), *dt = up(stab, sizeof stab);
    void *dws = dev(ws_bytes);
    ok(ig_cuda_memset_async(dws, 0, ws_bytes, g_s, &err), &err);
    ok(ig_cuda_gather_rows(dws, (int64_t)dts, dhome, (int64_t)sts, (int64_t)srs, dt, row_bytes, di,
                           cap, dn, T, g_s, &err),
       &err);
    down(got, dws, ws_bytes);
    char what[64];
    snprintf(what, sizeof what, "gather_rows (%zu-byte rows, %s)", row_bytes,
             registered ? "registered" : "host_alloc");
    check_equal_bytes(what, got, ref, ws_bytes);
    ig_cuda_free(di);
    ig_cuda_free(dn);
    ig_cuda_free(dt);
    ig_cuda_free(dws);
    if (registered) {
        ok(ig_cuda_host_unregister(home, &err), &err);
        free(raw);
    } else {
        ig_cuda_host_free(home);
    }
    free(ref);
    free(got);
}

static void test_gather_rows(void) {
    if (!need_gpu()) return;
    gather_case(256, 0, 50); /* f16 rows of hd 128: 16-byte pieces */
    gather_case(36, 0, 51);  /* 4-bit rows of hd 64: 4-byte pieces */
    gather_case(7, 0, 52);   /* odd: byte pieces */
    gather_case(512, 1, 53); /* f32 rows of hd 128 in registered memory */
}

/* ---- KV codec -------------------------------------------------------------------------------- */

static void test_kvquant(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 60);
    const int cfg[][3] = {{64, 4, 64}, {128, 4, 32}, {128, 8, 64}, {64, 2, 16}, {96, 4, 32}};
    for (int c = 0; c < 5; c++) {
        int hd = cfg[c][0], bits = cfg[c][1], group = cfg[c][2];
        int64_t rows = 301;
        size_t rb = ig_kvq_row_bytes(hd, bits, group);
        float *x = rnd(&r, rows * hd, -3, 3);
        /* special rows: constant, tiny, huge, NaN/inf, signed zeros, f16 subnormals */
        for (int d = 0; d < hd; d++) {
            x[0 * hd + d] = 0.75f;
            x[1 * hd + d] = frand(&r, -1e-6f, 1e-6f);
            x[2 * hd + d] = frand(&r, -1e5f, 1e5f);
            x[3 * hd + d] = d % 7 == 0   ? NAN
                            : d % 7 == 1 ? INFINITY
                            : d % 7 == 2 ? -INFINITY
                                         : 1.0f;
            x[4 * hd + d] = d % 2 ? -0.0f : 0.0f;
            x[5 * hd + d] = frand(&r, -6e-5f, 6e-5f);
        }
        uint8_t *qref = malloc(rb * (size_t)rows), *qgot = malloc(rb * (size_t)rows);
        size_t fb = sizeof(float) * (size_t)(rows * hd);
        float *dref = malloc(fb), *dgot = malloc(fb);
        ig_kvq_quantize_rows(x, rows, hd, bits, group, qref);
        ig_kvq_dequantize_rows(qref, rows, hd, bits, group, dref);
        float *dx = up(x, fb);
        uint8_t *dq = dev(rb * (size_t)rows);
        float *dy = dev(fb);
        ig_error err = {0};
        ok(ig_cuda_kvq_quantize_rows(dx, rows, hd, bits, group, dq, g_s, &err), &err);
        down(qgot, dq, rb * (size_t)rows);
        char what[64];
        snprintf(what, sizeof what, "kvq quantize hd %d bits %d group %d", hd, bits, group);
        check_equal_bytes(what, qgot, qref, rb * (size_t)rows);
        /* decode the CPU's bytes on the GPU */
        uint8_t *dq2 = up(qref, rb * (size_t)rows);
        ok(ig_cuda_kvq_dequantize_rows(dq2, rows, hd, bits, group, dy, g_s, &err), &err);
        down(dgot, dy, fb);
        snprintf(what, sizeof what, "kvq dequantize hd %d bits %d group %d", hd, bits, group);
        check_equal_bytes(what, dgot, dref, fb);
        ig_cuda_free(dx);
        ig_cuda_free(dq);
        ig_cuda_free(dq2);
        ig_cuda_free(dy);
        free(x);
        free(qref);
        free(qgot);
        free(dref);
        free(dgot);
    }
}

/* ---- sampling -------------------------------------------------------------------------------- */

static void test_argmax(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 70);
    const int rows = 6;
    const int64_t n = 49152, ld = 49160;
    float *x = rnd(&r, rows * ld, -10, 10);
    x[0 * ld + 100] = 50;
    x[0 * ld + 7] = 50; /* a tie: the lower index */
    x[1 * ld + 0] = NAN;
    x[1 * ld + 3] = 40;
    x[1 * ld + 9] = NAN;
    for (int64_t i = 0; i < n; i++) x[2 * ld + i] = NAN;  /* all NaN: 0 */
    for (int64_t i = 0; i < n; i++) x[3 * ld + i] = 1.0f; /* all equal: 0 */
    x[4 * ld + n - 1] = INFINITY;
    x[5 * ld + 11] = -0.0f;
    for (int64_t i = 0; i < n; i++)
        if (x[5 * ld + i] > 0) x[5 * ld + i] = -x[5 * ld + i];
    x[5 * ld + 11] = 0.0f;
    x[5 * ld + 5] = -0.0f; /* -0 and +0 tie: the lower index */
    float *dx = up(x, sizeof(float) * (size_t)(rows * ld));
    int32_t *dout = dev(sizeof(int32_t) * rows), got[6];
    ig_error err = {0};
    ok(ig_cuda_argmax(dx, ld, rows, n, dout, g_s, &err), &err);
    down(got, dout, sizeof got);
    for (int rr = 0; rr < rows; rr++) {
        int32_t want = ig_sample_argmax(x + rr * ld, n);
        if (got[rr] != want) fprintf(stderr, "argmax row %d: gpu %d cpu %d\n", rr, got[rr], want);
        CU_ASSERT(got[rr] == want);
    }
    ig_cuda_free(dx);
    ig_cuda_free(dout);
    free(x);
}

static void test_sample(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 80);
    /* 8 rows: every spread twice, ties in three (each row is a block of its own; on the emulator
     * a row of this kernel is about 0.2 s) */
    const int rows = 8;
    const int64_t n = 32000;
    float *x = malloc(sizeof(float) * (size_t)(rows * n));
    for (int rr = 0; rr < rows; rr++)
        for (int64_t i = 0; i < n; i++) {
            float spread = rr % 4 == 0 ? 1.0f : rr % 4 == 1 ? 4.0f : rr % 4 == 2 ? 12.0f : 0.1f;
            float v = frand(&r, -spread, spread);
            if (rr % 3 == 1) v = floorf(v); /* ties in the ranking */
            x[rr * n + i] = v;
        }
    float *dx = up(x, sizeof(float) * (size_t)(rows * n));
    double u[16];
    int32_t got[16], *dout = dev(sizeof got);
    double *du = dev(sizeof u);
    float *ws = malloc(sizeof(float) * (size_t)n);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
    const float temps[] = {0.7f, 1.0f, 1.3f};
    const float tops[] = {0.9f, 0.5f, 1.0f, 1e-6f};
    int mism = 0, total = 0;
    for (int ti = 0; ti < 3; ti++)
        for (int pi = 0; pi < 4; pi++) {
            ig_rng cpu_rng[16];
            for (int rr = 0; rr < rows; rr++) {
                ig_rng_seed(&cpu_rng[rr], (uint64_t)(1000 + 100 * ti + 10 * pi + rr));
                ig_rng g = cpu_rng[rr];
                u[rr] = ig_rng_uniform(&g); /* the draw ig_sample will make */
            }
            ig_error err = {0};
            void *uu = du;
            ok(ig_cuda_copy_h2d_async(uu, u, sizeof u, g_s, &err), &err);
            ok(ig_cuda_sample(dx, n, rows, n, temps[ti], tops[pi], du, dout, g_s, &err), &err);
            down(got, dout, sizeof got);
            for (int rr = 0; rr < rows; rr++) {
                int32_t want = ig_sample(x + rr * n, n, temps[ti], tops[pi], &cpu_rng[rr], ws, idx);
                total++;
                if (got[rr] != want) {
                    mism++;
                    fprintf(stderr, "sample T %.2f top_p %g row %d: gpu %d cpu %d\n",
                            (double)temps[ti], (double)tops[pi], rr, got[rr], want);
                }
            }
        }
    CU_ASSERT(mism == 0);
    (void)total;
    /* greedy through ig_cuda_sample */
    ig_error err = {0};
    ok(ig_cuda_sample(dx, n, rows, n, 0.0f, 0.9f, NULL, dout, g_s, &err), &err);
    down(got, dout, sizeof got);
    for (int rr = 0; rr < rows; rr++) CU_ASSERT(got[rr] == ig_sample_argmax(x + rr * n, n));
    ig_cuda_free(dx);
    ig_cuda_free(dout);
    ig_cuda_free(du);
    free(x);
    free(ws);
    free(idx);
}

/* ---- backend: GEMM, copies, streams, events -------------------------------------------------- */

static void gemm_case(ig_dtype t, int64_t M, int64_t K, int64_t N, double bound) {
    ig_rng r;
    ig_rng_seed(&r, (uint64_t)(90 + t + M));
    float *x = rnd(&r, M * K, -1, 1), *w = rnd(&r, N * K, -1, 1);
    uint16_t *xh = malloc(sizeof(uint16_t) * (size_t)(M * K)),
             *wh = malloc(sizeof(uint16_t) * (size_t)(N * K));
    for (int64_t i = 0; i < M * K; i++) {
        xh[i] = t == IG_DTYPE_BF16 ? ig_f32_to_bf16(x[i]) : ig_f32_to_f16(x[i]);
        if (t != IG_DTYPE_F32)
            x[i] = t == IG_DTYPE_BF16 ? ig_bf16_to_f32(xh[i]) : ig_f16_to_f32(xh[i]);
    }
    for (int64_t i = 0; i < N * K; i++) {
        wh[i] = t == IG_DTYPE_BF16 ? ig_f32_to_bf16(w[i]) : ig_f32_to_f16(w[i]);
        if (t != IG_DTYPE_F32)
            w[i] = t == IG_DTYPE_BF16 ? ig_bf16_to_f32(wh[i]) : ig_f16_to_f32(wh[i]);
    }
    size_t yb = sizeof(float) * (size_t)(M * N);
    float *ref = malloc(yb), *got = malloc(yb);
    ig_ref_linear(x, M, K, w, IG_DTYPE_F32, N, NULL, ref);
    size_t es = t == IG_DTYPE_F32 ? 4 : 2;
    void *dx = up(t == IG_DTYPE_F32 ? (void *)x : (void *)xh, es * (size_t)(M * K));
    void *dw = up(t == IG_DTYPE_F32 ? (void *)w : (void *)wh, es * (size_t)(N * K));
    float *dy = dev(yb);
    ig_error err = {0};
    ok(ig_cuda_gemm(g_ctx, g_s, dx, t, M, K, dw, t, N, dy, IG_DTYPE_F32, 0.0f, &err), &err);
    down(got, dy, yb);
    char what[64];
    snprintf(what, sizeof what, "gemm %s M %lld", ig_dtype_name(t), (long long)M);
    check_close(what, got, ref, M * N, bound);
    /* beta = 1 accumulates */
    ok(ig_cuda_gemm(g_ctx, g_s, dx, t, M, K, dw, t, N, dy, IG_DTYPE_F32, 1.0f, &err), &err);
    down(got, dy, yb);
    for (int64_t i = 0; i < M * N; i++) ref[i] *= 2.0f;
    check_close("gemm beta 1", got, ref, M * N, bound);
    ig_cuda_free(dx);
    ig_cuda_free(dw);
    ig_cuda_free(dy);
    free(x);
    free(w);
    free(xh);
    free(wh);
    free(ref);
    free(got);
}

static void test_gemm(void) {
    if (!need_gpu()) return;
    gemm_case(IG_DTYPE_F32, 5, 576, 192, 1e-5);
    gemm_case(IG_DTYPE_F16, 5, 576, 192, 1e-4);
    gemm_case(IG_DTYPE_F16, 130, 1024, 96, 1e-4);
    gemm_case(IG_DTYPE_BF16, 8, 512, 64, 1e-4);
}

/* ---- block-quantized weights (qlinear.cu) -----------------------------------------------------
 */

static const ig_dtype k_qtypes[5] = {IG_DTYPE_Q4_0, IG_DTYPE_Q4_1, IG_DTYPE_Q8_0, IG_DTYPE_Q4G64,
                                     IG_DTYPE_Q8G64};

/* Random W [N][K] quantized with ig_quantize_row_ref (row 0 constant, row 1 eight times larger,
 * the rest in [-1, 1]); wf gets every row through ig_dequant_row_ref. */
static uint8_t *q_weights(ig_rng *r, ig_dtype t, int64_t N, int64_t K, float *wf) {
    size_t rb = ig_dtype_row_bytes(t, K);
    uint8_t *q = malloc(rb * (size_t)N);
    float *w = rnd(r, N * K, -1, 1);
    CU_ASSERT_FATAL(q != NULL);
    for (int64_t k = 0; k < K; k++) {
        w[k] = 0.375f;
        if (N > 1) w[K + k] *= 8.0f;
    }
    for (int64_t n = 0; n < N; n++) {
        CU_ASSERT_FATAL(ig_quantize_row_ref(t, w + n * K, q + (size_t)n * rb, K) == 0);
        ig_dequant_row_ref(t, q + (size_t)n * rb, wf + n * K, K);
    }
    free(w);
    return q;
}

/* max over outputs of |got - sum_k w x| / sum_k |w x| (the dot in double): the error relative to
 * the dot's own scale, which is what f32 accumulation and f16 rounding bound. */
static void check_qlinear(const char *what, const float *got, const float *x, const float *wf,
                          int64_t M, int64_t K, int64_t N, double bound) {
    double e = 0;
    int fin = all_finite(got, M * N);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double dot = 0, mag = 1e-30;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)x[m * K + k] * (double)wf[n * K + k];
                dot += p;
                mag += fabs(p);
            }
            double d = fabs((double)got[m * N + n] - dot) / mag;
            if (!(d <= e)) e = d; /* NaN propagates */
        }
    if (!(e <= bound) || !fin)
        fprintf(stderr, "%s: error %.3g of sum |w x| (bound %.1g)%s\n", what, e, bound,
                fin ? "" : ", non-finite output");
    CU_ASSERT(fin);
    CU_ASSERT(e <= bound);
}

/* One ig_cuda_qlinear call into y (first filled with 0xff bytes, NaN, so every output must be
 * written) and its check. */
static void qlinear_run(const char *what, const float *dx, const float *x, int64_t M, int64_t K,
                        const void *dw, ig_dtype t, const float *wf, int64_t N, float *dy,
                        float *got, const ig_cuda_qscratch *sc, double bound) {
    ig_error err = {0};
    size_t yb = sizeof(float) * (size_t)(M * N);
    ok(ig_cuda_memset_async(dy, 0xff, yb, g_s, &err), &err);
    ok(ig_cuda_qlinear(g_ctx, g_s, dx, M, K, dw, t, N, dy, sc, &err), &err);
    down(got, dy, yb);
    check_qlinear(what, got, x, wf, M, K, N, bound);
}

/* Every type, M in {1, 2, 5, 8} (GEMV) and {17, 64} (prefill with an f32 scratch holding all of
 * W or 64-row chunks, an f16 scratch, and no scratch: GEMV passes), K of one block, 576, 1536, N
 * not a multiple of a warp, of the GEMV's rows per block or of the 64-row chunks. */
static void test_qlinear(void) {
    if (!need_gpu()) return;
    const int64_t Ms[] = {1, 2, 5, 8, 17, 64};
    const int64_t Ks[] = {0 /* one block */, 576, 1536}, Ns[] = {37, 45, 70};
    const int64_t max_m = 64, max_k = 1536, max_n = 70;
    size_t sc_bytes = ig_cuda_qlinear_scratch_bytes(max_m, max_k, max_n, IG_DTYPE_F32);
    CU_ASSERT_FATAL(sc_bytes >= ig_cuda_qlinear_scratch_bytes(max_m, max_k, max_n, IG_DTYPE_F16));
    void *dsc = dev(sc_bytes);
    float *got = malloc(sizeof(float) * (size_t)(max_m * max_n));
    ig_rng r;
    ig_rng_seed(&r, 100);
    for (int ti = 0; ti < 5; ti++)
        for (int si = 0; si < 3; si++) {
            ig_dtype t = k_qtypes[ti];
            int64_t K = Ks[si] ? Ks[si] : ig_dtype_block_elems(t), N = Ns[si];
            float *wf = malloc(sizeof(float) * (size_t)(N * K));
            uint8_t *wq = q_weights(&r, t, N, K, wf);
            float *x = rnd(&r, max_m * K, -1, 1);
            void *dw = up(wq, ig_dtype_row_bytes(t, K) * (size_t)N);
            float *dx = up(x, sizeof(float) * (size_t)(max_m * K));
            float *dy = dev(sizeof(float) * (size_t)(max_m * N));
            for (int mi = 0; mi < 6; mi++) {
                int64_t M = Ms[mi];
                char what[96];
                snprintf(what, sizeof what, "qlinear %s M %lld K %lld N %lld", ig_dtype_name(t),
                         (long long)M, (long long)K, (long long)N);
                qlinear_run(what, dx, x, M, K, dw, t, wf, N, dy, got, NULL, 1e-5);
                if (M <= IG_CUDA_QLINEAR_GEMV_MAX_M) continue;
                ig_cuda_qscratch full = {dsc, ig_cuda_qlinear_scratch_bytes(M, K, N, IG_DTYPE_F32),
                                         IG_DTYPE_F32};
                ig_cuda_qscratch chunks = {
                    dsc, ig_cuda_qlinear_scratch_bytes(M, K, 64, IG_DTYPE_F32), IG_DTYPE_F32};
                ig_cuda_qscratch half = {dsc, ig_cuda_qlinear_scratch_bytes(M, K, N, IG_DTYPE_F16),
                                         IG_DTYPE_F16};
                snprintf(what, sizeof what, "qlinear %s M %lld K %lld N %lld f32 GEMM",
                         ig_dtype_name(t), (long long)M, (long long)K, (long long)N);
                qlinear_run(what, dx, x, M, K, dw, t, wf, N, dy, got, &full, 1e-5);
                snprintf(what, sizeof what, "qlinear %s M %lld K %lld N %lld f32 GEMM, chunks",
                         ig_dtype_name(t), (long long)M, (long long)K, (long long)N);
                qlinear_run(what, dx, x, M, K, dw, t, wf, N, dy, got, &chunks, 1e-5);
                snprintf(what, sizeof what, "qlinear %s M %lld K %lld N %lld f16 GEMM",
                         ig_dtype_name(t), (long long)M, (long long)K, (long long)N);
                qlinear_run(what, dx, x, M, K, dw, t, wf, N, dy, got, &half, 2e-3);
            }
            ig_cuda_free(dw);
            ig_cuda_free(dx);
            ig_cuda_free(dy);
            free(wf);
            free(wq);
            free(x);
        }
    ig_cuda_free(dsc);
    free(got);
}

/* ig_cuda_dequant_rows: f32 bitwise ig_dequant_row_ref, f16 that rounded to nearest even; the
 * indexed variant picks rows (repeats too) and fills a row of NaN for an index out of range. */
static void test_qdequant(void) {
    if (!need_gpu()) return;
    ig_rng r;
    ig_rng_seed(&r, 101);
    const int64_t N = 23, K = 576;
    const int32_t idx[] = {5, 0, 22, 5, 23, -1, 11};
    const int64_t n_idx = 7;
    for (int ti = 0; ti < 5; ti++) {
        ig_dtype t = k_qtypes[ti];
        size_t rb = ig_dtype_row_bytes(t, K), fb = sizeof(float) * (size_t)(N * K);
        float *wf = malloc(fb), *got = malloc(fb);
        uint16_t *want_h = malloc(sizeof(uint16_t) * (size_t)(N * K));
        uint16_t *got_h = malloc(sizeof(uint16_t) * (size_t)(N * K));
        uint8_t *wq = q_weights(&r, t, N, K, wf);
        for (int64_t i = 0; i < N * K; i++) want_h[i] = ig_f32_to_f16(wf[i]);
        void *dw = up(wq, rb * (size_t)N);
        int32_t *didx = up(idx, sizeof idx);
        float *dy = dev(fb);
        ig_error err = {0};
        char what[64];
        ok(ig_cuda_dequant_rows(dw, t, N, K, dy, IG_DTYPE_F32, g_s, &err), &err);
        down(got, dy, fb);
        snprintf(what, sizeof what, "dequant_rows %s f32", ig_dtype_name(t));
        check_equal_bytes(what, got, wf, fb);
        ok(ig_cuda_dequant_rows(dw, t, N, K, dy, IG_DTYPE_F16, g_s, &err), &err);
        down(got_h, dy, sizeof(uint16_t) * (size_t)(N * K));
        snprintf(what, sizeof what, "dequant_rows %s f16", ig_dtype_name(t));
        check_equal_bytes(what, got_h, want_h, sizeof(uint16_t) * (size_t)(N * K));
        ok(ig_cuda_dequant_rows_idx(dw, t, N, K, didx, n_idx, dy, IG_DTYPE_F32, g_s, &err), &err);
        down(got, dy, sizeof(float) * (size_t)(n_idx * K));
        for (int64_t i = 0; i < n_idx; i++) {
            snprintf(what, sizeof what, "dequant_rows_idx %s row %lld", ig_dtype_name(t),
                     (long long)i);
            if (idx[i] >= 0 && idx[i] < N) {
                check_equal_bytes(what, got + i * K, wf + idx[i] * K, sizeof(float) * (size_t)K);
            } else {
                int all_nan = 1;
                for (int64_t k = 0; k < K; k++) all_nan &= isnan(got[i * K + k]) != 0;
                CU_ASSERT(all_nan);
            }
        }
        ig_cuda_free(dw);
        ig_cuda_free(didx);
        ig_cuda_free(dy);
        free(wf);
        free(got);
        free(want_h);
        free(got_h);
        free(wq);
    }
}

/* Invalid arguments: IG_ERR_INVALID_ARG naming the problem, and nothing launched (y keeps its
 * bytes). */
static void expect_invalid(ig_status st, const ig_error *err, const char *needle) {
    int good = st == IG_ERR_INVALID_ARG && strstr(err->msg, needle) != NULL;
    if (!good)
        fprintf(stderr, "expected invalid argument '%s', got %d: %s\n", needle, st, err->msg);
    CU_ASSERT(good);
}

static void test_qlinear_bad_args(void) {
    if (!need_gpu()) return;
    const int64_t M = 3, K = 64, N = 5;
    ig_dtype t = IG_DTYPE_Q4G64;
    float *dx = dev(sizeof(float) * (size_t)(M * K + 4)),
          *dy = dev(sizeof(float) * (size_t)(M * N));
    void *dw = dev(ig_dtype_row_bytes(t, K) * (size_t)N);
    float before[15], after[15];
    for (int i = 0; i < 15; i++) before[i] = (float)i;
    ig_error err = {0};
    ok(ig_cuda_copy_h2d_async(dy, before, sizeof before, g_s, &err), &err);
    sync_ok();
    ig_cuda_qscratch bad_sc = {dx, 4096, IG_DTYPE_BF16};
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, M, K, dw, IG_DTYPE_F16, N, dy, NULL, &err), &err,
                   "not block-quantized");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, M, 48, dw, t, N, dy, NULL, &err), &err,
                   "K=48 must be a positive multiple of q4g64's block of 64");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, M, 0, dw, t, N, dy, NULL, &err), &err, "K=0");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, -1, K, dw, t, N, dy, NULL, &err), &err, "M=-1");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, NULL, M, K, dw, t, N, dy, NULL, &err), &err,
                   "NULL x");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, M, K, NULL, t, N, dy, NULL, &err), &err,
                   "NULL W");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, M, K, dw, t, N, NULL, NULL, &err), &err,
                   "NULL y");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx + 1, M, K, dw, t, N, dy, NULL, &err), &err,
                   "16-byte aligned");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, M, K, (char *)dw + 2, t, N, dy, NULL, &err),
                   &err, "4-byte aligned for q4g64");
    expect_invalid(ig_cuda_qlinear(g_ctx, g_s, dx, M, K, dw, t, N, dy, &bad_sc, &err), &err,
                   "gemm_type bf16");
    expect_invalid(ig_cuda_dequant_rows(dw, t, N, K, dy, IG_DTYPE_BF16, g_s, &err), &err,
                   "output type bf16");
    expect_invalid(ig_cuda_dequant_rows(dw, IG_DTYPE_F32, N, K, dy, IG_DTYPE_F32, g_s, &err), &err,
                   "W type f32 is not block-quantized");
    expect_invalid(ig_cuda_dequant_rows(dw, IG_DTYPE_Q8_0, N, 40, dy, IG_DTYPE_F32, g_s, &err),
                   &err, "K=40");
    expect_invalid(ig_cuda_dequant_rows_idx(dw, t, N, K, NULL, 2, dy, IG_DTYPE_F32, g_s, &err),
                   &err, "NULL idx");
    /* the checks alone; empty work is fine and touches nothing */
    CU_ASSERT(ig_cuda_qlinear_check_args(M, K, t, N, &err) == IG_OK);
    CU_ASSERT(ig_cuda_qlinear_check_args(M, 96, IG_DTYPE_Q8_0, N, &err) == IG_OK);
    CU_ASSERT(ig_cuda_qlinear_check_args(M, 96, t, N, &err) == IG_ERR_INVALID_ARG);
    CU_ASSERT(ig_cuda_qlinear(g_ctx, g_s, NULL, 0, K, NULL, t, N, NULL, NULL, &err) == IG_OK);
    CU_ASSERT(ig_cuda_dequant_rows(NULL, t, 0, K, NULL, IG_DTYPE_F16, g_s, &err) == IG_OK);
    CU_ASSERT(ig_cuda_qlinear_scratch_bytes(M, K, N, IG_DTYPE_BF16) == 0);
    CU_ASSERT(ig_cuda_qlinear_scratch_bytes(M, K, N, IG_DTYPE_F32) == (size_t)(N * K * 4));
    CU_ASSERT(ig_cuda_qlinear_scratch_bytes(M, K, N, IG_DTYPE_F16) == 512 + (size_t)(N * K * 2));
    down(after, dy, sizeof after);
    CU_ASSERT(memcmp(before, after, sizeof before) == 0);
    ig_cuda_free(dx);
    ig_cuda_free(dy);
    ig_cuda_free(dw);
}

static void test_streams_events_copies(void) {
    if (!need_gpu()) return;
    ig_error err = {0};
    const size_t n = 64u << 20; /* 64 MiB */
    unsigned char *h = NULL, *back = NULL;
    ok(ig_cuda_host_alloc((void **)&h, n, 0, &err), &err);
    ok(ig_cuda_host_alloc((void **)&back, n, 0, &err), &err);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 131u >> 3);
    void *d = dev(n);
    ig_cuda_stream_t copy;
    ok(ig_cuda_stream_create(&copy, &err), &err);
    ig_cuda_event_t e0, e1, done;
    ok(ig_cuda_event_create(&e0, 1, &err), &err);
    ok(ig_cuda_event_create(&e1, 1, &err), &err);
    ok(ig_cuda_event_create(&done, 0, &err), &err);
    /* copy in on one stream, out on another after an event: cross-stream ordering */
    ok(ig_cuda_event_record(e0, copy, &err), &err);
    ok(ig_cuda_copy_h2d_async(d, h, n, copy, &err), &err);
    ok(ig_cuda_event_record(e1, copy, &err), &err);
    ok(ig_cuda_event_record(done, copy, &err), &err);
    ok(ig_cuda_stream_wait_event(g_s, done, &err), &err);
    ok(ig_cuda_copy_d2h_async(back, d, n, g_s, &err), &err);
    sync_ok();
    CU_ASSERT(ig_cuda_event_done(done, &err) == 1);
    float ms = -1;
    ok(ig_cuda_event_elapsed_ms(e0, e1, &ms, &err), &err);
    CU_ASSERT(ms > 0.0f);
    fprintf(stderr, "pinned H2D of %zu MiB: %.3f ms, %.1f GB/s\n", n >> 20, (double)ms,
            (double)n / (ms * 1e6));
    CU_ASSERT(memcmp(h, back, n) == 0);
    /* a 2-D copy: every other 1000-byte row */
    ok(ig_cuda_copy_2d_async(back, 1000, d, 2000, 1000, 100, g_s, &err), &err);
    sync_ok();
    int same = 1;
    for (int row = 0; row < 100; row++)
        same &= memcmp(back + row * 1000, h + row * 2000, 1000) == 0;
    CU_ASSERT(same);
    ig_cuda_event_destroy(e0);
    ig_cuda_event_destroy(e1);
    ig_cuda_event_destroy(done);
    ig_cuda_stream_destroy(copy);
    ig_cuda_free(d);
    ig_cuda_host_free(h);
    ig_cuda_host_free(back);
    /* an impossible allocation fails with a message naming cudaMalloc, not a crash */
    void *huge = NULL;
    ig_status st = ig_cuda_malloc(&huge, (size_t)1 << 50, &err);
    CU_ASSERT(st == IG_ERR_NOMEM || st == IG_ERR_DEVICE);
    CU_ASSERT(huge == NULL);
    CU_ASSERT(strstr(err.msg, "cudaMalloc") != NULL);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("cuda", NULL, suite_clean);
    CU_add_test(s, "rmsnorm", test_rmsnorm);
    CU_add_test(s, "layernorm", test_layernorm);
    CU_add_test(s, "rope", test_rope);
    CU_add_test(s, "elementwise", test_elementwise);
    CU_add_test(s, "softmax", test_softmax);
    CU_add_test(s, "attention_rows", test_attention_rows);
    CU_add_test(s, "attention_prefill", test_attention_prefill);
    CU_add_test(s, "partial_scores_select", test_partial_scores_select);
    CU_add_test(s, "topk", test_topk);
    CU_add_test(s, "gather_rows", test_gather_rows);
    CU_add_test(s, "kvquant", test_kvquant);
    CU_add_test(s, "argmax", test_argmax);
    CU_add_test(s, "sample", test_sample);
    CU_add_test(s, "gemm", test_gemm);
    CU_add_test(s, "qlinear", test_qlinear);
    CU_add_test(s, "qdequant", test_qdequant);
    CU_add_test(s, "qlinear_bad_args", test_qlinear_bad_args);
    CU_add_test(s, "streams_events_copies", test_streams_events_copies);
}
