/* y = x W^T with W block-quantized (core/base/dtype.h: q4_0, q4_1, q8_0, q4g64, q8g64) and kept in
 * its compressed form on the device. Decode (M <= IG_CUDA_QLINEAR_GEMV_MAX_M): a GEMV kernel that
 * reads each row's blocks once, dequantizes them in registers and dots them with all M rows of x.
 * Prefill: chunks of W's rows dequantized into a caller-owned scratch (f16 or f32) and multiplied
 * by cuBLAS, so tensor cores do the work; without a scratch large enough the GEMV runs in passes of
 * M rows. Never widens all of W, never allocates. Also the dequantization of whole rows
 * (embeddings, tests).
 *
 * Every weight is computed as the reference does (ig_dequant_row_ref: d * q + m in f32, two
 * roundings, no FMA contraction), so dequantized rows are bitwise the reference's and the GEMV's
 * products differ from a plain f32 dot only in summation order. */
#include <cublas_v2.h>

#include "kernels/cuda/cuda_common.cuh"

#define QL_THREADS   128 /* GEMV block: 4 warps, 1, 2 or 4 of them per output row */
#define QL_WARPS     (QL_THREADS / IG_WARP)
#define QL_DQ_BLOCK  256 /* dequantization: one thread per piece of 8 elements */
#define QL_ROW_ALIGN 64  /* prefill chunks of W rows (but the last) are multiples of this */

/* ---- block formats ------------------------------------------------------------------------------
 * A block is split into pieces of 8 elements that one thread dequantizes: in the 4-bit formats
 * 4 bytes of codes, i.e. elements [4j, 4j + 4) (low nibbles) and [4j + block/2, ...) (high); in
 * the 8-bit ones 8 bytes, elements [8j, 8j + 8). asym: f16 d and m (the block and its codes are
 * 4-byte aligned); otherwise f16 d alone (2-byte aligned: loads of 16 bits). */
template <int T> struct qfmt;
template <> struct qfmt<IG_DTYPE_Q4_0> {
    static constexpr int block = IG_Q4_0_BLOCK, bytes = IG_Q4_0_BYTES, bits = 4, asym = 0;
};
template <> struct qfmt<IG_DTYPE_Q4_1> {
    static constexpr int block = IG_Q4_1_BLOCK, bytes = IG_Q4_1_BYTES, bits = 4, asym = 1;
};
template <> struct qfmt<IG_DTYPE_Q8_0> {
    static constexpr int block = IG_Q8_0_BLOCK, bytes = IG_Q8_0_BYTES, bits = 8, asym = 0;
};
template <> struct qfmt<IG_DTYPE_Q4G64> {
    static constexpr int block = IG_Q4G64_BLOCK, bytes = IG_Q4G64_BYTES, bits = 4, asym = 1;
};
template <> struct qfmt<IG_DTYPE_Q8G64> {
    static constexpr int block = IG_Q8G64_BLOCK, bytes = IG_Q8G64_BYTES, bits = 8, asym = 1;
};

static __device__ __forceinline__ float f16_val(uint32_t h) {
    return __half2float(__ushort_as_half((unsigned short)h));
}

/* Element offsets (within the block) of piece j's two runs of 4. */
template <int T> static __device__ __forceinline__ void piece_offsets(int j, int *o0, int *o1) {
    if (qfmt<T>::bits == 4) {
        *o0 = 4 * j;
        *o1 = 4 * j + qfmt<T>::block / 2;
    } else {
        *o0 = 8 * j;
        *o1 = 8 * j + 4;
    }
}

/* One code c to its value, exactly as ig_dequant_row_ref rounds it. */
template <int T> static __device__ __forceinline__ float dq(float d, float m, uint32_t c) {
    if (T == IG_DTYPE_Q4_0) return __fmul_rn(d, (float)((int)c - 8));
    if (T == IG_DTYPE_Q8_0) return __fmul_rn(d, (float)(int8_t)(uint8_t)c);
    return __fadd_rn(__fmul_rn(d, (float)c), m);
}

