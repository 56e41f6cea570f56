/* bench_overlap: how well weight streaming overlaps with compute on the CPU backend. The default
 * model's weights are placed 100% in host memory and streamed layer by layer into the device region
 * through the link model at several bandwidths, with overlap on and off. For each configuration it
 * reports the decode step time against max(compute, transfer) (1.0 = perfect overlap) and against
 * compute + transfer (what no overlap costs), where compute is the step time of the same run with
 * every weight on the device and transfer is the measured time of the step's weight loads. It also
 * reports the link model's accuracy: the measured time of the streamed loads and of single
 * throttled copies against the time the model prescribes (1.0 = exact; the tests assert only that
 * no copy is faster and none wildly slower, since a loaded machine wakes the throttle late). Prints
 * tables and writes JSON; never asserts on time. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "core/engine/engine.h"
#include "core/base/log.h"
#include "core/model/model.h"
#include "offload/link.h"
#include "offload/placement.h"
#include "offload/wstream.h"

static void help(void) {
    printf(
        "usage: bench_overlap [--model PATH] [--threads N] [--dtype T] [--batch B]\n"
        "                     [--prompt-len L] [--steps S] [--links 2,4,8,16] [--json FILE]\n"
        "                     [--copy-bytes N] [--copy-repeats R] [--copy-only]\n\n"
        "Decode step time with the weights streamed from host memory through the link model\n"
        "(bandwidths in GB/s, 'off' = memory speed), overlap on and off, against the compute-only\n"
        "step (weights on the device) measured in the same run, and the link model's accuracy:\n"
        "the streamed loads' measured time over the time the model prescribes ('xfer/model'), and\n"
        "single throttled copies of N bytes each way, measured over modelled.\n\n"
        "  --model PATH      model (default: the installed SmolLM2-135M)\n"
        "  --threads N       compute threads (default: all cores)\n"
        "  --dtype T         weight storage f32|f16|bf16 (default f32)\n"
        "  --batch B         sequences decoded together (default 8)\n"
        "  --prompt-len L    prompt tokens per sequence (default 128)\n"
        "  --steps S         decode steps timed (default 16)\n"
        "  --links LIST      link bandwidths in GB/s (default off,16,8,4,2), or full link specs\n"
        "                    (KEY=VALUE,...) split on ';', e.g. 'h2d=0.01,d2h=0.01,lat=20;off'\n"
        "  --copy-bytes N    bytes per throttled copy in the link table (default 4000000)\n"
        "  --copy-repeats R  copies per link and direction (default 5)\n"
        "  --copy-only       only the link copy table (no model is loaded)\n"
        "  --json FILE       write the results as JSON (default bench_overlap.json)\n\n"
        "The figures behind test_wstream's link checks:\n"
        "  bench_overlap --copy-only --links 'h2d=0.1,d2h=0.2,lat=100'\n"
        "  bench_overlap --model tests/fixtures/tiny_opt --batch 2 --prompt-len 11 --steps 6 \\\n"
        "      --links 'h2d=0.01,d2h=0.01,lat=20'\n");
}

typedef struct result {
    double step_s, transfer_s, wait_s, bytes, modelled_s;
} result;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* R throttled copies of n bytes each way through `link`: measured against modelled, printed (link
 * column w wide) and added to arr. */
static void link_copies(const char *name, int w, const ig_link_model *link, size_t n, int R,
                        json_object *arr) {
    char *a = malloc(n), *b = malloc(n);
    double *t = malloc((size_t)R * sizeof *t);
    if (!a || !b || !t) {
        fprintf(stderr, "bench_overlap: out of memory for %zu-byte copies\n", n);
        free(a);
        free(b);
        free(t);
        return;
    }
    memset(a, 7, n);
    memset(b, 0, n); /* first-touch page faults are not part of a link's time */
    for (int dir = 0; dir < 2; dir++) {
        double want = ig_link_time(link, (ig_link_dir)dir, n);
        for (int i = 0; i < R; i++) t[i] = ig_link_copy(link, (ig_link_dir)dir, b, a, n);
        qsort(t, (size_t)R, sizeof *t, cmp_double);
        double med = R % 2 ? t[R / 2] : 0.5 * (t[R / 2 - 1] + t[R / 2]);
        printf("%-*s %-4s %10.3f %10.3f %10.3f %10.3f %12.4f\n", w, name, dir ? "d2h" : "h2d",
               want * 1e3, t[0] * 1e3, med * 1e3, t[R - 1] * 1e3, med / want);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "link", json_object_new_string(name));
        json_object_object_add(o, "dir", json_object_new_string(dir ? "d2h" : "h2d"));
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t)n));
        json_object_object_add(o, "repeats", json_object_new_int(R));
        json_object_object_add(o, "modelled_s", json_object_new_double(want));
        json_object_object_add(o, "best_s", json_object_new_double(t[0]));
        json_object_object_add(o, "median_s", json_object_new_double(med));
        json_object_object_add(o, "worst_s", json_object_new_double(t[R - 1]));
        json_object_object_add(o, "median_over_modelled", json_object_new_double(med / want));
        json_object_array_add(arr, o);
    }
    free(a);
    free(b);
    free(t);
}

