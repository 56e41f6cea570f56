/* Causal prefill attention (ig_cpu_attention), simple: one block per (query token, head), its
 * keys 0 .. p0+i streamed with the online softmax of attention_common.cuh. Prefill is dominated by
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
