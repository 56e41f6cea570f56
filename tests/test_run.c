/* igen run end to end on the tiny fixture model: a measured sweep writes one record per point with
 * real metrics, a rerun resumes without duplicates, a run killed mid-sweep loses nothing when
 * rerun, modeled points come from the cost model, --dry-run / --point / --part / --merge / --slurm
 * do what they say, and a bad experiment is one line naming file:line:col with exit 2. */
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine/engine.h"
#include "core/base/log.h"
#include "core/app/cli/run.h"
#include "core/model/model.h"
#include "tests/test_util.h"

static char g_dir[4096], g_text[4200];

static char *slurp(const char *path) {
    return ig_test_slurp(path, NULL);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* An experiment over the tiny Llama fixture (unless body has a model key), body appended. */
static const char *write_exp(const char *name, const char *out, const char *body) {
    static char path[4300];
    snprintf(path, sizeof path, "%s/%s.yaml", g_dir, name);
    char text[8192];
    char model[4200] = ""; /* the tiny model unless the body names one */
    if (!strstr(body, "model:"))
        snprintf(model, sizeof model, "model: %s\n", ig_test_fixture("tiny_llama"));
    snprintf(text, sizeof text,
             "name: %s\n"
             "%s"
             "output: %s/%s\n"
             "%s",
             name, model, g_dir, out, body);
    write_file(path, text);
    return path;
}

typedef struct recs {
    int n, n_ok;
    json_object *r[64];
} recs;

static void load_recs(const char *out, recs *rs) {
    memset(rs, 0, sizeof *rs);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s/results.jsonl", g_dir, out);
    char *s = slurp(path);
    if (!s) return;
    for (char *line = strtok(s, "\n"); line && rs->n < 64; line = strtok(NULL, "\n")) {
        json_object *o = json_tokener_parse(line);
        CU_ASSERT_PTR_NOT_NULL(o);
        if (!o) continue;
        json_object *st;
        if (json_object_object_get_ex(o, "status", &st) &&
            !strcmp(json_object_get_string(st), "ok"))
            rs->n_ok++;
        rs->r[rs->n++] = o;
    }
    free(s);
}

static void free_recs(recs *rs) {
    for (int i = 0; i < rs->n; i++) json_object_put(rs->r[i]);
}

static double metric(json_object *r, const char *k) {
    json_object *m, *v;
    if (!json_object_object_get_ex(r, "metrics", &m) || !json_object_object_get_ex(m, k, &v))
        return -1;
    return json_object_get_double(v);
}

static int suite_init(void) {
    snprintf(g_dir, sizeof g_dir, "%s/run", ig_test_tmpdir());
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
    if (system(cmd) != 0) return 1;
    snprintf(g_text, sizeof g_text, "%s/text.txt", g_dir);
    FILE *f = fopen(g_text, "w");
    if (!f) return 1;
    for (int i = 0; i < 200; i++)
        fprintf(f, "the quick brown fox jumps over the lazy dog number %d and runs away. ", i);
    fclose(f);
    return 0;
}

static const char *SWEEP = "workload:\n"
                           "  batch: 2\n"
                           "  prompt_len: [8, 16]\n"
                           "  gen_len: 4\n"
                           "  text: %s\n"
                           "  ppl: {ctx: 32, windows: 2, prefill: 8}\n"
                           "placement:\n"
                           "  kv: {gpu: 0, cpu: 100}\n"
                           "policies: [full, {name: h2o, params: {heavy_ratio: 0.2}}]\n"
                           "metrics: [throughput, ppl, bytes, recall]\n";

static void test_measured_sweep(void) {
    char body[8192];
    snprintf(body, sizeof body, SWEEP, g_text);
    const char *exp = write_exp("sweep", "sweep", body);
    ig_test_run *r = malloc(sizeof *r);
    char args[8192];
    snprintf(args, sizeof args, "run '%s' --dry-run", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "4 points"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "3  workload.prompt_len=16 policy=h2o"));

    snprintf(args, sizeof args, "run '%s' --quiet", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n%s\n%s\n", r->out, r->err);
    recs rs;
    load_recs("sweep", &rs);
    CU_ASSERT_EQUAL(rs.n, 4);
    CU_ASSERT_EQUAL(rs.n_ok, 4);
    double ppl_full = -1, ppl_h2o = -1;
    for (int i = 0; i < rs.n; i++) {
        json_object *r0 = rs.r[i], *v;
        CU_ASSERT(metric(r0, "throughput_tok_s") > 0);
        CU_ASSERT(metric(r0, "decode_throughput_tok_s") >= metric(r0, "throughput_tok_s"));
        CU_ASSERT(metric(r0, "h2d_bytes") > 0); /* KV homed in host memory */
        CU_ASSERT(metric(r0, "ppl") > 1);
        CU_ASSERT(metric(r0, "recall") > 0 && metric(r0, "recall") <= 1);
        CU_ASSERT(json_object_object_get_ex(r0, "config", &v));
        CU_ASSERT(json_object_object_get_ex(r0, "git_commit", &v));
        CU_ASSERT(json_object_object_get_ex(r0, "machine", &v));
        CU_ASSERT(json_object_object_get_ex(r0, "mode", &v) &&
                  !strcmp(json_object_get_string(v), "measured"));
        json_object_object_get_ex(r0, "label", &v);
        const char *label = json_object_get_string(v);
        double kvf = metric(r0, "kv_read_fraction");
        if (strstr(label, "policy=full")) {
            CU_ASSERT(kvf == 1.0);
            CU_ASSERT(metric(r0, "recall") == 1.0);
            ppl_full = metric(r0, "ppl");
        } else {
            CU_ASSERT(kvf > 0 && kvf < 1.0);
            ppl_h2o = metric(r0, "ppl");
        }
    }
    CU_ASSERT(ppl_full > 1 && ppl_h2o > 1 && ppl_full != ppl_h2o);
    free_recs(&rs);
    /* CSV: a header and one row per point */
    char path[4400];
    snprintf(path, sizeof path, "%s/sweep/results.csv", g_dir);
    char *csv = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    int lines = 0;
    for (char *c = csv; *c; c++) lines += *c == '\n';
    CU_ASSERT_EQUAL(lines, 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(csv, "metrics.throughput_tok_s"));
    free(csv);
    /* plots of both throughputs (where gnuplot exists; test_plot covers the rest) */
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        const char *pngs[] = {"throughput_vs_seqlen", "decode_throughput_vs_seqlen"};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s/sweep/plots/%s.png", g_dir, pngs[k]);
            size_t len = 0;
            char *png = ig_test_slurp(path, &len);
            CU_ASSERT(png && len > 8 && !memcmp(png, "\x89PNG", 4));
            free(png);
        }
    }
    /* a rerun resumes: nothing is run again, nothing is duplicated */
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    load_recs("sweep", &rs);
    CU_ASSERT_EQUAL(rs.n, 4);
    free_recs(&rs);
    /* --point with --force appends one record that replaces the point's */
    snprintf(args, sizeof args, "run '%s' --quiet --point 1 --force --no-plot", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    load_recs("sweep", &rs);
    CU_ASSERT_EQUAL(rs.n, 5);
    free_recs(&rs);
    free(r);
}

