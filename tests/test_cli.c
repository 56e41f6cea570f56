/* The igen command line: --help everywhere, exit status 2 with one clear line for bad input, JSON
 * outputs that parse, seeded sampling that repeats. Runs build/igen as a user would. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kernels/backend.h"
#include "tests/test_util.h"

typedef ig_test_run run_out;

/* Runs `igen ARGS` on the tiny Llama fixture. */
static void run(run_out *r, const char *args) {
    char env[4300];
    snprintf(env, sizeof env, "IGEN_MODEL='%s'", ig_test_fixture("tiny_llama"));
    ig_test_igen(r, env, args);
}

static const char *tmpfile_with(const char *name, const char *text) {
    static char path[4300];
    snprintf(path, sizeof path, "%s/%s", ig_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void expect_error(const char *args, const char *needle) {
    run_out *r = malloc(sizeof *r);
    run(r, args);
    if (r->status != 2 || !strstr(r->err, needle))
        fprintf(stderr, "\n    igen %s -> exit %d, stderr: %s\n", args, r->status, r->err);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, needle));
    CU_ASSERT(count_lines(r->err) <= 3); /* a clear line (plus a usage hint at most) */
    free(r);
}

static void test_help(void) {
    const char *cmds[] = {"--help",      "generate --help", "ppl --help",
                          "info --help", "policies --help", "bench-decode --help"};
    run_out *r = malloc(sizeof *r);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        run(r, cmds[i]);
        CU_ASSERT_EQUAL(r->status, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "usage: igen"));
    }
    run(r, "--version");
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "igen "));
    free(r);
}

static void test_usage_errors(void) {
    expect_error("bogus", "unknown command 'bogus'");
    expect_error("", "usage");
    expect_error("ppl", "--text FILE is required");
    expect_error("ppl --text /nonexistent/t.txt", "/nonexistent/t.txt");
    expect_error("generate -n abc", "-n: 'abc' is not an integer");
    expect_error("generate --top-p 2", "--top-p: '2'");
    expect_error("generate --temperature -1", "--temperature");
    expect_error("info --dtype f8", "--dtype: 'f8'");
    expect_error("info --model /nonexistent/m.gguf", "/nonexistent/m.gguf");
    expect_error("generate --no-such-option", "generate");
}

static void test_ppl_errors(void) {
    char args[8192];
    snprintf(args, sizeof args, "ppl --text '%s'", tmpfile_with("empty.txt", ""));
    expect_error(args, "empty");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 64",
             tmpfile_with("short.txt", "a few words"));
    expect_error(args, "fewer than one window of 64");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 4096", tmpfile_with("t.txt", "words"));
    expect_error(args, "exceeds the model's context length 128");
    snprintf(args, sizeof args, "ppl --text '%s'", tmpfile_with("bad.txt", "bad \xff\xfe utf8"));
    expect_error(args, "UTF-8");
    /* KV policies: unknown policy or parameter, settings without a policy, too long a prefill */
    const char *t = tmpfile_with("p.txt", "some words for the policy checks");
    snprintf(args, sizeof args, "ppl --text '%s' --policy nosuch", t);
    expect_error(args, "unknown policy 'nosuch' (policies: full");
    snprintf(args, sizeof args, "ppl --text '%s' --policy full --set alpha=3", t);
    expect_error(args, "policy full has no parameter 'alpha'");
    snprintf(args, sizeof args, "ppl --text '%s' --set alpha=3", t);
    expect_error(args, "need --policy");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 8 --prefill 7 --policy full", t);
    expect_error(args, "leaves nothing to decode");
    expect_error("bench-decode --batch 0", "--batch: '0'");
    expect_error("policies nosuch", "unknown policy 'nosuch'");
}

