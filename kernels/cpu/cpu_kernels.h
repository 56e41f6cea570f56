/* CPU compute kernels. Activations are f32; matrix weights may be stored f32, f16, bf16 or
 * block-quantized and are computed in f32. Each fast kernel has a plain reference in cpu_ref.c
 * (ig_ref_*) that tests compare against. SIMD paths (AVX-512, AVX2+F16C, scalar) are chosen at run
 * time. Kernels never allocate on the hot path except where stated (grow-once scratch). Threads:
 * OpenMP + OpenBLAS. */
#ifndef IG_CPU_KERNELS_H
#define IG_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "kernels/linear_part.h"

/* Threads used by the kernels (OpenMP regions) and by OpenBLAS (n <= 0: all cores). Until set:
 * omp_get_max_threads() (OMP_NUM_THREADS or all cores). OpenMP threads spin between regions by
 * default; on a machine shared with busy processes a thread that loses its core stalls every
 * region for a scheduler time slice (ms): use OMP_WAIT_POLICY=passive or fewer threads there. */
void ig_cpu_set_threads(int n);
int ig_cpu_get_threads(void);
/* The SIMD level picked at run time: "avx512", "avx2", or "scalar" (IG_SIMD=scalar|avx2 forces a
 * lower level). */
const char *ig_cpu_simd_name(void);
/* Selects a SIMD level by name ("scalar", "avx2", "avx512"; NULL: the default, the best available).
 * Returns 0, or -1 (level unchanged) if the name is unknown or the level is above what this machine
 * and IG_SIMD allow. IG_SIMD is a hard cap, so a test run under IG_SIMD=avx2 behaves as on an
 * AVX2-only machine. For tests and benchmarks; not meant to be switched while kernels run. */
int ig_cpu_set_simd(const char *level);
/* Int8 activations for the decode GEMV (M <= 16) of q4_0, q4_1 and q8_0 weights (off by default):
 * on, each such call quantizes x per block of 32 to int8 (scale max|x| / 127, round half to even)
 * and computes integer dot products with the weights' codes, as llama.cpp does: about twice the
 * exact kernel's speed, but no longer the dequantized matrix's result (docs/results/
 * compressed_weights.md has its perplexity). Other weight types, and M > 16 (prefill), stay exact.
 * Process-wide; not meant to be switched while kernels run. */
void ig_cpu_set_act8(int on);
int ig_cpu_get_act8(void);
/* Frees the calling thread's grow-once scratch (used by ig_cpu_linear for large M). Optional. */
void ig_cpu_release_scratch(void);

/* y[M,N] = x[M,K] * W[N,K]^T (+ bias[N] if not NULL). W row n holds output n (the Hugging Face /
 * GGUF layout). wtype: f32, f16, bf16, or a block-quantized type (q4_0, q4_1, q8_0, q4g64, q8g64;
 * rows of ig_dtype_row_bytes(wtype, K) bytes, K a multiple of the block). M <= 16: a SIMD GEMV
 * streaming W once (narrow weights widened, quantized blocks decoded to f32, in registers; x stays
 * f32); larger M: sgemm, narrow or quantized weights widened tile by tile into a grow-once scratch
 * of the calling thread. A quantized W gives bitwise the result of its dequantized f32 matrix
 * (ig_dequant_row_ref) at the same SIMD level and thread count. */
void ig_cpu_linear(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wtype, int64_t N,
                   const float *bias, float *y);
/* Several matrices of one type applied to the same x, y_i[M][N_i] = x W_i^T (+ bias_i): for M <=
 * 16 in one parallel region over all their rows (a layer's q, k, v or gate, up: fewer fork/joins
 * and no matrix too small for two threads), each output bitwise what ig_cpu_linear gives for its
 * matrix alone at the same SIMD level; larger M: one ig_cpu_linear per matrix. */
