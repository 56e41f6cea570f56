/* Block-quantized weights on the CPU (kernels/cpu/qlinear.c, core/base/dtype.c): ig_cpu_linear on
 * q4_0/q4_1/q8_0/q4g64/q8g64 against the reference path (ig_dequant_row_ref, then the f32 reference
 * linear in double) at every SIMD level this machine allows, the SIMD row dequantizer bit for bit
 * against the reference, the reference against gguf-py's exact dequantizer for the ggml formats,
 * the q4g64/q8g64 quantizer's round trip, quantized embedding tables and constant rows (d = 0).
 *
 * Bounds: linear |y - ref| <= 1e-5 * (sum_k |x_k w_nk| + |b_n|) per element (f32 accumulation in
 * another order; the weights the kernel uses are exactly the dequantized ones), and bitwise equal
 * to ig_cpu_linear on the dequantized f32 matrix (same SIMD level, threads, GEMV or sgemm path: the
 * quantized kernels accumulate in the f32 kernels' order), so a quantized model computes what its
 * dequantized f32 twin computes; dequantization, embedding and ig_quantize_rows bitwise; round
 * trip |x - x'| <= d / 2 plus the f16 rounding of d and m (see check_roundtrip), and exact for
 * values on the grid. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dtype.h"
#include "core/model/io/gguf.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ref.h"
#include "core/model/io/ggml_dequant.h"
#include "tests/kernel_util.h"
#include "tests/test_util.h"

static const ig_dtype k_qtypes[] = {IG_DTYPE_Q4_0, IG_DTYPE_Q4_1, IG_DTYPE_Q8_0, IG_DTYPE_Q4G64,
                                    IG_DTYPE_Q8G64};
#define N_QTYPES 5

static void put_half(unsigned char *p, float f) {
    uint16_t h = ig_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* Bytes of the f16 scale(s) at the start of a block. */
static int scale_bytes(ig_dtype t) {
    return t == IG_DTYPE_Q4_0 || t == IG_DTYPE_Q8_0 ? 2 : 4;
}

/* A random finite f16 scale: mostly ordinary magnitudes of either sign, sometimes 0, a subnormal,
 * or the largest f16. */
static float rand_scale(ig_rng *r) {
    uint64_t u = ig_rng_next(r) % 16;
    if (u == 0) return 0.0f;
    if (u == 1) return (ig_rng_next(r) & 1 ? -1.0f : 1.0f) * 5.96e-8f * (float)(1 + u % 1000);
    if (u == 2) return 65504.0f;
    return frand(r, -0.2f, 0.2f);
}

/* A quantized [rows][cols] matrix: random values quantized with the reference, then one block in
 * three with random codes and random finite scales (every code value, negative d, subnormals). */
static unsigned char *make_qweights(ig_rng *r, ig_dtype t, int64_t rows, int64_t cols) {
    size_t rb = ig_dtype_row_bytes(t, cols), bb = ig_dtype_block_bytes(t);
    float *f = malloc((size_t)(rows * cols) * sizeof(float));
    unsigned char *q = malloc(rows * rb);
    CU_ASSERT_FATAL(f && q);
    fill(r, f, rows * cols, -1.0f, 1.0f);
    ig_quantize_rows(t, f, rows, cols, q);
    size_t nblocks = rows * rb / bb;
    for (size_t b = 0; b < nblocks; b += 3) {
        unsigned char *blk = q + b * bb;
        for (size_t j = 0; j < bb; j++) blk[j] = (unsigned char)ig_rng_next(r);
        put_half(blk, rand_scale(r));
        if (scale_bytes(t) == 4) put_half(blk + 2, frand(r, -1.0f, 1.0f));
    }
    free(f);
    return q;
}

/* The reference path: W dequantized with ig_dequant_row_ref, as f32. */
static float *dequant_ref(ig_dtype t, const unsigned char *q, int64_t rows, int64_t cols) {
    float *w = malloc((size_t)(rows * cols) * sizeof(float));
    CU_ASSERT_FATAL(w != NULL);
    size_t rb = ig_dtype_row_bytes(t, cols);
    for (int64_t n = 0; n < rows; n++) ig_dequant_row_ref(t, q + n * rb, w + n * cols, cols);
    return w;
}

/* ---- linear --------------------------------------------------------------------------------- */

static int g_fail_printed;

