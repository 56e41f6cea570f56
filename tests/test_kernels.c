/* kernels/cpu: every fast kernel against its reference (cpu_ref.c) on random inputs of odd sizes,
 * at every SIMD level this machine (and IG_SIMD) allows and at 1-3 threads, with sentinels around
 * outputs and workspaces, NaN/Inf checks, and small hand-checked cases.
 *
 * Error bounds (the reference accumulates in double from the same narrow weights, so f16/bf16
 * rounding of W is not part of the error):
 *   linear:     |y - ref| <= 1e-5 * (sum_k |x_k w_nk| + |b_n|) per element, NMSE <= 1e-10
 *   attention:  max |o - ref| <= 1e-5 * max |ref| (and NMSE <= 1e-10); probabilities within 1e-6
 *   norms:      |y - ref| <= 2e-6 * max(1, |ref|)
 *   softmax:    |p - ref| <= 1e-6 * max(ref) + 1e-12; silu*up within 2e-6 relative
 *   log_prob:   |lp - ref| <= 1e-6 * max(1, |ref|)
 *   RoPE, embedding, relu, add, scale: bitwise equal to the reference.
 *   sampling:   same token as the reference sampler for the same seed. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dtype.h"
#include "core/base/log.h"
#include "kernels/cpu/attention_gather.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ref.h"
#include "kernels/cpu/kvquant.h"
#include "kernels/cpu/measure.h"
#include "tests/kernel_util.h"
#include "tests/test_util.h"

/* ---- helpers -----------------------------------------------------------------------------------
 */

static int all_finite(const float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return 0;
    return 1;
}

static double nmse(const float *a, const float *ref, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        e += d * d;
        s += (double)ref[i] * ref[i];
    }
    return s > 0 ? e / s : e;
}

static double max_abs(const float *p, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(p[i]) > m) m = fabs(p[i]);
    return m;
}

/* Weights as stored: f32, or f32 rounded to f16 / bf16. A few zeros and f16 subnormals mixed in. */
static void *make_weights(ig_rng *r, ig_dtype t, int64_t n) {
    float *f = malloc((size_t)n * sizeof(float));
    CU_ASSERT_FATAL(f != NULL);
    fill(r, f, n, -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i += 97) f[i] = 0.0f;
    for (int64_t i = 5; i < n; i += 101) f[i] = 3e-6f;
    if (t == IG_DTYPE_F32) return f;
    uint16_t *h = malloc((size_t)n * sizeof(uint16_t));
    CU_ASSERT_FATAL(h != NULL);
    ig_convert(t, h, IG_DTYPE_F32, f, (size_t)n);
    free(f);
    return h;
}

static const ig_dtype k_wtypes[] = {IG_DTYPE_F32, IG_DTYPE_F16, IG_DTYPE_BF16};

/* ---- SIMD level selection ----------------------------------------------------------------------
 */

static void test_simd_levels(void) {
    CU_ASSERT_EQUAL(ig_cpu_set_simd("scalar"), 0);
    CU_ASSERT_STRING_EQUAL(ig_cpu_simd_name(), "scalar");
    CU_ASSERT_EQUAL(ig_cpu_set_simd("sse9"), -1);
    CU_ASSERT_STRING_EQUAL(ig_cpu_simd_name(), "scalar");
    ig_cpu_set_simd(NULL);
    const char *best = ig_cpu_simd_name();
    printf("\n  default SIMD level: %s, threads: %d\n", best, ig_cpu_get_threads());
    int found = 0;
    for (int l = 0; l < N_LEVELS; l++)
        if (!strcmp(best, k_levels[l])) {
            found = 1;
            /* every level up to the default is available, none above */
            for (int j = 0; j < N_LEVELS; j++)
                CU_ASSERT_EQUAL(ig_cpu_set_simd(k_levels[j]) == 0, j <= l);
        }
    CU_ASSERT(found);
    ig_cpu_set_threads(3);
    CU_ASSERT_EQUAL(ig_cpu_get_threads(), 3);
    /* OpenBLAS stays at one thread (igen's OpenMP threads split every sgemm); the sgemm probe
     * raises it for its own call only */
    CU_ASSERT_EQUAL(openblas_get_num_threads(), 1);
    CU_ASSERT(ig_cpu_measure_sgemm_gflops(64, 64, 64, 1) > 0);
    CU_ASSERT_EQUAL(openblas_get_num_threads(), 1);
    restore_defaults();
    CU_ASSERT(ig_cpu_get_threads() >= 1);
}

/* ---- linear ------------------------------------------------------------------------------------
 */

static int g_linear_fail_printed;

static void check_linear(ig_rng *r, ig_dtype wt, int64_t M, int64_t K, int64_t N, int with_bias,
                         const char *what) {
    float *x = malloc((size_t)(M * K) * sizeof(float));
    float *bias = with_bias ? malloc((size_t)N * sizeof(float)) : NULL;
    float *ref = malloc((size_t)(M * N) * sizeof(float));
    float *y = galloc(M * N);
    CU_ASSERT_FATAL(x && ref && (!with_bias || bias));
    fill(r, x, M * K, -1.0f, 1.0f);
    if (bias) fill(r, bias, N, -0.5f, 0.5f);
    void *W = make_weights(r, wt, N * K);
    ig_ref_linear(x, M, K, W, wt, N, bias, ref);
    ig_cpu_linear(x, M, K, W, wt, N, bias, y);
    int bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double mag = bias ? fabs(bias[n]) : 0.0;
            for (int64_t k = 0; k < K; k++)
                mag += fabs((double)x[m * K + k] * ig_load_f32(wt, W, (size_t)(n * K + k)));
            double err = fabs((double)y[m * N + n] - ref[m * N + n]);
            if (!(err <= 1e-5 * mag + 1e-30)) bad++;
        }
    int ok_guard = gintact(y, M * N), ok_finite = all_finite(y, M * N);
    double e = nmse(y, ref, M * N);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(ok_guard);
    CU_ASSERT(ok_finite);
    CU_ASSERT(e <= 1e-10);
    if ((bad || !ok_guard || !ok_finite || e > 1e-10) && g_linear_fail_printed++ < 10)
        printf("\n  linear %s %s M=%ld K=%ld N=%ld bias=%d [%s, %d threads]: bad=%d guard=%d "
               "finite=%d nmse=%.3g\n",
               what, ig_dtype_name(wt), (long)M, (long)K, (long)N, with_bias, ig_cpu_simd_name(),
               ig_cpu_get_threads(), bad, ok_guard, ok_finite, e);
    free(x);
    free(bias);
    free(ref);
    free(W);
    gfree(y);
}

static void test_linear(void) {
    ig_rng r;
    ig_rng_seed(&r, 1);
    /* M: GEMV tiles of 1-4 rows, the GEMV/sgemm boundary (16/17) and a large M. */
    static const int64_t Ms[] = {1, 2, 3, 5, 8, 16, 17, 40};
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int th = 1; th <= 3; th++) {
            ig_cpu_set_threads(th);
            for (int t = 0; t < 3; t++)
                for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
                    check_linear(&r, k_wtypes[t], Ms[mi], 577, 193, (int)(mi & 1), "odd");
        }
        ig_cpu_set_threads(2);
        for (int t = 0; t < 3; t++) {
            /* K tails around the vector widths, N tails around the 4-row tile and thread split. */
            static const int64_t Ks[] = {1, 7, 8, 9, 15, 16, 17, 33, 576};
            static const int64_t Ns[] = {1, 3, 4, 5, 17, 33};
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
                for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
                    check_linear(&r, k_wtypes[t], 1 + (int64_t)(ki % 3), Ks[ki], Ns[ni], 1,
                                 "tails");
            check_linear(&r, k_wtypes[t], 1, 576, 1536, 0, "model");
            check_linear(&r, k_wtypes[t], 20, 576, 1536, 1, "model");
        }
    }
    restore_defaults();
}

static void test_linear_degenerate(void) {
    float x[6] = {1, 2, 3, 4, 5, 6}, b[2] = {0.5f, -1.0f}, y[4] = {9, 9, 9, 9};
    float W[2] = {0};
    ig_cpu_linear(x, 2, 0, W, IG_DTYPE_F32, 2, b, y); /* K = 0: y = bias */
    CU_ASSERT_EQUAL(y[0], 0.5f);
    CU_ASSERT_EQUAL(y[1], -1.0f);
    CU_ASSERT_EQUAL(y[2], 0.5f);
    CU_ASSERT_EQUAL(y[3], -1.0f);
    /* hand case: W = [[1,0,-1],[2,2,2]], x = [1,2,3] -> [-2, 12] (+ bias) */
    float W2[6] = {1, 0, -1, 2, 2, 2};
    uint16_t Wh[6];
    ig_convert(IG_DTYPE_F16, Wh, IG_DTYPE_F32, W2, 6);
    for (int l = 0; l < N_LEVELS; l++) {
        if (ig_cpu_set_simd(k_levels[l]) != 0) continue;
        ig_cpu_linear(x, 1, 3, W2, IG_DTYPE_F32, 2, b, y);
        CU_ASSERT_EQUAL(y[0], -1.5f);
        CU_ASSERT_EQUAL(y[1], 11.0f);
        ig_cpu_linear(x, 1, 3, Wh, IG_DTYPE_F16, 2, NULL, y);
        CU_ASSERT_EQUAL(y[0], -2.0f);
        CU_ASSERT_EQUAL(y[1], 12.0f);
    }
    restore_defaults();
}

/* ---- embedding, norms, RoPE --------------------------------------------------------------------
 */

static void test_embed(void) {
    ig_rng r;
    ig_rng_seed(&r, 2);
    const int64_t vocab = 37, dim = 45;
    int32_t ids[6] = {0, 36, 5, 5, 17, 1};
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int t = 0; t < 3; t++) {
            void *table = make_weights(&r, k_wtypes[t], vocab * dim);
            float *ref = malloc(6 * dim * sizeof(float));
            float *out = galloc(6 * dim);
            ig_ref_embed(table, k_wtypes[t], dim, ids, 6, ref);
            ig_cpu_embed(table, k_wtypes[t], dim, ids, 6, out);
            CU_ASSERT(memcmp(out, ref, 6 * dim * sizeof(float)) == 0);
            CU_ASSERT(gintact(out, 6 * dim));
            free(table);
            free(ref);
            gfree(out);
        }
    }
    restore_defaults();
}

/* Every f16 and bf16 bit pattern through each level's widening (one embedding row of 65536). */
static void test_widen_exhaustive(void) {
    uint16_t *h = malloc(65536 * sizeof(uint16_t));
    float *ref = malloc(65536 * sizeof(float)), *out = galloc(65536);
    int32_t id = 0;
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int t = 1; t < 3; t++) {
            ig_ref_embed(h, k_wtypes[t], 65536, &id, 1, ref);
            ig_cpu_embed(h, k_wtypes[t], 65536, &id, 1, out);
            /* Bitwise, except that F16C quiets signalling NaNs: NaN must stay NaN. */
            int bad = 0;
            for (int i = 0; i < 65536; i++)
                bad += isnan(ref[i]) ? !isnan(out[i]) : memcmp(&out[i], &ref[i], 4) != 0;
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT(gintact(out, 65536));
        }
    }
    restore_defaults();
    free(h);
    free(ref);
    gfree(out);
}

