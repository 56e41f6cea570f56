/* Experiment files (core/app/exp): sweep expansion, zip, --set overrides, defaults, labels and
 * keys, referenced files, and a corpus of malformed files under tests/fixtures/exp/bad/, each with
 * the error it must produce on its first line ("# expect: SUBSTRING"; "# set: K=V" lines pass
 * overrides). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/app/exp/exp.h"
#include "core/app/exp/stats.h"
#include "tests/test_util.h"

static ig_exp *load(const char *fixture, const char *const *sets, int n_sets) {
    char path[4096];
    snprintf(path, sizeof path, "%s", ig_test_fixture(fixture));
    ig_exp *e = NULL;
    ig_error err = {0};
    ig_status st = ig_exp_load(path, sets, n_sets, &e, &err);
    if (st != IG_OK) fprintf(stderr, "load %s: %s\n", fixture, err.msg);
    return e;
}

static json_object *jpath(json_object *o, const char *a, const char *b, const char *c) {
    const char *keys[3] = {a, b, c};
    for (int i = 0; i < 3 && keys[i] && o; i++)
        if (!json_object_object_get_ex(o, keys[i], &o)) return NULL;
    return o;
}

static int jint(json_object *o, const char *a, const char *b, const char *c) {
    return json_object_get_int(jpath(o, a, b, c));
}

static const char *jstr(json_object *o, const char *a, const char *b, const char *c) {
    return json_object_get_string(jpath(o, a, b, c));
}

static void test_sweep_order(void) {
    ig_exp *e = load("exp/good/sweep.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_n_points(e), 36);
    CU_ASSERT_STRING_EQUAL(ig_exp_name(e), "sweep-test");
    CU_ASSERT_STRING_EQUAL(ig_exp_output_dir(e), "results/sweep-test");
    CU_ASSERT_EQUAL(ig_exp_n_axes(e), 3);
    CU_ASSERT_STRING_EQUAL(ig_exp_axis_name(e, 0), "workload.batch");
    CU_ASSERT_STRING_EQUAL(ig_exp_axis_name(e, 1), "workload.prompt_len");
    CU_ASSERT_STRING_EQUAL(ig_exp_axis_name(e, 2), "policy");
    CU_ASSERT_EQUAL(ig_exp_axis_len(e, 0), 2);
    CU_ASSERT_EQUAL(ig_exp_axis_len(e, 1), 3);
    CU_ASSERT_EQUAL(ig_exp_axis_len(e, 2), 6);
    /* the first axis varies slowest; the policies' param lists expand in place */
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 0),
                           "workload.batch=4 workload.prompt_len=128 policy=full");
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 1),
        "workload.batch=4 workload.prompt_len=128 policy=h2o(heavy_ratio=0.1,recent_ratio=0.1)");
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 2),
        "workload.batch=4 workload.prompt_len=128 policy=h2o(heavy_ratio=0.2,recent_ratio=0.1)");
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 3),
                           "workload.batch=4 workload.prompt_len=128 policy=infinigen(alpha=4)");
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 5),
                           "workload.batch=4 workload.prompt_len=128 policy=infinigen(alpha=8)");
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 6),
                           "workload.batch=4 workload.prompt_len=256 policy=full");
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 18),
                           "workload.batch=8 workload.prompt_len=128 policy=full");
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 35),
                           "workload.batch=8 workload.prompt_len=512 policy=infinigen(alpha=8)");
    CU_ASSERT_PTR_NULL(ig_exp_point_label(e, 36));
    CU_ASSERT_PTR_NULL(ig_exp_point_config(e, -1));

    /* the resolved config: no lists but metrics, `policy` with only the params given */
    json_object *c = ig_exp_point_config(e, 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(jint(c, "workload", "batch", NULL), 8);
    CU_ASSERT_EQUAL(jint(c, "workload", "prompt_len", NULL), 128);
    CU_ASSERT_EQUAL(jint(c, "workload", "gen_len", NULL), 16);
    CU_ASSERT_STRING_EQUAL(jstr(c, "policy", "name", NULL), "h2o");
    IG_ASSERT_NEAR(json_object_get_double(jpath(c, "policy", "params", "heavy_ratio")), 0.2, 0);
    IG_ASSERT_NEAR(json_object_get_double(jpath(c, "policy", "params", "recent_ratio")), 0.1, 0);
    CU_ASSERT_EQUAL(json_object_object_length(jpath(c, "policy", "params", NULL)), 2);
    CU_ASSERT_PTR_NULL(jpath(c, "policies", NULL, NULL));
    CU_ASSERT_PTR_NULL(jpath(c, "sweep", NULL, NULL));

    ig_exp_point p;
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 20, &p), IG_OK);
    CU_ASSERT_EQUAL(p.index, 20);
    CU_ASSERT_EQUAL(p.batch, 8);
    CU_ASSERT_EQUAL(p.prompt_len, 128);
    CU_ASSERT_EQUAL(p.gen_len, 16);
    CU_ASSERT_STRING_EQUAL(p.policy, "h2o");
    CU_ASSERT_EQUAL_FATAL(p.n_settings, 2);
    CU_ASSERT_STRING_EQUAL(p.settings[0], "heavy_ratio=0.2");
    CU_ASSERT_STRING_EQUAL(p.settings[1], "recent_ratio=0.1");
    CU_ASSERT_STRING_EQUAL(p.label, ig_exp_point_label(e, 20));
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 5, &p), IG_OK);
    CU_ASSERT_STRING_EQUAL(p.policy, "infinigen");
    CU_ASSERT_EQUAL_FATAL(p.n_settings, 1);
    CU_ASSERT_STRING_EQUAL(p.settings[0], "alpha=8");
    CU_ASSERT_EQUAL(jint(ig_exp_point_config(e, 5), "policy", "params", "alpha"), 8);
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT_STRING_EQUAL(p.policy, "full");
    CU_ASSERT_EQUAL(p.n_settings, 0);
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 36, &p), IG_ERR_INVALID_ARG);
    ig_exp_free(e);
}