/* One try at killing `igen run exp` (results in g_dir/out) with -9 once `want` of its points are
 * in: the number of records left (-1: it did not get there in limit_s, a hang), and whether it was
 * the kill that ended it (not the sweep ending by itself first). */
static int kill_after(const char *exp, const char *out, int want, double limit_s, int *killed) {
    char jsonl[4400];
    snprintf(jsonl, sizeof jsonl, "%s/%s/results.jsonl", g_dir, out);
    *killed = 0;
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        char bin[4300];
        snprintf(bin, sizeof bin, "%s/igen", IG_BINARY_DIR);
        execl(bin, "igen", "run", exp, "--quiet", "--no-plot", (char *)NULL);
        _exit(127);
    }
    double t0 = ig_time_s();
    int st = 0;
    for (;;) {
        char *s = slurp(jsonl);
        int n = 0;
        for (char *c = s; s && *c; c++) n += *c == '\n';
        free(s);
        if (n >= want || ig_time_s() - t0 > limit_s) {
            kill(pid, SIGKILL); /* a child that has just exited is a zombie: nothing happens */
            waitpid(pid, &st, 0);
            if (n < want) return -1;
            break;
        }
        if (waitpid(pid, &st, WNOHANG) == pid) break; /* the sweep ended by itself */
        usleep(10000);
    }
    *killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    recs rs;
    load_recs(out, &rs);
    int n = rs.n;
    free_recs(&rs);
    return n;
}

/* kill -9 in the middle of a sweep, then rerun: every point exactly once. Weights stream through a
 * slow link so that every point takes a while, but whether the kill lands mid-sweep is up to the
 * scheduler (on a loaded machine this process may look too late, after the last point): a try
 * where the sweep ended first proves nothing, so it is made again from scratch with a link 4x
 * slower, up to 3 tries. Only a sweep that writes no 2 points in 5 minutes fails on time. */
