/* Embedding rows by token id (ig_be_embed): f32, f16 and bf16 tables widened exactly, one thread
 * per element; block-quantized tables through ig_cuda_dequant_rows_idx. An id outside the table
 * gives a row of NaN (the ids are device memory: they cannot be checked before the kernel runs). */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void embed_kernel(const void *table, int tt, int64_t rows, int64_t dim,
                                    const int32_t *ids, int64_t n, float *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * dim;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / dim, c = i % dim;
        int32_t id = ids[r];
        float v;
        if (id < 0 || id >= rows) {
            v = __int_as_float(0x7fc00000); /* NaN */
        } else {
            int64_t e = (int64_t)id * dim + c;
            if (tt == IG_DTYPE_F32)
                v = ((const float *)table)[e];
            else if (tt == IG_DTYPE_F16)
                v = __half2float(((const __half *)table)[e]);
            else
                v = __int_as_float((int)((uint32_t)((const uint16_t *)table)[e] << 16));
        }
        out[i] = v;
    }
}

extern "C" ig_status ig_cuda_embed(const void *table, ig_dtype tt, int64_t rows, int64_t dim,
                                   const int32_t *ids, int64_t n, float *out, ig_cuda_stream_t s,
                                   ig_error *err) {
    if (ig_dtype_is_quant(tt))
        return ig_cuda_dequant_rows_idx(table, tt, rows, dim, ids, n, out, IG_DTYPE_F32, s, err);
    const char *fn = "ig_cuda_embed";
    IG_CU_ARG(tt == IG_DTYPE_F32 || tt == IG_DTYPE_F16 || tt == IG_DTYPE_BF16, err, fn);
    IG_CU_ARG(rows >= 0 && dim > 0 && n >= 0, err, fn);
    if (n == 0) return IG_OK;
    IG_CU_ARG(table && ids && out, err, fn);
    embed_kernel<<<ig_grid(n * dim, 256), 256, 0, s>>>(table, (int)tt, rows, dim, ids, n, out);
    return IG_CU_LAUNCHED(err, "embed_kernel");
}
