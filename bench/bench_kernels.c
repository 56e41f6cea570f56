/* bench_kernels: the CPU kernels against this machine's roofline. Measures read/copy bandwidth and
 * sgemm throughput, then ig_cpu_linear at M = 1 (batch-1 decode) for f32/f16/bf16 weights with
 * SmolLM2-135M's shapes, as GB/s of weights streamed and as a fraction of the read bandwidth; then
 * block-quantized weights (q4_0, q4_1, q8_0, q4g64, q8g64) at M = 1 and 8 against f16/f32 and the
 * compressed-bytes bound, and at a prefill M = 512 against f32 sgemm.
 * "cold" cycles through copies of W larger than any cache together (what decode sees: every layer's
 * weights once per token); "hot" repeats one W (cache-resident when it fits). Then the kernels KV
 * policies use: decode attention over f32/f16 rows (a KV cache in host memory), InfiniGen's partial
 * scores and top-k, the KV quantization codec, and H2O's column sums at prefill. Prints a table;
 * --json writes the same figures. Never part of the test suite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "core/base/dtype.h"
#include "core/base/log.h"
#include "core/base/status.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kvquant.h"
#include "kernels/cpu/measure.h"

typedef struct bench_opts {
    int threads;
    size_t bw_bytes;
    size_t cold_bytes;
    double min_time_s;
    const char *json_path;
    int quick;
    int kv_only;
    int quant_only;
    int act8; /* --act-quant q8 */
} bench_opts;

