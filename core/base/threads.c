/* The thread count for CPU work (see threads.h). */
#include "core/base/threads.h"

#include <omp.h>
#include <stdatomic.h>

static _Atomic int g_threads; /* 0: not chosen */

void ig_threads_set(int n) {
    atomic_store(&g_threads, n > 0 ? n : 0);
}

int ig_threads_peek(void) {
    return atomic_load_explicit(&g_threads, memory_order_relaxed);
}

int ig_threads_get(void) {
    int n = ig_threads_peek();
    if (n > 0) return n;
    n = omp_get_max_threads();
    return n < 1 ? 1 : n;
}

int ig_threads_for(int64_t work, int64_t min_per_thread) {
    int t = ig_threads_get();
    if (min_per_thread < 1) min_per_thread = 1;
    int64_t fit = work / min_per_thread;
    if (fit < t) t = fit < 1 ? 1 : (int)fit;
    return t;
}
