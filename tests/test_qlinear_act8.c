/* The int8-activation kernels (kernels/cpu/qlinear_act8.c): the activation quantizer's bytes at
 * every SIMD level against the scalar one, its codes and scales against a hand computation, the
 * SIMD row kernels against the scalar reference (the definition), the result against the exact
 * f64 product of the dequantized weights with unquantized x within the activations' rounding
 * bound, hostile codes (q8_0's -128) and scales (inf, NaN), and the unsupported types.
 *
 * Bounds: SIMD vs scalar |y - y_ref| <= 1e-5 * mag, mag = sum_b sum_j (|d c_j| + |m|)(|x_j| +
 * dx_b / 2) + |bias| (at least sum |terms| of the definition: |dx qx_j| <= |x_j| + dx / 2); vs the
 * exact product |y - y_exact| <= sum_b (dx_b / 2)(1 + 2^-16) sum_j |w_j| + 1e-5 * mag (each code is
 * within half a step of x / dx, the step rounded once in f32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/base/dtype.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/kernel_util.h"
#include "tests/test_util.h"

static const ig_dtype k_a8types[] = {IG_DTYPE_Q4_0, IG_DTYPE_Q4_1, IG_DTYPE_Q8_0};
#define N_A8TYPES 3

static void put_half(unsigned char *p, float f) {
    uint16_t h = ig_f32_to_f16(f);
    memcpy(p, &h, 2);
}

static float half_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ig_f16_to_f32(h);
}

/* The SIMD level of k_levels[l] when this machine has it (selected), else -1 (noted as a skip). */
static int level_at(int l) {
    if (!use_level(l)) return -1;
    return (int)ig_cpu_simd_level();
}

static void *xq_alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    CU_ASSERT_FATAL(p != NULL);
    return p;
}

/* Block b of a weight row: scale d, offset m (0 but for q4_1), codes c[32] as integers. */
static void block_codes(ig_dtype t, const unsigned char *blk, float *d, float *m, int *c) {
    *d = half_at(blk);
    *m = t == IG_DTYPE_Q4_1 ? half_at(blk + 2) : 0.0f;
    if (t == IG_DTYPE_Q8_0) {
        for (int j = 0; j < 32; j++) c[j] = (int8_t)blk[2 + j];
        return;
    }
    const unsigned char *qs = blk + (t == IG_DTYPE_Q4_0 ? 2 : 4);
    int off = t == IG_DTYPE_Q4_0 ? 8 : 0;
    for (int j = 0; j < 16; j++) {
        c[j] = (qs[j] & 15) - off;
        c[j + 16] = (qs[j] >> 4) - off;
    }
}

static float block_dx(const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    return amax / 127.0f;
}

/* x with the awkward blocks: zeros, one-hot, a large outlier, all +-equal magnitude (codes +-127),
 * tiny (subnormal dx). */
static void fill_x(ig_rng *r, float *x, int64_t M, int64_t K) {
    fill(r, x, M * K, -1.0f, 1.0f);
    for (int64_t m = 0; m < M; m++) {
        float *xm = x + m * K;
        int64_t nb = K / 32;
        for (int64_t b = 0; b < nb; b++) {
            float *xb = xm + 32 * b;
            switch ((b + m) % 7) {
            case 1:
                memset(xb, 0, 32 * sizeof(float));
                break;
            case 2:
                memset(xb, 0, 32 * sizeof(float));
                xb[(b * 5 + m) % 32] = frand(r, -3.0f, 3.0f);
                break;
            case 3:
                xb[(b * 3 + m) % 32] = 1e4f;
                break;
            case 4:
                for (int j = 0; j < 32; j++) xb[j] = (j * 7 + m) % 3 ? 0.75f : -0.75f;
                break;
            case 5:
                for (int j = 0; j < 32; j++) xb[j] *= 1e-38f;
                break;
            default:
                break;
            }
        }
    }
}

/* Quantized [rows][K] weights: random values through the library's quantizer, then one block in
 * three with random codes and scales; q8_0 has blocks of all -128, all 127, and alternating. */
