/* igen run: an experiment file -> its points run one by one (measured or modeled), each appended
 * to RESULTS_DIR/results.jsonl as it finishes, then results.csv, the plots and a summary table.
 * Also: --dry-run (list the points), --point I (one point, for job arrays), --part/--merge (several
 * machines), --slurm (write, and with --submit submit, a Slurm job array). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/app/cli/cli.h"
#include "core/app/cli/run.h"
#include "core/app/exp/exp.h"
#include "core/app/exp/plot.h"
#include "kernels/backend.h"
#include "core/app/exp/results.h"
#include "core/app/exp/slurm.h"
#include "core/base/log.h"

static void help(void) {
    printf(
        "usage: igen run EXPERIMENT.yaml [options]\n\n"
        "Runs every point of an experiment (the cartesian product of its swept keys, see\n"
        "docs/config.md), measured on this machine or modeled with the cost model, and writes\n"
        "RESULTS_DIR/results.jsonl (one record per point, appended as each finishes), "
        "results.csv,\n"
        "plots/*.png|svg and a summary table. A rerun skips the points already done.\n\n"
        "options:\n"
        "  --set KEY=VALUE   override a key before expansion, e.g. --set workload.batch=[4,8]\n"
        "                    (repeatable; VALUE is a YAML flow scalar or list)\n"
        "  --dry-run         list the points with their index and stop\n"
        "  --point I         run only point I (0-based)\n"
        "  --force           rerun points that are already in the results\n"
        "  --output DIR      results directory (default: the experiment's `output`)\n"
        "  --no-plot         do not draw the plots\n"
        "  --part            with --point: write the record to RESULTS_DIR/parts/ (for runs on\n"
        "                    several machines sharing the directory)\n"
        "  --merge           fold RESULTS_DIR/parts/ into results.jsonl, then CSV, plots, summary\n"
        "  --quiet           no progress lines\n"
        "  -h, --help        this help\n\n"
        "Slurm (docs/slurm.md): one array task per point, then a merge job:\n"
        "  --slurm           write RESULTS_DIR/slurm/array.sbatch and merge.sbatch\n"
        "  --submit          and submit them with sbatch\n"
        "  --partition P  --account A  --qos Q  --time T  --cpus N  --gpus N  --mem M\n"
        "  --max-parallel K  --sbatch OPT (raw option, repeatable)\n\n"
        "Exit status: 0 when every point ran, 1 when some point failed (its record says why),\n"
        "2 on bad input (the message names file:line:col and the key).\n");
}

enum {
    O_SET = 1,
    O_DRY,
    O_POINT,
    O_FORCE,
    O_OUTPUT,
    O_NOPLOT,
    O_PART,
    O_MERGE,
    O_QUIET,
    O_SLURM,
    O_SUBMIT,
    O_PARTITION,
    O_ACCOUNT,
    O_QOS,
    O_TIME,
    O_CPUS,
    O_GPUS,
    O_MEM,
    O_MAXPAR,
    O_SBATCH,
};

#define MAX_SETS 64

/* CSV, plots (a missing gnuplot is a warning: the data files are complete without it), summary. */
static void finish(ig_results *res, int plot, int quiet) {
    ig_error err;
    ig_error_clear(&err);
    if (ig_results_write_csv(res, &err) != IG_OK) ig_cli_error("run", &err);
    if (plot) {
        int n = 0;
        if (ig_plot_results_ex(ig_results_dir(res), quiet ? NULL : stdout, &n, &err) != IG_OK)
            fprintf(stderr, "igen run: plots not drawn: %s\n", err.msg);
    }
    printf("\n");
    ig_results_print_summary(res, stdout);
    printf("\nresults: %s/results.jsonl, results.csv%s\n", ig_results_dir(res),
           plot ? ", plots/" : "");
}

