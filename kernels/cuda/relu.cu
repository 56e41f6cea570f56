/* ReLU in place (ig_cpu_relu: negatives become +0; NaN and -0 stay as they are). */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void relu_kernel(float *x, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        if (x[i] < 0.0f) x[i] = 0.0f;
}

extern "C" ig_status ig_cuda_relu(float *x, int64_t n, ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(n >= 0, err, "ig_cuda_relu");
    if (n == 0) return IG_OK;
    relu_kernel<<<ig_grid(n, 256), 256, 0, s>>>(x, n);
    return IG_CU_LAUNCHED(err, "relu_kernel");
}