void ig_cpu_linear_multi(const float *x, int64_t M, int64_t K, ig_dtype wtype,
                         const ig_linear_part *parts, int n_parts);

/* dst[0..n) = src as f32, bit-identical to ig_dequant_row_ref: a quantized row (n a multiple of the
 * block, src at a block boundary) or an f32/f16/bf16 one. SIMD at the current level. */
void ig_cpu_dequant_row(ig_dtype t, const void *src, float *dst, int64_t n);

/* Embedding rows: out[i, :] = table[ids[i], :] as f32 (table f32, f16, bf16 or quantized: the
 * selected rows are dequantized as ig_cpu_dequant_row does). */
void ig_cpu_embed(const void *table, ig_dtype ttype, int64_t dim, const int32_t *ids, int64_t n,
                  float *out);

/* y = x / rms(x) * w, per row. */
void ig_cpu_rmsnorm(const float *x, const float *w, int64_t rows, int64_t dim, float eps, float *y);
/* y = (x - mean) / sqrt(var + eps) * w + b, per row (biased variance, as torch). */
void ig_cpu_layernorm(const float *x, const float *w, const float *b, int64_t rows, int64_t dim,
                      float eps, float *y);

/* Rotary tables as Hugging Face computes them in f32: inv_freq[i] = 1 / theta^(2i/rot_dim),
 * angle = (float)pos * inv_freq[i]; cos/sin are [max_pos][rot_dim/2]. */
void ig_cpu_rope_table(float theta, int rot_dim, int64_t max_pos, float *cos_tab, float *sin_tab);
/* Rotate-half (NeoX / Hugging Face Llama) RoPE in place on x[n_tok][n_heads][head_dim] over the
 * first rot_dim dims, token t at position pos[t]. */
void ig_cpu_rope(float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                 const int32_t *pos, const float *cos_tab, const float *sin_tab);

void ig_cpu_silu_mul(const float *gate, const float *up, int64_t n, float *out); /* silu(g)*u */
void ig_cpu_relu(float *x, int64_t n);
void ig_cpu_gelu(float *x, int64_t n);                /* exact (erf) GELU */
void ig_cpu_add(float *y, const float *x, int64_t n); /* y += x */
void ig_cpu_scale(float *x, float s, int64_t n);
void ig_cpu_softmax(float *x, int64_t n); /* in place, max-subtracted */
/* log p(target) under softmax(logits), accumulated in double. */
double ig_cpu_log_prob(const float *logits, int64_t n, int32_t target);

/* Causal attention of n_q new query tokens of one sequence at absolute positions p0 .. p0+n_q-1.
 *   q:   [n_q][n_head][hd]
 *   k,v: [n_kv_head][stride_tokens][hd]; rows 0 .. p0+n_q-1 hold the keys/values (new included)
 *   out: [n_q][n_head][hd]
 * Query head h uses KV head h / (n_head / n_kv_head) (grouped-query attention). Query i attends to
 * positions 0 .. p0+i. scores = scale * q.k, softmax in f32.
 *
 * Workspace: ws holds ws_floats floats, at least ig_cpu_attention_ws_floats(n_q, n_ctx, n_head, hd,
 * n_threads) with n_ctx >= p0 + n_q (n_threads <= 0: ig_cpu_get_threads()). A workspace sized for
 * the largest batch and context serves every smaller call. Each thread works in its own slice, so
 * the size grows with the thread count; a call uses only as many threads as ws_floats holds slices
 * for (never more than ig_cpu_get_threads()): a workspace sized for fewer threads is slower, never
 * overrun. Formula, with C = 256 (keys per decode chunk), nq = min(n_q, 8), G = min(n_head, 4)
 * (query heads that share a pass over a chunk):
 *   decode (n_q <= 8): nq * ceil(n_ctx / C) * n_head * (hd + 2)  partial results
 *                      + n_threads * G * round_up(min(n_ctx, C), 16)  scores per thread
 *   prefill (n_q > 8): n_threads * min(n_q, 32) * round_up(n_ctx, 16)  (query blocks of 32)
 *   ws_floats = the decode term, or the larger of both terms when n_q > 8
 * so it stays bounded by about 32 * n_ctx floats per thread whatever n_q is (n_ctx 8192: 1 MiB
 * per thread). */
