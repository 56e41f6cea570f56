/* Backend conformance (kernels/backend_iface.h): every table runs the same ops on the same inputs
 * through ig_be_* and is compared with the CPU table: "cpu-ref" (the scalar references, a third
 * backend written independently of the optimized kernels) everywhere, and "cuda" where it can be
 * created: on a GPU, and on every machine as test_backend_emu (the CUDA emulator). Integer results
 * (threshold counts, top-k indices with their tie and NaN rules) must be equal; float results
 * within a relative bound that states the rounding allowed (f32: 2e-5 of the row's scale; x
 * rounded to f16 by CUDA's narrow GEMM: 1e-2). Plus the table checks (a NULL slot, a wrong
 * version) and the argument checks shared by every table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dtype.h"
#include "kernels/backend_iface.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kvquant.h"
#include "tests/test_util.h"

static ig_be *g_cpu;
static ig_be *g_other[2];
static int g_n_other;
static uint64_t g_seed = 12345;

static float frand(void) { /* uniform in [-1, 1) */
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_seed >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static void fill(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = frand();
}

static int suite_init(void) {
    ig_error err;
    if (ig_be_cpu_create(&g_cpu, &err) != IG_OK) return 1;
    if (ig_be_ref_create(&g_other[g_n_other], &err) != IG_OK) return 1;
    g_n_other++;
    ig_status rc = ig_be_cuda_create(0, &g_other[g_n_other], &err);
    if (rc == IG_OK)
        g_n_other++;
    else
        ig_test_skip(err.msg); /* reported as a note: the CPU tables still run */
    return 0;
}

static int suite_clean(void) {
    ig_be_free(g_cpu);
    for (int i = 0; i < g_n_other; i++) ig_be_free(g_other[i]);
    return 0;
}

/* A backend copy of n host bytes (NULL host: uninitialised). */
static void *up(ig_be *be, const void *host, size_t n) {
    ig_error err;
    void *p = ig_be_alloc(be, n, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (host) CU_ASSERT_EQUAL_FATAL(ig_be_upload(be, p, host, n, &err), IG_OK);
    return p;
}

static void down(ig_be *be, void *host, const void *p, size_t n) {
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_be_download(be, host, p, n, &err), IG_OK);
}

/* max |a - b| / max(1, max |a|) */
static double rel_diff(const float *a, const float *b, size_t n) {
    double worst = 0, scale = 1;
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i]) > scale) scale = fabs(a[i]);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) worst = d; /* NaN counts as the worst */
    }
    return worst / scale;
}

static void report(const char *op, const ig_be *be, double d, double bound) {
    printf("\n    %-15s %-8s max rel diff vs cpu %.3g (bound %.3g)", op, be->caps.name, d, bound);
    CU_ASSERT(d <= bound);
}

/* ---- memory ---- */

/* upload2d writes a column range of every row of a table, and nothing else: the bytes around it
 * keep what the plain upload put there. */
static void test_upload2d(void) {
    enum { ROWS = 7, PITCH = 40, SPITCH = 52, W = 9, OFF = 13 };
    unsigned char base[ROWS * PITCH], src[ROWS * SPITCH], want[ROWS * PITCH], got[ROWS * PITCH];
    for (int i = 0; i < ROWS * PITCH; i++) base[i] = (unsigned char)(i * 7 + 1);
    for (int i = 0; i < ROWS * SPITCH; i++) src[i] = (unsigned char)(200 - i);
    memcpy(want, base, sizeof want);
    for (int r = 0; r < ROWS; r++) memcpy(want + r * PITCH + OFF, src + r * SPITCH + 3, W);
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        unsigned char *d = up(be, base, sizeof base);
        CU_ASSERT_EQUAL(ig_be_upload2d(be, d + OFF, PITCH, src + 3, SPITCH, W, ROWS, &err), IG_OK);
        memset(got, 0, sizeof got);
        down(be, got, d, sizeof got);
        CU_ASSERT(memcmp(got, want, sizeof got) == 0);
        /* nothing to copy: nothing happens; a width wider than a pitch is refused */
        CU_ASSERT_EQUAL(ig_be_upload2d(be, d, PITCH, src, SPITCH, 0, ROWS, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_upload2d(be, d, PITCH, src, SPITCH, PITCH + 1, 1, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "upload2d"));
        ig_be_release(be, d);
    }
}

/* copy2d moves a strided region between two buffers of the backend (the layer's store of new
 * key rows into its cache), leaving the bytes around it alone. */
static void test_copy2d(void) {
    enum { ROWS = 6, PITCH = 44, SPITCH = 24, W = 11, OFF = 5 };
    unsigned char base[ROWS * PITCH], src[ROWS * SPITCH], want[ROWS * PITCH], got[ROWS * PITCH];
    for (int i = 0; i < ROWS * PITCH; i++) base[i] = (unsigned char)(i * 5 + 3);
    for (int i = 0; i < ROWS * SPITCH; i++) src[i] = (unsigned char)(250 - 3 * i);
    memcpy(want, base, sizeof want);
    for (int r = 0; r < ROWS; r++) memcpy(want + r * PITCH + OFF, src + r * SPITCH + 2, W);
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        unsigned char *d = up(be, base, sizeof base), *ds = up(be, src, sizeof src);
        CU_ASSERT_EQUAL(ig_be_copy2d(be, d + OFF, PITCH, ds + 2, SPITCH, W, ROWS, &err), IG_OK);
        memset(got, 0, sizeof got);
        down(be, got, d, sizeof got);
        CU_ASSERT(memcmp(got, want, sizeof got) == 0);
        CU_ASSERT_EQUAL(ig_be_copy2d(be, d, PITCH, ds, SPITCH, 0, ROWS, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_copy2d(be, d, PITCH, ds, SPITCH, SPITCH + 1, 1, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "copy2d"));
        ig_be_release(be, d);
        ig_be_release(be, ds);
    }
}

/* gather_rows moves the selected rows of each table (from a mapped source table, through an index
 * list) into packed rows, and nothing else; negative indices are refused on the host tables. */
static void test_gather_rows(void) {
    enum { NSRC = 5, ROWS = 10, SRS = 16, RB = 12, T = 4, IS = 6 };
    unsigned char src[NSRC * ROWS * SRS], want[T * IS * RB], got[T * IS * RB];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(i * 13 + 7);
    const int32_t st[T] = {3, 0, 4, 1}, n_sel[T] = {2, 0, 5, 3};
    const int32_t idx[T * IS] = {9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 4, 8, 0, 2, 6, 0, 7, 7, 3, 0, 0, 0};
    for (size_t i = 0; i < sizeof want; i++) want[i] = (unsigned char)(0xA5 ^ i);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < n_sel[t]; j++)
            memcpy(want + ((size_t)t * IS + (size_t)j) * RB,
                   src + ((size_t)st[t] * ROWS + (size_t)idx[t * IS + j]) * SRS, RB);
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        unsigned char init[sizeof got];
        for (size_t i = 0; i < sizeof init; i++) init[i] = (unsigned char)(0xA5 ^ i);
        void *ds = up(be, src, sizeof src), *dd = up(be, init, sizeof init);
        int32_t *dst_t = up(be, st, sizeof st), *dn = up(be, n_sel, sizeof n_sel);
        int32_t *di = up(be, idx, sizeof idx);
        CU_ASSERT_EQUAL(
            ig_be_gather_rows(be, dd, IS * RB, ds, ROWS * SRS, SRS, dst_t, RB, di, IS, dn, T, &err),
            IG_OK);
        down(be, got, dd, sizeof got);
        CU_ASSERT(memcmp(got, want, sizeof got) == 0);
        if (!be->caps.device_memory) { /* the host tables read the indices first */
            int32_t bad[T * IS];
            memcpy(bad, idx, sizeof bad);
            bad[IS * 2 + 3] = -1;
            CU_ASSERT_EQUAL(ig_be_gather_rows(be, dd, IS * RB, ds, ROWS * SRS, SRS, dst_t, RB, bad,
                                              IS, dn, T, &err),
                            IG_ERR_INVALID_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "table 2 row 3"));
        }
        CU_ASSERT_EQUAL(
            ig_be_gather_rows(be, dd, IS * RB, ds, ROWS * SRS, SRS, dst_t, 0, di, IS, dn, T, &err),
            IG_ERR_INVALID_ARG);
        CU_ASSERT_EQUAL(ig_be_gather_rows(be, dd, IS * RB - 1, ds, ROWS * SRS, SRS, dst_t, RB, di,
                                          IS, dn, T, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "dst_table_stride"));
        ig_be_release(be, ds);
        ig_be_release(be, dd);
        ig_be_release(be, dst_t);
        ig_be_release(be, dn);
        ig_be_release(be, di);
    }
}