static void test_kill_resume(void) {
    enum { POINTS = 6 };
    char cmd[8400];
    const char *exp = NULL;
    int killed = 0, before = 0;
    for (int attempt = 0; attempt < 3 && !killed; attempt++) {
        int latency_us = 2000 << (2 * attempt);
        char body[8192];
        snprintf(body, sizeof body,
                 "workload:\n  batch: 2\n  prompt_len: [8, 12, 16, 20, 24, 28]\n  gen_len: 24\n"
                 "  text: %s\npolicies: [full]\nmetrics: [throughput]\n"
                 "placement:\n  weights: {gpu: 0, cpu: 100}\n"
                 "  link: {h2d_gbps: 100, d2h_gbps: 100, latency_us: %d}\n",
                 g_text, latency_us);
        exp = write_exp("kill", "kill", body);
        snprintf(cmd, sizeof cmd, "rm -rf '%s/kill'", g_dir);
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        before = kill_after(exp, "kill", 2, 300, &killed);
        printf("\n    try %d (link latency %d us): %s, %d of %d points in", attempt + 1, latency_us,
               before < 0 ? "no 2 points in 300 s"
               : killed   ? "killed"
                          : "ended by itself",
               before, POINTS);
        if (before < 0) break;
        if (before >= POINTS) killed = 0; /* killed after its last record: not mid-sweep */
    }
    printf("\n    ");
    CU_ASSERT(killed); /* else the rerun below would prove nothing */
    CU_ASSERT(before >= 2 && before < POINTS);
    ig_test_run *r = malloc(sizeof *r);
    char args[8192];
    snprintf(args, sizeof args, "run '%s' --quiet --no-plot", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    recs rs;
    load_recs("kill", &rs);
    CU_ASSERT_EQUAL(rs.n, POINTS);
    CU_ASSERT_EQUAL(rs.n_ok, POINTS);
    int seen[POINTS] = {0};
    for (int i = 0; i < rs.n; i++) {
        json_object *v;
        json_object_object_get_ex(rs.r[i], "point", &v);
        int p = json_object_get_int(v);
        if (p >= 0 && p < POINTS) seen[p]++;
    }
    for (int p = 0; p < POINTS; p++) CU_ASSERT_EQUAL(seen[p], 1);
    free_recs(&rs);
    free(r);
}

/* The paper's OPT-13B modeled on the A6000 profile, its KV cache in host memory. */
#define OPT13B_KV_HOST                                                                             \
    "mode: modeled\nmodel: {shape: opt-13b}\nhardware: a6000-pcie3\n"                              \
    "placement:\n  kv: {gpu: 0, cpu: 100}\n  gpu_batch_size: 4\n"

/* Writes experiment `name` (output `name` too), runs it quietly with `flags` and loads its
 * records. */
static void run_quiet(const char *name, const char *body, const char *flags, recs *rs) {
    const char *exp = write_exp(name, name, body);
    ig_test_run *r = malloc(sizeof *r);
    char args[8192];
    snprintf(args, sizeof args, "run '%s' --quiet%s", exp, flags);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n%s\n%s\n", r->out, r->err);
    free(r);
    load_recs(name, rs);
}

/* Modeled points: the cost model for the paper's OPT-13B on the A6000 profile; InfiniGen's
 * fetched fraction makes it faster than full fetch with the KV cache in host memory. */
static void test_modeled(void) {
    const char *body =
        OPT13B_KV_HOST "workload: {batch: 20, prompt_len: [1024, 1920], gen_len: 128}\n"
                       "policies: [full, infinigen]\n"
                       "metrics: [throughput, bytes]\n";
    recs rs;
    run_quiet("modeled", body, "", &rs);
    CU_ASSERT_EQUAL(rs.n_ok, 4);
    double tp[2][2] = {{0}};
    for (int i = 0; i < rs.n; i++) {
        json_object *v;
        json_object_object_get_ex(rs.r[i], "point", &v);
        int p = json_object_get_int(v);
        json_object_object_get_ex(rs.r[i], "mode", &v);
        CU_ASSERT_STRING_EQUAL(json_object_get_string(v), "modeled");
        if (p < 4) tp[p / 2][p % 2] = metric(rs.r[i], "throughput_tok_s");
        CU_ASSERT(metric(rs.r[i], "h2d_bytes_per_step") > 0);
    }
    for (int l = 0; l < 2; l++) CU_ASSERT(tp[l][1] > tp[l][0] && tp[l][0] > 0);
    CU_ASSERT(tp[1][0] < tp[0][0]); /* longer sequences: slower full fetch */
    free_recs(&rs);
}

/* measure.prefill: once: a measured point's repeats decode on from one prefill (after the
 * untimed warm-up steps), so its modeled twin predicts those steps: decode_context [P + 2, P + 2 +
 * 3 G) and the decode step that `igen plan` gives for that window, the prefill of P itself. */
static double plan_json(const char *args, const char *key) {
    ig_test_run *r = malloc(sizeof *r);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    json_object *o = json_tokener_parse(r->out), *c = NULL, *v = NULL;
    double x = -1;
    if (o && json_object_object_get_ex(o, "cost", &c) && json_object_object_get_ex(c, key, &v))
        x = json_object_get_double(v);
    json_object_put(o);
    free(r);
    return x;
}

static void test_modeled_window(void) {
    const char *body = OPT13B_KV_HOST "workload: {batch: 4, prompt_len: 1024, gen_len: 64}\n"
                                      "policies: [full]\n"
                                      "measure: {repeat: 3, prefill: once}\n";
    recs rs;
    run_quiet("window", body, " --no-plot", &rs);
    CU_ASSERT_EQUAL_FATAL(rs.n_ok, 1);
    char args[8192];
    json_object *m = NULL, *dc = NULL;
    CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[0], "metrics", &m) &&
                    json_object_object_get_ex(m, "decode_context", &dc));
    CU_ASSERT_EQUAL(json_object_get_int(json_object_array_get_idx(dc, 0)),
                    1024 + IG_RUN_WARMUP_STEPS);
    CU_ASSERT_EQUAL(json_object_get_int(json_object_array_get_idx(dc, 1)),
                    1024 + IG_RUN_WARMUP_STEPS + 3 * 64);
    const char *common = "plan --shape opt-13b --hardware a6000-pcie3 --gpu-batch 4 --percent "
                         "100,0,0,100,100,0 --json";
    snprintf(args, sizeof args, "%s --prompt-len %d --gen-len %d", common,
             1024 + IG_RUN_WARMUP_STEPS, 3 * 64);
    double step = plan_json(args, "decode_step_s");
    snprintf(args, sizeof args, "%s --prompt-len 1024 --gen-len 64", common);
    double step0 = plan_json(args, "decode_step_s"), pre = plan_json(args, "prefill_s");
    CU_ASSERT(step > step0 && step0 > 0); /* a longer context: more KV over the link */
    IG_ASSERT_NEAR(metric(rs.r[0], "decode_step_s"), step, 1e-9 * step);
    IG_ASSERT_NEAR(metric(rs.r[0], "prefill_s"), pre, 1e-9 * pre);
    free_recs(&rs);
}

/* --part writes parts/, --merge folds them in; --slurm writes the job scripts. */
static void test_part_merge_slurm(void) {
    const char *body = "mode: modeled\nmodel: {shape: opt-6.7b}\nhardware: a6000-pcie3\n"
                       "workload: {batch: 8, prompt_len: [512, 1024, 2048], gen_len: 32}\n"
                       "policies: [full]\n";
    const char *exp = write_exp("parts", "parts", body);
    ig_test_run *r = malloc(sizeof *r);
    char args[8192];
    for (int p = 2; p >= 0; p--) {
        snprintf(args, sizeof args, "run '%s' --point %d --part --quiet", exp, p);
        ig_test_igen(r, NULL, args);
        CU_ASSERT_EQUAL(r->status, 0);
    }
    recs rs;
    load_recs("parts", &rs);
    CU_ASSERT_EQUAL(rs.n, 0); /* nothing appended by the parts */
    snprintf(args, sizeof args, "run '%s' --merge --no-plot", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    load_recs("parts", &rs);
    CU_ASSERT_EQUAL(rs.n_ok, 3);
    free_recs(&rs);
    snprintf(args, sizeof args, "run '%s' --slurm --partition gpu --max-parallel 2", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    char path[4400];
    snprintf(path, sizeof path, "%s/parts/slurm/array.sbatch", g_dir);
    char *s = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "#SBATCH --array=0-2%2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "#SBATCH --partition=gpu"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "--point \"$SLURM_ARRAY_TASK_ID\" --part"));
    free(s);
    /* --output reaches the tasks as a --set of the output key */
    snprintf(args, sizeof args, "run '%s' --slurm --output '%s/other dir'", exp, g_dir);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    snprintf(path, sizeof path, "%s/other dir/slurm/array.sbatch", g_dir);
    s = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "--set 'output='\\''"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "/other dir'\\'''"));
    free(s);
    free(r);
}

static void test_bad_input(void) {
    const char *exp = write_exp("bad", "bad", "workload:\n  batch: -3\n");
    ig_test_run *r = malloc(sizeof *r);
    char args[8192];
    snprintf(args, sizeof args, "run '%s'", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "bad.yaml:5:10: workload.batch"));
    exp = write_exp("bad2", "bad2", "polices: [full]\n");
    snprintf(args, sizeof args, "run '%s'", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "did you mean 'policies'"));
    snprintf(args, sizeof args, "run '%s' --set workload.bach=4", write_exp("ok", "ok", ""));
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "workload.bach"));
    snprintf(args, sizeof args, "run '%s' --point 5", write_exp("ok", "ok", ""));
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "has 1 points"));
    ig_test_igen(r, NULL, "run --help");
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "--dry-run"));
    free(r);
}

