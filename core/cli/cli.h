/* The igen command-line tool: shared option handling for its subcommands. */
#ifndef IG_CLI_H
#define IG_CLI_H

#include <getopt.h>

#include "core/model/model.h"
#include "core/status.h"

/* Exit status for any error: bad input, unusable file, does not fit. */
#define IG_EXIT_ERROR 2

typedef struct ig_cli_common {
    const char *model_path; /* NULL: the default model */
    int threads;
    ig_dtype dtype;
    int verbose;
    int quiet;
    const char *backend; /* auto, cpu, cuda */
} ig_cli_common;

/* Options every model command accepts; `longopts` entries with these ids are handled by
 * ig_cli_common_opt(). */
enum {
    IG_OPT_MODEL = 1000,
    IG_OPT_THREADS,
    IG_OPT_DTYPE,
    IG_OPT_VERBOSE,
    IG_OPT_QUIET,
    IG_OPT_BACKEND,
    IG_OPT_FIRST_FREE = 1100,
};
#define IG_CLI_COMMON_LONGOPTS                                                                     \
    {"model", required_argument, NULL, IG_OPT_MODEL},                                              \
        {"threads", required_argument, NULL, IG_OPT_THREADS},                                      \
        {"dtype", required_argument, NULL, IG_OPT_DTYPE},                                          \
        {"verbose", no_argument, NULL, IG_OPT_VERBOSE},                                            \
        {"quiet", no_argument, NULL, IG_OPT_QUIET}, {                                              \
        "backend", required_argument, NULL, IG_OPT_BACKEND                                         \
    }

#define IG_CLI_COMMON_HELP                                                                         \
    "  --model PATH      GGUF file or Hugging Face directory (default: the installed "             \
    "SmolLM2-135M)\n"                                                                              \
    "  --threads N       compute threads (default: all cores)\n"                                   \
    "  --dtype T         weight storage: f32 (default), f16, bf16\n"                               \
    "  --backend B       auto (default), cpu or cuda; without a usable GPU igen says so and "      \
    "uses\n"                                                                                       \
    "                    the CPU\n"                                                                \
    "  --verbose         log loading and timing details to stderr\n"                               \
    "  --quiet           no progress lines on stderr\n"                                            \
    "  -h, --help        this help\n"

void ig_cli_common_init(ig_cli_common *c);
/* Handles one of the common options; returns 1 if it was one, 0 if not, -1 on a bad value. */
int ig_cli_common_opt(ig_cli_common *c, int opt, const char *arg);
/* Loads the model named by the options (or the default one); prints the error and returns NULL. */
ig_model *ig_cli_load_model(const ig_cli_common *c);
/* Prints "igen CMD: message" for an error. */
void ig_cli_error(const char *cmd, const ig_error *err);
/* Parses an integer/float option value strictly; prints an error naming the option on failure. */
int ig_cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int ig_cli_parse_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
                       double *out);
/* Whether stderr is a terminal (progress lines are redrawn in place there). */
int ig_cli_stderr_is_tty(void);

int ig_cmd_generate(int argc, char **argv);
int ig_cmd_ppl(int argc, char **argv);
int ig_cmd_info(int argc, char **argv);

#endif