static int close_rel(const float *a, const float *ref, int64_t n, double tol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double scale = fabs(ref[i]) > 1.0 ? fabs(ref[i]) : 1.0;
        if (!(fabs((double)a[i] - ref[i]) <= tol * scale)) bad++;
    }
    return bad == 0;
}

static void test_norms(void) {
    /* Hand case: x = (1,2,3,4), mean square 7.5. */
    float x4[4] = {1, 2, 3, 4}, w4[4] = {1, 1, 1, 2}, y4[4];
    ig_cpu_rmsnorm(x4, w4, 1, 4, 0.0f, y4);
    double rms = sqrt(7.5);
    IG_ASSERT_NEAR(y4[0], 1 / rms, 1e-6);
    IG_ASSERT_NEAR(y4[3], 8 / rms, 1e-6);
    /* LayerNorm of (1,2,3): mean 2, biased variance 2/3. */
    float x3[3] = {1, 2, 3}, w3[3] = {1, 1, 1}, b3[3] = {0, 0, 10}, y3[3];
    ig_cpu_layernorm(x3, w3, b3, 1, 3, 0.0f, y3);
    IG_ASSERT_NEAR(y3[0], -sqrt(1.5), 1e-6);
    IG_ASSERT_NEAR(y3[1], 0.0, 1e-6);
    IG_ASSERT_NEAR(y3[2], 10 + sqrt(1.5), 1e-5);

    ig_rng r;
    ig_rng_seed(&r, 3);
    const int64_t rows = 7, dim = 577;
    float *x = malloc(rows * dim * sizeof(float)), *w = malloc(dim * sizeof(float));
    float *b = malloc(dim * sizeof(float)), *ref = malloc(rows * dim * sizeof(float));
    float *y = galloc(rows * dim);
    fill(&r, x, rows * dim, -3.0f, 3.0f);
    for (int64_t i = 0; i < dim; i++) x[i] += 100.0f; /* a row with a large mean */
    fill(&r, w, dim, 0.5f, 1.5f);
    fill(&r, b, dim, -1.0f, 1.0f);
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int th = 1; th <= 2; th++) {
            ig_cpu_set_threads(th);
            ig_ref_rmsnorm(x, w, rows, dim, 1e-5f, ref);
            ig_cpu_rmsnorm(x, w, rows, dim, 1e-5f, y);
            CU_ASSERT(close_rel(y, ref, rows * dim, 2e-6));
            CU_ASSERT(gintact(y, rows * dim));
            ig_ref_layernorm(x, w, b, rows, dim, 1e-5f, ref);
            ig_cpu_layernorm(x, w, b, rows, dim, 1e-5f, y);
            CU_ASSERT(close_rel(y, ref, rows * dim, 2e-6));
            ig_ref_layernorm(x, w, NULL, rows, dim, 1e-5f, ref);
            ig_cpu_layernorm(x, w, NULL, rows, dim, 1e-5f, y);
            CU_ASSERT(close_rel(y, ref, rows * dim, 2e-6));
            CU_ASSERT(gintact(y, rows * dim));
        }
    }
    restore_defaults();
    free(x);
    free(w);
    free(b);
    free(ref);
    gfree(y);
}

static void test_rope(void) {
    const int rot = 64, hd = 80, heads = 3;
    const int64_t max_pos = 300;
    float *c = malloc(max_pos * (rot / 2) * sizeof(float)), *s = malloc(max_pos * (rot / 2) * 4);
    float *cr = malloc(max_pos * (rot / 2) * sizeof(float)), *sr = malloc(max_pos * (rot / 2) * 4);
    ig_cpu_rope_table(10000.0f, rot, max_pos, c, s);
    ig_ref_rope_table(10000.0f, rot, max_pos, cr, sr);
    /* The table is Hugging Face's f32 arithmetic: bitwise what the reference computes. */
    CU_ASSERT(memcmp(c, cr, max_pos * (rot / 2) * sizeof(float)) == 0);
    CU_ASSERT(memcmp(s, sr, max_pos * (rot / 2) * sizeof(float)) == 0);
    /* pos 0: cos 1, sin 0. pos 1, i = 0: inv_freq 1, angle 1. */
    int ok0 = 1;
    for (int i = 0; i < rot / 2; i++) ok0 &= c[i] == 1.0f && s[i] == 0.0f;
    CU_ASSERT(ok0);
    CU_ASSERT_EQUAL(c[rot / 2], cosf(1.0f));
    CU_ASSERT_EQUAL(s[rot / 2], sinf(1.0f));
    /* Against the angle in double: within the rounding of an f32 angle (|angle| <= 300). */
    double worst = 0;
    for (int64_t p = 0; p < max_pos; p++)
        for (int i = 0; i < rot / 2; i++) {
            double a = (double)p * pow(10000.0, -2.0 * i / rot);
            double e = fabs(c[p * (rot / 2) + i] - cos(a)) + fabs(s[p * (rot / 2) + i] - sin(a));
            if (e > worst) worst = e;
        }
    CU_ASSERT(worst < 1e-4);

    ig_rng r;
    ig_rng_seed(&r, 4);
    const int64_t n_tok = 5;
    int32_t pos[5] = {0, 1, 17, 299, 3};
    int64_t n = n_tok * heads * hd;
    float *x = malloc(n * sizeof(float)), *xr = malloc(n * sizeof(float));
    fill(&r, x, n, -2.0f, 2.0f);
    memcpy(xr, x, n * sizeof(float));
    float *xf = galloc(n);
    memcpy(xf, x, n * sizeof(float));
    ig_cpu_rope(xf, n_tok, heads, hd, rot, pos, c, s);
    ig_ref_rope(xr, n_tok, heads, hd, rot, pos, cr, sr);
    CU_ASSERT(memcmp(xf, xr, n * sizeof(float)) == 0);
    CU_ASSERT(gintact(xf, n));
    /* pos 0 is the identity; dims past rot_dim untouched; pairs keep their norm. */
    CU_ASSERT(memcmp(xf, x, heads * hd * sizeof(float)) == 0);
    int ok_tail = 1, ok_norm = 1;
    for (int64_t t = 0; t < n_tok; t++)
        for (int h = 0; h < heads; h++) {
            const float *a = x + (t * heads + h) * hd, *b = xf + (t * heads + h) * hd;
            for (int d = rot; d < hd; d++) ok_tail &= a[d] == b[d];
            for (int i = 0; i < rot / 2; i++) {
                double n0 = hypot(a[i], a[i + rot / 2]), n1 = hypot(b[i], b[i + rot / 2]);
                ok_norm &= fabs(n0 - n1) <= 1e-5 * (n0 + 1);
            }
        }
    CU_ASSERT(ok_tail);
    CU_ASSERT(ok_norm);
    /* pos 1, first pair: (1, 0) -> (cos 1, sin 1) */
    float one[80] = {0};
    one[0] = 1.0f;
    int32_t p1 = 1;
    ig_cpu_rope(one, 1, 1, hd, rot, &p1, c, s);
    CU_ASSERT_EQUAL(one[0], cosf(1.0f));
    CU_ASSERT_EQUAL(one[rot / 2], sinf(1.0f));
    free(c);
    free(s);
    free(cr);
    free(sr);
    free(x);
    free(xr);
    gfree(xf);
}

/* ---- activations, softmax, log_prob ------------------------------------------------------------
 */

static void test_activations(void) {
    ig_rng r;
    ig_rng_seed(&r, 5);
    const int64_t n = 1537;
    float *g = malloc(n * sizeof(float)), *u = malloc(n * sizeof(float));
    float *ref = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float));
    float *out = galloc(n);
    fill(&r, g, n, -12.0f, 12.0f);
    fill(&r, u, n, -2.0f, 2.0f);
    g[0] = -100.0f; /* exp(100) overflows f32: silu -> -0 */
    g[1] = 100.0f;
    g[2] = 0.0f;
    g[3] = -88.5f;
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int64_t len = 1; len <= n; len = len < 40 ? len + 1 : len * 3 + 1) {
            if (len > n) len = n;
            ig_ref_silu_mul(g, u, len, ref);
            ig_cpu_silu_mul(g, u, len, out);
            int bad = 0;
            for (int64_t i = 0; i < len; i++)
                if (!(fabs((double)out[i] - ref[i]) <= 2e-6 * fabs(ref[i]) + 1e-30)) bad++;
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT(all_finite(out, len));
            CU_ASSERT(gintact(out, len) || len != n);
            if (len == n) break;
        }
        ig_cpu_set_threads(2);
        float *big_g = malloc(300000 * sizeof(float)), *big_u = malloc(300000 * sizeof(float));
        float *big_o = galloc(300000), *big_r = malloc(300000 * sizeof(float));
        fill(&r, big_g, 300000, -8.0f, 8.0f);
        fill(&r, big_u, 300000, -1.0f, 1.0f);
        ig_ref_silu_mul(big_g, big_u, 300000, big_r);
        ig_cpu_silu_mul(big_g, big_u, 300000, big_o);
        int bad = 0;
        for (int64_t i = 0; i < 300000; i++)
            if (!(fabs((double)big_o[i] - big_r[i]) <= 2e-6 * fabs(big_r[i]) + 1e-30)) bad++;
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(gintact(big_o, 300000));
        free(big_g);
        free(big_u);
        gfree(big_o);
        free(big_r);
        ig_cpu_set_threads(0);
    }
    restore_defaults();
    /* relu, add, scale: exact; gelu: 2e-6 relative to max(1, |ref|). */
    memcpy(a, g, n * sizeof(float));
    memcpy(ref, g, n * sizeof(float));
    ig_cpu_relu(a, n);
    ig_ref_relu(ref, n);
    CU_ASSERT(memcmp(a, ref, n * sizeof(float)) == 0);
    memcpy(a, g, n * sizeof(float));
    memcpy(ref, g, n * sizeof(float));
    ig_cpu_add(a, u, n);
    ig_ref_add(ref, u, n);
    CU_ASSERT(memcmp(a, ref, n * sizeof(float)) == 0);
    for (int l = 0; l < N_LEVELS; l++) {
        if (ig_cpu_set_simd(k_levels[l]) != 0) continue;
        memcpy(a, g, n * sizeof(float));
        memcpy(ref, g, n * sizeof(float));
        ig_cpu_scale(a, 0.37f, n);
        ig_ref_scale(ref, 0.37f, n);
        CU_ASSERT(memcmp(a, ref, n * sizeof(float)) == 0);
    }
    restore_defaults();
    memcpy(a, g, n * sizeof(float));
    memcpy(ref, g, n * sizeof(float));
    ig_cpu_gelu(a, n);
    ig_ref_gelu(ref, n);
    CU_ASSERT(close_rel(a, ref, n, 2e-6));
    float h[3] = {0.0f, 1.0f, -1.0f};
    ig_cpu_gelu(h, 3);
    IG_ASSERT_NEAR(h[0], 0.0, 0);
    IG_ASSERT_NEAR(h[1], 0.8413447460685429, 1e-6);
    IG_ASSERT_NEAR(h[2], -0.15865525393145707, 1e-6);
    free(g);
    free(u);
    free(ref);
    free(a);
    gfree(out);
}

