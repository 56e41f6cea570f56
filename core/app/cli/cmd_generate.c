/* igen generate: text generation from one or more prompts (a batch of different lengths). */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/engine/generate.h"
#include "core/base/log.h"
#include "kernels/cpu/cpu_kernels.h"

#define MAX_PROMPTS 256

static void help(void) {
    printf("usage: igen generate [--model PATH] [--prompt TEXT ...] [-n N] [--seed S]\n"
           "                     [--temperature T] [--top-p P] [--batch B] [--chat] [--json]\n\n"
           "Generates a continuation of each prompt. Several --prompt options form one batch of\n"
           "sequences of different lengths; --batch B repeats the prompt(s) up to B sequences\n"
           "(sequence i samples with seed S+i).\n\n"
           "  --prompt TEXT       prompt text (repeatable; default \"The capital of France is\")\n"
           "  -n, --max-new N     tokens to generate per sequence (default 32)\n"
           "  --seed S            random seed (default 0)\n"
           "  --temperature T     0 = greedy (default), else sample softmax(logits / T)\n"
           "  --top-p P           nucleus sampling mass (default 1.0 = off)\n"
           "  --batch B           number of sequences (default: number of prompts)\n"
           "  --chat              wrap each prompt in the model's ChatML user/assistant turns\n"
           "  --ignore-eos        keep generating after the end-of-sequence token\n"
           "  --json              print one JSON object with ids, texts and "
           "timings\n" IG_CLI_OFFLOAD_HELP IG_CLI_COMMON_HELP);
}

typedef struct stream_state {
    const ig_tokenizer *tok;
    int stream;
    int32_t hide; /* the end-of-sequence token that stops generation is not printed */
} stream_state;

static void on_token(void *user, int seq, int32_t token) {
    stream_state *s = user;
    if (!s->stream || seq != 0 || token == s->hide) return;
    size_t len = 0;
    const char *b = ig_tokenizer_token_bytes(s->tok, token, &len);
    if (b) fwrite(b, 1, len, stdout);
    fflush(stdout);
}

static char *chat_wrap(const char *prompt) {
    static const char *pre = "<|im_start|>user\n", *post = "<|im_end|>\n<|im_start|>assistant\n";
    size_t n = strlen(pre) + strlen(prompt) + strlen(post) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", pre, prompt, post);
    return s;
}