/* Every shipped experiment validates; the quickstart runs end to end on the default model (made
 * smaller with --set), and a paper figure runs modeled with one command. */
static void test_shipped_configs(void) {
    static const char *names[] = {"quickstart",   "paper-fig14",  "paper-fig15",
                                  "paper-fig16a", "paper-fig16b", "paper-table2"};
    ig_test_run *r = malloc(sizeof *r);
    char args[8192];
    /* without the shared data beside the checkout, the configs that read its texts get another */
    const char *wiki = ig_test_shared("wikitext-2-raw/wiki.test.raw");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char set[4400] = "";
        if (!wiki && (i == 0 || i == 5))
            snprintf(set, sizeof set, "--set 'workload.text=%s/README.md'", IG_SOURCE_DIR);
        snprintf(args, sizeof args, "run '%s/configs/experiments/%s.yaml' --dry-run %s",
                 IG_SOURCE_DIR, names[i], set);
        ig_test_igen(r, NULL, args);
        CU_ASSERT_EQUAL(r->status, 0);
        if (r->status) fprintf(stderr, "\n%s: %s", names[i], r->err);
        CU_ASSERT_PTR_NOT_NULL(strstr(r->out, " points; axes: "));
    }
    snprintf(
        args, sizeof args,
        "run '%s/configs/experiments/paper-fig16a.yaml' --quiet --no-plot --output '%s/fig16a'",
        IG_SOURCE_DIR, g_dir);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    recs rs;
    load_recs("fig16a", &rs);
    CU_ASSERT_EQUAL(rs.n_ok, 20);
    /* the infinigen entry with the measured fetch profile reads less as the sequence grows, the
     * plain one its cap; each record says which */
    double prev = 2, ratio_prev = 0;
    for (int i = 0; i < rs.n; i++) {
        json_object *m, *src, *lab;
        if (!json_object_object_get_ex(rs.r[i], "metrics", &m) ||
            !json_object_object_get_ex(m, "fetch_source", &src) ||
            !json_object_object_get_ex(rs.r[i], "label", &lab))
            continue;
        const char *l = json_object_get_string(lab), *fs = json_object_get_string(src);
        if (strstr(l, "fetch_profile=")) {
            CU_ASSERT_PTR_NOT_NULL(strstr(fs, "measured profile"));
            double f = metric(rs.r[i], "kv_read_fraction");
            CU_ASSERT(f > 0 && f < prev);
            prev = f;
            /* against h2o at the same length (two records before) */
            double ratio = metric(rs.r[i], "decode_throughput_tok_s") /
                           metric(rs.r[i - 2], "decode_throughput_tok_s");
            CU_ASSERT(ratio > ratio_prev);
            ratio_prev = ratio;
        } else if (strstr(l, "policy=infinigen")) {
            CU_ASSERT_PTR_NOT_NULL(strstr(fs, "the cap"));
        }
    }
    CU_ASSERT(prev < 0.2 && ratio_prev > 1);
    free_recs(&rs);
    if (!ig_test_default_model() || !ig_test_shared("wikitext-2-raw/wiki.test.raw")) {
        printf("\n    (quickstart end to end not run: the default model or WikiText-2 is missing)");
        free(r);
        return;
    }
    snprintf(args, sizeof args,
             "run '%s/configs/experiments/quickstart.yaml' --quiet --output '%s/qs' "
             "--set workload.prompt_len=[16,32] --set workload.gen_len=4 --set workload.batch=2 "
             "--set workload.ppl.ctx=48 --set workload.ppl.windows=1 --set workload.ppl.prefill=16",
             IG_SOURCE_DIR, g_dir);
    /* hardware: this profiles the machine once (--quick here) for the modeled twins */
    ig_test_igen(r, "IGEN_PROFILE_HW_QUICK=1", args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n%s\n%s", r->out, r->err);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "infinigen(skew=auto)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "behind the link model, 12 GB/s"));
    load_recs("qs", &rs);
    CU_ASSERT_EQUAL(rs.n_ok, 16); /* 8 measured, 8 modeled */
    int n_measured = 0;
    for (int i = 0; i < rs.n; i++) {
        json_object *md;
        CU_ASSERT(metric(rs.r[i], "throughput_tok_s") > 0);
        if (json_object_object_get_ex(rs.r[i], "mode", &md) &&
            !strcmp(json_object_get_string(md), "measured")) {
            n_measured++;
            CU_ASSERT(metric(rs.r[i], "ppl") > 1);
        } else { /* the profile's decode matmuls were timed at the model's shapes, batch 2 */
            json_object *mx, *mr;
            CU_ASSERT(json_object_object_get_ex(rs.r[i], "metrics", &mx) &&
                      json_object_object_get_ex(mx, "matmul_rates", &mr) &&
                      strstr(json_object_get_string(mr),
                             "measured at the model's shapes 576,576,192,1536,3,49152,30,2"));
            /* and sampled again in each of its measured twin's 3 rounds: priced at their median */
            json_object *smp, *lay, *v;
            CU_ASSERT_FATAL(json_object_object_get_ex(mx, "matmul_samples", &smp));
            CU_ASSERT(json_object_object_get_ex(smp, "from", &v) &&
                      !strcmp(json_object_get_string(v), "the measured twin's group"));
            CU_ASSERT_FATAL(json_object_object_get_ex(smp, "layer_gflops", &lay));
            CU_ASSERT_EQUAL_FATAL(json_object_array_length(lay), 3);
            double x[3];
            for (int k = 0; k < 3; k++) {
                x[k] = json_object_get_double(json_object_array_get_idx(lay, (size_t)k));
                CU_ASSERT(x[k] > 0);
            }
            double med = x[0] > x[1] ? (x[1] > x[2]   ? x[1]
                                        : x[0] > x[2] ? x[2]
                                                      : x[0])
                                     : (x[0] > x[2]   ? x[0]
                                        : x[1] > x[2] ? x[2]
                                                      : x[1]);
            CU_ASSERT(json_object_object_get_ex(smp, "used_layer_gflops", &v) &&
                      json_object_get_double(v) == med);
        }
    }
    CU_ASSERT_EQUAL(n_measured, 8);
    free_recs(&rs);
    free(r);
}

