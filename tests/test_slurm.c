/* core/app/exp/slurm: shell quoting (exact forms, and a round trip through bash with spaces,
 * quotes, $, backticks, backslashes and newlines), #SBATCH escaping, the generated array and merge
 * scripts line by line (with no options, with every option, with paths and --set values that need
 * quoting), the scripts run by bash with a fake igen that records its argv, bad input, and
 * submission through a fake sbatch first in PATH (the dependency on the array's id, sbatch failing,
 * sbatch missing). A real Slurm submission is in test_slurm_local.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/app/exp/slurm.h"
#include "tests/test_util.h"

#define MAXL 64

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[len] = '\0';
    fclose(f);
    if (n) *n = (size_t)len;
    return buf;
}

static void write_file(const char *path, const char *text, int exec) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    if (exec) chmod(path, 0755);
}

/* Splits text into lines (in place); returns the count. */
static int split_lines(char *text, char **lines, int max) {
    int n = 0;
    char *p = text;
    while (*p && n < max) {
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

static int has_line(char **lines, int n, const char *want) {
    for (int i = 0; i < n; i++)
        if (!strcmp(lines[i], want)) return 1;
    return 0;
}

static int count_prefix(char **lines, int n, const char *prefix) {
    int c = 0;
    for (int i = 0; i < n; i++) c += !strncmp(lines[i], prefix, strlen(prefix));
    return c;
}

static void quote(const char *s, char *out, size_t n) {
    size_t need = ig_slurm_shell_quote(s, out, n);
    CU_ASSERT_FATAL(need < n);
}

static void test_quote_exact(void) {
    char q[256];
    quote("abc", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "abc");
    quote("/a/b-c_d.yaml", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "/a/b-c_d.yaml");
    quote("workload.batch=8", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "workload.batch=8");
    quote("", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "''");
    quote("a b", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "'a b'");
    quote("it's", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "'it'\\''s'");
    quote("$HOME `id`", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "'$HOME `id`'");
    quote("workload.batch=[4, 8]", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "'workload.batch=[4, 8]'");
    /* Too small: the length it needs is returned, the output is cut and terminated. */
    char small[4];
    CU_ASSERT_EQUAL(ig_slurm_shell_quote("a b", small, sizeof small), 5);
    CU_ASSERT_STRING_EQUAL(small, "'a ");
    CU_ASSERT_EQUAL(ig_slurm_shell_quote("it's", NULL, 0), 9);
}

/* Every string quoted, given to bash's printf, comes back byte for byte. */
static void test_quote_roundtrip(void) {
    static const char *const cases[] = {
        "plain",
        "with space",
        "  leading and trailing  ",
        "single'quote",
        "''",
        "double\"quote",
        "dollar $HOME ${PATH} $(id) $0",
        "back`tick` `id`",
        "back\\slash \\n \\",
        "line\nbreak",
        "tab\there",
        "glob * ? [a-z] ~ ~root",
        "semi; amp & pipe | redirect > < ( ) { }",
        "hash # bang ! percent % caret ^",
        "workload.batch=[4, 8]",
        "policies={name: h2o, params: {heavy_ratio: 0.1}}",
        "",
        "utf-8 \xc3\xa9\xe2\x82\xac",
        "-n",
        "--set",
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    char script[4300], out[4300], cmd[9000], q[1024], qs[4400], qo[4400];
    snprintf(script, sizeof script, "%s/roundtrip.sh", ig_test_tmpdir());
    snprintf(out, sizeof out, "%s/roundtrip.out", ig_test_tmpdir());
    FILE *f = fopen(script, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("printf '%s\\0'", f);
    for (int i = 0; i < n; i++) {
        quote(cases[i], q, sizeof q);
        fprintf(f, " %s", q);
    }
    fputs("\n", f);
    fclose(f);
    quote(script, qs, sizeof qs);
    quote(out, qo, sizeof qo);
    snprintf(cmd, sizeof cmd, "bash %s > %s", qs, qo);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    size_t len = 0;
    char *got = read_all(out, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        CU_ASSERT_FATAL(off < len);
        if (strcmp(got + off, cases[i]) != 0)
            fprintf(stderr, "\n    case %d: sent [%s] got [%s]\n", i, cases[i], got + off);
        CU_ASSERT_STRING_EQUAL(got + off, cases[i]);
        off += strlen(got + off) + 1;
    }
    CU_ASSERT_EQUAL(off, len);
    free(got);
}

static void test_sbatch_escape(void) {
    char e[256];
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_EQUAL(ig_slurm_sbatch_escape("gpu-a100", e, sizeof e, &err), IG_OK);
    CU_ASSERT_STRING_EQUAL(e, "gpu-a100");
    CU_ASSERT_EQUAL(ig_slurm_sbatch_escape("/r/point-%a.out", e, sizeof e, &err), IG_OK);
    CU_ASSERT_STRING_EQUAL(e, "/r/point-%a.out");
    CU_ASSERT_EQUAL(ig_slurm_sbatch_escape("/my dir/x", e, sizeof e, &err), IG_OK);
    CU_ASSERT_STRING_EQUAL(e, "\"/my dir/x\"");
    CU_ASSERT_EQUAL(ig_slurm_sbatch_escape("a'b\"c\\d#e", e, sizeof e, &err), IG_OK);
    CU_ASSERT_STRING_EQUAL(e, "\"a\\'b\\\"c\\\\d\\#e\"");
    CU_ASSERT_EQUAL(ig_slurm_sbatch_escape("a\nb", e, sizeof e, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "line break"));
    char small[4];
    CU_ASSERT_EQUAL(ig_slurm_sbatch_escape("abcd", small, sizeof small, &err), IG_ERR_CAPACITY);
}

/* A scratch directory named `name` under the test's tmpdir (created). */
static const char *scratch(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", ig_test_tmpdir(), name);
    mkdir(buf, 0755);
    return buf;
}

typedef struct gen {
    char array[4400], merge[4400];
    char *atext, *mtext;
    char *al[MAXL], *ml[MAXL];
    int na, nm;
} gen;

static ig_status generate(gen *g, const char *script_dir, const char *igen, const char *exp,
                          const char *const *sets, int n_sets, int n_points, const char *results,
                          const ig_slurm_opts *o, ig_error *err) {
    memset(g, 0, sizeof *g);
    ig_status rc = ig_slurm_write(script_dir, igen, exp, sets, n_sets, n_points, results, o,
                                  g->array, sizeof g->array, g->merge, sizeof g->merge, err);
    if (rc != IG_OK) return rc;
    g->atext = read_all(g->array, NULL);
    g->mtext = read_all(g->merge, NULL);
    if (g->atext) g->na = split_lines(g->atext, g->al, MAXL);
    if (g->mtext) g->nm = split_lines(g->mtext, g->ml, MAXL);
    return rc;
}

static void gen_free(gen *g) {
    free(g->atext);
    free(g->mtext);
}

static void test_scripts_minimal(void) {
    char res[4300], want[9000], cwd[4096];
    scratch("min", res, sizeof res);
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    gen g;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = generate(&g, NULL, "/opt/igen/bin/igen", "/exp/quickstart.yaml", NULL, 0, 12,
                            res, NULL, &err);
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    snprintf(want, sizeof want, "%s/slurm/array.sbatch", res);
    CU_ASSERT_STRING_EQUAL(g.array, want);
    snprintf(want, sizeof want, "%s/slurm/merge.sbatch", res);
    CU_ASSERT_STRING_EQUAL(g.merge, want);
    struct stat st;
    CU_ASSERT_EQUAL(stat(g.array, &st), 0);
    CU_ASSERT(st.st_mode & S_IXUSR);
    CU_ASSERT_FATAL(g.na >= 6 && g.nm >= 5);

    /* Array: the exact #SBATCH lines, in order, and nothing optional. */
    CU_ASSERT_STRING_EQUAL(g.al[0], "#!/bin/bash");
    CU_ASSERT_STRING_EQUAL(g.al[1], "#SBATCH --job-name=igen-quickstart");
    snprintf(want, sizeof want, "#SBATCH --output=%s/slurm/point-%%a.out", res);
    CU_ASSERT_STRING_EQUAL(g.al[2], want);
    CU_ASSERT_STRING_EQUAL(g.al[3], "#SBATCH --array=0-11");
    CU_ASSERT_EQUAL(count_prefix(g.al, g.na, "#SBATCH"), 3);
    CU_ASSERT(has_line(g.al, g.na, "set -euo pipefail"));
    snprintf(want, sizeof want, "cd %s", cwd);
    CU_ASSERT(has_line(g.al, g.na, want));
    CU_ASSERT_STRING_EQUAL(g.al[g.na - 1], "exec /opt/igen/bin/igen run /exp/quickstart.yaml "
                                           "--point \"$SLURM_ARRAY_TASK_ID\" --part");

    /* Merge: no array, no resources, --merge. */
    CU_ASSERT_STRING_EQUAL(g.ml[0], "#!/bin/bash");
    CU_ASSERT_STRING_EQUAL(g.ml[1], "#SBATCH --job-name=igen-quickstart-merge");
    snprintf(want, sizeof want, "#SBATCH --output=%s/slurm/merge.out", res);
    CU_ASSERT_STRING_EQUAL(g.ml[2], want);
    CU_ASSERT_EQUAL(count_prefix(g.ml, g.nm, "#SBATCH"), 2);
    CU_ASSERT(has_line(g.ml, g.nm, "set -euo pipefail"));
    CU_ASSERT_STRING_EQUAL(g.ml[g.nm - 1],
                           "exec /opt/igen/bin/igen run /exp/quickstart.yaml --merge");
    gen_free(&g);

    /* One point: the range is 0-0; max_parallel adds %K. */
    ig_slurm_opts o = {0};
    o.max_parallel = 4;
    CU_ASSERT_EQUAL_FATAL(generate(&g, NULL, "/i", "/e.yaml", NULL, 0, 1, res, &o, &err), IG_OK);
    CU_ASSERT(has_line(g.al, g.na, "#SBATCH --array=0-0%4"));
    CU_ASSERT_EQUAL(count_prefix(g.al, g.na, "#SBATCH --array="), 1);
    gen_free(&g);
}

static void test_scripts_all_options(void) {
    char base[4300], res[4400], cwd[4096], want[9000];
    scratch("all opts", base, sizeof base);
    snprintf(res, sizeof res, "%s/res 50%%", base); /* a space and a percent sign */
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    const char *sets[] = {"workload.batch=[4, 8]", "name=it's $HOME `id`", "threads=2"};
    const char *pargs[] = {"--force"};
    ig_slurm_opts o = {0};
    o.partition = "gpu";
    o.account = "proj 42";
    o.qos = "high";
    o.time_limit = "02:30:00";
    o.mem = "16G";
    o.cpus_per_task = 8;
    o.gpus_per_task = 1;
    o.max_parallel = 3;
    o.job_name = "fig16";
    o.extra_sbatch[0] = "--constraint=a100";
    o.extra_sbatch[1] = "--exclusive";
    o.n_extra = 2;
    o.point_args = pargs;
    o.n_point_args = 1;
    gen g;
    ig_error err;
    ig_error_clear(&err);
    /* Relative paths: made absolute against the current directory. */
    ig_status rc =
        generate(&g, NULL, "bin/igen", "my exps/fig 16.yaml", sets, 3, 40, res, &o, &err);
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    static const char *const a_want[] = {
        "#!/bin/bash",
        "#SBATCH --job-name=fig16",
        NULL, /* output, checked below */
        "#SBATCH --partition=gpu",
        "#SBATCH --account=\"proj 42\"",
        "#SBATCH --qos=high",
        "#SBATCH --array=0-39%3",
        "#SBATCH --time=02:30:00",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --mem=16G",
        "#SBATCH --constraint=a100",
        "#SBATCH --exclusive",
    };
    int nw = (int)(sizeof a_want / sizeof a_want[0]);
    CU_ASSERT_FATAL(g.na > nw);
    for (int i = 0; i < nw; i++)
        if (a_want[i]) CU_ASSERT_STRING_EQUAL(g.al[i], a_want[i]);
    /* The directory's '%' doubled (literal for sbatch), the value quoted for the space. */
    snprintf(want, sizeof want, "#SBATCH --output=\"%s/res 50%%%%/slurm/point-%%a.out\"", base);
    CU_ASSERT_STRING_EQUAL(g.al[2], want);
    CU_ASSERT_EQUAL(count_prefix(g.al, g.na, "#SBATCH"), nw - 1);
    snprintf(want, sizeof want,
             "exec %s/bin/igen run '%s/my exps/fig 16.yaml' --point \"$SLURM_ARRAY_TASK_ID\" "
             "--part --set 'workload.batch=[4, 8]' --set 'name=it'\\''s $HOME `id`' --set "
             "threads=2 --force",
             cwd, cwd);
    CU_ASSERT_STRING_EQUAL(g.al[g.na - 1], want);

    /* Merge: partition/account/qos and the raw options, no per-task resources, same sets, no
     * point arguments. */
    static const char *const m_want[] = {
        "#!/bin/bash",
        "#SBATCH --job-name=fig16-merge",
        NULL,
        "#SBATCH --partition=gpu",
        "#SBATCH --account=\"proj 42\"",
        "#SBATCH --qos=high",
        "#SBATCH --constraint=a100",
        "#SBATCH --exclusive",
    };
    nw = (int)(sizeof m_want / sizeof m_want[0]);
    CU_ASSERT_FATAL(g.nm > nw);
    for (int i = 0; i < nw; i++)
        if (m_want[i]) CU_ASSERT_STRING_EQUAL(g.ml[i], m_want[i]);
    snprintf(want, sizeof want, "#SBATCH --output=\"%s/res 50%%%%/slurm/merge.out\"", base);
    CU_ASSERT_STRING_EQUAL(g.ml[2], want);
    CU_ASSERT_EQUAL(count_prefix(g.ml, g.nm, "#SBATCH"), nw - 1);
    snprintf(want, sizeof want,
             "exec %s/bin/igen run '%s/my exps/fig 16.yaml' --merge --set 'workload.batch=[4, "
             "8]' --set 'name=it'\\''s $HOME `id`' --set threads=2",
             cwd, cwd);
    CU_ASSERT_STRING_EQUAL(g.ml[g.nm - 1], want);
    gen_free(&g);

    /* An explicit script directory and working directory. */
    char sdir[4400];
    snprintf(sdir, sizeof sdir, "%s/elsewhere/deep", base);
    ig_slurm_opts o2 = {0};
    o2.workdir = "/data/runs";
    CU_ASSERT_EQUAL_FATAL(generate(&g, sdir, "/i", "/e.yaml", NULL, 0, 2, res, &o2, &err), IG_OK);
    snprintf(want, sizeof want, "%s/array.sbatch", sdir);
    CU_ASSERT_STRING_EQUAL(g.array, want);
    CU_ASSERT(has_line(g.al, g.na, "cd /data/runs"));
    CU_ASSERT(has_line(g.ml, g.nm, "cd /data/runs"));
    gen_free(&g);
}

/* The fake igen writes its working directory and argv, NUL-separated, to $FAKE_LOG. */
static const char *fake_igen(char *buf, size_t n) {
    snprintf(buf, n, "%s/fake bin/igen", ig_test_tmpdir());
    char dir[4300];
    scratch("fake bin", dir, sizeof dir);
    write_file(buf,
               "#!/bin/bash\n{ printf '%s\\0' \"$PWD\"; printf '%s\\0' \"$@\"; } > \"$FAKE_LOG\"\n",
               1);
    return buf;
}

/* Runs `bash SCRIPT` with env assignments; returns the recorded argv count into args. */
static int run_script(const char *script, const char *env, char **log_text, const char **args,
                      int max) {
    char log[4300], cmd[16000], qs[4400], ql[4400];
    snprintf(log, sizeof log, "%s/fake.log", ig_test_tmpdir());
    remove(log);
    quote(script, qs, sizeof qs);
    quote(log, ql, sizeof ql);
    snprintf(cmd, sizeof cmd, "FAKE_LOG=%s %s bash %s", ql, env, qs);
    int st = system(cmd);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    size_t len = 0;
    *log_text = read_all(log, &len);
    if (!*log_text) return 0;
    int n = 0;
    for (size_t off = 0; off < len && n < max; off += strlen(*log_text + off) + 1)
        args[n++] = *log_text + off;
    return n;
}

/* The generated scripts, run by bash, give igen exactly the intended argv in the working dir. */
static void test_scripts_run(void) {
    char res[4300], igen[4400], wd[4300], exp[4400];
    scratch("run res", res, sizeof res);
    scratch("work dir $x", wd, sizeof wd);
    fake_igen(igen, sizeof igen);
    snprintf(exp, sizeof exp, "%s/exp 'q'.yaml", ig_test_tmpdir());
    const char *sets[] = {"workload.batch=[4, 8]", "name=a'b\"c $HOME `id` \\n\ntwo"};
    ig_slurm_opts o = {0};
    o.workdir = wd;
    o.partition = "p";
    char a[4400], m[4400];
    ig_error err;
    ig_error_clear(&err);
    ig_status rc =
        ig_slurm_write(NULL, igen, exp, sets, 2, 5, res, &o, a, sizeof a, m, sizeof m, &err);
    /* A --set value with a newline is refused: it could not be written on one line safely... */
    CU_ASSERT_EQUAL(rc, IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "line break"));
    /* ...so use the same value without it. */
    sets[1] = "name=a'b\"c $HOME `id` \\n two";
    rc = ig_slurm_write(NULL, igen, exp, sets, 2, 5, res, &o, a, sizeof a, m, sizeof m, &err);
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);

    char *text = NULL;
    const char *args[32];
    int n = run_script(a, "SLURM_ARRAY_TASK_ID=3", &text, args, 32);
    const char *want[] = {wd,       "run",   exp,     "--point", "3",
                          "--part", "--set", sets[0], "--set",   sets[1]};
    CU_ASSERT_EQUAL(n, 10);
    for (int i = 0; i < n && i < 10; i++) CU_ASSERT_STRING_EQUAL(args[i], want[i]);
    free(text);

    n = run_script(m, "", &text, args, 32);
    const char *mwant[] = {wd, "run", exp, "--merge", "--set", sets[0], "--set", sets[1]};
    CU_ASSERT_EQUAL(n, 8);
    for (int i = 0; i < n && i < 8; i++) CU_ASSERT_STRING_EQUAL(args[i], mwant[i]);
    free(text);

    /* set -u: the array script refuses to run outside an array task. */
    char cmd[9000], qa[4400];
    quote(a, qa, sizeof qa);
    snprintf(cmd, sizeof cmd, "env -u SLURM_ARRAY_TASK_ID FAKE_LOG=/dev/null bash %s 2>/dev/null",
             qa);
    int st = system(cmd);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) != 0);
}

