/* igen eval: task accuracy (lm-evaluation-harness's few-shot tasks, LAMBADA, passkey retrieval,
 * RULER-style needle-in-a-haystack retrieval) with the KV policy active while the answers are
 * scored. Prompt building and scoring live in
 * core/app/eval; this file parses options, sizes the engine and prints. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/app/eval/eval.h"
#include "core/base/log.h"
#include "core/base/mapfile.h"
#include "kernels/cpu/cpu_kernels.h"

#define MAX_DEPTHS  64
#define MAX_LENGTHS 64

static void help(void) {
    printf(
        "usage: igen eval --task NAME [--model PATH] [--shots K] [--limit N] [--data DIR]\n"
        "                 [--seed S] [--batch B] [--prefill P] [--json]\n"
        "                 [--policy NAME [--set K=V ...]]\n"
        "       igen eval --task passkey [--length L] [--depth D[,D...]] [--seeds N] [...]\n"
        "       igen eval --task niah_single|niah_multikey|niah_multivalue [--haystack FILE]\n"
        "                 [--length L[,L...]] [--depth D[,D...]] [--seeds N] [...]\n\n"
        "Task accuracy scored as lm-evaluation-harness scores it (docs/eval.md), with every "
        "scored\n"
        "token predicted by a decode step, so that the KV policy's eviction and selection act on\n"
        "the answer: the context (few-shot examples + query) is the prompt, its last token and "
        "the\n"
        "continuation are fed one token per forward call.\n\n"
        "Tasks: copa, openbookqa, winogrande, piqa, rte (multiple choice: acc, acc_norm for\n"
        "openbookqa and piqa; WinoGrande scores the text after the blank given each option),\n"
        "lambada (last-word accuracy, greedy, and perplexity), passkey (a 5-digit key hidden in\n"
        "filler text, answered greedily; exact match), niah_single, niah_multikey,\n"
        "niah_multivalue (RULER's needle-in-a-haystack: 7-digit \"special magic numbers\" in a\n"
        "real text; one needle, one among 3 distractor keys, or 4 values of one key; exact\n"
        "match, or the fraction of the 4 values found and acc_all).\n\n"
        "  --task NAME       the task (required)\n"
        "  --shots K         few-shot examples per item (default 0, as lm-eval; the paper: 5)\n"
        "  --limit N         score only the first N items\n"
        "  --data DIR        the task's data folder (default: ../shared/data/tasks/NAME, or\n"
        "                    $IGEN_SHARED_DATA/tasks/NAME)\n"
        "  --seed S          few-shot sampling and passkey keys (default 1234, lm-eval's)\n"
        "  --batch B         sequences (choices of items) run together (default 16)\n"
        "  --prefill P       prefill only the first P context tokens and decode the rest too\n"
        "                    (default: the whole context but its last token)\n"
        "  --bos             prepend the tokenizer's BOS token (lm-eval does not by default)\n"
        "  --length L        passkey: prompt length in tokens (default 1024); niah: a list\n"
        "                    L[,L...]\n"
        "  --depth D[,D...]  passkey, niah: relative depth(s) of the key (of the asked needle)\n"
        "                    in [0, 1] (default 0.5)\n"
        "  --seeds N         passkey, niah: prompts per length and depth (default 10)\n"
        "  --haystack FILE   niah: the UTF-8 text the haystack is cut from (default:\n"
        "                    ../shared/data/wikitext-2-raw/wiki.test.raw beside the checkout)\n"
        "  --show            print the first item's requests (context | continuation, tokens) on\n"
        "                    stderr\n"
        "  --json            print one JSON object (acc, acc_stderr, n, task, policy, KV stats)\n"
        "                    on stdout\n" IG_CLI_POLICY_HELP IG_CLI_OFFLOAD_HELP
            IG_CLI_COMMON_HELP);
}

typedef struct progress_state {
    int quiet, tty;
    const char *task;
    int last_printed;
    double last_t;
} progress_state;

static void on_progress(void *user, int done, int total, double elapsed) {
    progress_state *p = user;
    if (p->quiet) return;
    /* Not a terminal: a line every 10% (and at the end), not one per item. */
    if (!p->tty && done < total && done - p->last_printed < (total + 9) / 10) return;
    if (p->tty && done < total && elapsed - p->last_t < 0.2) return;
    p->last_printed = done;
    p->last_t = elapsed;
    double rate = elapsed > 0 ? done / elapsed : 0;
    double eta = done > 0 ? elapsed * (total - done) / done : 0;
    fprintf(stderr, "%seval: %s item %d/%d  %.2f items/s  elapsed %.1f s  ETA %.1f s%s",
            p->tty ? "\r" : "", p->task, done, total, rate, elapsed, eta, p->tty ? "  " : "\n");
    if (p->tty && done == total) fputc('\n', stderr);
    fflush(stderr);
}

