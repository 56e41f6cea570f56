/* kernels/cuda, the host side that needs no GPU: the probe's clean "no GPU" answer on a machine
 * without a driver (and agreement with kernels/backend), start-up failures reported as errors
 * naming the call (never a crash), the error-check macros, launch geometry, and every launcher's
 * argument validation (done before any CUDA call, so it runs anywhere). On a machine with a GPU
 * the same tests check the other side of each answer. */
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/test_util.h"

static int have_gpu(char *why, size_t n) {
    return ig_cuda_probe(NULL, why, n) > 0;
}

static void test_probe(void) {
    char why[512] = "x", why2[512] = "y";
    ig_cuda_info info;
    int n = ig_cuda_probe(&info, why, sizeof why);
    int n2 = ig_cuda_probe(NULL, why2, sizeof why2); /* twice, and without info */
    CU_ASSERT(n == n2);
    CU_ASSERT(n >= 0);
    if (n == 0) {
        fprintf(stderr, "probe: no GPU: %s\n", why);
        CU_ASSERT(strlen(why) > 0);
        CU_ASSERT(strchr(why, '\n') == NULL); /* one line */
        CU_ASSERT(strcmp(why, why2) == 0);
        CU_ASSERT(info.n_devices == 0);
        /* the reason says which call failed (on a machine without a driver:
         * cudaGetDeviceCount's cudaErrorInsufficientDriver) */
        CU_ASSERT(strstr(why, "cudaGetDeviceCount") || strstr(why, "no CUDA device") ||
                  strstr(why, "cublasCreate") || strstr(why, "cudaGetDeviceProperties"));
    } else {
        CU_ASSERT(info.n_devices == n);
        CU_ASSERT(info.name[0] != '\0');
        CU_ASSERT(info.total_mem > 0);
        CU_ASSERT(info.cc_major >= 8); /* the build targets 80, 86, 89, 90 */
    }
    /* a tiny reason buffer is cut, never overrun; NULL is accepted */
    char tiny[8];
    memset(tiny, 'z', sizeof tiny);
    ig_cuda_probe(NULL, tiny, 4);
    CU_ASSERT(tiny[4] == 'z');
    CU_ASSERT(ig_cuda_probe(NULL, NULL, 0) == n);
}

static void test_backend_agrees(void) {
    char why[512] = "", why2[512] = "";
    ig_backend_info info;
    CU_ASSERT(ig_backend_cuda_compiled() == 1);
    int n = ig_backend_cuda_probe(why, sizeof why, &info);
    CU_ASSERT(n == ig_cuda_probe(NULL, why2, sizeof why2));
    if (n == 0) CU_ASSERT(strlen(why) > 0);
    /* "auto" and "cuda" give CUDA with a usable GPU; without one they fall back to the CPU with
     * one line, never fail */
    ig_backend_info sel;
    int want = n > 0 ? IG_BACKEND_CUDA : IG_BACKEND_CPU;
    CU_ASSERT(ig_backend_select("auto", &sel) == want);
    CU_ASSERT(sel.kind == (ig_backend_kind)want);
    CU_ASSERT(ig_backend_select("cuda", &sel) == want);
    CU_ASSERT(sel.kind == (ig_backend_kind)want);
    if (n > 0) CU_ASSERT(!strcmp(sel.device_name, info.device_name));
    CU_ASSERT(ig_backend_select("cpu", &sel) == IG_BACKEND_CPU);
    CU_ASSERT(ig_backend_select("tpu", &sel) == -1);
}

