/* Shared helpers for the CUnit suites: paths to fixtures, shared data and the default model, and a
 * visible SKIP for tests whose prerequisite (a GPU, the installed model) is absent. */
#ifndef IG_TEST_UTIL_H
#define IG_TEST_UTIL_H

#include <CUnit/CUnit.h>

/* Each test program defines this: it adds its suites to the CUnit registry. */
void ig_test_register(void);

/* tests/fixtures/<name> in the source tree (static buffer, valid until the next call). */
const char *ig_test_fixture(const char *name);
/* <shared data>/<name>: $IGEN_SHARED_DATA or ../shared/data beside the checkout. NULL if absent. */
const char *ig_test_shared(const char *name);
/* The default model (GGUF) if installed, else NULL. */
const char *ig_test_default_model(void);
/* A scratch directory for this test program (created on first use). */
const char *ig_test_tmpdir(void);

/* Marks the current test program as skipped for `why`; if nothing else ran and nothing failed,
 * the program exits with code 77, which ctest reports as SKIPPED (never as passed). */
void ig_test_skip(const char *why);

/* `[ENV] <build>/igen ARGS` run through the shell (ARGS is a shell fragment, ENV assignments like
 * "IGEN_MODEL=x" or NULL): exit status (-1 if it did not exit), stdout and stderr, each cut to its
 * buffer. */
typedef struct ig_test_run {
    int status;
    char out[65536];
    char err[16384];
} ig_test_run;
void ig_test_igen(ig_test_run *r, const char *env, const char *args);

/* A fresh (removed, not created) path NAME under the scratch directory; the last 4 stay valid. */
const char *ig_test_fresh_dir(const char *name);
/* The whole file, NUL-terminated, malloc'd (NULL if it cannot be read); *len its size if len. */
char *ig_test_slurp(const char *path, size_t *len);

#define IG_ASSERT_NEAR(a, b, tol) CU_ASSERT(fabs((double)(a) - (double)(b)) <= (tol))

#endif