/* A comma-separated list of at most max numbers in [lo, hi] (whole numbers when integer). */
static int parse_list(const char *s, double lo, double hi, int integer, int max, double *out,
                      int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v >= lo && v <= hi) || (integer && v != (double)(long)v) || *n >= max)
            return -1;
        out[(*n)++] = v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return *n > 0 ? 0 : -1;
}

static int parse_depths(const char *s, double *d, int *n) {
    return parse_list(s, 0, 1, 0, MAX_DEPTHS, d, n);
}

static int parse_lengths(const char *s, int *l, int *n) {
    double v[MAX_LENGTHS];
    if (parse_list(s, 16, 1 << 20, 1, MAX_LENGTHS, v, n) != 0) return -1;
    for (int i = 0; i < *n; i++) l[i] = (int)v[i];
    return 0;
}

/* The niah text line and table: accuracy per depth (rows) and length (columns). */
static void print_niah(const char *task, const char *length_arg, const char *depth_arg, long seeds,
                       const ig_eval_result *res, const char *haystack) {
    printf("%s (length %s, depth %s, %ld seeds): acc %.4f +- %.4f  (n %d, %.1f s)\n", task,
           length_arg, depth_arg, seeds, res->acc, res->acc_stderr, res->n, res->seconds);
    if (res->has_acc_all)
        printf("  acc_all %.4f +- %.4f  (all values found)\n", res->acc_all, res->acc_all_stderr);
    printf("  haystack %s\n", haystack);
    int nl = 0, lens[MAX_LENGTHS];
    for (int c = 0; c < res->n_grid; c++) {
        int seen = 0;
        for (int k = 0; k < nl; k++) seen |= lens[k] == res->grid[c].length;
        if (!seen && nl < MAX_LENGTHS) lens[nl++] = res->grid[c].length;
    }
    printf("  acc%s by depth x length:\n  %-8s", res->has_acc_all ? " (mean fraction)" : "",
           "depth");
    for (int k = 0; k < nl; k++) printf(" %8d", lens[k]);
    printf("\n");
    /* Cells come lengths outer: the depths of the first length give the rows. */
    int nd = 0;
    for (int c = 0; c < res->n_grid && res->grid[c].length == res->grid[0].length; c++) nd++;
    for (int d = 0; d < nd; d++) {
        printf("  %-8g", res->grid[d].depth);
        for (int k = 0; k < nl; k++) {
            const ig_eval_cell *g = &res->grid[k * nd + d];
            if (k * nd + d < res->n_grid && g->n > 0)
                printf(" %8.4f", g->acc);
            else
                printf(" %8s", "-");
        }
        printf("\n");
    }
}

