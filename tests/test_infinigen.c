/* InfiniGen: the skewing rotation (orthogonal, q.k unchanged), the decision rules on hand-made
 * numbers (threshold count, shared count, top-n, pool victims), the policy's selection against an
 * independent computation of the rule, the pool's counters driven by the policy's own selections,
 * the skew file (round trip, rejection of another model's file), and calibration on the tiny Llama
 * and OPT fixtures, through the library and through `igen calibrate`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/engine/engine.h"
#include "core/model/io/safetensors.h"
#include "core/model/model.h"
#include "kernels/cpu/attention_gather.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ref.h"
#include "policies/infinigen.h"
#include "core/engine/calibrate.h"
#include "policies/infinigen_skew.h"
#include "policies/policy.h"
#include "tests/failing_table.h"
#include "tests/test_util.h"

/* ---- helpers ---- */

static uint64_t g_rng = 88172645463325252ull;
static double urand(void) { /* [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / (double)(1ull << 52) - 1.0;
}

static const char *g_fixtures[2] = {"tiny_llama", "tiny_opt"};
static ig_model *g_models[2];
static ig_policy_wq g_wq[2][64]; /* each model's W_q as the engine hands it in */
static ig_be *g_cpu_be;          /* the cpu backend table */
static ig_be *g_policy_be;       /* what policy_open hands the policy: NULL, or g_cpu_be */
static ig_safetensors *g_refs[2];
static char g_skew_path[2][4300];

static const int32_t *ref_tokens(int mi, const char *name, int *n) {
    const ig_st_tensor *t = ig_safetensors_find(g_refs[mi], name);
    if (!t) return NULL;
    *n = (int)t->shape[0];
    return t->data;
}

static int suite_init(void) {
    ig_error berr;
    if (ig_be_cpu_create(&g_cpu_be, &berr) != IG_OK) return 1;
    for (int i = 0; i < 2; i++) {
        ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_AUTO};
        ig_error err;
        if (ig_model_load(ig_test_fixture(g_fixtures[i]), &o, &g_models[i], &err) != IG_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        const ig_model_config *mc = ig_model_get_config(g_models[i]);
        if (mc->n_layer > 64) return 1;
        for (int l = 0; l < mc->n_layer; l++) {
            const ig_layer *ly = ig_model_layer(g_models[i], l);
            g_wq[i][l] =
                (ig_policy_wq){ly->wq.data, ly->wq.dtype, ly->wq.rows, ly->wq.cols, ly->bq};
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/reference.safetensors", ig_test_fixture(g_fixtures[i]));
        if (ig_safetensors_open(path, &g_refs[i], &err) != IG_OK) return 1;
        /* a skew file per fixture, calibrated on its longest reference sequence */
        int n = 0;
        const int32_t *ids = ref_tokens(i, "tokens_3", &n);
        ig_skew *s = NULL;
        if (!ids || ig_calibrate_skew(g_models[i], ids, n, 16, 2, NULL, NULL, &s, &err) != IG_OK) {
            fprintf(stderr, "calibrate: %s\n", err.msg);
            return 1;
        }
        snprintf(g_skew_path[i], sizeof g_skew_path[i], "%s/%s.skew", ig_test_tmpdir(),
                 g_fixtures[i]);
        ig_status rc = ig_skew_save(s, g_skew_path[i], &err);
        ig_skew_free(s);
        if (rc != IG_OK) return 1;
    }
    return 0;
}

static int suite_clean(void) {
    ig_be_free(g_cpu_be);
    for (int i = 0; i < 2; i++) {
        ig_model_free(g_models[i]);
        ig_safetensors_close(g_refs[i]);
    }
    return 0;
}

/* ---- the rotation ---- */

static void test_eigen_orthogonal(void) {
    const int sizes[] = {5, 16, 64};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int n = sizes[si];
        size_t N = (size_t)n;
        double *a = malloc(N * N * sizeof(double)), *a0 = malloc(N * N * sizeof(double));
        double *v = malloc(N * N * sizeof(double)), *w = malloc(N * sizeof(double));
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j <= i; j++) a[i * N + j] = a[j * N + i] = urand();
        memcpy(a0, a, N * N * sizeof(double));
        ig_skew_sym_eigen(a, n, w, v);
        double orth = 0, resid = 0;
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++) {
                double d = 0, av = 0;
                for (size_t k = 0; k < N; k++) {
                    d += v[k * N + i] * v[k * N + j];
                    av += a0[i * N + k] * v[k * N + j];
                }
                orth = fmax(orth, fabs(d - (i == j)));
                resid = fmax(resid, fabs(av - w[j] * v[i * N + j]));
            }
        int sorted = 1;
        for (size_t i = 1; i < N; i++) sorted &= w[i - 1] >= w[i];
        printf("\n    n=%d: |V^T V - I| %.2g, |A V - V L| %.2g", n, orth, resid);
        CU_ASSERT(orth < 1e-12);
        CU_ASSERT(resid < 1e-10);
        CU_ASSERT(sorted);
        free(a);
        free(a0);
        free(v);
        free(w);
    }
    printf("\n    ");
}

/* A from anisotropic Q and K: orthogonal, q.k unchanged, a known basis recovered. */
static void test_rotation_preserves_qk(void) {
    enum { HD = 16, NR = 200 };
    static float q[NR][HD], k[NR][HD], A[HD * HD];
    double gq[HD * HD] = {0}, gk[HD * HD] = {0};
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < HD; c++) {
            q[r][c] = (float)(urand() * (1.0 + 3.0 * (c % 5)));
            k[r][c] = (float)(urand() * (1.0 + (c % 3)));
        }
    for (int r = 0; r < NR; r++)
        for (int i = 0; i < HD; i++)
            for (int j = 0; j < HD; j++) {
                gq[i * HD + j] += (double)q[r][i] * q[r][j];
                gk[i * HD + j] += (double)k[r][i] * k[r][j];
            }
    float sq[HD], sk[HD];
    ig_skew_rotation_from_gram(gq, gk, HD, A, sq, sk);
    double orth = 0;
    for (int i = 0; i < HD; i++)
        for (int j = 0; j < HD; j++) {
            double d = 0;
            for (int r = 0; r < HD; r++) d += (double)A[r * HD + i] * A[r * HD + j];
            orth = fmax(orth, fabs(d - (i == j)));
        }
    double worst = 0;
    for (int a = 0; a < 20; a++)
        for (int b = 0; b < 20; b++) {
            float qa[HD] = {0}, kb[HD] = {0};
            for (int c = 0; c < HD; c++)
                for (int r = 0; r < HD; r++) {
                    qa[c] += q[a][r] * A[r * HD + c];
                    kb[c] += k[b][r] * A[r * HD + c];
                }
            double d0 = 0, d1 = 0, norm = 0, nk = 0;
            for (int c = 0; c < HD; c++) {
                d0 += (double)q[a][c] * k[b][c];
                d1 += (double)qa[c] * kb[c];
                norm += (double)q[a][c] * q[a][c];
                nk += (double)k[b][c] * k[b][c];
            }
            worst = fmax(worst, fabs(d1 - d0) / sqrt(norm * nk));
        }
    printf("\n    |A^T A - I| %.2g, max |qA.kA - q.k| / |q||k| %.2g", orth, worst);
    CU_ASSERT(orth < 1e-5);
    CU_ASSERT(worst < 1e-5);
    for (int i = 1; i < HD; i++) CU_ASSERT(sq[i - 1] >= sq[i] && sk[i - 1] >= sk[i]);

    /* Axis-aligned data with distinct variances: A is a signed permutation that orders the axes by
     * decreasing spread of Q. */
    double dq[HD * HD] = {0}, dk[HD * HD] = {0};
    for (int i = 0; i < HD; i++) {
        dq[i * HD + i] = 1.0 + (double)((i * 7) % HD); /* axis 7^-1 ... largest */
        dk[i * HD + i] = 1.0;
    }
    ig_skew_rotation_from_gram(dq, dk, HD, A, sq, NULL);
    int perm_ok = 1;
    for (int c = 0; c < HD; c++) {
        int axis = -1;
        for (int r = 0; r < HD; r++)
            if (fabsf(A[r * HD + c]) > 0.999f) axis = r;
        if (axis < 0 || fabs(sq[c] - sqrt(1.0 + (double)((axis * 7) % HD))) > 1e-5) perm_ok = 0;
        if (c > 0 && !(sq[c - 1] > sq[c])) perm_ok = 0;
    }
    CU_ASSERT(perm_ok);
    printf("\n    ");
}

/* ---- the partial-score kernel: every SIMD level against the double reference ---- */