/* ---- layer ops ---- */

/* Causal attention over a cache of stride CTX tokens, grouped-query heads: a prefill chunk after
 * a few cached positions and one decode step, on every table against the cpu table (the reference
 * accumulates in double, CUDA in f32 with another order). */
static void test_attention(void) {
    enum { NH = 4, NKV = 2, HD = 32, CTX = 48, NQ = 12 };
    const int64_t cases[2][2] = {{NQ, 5}, {1, 40}}; /* n_q, p0 */
    static float kc[NKV * CTX * HD], vc[NKV * CTX * HD], q[NQ * NH * HD];
    fill(kc, NKV * CTX * HD);
    fill(vc, NKV * CTX * HD);
    fill(q, NQ * NH * HD);
    float scale = 1.0f / sqrtf((float)HD);
    static float want[2][NQ * NH * HD], got[NQ * NH * HD];
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        float *dk = up(be, kc, sizeof kc), *dv = up(be, vc, sizeof vc), *dq = up(be, q, sizeof q);
        float *dout = up(be, NULL, sizeof got);
        size_t wsf = ig_be_attention_ws(be, NQ, CTX, NH, HD);
        float *ws = wsf ? up(be, NULL, wsf * sizeof(float)) : NULL;
        for (int ci = 0; ci < 2; ci++) {
            int64_t n_q = cases[ci][0], p0 = cases[ci][1];
            size_t n = (size_t)n_q * NH * HD;
            CU_ASSERT_EQUAL_FATAL(ig_be_attention(be, dq, n_q, p0, dk, dv, CTX, NH, NKV, HD, scale,
                                                  ws, wsf, dout, &err),
                                  IG_OK);
            down(be, bi == 0 ? want[ci] : got, dout, n * sizeof(float));
            if (bi > 0)
                report(ci == 0 ? "attention-pre" : "attention-dec", be, rel_diff(want[ci], got, n),
                       1e-5);
        }
        /* a cache shorter than the positions is refused on every table */
        CU_ASSERT_EQUAL(ig_be_attention(be, dq, NQ, CTX - NQ + 1, dk, dv, CTX, NH, NKV, HD, scale,
                                        ws, wsf, dout, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "stride_tokens"));
        if (wsf) { /* the cpu table: a workspace too small for one thread is refused */
            CU_ASSERT_EQUAL(
                ig_be_attention(be, dq, NQ, 5, dk, dv, CTX, NH, NKV, HD, scale, ws, 1, dout, &err),
                IG_ERR_INVALID_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "workspace"));
        }
        ig_be_release(be, dk);
        ig_be_release(be, dv);
        ig_be_release(be, dq);
        ig_be_release(be, dout);
        ig_be_release(be, ws);
    }
}

/* Causal attention with column sums (H2O's prompt scores): the same two cases, the sums added onto
 * what colsum held; on every table out is bitwise what ig_be_attention gives on that table, the
 * sums agree with the cpu table's, and each query head's sums add up to the number of queries
 * (each query's probabilities sum to 1). */
static void test_attention_colsum(void) {
    enum { NH = 4, NKV = 2, HD = 32, CTX = 48, NQ = 12, CS = CTX + 3 };
    const int64_t cases[2][2] = {{NQ, 5}, {1, 40}}; /* n_q, p0 */
    static float kc[NKV * CTX * HD], vc[NKV * CTX * HD], q[NQ * NH * HD], cs0[NH * CS];
    fill(kc, NKV * CTX * HD);
    fill(vc, NKV * CTX * HD);
    fill(q, NQ * NH * HD);
    for (int i = 0; i < NH * CS; i++) cs0[i] = 0.25f * (float)(i % 7); /* sums are added */
    float scale = 1.0f / sqrtf((float)HD);
    static float want_cs[2][NH * CS], got_cs[NH * CS], out_a[NQ * NH * HD], out_c[NQ * NH * HD];
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        float *dk = up(be, kc, sizeof kc), *dv = up(be, vc, sizeof vc), *dq = up(be, q, sizeof q);
        float *dout = up(be, NULL, sizeof out_a), *dcs = up(be, cs0, sizeof cs0);
        size_t wsa = ig_be_attention_ws(be, NQ, CTX, NH, HD);
        size_t wsf = ig_be_attention_colsum_ws(be, NQ, CTX, NH, HD);
        float *wa = wsa ? up(be, NULL, wsa * sizeof(float)) : NULL;
        float *ws = wsf ? up(be, NULL, wsf * sizeof(float)) : NULL;
        for (int ci = 0; ci < 2; ci++) {
            int64_t n_q = cases[ci][0], p0 = cases[ci][1];
            size_t n = (size_t)n_q * NH * HD;
            CU_ASSERT_EQUAL_FATAL(ig_be_upload(be, dcs, cs0, sizeof cs0, &err), IG_OK);
            CU_ASSERT_EQUAL_FATAL(ig_be_attention_colsum(be, dq, n_q, p0, dk, dv, CTX, NH, NKV, HD,
                                                         scale, ws, wsf, dcs, CS, dout, &err),
                                  IG_OK);
            down(be, out_c, dout, n * sizeof(float));
            down(be, bi == 0 ? want_cs[ci] : got_cs, dcs, sizeof got_cs);
            CU_ASSERT_EQUAL_FATAL(ig_be_attention(be, dq, n_q, p0, dk, dv, CTX, NH, NKV, HD, scale,
                                                  wa, wsa, dout, &err),
                                  IG_OK);
            down(be, out_a, dout, n * sizeof(float));
            CU_ASSERT_EQUAL(memcmp(out_a, out_c, n * sizeof(float)), 0);
            const float *cs = bi == 0 ? want_cs[ci] : got_cs;
            for (int h = 0; h < NH; h++) {
                double tot = 0;
                for (int j = 0; j < CS; j++) {
                    double add = cs[h * CS + j] - cs0[h * CS + j];
                    if (j >= p0 + n_q) CU_ASSERT_EQUAL(add, 0.0); /* keys no query sees */
                    tot += add;
                }
                CU_ASSERT(fabs(tot - (double)n_q) <= 1e-4 * (double)n_q);
            }
            if (bi > 0)
                report(ci == 0 ? "colsum-pre" : "colsum-dec", be,
                       rel_diff(want_cs[ci], got_cs, NH * CS), 1e-5);
        }
        /* a colsum row shorter than the positions is refused on every table */
        CU_ASSERT_EQUAL(ig_be_attention_colsum(be, dq, NQ, 5, dk, dv, CTX, NH, NKV, HD, scale, ws,
                                               wsf, dcs, NQ + 4, dout, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "colsum_stride"));
        if (wsf) { /* a workspace too small is refused (cpu: for one thread; cuda: the maxima) */
            CU_ASSERT_EQUAL(ig_be_attention_colsum(be, dq, NQ, 5, dk, dv, CTX, NH, NKV, HD, scale,
                                                   ws, 1, dcs, CS, dout, &err),
                            IG_ERR_INVALID_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "workspace"));
        }
        void *bufs[] = {dk, dv, dq, dout, dcs, wa, ws};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ig_be_release(be, bufs[i]);
    }
}

