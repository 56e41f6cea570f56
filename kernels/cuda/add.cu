/* Residual and bias additions: y += x (ig_cpu_add), and y[r][i] += bias[i]. */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void add_kernel(float *y, const float *x, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

static __global__ void add_bias_kernel(float *y, const float *bias, int64_t n, int64_t dim) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += bias[i % dim];
}

extern "C" ig_status ig_cuda_add(float *y, const float *x, int64_t n, ig_cuda_stream_t s,
                                 ig_error *err) {
    IG_CU_ARG(n >= 0, err, "ig_cuda_add");
    if (n == 0) return IG_OK;
    add_kernel<<<ig_grid(n, 256), 256, 0, s>>>(y, x, n);
    return IG_CU_LAUNCHED(err, "add_kernel");
}

extern "C" ig_status ig_cuda_add_bias(float *y, const float *bias, int64_t rows, int64_t dim,
                                      ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(rows >= 0 && dim > 0, err, "ig_cuda_add_bias");
    if (rows == 0) return IG_OK;
    add_bias_kernel<<<ig_grid(rows * dim, 256), 256, 0, s>>>(y, bias, rows * dim, dim);
    return IG_CU_LAUNCHED(err, "add_bias_kernel");
}