/* The 8 values of piece j of the block at blk: w[0..3] go to elements o0.., w[4..7] to o1.. */
template <int T>
static __device__ __forceinline__ void q_piece(const uint8_t *blk, int j, float w[8]) {
    typedef qfmt<T> F;
    float d, m = 0.0f;
    uint32_t q0, q1 = 0;
    if (F::asym) {
        uint32_t dm = *(const uint32_t *)blk;
        d = f16_val(dm & 0xffffu);
        m = f16_val(dm >> 16);
        const uint32_t *qs = (const uint32_t *)(blk + 4) + (F::bits == 4 ? j : 2 * j);
        q0 = qs[0];
        if (F::bits == 8) q1 = qs[1];
    } else {
        const uint16_t *h = (const uint16_t *)blk;
        d = f16_val(h[0]);
        const uint16_t *qs = h + 1 + (F::bits == 4 ? 2 * j : 4 * j);
        q0 = (uint32_t)qs[0] | (uint32_t)qs[1] << 16;
        if (F::bits == 8) q1 = (uint32_t)qs[2] | (uint32_t)qs[3] << 16;
    }
#pragma unroll
    for (int e = 0; e < 4; e++) {
        if (F::bits == 4) {
            w[e] = dq<T>(d, m, (q0 >> (8 * e)) & 15u);
            w[4 + e] = dq<T>(d, m, (q0 >> (8 * e + 4)) & 15u);
        } else {
            w[e] = dq<T>(d, m, (q0 >> (8 * e)) & 255u);
            w[4 + e] = dq<T>(d, m, (q1 >> (8 * e)) & 255u);
        }
    }
}

/* ---- GEMV (decode) -------------------------------------------------------------------------- */

/* y[m][n] for the rows m of x in passes of MB (blockIdx.y strides them) and rpb = QL_WARPS / wpr
 * output rows n per block, wpr warps each. A row's pieces are spread over its wpr * 32 threads in
 * order, so one warp instruction reads consecutive bytes of the row; each piece is dequantized
 * once in registers and multiplied with all MB rows of x (float4 loads; x is 16-byte aligned).
 * Per-thread sums -> warp shuffles -> the row's warps added in shared memory. Threads of rows
 * past N do no work but reach every barrier. */