static void test_norms_rope_elementwise(void) {
    enum { R = 5, D = 96, NH = 3, HD = 32, ROT = 24, MAXP = 40 };
    float x[R * D], w[D], b[D], g[R * D], u[R * D], cosb[MAXP * ROT / 2], sinb[MAXP * ROT / 2];
    int32_t pos[R] = {0, 7, 13, 39, 2};
    fill(x, R * D);
    fill(w, D);
    fill(b, D);
    fill(g, R * D);
    fill(u, R * D);
    ig_cpu_rope_table(10000.0f, ROT, MAXP, cosb, sinb);
    float want[7][R * D], got[R * D];
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        float *dx = up(be, x, sizeof x), *dw = up(be, w, sizeof w), *db = up(be, b, sizeof b);
        float *dg = up(be, g, sizeof g), *du = up(be, u, sizeof u), *dy = up(be, NULL, sizeof x);
        int32_t *dpos = up(be, pos, sizeof pos);
        float *dcos = up(be, cosb, sizeof cosb), *dsin = up(be, sinb, sizeof sinb);
        const char *names[7] = {"rmsnorm",  "layernorm", "layernorm-nob", "rope",
                                "silu_mul", "add",       "relu"};
        for (int op = 0; op < 7; op++) {
            ig_status rc = IG_OK;
            if (op == 0) rc = ig_be_rmsnorm(be, dx, dw, R, D, 1e-5f, dy, &err);
            if (op == 1) rc = ig_be_layernorm(be, dx, dw, db, R, D, 1e-5f, dy, &err);
            if (op == 2) rc = ig_be_layernorm(be, dx, dw, NULL, R, D, 1e-5f, dy, &err);
            if (op == 3) {
                ig_be_upload(be, dy, x, sizeof x, &err); /* in place on [R][NH][HD] */
                rc = ig_be_rope(be, dy, R, NH, HD, ROT, dpos, dcos, dsin, &err);
            }
            if (op == 4) rc = ig_be_silu_mul(be, dg, du, R * D, dy, &err);
            if (op == 5) {
                ig_be_upload(be, dy, g, sizeof g, &err);
                rc = ig_be_add(be, dy, dx, R * D, &err);
            }
            if (op == 6) {
                ig_be_upload(be, dy, x, sizeof x, &err);
                rc = ig_be_relu(be, dy, R * D, &err);
            }
            CU_ASSERT_EQUAL(rc, IG_OK);
            int n = op == 3 ? R * NH * HD : R * D;
            down(be, bi == 0 ? want[op] : got, dy, (size_t)n * sizeof(float));
            if (bi > 0) report(names[op], be, rel_diff(want[op], got, (size_t)n), 2e-5);
            if (op == 6) { /* exact, and against its definition */
                int ok = 1;
                for (int i = 0; i < n; i++)
                    ok &= (bi == 0 ? want[op][i] : got[i]) == (x[i] > 0 ? x[i] : 0.0f);
                CU_ASSERT(ok);
            }
        }
        /* softmax over rows, one with a large spread */
        float sm[R * D];
        memcpy(sm, x, sizeof sm);
        for (int i = 0; i < D; i++) sm[D + i] *= 60.0f;
        ig_be_upload(be, dy, sm, sizeof sm, &err);
        CU_ASSERT_EQUAL(ig_be_softmax(be, dy, R, D, &err), IG_OK);
        static float want_sm[R * D];
        down(be, bi == 0 ? want_sm : got, dy, sizeof sm);
        if (bi > 0) report("softmax", be, rel_diff(want_sm, got, R * D), 2e-5);
        void *ptrs[] = {dx, dw, db, dg, du, dy, dpos, dcos, dsin};
        for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) ig_be_release(be, ptrs[i]);
    }
    printf("\n    ");
}

static void test_linear(void) {
    enum { K = 128, N = 48 };
    static const ig_dtype types[] = {IG_DTYPE_F32, IG_DTYPE_F16, IG_DTYPE_Q8_0, IG_DTYPE_Q4_0};
    static const int Ms[] = {1, 5, 20};
    float wf[N * K], bias[N], x[20 * K];
    fill(wf, N * K);
    fill(bias, N);
    fill(x, 20 * K);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        ig_dtype wt = types[ti];
        size_t wbytes = ig_dtype_row_bytes(wt, K) * N;
        unsigned char *w = malloc(wbytes);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        ig_error err;
        if (ig_dtype_is_quant(wt))
            ig_quantize_rows(wt, wf, N, K, w);
        else
            ig_convert(wt, w, IG_DTYPE_F32, wf, (size_t)N * K);
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            int M = Ms[mi];
            float want[20 * N], got[20 * N];
            ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
            for (int bi = 0; bi < 3 && all[bi]; bi++) {
                ig_be *be = all[bi];
                float *dx = up(be, x, (size_t)M * K * sizeof(float));
                void *dw = up(be, w, wbytes);
                float *db = up(be, bias, sizeof bias);
                float *dy = up(be, NULL, (size_t)M * N * sizeof(float));
                CU_ASSERT_EQUAL(ig_be_linear(be, dx, M, K, dw, wt, N, db, dy, &err), IG_OK);
                down(be, bi == 0 ? want : got, dy, (size_t)M * N * sizeof(float));
                if (bi > 0) {
                    char op[48];
                    snprintf(op, sizeof op, "linear %s M=%d", ig_dtype_name(wt), M);
                    /* CUDA's narrow-weight GEMM rounds x to the weights' type (f32 accumulation) */
                    double bound = be->caps.device_memory && wt == IG_DTYPE_F16 ? 1e-2 : 2e-5;
                    report(op, be, rel_diff(want, got, (size_t)M * N), bound);
                }
                ig_be_release(be, dx);
                ig_be_release(be, dw);
                ig_be_release(be, db);
                ig_be_release(be, dy);
            }
        }
        free(w);
    }
    printf("\n    ");
}

/* Decode attention over selected rows: three sequences, GQA, tables of different selections
 * (one empty but for the new token), f32 and f16 rows, with probabilities, on every table against
 * the cpu table. */
static void test_attention_rows(void) {
    enum { B = 3, H = 4, G = 2, HD = 32, CAP = 20, RS = HD + 8, PS = 24, T = B * G };
    static float kf[T * CAP * RS], vf[T * CAP * RS], q[B * H * HD], kx[B * G * HD], vx[B * G * HD];
    static uint16_t kh[T * CAP * RS], vh[T * CAP * RS];
    fill(kf, T * CAP * RS);
    fill(vf, T * CAP * RS);
    fill(q, B * H * HD);
    fill(kx, B * G * HD);
    fill(vx, B * G * HD);
    for (int i = 0; i < T * CAP * RS; i++) {
        kh[i] = ig_f32_to_f16(kf[i]);
        vh[i] = ig_f32_to_f16(vf[i]);
    }
    const int32_t n_sel[T] = {5, 0, 20, 7, 1, 12};
    int32_t idx[T * CAP];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < CAP; j++) idx[t * CAP + j] = (j * 7 + t * 3) % CAP;
    static float want[2][B * H * HD], wantp[2][B * H * PS], got[B * H * HD], gotp[B * H * PS];
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        for (int f16 = 0; f16 < 2; f16++) {
            size_t kb = f16 ? sizeof kh : sizeof kf;
            void *dk = up(be, f16 ? (void *)kh : (void *)kf, kb);
            void *dv = up(be, f16 ? (void *)vh : (void *)vf, kb);
            int32_t *dn = up(be, n_sel, sizeof n_sel), *di = up(be, idx, sizeof idx);
            float *dq = up(be, q, sizeof q), *dkx = up(be, kx, sizeof kx);
            float *dvx = up(be, vx, sizeof vx), *dout = up(be, NULL, sizeof got);
            float *dp = up(be, NULL, sizeof gotp);
            ig_be_attn_rows a = {B,
                                 H,
                                 G,
                                 HD,
                                 1.0f / sqrtf((float)HD),
                                 f16 ? IG_DTYPE_F16 : IG_DTYPE_F32,
                                 dk,
                                 dv,
                                 CAP * RS,
                                 RS,
                                 di,
                                 CAP,
                                 dn,
                                 dkx,
                                 dvx,
                                 1,
                                 dp,
                                 PS};
            CU_ASSERT_EQUAL_FATAL(ig_be_attention_rows(be, &a, dq, dout, &err), IG_OK);
            down(be, bi == 0 ? want[f16] : got, dout, sizeof got);
            down(be, bi == 0 ? wantp[f16] : gotp, dp, sizeof gotp);
            const float *pr = bi == 0 ? wantp[f16] : gotp;
            for (int b = 0; b < B; b++) /* each probability row sums to 1, its tail is 0 */
                for (int h = 0; h < H; h++) {
                    int rows = n_sel[b * G + h / (H / G)] + 1;
                    double sum = 0;
                    for (int j = 0; j < PS; j++) {
                        float p = pr[((size_t)b * H + (size_t)h) * PS + (size_t)j];
                        if (j < rows)
                            sum += p;
                        else
                            CU_ASSERT_EQUAL(p, 0.0f);
                    }
                    CU_ASSERT(fabs(sum - 1.0) < 1e-5);
                }
            if (bi > 0) {
                report(f16 ? "attn_rows f16" : "attn_rows f32", be,
                       rel_diff(want[f16], got, B * H * HD), 1e-5);
                report(f16 ? "attn_rows p16" : "attn_rows p32", be,
                       rel_diff(wantp[f16], gotp, B * H * PS), 1e-5);
            }
            if (!be->caps.device_memory) { /* host tables read n_sel: refusals */
                a.probs_stride = 20;       /* table 2 has 21 rows */
                CU_ASSERT_EQUAL(ig_be_attention_rows(be, &a, dq, dout, &err), IG_ERR_INVALID_ARG);
                CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "probs_stride"));
                a.probs_stride = PS;
                a.n_extra = 0; /* table 1 has no row then */
                CU_ASSERT_EQUAL(ig_be_attention_rows(be, &a, dq, dout, &err), IG_ERR_INVALID_ARG);
                CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "at least one row"));
            }
            a.kv_dtype = IG_DTYPE_BF16;
            CU_ASSERT_EQUAL(ig_be_attention_rows(be, &a, dq, dout, &err), IG_ERR_INVALID_ARG);
            void *bufs[] = {dk, dv, dn, di, dq, dkx, dvx, dout, dp};
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ig_be_release(be, bufs[i]);
        }
    }
}