static void test_zip(void) {
    ig_exp *e = load("exp/good/zip.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_STRING_EQUAL(ig_exp_name(e), "zip");
    CU_ASSERT_EQUAL(ig_exp_n_points(e), 12);
    CU_ASSERT_EQUAL(ig_exp_n_axes(e), 4);
    CU_ASSERT_STRING_EQUAL(ig_exp_axis_name(e, 2), "workload.gen_len");
    /* prompt_len and gen_len form one dimension, at prompt_len's place */
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 0),
        "workload.prompt_len=128 workload.batch=1 workload.gen_len=32 policy=full");
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 1),
        "workload.prompt_len=128 workload.batch=1 workload.gen_len=32 policy=h2o");
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 2),
        "workload.prompt_len=128 workload.batch=2 workload.gen_len=32 policy=full");
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 4),
        "workload.prompt_len=512 workload.batch=1 workload.gen_len=64 policy=full");
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 11),
        "workload.prompt_len=1024 workload.batch=2 workload.gen_len=128 policy=h2o");
    for (int i = 0; i < 12; i++) {
        json_object *c = ig_exp_point_config(e, i);
        int pl = jint(c, "workload", "prompt_len", NULL), gl = jint(c, "workload", "gen_len", NULL);
        CU_ASSERT(gl == (pl == 128 ? 32 : pl == 512 ? 64 : 128));
    }
    ig_exp_free(e);
}

