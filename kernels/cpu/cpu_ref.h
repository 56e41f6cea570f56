/* Reference CPU kernels: the plain loops the fast kernels in cpu_kernels.h are tested against.
 * Same arguments and layouts as their ig_cpu_* counterparts (no workspace); they read like the
 * math, accumulate in double where a sum is long, and are never used on a hot path. */
#ifndef IG_CPU_REF_H
#define IG_CPU_REF_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "kernels/cpu/cpu_kernels.h"

void ig_ref_linear(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wtype, int64_t N,
                   const float *bias, float *y);
void ig_ref_embed(const void *table, ig_dtype ttype, int64_t dim, const int32_t *ids, int64_t n,
                  float *out);
void ig_ref_rmsnorm(const float *x, const float *w, int64_t rows, int64_t dim, float eps, float *y);
void ig_ref_layernorm(const float *x, const float *w, const float *b, int64_t rows, int64_t dim,
                      float eps, float *y);
void ig_ref_rope_table(float theta, int rot_dim, int64_t max_pos, float *cos_tab, float *sin_tab);
void ig_ref_rope(float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                 const int32_t *pos, const float *cos_tab, const float *sin_tab);
void ig_ref_silu_mul(const float *gate, const float *up, int64_t n, float *out);
void ig_ref_relu(float *x, int64_t n);
void ig_ref_gelu(float *x, int64_t n);
void ig_ref_add(float *y, const float *x, int64_t n);
void ig_ref_scale(float *x, float s, int64_t n);
void ig_ref_softmax(float *x, int64_t n);
double ig_ref_log_prob(const float *logits, int64_t n, int32_t target);
/* Attention in double: scores, softmax and the weighted sum of values. The colsum variant adds
 * the sum over queries of each probability (accumulated in double, added to colsum once). Rows of
 * the _t variant are widened exactly from f32/f16/bf16. */
void ig_ref_attention(const float *q, int64_t n_q, int64_t p0, const float *k, const float *v,
                      int64_t stride_tokens, int n_head, int n_kv_head, int hd, float scale,
                      float *out);
void ig_ref_attention_colsum(const float *q, int64_t n_q, int64_t p0, const float *k,
                             const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                             int hd, float scale, float *colsum, int64_t colsum_stride, float *out);
void ig_ref_attention_rows(const float *q, const float *const *k_rows, const float *const *v_rows,
                           const int64_t *n_rows, int64_t max_rows, int n_head, int n_kv_head,
                           int hd, float scale, float *probs_out, float *out);
void ig_ref_attention_rows_t(const float *q, ig_dtype kv_dtype, const void *const *k_rows,
                             const void *const *v_rows, int64_t row_stride, const int64_t *n_rows,
                             int64_t max_rows, int n_head, int n_kv_head, int hd, float scale,
                             float *probs_out, float *out);
/* Token selection: top-k by sorting every (value, index) pair. */
int64_t ig_ref_topk(const float *s, int64_t n, int64_t k, int32_t *idx_out);
/* ig_cpu_page_bound accumulated in double. */
float ig_ref_page_bound(const float *q, const float *kmin, const float *kmax, int hd);
/* KV quantization (kvquant.h): per value, the format's definition. */
void ig_ref_kvq_quantize_rows(const float *x, int64_t n_rows, int hd, int bits, int group,
                              uint8_t *out);
void ig_ref_kvq_dequantize_rows(const uint8_t *in, int64_t n_rows, int hd, int bits, int group,
                                float *out);
/* Partial scores accumulated in double (same layout as ig_cpu_partial_scores). */
void ig_ref_partial_scores(const void *keys, ig_dtype kt, int64_t ld, int kc, int64_t n,
                           const float *q, int64_t ldq, int nq, float *out, int64_t ldo,
                           float *col_max, float *row_max);
int32_t ig_ref_sample_argmax(const float *logits, int64_t n);
/* Same rule and the same single draw as ig_sample, by sorting the whole vocabulary. */
int32_t ig_ref_sample(const float *logits, int64_t n, float temperature, float top_p, ig_rng *rng);

#endif