/* Without a GPU, every start-up call fails as an ig_status naming the call; with one, it works. */
static void test_startup_failures(void) {
    char why[512];
    int gpu = have_gpu(why, sizeof why);
    ig_error err = {0};
    ig_cuda_ctx *ctx = (ig_cuda_ctx *)1;
    ig_status st = ig_cuda_ctx_create(0, &ctx, &err);
    if (!gpu) {
        CU_ASSERT(st == IG_ERR_DEVICE || st == IG_ERR_NOMEM);
        CU_ASSERT(ctx == NULL);
        CU_ASSERT(strstr(err.msg, "cudaSetDevice") || strstr(err.msg, "cudaStreamCreate") ||
                  strstr(err.msg, "cublasCreate"));
        CU_ASSERT(strstr(err.msg, "cuda_backend.cu:") != NULL); /* file and line */
        void *p = (void *)1;
        memset(&err, 0, sizeof err);
        st = ig_cuda_malloc(&p, 4096, &err);
        CU_ASSERT(st != IG_OK);
        CU_ASSERT(p == NULL);
        CU_ASSERT(strstr(err.msg, "cudaMalloc") != NULL);
        p = (void *)1;
        st = ig_cuda_host_alloc(&p, 4096, 1, &err);
        CU_ASSERT(st != IG_OK);
        CU_ASSERT(p == NULL);
        CU_ASSERT(strstr(err.msg, "cudaHostAlloc") != NULL);
        ig_cuda_stream_t s = (ig_cuda_stream_t)1;
        CU_ASSERT(ig_cuda_stream_create(&s, &err) != IG_OK);
        CU_ASSERT(s == NULL);
        ig_cuda_event_t e = (ig_cuda_event_t)1;
        CU_ASSERT(ig_cuda_event_create(&e, 0, &err) != IG_OK);
        CU_ASSERT(e == NULL);
        fprintf(stderr, "start-up failure, as reported: %s\n", err.msg);
    } else {
        CU_ASSERT(st == IG_OK);
        CU_ASSERT(ctx != NULL);
        ig_cuda_ctx_destroy(ctx);
    }
    /* zero-sized requests never touch the device */
    void *p = (void *)1;
    CU_ASSERT(ig_cuda_malloc(&p, 0, &err) == IG_OK);
    CU_ASSERT(p == NULL);
    p = (void *)1;
    CU_ASSERT(ig_cuda_host_alloc(&p, 0, 0, &err) == IG_OK);
    CU_ASSERT(p == NULL);
    CU_ASSERT(ig_cuda_copy_h2d_async(NULL, NULL, 0, NULL, &err) == IG_OK);
    CU_ASSERT(ig_cuda_copy_d2h_async(NULL, NULL, 0, NULL, &err) == IG_OK);
    CU_ASSERT(ig_cuda_memset_async(NULL, 0, 0, NULL, &err) == IG_OK);
    ig_cuda_free(NULL);
    ig_cuda_host_free(NULL);
    ig_cuda_ctx_destroy(NULL);
}

static void test_check_macros(void) {
    ig_error err = {0};
    CU_ASSERT(ig_cuda_check(0, "cudaNothing()", "f.cu", 1, &err) == IG_OK);
    /* 2 = cudaErrorMemoryAllocation, 35 = cudaErrorInsufficientDriver */
    CU_ASSERT(ig_cuda_check(2, "cudaMalloc(&p, n)", "x.cu", 42, &err) == IG_ERR_NOMEM);
    CU_ASSERT(strstr(err.msg, "cudaMalloc(&p, n) failed") != NULL);
    CU_ASSERT(strstr(err.msg, "x.cu:42") != NULL);
    CU_ASSERT(strstr(err.msg, "cudaErrorMemoryAllocation") != NULL);
    CU_ASSERT(ig_cuda_check(35, "cudaGetDeviceCount(&n)", "y.cu", 7, &err) == IG_ERR_DEVICE);
    CU_ASSERT(strstr(err.msg, "cudaErrorInsufficientDriver") != NULL);
    /* the macro names the call as written, this file and this line */
    int line = __LINE__ + 1;
    ig_status st = IG_CUDA_CHECK(&err, 35);
    CU_ASSERT(st == IG_ERR_DEVICE);
    char where[64];
    snprintf(where, sizeof where, "test_cuda_host.c:%d", line);
    CU_ASSERT(strstr(err.msg, where) != NULL);
    CU_ASSERT(strncmp(err.msg, "35 failed", 9) == 0);
    /* cuBLAS: 3 = CUBLAS_STATUS_ALLOC_FAILED, 1 = NOT_INITIALIZED */
    CU_ASSERT(IG_CUBLAS_CHECK(&err, 0) == IG_OK);
    CU_ASSERT(IG_CUBLAS_CHECK(&err, 3) == IG_ERR_NOMEM);
    CU_ASSERT(IG_CUBLAS_CHECK(&err, 1) == IG_ERR_DEVICE);
    CU_ASSERT(strstr(err.msg, "CUBLAS_STATUS_NOT_INITIALIZED") != NULL);
    CU_ASSERT(strcmp(ig_cublas_status_name(12345), "CUBLAS_STATUS_UNKNOWN") == 0);
}

