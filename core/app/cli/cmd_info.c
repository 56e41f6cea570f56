/* igen info: a model's configuration, weight memory and KV-cache cost per token. */
#include <json-c/json.h>
#include <stdio.h>

#include "core/app/cli/cli.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"

static void help(void) {
    printf("usage: igen info [--model PATH] [--json]\n\n"
           "Prints the model's architecture, shapes, weight bytes and KV-cache bytes per token.\n\n"
           "  --json            print one JSON object\n" IG_CLI_COMMON_HELP);
}

int ig_cmd_info(int argc, char **argv) {
    enum { O_JSON = IG_OPT_FIRST_FREE };
    static const struct option longopts[] = {
        IG_CLI_COMMON_LONGOPTS,
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ig_cli_common com;
    ig_cli_common_init(&com);
    int json = 0, opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = ig_cli_common_opt(&com, opt, optarg);
        if (r < 0) return IG_EXIT_ERROR;
        if (r > 0) continue;
        if (opt == 'h') {
            help();
            return 0;
        }
        if (opt == O_JSON) {
            json = 1;
            continue;
        }
        fprintf(stderr, "igen info: see 'igen info --help'\n");
        return IG_EXIT_ERROR;
    }
    if (ig_cli_no_operands("info", argc, argv)) return IG_EXIT_ERROR;
    ig_model *m = ig_cli_load_model(&com);
    if (!m) return IG_EXIT_ERROR;
    const ig_model_config *c = ig_model_get_config(m);
    size_t kv_tok = 2 * (size_t)c->n_layer * (size_t)c->n_kv_head * (size_t)c->head_dim * 4;
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(ig_model_path(m)));
        json_object_object_add(o, "arch", json_object_new_string(ig_arch_name(c->arch)));
        json_object_object_add(o, "n_layer", json_object_new_int(c->n_layer));
        json_object_object_add(o, "d_model", json_object_new_int(c->d_model));
        json_object_object_add(o, "n_head", json_object_new_int(c->n_head));
        json_object_object_add(o, "n_kv_head", json_object_new_int(c->n_kv_head));
        json_object_object_add(o, "head_dim", json_object_new_int(c->head_dim));
        json_object_object_add(o, "d_ffn", json_object_new_int(c->d_ffn));
        json_object_object_add(o, "vocab", json_object_new_int(c->vocab));
        json_object_object_add(o, "max_pos", json_object_new_int(c->max_pos));
        char desc[160];
        json_object_object_add(o, "dtype",
                               json_object_new_string(ig_dtype_name(ig_model_dtype(m))));
        json_object_object_add(o, "dtypes",
                               json_object_new_string(ig_model_dtype_desc(m, desc, sizeof desc)));
        json_object_object_add(o, "decode_bytes_per_token",
                               json_object_new_int64((int64_t)ig_model_decode_bytes_per_token(m)));
        json_object_object_add(o, "weight_bytes",
                               json_object_new_int64((int64_t)ig_model_weight_bytes(m)));
        json_object_object_add(o, "kv_bytes_per_token", json_object_new_int64((int64_t)kv_tok));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else {
        printf("model        %s\n", ig_model_path(m));
        printf("arch         %s\n", ig_arch_name(c->arch));
        printf("layers       %d\n", c->n_layer);
        printf("d_model      %d\n", c->d_model);
        printf("heads        %d query, %d key/value (head_dim %d)\n", c->n_head, c->n_kv_head,
               c->head_dim);
        printf("ffn          %d\n", c->d_ffn);
        printf("vocab        %d\n", c->vocab);
        printf("context      %d\n", c->max_pos);
        if (c->arch == IG_ARCH_LLAMA) printf("rope theta   %g\n", (double)c->rope_theta);
        printf("norm eps     %g\n", (double)c->norm_eps);
        printf("tied lm_head %s\n", c->tied_embeddings ? "yes" : "no");
        char desc[160];
        printf("weights      %.1f MiB as %s; %.1f MB read per decoded token\n",
               (double)ig_model_weight_bytes(m) / 1048576.0,
               ig_model_dtype_desc(m, desc, sizeof desc),
               (double)ig_model_decode_bytes_per_token(m) / 1e6);
        printf("KV cache     %zu bytes per token (f32)\n", kv_tok);
        printf("threads      %d, SIMD %s\n", ig_cpu_get_threads(), ig_cpu_simd_name());
        char why[256] = "";
        ig_backend_info gi;
        int n_gpu = ig_backend_cuda_probe(why, sizeof why, &gi);
        if (n_gpu > 0)
            printf("GPU          %d device(s): %s, %.1f GiB\n", n_gpu, gi.device_name,
                   (double)gi.device_mem_bytes / (1 << 30));
        else
            printf("GPU          none (%s)\n", why);
    }
    ig_model_free(m);
    return 0;
}