static void check_qlinear(ig_rng *r, ig_dtype t, int64_t M, int64_t K, int64_t N, int with_bias,
                          const char *what) {
    float *x = malloc((size_t)(M * K) * sizeof(float));
    float *bias = with_bias ? malloc((size_t)N * sizeof(float)) : NULL;
    float *ref = malloc((size_t)(M * N) * sizeof(float));
    float *y = galloc(M * N), *yf = galloc(M * N);
    CU_ASSERT_FATAL(x && ref && (!with_bias || bias));
    fill(r, x, M * K, -1.0f, 1.0f);
    if (bias) fill(r, bias, N, -0.5f, 0.5f);
    unsigned char *q = make_qweights(r, t, N, K);
    float *w = dequant_ref(t, q, N, K);
    ig_ref_linear(x, M, K, w, IG_DTYPE_F32, N, bias, ref);
    ig_cpu_linear(x, M, K, q, t, N, bias, y);
    ig_cpu_linear(x, M, K, w, IG_DTYPE_F32, N, bias, yf);
    int same = memcmp(y, yf, (size_t)(M * N) * sizeof(float)) == 0;
    int bad = 0;
    double worst = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double mag = bias ? fabs(bias[n]) : 0.0;
            for (int64_t k = 0; k < K; k++) mag += fabs((double)x[m * K + k] * w[n * K + k]);
            double err = fabs((double)y[m * N + n] - ref[m * N + n]);
            if (!(err <= 1e-5 * mag + 1e-30)) bad++;
            if (mag > 0 && err / mag > worst) worst = err / mag;
        }
    int ok_guard = gintact(y, M * N);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(ok_guard);
    CU_ASSERT(same);
    if ((bad || !ok_guard || !same) && g_fail_printed++ < 10)
        printf("\n  qlinear %s %s M=%ld K=%ld N=%ld bias=%d [%s, %d threads]: bad=%d guard=%d "
               "worst rel err %.3g, bitwise equal to f32 on the dequantized W: %d\n",
               what, ig_dtype_name(t), (long)M, (long)K, (long)N, with_bias, ig_cpu_simd_name(),
               ig_cpu_get_threads(), bad, ok_guard, worst, same);
    free(x);
    free(bias);
    free(ref);
    free(q);
    free(w);
    gfree(y);
    gfree(yf);
}

static void test_linear_vs_reference(void) {
    ig_rng r;
    ig_rng_seed(&r, 11);
    /* GEMV tiles (1-8 rows on AVX-512, 1-4 on AVX2), the GEMV/sgemm boundary (16/17), large M. */
    static const int64_t Ms[] = {1, 2, 3, 5, 8, 13, 16, 17, 40};
    for (int l = 0; l < N_LEVELS; l++) {
        if (!use_level(l)) continue;
        for (int ti = 0; ti < N_QTYPES; ti++) {
            ig_dtype t = k_qtypes[ti];
            int64_t be = ig_dtype_block_elems(t);
            /* one block; N not a multiple of 16 (or of the thread split); the model's shapes; rows
             * of more than 64 blocks (the kernels walk a row in chunks of 64 blocks) */
            const int64_t shapes[][2] = {{be, 1},    {be, 37},      {3 * 64, 33}, {576, 193},
                                         {1536, 45}, {65 * be, 19}, {130 * be, 3}};
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
                for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                    ig_cpu_set_threads(1 + (int)((mi + si) % 3));
                    check_qlinear(&r, t, Ms[mi], shapes[si][0], shapes[si][1], 0, "shape");
                    check_qlinear(&r, t, Ms[mi], shapes[si][0], shapes[si][1], 1, "shape+bias");
                }
            ig_cpu_set_threads(2);
            check_qlinear(&r, t, 1, 576, 1536, 1, "model");
            check_qlinear(&r, t, 8, 1536, 576, 0, "model");
            check_qlinear(&r, t, 24, 576, 576, 1, "model");
        }
    }
    restore_defaults();
}