template <int T, int MB>
static __global__ void __launch_bounds__(QL_THREADS)
    qgemv_kernel(const float *x, int64_t M, int64_t K, const uint8_t *W, int64_t row_bytes,
                 int64_t N, int wpr, float *y) {
    typedef qfmt<T> F;
    const int ppb = F::block / 8; /* pieces per block */
    __shared__ float part[QL_WARPS][MB];
    const int warp = threadIdx.x / IG_WARP, lane = threadIdx.x % IG_WARP;
    const int rpb = QL_WARPS / wpr, nthr = wpr * IG_WARP;
    const int tid = (warp % wpr) * IG_WARP + lane;
    const int64_t n = (int64_t)blockIdx.x * rpb + warp / wpr;
    const int64_t pieces = n < N ? K / 8 : 0;
    const uint8_t *row = W + (n < N ? n : 0) * row_bytes;
    for (int64_t m0 = (int64_t)blockIdx.y * MB; m0 < M; m0 += (int64_t)gridDim.y * MB) {
        const int mb = M - m0 < MB ? (int)(M - m0) : MB;
        float acc[MB];
#pragma unroll
        for (int i = 0; i < MB; i++) acc[i] = 0.0f;
        for (int64_t p = tid; p < pieces; p += nthr) {
            const int64_t b = p / ppb;
            const int j = (int)(p % ppb);
            float w[8];
            int o0, o1;
            q_piece<T>(row + b * F::bytes, j, w);
            piece_offsets<T>(j, &o0, &o1);
            const float *xb = x + m0 * K + b * F::block;
#pragma unroll
            for (int i = 0; i < MB; i++) {
                if (i < mb) {
                    const float4 a = *(const float4 *)(xb + i * K + o0);
                    const float4 c = *(const float4 *)(xb + i * K + o1);
                    acc[i] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * c.x +
                              w[5] * c.y + w[6] * c.z + w[7] * c.w;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < MB; i++) acc[i] = ig_warp_sum(acc[i]);
        if (lane == 0)
            for (int i = 0; i < MB; i++) part[warp][i] = acc[i];
        __syncthreads();
        if ((int)threadIdx.x < rpb * MB) {
            const int r = threadIdx.x / MB, i = threadIdx.x % MB;
            const int64_t nn = (int64_t)blockIdx.x * rpb + r;
            if (i < mb && nn < N) {
                float sum = 0.0f;
                for (int k = 0; k < wpr; k++) sum += part[r * wpr + k][i];
                y[(m0 + i) * N + nn] = sum;
            }
        }
        __syncthreads(); /* part is rewritten by the next pass */
    }
}

/* ---- dequantization of rows ------------------------------------------------------------------ */

static __device__ __forceinline__ void put(float *p, float v) {
    *p = v;
}
static __device__ __forceinline__ void put(__half *p, float v) {
    *p = __float2half_rn(v);
}

/* dst row r (K elements of O, rows packed) = W row (idx ? idx[r] : r); an index outside
 * [0, src_rows) gives a row of NaN. One thread per piece, grid-stride. */
template <int T, typename O>
static __global__ void qdequant_kernel(const uint8_t *W, int64_t row_bytes, const int32_t *idx,
                                       int64_t src_rows, int64_t rows, int64_t K, O *dst) {
    typedef qfmt<T> F;
    const int ppb = F::block / 8;
    const int64_t ppr = K / 8, total = rows * ppr;
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < total;
         q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = q / ppr, p = q % ppr, b = p / ppb;
        const int j = (int)(p % ppb);
        const int64_t sr = idx ? (int64_t)idx[r] : r;
        float w[8];
        if (sr >= 0 && sr < src_rows)
            q_piece<T>(W + sr * row_bytes + b * F::bytes, j, w);
        else
            for (int e = 0; e < 8; e++) w[e] = CUDART_NAN_F;
        int o0, o1;
        piece_offsets<T>(j, &o0, &o1);
        O *out = dst + r * K + b * F::block;
        for (int e = 0; e < 4; e++) {
            put(out + o0 + e, w[e]);
            put(out + o1 + e, w[4 + e]);
        }
    }
}

/* ---- host side ------------------------------------------------------------------------------- */

/* Alignment the kernels' loads need of W (and so of row_bytes, which every format keeps). */
static int w_align(ig_dtype t) {
    return t == IG_DTYPE_Q4_0 || t == IG_DTYPE_Q8_0 ? 2 : 4;
}

static int misaligned(const void *p, int a) {
    return (uintptr_t)p % (uintptr_t)a != 0;
}

/* Type and K, shared by the launchers. */
static ig_status check_type_k(const char *fn, ig_dtype wt, int64_t K, ig_error *err) {
    if (!ig_dtype_is_quant(wt))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "%s: W type %s is not block-quantized (q4_0, q4_1, q8_0, q4g64, q8g64; "
                            "float weights go through ig_cuda_gemm)",
                            fn, ig_dtype_name(wt));
    int64_t blk = ig_dtype_block_elems(wt);
    if (K <= 0 || K > INT32_MAX || K % blk != 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "%s: K=%lld must be a positive multiple of %s's block of %lld elements "
                            "(below 2^31)",
                            fn, (long long)K, ig_dtype_name(wt), (long long)blk);
    return IG_OK;
}

extern "C" ig_status ig_cuda_qlinear_check_args(int64_t M, int64_t K, ig_dtype wt, int64_t N,
                                                ig_error *err) {
    IG_TRY(check_type_k("ig_cuda_qlinear", wt, K, err));
    if (M < 0 || N < 0 || M > INT32_MAX || N > INT32_MAX)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "ig_cuda_qlinear: sizes M=%lld N=%lld outside [0, 2^31)", (long long)M,
                            (long long)N);
    return IG_OK;
}

static size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

/* The x part of the scratch (f16 x for the f16 GEMM; none for f32). */
static size_t x_part_bytes(int64_t M, int64_t K, ig_dtype gemm_type) {
    return gemm_type == IG_DTYPE_F16 ? round_up((size_t)M * (size_t)K * 2, 256) : 0;
}