static unsigned char *make_weights(ig_rng *r, ig_dtype t, int64_t rows, int64_t K) {
    size_t rb = ig_dtype_row_bytes(t, K), bb = ig_dtype_block_bytes(t);
    float *f = malloc((size_t)(rows * K) * sizeof(float));
    unsigned char *q = malloc(rows * rb);
    CU_ASSERT_FATAL(f && q);
    fill(r, f, rows * K, -1.0f, 1.0f);
    ig_quantize_rows(t, f, rows, K, q);
    size_t nblocks = rows * rb / bb;
    for (size_t b = 0; b < nblocks; b++) {
        unsigned char *blk = q + b * bb;
        if (b % 3 == 1) {
            for (size_t j = 0; j < bb; j++) blk[j] = (unsigned char)ig_rng_next(r);
            put_half(blk, frand(r, -0.2f, 0.2f));
            if (t == IG_DTYPE_Q4_1) put_half(blk + 2, frand(r, -1.0f, 1.0f));
        }
        if (t == IG_DTYPE_Q8_0 && b % 5 == 2)
            for (int j = 0; j < 32; j++)
                blk[2 + j] = b % 3 == 0 ? 0x80 : b % 3 == 1 ? 0x7f : j % 2 ? 0x80 : 0x7f;
    }
    free(f);
    return q;
}

/* sum_b sum_j (|d c_j| + |m|)(|x_j| + dx_b / 2): at least the definition's sum of |terms|. */
static double act8_mag(ig_dtype t, const unsigned char *wrow, const float *x, int64_t K) {
    double mag = 0;
    for (int64_t b = 0; b < K / 32; b++) {
        float d, m;
        int c[32];
        block_codes(t, wrow + (size_t)b * ig_dtype_block_bytes(t), &d, &m, c);
        double hdx = block_dx(x + 32 * b) / 2;
        for (int j = 0; j < 32; j++)
            mag += (fabs((double)d * c[j]) + fabs(m)) * (fabs(x[32 * b + j]) + hdx);
    }
    return mag;
}

/* ---- quantization ------------------------------------------------------------------------- */

static void test_quantize_levels(void) {
    ig_rng r;
    ig_rng_seed(&r, 41);
    static const int64_t Ks[] = {32, 96, 576, 608};
    const int64_t M = 5;
    for (int ti = 0; ti < N_A8TYPES; ti++) {
        ig_dtype t = k_a8types[ti];
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            int64_t K = Ks[ki];
            float *x = malloc((size_t)(M * K) * sizeof(float));
            CU_ASSERT_FATAL(x != NULL);
            fill_x(&r, x, M, K);
            /* hostile activations: a NaN, an inf (their blocks' bytes must still agree) */
            if (K >= 96) {
                x[K + 40] = NAN;
                x[2 * K + 70] = INFINITY;
            }
            size_t bytes = ig_cpu_act8_bytes(t, M, K);
            CU_ASSERT_FATAL(bytes > 0);
            CU_ASSERT(bytes % 64 == 0);
            unsigned char *ref = xq_alloc(bytes), *got = xq_alloc(bytes);
            memset(ref, 0xa5, bytes);
            ig_cpu_act8_quantize(IG_SIMD_SCALAR, t, x, M, K, ref);
            for (int l = 1; l < N_LEVELS; l++) {
                int level = level_at(l);
                if (level < 0) continue;
                memset(got, 0x5a, bytes); /* every byte must be written */
                ig_cpu_act8_quantize((ig_simd_level)level, t, x, M, K, got);
                int same = memcmp(ref, got, bytes) == 0;
                CU_ASSERT(same);
                if (!same) {
                    size_t i = 0;
                    while (ref[i] == got[i]) i++;
                    printf("\n  act8 quantize %s K=%ld [%s]: byte %zu of %zu differs\n",
                           ig_dtype_name(t), (long)K, k_levels[l], i, bytes);
                }
            }
            restore_defaults();
            free(ref);
            free(got);
            free(x);
        }
    }
}

/* Codes and scales by hand, read back through the kernels with one-hot weights: a q8_0 / q4_0 row
 * with d = 1 and code 1 at element j gives dx * qx_j; a q4_1 row with d = 0, m = 1 gives s. */