/* ---- selection ops ---- */

/* The KV codec's ops give the same bytes and floats on every table: f32 -> f16 / bf16 -> f32
 * conversions, and group-quantized rows at 8, 4 and 2 bits (quantize, then dequantize). */
static void test_codec(void) {
    enum { ROWS = 7, HD = 64, N = ROWS * HD };
    static float x[N], back[3][N], gotf[N];
    static uint16_t half[2][N], goth[N];
    static uint8_t code[3][ROWS * 2 * HD], gotc[ROWS * 2 * HD];
    fill(x, N);
    x[3] = 65504.0f * 2; /* beyond f16's range: infinity, the same on every table */
    x[5] = 1e-8f;        /* an f16 subnormal */
    const int bits[3] = {8, 4, 2};
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        float *dx = up(be, x, sizeof x), *df = up(be, NULL, sizeof gotf);
        uint16_t *dh = up(be, NULL, sizeof goth);
        uint8_t *dc = up(be, NULL, sizeof gotc);
        for (int t = 0; t < 2; t++) {
            ig_dtype dt = t ? IG_DTYPE_BF16 : IG_DTYPE_F16;
            CU_ASSERT_EQUAL_FATAL(ig_be_convert(be, dx, IG_DTYPE_F32, dh, dt, N, &err), IG_OK);
            down(be, bi ? goth : half[t], dh, sizeof goth);
            if (bi) CU_ASSERT(memcmp(goth, half[t], sizeof goth) == 0);
            CU_ASSERT_EQUAL_FATAL(ig_be_convert(be, dh, dt, df, IG_DTYPE_F32, N, &err), IG_OK);
            down(be, gotf, df, sizeof gotf);
            for (int i = 0; i < N; i++) { /* widening is exact: the host's value, bit for bit */
                float w = t ? ig_bf16_to_f32(half[t][i]) : ig_f16_to_f32(half[t][i]);
                CU_ASSERT(memcmp(&gotf[i], &w, sizeof w) == 0);
            }
        }
        for (int b = 0; b < 3; b++) {
            size_t rb = ig_kvq_row_bytes(HD, bits[b], 32);
            CU_ASSERT_FATAL(rb > 0 && rb * ROWS <= sizeof gotc);
            CU_ASSERT_EQUAL_FATAL(ig_be_kvq_quantize(be, dx, ROWS, HD, bits[b], 32, dc, &err),
                                  IG_OK);
            down(be, bi ? gotc : code[b], dc, rb * ROWS);
            if (bi) CU_ASSERT(memcmp(gotc, code[b], rb * ROWS) == 0);
            CU_ASSERT_EQUAL_FATAL(ig_be_kvq_dequantize(be, dc, ROWS, HD, bits[b], 32, df, &err),
                                  IG_OK);
            down(be, bi ? gotf : back[b], df, sizeof gotf);
            if (bi) CU_ASSERT(memcmp(gotf, back[b], sizeof gotf) == 0);
        }
        printf("\n    codec           %-8s f16, bf16, kvq 8/4/2 bits %s", be->caps.name,
               bi ? "bit-identical to cpu" : "(the reference side)");
        CU_ASSERT_EQUAL(ig_be_kvq_quantize(be, dx, ROWS, HD, 3, 32, dc, &err), IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bits=3"));
        CU_ASSERT_EQUAL(ig_be_convert(be, dx, IG_DTYPE_Q4_0, dh, IG_DTYPE_F16, N, &err),
                        IG_ERR_INVALID_ARG);
        ig_be_release(be, dx);
        ig_be_release(be, df);
        ig_be_release(be, dh);
        ig_be_release(be, dc);
    }
}

/* Queues: an upload queued on a fork, an event recorded there and waited for on the table, then
 * an op of the table reading what the fork wrote; and host memory registered for the device, read
 * in place by gather_rows. On CUDA (the emulator checks it) the order comes from the event alone.
 */
