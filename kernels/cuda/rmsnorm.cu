/* RMSNorm, one block per row: y = w * (x * inv), inv = 1 / sqrtf(mean(x^2) + eps), as
 * ig_cpu_rmsnorm (the sum of squares in f32, reduced in a different order). */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void __launch_bounds__(1024)
    rmsnorm_kernel(const float *x, const float *w, int64_t dim, float eps, float *y) {
    __shared__ float sh[32];
    const float *xr = x + (int64_t)blockIdx.x * dim;
    float *yr = y + (int64_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
    ss = ig_block_reduce(ss, sh, ig_op_add(), 0.0f);
    float inv = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = w[i] * (xr[i] * inv);
}

extern "C" ig_status ig_cuda_rmsnorm(const float *x, const float *w, int64_t rows, int64_t dim,
                                     float eps, float *y, ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(rows >= 0 && rows <= 2147483647, err, "ig_cuda_rmsnorm");
    IG_CU_ARG(dim > 0, err, "ig_cuda_rmsnorm");
    if (rows == 0) return IG_OK;
    rmsnorm_kernel<<<(unsigned)rows, ig_cuda_row_block(dim), 0, s>>>(x, w, dim, eps, y);
    return IG_CU_LAUNCHED(err, "rmsnorm_kernel");
}