static void test_quantize_hand(void) {
    float x[64] = {127.0f, 2.5f, -3.5f, 0.5f, -126.6f, 1.49f, -0.5f, 1.5f};
    static const int want_q0[8] = {127, 2, -4, 0, -127, 1, 0, 2}; /* dx = 1: ties to even */
    /* block 1: dx = max|x| / 127, about 0.3 / 127 */
    for (int j = 0; j < 32; j++) x[32 + j] = 0.3f * (float)((j * 13) % 21 - 10) / 10.0f;
    float dx1 = block_dx(x + 32);
    int want[64];
    for (int j = 0; j < 32; j++) want[j] = j < 8 ? want_q0[j] : 0;
    int sum0 = 0, sum1 = 0;
    for (int j = 0; j < 32; j++) {
        want[32 + j] = (int)lrintf(x[32 + j] / dx1);
        sum0 += want[j];
        sum1 += want[32 + j];
    }
    const int64_t K = 64, N = 64;
    for (int ti = 0; ti < N_A8TYPES; ti++) {
        ig_dtype t = k_a8types[ti];
        size_t rb = ig_dtype_row_bytes(t, K), bb = ig_dtype_block_bytes(t);
        unsigned char *w = calloc(N, rb);
        CU_ASSERT_FATAL(w != NULL);
        for (int64_t n = 0; n < N; n++) {
            unsigned char *blk = w + n * rb + (size_t)(n / 32) * bb;
            int j = (int)(n % 32);
            if (t == IG_DTYPE_Q4_1) { /* d = 0, m = 1: the block's s */
                put_half(blk + 2, 1.0f);
                continue;
            }
            put_half(blk, 1.0f);
            if (t == IG_DTYPE_Q8_0) {
                blk[2 + j] = 1;
            } else { /* q4_0: code 8 is 0, 9 is 1 */
                for (int b = 0; b < 2; b++) memset(w + n * rb + (size_t)b * bb + 2, 0x88, 16);
                blk[2 + j % 16] = (unsigned char)(j < 16 ? 0x89 : 0x98);
            }
        }
        unsigned char *xq = xq_alloc(ig_cpu_act8_bytes(t, 1, K));
        float y[64];
        for (int l = 0; l < N_LEVELS; l++) {
            int level = level_at(l);
            if (level < 0) continue;
            ig_cpu_act8_quantize((ig_simd_level)level, t, x, 1, K, xq);
            ig_act8_rows_fn f = ig_cpu_act8_rows((ig_simd_level)level, t);
            CU_ASSERT_FATAL(f != NULL);
            f(xq, 1, K, w, 0, N, NULL, y, N);
            int bad = 0;
            for (int64_t n = 0; n < N; n++) {
                float e;
                if (t == IG_DTYPE_Q4_1)
                    e = n < 32 ? 1.0f * (float)sum0 : dx1 * (float)sum1;
                else
                    e = n < 32 ? (float)want[n] : (1.0f * dx1) * (float)want[n];
                bad += y[n] != e;
            }
            CU_ASSERT_EQUAL(bad, 0);
            if (bad)
                printf("\n  act8 hand %s [%s]: %d of 64 differ\n", ig_dtype_name(t), k_levels[l],
                       bad);
        }
        restore_defaults();
        free(xq);
        free(w);
    }
}

/* ---- row kernels ---------------------------------------------------------------------------- */

static void check_rows(ig_rng *r, ig_dtype t, int64_t M, int64_t K, int with_bias) {
    const int64_t N = 37, n0 = 3, n1 = 34;
    float *x = malloc((size_t)(M * K) * sizeof(float));
    float bias[37];
    CU_ASSERT_FATAL(x != NULL);
    fill_x(r, x, M, K);
    fill(r, bias, N, -0.5f, 0.5f);
    const float *b = with_bias ? bias : NULL;
    unsigned char *w = make_weights(r, t, N, K);
    size_t rb = ig_dtype_row_bytes(t, K);
    unsigned char *xq = xq_alloc(ig_cpu_act8_bytes(t, M, K));
    float *ref = galloc(M * N), *y = galloc(M * N);
    ig_cpu_act8_quantize(IG_SIMD_SCALAR, t, x, M, K, xq);
    ig_cpu_act8_rows(IG_SIMD_SCALAR, t)(xq, M, K, w, n0, n1, b, ref, N);
    for (int l = 1; l < N_LEVELS; l++) {
        int level = level_at(l);
        if (level < 0) continue;
        ig_act8_rows_fn f = ig_cpu_act8_rows((ig_simd_level)level, t);
        CU_ASSERT_FATAL(f != NULL);
        f(xq, M, K, w, n0, n1, b, y, N);
        int bad = 0, touched = 0;
        double worst = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                float v = y[m * N + n];
                if (n < n0 || n >= n1) { /* outside the range: the sentinel, untouched */
                    touched += memcmp(&v, &k_sentinel, 4) != 0;
                    continue;
                }
                double mag = act8_mag(t, w + n * rb, x + m * K, K) + (b ? fabs(b[n]) : 0.0);
                double err = fabs((double)v - ref[m * N + n]);
                if (!(err <= 1e-5 * mag + 1e-30)) bad++;
                if (mag > 0 && err / mag > worst) worst = err / mag;
            }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(touched, 0);
        CU_ASSERT(gintact(y, M * N));
        if (bad || touched)
            printf("\n  act8 rows %s M=%ld K=%ld bias=%d [%s]: bad=%d touched=%d worst %.3g\n",
                   ig_dtype_name(t), (long)M, (long)K, with_bias, k_levels[l], bad, touched, worst);
    }
    restore_defaults();
    free(x);
    free(w);
    free(xq);
    gfree(ref);
    gfree(y);
}

