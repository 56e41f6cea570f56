/* bench_engine: prefill and decode throughput of a model on this machine, with the machine's memory
 * bandwidth and BLAS GEMM throughput measured in the same run, so that results are ratios against
 * rooflines rather than absolute times (which drift on shared machines). Prints a table and writes
 * JSON. */
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "core/engine/engine.h"
#include "core/base/log.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/measure.h"

static void help(void) {
    printf(
        "usage: bench_engine [--model PATH] [--threads N] [--dtype T] [--prompt-len L]\n"
        "                    [--decode-steps S] [--batches 1,8,32] [--reps R] [--json FILE]\n"
        "                    [--act-quant none|q8] [--weights-mem auto|map|copy]\n\n"
        "Measures prefill tokens/s (one prompt of L tokens) and decode tokens/s at each batch\n"
        "size, plus memory read bandwidth and sgemm GFLOP/s, and reports:\n"
        "  decode_bound_ratio = batch-1 decode step time / (weight bytes per token / bandwidth)\n"
        "  prefill_gemm_fraction = prefill FLOP/s / measured sgemm FLOP/s\n\n"
        "  --model PATH       model (default: the installed SmolLM2-135M)\n"
        "  --threads N        threads (default 2)\n"
        "  --dtype T          weight storage f32|f16|bf16|q4g64|q8g64|q4_0|q4_1|q8_0, or stored\n"
        "                     (the file's own types; default f32)\n"
        "  --prompt-len L     prefill length (default 512)\n"
        "  --decode-steps S   decode steps timed per batch size (default 32)\n"
        "  --batches LIST     decode batch sizes (default 1,8,32)\n"
        "  --reps R           repetitions; the best is kept (default 3)\n"
        "  --json FILE        write the results as JSON (default bench_engine.json)\n"
        "  --act-quant A      none (default) or q8: int8 activations for q4_0/q4_1/q8_0 weights "
        "in\n"
        "                     decode (igen --act-quant; not the exact result)\n"
        "  --weights-mem M    matrices stored in a usable type: copy (huge-page memory), map (the\n"
        "                     file mapping) or auto (default; igen --weights-mem)\n");
}

/* FLOPs of a forward over n_new tokens of one sequence starting at p0 (matmuls + attention). */
static double forward_flops(const ig_model *m, int64_t n_new, int64_t p0, int with_lm_head) {
    const ig_model_config *c = ig_model_get_config(m);
    double per_tok = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const ig_layer *L = ig_model_layer(m, l);
        const ig_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < 7; i++) per_tok += 2.0 * (double)ws[i]->rows * (double)ws[i]->cols;
    }
    double f = per_tok * (double)n_new;
    /* attention: q.k and p.v, each 2*hd flops per (head, query, key) */
    double pairs = 0;
    for (int64_t i = 0; i < n_new; i++) pairs += (double)(p0 + i + 1);
    f += (double)c->n_layer * c->n_head * 4.0 * c->head_dim * pairs;
    if (with_lm_head) f += 2.0 * c->vocab * c->d_model;
    return f;
}

