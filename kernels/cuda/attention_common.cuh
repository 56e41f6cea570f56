/* One query head's attention over n rows, for a block of IG_ATT_WARPS warps: each warp takes rows
 * w, w + IG_ATT_WARPS, ... and keeps an online softmax (running max, sum, weighted values in
 * registers, lane l owning dims l, l + 32, ...); the warps' partials are merged at the end.
 * Shared by the decode (gathered rows) and prefill (causal) kernels. Internal to kernels/cuda/. */
#ifndef IG_CUDA_ATTENTION_COMMON_CUH
#define IG_CUDA_ATTENTION_COMMON_CUH

#include "kernels/cuda/cuda_common.cuh"

#define IG_ATT_WARPS  4
#define IG_ATT_MAX_HD 256
#define IG_ATT_PER    (IG_ATT_MAX_HD / 32)

static __device__ __forceinline__ float ig_ld(const float *p, int64_t i) {
    return p[i];
}
static __device__ __forceinline__ float ig_ld(const __half *p, int64_t i) {
    return __half2float(p[i]);
}

/* rows(j, &k, &v) gives row j's key and value pointers (type T); raw (optional, global) receives
 * the scaled scores, and after the call, with M and L returned, probabilities can be formed as
 * exp(raw - M) / L. Writes out[0..hd) (0 when n == 0). Every thread of the block must call it. */
template <typename T, typename Rows>
static __device__ void ig_attend(const float *q, int hd, float scale, int64_t n, Rows rows,
                                 float *raw, float *out, float *M_out, float *L_out) {
    __shared__ float s_m[IG_ATT_WARPS], s_l[IG_ATT_WARPS];
    __shared__ float s_acc[IG_ATT_WARPS][IG_ATT_MAX_HD];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    float qr[IG_ATT_PER], acc[IG_ATT_PER];
#pragma unroll
    for (int i = 0; i < IG_ATT_PER; i++) {
        int d = lane + 32 * i;
        qr[i] = d < hd ? q[d] : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -CUDART_INF_F, l = 0.0f;
    for (int64_t j = w; j < n; j += IG_ATT_WARPS) {
        const T *kr, *vr;
        rows(j, &kr, &vr);
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < IG_ATT_PER; i++) {
            int d = lane + 32 * i;
            if (d < hd) dot += qr[i] * ig_ld(kr, d);
        }
        float sc = ig_warp_sum(dot) * scale;
        if (raw && lane == 0) raw[j] = sc;
        float mn = fmaxf(m, sc);
        float corr = m == -CUDART_INF_F ? 0.0f : expf(m - mn);
        float p = expf(sc - mn);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < IG_ATT_PER; i++) {
            int d = lane + 32 * i;
            acc[i] = acc[i] * corr + (d < hd ? p * ig_ld(vr, d) : 0.0f);
        }
        m = mn;
    }
    if (lane == 0) {
        s_m[w] = m;
        s_l[w] = l;
    }
#pragma unroll
    for (int i = 0; i < IG_ATT_PER; i++) {
        int d = lane + 32 * i;
        if (d < hd) s_acc[w][d] = acc[i];
    }
    __syncthreads();
    float Mx = -CUDART_INF_F;
    for (int k = 0; k < IG_ATT_WARPS; k++) Mx = fmaxf(Mx, s_m[k]);
    float f[IG_ATT_WARPS], L = 0.0f;
    for (int k = 0; k < IG_ATT_WARPS; k++) {
        f[k] = s_m[k] == -CUDART_INF_F ? 0.0f : expf(s_m[k] - Mx);
        L += s_l[k] * f[k];
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int k = 0; k < IG_ATT_WARPS; k++) o += s_acc[k][d] * f[k];
        out[d] = n > 0 && L > 0.0f ? o / L : 0.0f;
    }
    if (M_out) *M_out = Mx;
    if (L_out) *L_out = L;
    __syncthreads(); /* raw[] written by every warp is visible to the whole block after this */
}

#endif