static void test_rows_vs_scalar(void) {
    ig_rng r;
    ig_rng_seed(&r, 42);
    static const int64_t Ms[] = {1, 2, 3, 5, 8, 16};
    /* blocks: 1, 3, 7, 9 (q4 tail groups of 1..3 quads), 16 (one whole group), 18, 31 (a whole
     * group and a tail of 4 quads, the last partial), 37 */
    static const int64_t Ks[] = {32, 96, 224, 288, 512, 576, 992, 1184};
    for (int ti = 0; ti < N_A8TYPES; ti++)
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
                for (int wb = 0; wb < 2; wb++) check_rows(&r, k_a8types[ti], Ms[mi], Ks[ki], wb);
}

/* The pattern GCC 12.2 -O3 -march=native gets wrong (a signed int8 * int8 sum, gccbug.c): q8_0
 * codes (int8)(-7j), x codes 5j - 60 (dx = 1 through x_31 = 127), against the sum in int64. */
static void test_gcc_pattern(void) {
    const int64_t K = 32;
    float x[32];
    unsigned char w[IG_Q8_0_BYTES];
    put_half(w, 1.0f);
    int64_t want = 0;
    for (int j = 0; j < 32; j++) {
        int8_t c = (int8_t)(uint8_t)(-j * 7);
        int q = j < 31 ? j * 5 - 60 : 127;
        w[2 + j] = (unsigned char)c;
        x[j] = (float)q;
        want += (int64_t)c * q;
    }
    unsigned char *xq = xq_alloc(ig_cpu_act8_bytes(IG_DTYPE_Q8_0, 1, K));
    for (int l = 0; l < N_LEVELS; l++) {
        int level = level_at(l);
        if (level < 0) continue;
        float y = 0;
        ig_cpu_act8_quantize((ig_simd_level)level, IG_DTYPE_Q8_0, x, 1, K, xq);
        ig_cpu_act8_rows((ig_simd_level)level, IG_DTYPE_Q8_0)(xq, 1, K, w, 0, 1, NULL, &y, 1);
        CU_ASSERT_EQUAL((int64_t)y, want);
        CU_ASSERT_EQUAL(y, (float)want);
    }
    restore_defaults();
    free(xq);
}

/* ---- accuracy against the exact product ----------------------------------------------------- */