extern "C" size_t ig_cuda_qlinear_scratch_bytes(int64_t M, int64_t K, int64_t n_rows,
                                                ig_dtype gemm_type) {
    if (M < 0 || K < 0 || n_rows < 0 || (gemm_type != IG_DTYPE_F16 && gemm_type != IG_DTYPE_F32))
        return 0;
    return x_part_bytes(M, K, gemm_type) +
           (size_t)n_rows * (size_t)K * (gemm_type == IG_DTYPE_F16 ? 2 : 4);
}

template <int T>
static ig_status gemv_t(const float *x, int64_t M, int64_t K, const uint8_t *W, int64_t N, float *y,
                        cudaStream_t s, ig_error *err) {
    const int64_t row_bytes = (int64_t)ig_dtype_row_bytes((ig_dtype)T, K), pieces = K / 8;
    const int wpr = pieces <= IG_WARP ? 1 : pieces <= 2 * IG_WARP ? 2 : 4;
    const int rpb = QL_WARPS / wpr;
    const int mb = M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : 8;
    const int64_t passes = (M + mb - 1) / mb;
    dim3 grid((unsigned)((N + rpb - 1) / rpb), (unsigned)(passes < 65535 ? passes : 65535));
    switch (mb) {
    case 1:
        qgemv_kernel<T, 1><<<grid, QL_THREADS, 0, s>>>(x, M, K, W, row_bytes, N, wpr, y);
        break;
    case 2:
        qgemv_kernel<T, 2><<<grid, QL_THREADS, 0, s>>>(x, M, K, W, row_bytes, N, wpr, y);
        break;
    case 4:
        qgemv_kernel<T, 4><<<grid, QL_THREADS, 0, s>>>(x, M, K, W, row_bytes, N, wpr, y);
        break;
    default:
        qgemv_kernel<T, 8><<<grid, QL_THREADS, 0, s>>>(x, M, K, W, row_bytes, N, wpr, y);
        break;
    }
    return IG_CU_LAUNCHED(err, "qgemv_kernel");
}

template <int T>
static ig_status dequant_t(const uint8_t *W, const int32_t *idx, int64_t src_rows, int64_t rows,
                           int64_t K, void *dst, ig_dtype dt, cudaStream_t s, ig_error *err) {
    const int64_t row_bytes = (int64_t)ig_dtype_row_bytes((ig_dtype)T, K);
    const unsigned grid = ig_grid(rows * (K / 8), QL_DQ_BLOCK);
    if (dt == IG_DTYPE_F16)
        qdequant_kernel<T, __half>
            <<<grid, QL_DQ_BLOCK, 0, s>>>(W, row_bytes, idx, src_rows, rows, K, (__half *)dst);
    else
        qdequant_kernel<T, float>
            <<<grid, QL_DQ_BLOCK, 0, s>>>(W, row_bytes, idx, src_rows, rows, K, (float *)dst);
    return IG_CU_LAUNCHED(err, "qdequant_kernel");
}

/* The launches by type (arguments checked). */
static ig_status gemv(const float *x, int64_t M, int64_t K, const void *W, ig_dtype wt, int64_t N,
                      float *y, cudaStream_t s, ig_error *err) {
    const uint8_t *w = (const uint8_t *)W;
    switch (wt) {
    case IG_DTYPE_Q4_0:
        return gemv_t<IG_DTYPE_Q4_0>(x, M, K, w, N, y, s, err);
    case IG_DTYPE_Q4_1:
        return gemv_t<IG_DTYPE_Q4_1>(x, M, K, w, N, y, s, err);
    case IG_DTYPE_Q8_0:
        return gemv_t<IG_DTYPE_Q8_0>(x, M, K, w, N, y, s, err);
    case IG_DTYPE_Q4G64:
        return gemv_t<IG_DTYPE_Q4G64>(x, M, K, w, N, y, s, err);
    default:
        return gemv_t<IG_DTYPE_Q8G64>(x, M, K, w, N, y, s, err);
    }
}

