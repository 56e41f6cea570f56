/* The fuzz harnesses (tests/fuzz) without libFuzzer: every input that once broke a parser
 * (tests/fixtures/fuzz/HARNESS/), the hand-written seeds (tests/fuzz/seeds/HARNESS/) and every
 * fixture of the harness's format go through the same entry function as in fuzzing, which must
 * return normally. Under the ASan build a read past a file's end is caught too: mapped files are
 * heap copies here (tests/fuzz/fuzz_mmap.c). The fixture sources are those of tools/fuzz_seeds.sh:
 * keep the two in step.
 *
 * tests/fixtures/fuzz/HARNESS/open/ holds findings not fixed yet (a third-party library's crash
 * that igen does not guard against): each runs in a child process and is reported, still crashing
 * or not, without failing the test; once fixed, an input moves up to HARNESS/. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_common.h"
#include "tests/test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define IG_REGRESS_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IG_REGRESS_LSAN 1
#endif
#endif
#ifdef IG_REGRESS_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* An open finding that hangs is stopped after this long. */
#define OPEN_TIMEOUT_S 5

/* Seeds over this size are left out, as tools/fuzz_seeds.sh does. */
#define MAX_INPUT_BYTES ((size_t)1 << 20)

typedef int (*harness_fn)(const uint8_t *, size_t);

/* Files below a directory of the source tree (or of the shared data, "@" first) whose name ends in
 * `suffix` (NULL: every file), recursively or not. */
typedef struct source {
    const char *dir;
    const char *suffix;
    int recursive;
} source;

#define MAX_SOURCES 4

typedef struct harness {
    const char *name;
    harness_fn fn;
    source src[MAX_SOURCES];
} harness;

static const harness harnesses[] = {
    {"gguf", ig_fuzz_gguf, {{"tests/fixtures", ".gguf", 1}}},
    {
        "safetensors",
        ig_fuzz_safetensors,
        {{"tests/fixtures", ".safetensors", 1},
         {"tests/fixtures", "model.safetensors.index.json", 1}},
    },
    {
        "tokenizer_json",
        ig_fuzz_tokenizer_json,
        {{"tests/fixtures", "tokenizer.json", 1}, {"tests/fixtures/tokenizer/hostile", ".json", 0}},
    },
    {"gguf_tokenizer", ig_fuzz_gguf_tokenizer, {{"tests/fixtures", ".gguf", 1}}},
    {
        "exp_yaml",
        ig_fuzz_exp_yaml,
        {{"tests/fixtures/exp", ".yaml", 1}, {"configs/experiments", ".yaml", 0}},
    },
    {
        "hwprof",
        ig_fuzz_hwprof,
        {{"configs/hardware", ".yaml", 0},
         {"configs/models", ".yaml", 0},
         {"tests/fixtures/plan", ".yaml", 0}},
    },
    {
        "modelshape",
        ig_fuzz_modelshape,
        {{"configs/hardware", ".yaml", 0},
         {"configs/models", ".yaml", 0},
         {"tests/fixtures/plan", ".yaml", 0}},
    },
    {"topo", ig_fuzz_topo, {{"tests/fixtures/topo", ".xml", 0}, {"@hwloc", ".xml", 0}}},
};

typedef struct run {
    const harness *h;
    int n_files;
} run;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static void feed_file(run *r, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || (size_t)st.st_size > MAX_INPUT_BYTES) return;
    size_t len = 0;
    char *data = ig_test_slurp(path, &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data) return;
    /* One line per input before the call: a crash is then attributed to its file. */
    printf("\n    %s: %s", r->h->name, path);
    fflush(stdout);
    CU_ASSERT_EQUAL(r->h->fn((const uint8_t *)data, len), 0);
    free(data);
    r->n_files++;
}

/* An open finding in a child (its crash must not end this program): 1 if it still fails. */
static int feed_open(const harness *h, const char *path) {
    size_t len = 0;
    char *data = ig_test_slurp(path, &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data) return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* the child's sanitizer report would read as this test's failure: keep it out */
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        alarm(OPEN_TIMEOUT_S);
        int rc = h->fn((const uint8_t *)data, len);
        free(data);
        fflush(stdout);
#ifdef IG_REGRESS_LSAN
        if (__lsan_do_recoverable_leak_check()) _exit(5); /* _exit skips LSan's own check */
#endif
        _exit(rc == 0 ? 0 : 4);
    }
    free(data);
    int st = 0;
    CU_ASSERT_FATAL(pid > 0 && waitpid(pid, &st, 0) == pid);
    int failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (failed && WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        printf("\n    %s: open finding still fails (running after %d s): %s", h->name,
               OPEN_TIMEOUT_S, path);
    else if (failed && WIFSIGNALED(st))
        printf("\n    %s: open finding still fails (%s): %s", h->name, strsignal(WTERMSIG(st)),
               path);
    else if (failed)
        printf("\n    %s: open finding still fails (exit %d%s): %s", h->name, WEXITSTATUS(st),
               WEXITSTATUS(st) == 5 ? ", a leak" : "", path);
    else /* a leak or an overflow may show only in the ASan build */
        printf("\n    %s: open finding passes in this build (fixed? then move it out of open/): %s",
               h->name, path);
    return failed;
}