static void test_write_errors(void) {
    char res[4300];
    scratch("err", res, sizeof res);
    ig_error err;
    ig_slurm_opts o = {0};
    const char *nl[] = {"a=1\nb"};

#define EXPECT(call, code, needle)                                                                 \
    do {                                                                                           \
        ig_error_clear(&err);                                                                      \
        CU_ASSERT_EQUAL(call, code);                                                               \
        if (!strstr(err.msg, needle)) fprintf(stderr, "\n    message: %s\n", err.msg);             \
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));                                           \
    } while (0)

    EXPECT(ig_slurm_write(NULL, "/i", "/e.yaml", NULL, 0, 0, res, NULL, NULL, 0, NULL, 0, &err),
           IG_ERR_INVALID_ARG, "no points");
    EXPECT(ig_slurm_write(NULL, "", "/e.yaml", NULL, 0, 1, res, NULL, NULL, 0, NULL, 0, &err),
           IG_ERR_INVALID_ARG, "igen path");
    EXPECT(ig_slurm_write(NULL, "/i", NULL, NULL, 0, 1, res, NULL, NULL, 0, NULL, 0, &err),
           IG_ERR_INVALID_ARG, "experiment path");
    EXPECT(ig_slurm_write(NULL, "/i", "/e.yaml", nl, 1, 1, res, NULL, NULL, 0, NULL, 0, &err),
           IG_ERR_INVALID_ARG, "--set value");
    o.partition = "gpu\n#SBATCH --account=evil";
    EXPECT(ig_slurm_write(NULL, "/i", "/e.yaml", NULL, 0, 1, res, &o, NULL, 0, NULL, 0, &err),
           IG_ERR_INVALID_ARG, "--partition");
    o.partition = NULL;
    o.extra_sbatch[0] = "constraint=a100";
    o.n_extra = 1;
    EXPECT(ig_slurm_write(NULL, "/i", "/e.yaml", NULL, 0, 1, res, &o, NULL, 0, NULL, 0, &err),
           IG_ERR_INVALID_ARG, "does not start with '-'");
    o.n_extra = 0;
    o.cpus_per_task = -1;
    EXPECT(ig_slurm_write(NULL, "/i", "/e.yaml", NULL, 0, 1, res, &o, NULL, 0, NULL, 0, &err),
           IG_ERR_INVALID_ARG, "negative");
    o.cpus_per_task = 0;
    /* The script directory cannot be created under a regular file. */
    char file[4400], sdir[4500];
    snprintf(file, sizeof file, "%s/plain", res);
    write_file(file, "x", 0);
    snprintf(sdir, sizeof sdir, "%s/sub", file);
    EXPECT(ig_slurm_write(sdir, "/i", "/e.yaml", NULL, 0, 1, res, &o, NULL, 0, NULL, 0, &err),
           IG_ERR_IO, "plain");
    /* No room for the path to come back. */
    char tiny[8];
    EXPECT(ig_slurm_write(NULL, "/i", "/e.yaml", NULL, 0, 1, res, &o, tiny, sizeof tiny, NULL, 0,
                          &err),
           IG_ERR_CAPACITY, "no room");