static void test_partial_scores_kernel(void) {
    enum { LD = 200, KC = 24, NQ = 7 };
    static float kf[KC * LD], q[NQ * KC], out[NQ * LD], ref[NQ * LD], cm[LD], cref[LD];
    static uint16_t kh[KC * LD];
    for (int i = 0; i < KC * LD; i++) {
        kf[i] = (float)(3 * urand());
        kh[i] = ig_f32_to_f16(kf[i]);
    }
    for (int i = 0; i < NQ * KC; i++) q[i] = (float)urand();
    const char *levels[] = {"scalar", "avx2", "avx512"};
    const int ns[] = {0, 1, 7, 16, 33, 200};
    for (int li = 0; li < 3; li++) {
        if (ig_cpu_set_simd(levels[li]) != 0) {
            printf("\n    %s: not available here (not checked)", levels[li]);
            continue;
        }
        double worst = 0;
        int max_ok = 1;
        for (int f16 = 0; f16 < 2; f16++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (int nq = 1; nq <= NQ; nq += 3)
                    for (int kc = 1; kc <= KC; kc += 11) {
                        int64_t n = ns[ni];
                        float rm[NQ], rr[NQ];
                        const void *keys = f16 ? (const void *)kh : (const void *)kf;
                        ig_dtype kt = f16 ? IG_DTYPE_F16 : IG_DTYPE_F32;
                        ig_cpu_partial_scores(keys, kt, LD, kc, n, q, KC, nq, out, LD, cm, rm);
                        ig_ref_partial_scores(keys, kt, LD, kc, n, q, KC, nq, ref, LD, cref, rr);
                        for (int h = 0; h < nq; h++) {
                            for (int64_t e = 0; e < n; e++)
                                worst = fmax(worst, fabs(out[h * LD + e] - ref[h * LD + e]));
                            max_ok &=
                                rm[h] == rr[h] || fabsf(rm[h] - rr[h]) <= 1e-4f; /* -inf for n 0 */
                            int64_t c = ig_cpu_count_greater(out + h * LD, n, 0.5f), c2 = 0;
                            int32_t idx[LD], w = 0;
                            int64_t ci = ig_cpu_indices_greater(out + h * LD, n, 0.5f, idx);
                            for (int64_t e = 0; e < n; e++) {
                                if (out[h * LD + e] > 0.5f) max_ok &= w < ci && idx[w++] == e;
                                c2 += out[h * LD + e] > 0.5f;
                            }
                            max_ok &= c == c2 && ci == c2;
                        }
                        for (int64_t e = 0; e < n; e++) max_ok &= fabsf(cm[e] - cref[e]) <= 1e-4f;
                    }
        printf("\n    %-6s max |score - reference| %.2g, maxima and counts %s", levels[li], worst,
               max_ok ? "agree" : "DIFFER");
        CU_ASSERT(worst < 1e-4);
        CU_ASSERT(max_ok);
    }
    ig_cpu_set_simd(NULL);
    printf("\n    ");
}

/* ---- the engine's gather attention (what a sparse selection costs): every SIMD level against the
 * double reference, in place through index lists and contiguous, with the new rows after ---- */

static void test_gather_attention_kernel(void) {
    enum { G = 3, GROUP = 3, H = G * GROUP, ROWS = 700 };
    const int hds[] = {16, 64, 128};
    const char *levels[] = {"scalar", "avx2", "avx512"};
    float *k = malloc((size_t)G * ROWS * 128 * sizeof(float));
    float *v = malloc((size_t)G * ROWS * 128 * sizeof(float));
    float q[H * 128], ek[2 * G * 128], ev[2 * G * 128], out[H * 128], ref[H * 128];
    static float probs[H * (ROWS + 2)], pref[H * (ROWS + 2)];
    static int32_t idx[G][ROWS];
    for (int li = 0; li < 3; li++) {
        if (ig_cpu_set_simd(levels[li]) != 0) continue;
        double worst = 0, worst_p = 0;
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
            int hd = hds[hi];
            for (size_t i = 0; i < (size_t)G * ROWS * (size_t)hd; i++) {
                k[i] = (float)(2 * urand());
                v[i] = (float)urand();
            }
            for (int i = 0; i < H * hd; i++) q[i] = (float)urand();
            for (int i = 0; i < 2 * G * hd; i++) {
                ek[i] = (float)(2 * urand());
                ev[i] = (float)urand();
            }
            const float *kb[G], *vb[G];
            const int32_t *ix[G];
            int64_t nsel[G] = {ROWS / 3, 0, 257};
            for (int g = 0; g < G; g++) {
                kb[g] = k + (size_t)g * ROWS * (size_t)hd;
                vb[g] = v + (size_t)g * ROWS * (size_t)hd;
                for (int j = 0; j < ROWS; j++) idx[g][j] = (int32_t)((j * 7 + g) % ROWS);
                ix[g] = idx[g];
            }
            for (int mode = 0; mode < 2; mode++) /* index lists, then contiguous rows */
                for (int n_extra = 0; n_extra <= 2; n_extra += 2) {
                    ig_gather_attn a = {.n_head = H,
                                        .n_kv_head = G,
                                        .hd = hd,
                                        .scale = 1.0f / sqrtf((float)hd),
                                        .k_base = kb,
                                        .v_base = vb,
                                        .row_stride = (int64_t)hd,
                                        .idx = mode ? NULL : ix,
                                        .n_sel = nsel,
                                        .k_extra = ek,
                                        .v_extra = ev,
                                        .n_extra = n_extra};
                    size_t wsn = ig_cpu_attention_gather_ws_floats(H, ROWS + 2);
                    float *ws = malloc(wsn * sizeof(float));
                    ig_cpu_attention_gather(&a, q, ws, wsn, probs, ROWS + 2, out);
                    ig_ref_attention_gather(&a, q, pref, ROWS + 2, ref);
                    for (int i = 0; i < H * hd; i++)
                        worst = fmax(worst, fabs((double)out[i] - ref[i]));
                    for (int h = 0; h < H; h++)
                        for (int64_t j = 0; j < nsel[h / GROUP] + n_extra; j++)
                            worst_p = fmax(worst_p, fabs((double)probs[h * (ROWS + 2) + j] -
                                                         pref[h * (ROWS + 2) + j]));
                    free(ws);
                }
        }
        printf("\n    %-6s max |out - reference| %.2g, |probs - reference| %.2g", levels[li], worst,
               worst_p);
        CU_ASSERT(worst < 1e-5);
        CU_ASSERT(worst_p < 1e-6);
    }
    ig_cpu_set_simd(NULL);
    free(k);
    free(v);
    printf("\n    ");
}

/* ---- the decision rules on hand-made numbers ---- */

static void test_threshold_count(void) {
    const float s[] = {0.0f, -1.5f, -2.5f, -0.1f, -3.0f, -1.99f, 9.0f, -2.01f};
    const int32_t pos[] = {0, 1, 2, 3, 4, 5, -1, 7}; /* entry 6 is free: its 9.0 does not count */
    float mx;
    CU_ASSERT_EQUAL(ig_infinigen_count_above(s, pos, 8, 2.0f, &mx), 4); /* 0 -1.5 -0.1 -1.99 */
    CU_ASSERT_EQUAL(mx, 0.0f);
    CU_ASSERT_EQUAL(ig_infinigen_count_above(s, pos, 8, 0.05f, &mx), 1);
    CU_ASSERT_EQUAL(ig_infinigen_count_above(s, pos, 8, 0.0f, &mx), 0);  /* strictly above */
    CU_ASSERT_EQUAL(ig_infinigen_count_above(s, NULL, 8, 2.0f, &mx), 1); /* 9 counts when in use */
    CU_ASSERT_EQUAL(mx, 9.0f);
    CU_ASSERT_EQUAL(ig_infinigen_count_above(s, pos, 8, 1000.0f, &mx), 7);
}

static void test_fetch_count(void) {
    /* equal lengths: floor(mean count), capped by floor(max_fetch * n_tokens) */
    double mean = (3 + 5 + 4 + 1) / 4.0 / 100.0; /* counts 3 5 4 1 of 100 entries */
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(mean, 100, 100, 0.2), 3);
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(0.5, 100, 100, 0.2), 20);
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(0.5, 100, 100, 1.0), 50);
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(1.0, 37, 37, 1.0), 37); /* everything */
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(1.0, 30, 50, 1.0), 30); /* pool: <= entries in use */
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(0.0, 10, 10, 0.2), 1);  /* at least one */
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(1.0, 3, 3, 0.2), 1);    /* cap at least one */
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(1.0, 0, 3, 0.2), 0);
    /* a ragged batch shares the fraction: 60% of each sequence's entries */
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(0.6, 10, 10, 1.0), 6);
    CU_ASSERT_EQUAL(ig_infinigen_fetch_count(0.6, 50, 50, 1.0), 30);
}

