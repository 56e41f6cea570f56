/* Hostile inputs through the command line, as a user would give them: each must end in exit status
 * 2 with a one-line message, under a 2 GiB address-space limit (the sanitizer build: a 2 GiB RSS
 * limit, since AddressSanitizer reserves terabytes of address space) and a 20 s kill timer. Before
 * the limits existed these inputs grew past 10 GB, crashed or never ended; each now fails in
 * milliseconds, so the timer only catches a hang, never a slow machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define IG_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IG_TEST_ASAN 1
#endif
#endif

static void run_limited(ig_test_run *r, const char *args) {
    char env[512];
#ifdef IG_TEST_ASAN
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(env, sizeof env, "ASAN_OPTIONS='%s%shard_rss_limit_mb=2048' exec timeout -s KILL 20",
             asan ? asan : "", asan && *asan ? ":" : "");
#else
    snprintf(env, sizeof env, "ulimit -v 2097152; exec timeout -s KILL 20");
#endif
    ig_test_igen(r, env, args);
}

/* A model directory: tiny_llama's config and weights with `tokenizer` as its tokenizer.json. */
static const char *model_with_tokenizer(const char *name, const char *tokenizer_path) {
    static char dir[4400];
    char tokenizer[4400]; /* ig_test_fixture's buffer is reused below */
    snprintf(tokenizer, sizeof tokenizer, "%s", tokenizer_path);
    snprintf(dir, sizeof dir, "%s/%s", ig_test_tmpdir(), name);
    mkdir(dir, 0755);
    const char *files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char src[4400], dst[4500];
        snprintf(src, sizeof src, "%s", ig_test_fixture("tiny_llama"));
        snprintf(src + strlen(src), sizeof src - strlen(src), "/%s", files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        unlink(dst);
        CU_ASSERT_EQUAL(symlink(src, dst), 0);
    }
    char dst[4500];
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
    unlink(dst);
    CU_ASSERT_EQUAL(symlink(tokenizer, dst), 0);
    return dir;
}

static void expect_refused(const char *args, const char *needle) {
    static ig_test_run r;
    run_limited(&r, args);
    size_t len = strlen(r.err);
    int one_line = len > 0 && strchr(r.err, '\n') == r.err + len - 1;
    if (r.status != 2 || !strstr(r.err, needle) || !one_line)
        fprintf(stderr, "\n    igen %s\n    -> exit %d, stderr: %s\n", args, r.status, r.err);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, needle));
    CU_ASSERT(one_line);
}

static void test_yaml(void) {
    static const struct {
        const char *fmt, *fixture, *needle;
    } cases[] = {
        {"run '%s' --dry-run", "exp/bad/47-alias-bomb.yaml", "expands to more than 200000 values"},
        {"run '%s' --dry-run", "exp/bad/48-alias-recursive.yaml", "recursive alias"},
        {"plan --shape opt-6.7b --hardware '%s'", "plan/alias_bomb.yaml",
         "expands to more than 200000 values"},
        {"plan --shape '%s' --hardware a6000-pcie3", "plan/alias_bomb.yaml",
         "expands to more than 200000 values"},
        {"run '%s' --dry-run", "exp/bad/50-param-key-with-equals.yaml",
         "unknown parameter 'skew=x'"},
    };
    char args[4600];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].fmt, ig_test_fixture(cases[i].fixture));
        expect_refused(args, cases[i].needle);
    }
}

static void test_tokenizers(void) {
    char args[4800];
    const char *m =
        model_with_tokenizer("prepend", ig_test_fixture("tokenizer/hostile/prepend_raw_byte.json"));
    snprintf(args, sizeof args, "generate --model '%s' --prompt hello -n 2", m);
    expect_refused(args, "invalid utf-8 string");
    m = model_with_tokenizer("sparse", ig_test_fixture("tokenizer/hostile/sparse_id.json"));
    snprintf(args, sizeof args, "generate --model '%s' --prompt hello -n 2", m);
    expect_refused(args, "ids would be unused");
    /* the one that crashed now loads: `info` must finish normally */
    static ig_test_run r;
    m = model_with_tokenizer("bytefallback",
                             ig_test_fixture("tokenizer/hostile/bytefallback_then_regex.json"));
    snprintf(args, sizeof args, "info --model '%s'", m);
    run_limited(&r, args);
    if (r.status != 0) fprintf(stderr, "\n    igen %s -> exit %d: %s\n", args, r.status, r.err);
    CU_ASSERT_EQUAL(r.status, 0);
}

/* Topologies: hwloc 2.9 segfaults on some malformed XML and takes forever on huge synthetic
 * descriptions (both found by the topo fuzz harness). */
static void test_topologies(void) {
    const char *xml[] = {"hwloc-xml-no-complete-cpuset.xml", "hwloc-xml-null-bitmap-compare.xml",
                         "hwloc-xml-object-without-type.xml", "hwloc-xml-empty-cpuset.xml",
                         "hwloc-xml-leak.xml"};
    char args[4600], name[256];
    for (size_t i = 0; i < sizeof xml / sizeof xml[0]; i++) {
        snprintf(name, sizeof name, "fuzz/topo/%s", xml[i]);
        snprintf(args, sizeof args, "topo --xml '%s'", ig_test_fixture(name));
        expect_refused(args, "not a valid hwloc XML topology");
    }
    expect_refused("topo --synthetic '6 402402'", "more than 16384 objects");
    expect_refused("topo --synthetic 'pack:64 core:64 pu:64'", "more than 16384 objects");
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("hostile", NULL, NULL);
    CU_add_test(s, "yaml", test_yaml);
    CU_add_test(s, "tokenizers", test_tokenizers);
    CU_add_test(s, "topologies", test_topologies);
}
