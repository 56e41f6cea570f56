/* Rotate-half RoPE in place, the same f32 operations as ig_cpu_rope (two products, then the
 * difference / sum, each rounded: __fmul_rn / __fadd_rn forbid FMA contraction), so bitwise equal.
 */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void rope_kernel(float *x, int64_t pairs, int n_heads, int head_dim, int half,
                                   const int32_t *pos, const float *cos_tab, const float *sin_tab) {
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs;
         p += (int64_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        int64_t th = p / half; /* token * n_heads + head */
        int64_t t = th / n_heads;
        float *xh = x + th * head_dim;
        int64_t o = (int64_t)pos[t] * half + i;
        float c = cos_tab[o], sn = sin_tab[o];
        float x1 = xh[i], x2 = xh[i + half];
        xh[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, sn));
        xh[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, sn));
    }
}

extern "C" ig_status ig_cuda_rope(float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                                  const int32_t *pos, const float *cos_tab, const float *sin_tab,
                                  ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(n_tok >= 0 && n_heads > 0 && head_dim > 0, err, "ig_cuda_rope");
    IG_CU_ARG(rot_dim >= 2 && rot_dim % 2 == 0 && rot_dim <= head_dim, err, "ig_cuda_rope");
    int64_t pairs = n_tok * n_heads * (int64_t)(rot_dim / 2);
    if (pairs == 0) return IG_OK;
    rope_kernel<<<ig_grid(pairs, 256), 256, 0, s>>>(x, pairs, n_heads, head_dim, rot_dim / 2, pos,
                                                    cos_tab, sin_tab);
    return IG_CU_LAUNCHED(err, "rope_kernel");
}