static void test_queues(void) {
    enum { N = 256, ROWS = 8, RB = 32 };
    static float host[N], got[N];
    fill(host, N);
    /* a page of its own: registration page-locks whole pages */
    static _Alignas(4096) unsigned char home_page[4096];
    static unsigned char gathered[3 * RB];
    unsigned char *home = home_page;
    for (int i = 0; i < ROWS * RB; i++) home[i] = (unsigned char)(i * 29 + 1);
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi], *fork = NULL;
        ig_error err;
        CU_ASSERT_EQUAL_FATAL(ig_be_fork(be, &fork, &err), IG_OK);
        CU_ASSERT_STRING_EQUAL(fork->caps.name, be->caps.name);
        float *a = up(be, NULL, sizeof host), *b = up(be, NULL, sizeof host);
        void *ev = NULL;
        CU_ASSERT_EQUAL_FATAL(ig_be_event_new(fork, &ev, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_upload_async(fork, a, host, sizeof host, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_event_record(fork, ev, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_event_wait(be, ev, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_copy2d(be, b, sizeof host, a, sizeof host, sizeof host, 1, &err),
                        IG_OK);
        down(be, got, b, sizeof got);
        CU_ASSERT(memcmp(got, host, sizeof got) == 0);
        /* host memory registered: rows 6, 1, 6 of it gathered in place */
        void *dev = NULL;
        CU_ASSERT_EQUAL_FATAL(ig_be_host_register(be, home_page, sizeof home_page, &dev, &err),
                              IG_OK);
        CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
        const int32_t idx[3] = {6, 1, 6}, n_sel[1] = {3};
        int32_t *di = up(be, idx, sizeof idx), *dn = up(be, n_sel, sizeof n_sel);
        unsigned char *dg = up(be, NULL, sizeof gathered);
        CU_ASSERT_EQUAL(ig_be_gather_rows(be, dg, 3 * RB, dev, 0, RB, NULL, RB, di, 3, dn, 1, &err),
                        IG_OK);
        down(be, gathered, dg, sizeof gathered);
        for (int j = 0; j < 3; j++)
            CU_ASSERT(memcmp(gathered + j * RB, home + idx[j] * RB, RB) == 0);
        CU_ASSERT_EQUAL(ig_be_sync(be, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_host_unregister(be, home_page, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_event_record(fork, NULL, &err), IG_ERR_INVALID_ARG);
        ig_be_event_free(fork, ev);
        ig_be_free(fork); /* before the table it came from */
        void *bufs[] = {a, b, di, dn, dg};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ig_be_release(be, bufs[i]);
    }
}

static void test_partial_scores(void) {
    enum { T = 3, KC = 12, LD = 70, NE = 61, NQ = 5, LDQ = 16, LDO = 64 };
    float keys[T * KC * LD], q[T * NQ * LDQ];
    fill(keys, T * KC * LD);
    fill(q, T * NQ * LDQ);
    uint16_t keys16[T * KC * LD];
    ig_convert(IG_DTYPE_F16, keys16, IG_DTYPE_F32, keys, (size_t)T * KC * LD);
    for (int kt = 0; kt < 2; kt++) {
        ig_dtype dt = kt ? IG_DTYPE_F16 : IG_DTYPE_F32;
        const void *kh = kt ? (const void *)keys16 : (const void *)keys;
        size_t kbytes = kt ? sizeof keys16 : sizeof keys;
        float want[T * NQ * LDO], wcm[T * LDO], wrm[T * NQ];
        float got[T * NQ * LDO], gcm[T * LDO], grm[T * NQ];
        ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
        for (int bi = 0; bi < 3 && all[bi]; bi++) {
            ig_be *be = all[bi];
            ig_error err;
            void *dk = up(be, kh, kbytes);
            float *dq = up(be, q, sizeof q), *dout = up(be, NULL, sizeof want);
            float *dcm = up(be, NULL, sizeof wcm), *drm = up(be, NULL, sizeof wrm);
            CU_ASSERT_EQUAL(ig_be_partial_scores(be, dk, dt, LD, KC * LD, KC, NE, dq, LDQ, NQ * LDQ,
                                                 NQ, dout, LDO, NQ * LDO, dcm, LDO, drm, T, &err),
                            IG_OK);
            float *o = bi ? got : want, *cm = bi ? gcm : wcm, *rm = bi ? grm : wrm;
            down(be, o, dout, sizeof want);
            down(be, cm, dcm, sizeof wcm);
            down(be, rm, drm, sizeof wrm);
            if (bi > 0) {
                double d = 0;
                for (int t = 0; t < T; t++)
                    for (int h = 0; h < NQ; h++) {
                        size_t at = ((size_t)t * NQ + (size_t)h) * LDO;
                        double dh = rel_diff(want + at, got + at, NE);
                        if (dh > d) d = dh;
                    }
                for (int t = 0; t < T; t++) {
                    double dc = rel_diff(wcm + t * LDO, gcm + t * LDO, NE);
                    if (dc > d) d = dc;
                }
                double dr = rel_diff(wrm, grm, T * NQ);
                if (dr > d) d = dr;
                report(kt ? "partial f16" : "partial f32", be, d, 2e-5);
            }
            ig_be_release(be, dk);
            ig_be_release(be, dq);
            ig_be_release(be, dout);
            ig_be_release(be, dcm);
            ig_be_release(be, drm);
        }
    }
    printf("\n    ");
}

/* Tables placed and sized one by one (tab): each table equals the uniform op on that table alone
 * (bit for bit on the same backend, within rounding against cpu elsewhere); entries past a table's
 * length and the scores of an empty table are left alone, its row maxima -inf. */
static void test_partial_scores_tab(void) {
    enum { T = 4, KCM = 12, LD = 70, NM = 61, NQ = 3, LDQ = 16, LDO = 64, NK = 5 * KCM * LD };
    static const int64_t kc[T] = {12, 5, 0, 9}, nn[T] = {61, 17, 40, 0};
    static const int64_t off[T] = {2 * KCM * LD, 0, 4 * KCM * LD, KCM * LD + 3};
    int64_t tab[3 * T];
    for (int t = 0; t < T; t++) {
        tab[3 * t] = off[t];
        tab[3 * t + 1] = kc[t];
        tab[3 * t + 2] = nn[t];
    }
    static float keys[NK], q[T * NQ * LDQ];
    fill(keys, NK);
    fill(q, T * NQ * LDQ);
    static float cpu_out[T * NQ * LDO], cpu_cm[T * LDO], cpu_rm[T * NQ];
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        static float one_out[T * NQ * LDO], one_cm[T * LDO], one_rm[T * NQ];
        static float out[T * NQ * LDO], cm[T * LDO], rm[T * NQ], poison[T * NQ * LDO];
        for (int i = 0; i < T * NQ * LDO; i++) poison[i] = 1234.5f;
        float *dk = up(be, keys, sizeof keys), *dq = up(be, q, sizeof q);
        int64_t *dtab = up(be, tab, sizeof tab);
        float *dout = up(be, poison, sizeof out), *dcm = up(be, poison, sizeof cm);
        float *drm = up(be, NULL, sizeof rm);
        CU_ASSERT_EQUAL(ig_be_partial_scores_tab(be, dk, IG_DTYPE_F32, LD, dtab, KCM, NM, dq, LDQ,
                                                 NQ * LDQ, NQ, dout, LDO, NQ * LDO, dcm, LDO, drm,
                                                 T, &err),
                        IG_OK);
        down(be, out, dout, sizeof out);
        down(be, cm, dcm, sizeof cm);
        down(be, rm, drm, sizeof rm);
        /* the uniform op, one table at a time, on the same backend */
        ig_be_upload(be, dout, poison, sizeof out, &err);
        ig_be_upload(be, dcm, poison, sizeof cm, &err);
        for (int t = 0; t < T; t++)
            CU_ASSERT_EQUAL(ig_be_partial_scores(be, dk + off[t], IG_DTYPE_F32, LD, 0, (int)kc[t],
                                                 nn[t], dq + t * NQ * LDQ, LDQ, 0, NQ,
                                                 dout + t * NQ * LDO, LDO, 0, dcm + t * LDO, 0,
                                                 drm + t * NQ, 1, &err),
                            IG_OK);
        down(be, one_out, dout, sizeof out);
        down(be, one_cm, dcm, sizeof cm);
        down(be, one_rm, drm, sizeof rm);
        CU_ASSERT(memcmp(out, one_out, sizeof out) == 0);
        CU_ASSERT(memcmp(cm, one_cm, sizeof cm) == 0);
        CU_ASSERT(memcmp(rm, one_rm, sizeof rm) == 0);
        int untouched = 1;
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NQ; h++)
                for (int e = (int)nn[t]; e < LDO; e++)
                    untouched &= out[(t * NQ + h) * LDO + e] == 1234.5f;
            for (int e = (int)nn[t]; e < LDO; e++) untouched &= cm[t * LDO + e] == 1234.5f;
        }
        CU_ASSERT(untouched);
        for (int h = 0; h < NQ; h++) CU_ASSERT(isinf(rm[3 * NQ + h]) && rm[3 * NQ + h] < 0);
        for (int h = 0; h < NQ; h++) CU_ASSERT_EQUAL(out[(2 * NQ + h) * LDO], 0.0f); /* kc 0 */
        if (bi == 0) {
            memcpy(cpu_out, out, sizeof out);
            memcpy(cpu_cm, cm, sizeof cm);
            memcpy(cpu_rm, rm, sizeof rm);
        } else {
            double d = 0;
            for (int t = 0; t < T; t++)
                for (int h = 0; h < NQ; h++) {
                    size_t at = ((size_t)t * NQ + (size_t)h) * LDO;
                    double dh = rel_diff(cpu_out + at, out + at, (size_t)nn[t]);
                    if (dh > d) d = dh;
                }
            report("partial tab", be, d, 2e-5);
        }
        ig_be_release(be, dk);
        ig_be_release(be, dq);
        ig_be_release(be, dtab);
        ig_be_release(be, dout);
        ig_be_release(be, dcm);
        ig_be_release(be, drm);
    }
    printf("\n    ");
}

/* mask_scores against its definition, exactly on every table: masked entries -inf in every row
 * and col_max, row maxima over the rest (NaN never larger; -inf for an empty or fully masked
 * table), entries past a table's length untouched. */
static void test_mask_scores(void) {
    enum { T = 4, R = 3, LDX = 40, XS = R * LDX + 5, CMS = 44, KS = 41, NM = 37 };
    static const int64_t nn[T] = {37, 0, 20, 9};
    int64_t tab[3 * T];
    for (int t = 0; t < T; t++) {
        tab[3 * t] = 0;
        tab[3 * t + 1] = 0;
        tab[3 * t + 2] = nn[t];
    }
    static float x[T * XS], cm[T * CMS];
    static int32_t key[T * KS];
    fill(x, T * XS);
    fill(cm, T * CMS);
    for (int i = 0; i < T * KS; i++) key[i] = (i * 7) % 5 == 1 ? -1 : i;
    for (int e = 0; e < KS; e++) key[3 * KS + e] = -1; /* table 3: every entry freed */
    x[2 * LDX + 4] = NAN;                              /* table 0, row 2 */
    float wx[T * XS], wcm[T * CMS], wrm[T * R];
    memcpy(wx, x, sizeof x);
    memcpy(wcm, cm, sizeof cm);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < R; h++) {
            float m = -INFINITY;
            for (int e = 0; e < nn[t]; e++) {
                float *v = &wx[t * XS + h * LDX + e];
                if (key[t * KS + e] < 0) {
                    *v = -INFINITY;
                    wcm[t * CMS + e] = -INFINITY;
                } else if (*v > m) {
                    m = *v;
                }
            }
            wrm[t * R + h] = m;
        }
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        float *dx = up(be, x, sizeof x), *dcm = up(be, cm, sizeof cm);
        float *drm = up(be, NULL, sizeof wrm);
        int32_t *dkey = up(be, key, sizeof key);
        int64_t *dtab = up(be, tab, sizeof tab);
        CU_ASSERT_EQUAL(
            ig_be_mask_scores(be, dx, LDX, R, XS, dcm, CMS, drm, dkey, KS, dtab, NM, T, &err),
            IG_OK);
        float gx[T * XS], gcm[T * CMS], grm[T * R];
        down(be, gx, dx, sizeof gx);
        down(be, gcm, dcm, sizeof gcm);
        down(be, grm, drm, sizeof grm);
        CU_ASSERT(memcmp(gx, wx, sizeof gx) == 0); /* NaN stays NaN bit for bit */
        CU_ASSERT(memcmp(gcm, wcm, sizeof gcm) == 0);
        CU_ASSERT(memcmp(grm, wrm, sizeof grm) == 0);
        CU_ASSERT(isinf(grm[1 * R]) && isinf(grm[3 * R + 2]));
        CU_ASSERT_EQUAL(ig_be_mask_scores(be, dx, LDX, R, R * LDX - 1, dcm, CMS, drm, dkey, KS,
                                          dtab, NM, T, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "overlap"));
        ig_be_release(be, dx);
        ig_be_release(be, dcm);
        ig_be_release(be, drm);
        ig_be_release(be, dkey);
        ig_be_release(be, dtab);
    }
}

