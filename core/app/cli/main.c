/* igen: entry point and subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "core/app/cli/cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    {"run", ig_cmd_run, "run an experiment (YAML): sweep points, results, plots"},
    {"generate", ig_cmd_generate, "generate text from a prompt (greedy or sampled)"},
    {"ppl", ig_cmd_ppl, "perplexity of a model on a text file"},
    {"info", ig_cmd_info, "print a model's configuration and memory use"},
    {"policies", ig_cmd_policies, "list the KV-cache policies and their parameters"},
    {"bench-decode", ig_cmd_bench_decode, "decode throughput and KV traffic of one configuration"},
    {"calibrate", ig_cmd_calibrate, "InfiniGen's offline skewing: write a skew file for a model"},
    {"topo", ig_cmd_topo, "the machine's packages, NUMA nodes and GPUs (hwloc)"},
    {"plan", ig_cmd_plan, "place a workload on a machine's tiers and predict its time per token"},
    {"profile-hw", ig_cmd_profile_hw, "measure this machine into a hardware profile (YAML)"},
    {"eval", ig_cmd_eval, "task accuracy (few-shot tasks, LAMBADA, passkey) with a KV policy"},
    {"plot", ig_cmd_plot, "draw the plots of a results directory (gnuplot: PNG and SVG)"},
};

static const char *command_list(void) {
    static char buf[256];
    if (!buf[0])
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "",
                     commands[i].name);
    return buf;
}

static void usage(FILE *f) {
    fprintf(f, "usage: igen COMMAND [OPTIONS]\n\n"
               "igen runs large language models with offloaded weights and KV cache, and compares\n"
               "KV-cache policies. Commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
    fprintf(f,
            "\n'igen COMMAND --help' describes a command. 'igen --version' prints the version.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: igen COMMAND [OPTIONS] (commands: %s; see 'igen --help')\n",
                command_list());
        return IG_EXIT_ERROR;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("igen %s\n", IG_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "igen: unknown command '%s' (commands: %s; see 'igen --help')\n", argv[1],
            command_list());
    return IG_EXIT_ERROR;
}