static void test_ppl_json(void) {
    char text[4096] = "";
    for (int i = 0; i < 40; i++) strcat(text, "the cat sat on the mat and then it ran away. ");
    char args[8192];
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --windows 3 --json --quiet",
             tmpfile_with("cats.txt", text));
    run_out *r = malloc(sizeof *r);
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    json_object *o = json_tokener_parse(r->out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    json_object *v;
    CU_ASSERT(json_object_object_get_ex(o, "ppl", &v) && json_object_get_double(v) > 1.0);
    CU_ASSERT(json_object_object_get_ex(o, "windows", &v) && json_object_get_int(v) == 3);
    CU_ASSERT(json_object_object_get_ex(o, "tokens", &v) && json_object_get_int(v) == 3 * 31);
    double nll = 0, ppl = 0;
    if (json_object_object_get_ex(o, "nll_sum", &v)) nll = json_object_get_double(v);
    if (json_object_object_get_ex(o, "ppl", &v)) ppl = json_object_get_double(v);
    IG_ASSERT_NEAR(ppl, exp(nll / 93.0), 1e-9 * ppl);
    json_object_put(o);
    free(r);
}

/* Offloading through the CLI: any feasible placement gives the same numbers as no placement (the
 * weights are read from the device region, host memory or the disk tier); placements that cannot
 * run are refused with exit 2 and nothing is left in the disk directory. */
static double ppl_of(run_out *r, const char *args) {
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    json_object *o = json_tokener_parse(r->out), *v;
    double nll = -1;
    if (o && json_object_object_get_ex(o, "nll_sum", &v)) nll = json_object_get_double(v);
    if (o) json_object_put(o);
    return nll;
}

static void test_offload(void) {
    char text[4096] = "";
    for (int i = 0; i < 40; i++) strcat(text, "the cat sat on the mat and then it ran away. ");
    const char *t = tmpfile_with("off.txt", text);
    char dir[4300], args[16384];
    snprintf(dir, sizeof dir, "%s/disk", ig_test_tmpdir());
    mkdir(dir, 0755);
    run_out *r = malloc(sizeof *r);
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --windows 2 --json --quiet", t);
    double base = ppl_of(r, args);
    CU_ASSERT(base > 0);
    const char *placements[] = {"100,0,100,0,100,0", "0,100,100,0,100,0", "0,0,100,0,100,0",
                                "30,30,100,0,100,0"};
    for (int i = 0; i < 4; i++)
        for (int ov = 0; ov < 2; ov++) {
            snprintf(args, sizeof args,
                     "ppl --text '%s' --ctx 32 --windows 2 --json --quiet --percent %s "
                     "--disk-dir '%s' %s",
                     t, placements[i], dir, ov ? "" : "--no-overlap");
            double v = ppl_of(r, args);
            if (v != base)
                fprintf(stderr, "\n    --percent %s: nll %.17g vs %.17g", placements[i], v, base);
            CU_ASSERT(v == base); /* bit-identical sums */
            CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "\"offload\":true"));
        }
    /* KV placement with a policy: same numbers, fewer bytes over the link */
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 32 --windows 2 --json --quiet --policy full --prefill 8 "
             "--batch 2 --percent 100,0,50,50,100,0",
             t);
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "\"kv_device_sequences\":1"));
    /* KV and activations on every tier, with and without GPU batches: the same sums as the
     * all-on-device run (the working-set access, as KV on disk needs) */
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 32 --windows 2 --json --quiet --policy full --prefill 8 "
             "--batch 2 --kv-access copy",
             t);
    double pbase = ppl_of(r, args);
    CU_ASSERT(pbase > 0);
    const char *kv_places[] = {"100,0,0,0,100,0", "100,0,50,0,0,50", "0,50,0,50,50,0",
                               "100,0,50,50,0,100"};
    for (int i = 0; i < 4; i++)
        for (int gb = 0; gb < 2; gb++) {
            snprintf(args, sizeof args,
                     "ppl --text '%s' --ctx 32 --windows 2 --json --quiet --policy full --prefill "
                     "8 --batch 2 --kv-access copy --percent %s --disk-dir '%s' %s",
                     t, kv_places[i], dir, gb ? "--gpu-batch 1" : "");
            double v = ppl_of(r, args);
            if (v != pbase)
                fprintf(stderr, "\n    --percent %s: nll %.17g vs %.17g", kv_places[i], v, pbase);
            CU_ASSERT(v == pbase);
        }
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    CU_ASSERT(system(cmd) == 0); /* nothing left behind */
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --percent 0,50,100,0,100,0", t);
    expect_error(args, "(give --disk-dir DIR)");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --percent 50,60,100,0,100,0", t);
    expect_error(args, "is more than 100");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --percent 100,0,100,0", t);
    expect_error(args, "is not six comma-separated numbers");
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 32 --percent 100,0,0,0,100,0 --disk-dir '%s'", t, dir);
    expect_error(args, "needs a KV policy");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --percent 100,0,100,0,0,0", t);
    expect_error(args, "give --disk-dir DIR");
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 32 --batch 2 --percent 100,0,100,0,100,0 --gpu-batch 3", t);
    expect_error(args, "--gpu-batch 3 does not divide");
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 32 --percent 0,0,100,0,100,0 --disk-dir /nonexistent/x", t);
    expect_error(args, "/nonexistent/x");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --percent 100,0,0,100,100,0", t);
    expect_error(args, "needs a KV policy");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --link 5", t);
    expect_error(args, "need --percent");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --percent 100,0,100,0,100,0 --link fast",
             t);
    expect_error(args, "link model");
    snprintf(args, sizeof args,
             "ppl --text '%s' --ctx 32 --percent 100,0,100,0,100,0 --device-mem 0.0001", t);
    expect_error(args, "device: needs");
    snprintf(args, sizeof args, "ppl --text '%s' --ctx 32 --percent 100,0,100,0,100,0 --numa 7", t);
    expect_error(args, "NUMA node 7");
    CU_ASSERT(system(cmd) == 0);
    free(r);
}

