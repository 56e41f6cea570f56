/* bench_kernels: the CPU kernels against this machine's roofline. Measures read/copy bandwidth and
 * sgemm throughput, then ig_cpu_linear at M = 1 (batch-1 decode) for f32/f16/bf16 weights with
 * SmolLM2-135M's shapes, as GB/s of weights streamed and as a fraction of the read bandwidth.
 * "cold" cycles through copies of W larger than any cache together (what decode sees: every layer's
 * weights once per token); "hot" repeats one W (cache-resident when it fits). Prints a table;
 * --json writes the same figures. Never part of the test suite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/log.h"
#include "core/status.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/measure.h"

typedef struct bench_opts {
    int threads;
    size_t bw_bytes;
    size_t cold_bytes;
    double min_time_s;
    const char *json_path;
    int quick;
} bench_opts;

static void usage(const char *argv0) {
    printf("usage: %s [options]\n"
           "Measures memory bandwidth, sgemm GFLOP/s and ig_cpu_linear at M=1 (f32/f16/bf16,\n"
           "K=576 N=1536 and K=576 N=49152) as GB/s of weights vs the read bandwidth.\n"
           "  --threads N     kernel and OpenBLAS threads (default: all cores / OMP_NUM_THREADS)\n"
           "  --bw-mib N      buffer for the bandwidth test in MiB (default 1024)\n"
           "  --cold-mib N    total size of the weight copies cycled in cold runs (default 512)\n"
           "  --time S        minimum seconds per measurement (default 0.3)\n"
           "  --quick         smaller buffers and shorter runs (a smoke test)\n"
           "  --json FILE     also write the results as JSON\n"
           "  --help          this text\n"
           "IG_SIMD=scalar|avx2|avx512 caps the SIMD level.\n",
           argv0);
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){0, 1024u << 20, 512u << 20, 0.3, NULL, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(argv[0]);
            exit(0);
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (val && !strcmp(a, "--threads")) {
            o->threads = atoi(val), i++;
        } else if (val && !strcmp(a, "--bw-mib")) {
            o->bw_bytes = (size_t)atol(val) << 20, i++;
        } else if (val && !strcmp(a, "--cold-mib")) {
            o->cold_bytes = (size_t)atol(val) << 20, i++;
        } else if (val && !strcmp(a, "--time")) {
            o->min_time_s = atof(val), i++;
        } else if (val && !strcmp(a, "--json")) {
            o->json_path = val, i++;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s' (try --help)\n", argv[0], a);
            return -1;
        }
    }
    if (o->quick) {
        o->bw_bytes = 128u << 20;
        o->cold_bytes = 128u << 20;
        o->min_time_s = 0.05;
    }
    return 0;
}

/* ---- results, kept for the JSON file -----------------------------------------------------------
 */

typedef struct linear_result {
    const char *dtype;
    int64_t M, K, N;
    int cold;
    double us_per_call, us_best, weight_gbps, ratio, ratio_best, gflops;
} linear_result;

#define MAX_RESULTS 64
static linear_result g_res[MAX_RESULTS];
static int g_nres;

/* ---- timing ------------------------------------------------------------------------------------
 */

static float frand01(ig_rng *r) {
    return (float)ig_rng_uniform(r);
}