static void check_softmax(const float *x, int64_t n) {
    float *a = galloc(n), *ref = malloc(n * sizeof(float));
    memcpy(a, x, n * sizeof(float));
    memcpy(ref, x, n * sizeof(float));
    ig_cpu_softmax(a, n);
    ig_ref_softmax(ref, n);
    double mx = max_abs(ref, n);
    int bad = 0;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!(fabs((double)a[i] - ref[i]) <= 1e-6 * mx + 1e-12)) bad++;
        sum += a[i];
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(all_finite(a, n));
    CU_ASSERT(gintact(a, n));
    IG_ASSERT_NEAR(sum, 1.0, 1e-5);
    gfree(a);
    free(ref);
}

static void test_softmax(void) {
    ig_rng r;
    ig_rng_seed(&r, 6);
    const int64_t n = 49152 + 7;
    float *x = malloc(n * sizeof(float));
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        /* equal logits: uniform */
        for (int64_t len = 1; len <= 37; len++) {
            float e[37];
            for (int i = 0; i < len; i++) e[i] = 3.5f;
            ig_cpu_softmax(e, len);
            int ok = 1;
            for (int i = 0; i < len; i++) ok &= fabs(e[i] - 1.0 / len) <= 1e-7;
            CU_ASSERT(ok);
        }
        fill(&r, x, n, -20.0f, 20.0f);
        for (int64_t i = 0; i < n; i += 13) x[i] = -INFINITY; /* masked entries */
        check_softmax(x, n);
        check_softmax(x + 1, 33);
        fill(&r, x, 100, 1000.0f, 1010.0f); /* large logits: the max is subtracted */
        check_softmax(x, 100);
        float neg[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        ig_cpu_softmax(neg, 5);
        CU_ASSERT(neg[0] == 0.0f && neg[4] == 0.0f);
        /* log_prob */
        fill(&r, x, n, -15.0f, 15.0f);
        for (int32_t t = 0; t < 5; t++) {
            int32_t target = (int32_t)((t * 9973) % n);
            double lp = ig_cpu_log_prob(x, n, target), lr = ig_ref_log_prob(x, n, target);
            CU_ASSERT(fabs(lp - lr) <= 1e-6 * fmax(1.0, fabs(lr)));
        }
        float eq[4] = {2, 2, 2, 2};
        IG_ASSERT_NEAR(ig_cpu_log_prob(eq, 4, 3), log(0.25), 1e-7);
    }
    restore_defaults();
    free(x);
}

/* ---- attention ---------------------------------------------------------------------------------
 */

typedef struct attn_case {
    int64_t n_q, p0, stride;
    int n_head, n_kv, hd;
    float qscale; /* magnitude of q: large values make the softmax peaky */
} attn_case;

static int g_attn_fail_printed;

/* ws_threads: the thread count the workspace is sized for (may be below the threads set). */
static void check_attention(ig_rng *r, attn_case c, int ws_threads) {
    int64_t qn = c.n_q * c.n_head * c.hd;
    int64_t kvn = (int64_t)c.n_kv * c.stride * c.hd;
    float *q = malloc(qn * sizeof(float)), *k = malloc(kvn * sizeof(float));
    float *v = malloc(kvn * sizeof(float)), *ref = malloc(qn * sizeof(float));
    float *out = galloc(qn);
    CU_ASSERT_FATAL(q && k && v && ref);
    fill(r, q, qn, -c.qscale, c.qscale);
    fill(r, k, kvn, -1.0f, 1.0f);
    fill(r, v, kvn, -1.0f, 1.0f);
    /* Rows past p0 + n_q are not part of the cache yet: NaN there shows any read of them. */
    for (int g = 0; g < c.n_kv; g++)
        for (int64_t j = c.p0 + c.n_q; j < c.stride; j++)
            for (int d = 0; d < c.hd; d++) {
                k[((int64_t)g * c.stride + j) * c.hd + d] = NAN;
                v[((int64_t)g * c.stride + j) * c.hd + d] = NAN;
            }
    size_t wsn = ig_cpu_attention_ws_floats(c.n_q, c.p0 + c.n_q, c.n_head, c.hd, ws_threads);
    float *ws = galloc((int64_t)wsn);
    float scale = 1.0f / sqrtf((float)c.hd);
    ig_ref_attention(q, c.n_q, c.p0, k, v, c.stride, c.n_head, c.n_kv, c.hd, scale, ref);
    ig_cpu_attention(q, c.n_q, c.p0, k, v, c.stride, c.n_head, c.n_kv, c.hd, scale, ws, wsn, out);
    double err = 0;
    for (int64_t i = 0; i < qn; i++) err = fmax(err, fabs((double)out[i] - ref[i]));
    double rel = err / max_abs(ref, qn);
    int ok = rel <= 1e-5 && nmse(out, ref, qn) <= 1e-10 && all_finite(out, qn) &&
             gintact(out, qn) && gintact(ws, (int64_t)wsn);
    CU_ASSERT(ok);
    if (!ok && g_attn_fail_printed++ < 10)
        printf("\n  attention n_q=%ld p0=%ld heads=%d/%d hd=%d [%s, %d threads, ws for %d]: "
               "rel=%.3g finite=%d guards=%d/%d\n",
               (long)c.n_q, (long)c.p0, c.n_head, c.n_kv, c.hd, ig_cpu_simd_name(),
               ig_cpu_get_threads(), ws_threads, rel, all_finite(out, qn), gintact(out, qn),
               gintact(ws, (int64_t)wsn));
    free(q);
    free(k);
    free(v);
    free(ref);
    gfree(out);
    gfree(ws);
}

static void test_attention(void) {
    ig_rng r;
    ig_rng_seed(&r, 7);
    static const attn_case cases[] = {
        {1, 0, 8, 9, 3, 64, 1.0f},     /* first token */
        {1, 100, 130, 9, 3, 64, 1.0f}, /* decode over a cache */
        {1, 700, 701, 9, 3, 64, 4.0f}, /* long, peaky */
        {5, 37, 50, 9, 3, 64, 1.0f},   /* a few queries appended: decode path */
        {4, 254, 300, 9, 3, 64, 1.0f}, /* queries on both sides of a chunk boundary */
        {8, 600, 608, 9, 3, 64, 2.0f}, /* most queries of the decode path, 3 chunks each */
        {8, 0, 8, 4, 4, 40, 1.0f},     /* MHA, hd not a multiple of 16 */
        {9, 3, 20, 9, 3, 64, 1.0f},    /* smallest sgemm case */
        {40, 0, 41, 9, 3, 64, 1.0f},   /* prefill from empty: two blocks */
        {75, 19, 100, 9, 3, 64, 2.0f}, /* prefill appended to a cache, partial last block */
        {33, 5, 40, 6, 1, 37, 1.0f},   /* MQA, odd head size */
        {3, 11, 20, 2, 1, 7, 1.0f},    /* tiny head size */
    };
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int th = 1; th <= 3; th++) {
            ig_cpu_set_threads(th);
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                check_attention(&r, cases[i], th);
                if (th > 1) check_attention(&r, cases[i], 1); /* workspace for one thread */
            }
        }
    }
    restore_defaults();
    /* The workspace formula (see cpu_kernels.h): bounded by 32 * n_ctx per thread whatever n_q. */
    CU_ASSERT_EQUAL(ig_cpu_attention_ws_floats(1, 8192, 9, 64, 2), 32 * 9 * 66 + 2 * 4 * 256);
    CU_ASSERT_EQUAL(ig_cpu_attention_ws_floats(1, 100, 9, 64, 2), 9 * 66 + 2 * 4 * 112);
    CU_ASSERT_EQUAL(ig_cpu_attention_ws_floats(1, 100, 2, 64, 2), 2 * 66 + 2 * 2 * 112);
    CU_ASSERT_EQUAL(ig_cpu_attention_ws_floats(4096, 8192, 9, 64, 2), 2 * 32 * 8192);
    CU_ASSERT_EQUAL(ig_cpu_attention_ws_floats(20, 100, 9, 64, 1), 8 * 9 * 66 + 4 * 112);
    CU_ASSERT_EQUAL(ig_cpu_attention_ws_floats(20, 1000, 9, 64, 1), 20 * 1008);
    /* monotone in n_q: a workspace for the largest batch serves every smaller one */
    int mono = 1;
    for (int th = 1; th <= 4; th++)
        for (int64_t nq = 1; nq < 70; nq++)
            mono &= ig_cpu_attention_ws_floats(nq + 1, 777, 32, 128, th) >=
                    ig_cpu_attention_ws_floats(nq, 777, 32, 128, th);
    CU_ASSERT(mono);
}

/* Hand case: two keys, the second identical to the query direction; values one-hot. */
static void test_attention_hand(void) {
    float q[2] = {1, 0}, k[4] = {0, 1, 1, 0}, v[4] = {1, 0, 0, 1}, out[2];
    float ws[64];
    ig_cpu_attention(q, 1, 1, k, v, 2, 1, 1, 2, 1.0f, ws, 64, out);
    double e = exp(1.0);
    IG_ASSERT_NEAR(out[0], 1 / (1 + e), 1e-6);
    IG_ASSERT_NEAR(out[1], e / (1 + e), 1e-6);
}

