/* Pinned host -> device bandwidth: a plain cudaMemcpy of one large pinned buffer (the link's
 * practical peak) against ig_cuda_gather_rows moving selected KV rows out of a mapped pinned home
 * (all rows of each table, and a scattered half as a policy's selection looks), the way the CUDA
 * engine's policy path moves them. Prints one JSON object; exit 1 without a usable GPU.
 *   bench_h2d [--mib N] [--row-bytes B] [--reps R] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != IG_OK) {                                                                     \
            fprintf(stderr, "bench_h2d: %s\n", err.msg);                                           \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    size_t mib = 1024, row_bytes = 256;
    int reps = 5;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--mib"))
            mib = (size_t)ig_bench_long("bench_h2d", "--mib", v, 16, 1 << 20);
        else if (!strcmp(argv[i], "--row-bytes"))
            row_bytes = (size_t)ig_bench_long("bench_h2d", "--row-bytes", v, 16, 1 << 20);
        else if (!strcmp(argv[i], "--reps"))
            reps = (int)ig_bench_long("bench_h2d", "--reps", v, 1, 1000);
        else {
            fprintf(stderr, "bench_h2d: unknown option '%s'\n", argv[i]);
            i = argc;
            reps = 0; /* the usage line below */
        }
    }
    if (mib < 16 || row_bytes < 16 || reps < 1) {
        fprintf(stderr, "usage: bench_h2d [--mib N>=16] [--row-bytes B>=16] [--reps R>=1]\n");
        return 2;
    }
    char why[512];
    ig_cuda_info info;
    if (ig_cuda_probe(&info, why, sizeof why) <= 0) {
        fprintf(stderr, "bench_h2d: no usable GPU: %s\n", why);
        return 1;
    }
    ig_error err;
    ig_cuda_ctx *ctx = NULL;
    CK(ig_cuda_ctx_create(0, &ctx, &err));
    ig_cuda_stream_t s = ig_cuda_ctx_stream(ctx);
    size_t n = mib << 20;
    void *host = NULL, *dev = NULL, *hdev = NULL;
    CK(ig_cuda_host_alloc(&host, n, 1, &err));
    CK(ig_cuda_malloc(&dev, n, &err));
    CK(ig_cuda_host_device_ptr(&hdev, host, &err));
    memset(host, 1, n);
    ig_cuda_event_t a, b;
    CK(ig_cuda_event_create(&a, 1, &err));
    CK(ig_cuda_event_create(&b, 1, &err));
    float ms = 0, best = 1e30f;
    /* 1. plain copy of the whole pinned buffer */
    for (int r = 0; r <= reps; r++) { /* the first is a warm-up */
        CK(ig_cuda_event_record(a, s, &err));
        CK(ig_cuda_copy_h2d_async(dev, host, n, s, &err));
        CK(ig_cuda_event_record(b, s, &err));
        CK(ig_cuda_event_sync(b, &err));
        CK(ig_cuda_event_elapsed_ms(a, b, &ms, &err));
        if (r > 0 && ms < best) best = ms;
    }
    double memcpy_gbps = (double)n / (best * 1e-3) / 1e9;
    /* 2. row gathers: tables of 2048 rows (one sequence's KV head at sequence 2048) */
    int rows_per_table = 2048;
    int tables = (int)(n / ((size_t)rows_per_table * row_bytes));
    int32_t *idx_h = malloc((size_t)tables * rows_per_table * sizeof(int32_t));
    int32_t *nsel_h = malloc((size_t)tables * sizeof(int32_t));
    int32_t *idx_d = NULL, *nsel_d = NULL;
    CK(ig_cuda_malloc((void **)&idx_d, (size_t)tables * rows_per_table * 4, &err));
    CK(ig_cuda_malloc((void **)&nsel_d, (size_t)tables * 4, &err));
    double gbps[2];
    for (int mode = 0; mode < 2; mode++) {
        uint64_t x = 88172645463325252ull;
        size_t moved = 0;
        for (int t = 0; t < tables; t++) {
            int k = 0;
            for (int i = 0; i < rows_per_table; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                if (mode == 0 || (x & 1)) idx_h[(size_t)t * rows_per_table + k++] = i;
            }
            nsel_h[t] = k;
            moved += (size_t)k * row_bytes;
        }
        CK(ig_cuda_copy_h2d_async(idx_d, idx_h, (size_t)tables * rows_per_table * 4, s, &err));
        CK(ig_cuda_copy_h2d_async(nsel_d, nsel_h, (size_t)tables * 4, s, &err));
        best = 1e30f;
        for (int r = 0; r <= reps; r++) {
            CK(ig_cuda_event_record(a, s, &err));
            CK(ig_cuda_gather_rows(dev, (int64_t)rows_per_table * (int64_t)row_bytes, hdev,
                                   (int64_t)rows_per_table * (int64_t)row_bytes, (int64_t)row_bytes,
                                   NULL, row_bytes, idx_d, rows_per_table, nsel_d, tables, s,
                                   &err));
            CK(ig_cuda_event_record(b, s, &err));
            CK(ig_cuda_event_sync(b, &err));
            CK(ig_cuda_event_elapsed_ms(a, b, &ms, &err));
            if (r > 0 && ms < best) best = ms;
        }
        gbps[mode] = (double)moved / (best * 1e-3) / 1e9;
    }
    printf("{\"gpu\":\"%s\",\"bytes\":%zu,\"row_bytes\":%zu,\"memcpy_pinned_gbps\":%.3f,"
           "\"gather_all_rows_gbps\":%.3f,\"gather_half_rows_gbps\":%.3f,"
           "\"gather_all_vs_memcpy\":%.3f,\"gather_half_vs_memcpy\":%.3f}\n",
           info.name, n, row_bytes, memcpy_gbps, gbps[0], gbps[1], gbps[0] / memcpy_gbps,
           gbps[1] / memcpy_gbps);
    free(idx_h);
    free(nsel_h);
    ig_cuda_free(idx_d);
    ig_cuda_free(nsel_d);
    ig_cuda_free(dev);
    ig_cuda_host_free(host);
    ig_cuda_event_destroy(a);
    ig_cuda_event_destroy(b);
    ig_cuda_ctx_destroy(ctx);
    return 0;
}
