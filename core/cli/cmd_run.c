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

#include "core/cli/cli.h"
#include "core/cli/run.h"
#include "core/exp/exp.h"
#include "core/exp/plot.h"
#include "kernels/backend.h"
#include "core/exp/results.h"
#include "core/exp/slurm.h"
#include "core/log.h"

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

static void iso_now(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The source tree's commit, when igen runs from a checkout ("unknown" otherwise). */
static const char *git_commit(void) {
    static char c[64];
    if (c[0]) return c;
    snprintf(c, sizeof c, "unknown");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null", IG_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    if (p) {
        char line[64];
        if (fgets(line, sizeof line, p)) {
            line[strcspn(line, "\r\n")] = 0;
            if (line[0]) snprintf(c, sizeof c, "%s", line);
        }
        pclose(p);
    }
    return c;
}

static json_object *machine_json(void) {
    json_object *o = json_object_new_object();
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    json_object_object_add(o, "hostname", json_object_new_string(host));
    char cpu[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *v = strchr(line, ':');
                if (v) {
                    v++;
                    while (*v == ' ') v++;
                    v[strcspn(v, "\n")] = 0;
                    snprintf(cpu, sizeof cpu, "%s", v);
                }
                break;
            }
        fclose(f);
    }
    json_object_object_add(o, "cpu", json_object_new_string(cpu));
    json_object_object_add(o, "cores", json_object_new_int((int)sysconf(_SC_NPROCESSORS_ONLN)));
    /* the GPU a CUDA point may run on (probed once; null without one) */
    static int probed;
    static char gpu[128];
    if (!probed) {
        probed = 1;
        char why[256];
        ig_backend_info bi;
        if (ig_backend_cuda_compiled() && ig_backend_cuda_probe(why, sizeof why, &bi) > 0)
            snprintf(gpu, sizeof gpu, "%s", bi.device_name);
    }
    json_object_object_add(o, "gpu", gpu[0] ? json_object_new_string(gpu) : NULL);
    return o;
}

/* Runs point i and returns its record (new reference). */
static json_object *run_one(const ig_exp *x, int i, int quiet) {
    ig_exp_point pt;
    ig_error err;
    ig_error_clear(&err);
    json_object *rec = json_object_new_object();
    char started[64];
    iso_now(started, sizeof started);
    json_object_object_add(rec, "experiment", json_object_new_string(ig_exp_name(x)));
    json_object_object_add(rec, "point", json_object_new_int(i));
    json_object_object_add(rec, "n_points", json_object_new_int(ig_exp_n_points(x)));
    char key[17];
    ig_exp_point_key(x, i, key);
    json_object_object_add(rec, "key", json_object_new_string(key));
    json_object_object_add(rec, "label", json_object_new_string(ig_exp_point_label(x, i)));
    json_object_object_add(rec, "config", json_object_get(ig_exp_point_config(x, i)));
    json_object *metrics = json_object_new_object();
    double t0 = ig_time_s();
    int link_on = 0;
    ig_status st = ig_exp_point_get(x, i, &pt);
    if (st == IG_OK) {
        json_object_object_add(
            rec, "mode",
            json_object_new_string(pt.mode == IG_EXP_MODELED ? "modeled" : "measured"));
        st = ig_run_point(&pt, metrics, &link_on, &err);
    }
    (void)quiet;
    json_object_object_add(rec, "status", json_object_new_string(st == IG_OK ? "ok" : "error"));
    json_object_object_add(rec, "error", st == IG_OK ? NULL : json_object_new_string(err.msg));
    json_object_object_add(rec, "igen_version", json_object_new_string(IG_VERSION));
    json_object_object_add(rec, "git_commit", json_object_new_string(git_commit()));
    json_object_object_add(rec, "machine", machine_json());
    json_object_object_add(rec, "started_at", json_object_new_string(started));
    json_object_object_add(rec, "elapsed_s", json_object_new_double(ig_time_s() - t0));
    json_object_object_add(rec, "link_model", json_object_new_boolean(link_on));
    json_object_object_add(rec, "metrics", metrics);
    return rec;
}

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
    if (dry) {
        ig_exp_print_points(x, stdout);
        printf("results: %s\n", dir);
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
        json_object *rec = run_one(x, (int)point, quiet);
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
    for (int i = i0; i < i1; i++) {
        char key[17];
        ig_exp_point_key(x, i, key);
        if (!force && ig_results_has(res, key)) {
            if (pg) ig_progress_skip_point(pg, i - i0, ig_exp_point_label(x, i));
            continue;
        }
        if (pg) ig_progress_point(pg, i - i0, ig_exp_point_label(x, i));
        double t0 = ig_time_s();
        json_object *rec = run_one(x, i, quiet);
        json_object *st = NULL, *e = NULL;
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
        json_object_put(rec);
        if (pg) ig_progress_done_point(pg, i - i0, ok ? "ok" : "error", ig_time_s() - t0);
        if (ast != IG_OK) {
            ig_cli_error("run", &err);
            rc = IG_EXIT_ERROR;
            break;
        }
    }
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
