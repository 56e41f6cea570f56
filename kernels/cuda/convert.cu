/* Conversions between f32, f16 and bf16 (round to nearest even), e.g. activations to f16 before a
 * tensor-core GEMM. */
#include <cuda_bf16.h>

#include "kernels/cuda/cuda_common.cuh"

static __device__ __forceinline__ float load_f(const void *p, int t, int64_t i) {
    if (t == IG_DTYPE_F16) return __half2float(((const __half *)p)[i]);
    if (t == IG_DTYPE_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

static __device__ __forceinline__ void store_f(void *p, int t, int64_t i, float v) {
    if (t == IG_DTYPE_F16)
        ((__half *)p)[i] = __float2half_rn(v);
    else if (t == IG_DTYPE_BF16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((float *)p)[i] = v;
}

static __global__ void convert_kernel(const void *src, int st, void *dst, int dt, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_f(dst, dt, i, load_f(src, st, i));
}

static int float_type(ig_dtype t) {
    return t == IG_DTYPE_F32 || t == IG_DTYPE_F16 || t == IG_DTYPE_BF16;
}

extern "C" ig_status ig_cuda_convert(const void *src, ig_dtype st, void *dst, ig_dtype dt,
                                     int64_t n, ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(n >= 0, err, "ig_cuda_convert");
    IG_CU_ARG(float_type(st) && float_type(dt), err, "ig_cuda_convert");
    if (n == 0) return IG_OK;
    convert_kernel<<<ig_grid(n, 256), 256, 0, s>>>(src, (int)st, dst, (int)dt, n);
    return IG_CU_LAUNCHED(err, "convert_kernel");
}
