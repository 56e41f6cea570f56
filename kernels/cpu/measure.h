/* Machine measurements for roofline figures: memory read/copy bandwidth and sgemm throughput.
 * Used by bench_kernels and `igen profile-hw`. Each call allocates and frees its own buffers and
 * takes about reps passes over them; not for hot paths. */
#ifndef IG_MEASURE_H
#define IG_MEASURE_H

#include <stddef.h>

/* Read bandwidth in GB/s (1e9 bytes/s): `threads` threads (<= 0: ig_cpu_get_threads()) each sum
 * their share of a `bytes` buffer with the widest SIMD level in use; best of `reps` passes after
 * one warm-up pass. Use bytes >> last-level cache (e.g. 1 GiB) for DRAM bandwidth: this is the
 * roofline for streaming weights. Returns 0 if the buffer cannot be allocated. */
double ig_cpu_measure_bandwidth_gbps(size_t bytes, int threads, int reps);
/* Copy bandwidth (memcpy of bytes/2 into another bytes/2), counted as bytes read + bytes written
 * per second, as STREAM does (write-allocate traffic not counted). Returns 0 on allocation failure.
 */
double ig_cpu_measure_copy_bandwidth_gbps(size_t bytes, int threads, int reps);
/* sgemm C[M,N] = A[M,K] B[N,K]^T (the ig_cpu_linear layout) with OpenBLAS at ig_cpu_get_threads()
 * threads: GFLOP/s (2MNK per call), best of `reps` after one warm-up call. 0 on failure. */
double ig_cpu_measure_sgemm_gflops(int M, int N, int K, int reps);
/* The same shape through ig_cpu_linear with f32 weights (the kernel the engine runs: small M takes
 * its row-streaming path, not sgemm): GFLOP/s, best of `reps` after one warm-up call. */
double ig_cpu_measure_linear_gflops(int M, int N, int K, int reps);

#endif
