/* The gnuplot plots of a results directory: every expected PNG and SVG from a synthetic sweep,
 * the data gnuplot read, `igen plot`, and the reasons given for plots the results cannot support.
 * Skipped (exit 77, never a silent pass) where gnuplot is not installed. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/app/exp/plot.h"
#include "core/app/exp/results.h"
#include "tests/results_records.h"
#include "tests/test_util.h"

#define fresh_dir ig_test_fresh_dir
#define slurp     ig_test_slurp

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#define make_record ig_test_make_record

static void append_ok(ig_results *r, json_object *rec) {
    ig_error err = {0};
    CU_ASSERT_EQUAL(ig_results_append(r, rec, &err), IG_OK);
    if (err.code) fprintf(stderr, "append: %s\n", err.msg);
    json_object_put(rec);
}

/* ---- plots ---- */

static int have_gnuplot(void) {
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* 3 policies (h2o in 2 variants) x 3 sequence lengths x 2 batches, with ppl, KV fraction and
 * breakdowns. */
static void write_synthetic(const char *dir) {
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    const char *pols[] = {"full", "h2o", "h2o", "infinigen"};
    const double ratio[] = {0, 0.1, 0.2, 0};
    int point = 0;
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < 3; s++)
            for (int k = 0; k < 4; k++) {
                char key[32];
                snprintf(key, sizeof key, "syn%02d", point);
                int batch = 4 << b, prompt = 256 << s;
                double speed = k == 0 ? 1 : k == 3 ? 1.3 + 0.1 * b : 1.5 + 0.1 * k;
                json_object *rec = make_record(point, key, "ok", pols[k], batch, prompt,
                                               speed * 1000.0 * batch / (prompt + 32));
                json_object *cfg = json_object_object_get(rec, "config");
                if (k == 1 || k == 2) {
                    json_object *params = json_object_new_object();
                    json_object_object_add(params, "heavy_ratio", json_object_new_double(ratio[k]));
                    json_object_object_add(json_object_object_get(cfg, "policy"), "params", params);
                }
                json_object *m = json_object_object_get(rec, "metrics");
                double kv = k == 0 ? 1.0 : k == 3 ? 0.25 : 2 * ratio[k];
                json_object_object_add(m, "kv_read_fraction", json_object_new_double(kv));
                json_object_object_add(m, "ppl", json_object_new_double(20 + (1 - kv) * 3 + s));
                json_object *bd = json_object_new_object();
                const char *parts[] = {"attention", "ffn", "transfer", "prediction", "other"};
                for (int q = 0; q < 5; q++)
                    json_object_object_add(
                        bd, parts[q],
                        json_object_new_double(0.1 * (q + 1) * (k == 0 && q == 2 ? 5 : 1)));
                json_object_object_add(m, "breakdown_s", bd);
                append_ok(r, rec);
                point++;
            }
    /* a failed point is not plotted */
    append_ok(r, make_record(point, "failed", "error", "full", 4, 999, 1e9));
    ig_results_free(r);
}

static void check_image(const char *dir, const char *name) {
    char path[4300];
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    snprintf(path, sizeof path, "%s/plots/%s.png", dir, name);
    size_t len = 0;
    char *png = slurp(path, &len);
    CU_ASSERT(png && len > 1000 && !memcmp(png, png_sig, 8));
    if (!png) fprintf(stderr, "missing %s\n", path);
    free(png);
    snprintf(path, sizeof path, "%s/plots/%s.svg", dir, name);
    char *svg = slurp(path, &len);
    CU_ASSERT(svg && len > 1000 && strstr(svg, "<svg") && strstr(svg, "</svg>"));
    if (!svg) fprintf(stderr, "missing %s\n", path);
    free(svg);
    snprintf(path, sizeof path, "%s/plots/%s.gp", dir, name);
    struct stat st;
    CU_ASSERT(stat(path, &st) == 0 && st.st_size > 0);
}

