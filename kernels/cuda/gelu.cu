/* Exact (erf) GELU in place (ig_cpu_gelu): 0.5 x (1 + erf(x / sqrt 2)). */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void gelu_kernel(float *x, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

extern "C" ig_status ig_cuda_gelu(float *x, int64_t n, ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(n >= 0, err, "ig_cuda_gelu");
    if (n == 0) return IG_OK;
    gelu_kernel<<<ig_grid(n, 256), 256, 0, s>>>(x, n);
    return IG_CU_LAUNCHED(err, "gelu_kernel");
}