static void test_top_n(void) {
    const float s[] = {0.5f, 2.0f, -1.0f, 2.0f, 7.0f, 0.5f, 3.0f, 0.5f, 2.0f};
    const int32_t pos[] = {10, 11, 12, 13, -1, 15, 16, 17, 18};
    int32_t out[9];
    float tmp[9];
    CU_ASSERT_EQUAL(ig_infinigen_top_n(s, pos, 9, 1, out, tmp), 1);
    CU_ASSERT_EQUAL(out[0], 6); /* 7.0 is free */
    CU_ASSERT_EQUAL(ig_infinigen_top_n(s, pos, 9, 3, out, tmp), 3);
    CU_ASSERT(out[0] == 1 && out[1] == 3 && out[2] == 6); /* 3.0 and the first two 2.0 */
    CU_ASSERT_EQUAL(ig_infinigen_top_n(s, pos, 9, 5, out, tmp), 5);
    CU_ASSERT(out[0] == 0 && out[1] == 1 && out[2] == 3 && out[3] == 6 && out[4] == 8);
    CU_ASSERT_EQUAL(ig_infinigen_top_n(s, pos, 9, 100, out, tmp), 8); /* all in use, ascending */
    for (int i = 1; i < 8; i++) CU_ASSERT(out[i] > out[i - 1] && out[i] != 4);
    /* larger random: exactly the n largest, ascending */
    enum { N = 1000 };
    static float r[N], t2[N];
    static int32_t p2[N], o2[N];
    for (int i = 0; i < N; i++) {
        r[i] = (float)urand();
        p2[i] = i % 7 == 3 ? -1 : i;
    }
    int64_t got = ig_infinigen_top_n(r, p2, N, 100, o2, t2);
    CU_ASSERT_EQUAL(got, 100);
    float lo = INFINITY;
    for (int j = 0; j < 100; j++) {
        lo = fminf(lo, r[o2[j]]);
        CU_ASSERT(p2[o2[j]] >= 0);
        if (j) CU_ASSERT(o2[j] > o2[j - 1]);
    }
    int above = 0;
    for (int i = 0; i < N; i++) above += p2[i] >= 0 && r[i] >= lo;
    CU_ASSERT_EQUAL(above, 100);
    /* the policy's fast path agrees, with free entries at -inf, with and without ties */
    static int32_t o3[N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            r[i] = p2[i] < 0 ? -INFINITY : (float)urand();
            if (round == 1) r[i] = p2[i] < 0 ? -INFINITY : (float)(i % 10); /* many ties */
            if (round == 2) r[i] = p2[i] < 0 ? -INFINITY : 1e-3f * (float)(i % 700);
        }
        const int64_t ns[] = {1, 57, 300, 856, 857};
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            int64_t a = ig_infinigen_top_n(r, p2, N, ns[k], o2, t2);
            int64_t b = ig_infinigen_top_n_scored(r, p2, N, ns[k], o3, t2);
            CU_ASSERT_EQUAL(a, b);
            CU_ASSERT(a == b && !memcmp(o2, o3, (size_t)a * sizeof(int32_t)));
        }
    }
}

static void test_pool_victims(void) {
    /* entries 0..9; entries 1 and 7 free; n_tokens 8: older half = positions 0..3 */
    const int32_t pos[] = {5, -1, 0, 3, 7, 1, 2, -1, 6, 4};
    ig_entries_view ev = {pos, 10, 8, 8};
    int32_t count[8] = {5, 0, 0, 1, 0, 0, 0, 0};
    int32_t last[8] = {9, 3, 0, 7, 0, 0, 0, 0};
    unsigned char mark[10] = {0};
    int32_t v[8];
    CU_ASSERT_EQUAL(ig_infinigen_pool_victims(IG_POOL_FIFO, &ev, count, last, 2, v, mark), 2);
    CU_ASSERT(v[0] == 2 && v[1] == 5); /* positions 0, 1 */
    CU_ASSERT_EQUAL(ig_infinigen_pool_victims(IG_POOL_COUNTER, &ev, count, last, 2, v, mark), 2);
    CU_ASSERT(v[0] == 5 && v[1] == 6); /* counts 0, 0 at positions 1, 2 (older first) */
    CU_ASSERT_EQUAL(ig_infinigen_pool_victims(IG_POOL_LRU, &ev, count, last, 2, v, mark), 2);
    CU_ASSERT(v[0] == 6 && v[1] == 5); /* position 2 never selected, then position 1 (at 3) */
    /* more victims than the older half holds: the rest from all entries, least count first */
    CU_ASSERT_EQUAL(ig_infinigen_pool_victims(IG_POOL_COUNTER, &ev, count, last, 5, v, mark), 5);
    CU_ASSERT(v[0] == 5 && v[1] == 6 && v[2] == 3 && v[3] == 2 && v[4] == 9);
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(mark[i], 0);
}

/* ---- the policy's hooks, driven by hand ---- */

typedef struct policy_run {
    const ig_policy_ops *ops;
    void *st;
    ig_policy_params *params;
    ig_policy_caps caps;
} policy_run;

static ig_status policy_open(policy_run *r, int mi, int n_slots, int max_ctx,
                             const char *const *sets, int n_sets, ig_error *err) {
    memset(r, 0, sizeof *r);
    r->ops = ig_policy_find("infinigen");
    IG_TRY(ig_policy_params_parse(r->ops, sets, n_sets, &r->params, err));
    r->st = calloc(1, r->ops->state_size);
    const ig_model *m = g_models[mi];
    ig_policy_env env = {
        g_wq[mi], ig_model_get_config(m), n_slots, max_ctx, IG_DTYPE_F32, g_policy_be, NULL};
    ig_status rc = r->ops->init(r->st, &env, r->params, &r->caps, err);
    if (rc != IG_OK) {
        free(r->st);
        r->st = NULL;
        ig_policy_params_free(r->params);
        r->params = NULL;
    }
    return rc;
}

static void policy_close(policy_run *r) {
    if (r->st) r->ops->fini(r->st);
    free(r->st);
    ig_policy_params_free(r->params);
}

#define SEL_MAX 64
#define MAXH    8
typedef struct slot_data {
    int hw, n_tokens;
    int32_t pos[SEL_MAX];
    float k[MAXH][SEL_MAX][16];   /* [KV head][entry][hd] */
    float qp[SEL_MAX][MAXH * 16]; /* prompt queries [position][head][hd] */
    float kp[SEL_MAX][MAXH * 16]; /* prompt keys [position][KV head][hd] */
} slot_data;

/* Fills a slot's entries through on_prefill + on_append (pos[e] = position, -1 = evicted after).
 */
static void feed_slot(policy_run *r, const ig_model_config *c, int layer, int slot, slot_data *sd,
                      const int *evicted, int n_evicted, int with_prefill) {
    int hd = c->head_dim, G = c->n_kv_head, H = c->n_head, n = sd->hw;
    float *q = &sd->qp[0][0], *k = &sd->kp[0][0]; /* rows at stride MAXH * 16 */
    CU_ASSERT_FATAL(H * hd == MAXH * 16 || H * hd <= MAXH * 16);
    for (int e = 0; e < n; e++) {
        sd->pos[e] = (int32_t)((e * 7) % n);
        for (int g = 0; g < G; g++)
            for (int i = 0; i < hd; i++) sd->k[g][e][i] = (float)(4.0 * urand());
    }
    /* prompt rows in position order, packed as the engine passes them */
    float *qv = malloc((size_t)n * (size_t)H * (size_t)hd * sizeof(float));
    float *kv = malloc((size_t)n * (size_t)G * (size_t)hd * sizeof(float));
    for (int e = 0; e < n; e++)
        for (int g = 0; g < G; g++)
            memcpy(k + (size_t)sd->pos[e] * MAXH * 16 + (size_t)g * (size_t)hd, sd->k[g][e],
                   (size_t)hd * sizeof(float));
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < H * hd; i++) q[(size_t)t * MAXH * 16 + (size_t)i] = (float)urand();
        memcpy(qv + (size_t)t * (size_t)(H * hd), q + (size_t)t * MAXH * 16,
               (size_t)(H * hd) * sizeof(float));
        memcpy(kv + (size_t)t * (size_t)(G * hd), k + (size_t)t * MAXH * 16,
               (size_t)(G * hd) * sizeof(float));
    }
    ig_prefill_view v = {n, 0, qv, kv, NULL, NULL, 0, n};
    if (with_prefill) r->ops->on_prefill(r->st, layer, slot, &v);
    for (int e = 0; e < n; e++)
        for (int g = 0; g < G; g++)
            r->ops->on_append(r->st, layer, slot, g, e, sd->pos[e], sd->k[g][e], NULL);
    for (int i = 0; i < n_evicted; i++) {
        for (int g = 0; g < G; g++) r->ops->on_evict(r->st, layer, slot, g, evicted[i]);
        sd->pos[evicted[i]] = -1;
    }
    sd->n_tokens = n;
    free(qv);
    free(kv);
}

enum { RULE_EXACT = -1, RULE_Q = 0, RULE_QK = 1, RULE_UNION = 2 };

/* The partial weight index the policy should build from a slot's prompt (its own computation of
 * sum |QA| and sum |KA| per column): used[g][c]. */
