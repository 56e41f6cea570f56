/* The CUDA backend's host side (cuda_backend.h): errors, discovery, context, memory, streams,
 * events, copies, cuBLAS GEMM, launch geometry. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_backend.h"

/* ---- errors ---------------------------------------------------------------------------------- */

extern "C" const char *ig_cuda_error_name(int code) {
    return cudaGetErrorName((cudaError_t)code);
}

extern "C" const char *ig_cublas_status_name(int code) {
    switch ((cublasStatus_t)code) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
        return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
        return "CUBLAS_STATUS_UNKNOWN";
    }
}

extern "C" ig_status ig_cuda_check(int code, const char *call, const char *file, int line,
                                   ig_error *err) {
    if (code == (int)cudaSuccess) return IG_OK;
    cudaGetLastError(); /* clear a non-sticky error so the next call does not report it again */
    ig_status st = code == (int)cudaErrorMemoryAllocation ? IG_ERR_NOMEM : IG_ERR_DEVICE;
    return ig_error_set(err, st, "%s failed: %s: %s (%s:%d)", call, ig_cuda_error_name(code),
                        cudaGetErrorString((cudaError_t)code), file, line);
}

extern "C" ig_status ig_cublas_check(int code, const char *call, const char *file, int line,
                                     ig_error *err) {
    if (code == (int)CUBLAS_STATUS_SUCCESS) return IG_OK;
    ig_status st = code == (int)CUBLAS_STATUS_ALLOC_FAILED ? IG_ERR_NOMEM : IG_ERR_DEVICE;
    return ig_error_set(err, st, "%s failed: %s (%s:%d)", call, ig_cublas_status_name(code), file,
                        line);
}

/* ---- discovery ------------------------------------------------------------------------------- */

extern "C" int ig_cuda_probe(ig_cuda_info *info, char *why, size_t why_len) {
    char scratch[8];
    if (!why) {
        why = scratch;
        why_len = sizeof scratch;
    }
    if (why_len) why[0] = '\0';
    if (info) memset(info, 0, sizeof *info);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e),
                 cudaGetErrorName(e));
        cudaGetLastError();
        return 0;
    }
    if (n <= 0) {
        snprintf(why, why_len, "no CUDA device");
        return 0;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    cublasHandle_t h;
    cublasStatus_t bs = cublasCreate(&h);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, why_len, "cublasCreate failed on %s: %s", prop.name,
                 ig_cublas_status_name((int)bs));
        cudaGetLastError();
        return 0;
    }
    cublasDestroy(h);
    if (info) {
        info->n_devices = n;
        info->device = 0;
        snprintf(info->name, sizeof info->name, "%s", prop.name);
        info->total_mem = prop.totalGlobalMem;
        info->cc_major = prop.major;
        info->cc_minor = prop.minor;
        info->sm_count = prop.multiProcessorCount;
        info->can_map_host = prop.canMapHostMemory;
        info->async_engines = prop.asyncEngineCount;
        cudaDriverGetVersion(&info->driver_version);
        cudaRuntimeGetVersion(&info->runtime_version);
    }
    return n;
}

/* ---- context --------------------------------------------------------------------------------- */

struct ig_cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
};

