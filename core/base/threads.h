/* The process's thread count for CPU work (OpenMP regions of the kernels, OpenBLAS, the parallel
 * loops of model loading). The base layer keeps the number; kernels/cpu's ig_cpu_set_threads sets
 * it and OpenBLAS's together. */
#ifndef IG_THREADS_H
#define IG_THREADS_H

#include <stdint.h>

/* Sets the count (n <= 0: unset again, so that ig_threads_get gives OpenMP's default). */
void ig_threads_set(int n);
/* The count set, 0 while none is. */
int ig_threads_peek(void);
/* The count set, or else omp_get_max_threads() (OMP_NUM_THREADS or all cores); at least 1. */
int ig_threads_get(void);
/* Threads for `work` items at least `min_per_thread` each: ig_threads_get() capped so that each
 * thread has that many (at least 1). */
int ig_threads_for(int64_t work, int64_t min_per_thread);

#endif
