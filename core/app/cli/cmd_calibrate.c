/* igen calibrate: InfiniGen's offline skewing. Runs the model over the first tokens of a text,
 * derives per layer and KV head the rotation that concentrates the queries' magnitude in a few
 * columns, and writes the skew file the infinigen policy loads (--set skew=FILE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/base/log.h"
#include "core/base/mapfile.h"
#include "core/engine/calibrate.h"
#include "policies/infinigen_skew.h"

static void help(void) {
    printf(
        "usage: igen calibrate --text FILE --out SKEW [--model PATH] [--tokens N] [--skip S]\n\n"
        "InfiniGen's skewing: runs the model (full attention) over N tokens of a text, collects\n"
        "each layer's queries and keys as attention sees them (Llama: after RoPE; OPT: projected,\n"
        "bias included), and writes per layer and KV head an orthogonal rotation A (the right\n"
        "singular vectors of the head's stacked queries, ordered by the product of the singular\n"
        "values of Q and K) to SKEW. Use it with --policy infinigen --set skew=SKEW. Calibrate on\n"
        "another text (or another part of it) than the one you evaluate on.\n\n"
        "  --text FILE       UTF-8 calibration text (required)\n"
        "  --out SKEW        skew file to write (required)\n"
        "  --tokens N        tokens to run (default 2048, the artifact's; at most the model's\n"
        "                    context)\n"
        "  --skip S          start S tokens into the text (default 0)\n" IG_CLI_COMMON_HELP);
}

typedef struct progress_state {
    int quiet, tty;
    double t0;
} progress_state;

static void on_progress(void *user, int64_t done, int64_t total) {
    progress_state *p = user;
    if (p->quiet) return;
    fprintf(stderr, "%scalibrate: %lld/%lld tokens  %.1f s%s", p->tty ? "\r" : "", (long long)done,
            (long long)total, ig_time_s() - p->t0, p->tty ? "  " : "\n");
    if (p->tty && done == total) fputc('\n', stderr);
    fflush(stderr);
}

int ig_cmd_calibrate(int argc, char **argv) {
    enum { O_TEXT = IG_OPT_FIRST_FREE, O_OUT, O_TOKENS, O_SKIP };
    static const struct option longopts[] = {
        IG_CLI_COMMON_LONGOPTS,
        {"text", required_argument, NULL, O_TEXT},
        {"out", required_argument, NULL, O_OUT},
        {"tokens", required_argument, NULL, O_TOKENS},
        {"skip", required_argument, NULL, O_SKIP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ig_cli_common com;
    ig_cli_common_init(&com);
    const char *text_path = NULL, *out_path = NULL;
    long tokens = 2048, skip = 0;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = ig_cli_common_opt(&com, opt, optarg);
        if (r < 0) return IG_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_TEXT:
            text_path = optarg;
            break;
        case O_OUT:
            out_path = optarg;
            break;
        case O_TOKENS:
            if (ig_cli_parse_int("calibrate", "--tokens", optarg, 1, 1 << 20, &tokens))
                return IG_EXIT_ERROR;
            break;
        case O_SKIP:
            if (ig_cli_parse_int("calibrate", "--skip", optarg, 0, 1L << 40, &skip))
                return IG_EXIT_ERROR;
            break;
        default:
            fprintf(stderr, "igen calibrate: see 'igen calibrate --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("calibrate", argc, argv)) return IG_EXIT_ERROR;
    if (!text_path || !out_path) {
        fprintf(stderr, "igen calibrate: --text FILE and --out SKEW are required (see 'igen "
                        "calibrate --help')\n");
        return IG_EXIT_ERROR;
    }
    ig_error err;
    ig_error_clear(&err);
    char *text = NULL;
    size_t text_len = 0;
    if (ig_read_file(text_path, &text, &text_len, &err) != IG_OK) {
        ig_cli_error("calibrate", &err);
        return IG_EXIT_ERROR;
    }
    ig_model *m = ig_cli_load_model(&com);
    if (!m) {
        free(text);
        return IG_EXIT_ERROR;
    }
    const ig_model_config *cfg = ig_model_get_config(m);
    int rc = IG_EXIT_ERROR;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ig_skew *skew = NULL;
    const ig_tokenizer *tok = ig_model_tokenizer(m);
    if (ig_tokenizer_encode(tok, text, text_len, ig_tokenizer_adds_bos(tok), &ids, &n_ids, &err) !=
        IG_OK) {
        ig_cli_error("calibrate", &err);
        goto out;
    }
    if ((size_t)skip >= n_ids) {
        fprintf(stderr, "igen calibrate: %s: %zu tokens, nothing left after --skip %ld\n",
                text_path, n_ids, skip);
        goto out;
    }
    int64_t n = (int64_t)n_ids - skip;
    if (n > tokens) n = tokens;
    if (n > cfg->max_pos) {
        if (!com.quiet)
            fprintf(stderr, "calibrate: %lld tokens exceed the model's context; using %d\n",
                    (long long)n, cfg->max_pos);
        n = cfg->max_pos;
    }
    if (n < tokens && !com.quiet)
        fprintf(stderr, "calibrate: %s has only %lld tokens from --skip %ld on (asked %ld)\n",
                text_path, (long long)n, skip, tokens);
    if (!com.quiet)
        fprintf(stderr, "calibrate: %s: tokens %ld..%lld of %zu, %d layers x %d KV heads x %d\n",
                text_path, skip, (long long)(skip + n - 1), n_ids, cfg->n_layer, cfg->n_kv_head,
                cfg->head_dim);
    progress_state ps = {com.quiet, ig_cli_stderr_is_tty(), ig_time_s()};
    if (ig_calibrate_skew(m, ids + skip, n, 256, com.threads, on_progress, &ps, &skew, &err) !=
            IG_OK ||
        ig_skew_save(skew, out_path, &err) != IG_OK) {
        ig_cli_error("calibrate", &err);
        goto out;
    }
    /* How skewed the rotated queries are: the share of sum sigma_q^2 in the first 20% of the
     * rotated columns (1.0 would be a rank-k query space). */
    int k = cfg->head_dim / 5 > 0 ? cfg->head_dim / 5 : 1;
    double share = 0;
    size_t lg = (size_t)cfg->n_layer * (size_t)cfg->n_kv_head, hd = (size_t)cfg->head_dim;
    for (size_t i = 0; i < lg; i++) {
        double top = 0, all = 0;
        for (size_t c = 0; c < hd; c++) {
            double s2 = (double)skew->sigma_q[i * hd + c] * skew->sigma_q[i * hd + c];
            all += s2;
            if ((int)c < k) top += s2;
        }
        share += all > 0 ? top / all : 0;
    }
    printf("calibrate: wrote %s (%s, %d layers x %d KV heads x %d dims, %lld tokens, %.1f s); the "
           "first %d rotated columns hold %.1f%% of the query energy on average\n",
           out_path, ig_model_name(m), cfg->n_layer, cfg->n_kv_head, cfg->head_dim, (long long)n,
           ig_time_s() - ps.t0, k, 100 * share / (double)lg);
    rc = 0;
out:
    ig_skew_free(skew);
    free(ids);
    ig_model_free(m);
    free(text);
    return rc;
}