static ig_status dequant(const void *W, ig_dtype wt, const int32_t *idx, int64_t src_rows,
                         int64_t rows, int64_t K, void *dst, ig_dtype dt, cudaStream_t s,
                         ig_error *err) {
    const uint8_t *w = (const uint8_t *)W;
    switch (wt) {
    case IG_DTYPE_Q4_0:
        return dequant_t<IG_DTYPE_Q4_0>(w, idx, src_rows, rows, K, dst, dt, s, err);
    case IG_DTYPE_Q4_1:
        return dequant_t<IG_DTYPE_Q4_1>(w, idx, src_rows, rows, K, dst, dt, s, err);
    case IG_DTYPE_Q8_0:
        return dequant_t<IG_DTYPE_Q8_0>(w, idx, src_rows, rows, K, dst, dt, s, err);
    case IG_DTYPE_Q4G64:
        return dequant_t<IG_DTYPE_Q4G64>(w, idx, src_rows, rows, K, dst, dt, s, err);
    default:
        return dequant_t<IG_DTYPE_Q8G64>(w, idx, src_rows, rows, K, dst, dt, s, err);
    }
}

/* Prefill: for each chunk of W's rows, dequantize into the scratch and one cublasGemmEx writing
 * columns n0.. of y (ldc = N). Returns 0 (nothing queued) when the scratch holds fewer rows than
 * a chunk needs; the caller then runs the GEMV. */
static int64_t gemm_chunk_rows(const ig_cuda_qscratch *sc, int64_t M, int64_t K, int64_t N) {
    size_t xb = x_part_bytes(M, K, sc->gemm_type);
    size_t es = sc->gemm_type == IG_DTYPE_F16 ? 2 : 4;
    if (sc->bytes <= xb) return 0;
    int64_t fit = (int64_t)((sc->bytes - xb) / ((size_t)K * es));
    return fit >= N ? N : fit / QL_ROW_ALIGN * QL_ROW_ALIGN;
}

static ig_status gemm_path(ig_cuda_ctx *c, cudaStream_t s, const float *x, int64_t M, int64_t K,
                           const void *W, ig_dtype wt, int64_t N, float *y,
                           const ig_cuda_qscratch *sc, int64_t chunk, ig_error *err) {
    const int f16 = sc->gemm_type == IG_DTYPE_F16;
    const cudaDataType_t at = f16 ? CUDA_R_16F : CUDA_R_32F;
    char *buf = (char *)sc->buf;
    const void *xin = x;
    char *wbuf = buf + x_part_bytes(M, K, sc->gemm_type);
    cublasHandle_t h = (cublasHandle_t)ig_cuda_ctx_cublas(c);
    IG_CUBLAS_TRY(err, cublasSetStream(h, s));
    if (f16) {
        IG_TRY(ig_cuda_convert(x, IG_DTYPE_F32, buf, IG_DTYPE_F16, M * K, s, err));
        xin = buf;
    }
    const size_t row_bytes = ig_dtype_row_bytes(wt, K);
    const float one = 1.0f, zero = 0.0f;
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
        const int64_t nc = N - n0 < chunk ? N - n0 : chunk;
        IG_TRY(dequant((const uint8_t *)W + (size_t)n0 * row_bytes, wt, NULL, nc, nc, K, wbuf,
                       sc->gemm_type, s, err));
        /* column-major: y^T [N][M] (ldc N) rows n0..n0+nc = Wc (K x nc, transposed) * x^T */
        IG_CUBLAS_TRY(err,
                      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)nc, (int)M, (int)K, &one, wbuf,
                                   at, (int)K, xin, at, (int)K, &zero, y + n0, CUDA_R_32F, (int)N,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    return IG_OK;
}

