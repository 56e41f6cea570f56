/* Thread count for the CPU kernels (OpenMP regions and OpenBLAS) and the run-time SIMD level.
 * The level is detected once: CPU features, capped by IG_SIMD. Nothing here allocates. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/base/log.h"
#include "core/base/threads.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

static _Atomic int g_level = -1;         /* level in use */
static int g_level_max = IG_SIMD_SCALAR; /* hardware, capped by IG_SIMD; set once */
static pthread_once_t g_detect_once = PTHREAD_ONCE_INIT;

static const char *const k_level_names[] = {"scalar", "avx2", "avx512"};

static int level_from_name(const char *name) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, k_level_names[i])) return i;
    return -1;
}

#if IG_X86
/* F16C is CPUID.1:ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c"). */
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_F16C) != 0;
}
#endif

static void detect_level(void) {
    int hw = IG_SIMD_SCALAR;
#if IG_X86
    /* __builtin_cpu_supports also checks that the OS saves the AVX / AVX-512 registers. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
        hw = IG_SIMD_AVX2;
    if (hw == IG_SIMD_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        hw = IG_SIMD_AVX512;
#endif
    const char *env = getenv("IG_SIMD");
    if (env && *env) {
        int cap = level_from_name(env);
        if (cap < 0)
            IG_WARN("IG_SIMD=%s is not scalar|avx2|avx512; ignored", env);
        else if (cap < hw)
            hw = cap;
    }
    g_level_max = hw;
    atomic_store(&g_level, hw);
}

ig_simd_level ig_cpu_simd_level(void) {
    int l = atomic_load_explicit(&g_level, memory_order_relaxed);
    if (l < 0) {
        pthread_once(&g_detect_once, detect_level);
        l = atomic_load(&g_level);
    }
    return (ig_simd_level)l;
}

const char *ig_cpu_simd_name(void) {
    return k_level_names[ig_cpu_simd_level()];
}

int ig_cpu_set_simd(const char *level) {
    pthread_once(&g_detect_once, detect_level);
    if (!level) {
        atomic_store(&g_level, g_level_max);
        return 0;
    }
    int l = level_from_name(level);
    if (l < 0 || l > g_level_max) return -1;
    atomic_store(&g_level, l);
    return 0;
}

void ig_cpu_set_threads(int n) {
    if (n <= 0) n = omp_get_num_procs();
    if (n < 1) n = 1;
    ig_threads_set(n);
    /* OpenBLAS stays at one thread: every sgemm of igen is split over its own OpenMP threads
     * (linear.c, attention.c), each calling OpenBLAS on its share. An OpenBLAS call made with more
     * threads leaves its worker spinning in sched_yield for about 0.1 s after it returns, taking a
     * core from the OpenMP regions that follow: InfiniGen's prefill (its index sgemms have N =
     * head_dim, one OpenMP thread) took 13-16 s instead of 10-11 s at 1024 tokens, batch 8. Only
     * the sgemm probe (measure.c) raises it, for its own call. */
    openblas_set_num_threads(1);
}

int ig_cpu_get_threads(void) {
    int n = ig_threads_peek();
    if (n > 0) return n;
    /* Default: what OpenMP would use (OMP_NUM_THREADS or all cores); OpenBLAS follows. */
    ig_cpu_set_threads(omp_get_max_threads());
    return ig_threads_peek();
}

int ig_cpu_threads_for(int64_t work, int64_t min_per_thread) {
    ig_cpu_get_threads(); /* OpenBLAS set with the default once */
    return ig_threads_for(work, min_per_thread);
}

int ig_cpu_blas_threads_single(void) {
    int prev = openblas_get_num_threads();
    if (prev != 1) openblas_set_num_threads(1);
    return prev;
}

void ig_cpu_blas_threads_restore(int prev) {
    if (prev != 1) openblas_set_num_threads(prev);
}