/* Dummy weights (dummy:SHAPE): runs with random prompts, the same numbers for the same seed,
 * and commands that need a tokenizer say so. */
static void test_dummy_model(void) {
    ig_test_run *r = malloc(sizeof *r);
    double tps[2] = {0, 0};
    char first[2][64] = {"", ""};
    for (int k = 0; k < 2; k++) {
        ig_test_igen(r, NULL,
                     "bench-decode --model dummy:smollm2-135m --dtype f16 --batch 2 "
                     "--prompt-len 8 --gen-len 3 --policy full --json --quiet");
        CU_ASSERT_EQUAL(r->status, 0);
        json_object *o = json_tokener_parse(r->out), *v;
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        CU_ASSERT(json_object_object_get_ex(o, "model", &v) &&
                  !strcmp(json_object_get_string(v), "dummy:smollm2-135m"));
        CU_ASSERT(json_object_object_get_ex(o, "prompt_source", &v) &&
                  !strcmp(json_object_get_string(v), "random"));
        if (json_object_object_get_ex(o, "decode_tokens_per_s", &v))
            tps[k] = json_object_get_double(v);
        if (json_object_object_get_ex(o, "kv_h2d_bytes_per_token", &v))
            snprintf(first[k], sizeof first[k], "%.17g", json_object_get_double(v));
        json_object_put(o);
    }
    CU_ASSERT(tps[0] > 0 && tps[1] > 0);
    CU_ASSERT_STRING_EQUAL(first[0], first[1]);
    /* the library: the same seed gives the same weights and logits, another seed others */
    ig_model_config c = {.arch = IG_ARCH_LLAMA,
                         .n_layer = 2,
                         .d_model = 64,
                         .n_head = 4,
                         .n_kv_head = 2,
                         .head_dim = 16,
                         .d_ffn = 128,
                         .vocab = 100,
                         .max_pos = 64,
                         .norm_eps = 1e-5f,
                         .rope_theta = 10000,
                         .rot_dim = 16,
                         .bos = -1,
                         .eos = -1};
    ig_model *m[3] = {NULL, NULL, NULL};
    ig_error err;
    uint64_t seeds[3] = {7, 7, 8};
    float logits[3][100];
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_FATAL(ig_model_create_dummy(&c, IG_DTYPE_F32, seeds[k], "unit", &m[k], &err) ==
                        IG_OK);
        CU_ASSERT_PTR_NULL(ig_model_tokenizer(m[k]));
        ig_engine_opts eo = {.max_seqs = 1, .max_ctx = 8, .max_batch_tokens = 8, .threads = 1};
        ig_engine *e = NULL;
        CU_ASSERT_FATAL(ig_engine_create(m[k], &eo, &e, &err) == IG_OK);
        int32_t toks[4] = {1, 5, 9, 42};
        ig_seq_tokens q = {0, toks, 4};
        CU_ASSERT(ig_engine_forward(e, &q, 1, &err) == IG_OK);
        ig_engine_logits(e, 3, 1, logits[k]);
        for (int v = 0; v < 100; v++) CU_ASSERT(isfinite(logits[k][v]));
        ig_engine_free(e);
    }
    CU_ASSERT(memcmp(logits[0], logits[1], sizeof logits[0]) == 0);
    CU_ASSERT(memcmp(logits[0], logits[2], sizeof logits[0]) != 0);
    for (int k = 0; k < 3; k++) ig_model_free(m[k]);
    c.n_head = 3; /* heads must divide: a clear error, not a crash */
    CU_ASSERT_NOT_EQUAL(ig_model_create_dummy(&c, IG_DTYPE_F32, 1, "bad", &m[0], &err), IG_OK);
    CU_ASSERT_PTR_NULL(m[0]);
    ig_test_igen(r, NULL, "generate --model dummy:smollm2-135m --dtype f16 --prompt hi -n 2");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "no tokenizer"));
    ig_test_igen(r, NULL, "bench-decode --model dummy:no-such-shape");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "no-such-shape"));
    free(r);
}

/* The two-policy experiment of the repeat tests (full and h2o, batch 2, 8 + 4 tokens, KV homed in
 * host memory) with `extra` (its metrics and measure lines) run by igen with env; r receives it. */