static void test_plots(void) {
    if (!have_gnuplot()) {
        ig_test_skip("gnuplot is not installed (tools/setup.sh installs gnuplot-nox)");
        return;
    }
    const char *dir = fresh_dir("plots");
    write_synthetic(dir);
    char *log = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&log, &len);
    int n = -1;
    ig_error err = {0};
    ig_status rc = ig_plot_results_ex(dir, f, &n, &err);
    fclose(f);
    if (rc != IG_OK) fprintf(stderr, "plot: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    CU_ASSERT_EQUAL(n, 6); /* throughput (all + 2 per batch), speedup, ppl, breakdown */
    const char *names[] = {"throughput_vs_seqlen",    "throughput_vs_seqlen_b4",
                           "throughput_vs_seqlen_b8", "speedup_vs_batch",
                           "ppl_vs_budget",           "latency_breakdown"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_image(dir, names[i]);
    CU_ASSERT_PTR_NULL(strstr(log, "skipped"));
    free(log);
    /* the data gnuplot read: h2o's two variants are told apart, the failed point is absent, the
     * speedup of infinigen at batch 8 is 1.4 */
    char path[4300];
    snprintf(path, sizeof path, "%s/plots/throughput_vs_seqlen_b4.dat", dir);
    char *dat = slurp(path, NULL);
    CU_ASSERT(dat && strstr(dat, "# h2o heavy_ratio=0.1\n") &&
              strstr(dat, "# h2o heavy_ratio=0.2"));
    CU_ASSERT(dat && strstr(dat, "# infinigen\n") && !strstr(dat, "1287"));
    free(dat);
    snprintf(path, sizeof path, "%s/plots/speedup_vs_batch.dat", dir);
    dat = slurp(path, NULL);
    CU_ASSERT(dat && strstr(dat, "# infinigen\n4\t1.3\n8\t1.4\n"));
    free(dat);
    snprintf(path, sizeof path, "%s/plots/latency_breakdown.dat", dir);
    dat = slurp(path, NULL);
    CU_ASSERT(dat && strstr(dat, "full\t0.1\t0.2\t1.5\t0.4\t0.5\n"));
    CU_ASSERT(dat && count_lines(dat) == 5); /* header + 4 variants */
    free(dat);

    /* the command redraws them */
    ig_test_run *run = malloc(sizeof *run);
    char args[4400];
    snprintf(args, sizeof args, "plot '%s'", dir);
    ig_test_igen(run, NULL, args);
    CU_ASSERT_EQUAL(run->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(run->out, "6 plots in"));
    free(run);
}

static void test_plot_skips(void) {
    if (!have_gnuplot()) {
        ig_test_skip("gnuplot is not installed (tools/setup.sh installs gnuplot-nox)");
        return;
    }
    const char *dir = fresh_dir("plots_skip");
    ig_results *r = NULL;
    ig_error err = {0};
    int n = -1;
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    append_ok(r, make_record(0, "a", "ok", "full", 4, 512, 10));
    append_ok(r, make_record(1, "b", "ok", "h2o", 4, 512, 12));
    ig_results_free(r);
    /* one sequence length, one batch, no ppl, no breakdown: everything skipped, with reasons */
    char *log = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&log, &len);
    CU_ASSERT_EQUAL(ig_plot_results_ex(dir, f, &n, &err), IG_OK);
    fclose(f);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(log, "skipped throughput_vs_seqlen: needs throughput at 2 or more sequence"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "skipped speedup_vs_batch: needs 2 or more batch sizes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "skipped ppl_vs_budget: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "skipped latency_breakdown: "));
    free(log);
}

/* Perplexity curves: a policy's budget knob is what a curve sweeps, every other parameter (numeric
 * ones too) names its own curve; a setting a record lacks (written before it existed) does not
 * split the series. */
static void test_plot_ppl_curves(void) {
    if (!have_gnuplot()) {
        ig_test_skip("gnuplot is not installed (tools/setup.sh installs gnuplot-nox)");
        return;
    }
    const char *dir = fresh_dir("plots_curves");
    ig_results *r = NULL;
    ig_error err = {0};
    int n = -1;
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    for (int i = 0; i < 6; i++) {
        char key[16];
        snprintf(key, sizeof key, "c%d", i);
        int cols = i >= 2 && i < 4, dense = i >= 4;
        json_object *rec = make_record(i, key, "ok", dense ? "full" : "infinigen", 1, 256, 10);
        json_object *cfg = json_object_object_get(rec, "config");
        double fetch = dense ? 1.0 : i % 2 ? 0.2 : 0.1;
        if (!dense) {
            json_object *params = json_object_new_object();
            json_object_object_add(params, "fetch_rule", json_object_new_string("fixed"));
            json_object_object_add(params, "max_fetch", json_object_new_double(fetch));
            if (cols) json_object_object_add(params, "min_columns", json_object_new_int(24));
            json_object_object_add(json_object_object_get(cfg, "policy"), "params", params);
        }
        if (cols) { /* the newer records say how they were measured; the older ones do not */
            json_object *ms = json_object_new_object();
            json_object_object_add(ms, "repeat", json_object_new_int(3));
            json_object_object_add(cfg, "measure", ms);
        }
        json_object *m = json_object_object_get(rec, "metrics");
        json_object_object_add(m, "kv_read_fraction", json_object_new_double(fetch));
        json_object_object_add(m, "ppl",
                               json_object_new_double(dense ? 17 : 20 - 10 * fetch - 2 * cols));
        append_ok(r, rec);
    }
    ig_results_free(r);
    FILE *f = fopen("/dev/null", "w");
    CU_ASSERT_EQUAL(ig_plot_results_ex(dir, f, &n, &err), IG_OK);
    fclose(f);
    char path[4300];
    snprintf(path, sizeof path, "%s/plots/ppl_vs_budget.dat", dir);
    char *dat = slurp(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dat);
    CU_ASSERT_PTR_NOT_NULL(strstr(dat, " | infinigen fetch_rule=fixed\n0.1\t19\t"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dat, " | infinigen fetch_rule=fixed,min_columns=24\n0.1\t17\t"));
    CU_ASSERT_PTR_NULL(strstr(dat, "measure."));
    /* 3 curves and the Pareto front: 4 blocks */
    int blocks = 0;
    for (const char *c = dat; (c = strstr(c, "\n# ")); c++) blocks++;
    CU_ASSERT_EQUAL(blocks, 4);
    free(dat);
    snprintf(path, sizeof path, "%s/plots/ppl_vs_budget.gp", dir);
    char *gp = slurp(path, NULL);
    CU_ASSERT(gp && strstr(gp, "lc 1 dt 1 pt 7") && strstr(gp, "lc 3 dt 1 pt 7"));
    free(gp);
}

void ig_test_register(void) {
    CU_pSuite p = CU_add_suite("plot", NULL, NULL);
    CU_add_test(p, "plots", test_plots);
    CU_add_test(p, "skips", test_plot_skips);
    CU_add_test(p, "ppl curves", test_plot_ppl_curves);
}