/* Without a usable GPU (or without CUDA compiled in), --backend cuda says so in one line and runs
 * on the CPU: the same tokens as --backend cpu. On a GPU machine the CUDA run is compared in
 * test_cuda_engine instead. */
static void test_backend_fallback(void) {
    char why[512];
    ig_backend_info bi;
    if (ig_backend_cuda_probe(why, sizeof why, &bi) > 0) return; /* a GPU: not this test's case */
    run_out *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    const char *args = "generate --prompt 'the cat' --prompt 'a dog' -n 6 --ignore-eos --json "
                       "--quiet --backend %s";
    char cmd[512];
    snprintf(cmd, sizeof cmd, args, "cpu");
    run(a, cmd);
    snprintf(cmd, sizeof cmd, args, "cuda");
    run(b, cmd);
    CU_ASSERT_EQUAL(a->status, 0);
    CU_ASSERT_EQUAL(b->status, 0);
    /* one line on stderr, naming the CPU; none for --backend cpu */
    CU_ASSERT_EQUAL(a->err[0], 0);
    size_t lines = 0;
    for (const char *p = b->err; *p; p++) lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(b->err, "CPU"));
    json_object *oa = json_tokener_parse(a->out), *ob = json_tokener_parse(b->out);
    json_object *sa = NULL, *sb = NULL;
    CU_ASSERT(oa && json_object_object_get_ex(oa, "sequences", &sa));
    CU_ASSERT(ob && json_object_object_get_ex(ob, "sequences", &sb));
    CU_ASSERT(sa && sb && !strcmp(json_object_to_json_string(sa), json_object_to_json_string(sb)));
    json_object_put(oa);
    json_object_put(ob);
    free(a);
    free(b);
}

static void test_generate(void) {
    run_out *a = malloc(sizeof *a), *b = malloc(sizeof *b), *c = malloc(sizeof *c);
    run(a, "generate --prompt 'the cat' --prompt 'a much longer prompt about the dog' -n 8 "
           "--ignore-eos --temperature 0.9 --top-p 0.9 --seed 5 --json --quiet");
    run(b, "generate --prompt 'the cat' --prompt 'a much longer prompt about the dog' -n 8 "
           "--ignore-eos --temperature 0.9 --top-p 0.9 --seed 5 --json --quiet");
    run(c, "generate --prompt 'the cat' -n 8 --ignore-eos --json --quiet");
    CU_ASSERT_EQUAL(a->status, 0);
    CU_ASSERT_EQUAL(b->status, 0);
    CU_ASSERT_EQUAL(c->status, 0);
    json_object *o = json_tokener_parse(a->out), *ob = json_tokener_parse(b->out);
    json_object *seqs = NULL, *seqs_b = NULL, *ids = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ob);
    /* same seed, same tokens (timings differ) */
    CU_ASSERT(json_object_object_get_ex(ob, "sequences", &seqs_b));
    CU_ASSERT(json_object_object_get_ex(o, "sequences", &seqs));
    CU_ASSERT(seqs && seqs_b &&
              !strcmp(json_object_to_json_string(seqs), json_object_to_json_string(seqs_b)));
    json_object_put(ob);
    CU_ASSERT(seqs && json_object_array_length(seqs) == 2);
    for (size_t i = 0; seqs && i < json_object_array_length(seqs); i++) {
        json_object *s = json_object_array_get_idx(seqs, i);
        CU_ASSERT(json_object_object_get_ex(s, "ids", &ids) && json_object_array_length(ids) == 8);
    }
    json_object_put(o);
    free(a);
    free(b);
    free(c);
}