static void test_set(void) {
    const char *sets[] = {"workload.batch=16", "workload.gen_len=[1, 2]",
                          "policies[1].params.recent_ratio=0.3", "threads=2", "model.dtype=bf16"};
    ig_exp *e = load("exp/good/sweep.yaml", sets, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    /* batch is a scalar now; gen_len a list at its own place in the document */
    CU_ASSERT_EQUAL(ig_exp_n_points(e), 3 * 2 * 6);
    CU_ASSERT_EQUAL(ig_exp_n_axes(e), 3);
    CU_ASSERT_STRING_EQUAL(ig_exp_axis_name(e, 0), "workload.prompt_len");
    CU_ASSERT_STRING_EQUAL(ig_exp_axis_name(e, 1), "workload.gen_len");
    CU_ASSERT_STRING_EQUAL(
        ig_exp_point_label(e, 7),
        "workload.prompt_len=128 workload.gen_len=2 policy=h2o(heavy_ratio=0.1,recent_ratio=0.3)");
    ig_exp_point p;
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 7, &p), IG_OK);
    CU_ASSERT_EQUAL(p.batch, 16);
    CU_ASSERT_EQUAL(p.gen_len, 2);
    CU_ASSERT_EQUAL(p.threads, 2);
    CU_ASSERT_STRING_EQUAL(p.dtype, "bf16");
    ig_exp_free(e);

    /* a whole list, and a key the file does not have */
    const char *sets2[] = {"policies=[full, streaming]", "placement.kv.cpu=[0, 50]",
                           "placement.kv.gpu=50"};
    e = load("exp/good/minimal.yaml", sets2, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_n_points(e), 4);
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 3), "policy=streaming placement.kv.cpu=50");
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 3, &p), IG_OK);
    IG_ASSERT_NEAR(p.kv.gpu, 50, 0);
    IG_ASSERT_NEAR(p.kv.cpu, 50, 0);
    ig_exp_free(e);

    /* the model: PATH shorthand takes sub-key overrides; a mapping can be switched off */
    const char *sets3[] = {"model.dtype=f16", "placement.link={h2d_gbps: 8, d2h_gbps: 6}",
                           "placement.link=false", "name=renamed"};
    e = load("exp/good/ppl.yaml", sets3, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT_STRING_EQUAL(p.dtype, "f16");
    CU_ASSERT_PTR_NOT_NULL(strstr(p.model_path, "tiny_llama.gguf"));
    CU_ASSERT_EQUAL(p.link, 0);
    CU_ASSERT_STRING_EQUAL(ig_exp_name(e), "renamed");
    CU_ASSERT_STRING_EQUAL(ig_exp_output_dir(e), "results/renamed");
    ig_exp_free(e);
    e = load("exp/good/ppl.yaml", sets3, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT_EQUAL(p.link, 1);
    IG_ASSERT_NEAR(p.link_h2d_gbps, 8, 0);
    IG_ASSERT_NEAR(p.link_latency_us, 0, 0);
    ig_exp_free(e);

    /* bad paths name the closest valid key */
    struct {
        const char *set, *want;
    } bad[] = {
        {"workload.bach=3", "--set workload.bach: unknown key 'bach' (did you mean 'batch'?)"},
        {"worklod=3", "--set worklod: unknown key 'worklod' (did you mean 'workload'?)"},
        {"placement.weights.gpu.x=1", "--set placement.weights.gpu.x: 'gpu' takes a value"},
        {"workload.batch", "--set workload.batch: expected KEY=VALUE"},
        {"workload..batch=1", "--set workload..batch: 'workload..batch' is not a key path"},
        {"policies[5].name=h2o", "--set policies[5].name: policies has no entry [5] (it has 3)"},
        {"workload.batch=[4, 8", "--set workload.batch: YAML syntax error in the value"},
        {"workload.batch=0", "--set workload.batch: workload.batch: 0 is out of range"},
        {"policies[0].nme=h2o", "--set policies[0].nme: unknown key 'nme' (did you mean 'name'?)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ig_exp *x = NULL;
        ig_error err = {0};
        const char *one[1] = {bad[i].set};
        ig_status st = ig_exp_load(ig_test_fixture("exp/good/sweep.yaml"), one, 1, &x, &err);
        CU_ASSERT_NOT_EQUAL(st, IG_OK);
        CU_ASSERT_PTR_NULL(x);
        if (!strstr(err.msg, bad[i].want)) {
            fprintf(stderr, "--set %s: expected '%s' in '%s'\n", bad[i].set, bad[i].want, err.msg);
            CU_FAIL("wrong --set error");
        }
        ig_exp_free(x);
    }
}

/* backend and placement.kv_access: resolved into the point (defaults cpu and auto). */
static void test_backend(void) {
    ig_exp *e = load("exp/good/backend.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_n_points(e), 2);
    ig_exp_point p;
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT_STRING_EQUAL(p.backend, "cuda");
    CU_ASSERT_STRING_EQUAL(p.kv_access, "copy");
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 1, &p), IG_OK);
    CU_ASSERT_STRING_EQUAL(p.kv_access, "cpu");
    CU_ASSERT(p.kv.cpu == 100);
    ig_exp_free(e);
    e = load("exp/good/minimal.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT_STRING_EQUAL(p.backend, "cpu");
    CU_ASSERT_STRING_EQUAL(p.kv_access, "auto");
    ig_exp_free(e);
}

static void test_defaults(void) {
    ig_exp *e = load("exp/good/minimal.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_n_points(e), 1);
    CU_ASSERT_EQUAL(ig_exp_n_axes(e), 1);
    CU_ASSERT_STRING_EQUAL(ig_exp_axis_name(e, 0), "policy");
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 0), "policy=full");
    char *canon = ig_exp_canonical_json(ig_exp_point_config(e, 0));
    CU_ASSERT_PTR_NOT_NULL_FATAL(canon);
    const char *want =
        "{\"backend\":\"cpu\",\"hardware\":null,\"measure\":{\"baseline\":null,\"noise\":0.1,"
        "\"prefill\":\"every\","
        "\"repeat\":3,\"warmup\":true},\"metrics\":[\"throughput\"],\"mode\":\"measured\","
        "\"model\":{"
        "\"dtype\":\"f32\",\"path\":\"default\",\"shape\":null},\"name\":\"minimal\",\"output\":"
        "\"results/minimal\",\"placement\":{\"activations\":{\"cpu\":0.0,\"gpu\":100.0},\"disk_"
        "dir\":null,\"gpu_batch_size\":0,\"kv\":{\"cpu\":0.0,\"gpu\":100.0},\"kv_access\":\"auto\","
        "\"link\":null,\"num_"
        "gpu_batches\":1,\"numa\":\"local\",\"overlap\":true,\"weights\":{\"cpu\":0.0,\"gpu\":100."
        "0}},\"policy\":{\"name\":\"full\",\"params\":{}},\"threads\":0,\"workload\":{\"batch\":2,"
        "\"gen_len\":32,\"ppl\":{\"ctx\":1024,\"prefill\":256,\"windows\":2},\"prompt_len\":512,"
        "\"text\":null}}";
    if (strcmp(canon, want)) fprintf(stderr, "canonical config:\n%s\n", canon);
    CU_ASSERT_STRING_EQUAL(canon, want);
    free(canon);
    ig_exp_point p;
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT_EQUAL(p.mode, IG_EXP_MEASURED);
    CU_ASSERT_STRING_EQUAL(p.model_path, "default");
    CU_ASSERT_PTR_NULL(p.shape_path);
    CU_ASSERT_PTR_NULL(p.hardware_path);
    CU_ASSERT_PTR_NULL(p.text_path);
    CU_ASSERT_PTR_NULL(p.disk_dir);
    CU_ASSERT_STRING_EQUAL(p.dtype, "f32");
    CU_ASSERT_STRING_EQUAL(p.numa, "local");
    CU_ASSERT_EQUAL(p.threads, 0);
    IG_ASSERT_NEAR(p.weights.gpu, 100, 0);
    IG_ASSERT_NEAR(p.weights.cpu, 0, 0);
    IG_ASSERT_NEAR(p.activations.gpu, 100, 0);
    CU_ASSERT_EQUAL(p.gpu_batch_size, 0);
    CU_ASSERT_EQUAL(p.num_gpu_batches, 1);
    CU_ASSERT_EQUAL(p.overlap, 1);
    CU_ASSERT_EQUAL(p.link, 0);
    CU_ASSERT_EQUAL(p.batch, 2);
    CU_ASSERT_EQUAL(p.ppl_ctx, 1024);
    CU_ASSERT_EQUAL(p.ppl_windows, 2);
    CU_ASSERT_EQUAL(p.ppl_prefill, 256);
    CU_ASSERT_STRING_EQUAL(p.policy, "full");
    CU_ASSERT(p.metric_throughput && !p.metric_ppl && !p.metric_recall && !p.metric_bytes);
    ig_exp_free(e);
}

static int is_hex16(const char *k) {
    if (strlen(k) != 16) return 0;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", k[i])) return 0;
    return 1;
}

static void test_keys(void) {
    ig_exp *a = load("exp/good/sweep.yaml", NULL, 0), *b = load("exp/good/sweep.yaml", NULL, 0);
    /* the same config written differently (flow style) */
    const char *same[] = {"workload={batch: [4, 8], prompt_len: [128, 256, 512], gen_len: 16}"};
    ig_exp *c = load("exp/good/sweep.yaml", same, 1);
    const char *other[] = {"threads=2"};
    ig_exp *d = load("exp/good/sweep.yaml", other, 1);
    CU_ASSERT_FATAL(a && b && c && d);
    int n = ig_exp_n_points(a);
    for (int i = 0; i < n; i++) {
        char ka[17], kb[17], kc[17], kd[17], kj[17];
        ig_exp_point_key(a, i, ka);
        ig_exp_point_key(b, i, kb);
        ig_exp_point_key(c, i, kc);
        ig_exp_point_key(d, i, kd);
        ig_exp_config_key(ig_exp_point_config(a, i), kj);
        CU_ASSERT(is_hex16(ka));
        CU_ASSERT_STRING_EQUAL(ka, kb);
        CU_ASSERT_STRING_EQUAL(ka, kc);
        CU_ASSERT_STRING_EQUAL(ka, kj);
        CU_ASSERT_STRING_NOT_EQUAL(ka, kd);
        CU_ASSERT_STRING_EQUAL(ig_exp_point_label(a, i), ig_exp_point_label(b, i));
        for (int j = 0; j < i; j++) {
            char kk[17];
            ig_exp_point_key(a, j, kk);
            CU_ASSERT_STRING_NOT_EQUAL(ka, kk);
        }
    }
    /* the key hashes the canonical text: FNV-1a 64 of "{}" */
    json_object *empty = json_object_new_object();
    char k[17];
    ig_exp_config_key(empty, k);
    CU_ASSERT_STRING_EQUAL(k, "08f44b07b5901a25");
    json_object_put(empty);
    ig_exp_free(a);
    ig_exp_free(b);
    ig_exp_free(c);
    ig_exp_free(d);
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return s && a >= b && !strcmp(s + a - b, suffix);
}

static void test_references(void) {
    ig_exp *e = load("exp/good/modeled.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_STRING_EQUAL(ig_exp_output_dir(e), "/tmp/igen-modeled");
    ig_exp_point p;
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT_EQUAL(p.mode, IG_EXP_MODELED);
    CU_ASSERT(ends_with(p.shape_path, "/configs/models/smollm2-135m.yaml"));
    CU_ASSERT(ends_with(p.hardware_path, "/configs/hardware/a6000-pcie3.yaml"));
    CU_ASSERT(access(p.shape_path, R_OK) == 0 && access(p.hardware_path, R_OK) == 0);
    CU_ASSERT_STRING_EQUAL(p.model_path, "default");
    CU_ASSERT_STRING_EQUAL(p.dtype, "f16");
    IG_ASSERT_NEAR(p.weights.gpu, 50, 0);
    IG_ASSERT_NEAR(p.weights.cpu, 50, 0);
    IG_ASSERT_NEAR(p.kv.gpu, 0, 0);
    IG_ASSERT_NEAR(p.kv.cpu, 100, 0);
    CU_ASSERT_STRING_EQUAL(p.numa, "0,1");
    CU_ASSERT_EQUAL(p.overlap, 0);
    CU_ASSERT_EQUAL(p.link, 1);
    IG_ASSERT_NEAR(p.link_h2d_gbps, 12, 0);
    IG_ASSERT_NEAR(p.link_d2h_gbps, 11.5, 0);
    IG_ASSERT_NEAR(p.link_latency_us, 10, 0);
    CU_ASSERT(p.metric_throughput && p.metric_bytes && !p.metric_ppl && !p.metric_recall);
    /* the config keeps the names as written */
    json_object *c = ig_exp_point_config(e, 0);
    CU_ASSERT_STRING_EQUAL(jstr(c, "hardware", NULL, NULL), "a6000-pcie3");
    CU_ASSERT_STRING_EQUAL(jstr(c, "model", "shape", NULL), "smollm2-135m");
    CU_ASSERT_STRING_EQUAL(jstr(c, "mode", NULL, NULL), "modeled");
    IG_ASSERT_NEAR(json_object_get_double(jpath(c, "placement", "link", "d2h_gbps")), 11.5, 0);
    ig_exp_free(e);

    /* relative paths from the experiment's directory; a model path must exist when measured */
    e = load("exp/good/ppl.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 0, &p), IG_OK);
    CU_ASSERT(ends_with(p.text_path, "exp/good/tiny.txt"));
    CU_ASSERT(access(p.text_path, R_OK) == 0);
    CU_ASSERT(ends_with(p.model_path, "tiny_llama.gguf"));
    CU_ASSERT(access(p.model_path, R_OK) == 0);
    CU_ASSERT(p.metric_ppl && p.metric_recall && !p.metric_throughput);
    CU_ASSERT_EQUAL(p.ppl_ctx, 64);
    CU_ASSERT_EQUAL(p.ppl_prefill, 0);
    json_object *m = jpath(ig_exp_point_config(e, 0), "metrics", NULL, NULL);
    CU_ASSERT_EQUAL(json_object_array_length(m), 2);
    CU_ASSERT_STRING_EQUAL(jstr(ig_exp_point_config(e, 0), "workload", "text", NULL), "tiny.txt");
    ig_exp_free(e);

    /* hardware swept over two profiles: each is found and loaded */
    const char *sets[] = {"hardware=[a6000-pcie3, h200]"};
    e = load("exp/good/modeled.yaml", sets, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ig_exp_n_points(e), 2);
    CU_ASSERT_EQUAL(ig_exp_point_get(e, 1, &p), IG_OK);
    CU_ASSERT(ends_with(p.hardware_path, "/configs/hardware/h200.yaml"));
    CU_ASSERT_STRING_EQUAL(ig_exp_point_label(e, 1), "hardware=h200 policy=full");
    ig_exp_free(e);
}

static void test_print_points(void) {
    ig_exp *e = load("exp/good/zip.yaml", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    ig_exp_print_points(e, f);
    fclose(f);
    CU_ASSERT(strncmp(buf, "experiment zip: 12 points", 25) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(
        buf, "\n 0  workload.prompt_len=128 workload.batch=1 workload.gen_len=32 policy=full\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(
        buf, "\n11  workload.prompt_len=1024 workload.batch=2 workload.gen_len=128 policy=h2o\n"));
    int lines = 0;
    for (char *p = buf; *p; p++) lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 13);
    free(buf);
    ig_exp_free(e);
}

/* Every YAML example in docs/config.md loads (the complete one needs the shared wikitext). */
static void test_doc_examples(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/config.md", IG_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024], *block = NULL;
    size_t len = 0;
    FILE *out = NULL;
    int n_blocks = 0, in = 0;
    while (fgets(line, sizeof line, f)) {
        if (!in && !strcmp(line, "```yaml\n")) {
            in = 1;
            out = open_memstream(&block, &len);
            continue;
        }
        if (!in) continue;
        if (strcmp(line, "```\n")) {
            fputs(line, out);
            continue;
        }
        in = 0;
        fclose(out);
        n_blocks++;
        int needs_text = strstr(block, "wiki.test.raw") != NULL;
        if (!needs_text || ig_test_shared("wikitext-2-raw/wiki.test.raw")) {
            char yp[4200];
            snprintf(yp, sizeof yp, "%s/doc-example-%d.yaml", ig_test_tmpdir(), n_blocks);
            FILE *y = fopen(yp, "w");
            CU_ASSERT_PTR_NOT_NULL_FATAL(y);
            fputs(block, y);
            fclose(y);
            ig_exp *e = NULL;
            ig_error err = {0};
            /* the complete example's text path is relative to the checkout's parent's shared/ */
            ig_status st = ig_exp_load(yp, NULL, 0, &e, &err);
            if (st != IG_OK) fprintf(stderr, "docs/config.md example %d: %s\n", n_blocks, err.msg);
            CU_ASSERT_EQUAL(st, IG_OK);
            ig_exp_free(e);
        }
        free(block);
        block = NULL;
    }
    fclose(f);
    CU_ASSERT(n_blocks >= 7);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every malformed file fails with the message on its first line, before anything runs. */
static void test_bad_corpus(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ig_test_fixture("exp/bad"));
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    char *names[256];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 256;) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".yaml")) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_names);
    CU_ASSERT(n >= 24);
    for (int i = 0; i < n; i++) {
        char path[4400], line[512], expect[512] = "", sets_buf[4][512];
        const char *sets[4];
        int n_sets = 0;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        while (fgets(line, sizeof line, f) && line[0] == '#') {
            line[strcspn(line, "\n")] = '\0';
            if (!strncmp(line, "# expect: ", 10)) snprintf(expect, sizeof expect, "%s", line + 10);
            if (!strncmp(line, "# set: ", 7) && n_sets < 4) {
                snprintf(sets_buf[n_sets], sizeof sets_buf[0], "%s", line + 7);
                sets[n_sets] = sets_buf[n_sets];
                n_sets++;
            }
        }
        fclose(f);
        ig_exp *e = NULL;
        ig_error err = {0};
        ig_status st = ig_exp_load(path, sets, n_sets, &e, &err);
        int ok =
            st != IG_OK && !e && expect[0] && strstr(err.msg, expect) && !strchr(err.msg, '\n');
        if (!ok) {
            fprintf(stderr, "%s: expected '%s'\n  got (%s) '%s'\n", names[i], expect,
                    ig_status_to_string(st), st == IG_OK ? "(loaded)" : err.msg);
            CU_FAIL("malformed experiment not rejected as expected");
        }
        ig_exp_free(e);
        free(names[i]);
    }
}