static void test_attention_rows(void) {
    ig_rng r;
    ig_rng_seed(&r, 8);
    const int n_head = 9, n_kv = 3, hd = 64;
    const int64_t stride = 300, L = 257;
    float *k = malloc((size_t)n_kv * stride * hd * 4), *v = malloc((size_t)n_kv * stride * hd * 4);
    float *q = malloc(n_head * hd * 4);
    fill(&r, k, n_kv * stride * hd, -1, 1);
    fill(&r, v, n_kv * stride * hd, -1, 1);
    fill(&r, q, n_head * hd, -2, 2);
    float *ref = malloc(n_head * hd * 4), *out = galloc(n_head * hd);
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int th = 1; th <= 2; th++) {
            ig_cpu_set_threads(th);
            float scale = 0.125f;
            /* (a) every row 0 .. L-1 of each group: the same as decode attention at p0 = L-1. */
            const float *kr[3], *vr[3];
            int64_t nr[3];
            for (int g = 0; g < n_kv; g++) {
                kr[g] = k + (int64_t)g * stride * hd;
                vr[g] = v + (int64_t)g * stride * hd;
                nr[g] = L;
            }
            size_t wsn = ig_cpu_attention_ws_floats(1, L, n_head, hd, th);
            float *ws = galloc((int64_t)wsn);
            ig_cpu_attention(q, 1, L - 1, k, v, stride, n_head, n_kv, hd, scale, ws, wsn, ref);
            ig_cpu_attention_rows(q, kr, vr, nr, L, n_head, n_kv, hd, scale, ws, wsn, NULL, out);
            CU_ASSERT(nmse(out, ref, n_head * hd) <= 1e-12);
            CU_ASSERT(gintact(out, n_head * hd) && gintact(ws, (int64_t)wsn));
            gfree(ws);

            /* (b) gathered subsets of different sizes per group (one empty), with probabilities;
             * the second set spans several chunks of keys. */
            for (int set = 0; set < 2; set++) {
                const int64_t max_rows = set ? 600 : 150;
                float *gk = malloc((size_t)n_kv * max_rows * hd * 4);
                float *gv = malloc((size_t)n_kv * max_rows * hd * 4);
                int64_t sizes[3] = {max_rows, 0, set ? 257 : 61};
                for (int g = 0; g < n_kv; g++) {
                    for (int64_t j = 0; j < sizes[g]; j++) {
                        int64_t src = (j * 7 + g) % L; /* any rows, in any order */
                        const float *ks = k + ((int64_t)g * stride + src) * hd;
                        const float *vs = v + ((int64_t)g * stride + src) * hd;
                        memcpy(gk + ((int64_t)g * max_rows + j) * hd, ks, hd * 4);
                        memcpy(gv + ((int64_t)g * max_rows + j) * hd, vs, hd * 4);
                    }
                    kr[g] = gk + (int64_t)g * max_rows * hd;
                    vr[g] = gv + (int64_t)g * max_rows * hd;
                    nr[g] = sizes[g];
                }
                float *pr = malloc(n_head * max_rows * 4), *pf = galloc(n_head * max_rows);
                wsn = ig_cpu_attention_ws_floats(1, max_rows, n_head, hd, th);
                ws = galloc((int64_t)wsn);
                ig_ref_attention_rows(q, kr, vr, nr, max_rows, n_head, n_kv, hd, scale, pr, ref);
                ig_cpu_attention_rows(q, kr, vr, nr, max_rows, n_head, n_kv, hd, scale, ws, wsn, pf,
                                      out);
                double err = 0;
                for (int i = 0; i < n_head * hd; i++)
                    err = fmax(err, fabs((double)out[i] - ref[i]));
                CU_ASSERT(err <= 1e-5 * max_abs(ref, n_head * hd));
                int bad_p = 0;
                for (int64_t i = 0; i < n_head * max_rows; i++)
                    if (!(fabs((double)pf[i] - pr[i]) <= 1e-6)) bad_p++;
                CU_ASSERT_EQUAL(bad_p, 0);
                for (int h = 0; h < n_head; h++) {
                    double s = 0;
                    for (int64_t j = 0; j < max_rows; j++) s += pf[h * max_rows + j];
                    IG_ASSERT_NEAR(s, sizes[h / 3] ? 1.0 : 0.0, 1e-5);
                }
                for (int h = 3; h < 6; h++) /* the empty group: zero output */
                    CU_ASSERT(max_abs(out + h * hd, hd) == 0.0);
                CU_ASSERT(gintact(pf, n_head * max_rows) && gintact(out, n_head * hd));
                CU_ASSERT(gintact(ws, (int64_t)wsn));
                /* without probabilities: same output */
                float *out2 = malloc(n_head * hd * 4);
                ig_cpu_attention_rows(q, kr, vr, nr, max_rows, n_head, n_kv, hd, scale, ws, wsn,
                                      NULL, out2);
                CU_ASSERT(memcmp(out, out2, n_head * hd * 4) == 0);
                free(out2);
                free(gk);
                free(gv);
                free(pr);
                gfree(pf);
                gfree(ws);
            }
        }
    }
    restore_defaults();
    free(k);
    free(v);
    free(q);
    free(ref);
    gfree(out);
}

/* ---- attention with column sums (H2O) ----------------------------------------------------------
 */

static int g_colsum_fail_printed;

/* The column sums of one call against the reference, on top of a non-zero start, in rows of a
 * stride wider than p0 + n_q whose gap must stay untouched; `out` bitwise as ig_cpu_attention;
 * colsum bitwise the same at 1, 2 and 3 threads. */
static void check_colsum(ig_rng *r, attn_case c) {
    int64_t n_ctx = c.p0 + c.n_q, cs_stride = n_ctx + 5;
    int64_t qn = c.n_q * c.n_head * c.hd, kvn = (int64_t)c.n_kv * c.stride * c.hd;
    int64_t csn = c.n_head * cs_stride;
    float *q = malloc(qn * 4), *k = malloc(kvn * 4), *v = malloc(kvn * 4);
    float *ref = malloc(qn * 4), *out = galloc(qn), *out_plain = malloc(qn * 4);
    float *cs0 = malloc(csn * 4), *cs_ref = malloc(csn * 4), *cs = galloc(csn);
    float *cs_t[3];
    CU_ASSERT_FATAL(q && k && v && ref && out_plain && cs0 && cs_ref);
    fill(r, q, qn, -c.qscale, c.qscale);
    fill(r, k, kvn, -1.0f, 1.0f);
    fill(r, v, kvn, -1.0f, 1.0f);
    for (int g = 0; g < c.n_kv; g++)
        for (int64_t j = n_ctx; j < c.stride; j++)
            for (int d = 0; d < c.hd; d++) k[((int64_t)g * c.stride + j) * c.hd + d] = NAN;
    for (int64_t i = 0; i < csn; i++) cs0[i] = (i % cs_stride) < n_ctx ? frand(r, 0, 3) : -7.0f;
    float scale = 1.0f / sqrtf((float)c.hd);
    memcpy(cs_ref, cs0, csn * 4);
    ig_ref_attention_colsum(q, c.n_q, c.p0, k, v, c.stride, c.n_head, c.n_kv, c.hd, scale, cs_ref,
                            cs_stride, ref);
    int bad = 0, det = 1, same_out = 1, guards = 1;
    double worst = 0;
    for (int th = 1; th <= 3; th++) {
        ig_cpu_set_threads(th);
        size_t wsn = ig_cpu_attention_colsum_ws_floats(c.n_q, n_ctx, c.n_head, c.hd, th);
        CU_ASSERT(wsn >= ig_cpu_attention_ws_floats(c.n_q, n_ctx, c.n_head, c.hd, th));
        float *ws = galloc((int64_t)wsn);
        memcpy(cs, cs0, csn * 4);
        ig_cpu_attention_colsum(q, c.n_q, c.p0, k, v, c.stride, c.n_head, c.n_kv, c.hd, scale, ws,
                                wsn, cs, cs_stride, out);
        guards &= gintact(cs, csn) && gintact(out, qn) && gintact(ws, (int64_t)wsn);
        ig_cpu_attention(q, c.n_q, c.p0, k, v, c.stride, c.n_head, c.n_kv, c.hd, scale, ws, wsn,
                         out_plain);
        same_out &= memcmp(out, out_plain, qn * 4) == 0;
        cs_t[th - 1] = malloc(csn * 4);
        memcpy(cs_t[th - 1], cs, csn * 4);
        if (th > 1) det &= memcmp(cs_t[th - 1], cs_t[0], csn * 4) == 0;
        gfree(ws);
    }
    for (int64_t i = 0; i < csn; i++) {
        if (i % cs_stride >= n_ctx) { /* the gap: untouched */
            bad += cs[i] != -7.0f;
            continue;
        }
        /* each probability within 1e-6 of the reference, summed over the queries */
        double err = fabs((double)cs[i] - cs_ref[i]);
        worst = fmax(worst, err);
        if (!(err <= 1e-6 * (double)c.n_q + 1e-6 * fabs(cs_ref[i]))) bad++;
    }
    /* every query's probabilities sum to 1 */
    double mass_err = 0;
    for (int h = 0; h < c.n_head; h++) {
        double s = 0;
        for (int64_t j = 0; j < n_ctx; j++)
            s += (double)cs[h * cs_stride + j] - cs0[h * cs_stride + j];
        mass_err = fmax(mass_err, fabs(s - (double)c.n_q));
    }
    double oerr = 0;
    for (int64_t i = 0; i < qn; i++) oerr = fmax(oerr, fabs((double)out[i] - ref[i]));
    int ok = bad == 0 && det && same_out && guards && mass_err <= 1e-4 * (double)c.n_q &&
             oerr <= 1e-5 * max_abs(ref, qn) && all_finite(cs, csn);
    CU_ASSERT(ok);
    if (!ok && g_colsum_fail_printed++ < 10)
        printf("\n  colsum n_q=%ld p0=%ld heads=%d/%d hd=%d [%s]: bad=%d worst=%.3g det=%d "
               "same_out=%d guards=%d mass_err=%.3g oerr=%.3g\n",
               (long)c.n_q, (long)c.p0, c.n_head, c.n_kv, c.hd, ig_cpu_simd_name(), bad, worst, det,
               same_out, guards, mass_err, oerr);
    for (int th = 0; th < 3; th++) free(cs_t[th]);
    free(q);
    free(k);
    free(v);
    free(ref);
    gfree(out);
    free(out_plain);
    free(cs0);
    free(cs_ref);
    gfree(cs);
}