size_t ig_cpu_attention_ws_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd, int n_threads);
void ig_cpu_attention(const float *q, int64_t n_q, int64_t p0, const float *k, const float *v,
                      int64_t stride_tokens, int n_head, int n_kv_head, int hd, float scale,
                      float *ws, size_t ws_floats, float *out);

/* ig_cpu_attention that also reports the attention each key received (H2O's heavy-hitter score):
 * for each query head h and key position j < p0 + n_q,
 *   colsum[h * colsum_stride + j] += sum over this call's queries i of p(i, j)
 * where p(i, j) is query i's softmax probability of key j (0 for j > p0 + i). colsum_stride >=
 * p0 + n_q (p0 + n_q gives the layout [n_head][p0 + n_q]; a fixed stride such as the context
 * capacity lets chunked prefill accumulate into one array). colsum NULL: ig_cpu_attention.
 * `out` is bitwise what ig_cpu_attention computes. colsum is bitwise the same for any thread count
 * and schedule: each block of 32 queries (sgemm path) or each chunk of 256 keys (decode path)
 * contributes in a fixed order. Cost: one pass over each probability block (sgemm path); on the
 * decode path (n_q <= 8) the scores are recomputed for the sums (one more pass over K, not V).
 * ws: ws_floats >= ig_cpu_attention_colsum_ws_floats(...): the ig_cpu_attention formula with the
 * prefill term n_threads * (min(n_q, 32) + 32) * round_up(n_ctx, 16) (32 per-thread slots for
 * block sums, added into colsum in rounds). */
size_t ig_cpu_attention_colsum_ws_floats(int64_t n_q, int64_t n_ctx, int n_head, int hd,
                                         int n_threads);
void ig_cpu_attention_colsum(const float *q, int64_t n_q, int64_t p0, const float *k,
                             const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                             int hd, float scale, float *ws, size_t ws_floats, float *colsum,
                             int64_t colsum_stride, float *out);

/* Decode attention of one query token over an explicit list of rows (a policy's working set, or a
 * KV cache in host memory): for each KV head g, n_rows[g] rows of hd elements of type kv_dtype
 * (f32, f16 or bf16), row j of K at (element) k_rows[g] + j * row_stride, likewise V, so rows may
 * sit inside a larger buffer (row_stride >= hd, in elements, the same for K and V). Queries q
 * [n_head][hd] f32; out [n_head][hd]. Rows are widened to f32 in registers; scores, softmax and
 * sums in f32. Optional probs_out [n_head][max_rows] receives the softmax weights (for policies
 * that accumulate attention); entries n_rows[g] .. max_rows-1 of a head's row are set to 0. A head
 * whose group has no rows gets out = 0. Parallel over (KV head, chunk of 256 rows); each chunk of
 * K and V is read once for up to four query heads of its group.
 * ws: ws_floats >= ig_cpu_attention_ws_floats(1, max_rows, n_head, hd, n_threads) floats. */
void ig_cpu_attention_rows_t(const float *q, ig_dtype kv_dtype, const void *const *k_rows,
                             const void *const *v_rows, int64_t row_stride, const int64_t *n_rows,
                             int64_t max_rows, int n_head, int n_kv_head, int hd, float scale,
                             float *ws, size_t ws_floats, float *probs_out, float *out);
/* The f32 case with rows packed (row_stride hd). */
void ig_cpu_attention_rows(const float *q, const float *const *k_rows, const float *const *v_rows,
                           const int64_t *n_rows, int64_t max_rows, int n_head, int n_kv_head,
                           int hd, float scale, float *ws, size_t ws_floats, float *probs_out,
                           float *out);

