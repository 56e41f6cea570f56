/* Threshold selection over rows of scores: the count above a per-row threshold and the ascending
 * list of those indices (ig_cpu_count_greater, ig_cpu_indices_greater), one block per row. */
#include "kernels/cuda/cuda_common.cuh"

#define SEL_BLOCK 256

static __device__ __forceinline__ float row_thr(const float *thr_base, float thr_add, int r) {
    return (thr_base ? thr_base[r] : 0.0f) + thr_add;
}

static __global__ void count_greater_kernel(const float *x, int64_t ldx, int64_t n,
                                            const int32_t *n_rows, const float *thr_base,
                                            float thr_add, int32_t *counts) {
    __shared__ int sh[32];
    int r = blockIdx.x;
    const float *xr = x + (int64_t)r * ldx;
    int64_t nr = n_rows ? (int64_t)n_rows[r] : n;
    float thr = row_thr(thr_base, thr_add, r);
    int c = 0;
    for (int64_t i = threadIdx.x; i < nr; i += blockDim.x) c += xr[i] > thr;
    c = ig_block_reduce(c, sh, ig_op_add(), 0);
    if (threadIdx.x == 0) counts[r] = c;
}

static __global__ void indices_greater_kernel(const float *x, int64_t ldx, int64_t n,
                                              const int32_t *n_rows, const float *thr_base,
                                              float thr_add, int32_t *idx, int64_t ld_idx,
                                              int32_t *counts) {
    __shared__ int sh[32];
    int r = blockIdx.x;
    const float *xr = x + (int64_t)r * ldx;
    int32_t *out = idx + (int64_t)r * ld_idx;
    int64_t nr = n_rows ? (int64_t)n_rows[r] : n;
    float thr = row_thr(thr_base, thr_add, r);
    int64_t base = 0;
    for (int64_t i0 = 0; i0 < nr; i0 += blockDim.x) {
        int64_t i = i0 + threadIdx.x;
        int flag = i < nr && xr[i] > thr;
        int total;
        int before = ig_block_scan_flag(flag, sh, &total);
        if (flag) out[base + before] = (int32_t)i;
        base += total;
    }
    if (threadIdx.x == 0) counts[r] = (int32_t)base;
}

static ig_status check(int64_t ldx, int rows, int64_t n, const int32_t *counts, ig_error *err,
                       const char *fn) {
    IG_CU_ARG(rows >= 0 && n >= 0 && n <= 2147483647 && ldx >= n, err, fn);
    IG_CU_ARG(counts != NULL, err, fn);
    return IG_OK;
}

extern "C" ig_status ig_cuda_count_greater(const float *x, int64_t ldx, int rows, int64_t n,
                                           const int32_t *n_rows, const float *thr_base,
                                           float thr_add, int32_t *counts, ig_cuda_stream_t s,
                                           ig_error *err) {
    IG_TRY(check(ldx, rows, n, counts, err, "ig_cuda_count_greater"));
    if (rows == 0) return IG_OK;
    count_greater_kernel<<<(unsigned)rows, SEL_BLOCK, 0, s>>>(x, ldx, n, n_rows, thr_base, thr_add,
                                                              counts);
    return IG_CU_LAUNCHED(err, "count_greater_kernel");
}

extern "C" ig_status ig_cuda_indices_greater(const float *x, int64_t ldx, int rows, int64_t n,
                                             const int32_t *n_rows, const float *thr_base,
                                             float thr_add, int32_t *idx, int64_t ld_idx,
                                             int32_t *counts, ig_cuda_stream_t s, ig_error *err) {
    IG_TRY(check(ldx, rows, n, counts, err, "ig_cuda_indices_greater"));
    IG_CU_ARG(ld_idx >= n, err, "ig_cuda_indices_greater");
    if (rows == 0) return IG_OK;
    indices_greater_kernel<<<(unsigned)rows, SEL_BLOCK, 0, s>>>(x, ldx, n, n_rows, thr_base,
                                                                thr_add, idx, ld_idx, counts);
    return IG_CU_LAUNCHED(err, "indices_greater_kernel");
}