int main(int argc, char **argv) {
    enum {
        O_MODEL = 1,
        O_THREADS,
        O_DTYPE,
        O_PLEN,
        O_STEPS,
        O_BATCHES,
        O_REPS,
        O_JSON,
        O_ACT,
        O_WMEM
    };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"threads", required_argument, NULL, O_THREADS},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"prompt-len", required_argument, NULL, O_PLEN},
        {"decode-steps", required_argument, NULL, O_STEPS},
        {"batches", required_argument, NULL, O_BATCHES},
        {"reps", required_argument, NULL, O_REPS},
        {"json", required_argument, NULL, O_JSON},
        {"act-quant", required_argument, NULL, O_ACT},
        {"weights-mem", required_argument, NULL, O_WMEM},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *model_path = NULL, *json_path = "bench_engine.json", *batches_arg = "1,8,32";
    int threads = 2, prompt_len = 512, steps = 32, reps = 3, opt;
    ig_dtype dtype = IG_DTYPE_F32;
    int keep_stored = 0, act8 = 0, wmem = IG_WMEM_AUTO;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_MODEL:
            model_path = optarg;
            break;
        case O_THREADS:
            threads = (int)ig_bench_long("bench_engine", "--threads", optarg, 1, 1024);
            break;
        case O_DTYPE: {
            if (!strcmp(optarg, "stored")) {
                keep_stored = 1;
                dtype = IG_DTYPE_F32;
                break;
            }
            int t = ig_dtype_from_name(optarg);
            if (t < 0 || !ig_dtype_is_weight_storage((ig_dtype)t)) {
                fprintf(stderr,
                        "bench_engine: --dtype %s: expected f32, f16, bf16, q4g64, q8g64, q4_0, "
                        "q4_1, q8_0 or stored\n",
                        optarg);
                return 2;
            }
            dtype = (ig_dtype)t;
            keep_stored = 0;
            break;
        }
        case O_PLEN:
            prompt_len = (int)ig_bench_long("bench_engine", "--prompt-len", optarg, 1, 1 << 20);
            break;
        case O_STEPS:
            steps = (int)ig_bench_long("bench_engine", "--decode-steps", optarg, 1, 1 << 20);
            break;
        case O_BATCHES:
            batches_arg = optarg;
            break;
        case O_REPS:
            reps = (int)ig_bench_long("bench_engine", "--reps", optarg, 1, 1 << 20);
            break;
        case O_JSON:
            json_path = optarg;
            break;
        case O_ACT:
            if (strcmp(optarg, "none") && strcmp(optarg, "q8")) {
                fprintf(stderr, "bench_engine: --act-quant %s: expected none or q8\n", optarg);
                return 2;
            }
            act8 = !strcmp(optarg, "q8");
            ig_cpu_set_act8(act8);
            break;
        case O_WMEM:
            wmem = ig_weights_mem_from_name(optarg);
            if (wmem < 0) {
                fprintf(stderr, "bench_engine: --weights-mem %s: expected auto, map or copy\n",
                        optarg);
                return 2;
            }
            break;
        default:
            fprintf(stderr, "bench_engine: see --help\n");
            return 2;
        }
    }
    int batches[16], n_batches = 0, max_batch = 1;
    for (const char *s = batches_arg; *s && n_batches < 16;) {
        char *end = NULL;
        long b = strtol(s, &end, 10);
        if (end == s || (*end && *end != ',') || b < 1 || b > 256) {
            fprintf(stderr, "bench_engine: --batches: '%s' is not a list of sizes 1..256\n",
                    batches_arg);
            return 2;
        }
        batches[n_batches++] = (int)b;
        if (b > max_batch) max_batch = (int)b;
        s = strchr(s, ',');
        if (!s) break;
        s++;
    }
    if (threads < 1 || prompt_len < 1 || steps < 1 || reps < 1) {
        fprintf(
            stderr,
            "bench_engine: --threads, --prompt-len, --decode-steps and --reps must be positive\n");
        return 2;
    }
    ig_error err;
    ig_error_clear(&err);
    if (!model_path) model_path = ig_model_default_path(&err);
    if (!model_path) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 2;
    }
    ig_cpu_set_threads(threads);
    ig_model_load_opts lo = {dtype, 1, keep_stored, (ig_weights_mem)wmem};
    ig_model *m = NULL;
    if (ig_model_load(model_path, &lo, &m, &err) != IG_OK) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 2;
    }
    const ig_model_config *c = ig_model_get_config(m);
    int ctx = prompt_len + steps + 1;
    int batch_tokens = prompt_len > max_batch ? prompt_len : max_batch;
    ig_engine_opts eo = {.max_seqs = max_batch,
                         .max_ctx = ctx,
                         .max_batch_tokens = batch_tokens,
                         .threads = threads};
    ig_engine *e = NULL;
    if (ig_engine_create(m, &eo, &e, &err) != IG_OK) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        ig_model_free(m);
        return 2;
    }

    char desc[160];
    ig_model_dtype_desc(m, desc, sizeof desc);
    printf("bench_engine: %s (%s), %d threads, SIMD %s\n", model_path, desc, threads,
           ig_cpu_simd_name());
    /* Rooflines, measured now. */
    /* the bandwidth over 4 KiB pages and over huge pages (where copied weights live): the bound
     * takes the faster */
    double bw = 0, bw4k = 0, bwhuge = 0, gemm = 0, gemm_model = 0;
    for (int r = 0; r < reps; r++) {
        double b4 = ig_cpu_measure_bandwidth_pages_gbps((size_t)1 << 30, threads, 3, 0);
        double bh = ig_cpu_measure_bandwidth_pages_gbps((size_t)1 << 30, threads, 3, 1);
        double b = b4 > bh ? b4 : bh;
        if (b4 > bw4k) bw4k = b4;
        if (bh > bwhuge) bwhuge = bh;
        double g = ig_cpu_measure_sgemm_gflops(1024, 1024, 1024, 3);
        double gm = ig_cpu_measure_sgemm_gflops(prompt_len, c->d_ffn, c->d_model, 3);
        if (b > bw) bw = b;
        if (g > gemm) gemm = g;
        if (gm > gemm_model) gemm_model = gm;
    }
    printf("memory read bandwidth   %8.2f GB/s  (4 KiB pages %.2f, huge pages %.2f)\n", bw, bw4k,
           bwhuge);
    printf("sgemm 1024^3            %8.2f GFLOP/s\n", gemm);
    printf("sgemm %dx%dx%d     %8.2f GFLOP/s\n", prompt_len, c->d_ffn, c->d_model, gemm_model);

    /* Prompt: token ids drawn from the vocabulary with a fixed generator. */
    int32_t *prompt = malloc((size_t)prompt_len * sizeof(int32_t));
    int32_t *next = malloc((size_t)max_batch * sizeof(int32_t));
    ig_seq_tokens *seqs = malloc((size_t)max_batch * sizeof *seqs);
    float *logits = malloc((size_t)max_batch * (size_t)c->vocab * sizeof(float));
    if (!prompt || !next || !seqs || !logits) {
        fprintf(stderr, "bench_engine: out of memory\n");
        return 2;
    }
    ig_rng rng;
    ig_rng_seed(&rng, 1234);
    for (int i = 0; i < prompt_len; i++)
        prompt[i] = (int32_t)(ig_rng_next(&rng) % (uint64_t)c->vocab);

    /* Prefill: one prompt of prompt_len tokens, logits of the last row. */
    double best_prefill = 1e30;
    for (int r = 0; r < reps; r++) {
        ig_engine_seq_reset(e, 0);
        ig_seq_tokens s = {0, prompt, prompt_len};
        double t0 = ig_time_s();
        if (ig_engine_forward(e, &s, 1, &err) != IG_OK) {
            fprintf(stderr, "bench_engine: %s\n", err.msg);
            return 2;
        }
        ig_engine_logits(e, prompt_len - 1, 1, logits);
        double t = ig_time_s() - t0;
        if (t < best_prefill) best_prefill = t;
    }
    double prefill_flops = forward_flops(m, prompt_len, 0, 1);
    double prefill_gflops = prefill_flops / best_prefill / 1e9;
    printf("prefill %d tokens        %8.3f s  %8.1f tok/s  %6.1f GFLOP/s  (%.0f%% of sgemm 1024^3, "
           "%.0f%% of sgemm at the model's shape)\n",
           prompt_len, best_prefill, prompt_len / best_prefill, prefill_gflops,
           100 * prefill_gflops / gemm, 100 * prefill_gflops / gemm_model);

    /* Decode: every sequence holds a prompt_len/4 prefix, then `steps` single-token steps. */
    int prefix = prompt_len / 4 > 0 ? prompt_len / 4 : 1;
    double decode_tps[16] = {0}, decode_step_s[16] = {0};
    for (int bi = 0; bi < n_batches; bi++) {
        int B = batches[bi];
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            for (int s = 0; s < B; s++) {
                ig_engine_seq_reset(e, s);
                ig_seq_tokens q = {s, prompt, prefix};
                if (ig_engine_forward(e, &q, 1, &err) != IG_OK) {
                    fprintf(stderr, "bench_engine: %s\n", err.msg);
                    return 2;
                }
            }
            for (int s = 0; s < B; s++) next[s] = prompt[(prefix + s) % prompt_len];
            double t0 = ig_time_s();
            for (int step = 0; step < steps; step++) {
                for (int s = 0; s < B; s++) {
                    seqs[s].slot = s;
                    seqs[s].tokens = &next[s];
                    seqs[s].n_tokens = 1;
                }
                if (ig_engine_forward(e, seqs, B, &err) != IG_OK) {
                    fprintf(stderr, "bench_engine: %s\n", err.msg);
                    return 2;
                }
                ig_engine_logits(e, 0, B, logits);
                for (int s = 0; s < B; s++)
                    next[s] = ig_sample_argmax(logits + (size_t)s * (size_t)c->vocab, c->vocab);
            }
            double t = (ig_time_s() - t0) / steps;
            if (t < best) best = t;
        }
        decode_step_s[bi] = best;
        decode_tps[bi] = B / best;
        printf("decode batch %-3d         %8.4f s/step  %8.1f tok/s\n", B, best, B / best);
    }
    double bytes_tok = (double)ig_model_decode_bytes_per_token(m);
    double bound_s = bytes_tok / (bw * 1e9);
    double step1 = 0;
    for (int bi = 0; bi < n_batches; bi++)
        if (batches[bi] == 1) step1 = decode_step_s[bi];
    double ratio = step1 > 0 ? step1 / bound_s : NAN;
    printf("weights read per token  %8.1f MB  -> bandwidth bound %.4f s/token\n", bytes_tok / 1e6,
           bound_s);
    if (step1 > 0)
        printf("decode_bound_ratio      %8.2f  (batch-1 step time / bound; goal <= 1.5)\n", ratio);
    printf("prefill_gemm_fraction   %8.2f  (goal >= 0.5)\n", prefill_gflops / gemm);

    json_object *o = json_object_new_object();
    json_object_object_add(o, "model", json_object_new_string(model_path));
    json_object_object_add(o, "dtype",
                           json_object_new_string(keep_stored ? "stored" : ig_dtype_name(dtype)));
    json_object_object_add(o, "dtypes", json_object_new_string(desc));
    json_object_object_add(o, "act_quant", json_object_new_string(act8 ? "q8" : "none"));
    json_object_object_add(o, "weights_mem",
                           json_object_new_string(ig_model_copies_mapped(m) ? "copy" : "map"));
    json_object_object_add(o, "weight_huge_bytes",
                           json_object_new_int64((int64_t)ig_model_huge_bytes(m)));
    json_object_object_add(o, "threads", json_object_new_int(threads));
    json_object_object_add(o, "simd", json_object_new_string(ig_cpu_simd_name()));
    json_object_object_add(o, "bandwidth_gbps", json_object_new_double(bw));
    json_object_object_add(o, "bandwidth_4k_gbps", json_object_new_double(bw4k));
    json_object_object_add(o, "bandwidth_huge_gbps", json_object_new_double(bwhuge));
    json_object_object_add(o, "sgemm_gflops", json_object_new_double(gemm));
    json_object_object_add(o, "sgemm_model_shape_gflops", json_object_new_double(gemm_model));
    json_object_object_add(o, "prompt_len", json_object_new_int(prompt_len));
    json_object_object_add(o, "prefill_s", json_object_new_double(best_prefill));
    json_object_object_add(o, "prefill_tokens_per_s",
                           json_object_new_double(prompt_len / best_prefill));
    json_object_object_add(o, "prefill_gflops", json_object_new_double(prefill_gflops));
    json_object_object_add(o, "prefill_gemm_fraction",
                           json_object_new_double(prefill_gflops / gemm));
    json_object *jd = json_object_new_array();
    for (int bi = 0; bi < n_batches; bi++) {
        json_object *d = json_object_new_object();
        json_object_object_add(d, "batch", json_object_new_int(batches[bi]));
        json_object_object_add(d, "step_s", json_object_new_double(decode_step_s[bi]));
        json_object_object_add(d, "tokens_per_s", json_object_new_double(decode_tps[bi]));
        json_object_array_add(jd, d);
    }
    json_object_object_add(o, "decode", jd);
    json_object_object_add(o, "decode_context", json_object_new_int(prefix));
    json_object_object_add(o, "weight_bytes_per_token", json_object_new_double(bytes_tok));
    json_object_object_add(o, "bandwidth_bound_s", json_object_new_double(bound_s));
    if (step1 > 0) json_object_object_add(o, "decode_bound_ratio", json_object_new_double(ratio));
    FILE *f = fopen(json_path, "w");
    if (!f) {
        fprintf(stderr, "bench_engine: cannot write %s\n", json_path);
    } else {
        fprintf(f, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
        fclose(f);
        printf("wrote %s\n", json_path);
    }
    json_object_put(o);
    free(prompt);
    free(next);
    free(seqs);
    free(logits);
    ig_engine_free(e);
    ig_model_free(m);
    return 0;
}
