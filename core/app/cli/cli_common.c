/* Options shared by the igen subcommands, strict number parsing, error printing. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/app/cli/cli.h"
#include "core/base/log.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "offload/modelshape.h"

void ig_cli_common_init(ig_cli_common *c) {
    memset(c, 0, sizeof *c);
    c->dtype = IG_DTYPE_F32;
    c->backend = "auto";
    const char *env = getenv("IGEN_BACKEND"); /* the default of --backend */
    if (env && *env) {
        if (!strcmp(env, "auto") || !strcmp(env, "cpu") || !strcmp(env, "cuda"))
            c->backend = env;
        else
            fprintf(stderr, "igen: IGEN_BACKEND='%s' is not one of auto, cpu, cuda; using auto\n",
                    env);
    }
}

int ig_cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "igen %s: %s: '%s' is not an integer in %ld..%ld\n", cmd, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int ig_cli_parse_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
                       double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !end || *end || end == s || !(v >= lo && v <= hi)) {
        fprintf(stderr, "igen %s: %s: '%s' is not a number in [%g, %g]\n", cmd, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int g_cuda_f32;

int ig_cli_cuda_f32(void) {
    return g_cuda_f32;
}

int ig_cli_common_opt(ig_cli_common *c, int opt, const char *arg) {
    long v;
    switch (opt) {
    case IG_OPT_MODEL:
        c->model_path = arg;
        return 1;
    case IG_OPT_THREADS:
        if (ig_cli_parse_int("", "--threads", arg, 1, 1024, &v)) return -1;
        c->threads = (int)v;
        return 1;
    case IG_OPT_DTYPE: {
        if (!strcmp(arg, "stored")) {
            c->keep_stored = 1;
            c->dtype = IG_DTYPE_F32;
            return 1;
        }
        int t = ig_dtype_from_name(arg);
        if (t < 0 || !ig_dtype_is_weight_storage((ig_dtype)t)) {
            fprintf(stderr,
                    "igen: --dtype: '%s' is not one of f32, f16, bf16, q4g64, q8g64, q4_0, q4_1, "
                    "q8_0, stored\n",
                    arg);
            return -1;
        }
        c->keep_stored = 0;
        c->dtype = (ig_dtype)t;
        return 1;
    }
    case IG_OPT_ACT_QUANT:
        if (strcmp(arg, "none") && strcmp(arg, "q8")) {
            fprintf(stderr, "igen: --act-quant: '%s' is not one of none, q8\n", arg);
            return -1;
        }
        c->act8 = !strcmp(arg, "q8");
        ig_cpu_set_act8(c->act8);
        return 1;
    case IG_OPT_WEIGHTS_MEM: {
        int w = ig_weights_mem_from_name(arg);
        if (w < 0) {
            fprintf(stderr, "igen: --weights-mem: '%s' is not one of auto, map, copy\n", arg);
            return -1;
        }
        c->weights_mem = w;
        return 1;
    }
    case IG_OPT_VERBOSE:
        c->verbose = 1;
        ig_log_set_level(IG_LOG_INFO);
        return 1;
    case IG_OPT_QUIET:
        c->quiet = 1;
        return 1;
    case IG_OPT_BACKEND:
        if (strcmp(arg, "auto") && strcmp(arg, "cpu") && strcmp(arg, "cuda")) {
            fprintf(stderr, "igen: --backend: '%s' is not one of auto, cpu, cuda\n", arg);
            return -1;
        }
        c->backend = arg;
        return 1;
    case IG_OPT_CUDA_GEMM:
        if (strcmp(arg, "f16") && strcmp(arg, "f32")) {
            fprintf(stderr, "igen: --cuda-gemm: '%s' is not one of f16, f32\n", arg);
            return -1;
        }
        g_cuda_f32 = !strcmp(arg, "f32");
        return 1;
    default:
        return 0;
    }
}

int ig_cli_model_opt(ig_cli_common *c, ig_cli_policy *pol, ig_cli_offload *off, int opt,
                     const char *arg) {
    int r = ig_cli_common_opt(c, opt, arg);
    if (r == 0 && pol) r = ig_cli_policy_opt(pol, opt, arg);
    if (r == 0 && off) r = ig_cli_offload_opt(off, opt, arg);
    return r;
}

int ig_cli_no_operands(const char *cmd, int argc, char **argv) {
    if (optind >= argc) return 0;
    fprintf(stderr, "igen %s: unexpected argument '%s'\n", cmd, argv[optind]);
    return -1;
}

static ig_backend_kind g_backend = IG_BACKEND_CPU;

ig_backend_kind ig_cli_select_backend(const char *name) {
    static char last_name[16];
    static ig_backend_kind last_kind = IG_BACKEND_CPU;
    if (!name) name = "auto";
    if (!last_name[0] || strcmp(last_name, name)) { /* a new name: ask (and maybe print) once */
        ig_backend_info bi;
        int k = ig_backend_select(name, &bi);
        last_kind = k == IG_BACKEND_CUDA ? IG_BACKEND_CUDA : IG_BACKEND_CPU;
        snprintf(last_name, sizeof last_name, "%s", name);
    }
    g_backend = last_kind;
    return g_backend;
}

ig_backend_kind ig_cli_backend(void) {
    return g_backend;
}

void ig_cli_error(const char *cmd, const ig_error *err) {
    fprintf(stderr, "igen %s: %s\n", cmd, err->msg[0] ? err->msg : ig_status_to_string(err->code));
}

ig_model *ig_cli_load_model(const ig_cli_common *c) {
    ig_error err;
    ig_error_clear(&err);
    const char *path = c->model_path;
    if (!path) path = ig_model_default_path(&err);
    if (!path) {
        fprintf(stderr, "igen: %s\n", err.msg);
        return NULL;
    }
    if (c->threads > 0) ig_cpu_set_threads(c->threads);
    if (ig_cli_select_backend(c->backend) == IG_BACKEND_CUDA && c->act8) {
        fprintf(stderr, "igen: --act-quant q8 is a mode of the CPU backend's kernels; the CUDA "
                        "backend computes with f32 activations (use --backend cpu)\n");
        return NULL;
    }
    ig_model_load_opts o = {c->dtype, c->quiet, c->keep_stored, (ig_weights_mem)c->weights_mem};
    ig_model *m = NULL;
    if (!strncmp(path, "dummy:", 6)) { /* dummy:SHAPE: random weights of a configs/models shape */
        ig_model_shape shape;
        if (ig_model_shape_open(path + 6, &shape, &err) != IG_OK ||
            ig_model_create_dummy(&shape.config, c->dtype, 1234, path + 6, &m, &err) != IG_OK) {
            fprintf(stderr, "igen: %s\n", err.msg);
            return NULL;
        }
        return m;
    }
    if (ig_model_load(path, &o, &m, &err) != IG_OK) {
        fprintf(stderr, "igen: %s\n", err.msg);
        return NULL;
    }
    return m;
}

int ig_cli_stderr_is_tty(void) {
    return isatty(STDERR_FILENO);
}