static void expected_columns(const ig_model_config *c, const ig_skew *sk, int layer,
                             const slot_data *sd, int rule, int k, unsigned char used[][16]) {
    int H = c->n_head, G = c->n_kv_head, hd = c->head_dim, group = H / G;
    for (int g = 0; g < G; g++) {
        const float *A = ig_skew_A(sk, layer, g);
        double cq[16] = {0}, ck[16] = {0}, key[16];
        for (int t = 0; t < sd->hw; t++)
            for (int col = 0; col < hd; col++) {
                double a = 0;
                for (int r = 0; r < hd; r++) a += (double)sd->kp[t][g * hd + r] * A[r * hd + col];
                ck[col] += fabs(a);
                for (int hh = 0; hh < group; hh++) {
                    double b = 0;
                    for (int r = 0; r < hd; r++)
                        b += (double)sd->qp[t][(g * group + hh) * hd + r] * A[r * hd + col];
                    cq[col] += fabs(b);
                }
            }
        memset(used[g], 0, 16);
        for (int pass = 0; pass < (rule == RULE_UNION ? 2 : 1); pass++) {
            for (int col = 0; col < hd; col++)
                key[col] = rule == RULE_QK ? cq[col] / group + ck[col] : pass ? ck[col] : cq[col];
            unsigned char mine[16] = {0};
            for (int j = 0; j < k; j++) {
                int best = -1;
                for (int col = 0; col < hd; col++)
                    if (!mine[col] && (best < 0 || key[col] > key[best])) best = col;
                mine[best] = 1;
                used[g][best] = 1;
            }
        }
    }
}

/* The rule, computed independently in double from the exact scores (partial_ratio = 1 makes the
 * partial score exact whatever the rotation): per query head the count above max - alpha as a
 * fraction of entries in use, the fraction averaged over heads and batch, per KV head the top-n by
 * the group's max score. Returns 0 if some score sits within `margin` of a decision boundary. */
static int expected_selection(const ig_model *m, int layer, int n_slots, const slot_data *sd,
                              const float *x, double alpha, double max_fetch, const ig_skew *sk,
                              unsigned char used_cols[][MAXH][16], int32_t exp[][MAXH][SEL_MAX],
                              int64_t exp_n[][MAXH], double margin) {
    const ig_model_config *c = ig_model_get_config(m);
    int H = c->n_head, G = c->n_kv_head, hd = c->head_dim, group = H / G;
    const ig_layer *ly = ig_model_layer(m, layer);
    float qbuf[4 * MAXH * 16];
    ig_cpu_linear(x, n_slots, c->d_model, ly->wq.data, ly->wq.dtype, (int64_t)H * hd, ly->bq, qbuf);
    if (c->arch == IG_ARCH_LLAMA) {
        static float cs[128 * 8], sn[128 * 8];
        ig_cpu_rope_table(c->rope_theta, c->rot_dim, 128, cs, sn);
        for (int i = 0; i < n_slots; i++) {
            int32_t p = sd[i].n_tokens;
            ig_cpu_rope(qbuf + (size_t)i * (size_t)H * (size_t)hd, 1, H, hd, c->rot_dim, &p, cs,
                        sn);
        }
    }
    static double sc[4][MAXH][SEL_MAX];
    double frac_sum = 0;
    int ok = 1;
    for (int i = 0; i < n_slots; i++) {
        int used = 0;
        for (int e = 0; e < sd[i].hw; e++) used += sd[i].pos[e] >= 0;
        for (int h = 0; h < H; h++) {
            int g = h / group;
            double mx = -INFINITY;
            /* partial score: the chosen columns of qA and kA (all columns: exactly q.k) */
            const float *A = ig_skew_A(sk, layer, g);
            double qa[16];
            for (int col = 0; col < hd; col++) {
                qa[col] = 0;
                for (int r = 0; r < hd; r++)
                    qa[col] += (double)qbuf[(i * H + h) * hd + r] * A[r * hd + col];
            }
            for (int e = 0; e < sd[i].hw; e++) {
                double d = 0;
                for (int col = 0; col < hd; col++) {
                    if (used_cols && !used_cols[i][g][col]) continue;
                    double ka = 0;
                    for (int r = 0; r < hd; r++) ka += (double)sd[i].k[g][e][r] * A[r * hd + col];
                    d += qa[col] * ka;
                }
                sc[i][h][e] = d / sqrt((double)hd);
                if (sd[i].pos[e] >= 0) mx = fmax(mx, sc[i][h][e]);
            }
            int cnt = 0;
            for (int e = 0; e < sd[i].hw; e++)
                if (sd[i].pos[e] >= 0) {
                    if (fabs(sc[i][h][e] - (mx - alpha)) < margin) ok = 0;
                    cnt += sc[i][h][e] > mx - alpha;
                }
            frac_sum += (double)cnt / used;
        }
    }
    double mean = frac_sum / (n_slots * H);
    for (int i = 0; i < n_slots; i++) {
        int used = 0;
        for (int e = 0; e < sd[i].hw; e++) used += sd[i].pos[e] >= 0;
        for (int g = 0; g < G; g++) {
            int64_t n = ig_infinigen_fetch_count(mean, used, sd[i].n_tokens, max_fetch);
            double best[SEL_MAX];
            for (int e = 0; e < sd[i].hw; e++) {
                best[e] = -INFINITY;
                if (sd[i].pos[e] >= 0)
                    for (int hh = 0; hh < group; hh++)
                        best[e] = fmax(best[e], sc[i][g * group + hh][e]);
            }
            /* the n-th largest by sorting a copy */
            double sorted[SEL_MAX] = {0};
            int m2 = 0;
            for (int e = 0; e < sd[i].hw; e++)
                if (sd[i].pos[e] >= 0) sorted[m2++] = best[e];
            for (int a = 1; a < m2; a++)
                for (int b = a; b > 0 && sorted[b - 1] < sorted[b]; b--) {
                    double t = sorted[b];
                    sorted[b] = sorted[b - 1];
                    sorted[b - 1] = t;
                }
            if (n < m2 && sorted[n - 1] - sorted[n] < margin) ok = 0;
            exp_n[i][g] = 0;
            for (int e = 0; e < sd[i].hw; e++)
                if (sd[i].pos[e] >= 0 && (n >= m2 || best[e] >= sorted[n - 1]))
                    exp[i][g][exp_n[i][g]++] = e;
        }
    }
    return ok;
}

/* select_ahead against the independent computation, on a ragged batch with free entries: exact
 * scores (partial_ratio 1) at two alphas, then 4 of 16 columns under each column rule. */
