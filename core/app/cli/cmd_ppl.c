/* igen ppl: perplexity of a model on a text file (windowed, batched over windows). */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/engine/ppl.h"
#include "core/base/log.h"
#include "core/base/mapfile.h"
#include "kernels/cpu/cpu_kernels.h"

static void help(void) {
    printf(
        "usage: igen ppl --text FILE [--model PATH] [--ctx N] [--max-tokens M] [--windows W]\n"
        "                [--batch B] [--json] [--prefill P] [--policy NAME [--set K=V ...]]\n\n"
        "Perplexity of a model on a text file. The text is tokenized whole, cut into\n"
        "non-overlapping windows of --ctx tokens (an incomplete tail is dropped), each window is\n"
        "evaluated from an empty KV cache, and ppl = exp(mean NLL of all predicted tokens, i.e.\n"
        "positions 1..ctx-1 of each window).\n\n"
        "  --text FILE       UTF-8 text to evaluate (required)\n"
        "  --ctx N           window length in tokens (default 1024, at most the model's context)\n"
        "  --max-tokens M    use only the first M tokens of the text\n"
        "  --windows W       evaluate only the first W windows\n"
        "  --batch B         windows run together as one batch (default 4)\n"
        "  --json            print one JSON object (ppl, tokens, nll_sum, windows, ...) on "
        "stdout\n"
        "  --prefill P       decode mode: each window's first P tokens are a prompt, the rest are\n"
        "                    decoded one token per step (teacher-forced) with the KV policy\n"
        "                    active; the NLL counts the decode steps' predictions "
        "only\n"
        "  --fetch-profile FILE  with --prefill and a policy: write the policy's fetch profile\n"
        "                    (fraction of the KV rows read per step by context length, every\n"
        "                    128 tokens) to FILE, for the cost model "
        "(docs/planner.md)\n" IG_CLI_POLICY_HELP IG_CLI_OFFLOAD_HELP IG_CLI_COMMON_HELP);
}

typedef struct progress_state {
    int quiet, tty;
    int64_t tokens_per_window;
} progress_state;

static void on_progress(void *user, int done, int total, double elapsed) {
    progress_state *p = user;
    if (p->quiet) return;
    double rate = elapsed > 0 ? (double)done * (double)p->tokens_per_window / elapsed : 0;
    double eta = done > 0 ? elapsed * (total - done) / done : 0;
    fprintf(stderr, "%sppl: window %d/%d  %.0f tok/s  elapsed %.1f s  ETA %.1f s%s",
            p->tty ? "\r" : "", done, total, rate, elapsed, eta, p->tty ? "  " : "\n");
    if (p->tty && done == total) fputc('\n', stderr);
    fflush(stderr);
}