static void test_accuracy_bound(void) {
    ig_rng r;
    ig_rng_seed(&r, 43);
    const int64_t M = 3, K = 576, N = 64;
    float *x = malloc((size_t)(M * K) * sizeof(float)), *wd = malloc((size_t)K * sizeof(float));
    float *y = malloc((size_t)(M * N) * sizeof(float));
    CU_ASSERT_FATAL(x && wd && y);
    for (int ti = 0; ti < N_A8TYPES; ti++) {
        ig_dtype t = k_a8types[ti];
        fill_x(&r, x, M, K);
        unsigned char *w = make_weights(&r, t, N, K);
        size_t rb = ig_dtype_row_bytes(t, K);
        unsigned char *xq = xq_alloc(ig_cpu_act8_bytes(t, M, K));
        for (int l = 0; l < N_LEVELS; l++) {
            int level = level_at(l);
            if (level < 0) continue;
            ig_cpu_act8_quantize((ig_simd_level)level, t, x, M, K, xq);
            ig_cpu_act8_rows((ig_simd_level)level, t)(xq, M, K, w, 0, N, NULL, y, N);
            int bad = 0;
            double max_err = 0, se = 0, sy = 0;
            for (int64_t n = 0; n < N; n++) {
                ig_dequant_row_ref(t, w + n * rb, wd, K);
                for (int64_t m = 0; m < M; m++) {
                    const float *xm = x + m * K;
                    double exact = 0, bound = 0;
                    for (int64_t b = 0; b < K / 32; b++) {
                        double sw = 0;
                        for (int j = 0; j < 32; j++) {
                            exact += (double)wd[32 * b + j] * xm[32 * b + j];
                            sw += fabs(wd[32 * b + j]);
                        }
                        bound += block_dx(xm + 32 * b) / 2 * (1 + 0x1p-16) * sw;
                    }
                    bound += 1e-5 * act8_mag(t, w + n * rb, xm, K) + 1e-30;
                    double err = fabs((double)y[m * N + n] - exact);
                    bad += !(err <= bound);
                    if (err > max_err) max_err = err;
                    se += err * err;
                    sy += exact * exact;
                }
            }
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT(max_err > 0);                /* the activations are rounded */
            CU_ASSERT(sqrt(se) < 0.05 * sqrt(sy)); /* and the result is still close */
            if (bad)
                printf("\n  act8 accuracy %s [%s]: %d outside the bound; ||err||/||y|| %.3g\n",
                       ig_dtype_name(t), k_levels[l], bad, sqrt(se / sy));
        }
        restore_defaults();
        free(xq);
        free(w);
    }
    free(x);
    free(wd);
    free(y);
}

/* f16 scales inf / NaN in the weights: every kernel runs (no UB under the sanitizers), the rows
 * with finite scales keep their value. */
static void test_hostile_scales(void) {
    ig_rng r;
    ig_rng_seed(&r, 44);
    const int64_t M = 2, K = 96, N = 6;
    float x[2 * 96], ref[12], y[12];
    fill(&r, x, M * K, -1.0f, 1.0f);
    static const uint16_t bad_halves[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01};
    for (int ti = 0; ti < N_A8TYPES; ti++) {
        ig_dtype t = k_a8types[ti];
        unsigned char *w = make_weights(&r, t, N, K);
        size_t rb = ig_dtype_row_bytes(t, K), bb = ig_dtype_block_bytes(t);
        for (int n = 0; n < 4; n++) { /* rows 0-3 hostile, 4-5 finite */
            unsigned char *blk = w + n * rb + (size_t)(n % 3) * bb;
            memcpy(blk + (t == IG_DTYPE_Q4_1 && n % 2 ? 2 : 0), &bad_halves[n], 2);
        }
        unsigned char *xq = xq_alloc(ig_cpu_act8_bytes(t, M, K));
        ig_cpu_act8_quantize(IG_SIMD_SCALAR, t, x, M, K, xq);
        ig_cpu_act8_rows(IG_SIMD_SCALAR, t)(xq, M, K, w, 0, N, NULL, ref, N);
        for (int l = 1; l < N_LEVELS; l++) {
            int level = level_at(l);
            if (level < 0) continue;
            ig_cpu_act8_rows((ig_simd_level)level, t)(xq, M, K, w, 0, N, NULL, y, N);
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 4; n < N; n++) {
                    CU_ASSERT(isfinite(y[m * N + n]));
                    IG_ASSERT_NEAR(y[m * N + n], ref[m * N + n],
                                   1e-5 * act8_mag(t, w + n * rb, x + m * K, K));
                }
        }
        restore_defaults();
        free(xq);
        free(w);
    }
}

/* W's last row ends where a PROT_NONE page begins: a kernel that reads past a row's last block (a
 * plain 64-byte load where only part of it is W) faults. Every level against the scalar one. */