static void run_two_policies(const char *name, const char *extra, const char *env, ig_test_run *r) {
    char body[8192], args[8192];
    snprintf(body, sizeof body,
             "workload: {batch: 2, prompt_len: 8, gen_len: 4, text: %s}\n"
             "placement: {kv: {gpu: 0, cpu: 100}}\n"
             "policies: [full, {name: h2o, params: {heavy_ratio: 0.2}}]\n%s",
             g_text, extra);
    const char *exp = write_exp(name, name, body);
    snprintf(args, sizeof args, "run '%s' --no-plot", exp);
    ig_test_igen(r, env, args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n%s\n%s\n", r->out, r->err);
}

/* metrics.rank.rank of a record, or -1. */
static int rank_of(json_object *rec) {
    json_object *m, *rk, *v;
    if (!json_object_object_get_ex(rec, "metrics", &m) ||
        !json_object_object_get_ex(m, "rank", &rk) || !json_object_object_get_ex(rk, "rank", &v))
        return -1;
    return json_object_get_int(v);
}

/* measure: repeats interleaved over the policies, their statistics recomputed here from the
 * repeats the record keeps, a delay injected into one repeat of one point flags that point as
 * noisy, and the speedups against the baseline are the per-round ratios. */
static void test_repeats(void) {
    ig_test_run *r = malloc(sizeof *r);
    /* point 1 (h2o), repeat 1 of 0..2: 1 s more decode time than its 4 steps take */
    run_two_policies("repeats",
                     "metrics: [throughput]\nmeasure: {repeat: 3, baseline: full, noise: 0.5}\n",
                     "IGEN_RUN_INJECT_DELAY=1:1:1", r);
    /* interleaved: full's and h2o's repeats alternate on the progress lines */
    const char *a = strstr(r->err, "policy=full (repeat 2/3)");
    const char *b = strstr(r->err, "(heavy_ratio=0.2) (repeat 1/3)");
    const char *c = a ? strstr(a, "(heavy_ratio=0.2) (repeat 2/3)") : NULL;
    CU_ASSERT(a && b && c && b < a);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "(warm-up)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "noisy"));
    recs rs;
    load_recs("repeats", &rs);
    CU_ASSERT_EQUAL_FATAL(rs.n, 2);
    double dt[2][3] = {{0}};
    for (int i = 0; i < 2; i++) {
        json_object *m, *reps, *st, *v;
        CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[i], "metrics", &m));
        CU_ASSERT_FATAL(json_object_object_get_ex(m, "repeats", &reps));
        CU_ASSERT_EQUAL_FATAL(json_object_array_length(reps), 3);
        double x[3], sum = 0;
        for (int k = 0; k < 3; k++) {
            json_object *one = json_object_array_get_idx(reps, (size_t)k);
            CU_ASSERT_FATAL(json_object_object_get_ex(one, "decode_throughput_tok_s", &v));
            x[k] = dt[i][k] = json_object_get_double(v);
            sum += x[k];
        }
        /* median, min, max, 95% interval by hand */
        double lo = fmin(x[0], fmin(x[1], x[2])), hi = fmax(x[0], fmax(x[1], x[2]));
        double med = x[0] + x[1] + x[2] - lo - hi, mean = sum / 3, ss = 0;
        for (int k = 0; k < 3; k++) ss += (x[k] - mean) * (x[k] - mean);
        double half = 4.3027 * sqrt(ss / 2) / sqrt(3.0);
        CU_ASSERT_DOUBLE_EQUAL(metric(rs.r[i], "decode_throughput_tok_s"), med, 1e-9 * med);
        CU_ASSERT_FATAL(json_object_object_get_ex(m, "decode_throughput_tok_s_stats", &st));
        CU_ASSERT(json_object_object_get_ex(st, "min", &v) && json_object_get_double(v) == lo);
        CU_ASSERT(json_object_object_get_ex(st, "max", &v) && json_object_get_double(v) == hi);
        CU_ASSERT(json_object_object_get_ex(st, "ci95", &v) &&
                  fabs(json_object_get_double(json_object_array_get_idx(v, 0)) - (mean - half)) <
                      1e-9 * mean &&
                  fabs(json_object_get_double(json_object_array_get_idx(v, 1)) - (mean + half)) <
                      1e-9 * mean);
        /* the prediction interval for another run's median of 3 (Var(median of 3) = 0.448671) */
        double phalf = 4.3027 * sqrt(ss / 2) * sqrt(1.0 / 3 + 0.448671);
        CU_ASSERT(json_object_object_get_ex(st, "pi95", &v) &&
                  fabs(json_object_get_double(json_object_array_get_idx(v, 0)) - (mean - phalf)) <
                      1e-6 * mean &&
                  fabs(json_object_get_double(json_object_array_get_idx(v, 1)) - (mean + phalf)) <
                      1e-6 * mean);
        CU_ASSERT(json_object_object_get_ex(rs.r[i], "machine_state", &v));
    }
    /* the delayed repeat is the slowest by far, and the point is noisy */
    CU_ASSERT(dt[1][1] < 0.5 * dt[1][0] && dt[1][1] < 0.5 * dt[1][2]);
    json_object *m1, *v;
    CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[1], "metrics", &m1));
    CU_ASSERT(json_object_object_get_ex(m1, "noisy", &v) && json_object_get_boolean(v));
    CU_ASSERT(json_object_object_get_ex(m1, "noisy_metrics", &v) &&
              strstr(json_object_to_json_string(v), "decode_throughput_tok_s"));
    /* speedup of h2o against full: the median of the three per-round ratios */
    json_object *sp, *d, *med;
    CU_ASSERT_FATAL(json_object_object_get_ex(m1, "speedup", &sp) &&
                    json_object_object_get_ex(sp, "decode_throughput_tok_s", &d) &&
                    json_object_object_get_ex(d, "median", &med));
    double q[3];
    for (int k = 0; k < 3; k++) q[k] = dt[1][k] / dt[0][k];
    double qlo = fmin(q[0], fmin(q[1], q[2])), qhi = fmax(q[0], fmax(q[1], q[2]));
    CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(med), q[0] + q[1] + q[2] - qlo - qhi, 1e-9);
    /* the ranks: h2o against full by the 95% t-interval of the same per-round ratios' logarithms */
    double lq[3], qm = 0, qss = 0;
    for (int k = 0; k < 3; k++) qm += (lq[k] = log(q[k])) / 3;
    for (int k = 0; k < 3; k++) qss += (lq[k] - qm) * (lq[k] - qm);
    double qh = 4.3027 * sqrt(qss / 2) / sqrt(3.0);
    int want_h2o = qm - qh > 0 ? 1 : qm + qh < 0 ? 2 : 1; /* faster, slower, tied */
    int want_full = qm - qh > 0 ? 2 : 1;
    CU_ASSERT_EQUAL(rank_of(rs.r[1]), want_h2o);
    CU_ASSERT_EQUAL(rank_of(rs.r[0]), want_full);
    free_recs(&rs);
    /* h2o stalled by 0.5 s in every round: slower than full in each, so ranked 2 of 2, untied */
    run_two_policies("ranks", "metrics: [throughput]\nmeasure: {repeat: 3, baseline: full}\n",
                     "IGEN_RUN_INJECT_DELAY=1:*:0.5", r);
    load_recs("ranks", &rs);
    CU_ASSERT_EQUAL_FATAL(rs.n, 2);
    CU_ASSERT_EQUAL(rank_of(rs.r[0]), 1);
    CU_ASSERT_EQUAL(rank_of(rs.r[1]), 2);
    json_object *m0, *rk, *tied;
    CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[0], "metrics", &m0) &&
                    json_object_object_get_ex(m0, "rank", &rk));
    CU_ASSERT(json_object_object_get_ex(rk, "tied_points", &tied) &&
              json_object_array_length(tied) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "2/2"));
    free_recs(&rs);
    free(r);
}