static void test_attention_colsum(void) {
    ig_rng r;
    ig_rng_seed(&r, 11);
    static const attn_case cases[] = {
        {1, 0, 8, 9, 3, 64, 1.0f},     /* one query: the probabilities themselves */
        {1, 300, 301, 9, 3, 64, 3.0f}, /* decode over two chunks */
        {5, 250, 260, 9, 3, 64, 1.0f}, /* queries on both sides of a chunk boundary */
        {8, 0, 8, 10, 2, 40, 1.0f},    /* group of 5: passes of 4 + 1 heads */
        {9, 3, 20, 9, 3, 64, 1.0f},    /* smallest sgemm case */
        {75, 19, 100, 9, 3, 64, 2.0f}, /* blocks of 32 + partial, appended to a cache */
        {200, 0, 200, 6, 1, 37, 1.0f}, /* MQA, odd head size, 7 blocks x 6 heads */
        {400, 0, 400, 9, 3, 16, 1.0f}, /* 117 tasks: rounds of 32 slots per thread, 2-4 of them */
        {70, 1100, 1170, 4, 4, 16, 1.0f}, /* colsum rows wider than one reduction item */
    };
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_colsum(&r, cases[i]);
    }
    restore_defaults();
    /* Chunked prefill into one fixed-stride array gives the sums of the whole prefill. */
    const int n_head = 6, n_kv = 2, hd = 32;
    const int64_t cap = 128, n1 = 45, n2 = 38;
    float *q = malloc((n1 + n2) * n_head * hd * 4), *k = malloc(n_kv * cap * hd * 4);
    float *v = malloc(n_kv * cap * hd * 4), *out = malloc((n1 + n2) * n_head * hd * 4);
    float *cs_one = calloc(n_head * cap, 4), *cs_two = calloc(n_head * cap, 4);
    fill(&r, q, (n1 + n2) * n_head * hd, -1, 1);
    fill(&r, k, n_kv * cap * hd, -1, 1);
    fill(&r, v, n_kv * cap * hd, -1, 1);
    size_t wsn = ig_cpu_attention_colsum_ws_floats(n1 + n2, cap, n_head, hd, 0);
    float *ws = malloc(wsn * 4);
    ig_cpu_attention_colsum(q, n1 + n2, 0, k, v, cap, n_head, n_kv, hd, 0.2f, ws, wsn, cs_one, cap,
                            out);
    ig_cpu_attention_colsum(q, n1, 0, k, v, cap, n_head, n_kv, hd, 0.2f, ws, wsn, cs_two, cap, out);
    ig_cpu_attention_colsum(q + n1 * n_head * hd, n2, n1, k, v, cap, n_head, n_kv, hd, 0.2f, ws,
                            wsn, cs_two, cap, out);
    double err = 0;
    for (int64_t i = 0; i < n_head * cap; i++) err = fmax(err, fabs(cs_one[i] - cs_two[i]));
    CU_ASSERT(err <= 1e-5);
    free(q);
    free(k);
    free(v);
    free(out);
    free(cs_one);
    free(cs_two);
    free(ws);
    /* The workspace formula (see cpu_kernels.h): the prefill term gets 32 slots per thread. */
    CU_ASSERT_EQUAL(ig_cpu_attention_colsum_ws_floats(4096, 8192, 9, 64, 2), 2 * 64 * 8192);
    CU_ASSERT_EQUAL(ig_cpu_attention_colsum_ws_floats(1, 100, 9, 64, 2),
                    ig_cpu_attention_ws_floats(1, 100, 9, 64, 2));
    CU_ASSERT_EQUAL(ig_cpu_attention_colsum_ws_floats(20, 1000, 9, 64, 1), 52 * 1008);
}

/* ---- gathered rows of f32 / f16 / bf16 in a strided buffer -------------------------------------
 */

typedef struct rows_case {
    int n_head, n_kv, hd;
    int64_t n_max; /* rows of group g: n_max - 37 * g (at least 0) */
    int64_t pad;   /* row_stride = hd + pad */
} rows_case;

static int g_rows_fail_printed;

static void check_rows_t(ig_rng *r, rows_case c, ig_dtype t, int th) {
    int64_t stride = c.hd + c.pad;
    size_t es = ig_dtype_size(t);
    int64_t per = c.n_max * stride; /* elements per group */
    float *kf = malloc((size_t)(c.n_kv * per) * 4), *vf = malloc((size_t)(c.n_kv * per) * 4);
    char *kb = malloc((size_t)(c.n_kv * per) * es), *vb = malloc((size_t)(c.n_kv * per) * es);
    float *q = malloc((size_t)c.n_head * c.hd * 4), *ref = malloc((size_t)c.n_head * c.hd * 4);
    float *out = galloc((int64_t)c.n_head * c.hd), *pr = malloc((size_t)c.n_head * c.n_max * 4);
    float *pf = galloc((int64_t)c.n_head * c.n_max);
    CU_ASSERT_FATAL(kf && vf && kb && vb && q && ref && pr);
    fill(r, kf, c.n_kv * per, -1, 1);
    fill(r, vf, c.n_kv * per, -1, 1);
    fill(r, q, (int64_t)c.n_head * c.hd, -2, 2);
    /* NaN in the gaps between rows: a read there shows in the output. */
    for (int64_t i = 0; i < c.n_kv * per; i++)
        if (i % stride >= c.hd) kf[i] = vf[i] = NAN;
    ig_convert(t, kb, IG_DTYPE_F32, kf, (size_t)(c.n_kv * per));
    ig_convert(t, vb, IG_DTYPE_F32, vf, (size_t)(c.n_kv * per));
    const void *kr[16], *vr[16];
    int64_t nr[16];
    for (int g = 0; g < c.n_kv; g++) {
        kr[g] = kb + (size_t)(g * per) * es;
        vr[g] = vb + (size_t)(g * per) * es;
        nr[g] = c.n_max - 37 * g > 0 ? c.n_max - 37 * g : 0;
    }
    size_t wsn = ig_cpu_attention_ws_floats(1, c.n_max, c.n_head, c.hd, th);
    float *ws = galloc((int64_t)wsn);
    ig_ref_attention_rows_t(q, t, kr, vr, stride, nr, c.n_max, c.n_head, c.n_kv, c.hd, 0.15f, pr,
                            ref);
    ig_cpu_attention_rows_t(q, t, kr, vr, stride, nr, c.n_max, c.n_head, c.n_kv, c.hd, 0.15f, ws,
                            wsn, pf, out);
    double err = 0;
    for (int i = 0; i < c.n_head * c.hd; i++) err = fmax(err, fabs((double)out[i] - ref[i]));
    int bad_p = 0;
    for (int64_t i = 0; i < c.n_head * c.n_max; i++)
        bad_p += !(fabs((double)pf[i] - pr[i]) <= 1e-6);
    int ok = err <= 1e-5 * fmax(max_abs(ref, (int64_t)c.n_head * c.hd), 1e-30) && bad_p == 0 &&
             all_finite(out, (int64_t)c.n_head * c.hd) && gintact(out, (int64_t)c.n_head * c.hd) &&
             gintact(pf, (int64_t)c.n_head * c.n_max) && gintact(ws, (int64_t)wsn);
    /* without probabilities: the same output */
    float *out2 = malloc((size_t)c.n_head * c.hd * 4);
    ig_cpu_attention_rows_t(q, t, kr, vr, stride, nr, c.n_max, c.n_head, c.n_kv, c.hd, 0.15f, ws,
                            wsn, NULL, out2);
    ok &= memcmp(out, out2, (size_t)c.n_head * c.hd * 4) == 0;
    CU_ASSERT(ok);
    if (!ok && g_rows_fail_printed++ < 10)
        printf(
            "\n  rows_t %s heads=%d/%d hd=%d n=%ld pad=%ld [%s, %d threads]: err=%.3g bad_p=%d\n",
            ig_dtype_name(t), c.n_head, c.n_kv, c.hd, (long)c.n_max, (long)c.pad,
            ig_cpu_simd_name(), th, err, bad_p);
    free(out2);
    free(kf);
    free(vf);
    free(kb);
    free(vb);
    free(q);
    free(ref);
    gfree(out);
    free(pr);
    gfree(pf);
    gfree(ws);
}

static void test_attention_rows_t(void) {
    ig_rng r;
    ig_rng_seed(&r, 12);
    static const rows_case cases[] = {
        {9, 3, 64, 600, 0},   /* SmolLM2's heads, packed rows, several chunks */
        {9, 3, 64, 300, 128}, /* rows inside a token-major [n][n_kv][hd] buffer */
        {4, 4, 80, 70, 3},    /* MHA, hd with a 16-tail */
        {8, 1, 128, 260, 0},  /* group of 8: two passes of 4 heads */
        {12, 2, 40, 150, 8},  /* group of 6: passes of 4 + 2 */
        {5, 1, 7, 40, 1},     /* tiny head: all tail */
        {2, 1, 300, 40, 5},   /* head longer than the scalar level's widening piece */
    };
    static const ig_dtype types[] = {IG_DTYPE_F32, IG_DTYPE_F16, IG_DTYPE_BF16};
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int th = 1; th <= 2; th++) {
            ig_cpu_set_threads(th);
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                for (int t = 0; t < 3; t++) check_rows_t(&r, cases[i], types[t], th);
        }
    }
    restore_defaults();
    /* The f32 wrapper is the f32 case of _t with packed rows, bitwise. */
    const int n_head = 9, n_kv = 3, hd = 64;
    const int64_t n = 333;
    float *k = malloc(n_kv * n * hd * 4), *v = malloc(n_kv * n * hd * 4),
          *q = malloc(n_head * hd * 4);
    float *o1 = malloc(n_head * hd * 4), *o2 = malloc(n_head * hd * 4);
    fill(&r, k, n_kv * n * hd, -1, 1);
    fill(&r, v, n_kv * n * hd, -1, 1);
    fill(&r, q, n_head * hd, -1, 1);
    const float *kr[3], *vr[3];
    const void *krv[3], *vrv[3];
    int64_t nr[3] = {n, n - 1, 100};
    for (int g = 0; g < 3; g++) {
        krv[g] = kr[g] = k + g * n * hd;
        vrv[g] = vr[g] = v + g * n * hd;
    }
    size_t wsn = ig_cpu_attention_ws_floats(1, n, n_head, hd, 0);
    float *ws = malloc(wsn * 4);
    ig_cpu_attention_rows(q, kr, vr, nr, n, n_head, n_kv, hd, 0.125f, ws, wsn, NULL, o1);
    ig_cpu_attention_rows_t(q, IG_DTYPE_F32, krv, vrv, hd, nr, n, n_head, n_kv, hd, 0.125f, ws, wsn,
                            NULL, o2);
    CU_ASSERT(memcmp(o1, o2, n_head * hd * 4) == 0);
    free(k);
    free(v);
    free(q);
    free(o1);
    free(o2);
    free(ws);
}

/* ---- gather attention over encoded rows ------------------------------------------------------
 * Encoded rows (f16, group-wise codes) decoded inside the kernel give the same bits as the kernel
 * over the rows decoded beforehand, through index lists and with the new tokens' rows after them,
 * probabilities included; and agree with the double reference. */

typedef struct enc_case {
    int n_head, n_kv, hd;
    ig_rows_enc enc;
    int bits, group;
} enc_case;

