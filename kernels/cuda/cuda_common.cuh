/* Shared pieces of the CUDA kernels (internal to kernels/cuda/): argument checks, launch checks,
 * warp and block reductions, the order-preserving float key of the CPU's top-k. */
#ifndef IG_CUDA_COMMON_CUH
#define IG_CUDA_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>
#include <stdint.h>

#include "kernels/cuda/cuda_kernels.h"

/* Argument check at the top of a launcher: `cond` must hold, else IG_ERR_INVALID_ARG. */
#define IG_CU_ARG(cond, err, fn)                                                                   \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return ig_error_set((err), IG_ERR_INVALID_ARG, "%s: invalid argument: %s", (fn),       \
                                #cond);                                                            \
    } while (0)

/* After a <<<>>> launch: the launch error, if any, named after the kernel. */
#define IG_CU_LAUNCHED(err, name)                                                                  \
    ig_cuda_check((int)cudaGetLastError(), name, __FILE__, __LINE__, (err))

#define IG_WARP 32

static __device__ __forceinline__ float ig_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ double ig_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float ig_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
static __device__ __forceinline__ int ig_warp_sum_i(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Block-wide reductions (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
 * `sh` holds 32 entries; the function synchronises before reusing it. */
template <typename T, typename Op>
static __device__ __forceinline__ T ig_block_reduce(T v, T *sh, Op op, T identity) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads(); /* sh may still be read by a previous call */
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
struct ig_op_add {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct ig_op_max {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* The CPU top-k's key: larger float, larger key; NaN lowest (0); -0 equals +0. */
static __device__ __forceinline__ uint32_t ig_order_key(float x) {
    uint32_t u = __float_as_uint(x);
    if (x != x) return 0u;
    if (u == 0x80000000u) u = 0u;
    return u ^ ((u & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}

/* Exclusive prefix count of `flag` over the block in thread order; *total gets the block's count.
 * sh: 32 ints. blockDim.x a multiple of 32. */
static __device__ __forceinline__ int ig_block_scan_flag(int flag, int *sh, int *total) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    unsigned m = __ballot_sync(0xffffffffu, flag);
    int before_in_warp = __popc(m & ((1u << lane) - 1u));
    __syncthreads();
    if (lane == 0) sh[wid] = __popc(m);
    __syncthreads();
    int before = 0, all = 0;
    for (int w = 0; w < nw; w++) {
        int c = sh[w];
        before += w < wid ? c : 0;
        all += c;
    }
    *total = all;
    return before + before_in_warp;
}

static inline unsigned ig_grid(int64_t n, int block) {
    return (unsigned)ig_cuda_blocks_1d(n, block);
}

#endif
