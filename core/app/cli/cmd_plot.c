/* igen plot: redraws the plots of a results directory with gnuplot. */
#include <stdio.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/app/exp/plot.h"

int ig_cmd_plot(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: igen plot RESULTS_DIR\n\n"
                   "Draws the plots of an experiment's results (RESULTS_DIR/results.jsonl, as\n"
                   "written by 'igen run') with gnuplot, as PNG and SVG in RESULTS_DIR/plots/:\n"
                   "  throughput_vs_seqlen  throughput against prompt + generated length, per "
                   "policy\n"
                   "                        (one panel, and one _bB file, per batch size)\n"
                   "  speedup_vs_batch      throughput over the 'full' policy's, against batch "
                   "size\n"
                   "  ppl_vs_budget         perplexity against the fraction of the KV cache read\n"
                   "  latency_breakdown     attention / FFN / transfer / prediction / other time\n"
                   "A plot the results cannot support (e.g. one sequence length) is skipped with\n"
                   "the reason. Each plot's gnuplot script and data are left beside it\n"
                   "(NAME.gp, NAME.dat). Needs gnuplot (Debian: apt-get install gnuplot-nox), or\n"
                   "IGEN_GNUPLOT=PATH to use another binary.\n");
            return 0;
        }
        if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "igen plot: unexpected argument '%s' (usage: igen plot RESULTS_DIR)\n",
                    argv[i]);
            return IG_EXIT_ERROR;
        }
        dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "igen plot: no results directory given (usage: igen plot RESULTS_DIR)\n");
        return IG_EXIT_ERROR;
    }
    ig_error err = {0};
    int n = 0;
    if (ig_plot_results(dir, &n, &err) != IG_OK) {
        ig_cli_error("plot", &err);
        return IG_EXIT_ERROR;
    }
    printf("%d plot%s in %s/plots\n", n, n == 1 ? "" : "s", dir);
    return 0;
}