/* A dense-selection policy with dense layers in front, attending in place: each layer selects
 * anew (it reused the selection of two layers back and aborted on the capacity check); in place
 * and copied access give the same perplexity bit for bit. */
static void test_dense_layers_access(void) {
    const char *model = ig_test_default_model(); /* 30 layers: layer 2 reuses layer 0's buffer */
    if (!model) {
        fprintf(stderr, "\n    default model not installed (tools/setup.sh): not checked\n");
        return;
    }
    char env[4300];
    snprintf(env, sizeof env, "IGEN_MODEL='%s'", model);
    run_out *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    const char *fmt =
        "ppl --text '%s/README.md' --ctx 64 --max-tokens 64 --prefill 16 --policy h2o "
        "--set dense_layers=2 --kv-access %s --json --quiet";
    char args[4600];
    snprintf(args, sizeof args, fmt, IG_SOURCE_DIR, "inplace");
    ig_test_igen(a, env, args);
    snprintf(args, sizeof args, fmt, IG_SOURCE_DIR, "copy");
    ig_test_igen(b, env, args);
    CU_ASSERT_EQUAL(a->status, 0);
    CU_ASSERT_EQUAL(b->status, 0);
    json_object *oa = json_tokener_parse(a->out), *ob = json_tokener_parse(b->out), *va, *vb;
    CU_ASSERT(oa && ob && json_object_object_get_ex(oa, "ppl", &va) &&
              json_object_object_get_ex(ob, "ppl", &vb) &&
              json_object_get_double(va) == json_object_get_double(vb) &&
              json_object_get_double(va) > 1);
    if (a->status || b->status) fprintf(stderr, "\n    %s\n    %s\n", a->err, b->err);
    json_object_put(oa);
    json_object_put(ob);
    free(a);
    free(b);
}

/* InfiniGen's budget modes on the default model: the measured fraction of rows read in the
 * speculated layers is within 10% of the budget (fixed: exactly the budget, rounded down per
 * head; adaptive: the threshold with alpha adapted per layer), and the budget accounting fields
 * are present. 128 decode steps after a 64-token prompt (measured off by at most 4.8%, adaptive at
 * 0.1; 4.0% with 256 steps). */
/* A policy that reads W_q ahead (InfiniGen) with weights placed off the device: the run says that
 * those reads are in no byte count (once), and says nothing when the weights are resident. */
/* InfiniGen reads W_q one layer ahead: with a selected layer's W_q placed off the device, a GPU
 * run holds it resident beside the stream, and the record counts it in the policy's device
 * metadata (policy_wq_device_bytes, inside policy_meta_device_bytes). */
static int64_t json_int(const char *out, const char *key) {
    json_object *o = json_tokener_parse(out), *v;
    int64_t x = -1;
    if (o && json_object_object_get_ex(o, key, &v)) x = json_object_get_int64(v);
    json_object_put(o);
    return x;
}