#undef EXPECT
}

/* ---- submission with a fake sbatch ------------------------------------------------------------
 */

static char g_old_path[16384];

/* Puts a directory holding `sbatch` (with the given body) first in PATH; returns its log path. */
static const char *fake_sbatch(const char *body, char *log, size_t n) {
    char dir[4300], path[4400];
    scratch("sbin", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/sbatch", dir);
    snprintf(log, n, "%s/sbatch.log", dir);
    remove(log);
    char script[8192];
    snprintf(script, sizeof script,
             "#!/bin/bash\nLOG='%s'\necho \"$*\" >> \"$LOG\"\nN=$(wc -l < \"$LOG\")\n%s\n", log,
             body);
    write_file(path, script, 1);
    const char *old = getenv("PATH");
    snprintf(g_old_path, sizeof g_old_path, "%s", old ? old : "/usr/bin:/bin");
    char newp[4300 + sizeof g_old_path + 2];
    snprintf(newp, sizeof newp, "%s:%s", dir, g_old_path);
    setenv("PATH", newp, 1);
    return log;
}

static void restore_path(void) {
    setenv("PATH", g_old_path, 1);
}

static void make_scripts(char *a, size_t na, char *m, size_t nm) {
    char res[4300];
    scratch("sub", res, sizeof res);
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(
        ig_slurm_write(NULL, "/i", "/e.yaml", NULL, 0, 3, res, NULL, a, na, m, nm, &err), IG_OK);
}

static void test_submit_fake(void) {
    char a[4400], m[4400], log[4400];
    make_scripts(a, sizeof a, m, sizeof m);
    /* The first call prints a plain id, the second "id;cluster" (federated clusters). */
    fake_sbatch("if [ \"$N\" = 1 ]; then echo 4242; else echo '4243;cl1'; fi", log, sizeof log);
    ig_slurm_jobs jobs;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_slurm_submit(a, m, &jobs, &err);
    restore_path();
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    CU_ASSERT_STRING_EQUAL(jobs.array_id, "4242");
    CU_ASSERT_STRING_EQUAL(jobs.merge_id, "4243");
    char *text = read_all(log, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    char *lines[8];
    int n = split_lines(text, lines, 8);
    CU_ASSERT_EQUAL(n, 2);
    char want[9000];
    snprintf(want, sizeof want, "--parsable %s", a);
    if (n > 0) CU_ASSERT_STRING_EQUAL(lines[0], want);
    snprintf(want, sizeof want, "--parsable --dependency=afterany:4242 %s", m);
    if (n > 1) CU_ASSERT_STRING_EQUAL(lines[1], want);
    free(text);
}

static void test_submit_failures(void) {
    char a[4400], m[4400], log[4400];
    make_scripts(a, sizeof a, m, sizeof m);
    ig_slurm_jobs jobs;
    ig_error err;

    /* sbatch refuses the array: its stderr is in the message, nothing is submitted after it. */
    fake_sbatch("echo 'sbatch: error: invalid partition specified: nope' >&2; exit 1", log,
                sizeof log);
    ig_error_clear(&err);
    CU_ASSERT_EQUAL(ig_slurm_submit(a, m, &jobs, &err), IG_ERR_IO);
    restore_path();
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "invalid partition specified: nope"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exit status 1"));
    CU_ASSERT_STRING_EQUAL(jobs.array_id, "");
    char *text = read_all(log, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    char *lines[8];
    CU_ASSERT_EQUAL(split_lines(text, lines, 8), 1);
    free(text);

    /* The array goes in, the merge fails: the array's id is reported for scancel. */
    fake_sbatch("if [ \"$N\" = 1 ]; then echo 77; else echo 'bad dependency' >&2; exit 2; fi", log,
                sizeof log);
    ig_error_clear(&err);
    CU_ASSERT_EQUAL(ig_slurm_submit(a, m, &jobs, &err), IG_ERR_IO);
    restore_path();
    CU_ASSERT_STRING_EQUAL(jobs.array_id, "77");
    CU_ASSERT_STRING_EQUAL(jobs.merge_id, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "scancel 77"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad dependency"));

    /* sbatch succeeds but prints no id. */
    fake_sbatch("echo 'Submitted batch job'", log, sizeof log);
    ig_error_clear(&err);
    CU_ASSERT_EQUAL(ig_slurm_submit(a, m, &jobs, &err), IG_ERR_FORMAT);
    restore_path();
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no job id"));

    /* No sbatch at all. */
    char empty[4300];
    scratch("empty", empty, sizeof empty);
    const char *old = getenv("PATH");
    snprintf(g_old_path, sizeof g_old_path, "%s", old ? old : "/usr/bin:/bin");
    setenv("PATH", empty, 1);
    ig_error_clear(&err);
    CU_ASSERT_EQUAL(ig_slurm_submit(a, m, &jobs, &err), IG_ERR_NOT_FOUND);
    restore_path();
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "sbatch not found"));
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("slurm", NULL, NULL);
    CU_add_test(s, "quote_exact", test_quote_exact);
    CU_add_test(s, "quote_roundtrip", test_quote_roundtrip);
    CU_add_test(s, "sbatch_escape", test_sbatch_escape);
    CU_add_test(s, "scripts_minimal", test_scripts_minimal);
    CU_add_test(s, "scripts_all_options", test_scripts_all_options);
    CU_add_test(s, "scripts_run", test_scripts_run);
    CU_add_test(s, "write_errors", test_write_errors);
    CU_add_test(s, "submit_fake", test_submit_fake);
    CU_add_test(s, "submit_failures", test_submit_failures);
}