int ig_cmd_ppl(int argc, char **argv) {
    enum {
        O_TEXT = IG_OPT_FIRST_FREE,
        O_CTX,
        O_MAXTOK,
        O_WINDOWS,
        O_BATCH,
        O_JSON,
        O_PREFILL,
        O_FETCHPROF
    };
    static const struct option longopts[] = {
        IG_CLI_COMMON_LONGOPTS,
        IG_CLI_POLICY_LONGOPTS,
        IG_CLI_OFFLOAD_LONGOPTS,
        {"prefill", required_argument, NULL, O_PREFILL},
        {"text", required_argument, NULL, O_TEXT},
        {"ctx", required_argument, NULL, O_CTX},
        {"max-tokens", required_argument, NULL, O_MAXTOK},
        {"windows", required_argument, NULL, O_WINDOWS},
        {"batch", required_argument, NULL, O_BATCH},
        {"json", no_argument, NULL, O_JSON},
        {"fetch-profile", required_argument, NULL, O_FETCHPROF},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ig_cli_common com;
    ig_cli_common_init(&com);
    const char *text_path = NULL;
    long ctx = 0, max_tokens = 0, windows = 0, batch = 4, prefill = 0;
    ig_cli_policy pol;
    ig_cli_policy_init(&pol);
    ig_cli_offload off;
    ig_cli_offload_init(&off);
    int json = 0, opt;
    const char *fetch_profile = NULL;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = ig_cli_model_opt(&com, &pol, &off, opt, optarg);
        if (r < 0) return IG_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_TEXT:
            text_path = optarg;
            break;
        case O_PREFILL:
            if (ig_cli_parse_int("ppl", "--prefill", optarg, 1, 1 << 20, &prefill))
                return IG_EXIT_ERROR;
            break;
        case O_CTX:
            if (ig_cli_parse_int("ppl", "--ctx", optarg, 2, 1 << 20, &ctx)) return IG_EXIT_ERROR;
            break;
        case O_MAXTOK:
            if (ig_cli_parse_int("ppl", "--max-tokens", optarg, 2, 1L << 40, &max_tokens))
                return IG_EXIT_ERROR;
            break;
        case O_WINDOWS:
            if (ig_cli_parse_int("ppl", "--windows", optarg, 1, 1L << 30, &windows))
                return IG_EXIT_ERROR;
            break;
        case O_BATCH:
            if (ig_cli_parse_int("ppl", "--batch", optarg, 1, 256, &batch)) return IG_EXIT_ERROR;
            break;
        case O_JSON:
            json = 1;
            break;
        case O_FETCHPROF:
            fetch_profile = optarg;
            break;
        default:
            fprintf(stderr, "igen ppl: see 'igen ppl --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("ppl", argc, argv)) return IG_EXIT_ERROR;
    if (!text_path) {
        fprintf(stderr, "igen ppl: --text FILE is required (see 'igen ppl --help')\n");
        return IG_EXIT_ERROR;
    }
    if (fetch_profile && (!pol.name || prefill <= 0)) {
        fprintf(stderr, "igen ppl: --fetch-profile needs --policy and --prefill (the profile is "
                        "of the decode steps)\n");
        return IG_EXIT_ERROR;
    }
    if (ig_cli_policy_resolve("ppl", &pol) != 0) return IG_EXIT_ERROR;
    ig_error err;
    ig_error_clear(&err);
    char *text = NULL;
    size_t text_len = 0;
    if (ig_read_file(text_path, &text, &text_len, &err) != IG_OK) {
        ig_cli_error("ppl", &err);
        ig_cli_policy_free(&pol);
        return IG_EXIT_ERROR;
    }
    if (text_len == 0) {
        fprintf(stderr, "igen ppl: %s: the text file is empty\n", text_path);
        free(text);
        ig_cli_policy_free(&pol);
        return IG_EXIT_ERROR;
    }
    ig_model *m = ig_cli_load_model(&com);
    if (!m) {
        free(text);
        ig_cli_policy_free(&pol);
        return IG_EXIT_ERROR;
    }
    const ig_model_config *cfg = ig_model_get_config(m);
    int rc = IG_EXIT_ERROR;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ig_engine *e = NULL;
    ig_ppl_result res = {0};
    const ig_tokenizer *tok = ig_model_tokenizer(m);
    double t_tok = ig_time_s();
    if (ig_tokenizer_encode(tok, text, text_len, ig_tokenizer_adds_bos(tok), &ids, &n_ids, &err) !=
        IG_OK) {
        ig_cli_error("ppl", &err);
        goto out;
    }
    t_tok = ig_time_s() - t_tok;
    if (ctx == 0) ctx = cfg->max_pos < 1024 ? cfg->max_pos : 1024;
    if (ctx > cfg->max_pos) {
        fprintf(stderr, "igen ppl: --ctx %ld exceeds the model's context length %d\n", ctx,
                cfg->max_pos);
        goto out;
    }
    if (max_tokens > 0 && (size_t)max_tokens < n_ids) n_ids = (size_t)max_tokens;
    int64_t avail = (int64_t)n_ids / ctx;
    if (avail < 1) {
        fprintf(stderr, "igen ppl: %s: %zu tokens, fewer than one window of %ld\n", text_path,
                n_ids, ctx);
        goto out;
    }
    int64_t n_win = windows > 0 && windows < avail ? windows : avail;
    if (batch > n_win) batch = n_win;
    if (prefill > 0 && prefill >= ctx - 1) {
        fprintf(stderr, "igen ppl: --prefill %ld leaves nothing to decode in windows of %ld\n",
                prefill, ctx);
        goto out;
    }
    int64_t batch_tokens = batch * (prefill > 0 ? prefill : ctx);
    if (prefill == 0 && batch_tokens > 8192) batch_tokens = 8192 > ctx ? 8192 : ctx;
    ig_engine_opts eo = {.max_seqs = (int)batch,
                         .max_ctx = (int)ctx,
                         .max_batch_tokens = (int)batch_tokens,
                         .threads = com.threads,
                         .backend = ig_cli_backend(),
                         .cuda_f32_weights = ig_cli_cuda_f32()};
    ig_cli_policy_apply(&pol, &eo);
    if (ig_cli_offload_setup("ppl", &off, m, (int)batch, (int)(prefill > 0 ? prefill : ctx),
                             (int)(prefill > 0 ? ctx - prefill : 1), &pol, &eo) != 0)
        goto out;
    if (ig_engine_create(m, &eo, &e, &err) != IG_OK) {
        ig_cli_error("ppl", &err);
        goto out;
    }
    if (!com.quiet)
        fprintf(stderr,
                "ppl: %s: %zu tokens (tokenized in %.2f s), %lld windows of %ld, batch %ld\n",
                text_path, n_ids, t_tok, (long long)n_win, ctx, batch);
    progress_state ps = {com.quiet, ig_cli_stderr_is_tty(), ctx};
    ig_ppl_opts po = {(int)ctx, (int)batch, (int)n_win, (int)prefill};
    if (ig_ppl_run(e, ids, (int64_t)n_ids, &po, on_progress, &ps, &res, &err) != IG_OK) {
        ig_cli_error("ppl", &err);
        goto out;
    }
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "ppl", json_object_new_double(res.ppl));
        json_object_object_add(o, "nll_sum", json_object_new_double(res.nll_sum));
        json_object_object_add(o, "tokens", json_object_new_int64(res.tokens));
        json_object_object_add(o, "windows", json_object_new_int(res.windows));
        json_object_object_add(o, "ctx", json_object_new_int(res.ctx));
        json_object_object_add(o, "act_quant", json_object_new_string(com.act8 ? "q8" : "none"));
        json_object_object_add(o, "text", json_object_new_string(text_path));
        json_object_object_add(o, "text_tokens", json_object_new_int64((int64_t)n_ids));
        json_object_object_add(o, "model", json_object_new_string(ig_model_path(m)));
        json_object_object_add(o, "dtype",
                               json_object_new_string(ig_dtype_name(ig_model_dtype(m))));
        json_object_object_add(o, "threads", json_object_new_int(ig_cpu_get_threads()));
        json_object_object_add(o, "seconds", json_object_new_double(res.seconds));
        json_object_object_add(
            o, "tokens_per_s",
            json_object_new_double((double)res.windows * (double)res.ctx / res.seconds));
        json_object *w = json_object_new_array();
        for (int i = 0; i < res.windows; i++)
            json_object_array_add(w, json_object_new_double(res.window_nll[i]));
        json_object_object_add(o, "window_nll", w);
        json_object_object_add(o, "prefill", json_object_new_int((int)prefill));
        ig_cli_policy_json(&pol, e, o);
        ig_cli_offload_json(&off, o);
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else {
        printf("ppl %.4f  (nll_sum %.4f over %lld predicted tokens, %d windows of %d, %.1f s)\n",
               res.ppl, res.nll_sum, (long long)res.tokens, res.windows, res.ctx, res.seconds);
        ig_cli_policy_print(&pol, e, stdout);
        ig_cli_offload_print(&off, stdout);
    }
    if (fetch_profile) {
        ig_fetch_profile fp;
        ig_cli_fetch_profile_of(&pol, e, &fp);
        snprintf(fp.model, sizeof fp.model, "%s", ig_model_name(m));
        snprintf(fp.text, sizeof fp.text, "%s: %lld windows of %ld, prefill %ld", text_path,
                 (long long)res.windows, ctx, prefill);
        size_t o = 0;
        for (int i = 0; i < argc && o + 2 < sizeof fp.command; i++)
            o += (size_t)snprintf(fp.command + o, sizeof fp.command - o, "%s%s", i ? " " : "igen ",
                                  argv[i]);
        if (ig_fetch_profile_save(&fp, fetch_profile, &err) != IG_OK) {
            ig_cli_error("ppl", &err);
            goto out;
        }
        if (!com.quiet)
            fprintf(stderr, "ppl: wrote the fetch profile %s (%d points)\n", fetch_profile, fp.n);
    }
    rc = 0;
out:
    ig_ppl_result_free(&res);
    ig_engine_free(e);
    ig_cli_offload_free(&off);
    free(ids);
    ig_model_free(m);
    free(text);
    ig_cli_policy_free(&pol);
    return rc;
}