static void test_guard_page(void) {
    ig_rng r;
    ig_rng_seed(&r, 9);
    const long page = sysconf(_SC_PAGESIZE);
    static const int64_t Ks[] = {32, 96, 224, 512, 576, 992};
    const int64_t N = 3;
    for (int ti = 0; ti < N_A8TYPES; ti++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            ig_dtype t = k_a8types[ti];
            int64_t K = Ks[ki];
            size_t bytes = (size_t)N * ig_dtype_row_bytes(t, K);
            size_t span = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
            unsigned char *map = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CU_ASSERT_FATAL(map != MAP_FAILED);
            CU_ASSERT_FATAL(mprotect(map + span, (size_t)page, PROT_NONE) == 0);
            unsigned char *src = make_weights(&r, t, N, K), *w = map + span - bytes;
            memcpy(w, src, bytes);
            float x[992], ref[3], y[3];
            fill(&r, x, K, -1.0f, 1.0f);
            unsigned char *xq = xq_alloc(ig_cpu_act8_bytes(t, 1, K));
            ig_cpu_act8_quantize(IG_SIMD_SCALAR, t, x, 1, K, xq);
            ig_cpu_act8_rows(IG_SIMD_SCALAR, t)(xq, 1, K, w, 0, N, NULL, ref, N);
            for (int l = 1; l < N_LEVELS; l++) {
                int level = level_at(l);
                if (level < 0) continue;
                ig_cpu_act8_rows((ig_simd_level)level, t)(xq, 1, K, w, 0, N, NULL, y, N);
                for (int64_t n = 0; n < N; n++) {
                    double mag = act8_mag(t, w + (size_t)n * ig_dtype_row_bytes(t, K), x, K);
                    CU_ASSERT(fabs((double)y[n] - ref[n]) <= 1e-5 * mag + 1e-30);
                }
            }
            restore_defaults();
            free(xq);
            free(src);
            munmap(map, span + (size_t)page);
        }
}

static void test_unsupported(void) {
    static const ig_dtype others[] = {IG_DTYPE_F32, IG_DTYPE_F16, IG_DTYPE_BF16, IG_DTYPE_Q4G64,
                                      IG_DTYPE_Q8G64};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        CU_ASSERT_EQUAL(ig_cpu_act8_supported(others[i]), 0);
        CU_ASSERT_EQUAL(ig_cpu_act8_bytes(others[i], 1, 64), 0);
        for (int l = 0; l < N_LEVELS; l++)
            CU_ASSERT_PTR_NULL(ig_cpu_act8_rows((ig_simd_level)l, others[i]));
    }
    for (int ti = 0; ti < N_A8TYPES; ti++) {
        CU_ASSERT(ig_cpu_act8_supported(k_a8types[ti]));
        CU_ASSERT_EQUAL(ig_cpu_act8_bytes(k_a8types[ti], 1, 48), 0); /* not whole blocks */
        CU_ASSERT(ig_cpu_act8_bytes(k_a8types[ti], 2, 64) >= 2 * 64);
        for (int l = 0; l < N_LEVELS; l++)
            CU_ASSERT_PTR_NOT_NULL(ig_cpu_act8_rows((ig_simd_level)l, k_a8types[ti]));
    }
}

/* The switch as ig_cpu_linear and ig_cpu_linear_multi use it: on, a supported type's GEMV (M <=
 * 16) gives exactly the quantizer + row kernel of the current level (each output row is computed
 * by the same kernel whatever the thread split); off, or for M > 16 (sgemm) and f16 weights,
 * exactly the exact path's result. */