int ig_cmd_generate(int argc, char **argv) {
    enum { O_PROMPT = IG_OPT_FIRST_FREE, O_SEED, O_TEMP, O_TOPP, O_BATCH, O_CHAT, O_NOEOS, O_JSON };
    static const struct option longopts[] = {
        IG_CLI_COMMON_LONGOPTS,
        IG_CLI_OFFLOAD_LONGOPTS,
        {"prompt", required_argument, NULL, O_PROMPT},
        {"max-new", required_argument, NULL, 'n'},
        {"seed", required_argument, NULL, O_SEED},
        {"temperature", required_argument, NULL, O_TEMP},
        {"top-p", required_argument, NULL, O_TOPP},
        {"batch", required_argument, NULL, O_BATCH},
        {"chat", no_argument, NULL, O_CHAT},
        {"ignore-eos", no_argument, NULL, O_NOEOS},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ig_cli_common com;
    ig_cli_common_init(&com);
    ig_cli_offload off;
    ig_cli_offload_init(&off);
    const char *prompts[MAX_PROMPTS];
    int n_prompts = 0, chat = 0, json = 0, ignore_eos = 0, opt;
    long n_new = 32, seed = 0, batch = 0;
    double temperature = 0.0, top_p = 1.0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "hn:", longopts, NULL)) != -1) {
        int r = ig_cli_model_opt(&com, NULL, &off, opt, optarg);
        if (r < 0) return IG_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_PROMPT:
            if (n_prompts == MAX_PROMPTS) {
                fprintf(stderr, "igen generate: at most %d prompts\n", MAX_PROMPTS);
                return IG_EXIT_ERROR;
            }
            prompts[n_prompts++] = optarg;
            break;
        case 'n':
            if (ig_cli_parse_int("generate", "-n", optarg, 0, 1 << 20, &n_new))
                return IG_EXIT_ERROR;
            break;
        case O_SEED:
            if (ig_cli_parse_int("generate", "--seed", optarg, 0, 0x7fffffffL, &seed))
                return IG_EXIT_ERROR;
            break;
        case O_TEMP:
            if (ig_cli_parse_float("generate", "--temperature", optarg, 0, 100, &temperature))
                return IG_EXIT_ERROR;
            break;
        case O_TOPP:
            if (ig_cli_parse_float("generate", "--top-p", optarg, 1e-6, 1, &top_p))
                return IG_EXIT_ERROR;
            break;
        case O_BATCH:
            if (ig_cli_parse_int("generate", "--batch", optarg, 1, MAX_PROMPTS, &batch))
                return IG_EXIT_ERROR;
            break;
        case O_CHAT:
            chat = 1;
            break;
        case O_NOEOS:
            ignore_eos = 1;
            break;
        case O_JSON:
            json = 1;
            break;
        default:
            fprintf(stderr, "igen generate: see 'igen generate --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("generate", argc, argv)) return IG_EXIT_ERROR;
    if (n_prompts == 0) prompts[n_prompts++] = "The capital of France is";
    int n_seq = batch > 0 ? (int)batch : n_prompts;

    ig_model *m = ig_cli_load_model(&com);
    if (!m) return IG_EXIT_ERROR;
    const ig_tokenizer *tok = ig_model_tokenizer(m);
    if (!tok) {
        fprintf(stderr,
                "igen generate: %s has no tokenizer (dummy weights): use 'igen "
                "bench-decode --random' for speed\n",
                ig_model_name(m));
        ig_model_free(m);
        return IG_EXIT_ERROR;
    }
    const ig_model_config *cfg = ig_model_get_config(m);
    ig_error err;
    ig_error_clear(&err);
    int rc = IG_EXIT_ERROR;
    int32_t *ids[MAX_PROMPTS] = {0};
    int n_ids[MAX_PROMPTS] = {0};
    ig_gen_result *res = calloc((size_t)n_seq, sizeof *res);
    ig_engine *e = NULL;
    int max_prompt = 0, total_prompt = 0;
    if (!res) goto out;
    if (chat && ig_tokenizer_find(tok, "<|im_start|>") < 0) {
        fprintf(stderr,
                "igen generate: --chat: this model's vocabulary has no <|im_start|> token\n");
        goto out;
    }
    for (int i = 0; i < n_prompts; i++) {
        char *wrapped = chat ? chat_wrap(prompts[i]) : NULL;
        const char *p = wrapped ? wrapped : prompts[i];
        size_t n = 0;
        ig_status st =
            ig_tokenizer_encode(tok, p, strlen(p), ig_tokenizer_adds_bos(tok), &ids[i], &n, &err);
        free(wrapped);
        if (st != IG_OK) {
            ig_cli_error("generate", &err);
            goto out;
        }
        if (n == 0) {
            fprintf(stderr, "igen generate: prompt %d is empty after tokenization\n", i);
            goto out;
        }
        n_ids[i] = (int)n;
    }
    const int32_t *seq_prompts[MAX_PROMPTS];
    int seq_n[MAX_PROMPTS];
    for (int i = 0; i < n_seq; i++) {
        seq_prompts[i] = ids[i % n_prompts];
        seq_n[i] = n_ids[i % n_prompts];
        if (seq_n[i] > max_prompt) max_prompt = seq_n[i];
        total_prompt += seq_n[i];
    }
    if ((long)max_prompt + n_new > cfg->max_pos) {
        fprintf(stderr,
                "igen generate: %d prompt tokens + %ld new exceed the model's context of %d\n",
                max_prompt, n_new, cfg->max_pos);
        goto out;
    }
    int batch_tokens = total_prompt < 2048 ? total_prompt : 2048;
    if (batch_tokens < n_seq) batch_tokens = n_seq;
    ig_engine_opts eo = {.max_seqs = n_seq,
                         .max_ctx = max_prompt + (int)n_new,
                         .max_batch_tokens = batch_tokens,
                         .threads = com.threads,
                         .backend = ig_cli_backend(),
                         .cuda_f32_weights = ig_cli_cuda_f32()};
    if (ig_cli_offload_setup("generate", &off, m, n_seq, max_prompt, (int)n_new + 1, NULL, &eo) !=
        0)
        goto out;
    if (ig_engine_create(m, &eo, &e, &err) != IG_OK) {
        ig_cli_error("generate", &err);
        goto out;
    }
    ig_gen_params gp = {(int)n_new, (float)temperature, (float)top_p, (uint64_t)seed, !ignore_eos};
    stream_state ss = {tok, !json && n_seq == 1, ignore_eos ? -1 : cfg->eos};
    if (ss.stream && !chat) { /* plain continuation: show it after its prompt */
        fwrite(prompts[0], 1, strlen(prompts[0]), stdout);
        fflush(stdout);
    }
    ig_gen_timing tm;
    if (ig_generate(e, seq_prompts, seq_n, n_seq, &gp, on_token, &ss, res, &tm, &err) != IG_OK) {
        if (ss.stream) fputc('\n', stdout);
        ig_cli_error("generate", &err);
        goto out;
    }
    if (ss.stream) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    json_object *jo = json ? json_object_new_object() : NULL;
    json_object *jseqs = json ? json_object_new_array() : NULL;
    for (int i = 0; i < n_seq; i++) {
        char *textout = NULL;
        /* The text leaves out the end-of-sequence token that stopped the sequence. */
        size_t n_text = (size_t)res[i].n_tokens - (res[i].stopped_at_eos ? 1 : 0);
        if (ig_tokenizer_decode(tok, res[i].tokens, n_text, &textout, &err) != IG_OK) {
            ig_cli_error("generate", &err);
            if (jo) json_object_put(jo);
            if (jseqs) json_object_put(jseqs);
            goto out;
        }
        if (json) {
            json_object *s = json_object_new_object();
            json_object_object_add(s, "prompt", json_object_new_string(prompts[i % n_prompts]));
            json_object *pi = json_object_new_array();
            for (int k = 0; k < seq_n[i]; k++)
                json_object_array_add(pi, json_object_new_int(seq_prompts[i][k]));
            json_object_object_add(s, "prompt_ids", pi);
            json_object *gi = json_object_new_array();
            for (int k = 0; k < res[i].n_tokens; k++)
                json_object_array_add(gi, json_object_new_int(res[i].tokens[k]));
            json_object_object_add(s, "ids", gi);
            json_object_object_add(s, "text", json_object_new_string(textout));
            json_object_object_add(s, "stopped_at_eos",
                                   json_object_new_boolean(res[i].stopped_at_eos));
            json_object_array_add(jseqs, s);
        } else if (!ss.stream) {
            printf("[%d] %s%s\n", i, prompts[i % n_prompts], textout);
        }
        free(textout);
    }
    double pre_tps = tm.prefill_s > 0 ? (double)tm.prefill_tokens / tm.prefill_s : 0;
    double dec_tps = tm.decode_s > 0 ? (double)tm.decode_tokens / tm.decode_s : 0;
    if (json) {
        json_object_object_add(jo, "model", json_object_new_string(ig_model_path(m)));
        json_object_object_add(jo, "sequences", jseqs);
        json_object_object_add(jo, "prefill_tokens", json_object_new_int64(tm.prefill_tokens));
        json_object_object_add(jo, "prefill_s", json_object_new_double(tm.prefill_s));
        json_object_object_add(jo, "decode_tokens", json_object_new_int64(tm.decode_tokens));
        json_object_object_add(jo, "decode_s", json_object_new_double(tm.decode_s));
        json_object_object_add(jo, "decode_tokens_per_s", json_object_new_double(dec_tps));
        json_object_object_add(jo, "threads", json_object_new_int(ig_cpu_get_threads()));
        ig_cli_offload_json(&off, jo);
        printf("%s\n", json_object_to_json_string_ext(jo, JSON_C_TO_STRING_PLAIN));
        json_object_put(jo);
    }
    if (!com.quiet)
        fprintf(stderr,
                "generate: prefill %lld tokens in %.3f s (%.1f tok/s); decode %lld tokens in "
                "%.3f s (%.1f tok/s, %d sequences)\n",
                (long long)tm.prefill_tokens, tm.prefill_s, pre_tps, (long long)tm.decode_tokens,
                tm.decode_s, dec_tps, n_seq);
    if (!com.quiet && off.active) ig_cli_offload_print(&off, stderr);
    rc = 0;
out:
    if (res) ig_gen_result_free(res, n_seq);
    free(res);
    for (int i = 0; i < n_prompts; i++) free(ids[i]);
    ig_engine_free(e);
    ig_cli_offload_free(&off);
    ig_model_free(m);
    return rc;
}