/* Prefill B prompts, then time S decode steps; the weights from ws (NULL: in place). */
static int run(const ig_model *m, ig_wstream *ws, int threads, int B, int L, int S, result *r) {
    const ig_model_config *c = ig_model_get_config(m);
    ig_engine_opts o = {.max_seqs = B,
                        .max_ctx = L + S + 4,
                        .max_batch_tokens = B * L,
                        .threads = threads,
                        .weights = ws};
    ig_engine *e = NULL;
    ig_error err;
    if (ig_engine_create(m, &o, &e, &err) != IG_OK) {
        fprintf(stderr, "bench_overlap: %s\n", err.msg);
        return -1;
    }
    int32_t *toks = malloc((size_t)B * (size_t)(L + S + 2) * sizeof *toks);
    ig_seq_tokens *seqs = malloc((size_t)B * sizeof *seqs);
    for (int i = 0; i < B * (L + S + 2); i++) toks[i] = (int32_t)((i * 7919 + 13) % c->vocab);
    for (int b = 0; b < B; b++) seqs[b] = (ig_seq_tokens){b, toks + (size_t)b * (L + S + 2), L};
    int ok = ig_engine_forward(e, seqs, B, &err) == IG_OK;
    for (int step = -2; ok && step < S; step++) { /* two untimed steps */
        if (step == 0) {
            if (ws) ig_wstream_reset_stats(ws);
            r->step_s = ig_time_s();
        }
        for (int b = 0; b < B; b++)
            seqs[b] = (ig_seq_tokens){b, toks + (size_t)b * (L + S + 2) + L + 2 + step, 1};
        ok = ig_engine_forward(e, seqs, B, &err) == IG_OK;
    }
    r->step_s = (ig_time_s() - r->step_s) / S;
    if (ws) {
        ig_wstream_stats st = ig_wstream_get_stats(ws);
        r->transfer_s = st.transfer_s / S;
        r->wait_s = st.wait_s / S;
        r->bytes = st.h2d_bytes / S;
        r->modelled_s = st.link_modelled_s / S;
    }
    if (!ok) fprintf(stderr, "bench_overlap: %s\n", err.msg);
    ig_engine_free(e);
    free(toks);
    free(seqs);
    return ok ? 0 : -1;
}

/* The decode steps with the weights streamed through each link in `links` (split on sep), overlap
 * on and off, against the compute-only step: a table, and "runs" in root. */
