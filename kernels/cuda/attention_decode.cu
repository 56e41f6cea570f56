/* Decode attention over gathered rows (ig_cuda_attn_rows in cuda_kernels.h): one block per
 * (sequence, query head); the selected rows of its KV head through the index list, then the new
 * tokens' rows; optional probabilities for the policy. */
#include "kernels/cuda/attention_common.cuh"

/* Row j of a table's selection: through its index list (or row j when there is none). */
template <typename T> struct sel_rows {
    const T *k, *v;
    const int32_t *idx;
    int64_t row_stride;
    __device__ void operator()(int64_t j, const T **kr, const T **vr) const {
        int64_t r = idx ? (int64_t)idx[j] : j;
        *kr = k + r * row_stride;
        *vr = v + r * row_stride;
    }
};

/* Extra row e of a (sequence, KV head): f32, stride n_kv_head * hd. */
struct extra_rows {
    const float *k, *v;
    int64_t stride;
    __device__ void operator()(int64_t e, const float **kr, const float **vr) const {
        *kr = k + e * stride;
        *vr = v + e * stride;
    }
};

/* The selection (type T) and the extra rows (f32) are attended separately with the same online
 * softmax and the two partial results merged, so f16 tables never round the new f32 rows. */
template <typename T>
static __global__ void attn_rows_kernel(ig_cuda_attn_rows a, const float *q, float *out) {
    int b = blockIdx.x / a.n_head, h = blockIdx.x % a.n_head;
    int group = a.n_head / a.n_kv_head, g = h / group;
    int64_t t = (int64_t)b * a.n_kv_head + g;
    int64_t ns = a.n_sel[t], ne = a.n_extra, n = ns + ne;
    const float *qh = q + ((int64_t)b * a.n_head + h) * a.hd;
    float *oh = out + ((int64_t)b * a.n_head + h) * a.hd;
    float *probs = a.probs ? a.probs + ((int64_t)b * a.n_head + h) * a.probs_stride : NULL;
    const float *ke = a.k_extra ? a.k_extra + ((int64_t)b * ne * a.n_kv_head + g) * a.hd : NULL;
    const float *ve = a.v_extra ? a.v_extra + ((int64_t)b * ne * a.n_kv_head + g) * a.hd : NULL;
    __shared__ float s_o1[IG_ATT_MAX_HD];
    float M1, L1, M2 = -CUDART_INF_F, L2 = 0.0f;
    sel_rows<T> sel = {(const T *)a.k + t * a.table_stride, (const T *)a.v + t * a.table_stride,
                       a.idx ? a.idx + t * a.idx_stride : NULL, a.row_stride};
    ig_attend<T>(qh, a.hd, a.scale, ns, sel, probs, s_o1, &M1, &L1);
    if (ne > 0) {
        extra_rows ex = {ke, ve, (int64_t)a.n_kv_head * a.hd};
        ig_attend<float>(qh, a.hd, a.scale, ne, ex, probs ? probs + ns : NULL, oh, &M2, &L2);
    }
    /* merge: out = (o1 L1 f1 + o2 L2 f2) / (L1 f1 + L2 f2), f = exp(M - max) */
    float Mx = fmaxf(M1, M2);
    float f1 = M1 == -CUDART_INF_F ? 0.0f : expf(M1 - Mx);
    float f2 = M2 == -CUDART_INF_F ? 0.0f : expf(M2 - Mx);
    float L = L1 * f1 + L2 * f2;
    for (int d = threadIdx.x; d < a.hd; d += blockDim.x) {
        float o = s_o1[d] * L1 * f1 + (ne > 0 ? oh[d] * L2 * f2 : 0.0f);
        oh[d] = n > 0 && L > 0.0f ? o / L : 0.0f;
    }
    if (probs)
        for (int64_t j = threadIdx.x; j < a.probs_stride; j += blockDim.x) {
            float p = 0.0f;
            if (j < n && L > 0.0f) p = expf(probs[j] - Mx) / L;
            probs[j] = p;
        }
}

extern "C" ig_status ig_cuda_attention_rows(const ig_cuda_attn_rows *a, const float *q, float *out,
                                            ig_cuda_stream_t s, ig_error *err) {
    const char *fn = "ig_cuda_attention_rows";
    IG_CU_ARG(a->batch >= 0 && a->n_head > 0 && a->n_kv_head > 0, err, fn);
    IG_CU_ARG(a->n_head % a->n_kv_head == 0, err, fn);
    IG_CU_ARG(a->hd > 0 && a->hd <= IG_ATT_MAX_HD, err, fn);
    IG_CU_ARG(a->kv_dtype == IG_DTYPE_F32 || a->kv_dtype == IG_DTYPE_F16, err, fn);
    IG_CU_ARG(a->row_stride >= a->hd && a->n_sel != NULL, err, fn);
    IG_CU_ARG(a->n_extra >= 0 && (a->n_extra == 0 || (a->k_extra && a->v_extra)), err, fn);
    IG_CU_ARG(!a->idx || a->idx_stride >= 0, err, fn);
    IG_CU_ARG(!a->probs || a->probs_stride > 0, err, fn);
    if (a->batch == 0) return IG_OK;
    int64_t blocks = (int64_t)a->batch * a->n_head;
    IG_CU_ARG(blocks <= 2147483647, err, fn);
    if (a->kv_dtype == IG_DTYPE_F32)
        attn_rows_kernel<float><<<(unsigned)blocks, 32 * IG_ATT_WARPS, 0, s>>>(*a, q, out);
    else
        attn_rows_kernel<__half><<<(unsigned)blocks, 32 * IG_ATT_WARPS, 0, s>>>(*a, q, out);
    return IG_CU_LAUNCHED(err, "attn_rows_kernel");
}