int ig_cmd_run(int argc, char **argv) {
    static const struct option longopts[] = {{"set", required_argument, NULL, O_SET},
                                             {"dry-run", no_argument, NULL, O_DRY},
                                             {"point", required_argument, NULL, O_POINT},
                                             {"force", no_argument, NULL, O_FORCE},
                                             {"output", required_argument, NULL, O_OUTPUT},
                                             {"no-plot", no_argument, NULL, O_NOPLOT},
                                             {"part", no_argument, NULL, O_PART},
                                             {"merge", no_argument, NULL, O_MERGE},
                                             {"quiet", no_argument, NULL, O_QUIET},
                                             {"slurm", no_argument, NULL, O_SLURM},
                                             {"submit", no_argument, NULL, O_SUBMIT},
                                             {"partition", required_argument, NULL, O_PARTITION},
                                             {"account", required_argument, NULL, O_ACCOUNT},
                                             {"qos", required_argument, NULL, O_QOS},
                                             {"time", required_argument, NULL, O_TIME},
                                             {"cpus", required_argument, NULL, O_CPUS},
                                             {"gpus", required_argument, NULL, O_GPUS},
                                             {"mem", required_argument, NULL, O_MEM},
                                             {"max-parallel", required_argument, NULL, O_MAXPAR},
                                             {"sbatch", required_argument, NULL, O_SBATCH},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *sets[MAX_SETS];
    int n_sets = 0, dry = 0, force = 0, plot = 1, part = 0, merge = 0, quiet = 0, slurm = 0;
    int submit = 0, opt;
    long point = -1, num;
    const char *output = NULL;
    ig_slurm_opts so;
    memset(&so, 0, sizeof so);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_SET:
            if (n_sets == MAX_SETS) {
                fprintf(stderr, "igen run: more than %d --set options\n", MAX_SETS);
                return IG_EXIT_ERROR;
            }
            sets[n_sets++] = optarg;
            break;
        case O_DRY:
            dry = 1;
            break;
        case O_POINT:
            if (ig_cli_parse_int("run", "--point", optarg, 0, IG_EXP_MAX_POINTS, &point))
                return IG_EXIT_ERROR;
            break;
        case O_FORCE:
            force = 1;
            break;
        case O_OUTPUT:
            output = optarg;
            break;
        case O_NOPLOT:
            plot = 0;
            break;
        case O_PART:
            part = 1;
            break;
        case O_MERGE:
            merge = 1;
            break;
        case O_QUIET:
            quiet = 1;
            break;
        case O_SLURM:
            slurm = 1;
            break;
        case O_SUBMIT:
            submit = 1;
            break;
        case O_PARTITION:
            so.partition = optarg;
            break;
        case O_ACCOUNT:
            so.account = optarg;
            break;
        case O_QOS:
            so.qos = optarg;
            break;
        case O_TIME:
            so.time_limit = optarg;
            break;
        case O_MEM:
            so.mem = optarg;
            break;
        case O_CPUS:
            if (ig_cli_parse_int("run", "--cpus", optarg, 1, 4096, &num)) return IG_EXIT_ERROR;
            so.cpus_per_task = (int)num;
            break;
        case O_GPUS:
            if (ig_cli_parse_int("run", "--gpus", optarg, 0, 64, &num)) return IG_EXIT_ERROR;
            so.gpus_per_task = (int)num;
            break;
        case O_MAXPAR:
            if (ig_cli_parse_int("run", "--max-parallel", optarg, 1, 1 << 20, &num))
                return IG_EXIT_ERROR;
            so.max_parallel = (int)num;
            break;
        case O_SBATCH:
            if (so.n_extra == IG_SLURM_MAX_EXTRA) {
                fprintf(stderr, "igen run: more than %d --sbatch options\n", IG_SLURM_MAX_EXTRA);
                return IG_EXIT_ERROR;
            }
            so.extra_sbatch[so.n_extra++] = optarg;
            break;
        default:
            fprintf(stderr, "igen run: see 'igen run --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "igen run: give exactly one experiment file (see 'igen run --help')\n");
        return IG_EXIT_ERROR;
    }
    if ((part && point < 0) || (submit && !slurm) || (merge && (point >= 0 || slurm))) {
        fprintf(stderr, "igen run: --part needs --point, --submit needs --slurm, and --merge goes "
                        "alone\n");
        return IG_EXIT_ERROR;
    }
    const char *exp_path = argv[optind];
    ig_error err;
    ig_error_clear(&err);
    ig_exp *x = NULL;
    if (ig_exp_load(exp_path, sets, n_sets, &x, &err) != IG_OK) {
        fprintf(stderr, "igen run: %s\n", err.msg);
        return IG_EXIT_ERROR;
    }
    int n = ig_exp_n_points(x), rc = IG_EXIT_ERROR;
    const char *dir = output ? output : ig_exp_output_dir(x);
    ig_run_set_output_dir(dir);
    ig_results *res = NULL;
    if (point >= n) {
        fprintf(stderr, "igen run: --point %ld: the experiment has %d points (0..%d)\n", point, n,
                n - 1);
        goto done;
    }
    if (dry) { /* the points, those already in the results marked done (a rerun skips them) */
        ig_results *have = NULL;
        ig_error derr;
        char jpath[4200];
        snprintf(jpath, sizeof jpath, "%s/results.jsonl", dir);
        if (access(jpath, R_OK) == 0 && ig_results_open(dir, &have, &derr) != IG_OK) have = NULL;
        unsigned char *done_mark = calloc((size_t)n, 1);
        int n_done = 0;
        for (int i = 0; i < n && done_mark; i++) {
            char key[17];
            ig_exp_point_key(x, i, key);
            done_mark[i] = have && ig_results_has(have, key);
            n_done += done_mark[i];
        }
        ig_exp_print_points_marked(x, stdout, done_mark);
        printf("results: %s (%d of %d points done)\n", dir, n_done, n);
        free(done_mark);
        ig_results_free(have);
        rc = 0;
        goto done;
    }
    if (slurm) {
        char self[4096], arr[4096], mer[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len <= 0) {
            fprintf(stderr, "igen run: cannot find this igen executable (/proc/self/exe)\n");
            goto done;
        }
        self[len] = 0;
        static const char *force_arg[] = {"--force"};
        if (force) {
            so.point_args = force_arg;
            so.n_point_args = 1;
        }
        /* --output reaches the tasks as a --set of the `output` key (a YAML single-quoted
         * absolute path) */
        static char out_set[8300];
        if (output) {
            char abs[4096], q[8192];
            if (output[0] != '/' && getcwd(abs, sizeof abs))
                snprintf(q, sizeof q, "%s/%s", abs, output);
            else
                snprintf(q, sizeof q, "%s", output);
            size_t k = (size_t)snprintf(out_set, sizeof out_set, "output='");
            for (const char *c = q; *c && k + 3 < sizeof out_set; c++) {
                if (*c == '\'') out_set[k++] = '\'';
                out_set[k++] = *c;
            }
            snprintf(out_set + k, sizeof out_set - k, "'");
            if (n_sets == MAX_SETS) {
                fprintf(stderr, "igen run: too many --set options with --output\n");
                goto done;
            }
            sets[n_sets++] = out_set;
        }
        if (ig_slurm_write(NULL, self, exp_path, sets, n_sets, n, dir, &so, arr, sizeof arr, mer,
                           sizeof mer, &err) != IG_OK) {
            ig_cli_error("run", &err);
            goto done;
        }
        printf("wrote %s (%d array tasks)\nwrote %s (merge, after the array)\n", arr, n, mer);
        if (submit) {
            ig_slurm_jobs jobs;
            if (ig_slurm_submit(arr, mer, &jobs, &err) != IG_OK) {
                ig_cli_error("run", &err);
                goto done;
            }
            printf("submitted: array job %s, merge job %s\n", jobs.array_id, jobs.merge_id);
        } else {
            printf("submit with: sbatch %s, then sbatch --dependency=afterany:ID %s (or rerun with "
                   "--submit)\n",
                   arr, mer);
        }
        rc = 0;
        goto done;
    }
    if (part) { /* one point into parts/, no shared results.jsonl to append to */
        char key[17];
        ig_exp_point_key(x, (int)point, key);
        if (!force && ig_results_open(dir, &res, &err) == IG_OK && ig_results_has(res, key)) {
            if (!quiet) printf("point %ld is already in %s/results.jsonl\n", point, dir);
            rc = 0;
            goto done;
        }
        int pi = (int)point;
        json_object *rec = NULL;
        ig_run_group(x, &pi, 1, &rec, NULL, NULL);
        json_object *st = NULL;
        json_object_object_get_ex(rec, "status", &st);
        int ok = st && !strcmp(json_object_get_string(st), "ok");
        if (!ok) {
            json_object *e = NULL;
            json_object_object_get_ex(rec, "error", &e);
            fprintf(stderr, "igen run: point %ld failed: %s\n", point,
                    e ? json_object_get_string(e) : "?");
        }
        if (ig_results_append_part(dir, (int)point, rec, &err) != IG_OK) {
            ig_cli_error("run", &err);
            ok = -1;
        }
        json_object_put(rec);
        rc = ok == 1 ? 0 : ok == 0 ? 1 : IG_EXIT_ERROR;
        goto done;
    }
    if (ig_results_open(dir, &res, &err) != IG_OK) {
        ig_cli_error("run", &err);
        goto done;
    }
    if (merge) {
        if (ig_results_merge(res, &err) != IG_OK) {
            ig_cli_error("run", &err);
            goto done;
        }
        finish(res, plot, quiet);
        int missing = 0;
        for (int i = 0; i < n; i++) {
            char key[17];
            ig_exp_point_key(x, i, key);
            if (!ig_results_has(res, key)) {
                if (!missing++) fprintf(stderr, "igen run: points without an ok result:");
                fprintf(stderr, " %d", i);
            }
        }
        if (missing)
            fprintf(stderr,
                    "\nigen run: %d of %d points have no ok result (rerun them with "
                    "--point I, or resubmit)\n",
                    missing, n);
        rc = missing ? 1 : 0;
        goto done;
    }
    int i0 = point >= 0 ? (int)point : 0, i1 = point >= 0 ? (int)point + 1 : n, failed = 0;
    ig_progress *pg = quiet ? NULL : ig_progress_start(i1 - i0, stderr);
    if (!quiet)
        fprintf(stderr, "igen run: %s: %d point%s -> %s\n", ig_exp_name(x), i1 - i0,
                i1 - i0 == 1 ? "" : "s", dir);
    rc = 0;
    /* pending points, then grouped: the same config but for the policy, in index order */
    int *pend = malloc((size_t)(i1 - i0 + 1) * sizeof *pend), np = 0;
    char(*gkey)[17] = malloc((size_t)(i1 - i0 + 1) * sizeof *gkey);
    unsigned char *taken = calloc((size_t)(i1 - i0 + 1), 1);
    if (!pend || !gkey || !taken) {
        fprintf(stderr, "igen run: out of memory\n");
        rc = IG_EXIT_ERROR;
    }
    for (int i = i0; rc == 0 && i < i1; i++) {
        char key[17];
        ig_exp_point_key(x, i, key);
        if (!force && ig_results_has(res, key)) {
            if (pg) ig_progress_skip_point(pg, i - i0, ig_exp_point_label(x, i));
            continue;
        }
        json_object *c = json_object_get(ig_exp_point_config(x, i)), *cp = NULL;
        if (json_object_deep_copy(c, &cp, NULL) == 0 && cp) {
            json_object_object_del(cp, "policy");
            ig_exp_config_key(cp, gkey[np]);
        } else {
            snprintf(gkey[np], sizeof gkey[np], "%016x", i); /* a group of its own */
        }
        json_object_put(cp);
        json_object_put(c);
        pend[np++] = i;
    }
    for (int a = 0; rc == 0 && a < np; a++) {
        if (taken[a]) continue;
        int grp[1024], gi[1024], gn = 0;
        for (int b = a; b < np && gn < 1024; b++)
            if (!taken[b] && !strcmp(gkey[a], gkey[b])) {
                taken[b] = 1;
                grp[gn] = pend[b];
                gi[gn++] = pend[b] - i0;
            }
        json_object *recs[1024];
        double t0 = ig_time_s();
        ig_run_group(x, grp, gn, recs, pg, gi);
        for (int k = 0; k < gn; k++) {
            int i = grp[k];
            json_object *rec = recs[k], *st = NULL, *e = NULL;
            json_object_object_get_ex(rec, "status", &st);
            int ok = st && !strcmp(json_object_get_string(st), "ok");
            if (!ok) {
                failed++;
                json_object_object_get_ex(rec, "error", &e);
                fprintf(stderr, "%sigen run: point %d (%s) failed: %s\n",
                        pg && ig_cli_stderr_is_tty() ? "\n" : "", i, ig_exp_point_label(x, i),
                        e ? json_object_get_string(e) : "?");
            }
            ig_status ast = ig_results_append(res, rec, &err);
            json_object *el = NULL;
            double el_s = json_object_object_get_ex(rec, "elapsed_s", &el)
                              ? json_object_get_double(el)
                              : ig_time_s() - t0;
            json_object_put(rec);
            if (pg) {
                ig_progress_point_quiet(pg, i - i0, ig_exp_point_label(x, i));
                ig_progress_done_point(pg, i - i0, ok ? "ok" : "error", el_s);
            }
            if (ast != IG_OK) {
                ig_cli_error("run", &err);
                rc = IG_EXIT_ERROR;
                for (int q = k + 1; q < gn; q++) json_object_put(recs[q]);
                break;
            }
        }
    }
    free(pend);
    free(gkey);
    free(taken);
    if (pg) ig_progress_finish(pg);
    if (rc == 0) {
        finish(res, plot, quiet);
        if (failed) {
            fprintf(stderr, "igen run: %d point%s failed (see the summary)\n", failed,
                    failed == 1 ? "" : "s");
            rc = 1;
        }
    }
done:
    ig_results_free(res);
    ig_exp_free(x);
    ig_run_cache_free();
    return rc;
}
