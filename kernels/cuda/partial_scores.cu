/* InfiniGen's partial attention scores over column-major partial key tables, many tables per
 * launch (ig_cpu_partial_scores per table): grid (entry blocks, tables), a thread per entry, the
 * table's query rows in shared memory, each key column read once, coalesced along entries. Tables
 * are either evenly strided with one size, or each placed and sized by a device array (tab). */
#include "kernels/cuda/cuda_common.cuh"

#define PS_MAX_ROWS 16
#define PS_BLOCK    256

/* Max for floats through integer atomics, correct for any mix of signs when the target starts at
 * -inf: non-negative values (sign bit clear) order like signed ints, negative ones reversed like
 * unsigned ints. */
static __device__ __forceinline__ void atomic_max_f32(float *addr, float v) {
    if (v != v) return;
    if (!signbit(v))
        atomicMax((int *)addr, __float_as_int(v));
    else
        atomicMin((unsigned *)addr, __float_as_uint(v));
}

static __global__ void fill_kernel(float *x, int64_t n, float v) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = v;
}

/* tab: NULL (table t at keys + t * keys_stride, kc columns, n entries), or [tables][3] int64:
 * keys offset, kc (clamped to 0 .. kc), n (clamped to 0 .. n). */
template <typename T>
static __global__ void partial_scores_kernel(const T *keys, int64_t ld, int64_t keys_stride, int kc,
                                             int64_t n, const int64_t *tab, const float *q,
                                             int64_t ldq, int64_t q_stride, int nq, float *out,
                                             int64_t ldo, int64_t out_stride, float *col_max,
                                             int64_t cm_stride, float *row_max) {
    extern __shared__ float sq[]; /* [nq][kc] */
    __shared__ float red[32];
    int64_t t = blockIdx.y;
    const T *kt = keys + t * keys_stride;
    if (tab) {
        int64_t tk = tab[3 * t + 1], tn = tab[3 * t + 2];
        kt = keys + tab[3 * t];
        kc = (int)(tk < 0 ? 0 : tk > kc ? kc : tk);
        n = tn < 0 ? 0 : tn > n ? n : tn;
    }
    const float *qt = q + t * q_stride;
    for (int i = threadIdx.x; i < nq * kc; i += blockDim.x) sq[i] = qt[(i / kc) * ldq + i % kc];
    __syncthreads();
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc[PS_MAX_ROWS];
#pragma unroll
    for (int h = 0; h < PS_MAX_ROWS; h++) acc[h] = 0.0f;
    if (e < n)
        for (int j = 0; j < kc; j++) {
            float kv = (float)kt[(int64_t)j * ld + e];
#pragma unroll
            for (int h = 0; h < PS_MAX_ROWS; h++)
                if (h < nq) acc[h] += sq[h * kc + j] * kv;
        }
    float cm = -CUDART_INF_F;
    float *ot = out + t * out_stride;
    for (int h = 0; h < nq; h++) {
        if (e < n) {
            ot[h * ldo + e] = acc[h];
            cm = fmaxf(cm, acc[h]);
        }
        float bm = ig_block_reduce(e < n ? acc[h] : -CUDART_INF_F, red, ig_op_max(), -CUDART_INF_F);
        if (threadIdx.x == 0) atomic_max_f32(row_max + t * nq + h, bm);
    }
    if (col_max && e < n) col_max[t * cm_stride + e] = cm;
}

/* Both launchers: evenly strided tables (tab NULL; kc, n, keys_stride) or placed and sized by tab
 * (kc, n the maxima). */
static ig_status launch(const char *fn, const void *keys, ig_dtype kt, int64_t ld,
                        int64_t keys_stride, const int64_t *tab, int kc, int64_t n, const float *q,
                        int64_t ldq, int64_t q_stride, int nq, float *out, int64_t ldo,
                        int64_t out_stride, float *col_max, int64_t cm_stride, float *row_max,
                        int tables, ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(kt == IG_DTYPE_F32 || kt == IG_DTYPE_F16, err, fn);
    IG_CU_ARG(nq >= 1 && nq <= PS_MAX_ROWS && kc >= 0 && kc <= 512, err, fn);
    IG_CU_ARG(n >= 0 && ld >= n && ldo >= n && ldq >= kc, err, fn);
    IG_CU_ARG(tables >= 0 && tables <= 65535, err, fn);
    IG_CU_ARG(!col_max || tables <= 1 || cm_stride >= n, err, fn);
    if (tables == 0) return IG_OK;
    fill_kernel<<<ig_grid((int64_t)tables * nq, 256), 256, 0, s>>>(row_max, (int64_t)tables * nq,
                                                                   -INFINITY);
    IG_TRY(IG_CU_LAUNCHED(err, "fill_kernel"));
    if (n == 0) return IG_OK;
    dim3 grid(ig_grid(n, PS_BLOCK), (unsigned)tables);
    size_t shm = (size_t)nq * (size_t)kc * sizeof(float);
    if (kt == IG_DTYPE_F32)
        partial_scores_kernel<float><<<grid, PS_BLOCK, shm, s>>>(
            (const float *)keys, ld, keys_stride, kc, n, tab, q, ldq, q_stride, nq, out, ldo,
            out_stride, col_max, cm_stride, row_max);
    else
        partial_scores_kernel<__half><<<grid, PS_BLOCK, shm, s>>>(
            (const __half *)keys, ld, keys_stride, kc, n, tab, q, ldq, q_stride, nq, out, ldo,
            out_stride, col_max, cm_stride, row_max);
    return IG_CU_LAUNCHED(err, "partial_scores_kernel");
}