static void *make_weights(ig_dtype t, int64_t n, ig_rng *r) {
    size_t es = ig_dtype_size(t);
    void *w = ig_aligned_alloc((size_t)n * es, NULL);
    if (!w) return NULL;
    for (int64_t i = 0; i < n; i++) {
        float f = frand01(r) * 2.0f - 1.0f;
        if (t == IG_DTYPE_F32)
            ((float *)w)[i] = f;
        else if (t == IG_DTYPE_F16)
            ((uint16_t *)w)[i] = ig_f32_to_f16(f);
        else
            ((uint16_t *)w)[i] = ig_f32_to_bf16(f);
    }
    return w;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median (and *best) seconds per ig_cpu_linear call, cycling through n_copies weight copies. */
static double time_linear(const float *x, int64_t M, int64_t K, void **W, int n_copies, ig_dtype t,
                          int64_t N, float *y, double min_time_s, double *best) {
    for (int c = 0; c < n_copies; c++) ig_cpu_linear(x, M, K, W[c], t, N, NULL, y); /* warm-up */
    enum { MAX_SAMPLES = 4096 };
    static double samples[MAX_SAMPLES];
    int ns = 0, c = 0;
    double start = ig_time_s();
    while (ns < MAX_SAMPLES && (ns < 5 || ig_time_s() - start < min_time_s)) {
        double t0 = ig_time_s();
        ig_cpu_linear(x, M, K, W[c], t, N, NULL, y);
        samples[ns++] = ig_time_s() - t0;
        c = (c + 1) % n_copies;
    }
    qsort(samples, (size_t)ns, sizeof samples[0], cmp_double);
    *best = samples[0];
    return samples[ns / 2];
}

static void bench_linear(const bench_opts *o, ig_dtype t, int64_t M, int64_t K, int64_t N, int cold,
                         double read_gbps) {
    ig_rng r;
    ig_rng_seed(&r, 1);
    size_t wbytes = (size_t)(K * N) * ig_dtype_size(t);
    int n_copies = 1;
    if (cold) {
        n_copies = (int)((o->cold_bytes + wbytes - 1) / wbytes);
        if (n_copies < 2) n_copies = 2;
    }
    void **W = calloc((size_t)n_copies, sizeof *W);
    float *x = malloc((size_t)(M * K) * sizeof(float));
    float *y = malloc((size_t)(M * N) * sizeof(float));
    if (!W || !x || !y) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < M * K; i++) x[i] = frand01(&r) - 0.5f;
    W[0] = make_weights(t, K * N, &r);
    for (int c = 1; c < n_copies; c++) {
        W[c] = ig_aligned_alloc(wbytes, NULL);
        if (W[c]) memcpy(W[c], W[0], wbytes);
    }
    for (int c = 0; c < n_copies; c++)
        if (!W[c]) {
            fprintf(stderr, "out of memory for %d weight copies\n", n_copies);
            exit(1);
        }
    double best;
    double s = time_linear(x, M, K, W, n_copies, t, N, y, o->min_time_s, &best);
    linear_result *res = &g_res[g_nres < MAX_RESULTS ? g_nres++ : MAX_RESULTS - 1];
    memset(res, 0, sizeof *res);
    res->dtype = ig_dtype_name(t);
    res->M = M;
    res->K = K;
    res->N = N;
    res->cold = cold;
    res->us_per_call = s * 1e6;
    res->us_best = best * 1e6;
    res->weight_gbps = (double)wbytes / s * 1e-9;
    res->gflops = 2.0 * (double)M * K * N / s * 1e-9;
    res->ratio = read_gbps > 0 ? res->weight_gbps / read_gbps : 0;
    res->ratio_best = read_gbps > 0 ? (double)wbytes / best * 1e-9 / read_gbps : 0;
    printf("  %-5s %4ld %6ld %6ld  %-4s %9.1f %9.1f %8.2f %6.2f %6.2f %8.1f\n", res->dtype, (long)M,
           (long)K, (long)N, cold ? "cold" : "hot", res->us_per_call, res->us_best,
           res->weight_gbps, res->ratio, res->ratio_best, res->gflops);
    for (int c = 0; c < n_copies; c++) free(W[c]);
    free(W);
    free(x);
    free(y);
}

static double bench_attention_decode(int64_t n_ctx, double min_time_s) {
    const int n_head = 9, n_kv = 3, hd = 64;
    size_t kv = (size_t)n_kv * n_ctx * hd;
    float *k = malloc(kv * 4), *v = malloc(kv * 4), *q = malloc(n_head * hd * 4);
    float *out = malloc(n_head * hd * 4);
    size_t wsn = ig_cpu_attention_ws_floats(1, n_ctx, n_head, hd, 0);
    float *ws = malloc(wsn * 4);
    if (!k || !v || !q || !out || !ws) exit(1);
    ig_rng r;
    ig_rng_seed(&r, 2);
    for (size_t i = 0; i < kv; i++) k[i] = frand01(&r) - 0.5f, v[i] = frand01(&r) - 0.5f;
    for (int i = 0; i < n_head * hd; i++) q[i] = frand01(&r) - 0.5f;
    int n = 0;
    double t0 = ig_time_s(), t;
    do {
        ig_cpu_attention(q, 1, n_ctx - 1, k, v, n_ctx, n_head, n_kv, hd, 0.125f, ws, wsn, out);
        n++;
        t = ig_time_s() - t0;
    } while (n < 5 || t < min_time_s);
    free(k);
    free(v);
    free(q);
    free(out);
    free(ws);
    return t / n;
}

