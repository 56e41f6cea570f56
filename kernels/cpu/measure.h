/* Machine measurements for roofline figures: memory read/copy bandwidth and sgemm throughput.
 * Used by bench_kernels and `igen profile-hw`. Each call allocates and frees its own buffers and
 * takes about reps passes over them; not for hot paths. */
#ifndef IG_MEASURE_H
#define IG_MEASURE_H

#include <stddef.h>
#include <stdint.h>

/* Read bandwidth in GB/s (1e9 bytes/s): `threads` threads (<= 0: ig_cpu_get_threads()) each sum
 * their share of a `bytes` buffer (heap memory: 4 KiB pages) with the widest SIMD level in use;
 * best of `reps` passes after one warm-up pass. Use bytes >> last-level cache (e.g. 1 GiB) for DRAM
 * bandwidth: this is the roofline for streaming weights. Returns 0 if the buffer cannot be
 * allocated. */
double ig_cpu_measure_bandwidth_gbps(size_t bytes, int threads, int reps);
/* The same over a buffer on 4 KiB pages (huge 0, as above) or in a huge-page arena (huge 1:
 * core/base/arena.h, where the model's weights live), the pages the kernel grants. */
double ig_cpu_measure_bandwidth_pages_gbps(size_t bytes, int threads, int reps, int huge);
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
/* The matmuls of a decode step as the engine runs them: `sets` copies of a chain of n_mats f32
 * weight matrices (matrix i: out[i] x in[i], one layer's matmuls in order) applied to M rows, copy
 * after copy, consecutive matrices with equal call[i] in one ig_cpu_linear_multi call over the same
 * input (the layer's q/k/v and gate/up; call NULL: one call each, at most 8 a call), then one tail
 * matrix tail_out x tail_in (the lm_head), so that the weights stream at the model's own shapes
 * (small N and K, one call per matrix) and with the working set of a step (sets = the model's
 * layers), not at one large shape. GFLOP/s (2 M out in per matrix) of the chain and of the tail,
 * each the median of at least reps passes (see ig_cpu_measure_set_min_seconds) after one warm-up
 * pass. Returns 0, or -1 on a bad shape, more than 8 GiB of weights or a failed allocation (both
 * rates 0). */
int ig_cpu_measure_step_matmuls(int M, const int *out, const int *in, const int *call, int n_mats,
                                int sets, int tail_out, int tail_in, int reps, double *chain_gflops,
                                double *tail_gflops);
/* Decode attention as the engine runs it (ig_cpu_attention_gather, one call per sequence) at one
 * model's shape: `seqs` sequences of `rows` cached rows per KV head, of which rows 0, stride,
 * 2 stride, ... are read in place through index lists (stride 1: every row, as full attention
 * reads them; 5: a scattered fifth, as a speculating policy's selection does), plus the new
 * token's row; stride 0: every row of the contiguous table through ig_cpu_attention, as the
 * engine's dense path reads it (a dense policy over f32 rows that never move; f32 only, and the
 * new token's row is the table's last); f32 rows (enc_bits 0) or 4-bit codes (enc_bits 4, groups of
 * min(64, hd)) decoded inside the kernel. Returns GB/s of f32-equivalent KV (seqs x rows read x
 * n_kv_head x 2 x hd x 4 bytes per pass), the unit the cost model prices attended rows in; the
 * median of at least reps passes (see ig_cpu_measure_set_min_seconds) after one warm-up pass, the
 * typical rate a run sees. 0 on a bad shape or failed allocation. */
double ig_cpu_measure_attention_gbps(int n_head, int n_kv_head, int hd, int seqs, int64_t rows,
                                     int stride, int enc_bits, int reps);
/* The same at stride 1 over f32 rows, as a policy that scores rows by their attention (H2O) runs
 * it: the kernel also writes each query head's probabilities (ig_cpu_attention_gather's probs),
 * and each is then added to a per-row sum of its KV head (the policy's on_attention bookkeeping,
 * done here by a plain loop). Same unit. */
double ig_cpu_measure_attention_probs_gbps(int n_head, int n_kv_head, int hd, int seqs,
                                           int64_t rows, int reps);
/* A speculating policy's selection as the CPU backend runs InfiniGen's: per sequence and KV head,
 * the partial scores of the group's query heads over `rows` entries of kc f16 key columns
 * (ig_cpu_partial_scores), each query head's threshold count (ig_cpu_count_greater) and the top
 * `keep` fraction of the entries (ig_cpu_topk), parallel over tables as the backend is. Returns
 * GB/s of partial keys (seqs x n_kv_head x rows x kc x 2 bytes per pass); the median of reps
 * at least reps passes (see ig_cpu_measure_set_min_seconds) after one warm-up. 0 on a bad shape or
 * failed allocation. */
double ig_cpu_measure_select_gbps(int n_head, int n_kv_head, int kc, int seqs, int64_t rows,
                                  double keep, int reps);

/* The probes above (the step matmuls, attention, selection) run at least their reps timed passes
 * and then more, up to 1024, until their timed passes have taken `seconds` together (0, the
 * default: reps passes only). A pass of a few milliseconds sees the host's speed of that moment;
 * on a shared VM whose speed moves from one second to the next, the median over a second is the
 * rate a run of seconds sees. Not thread-safe: set it before probing. */
void ig_cpu_measure_set_min_seconds(double seconds);

#endif