static void test_selection_rule(void) {
    g_rng = 0x9e3779b97f4a7c15ull;
    static const struct {
        const char *ratio, *rule;
        int r, k;
        double alpha;
    } cases[] = {
        {"partial_ratio=1", "column_rule=q", RULE_EXACT, 16, 1.5},
        {"partial_ratio=1", "column_rule=q", RULE_EXACT, 16, 3.0},
        {"partial_ratio=0.25", "column_rule=q", RULE_Q, 4, 1.0},
        {"partial_ratio=0.25", "column_rule=qk", RULE_QK, 4, 1.0},
        {"partial_ratio=0.25", "column_rule=union", RULE_UNION, 4, 1.0},
    };
    /* no table from an engine (hooks driven by hand: the policy's own cpu table), then the run's
     * cpu backend table, as the CPU engine runs them (slot 0 has freed entries: masked there) */
    for (int path = 0; path < 2; path++)
        for (int mi = 0; mi < 2; mi++) {
            g_policy_be = path ? g_cpu_be : NULL;
            const ig_model *m = g_models[mi];
            const ig_model_config *c = ig_model_get_config(m);
            CU_ASSERT_FATAL(c->head_dim == 16 && c->n_head <= MAXH);
            char skew[4400];
            snprintf(skew, sizeof skew, "skew=%.4300s", g_skew_path[mi]);
            ig_skew *sk = NULL;
            ig_error err;
            CU_ASSERT_EQUAL_FATAL(ig_skew_load(g_skew_path[mi], &sk, &err), IG_OK);
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
                char alpha[64];
                snprintf(alpha, sizeof alpha, "alpha=%g", cases[ci].alpha);
                /* f32 partial keys: the comparison with the rule is exact up to f32 rounding */
                const char *sets[] = {"dense_layers=0",   cases[ci].ratio, cases[ci].rule,
                                      "max_fetch=0.5",    alpha,           skew,
                                      "partial_dtype=f32"};
                policy_run r;
                CU_ASSERT_EQUAL_FATAL(policy_open(&r, mi, 2, 64, sets, 7, &err), IG_OK);
                CU_ASSERT_EQUAL(r.caps.select_ahead, 1);
                CU_ASSERT_EQUAL(r.caps.dense, 0);
                static slot_data sd[2];
                int layer = 1;
                sd[0].hw = 20;
                sd[1].hw = 30;
                const int ev0[] = {3, 11};
                feed_slot(&r, c, layer, 0, &sd[0], ev0, 2, 1);
                feed_slot(&r, c, layer, 1, &sd[1], NULL, 0, 1);
                static unsigned char used[2][MAXH][16];
                for (int i = 0; i < 2 && cases[ci].r != RULE_EXACT; i++)
                    expected_columns(c, sk, layer, &sd[i], cases[ci].r, cases[ci].k, used[i]);
                float x[2 * 64];
                for (int i = 0; i < 2 * c->d_model; i++) x[i] = (float)urand();
                static int32_t exp[4][MAXH][SEL_MAX];
                static int64_t exp_n[4][MAXH];
                /* the policy computes in f32 (errors ~1e-6 here): no score may sit that close to a
                 * decision boundary for the comparison to be exact */
                int clear =
                    expected_selection(m, layer, 2, sd, x, cases[ci].alpha, 0.5, sk,
                                       cases[ci].r == RULE_EXACT ? NULL : used, exp, exp_n, 2e-5);
                if (!clear)
                    fprintf(stderr,
                            "\n    a score is within 2e-5 of a boundary: pick another seed");
                CU_ASSERT(clear);
                ig_entries_view ev[2 * MAXH];
                int32_t ent[2][MAXH * SEL_MAX];
                int64_t nn[2][MAXH];
                ig_selection out[2] = {{ent[0], nn[0], SEL_MAX}, {ent[1], nn[1], SEL_MAX}};
                for (int i = 0; i < 2; i++)
                    for (int g = 0; g < c->n_kv_head; g++) {
                        int n_used = 0;
                        for (int e = 0; e < sd[i].hw; e++) n_used += sd[i].pos[e] >= 0;
                        ev[i * c->n_kv_head + g] =
                            (ig_entries_view){sd[i].pos, sd[i].hw, n_used, sd[i].n_tokens};
                    }
                const int slots[2] = {0, 1};
                r.ops->select_ahead(r.st, layer, 2, slots, x, ev, out);
                int same = 1;
                int64_t total = 0, used_all = 0;
                for (int i = 0; i < 2; i++)
                    for (int g = 0; g < c->n_kv_head; g++) {
                        if (nn[i][g] != exp_n[i][g]) same = 0;
                        for (int64_t j = 0; j < nn[i][g] && j < exp_n[i][g]; j++)
                            if (ent[i][g * SEL_MAX + j] != exp[i][g][j]) same = 0;
                        total += nn[i][g];
                        used_all += i == 0 ? 18 : 30;
                    }
                printf("\n    %-9s %-10s %-18s %-17s alpha %.1f: %3lld of %lld entries, %s",
                       path ? "run table" : "own table", g_fixtures[mi], cases[ci].ratio,
                       cases[ci].rule, cases[ci].alpha, (long long)total, (long long)used_all,
                       same ? "as the rule says" : "DIFFERENT from the rule");
                CU_ASSERT(same);
                char bud[512];
                r.ops->budget(r.st, bud, sizeof bud);
                CU_ASSERT_EQUAL(strstr(bud, "on the cpu backend in 1 of 1 selections") != NULL,
                                path);
                CU_ASSERT_EQUAL(strstr(bud, "own cpu table in 1 of 1") != NULL, !path);
                CU_ASSERT(total > 0 && total < used_all); /* a real choice */
                policy_close(&r);
            }
            ig_skew_free(sk);
        }
    g_policy_be = NULL;
    printf("\n    ");
}

/* fetch_rule=adaptive steps a layer's alpha once per selection. When the table fails at its last
 * step (after the fetch counts, which step alpha), the policy's own cpu table selects again: the
 * selections that follow must be those of a run that never had a table (the step taken once, not
 * twice). */