/* measure.prefill: once: each point prefilled once, its repeats decoding on: repeat r covers the
 * steps [2 + r * gen_len, 2 + (r + 1) * gen_len) after the prompt (two warm-up steps first), the
 * one prefill measurement is every repeat's, and the rounds stay interleaved. */
static void test_prefill_once(void) {
    ig_test_run *r = malloc(sizeof *r);
    run_two_policies("once",
                     "metrics: [throughput, bytes]\n"
                     "measure: {repeat: 3, baseline: full, prefill: once}\n",
                     NULL, r);
    const char *a = strstr(r->err, "policy=full (prefill)");
    const char *b = strstr(r->err, "(heavy_ratio=0.2) (prefill)");
    const char *c = b ? strstr(b, "policy=full (repeat 1/3)") : NULL;
    const char *d = c ? strstr(c, "(heavy_ratio=0.2) (repeat 1/3)") : NULL;
    const char *e = d ? strstr(d, "policy=full (repeat 2/3)") : NULL;
    CU_ASSERT(a && b && c && d && e && a < b);
    CU_ASSERT_PTR_NULL(strstr(r->err, "(warm-up)"));
    recs rs;
    load_recs("once", &rs);
    CU_ASSERT_EQUAL_FATAL(rs.n_ok, 2);
    for (int i = 0; i < 2; i++) {
        json_object *m, *reps, *v, *ms;
        CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[i], "metrics", &m));
        CU_ASSERT_FATAL(json_object_object_get_ex(m, "repeats", &reps));
        CU_ASSERT_EQUAL_FATAL(json_object_array_length(reps), 3);
        double pf0 = -1, steal_max = -1;
        for (int k = 0; k < 3; k++) {
            json_object *one = json_object_array_get_idx(reps, (size_t)k), *dc;
            CU_ASSERT_FATAL(json_object_object_get_ex(one, "decode_context", &dc));
            CU_ASSERT_EQUAL(json_object_get_int(json_object_array_get_idx(dc, 0)), 8 + 2 + 4 * k);
            CU_ASSERT_EQUAL(json_object_get_int(json_object_array_get_idx(dc, 1)),
                            8 + 2 + 4 * (k + 1));
            CU_ASSERT(json_object_object_get_ex(one, "prefill_measured", &v) &&
                      !strcmp(json_object_get_string(v), "once"));
            CU_ASSERT_FATAL(json_object_object_get_ex(one, "prefill_s", &v));
            double pf = json_object_get_double(v);
            CU_ASSERT(pf > 0);
            if (k == 0) pf0 = pf;
            CU_ASSERT(pf == pf0); /* one prefill, shared by the repeats */
            CU_ASSERT(json_object_object_get_ex(one, "decode_throughput_tok_s", &v) &&
                      json_object_get_double(v) > 0);
            /* the share of the repeat's CPU time the hypervisor gave elsewhere (/proc/stat) */
            if (access("/proc/stat", R_OK) == 0) {
                CU_ASSERT_FATAL(json_object_object_get_ex(one, "cpu_steal_frac", &v));
                if (v) { /* null: the repeat was shorter than a clock tick */
                    double sf = json_object_get_double(v);
                    CU_ASSERT(sf >= 0 && sf <= 1);
                    if (sf > steal_max) steal_max = sf;
                }
            }
        }
        if (access("/proc/stat", R_OK) == 0) { /* the point keeps the largest */
            if (steal_max >= 0)
                CU_ASSERT(json_object_object_get_ex(m, "cpu_steal_frac_max", &v) &&
                          json_object_get_double(v) == steal_max);
            CU_ASSERT(!json_object_object_get_ex(m, "cpu_steal_frac", &v));
        }
        CU_ASSERT(json_object_object_get_ex(rs.r[i], "machine_state", &ms) &&
                  json_object_object_get_ex(ms, "prefill", &v) &&
                  !strcmp(json_object_get_string(v), "once"));
    }
    free_recs(&rs);
    free(r);
}

/* model.act_quant sweeps the CPU kernels' int8-activation switch per point: each record says
 * which it ran, the q8 point's perplexity (decoded through the GEMV) differs from the exact one,
 * and an experiment that does not set the key keeps it out of its configs (and so its point keys).
 */
static void test_act_quant(void) {
    ig_test_run *r = malloc(sizeof *r);
    char body[8192], args[8192];
    snprintf(body, sizeof body,
             "model: {path: %s, dtype: q4_1, act_quant: [none, q8]}\n"
             "workload: {batch: 2, prompt_len: 8, gen_len: 4, text: %s,\n"
             "           ppl: {ctx: 32, windows: 2, prefill: 4}}\n"
             "metrics: [throughput, ppl]\n"
             "measure: {repeat: 2}\n",
             ig_test_fixture("tiny_llama"), g_text);
    const char *exp = write_exp("actq", "actq", body);
    snprintf(args, sizeof args, "run '%s' --no-plot", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n%s\n%s\n", r->out, r->err);
    recs rs;
    load_recs("actq", &rs);
    CU_ASSERT_EQUAL_FATAL(rs.n_ok, 2);
    double ppl[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        json_object *c, *mo, *v, *m, *reps;
        CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[i], "config", &c) &&
                        json_object_object_get_ex(c, "model", &mo) &&
                        json_object_object_get_ex(mo, "act_quant", &v));
        int q8 = !strcmp(json_object_get_string(v), "q8");
        CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[i], "metrics", &m) &&
                        json_object_object_get_ex(m, "repeats", &reps));
        for (int k = 0; k < 2; k++) {
            json_object *one = json_object_array_get_idx(reps, (size_t)k);
            CU_ASSERT(json_object_object_get_ex(one, "act_quant", &v) &&
                      !strcmp(json_object_get_string(v), q8 ? "q8" : "none"));
        }
        ppl[q8] = metric(rs.r[i], "ppl");
    }
    CU_ASSERT(ppl[0] > 1 && ppl[1] > 1);
    CU_ASSERT(ppl[0] != ppl[1]);
    /* the tiny model's random weights make ppl enormous: compare the mean NLLs */
    CU_ASSERT(fabs(log(ppl[1]) - log(ppl[0])) < 0.05 * log(ppl[0]));
    free_recs(&rs);
    /* not set: not in the config */
    run_two_policies("noactq", "metrics: [throughput]\nmeasure: {repeat: 1}\n", NULL, r);
    load_recs("noactq", &rs);
    CU_ASSERT_EQUAL_FATAL(rs.n_ok, 2);
    json_object *c, *mo, *v;
    CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[0], "config", &c) &&
                    json_object_object_get_ex(c, "model", &mo));
    CU_ASSERT(!json_object_object_get_ex(mo, "act_quant", &v));
    free_recs(&rs);
    free(r);
}

