/* The CUDA backend's host API, usable from C11: device discovery, a context (device, cuBLAS handle,
 * compute stream), device memory (plain cudaMalloc, never managed memory), pinned host buffers and
 * registration of existing host memory, streams and events, async copies, and a GEMM wrapper over
 * cublasGemmEx (f16/bf16 inputs with f32 accumulation on tensor cores; an f32 path).
 *
 * Only built with IG_CUDA (the C code that calls it is guarded by IG_HAVE_CUDA). No CUDA header is
 * needed to include this one: ig_cuda_stream_t and ig_cuda_event_t are the very types cudaStream_t
 * and cudaEvent_t (pointers to the runtime's opaque structs), so values pass between the two
 * freely.
 *
 * Failures: every function returns an ig_status and fills an ig_error whose message names the CUDA
 * or cuBLAS call, the error string, and the file and line of the call (IG_CUDA_CHECK). Start-up
 * failures (no driver: cudaErrorInsufficientDriver; no device; cuBLAS cannot start) are "no GPU":
 * ig_cuda_probe returns 0 with a one-line reason, never aborts. */
#ifndef IG_CUDA_BACKEND_H
#define IG_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* core/ headers are plain C without linkage blocks: give them C linkage from C++ (.cu) too. */
#ifdef __cplusplus
extern "C" {
#endif

#include "core/base/dtype.h"
#include "core/base/status.h"

typedef struct CUstream_st *ig_cuda_stream_t; /* == cudaStream_t; NULL is the legacy stream */
typedef struct CUevent_st *ig_cuda_event_t;   /* == cudaEvent_t */

/* ---- errors ---------------------------------------------------------------------------------- */

/* code: a cudaError_t (0 = success). On failure fills err with "CALL failed: <name>: <string>
 * (FILE:LINE)", clears the runtime's last error, and returns IG_ERR_DEVICE (IG_ERR_NOMEM for
 * cudaErrorMemoryAllocation). */
ig_status ig_cuda_check(int code, const char *call, const char *file, int line, ig_error *err);
/* The same for a cublasStatus_t. */
ig_status ig_cublas_check(int code, const char *call, const char *file, int line, ig_error *err);
/* Name of a cudaError_t / cublasStatus_t value (for messages). */
const char *ig_cuda_error_name(int code);
const char *ig_cublas_status_name(int code);

/* IG_CUDA_CHECK(err, cudaMalloc(&p, n)) evaluates to an ig_status naming the call, file and line.
 * IG_CUDA_TRY returns it from the enclosing function when it is not IG_OK. */
#define IG_CUDA_CHECK(err, call)   ig_cuda_check((int)(call), #call, __FILE__, __LINE__, (err))
#define IG_CUBLAS_CHECK(err, call) ig_cublas_check((int)(call), #call, __FILE__, __LINE__, (err))
#define IG_CUDA_TRY(err, call)                                                                     \
    do {                                                                                           \
        ig_status ig_cuda_rc_ = IG_CUDA_CHECK(err, call);                                          \
        if (ig_cuda_rc_ != IG_OK) return ig_cuda_rc_;                                              \
    } while (0)
#define IG_CUBLAS_TRY(err, call)                                                                   \
    do {                                                                                           \
        ig_status ig_cuda_rc_ = IG_CUBLAS_CHECK(err, call);                                        \
        if (ig_cuda_rc_ != IG_OK) return ig_cuda_rc_;                                              \
    } while (0)

/* ---- discovery ------------------------------------------------------------------------------- */

typedef struct ig_cuda_info {
    int n_devices;
    int device; /* the device described below (0) */
    char name[256];
    size_t total_mem;
    int cc_major, cc_minor;
    int sm_count;
    int can_map_host;  /* mapped pinned memory (zero-copy reads of host rows) */
    int async_engines; /* copy engines */
    int driver_version, runtime_version;
} ig_cuda_info;

/* Whether a usable GPU is here: returns the number of devices (> 0) and fills info (may be NULL),
 * or 0 with why = one line (cudaGetDeviceCount's error such as "CUDA driver version is
 * insufficient for CUDA runtime version", no device, properties unreadable, cuBLAS failed to
 * start). Never aborts, whatever the machine. */
int ig_cuda_probe(ig_cuda_info *info, char *why, size_t why_len);

/* ---- context --------------------------------------------------------------------------------- */

typedef struct ig_cuda_ctx ig_cuda_ctx;

/* Makes `device` current, creates a cuBLAS handle (tensor-core math allowed) bound to a new
 * non-blocking compute stream. */
ig_status ig_cuda_ctx_create(int device, ig_cuda_ctx **out, ig_error *err);
void ig_cuda_ctx_destroy(ig_cuda_ctx *c);
ig_cuda_stream_t ig_cuda_ctx_stream(const ig_cuda_ctx *c);
int ig_cuda_ctx_device(const ig_cuda_ctx *c);
/* The cublasHandle_t, as a pointer (for callers that use cuBLAS directly). */
void *ig_cuda_ctx_cublas(const ig_cuda_ctx *c);

/* ---- memory ---------------------------------------------------------------------------------- */

/* Device memory: cudaMalloc (never managed memory). n == 0 gives NULL and IG_OK. */
ig_status ig_cuda_malloc(void **out, size_t n, ig_error *err);
void ig_cuda_free(void *p);
ig_status ig_cuda_memset_async(void *p, int byte, size_t n, ig_cuda_stream_t s, ig_error *err);

/* Pinned host memory: cudaHostAlloc (portable; `mapped` also maps it into the device's address
 * space, so kernels can read it directly: see ig_cuda_host_device_ptr). */
ig_status ig_cuda_host_alloc(void **out, size_t n, int mapped, ig_error *err);
void ig_cuda_host_free(void *p);
/* Page-locks an existing host range in place (keeping its NUMA placement): cudaHostRegister,
 * portable, plus mapped when asked. Must be undone with ig_cuda_host_unregister before the memory
 * is freed. */
ig_status ig_cuda_host_register(void *p, size_t n, int mapped, ig_error *err);
ig_status ig_cuda_host_unregister(void *p, ig_error *err);
/* The device address of mapped pinned host memory (alloc'd or registered with mapped = 1). */
ig_status ig_cuda_host_device_ptr(void **dev, void *host, ig_error *err);

/* ---- streams and events ---------------------------------------------------------------------- */

/* Non-blocking streams (they do not synchronise with the legacy stream). */
ig_status ig_cuda_stream_create(ig_cuda_stream_t *out, ig_error *err);
void ig_cuda_stream_destroy(ig_cuda_stream_t s);
ig_status ig_cuda_stream_sync(ig_cuda_stream_t s, ig_error *err);
/* timing = 0 creates events with cudaEventDisableTiming (cheapest for ordering). */
ig_status ig_cuda_event_create(ig_cuda_event_t *out, int timing, ig_error *err);
void ig_cuda_event_destroy(ig_cuda_event_t e);
ig_status ig_cuda_event_record(ig_cuda_event_t e, ig_cuda_stream_t s, ig_error *err);
/* Work queued on s after this waits for e (cross-stream ordering, no host block). */
ig_status ig_cuda_stream_wait_event(ig_cuda_stream_t s, ig_cuda_event_t e, ig_error *err);
ig_status ig_cuda_event_sync(ig_cuda_event_t e, ig_error *err);
/* 1 if e has completed, 0 if not yet; negative status on error. */
int ig_cuda_event_done(ig_cuda_event_t e, ig_error *err);
ig_status ig_cuda_event_elapsed_ms(ig_cuda_event_t start, ig_cuda_event_t stop, float *ms,
                                   ig_error *err);
ig_status ig_cuda_device_sync(ig_error *err);

/* ---- copies ---------------------------------------------------------------------------------- */

/* Async copies on stream s (truly asynchronous only from/to pinned host memory). */
ig_status ig_cuda_copy_h2d_async(void *dst, const void *src, size_t n, ig_cuda_stream_t s,
                                 ig_error *err);
ig_status ig_cuda_copy_d2h_async(void *dst, const void *src, size_t n, ig_cuda_stream_t s,
                                 ig_error *err);
ig_status ig_cuda_copy_d2d_async(void *dst, const void *src, size_t n, ig_cuda_stream_t s,
                                 ig_error *err);
/* rows copies of `width` bytes with pitches (cudaMemcpy2DAsync, kind inferred from pointers). */
ig_status ig_cuda_copy_2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                                size_t width, size_t rows, ig_cuda_stream_t s, ig_error *err);

