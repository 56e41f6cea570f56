/* The one CUnit runner every test program links: suite/test selection from the command line, and an
 * exit status that is the number of failures (CU_get_error() reports framework errors only), or 77
 * when the program skipped itself (ctest SKIP_RETURN_CODE). */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "tests/test_util.h"

static int g_skipped;
static char g_skip_why[512];

void ig_test_skip(const char *why) {
    if (!g_skipped) fprintf(stderr, "SKIPPED: %s\n", why);
    g_skipped = 1;
    snprintf(g_skip_why, sizeof g_skip_why, "%s", why);
}

const char *ig_test_fixture(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/%s", IG_SOURCE_DIR, name);
    return buf;
}

const char *ig_test_shared(const char *name) {
    static char buf[4096];
    const char *base = getenv("IGEN_SHARED_DATA");
    if (base && *base)
        snprintf(buf, sizeof buf, "%s/%s", base, name);
    else
        snprintf(buf, sizeof buf, "%s/../shared/data/%s", IG_SOURCE_DIR, name);
    struct stat st;
    return stat(buf, &st) == 0 ? buf : NULL;
}

const char *ig_test_default_model(void) {
    static char buf[4096];
    const char *env = getenv("IGEN_MODEL");
    if (env && *env)
        snprintf(buf, sizeof buf, "%s", env);
    else
        snprintf(buf, sizeof buf, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", IG_SOURCE_DIR);
    struct stat st;
    return stat(buf, &st) == 0 ? buf : NULL;
}

static char g_tmpdir[4096];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes this program's scratch directory (set IG_KEEP_TMP=1 to keep it for debugging). */
static void remove_tmpdir(void) {
    const char *keep = getenv("IG_KEEP_TMP");
    if (g_tmpdir[0] && !(keep && *keep == '1')) nftw(g_tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *ig_test_tmpdir(void) {
    char *buf = g_tmpdir;
    if (!buf[0]) {
        snprintf(buf, sizeof g_tmpdir, "%s/igen-test-%d", IG_BINARY_DIR, (int)getpid());
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "cannot create %s\n", buf);
            exit(2);
        }
    }
    return buf;
}

static void slurp(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    buf[0] = '\0';
    if (!f) return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

void ig_test_igen(ig_test_run *r, const char *env, const char *args) {
    char cmd[32768], o[4200], e[4200];
    snprintf(o, sizeof o, "%s/igen_stdout.txt", ig_test_tmpdir());
    snprintf(e, sizeof e, "%s/igen_stderr.txt", ig_test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s '%s/igen' %s >'%s' 2>'%s'", env ? env : "", IG_BINARY_DIR, args,
             o, e);
    int st = system(cmd);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    slurp(o, r->out, sizeof r->out);
    slurp(e, r->err, sizeof r->err);
}

static void usage(const char *argv0) {
    printf("usage: %s [--list] [SUITE [TEST...]]\n"
           "Runs this program's CUnit suites (all, one suite, or the named tests of a suite).\n"
           "Exit status: number of failed assertions' tests; 77 if skipped.\n",
           argv0);
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(argv[0]);
        return 0;
    }
    /* The igen commands tests run compare with CPU-computed references: on a machine with a GPU
     * the CLI's default backend (auto) would pick CUDA. Tests that want CUDA ask for it. */
    setenv("IGEN_BACKEND", "cpu", 0);
    /* Tests check results, never speed, and must not fail on a loaded machine: OpenMP threads
     * that spin between regions stall every region for a time slice when one loses its core (the
     * quickstart sweep took 220 s instead of 19 s beside busy processes). So the igen commands
     * tests run wait passively, unless told otherwise (libgomp in this process has read the
     * variable before main: its own regions are small). */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        return 2;
    }
    ig_test_register();
    if (CU_get_error() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    int list = argc > 1 && !strcmp(argv[1], "--list");
    if (list) {
        for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext) {
            printf("%s\n", s->pName);
            for (CU_pTest t = s->pTest; t; t = t->pNext) printf("  %s\n", t->pName);
        }
        CU_cleanup_registry();
        return 0;
    }
    /* CUnit's counts describe its last run only: a run of several named tests adds them up */
    unsigned failed_tests = 0, failed_asserts = 0, ran_asserts = 0;
    if (argc > 1) {
        CU_pSuite s = CU_get_suite(argv[1]);
        if (!s) {
            fprintf(stderr, "no suite named '%s' (try --list)\n", argv[1]);
            CU_cleanup_registry();
            return 2;
        }
        for (int i = 2; i < argc; i++)
            if (!CU_get_test(s, argv[i])) {
                fprintf(stderr, "no test named '%s' in suite '%s' (try --list)\n", argv[i],
                        argv[1]);
                CU_cleanup_registry();
                return 2;
            }
        for (int i = argc == 2 ? 1 : 2; i < argc; i++) {
            if (argc == 2)
                CU_basic_run_suite(s);
            else
                CU_basic_run_test(s, CU_get_test(s, argv[i]));
            failed_tests += CU_get_number_of_tests_failed();
            failed_asserts += CU_get_number_of_failures();
            ran_asserts += CU_get_number_of_asserts();
        }
    } else {
        CU_basic_run_tests();
        failed_tests = CU_get_number_of_tests_failed();
        failed_asserts = CU_get_number_of_failures();
        ran_asserts = CU_get_number_of_asserts();
    }
    CU_cleanup_registry();
    remove_tmpdir();
    if (failed_tests || failed_asserts) return (int)(failed_tests ? failed_tests : 1);
    if (g_skipped && ran_asserts == 0) {
        printf("SKIPPED: %s\n", g_skip_why);
        return 77;
    }
    if (g_skipped) printf("note: part of this program was skipped: %s\n", g_skip_why);
    return 0;
}

const char *ig_test_fresh_dir(const char *name) {
    static char buf[4][8192];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", ig_test_tmpdir(), name);
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", b);
    CU_ASSERT_EQUAL(system(cmd), 0);
    return b;
}

char *ig_test_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = s ? fread(s, 1, (size_t)n, f) : 0;
    if (s) s[got] = '\0';
    fclose(f);
    if (len) *len = got;
    return s;
}