static void test_wq_read_ahead_counted(void) {
#define WQ_RUN                                                                                     \
    "bench-decode --policy infinigen --set dense_layers=1 --batch 1 --prompt-len 8 "               \
    "--gen-len 2 --random"
    const char *base = WQ_RUN " --json";
    /* tiny_llama: 2 layers, d_model 64 = n_head x head_dim, f32: layer 1's W_q is 64 x 64 f32 */
    const int64_t wq1 = 64 * 64 * 4;
    char args[512];
    run_out *r = malloc(sizeof *r);
    run(r, base); /* every weight on the device */
    CU_ASSERT_EQUAL(r->status, 0);
    int64_t meta_res = json_int(r->out, "policy_meta_device_bytes");
    CU_ASSERT(meta_res > 0);
    CU_ASSERT_EQUAL(json_int(r->out, "policy_wq_device_bytes"), 0);
    snprintf(args, sizeof args, "%s --percent 0,100,100,0,100,0", base); /* every weight on host */
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_EQUAL(json_int(r->out, "policy_wq_device_bytes"), wq1); /* layer 1 only */
    CU_ASSERT_EQUAL(json_int(r->out, "policy_meta_device_bytes"), meta_res + wq1);
    run(r, WQ_RUN " --percent 0,100,100,0,100,0"); /* the text report names them */
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "W_q read ahead (placed off the device, held resident)"));
    /* every layer selected: layer 0's selection runs inside layer 0 (its W_q loaded), so still
     * layer 1's only */
    run(r, "bench-decode --policy infinigen --set dense_layers=0 --batch 1 --prompt-len 8 "
           "--gen-len 2 --random --json --percent 0,100,100,0,100,0");
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_EQUAL(json_int(r->out, "policy_wq_device_bytes"), wq1);
    /* half of each layer on host: the placement keeps the attention tensors (W_q among them) on
     * the device, so nothing more is held */
    snprintf(args, sizeof args, "%s --percent 50,50,100,0,100,0", base);
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_EQUAL(json_int(r->out, "policy_wq_device_bytes"), 0);
    CU_ASSERT_EQUAL(json_int(r->out, "policy_meta_device_bytes"), meta_res);
    free(r);
#undef WQ_RUN
}

static void test_infinigen_budget(void) {
    const char *model = ig_test_default_model();
    if (!model) {
        fprintf(stderr, "\n    default model not installed (tools/setup.sh): not checked\n");
        return;
    }
    char env[4300];
    snprintf(env, sizeof env, "IGEN_MODEL='%s'", model);
    static const char *const rules[] = {"fixed", "adaptive", "adaptive"};
    static const double budgets[] = {0.2, 0.1, 0.3};
    run_out *o = malloc(sizeof *o);
    for (int r = 0; r < 3; r++)
        for (int b = r; b == r; b++) {
            char args[4600];
            snprintf(args, sizeof args,
                     "ppl --text '%s/README.md' --ctx 192 --windows 1 --prefill 64 --policy "
                     "infinigen --set fetch_rule=%s --set max_fetch=%g --json --quiet",
                     IG_SOURCE_DIR, rules[r], budgets[b]);
            ig_test_igen(o, env, args);
            CU_ASSERT_EQUAL(o->status, 0);
            json_object *j = json_tokener_parse(o->out), *v;
            double got = -1;
            if (j && json_object_object_get_ex(j, "kv_read_fraction_selected_layers", &v))
                got = json_object_get_double(v);
            printf("\n    infinigen fetch_rule=%s max_fetch=%g: read %.4f of the rows in the "
                   "speculated layers",
                   rules[r], budgets[b], got);
            CU_ASSERT(fabs(got - budgets[b]) <= 0.1 * budgets[b]);
            CU_ASSERT(j && json_object_object_get_ex(j, "policy_budget", &v) &&
                      strstr(json_object_get_string(v), "layers 2 and up"));
            CU_ASSERT(j && json_object_object_get_ex(j, "policy_meta_fraction", &v) &&
                      json_object_get_double(v) > 0 && json_object_get_double(v) < 1);
            CU_ASSERT(j && json_object_object_get_ex(j, "policy_dense_layers", &v) &&
                      json_object_get_int(v) == 2);
            if (o->status) fprintf(stderr, "\n    %s\n", o->err);
            json_object_put(j);
        }
    printf("\n    ");
    free(o);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("cli", NULL, NULL);
    CU_add_test(s, "help", test_help);
    CU_add_test(s, "usage_errors", test_usage_errors);
    CU_add_test(s, "ppl_errors", test_ppl_errors);
    CU_add_test(s, "ppl_json", test_ppl_json);
    CU_add_test(s, "generate", test_generate);
    CU_add_test(s, "dense_layers_access", test_dense_layers_access);
    CU_add_test(s, "infinigen_budget", test_infinigen_budget);
    CU_add_test(s, "wq_read_ahead_counted", test_wq_read_ahead_counted);
    CU_add_test(s, "backend_fallback", test_backend_fallback);
    CU_add_test(s, "offload", test_offload);
}