/* model.weights_mem sweeps where the matrices live: each repeat's record says which the load
 * did, and the perplexity is the same to the bit (the same bytes, mapped or copied). */
static void test_weights_mem(void) {
    ig_test_run *r = malloc(sizeof *r);
    char body[8192], args[8192];
    snprintf(body, sizeof body,
             "model: {path: %s, weights_mem: [map, copy]}\n"
             "workload: {batch: 1, prompt_len: 8, gen_len: 2, text: %s,\n"
             "           ppl: {ctx: 32, windows: 2, prefill: 4}}\n"
             "metrics: [throughput, ppl]\n"
             "measure: {repeat: 1}\n",
             ig_test_fixture("tiny_llama"), g_text);
    const char *exp = write_exp("wmem", "wmem", body);
    snprintf(args, sizeof args, "run '%s' --no-plot", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n%s\n%s\n", r->out, r->err);
    recs rs;
    load_recs("wmem", &rs);
    CU_ASSERT_EQUAL_FATAL(rs.n_ok, 2);
    double ppl[2] = {0, 0};
    int seen[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        json_object *c, *mo, *v, *m, *reps;
        CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[i], "config", &c) &&
                        json_object_object_get_ex(c, "model", &mo) &&
                        json_object_object_get_ex(mo, "weights_mem", &v));
        int copy = !strcmp(json_object_get_string(v), "copy");
        seen[copy] = 1;
        CU_ASSERT_FATAL(json_object_object_get_ex(rs.r[i], "metrics", &m) &&
                        json_object_object_get_ex(m, "repeats", &reps));
        json_object *one = json_object_array_get_idx(reps, 0);
        CU_ASSERT(json_object_object_get_ex(one, "weights_mem", &v) &&
                  !strcmp(json_object_get_string(v), copy ? "copy" : "map"));
        ppl[copy] = metric(rs.r[i], "ppl");
    }
    CU_ASSERT(seen[0] && seen[1]);
    CU_ASSERT(ppl[0] > 1 && ppl[0] == ppl[1]);
    free_recs(&rs);
    /* a name that is not one of them: refused, naming the key */
    snprintf(body, sizeof body, "model: {path: %s, weights_mem: huge}\nmetrics: [throughput]\n",
             ig_test_fixture("tiny_llama"));
    exp = write_exp("wmembad", "wmembad", body);
    snprintf(args, sizeof args, "run '%s' --no-plot", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_NOT_EQUAL(r->status, 0);
    CU_ASSERT(strstr(r->err, "weights_mem") != NULL);
    free(r);
}

/* mode: [measured, modeled] is an axis: every point both ways, the modeled series dashed in the
 * measured one's colour. */
static void test_mode_axis(void) {
    char body[8192];
    snprintf(body, sizeof body,
             "mode: [measured, modeled]\n"
             "model: {path: %s, shape: smollm2-135m}\n"
             "hardware: a6000-pcie3\n"
             "workload: {batch: 2, prompt_len: [8, 16], gen_len: 4, text: %s}\n"
             "placement: {kv: {gpu: 0, cpu: 100}}\n"
             "policies: [full]\nmetrics: [throughput]\nmeasure: {repeat: 1}\n",
             ig_test_fixture("tiny_llama"), g_text);
    const char *exp = write_exp("modes", "modes", body);
    ig_test_run *r = malloc(sizeof *r);
    char args[8192];
    snprintf(args, sizeof args, "run '%s' --quiet", exp);
    ig_test_igen(r, NULL, args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n%s\n%s\n", r->out, r->err);
    recs rs;
    load_recs("modes", &rs);
    CU_ASSERT_EQUAL(rs.n_ok, 4);
    int measured = 0, modeled = 0;
    for (int i = 0; i < rs.n; i++) {
        json_object *v;
        CU_ASSERT(metric(rs.r[i], "decode_throughput_tok_s") > 0);
        if (json_object_object_get_ex(rs.r[i], "mode", &v)) {
            measured += !strcmp(json_object_get_string(v), "measured");
            modeled += !strcmp(json_object_get_string(v), "modeled");
        }
    }
    CU_ASSERT(measured == 2 && modeled == 2);
    free_recs(&rs);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "pred/meas")); /* the modeled rows' ratio column */
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        char path[4400];
        snprintf(path, sizeof path, "%s/modes/plots/decode_throughput_vs_seqlen.gp", g_dir);
        char *gp = slurp(path);
        CU_ASSERT(gp && strstr(gp, "with lines dt 2 lw 2 lc 1 title 'full mode=modeled'") &&
                  strstr(gp, "with yerrorlines lw 2 lc 1 title 'full mode=measured'"));
        free(gp);
    }
    free(r);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("run", suite_init, NULL);
    CU_add_test(s, "measured_sweep", test_measured_sweep);
    CU_add_test(s, "kill_resume", test_kill_resume);
    CU_add_test(s, "modeled", test_modeled);
    CU_add_test(s, "modeled_window", test_modeled_window);
    CU_add_test(s, "part_merge_slurm", test_part_merge_slurm);
    CU_add_test(s, "bad_input", test_bad_input);
    CU_add_test(s, "shipped_configs", test_shipped_configs);
    CU_add_test(s, "dummy_model", test_dummy_model);
    CU_add_test(s, "repeats", test_repeats);
    CU_add_test(s, "prefill_once", test_prefill_once);
    CU_add_test(s, "mode_axis", test_mode_axis);
    CU_add_test(s, "act_quant", test_act_quant);
    CU_add_test(s, "weights_mem", test_weights_mem);
}