static void feed_open_dir(const harness *h, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    int n = 0, failing = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[8700];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        failing += feed_open(h, path);
        n++;
    }
    closedir(d);
    if (failing) {
        printf("\n");
        fflush(stdout);
        static char why[256];
        snprintf(why, sizeof why,
                 "%d open fuzz finding(s) of %s still fail (tests/fixtures/fuzz/%s/open)", failing,
                 h->name, h->name);
        ig_test_skip(why);
    }
    (void)n;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every matching file under dir, in name order (so that runs are reproducible). tests/fixtures/
 * fuzz is the regression inputs' own source, not a fixture of any format. */
static void feed_dir(run *r, const char *dir, const char *suffix, int recursive) {
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **nn = realloc(names, (cap ? 2 * cap : 64) * sizeof *names);
            CU_ASSERT_PTR_NOT_NULL(nn);
            if (!nn) break;
            names = nn;
            cap = cap ? 2 * cap : 64;
        }
        names[n] = strdup(e->d_name);
        CU_ASSERT_PTR_NOT_NULL(names[n]);
        if (!names[n]) break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    char skip[4200];
    snprintf(skip, sizeof skip, "%s/tests/fixtures/fuzz", IG_SOURCE_DIR);
    for (size_t i = 0; i < n; i++) {
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (!strcmp(names[i], "open") && strstr(path, skip) == path)
                feed_open_dir(r->h, path);
            else if (recursive && strcmp(path, skip) != 0)
                feed_dir(r, path, suffix, recursive);
        } else if (S_ISREG(st.st_mode) && (!suffix || ends_with(names[i], suffix))) {
            feed_file(r, path);
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static void run_harness(const char *name) {
    const harness *h = NULL;
    for (size_t i = 0; i < sizeof harnesses / sizeof harnesses[0]; i++)
        if (!strcmp(harnesses[i].name, name)) h = &harnesses[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    ig_fuzz_init();
    run r = {h, 0};
    char dir[4200];
    /* the regression inputs first: they are what this test is for */
    snprintf(dir, sizeof dir, "%s/tests/fixtures/fuzz/%s", IG_SOURCE_DIR, name);
    feed_dir(&r, dir, NULL, 1);
    int n_regress = r.n_files;
    snprintf(dir, sizeof dir, "%s/tests/fuzz/seeds/%s", IG_SOURCE_DIR, name);
    feed_dir(&r, dir, NULL, 1);
    unsigned long loaded_before = ig_fuzz_n_loaded;
    int n_fixtures_before = r.n_files;
    for (int i = 0; i < MAX_SOURCES && h->src[i].dir; i++) {
        const source *s = &h->src[i];
        if (s->dir[0] == '@') {
            const char *shared = ig_test_shared(s->dir + 1);
            if (shared) feed_dir(&r, shared, s->suffix, s->recursive);
            continue;
        }
        snprintf(dir, sizeof dir, "%s/%s", IG_SOURCE_DIR, s->dir);
        feed_dir(&r, dir, s->suffix, s->recursive);
    }
    printf("\n    %s: %d regression inputs, %d files in all, %lu of the fixtures loaded\n    ",
           name, n_regress, r.n_files, ig_fuzz_n_loaded - loaded_before);
    CU_ASSERT(r.n_files > n_fixtures_before);
    /* some fixtures must load: a harness that refuses everything would pass unnoticed */
    CU_ASSERT(ig_fuzz_n_loaded > loaded_before);
}

static void test_gguf(void) {
    run_harness("gguf");
}
static void test_safetensors(void) {
    run_harness("safetensors");
}
static void test_tokenizer_json(void) {
    run_harness("tokenizer_json");
}
static void test_gguf_tokenizer(void) {
    run_harness("gguf_tokenizer");
}
static void test_exp_yaml(void) {
    run_harness("exp_yaml");
}
static void test_hwprof(void) {
    run_harness("hwprof");
}
static void test_modelshape(void) {
    run_harness("modelshape");
}
static void test_topo(void) {
    run_harness("topo");
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("fuzz_regress", NULL, NULL);
    CU_add_test(s, "gguf", test_gguf);
    CU_add_test(s, "safetensors", test_safetensors);
    CU_add_test(s, "tokenizer_json", test_tokenizer_json);
    CU_add_test(s, "gguf_tokenizer", test_gguf_tokenizer);
    CU_add_test(s, "exp_yaml", test_exp_yaml);
    CU_add_test(s, "hwprof", test_hwprof);
    CU_add_test(s, "modelshape", test_modelshape);
    CU_add_test(s, "topo", test_topo);
}