/* Partial attention scores, for policies that rank cached tokens with a few key columns
 * (InfiniGen's partial key cache): keys column-major, keys[j * ld + e] = column j of entry e, f32
 * or f16; query rows q[h * ldq + j], 1 <= nq <= 16. For e < n, h < nq:
 *   out[h * ldo + e] = sum_{j < kc} q[h][j] * keys[j][e]
 *   col_max[e] = max over h of out[h][e] (if col_max is not NULL); row_max[h] = max over e.
 * One pass over the keys; single-threaded (callers parallelise over tables). */
void ig_cpu_partial_scores(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t n,
                           const float *q, int64_t ldq, int nq, float *out, int64_t ldo,
                           float *col_max, float *row_max);
/* Elements of x[0..n) strictly greater than thr. */
int64_t ig_cpu_count_greater(const float *x, int64_t n, float thr);
/* Indices of the k largest of s[0..n), ties broken by the lower index, written to idx_out in
 * increasing index order (gathers walk memory forward); returns min(max(k, 0), n). NaN ranks below
 * every number; -0 and +0 tie. O(n), no sort: radix selection on an order-preserving 32-bit key
 * with 2048 buckets per level spread over the candidates' actual key range (so clustered scores
 * still split; at most 3 levels, the later ones over the few candidates left), then one pass that
 * writes the indices. Deterministic; single-threaded (n = 4096 takes a few microseconds).
 * ws: ws_bytes >= ig_cpu_topk_ws_bytes(n) = (2048 + 2n) * 4; not used when k >= n. */
size_t ig_cpu_topk_ws_bytes(int64_t n);
/* Quest's bound of q . k over the keys of one page, from their per-dimension min and max:
 * sum over i (in order) of max(q[i] * kmin[i], q[i] * kmax[i]), an upper bound of q . k for every
 * key k with kmin <= k <= kmax elementwise (also in float arithmetic when q . k is summed in the
 * same order, since rounding is monotone). */
float ig_cpu_page_bound(const float *q, const float *kmin, const float *kmax, int hd);
/* The k-th largest of x[0..n) (1 <= k <= n), reordering x in place (Hoare quickselect; expected
 * O(n)). NaN-free input (callers map NaN to -inf). */
float ig_cpu_kth_largest(float *x, int64_t n, int64_t k);
int64_t ig_cpu_topk(const float *s, int64_t n, int64_t k, int32_t *idx_out, void *ws,
                    size_t ws_bytes);
/* Writes the indices i < n with x[i] > thr to out, ascending; returns their count. out must hold n
 * entries (the compaction may write past the count). */
int64_t ig_cpu_indices_greater(const float *x, int64_t n, float thr, int32_t *out);

/* Sampling. A seeded xoshiro256** generator: same seed, same tokens, on every machine. */
typedef struct ig_rng {
    uint64_t s[4];
} ig_rng;
void ig_rng_seed(ig_rng *rng, uint64_t seed);
uint64_t ig_rng_next(ig_rng *rng);
double ig_rng_uniform(ig_rng *rng); /* [0, 1) with 53 random bits */

int32_t ig_sample_argmax(const float *logits, int64_t n); /* lowest index among ties */
/* temperature <= 0 or top_p <= 0: argmax. Otherwise softmax(logits / T), keep the smallest set of
 * most likely tokens whose mass reaches top_p (top_p >= 1: all), renormalise, draw. ws: n floats,
 * idx: n ints. "Most likely" orders by logit, descending, ties by lower index, so a tiny top_p
 * gives the argmax. A token is kept iff the mass of the tokens ranked before it is < top_p (Hugging
 * Face's rule: at least one token is kept). One ig_rng_uniform draw per call. */
int32_t ig_sample(const float *logits, int64_t n, float temperature, float top_p, ig_rng *rng,
                  float *ws, int32_t *idx);

#endif