static void check_gather_enc(ig_rng *r, enc_case c, int n_extra) {
    const int64_t cap = 300;
    const int H = c.n_head, G = c.n_kv, hd = c.hd;
    size_t rb = c.enc == IG_ROWS_F16 ? (size_t)hd * 2 : ig_kvq_row_bytes(hd, c.bits, c.group);
    CU_ASSERT_FATAL(rb > 0);
    float *src = malloc((size_t)G * cap * hd * 4 * 2), *dec = malloc((size_t)G * cap * hd * 4 * 2);
    unsigned char *enc = malloc((size_t)G * cap * rb * 2);
    int32_t *idx = malloc((size_t)G * cap * sizeof(int32_t));
    float *ex = malloc((size_t)(n_extra ? n_extra : 1) * G * hd * 4 * 2), *q = malloc(H * hd * 4);
    int64_t ps = cap + n_extra;
    float *o1 = malloc(H * hd * 4), *o2 = malloc(H * hd * 4), *o3 = malloc(H * hd * 4);
    float *p1 = malloc(H * ps * 4), *p2 = malloc(H * ps * 4);
    CU_ASSERT_FATAL(src && dec && enc && idx && ex && q && o1 && o2 && o3 && p1 && p2);
    fill(r, src, (int64_t)G * cap * hd * 2, -2.0f, 2.0f);
    fill(r, ex, (int64_t)(n_extra ? n_extra : 1) * G * hd * 2, -2.0f, 2.0f);
    fill(r, q, H * hd, -1.0f, 1.0f);
    int64_t rows = (int64_t)G * cap * 2; /* K tables, then V tables */
    if (c.enc == IG_ROWS_F16) {
        ig_convert(IG_DTYPE_F16, enc, IG_DTYPE_F32, src, (size_t)(rows * hd));
        ig_convert(IG_DTYPE_F32, dec, IG_DTYPE_F16, enc, (size_t)(rows * hd));
    } else {
        ig_kvq_quantize_rows(src, rows, hd, c.bits, c.group, enc);
        ig_kvq_dequantize_rows(enc, rows, hd, c.bits, c.group, dec);
    }
    const float *kb[8], *vb[8];
    const unsigned char *ke[8], *ve[8];
    const int32_t *ix[8];
    int64_t nsel[8];
    for (int g = 0; g < G; g++) {
        kb[g] = dec + (size_t)g * cap * hd;
        vb[g] = dec + (size_t)(G + g) * cap * hd;
        ke[g] = enc + (size_t)g * cap * rb;
        ve[g] = enc + (size_t)(G + g) * cap * rb;
        nsel[g] = g == 1 ? 0 : cap - 41 * g; /* one head with no selected rows */
        int32_t *e = idx + (size_t)g * cap;
        for (int64_t j = 0; j < nsel[g]; j++) e[j] = (int32_t)((j * 7 + g) % cap); /* scattered */
        ix[g] = e;
    }
    ig_gather_attn a = {.n_head = H,
                        .n_kv_head = G,
                        .hd = hd,
                        .scale = 1.0f / sqrtf((float)hd),
                        .k_base = kb,
                        .v_base = vb,
                        .row_stride = hd,
                        .idx = ix,
                        .n_sel = nsel,
                        .k_extra = ex,
                        .v_extra = ex + (size_t)(n_extra ? n_extra : 1) * G * hd,
                        .n_extra = n_extra};
    size_t wsn = ig_cpu_attention_gather_ws_floats(H, ps);
    float *ws = malloc(wsn * 4);
    CU_ASSERT_FATAL(ws != NULL);
    ig_cpu_attention_gather(&a, q, ws, wsn, p1, ps, o1);
    ig_gather_attn b = a;
    b.k_base = b.v_base = NULL;
    b.enc = c.enc;
    b.enc_bits = c.bits;
    b.enc_group = c.group;
    b.k_enc = ke;
    b.v_enc = ve;
    b.enc_row_bytes = rb;
    ig_cpu_attention_gather(&b, q, ws, wsn, p2, ps, o2);
    int same = memcmp(o1, o2, (size_t)H * hd * 4) == 0;
    for (int h = 0; h < H; h++) {
        int64_t n = nsel[h / (H / G)] + n_extra;
        same = same && memcmp(p1 + h * ps, p2 + h * ps, (size_t)n * 4) == 0;
    }
    if (!same)
        printf("\n  encoded rows differ: H %d G %d hd %d enc %d bits %d group %d extra %d\n", H, G,
               hd, (int)c.enc, c.bits, c.group, n_extra);
    CU_ASSERT(same);
    ig_ref_attention_gather(&b, q, NULL, 0, o3);
    double worst = 0;
    for (int i = 0; i < H * hd; i++) worst = fmax(worst, fabs((double)o2[i] - (double)o3[i]));
    CU_ASSERT(worst < 1e-4);
    free(src);
    free(dec);
    free(enc);
    free(idx);
    free(ex);
    free(q);
    free(o1);
    free(o2);
    free(o3);
    free(p1);
    free(p2);
    free(ws);
}

static void test_attention_gather_encoded(void) {
    ig_rng r;
    ig_rng_seed(&r, 31);
    static const enc_case cases[] = {
        {9, 3, 64, IG_ROWS_KVQ, 4, 64},  /* int4's default on SmolLM2: decoded in registers */
        {9, 3, 64, IG_ROWS_KVQ, 8, 32},  /* two groups per row */
        {9, 3, 64, IG_ROWS_KVQ, 2, 16},  /* four groups per row */
        {9, 3, 64, IG_ROWS_KVQ, 4, 8},   /* groups under 16 values: through the row decoder */
        {9, 3, 64, IG_ROWS_F16, 0, 0},   /* f16 rows */
        {8, 8, 128, IG_ROWS_KVQ, 4, 64}, /* OPT's head size, MHA */
        {8, 8, 128, IG_ROWS_F16, 0, 0},
        {4, 2, 128, IG_ROWS_KVQ, 4, 32}, /* a group of 2 heads of 128 */
        {16, 2, 64, IG_ROWS_F16, 0, 0},  /* a group of 8: too many registers, head by head */
        {6, 2, 96, IG_ROWS_F16, 0, 0},   /* AVX2: 12 vectors a row, output in 8 + 4 */
        {6, 3, 32, IG_ROWS_KVQ, 4, 32},  /* AVX2: 4 vectors a row */
        {4, 2, 48, IG_ROWS_KVQ, 4, 16},  /* head size with no register path */
        {4, 2, 48, IG_ROWS_F16, 0, 0},
    };
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int th = 1; th <= 2; th++) {
            ig_cpu_set_threads(th);
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                for (int ne = 0; ne <= 2; ne += 2) check_gather_enc(&r, cases[i], ne);
        }
    }
    restore_defaults();
}

/* ---- KV quantization ---------------------------------------------------------------------------
 */

static void test_kvq_layout(void) {
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(64, 8, 64), 68);
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(64, 4, 64), 36);
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(64, 2, 64), 20);
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(128, 4, 32), 4 * (4 + 16));
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(12, 2, 4), 3 * (4 + 1));
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(64, 3, 64), 0); /* bits */
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(64, 4, 48), 0); /* group does not divide hd */
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(6, 2, 3), 0);   /* 3 x 2 bits: not whole bytes */
    CU_ASSERT_EQUAL(ig_kvq_row_bytes(64, 4, 0), 0);
    /* Hand-made rows, every byte checked, at every level. 4 bits, two groups of 8: group 0 spans
     * 0..15 (min 0, scale 1: codes are the values), group 1 spans -8..-1 (min -8 = 0xc800, scale
     * 7/15 rounded up to f16 0x3778 = 0.466796875). */
    static const float x4[16] = {0, 15, 1, 14, 2, 13, 3, 12, -8, -1, -8, -1, -8, -1, -8, -1};
    static const uint8_t e4[24] = {0x00, 0x00, 0x00, 0x3c, 0xf0, 0xe1, 0xd2, 0xc3,
                                   0x00, 0xc8, 0x78, 0x37, 0xf0, 0xf0, 0xf0, 0xf0};
    /* 2 bits: -1..2 with scale 1: codes 0 1 2 3 3 2 1 0, low bits first. */
    static const float x2[8] = {-1, 0, 1, 2, 2, 1, 0, -1};
    static const uint8_t e2[6] = {0x00, 0xbc, 0x00, 0x3c, 0xe4, 0x1b};
    /* 8 bits: min 10 (0x4900), scale 0.5 (0x3800); 10.75 -> 1.5 -> 2 and 73.75 -> 127.5 -> 128
     * (ties to even). */
    static const float x8[4] = {10, 137.5f, 10.75f, 73.75f};
    static const uint8_t e8[8] = {0x00, 0x49, 0x00, 0x38, 0x00, 0xff, 0x02, 0x80};
    for (int l = 0; l < N_LEVELS; l++) {
        if (ig_cpu_set_simd(k_levels[l]) != 0) continue;
        uint8_t b[40];
        float y[16];
        memset(b, 0xa5, sizeof b);
        ig_kvq_quantize_rows(x4, 1, 16, 4, 8, b);
        CU_ASSERT(memcmp(b, e4, 16) == 0);
        CU_ASSERT(b[16] == 0xa5);
        ig_kvq_dequantize_rows(b, 1, 16, 4, 8, y);
        for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(y[i], x4[i]);
        CU_ASSERT_EQUAL(y[8], -8.0f);
        CU_ASSERT_EQUAL(y[9], (float)(-8.0 + 15 * 0.466796875));
        memset(b, 0xa5, sizeof b);
        ig_kvq_quantize_rows(x2, 1, 8, 2, 8, b);
        CU_ASSERT(memcmp(b, e2, 6) == 0);
        CU_ASSERT(b[6] == 0xa5);
        ig_kvq_dequantize_rows(b, 1, 8, 2, 8, y);
        CU_ASSERT(memcmp(y, x2, sizeof x2) == 0);
        memset(b, 0xa5, sizeof b);
        ig_kvq_quantize_rows(x8, 1, 4, 8, 4, b);
        CU_ASSERT(memcmp(b, e8, 8) == 0);
        ig_kvq_dequantize_rows(b, 1, 4, 8, 4, y);
        CU_ASSERT_EQUAL(y[2], 11.0f);
        CU_ASSERT_EQUAL(y[3], 74.0f);
        /* A constant f16 value: scale 0, exact. A constant non-f16 value: min rounded down, a
         * tiny scale, error within half of it. */
        float c3[64], c01[64];
        for (int i = 0; i < 64; i++) c3[i] = 3.0f, c01[i] = 0.1f;
        ig_kvq_quantize_rows(c3, 1, 64, 4, 64, b);
        CU_ASSERT(b[0] == 0x00 && b[1] == 0x42 && b[2] == 0 && b[3] == 0);
        float yc[64];
        ig_kvq_dequantize_rows(b, 1, 64, 4, 64, yc);
        CU_ASSERT(memcmp(yc, c3, sizeof c3) == 0);
        uint8_t bc[36];
        ig_kvq_quantize_rows(c01, 1, 64, 4, 64, bc);
        CU_ASSERT(bc[0] == 0x66 && bc[1] == 0x2e); /* 0.0999755859375: 0.1 rounded down */
        float s = ig_f16_to_f32((uint16_t)(bc[2] | bc[3] << 8));
        ig_kvq_dequantize_rows(bc, 1, 64, 4, 64, yc);
        CU_ASSERT(s > 0 && s < 1e-5f);
        CU_ASSERT(fabsf(yc[0] - 0.1f) <= 0.5f * s * 1.0001f);
    }
    restore_defaults();
}

/* Random rows of many kinds: bytes and decoded values equal to the reference at every level, and
 * the error bound of kvquant.h against the (f16-range clamped) input. */