static void test_failed_table_adaptive(void) {
    static ig_be_iface fail_if;
    static struct ig_be fail_be;
    ig_test_failing_table(g_cpu_be, &fail_if, &fail_be); /* the cpu table, its top-k failing */
    enum { STEPS = 6 };
    static int32_t ent[2][STEPS][2][MAXH * SEL_MAX];
    static int64_t nn[2][STEPS][2][MAXH];
    const ig_model *m = g_models[0];
    const ig_model_config *c = ig_model_get_config(m);
    char skew[4400];
    snprintf(skew, sizeof skew, "skew=%.4300s", g_skew_path[0]);
    for (int path = 0; path < 2; path++) {
        g_policy_be = path ? &fail_be : NULL;
        g_rng = 0x243f6a8885a308d3ull;
        const char *sets[] = {"dense_layers=0",
                              "partial_ratio=0.25",
                              "fetch_rule=adaptive",
                              "max_fetch=0.2",
                              "alpha=1",
                              skew,
                              "partial_dtype=f32"};
        policy_run r;
        ig_error err;
        CU_ASSERT_EQUAL_FATAL(policy_open(&r, 0, 2, 64, sets, 7, &err), IG_OK);
        static slot_data sd[2];
        int layer = 1;
        sd[0].hw = 24;
        sd[1].hw = 40;
        feed_slot(&r, c, layer, 0, &sd[0], NULL, 0, 1);
        feed_slot(&r, c, layer, 1, &sd[1], NULL, 0, 1);
        ig_entries_view ev[2 * MAXH];
        for (int i = 0; i < 2; i++)
            for (int g = 0; g < c->n_kv_head; g++)
                ev[i * c->n_kv_head + g] =
                    (ig_entries_view){sd[i].pos, sd[i].hw, sd[i].hw, sd[i].n_tokens};
        const int slots[2] = {0, 1};
        float x[2 * 64];
        for (int step = 0; step < STEPS; step++) {
            for (int i = 0; i < 2 * c->d_model; i++) x[i] = (float)urand();
            ig_selection out[2] = {{ent[path][step][0], nn[path][step][0], SEL_MAX},
                                   {ent[path][step][1], nn[path][step][1], SEL_MAX}};
            r.ops->select_ahead(r.st, layer, 2, slots, x, ev, out);
        }
        char bud[512];
        r.ops->budget(r.st, bud, sizeof bud);
        /* the failing table ran (and failed) once, then the policy's own table took over */
        CU_ASSERT_EQUAL(strstr(bud, "on the cpu backend in 0 of 6 selections") != NULL, path);
        CU_ASSERT_PTR_NOT_NULL(strstr(bud, "own cpu table in 6 of 6"));
        policy_close(&r);
    }
    g_policy_be = NULL;
    int same = 1, differ_in_time = 0;
    for (int step = 0; step < STEPS; step++)
        for (int i = 0; i < 2; i++)
            for (int g = 0; g < c->n_kv_head; g++) {
                if (nn[0][step][i][g] != nn[1][step][i][g]) same = 0;
                if (nn[0][step][i][g] != nn[0][0][i][g]) differ_in_time = 1;
                for (int64_t j = 0; same && j < nn[0][step][i][g]; j++)
                    if (ent[0][step][i][g * SEL_MAX + j] != ent[1][step][i][g * SEL_MAX + j])
                        same = 0;
            }
    CU_ASSERT(same);
    CU_ASSERT(differ_in_time); /* alpha moved: the counts depend on it */
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* A multi-query model (20 query heads on one KV head: more than the ops' 16 rows per table) is
 * scored in sub-groups whose maxima are merged: the selection against the rule computed here from
 * exact scores (identity W_q and rotation, every column), on the policy's own cpu table. */
static void test_multi_query_group(void) {
    enum { H = 20, HD = 8, D = H * HD, N = 48, NS = 2 };
    ig_model_config c = {.arch = IG_ARCH_OPT,
                         .n_layer = 2,
                         .d_model = D,
                         .n_head = H,
                         .n_kv_head = 1,
                         .head_dim = HD,
                         .d_ffn = 4 * D,
                         .vocab = 16,
                         .max_pos = 64,
                         .rot_dim = HD,
                         .bos = -1,
                         .eos = -1};
    static float wq[D * D];
    for (int i = 0; i < D; i++) wq[(size_t)i * D + (size_t)i] = 1.0f; /* q = x */
    ig_policy_wq w[2];
    for (int l = 0; l < 2; l++) w[l] = (ig_policy_wq){wq, IG_DTYPE_F32, D, D, NULL};
    const ig_policy_ops *ops = ig_policy_find("infinigen");
    ig_policy_params *params = NULL;
    ig_error err;
    const char *sets[] = {"dense_layers=0", "partial_ratio=1", "column_rule=q",
                          "alpha=2",        "max_fetch=0.3",   "partial_dtype=f32"};
    CU_ASSERT_EQUAL_FATAL(ig_policy_params_parse(ops, sets, 6, &params, &err), IG_OK);
    void *st = calloc(1, ops->state_size);
    ig_policy_caps caps;
    ig_policy_env env = {w, &c, NS, 64, IG_DTYPE_F32, NULL, NULL};
    CU_ASSERT_EQUAL_FATAL(ops->init(st, &env, params, &caps, &err), IG_OK);
    g_rng = 0x13198a2e03707344ull;
    static float q[N * D], k[NS][N * HD], x[NS * D];
    static int32_t pos[NS][N];
    int layer = 1;
    for (int sl = 0; sl < NS; sl++) {
        for (int i = 0; i < N * D; i++) q[i] = (float)(2.0 * urand());
        for (int i = 0; i < N * HD; i++) k[sl][i] = (float)(2.0 * urand());
        ig_prefill_view v = {N, 0, q, k[sl], NULL, NULL, 0, N};
        ops->on_prefill(st, layer, sl, &v);
        for (int e = 0; e < N; e++) {
            pos[sl][e] = e;
            ops->on_append(st, layer, sl, 0, e, e, k[sl] + (size_t)e * HD, k[sl]);
        }
    }
    for (int i = 0; i < NS * D; i++) x[i] = (float)(2.0 * urand());
    ig_entries_view ev[NS];
    for (int sl = 0; sl < NS; sl++) ev[sl] = (ig_entries_view){pos[sl], N, N, N};
    static int32_t ent[NS][N];
    int64_t nn[NS][1];
    ig_selection out[NS] = {{ent[0], nn[0], N}, {ent[1], nn[1], N}};
    const int slots[NS] = {0, 1};
    ops->select_ahead(st, layer, NS, slots, x, ev, out);
    char bud[512];
    ops->budget(st, bud, sizeof bud);
    CU_ASSERT_PTR_NOT_NULL(strstr(bud, "on the policy's own cpu table in 1 of 1"));
    /* the rule: exact scores, each head's count within alpha of its best, the mean fraction over
     * heads and sequences, the top-n by the group's best score */
    static double sc[NS][H][N], best[NS][N];
    double frac = 0, margin = 1;
    for (int sl = 0; sl < NS; sl++) {
        for (int e = 0; e < N; e++) best[sl][e] = -INFINITY;
        for (int h = 0; h < H; h++) {
            double mx = -INFINITY;
            for (int e = 0; e < N; e++) {
                double d = 0;
                for (int i = 0; i < HD; i++)
                    d += (double)x[(size_t)sl * D + (size_t)h * HD + (size_t)i] *
                         k[sl][(size_t)e * HD + (size_t)i];
                sc[sl][h][e] = d / sqrt((double)HD);
                mx = fmax(mx, sc[sl][h][e]);
                best[sl][e] = fmax(best[sl][e], sc[sl][h][e]);
            }
            int cnt = 0;
            for (int e = 0; e < N; e++) {
                cnt += sc[sl][h][e] > mx - 2.0;
                margin = fmin(margin, fabs(sc[sl][h][e] - (mx - 2.0)));
            }
            frac += (double)cnt / N;
        }
    }
    frac /= NS * H;
    int64_t want = ig_infinigen_fetch_count(frac, N, N, 0.3);
    CU_ASSERT(margin > 1e-4); /* no score at the threshold: the comparison is exact */
    int same = 1;
    for (int sl = 0; sl < NS; sl++) {
        double sorted[N];
        memcpy(sorted, best[sl], sizeof sorted);
        for (int a = 1; a < N; a++)
            for (int b = a; b > 0 && sorted[b - 1] < sorted[b]; b--) {
                double t = sorted[b];
                sorted[b] = sorted[b - 1];
                sorted[b - 1] = t;
            }
        int32_t exp[N];
        int ne = 0;
        for (int e = 0; e < N; e++)
            if (best[sl][e] >= sorted[want - 1]) exp[ne++] = e;
        qsort(ent[sl], (size_t)nn[sl][0], sizeof(int32_t), cmp_i32);
        if (nn[sl][0] != ne || memcmp(exp, ent[sl], (size_t)ne * sizeof(int32_t)) != 0) same = 0;
        printf("\n    multi-query, sequence %d: %lld of %d entries (rule: %d)", sl,
               (long long)nn[sl][0], N, ne);
    }
    CU_ASSERT(want > 1 && want < N); /* a real choice */
    CU_ASSERT(same);
    ops->fini(st);
    free(st);
    ig_policy_params_free(params);
    printf("\n    ");
}

/* W_q comes from the engine (ig_policy_env.wq): without it, or with a wrong shape, init refuses
 * with a message; it is the engine's, so the policy's device bytes do not depend on its type or
 * bias (the model's weights count it once). */
static void test_wq_handed_in(void) {
    const ig_model_config *c = ig_model_get_config(g_models[0]);
    const ig_policy_ops *ops = ig_policy_find("infinigen");
    ig_policy_params *params = NULL;
    ig_error err;
    const char *sets[] = {"dense_layers=1"};
    CU_ASSERT_EQUAL_FATAL(ig_policy_params_parse(ops, sets, 1, &params, &err), IG_OK);
    void *st = calloc(1, ops->state_size);
    ig_policy_caps caps;
    ig_policy_env env = {NULL, c, 1, 32, IG_DTYPE_F32, NULL, NULL};
    CU_ASSERT_EQUAL(ops->init(st, &env, params, &caps, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "W_q"));
    static ig_policy_wq wq[64];
    int L = c->n_layer;
    memcpy(wq, g_wq[0], (size_t)L * sizeof *wq);
    wq[L - 1].cols = c->d_model + 1;
    env.wq = wq;
    memset(st, 0, ops->state_size);
    CU_ASSERT_EQUAL(ops->init(st, &env, params, &caps, &err), IG_ERR_SHAPE);
    char want[64];
    snprintf(want, sizeof want, "layer %d's W_q", L - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    /* device bytes: the same with W_q in f16 and with a bias */
    size_t dev[3];
    float *bias = calloc((size_t)c->n_head * (size_t)c->head_dim, sizeof(float));
    for (int v = 0; v < 3; v++) {
        memcpy(wq, g_wq[0], (size_t)L * sizeof *wq);
        for (int l = 0; l < L; l++) {
            if (v >= 1) wq[l].dtype = IG_DTYPE_F16; /* Llama's init reads only the shape */
            if (v == 2) wq[l].bias = bias;
        }
        memset(st, 0, ops->state_size);
        memset(&caps, 0, sizeof caps);
        CU_ASSERT_EQUAL_FATAL(ops->init(st, &env, params, &caps, &err), IG_OK);
        CU_ASSERT_EQUAL(caps.reads_wq, 1); /* the engine counts those placed off the device */
        dev[v] = ops->device_bytes(st);
        ops->fini(st);
    }
    CU_ASSERT(dev[0] > 0);
    CU_ASSERT_EQUAL(dev[1], dev[0]);
    CU_ASSERT_EQUAL(dev[2], dev[0]);
    /* every layer dense: no speculation, no W_q read */
    char all_dense[32];
    snprintf(all_dense, sizeof all_dense, "dense_layers=%d", L);
    const char *dsets[] = {all_dense};
    ig_policy_params *dparams = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_policy_params_parse(ops, dsets, 1, &dparams, &err), IG_OK);
    memset(st, 0, ops->state_size);
    memset(&caps, 0, sizeof caps);
    CU_ASSERT_EQUAL_FATAL(ops->init(st, &env, dparams, &caps, &err), IG_OK);
    CU_ASSERT_EQUAL(caps.dense, 1);
    CU_ASSERT_EQUAL(caps.reads_wq, 0);
    ops->fini(st);
    ig_policy_params_free(dparams);
    free(bias);
    free(st);
    ig_policy_params_free(params);
}

/* Counters from the policy's own selections decide the pool's victims. */
static void test_pool_counters(void) {
    g_rng = 0x2545f4914f6cdd1dull;
    const char *rules[] = {"pool_evict=counter", "pool_evict=lru", "pool_evict=fifo"};
    for (int ri = 0; ri < 3; ri++) {
        const ig_model *m = g_models[0];
        const ig_model_config *c = ig_model_get_config(m);
        const char *sets[] = {"dense_layers=0", "pool_capacity=0.5", "alpha=1", "max_fetch=0.3",
                              rules[ri]};
        policy_run r;
        ig_error err;
        CU_ASSERT_EQUAL_FATAL(policy_open(&r, 0, 1, 64, sets, 5, &err), IG_OK);
        CU_ASSERT_EQUAL(r.ops->capacity(r.st, 1, 10), 5);
        CU_ASSERT_EQUAL(r.ops->capacity(r.st, 0, 7), 4);
        CU_ASSERT(r.ops->host_bytes(r.st) > 0 && r.ops->device_bytes(r.st) > 0);
        static slot_data sd;
        sd.hw = 24;
        feed_slot(&r, c, 1, 0, &sd, NULL, 0, 0); /* appends only: no prompt seeding */
        int G = c->n_kv_head;
        static int32_t count[MAXH][SEL_MAX], last[MAXH][SEL_MAX];
        memset(count, 0, sizeof count);
        memset(last, 0, sizeof last);
        for (int step = 0; step < 6; step++) {
            float x[64];
            for (int i = 0; i < c->d_model; i++) x[i] = (float)urand();
            ig_entries_view ev[MAXH];
            int32_t ent[MAXH * SEL_MAX];
            int64_t nn[MAXH];
            ig_selection out = {ent, nn, SEL_MAX};
            int n_tokens = 24 + step; /* as if later tokens had gone elsewhere */
            for (int g = 0; g < G; g++) ev[g] = (ig_entries_view){sd.pos, sd.hw, sd.hw, n_tokens};
            const int slot = 0;
            r.ops->select_ahead(r.st, 1, 1, &slot, x, ev, &out);
            for (int g = 0; g < G; g++)
                for (int64_t j = 0; j < nn[g]; j++) {
                    int p = sd.pos[ent[g * SEL_MAX + j]];
                    count[g][p]++;
                    last[g][p] = n_tokens + 1;
                }
        }
        int all_ok = 1;
        for (int g = 0; g < G; g++) {
            ig_entries_view ev = {sd.pos, sd.hw, sd.hw, 30}; /* older half: positions < 15 */
            int32_t v[2];
            CU_ASSERT_EQUAL(r.ops->evict(r.st, 1, 0, g, &ev, 2, v), 2);
            /* expected, by position: the two smallest keys among positions < 15 */
            int want[2] = {-1, -1};
            for (int w = 0; w < 2; w++)
                for (int p = 0; p < 15; p++) {
                    if (p == want[0]) continue;
                    long key = ri == 0 ? count[g][p] : ri == 1 ? last[g][p] : p;
                    long bk = want[w] < 0 ? 0
                              : ri == 0   ? count[g][want[w]]
                              : ri == 1   ? last[g][want[w]]
                                          : want[w];
                    if (want[w] < 0 || key < bk) want[w] = p;
                }
            for (int w = 0; w < 2; w++)
                if (sd.pos[v[w]] != want[w]) all_ok = 0;
        }
        printf("\n    %s: victims %s", rules[ri], all_ok ? "as the counters say" : "WRONG");
        CU_ASSERT(all_ok);
        policy_close(&r);
    }
    printf("\n    ");
}

/* ---- the skew file ---- */

static void test_skew_file(void) {
    ig_error err;
    ig_skew *s = NULL;
    for (int mi = 0; mi < 2; mi++) {
        const ig_model_config *c = ig_model_get_config(g_models[mi]);
        CU_ASSERT_EQUAL_FATAL(ig_skew_load(g_skew_path[mi], &s, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_skew_check(s, c, g_skew_path[mi], &err), IG_OK);
        CU_ASSERT_EQUAL(s->n_layer, c->n_layer);
        CU_ASSERT_EQUAL(s->n_kv_head, c->n_kv_head);
        CU_ASSERT_EQUAL(s->calib_tokens, 64);
        /* every rotation orthogonal, singular values decreasing */
        double orth = 0;
        int hd = s->head_dim, dec = 1;
        for (int l = 0; l < s->n_layer; l++)
            for (int g = 0; g < s->n_kv_head; g++) {
                const float *A = ig_skew_A(s, l, g);
                for (int i = 0; i < hd; i++)
                    for (int j = 0; j < hd; j++) {
                        double d = 0;
                        for (int r = 0; r < hd; r++) d += (double)A[r * hd + i] * A[r * hd + j];
                        orth = fmax(orth, fabs(d - (i == j)));
                    }
                const float *sq = s->sigma_q + ((size_t)l * s->n_kv_head + g) * hd;
                for (int i = 1; i < hd; i++) dec &= sq[i - 1] >= sq[i];
            }
        printf("\n    %s: %d layers x %d KV heads, |A^T A - I| %.2g", g_fixtures[mi], s->n_layer,
               s->n_kv_head, orth);
        CU_ASSERT(orth < 1e-5);
        CU_ASSERT(dec);
        /* the other fixture's file is refused, naming what differs */
        const ig_model_config *other = ig_model_get_config(g_models[1 - mi]);
        CU_ASSERT_EQUAL(ig_skew_check(s, other, g_skew_path[mi], &err), IG_ERR_SHAPE);
        printf("\n    rejected: %s", err.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "n_kv_head"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "architecture"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "another model"));
        ig_skew_free(s);
        s = NULL;
    }
    /* another layer count, head_dim: named */
    CU_ASSERT_EQUAL_FATAL(ig_skew_load(g_skew_path[0], &s, &err), IG_OK);
    ig_model_config c = *ig_model_get_config(g_models[0]);
    c.n_layer = 30;
    c.head_dim = 64;
    CU_ASSERT_EQUAL(ig_skew_check(s, &c, "f", &err), IG_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "n_layer 2 (this model: 30)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "head_dim 16 (this model: 64)"));
    ig_skew_free(s);
    s = NULL;
    /* truncated and foreign files */
    char path[4400];
    snprintf(path, sizeof path, "%s/bad.skew", ig_test_tmpdir());
    FILE *in = fopen(g_skew_path[0], "rb"), *out = fopen(path, "wb");
    CU_ASSERT_FATAL(in && out);
    char buf[300];
    size_t got = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, got, out);
    fclose(in);
    fclose(out);
    CU_ASSERT_EQUAL(ig_skew_load(path, &s, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "truncated"));
    out = fopen(path, "wb");
    fputs("not a skew file at all, but long enough to hold a header of 120 bytes......"
          "..................................................",
          out);
    fclose(out);
    CU_ASSERT_EQUAL(ig_skew_load(path, &s, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not an igen skew file"));
    /* the policy refuses another model's file at init */
    char set[4400];
    snprintf(set, sizeof set, "skew=%.4300s", g_skew_path[1]);
    const char *sets[] = {"dense_layers=0", set};
    policy_run r;
    CU_ASSERT_EQUAL(policy_open(&r, 0, 1, 32, sets, 2, &err), IG_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "infinigen: skew file"));
    printf("\n    ");
}

/* ---- through the engine ---- */

typedef struct workload {
    const int32_t *tokens[3];
    int len[3], prefill[3];
} workload;

static void load_workload(int mi, workload *w) {
    const char *names[3] = {"tokens_1", "tokens_2", "tokens_3"};
    const int pre[3] = {5, 12, 9};
    for (int i = 0; i < 3; i++) {
        w->tokens[i] = ref_tokens(mi, names[i], &w->len[i]);
        w->prefill[i] = pre[i];
    }
}

/* Prefill + teacher-forced decode of 3 ragged sequences; returns all logits (malloc'd). */
static float *run_engine(int mi, const ig_policy_ops *ops, const char *const *sets, int n_sets,
                         size_t *n_out, ig_engine **keep) {
    const ig_model *m = g_models[mi];
    const ig_model_config *c = ig_model_get_config(m);
    workload w;
    load_workload(mi, &w);
    ig_policy_params *p = NULL;
    ig_error err;
    if (ops && ig_policy_params_parse(ops, sets, n_sets, &p, &err) != IG_OK) return NULL;
    ig_engine_opts o = {.max_seqs = 3,
                        .max_ctx = 64,
                        .max_batch_tokens = 64,
                        .threads = 2,
                        .policy = ops,
                        .policy_params = p};
    ig_engine *e = NULL;
    if (ig_engine_create(m, &o, &e, &err) != IG_OK) {
        fprintf(stderr, "\n    engine: %s\n", err.msg);
        ig_policy_params_free(p);
        return NULL;
    }
    float *out = malloc((size_t)(17 + 33 + 64) * (size_t)c->vocab * sizeof(float));
    size_t n = 0;
    ig_seq_tokens seqs[3];
    int done[3];
    for (int i = 0; i < 3; i++) {
        seqs[i] = (ig_seq_tokens){i, w.tokens[i], w.prefill[i]};
        done[i] = w.prefill[i];
    }
    int ok = ig_engine_forward(e, seqs, 3, &err) == IG_OK;
    if (ok) {
        ig_engine_logits(e, 0, ig_engine_n_rows(e), out);
        n += (size_t)ig_engine_n_rows(e) * (size_t)c->vocab;
    }
    while (ok) {
        int ns = 0;
        for (int i = 0; i < 3; i++)
            if (done[i] < w.len[i]) seqs[ns++] = (ig_seq_tokens){i, w.tokens[i] + done[i], 1};
        if (!ns) break;
        ok = ig_engine_forward(e, seqs, ns, &err) == IG_OK;
        ig_engine_logits(e, 0, ns, out + n);
        n += (size_t)ns * (size_t)c->vocab;
        for (int k = 0; k < ns; k++) done[seqs[k].slot]++;
    }
    if (keep)
        *keep = e;
    else
        ig_engine_free(e);
    ig_policy_params_free(p);
    if (!ok) {
        free(out);
        return NULL;
    }
    *n_out = n;
    return out;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= w)) w = d;
    }
    return w;
}