static void test_launch_geometry(void) {
    CU_ASSERT(ig_cuda_blocks_1d(0, 256) == 0);
    CU_ASSERT(ig_cuda_blocks_1d(-5, 256) == 0);
    CU_ASSERT(ig_cuda_blocks_1d(1, 256) == 1);
    CU_ASSERT(ig_cuda_blocks_1d(256, 256) == 1);
    CU_ASSERT(ig_cuda_blocks_1d(257, 256) == 2);
    CU_ASSERT(ig_cuda_blocks_1d(10, 0) == 0);
    CU_ASSERT(ig_cuda_blocks_1d((int64_t)1 << 50, 256) == 2147483647); /* capped: grid-stride */
    CU_ASSERT(ig_cuda_row_block(1) == 32);
    CU_ASSERT(ig_cuda_row_block(128) == 32);
    CU_ASSERT(ig_cuda_row_block(576) == 256);
    CU_ASSERT(ig_cuda_row_block(4096) == 1024);
    CU_ASSERT(ig_cuda_row_block((int64_t)1 << 30) == 1024);
    for (int64_t d = 1; d < 100000; d = d * 3 + 1) {
        int b = ig_cuda_row_block(d);
        CU_ASSERT(b >= 32 && b <= 1024 && b % 32 == 0);
    }
}

#define EXPECT_INVALID(call)                                                                       \
    do {                                                                                           \
        ig_error e_ = {0};                                                                         \
        ig_error *err = &e_;                                                                       \
        ig_status st_ = (call);                                                                    \
        CU_ASSERT(st_ == IG_ERR_INVALID_ARG);                                                      \
        CU_ASSERT(strstr(e_.msg, "invalid argument") != NULL);                                     \
    } while (0)

#define EXPECT_NOOP(call)                                                                          \
    do {                                                                                           \
        ig_error e_ = {0};                                                                         \
        ig_error *err = &e_;                                                                       \
        CU_ASSERT((call) == IG_OK);                                                                \
    } while (0)

/* Bad sizes are refused before any CUDA call; empty work returns at once. Both run without a GPU
 * (the pointers are never dereferenced). */