static void usage(const char *argv0) {
    printf("usage: %s [options]\n"
           "Measures memory bandwidth, sgemm GFLOP/s and ig_cpu_linear at M=1 (f32/f16/bf16,\n"
           "K=576 N=1536 and K=576 N=49152) as GB/s of weights vs the read bandwidth, then the\n"
           "KV-policy kernels (attention over f32/f16 rows, partial scores, top-k, KV codec,\n"
           "column sums).\n"
           "  --threads N     kernel and OpenBLAS threads (default: all cores / OMP_NUM_THREADS)\n"
           "  --bw-mib N      buffer for the bandwidth test in MiB (default 1024)\n"
           "  --cold-mib N    total size of the weight copies cycled in cold runs (default 512)\n"
           "  --time S        minimum seconds per measurement (default 0.3)\n"
           "  --quick         smaller buffers and shorter runs (a smoke test)\n"
           "  --kv-only       bandwidth, then only the KV-policy kernels\n"
           "  --quant-only    bandwidth, then only the quantized-weight linear cases\n"
           "  --act-quant A   none (default) or q8: the q4_0/q4_1/q8_0 GEMV cases with int8\n"
           "                  activations (ig_cpu_set_act8, igen --act-quant; not exact)\n"
           "  --json FILE     also write the results as JSON\n"
           "  --help          this text\n"
           "IG_SIMD=scalar|avx2|avx512 caps the SIMD level.\n",
           argv0);
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){0, 1024u << 20, 512u << 20, 0.3, NULL, 0, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(argv[0]);
            exit(0);
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--kv-only")) {
            o->kv_only = 1;
        } else if (!strcmp(a, "--quant-only")) {
            o->quant_only = 1;
        } else if (val && !strcmp(a, "--act-quant")) {
            if (strcmp(val, "none") && strcmp(val, "q8")) {
                fprintf(stderr, "%s: --act-quant %s: expected none or q8\n", argv[0], val);
                exit(2);
            }
            o->act8 = !strcmp(val, "q8"), i++;
            ig_cpu_set_act8(o->act8);
        } else if (val && !strcmp(a, "--threads")) {
            o->threads = (int)ig_bench_long(argv[0], "--threads", val, 1, 1024), i++;
        } else if (val && !strcmp(a, "--bw-mib")) {
            o->bw_bytes = (size_t)ig_bench_long(argv[0], "--bw-mib", val, 1, 1 << 20) << 20, i++;
        } else if (val && !strcmp(a, "--cold-mib")) {
            o->cold_bytes = (size_t)ig_bench_long(argv[0], "--cold-mib", val, 1, 1 << 20) << 20,
            i++;
        } else if (val && !strcmp(a, "--time")) {
            o->min_time_s = ig_bench_double(argv[0], "--time", val, 1e-3, 3600), i++;
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

/* n_rows rows of k weights in [-1, 1) stored as t (quantized types: ig_quantize_rows). */
static void *make_weights(ig_dtype t, int64_t n_rows, int64_t k, ig_rng *r) {
    int64_t n = n_rows * k;
    if (ig_dtype_is_quant(t)) {
        float *f = malloc((size_t)n * sizeof(float));
        void *q = ig_aligned_alloc((size_t)n_rows * ig_dtype_row_bytes(t, k), NULL);
        if (!f || !q) {
            free(f);
            free(q);
            return NULL;
        }
        for (int64_t i = 0; i < n; i++) f[i] = frand01(r) * 2.0f - 1.0f;
        ig_quantize_rows(t, f, n_rows, k, q);
        free(f);
        return q;
    }
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

/* Times ig_cpu_linear for one case into *res (W GB/s counts the stored bytes: compressed ones for
 * quantized types). */
static void measure_linear(const bench_opts *o, ig_dtype t, int64_t M, int64_t K, int64_t N,
                           int cold, double read_gbps, linear_result *res) {
    ig_rng r;
    ig_rng_seed(&r, 1);
    size_t wbytes = (size_t)N * ig_dtype_row_bytes(t, K);
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
    W[0] = make_weights(t, N, K, &r);
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
    for (int c = 0; c < n_copies; c++) free(W[c]);
    free(W);
    free(x);
    free(y);
}

static void bench_linear(const bench_opts *o, ig_dtype t, int64_t M, int64_t K, int64_t N, int cold,
                         double read_gbps) {
    linear_result *res = &g_res[g_nres < MAX_RESULTS ? g_nres++ : MAX_RESULTS - 1];
    measure_linear(o, t, M, K, N, cold, read_gbps, res);
    printf("  %-5s %4ld %6ld %6ld  %-4s %9.1f %9.1f %8.2f %6.2f %6.2f %8.1f\n", res->dtype, (long)M,
           (long)K, (long)N, cold ? "cold" : "hot", res->us_per_call, res->us_best,
           res->weight_gbps, res->ratio, res->ratio_best, res->gflops);
}

/* ---- quantized weights ------------------------------------------------------------------------
 */

/* One quantized case: its figures and the f16 / f32 times of the same shape and M. */
typedef struct quant_result {
    linear_result r;
    double vs_f16, vs_f32; /* time of f16 (f32) / time of this type: > 1 is faster */
} quant_result;

#define MAX_QRESULTS 96
static quant_result g_q[MAX_QRESULTS];
static int g_nq;

static const ig_dtype k_qtypes[] = {IG_DTYPE_Q4_0, IG_DTYPE_Q4_1, IG_DTYPE_Q8_0, IG_DTYPE_Q4G64,
                                    IG_DTYPE_Q8G64};

static void print_quant(const quant_result *q, int prefill) {
    const linear_result *r = &q->r;
    printf("  %-6s %4ld %5ld %5ld %9.1f %9.1f %8.2f %6.2f %6.2f %7.2f %7.2f %8.1f\n", r->dtype,
           (long)r->M, (long)r->K, (long)r->N, r->us_per_call, r->us_best, r->weight_gbps,
           prefill ? 0.0 : r->ratio, prefill ? 0.0 : r->ratio_best, q->vs_f16, q->vs_f32,
           r->gflops);
}

/* Decode (M = 1, 8; cold W) at the default model's shapes, then prefill (M = 512, hot). */
/* One shape: f32 and f16 weights, then every quantized type, each against both (cold W for the
 * GEMV rows, hot W for prefill). */
static void quant_shape(const bench_opts *o, int64_t M, int64_t K, int64_t N, int cold,
                        double read_gbps) {
    quant_result f32 = {0}, f16 = {0};
    measure_linear(o, IG_DTYPE_F32, M, K, N, cold, read_gbps, &f32.r);
    measure_linear(o, IG_DTYPE_F16, M, K, N, cold, read_gbps, &f16.r);
    f32.vs_f32 = f16.vs_f16 = 1.0;
    f32.vs_f16 = f16.r.us_per_call / f32.r.us_per_call;
    f16.vs_f32 = f32.r.us_per_call / f16.r.us_per_call;
    quant_result *base[2] = {&f32, &f16};
    for (int b = 0; b < 2; b++) {
        print_quant(base[b], !cold);
        if (g_nq < MAX_QRESULTS) g_q[g_nq++] = *base[b];
    }
    for (size_t t = 0; t < sizeof k_qtypes / sizeof k_qtypes[0]; t++) {
        quant_result q = {0};
        measure_linear(o, k_qtypes[t], M, K, N, cold, read_gbps, &q.r);
        q.vs_f16 = f16.r.us_per_call / q.r.us_per_call;
        q.vs_f32 = f32.r.us_per_call / q.r.us_per_call;
        print_quant(&q, !cold);
        if (g_nq < MAX_QRESULTS) g_q[g_nq++] = q;
    }
}

static void bench_quant(const bench_opts *o, double read_gbps) {
    printf("\nquantized weights: ig_cpu_linear (cold W: copies cycled as in decode; GB/s of the "
           "stored (compressed) bytes; bw = GB/s / read bandwidth, i.e. the fraction of the "
           "compressed-bytes bound, at the median and the best time; x f16 / x f32 = time of f16 / "
           "f32 W over this one)%s\n",
           o->act8 ? "; q4_0/q4_1/q8_0 GEMVs (M <= 16) with int8 activations (--act-quant q8)"
                   : "");
    printf("  %-6s %4s %5s %5s %9s %9s %8s %6s %6s %7s %7s %8s\n", "dtype", "M", "K", "N",
           "us(med)", "us(best)", "GB/s", "bw", "bw.bst", "x f16", "x f32", "GFLOP/s");
    static const int64_t shapes[][2] = {{576, 1536}, {1536, 576}, {576, 576}, {576, 192}};
    static const int64_t Ms[] = {1, 8};
    int n_shapes = o->quick ? 1 : 4;
    for (int s = 0; s < n_shapes; s++)
        for (int mi = 0; mi < 2; mi++) {
            int64_t M = Ms[mi], K = shapes[s][0], N = shapes[s][1];
            quant_shape(o, M, K, N, 1, read_gbps);
        }
    /* the lm_head of SmolLM2-135M (its GGUF stores it Q8_0): one row of x, the largest GEMV of a
     * decode step */
    if (!o->quick) quant_shape(o, 1, 576, 49152, 1, read_gbps);
    /* Prefill: tiles dequantized into the scratch, then the one-thread sgemm per thread. */
    const int64_t M = o->quick ? 128 : 512, K = 576, N = 1536;
    printf("  prefill (hot W; x f32 = f32 sgemm time over this one, the target is >= 0.5)\n");
    quant_shape(o, M, K, N, 0, read_gbps);
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

/* ---- kernels for KV policies -------------------------------------------------------------------
 */

/* Median (and *best) seconds of fn(ctx, i) over calls i = 0, 1, ... for at least min_time_s. */
typedef void (*bench_fn)(void *ctx, int i);
static double time_calls(bench_fn fn, void *ctx, double min_time_s, double *best) {
    for (int i = 0; i < 3; i++) fn(ctx, i); /* warm-up */
    enum { MAX_SAMPLES = 8192 };
    static double samples[MAX_SAMPLES];
    int ns = 0;
    double start = ig_time_s();
    while (ns < MAX_SAMPLES && (ns < 5 || ig_time_s() - start < min_time_s)) {
        double t0 = ig_time_s();
        fn(ctx, ns);
        samples[ns++] = ig_time_s() - t0;
    }
    qsort(samples, (size_t)ns, sizeof samples[0], cmp_double);
    *best = samples[0];
    return samples[ns / 2];
}

/* A named figure for the table and the JSON file. */
typedef struct kv_result {
    char name[64];
    double us, us_best, gbps, ratio; /* ratio: gbps / read bandwidth (0: not a streaming figure) */
} kv_result;
static kv_result g_kv[32];
static int g_nkv;

static void kv_report(const char *name, double s, double best, double bytes, double read_gbps) {
    kv_result *r = &g_kv[g_nkv < 32 ? g_nkv++ : 31];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->us = s * 1e6;
    r->us_best = best * 1e6;
    r->gbps = bytes > 0 ? bytes / s * 1e-9 : 0;
    r->ratio = bytes > 0 && read_gbps > 0 ? r->gbps / read_gbps : 0;
    if (bytes > 0)
        printf("  %-44s %9.1f %9.1f %8.2f %6.2f %6.2f\n", name, r->us, r->us_best, r->gbps,
               r->ratio, read_gbps > 0 ? bytes / best * 1e-9 / read_gbps : 0);
    else
        printf("  %-44s %9.1f %9.1f\n", name, r->us, r->us_best);
}

/* Decode over gathered rows: 9 query / 3 KV heads, hd 64, n rows per KV head. Cold: the call
 * cycles through copies of K and V larger than the caches together (a KV cache in host memory). */
typedef struct rows_ctx {
    ig_dtype t;
    int64_t n;
    int copies;
    char **k, **v;
    float q[9 * 64], out[9 * 64];
    float *ws;
    size_t wsn;
} rows_ctx;

static void rows_call(void *p, int i) {
    rows_ctx *c = p;
    int c_i = i % c->copies;
    size_t es = ig_dtype_size(c->t), per = (size_t)c->n * 64 * es;
    const void *kr[3], *vr[3];
    int64_t nr[3] = {c->n, c->n, c->n};
    for (int g = 0; g < 3; g++) {
        kr[g] = c->k[c_i] + g * per;
        vr[g] = c->v[c_i] + g * per;
    }
    ig_cpu_attention_rows_t(c->q, c->t, kr, vr, 64, nr, c->n, 9, 3, 64, 0.125f, c->ws, c->wsn, NULL,
                            c->out);
}

static void bench_rows(const bench_opts *o, ig_dtype t, int64_t n, int cold, double read_gbps) {
    rows_ctx *c = calloc(1, sizeof *c);
    if (!c) exit(1);
    c->t = t;
    c->n = n;
    size_t es = ig_dtype_size(t), bytes = 2 * 3 * (size_t)n * 64 * es; /* K + V read per call */
    c->copies = cold ? (int)((o->cold_bytes + bytes - 1) / bytes) : 1;
    if (c->copies < 1) c->copies = 1;
    c->k = calloc((size_t)c->copies, sizeof *c->k);
    c->v = calloc((size_t)c->copies, sizeof *c->v);
    ig_rng r;
    ig_rng_seed(&r, 3);
    for (int i = 0; i < c->copies; i++) {
        c->k[i] = ig_aligned_alloc(bytes / 2, NULL);
        c->v[i] = ig_aligned_alloc(bytes / 2, NULL);
        if (!c->k[i] || !c->v[i]) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        for (size_t e = 0; e < 3 * (size_t)n * 64; e++) {
            float a = frand01(&r) - 0.5f, b = frand01(&r) - 0.5f;
            if (t == IG_DTYPE_F32) {
                ((float *)c->k[i])[e] = a;
                ((float *)c->v[i])[e] = b;
            } else {
                ((uint16_t *)c->k[i])[e] = ig_f32_to_f16(a);
                ((uint16_t *)c->v[i])[e] = ig_f32_to_f16(b);
            }
        }
    }
    for (int i = 0; i < 9 * 64; i++) c->q[i] = frand01(&r) - 0.5f;
    c->wsn = ig_cpu_attention_ws_floats(1, n, 9, 64, 0);
    c->ws = malloc(c->wsn * sizeof(float));
    double best, s = time_calls(rows_call, c, o->min_time_s, &best);
    char name[64];
    snprintf(name, sizeof name, "attention_rows %s n=%ld %s", ig_dtype_name(t), (long)n,
             cold ? "cold" : "hot");
    kv_report(name, s, best, (double)bytes, read_gbps);
    for (int i = 0; i < c->copies; i++) {
        free(c->k[i]);
        free(c->v[i]);
    }
    free(c->k);
    free(c->v);
    free(c->ws);
    free(c);
}

/* InfiniGen speculation for one KV head: 3 partial queries against n cached partial keys of 13
 * columns (0.2 * 64), then top-k of one head's scores. */
typedef struct spec_ctx {
    int64_t n, k;
    int copies;
    float **pk;
    float pq[3 * 13];
    float row_max[3]; /* ig_cpu_partial_scores always writes the row maxima */
    float *scores;
    int32_t *idx;
    void *ws;
    size_t wsb;
} spec_ctx;

static void pscore_call(void *p, int i) {
    spec_ctx *c = p;
    /* the partial key cache column-major: [13][n] */
    ig_cpu_partial_scores(c->pk[i % c->copies], IG_DTYPE_F32, c->n, 13, c->n, c->pq, 13, 3,
                          c->scores, c->n, NULL, c->row_max);
}

static void topk_call(void *p, int i) {
    spec_ctx *c = p;
    (void)i;
    ig_cpu_topk(c->scores, c->n, c->k, c->idx, c->ws, c->wsb);
}

static void bench_spec(const bench_opts *o, int64_t n, int cold, double read_gbps) {
    spec_ctx c = {0};
    c.n = n;
    c.k = n / 5;
    size_t bytes = (size_t)n * 13 * sizeof(float);
    c.copies = cold ? (int)((o->cold_bytes + bytes - 1) / bytes) : 1;
    c.pk = calloc((size_t)c.copies, sizeof *c.pk);
    c.scores = malloc(3 * (size_t)n * sizeof(float));
    c.idx = malloc((size_t)n * sizeof(int32_t));
    c.wsb = ig_cpu_topk_ws_bytes(n);
    c.ws = malloc(c.wsb);
    if (!c.pk || !c.scores || !c.idx || !c.ws) exit(1);
    ig_rng r;
    ig_rng_seed(&r, 4);
    for (int i = 0; i < c.copies; i++) {
        c.pk[i] = ig_aligned_alloc(bytes, NULL);
        if (!c.pk[i]) exit(1);
        for (int64_t e = 0; e < n * 13; e++) c.pk[i][e] = frand01(&r) - 0.5f;
    }
    for (int i = 0; i < 3 * 13; i++) c.pq[i] = frand01(&r) - 0.5f;
    double best, s = time_calls(pscore_call, &c, o->min_time_s, &best);
    char name[64];
    snprintf(name, sizeof name, "partial_scores n=%ld k_cols=13 n_q=3 %s", (long)n,
             cold ? "cold" : "hot");
    kv_report(name, s, best, (double)bytes, read_gbps);
    if (!cold) {
        s = time_calls(topk_call, &c, o->min_time_s, &best);
        snprintf(name, sizeof name, "topk n=%ld k=%ld (us)", (long)n, (long)c.k);
        kv_report(name, s, best, 0, read_gbps);
    }
    for (int i = 0; i < c.copies; i++) free(c.pk[i]);
    free(c.pk);
    free(c.scores);
    free(c.idx);
    free(c.ws);
}

/* The KV codec over one layer's keys of 4096 tokens (3 KV heads x 4096 rows of 64): GB/s counted
 * on the f32 side (what is read by quantize and written by dequantize). */
typedef struct kvq_ctx {
    int64_t rows;
    int bits;
    float *x, *y;
    uint8_t *q;
} kvq_ctx;

static void quant_call(void *p, int i) {
    kvq_ctx *c = p;
    (void)i;
    ig_kvq_quantize_rows(c->x, c->rows, 64, c->bits, 64, c->q);
}

static void dequant_call(void *p, int i) {
    kvq_ctx *c = p;
    (void)i;
    ig_kvq_dequantize_rows(c->q, c->rows, 64, c->bits, 64, c->y);
}

static void bench_kvq(const bench_opts *o, int bits, double read_gbps) {
    kvq_ctx c = {3 * 4096, bits, NULL, NULL, NULL};
    c.x = malloc((size_t)c.rows * 64 * sizeof(float));
    c.y = malloc((size_t)c.rows * 64 * sizeof(float));
    c.q = malloc((size_t)c.rows * ig_kvq_row_bytes(64, bits, 64));
    if (!c.x || !c.y || !c.q) exit(1);
    ig_rng r;
    ig_rng_seed(&r, 5);
    for (int64_t e = 0; e < c.rows * 64; e++) c.x[e] = frand01(&r) * 4.0f - 2.0f;
    double f32_bytes = (double)c.rows * 64 * sizeof(float), best, s;
    char name[64];
    s = time_calls(quant_call, &c, o->min_time_s, &best);
    snprintf(name, sizeof name, "kvq quantize %d-bit 12288x64 (f32 GB/s)", bits);
    kv_report(name, s, best, f32_bytes, read_gbps);
    s = time_calls(dequant_call, &c, o->min_time_s, &best);
    snprintf(name, sizeof name, "kvq dequantize %d-bit 12288x64 (f32 GB/s)", bits);
    kv_report(name, s, best, f32_bytes, read_gbps);
    free(c.x);
    free(c.y);
    free(c.q);
}

/* Prefill attention with and without H2O's column sums (9 / 3 heads, hd 64). */
typedef struct colsum_ctx {
    int64_t n;
    float *q, *k, *v, *out, *cs, *ws;
    size_t wsn;
    int with;
} colsum_ctx;

static void colsum_call(void *p, int i) {
    colsum_ctx *c = p;
    (void)i;
    ig_cpu_attention_colsum(c->q, c->n, 0, c->k, c->v, c->n, 9, 3, 64, 0.125f, c->ws, c->wsn,
                            c->with ? c->cs : NULL, c->n, c->out);
}

static void bench_colsum(const bench_opts *o, int64_t n, double read_gbps) {
    colsum_ctx c = {0};
    c.n = n;
    c.q = malloc((size_t)n * 9 * 64 * sizeof(float));
    c.out = malloc((size_t)n * 9 * 64 * sizeof(float));
    c.k = malloc((size_t)n * 3 * 64 * sizeof(float));
    c.v = malloc((size_t)n * 3 * 64 * sizeof(float));
    c.cs = calloc((size_t)n * 9, sizeof(float));
    c.wsn = ig_cpu_attention_colsum_ws_floats(n, n, 9, 64, 0);
    c.ws = malloc(c.wsn * sizeof(float));
    if (!c.q || !c.out || !c.k || !c.v || !c.cs || !c.ws) exit(1);
    ig_rng r;
    ig_rng_seed(&r, 6);
    for (int64_t e = 0; e < n * 9 * 64; e++) c.q[e] = frand01(&r) - 0.5f;
    for (int64_t e = 0; e < n * 3 * 64; e++) c.k[e] = frand01(&r) - 0.5f, c.v[e] = frand01(&r);
    /* Plain and with sums alternate, so that both see the same machine (load drifts). */
    enum { MAX_SAMPLES = 2048 };
    static double t[2][MAX_SAMPLES];
    int ns = 0;
    for (c.with = 0; c.with < 2; c.with++) colsum_call(&c, 0); /* warm-up */
    double start = ig_time_s();
    while (ns < MAX_SAMPLES && (ns < 5 || ig_time_s() - start < 2 * o->min_time_s)) {
        for (c.with = 0; c.with < 2; c.with++) {
            double t0 = ig_time_s();
            colsum_call(&c, ns);
            t[c.with][ns] = ig_time_s() - t0;
        }
        ns++;
    }
    for (int w = 0; w < 2; w++) qsort(t[w], (size_t)ns, sizeof t[w][0], cmp_double);
    double s0 = t[0][ns / 2], best0 = t[0][0], s1 = t[1][ns / 2], best1 = t[1][0];
    char name[64];
    snprintf(name, sizeof name, "prefill attention n=%ld (us)", (long)n);
    kv_report(name, s0, best0, 0, read_gbps);
    snprintf(name, sizeof name, "  + column sums (H2O) n=%ld (us)", (long)n);
    kv_report(name, s1, best1, 0, read_gbps);
    printf("  %-44s %8.1f%% (median), %.1f%% (best)\n", "  column-sum overhead",
           (s1 / s0 - 1) * 100, (best1 / best0 - 1) * 100);
    free(c.q);
    free(c.out);
    free(c.k);
    free(c.v);
    free(c.cs);
    free(c.ws);
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
    double gflops[3] = {0, 0, 0}, attn_us[3] = {0, 0, 0};
    static const int64_t ctxs[] = {512, 2048, 8192};
    if (o.kv_only) goto kv;
    if (o.quant_only) goto quant;
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

    printf("\nig_cpu_attention decode (9 query / 3 KV heads, hd 64)\n");
    for (int i = 0; i < 3; i++) {
        attn_us[i] = bench_attention_decode(ctxs[i], o.min_time_s) * 1e6;
        double kv_bytes = 2.0 * 3 * ctxs[i] * 64 * 4;
        printf("  n_ctx %-5ld %9.1f us  (%.2f GB/s of K+V)\n", (long)ctxs[i], attn_us[i],
               kv_bytes / attn_us[i] * 1e-3);
    }

quant:
    if (!o.kv_only) bench_quant(&o, read_gbps);
    if (o.quant_only) goto out;

kv:
    printf("\nkernels for KV policies (us/call: median and best; GB/s at the median; ratio = "
           "GB/s / read bandwidth, at the median and the best time)\n");
    printf("  %-44s %9s %9s %8s %6s %6s\n", "", "us(med)", "us(best)", "GB/s", "ratio", "r.best");
    for (int cold = 0; cold < 2; cold++)
        for (int t = 0; t < 2; t++)
            bench_rows(&o, t ? IG_DTYPE_F16 : IG_DTYPE_F32, 4096, cold, read_gbps);
    bench_spec(&o, 4096, 0, read_gbps);
    bench_spec(&o, 32768, 1, read_gbps);
    for (int bits = 8; bits >= 2; bits /= 2) bench_kvq(&o, bits, read_gbps);
    bench_colsum(&o, o.quick ? 256 : 1024, read_gbps);

out:
    if (o.json_path) {
        FILE *f = fopen(o.json_path, "w");
        if (!f) {
            fprintf(stderr, "cannot write %s\n", o.json_path);
            return 1;
        }
        fprintf(f, "{\n  \"threads\": %d,\n  \"simd\": \"%s\",\n", threads, ig_cpu_simd_name());
        fprintf(f, "  \"act_quant\": \"%s\",\n", o.act8 ? "q8" : "none");
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
        fprintf(f, "\n  ],\n  \"quant_linear\": [");
        for (int i = 0; i < g_nq; i++) {
            linear_result *r = &g_q[i].r;
            fprintf(f,
                    "%s\n    {\"dtype\": \"%s\", \"M\": %ld, \"K\": %ld, \"N\": %ld, \"weights\": "
                    "\"%s\", \"us_per_call\": %.3f, \"us_best\": %.3f, \"weight_gbps\": %.3f, "
                    "\"ratio_to_read_bw\": %.4f, \"ratio_best\": %.4f, \"speedup_vs_f16\": %.4f, "
                    "\"speedup_vs_f32\": %.4f, \"gflops\": %.3f}",
                    i ? "," : "", r->dtype, (long)r->M, (long)r->K, (long)r->N,
                    r->cold ? "cold" : "hot", r->us_per_call, r->us_best, r->weight_gbps, r->ratio,
                    r->ratio_best, g_q[i].vs_f16, g_q[i].vs_f32, r->gflops);
        }
        fprintf(f, "\n  ],\n  \"attention_decode\": [");
        for (int i = 0; i < 3; i++)
            fprintf(f, "%s\n    {\"n_ctx\": %ld, \"us\": %.3f}", i ? "," : "", (long)ctxs[i],
                    attn_us[i]);
        fprintf(f, "\n  ],\n  \"kv_policy_kernels\": [");
        for (int i = 0; i < g_nkv; i++)
            fprintf(f,
                    "%s\n    {\"name\": \"%s\", \"us\": %.3f, \"us_best\": %.3f, \"gbps\": %.3f, "
                    "\"ratio_to_read_bw\": %.4f}",
                    i ? "," : "", g_kv[i].name, g_kv[i].us, g_kv[i].us_best, g_kv[i].gbps,
                    g_kv[i].ratio);
        fprintf(f, "\n  ]\n}\n");
        fclose(f);
        printf("\nwrote %s\n", o.json_path);
    }
    return 0;
}