static void test_linear_switch(void) {
    ig_rng r;
    ig_rng_seed(&r, 4242);
    const int64_t K = 576, N = 200, N2 = 72;
    for (int ti = 0; ti < N_A8TYPES; ti++) {
        ig_dtype t = k_a8types[ti];
        unsigned char *w = make_weights(&r, t, N, K), *w2 = make_weights(&r, t, N2, K);
        float *x = malloc((size_t)(17 * K) * sizeof(float)), *bias = malloc(N * sizeof(float));
        float *y = malloc((size_t)(17 * N) * sizeof(float)),
              *ye = malloc((size_t)(17 * N) * sizeof(float));
        float *y2 = malloc((size_t)(17 * N2) * sizeof(float));
        CU_ASSERT_FATAL(x && bias && y && ye && y2);
        fill(&r, x, 17 * K, -2.0f, 2.0f);
        fill(&r, bias, N, -1.0f, 1.0f);
        const int64_t Ms[] = {1, 3, 8, 16, 17};
        for (int mi = 0; mi < 5; mi++) {
            int64_t M = Ms[mi];
            /* the exact path */
            ig_cpu_set_act8(0);
            ig_cpu_linear(x, M, K, w, t, N, bias, ye);
            ig_cpu_set_act8(1);
            CU_ASSERT_EQUAL(ig_cpu_get_act8(), 1);
            ig_cpu_linear(x, M, K, w, t, N, bias, y);
            ig_linear_part parts[2] = {{w, N, bias, y}, {w2, N2, NULL, y2}};
            float *ym = malloc((size_t)(M * N) * sizeof(float));
            CU_ASSERT_FATAL(ym != NULL);
            parts[0].y = ym;
            ig_cpu_linear_multi(x, M, K, t, parts, 2);
            ig_cpu_set_act8(0);
            if (M > 16) { /* sgemm: never the int8 path */
                CU_ASSERT_EQUAL(memcmp(y, ye, (size_t)(M * N) * sizeof(float)), 0);
                CU_ASSERT_EQUAL(memcmp(ym, ye, (size_t)(M * N) * sizeof(float)), 0);
                free(ym);
                continue;
            }
            /* the kernel itself, at this level, over every row */
            ig_simd_level lv = ig_cpu_simd_level();
            void *xq = xq_alloc(ig_cpu_act8_bytes(t, M, K));
            float *yr = malloc((size_t)(M * N) * sizeof(float));
            CU_ASSERT_FATAL(yr != NULL);
            ig_cpu_act8_quantize(lv, t, x, M, K, xq);
            ig_cpu_act8_rows(lv, t)(xq, M, K, w, 0, N, bias, yr, N);
            CU_ASSERT_EQUAL(memcmp(y, yr, (size_t)(M * N) * sizeof(float)), 0);
            CU_ASSERT_EQUAL(memcmp(ym, yr, (size_t)(M * N) * sizeof(float)), 0);
            CU_ASSERT(memcmp(y, ye, (size_t)(M * N) * sizeof(float)) != 0); /* not the exact path */
            /* the second part of the multi call too */
            float *y2r = malloc((size_t)(M * N2) * sizeof(float));
            CU_ASSERT_FATAL(y2r != NULL);
            ig_cpu_act8_rows(lv, t)(xq, M, K, w2, 0, N2, NULL, y2r, N2);
            CU_ASSERT_EQUAL(memcmp(y2, y2r, (size_t)(M * N2) * sizeof(float)), 0);
            free(y2r);
            free(yr);
            free(xq);
            free(ym);
        }
        free(w);
        free(w2);
        free(x);
        free(bias);
        free(y);
        free(ye);
        free(y2);
    }
    /* f16 weights: the switch changes nothing */
    {
        const int64_t M = 2;
        float *wf = malloc((size_t)(N * K) * sizeof(float)),
              *x = malloc((size_t)(M * K) * sizeof(float));
        uint16_t *wh = malloc((size_t)(N * K) * sizeof(uint16_t));
        float *a = malloc((size_t)(M * N) * sizeof(float)),
              *b = malloc((size_t)(M * N) * sizeof(float));
        CU_ASSERT_FATAL(wf && x && wh && a && b);
        fill(&r, wf, N * K, -1.0f, 1.0f);
        fill(&r, x, M * K, -1.0f, 1.0f);
        for (int64_t i = 0; i < N * K; i++) wh[i] = ig_f32_to_f16(wf[i]);
        ig_cpu_linear(x, M, K, wh, IG_DTYPE_F16, N, NULL, a);
        ig_cpu_set_act8(1);
        ig_cpu_linear(x, M, K, wh, IG_DTYPE_F16, N, NULL, b);
        ig_cpu_set_act8(0);
        CU_ASSERT_EQUAL(memcmp(a, b, (size_t)(M * N) * sizeof(float)), 0);
        free(wf);
        free(x);
        free(wh);
        free(a);
        free(b);
    }
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("qlinear_act8", NULL, NULL);
    CU_add_test(s, "quantize_levels", test_quantize_levels);
    CU_add_test(s, "quantize_hand", test_quantize_hand);
    CU_add_test(s, "rows_vs_scalar", test_rows_vs_scalar);
    CU_add_test(s, "gcc_pattern", test_gcc_pattern);
    CU_add_test(s, "accuracy_bound", test_accuracy_bound);
    CU_add_test(s, "hostile_scales", test_hostile_scales);
    CU_add_test(s, "guard_page", test_guard_page);
    CU_add_test(s, "unsupported", test_unsupported);
    CU_add_test(s, "linear_switch", test_linear_switch);
}