/* Quest's page scores: four (sequence, KV head) tables reading three page tables in another order
 * (one table twice), groups of 3 query heads, pages without keys, a table with no pages and one
 * whose page count exceeds ldo; max and sum over the group. The cpu table against the formula
 * written out here, the others against the cpu table; outputs past a table's pages untouched. */
static void test_page_bounds(void) {
    enum { T = 4, GRP = 3, HD = 20, PS = 7, LDO = 6, NSRC = 3 };
    static float q[T * GRP * HD], kmin[NSRC * PS * HD], kmax[NSRC * PS * HD];
    static int32_t rows[NSRC * PS];
    const int32_t src[T] = {2, 0, 2, 1}, npg[T] = {5, 6, 0, 9}; /* 9 > LDO: clamped */
    fill(q, sizeof q / sizeof q[0]);
    for (int i = 0; i < NSRC * PS * HD; i++) {
        float a = frand(), b = frand();
        kmin[i] = a < b ? a : b;
        kmax[i] = a < b ? b : a;
    }
    for (int i = 0; i < NSRC * PS; i++) rows[i] = i % 4 == 1 ? 0 : 1 + i % 5;
    static float want[2][T * LDO], got[T * LDO];
    const float sentinel = 12345.0f;
    for (int sum = 0; sum < 2; sum++) /* the formula, by hand */
        for (int t = 0; t < T; t++)
            for (int p = 0; p < LDO; p++) {
                float *w = &want[sum][t * LDO + p];
                *w = sentinel;
                if (p >= npg[t]) continue;
                int pi = src[t] * PS + p;
                if (rows[pi] == 0) {
                    *w = -INFINITY;
                    continue;
                }
                float best = sum ? 0.0f : -INFINITY;
                for (int h = 0; h < GRP; h++) {
                    float b = 0;
                    for (int d = 0; d < HD; d++) {
                        float x = q[(t * GRP + h) * HD + d] * kmin[pi * HD + d];
                        float y = q[(t * GRP + h) * HD + d] * kmax[pi * HD + d];
                        b += x > y ? x : y;
                    }
                    best = sum ? best + b : (b > best ? b : best);
                }
                *w = best;
            }
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    static float init[T * LDO];
    for (int i = 0; i < T * LDO; i++) init[i] = sentinel;
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        float *dq = up(be, q, sizeof q), *dmn = up(be, kmin, sizeof kmin);
        float *dmx = up(be, kmax, sizeof kmax), *dout = up(be, init, sizeof init);
        int32_t *drows = up(be, rows, sizeof rows), *dsrc = up(be, src, sizeof src);
        int32_t *dnp = up(be, npg, sizeof npg);
        for (int sum = 0; sum < 2; sum++) {
            CU_ASSERT_EQUAL_FATAL(ig_be_upload(be, dout, init, sizeof init, &err), IG_OK);
            CU_ASSERT_EQUAL_FATAL(ig_be_page_bounds(be, dq, GRP, HD, dmn, dmx, drows, PS, dsrc, dnp,
                                                    sum, dout, LDO, T, &err),
                                  IG_OK);
            down(be, got, dout, sizeof got);
            int same_inf = 1;
            for (int i = 0; i < T * LDO; i++)
                if ((isinf(want[sum][i]) || want[sum][i] == sentinel) && got[i] != want[sum][i])
                    same_inf = 0;
            CU_ASSERT(same_inf); /* -inf for pages without keys, nothing written past the pages */
            if (bi == 0) {
                CU_ASSERT_EQUAL(memcmp(want[sum], got, sizeof got), 0);
            } else {
                double worst = 0;
                for (int i = 0; i < T * LDO; i++)
                    if (isfinite(want[sum][i]) && want[sum][i] != sentinel) {
                        double dlt = fabs((double)got[i] - want[sum][i]) /
                                     (fabs((double)want[sum][i]) > 1 ? fabs(want[sum][i]) : 1);
                        if (!(dlt <= worst)) worst = dlt; /* a NaN counts as the worst */
                    }
                report(sum ? "page_bounds+" : "page_bounds", be, worst, 1e-5);
            }
        }
        void *bufs[] = {dq, dmn, dmx, dout, drows, dsrc, dnp};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ig_be_release(be, bufs[i]);
    }
    ig_error err;
    CU_ASSERT_EQUAL(
        ig_be_page_bounds(g_cpu, q, 0, HD, kmin, kmax, rows, PS, src, npg, 0, got, LDO, T, &err),
        IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "page_bounds"));
}

/* Embedding rows of f32, f16 and block-quantized (q4_1) tables: every table gives the rows as
 * ig_dequant_row_ref does, bit for bit; an id outside the table is refused on the host tables and
 * gives a row of NaN on the cuda table. */
static void test_embed(void) {
    enum { ROWS = 10, DIM = 64, N = 5 };
    static float f32[ROWS * DIM], want[N * DIM], got[N * DIM];
    static uint16_t f16[ROWS * DIM];
    static unsigned char q[ROWS * DIM * 2];
    fill(f32, ROWS * DIM);
    for (int i = 0; i < ROWS * DIM; i++) f16[i] = ig_f32_to_f16(f32[i]);
    size_t qrb = ig_dtype_row_bytes(IG_DTYPE_Q4_1, DIM);
    for (int r = 0; r < ROWS; r++)
        CU_ASSERT_EQUAL_FATAL(ig_quantize_row_ref(IG_DTYPE_Q4_1, f32 + r * DIM, q + r * qrb, DIM),
                              0);
    const int32_t ids[N] = {3, 0, 9, 3, 7}, bad[2] = {2, ROWS};
    const struct {
        ig_dtype t;
        const void *data;
        size_t bytes;
    } tabs[3] = {{IG_DTYPE_F32, f32, sizeof f32},
                 {IG_DTYPE_F16, f16, sizeof f16},
                 {IG_DTYPE_Q4_1, q, ROWS * qrb}};
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        int32_t *dids = up(be, ids, sizeof ids), *dbad = up(be, bad, sizeof bad);
        float *dout = up(be, NULL, sizeof got);
        for (int ti = 0; ti < 3; ti++) {
            size_t rb = tabs[ti].bytes / ROWS;
            for (int i = 0; i < N; i++)
                ig_dequant_row_ref(tabs[ti].t, (const char *)tabs[ti].data + (size_t)ids[i] * rb,
                                   want + i * DIM, DIM);
            void *dt = up(be, tabs[ti].data, tabs[ti].bytes);
            CU_ASSERT_EQUAL_FATAL(ig_be_embed(be, dt, tabs[ti].t, ROWS, DIM, dids, N, dout, &err),
                                  IG_OK);
            down(be, got, dout, sizeof got);
            CU_ASSERT_EQUAL(memcmp(want, got, sizeof got), 0);
            ig_status rc = ig_be_embed(be, dt, tabs[ti].t, ROWS, DIM, dbad, 2, dout, &err);
            if (!be->caps.device_memory) {
                CU_ASSERT_EQUAL(rc, IG_ERR_INVALID_ARG);
                CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "outside"));
            } else {
                CU_ASSERT_EQUAL(rc, IG_OK);
                down(be, got, dout, 2 * DIM * sizeof(float));
                CU_ASSERT(!isnan(got[0]) && isnan(got[DIM]) && isnan(got[2 * DIM - 1]));
            }
            ig_be_release(be, dt);
        }
        CU_ASSERT_EQUAL(ig_be_embed(be, dout, IG_DTYPE_Q4_1, ROWS, DIM + 1, dids, N, dout, &err),
                        IG_ERR_INVALID_ARG);
        ig_be_release(be, dids);
        ig_be_release(be, dbad);
        ig_be_release(be, dout);
    }
}