/* Repeats' statistics against hand calculations. */
static void test_stats(void) {
    ig_stats s;
    const double a[3] = {14, 10, 12}; /* mean 12, sd 2, t(0.975, 2) = 4.3027 */
    ig_stats_summarize(a, 3, &s);
    CU_ASSERT_EQUAL(s.n, 3);
    CU_ASSERT_DOUBLE_EQUAL(s.median, 12, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s.min, 10, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s.max, 14, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s.mean, 12, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s.sd, 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s.ci95_lo, 12 - 4.3027 * 2 / sqrt(3.0), 1e-9); /* 7.03167 */
    CU_ASSERT_DOUBLE_EQUAL(s.ci95_hi, 12 + 4.3027 * 2 / sqrt(3.0), 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(s.spread, 4.0 / 12.0, 1e-12);
    /* prediction interval for another run's median of 3: Var(median of 3 N(0,1)) = 0.448671,
     * half-width 4.3027 * 2 * sqrt(1/3 + 0.448671) = 7.60986 */
    CU_ASSERT_DOUBLE_EQUAL(s.pi95_lo, 12 - 7.60986, 1e-4);
    CU_ASSERT_DOUBLE_EQUAL(s.pi95_hi, 12 + 7.60986, 1e-4);
    CU_ASSERT_DOUBLE_EQUAL(a[0], 14, 0); /* the input is not reordered */
    const double b[4] = {3, 1, 2, 4};    /* median 2.5, sd sqrt(5/3), t(0.975, 3) = 3.1824 */
    ig_stats_summarize(b, 4, &s);
    CU_ASSERT_DOUBLE_EQUAL(s.median, 2.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s.sd, sqrt(5.0 / 3.0), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s.ci95_hi - s.mean, 3.1824 * sqrt(5.0 / 3.0) / 2, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(s.spread, 3 / 2.5, 1e-12);
    const double c[1] = {5};
    ig_stats_summarize(c, 1, &s);
    CU_ASSERT(s.median == 5 && s.sd == 0 && s.ci95_lo == 5 && s.ci95_hi == 5 && s.spread == 0);
    CU_ASSERT(s.pi95_lo == 5 && s.pi95_hi == 5);
    /* the median of 1 and of 2 samples: the variance of one sample and of a mean of two */
    CU_ASSERT_DOUBLE_EQUAL(ig_stats_median_var(1), 1, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(ig_stats_median_var(2), 0.5, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(ig_stats_median_var(31), 3.14159265358979 / 62, 1e-12);
    CU_ASSERT(isnan(ig_stats_median_var(0)));
    CU_ASSERT_DOUBLE_EQUAL(ig_stats_t975(1), 12.7062, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(ig_stats_t975(30), 2.0423, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(ig_stats_t975(100000), 1.96, 1e-9);
    CU_ASSERT(isnan(ig_stats_t975(0)));
}

/* One standard normal draw from a seeded generator (xorshift64*, Box-Muller). */
static double test_gauss(unsigned long long *st) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        *st ^= *st >> 12;
        *st ^= *st << 25;
        *st ^= *st >> 27;
        u[i] = ((*st * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
    }
    return sqrt(-2 * log(u[0] + 1e-300)) * cos(6.283185307179586 * u[1]);
}

/* What each interval promises, by simulation with the machine's speed perfectly steady (repeats
 * independent normal draws): another run's median of 3 lies in the prediction interval 95% of
 * the time, in the confidence interval of the mean only about 89% of the time (the interval the
 * quickstart's stability check reads; docs/results/quickstart.md). 40000 pairs of runs: the
 * binomial standard error of a coverage near 0.95 is 0.0011. */
static void test_stats_coverage(void) {
    unsigned long long st = 0x9E3779B97F4A7C15ULL;
    int pairs = 40000, in_pi = 0, in_ci = 0;
    for (int p = 0; p < pairs; p++) {
        double a[3], b[3];
        for (int i = 0; i < 3; i++) a[i] = 100 + 7 * test_gauss(&st);
        for (int i = 0; i < 3; i++) b[i] = 100 + 7 * test_gauss(&st);
        ig_stats sa, sb;
        ig_stats_summarize(a, 3, &sa);
        ig_stats_summarize(b, 3, &sb);
        in_pi += sb.median >= sa.pi95_lo && sb.median <= sa.pi95_hi;
        in_ci += sb.median >= sa.ci95_lo && sb.median <= sa.ci95_hi;
    }
    double cpi = (double)in_pi / pairs, cci = (double)in_ci / pairs;
    CU_ASSERT(cpi > 0.944 && cpi < 0.956);
    CU_ASSERT(cci > 0.880 && cci < 0.905);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("exp", NULL, NULL);
    CU_add_test(s, "sweep_order", test_sweep_order);
    CU_add_test(s, "zip", test_zip);
    CU_add_test(s, "stats", test_stats);
    CU_add_test(s, "stats_coverage", test_stats_coverage);
    CU_add_test(s, "set", test_set);
    CU_add_test(s, "defaults", test_defaults);
    CU_add_test(s, "backend", test_backend);
    CU_add_test(s, "keys", test_keys);
    CU_add_test(s, "references", test_references);
    CU_add_test(s, "print_points", test_print_points);
    CU_add_test(s, "bad_corpus", test_bad_corpus);
    CU_add_test(s, "doc_examples", test_doc_examples);
}