extern "C" ig_status ig_cuda_qlinear(ig_cuda_ctx *c, ig_cuda_stream_t s, const float *x, int64_t M,
                                     int64_t K, const void *W, ig_dtype wt, int64_t N, float *y,
                                     const ig_cuda_qscratch *scratch, ig_error *err) {
    const char *fn = "ig_cuda_qlinear";
    IG_TRY(ig_cuda_qlinear_check_args(M, K, wt, N, err));
    const int have_scratch = scratch != NULL && scratch->buf != NULL && scratch->bytes > 0;
    if (have_scratch) {
        if (scratch->gemm_type != IG_DTYPE_F16 && scratch->gemm_type != IG_DTYPE_F32)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "%s: scratch gemm_type %s must be f16 or f32", fn,
                                ig_dtype_name(scratch->gemm_type));
        if (misaligned(scratch->buf, 256))
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "%s: scratch buffer %p must be 256-byte aligned (cudaMalloc'd)", fn,
                                scratch->buf);
    }
    if (M == 0 || N == 0) return IG_OK;
    if (!x || !W || !y)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: NULL %s (M=%lld N=%lld K=%lld)", fn,
                            !x   ? "x"
                            : !W ? "W"
                                 : "y",
                            (long long)M, (long long)N, (long long)K);
    if (misaligned(x, 16))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "%s: x %p must be 16-byte aligned (the GEMV reads float4)", fn,
                            (const void *)x);
    if (misaligned(W, w_align(wt)))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: W %p must be %d-byte aligned for %s", fn,
                            W, w_align(wt), ig_dtype_name(wt));
    if (misaligned(y, 4))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: y %p must be 4-byte aligned", fn,
                            (void *)y);
    if (M > IG_CUDA_QLINEAR_GEMV_MAX_M && have_scratch) {
        int64_t chunk = gemm_chunk_rows(scratch, M, K, N);
        if (chunk > 0) {
            if (!c)
                return ig_error_set(err, IG_ERR_INVALID_ARG,
                                    "%s: NULL context with a scratch (its cuBLAS handle runs the "
                                    "prefill GEMM)",
                                    fn);
            return gemm_path(c, s, x, M, K, W, wt, N, y, scratch, chunk, err);
        }
    }
    return gemv(x, M, K, W, wt, N, y, s, err);
}

/* Checks shared by the two dequantization launchers; IG_OK with *empty set when there is nothing
 * to do. */
static ig_status dequant_check(const char *fn, const void *W, ig_dtype wt, int64_t rows, int64_t K,
                               const void *dst, ig_dtype dt, int *empty, ig_error *err) {
    IG_TRY(check_type_k(fn, wt, K, err));
    if (dt != IG_DTYPE_F32 && dt != IG_DTYPE_F16)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: output type %s must be f32 or f16", fn,
                            ig_dtype_name(dt));
    if (rows < 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: rows=%lld < 0", fn, (long long)rows);
    *empty = rows == 0;
    if (*empty) return IG_OK;
    if (!W || !dst)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: NULL %s (rows=%lld K=%lld)", fn,
                            !W ? "W" : "dst", (long long)rows, (long long)K);
    if (misaligned(W, w_align(wt)))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: W %p must be %d-byte aligned for %s", fn,
                            W, w_align(wt), ig_dtype_name(wt));
    if (misaligned(dst, dt == IG_DTYPE_F16 ? 2 : 4))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: dst %p is not aligned to its type %s", fn,
                            dst, ig_dtype_name(dt));
    return IG_OK;
}

extern "C" ig_status ig_cuda_dequant_rows(const void *W, ig_dtype wt, int64_t rows, int64_t K,
                                          void *dst, ig_dtype dt, ig_cuda_stream_t s,
                                          ig_error *err) {
    int empty = 0;
    IG_TRY(dequant_check("ig_cuda_dequant_rows", W, wt, rows, K, dst, dt, &empty, err));
    if (empty) return IG_OK;
    return dequant(W, wt, NULL, rows, rows, K, dst, dt, s, err);
}

extern "C" ig_status ig_cuda_dequant_rows_idx(const void *W, ig_dtype wt, int64_t src_rows,
                                              int64_t K, const int32_t *idx, int64_t n, void *dst,
                                              ig_dtype dt, ig_cuda_stream_t s, ig_error *err) {
    const char *fn = "ig_cuda_dequant_rows_idx";
    int empty = 0;
    IG_TRY(dequant_check(fn, W, wt, n, K, dst, dt, &empty, err));
    if (src_rows < 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: src_rows=%lld < 0", fn,
                            (long long)src_rows);
    if (empty) return IG_OK;
    if (!idx)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: NULL idx (n=%lld)", fn, (long long)n);
    return dequant(W, wt, idx, src_rows, n, K, dst, dt, s, err);
}