/* Every layer speculated, at a 100% budget (alpha 1000, max_fetch 1): the dense result; at the
 * defaults: a sparse run that differs but stays sane and repeats exactly. */
static void test_engine_runs(void) {
    const ig_policy_ops *ops = ig_policy_find("infinigen");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
    for (int mi = 0; mi < 2; mi++) {
        char skew[4400];
        snprintf(skew, sizeof skew, "skew=%.4300s", g_skew_path[mi]);
        size_t n0 = 0, n1 = 0, n2 = 0, n3 = 0;
        float *dense = run_engine(mi, NULL, NULL, 0, &n0, NULL);
        const char *full_sets[] = {"dense_layers=0", "max_fetch=1", "alpha=1000", skew};
        float *all = run_engine(mi, ops, full_sets, 4, &n1, NULL);
        const char *sparse_sets[] = {"dense_layers=0", skew};
        float *sp1 = run_engine(mi, ops, sparse_sets, 2, &n2, NULL);
        float *sp2 = run_engine(mi, ops, sparse_sets, 2, &n3, NULL);
        CU_ASSERT_FATAL(dense && all && sp1 && sp2 && n0 == n1 && n1 == n2 && n2 == n3);
        double d_all = max_diff(dense, all, n0), d_sp = max_diff(dense, sp1, n0);
        int finite = 1;
        for (size_t i = 0; i < n2; i++) finite &= isfinite(sp1[i]);
        printf("\n    %-10s every layer speculated: 100%% budget max |diff| %.3g; defaults %.3g",
               g_fixtures[mi], d_all, d_sp);
        CU_ASSERT(d_all <= 1e-4);
        CU_ASSERT(d_sp > 1e-4); /* the defaults really select */
        CU_ASSERT(finite);
        CU_ASSERT(!memcmp(sp1, sp2, n2 * sizeof(float)));
        free(dense);
        free(all);
        free(sp1);
        free(sp2);
    }
    printf("\n    ");
}