/* Rows of one value repeated: d = 0 in q4g64/q8g64/q4_1 (and d = 0 with zeros everywhere). */
static void test_constant_rows(void) {
    static const float values[] = {0.0f, 0.3f, -1.75f, 1e-3f};
    const int64_t K = 128, N = 4, M = 3;
    float x[3 * 128], wf[4 * 128], ref[3 * 4], y[3 * 4];
    ig_rng r;
    ig_rng_seed(&r, 12);
    fill(&r, x, M * K, -1.0f, 1.0f);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) wf[n * K + k] = values[n];
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ig_dtype t = k_qtypes[ti];
        size_t rb = ig_dtype_row_bytes(t, K);
        unsigned char *q = malloc(N * rb);
        CU_ASSERT_FATAL(q != NULL);
        ig_quantize_rows(t, wf, N, K, q);
        float *w = dequant_ref(t, q, N, K);
        for (int64_t n = 0; n < N; n++) {
            /* every element decodes to the same finite value, the input when it is an f16 */
            int same = 1;
            for (int64_t k = 0; k < K; k++) same &= w[n * K + k] == w[n * K];
            CU_ASSERT(same);
            CU_ASSERT(isfinite(w[n * K]));
            IG_ASSERT_NEAR(w[n * K], values[n], 1e-3 * fabs(values[n]));
            /* asymmetric formats: d = 0 and m = the value rounded to f16 */
            int asym = t == IG_DTYPE_Q4G64 || t == IG_DTYPE_Q8G64 || t == IG_DTYPE_Q4_1;
            if (asym) CU_ASSERT_EQUAL(w[n * K], ig_f16_to_f32(ig_f32_to_f16(values[n])));
        }
        if (t == IG_DTYPE_Q4G64 || t == IG_DTYPE_Q8G64 || t == IG_DTYPE_Q4_1) {
            uint16_t d;
            memcpy(&d, q + rb, 2); /* row 1's first block */
            CU_ASSERT_EQUAL(ig_f16_to_f32(d), 0.0f);
        }
        ig_ref_linear(x, M, K, w, IG_DTYPE_F32, N, NULL, ref);
        for (int l = 0; l < N_LEVELS; l++) {
            if (ig_cpu_set_simd(k_levels[l]) != 0) continue;
            float row[128];
            for (int64_t n = 0; n < N; n++) {
                ig_cpu_dequant_row(t, q + n * rb, row, K);
                CU_ASSERT(memcmp(row, w + n * K, sizeof row) == 0);
            }
            ig_cpu_linear(x, M, K, q, t, N, NULL, y);
            for (int64_t i = 0; i < M * N; i++) {
                double mag = 0;
                for (int64_t k = 0; k < K; k++)
                    mag += fabs((double)x[i / N * K + k] * w[(i % N) * K + k]);
                CU_ASSERT(isfinite(y[i]));
                IG_ASSERT_NEAR(y[i], ref[i], 1e-5 * mag + 1e-30);
            }
        }
        restore_defaults();
        free(q);
        free(w);
    }
}

/* ig_cpu_linear_multi: several matrices over the same x (row counts not multiples of the row
 * block, as a layer's q/k/v), each output bitwise ig_cpu_linear on that matrix
 * alone, for every weight type, at every SIMD level, for GEMV sizes of M and above them (one
 * ig_cpu_linear per matrix there), with and without biases; and at 1 and 2 threads. */
static void test_linear_multi(void) {
    static const ig_dtype types[] = {IG_DTYPE_F32,  IG_DTYPE_F16,  IG_DTYPE_BF16,  IG_DTYPE_Q4_0,
                                     IG_DTYPE_Q4_1, IG_DTYPE_Q8_0, IG_DTYPE_Q4G64, IG_DTYPE_Q8G64};
    /* 892 rows: at least 96 KiB of every type, so that two threads split them */
    const int64_t K = 512, Ns[3] = {520, 72, 300};
    const int64_t Ms[4] = {1, 3, 16, 17};
    ig_rng r;
    ig_rng_seed(&r, 77);
    static float x[17 * 512], bias[520], want[3][17 * 520], got[3][17 * 520];
    fill(&r, x, 17 * K, -1.0f, 1.0f);
    fill(&r, bias, 520, -0.5f, 0.5f);
    int prev_threads = ig_cpu_get_threads();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        ig_dtype t = types[ti];
        unsigned char *w[3];
        for (int i = 0; i < 3; i++) {
            if (ig_dtype_is_quant(t)) {
                w[i] = make_qweights(&r, t, Ns[i], K);
            } else {
                float *f = malloc((size_t)(Ns[i] * K) * sizeof(float));
                w[i] = malloc(ig_dtype_row_bytes(t, K) * (size_t)Ns[i]);
                CU_ASSERT_FATAL(f && w[i]);
                fill(&r, f, Ns[i] * K, -1.0f, 1.0f);
                ig_convert(t, w[i], IG_DTYPE_F32, f, (size_t)(Ns[i] * K));
                free(f);
            }
        }
        for (int l = 0; l < N_LEVELS; l++) {
            if (ig_cpu_set_simd(k_levels[l]) != 0) continue;
            for (int th = 1; th <= 2; th++) {
                ig_cpu_set_threads(th);
                for (int mi = 0; mi < 4; mi++)
                    for (int wb = 0; wb < 2; wb++) {
                        int64_t M = Ms[mi];
                        ig_linear_part p[3];
                        for (int i = 0; i < 3; i++) {
                            const float *b = wb && i != 1 ? bias : NULL;
                            ig_cpu_linear(x, M, K, w[i], t, Ns[i], b, want[i]);
                            memset(got[i], 0xff, sizeof got[i]);
                            p[i] = (ig_linear_part){w[i], Ns[i], b, got[i]};
                        }
                        ig_cpu_linear_multi(x, M, K, t, p, 3);
                        for (int i = 0; i < 3; i++) {
                            int same =
                                !memcmp(want[i], got[i], (size_t)(M * Ns[i]) * sizeof(float));
                            CU_ASSERT(same);
                            if (!same)
                                fprintf(stderr, "\n    %s %s threads %d M %lld matrix %d differs",
                                        ig_dtype_name(t), k_levels[l], th, (long long)M, i);
                        }
                    }
            }
        }
        restore_defaults();
        for (int i = 0; i < 3; i++) free(w[i]);
    }
    ig_cpu_set_threads(prev_threads);
}

