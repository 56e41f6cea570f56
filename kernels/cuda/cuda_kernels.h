/* CUDA kernels, one .cu per operation in kernels/cuda/, each with an extern "C" launcher that
 * queues the work on a stream (ig_cuda_stream_t is cudaStream_t) and returns at once. They compute
 * what their CPU counterparts in kernels/cpu/ compute (same arguments, same layouts, same rules for
 * ties, NaN and empty rows); tests/test_cuda.c compares every one with the CPU kernel.
 *
 * Every pointer argument is a device pointer unless stated (mapped pinned host memory counts as
 * device-addressable where said). Launchers validate their sizes first, before any CUDA call:
 * invalid arguments give IG_ERR_INVALID_ARG naming the argument; empty work (0 rows) returns IG_OK
 * without touching the device; a failed launch gives IG_ERR_DEVICE naming the kernel, file and
 * line. Errors inside a running kernel surface at the next synchronisation (ig_cuda_stream_sync).
 */
#ifndef IG_CUDA_KERNELS_H
#define IG_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* core/ headers are plain C without linkage blocks: give them C linkage from C++ (.cu) too. */
#ifdef __cplusplus
extern "C" {
#endif

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/backend_iface.h"

/* ---- norms (rmsnorm.cu, layernorm.cu) ---------------------------------------------------------
 */

/* y = x / sqrt(mean(x^2) + eps) * w per row of dim; one block per row (ig_cpu_rmsnorm). */
ig_status ig_cuda_rmsnorm(const float *x, const float *w, int64_t rows, int64_t dim, float eps,
                          float *y, ig_cuda_stream_t s, ig_error *err);
/* y = (x - mean) / sqrt(var + eps) * w + b (b may be NULL), two passes (ig_cpu_layernorm). */
ig_status ig_cuda_layernorm(const float *x, const float *w, const float *b, int64_t rows,
                            int64_t dim, float eps, float *y, ig_cuda_stream_t s, ig_error *err);

/* ---- RoPE (rope.cu) ---------------------------------------------------------------------------
 */

/* Rotate-half RoPE in place on x[n_tok][n_heads][head_dim] over the first rot_dim dims, token t at
 * position pos[t]; cos/sin tables [max_pos][rot_dim/2] as ig_cpu_rope_table makes them (computed on
 * the host once and copied). The same f32 products and sums as ig_cpu_rope, no FMA contraction, so
 * the results are bitwise equal. */
ig_status ig_cuda_rope(float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                       const int32_t *pos, const float *cos_tab, const float *sin_tab,
                       ig_cuda_stream_t s, ig_error *err);

/* ---- element-wise (silu_mul.cu, relu.cu, gelu.cu, add.cu, convert.cu) --------------------------
 */

ig_status ig_cuda_silu_mul(const float *gate, const float *up, int64_t n, float *out,
                           ig_cuda_stream_t s, ig_error *err); /* out = silu(gate) * up */
ig_status ig_cuda_relu(float *x, int64_t n, ig_cuda_stream_t s, ig_error *err);
ig_status ig_cuda_gelu(float *x, int64_t n, ig_cuda_stream_t s, ig_error *err); /* erf GELU */
ig_status ig_cuda_add(float *y, const float *x, int64_t n, ig_cuda_stream_t s,
                      ig_error *err); /* y += x */
/* y[r][i] += bias[i] for rows x dim (the bias of a linear layer after ig_cuda_gemm). */
ig_status ig_cuda_add_bias(float *y, const float *bias, int64_t rows, int64_t dim,
                           ig_cuda_stream_t s, ig_error *err);
/* n elements between f32, f16 and bf16 (round to nearest even; GEMM inputs). */
ig_status ig_cuda_convert(const void *src, ig_dtype st, void *dst, ig_dtype dt, int64_t n,
                          ig_cuda_stream_t s, ig_error *err);

/* ---- softmax (softmax.cu) ---------------------------------------------------------------------
 */

/* In place over rows x n, max-subtracted; a row that is all -inf becomes all 0 (ig_cpu_softmax). */
ig_status ig_cuda_softmax(float *x, int64_t rows, int64_t n, ig_cuda_stream_t s, ig_error *err);

/* ---- attention (attention_decode.cu, attention_prefill.cu) ----------------------------------- */

/* Decode attention of one query token per sequence over the rows a policy selected (the working
 * set), plus each sequence's new rows, for a batch; ig_cpu_attention_gather for every sequence.
 * Tables: per (sequence b, KV head g), t = b * n_kv_head + g, rows of hd elements of kv_dtype (f32
 * or f16) at k + t * table_stride + r * row_stride (elements), likewise v. The selection of table t
 * is n_sel[t] rows, row j = idx ? idx[t * idx_stride + j] : j; then n_extra f32 rows at
 * k_extra[((b * n_extra + e) * n_kv_head + g) * hd] (the new tokens; NULL when n_extra = 0).
 * Query head h of sequence b uses KV head h / (n_head / n_kv_head). q, out: [batch][n_head][hd];
 * probs (optional): [batch][n_head][probs_stride], the selection's probabilities then the extra
 * rows', entries past n_sel + n_extra set to 0. A head with no rows gets out = 0. One block per
 * (sequence, query head), a warp per row at a time with an online softmax; hd <= 256. */
typedef ig_be_attn_rows ig_cuda_attn_rows; /* the backend table's (kernels/backend_iface.h) */
ig_status ig_cuda_attention_rows(const ig_cuda_attn_rows *a, const float *q, float *out,
                                 ig_cuda_stream_t s, ig_error *err);

/* Causal attention of n_q query tokens of one sequence at positions p0 .. p0+n_q-1 over
 * k, v [n_kv_head][stride_tokens][hd] (rows 0 .. p0+n_q-1 filled); q, out [n_q][n_head][hd];
 * ig_cpu_attention. Simple: one block per (query, head) streaming its keys (prefill is GEMM-bound
 * on a GPU; a fused flash kernel or cuBLAS batched GEMMs would replace this). hd <= 256. */
ig_status ig_cuda_attention_prefill(const float *q, int64_t n_q, int64_t p0, const float *k,
                                    const float *v, int64_t stride_tokens, int n_head,
                                    int n_kv_head, int hd, float scale, float *out,
                                    ig_cuda_stream_t s, ig_error *err);

/* ig_cuda_attention_prefill that also adds each key's probability sums over the queries into
 * colsum[h * colsum_stride + j] for j < p0 + n_q (ig_cpu_attention_colsum's contract; sums in
 * query order, one thread per (head, key): deterministic). ml: device scratch of 2 * n_q * n_head
 * floats (each query head's softmax maximum and sum). */
ig_status ig_cuda_attention_prefill_colsum(const float *q, int64_t n_q, int64_t p0, const float *k,
                                           const float *v, int64_t stride_tokens, int n_head,
                                           int n_kv_head, int hd, float scale, float *ml,
                                           float *colsum, int64_t colsum_stride, float *out,
                                           ig_cuda_stream_t s, ig_error *err);

/* Quest's page scores (ig_be_page_bounds; page_bounds.cu): one thread per (table, page), the
 * bound summed over the dimensions in order as ig_cpu_page_bound does. */
ig_status ig_cuda_page_bounds(const float *q, int group, int hd, const float *kmin,
                              const float *kmax, const int32_t *rows, int64_t pages_stride,
                              const int32_t *src, const int32_t *n_pages, int gqa_sum, float *out,
                              int64_t ldo, int tables, ig_cuda_stream_t s, ig_error *err);

/* ---- InfiniGen selection (partial_scores.cu, select.cu, topk.cu) ------------------------------
 */

/* ig_cpu_partial_scores over `tables` tables at once. Table t: keys column-major (f32 or f16) at
 * keys + t * keys_stride (elements), keys[j * ld + e]; query rows at q + t * q_stride, q[h * ldq +
 * j]; out + t * out_stride, out[h * ldo + e] = sum_{j < kc} q[h][j] * keys[j][e] (f32, in j order);
 * col_max (optional) + t * cm_stride, col_max[e] = max over h; row_max + t * nq, row_max[h] = max
 * over e (-inf when n = 0). 1 <= nq <= 16. */
ig_status ig_cuda_partial_scores(const void *keys, ig_dtype kt, int64_t ld, int64_t keys_stride,
                                 int kc, int64_t n, const float *q, int64_t ldq, int64_t q_stride,
                                 int nq, float *out, int64_t ldo, int64_t out_stride,
                                 float *col_max, int64_t cm_stride, float *row_max, int tables,
                                 ig_cuda_stream_t s, ig_error *err);

/* As ig_cuda_partial_scores, each table's keys offset, column count and length from the device
 * array tab [tables][3] (int64: keys offset in elements, kc clamped to 0 .. kc_max, n clamped to
 * 0 .. n_max); scores and col_max written for a table's n entries only. */
ig_status ig_cuda_partial_scores_tab(const void *keys, ig_dtype kt, int64_t ld, const int64_t *tab,
                                     int kc_max, int64_t n_max, const float *q, int64_t ldq,
                                     int64_t q_stride, int nq, float *out, int64_t ldo,
                                     int64_t out_stride, float *col_max, int64_t cm_stride,
                                     float *row_max, int tables, ig_cuda_stream_t s, ig_error *err);

/* ig_be_mask_scores (backend_iface.h): entries with a negative key set to -inf in every score row
 * and col_max, row_max recomputed over the rest; one block per table. */
ig_status ig_cuda_mask_scores(float *x, int64_t ldx, int rows, int64_t x_stride, float *col_max,
                              int64_t cm_stride, float *row_max, const int32_t *key,
                              int64_t key_stride, const int64_t *tab, int64_t n_max, int tables,
                              ig_cuda_stream_t s, ig_error *err);

/* Row r of x (x + r * ldx) has n_rows ? n_rows[r] : n elements (<= ldx); its threshold is
 * thr_r = (thr_base ? thr_base[r] : 0) + thr_add (InfiniGen: row_max from partial scores and
 * thr_add = -alpha, the same f32 sum as the CPU's max - alpha).
 * count_greater: counts[r] = #{e : x[r][e] > thr_r} (ig_cpu_count_greater).
 * indices_greater: idx + r * ld_idx receives those e ascending, counts[r] their number
 * (ig_cpu_indices_greater). One block per row. */
ig_status ig_cuda_count_greater(const float *x, int64_t ldx, int rows, int64_t n,
                                const int32_t *n_rows, const float *thr_base, float thr_add,
                                int32_t *counts, ig_cuda_stream_t s, ig_error *err);
ig_status ig_cuda_indices_greater(const float *x, int64_t ldx, int rows, int64_t n,
                                  const int32_t *n_rows, const float *thr_base, float thr_add,
                                  int32_t *idx, int64_t ld_idx, int32_t *counts, ig_cuda_stream_t s,
                                  ig_error *err);
/* Per row, the k_r = k_rows ? k_rows[r] : k largest of its n_r elements, ties by the lower index,
 * written ascending to idx + r * ld_idx (ld_idx >= the k used), counts[r] = min(max(k_r, 0), n_r):
 * exactly ig_cpu_topk (NaN below every number, -0 == +0). One block per row: a 4-pass 8-bit radix
 * selection on the order-preserving key in shared memory, then an ordered compaction. */
ig_status ig_cuda_topk(const float *x, int64_t ldx, int rows, int64_t n, const int32_t *n_rows,
                       int64_t k, const int32_t *k_rows, int32_t *idx, int64_t ld_idx,
                       int32_t *counts, ig_cuda_stream_t s, ig_error *err);

/* ---- transfer of selected rows (gather_rows.cu) -----------------------------------------------
 */

/* Copies the selected rows of a host-resident KV home into a device working set in one kernel that
 * reads mapped pinned host memory (zero-copy; each warp moves whole rows with 16-byte accesses
 * where alignment allows, so many PCIe reads are in flight at once). Table t (0 <= t < tables):
 * source table st = src_table ? src_table[t] : t at src + st * src_table_stride, row i of it at
 * + i * src_row_stride; its n_sel[t] rows idx[t * idx_stride + j] go to dst + t * dst_table_stride
 * + j * row_bytes (packed). Strides in bytes. src must be device-addressable: mapped pinned memory
 * (ig_cuda_host_alloc / ig_cuda_host_register with mapped = 1, through ig_cuda_host_device_ptr) or
 * device memory. Any row format (f32, f16, quantized rows of ig_kvq_row_bytes). */
ig_status ig_cuda_gather_rows(void *dst, int64_t dst_table_stride, const void *src,
                              int64_t src_table_stride, int64_t src_row_stride,
                              const int32_t *src_table, size_t row_bytes, const int32_t *idx,
                              int64_t idx_stride, const int32_t *n_sel, int tables,
                              ig_cuda_stream_t s, ig_error *err);

/* ---- KV quantization (kvquant.cu) -------------------------------------------------------------
 */

/* The codec of kernels/cpu/kvquant.h, byte for byte (8, 4 or 2 bits, group-wise f16 min/scale):
 * quantize gives the same bytes as ig_kvq_quantize_rows, dequantize the same floats as
 * ig_kvq_dequantize_rows. Invalid (hd, bits, group): IG_ERR_INVALID_ARG. */
ig_status ig_cuda_kvq_quantize_rows(const float *x, int64_t n_rows, int hd, int bits, int group,
                                    uint8_t *out, ig_cuda_stream_t s, ig_error *err);
ig_status ig_cuda_kvq_dequantize_rows(const uint8_t *in, int64_t n_rows, int hd, int bits,
                                      int group, float *out, ig_cuda_stream_t s, ig_error *err);

/* ---- block-quantized weights (qlinear.cu) -----------------------------------------------------
 * W is [N][K] in one of core/base/dtype.h's block formats (q4_0, q4_1, q8_0, q4g64, q8g64), row n
 * at n * ig_dtype_row_bytes(wt, K) bytes, K a multiple of the block; it stays compressed on the
 * device. W must be 4-byte aligned (2 for q4_0 and q8_0), as cudaMalloc'd memory is. */

/* M up to this runs the GEMV kernel (decode); above it the prefill path when a scratch allows. */
#define IG_CUDA_QLINEAR_GEMV_MAX_M 8

/* A caller-owned device scratch for the prefill path, sized once (ig_cuda_qlinear_scratch_bytes)
 * and reused by every call; one call at a time uses it (calls on one stream are ordered).
 * gemm_type IG_DTYPE_F16: x and W's rows rounded to f16, tensor cores with f32 accumulation (the
 * engine's default GEMM precision); IG_DTYPE_F32: f32 GEMM (no TF32), the CPU's precision. */
typedef struct ig_cuda_qscratch {
    void *buf;    /* device memory, 256-byte aligned; NULL: no prefill path (GEMV for every M) */
    size_t bytes; /* its size */
    ig_dtype gemm_type;
} ig_cuda_qscratch;

/* y[M][N] = x[M][K] W^T (f32, overwritten; x 16-byte aligned). M <= IG_CUDA_QLINEAR_GEMV_MAX_M:
 * one kernel reads each row of W once, dequantizes its blocks in registers (d * q + m in f32,
 * bitwise the reference's weights) and dots them with all M rows, f32 accumulation. Larger M with
 * a scratch: chunks of W's rows (all N when they fit, else multiples of 64) dequantized into the
 * scratch and multiplied by cublasGemmEx on c's handle; a scratch too small for M rows of f16 x
 * plus 64 rows of W (or NULL) leaves the GEMV, run in passes of 8 rows of x (correct, slower).
 * Invalid type, K, sizes, NULL or misaligned pointers: IG_ERR_INVALID_ARG naming them, before any
 * launch. c may be NULL when no scratch is given. */
ig_status ig_cuda_qlinear(ig_cuda_ctx *c, ig_cuda_stream_t s, const float *x, int64_t M, int64_t K,
                          const void *W, ig_dtype wt, int64_t N, float *y,
                          const ig_cuda_qscratch *scratch, ig_error *err);
/* ig_cuda_qlinear's type and size checks alone (no device involved): wt block-quantized, K a
 * positive multiple of its block, M and N in [0, 2^31). */
ig_status ig_cuda_qlinear_check_args(int64_t M, int64_t K, ig_dtype wt, int64_t N, ig_error *err);
/* Scratch bytes for M rows of x and n_rows rows of W in one chunk (n_rows = N: one GEMM per
 * call); 0 for an invalid gemm_type or negative sizes. */
size_t ig_cuda_qlinear_scratch_bytes(int64_t M, int64_t K, int64_t n_rows, ig_dtype gemm_type);

/* dst[r][0..K) = row r of W dequantized (rows packed), as f32 (bitwise ig_dequant_row_ref) or f16
 * (that value rounded to nearest even). */
ig_status ig_cuda_dequant_rows(const void *W, ig_dtype wt, int64_t rows, int64_t K, void *dst,
                               ig_dtype dt, ig_cuda_stream_t s, ig_error *err);
/* The same for the rows idx[0..n) (device memory) of a W of src_rows rows, e.g. the embedding
 * rows of a batch's tokens; an index outside [0, src_rows) gives a row of NaN. */
ig_status ig_cuda_dequant_rows_idx(const void *W, ig_dtype wt, int64_t src_rows, int64_t K,
                                   const int32_t *idx, int64_t n, void *dst, ig_dtype dt,
                                   ig_cuda_stream_t s, ig_error *err);

/* Embedding rows by token id (ig_be_embed; embed.cu): f32, f16, bf16 or block-quantized tables
 * into f32 rows, each as ig_dequant_row_ref gives it; an id outside [0, rows) gives a row of NaN.
 */
ig_status ig_cuda_embed(const void *table, ig_dtype tt, int64_t rows, int64_t dim,
                        const int32_t *ids, int64_t n, float *out, ig_cuda_stream_t s,
                        ig_error *err);

/* ---- sampling (sample.cu) ---------------------------------------------------------------------
 */

/* out[r] = ig_sample_argmax of row r (logits + r * ld, n entries): the lowest index among equal
 * maxima, NaN never chosen unless the whole row is NaN (then 0). */
ig_status ig_cuda_argmax(const float *logits, int64_t ld, int rows, int64_t n, int32_t *out,
                         ig_cuda_stream_t s, ig_error *err);
/* ig_sample for each row with the uniform draw u[r] in [0, 1) that the sequence's own generator
 * produced on the host (ig_rng_uniform), so CPU and GPU runs draw the same numbers. temperature
 * <= 0 or top_p <= 0: argmax. Weights exp(l/T - max) in f32 (from a double exp, correctly
 * rounded like glibc's expf in practice); masses in double. The nucleus is found without sorting:
 * bisection over the order-preserving key of the logits for the last kept rank, then the drawn
 * rank the same way; ties at a key are walked in index order, as the CPU's (logit, index) order.
 * Sums are reduced in a different order than the CPU's, so a draw lying within ~1e-15 of a
 * boundary may differ. */
ig_status ig_cuda_sample(const float *logits, int64_t ld, int rows, int64_t n, float temperature,
                         float top_p, const double *u, int32_t *out, ig_cuda_stream_t s,
                         ig_error *err);

#ifdef __cplusplus
}
#endif

#endif