/* A memory-limited pool through the engine: the dense layer keeps every token, the other layer
 * holds ceil(frac * n) entries per head; every rule runs; a pool too small for the dense layers
 * is refused. */
static void test_engine_pool(void) {
    const ig_policy_ops *ops = ig_policy_find("infinigen");
    const char *rules[] = {"pool_evict=fifo", "pool_evict=lru", "pool_evict=counter"};
    for (int mi = 0; mi < 2; mi++) {
        const ig_model_config *c = ig_model_get_config(g_models[mi]);
        char skew[4400];
        snprintf(skew, sizeof skew, "skew=%.4300s", g_skew_path[mi]);
        for (int ri = 0; ri < 3; ri++) {
            /* 2 layers, 1 dense: pool 0.8 of the cache leaves 0.6 for the sparse layer */
            const char *sets[] = {"dense_layers=1", "pool_capacity=0.8", rules[ri], skew};
            size_t n = 0;
            ig_engine *e = NULL;
            float *out = run_engine(mi, ops, sets, 4, &n, &e);
            CU_ASSERT_FATAL(out && e);
            ig_kv_stats st = ig_engine_get_kv_stats(e);
            const int len[3] = {17, 33, 64};
            size_t entries = 0;
            for (int i = 0; i < 3; i++)
                entries +=
                    (size_t)c->n_kv_head * ((size_t)len[i] + (size_t)ceil(0.6 * len[i] - 1e-9));
            size_t want = 2 * entries * ig_engine_kv_row_bytes(e);
            printf("\n    %-10s %-18s evictions %lld, home bytes %zu (expected %zu)",
                   g_fixtures[mi], rules[ri], (long long)st.evictions, ig_engine_kv_home_bytes(e),
                   want);
            CU_ASSERT(st.evictions > 0);
            CU_ASSERT_EQUAL(ig_engine_kv_home_bytes(e), want);
            ig_engine_free(e);
            free(out);
        }
        /* 1 dense layer of 2 needs more than half of the cache */
        const char *small[] = {"dense_layers=1", "pool_capacity=0.5", skew};
        policy_run r;
        ig_error err;
        CU_ASSERT_EQUAL(policy_open(&r, mi, 1, 64, small, 3, &err), IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "pool capacity 0.5 cannot hold the 1 dense layers"));
    }
    printf("\n    ");
}

/* ---- the command line ---- */

static int run_igen(const char *model, const char *args, char *errbuf, size_t n) {
    char cmd[16384], ep[4300];
    snprintf(ep, sizeof ep, "%s/igen-stderr.txt", ig_test_tmpdir());
    snprintf(cmd, sizeof cmd, "IGEN_MODEL='%s' '%s/igen' %s >/dev/null 2>'%s'",
             ig_test_fixture(model), IG_BINARY_DIR, args, ep);
    int st = system(cmd);
    FILE *f = fopen(ep, "rb");
    errbuf[0] = '\0';
    if (f) {
        size_t got = fread(errbuf, 1, n - 1, f);
        errbuf[got] = '\0';
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void) {
    char err[8192], args[16384], text[4300], out[4300];
    snprintf(text, sizeof text, "%s/calib.txt", ig_test_tmpdir());
    FILE *f = fopen(text, "wb");
    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < 40; i++)
        fprintf(f, "The quick brown fox %d jumps over the lazy dog; it was the best of times.\n",
                i);
    fclose(f);
    CU_ASSERT_EQUAL(run_igen("tiny_llama", "calibrate --help", err, sizeof err), 0);
    for (int mi = 0; mi < 2; mi++) {
        snprintf(out, sizeof out, "%s/cli-%s.skew", ig_test_tmpdir(), g_fixtures[mi]);
        snprintf(args, sizeof args, "calibrate --text '%s' --out '%s' --tokens 100 --quiet", text,
                 out);
        CU_ASSERT_EQUAL(run_igen(g_fixtures[mi], args, err, sizeof err), 0);
        ig_skew *s = NULL;
        ig_error e;
        CU_ASSERT_EQUAL(ig_skew_load(out, &s, &e), IG_OK);
        CU_ASSERT(s && s->calib_tokens == 100);
        CU_ASSERT(s && ig_skew_check(s, ig_model_get_config(g_models[mi]), out, &e) == IG_OK);
        ig_skew_free(s);
        /* and the policy runs with it */
        snprintf(args, sizeof args,
                 "ppl --text '%s' --ctx 64 --windows 2 --prefill 16 --policy infinigen --set "
                 "dense_layers=0 --set skew='%s' --quiet",
                 text, out);
        CU_ASSERT_EQUAL(run_igen(g_fixtures[mi], args, err, sizeof err), 0);
    }
    /* another model's file: exit 2, one clear line */
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 64 --windows 1 --prefill 16 --policy infinigen --set "
             "dense_layers=0 --set skew='%s' --quiet",
             text, out); /* out: tiny_opt's file, model tiny_llama */
    CU_ASSERT_EQUAL(run_igen("tiny_llama", args, err, sizeof err), 2);
    printf("\n    %s", err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "was made for another model"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "n_kv_head 4 (this model: 2)"));
    /* a pool too small: exit 2 */
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 64 --windows 1 --prefill 16 --policy infinigen --set "
             "pool_capacity=0.5 --quiet",
             text);
    CU_ASSERT_EQUAL(run_igen("tiny_llama", args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "pool capacity 0.5 cannot hold"));
    /* missing options and bad values */
    CU_ASSERT_EQUAL(run_igen("tiny_llama", "calibrate --out x.skew", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--text FILE and --out SKEW are required"));
    snprintf(args, sizeof args, "calibrate --text '%s' --out '%s' --tokens 0", text, out);
    CU_ASSERT_EQUAL(run_igen("tiny_llama", args, err, sizeof err), 2);
    printf("\n    ");
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("infinigen", suite_init, suite_clean);
    CU_add_test(s, "eigen_orthogonal", test_eigen_orthogonal);
    CU_add_test(s, "rotation_preserves_qk", test_rotation_preserves_qk);
    CU_add_test(s, "partial_scores_kernel", test_partial_scores_kernel);
    CU_add_test(s, "gather_attention_kernel", test_gather_attention_kernel);
    CU_add_test(s, "threshold_count", test_threshold_count);
    CU_add_test(s, "fetch_count", test_fetch_count);
    CU_add_test(s, "top_n", test_top_n);
    CU_add_test(s, "pool_victims", test_pool_victims);
    CU_add_test(s, "selection_rule", test_selection_rule);
    CU_add_test(s, "failed_table_adaptive", test_failed_table_adaptive);
    CU_add_test(s, "multi_query_group", test_multi_query_group);
    CU_add_test(s, "pool_counters", test_pool_counters);
    CU_add_test(s, "wq_handed_in", test_wq_handed_in);
    CU_add_test(s, "skew_file", test_skew_file);
    CU_add_test(s, "engine_runs", test_engine_runs);
    CU_add_test(s, "engine_pool", test_engine_pool);
    CU_add_test(s, "cli", test_cli);
}
