/* LayerNorm, one block per row, two passes in double (mean, then centred squares) as
 * ig_cpu_layernorm: y = (x - mean) / sqrt(var + eps) * w + b, biased variance. */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void __launch_bounds__(1024)
    layernorm_kernel(const float *x, const float *w, const float *b, int64_t dim, float eps,
                     float *y) {
    __shared__ double sh[32];
    const float *xr = x + (int64_t)blockIdx.x * dim;
    float *yr = y + (int64_t)blockIdx.x * dim;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i];
    double mean = ig_block_reduce(sum, sh, ig_op_add(), 0.0) / (double)dim;
    double sq = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        double d = xr[i] - mean;
        sq += d * d;
    }
    double var = ig_block_reduce(sq, sh, ig_op_add(), 0.0) / (double)dim;
    double inv = 1.0 / sqrt(var + (double)eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float t = (float)((xr[i] - mean) * inv); /* as the CPU: the mean need not be an f32 */
        yr[i] = b ? __fadd_rn(__fmul_rn(t, w[i]), b[i]) : t * w[i];
    }
}

extern "C" ig_status ig_cuda_layernorm(const float *x, const float *w, const float *b, int64_t rows,
                                       int64_t dim, float eps, float *y, ig_cuda_stream_t s,
                                       ig_error *err) {
    IG_CU_ARG(rows >= 0 && rows <= 2147483647, err, "ig_cuda_layernorm");
    IG_CU_ARG(dim > 0, err, "ig_cuda_layernorm");
    if (rows == 0) return IG_OK;
    layernorm_kernel<<<(unsigned)rows, ig_cuda_row_block(dim), 0, s>>>(x, w, b, dim, eps, y);
    return IG_CU_LAUNCHED(err, "layernorm_kernel");
}