extern "C" ig_status ig_cuda_partial_scores(const void *keys, ig_dtype kt, int64_t ld,
                                            int64_t keys_stride, int kc, int64_t n, const float *q,
                                            int64_t ldq, int64_t q_stride, int nq, float *out,
                                            int64_t ldo, int64_t out_stride, float *col_max,
                                            int64_t cm_stride, float *row_max, int tables,
                                            ig_cuda_stream_t s, ig_error *err) {
    return launch("ig_cuda_partial_scores", keys, kt, ld, keys_stride, (const int64_t *)NULL, kc, n,
                  q, ldq, q_stride, nq, out, ldo, out_stride, col_max, cm_stride, row_max, tables,
                  s, err);
}

extern "C" ig_status ig_cuda_partial_scores_tab(const void *keys, ig_dtype kt, int64_t ld,
                                                const int64_t *tab, int kc_max, int64_t n_max,
                                                const float *q, int64_t ldq, int64_t q_stride,
                                                int nq, float *out, int64_t ldo, int64_t out_stride,
                                                float *col_max, int64_t cm_stride, float *row_max,
                                                int tables, ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(tables == 0 || tab != NULL, err, "ig_cuda_partial_scores_tab");
    return launch("ig_cuda_partial_scores_tab", keys, kt, ld, 0, tab, kc_max, n_max, q, ldq,
                  q_stride, nq, out, ldo, out_stride, col_max, cm_stride, row_max, tables, s, err);
}

/* One block per table: the masked entries first (each thread its own entries), then each row's
 * maximum over the others (NaN never larger, as the host's comparison). */
static __global__ void mask_scores_kernel(float *x, int64_t ldx, int rows, int64_t x_stride,
                                          float *col_max, int64_t cm_stride, float *row_max,
                                          const int32_t *key, int64_t key_stride,
                                          const int64_t *tab, int64_t n_max) {
    __shared__ float red[32];
    int64_t t = blockIdx.x, n = tab[3 * t + 2];
    n = n < 0 ? 0 : n > n_max ? n_max : n;
    const int32_t *kt = key + t * key_stride;
    float *xt = x + t * x_stride;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
        if (kt[e] < 0) {
            for (int h = 0; h < rows; h++) xt[h * ldx + e] = -CUDART_INF_F;
            if (col_max) col_max[t * cm_stride + e] = -CUDART_INF_F;
        }
    for (int h = 0; h < rows; h++) {
        float m = -CUDART_INF_F;
        for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
            if (kt[e] >= 0 && xt[h * ldx + e] > m) m = xt[h * ldx + e];
        float bm = ig_block_reduce(m, red, ig_op_max(), -CUDART_INF_F);
        if (threadIdx.x == 0) row_max[t * rows + h] = bm;
    }
}

extern "C" ig_status ig_cuda_mask_scores(float *x, int64_t ldx, int rows, int64_t x_stride,
                                         float *col_max, int64_t cm_stride, float *row_max,
                                         const int32_t *key, int64_t key_stride, const int64_t *tab,
                                         int64_t n_max, int tables, ig_cuda_stream_t s,
                                         ig_error *err) {
    const char *fn = "ig_cuda_mask_scores";
    IG_CU_ARG(tables >= 0 && tables <= (1 << 30) && rows >= 1 && n_max >= 0, err, fn);
    IG_CU_ARG(ldx >= n_max && key_stride >= n_max, err, fn);
    if (tables == 0) return IG_OK;
    IG_CU_ARG(x && row_max && key && tab, err, fn);
    mask_scores_kernel<<<tables, PS_BLOCK, 0, s>>>(x, ldx, rows, x_stride, col_max, cm_stride,
                                                   row_max, key, key_stride, tab, n_max);
    return IG_CU_LAUNCHED(err, "mask_scores_kernel");
}