/* ---- GEMM ------------------------------------------------------------------------------------ */

/* y[M,N] = x[M,K] * W[N,K]^T + beta * y, row-major, W in the Hugging Face [out][in] layout, all
 * pointers on the device. xt == wt, one of f16, bf16 (tensor cores, f32 accumulation:
 * cublasGemmEx with CUBLAS_COMPUTE_32F) or f32 (CUBLAS_COMPUTE_32F: full f32, no TF32). yt: f32,
 * or the input type. Runs on the context's cuBLAS handle, bound to stream s for this call. */
ig_status ig_cuda_gemm(ig_cuda_ctx *c, ig_cuda_stream_t s, const void *x, ig_dtype xt, int64_t M,
                       int64_t K, const void *W, ig_dtype wt, int64_t N, void *y, ig_dtype yt,
                       float beta, ig_error *err);
/* Validation of ig_cuda_gemm's arguments alone (no device involved): IG_OK or
 * IG_ERR_INVALID_ARG / IG_ERR_UNSUPPORTED with the reason. */
ig_status ig_cuda_gemm_check_args(ig_dtype xt, int64_t M, int64_t K, ig_dtype wt, int64_t N,
                                  ig_dtype yt, ig_error *err);

/* ---- launch geometry (host-side helpers, no device needed) ----------------------------------- */

/* Blocks of `block` threads covering n items, capped at the 1-D grid limit (2^31 - 1; kernels
 * use grid-stride loops); 0 for n <= 0. */
int64_t ig_cuda_blocks_1d(int64_t n, int block);
/* Threads per block for a row-wise reduction over `dim` elements: a multiple of 32 in [32, 1024],
 * the smallest power of two >= dim / 4 (at least 4 elements per thread when possible). */
int ig_cuda_row_block(int64_t dim);

#ifdef __cplusplus
}
#endif

#endif