extern "C" ig_status ig_cuda_ctx_create(int device, ig_cuda_ctx **out, ig_error *err) {
    *out = NULL;
    ig_cuda_ctx *c = (ig_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return ig_error_set(err, IG_ERR_NOMEM, "ig_cuda_ctx_create: out of memory");
    c->device = device;
    ig_status st = IG_CUDA_CHECK(err, cudaSetDevice(device));
    if (st == IG_OK)
        st = IG_CUDA_CHECK(err, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    if (st == IG_OK) st = IG_CUBLAS_CHECK(err, cublasCreate(&c->blas));
    if (st == IG_OK) st = IG_CUBLAS_CHECK(err, cublasSetStream(c->blas, c->stream));
    /* Tensor-core math for f16/bf16 GemmEx; f32 GEMMs stay f32 (no TF32: CUBLAS_COMPUTE_32F). */
    if (st == IG_OK) st = IG_CUBLAS_CHECK(err, cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    if (st != IG_OK) {
        ig_cuda_ctx_destroy(c);
        return st;
    }
    *out = c;
    return IG_OK;
}

extern "C" void ig_cuda_ctx_destroy(ig_cuda_ctx *c) {
    if (!c) return;
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" ig_cuda_stream_t ig_cuda_ctx_stream(const ig_cuda_ctx *c) {
    return c->stream;
}
extern "C" int ig_cuda_ctx_device(const ig_cuda_ctx *c) {
    return c->device;
}
extern "C" void *ig_cuda_ctx_cublas(const ig_cuda_ctx *c) {
    return (void *)c->blas;
}

/* ---- memory ---------------------------------------------------------------------------------- */

extern "C" ig_status ig_cuda_malloc(void **out, size_t n, ig_error *err) {
    *out = NULL;
    if (n == 0) return IG_OK;
    ig_status st = IG_CUDA_CHECK(err, cudaMalloc(out, n));
    if (st != IG_OK) {
        *out = NULL;
        ig_error_prefix(err, "device allocation of %zu bytes: ", n);
    }
    return st;
}

extern "C" void ig_cuda_free(void *p) {
    if (p) cudaFree(p);
}

extern "C" ig_status ig_cuda_memset_async(void *p, int byte, size_t n, ig_cuda_stream_t s,
                                          ig_error *err) {
    if (n == 0) return IG_OK;
    return IG_CUDA_CHECK(err, cudaMemsetAsync(p, byte, n, s));
}

extern "C" ig_status ig_cuda_host_alloc(void **out, size_t n, int mapped, ig_error *err) {
    *out = NULL;
    if (n == 0) return IG_OK;
    unsigned flags = cudaHostAllocPortable | (mapped ? cudaHostAllocMapped : 0u);
    ig_status st = IG_CUDA_CHECK(err, cudaHostAlloc(out, n, flags));
    if (st != IG_OK) {
        *out = NULL;
        ig_error_prefix(err, "pinned host allocation of %zu bytes: ", n);
    }
    return st;
}

extern "C" void ig_cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" ig_status ig_cuda_host_register(void *p, size_t n, int mapped, ig_error *err) {
    if (n == 0) return IG_OK;
    unsigned flags = cudaHostRegisterPortable | (mapped ? cudaHostRegisterMapped : 0u);
    return IG_CUDA_CHECK(err, cudaHostRegister(p, n, flags));
}

extern "C" ig_status ig_cuda_host_unregister(void *p, ig_error *err) {
    return IG_CUDA_CHECK(err, cudaHostUnregister(p));
}

extern "C" ig_status ig_cuda_host_device_ptr(void **dev, void *host, ig_error *err) {
    *dev = NULL;
    return IG_CUDA_CHECK(err, cudaHostGetDevicePointer(dev, host, 0));
}

/* ---- streams and events ---------------------------------------------------------------------- */

extern "C" ig_status ig_cuda_stream_create(ig_cuda_stream_t *out, ig_error *err) {
    cudaStream_t s = NULL;
    ig_status st = IG_CUDA_CHECK(err, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = st == IG_OK ? s : NULL;
    return st;
}
extern "C" void ig_cuda_stream_destroy(ig_cuda_stream_t s) {
    if (s) cudaStreamDestroy(s);
}
extern "C" ig_status ig_cuda_stream_sync(ig_cuda_stream_t s, ig_error *err) {
    return IG_CUDA_CHECK(err, cudaStreamSynchronize(s));
}
extern "C" ig_status ig_cuda_event_create(ig_cuda_event_t *out, int timing, ig_error *err) {
    cudaEvent_t e = NULL;
    ig_status st = IG_CUDA_CHECK(
        err, cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    *out = st == IG_OK ? e : NULL;
    return st;
}
extern "C" void ig_cuda_event_destroy(ig_cuda_event_t e) {
    if (e) cudaEventDestroy(e);
}
extern "C" ig_status ig_cuda_event_record(ig_cuda_event_t e, ig_cuda_stream_t s, ig_error *err) {
    return IG_CUDA_CHECK(err, cudaEventRecord(e, s));
}
extern "C" ig_status ig_cuda_stream_wait_event(ig_cuda_stream_t s, ig_cuda_event_t e,
                                               ig_error *err) {
    return IG_CUDA_CHECK(err, cudaStreamWaitEvent(s, e, 0));
}
extern "C" ig_status ig_cuda_event_sync(ig_cuda_event_t e, ig_error *err) {
    return IG_CUDA_CHECK(err, cudaEventSynchronize(e));
}
extern "C" int ig_cuda_event_done(ig_cuda_event_t e, ig_error *err) {
    cudaError_t r = cudaEventQuery(e);
    if (r == cudaSuccess) return 1;
    if (r == cudaErrorNotReady) {
        cudaGetLastError();
        return 0;
    }
    return (int)IG_CUDA_CHECK(err, r);
}
extern "C" ig_status ig_cuda_event_elapsed_ms(ig_cuda_event_t start, ig_cuda_event_t stop,
                                              float *ms, ig_error *err) {
    return IG_CUDA_CHECK(err, cudaEventElapsedTime(ms, start, stop));
}
extern "C" ig_status ig_cuda_device_sync(ig_error *err) {
    return IG_CUDA_CHECK(err, cudaDeviceSynchronize());
}

/* ---- copies ---------------------------------------------------------------------------------- */

extern "C" ig_status ig_cuda_copy_h2d_async(void *dst, const void *src, size_t n,
                                            ig_cuda_stream_t s, ig_error *err) {
    if (n == 0) return IG_OK;
    return IG_CUDA_CHECK(err, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
}
extern "C" ig_status ig_cuda_copy_d2h_async(void *dst, const void *src, size_t n,
                                            ig_cuda_stream_t s, ig_error *err) {
    if (n == 0) return IG_OK;
    return IG_CUDA_CHECK(err, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s));
}
extern "C" ig_status ig_cuda_copy_d2d_async(void *dst, const void *src, size_t n,
                                            ig_cuda_stream_t s, ig_error *err) {
    if (n == 0) return IG_OK;
    return IG_CUDA_CHECK(err, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
}
extern "C" ig_status ig_cuda_copy_2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                                           size_t width, size_t rows, ig_cuda_stream_t s,
                                           ig_error *err) {
    if (width == 0 || rows == 0) return IG_OK;
    return IG_CUDA_CHECK(
        err, cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDefault, s));
}

/* ---- GEMM ------------------------------------------------------------------------------------ */

static int blas_type(ig_dtype t, cudaDataType_t *out) {
    switch (t) {
    case IG_DTYPE_F32:
        *out = CUDA_R_32F;
        return 1;
    case IG_DTYPE_F16:
        *out = CUDA_R_16F;
        return 1;
    case IG_DTYPE_BF16:
        *out = CUDA_R_16BF;
        return 1;
    default:
        return 0;
    }
}

extern "C" ig_status ig_cuda_gemm_check_args(ig_dtype xt, int64_t M, int64_t K, ig_dtype wt,
                                             int64_t N, ig_dtype yt, ig_error *err) {
    cudaDataType_t a, b;
    if (M < 0 || N < 0 || K < 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "ig_cuda_gemm: sizes M=%lld N=%lld K=%lld outside [0, 2^31)",
                            (long long)M, (long long)N, (long long)K);
    if (!blas_type(xt, &a) || !blas_type(wt, &b) || !blas_type(yt, &b))
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "ig_cuda_gemm: types must be f32, f16 or bf16 (x %s, W %s, y %s)",
                            ig_dtype_name(xt), ig_dtype_name(wt), ig_dtype_name(yt));
    if (xt != wt)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "ig_cuda_gemm: x (%s) and W (%s) must have the same type (convert x "
                            "with ig_cuda_convert)",
                            ig_dtype_name(xt), ig_dtype_name(wt));
    if (yt != IG_DTYPE_F32 && yt != xt)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "ig_cuda_gemm: y must be f32 or the input type (%s), not %s",
                            ig_dtype_name(xt), ig_dtype_name(yt));
    return IG_OK;
}