static void test_argument_validation(void) {
    float *f = NULL;
    int32_t *i32 = NULL;
    EXPECT_INVALID(ig_cuda_rmsnorm(f, f, 4, 0, 1e-5f, f, NULL, err));
    EXPECT_INVALID(ig_cuda_rmsnorm(f, f, -1, 8, 1e-5f, f, NULL, err));
    EXPECT_NOOP(ig_cuda_rmsnorm(f, f, 0, 8, 1e-5f, f, NULL, err));
    EXPECT_INVALID(ig_cuda_layernorm(f, f, f, 4, -2, 1e-5f, f, NULL, err));
    EXPECT_NOOP(ig_cuda_layernorm(f, f, NULL, 0, 8, 1e-5f, f, NULL, err));
    EXPECT_INVALID(ig_cuda_rope(f, 3, 4, 64, 63, i32, f, f, NULL, err)); /* odd rot_dim */
    EXPECT_INVALID(ig_cuda_rope(f, 3, 4, 64, 128, i32, f, f, NULL, err));
    EXPECT_NOOP(ig_cuda_rope(f, 0, 4, 64, 64, i32, f, f, NULL, err));
    EXPECT_INVALID(ig_cuda_silu_mul(f, f, -1, f, NULL, err));
    EXPECT_NOOP(ig_cuda_silu_mul(f, f, 0, f, NULL, err));
    EXPECT_NOOP(ig_cuda_relu(f, 0, NULL, err));
    EXPECT_NOOP(ig_cuda_gelu(f, 0, NULL, err));
    EXPECT_NOOP(ig_cuda_add(f, f, 0, NULL, err));
    EXPECT_INVALID(ig_cuda_add_bias(f, f, 3, 0, NULL, err));
    EXPECT_INVALID(ig_cuda_convert(f, IG_DTYPE_I32, f, IG_DTYPE_F32, 4, NULL, err));
    EXPECT_NOOP(ig_cuda_convert(f, IG_DTYPE_F16, f, IG_DTYPE_F32, 0, NULL, err));
    EXPECT_INVALID(ig_cuda_softmax(f, 2, 0, NULL, err));
    EXPECT_NOOP(ig_cuda_softmax(f, 0, 10, NULL, err));

    int32_t n_sel_dummy = 0;
    ig_cuda_attn_rows a = {2,  8,    2, 64,           0.125f, IG_DTYPE_F32, f, f,    64 * 100,
                           64, NULL, 0, &n_sel_dummy, NULL,   NULL,         0, NULL, 0};
    ig_cuda_attn_rows b = a;
    b.n_kv_head = 3; /* 8 heads do not split into 3 groups */
    EXPECT_INVALID(ig_cuda_attention_rows(&b, f, f, NULL, err));
    b = a;
    b.hd = 512; /* above the kernel's 256 */
    b.row_stride = 512;
    EXPECT_INVALID(ig_cuda_attention_rows(&b, f, f, NULL, err));
    b = a;
    b.kv_dtype = IG_DTYPE_BF16;
    EXPECT_INVALID(ig_cuda_attention_rows(&b, f, f, NULL, err));
    b = a;
    b.n_extra = 1; /* extra rows without their pointers */
    EXPECT_INVALID(ig_cuda_attention_rows(&b, f, f, NULL, err));
    b = a;
    b.row_stride = 32;
    EXPECT_INVALID(ig_cuda_attention_rows(&b, f, f, NULL, err));
    b = a;
    b.batch = 0;
    EXPECT_NOOP(ig_cuda_attention_rows(&b, f, f, NULL, err));
    EXPECT_INVALID(ig_cuda_attention_prefill(f, 4, 10, f, f, 12, 8, 2, 64, 0.1f, f, NULL, err));
    EXPECT_NOOP(ig_cuda_attention_prefill(f, 0, 10, f, f, 12, 8, 2, 64, 0.1f, f, NULL, err));

    EXPECT_INVALID(ig_cuda_partial_scores(f, IG_DTYPE_F32, 100, 0, 8, 100, f, 8, 0, 17, f, 100, 0,
                                          NULL, 0, f, 1, NULL, err)); /* nq > 16 */
    EXPECT_INVALID(ig_cuda_partial_scores(f, IG_DTYPE_BF16, 100, 0, 8, 100, f, 8, 0, 4, f, 100, 0,
                                          NULL, 0, f, 1, NULL, err));
    EXPECT_INVALID(ig_cuda_partial_scores(f, IG_DTYPE_F32, 50, 0, 8, 100, f, 8, 0, 4, f, 100, 0,
                                          NULL, 0, f, 1, NULL, err)); /* ld < n */
    EXPECT_NOOP(ig_cuda_partial_scores(f, IG_DTYPE_F32, 100, 0, 8, 100, f, 8, 0, 4, f, 100, 0, NULL,
                                       0, f, 0, NULL, err));
    EXPECT_INVALID(ig_cuda_count_greater(f, 10, 2, 20, NULL, NULL, 0.0f, i32, NULL, err));
    EXPECT_INVALID(ig_cuda_count_greater(f, 10, 2, 5, NULL, NULL, 0.0f, NULL, NULL, err));
    EXPECT_NOOP(ig_cuda_count_greater(f, 10, 0, 5, NULL, NULL, 0.0f, &n_sel_dummy, NULL, err));
    EXPECT_INVALID(
        ig_cuda_indices_greater(f, 10, 2, 10, NULL, NULL, 0.0f, i32, 5, &n_sel_dummy, NULL, err));
    EXPECT_INVALID(ig_cuda_topk(f, 10, 2, 10, NULL, 8, NULL, &n_sel_dummy, 4, &n_sel_dummy, NULL,
                                err)); /* ld_idx < k */
    EXPECT_NOOP(
        ig_cuda_topk(f, 10, 0, 10, NULL, 8, NULL, &n_sel_dummy, 8, &n_sel_dummy, NULL, err));

    EXPECT_INVALID(ig_cuda_gather_rows(f, 1000, f, 1000, 10, NULL, 0, i32, 4, i32, 2, NULL, err));
    EXPECT_INVALID(ig_cuda_gather_rows(f, 1000, f, 1000, 10, NULL, 16, i32, 4, i32, 2, NULL,
                                       err)); /* source row stride < row bytes */
    EXPECT_INVALID(ig_cuda_gather_rows(f, 10, f, 1000, 16, NULL, 16, i32, 4, i32, 2, NULL,
                                       err)); /* destination tables overlap */
    EXPECT_NOOP(ig_cuda_gather_rows(f, 1000, f, 1000, 16, NULL, 16, i32, 4, i32, 0, NULL, err));

    uint8_t *u8 = NULL;
    EXPECT_INVALID(ig_cuda_kvq_quantize_rows(f, 4, 64, 3, 64, u8, NULL, err));  /* bits */
    EXPECT_INVALID(ig_cuda_kvq_quantize_rows(f, 4, 100, 4, 64, u8, NULL, err)); /* group | hd */
    EXPECT_INVALID(ig_cuda_kvq_dequantize_rows(u8, 4, 64, 2, 2, f, NULL, err)); /* 4 bits/group */
    EXPECT_NOOP(ig_cuda_kvq_quantize_rows(f, 0, 64, 4, 64, u8, NULL, err));
    EXPECT_NOOP(ig_cuda_kvq_dequantize_rows(u8, 0, 128, 8, 32, f, NULL, err));

    EXPECT_INVALID(ig_cuda_argmax(f, 10, 2, 20, i32, NULL, err));
    EXPECT_INVALID(ig_cuda_argmax(f, 10, 2, 0, i32, NULL, err));
    EXPECT_NOOP(ig_cuda_argmax(f, 10, 0, 10, i32, NULL, err));
    EXPECT_INVALID(ig_cuda_sample(f, 10, 2, 10, 0.8f, 0.9f, NULL, i32, NULL, err)); /* no draws */
    EXPECT_NOOP(ig_cuda_sample(f, 10, 0, 10, 0.8f, 0.9f, NULL, i32, NULL, err));

    ig_error e = {0};
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_F16, 4, 64, IG_DTYPE_F16, 32, IG_DTYPE_F32, &e) ==
              IG_OK);
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_F32, 4, 64, IG_DTYPE_F32, 32, IG_DTYPE_F32, &e) ==
              IG_OK);
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_BF16, 4, 64, IG_DTYPE_BF16, 32, IG_DTYPE_BF16, &e) ==
              IG_OK);
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_F32, 4, 64, IG_DTYPE_F16, 32, IG_DTYPE_F32, &e) ==
              IG_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(e.msg, "same type") != NULL);
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_F16, 4, 64, IG_DTYPE_F16, 32, IG_DTYPE_BF16, &e) ==
              IG_ERR_UNSUPPORTED);
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_I8, 4, 64, IG_DTYPE_I8, 32, IG_DTYPE_F32, &e) ==
              IG_ERR_UNSUPPORTED);
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_F16, -1, 64, IG_DTYPE_F16, 32, IG_DTYPE_F32, &e) ==
              IG_ERR_INVALID_ARG);
    CU_ASSERT(ig_cuda_gemm_check_args(IG_DTYPE_F16, 4, (int64_t)1 << 32, IG_DTYPE_F16, 32,
                                      IG_DTYPE_F32, &e) == IG_ERR_INVALID_ARG);
    /* empty GEMMs need no handle */
    CU_ASSERT(ig_cuda_gemm(NULL, NULL, f, IG_DTYPE_F16, 0, 64, f, IG_DTYPE_F16, 32, f, IG_DTYPE_F32,
                           0.0f, &e) == IG_OK);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("cuda_host", NULL, NULL);
    CU_add_test(s, "probe", test_probe);
    CU_add_test(s, "backend_agrees", test_backend_agrees);
    CU_add_test(s, "startup_failures", test_startup_failures);
    CU_add_test(s, "check_macros", test_check_macros);
    CU_add_test(s, "launch_geometry", test_launch_geometry);
    CU_add_test(s, "argument_validation", test_argument_validation);
}