static int stream_runs(const char *model_path, ig_dtype dtype, int threads, int B, int L, int S,
                       const char *links, const char *sep, int w, json_object *root) {
    ig_error err;
    char *list = NULL, *save = NULL;
    int rc = 0;
    if (!model_path && !(model_path = ig_model_default_path(&err))) {
        fprintf(stderr, "bench_overlap: %s\n", err.msg);
        return 2;
    }
    ig_model *m = NULL;
    ig_model_load_opts lo = {dtype, 1, 0, IG_WMEM_AUTO};
    if (ig_model_load(model_path, &lo, &m, &err) != IG_OK) {
        fprintf(stderr, "bench_overlap: %s\n", err.msg);
        return 2;
    }
    int nl = ig_model_get_config(m)->n_layer;
    ig_weight_placement p = {
        nl, calloc((size_t)nl * IG_WT_COUNT, sizeof(ig_tier_ref)), {IG_TIER_DEVICE, -1}};
    for (int i = 0; i < nl * IG_WT_COUNT; i++) p.tensor[i] = (ig_tier_ref){IG_TIER_HOST, -1};
    result base = {0};
    if (run(m, NULL, threads, B, L, S, &base) != 0) {
        free(p.tensor);
        ig_model_free(m);
        return 2;
    }
    printf("\ncompute only (weights on the device): %.2f ms per decode step (batch %d, prompt "
           "%d)\n\n",
           base.step_s * 1e3, B, L);
    printf("%-*s %-8s %10s %12s %10s %10s %12s %12s %14s\n", w, "link", "overlap", "step ms",
           "transfer ms", "model ms", "wait ms", "xfer/model", "step/max", "step/(sum)");
    json_object *arr = json_object_new_array();
    json_object_object_add(root, "model", json_object_new_string(model_path));
    json_object_object_add(root, "batch", json_object_new_int(B));
    json_object_object_add(root, "prompt_len", json_object_new_int(L));
    json_object_object_add(root, "steps", json_object_new_int(S));
    json_object_object_add(root, "compute_step_s", json_object_new_double(base.step_s));
    list = strdup(links);
    for (char *tok = strtok_r(list, sep, &save); tok; tok = strtok_r(NULL, sep, &save)) {
        ig_link_model link;
        if (ig_link_parse(tok, &link, &err) != IG_OK) {
            fprintf(stderr, "bench_overlap: --links: %s\n", err.msg);
            rc = 2;
            break;
        }
        for (int overlap = 1; overlap >= 0; overlap--) {
            ig_wstream_opts wo = {m, &p, NULL, &link, overlap, 0, 0, NULL};
            ig_wstream *ws = NULL;
            result r = {0};
            if (ig_wstream_create(&wo, &ws, &err) != IG_OK) {
                fprintf(stderr, "bench_overlap: %s\n", err.msg);
                rc = 2;
                break;
            }
            if (run(m, ws, threads, B, L, S, &r) != 0) rc = 2;
            ig_wstream_free(ws);
            double mx = r.transfer_s > base.step_s ? r.transfer_s : base.step_s;
            double sum = r.transfer_s + base.step_s;
            char ratio[32] = "-"; /* link off: nothing modelled */
            if (r.modelled_s > 0)
                snprintf(ratio, sizeof ratio, "%.4f", r.transfer_s / r.modelled_s);
            printf("%-*s %-8s %10.2f %12.2f %10.2f %10.2f %12s %12.3f %14.3f\n", w, tok,
                   overlap ? "on" : "off", r.step_s * 1e3, r.transfer_s * 1e3, r.modelled_s * 1e3,
                   r.wait_s * 1e3, ratio, r.step_s / mx, r.step_s / sum);
            json_object *o = json_object_new_object();
            json_object_object_add(o, "link", json_object_new_string(tok));
            json_object_object_add(o, "link_gbps",
                                   json_object_new_double(link.on ? link.gbps[0] : 0));
            json_object_object_add(o, "overlap", json_object_new_boolean(overlap));
            json_object_object_add(o, "step_s", json_object_new_double(r.step_s));
            json_object_object_add(o, "transfer_s", json_object_new_double(r.transfer_s));
            json_object_object_add(o, "modelled_transfer_s", json_object_new_double(r.modelled_s));
            json_object_object_add(
                o, "transfer_over_modelled",
                r.modelled_s > 0 ? json_object_new_double(r.transfer_s / r.modelled_s) : NULL);
            json_object_object_add(o, "wait_s", json_object_new_double(r.wait_s));
            json_object_object_add(o, "h2d_bytes_per_step", json_object_new_double(r.bytes));
            json_object_object_add(o, "step_over_max", json_object_new_double(r.step_s / mx));
            json_object_object_add(o, "step_over_sum", json_object_new_double(r.step_s / sum));
            json_object_array_add(arr, o);
        }
    }
    free(list);
    json_object_object_add(root, "runs", arr);
    free(p.tensor);
    ig_model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    enum {
        O_MODEL = 1,
        O_THREADS,
        O_DTYPE,
        O_BATCH,
        O_PLEN,
        O_STEPS,
        O_LINKS,
        O_JSON,
        O_COPY_BYTES,
        O_COPY_REPEATS,
        O_COPY_ONLY
    };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"threads", required_argument, NULL, O_THREADS},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"batch", required_argument, NULL, O_BATCH},
        {"prompt-len", required_argument, NULL, O_PLEN},
        {"steps", required_argument, NULL, O_STEPS},
        {"links", required_argument, NULL, O_LINKS},
        {"json", required_argument, NULL, O_JSON},
        {"copy-bytes", required_argument, NULL, O_COPY_BYTES},
        {"copy-repeats", required_argument, NULL, O_COPY_REPEATS},
        {"copy-only", no_argument, NULL, O_COPY_ONLY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *json_path = "bench_overlap.json", *links = "off,16,8,4,2";
    int threads = 0, B = 8, L = 128, S = 16, copy_repeats = 5, copy_only = 0;
    long copy_bytes = 4000000;
    ig_dtype dtype = IG_DTYPE_F32;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MODEL:
            model_path = optarg;
            break;
        case O_THREADS:
            threads = (int)ig_bench_long("bench_overlap", "--threads", optarg, 1, 1024);
            break;
        case O_DTYPE: {
            int t = ig_dtype_from_name(optarg);
            if (t < 0 || !ig_dtype_is_weight_storage((ig_dtype)t)) {
                fprintf(stderr,
                        "bench_overlap: --dtype %s: expected f32, f16, bf16, q4g64, q8g64, q4_0, "
                        "q4_1 or q8_0\n",
                        optarg);
                return 2;
            }
            dtype = (ig_dtype)t;
            break;
        }
        case O_BATCH:
            B = (int)ig_bench_long("bench_overlap", "--batch", optarg, 1, 4096);
            break;
        case O_PLEN:
            L = (int)ig_bench_long("bench_overlap", "--prompt-len", optarg, 1, 1 << 20);
            break;
        case O_STEPS:
            S = (int)ig_bench_long("bench_overlap", "--steps", optarg, 1, 1 << 20);
            break;
        case O_LINKS:
            links = optarg;
            break;
        case O_JSON:
            json_path = optarg;
            break;
        case O_COPY_BYTES:
            copy_bytes = ig_bench_long("bench_overlap", "--copy-bytes", optarg, 1, 1L << 32);
            break;
        case O_COPY_REPEATS:
            copy_repeats = (int)ig_bench_long("bench_overlap", "--copy-repeats", optarg, 1, 10000);
            break;
        case O_COPY_ONLY:
            copy_only = 1;
            break;
        case 'h':
            help();
            return 0;
        default:
            help();
            return 2;
        }
    }
    if (B < 1 || L < 1 || S < 1) {
        fprintf(stderr, "bench_overlap: --batch, --prompt-len and --steps must be >= 1\n");
        return 2;
    }
    /* --links: bandwidths split on ',', or full link specs (with commas of their own) on ';' */
    const char *sep = strchr(links, ';') || strchr(links, '=') ? ";" : ",";
    int w = 8; /* the link column's width: the longest spec */
    char *list = strdup(links), *save = NULL;
    for (char *tok = strtok_r(list, sep, &save); tok; tok = strtok_r(NULL, sep, &save))
        if ((int)strlen(tok) > w) w = (int)strlen(tok);
    free(list);
    json_object *root = json_object_new_object();
    int rc = 0;
    ig_error err;

    /* the link model alone: single throttled copies, measured over modelled */
    json_object *copies = json_object_new_array();
    printf("link copies of %ld bytes, %d each way, ms (median/model 1.0 = exact)\n", copy_bytes,
           copy_repeats);
    printf("%-*s %-4s %10s %10s %10s %10s %12s\n", w, "link", "dir", "modelled", "best", "median",
           "worst", "median/model");
    list = strdup(links);
    for (char *tok = strtok_r(list, sep, &save); tok; tok = strtok_r(NULL, sep, &save)) {
        ig_link_model link;
        if (ig_link_parse(tok, &link, &err) != IG_OK) {
            fprintf(stderr, "bench_overlap: --links: %s\n", err.msg);
            rc = 2;
            break;
        }
        if (!link.on) continue; /* memory speed: nothing modelled */
        link_copies(tok, w, &link, (size_t)copy_bytes, copy_repeats, copies);
    }
    free(list);
    json_object_object_add(root, "copy_bytes", json_object_new_int64(copy_bytes));
    json_object_object_add(root, "link_copies", copies);
    if (!copy_only && !rc)
        rc = stream_runs(model_path, dtype, threads, B, L, S, links, sep, w, root);
    if (json_object_to_file_ext(json_path, root, JSON_C_TO_STRING_PRETTY) != 0) {
        fprintf(stderr, "bench_overlap: cannot write %s\n", json_path);
        rc = 2;
    } else {
        printf("\nwrote %s\n", json_path);
    }
    json_object_put(root);
    return rc;
}
