/* igen bench-decode: decode throughput of one configuration (model, KV policy, batch, prompt and
 * generation lengths) with the KV traffic and time breakdown of the run. Prints a summary and
 * writes one JSON object (stdout with --json, or a file with --out). */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/base/log.h"
#include "core/base/mapfile.h"
#include "kernels/cpu/cpu_kernels.h"
#include "offload/wstream.h"

static void help(void) {
    printf(
        "usage: igen bench-decode [--model PATH] [--policy NAME [--set K=V ...]] [--batch B]\n"
        "                         [--prompt-len L] [--gen-len G] [--text FILE] [--json] [--out "
        "F]\n\n"
        "Prefills B prompts of L tokens (consecutive pieces of --text, or random tokens), then\n"
        "decodes G tokens per sequence greedily in lock-step with the KV policy active, and\n"
        "reports prefill time, decode tokens/s, KV bytes moved and resident, and where the time\n"
        "went.\n\n"
        "  --batch B         sequences decoded together (default 8)\n"
        "  --prompt-len L    prompt tokens per sequence (default 512)\n"
        "  --gen-len G       generated tokens per sequence (default 32)\n"
        "  --text FILE       prompt source (default: WikiText-2 test from ../shared/data when\n"
        "                    present); --random uses random token ids instead\n"
        "  --random          random prompt tokens\n"
        "  --warmup N        decode steps run before timing starts (default 2)\n"
        "  --json            print the JSON object on stdout\n"
        "  --out FILE        also write the JSON object to FILE\n" IG_CLI_POLICY_HELP
            IG_CLI_OFFLOAD_HELP IG_CLI_COMMON_HELP);
}

