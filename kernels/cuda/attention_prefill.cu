/* Causal prefill attention (ig_cpu_attention), simple: one block per (query token, head), its
 * keys 0 .. p0+i streamed with the online softmax of attention_common.cuh; with column sums
 * (ig_cpu_attention_colsum) a second kernel sums each key's probabilities from the kept softmax
 * maxima and sums. Prefill is dominated by
 * the projections (cuBLAS); a flash-attention style tiled kernel is the upgrade path. */
#include "kernels/cuda/attention_common.cuh"

struct causal_rows {
    const float *k, *v; /* this KV head's rows, hd apart */
    int hd;
    __device__ void operator()(int64_t j, const float **kr, const float **vr) const {
        *kr = k + j * hd;
        *vr = v + j * hd;
    }
};

static __global__ void attn_prefill_kernel(const float *q, int64_t p0, const float *k,
                                           const float *v, int64_t stride_tokens, int n_head,
                                           int n_kv_head, int hd, float scale, float *out) {
    int64_t i = blockIdx.x / n_head;
    int h = (int)(blockIdx.x % n_head);
    int g = h / (n_head / n_kv_head);
    const float *qh = q + (i * n_head + h) * hd;
    float *oh = out + (i * n_head + h) * hd;
    causal_rows rows = {k + (int64_t)g * stride_tokens * hd, v + (int64_t)g * stride_tokens * hd,
                        hd};
    ig_attend<float>(qh, hd, scale, p0 + i + 1, rows, NULL, oh, NULL, NULL);
}

// The same, keeping each (query, head)'s softmax maximum and sum in ml for the column sums.
static __global__ void attn_prefill_ml_kernel(const float *q, int64_t p0, const float *k,
                                              const float *v, int64_t stride_tokens, int n_head,
                                              int n_kv_head, int hd, float scale, float *out,
                                              float *ml) {
    int64_t i = blockIdx.x / n_head;
    int h = (int)(blockIdx.x % n_head);
    int g = h / (n_head / n_kv_head);
    int64_t qh_i = i * n_head + h;
    causal_rows rows = {k + (int64_t)g * stride_tokens * hd, v + (int64_t)g * stride_tokens * hd,
                        hd};
    float M, L;
    ig_attend<float>(q + qh_i * hd, hd, scale, p0 + i + 1, rows, NULL, out + qh_i * hd, &M, &L);
    if (threadIdx.x == 0) {
        ml[2 * qh_i] = M;
        ml[2 * qh_i + 1] = L;
    }
}

// colsum[h][j] += sum over the queries i that see key j (j <= p0 + i) of exp(s_ij - M_i) / L_i:
// one thread per (head, key), the queries in order.
static __global__ void colsum_kernel(const float *q, int64_t n_q, int64_t p0, const float *k,
                                     int64_t stride_tokens, int n_head, int n_kv_head, int hd,
                                     float scale, const float *ml, float *colsum,
                                     int64_t colsum_stride) {
    int64_t n_ctx = p0 + n_q;
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_ctx * n_head) return;
    int h = (int)(t / n_ctx);
    int64_t j = t % n_ctx;
    int g = h / (n_head / n_kv_head);
    const float *kj = k + ((int64_t)g * stride_tokens + j) * hd;
    float sum = 0.0f;
    for (int64_t i = j > p0 ? j - p0 : 0; i < n_q; i++) {
        int64_t qh_i = i * n_head + h;
        const float *qi = q + qh_i * hd;
        float dot = 0.0f;
        for (int e = 0; e < hd; e++) dot += qi[e] * kj[e];
        float L = ml[2 * qh_i + 1];
        if (L > 0.0f) sum += expf(dot * scale - ml[2 * qh_i]) / L;
    }
    colsum[(int64_t)h * colsum_stride + j] += sum;
}

extern "C" ig_status ig_cuda_attention_prefill_colsum(
    const float *q, int64_t n_q, int64_t p0, const float *k, const float *v, int64_t stride_tokens,
    int n_head, int n_kv_head, int hd, float scale, float *ml, float *colsum, int64_t colsum_stride,
    float *out, ig_cuda_stream_t s, ig_error *err) {
    const char *fn = "ig_cuda_attention_prefill_colsum";
    IG_CU_ARG(n_q >= 0 && p0 >= 0 && n_head > 0 && n_kv_head > 0, err, fn);
    IG_CU_ARG(n_head % n_kv_head == 0, err, fn);
    IG_CU_ARG(hd > 0 && hd <= IG_ATT_MAX_HD, err, fn);
    IG_CU_ARG(stride_tokens >= p0 + n_q && colsum_stride >= p0 + n_q, err, fn);
    if (n_q == 0) return IG_OK;
    IG_CU_ARG(ml && colsum, err, fn);
    int64_t blocks = n_q * n_head;
    IG_CU_ARG(blocks <= 2147483647, err, fn);
    attn_prefill_ml_kernel<<<(unsigned)blocks, 32 * IG_ATT_WARPS, 0, s>>>(
        q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale, out, ml);
    ig_status rc = IG_CU_LAUNCHED(err, "attn_prefill_ml_kernel");
    if (rc != IG_OK) return rc;
    int64_t cells = (p0 + n_q) * n_head, cb = (cells + 127) / 128;
    IG_CU_ARG(cb <= 2147483647, err, fn);
    colsum_kernel<<<(unsigned)cb, 128, 0, s>>>(q, n_q, p0, k, stride_tokens, n_head, n_kv_head, hd,
                                               scale, ml, colsum, colsum_stride);
    return IG_CU_LAUNCHED(err, "colsum_kernel");
}

extern "C" ig_status ig_cuda_attention_prefill(const float *q, int64_t n_q, int64_t p0,
                                               const float *k, const float *v,
                                               int64_t stride_tokens, int n_head, int n_kv_head,
                                               int hd, float scale, float *out, ig_cuda_stream_t s,
                                               ig_error *err) {
    const char *fn = "ig_cuda_attention_prefill";
    IG_CU_ARG(n_q >= 0 && p0 >= 0 && n_head > 0 && n_kv_head > 0, err, fn);
    IG_CU_ARG(n_head % n_kv_head == 0, err, fn);
    IG_CU_ARG(hd > 0 && hd <= IG_ATT_MAX_HD, err, fn);
    IG_CU_ARG(stride_tokens >= p0 + n_q, err, fn);
    if (n_q == 0) return IG_OK;
    int64_t blocks = n_q * n_head;
    IG_CU_ARG(blocks <= 2147483647, err, fn);
    attn_prefill_kernel<<<(unsigned)blocks, 32 * IG_ATT_WARPS, 0, s>>>(
        q, p0, k, v, stride_tokens, n_head, n_kv_head, hd, scale, out);
    return IG_CU_LAUNCHED(err, "attn_prefill_kernel");
}