/* ---- dequantization ------------------------------------------------------------------------- */

static void test_dequant_row_simd(void) {
    ig_rng r;
    ig_rng_seed(&r, 13);
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ig_dtype t = k_qtypes[ti];
        int64_t be = ig_dtype_block_elems(t);
        static const int64_t nbs[] = {1, 2, 7, 8, 9, 16, 17, 40, 64, 65, 130};
        for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++) {
            int64_t nb = nbs[ni];
            int64_t n = nb * be;
            unsigned char *q = make_qweights(&r, t, 1, n);
            /* every block with random codes and scales, plus one of all-zero bytes */
            for (int64_t b = 0; b < nb; b++) {
                unsigned char *blk = q + b * ig_dtype_block_bytes(t);
                for (size_t j = 0; j < ig_dtype_block_bytes(t); j++)
                    blk[j] = (unsigned char)ig_rng_next(&r);
                put_half(blk, rand_scale(&r));
                if (scale_bytes(t) == 4)
                    put_half(blk + 2, b % 2 ? rand_scale(&r) : frand(&r, -300.0f, 300.0f));
            }
            memset(q, 0, ig_dtype_block_bytes(t));
            float *ref = malloc((size_t)n * sizeof(float));
            CU_ASSERT_FATAL(ref != NULL);
            ig_dequant_row_ref(t, q, ref, n);
            for (int l = 0; l < N_LEVELS; l++) {
                if (!use_level(l)) continue;
                float *out = galloc(n);
                ig_cpu_dequant_row(t, q, out, n);
                int same = memcmp(out, ref, (size_t)n * sizeof(float)) == 0;
                CU_ASSERT(same);
                CU_ASSERT(gintact(out, n));
                if (!same) {
                    for (int64_t i = 0; i < n; i++)
                        if (memcmp(out + i, ref + i, 4)) {
                            printf("\n  dequant %s [%s] n=%ld: element %ld is %.9g, ref %.9g\n",
                                   ig_dtype_name(t), k_levels[l], (long)n, (long)i, out[i], ref[i]);
                            break;
                        }
                }
                gfree(out);
            }
            restore_defaults();
            free(ref);
            free(q);
        }
    }
    /* float storage passes through as a widen */
    uint16_t h[3] = {0x3c00, 0xc000, 0x0001};
    float o[3];
    ig_cpu_dequant_row(IG_DTYPE_F16, h, o, 3);
    CU_ASSERT(o[0] == 1.0f && o[1] == -2.0f && o[2] == ig_f16_to_f32(1));
}