int ig_cmd_bench_decode(int argc, char **argv) {
    enum { O_BATCH = IG_OPT_FIRST_FREE, O_PLEN, O_GLEN, O_TEXT, O_RANDOM, O_WARMUP, O_JSON, O_OUT };
    static const struct option longopts[] = {
        IG_CLI_COMMON_LONGOPTS,
        IG_CLI_POLICY_LONGOPTS,
        IG_CLI_OFFLOAD_LONGOPTS,
        {"batch", required_argument, NULL, O_BATCH},
        {"prompt-len", required_argument, NULL, O_PLEN},
        {"gen-len", required_argument, NULL, O_GLEN},
        {"text", required_argument, NULL, O_TEXT},
        {"random", no_argument, NULL, O_RANDOM},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"json", no_argument, NULL, O_JSON},
        {"out", required_argument, NULL, O_OUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ig_cli_common com;
    ig_cli_common_init(&com);
    ig_cli_policy pol;
    ig_cli_policy_init(&pol);
    ig_cli_offload off;
    ig_cli_offload_init(&off);
    long batch = 8, plen = 512, glen = 32, warmup = 2;
    const char *text_path = NULL, *out_path = NULL;
    int random_tokens = 0, json = 0, opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = ig_cli_model_opt(&com, &pol, &off, opt, optarg);
        if (r < 0) return IG_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_BATCH:
            if (ig_cli_parse_int("bench-decode", "--batch", optarg, 1, 256, &batch))
                return IG_EXIT_ERROR;
            break;
        case O_PLEN:
            if (ig_cli_parse_int("bench-decode", "--prompt-len", optarg, 1, 1 << 20, &plen))
                return IG_EXIT_ERROR;
            break;
        case O_GLEN:
            if (ig_cli_parse_int("bench-decode", "--gen-len", optarg, 1, 1 << 20, &glen))
                return IG_EXIT_ERROR;
            break;
        case O_WARMUP:
            if (ig_cli_parse_int("bench-decode", "--warmup", optarg, 0, 1 << 20, &warmup))
                return IG_EXIT_ERROR;
            break;
        case O_TEXT:
            text_path = optarg;
            break;
        case O_RANDOM:
            random_tokens = 1;
            break;
        case O_JSON:
            json = 1;
            break;
        case O_OUT:
            out_path = optarg;
            break;
        default:
            fprintf(stderr, "igen bench-decode: see 'igen bench-decode --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("bench-decode", argc, argv)) return IG_EXIT_ERROR;
    if (ig_cli_policy_resolve("bench-decode", &pol) != 0) return IG_EXIT_ERROR;
    static char default_text[4096];
    if (!text_path && !random_tokens) {
        snprintf(default_text, sizeof default_text,
                 "%s/../shared/data/wikitext-2-raw/wiki.test.raw", IG_SOURCE_DIR);
        if (ig_path_exists(default_text))
            text_path = default_text;
        else
            random_tokens = 1;
    }
    ig_model *m = ig_cli_load_model(&com);
    if (!m) {
        ig_cli_policy_free(&pol);
        return IG_EXIT_ERROR;
    }
    const ig_model_config *cfg = ig_model_get_config(m);
    if (!ig_model_tokenizer(m)) random_tokens = 1; /* dummy weights: token ids only */
    int rc = IG_EXIT_ERROR;
    ig_error err;
    ig_error_clear(&err);
    int32_t *ids = NULL, *prompt = NULL;
    size_t n_ids = 0;
    ig_engine *e = NULL;
    char *text = NULL;
    if (plen + glen > cfg->max_pos) {
        fprintf(stderr, "igen bench-decode: %ld + %ld tokens exceed the model's context of %d\n",
                plen, glen, cfg->max_pos);
        goto out;
    }
    size_t need = (size_t)batch * (size_t)plen;
    prompt = malloc(need * sizeof(int32_t));
    if (!prompt) {
        fprintf(stderr, "igen bench-decode: out of memory\n");
        goto out;
    }
    if (!random_tokens) {
        size_t len = 0;
        if (ig_read_file(text_path, &text, &len, &err) != IG_OK ||
            ig_tokenizer_encode(ig_model_tokenizer(m), text, len, 0, &ids, &n_ids, &err) != IG_OK) {
            ig_cli_error("bench-decode", &err);
            goto out;
        }
        if (n_ids < need) {
            fprintf(stderr, "igen bench-decode: %s has %zu tokens, fewer than %ld x %ld\n",
                    text_path, n_ids, batch, plen);
            goto out;
        }
        memcpy(prompt, ids, need * sizeof(int32_t));
    } else {
        ig_rng rng;
        ig_rng_seed(&rng, 42);
        for (size_t i = 0; i < need; i++)
            prompt[i] = (int32_t)(ig_rng_next(&rng) % (uint64_t)cfg->vocab);
    }
    ig_engine_opts eo = {.max_seqs = (int)batch,
                         .max_ctx = (int)(plen + glen + warmup),
                         .max_batch_tokens = (int)(plen > batch ? plen : batch),
                         .threads = com.threads};
    ig_cli_policy_apply(&pol, &eo);
    eo.backend = ig_cli_backend();
    eo.cuda_f32_weights = ig_cli_cuda_f32();
    if (ig_cli_offload_setup("bench-decode", &off, m, (int)batch, (int)plen, (int)(glen + warmup),
                             &pol, &eo) != 0)
        goto out;
    if (ig_engine_create(m, &eo, &e, &err) != IG_OK) {
        ig_cli_error("bench-decode", &err);
        goto out;
    }
    ig_decode_measure dm;
    if (ig_cli_measure_decode(e, off.ws, prompt, (int)batch, (int)plen, (int)glen, (int)warmup,
                              com.quiet ? NULL : "bench-decode", &dm, &err) != IG_OK) {
        ig_cli_error("bench-decode", &err);
        goto out;
    }
    double prefill_s = dm.prefill_s, decode_s = dm.decode_s;
    double tps = (double)batch * (double)glen / decode_s;
    ig_engine_stats es = dm.es;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "model", json_object_new_string(ig_model_path(m)));
    json_object_object_add(o, "dtype", json_object_new_string(ig_dtype_name(ig_model_dtype(m))));
    json_object_object_add(o, "threads", json_object_new_int(ig_cpu_get_threads()));
    json_object_object_add(o, "act_quant", json_object_new_string(com.act8 ? "q8" : "none"));
    json_object_object_add(o, "weights_mem",
                           json_object_new_string(ig_model_copies_mapped(m) ? "copy" : "map"));
    json_object_object_add(o, "weight_mapped_bytes",
                           json_object_new_int64((int64_t)ig_model_mapped_bytes(m)));
    json_object_object_add(o, "weight_arena_bytes",
                           json_object_new_int64((int64_t)ig_model_arena_bytes(m)));
    json_object_object_add(o, "weight_huge_bytes",
                           json_object_new_int64((int64_t)ig_model_huge_bytes(m)));
    json_object_object_add(o, "batch", json_object_new_int((int)batch));
    json_object_object_add(o, "prompt_len", json_object_new_int((int)plen));
    json_object_object_add(o, "gen_len", json_object_new_int((int)glen));
    json_object_object_add(o, "prompt_source",
                           json_object_new_string(random_tokens ? "random" : text_path));
    json_object_object_add(o, "prefill_s", json_object_new_double(prefill_s));
    json_object_object_add(o, "decode_s", json_object_new_double(decode_s));
    json_object_object_add(o, "decode_tokens_per_s", json_object_new_double(tps));
    json_object_object_add(o, "time_linear_s", json_object_new_double(es.linear_s));
    json_object_object_add(o, "time_attention_total_s", json_object_new_double(es.attention_s));
    json_object_object_add(o, "time_logits_s", json_object_new_double(es.logits_s));
    json_object_object_add(o, "time_other_s", json_object_new_double(es.other_s));
    json_object_object_add(o, "gpu_batch", json_object_new_int(off.gpu_batch));
    json_object_object_add(o, "act_h2d_bytes", json_object_new_double(es.act_h2d_bytes));
    json_object_object_add(o, "act_d2h_bytes", json_object_new_double(es.act_d2h_bytes));
    json_object_object_add(o, "act_disk_read_bytes",
                           json_object_new_double(es.act_disk_read_bytes));
    json_object_object_add(o, "act_disk_write_bytes",
                           json_object_new_double(es.act_disk_write_bytes));
    ig_cli_policy_json(&pol, e, o);
    ig_cli_offload_json(&off, o);
    const char *js = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    if (json) printf("%s\n", js);
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f || fprintf(f, "%s\n", js) < 0 || fclose(f) != 0) {
            fprintf(stderr, "igen bench-decode: cannot write %s\n", out_path);
            json_object_put(o);
            goto out;
        }
    }
    if (!json) {
        printf("bench-decode: %s, policy %s, batch %ld, prompt %ld, gen %ld, %d threads%s\n",
               ig_model_name(m), pol.ops ? pol.ops->name : "none", batch, plen, glen,
               ig_cpu_get_threads(), com.act8 ? ", int8 activations (--act-quant q8)" : "");
        char mem[160];
        printf("  weights: %s\n", ig_model_weights_mem_desc(m, mem, sizeof mem));
        printf("  prefill %.2f s; decode %.2f s = %.2f tokens/s\n", prefill_s, decode_s, tps);
        printf("  time: linear %.2f s, attention+KV %.2f s, lm_head %.2f s, other %.2f s\n",
               es.linear_s, es.attention_s, es.logits_s, es.other_s);
        if (pol.ops) {
            printf("  ");
            ig_cli_policy_print(&pol, e, stdout);
        }
        if (off.active) {
            printf("  ");
            ig_cli_offload_print(&off, stdout);
        }
    }
    json_object_put(o);
    rc = 0;
out:
    ig_engine_free(e);
    ig_cli_offload_free(&off);
    free(ids);
    free(text);
    free(prompt);
    ig_model_free(m);
    ig_cli_policy_free(&pol);
    return rc;
}
