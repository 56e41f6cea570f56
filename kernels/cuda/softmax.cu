/* Row softmax in place, max-subtracted (ig_cpu_softmax): exp(x - max) / sum; a row of -inf only
 * becomes 0. One block per row. */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void __launch_bounds__(1024) softmax_kernel(float *x, int64_t n) {
    __shared__ float sh[32];
    float *xr = x + (int64_t)blockIdx.x * n;
    float m = -CUDART_INF_F;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = ig_block_reduce(m, sh, ig_op_max(), -CUDART_INF_F);
    if (m == -CUDART_INF_F) {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) xr[i] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(xr[i] - m);
    sum = ig_block_reduce(sum, sh, ig_op_add(), 0.0f);
    float inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) xr[i] = expf(xr[i] - m) * inv;
}

extern "C" ig_status ig_cuda_softmax(float *x, int64_t rows, int64_t n, ig_cuda_stream_t s,
                                     ig_error *err) {
    IG_CU_ARG(rows >= 0 && rows <= 2147483647 && n > 0, err, "ig_cuda_softmax");
    if (rows == 0) return IG_OK;
    softmax_kernel<<<(unsigned)rows, ig_cuda_row_block(n), 0, s>>>(x, n);
    return IG_CU_LAUNCHED(err, "softmax_kernel");
}