/* ig_dequant_row_ref of the ggml formats against the gguf-py-exact ig_dequantize_f32. */
static void test_ref_matches_gguf(void) {
    static const struct {
        ig_dtype t;
        int ggml;
    } pairs[] = {{IG_DTYPE_Q4_0, IG_GGML_Q4_0},
                 {IG_DTYPE_Q4_1, IG_GGML_Q4_1},
                 {IG_DTYPE_Q8_0, IG_GGML_Q8_0}};
    ig_rng r;
    ig_rng_seed(&r, 14);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        ig_dtype t = pairs[i].t;
        CU_ASSERT_EQUAL((int64_t)ig_ggml_block_size(pairs[i].ggml), ig_dtype_block_elems(t));
        CU_ASSERT_EQUAL(ig_ggml_block_bytes(pairs[i].ggml), ig_dtype_block_bytes(t));
        const int64_t n = 64 * 32;
        unsigned char *q = make_qweights(&r, t, 1, n);
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        CU_ASSERT_FATAL(a && b);
        ig_dequant_row_ref(t, q, a, n);
        CU_ASSERT_EQUAL(ig_dequantize_f32(pairs[i].ggml, q, b, n), 0);
        CU_ASSERT(memcmp(a, b, n * sizeof(float)) == 0);
        free(a);
        free(b);
        free(q);
    }
}

/* ---- quantization -----------------------------------------------------------------------------
 */

static void check_roundtrip(ig_dtype t, const float *x, int64_t n, const char *what) {
    const int levels = t == IG_DTYPE_Q4G64 ? 15 : 255;
    unsigned char *q = malloc(ig_dtype_row_bytes(t, n));
    float *y = malloc((size_t)n * sizeof(float));
    CU_ASSERT_FATAL(q && y);
    CU_ASSERT_EQUAL(ig_quantize_row_ref(t, x, q, n), 0);
    ig_dequant_row_ref(t, q, y, n);
    int bad = 0;
    for (int64_t g = 0; g < n / 64; g++) {
        const unsigned char *blk = q + g * ig_dtype_block_bytes(t);
        uint16_t hd, hm;
        memcpy(&hd, blk, 2);
        memcpy(&hm, blk + 2, 2);
        float d = ig_f16_to_f32(hd), m = ig_f16_to_f32(hm);
        float mn = x[g * 64], mx = x[g * 64];
        for (int j = 1; j < 64; j++) {
            mn = fminf(mn, x[g * 64 + j]);
            mx = fmaxf(mx, x[g * 64 + j]);
        }
        /* d/2 from the code; d and m are f16 (relative 2^-11): the grid m + levels * d can end
         * short of the group's max by levels * d * 2^-11 + |m| * 2^-11 (clamped codes); then the
         * f32 roundings of the decode. */
        double tol = d / 2 + (levels * d + fabs(m) + fabs(mn)) * 0x1p-11 +
                     (fabs(mn) + fabs(mx)) * 0x1p-22 + 1e-30;
        for (int j = 0; j < 64; j++)
            if (!(fabs((double)y[g * 64 + j] - x[g * 64 + j]) <= tol)) bad++;
        CU_ASSERT(d >= 0.0f);
    }
    CU_ASSERT_EQUAL(bad, 0);
    if (bad) printf("\n  roundtrip %s %s: %d elements outside d/2\n", ig_dtype_name(t), what, bad);
    free(q);
    free(y);
}

static void test_quant_roundtrip(void) {
    ig_rng r;
    ig_rng_seed(&r, 15);
    const int64_t n = 64 * 50;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    unsigned char *q = malloc(ig_dtype_row_bytes(IG_DTYPE_Q8G64, n));
    CU_ASSERT_FATAL(x && y && q);
    static const ig_dtype types[] = {IG_DTYPE_Q4G64, IG_DTYPE_Q8G64};
    for (int ti = 0; ti < 2; ti++) {
        ig_dtype t = types[ti];
        const int levels = t == IG_DTYPE_Q4G64 ? 15 : 255;
        fill(&r, x, n, -1.0f, 1.0f);
        check_roundtrip(t, x, n, "uniform [-1, 1]");
        fill(&r, x, n, 100.0f, 101.0f); /* a large offset: m's rounding matters */
        check_roundtrip(t, x, n, "uniform [100, 101]");
        for (int64_t i = 0; i < n; i++) x[i] = frand(&r, -1.0f, 1.0f) * 1e-3f * (float)(i % 7);
        check_roundtrip(t, x, n, "small, with zeros");

        /* Values on the grid come back exactly, codes and all: per group d = k * 2^-e (a few
         * mantissa bits), m = an integer multiple of 2^-e, every code present at least once. */
        unsigned char *codes = malloc(n);
        CU_ASSERT_FATAL(codes != NULL);
        for (int64_t g = 0; g < n / 64; g++) {
            int e = 4 + (int)(ig_rng_next(&r) % 8), k = 1 + 2 * (int)(ig_rng_next(&r) % 4);
            float d = ldexpf((float)k, -e);
            float m = ldexpf((float)((int)(ig_rng_next(&r) % 2001) - 1000), -e);
            for (int j = 0; j < 64; j++) {
                int c = j <= levels ? j : (int)(ig_rng_next(&r) % (uint64_t)(levels + 1));
                if (j == 63) c = levels; /* q4g64: the max is present too */
                codes[g * 64 + j] = (unsigned char)c;
                float p = d * (float)c;
                x[g * 64 + j] = p + m;
            }
        }
        CU_ASSERT_EQUAL(ig_quantize_row_ref(t, x, q, n), 0);
        ig_dequant_row_ref(t, q, y, n);
        CU_ASSERT(memcmp(x, y, n * sizeof(float)) == 0);
        int code_bad = 0;
        for (int64_t g = 0; g < n / 64; g++) {
            const unsigned char *c = q + g * ig_dtype_block_bytes(t) + 4;
            for (int j = 0; j < 64; j++) {
                int got = t == IG_DTYPE_Q8G64 ? c[j] : j < 32 ? c[j] & 15 : c[j - 32] >> 4;
                code_bad += got != codes[g * 64 + j];
            }
        }
        CU_ASSERT_EQUAL(code_bad, 0);
        free(codes);
    }
    free(x);
    free(y);
    free(q);
}