static void check_kvq(ig_rng *r, int64_t n_rows, int hd, int bits, int group, int kind,
                      double *worst_ratio) {
    int64_t n = n_rows * hd;
    size_t rb = ig_kvq_row_bytes(hd, bits, group), nb = (size_t)n_rows * rb;
    float *x = malloc(n * 4), *y_ref = malloc(n * 4), *y = galloc(n);
    uint8_t *q_ref = malloc(nb + 1), *q = malloc(nb + 64);
    CU_ASSERT_FATAL(x && y_ref && q_ref && q && rb > 0);
    /* kind 0 symmetric, 1 narrow and offset, 2 huge range, 3 all negative, 4 an outlier per row,
     * 5 the f16 subnormal range, 6 constant rows, 7 some NaN (encoded as -65504), 8 beyond the
     * f16 range (clamped) */
    for (int64_t i = 0; i < n; i++) {
        float u = frand(r, -1, 1);
        if (kind == 0) x[i] = u;
        if (kind == 1) x[i] = 1000.0f + 0.01f * u;
        if (kind == 2) x[i] = 60000.0f * u;
        if (kind == 3) x[i] = -5.0f - 3.0f * fabsf(u);
        if (kind == 4) x[i] = (i % hd == 3) ? 200.0f : 0.5f * u;
        if (kind == 5) x[i] = 1e-6f * u;
        if (kind == 6) x[i] = (i / hd) % 3 ? 0.3f : -2.0f;
        if (kind == 7) x[i] = i % 29 == 5 ? NAN : u;
        if (kind == 8) x[i] = u * 1e5f;
    }
    ig_ref_kvq_quantize_rows(x, n_rows, hd, bits, group, q_ref);
    ig_ref_kvq_dequantize_rows(q_ref, n_rows, hd, bits, group, y_ref);
    int L = (1 << bits) - 1, bad_bound = 0, bad_scale = 0;
    for (int64_t row = 0; row < n_rows; row++)
        for (int b = 0; b < hd / group; b++) {
            const uint8_t *blk = q_ref + (size_t)row * rb + (size_t)b * (4 + group * bits / 8);
            double s = ig_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
            double lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < group; i++) {
                double xc = fmin(fmax(x[row * hd + b * group + i], -65504.0), 65504.0);
                lo = fmin(lo, xc);
                hi = fmax(hi, xc);
                double yv = y_ref[row * hd + b * group + i];
                double bound = s * (0.5 + 4.0 * L * 0x1p-24) + 0x1p-24 * fabs(yv) + 1e-40;
                double e = fabs(yv - xc);
                if (!(e <= bound)) bad_bound++;
                if (s > 0) *worst_ratio = fmax(*worst_ratio, e / s);
            }
            double u_lo = fmax(fabs(lo) * 0x1p-10, 0x1p-24);
            if (!(s <= ((hi - lo) + u_lo) / L * (1 + 0x1p-9) + 0x1p-24)) bad_scale++;
        }
    CU_ASSERT_EQUAL(bad_bound, 0);
    CU_ASSERT_EQUAL(bad_scale, 0);
    int bytes_ok = 1, vals_ok = 1, guard_ok = 1;
    for (int l = 0; l < N_LEVELS; l++) {
        if (ig_cpu_set_simd(k_levels[l]) != 0) continue;
        memset(q, 0x5a, nb + 64);
        ig_kvq_quantize_rows(x, n_rows, hd, bits, group, q);
        bytes_ok &= memcmp(q, q_ref, nb) == 0;
        guard_ok &= q[nb] == 0x5a && q[nb + 63] == 0x5a;
        ig_kvq_dequantize_rows(q_ref, n_rows, hd, bits, group, y);
        vals_ok &= memcmp(y, y_ref, n * 4) == 0;
        guard_ok &= gintact(y, n);
        /* one row at a time (a kernel's inner loop), and the row loop called from inside a
         * parallel region (no nested one: the same values) */
        memset(y, 0, (size_t)n * 4);
        for (int64_t row = 0; row < n_rows; row++)
            ig_kvq_dequantize_row(q_ref + (size_t)row * rb, hd, bits, group, y + row * hd);
        vals_ok &= memcmp(y, y_ref, n * 4) == 0;
        memset(y, 0, (size_t)n * 4);
#pragma omp parallel num_threads(2)
        {
#pragma omp single
            ig_kvq_dequantize_rows(q_ref, n_rows, hd, bits, group, y);
        }
        vals_ok &= memcmp(y, y_ref, n * 4) == 0;
        guard_ok &= gintact(y, n);
    }
    ig_cpu_set_simd(NULL);
    CU_ASSERT(bytes_ok && vals_ok && guard_ok);
    if (!(bytes_ok && vals_ok && guard_ok && !bad_bound && !bad_scale))
        printf("\n  kvq rows=%ld hd=%d bits=%d group=%d kind=%d: bytes=%d vals=%d guard=%d "
               "bound=%d scale=%d\n",
               (long)n_rows, hd, bits, group, kind, bytes_ok, vals_ok, guard_ok, bad_bound,
               bad_scale);
    free(x);
    free(y_ref);
    gfree(y);
    free(q_ref);
    free(q);
}

static void test_kvq_roundtrip(void) {
    ig_rng r;
    ig_rng_seed(&r, 13);
    static const int shapes[][2] = {{64, 64}, {64, 32}, {64, 16}, {128, 64}, {48, 24}, {40, 8}};
    static const int bits[] = {8, 4, 2};
    double worst[3] = {0, 0, 0};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int b = 0; b < 3; b++)
            for (int kind = 0; kind < 9; kind++)
                check_kvq(&r, 7, shapes[s][0], bits[b], shapes[s][1], kind, &worst[b]);
    /* Long calls go over the threads. */
    ig_cpu_set_threads(2);
    for (int b = 0; b < 3; b++) check_kvq(&r, 3001, 64, bits[b], 64, 0, &worst[b]);
    restore_defaults();
    printf("\n  kvq: worst |y - x| / scale: 8 bits %.6f, 4 bits %.6f, 2 bits %.6f\n", worst[0],
           worst[1], worst[2]);
    for (int b = 0; b < 3; b++) CU_ASSERT(worst[b] <= 0.5 + 4.0 * 255 * 0x1p-24 && worst[b] > 0.4);
}

/* ---- token selection ---------------------------------------------------------------------------
 */