static void test_count_and_topk(void) {
    enum { ROWS = 6, LDX = 300, N = 257, LDI = 260 };
    static float x[ROWS * LDX];
    fill(x, ROWS * LDX);
    /* ties, NaN, +-0 and -inf: the rules every table must share */
    for (int i = 0; i < 40; i++) x[LDX + 5 * i] = 2.0f; /* 40 tied maxima, k = 25 of them */
    x[2 * LDX + 3] = NAN;
    x[2 * LDX + 9] = -0.0f;
    x[2 * LDX + 10] = 0.0f;
    for (int i = 0; i < N; i += 3) x[3 * LDX + i] = -INFINITY;
    int32_t n_rows[ROWS] = {N, N, 200, 257, 1, 0};
    int32_t k_rows[ROWS] = {10, 25, 0, 257, 1, 3};
    float thr_base[ROWS] = {0.5f, 0.2f, -0.3f, 0.9f, 2.0f, 0.0f};
    int32_t wc[ROWS], gc[ROWS], wk[ROWS], gk[ROWS];
    static int32_t wi[ROWS * LDI], gi[ROWS * LDI];
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        ig_error err;
        float *dx = up(be, x, sizeof x), *dthr = up(be, thr_base, sizeof thr_base);
        int32_t *dn = up(be, n_rows, sizeof n_rows), *dk = up(be, k_rows, sizeof k_rows);
        int32_t *dcnt = up(be, NULL, sizeof wc), *didx = up(be, NULL, sizeof wi);
        int32_t *dkc = up(be, NULL, sizeof wk);
        CU_ASSERT_EQUAL(ig_be_count_greater(be, dx, LDX, ROWS, N, dn, dthr, -0.25f, dcnt, &err),
                        IG_OK);
        CU_ASSERT_EQUAL(ig_be_topk(be, dx, LDX, ROWS, N, dn, 0, dk, didx, LDI, dkc, &err), IG_OK);
        down(be, bi ? gc : wc, dcnt, sizeof wc);
        down(be, bi ? gk : wk, dkc, sizeof wk);
        down(be, bi ? gi : wi, didx, sizeof wi);
        if (bi > 0) {
            int same_c = !memcmp(wc, gc, sizeof wc), same_k = !memcmp(wk, gk, sizeof wk);
            int same_i = 1;
            for (int r = 0; r < ROWS; r++)
                if (memcmp(wi + r * LDI, gi + r * LDI, (size_t)wk[r] * sizeof(int32_t))) same_i = 0;
            printf("\n    count/topk      %-8s counts %s, top-k counts %s, indices %s",
                   be->caps.name, same_c ? "equal" : "DIFFER", same_k ? "equal" : "DIFFER",
                   same_i ? "equal" : "DIFFER");
            CU_ASSERT(same_c && same_k && same_i);
        } else {
            CU_ASSERT_EQUAL(wk[2], 0);   /* k 0 */
            CU_ASSERT_EQUAL(wk[3], 257); /* k = n: every element */
            CU_ASSERT_EQUAL(wk[5], 0);   /* an empty row */
            /* the CPU table against the definitions, computed here (the host tables share their
             * row loops, so cpu-ref alone would not see a slip in them) */
            for (int r = 0; r < ROWS; r++) {
                int32_t c = 0;
                for (int i = 0; i < n_rows[r]; i++) c += x[r * LDX + i] > thr_base[r] + -0.25f;
                CU_ASSERT_EQUAL(wc[r], c);
                CU_ASSERT_EQUAL(wk[r], k_rows[r] < n_rows[r] ? k_rows[r] : n_rows[r]);
            }
            float kth = INFINITY; /* row 0: ascending, and no unselected value above a selected */
            for (int j = 0; j < wk[0]; j++) {
                if (j) CU_ASSERT(wi[j] > wi[j - 1]);
                if (x[wi[j]] < kth) kth = x[wi[j]];
            }
            int above = 0;
            for (int i = 0; i < N; i++) above += x[i] > kth;
            CU_ASSERT(above < wk[0]);
            int lower = wk[1] == 25; /* the tie at the top goes to the 25 lowest indices */
            for (int i = 0; i < 25 && lower; i++) lower = wi[LDI + i] == 5 * i;
            CU_ASSERT(lower);
        }
        void *ptrs[] = {dx, dthr, dn, dk, dcnt, didx, dkc};
        for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) ig_be_release(be, ptrs[i]);
    }
    printf("\n    ");
}

/* ---- the table and argument checks ---- */

