/* Helpers of the CPU kernel suites (test_kernels, test_qlinear): SIMD levels, random fills, and
 * guarded buffers (a sentinel NaN on each side) that catch writes out of bounds. */
#ifndef IG_TESTS_KERNEL_UTIL_H
#define IG_TESTS_KERNEL_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/test_util.h"

static const char *const k_levels[] = {"scalar", "avx2", "avx512"};
#define N_LEVELS 3

/* Selects a level; notes (visibly) a level this machine lacks. */
static inline int use_level(int l) {
    if (ig_cpu_set_simd(k_levels[l]) == 0) return 1;
    char why[128];
    snprintf(why, sizeof why, "SIMD level %s not available here (CPU or IG_SIMD): not tested",
             k_levels[l]);
    ig_test_skip(why);
    return 0;
}

static inline void restore_defaults(void) {
    ig_cpu_set_simd(NULL);
    ig_cpu_set_threads(0);
}

static inline float frand(ig_rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)ig_rng_uniform(r);
}

static inline void fill(ig_rng *r, float *p, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) p[i] = frand(r, lo, hi);
}

/* Guarded buffers: GUARD floats of a sentinel bit pattern on each side of n floats. */
#define GUARD 64
static const uint32_t k_sentinel = 0x7fa1b2c3u; /* a NaN no kernel produces */

static inline float *galloc(int64_t n) {
    float *b = malloc((size_t)(n + 2 * GUARD) * sizeof(float));
    CU_ASSERT_FATAL(b != NULL);
    for (int64_t i = 0; i < n + 2 * GUARD; i++) memcpy(b + i, &k_sentinel, 4);
    return b + GUARD;
}

static inline int gintact(const float *p, int64_t n) {
    for (int64_t i = 0; i < GUARD; i++)
        if (memcmp(p - GUARD + i, &k_sentinel, 4) || memcmp(p + n + i, &k_sentinel, 4)) return 0;
    return 1;
}

static inline void gfree(float *p) {
    if (p) free(p - GUARD);
}

#endif