static void test_topk(void) {
    ig_rng r;
    ig_rng_seed(&r, 16);
    static const int64_t ns[] = {1, 2, 3, 10, 33, 100, 4096, 10007};
    int bad = 0, guards = 1, cases = 0;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (int kind = 0; kind < 6; kind++) {
            int64_t n = ns[ni];
            float *s = malloc((size_t)n * 4);
            /* kind 0 uniform, 1 heavy ties (and -0 / +0), 2 a narrow cluster (deep levels), 3 all
             * equal, 4 two scales, 5 NaN and infinities */
            for (int64_t i = 0; i < n; i++) {
                float u = frand(&r, -1, 1);
                if (kind == 0) s[i] = u;
                if (kind == 1) s[i] = (float)(int)(u * 5);
                if (kind == 2) s[i] = 1.0f + u * 1e-6f;
                if (kind == 3) s[i] = 7.5f;
                if (kind == 4) s[i] = i % 2 ? 3.0f + u * 1e-7f : -1e30f * u;
                if (kind == 5)
                    s[i] = i % 7 == 0 ? NAN : i % 11 == 0 ? -INFINITY : i % 13 == 0 ? INFINITY : u;
            }
            if (kind == 1 && n > 2) s[1] = -0.0f, s[2] = 0.0f;
            int64_t kvals[] = {0, 1, 2, n / 5, n / 2, n - 1, n, n + 3, 819};
            size_t wsb = ig_cpu_topk_ws_bytes(n);
            float *ws = galloc((int64_t)(wsb / 4));
            for (size_t ki = 0; ki < sizeof kvals / sizeof kvals[0]; ki++) {
                int64_t k = kvals[ki];
                int64_t m = k < n ? (k > 0 ? k : 0) : n;
                int32_t *ref = malloc((size_t)(m + 1) * 4);
                int64_t got_ref = ig_ref_topk(s, n, k, ref);
                for (int l = 0; l < N_LEVELS; l++) {
                    if (ig_cpu_set_simd(k_levels[l]) != 0) continue;
                    float *outf = galloc(m); /* int32 results in a guarded buffer of 4-byte words */
                    int32_t *out = (int32_t *)(void *)outf;
                    int64_t got = ig_cpu_topk(s, n, k, out, ws, wsb);
                    bad += got != m || got_ref != m || memcmp(out, ref, (size_t)m * 4) != 0;
                    guards &= gintact(outf, m);
                    gfree(outf);
                    cases++;
                }
                free(ref);
            }
            guards &= gintact(ws, (int64_t)(wsb / 4));
            gfree(ws);
            free(s);
        }
    restore_defaults();
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(guards);
    CU_ASSERT(cases > 0);
    CU_ASSERT_EQUAL(ig_cpu_topk_ws_bytes(4096), (2048 + 2 * 4096) * 4);
    /* Hand case: ties go to the lower index; output in index order. */
    float h[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    int32_t idx[8];
    uint32_t ws[2048 + 16];
    CU_ASSERT_EQUAL(ig_cpu_topk(h, 8, 3, idx, ws, sizeof ws), 3);
    CU_ASSERT(idx[0] == 4 && idx[1] == 5 && idx[2] == 7);
    CU_ASSERT_EQUAL(ig_cpu_topk(h, 8, 7, idx, ws, sizeof ws), 7);
    CU_ASSERT(idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[6] == 7); /* the later 1 is out */
    CU_ASSERT(idx[3] == 4);
}

/* ---- sampling ----------------------------------------------------------------------------------
 */

static void test_rng(void) {
    ig_rng a, b;
    ig_rng_seed(&a, 42);
    ig_rng_seed(&b, 42);
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= ig_rng_next(&a) == ig_rng_next(&b);
    CU_ASSERT(same);
    ig_rng_seed(&b, 43);
    CU_ASSERT(ig_rng_next(&a) != ig_rng_next(&b));
    /* splitmix64(0) is the published 0xe220a8397b1dcdaf: the first state word for seed 0. */
    ig_rng_seed(&a, 0);
    CU_ASSERT_EQUAL(a.s[0], 0xe220a8397b1dcdafull);
    double sum = 0, lo = 1, hi = 0;
    for (int i = 0; i < 100000; i++) {
        double u = ig_rng_uniform(&a);
        sum += u;
        lo = fmin(lo, u);
        hi = fmax(hi, u);
    }
    CU_ASSERT(lo >= 0.0 && hi < 1.0);
    IG_ASSERT_NEAR(sum / 100000, 0.5, 0.005);
}

static void test_argmax(void) {
    float a[6] = {1, 5, 3, 5, -2, 5};
    CU_ASSERT_EQUAL(ig_sample_argmax(a, 6), 1);
    CU_ASSERT_EQUAL(ig_ref_sample_argmax(a, 6), 1);
    float b[4] = {NAN, -1, 2, NAN};
    CU_ASSERT_EQUAL(ig_sample_argmax(b, 4), 2);
    float c[3] = {-INFINITY, -INFINITY, -3};
    CU_ASSERT_EQUAL(ig_sample_argmax(c, 3), 2);
    ig_rng r;
    ig_rng_seed(&r, 1);
    float ws[6];
    int32_t idx[6];
    CU_ASSERT_EQUAL(ig_sample(a, 6, 0.0f, 0.9f, &r, ws, idx), 1);  /* T = 0: argmax */
    CU_ASSERT_EQUAL(ig_sample(a, 6, -1.0f, 0.9f, &r, ws, idx), 1); /* T < 0 too */
}

static void test_sample_matches_reference(void) {
    ig_rng r;
    ig_rng_seed(&r, 9);
    const int64_t n = 5003;
    float *logits = malloc(n * 4), *ws = malloc(n * 4);
    int32_t *idx = malloc(n * 4);
    static const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
    static const float tops[] = {1e-9f, 0.1f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f};
    int mismatches = 0, trials = 0;
    for (int rep = 0; rep < 6; rep++) {
        fill(&r, logits, n, -10.0f, 10.0f + (float)rep);
        for (int64_t i = 0; i < n; i += 50) logits[i] = logits[(i * 31) % n]; /* ties */
        for (size_t ti = 0; ti < 4; ti++)
            for (size_t pi = 0; pi < 7; pi++) {
                ig_rng a, b;
                ig_rng_seed(&a, (uint64_t)(rep * 100 + ti * 10 + pi));
                b = a;
                for (int d = 0; d < 10; d++) {
                    int32_t x = ig_sample(logits, n, temps[ti], tops[pi], &a, ws, idx);
                    int32_t y = ig_ref_sample(logits, n, temps[ti], tops[pi], &b);
                    mismatches += x != y;
                    trials++;
                    if (tops[pi] < 1e-6f) mismatches += x != ig_sample_argmax(logits, n);
                }
            }
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT(trials == 6 * 4 * 7 * 10);
    /* Same seed, same sequence. */
    ig_rng a, b;
    ig_rng_seed(&a, 77);
    ig_rng_seed(&b, 77);
    int same = 1;
    for (int i = 0; i < 200; i++)
        same &= ig_sample(logits, n, 0.8f, 0.9f, &a, ws, idx) ==
                ig_sample(logits, n, 0.8f, 0.9f, &b, ws, idx);
    CU_ASSERT(same);
    free(logits);
    free(ws);
    free(idx);
}

/* A distribution with known answers: p = (0.5, 0.25, 0.125, 0.0625, 0.0625). */
static void sample_freqs(float top_p, float T, int draws, double *freq) {
    float logits[5];
    static const double p[5] = {0.5, 0.25, 0.125, 0.0625, 0.0625};
    for (int i = 0; i < 5; i++) logits[i] = (float)log(p[i]);
    float ws[5];
    int32_t idx[5];
    ig_rng r;
    ig_rng_seed(&r, 2024);
    int count[5] = {0};
    for (int i = 0; i < draws; i++) count[ig_sample(logits, 5, T, top_p, &r, ws, idx)]++;
    for (int i = 0; i < 5; i++) freq[i] = (double)count[i] / draws;
}

static void test_sample_distribution(void) {
    const int N = 20000;
    double f[5];
    /* All tokens: frequencies within 5 standard deviations (sqrt(p(1-p)/N) <= 0.0036). */
    sample_freqs(1.0f, 1.0f, N, f);
    static const double p[5] = {0.5, 0.25, 0.125, 0.0625, 0.0625};
    for (int i = 0; i < 5; i++) IG_ASSERT_NEAR(f[i], p[i], 5 * sqrt(p[i] * (1 - p[i]) / N));
    /* top_p = 0.7: tokens 0, 1 (mass before token 2 is 0.75 >= 0.7), renormalised 2/3, 1/3. */
    sample_freqs(0.7f, 1.0f, N, f);
    IG_ASSERT_NEAR(f[0], 2.0 / 3, 5 * sqrt(2.0 / 9 / N));
    IG_ASSERT_NEAR(f[1], 1.0 / 3, 5 * sqrt(2.0 / 9 / N));
    CU_ASSERT(f[2] == 0.0 && f[3] == 0.0 && f[4] == 0.0);
    /* top_p = 0.8: tokens 0, 1, 2 (mass before token 3 is 0.875). */
    sample_freqs(0.8f, 1.0f, N, f);
    IG_ASSERT_NEAR(f[2], 1.0 / 7, 5 * sqrt(1.0 / 7 * 6 / 7 / N));
    CU_ASSERT(f[3] == 0.0 && f[4] == 0.0);
    /* top_p = 0.4: the most likely token only. */
    sample_freqs(0.4f, 1.0f, N, f);
    CU_ASSERT(f[0] == 1.0);
    /* T = 2 flattens: p ~ sqrt(p) = (0.7071, 0.5, 0.3536, 0.25, 0.25) / 2.0607 */
    sample_freqs(1.0f, 2.0f, N, f);
    double z = sqrt(0.5) + 0.5 + sqrt(0.125) + 0.25 + 0.25;
    IG_ASSERT_NEAR(f[0], sqrt(0.5) / z, 0.018);
    IG_ASSERT_NEAR(f[3], 0.25 / z, 0.012);
    /* Ties: four equal logits, top_p 0.3 keeps the two lowest indices, 0.2 only index 0. */
    float eq[4] = {1, 1, 1, 1}, ws[4];
    int32_t idx[4];
    ig_rng r;
    ig_rng_seed(&r, 5);
    int c[4] = {0};
    for (int i = 0; i < 2000; i++) c[ig_sample(eq, 4, 1.0f, 0.3f, &r, ws, idx)]++;
    CU_ASSERT(c[0] > 800 && c[1] > 800 && c[2] == 0 && c[3] == 0);
    int only0 = 1;
    for (int i = 0; i < 200; i++) only0 &= ig_sample(eq, 4, 1.0f, 0.2f, &r, ws, idx) == 0;
    CU_ASSERT(only0);
}

/* ---- measurement -------------------------------------------------------------------------------
 */

static void test_measure(void) {
    double bw = ig_cpu_measure_bandwidth_gbps(16u << 20, 0, 2);
    double cp = ig_cpu_measure_copy_bandwidth_gbps(16u << 20, 1, 1);
    double gf = ig_cpu_measure_sgemm_gflops(64, 64, 64, 2);
    printf("\n  (sanity only) read %.1f GB/s, copy %.1f GB/s, sgemm 64^3 %.1f GFLOP/s\n", bw, cp,
           gf);
    /* rates, not speeds: a busy machine may make any of them small, never zero or absurd */
    CU_ASSERT(bw > 0 && bw < 1e5);
    CU_ASSERT(cp > 0 && cp < 1e5);
    CU_ASSERT(gf > 0 && gf < 1e6);
    /* the decode kernels at a small GQA shape; a shape they cannot run gives 0, never a rate */
    double a32 = ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, 1, 0, 3);
    double a4 = ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, 1, 4, 3);
    double sel = ig_cpu_measure_select_gbps(4, 2, 7, 4, 300, 0.2, 3);
    CU_ASSERT(a32 > 0 && a32 < 1e5);
    CU_ASSERT(a4 > 0 && a4 < 1e5);
    double asp = ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, 5, 0, 3);
    CU_ASSERT(asp > 0 && asp < 1e5);
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, 301, 0, 1), 0.0); /* stride */
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, -1, 0, 1), 0.0);
    /* stride 0: the dense kernel over contiguous f32 rows; not over codes */
    double adn = ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, 0, 0, 3);
    CU_ASSERT(adn > 0 && adn < 1e5);
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, 0, 4, 1), 0.0);
    CU_ASSERT(sel > 0 && sel < 1e5);
    /* with the probabilities a scoring policy sums: a rate at the shapes the plain probe takes */
    double apr = ig_cpu_measure_attention_probs_gbps(4, 2, 32, 4, 300, 3);
    CU_ASSERT(apr > 0 && apr < 1e5);
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_probs_gbps(4, 3, 32, 4, 300, 1), 0.0);
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_probs_gbps(4, 2, 32, 0, 300, 1), 0.0);
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_gbps(4, 3, 32, 4, 300, 1, 0, 1), 0.0); /* 4 % 3 */
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_gbps(4, 2, 32, 4, 300, 1, 3, 1), 0.0); /* 3-bit */
    CU_ASSERT_EQUAL(ig_cpu_measure_attention_gbps(4, 2, 96, 4, 300, 1, 4, 1), 0.0); /* 96 % 64 */
    CU_ASSERT_EQUAL(ig_cpu_measure_select_gbps(34, 2, 7, 4, 300, 0.2, 1), 0.0); /* 17 per group */
    CU_ASSERT_EQUAL(ig_cpu_measure_select_gbps(4, 2, 7, 4, 300, 0.0, 1), 0.0);
    /* a minimum time: the probe's timed passes fill it (a lower bound on the call's time, which a
     * busy machine only lengthens), and the rate stays a rate; 0 restores reps passes only. The
     * passes stop at 1024 whatever the time, so each reads 8 MiB (16 sequences x 1024 rows): 1024
     * of them take 0.05 s unless the kernel reads faster than 160 GB/s */
    ig_cpu_measure_set_min_seconds(0.05);
    double t0 = ig_time_s();
    double slow = ig_cpu_measure_attention_gbps(4, 2, 32, 16, 1024, 1, 0, 1);
    double took = ig_time_s() - t0;
    ig_cpu_measure_set_min_seconds(0);
    CU_ASSERT(took >= 0.05);
    CU_ASSERT(slow > 0 && slow < 1e5);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("kernels", NULL, NULL);
    CU_add_test(s, "simd_levels", test_simd_levels);
    CU_add_test(s, "linear", test_linear);
    CU_add_test(s, "linear_degenerate", test_linear_degenerate);
    CU_add_test(s, "embed", test_embed);
    CU_add_test(s, "widen_exhaustive", test_widen_exhaustive);
    CU_add_test(s, "norms", test_norms);
    CU_add_test(s, "rope", test_rope);
    CU_add_test(s, "activations", test_activations);
    CU_add_test(s, "softmax", test_softmax);
    CU_add_test(s, "attention", test_attention);
    CU_add_test(s, "attention_hand", test_attention_hand);
    CU_add_test(s, "attention_rows", test_attention_rows);
    CU_pSuite kv = CU_add_suite("kv_policy_kernels", NULL, NULL);
    CU_add_test(kv, "attention_colsum", test_attention_colsum);
    CU_add_test(kv, "attention_rows_t", test_attention_rows_t);
    CU_add_test(kv, "attention_gather_encoded", test_attention_gather_encoded);
    CU_add_test(kv, "kvq_layout", test_kvq_layout);
    CU_add_test(kv, "kvq_roundtrip", test_kvq_roundtrip);
    CU_add_test(kv, "topk", test_topk);
    CU_add_test(s, "rng", test_rng);
    CU_add_test(s, "argmax", test_argmax);
    CU_add_test(s, "sample_matches_reference", test_sample_matches_reference);
    CU_add_test(s, "sample_distribution", test_sample_distribution);
    CU_add_test(s, "measure", test_measure);
}