static void test_checks(void) {
    ig_error err;
    ig_be_iface t = *g_cpu->iface;
    CU_ASSERT_EQUAL(ig_be_iface_check(&t, "copy", &err), IG_OK);
    t.topk = NULL;
    CU_ASSERT_EQUAL(ig_be_iface_check(&t, "stub", &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "backend stub: no topk op"));
    t = *g_cpu->iface;
    t.version = IG_BE_IFACE_VERSION + 1;
    CU_ASSERT_EQUAL(ig_be_iface_check(&t, "stub", &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "interface version"));
    t.version = 1; /* a table written before attention and copy2d joined */
    CU_ASSERT_EQUAL(ig_be_iface_check(&t, "old", &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "interface version 1"));
    t.version = 2; /* a table written before attention_colsum joined */
    CU_ASSERT_EQUAL(ig_be_iface_check(&t, "old", &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "interface version 2"));
    t = *g_cpu->iface;
    t.attention = NULL;
    CU_ASSERT_EQUAL(ig_be_iface_check(&t, "stub", &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "backend stub: no attention op"));

    /* shared argument checks: refused before any table runs, on every backend */
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++) {
        ig_be *be = all[bi];
        float *d = up(be, NULL, 64 * sizeof(float));
        CU_ASSERT_EQUAL(ig_be_linear(be, d, 1, 30, d, IG_DTYPE_Q4_0, 2, NULL, d, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a multiple"));
        CU_ASSERT_EQUAL(ig_be_rope(be, d, 1, 1, 8, 9, NULL, d, d, &err), IG_ERR_INVALID_ARG);
        CU_ASSERT_EQUAL(ig_be_partial_scores(be, d, IG_DTYPE_F32, 4, 0, 2, 4, d, 2, 0, 17, d, 4, 0,
                                             NULL, 0, d, 1, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nq=17"));
        /* col_max's stride: refused between overlapping tables, any for one table */
        CU_ASSERT_EQUAL(ig_be_partial_scores(be, d, IG_DTYPE_F32, 4, 8, 2, 4, d, 2, 2, 1, d, 4, 4,
                                             d + 32, 3, d + 48, 2, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cm_stride=3"));
        CU_ASSERT_EQUAL(ig_be_partial_scores_tab(be, d, IG_DTYPE_F32, 4, (int64_t *)d, 513, 4, d,
                                                 600, 0, 1, d, 4, 0, NULL, 0, d, 1, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kc_max=513"));
        CU_ASSERT_EQUAL(ig_be_partial_scores_tab(be, d, IG_DTYPE_F32, 4, NULL, 2, 4, d, 2, 0, 1, d,
                                                 4, 0, NULL, 0, d, 1, &err),
                        IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "NULL keys, tab"));
        CU_ASSERT_EQUAL(ig_be_partial_scores(be, d, IG_DTYPE_F32, 4, 0, 2, 4, d, 2, 0, 1, d + 16, 4,
                                             0, d + 32, 0, d + 48, 1, &err),
                        IG_OK);
        CU_ASSERT_EQUAL(
            ig_be_topk(be, d, 8, 1, 8, NULL, 5, NULL, (int32_t *)d, 4, (int32_t *)d, &err),
            IG_ERR_INVALID_ARG);
        /* empty work succeeds without touching anything */
        CU_ASSERT_EQUAL(ig_be_rmsnorm(be, NULL, NULL, 0, 8, 1e-5f, NULL, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_be_count_greater(be, NULL, 4, 0, 4, NULL, NULL, 0, NULL, &err), IG_OK);
        ig_be_release(be, d);
    }
}

/* The device engine's table (ig_be_cuda_create_sized): sizing it cannot use is refused with no
 * table made, before a device is touched; a sized one runs a prefill-sized linear over compressed
 * weights (the dequantized chunks and GEMM its scratch is for) as the cpu table does, to f16
 * rounding. */
static void test_cuda_sized(void) {
    ig_error err;
    ig_be *be = (ig_be *)1;
    /* refused before any device is touched, so on every machine */
    const ig_be_sizing bad[3] = {
        {64, 128, IG_DTYPE_Q4_1, 1}, {0, 128, IG_DTYPE_F16, 0}, {64, 0, IG_DTYPE_F32, 0}};
    for (int i = 0; i < 3; i++) {
        be = (ig_be *)1;
        CU_ASSERT_EQUAL(ig_be_cuda_create_sized(0, &bad[i], &be, &err), IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NULL(be);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "sizing"));
    }
    enum { M = 48, K = 128, N = 96 };
    ig_be_sizing z = {M, K, IG_DTYPE_F16, 1};
    ig_status rc = ig_be_cuda_create_sized(0, &z, &be, &err);
    if (rc == IG_ERR_UNSUPPORTED || rc == IG_ERR_DEVICE) {
        ig_test_skip(err.msg); /* a note: the other tables' tests ran */
        return;
    }
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    static float x[M * K], wf[N * K], want[M * N], got[M * N];
    fill(x, M * K);
    fill(wf, N * K);
    size_t wbytes = (size_t)N * ig_dtype_row_bytes(IG_DTYPE_Q4_1, K);
    void *w = malloc(wbytes);
    ig_quantize_rows(IG_DTYPE_Q4_1, wf, N, K, w);
    CU_ASSERT_EQUAL(ig_be_linear(g_cpu, x, M, K, w, IG_DTYPE_Q4_1, N, NULL, want, &err), IG_OK);
    float *dx = up(be, x, sizeof x), *dy = up(be, NULL, sizeof got);
    void *dw = up(be, w, wbytes);
    CU_ASSERT_EQUAL(ig_be_linear(be, dx, M, K, dw, IG_DTYPE_Q4_1, N, NULL, dy, &err), IG_OK);
    down(be, got, dy, sizeof got);
    double d = rel_diff(want, got, (size_t)M * N);
    report("linear q4_1 M48", be, d, 1e-2);
    /* and through the scratch: the dequantized chunks' f16 GEMM rounds x and W (the GEMV, which
     * a table without that scratch runs, agrees with the cpu to f32 rounding) */
    CU_ASSERT(d > 1e-5);
    void *bufs[] = {dx, dy, dw};
    for (size_t i = 0; i < 3; i++) ig_be_release(be, bufs[i]);
    ig_be_free(be);
    free(w);
}

/* linear_multi on every table: each output what that table's linear gives for its matrix alone
 * (bitwise: the same kernels), q4_1 and f32 weights, with a bias on one matrix; bad calls refused
 * with a message. */
static void test_linear_multi(void) {
    enum { M = 2, K = 64, N0 = 40, N1 = 24 };
    static float x[M * K], wf[(N0 + N1) * K], bias[N0];
    fill(x, M * K);
    fill(wf, (N0 + N1) * K);
    fill(bias, N0);
    ig_dtype types[2] = {IG_DTYPE_F32, IG_DTYPE_Q4_1};
    ig_be *all[3] = {g_cpu, g_other[0], g_n_other > 1 ? g_other[1] : NULL};
    for (int bi = 0; bi < 3 && all[bi]; bi++)
        for (int ti = 0; ti < 2; ti++) {
            ig_be *be = all[bi];
            ig_error err;
            ig_dtype t = types[ti];
            size_t rb = ig_dtype_row_bytes(t, K);
            unsigned char w[(N0 + N1) * K * 4];
            if (t == IG_DTYPE_F32)
                memcpy(w, wf, sizeof wf);
            else
                ig_quantize_rows(t, wf, N0 + N1, K, w);
            void *dw0 = up(be, w, N0 * rb), *dw1 = up(be, w + N0 * rb, N1 * rb);
            float *dx = up(be, x, sizeof x), *db = up(be, bias, sizeof bias);
            float *dy[4];
            for (int i = 0; i < 4; i++) dy[i] = up(be, NULL, M * N0 * sizeof(float));
            CU_ASSERT_EQUAL(ig_be_linear(be, dx, M, K, dw0, t, N0, db, dy[0], &err), IG_OK);
            CU_ASSERT_EQUAL(ig_be_linear(be, dx, M, K, dw1, t, N1, NULL, dy[1], &err), IG_OK);
            ig_linear_part p[2] = {{dw0, N0, db, dy[2]}, {dw1, N1, NULL, dy[3]}};
            CU_ASSERT_EQUAL(ig_be_linear_multi(be, dx, M, K, t, p, 2, &err), IG_OK);
            float want[M * N0], got[M * N0];
            for (int i = 0; i < 2; i++) {
                size_t n = (size_t)M * (i ? N1 : N0) * sizeof(float);
                down(be, want, dy[i], n);
                down(be, got, dy[2 + i], n);
                CU_ASSERT(memcmp(want, got, n) == 0);
            }
            CU_ASSERT_EQUAL(ig_be_linear_multi(be, dx, M, K, t, p, 0, &err), IG_ERR_INVALID_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "linear_multi"));
            CU_ASSERT_EQUAL(ig_be_linear_multi(be, dx, M, K, t, p, IG_LINEAR_MULTI_MAX + 1, &err),
                            IG_ERR_INVALID_ARG);
            ig_linear_part bad[2] = {p[0], {dw1, 0, NULL, dy[3]}};
            CU_ASSERT_EQUAL(ig_be_linear_multi(be, dx, M, K, t, bad, 2, &err), IG_ERR_INVALID_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "matrix 1"));
            if (t != IG_DTYPE_F32) { /* K not a multiple of the block */
                CU_ASSERT_EQUAL(ig_be_linear_multi(be, dx, M, 48, t, p, 2, &err),
                                IG_ERR_INVALID_ARG);
            }
            void *bufs[] = {dw0, dw1, dx, db, dy[0], dy[1], dy[2], dy[3]};
            for (size_t i = 0; i < 8; i++) ig_be_release(be, bufs[i]);
        }
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("backend", suite_init, suite_clean);
    CU_add_test(s, "linear_multi", test_linear_multi);
    CU_add_test(s, "upload2d", test_upload2d);
    CU_add_test(s, "copy2d", test_copy2d);
    CU_add_test(s, "norms_rope_elementwise", test_norms_rope_elementwise);
    CU_add_test(s, "attention", test_attention);
    CU_add_test(s, "attention_colsum", test_attention_colsum);
    CU_add_test(s, "page_bounds", test_page_bounds);
    CU_add_test(s, "embed", test_embed);
    CU_add_test(s, "gather_rows", test_gather_rows);
    CU_add_test(s, "attention_rows", test_attention_rows);
    CU_add_test(s, "codec", test_codec);
    CU_add_test(s, "queues", test_queues);
    CU_add_test(s, "linear", test_linear);
    CU_add_test(s, "partial_scores", test_partial_scores);
    CU_add_test(s, "partial_scores_tab", test_partial_scores_tab);
    CU_add_test(s, "mask_scores", test_mask_scores);
    CU_add_test(s, "count_and_topk", test_count_and_topk);
    CU_add_test(s, "checks", test_checks);
    CU_add_test(s, "cuda_sized", test_cuda_sized);
}