int main(int argc, char **argv) {
    bench_opts o;
    if (parse_args(argc, argv, &o) != 0) return 2;
    if (o.threads > 0) ig_cpu_set_threads(o.threads);
    int threads = ig_cpu_get_threads();
    const char *wait = getenv("OMP_WAIT_POLICY");
    double load = -1;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &load) != 1) load = -1;
        fclose(la);
    }
    printf("bench_kernels: %d threads, SIMD %s, OMP_WAIT_POLICY=%s, load average %.2f\n", threads,
           ig_cpu_simd_name(), wait ? wait : "(unset)", load);
    if (load > 0.5)
        printf(
            "note: other processes are running; with OpenMP threads spinning (the default wait\n"
            "policy) a thread that shares its core stalls every parallel region: medians suffer.\n"
            "OMP_WAIT_POLICY=passive or --threads 1 are robust to that.\n");
    printf("\n");

    double read_gbps = ig_cpu_measure_bandwidth_gbps(o.bw_bytes, threads, o.quick ? 2 : 5);
    double copy_gbps = ig_cpu_measure_copy_bandwidth_gbps(o.bw_bytes, threads, o.quick ? 2 : 5);
    double read1_gbps = ig_cpu_measure_bandwidth_gbps(o.bw_bytes, 1, o.quick ? 2 : 3);
    printf("memory (%zu MiB buffer)\n", o.bw_bytes >> 20);
    printf("  read bandwidth   %8.2f GB/s (%d threads; 1 thread: %.2f GB/s)\n", read_gbps, threads,
           read1_gbps);
    printf("  copy bandwidth   %8.2f GB/s (read + write counted)\n\n", copy_gbps);

    static const int gemm_shapes[][3] = {{512, 1536, 576}, {1024, 1024, 1024}, {128, 576, 576}};
    double gflops[3];
    printf("sgemm (OpenBLAS, %d threads)\n", threads);
    for (int i = 0; i < 3; i++) {
        gflops[i] = ig_cpu_measure_sgemm_gflops(gemm_shapes[i][0], gemm_shapes[i][1],
                                                gemm_shapes[i][2], o.quick ? 2 : 5);
        printf("  M=%-5d N=%-5d K=%-5d %8.1f GFLOP/s\n", gemm_shapes[i][0], gemm_shapes[i][1],
               gemm_shapes[i][2], gflops[i]);
    }

    printf("\nig_cpu_linear (us/call: median and best; W GB/s = bytes of W / median time; ratio = "
           "W GB/s / read bandwidth, at the median and the best time)\n");
    printf("  %-5s %4s %6s %6s  %-4s %9s %9s %8s %6s %6s %8s\n", "dtype", "M", "K", "N", "W",
           "us(med)", "us(best)", "W GB/s", "ratio", "r.best", "GFLOP/s");
    static const ig_dtype types[] = {IG_DTYPE_F32, IG_DTYPE_F16, IG_DTYPE_BF16};
    static const int64_t shapes[][2] = {{576, 1536}, {576, 49152}, {1536, 576}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 3; t++) {
            bench_linear(&o, types[t], 1, shapes[s][0], shapes[s][1], 1, read_gbps);
            if (!o.quick) bench_linear(&o, types[t], 1, shapes[s][0], shapes[s][1], 0, read_gbps);
        }
    printf("\nig_cpu_linear, f16 K=576 N=1536, by M (GEMV up to 16, sgemm above)\n");
    static const int64_t Ms[] = {2, 4, 8, 16, 17, 32, 128, 512};
    for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++)
        bench_linear(&o, IG_DTYPE_F16, Ms[i], 576, 1536, 0, read_gbps);

    static const int64_t ctxs[] = {512, 2048, 8192};
    double attn_us[3];
    printf("\nig_cpu_attention decode (9 query / 3 KV heads, hd 64)\n");
    for (int i = 0; i < 3; i++) {
        attn_us[i] = bench_attention_decode(ctxs[i], o.min_time_s) * 1e6;
        double kv_bytes = 2.0 * 3 * ctxs[i] * 64 * 4;
        printf("  n_ctx %-5ld %9.1f us  (%.2f GB/s of K+V)\n", (long)ctxs[i], attn_us[i],
               kv_bytes / attn_us[i] * 1e-3);
    }

    if (o.json_path) {
        FILE *f = fopen(o.json_path, "w");
        if (!f) {
            fprintf(stderr, "cannot write %s\n", o.json_path);
            return 1;
        }
        fprintf(f, "{\n  \"threads\": %d,\n  \"simd\": \"%s\",\n", threads, ig_cpu_simd_name());
        fprintf(f, "  \"omp_wait_policy\": \"%s\",\n  \"load_average\": %.2f,\n", wait ? wait : "",
                load);
        fprintf(f, "  \"read_gbps\": %.3f,\n  \"read_gbps_1thread\": %.3f,\n", read_gbps,
                read1_gbps);
        fprintf(f, "  \"copy_gbps\": %.3f,\n  \"sgemm\": [", copy_gbps);
        for (int i = 0; i < 3; i++)
            fprintf(f, "%s\n    {\"M\": %d, \"N\": %d, \"K\": %d, \"gflops\": %.2f}", i ? "," : "",
                    gemm_shapes[i][0], gemm_shapes[i][1], gemm_shapes[i][2], gflops[i]);
        fprintf(f, "\n  ],\n  \"linear\": [");
        for (int i = 0; i < g_nres; i++) {
            linear_result *r = &g_res[i];
            fprintf(f,
                    "%s\n    {\"dtype\": \"%s\", \"M\": %ld, \"K\": %ld, \"N\": %ld, \"weights\": "
                    "\"%s\", \"us_per_call\": %.3f, \"us_best\": %.3f, \"weight_gbps\": %.3f, "
                    "\"ratio_to_read_bw\": %.4f, \"ratio_best\": %.4f, \"gflops\": %.3f}",
                    i ? "," : "", r->dtype, (long)r->M, (long)r->K, (long)r->N,
                    r->cold ? "cold" : "hot", r->us_per_call, r->us_best, r->weight_gbps, r->ratio,
                    r->ratio_best, r->gflops);
        }
        fprintf(f, "\n  ],\n  \"attention_decode\": [");
        for (int i = 0; i < 3; i++)
            fprintf(f, "%s\n    {\"n_ctx\": %ld, \"us\": %.3f}", i ? "," : "", (long)ctxs[i],
                    attn_us[i]);
        fprintf(f, "\n  ]\n}\n");
        fclose(f);
        printf("\nwrote %s\n", o.json_path);
    }
    return 0;
}