extern "C" ig_status ig_cuda_gemm(ig_cuda_ctx *c, ig_cuda_stream_t s, const void *x, ig_dtype xt,
                                  int64_t M, int64_t K, const void *W, ig_dtype wt, int64_t N,
                                  void *y, ig_dtype yt, float beta, ig_error *err) {
    IG_TRY(ig_cuda_gemm_check_args(xt, M, K, wt, N, yt, err));
    if (M == 0 || N == 0) return IG_OK;
    cudaDataType_t at = CUDA_R_32F, ct = CUDA_R_32F;
    blas_type(xt, &at);
    blas_type(yt, &ct);
    IG_CUBLAS_TRY(err, cublasSetStream(c->blas, s));
    /* Row-major y[M][N] is column-major y^T [N][M] = W (col-major [K][N], transposed) * x^T. */
    float alpha = 1.0f;
    return IG_CUBLAS_CHECK(err, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M,
                                             (int)K, &alpha, W, at, (int)K, x, at, (int)K, &beta, y,
                                             ct, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ---- launch geometry ------------------------------------------------------------------------- */

extern "C" int64_t ig_cuda_blocks_1d(int64_t n, int block) {
    if (n <= 0 || block <= 0) return 0;
    int64_t b = (n + block - 1) / block;
    return b > 2147483647 ? 2147483647 : b;
}

extern "C" int ig_cuda_row_block(int64_t dim) {
    int b = 32;
    while (b < 1024 && (int64_t)b * 4 < dim) b *= 2;
    return b;
}
