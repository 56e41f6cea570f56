/* Top-k per row (ig_cpu_topk): the k largest, ties by the lower index, indices written ascending.
 * One block per row: the k-th largest order key found by 4 radix passes of 8 bits (a shared
 * 256-bucket histogram each), then one ordered compaction that takes every key above it and the
 * first (lowest-index) ties at it. NaN ranks below every number, -0 equals +0 (ig_order_key). */
#include "kernels/cuda/cuda_common.cuh"

#define TOPK_BLOCK 512

static __global__ void __launch_bounds__(TOPK_BLOCK)
    topk_kernel(const float *x, int64_t ldx, int64_t n, const int32_t *n_rows, int64_t k,
                const int32_t *k_rows, int32_t *idx, int64_t ld_idx, int32_t *counts) {
    __shared__ int hist[256];
    __shared__ int sh[32];
    __shared__ uint32_t s_prefix;
    __shared__ int s_need;
    int r = blockIdx.x;
    const float *xr = x + (int64_t)r * ldx;
    int32_t *out = idx + (int64_t)r * ld_idx;
    int64_t nr = n_rows ? (int64_t)n_rows[r] : n;
    int64_t kr = k_rows ? (int64_t)k_rows[r] : k;
    if (kr < 0) kr = 0;
    if (kr > nr) kr = nr;
    if (threadIdx.x == 0) counts[r] = (int32_t)kr;
    if (kr == 0) return;
    if (kr == nr) {
        for (int64_t i = threadIdx.x; i < nr; i += blockDim.x) out[i] = (int32_t)i;
        return;
    }
    uint32_t prefix = 0, mask = 0;
    int need = (int)kr; /* keys still to take among those matching prefix under mask */
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        for (int64_t i = threadIdx.x; i < nr; i += blockDim.x) {
            uint32_t key = ig_order_key(xr[i]);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xffu], 1);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int above = 0, d = 255;
            for (; d > 0; d--) {
                if (above + hist[d] >= need) break;
                above += hist[d];
            }
            s_prefix = prefix | ((uint32_t)d << shift);
            s_need = need - above;
        }
        __syncthreads();
        prefix = s_prefix;
        need = s_need;
        mask |= 0xffu << shift;
        __syncthreads();
    }
    /* prefix is the k-th largest key T; `need` ties at T are taken, the lowest indices first. */
    uint32_t T = prefix;
    int64_t base = 0, ties = 0;
    for (int64_t i0 = 0; i0 < nr; i0 += blockDim.x) {
        int64_t i = i0 + threadIdx.x;
        uint32_t key = i < nr ? ig_order_key(xr[i]) : 0u;
        int eq = i < nr && key == T;
        int n_eq;
        int64_t tie_rank = ties + ig_block_scan_flag(eq, sh, &n_eq);
        int take = i < nr && (key > T || (eq && tie_rank < need));
        int n_take;
        int before = ig_block_scan_flag(take, sh, &n_take);
        if (take) out[base + before] = (int32_t)i;
        base += n_take;
        ties += n_eq;
    }
}

extern "C" ig_status ig_cuda_topk(const float *x, int64_t ldx, int rows, int64_t n,
                                  const int32_t *n_rows, int64_t k, const int32_t *k_rows,
                                  int32_t *idx, int64_t ld_idx, int32_t *counts, ig_cuda_stream_t s,
                                  ig_error *err) {
    const char *fn = "ig_cuda_topk";
    IG_CU_ARG(rows >= 0 && n >= 0 && n <= 2147483647 && ldx >= n, err, fn);
    IG_CU_ARG(counts != NULL && idx != NULL, err, fn);
    IG_CU_ARG(k_rows != NULL || ld_idx >= (k < n ? k : n), err, fn);
    if (rows == 0) return IG_OK;
    topk_kernel<<<(unsigned)rows, TOPK_BLOCK, 0, s>>>(x, ldx, n, n_rows, k, k_rows, idx, ld_idx,
                                                      counts);
    return IG_CU_LAUNCHED(err, "topk_kernel");
}