/* ig_quantize_rows: the reference's bytes row by row, for any thread count (the matrix is
 * large enough for several threads). */
static void test_quantize_rows(void) {
    ig_rng r;
    ig_rng_seed(&r, 17);
    const int64_t rows = 301, cols = 576;
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    CU_ASSERT_FATAL(x != NULL);
    fill(&r, x, rows * cols, -2.0f, 2.0f);
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ig_dtype t = k_qtypes[ti];
        size_t rb = ig_dtype_row_bytes(t, cols);
        unsigned char *q = malloc(rows * rb), *q2 = malloc(rows * rb);
        CU_ASSERT_FATAL(q && q2);
        for (int64_t i = 0; i < rows; i++)
            CU_ASSERT_EQUAL(ig_quantize_row_ref(t, x + i * cols, q + (size_t)i * rb, cols), 0);
        for (int th = 1; th <= 3; th++) {
            ig_cpu_set_threads(th);
            memset(q2, 0xa5, rows * rb);
            ig_quantize_rows(t, x, rows, cols, q2);
            CU_ASSERT(memcmp(q, q2, rows * rb) == 0);
        }
        free(q);
        free(q2);
    }
    restore_defaults();
    free(x);
}

/* ---- embedding --------------------------------------------------------------------------------
 */

static void test_embed_quant(void) {
    ig_rng r;
    ig_rng_seed(&r, 16);
    const int64_t vocab = 29, dim = 192;
    int32_t ids[7] = {0, 28, 5, 5, 17, 1, 28};
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ig_dtype t = k_qtypes[ti];
        unsigned char *table = make_qweights(&r, t, vocab, dim);
        float *w = dequant_ref(t, table, vocab, dim);
        for (int l = 0; l < N_LEVELS; l++) {
            if (!use_level(l)) continue;
            float *out = galloc(7 * dim);
            ig_cpu_embed(table, t, dim, ids, 7, out);
            int same = 1;
            for (int i = 0; i < 7; i++)
                same &= memcmp(out + i * dim, w + ids[i] * dim, dim * sizeof(float)) == 0;
            CU_ASSERT(same);
            CU_ASSERT(gintact(out, 7 * dim));
            /* the reference embedding (ig_load_f32 per element) agrees too */
            float *ref = malloc(7 * dim * sizeof(float));
            CU_ASSERT_FATAL(ref != NULL);
            ig_ref_embed(table, t, dim, ids, 7, ref);
            CU_ASSERT(memcmp(out, ref, 7 * dim * sizeof(float)) == 0);
            free(ref);
            gfree(out);
        }
        restore_defaults();
        free(table);
        free(w);
    }
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("qlinear", NULL, NULL);
    CU_add_test(s, "linear_vs_reference", test_linear_vs_reference);
    CU_add_test(s, "constant_rows", test_constant_rows);
    CU_add_test(s, "linear_multi", test_linear_multi);
    CU_add_test(s, "dequant_row_simd", test_dequant_row_simd);
    CU_add_test(s, "ref_matches_gguf", test_ref_matches_gguf);
    CU_add_test(s, "quant_roundtrip", test_quant_roundtrip);
    CU_add_test(s, "quantize_rows", test_quantize_rows);
    CU_add_test(s, "embed_quant", test_embed_quant);
}
