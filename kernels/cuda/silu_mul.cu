/* SwiGLU's product: out = gate / (1 + exp(-gate)) * up (ig_cpu_silu_mul), f32. */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void silu_mul_kernel(const float *g, const float *u, int64_t n, float *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

extern "C" ig_status ig_cuda_silu_mul(const float *gate, const float *up, int64_t n, float *out,
                                      ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(n >= 0, err, "ig_cuda_silu_mul");
    if (n == 0) return IG_OK;
    silu_mul_kernel<<<ig_grid(n, 256), 256, 0, s>>>(gate, up, n, out);
    return IG_CU_LAUNCHED(err, "silu_mul_kernel");
}