int ig_cmd_eval(int argc, char **argv) {
    enum {
        O_TASK = IG_OPT_FIRST_FREE,
        O_SHOTS,
        O_LIMIT,
        O_DATA,
        O_SEED,
        O_BATCH,
        O_PREFILL,
        O_JSON,
        O_BOS,
        O_LENGTH,
        O_DEPTH,
        O_SEEDS,
        O_SHOW,
        O_HAYSTACK,
    };
    static const struct option longopts[] = {
        IG_CLI_COMMON_LONGOPTS,
        IG_CLI_POLICY_LONGOPTS,
        IG_CLI_OFFLOAD_LONGOPTS,
        {"task", required_argument, NULL, O_TASK},
        {"shots", required_argument, NULL, O_SHOTS},
        {"limit", required_argument, NULL, O_LIMIT},
        {"data", required_argument, NULL, O_DATA},
        {"seed", required_argument, NULL, O_SEED},
        {"batch", required_argument, NULL, O_BATCH},
        {"prefill", required_argument, NULL, O_PREFILL},
        {"json", no_argument, NULL, O_JSON},
        {"bos", no_argument, NULL, O_BOS},
        {"length", required_argument, NULL, O_LENGTH},
        {"depth", required_argument, NULL, O_DEPTH},
        {"seeds", required_argument, NULL, O_SEEDS},
        {"show", no_argument, NULL, O_SHOW},
        {"haystack", required_argument, NULL, O_HAYSTACK},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ig_cli_common com;
    ig_cli_common_init(&com);
    ig_cli_policy pol;
    ig_cli_policy_init(&pol);
    ig_cli_offload off;
    ig_cli_offload_init(&off);
    const char *task = NULL, *data = NULL, *depth_arg = "0.5", *length_arg = "1024";
    const char *haystack = NULL;
    long shots = 0, limit = 0, seed = 1234, batch = 16, prefill = 0, length = 1024, seeds = 10;
    int json = 0, bos = 0, show = 0, opt;
    double depths[MAX_DEPTHS];
    int n_depths = 1;
    depths[0] = 0.5;
    int lengths[MAX_LENGTHS] = {1024}, n_lengths = 1;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = ig_cli_model_opt(&com, &pol, &off, opt, optarg);
        if (r < 0) return IG_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_TASK:
            task = optarg;
            break;
        case O_DATA:
            data = optarg;
            break;
        case O_JSON:
            json = 1;
            break;
        case O_BOS:
            bos = 1;
            break;
        case O_SHOW:
            show = 1;
            break;
        case O_SHOTS:
            if (ig_cli_parse_int("eval", "--shots", optarg, 0, 64, &shots)) return IG_EXIT_ERROR;
            break;
        case O_LIMIT:
            if (ig_cli_parse_int("eval", "--limit", optarg, 1, 1L << 30, &limit))
                return IG_EXIT_ERROR;
            break;
        case O_SEED:
            if (ig_cli_parse_int("eval", "--seed", optarg, 0, 1L << 62, &seed))
                return IG_EXIT_ERROR;
            break;
        case O_BATCH:
            if (ig_cli_parse_int("eval", "--batch", optarg, 1, 256, &batch)) return IG_EXIT_ERROR;
            break;
        case O_PREFILL:
            if (ig_cli_parse_int("eval", "--prefill", optarg, 1, 1 << 20, &prefill))
                return IG_EXIT_ERROR;
            break;
        case O_LENGTH:
            length_arg = optarg;
            if (parse_lengths(optarg, lengths, &n_lengths) != 0) {
                fprintf(stderr,
                        "igen eval: --length: '%s' is not a comma-separated list of token counts "
                        "in [16, %d] (at most %d)\n",
                        optarg, 1 << 20, MAX_LENGTHS);
                return IG_EXIT_ERROR;
            }
            length = lengths[0];
            break;
        case O_HAYSTACK:
            haystack = optarg;
            break;
        case O_SEEDS:
            if (ig_cli_parse_int("eval", "--seeds", optarg, 1, 100000, &seeds))
                return IG_EXIT_ERROR;
            break;
        case O_DEPTH:
            depth_arg = optarg;
            if (parse_depths(optarg, depths, &n_depths) != 0) {
                fprintf(stderr,
                        "igen eval: --depth: '%s' is not a comma-separated list of numbers in "
                        "[0, 1]\n",
                        optarg);
                return IG_EXIT_ERROR;
            }
            break;
        default:
            fprintf(stderr, "igen eval: see 'igen eval --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("eval", argc, argv)) return IG_EXIT_ERROR;
    if (!task) {
        fprintf(stderr, "igen eval: --task NAME is required (tasks: %s)\n", ig_eval_task_names());
        return IG_EXIT_ERROR;
    }
    if (!ig_eval_task_files(task)) {
        fprintf(stderr, "igen eval: unknown task '%s' (tasks: %s)\n", task, ig_eval_task_names());
        return IG_EXIT_ERROR;
    }
    int is_passkey = !strcmp(task, "passkey"), is_niah = ig_eval_task_is_niah(task);
    if (is_passkey && n_lengths > 1) {
        fprintf(stderr,
                "igen eval: --length: passkey takes one length ('%s'); the niah tasks take a "
                "list\n",
                length_arg);
        return IG_EXIT_ERROR;
    }
    char hay_buf[4096];
    if (is_niah && !haystack) {
        const char *env = getenv("IGEN_SHARED_DATA");
        if (env && *env)
            snprintf(hay_buf, sizeof hay_buf, "%s/wikitext-2-raw/wiki.test.raw", env);
        else
            snprintf(hay_buf, sizeof hay_buf, "%s/../shared/data/wikitext-2-raw/wiki.test.raw",
                     IG_SOURCE_DIR);
        if (!ig_path_exists(hay_buf)) {
            fprintf(stderr,
                    "igen eval: task %s needs a haystack text: --haystack FILE (the default %s "
                    "does not exist)\n",
                    task, hay_buf);
            return IG_EXIT_ERROR;
        }
        haystack = hay_buf;
    }
    char data_buf[4096];
    if (!data && !ig_eval_task_is_generated(task)) {
        const char *env = getenv("IGEN_SHARED_DATA");
        if (env && *env)
            snprintf(data_buf, sizeof data_buf, "%s/tasks/%s", env, task);
        else
            snprintf(data_buf, sizeof data_buf, "%s/../shared/data/tasks/%s", IG_SOURCE_DIR, task);
        data = data_buf;
    }
    if (ig_cli_policy_resolve("eval", &pol) != 0) return IG_EXIT_ERROR;
    ig_model *m = ig_cli_load_model(&com);
    if (!m) {
        ig_cli_policy_free(&pol);
        return IG_EXIT_ERROR;
    }
    const ig_model_config *cfg = ig_model_get_config(m);
    int rc = IG_EXIT_ERROR;
    ig_error err;
    ig_error_clear(&err);
    ig_eval_task *t = NULL;
    ig_engine *e = NULL;
    ig_eval_result res = {0};
    ig_eval_task_opts to = {.name = task,
                            .data_dir = data,
                            .shots = (int)shots,
                            .limit = (int)limit,
                            .seed = (uint64_t)seed,
                            .add_bos = bos,
                            .max_len = cfg->max_pos,
                            .passkey_length = (int)length,
                            .passkey_depths = depths,
                            .passkey_n_depths = n_depths,
                            .passkey_seeds = (int)seeds,
                            .niah_lengths = lengths,
                            .niah_n_lengths = n_lengths,
                            .haystack = haystack};
    double t_load = ig_time_s();
    if (ig_eval_task_load(&to, ig_model_tokenizer(m), &t, &err) != IG_OK) {
        ig_cli_error("eval", &err);
        goto out;
    }
    t_load = ig_time_s() - t_load;
    int max_tokens = ig_eval_task_max_tokens(t);
    if (max_tokens > cfg->max_pos) {
        fprintf(stderr,
                "igen eval: task %s needs %d tokens per sequence, more than the model's "
                "context length %d\n",
                task, max_tokens, cfg->max_pos);
        goto out;
    }
    if (show && ig_eval_task_n_items(t) > 0)
        for (int r = 0; r < ig_eval_task_n_requests(t, 0); r++) {
            int nc = 0, nn = 0;
            ig_eval_task_context_ids(t, 0, r, &nc);
            ig_eval_task_continuation_ids(t, 0, r, &nn);
            fprintf(stderr, "eval: item 0 request %d%s (%d + %d tokens):\n%s|%s|\n", r,
                    r == ig_eval_task_gold(t, 0) && strcmp(task, "lambada") ? " (gold)" : "", nc,
                    nn, ig_eval_task_context(t, 0, r), ig_eval_task_continuation(t, 0, r));
        }
    int n_req = ig_eval_task_total_requests(t);
    int slots = (int)batch < n_req ? (int)batch : n_req;
    if (slots < 1) slots = 1;
    ig_engine_opts eo = {.max_seqs = slots,
                         .max_ctx = max_tokens,
                         .max_batch_tokens = max_tokens > 2048 ? max_tokens : 2048,
                         .threads = com.threads,
                         .backend = ig_cli_backend(),
                         .cuda_f32_weights = ig_cli_cuda_f32()};
    ig_cli_policy_apply(&pol, &eo);
    /* placement as for prompts of the longest request, each continuation token one decode step */
    if (ig_cli_offload_setup("eval", &off, m, slots, max_tokens, 1, &pol, &eo) != 0) goto out;
    if (ig_engine_create(m, &eo, &e, &err) != IG_OK) {
        ig_cli_error("eval", &err);
        goto out;
    }
    if (!com.quiet)
        fprintf(stderr,
                "eval: %s: %d items, %d requests, %ld-shot, longest %d tokens (prepared in %.2f "
                "s), batch %d, policy %s\n",
                task, ig_eval_task_n_items(t), n_req, shots, max_tokens, t_load, slots,
                pol.ops ? pol.ops->name : "none");
    progress_state ps = {com.quiet, ig_cli_stderr_is_tty(), task, 0, 0};
    ig_eval_run_opts ro = {slots, (int)prefill};
    if (ig_eval_run(e, t, &ro, on_progress, &ps, &res, &err) != IG_OK) {
        ig_cli_error("eval", &err);
        goto out;
    }
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "task", json_object_new_string(task));
        json_object_object_add(o, "shots", json_object_new_int((int)shots));
        json_object_object_add(o, "n", json_object_new_int(res.n));
        json_object_object_add(o, "requests", json_object_new_int(res.requests));
        json_object_object_add(o, "acc", json_object_new_double(res.acc));
        json_object_object_add(o, "acc_stderr", json_object_new_double(res.acc_stderr));
        if (res.has_acc_norm) {
            json_object_object_add(o, "acc_norm", json_object_new_double(res.acc_norm));
            json_object_object_add(o, "acc_norm_stderr",
                                   json_object_new_double(res.acc_norm_stderr));
        }
        if (res.has_ppl) {
            json_object_object_add(o, "ppl", json_object_new_double(res.ppl));
            json_object_object_add(o, "ppl_stderr", json_object_new_double(res.ppl_stderr));
        }
        if (is_passkey) {
            json_object_object_add(o, "length", json_object_new_int((int)length));
            json_object *d = json_object_new_array();
            for (int i = 0; i < n_depths; i++)
                json_object_array_add(d, json_object_new_double(depths[i]));
            json_object_object_add(o, "depths", d);
            json_object_object_add(o, "seeds", json_object_new_int((int)seeds));
        } else if (is_niah) {
            json_object *l = json_object_new_array(), *d = json_object_new_array();
            for (int i = 0; i < n_lengths; i++)
                json_object_array_add(l, json_object_new_int(lengths[i]));
            json_object_object_add(o, "lengths", l);
            for (int i = 0; i < n_depths; i++)
                json_object_array_add(d, json_object_new_double(depths[i]));
            json_object_object_add(o, "depths", d);
            json_object_object_add(o, "seeds", json_object_new_int((int)seeds));
            json_object_object_add(o, "haystack", json_object_new_string(haystack));
            if (res.has_acc_all) {
                json_object_object_add(o, "acc_all", json_object_new_double(res.acc_all));
                json_object_object_add(o, "acc_all_stderr",
                                       json_object_new_double(res.acc_all_stderr));
            }
            json_object *g = json_object_new_array();
            for (int c = 0; c < res.n_grid; c++) {
                if (res.grid[c].n == 0) continue; /* cut off by --limit */
                json_object *cell = json_object_new_object();
                json_object_object_add(cell, "length", json_object_new_int(res.grid[c].length));
                json_object_object_add(cell, "depth", json_object_new_double(res.grid[c].depth));
                json_object_object_add(cell, "n", json_object_new_int(res.grid[c].n));
                json_object_object_add(cell, "acc", json_object_new_double(res.grid[c].acc));
                if (res.has_acc_all)
                    json_object_object_add(cell, "acc_all",
                                           json_object_new_double(res.grid[c].acc_all));
                json_object_array_add(g, cell);
            }
            json_object_object_add(o, "grid", g);
        } else {
            json_object_object_add(o, "data", json_object_new_string(data));
        }
        json_object_object_add(o, "limit", json_object_new_int((int)limit));
        json_object_object_add(o, "seed", json_object_new_int64(seed));
        json_object_object_add(o, "batch", json_object_new_int(slots));
        json_object_object_add(o, "prefill", json_object_new_int((int)prefill));
        json_object_object_add(o, "bos", json_object_new_boolean(bos));
        json_object_object_add(o, "prompt_tokens", json_object_new_int64(res.prompt_tokens));
        json_object_object_add(o, "decode_tokens", json_object_new_int64(res.decode_tokens));
        json_object_object_add(o, "scored_tokens", json_object_new_int64(res.scored_tokens));
        json_object_object_add(o, "model", json_object_new_string(ig_model_path(m)));
        json_object_object_add(o, "dtype",
                               json_object_new_string(ig_dtype_name(ig_model_dtype(m))));
        json_object_object_add(o, "threads", json_object_new_int(ig_cpu_get_threads()));
        json_object_object_add(o, "seconds", json_object_new_double(res.seconds));
        ig_cli_policy_json(&pol, e, o);
        ig_cli_offload_json(&off, o);
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else {
        if (is_passkey)
            printf("passkey (length %ld, depth %s, %ld seeds): acc %.4f +- %.4f  (n %d, %.1f s)\n",
                   length, depth_arg, seeds, res.acc, res.acc_stderr, res.n, res.seconds);
        else if (is_niah)
            print_niah(task, length_arg, depth_arg, seeds, &res, haystack);
        else
            printf("%s (%ld-shot): acc %.4f +- %.4f  (n %d, %.1f s)\n", task, shots, res.acc,
                   res.acc_stderr, res.n, res.seconds);
        if (res.has_acc_norm)
            printf("  acc_norm %.4f +- %.4f\n", res.acc_norm, res.acc_norm_stderr);
        if (res.has_ppl) printf("  ppl %.4f +- %.4f\n", res.ppl, res.ppl_stderr);
        ig_cli_policy_print(&pol, e, stdout);
        ig_cli_offload_print(&off, stdout);
    }
    rc = 0;
out:
    ig_eval_result_free(&res);
    ig_engine_free(e);
    ig_eval_task_free(t);
    ig_cli_offload_free(&off);
    ig_model_free(m);
    ig_cli_policy_free(&pol);
    return rc;
}
