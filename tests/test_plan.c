/* The planning side of the offloading core: hardware profiles (round trip, a corpus of malformed
 * files with their file:line:col messages), model shapes, the placement planner (granularity,
 * capacities, NUMA), the cost model checked by hand, the search, and the igen plan / profile-hw
 * commands. Nothing here depends on this machine's topology. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "offload/cost.h"
#include "offload/fetchprof.h"
#include "offload/hwprof.h"
#include "offload/modelshape.h"
#include "offload/plan.h"
#include "tests/test_util.h"

static const char *fx(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "plan/%s", name);
    return ig_test_fixture(buf);
}

/* ---------------- hardware profiles ---------------- */

static int prof_equal(const ig_hwprof *a, const ig_hwprof *b) {
    int ok =
        !strcmp(a->name, b->name) && !strcmp(a->description, b->description) &&
        !strcmp(a->device.name, b->device.name) && a->device.memory_gib == b->device.memory_gib &&
        a->device.gemm_tflops == b->device.gemm_tflops &&
        a->device.gemm_tflops_decode == b->device.gemm_tflops_decode &&
        a->device.mem_bandwidth_gbps == b->device.mem_bandwidth_gbps &&
        a->device.numa_node == b->device.numa_node && a->host.memory_gib == b->host.memory_gib &&
        a->host.n_numa == b->host.n_numa && a->host.cpu_gflops == b->host.cpu_gflops &&
        a->host.mem_bandwidth_gbps == b->host.mem_bandwidth_gbps &&
        a->link.h2d_gbps == b->link.h2d_gbps && a->link.d2h_gbps == b->link.d2h_gbps &&
        a->link.h2d_latency_us == b->link.h2d_latency_us &&
        a->link.d2h_latency_us == b->link.d2h_latency_us && a->has_disk == b->has_disk &&
        a->disk.read_gbps == b->disk.read_gbps && a->disk.write_gbps == b->disk.write_gbps &&
        a->disk.capacity_gib == b->disk.capacity_gib &&
        a->device.attn_gbps == b->device.attn_gbps &&
        a->device.attn_int4_gbps == b->device.attn_int4_gbps &&
        a->device.attn_sparse_gbps == b->device.attn_sparse_gbps &&
        a->device.select_gbps == b->device.select_gbps &&
        a->device.attn_dense_gbps == b->device.attn_dense_gbps &&
        a->device.attn_probs_gbps == b->device.attn_probs_gbps &&
        !strcmp(a->device.kernel_shape, b->device.kernel_shape) &&
        a->device.gemm_tflops_layer == b->device.gemm_tflops_layer &&
        a->device.gemm_tflops_logits == b->device.gemm_tflops_logits &&
        !strcmp(a->device.matmul_shape, b->device.matmul_shape);
    for (int i = 0; ok && i < a->host.n_numa; i++)
        ok = a->host.numa[i].os_index == b->host.numa[i].os_index &&
             a->host.numa[i].memory_gib == b->host.numa[i].memory_gib;
    return ok;
}

static void test_profile_roundtrip(void) {
    static ig_hwprof a, b, c;
    ig_error err;
    ig_error_clear(&err);
    const char *names[] = {"a6000-pcie3", "h200"};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(ig_hwprof_open(names[i], &a, &err), IG_OK);
        CU_ASSERT_STRING_EQUAL(a.name, names[i]);
        char path[4200];
        snprintf(path, sizeof path, "%s/rt-%s.yaml", ig_test_tmpdir(), names[i]);
        CU_ASSERT_EQUAL(ig_hwprof_save(&a, path, "a comment\nover two lines", &err), IG_OK);
        CU_ASSERT_EQUAL(ig_hwprof_load(path, &b, &err), IG_OK);
        CU_ASSERT(prof_equal(&a, &b));
    }
    CU_ASSERT_EQUAL(a.host.n_numa, 2); /* h200: two sockets */
    CU_ASSERT_EQUAL(a.device.numa_node, 0);
    /* awkward values: thirds, tiny and huge numbers, quotes and backslashes in strings */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "odd \"name\" \\ x");
    snprintf(c.description, sizeof c.description, "tab\there: colon");
    c.device.memory_gib = 1.0 / 3;
    c.device.gemm_tflops = 1e-7;
    c.device.gemm_tflops_decode = 123456.789;
    c.device.mem_bandwidth_gbps = 0.1 + 0.2;
    c.device.numa_node = 3;
    c.host.memory_gib = 10;
    c.host.n_numa = 2;
    c.host.numa[0] = (ig_hwprof_numa){3, 2.5};
    c.host.numa[1] = (ig_hwprof_numa){7, 7.5};
    c.host.mem_bandwidth_gbps = 3;
    c.link.h2d_gbps = 2.0 / 7;
    c.link.d2h_gbps = 5;
    c.link.h2d_latency_us = 0;
    c.link.d2h_latency_us = 1e-3;
    c.device.attn_gbps = 17.0 / 3;
    c.device.attn_int4_gbps = 1e-3;
    c.device.attn_sparse_gbps = 2.5;
    c.device.select_gbps = 9.25;
    c.device.attn_dense_gbps = 31.0 / 3;
    c.device.attn_probs_gbps = 41.0 / 7;
    snprintf(c.device.kernel_shape, sizeof c.device.kernel_shape, "9,3,64");
    c.device.gemm_tflops_layer = 0.078 / 7;
    c.device.gemm_tflops_logits = 1e-4;
    snprintf(c.device.matmul_shape, sizeof c.device.matmul_shape, "576,576,192,1536,3,49152,30,8");
    char path[4200];
    snprintf(path, sizeof path, "%s/rt-odd.yaml", ig_test_tmpdir());
    CU_ASSERT_EQUAL(ig_hwprof_save(&c, path, NULL, &err), IG_OK);
    ig_error_clear(&err);
    CU_ASSERT_EQUAL(ig_hwprof_load(path, &b, &err), IG_OK);
    if (err.msg[0]) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT(prof_equal(&c, &b));
    /* strings YAML treats specially round-trip: C1 controls (U+0085 is a YAML line break),
     * line and paragraph separators, a byte order mark, beside ordinary non-ASCII text */
    const char *specials[] = {"a\xc2\x80"
                              "b",
                              "nel\xc2\x85here", "ls\xe2\x80\xa8ps\xe2\x80\xa9", "bom\xef\xbb\xbf",
                              "caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80"};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        snprintf(c.name, sizeof c.name, "%s", specials[i]);
        snprintf(c.description, sizeof c.description, "%s", specials[i]);
        CU_ASSERT_EQUAL(ig_hwprof_save(&c, path, NULL, &err), IG_OK);
        ig_error_clear(&err);
        CU_ASSERT_EQUAL(ig_hwprof_load(path, &b, &err), IG_OK);
        if (err.msg[0]) fprintf(stderr, "\n    special %zu: %s\n", i, err.msg);
        CU_ASSERT_STRING_EQUAL(b.name, specials[i]);
        CU_ASSERT_STRING_EQUAL(b.description, specials[i]);
    }
    /* bytes that are not UTF-8 cannot be in YAML: they load back as U+FFFD, never break the file */
    snprintf(c.name, sizeof c.name,
             "x\xff"
             "y");
    CU_ASSERT_EQUAL(ig_hwprof_save(&c, path, NULL, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_hwprof_load(path, &b, &err), IG_OK);
    CU_ASSERT_STRING_EQUAL(b.name, "x\xef\xbf\xbd"
                                   "y");
    /* optional fields get their documented defaults */
    CU_ASSERT_EQUAL(ig_hwprof_load(fx("base.yaml"), &b, &err), IG_OK);
    CU_ASSERT_EQUAL(b.device.gemm_tflops_decode, 20);
    CU_ASSERT_EQUAL(b.host.n_numa, 1);
    CU_ASSERT_EQUAL(b.host.numa[0].memory_gib, 64);
    CU_ASSERT_EQUAL(b.has_disk, 0);
    CU_ASSERT(b.device.attn_gbps == 0 && b.device.attn_int4_gbps == 0 && b.device.select_gbps == 0);
    CU_ASSERT_STRING_EQUAL(b.device.kernel_shape, "");
    CU_ASSERT(b.device.gemm_tflops_layer == 0 && b.device.gemm_tflops_logits == 0);
    CU_ASSERT_STRING_EQUAL(b.device.matmul_shape, "");
    ig_machine m;
    ig_hwprof_to_machine(&b, &m);
    CU_ASSERT_EQUAL(m.device_bytes, (size_t)16 << 30);
    CU_ASSERT_EQUAL(m.disk_bytes, 0);
    CU_ASSERT_EQUAL(m.device_numa, 0);
}

static void expect_bad_profile(const char *file, const char *needle) {
    static ig_hwprof p;
    ig_error err;
    ig_error_clear(&err);
    char want[4400];
    snprintf(want, sizeof want, "%s:%s", fx(file), needle);
    ig_status st = ig_hwprof_load(fx(file), &p, &err);
    if (st == IG_OK || !strstr(err.msg, want))
        fprintf(stderr, "\n    %s -> %d '%s' (wanted '%s')\n", file, st, err.msg, want);
    CU_ASSERT_EQUAL(st, IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
}

static void test_profile_errors(void) {
    expect_bad_profile("unknown_key.yaml",
                       "11:3: link.d2h_gbs: unknown key (did you mean 'd2h_gbps'?");
    expect_bad_profile("wrong_type.yaml",
                       "3:15: device.memory_gib: expected a number, found 'lots'");
    expect_bad_profile("negative_bw.yaml",
                       "8:23: host.mem_bandwidth_gbps: -5 is out of range: must be > 0");
    expect_bad_profile("bad_syntax.yaml", "4:14: YAML syntax error: did not find expected");
    expect_bad_profile("missing_key.yaml", "10:3: link: missing required key 'd2h_gbps'");
    expect_bad_profile("section_type.yaml", "2:9: device: expected a mapping, found a scalar");
    expect_bad_profile("quoted_number.yaml",
                       "4:16: device.gemm_tflops: expected a number, found the quoted string");
    expect_bad_profile("duplicate_key.yaml", "6:3: device.memory_gib: duplicate key");
    expect_bad_profile("numa_bad.yaml", "6:14: device.numa_node: node 3 is not among");
    expect_bad_profile("numa_sum.yaml", "9:5: host.numa_nodes: the nodes hold 80 GiB");
    expect_bad_profile("alias_bomb.yaml", "7:5: the document expands to more than 200000 values");
    /* from memory, and an empty file */
    static ig_hwprof p;
    ig_error err;
    CU_ASSERT_EQUAL(ig_hwprof_load_string("", 0, "empty.yaml", &p, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "empty.yaml:1:1: (top level): the file is empty"));
    CU_ASSERT_EQUAL(ig_hwprof_load_string("- a\n- b\n", 8, "list.yaml", &p, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "list.yaml:1:1: (top level): expected a mapping"));
    CU_ASSERT_EQUAL(ig_hwprof_load("/nonexistent/x.yaml", &p, &err), IG_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/x.yaml"));
    CU_ASSERT_EQUAL(ig_hwprof_open("no-such-profile", &p, &err), IG_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no hardware profile 'no-such-profile'"));
}

/* ---------------- model shapes ---------------- */

static void test_model_shapes(void) {
    ig_model_shape s;
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(ig_model_shape_open("opt-13b", &s, &err), IG_OK);
    CU_ASSERT_EQUAL(s.config.arch, IG_ARCH_OPT);
    CU_ASSERT_EQUAL(s.config.n_layer, 40);
    CU_ASSERT_EQUAL(s.config.d_model, 5120);
    CU_ASSERT_EQUAL(s.config.head_dim, 128);
    CU_ASSERT_EQUAL(s.config.n_kv_head, 40);
    CU_ASSERT_EQUAL(s.config.pos_offset, 2);
    CU_ASSERT(s.config.attn_bias && s.config.tied_embeddings);
    CU_ASSERT_EQUAL(s.weight_dtype, IG_PLAN_F16);
    const char *all[] = {"opt-6.7b", "opt-30b", "llama-2-7b", "smollm2-135m"};
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(ig_model_shape_open(all[i], &s, &err), IG_OK);
    CU_ASSERT_EQUAL(s.config.n_kv_head, 3);
    CU_ASSERT_EQUAL(s.config.head_dim, 64);
    CU_ASSERT_EQUAL(ig_model_shape_open(fx("bad_shape.yaml"), &s, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.msg, "bad_shape.yaml:2:7: arch: 'gpt' is not one of opt, llama"));
    /* parameter counts of the published models (weights in f16, matrices + vectors) */
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    CU_ASSERT_EQUAL_FATAL(ig_model_shape_open("opt-13b", &s, &err), IG_OK);
    o.model = s.config;
    ig_machine m = {.device_bytes = (size_t)1 << 40, .n_numa = 1, .numa_bytes = {(size_t)1 << 40}};
    o.wl = (ig_workload){16, 2, 1, 1};
    ig_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    double params = (double)ig_plan_get_usage(p)->device.weights / 2;
    CU_ASSERT(params > 12.8e9 && params < 13.0e9); /* OPT-13B: 12.85e9 parameters */
    ig_plan_free(p);
    /* from a real model file: the shape equals the loaded config */
    ig_model_load_opts lo = {IG_DTYPE_F16, 1, 0, IG_WMEM_AUTO};
    ig_model *mod = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_model_load(ig_test_fixture("tiny_llama"), &lo, &mod, &err), IG_OK);
    ig_model_shape_from_model(mod, &s);
    CU_ASSERT_EQUAL(s.config.n_layer, ig_model_get_config(mod)->n_layer);
    CU_ASSERT_EQUAL(s.config.n_kv_head, ig_model_get_config(mod)->n_kv_head);
    CU_ASSERT_EQUAL(s.weight_dtype, IG_PLAN_F16);
    ig_model_free(mod);
    /* the shipped SmolLM2 shape against the real model's own metadata (the GGUF), when installed */
    const char *dm = ig_test_default_model();
    if (!dm) {
        printf("\n    default model not installed: smollm2-135m.yaml not cross-checked\n    ");
        return;
    }
    CU_ASSERT_EQUAL_FATAL(ig_model_load(dm, &lo, &mod, &err), IG_OK);
    CU_ASSERT_EQUAL_FATAL(ig_model_shape_open("smollm2-135m", &s, &err), IG_OK);
    const ig_model_config *a = &s.config, *b = ig_model_get_config(mod);
    CU_ASSERT(a->arch == b->arch && a->n_layer == b->n_layer && a->d_model == b->d_model &&
              a->n_head == b->n_head && a->n_kv_head == b->n_kv_head &&
              a->head_dim == b->head_dim && a->d_ffn == b->d_ffn && a->vocab == b->vocab &&
              a->max_pos == b->max_pos && a->tied_embeddings == b->tied_embeddings);
    IG_ASSERT_NEAR(a->rope_theta, b->rope_theta, 1e-3);
    ig_model_free(mod);
}

/* ---------------- planner ---------------- */

static ig_model_config shape_cfg(const char *name) {
    ig_model_shape s;
    ig_error err;
    IG_ASSERT(ig_model_shape_open(name, &s, &err) == IG_OK);
    return s.config;
}

static void test_granularity(void) {
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = shape_cfg("opt-13b");
    o.wl = (ig_workload){64, 8, 2, 1};
    ig_machine m = {.device_bytes = (size_t)1 << 40,
                    .n_numa = 1,
                    .numa_bytes = {(size_t)1 << 40},
                    .disk_bytes = (size_t)1 << 42};
    ig_error err;
    for (int w = 0; w <= 100; w += 5)
        for (int c = 0; c <= 100 - w; c += 25) {
            o.pct = (ig_plan_percent){w, c, 100, 0, 100, 0};
            ig_plan *p = NULL;
            CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
            const ig_weight_placement *wp = ig_plan_weights(p);
            for (int l = 0; l < o.model.n_layer; l++) {
                size_t tot = 0, dev = 0, host = 0, maxt = 0;
                for (int t = 0; t < IG_WT_COUNT; t++) {
                    size_t b = ig_plan_tensor_bytes(p, l, (ig_wtensor)t);
                    tot += b;
                    if (b > maxt) maxt = b;
                    ig_tier_kind k = wp->tensor[l * IG_WT_COUNT + t].kind;
                    if (k == IG_TIER_DEVICE) dev += b;
                    if (k == IG_TIER_HOST) host += b;
                }
                /* within one tensor of the percentage, per layer, for device and device+host */
                CU_ASSERT(fabs((double)dev - tot * w / 100.0) <= (double)maxt);
                CU_ASSERT(fabs((double)(dev + host) - tot * (w + c) / 100.0) <= (double)maxt);
                if (w == 100) CU_ASSERT_EQUAL(dev, tot);
                if (w == 0) CU_ASSERT_EQUAL(dev, 0);
            }
            ig_plan_free(p);
        }
    /* KV in whole sequences, cumulative rounding half up: 3 sequences at 50/50 -> 2 device, 1 host
     */
    o.pct = (ig_plan_percent){100, 0, 50, 50, 100, 0};
    o.wl = (ig_workload){64, 8, 3, 1};
    ig_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_plan_kv_sequences(p, IG_TIER_DEVICE), 2);
    CU_ASSERT_EQUAL(ig_plan_kv_sequences(p, IG_TIER_HOST), 1);
    CU_ASSERT_EQUAL(ig_plan_kv_sequences(p, IG_TIER_DISK), 0);
    CU_ASSERT_EQUAL(ig_plan_kv_sequence(p, 2).kind, IG_TIER_HOST);
    /* KV bytes: 40 layers x (64 + 8 - 1) tokens x K and V of 40 heads x 128 in f16 */
    CU_ASSERT_EQUAL(ig_plan_kv_bytes_per_sequence(p), (size_t)40 * 71 * 2 * 5120 * 2);
    CU_ASSERT_EQUAL(ig_plan_get_usage(p)->host.kv, ig_plan_kv_bytes_per_sequence(p));
    ig_plan_free(p);
    /* int4 KV: head_dim 128 = 2 groups of 64: 64 bytes + 2 x 4 bytes of scale/min per head row */
    o.kv_dtype = IG_PLAN_INT4;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_plan_layer(p, 0)->kv_row_bytes, (size_t)2 * 40 * (64 + 8));
    ig_plan_free(p);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_capacity_property(void) {
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = shape_cfg("smollm2-135m");
    o.weight_dtype = IG_PLAN_F32;
    ig_machine m = {.device_bytes = (size_t)600 << 20,
                    .n_numa = 2,
                    .numa_os = {0, 1},
                    .numa_bytes = {(size_t)700 << 20, (size_t)500 << 20},
                    .disk_bytes = (size_t)2 << 30,
                    .device_numa = 1};
    int feasible = 0, infeasible = 0;
    ig_error err;
    for (int it = 0; it < 3000; it++) {
        int wg = (int)(rnd() % 101), wc = (int)(rnd() % (101 - wg));
        int cg = (int)(rnd() % 101), cc = (int)(rnd() % (101 - cg));
        int ag = (int)(rnd() % 101), ac = (int)(rnd() % (101 - ag));
        o.pct = (ig_plan_percent){wg, wc, cg, cc, ag, ac};
        o.wl = (ig_workload){1 + (int)(rnd() % 1024), 1 + (int)(rnd() % 256), 1 + (int)(rnd() % 16),
                             1 + (int)(rnd() % 4)};
        o.numa_mode = (ig_numa_mode)(rnd() % 3);
        o.n_numa_nodes = o.numa_mode == IG_NUMA_NODES ? 2 : 0;
        o.numa_nodes[0] = 1;
        o.numa_nodes[1] = 0;
        o.kv_dtype = rnd() % 2 ? IG_PLAN_INT4 : IG_PLAN_F16;
        o.cpu_cache_compute = (int)(rnd() % 2);
        ig_plan *p = NULL;
        ig_error_clear(&err);
        ig_status st = ig_plan_create(&o, &m, &p, &err);
        if (st == IG_OK) {
            feasible++;
            const ig_plan_usage *u = ig_plan_get_usage(p);
            CU_ASSERT(ig_plan_bytes_total(&u->device) <= m.device_bytes);
            CU_ASSERT(ig_plan_bytes_total(&u->host_node[0]) <= m.numa_bytes[0]);
            CU_ASSERT(ig_plan_bytes_total(&u->host_node[1]) <= m.numa_bytes[1]);
            CU_ASSERT(ig_plan_bytes_total(&u->disk) <= m.disk_bytes);
            /* accounting: nodes add up to the host total, every weight byte is somewhere once */
            CU_ASSERT_EQUAL(ig_plan_bytes_total(&u->host_node[0]) +
                                ig_plan_bytes_total(&u->host_node[1]),
                            ig_plan_bytes_total(&u->host));
            size_t w = 0;
            for (int l = 0; l < o.model.n_layer; l++)
                for (int t = 0; t < IG_WT_COUNT; t++)
                    w += ig_plan_tensor_bytes(p, l, (ig_wtensor)t);
            w += ig_plan_outer_bytes(p);
            CU_ASSERT_EQUAL(u->device.weights + u->host.weights + u->disk.weights, w);
            int B = o.wl.gpu_batch_size * o.wl.num_gpu_batches;
            CU_ASSERT_EQUAL(ig_plan_kv_sequences(p, IG_TIER_DEVICE) +
                                ig_plan_kv_sequences(p, IG_TIER_HOST) +
                                ig_plan_kv_sequences(p, IG_TIER_DISK),
                            B);
            CU_ASSERT_EQUAL(u->device.kv + u->host.kv + u->disk.kv,
                            (size_t)B * ig_plan_kv_bytes_per_sequence(p));
            ig_plan_free(p);
        } else {
            infeasible++;
            CU_ASSERT_EQUAL(st, IG_ERR_CAPACITY);
            CU_ASSERT(!strncmp(err.msg, "device: needs", 13) ||
                      !strncmp(err.msg, "host node ", 10) || !strncmp(err.msg, "disk: needs", 11));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "GiB"));
            CU_ASSERT_PTR_NULL(p);
        }
    }
    CU_ASSERT(feasible > 100);
    CU_ASSERT(infeasible > 100);
}

static void expect_invalid(const ig_plan_opts *o, const ig_machine *m, const char *needle) {
    ig_plan *p = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status st = ig_plan_create(o, m, &p, &err);
    if (st != IG_ERR_INVALID_ARG || !strstr(err.msg, needle))
        fprintf(stderr, "\n    got %d '%s' (wanted '%s')\n", st, err.msg, needle);
    CU_ASSERT_EQUAL(st, IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
    CU_ASSERT_PTR_NULL(p);
}

static void test_plan_errors(void) {
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = shape_cfg("opt-6.7b");
    ig_machine m = {.device_bytes = (size_t)48 << 30,
                    .n_numa = 2,
                    .numa_os = {0, 1},
                    .numa_bytes = {(size_t)64 << 30, (size_t)64 << 30},
                    .device_numa = 0};
    o.pct = (ig_plan_percent){60, 50, 100, 0, 100, 0};
    expect_invalid(&o, &m, "weights on device and host: 60 + 50 = 110 is more than 100");
    o.pct = (ig_plan_percent){100, 0, 30, 80, 100, 0};
    expect_invalid(&o, &m, "KV cache on device and host: 30 + 80 = 110");
    o.pct = (ig_plan_percent){100, 0, 100, 0, -5, 0};
    expect_invalid(&o, &m, "act_gpu = -5: must be in [0, 100]");
    o.pct = (ig_plan_percent){100, 0, 100, 0, 100, 0};
    o.numa_mode = IG_NUMA_NODES;
    o.n_numa_nodes = 1;
    o.numa_nodes[0] = 2;
    expect_invalid(&o, &m, "NUMA node 2 is not in the machine (nodes: 0, 1)");
    o.numa_mode = IG_NUMA_INTERLEAVE;
    expect_invalid(&o, &m, "NUMA node 2 is not in the machine");
    o.numa_mode = IG_NUMA_LOCAL;
    o.n_numa_nodes = 0;
    m.device_numa = 5;
    expect_invalid(&o, &m, "the device's node 5 is not in the machine");
    m.device_numa = 0;
    o.fetch_fraction = 0.5;
    o.kv_keep_fraction = 0.2;
    expect_invalid(&o, &m, "cannot fetch rows that are not kept");
    o.fetch_fraction = o.kv_keep_fraction = 1;
    o.wl.gpu_batch_size = 0;
    expect_invalid(&o, &m, "gpu batch size 0");
    /* does not fit: the tier, the need with its breakdown and the capacity */
    o.wl = (ig_workload){2048, 128, 64, 1}; /* 64 x 2175 tokens x 0.5 MiB = 68 GiB of KV */
    ig_plan *p = NULL;
    ig_error err;
    CU_ASSERT_EQUAL(ig_plan_create(&o, &m, &p, &err), IG_ERR_CAPACITY);
    CU_ASSERT(!strncmp(err.msg, "device: needs ", 14));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.msg, "(weights 12.4, KV 68.0, activations 1.0, buffers 23.0)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "but has 48.0 GiB"));
    o.pct = (ig_plan_percent){100, 0, 0, 0, 100, 0}; /* KV on disk, no disk tier */
    o.wl = (ig_workload){512, 32, 4, 1};
    CU_ASSERT_EQUAL(ig_plan_create(&o, &m, &p, &err), IG_ERR_CAPACITY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "disk: needs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "but the machine has no disk tier"));
}

static void test_numa(void) {
    static ig_hwprof hw;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_hwprof_load(fx("two_node_gpu1.yaml"), &hw, &err), IG_OK);
    ig_machine m;
    ig_hwprof_to_machine(&hw, &m);
    CU_ASSERT_EQUAL(m.device_numa, 1);
    CU_ASSERT_EQUAL(m.n_numa, 2);
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = shape_cfg("opt-6.7b");
    o.wl = (ig_workload){512, 32, 8, 1};
    o.pct = (ig_plan_percent){50, 50, 0, 100, 100, 0};
    ig_plan *p = NULL;
    /* local: every host byte on the device's node 1 */
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    const ig_plan_usage *u = ig_plan_get_usage(p);
    CU_ASSERT(u->host.kv > 0);
    CU_ASSERT_EQUAL(u->host_node[1].kv, u->host.kv);
    CU_ASSERT_EQUAL(u->host_node[1].weights, u->host.weights);
    CU_ASSERT_EQUAL(ig_plan_bytes_total(&u->host_node[0]), 0);
    for (int s = 0; s < 8; s++) {
        CU_ASSERT_EQUAL(ig_plan_kv_sequence(p, s).kind, IG_TIER_HOST);
        CU_ASSERT_EQUAL(ig_plan_kv_sequence(p, s).numa, 1);
    }
    ig_plan_free(p);
    /* interleave: each node gets half of every host item (within a byte per item) */
    o.numa_mode = IG_NUMA_INTERLEAVE;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    u = ig_plan_get_usage(p);
    CU_ASSERT(u->host_node[0].kv + u->host_node[1].kv == u->host.kv);
    CU_ASSERT(llabs((long long)u->host_node[0].kv - (long long)u->host_node[1].kv) <= 8);
    CU_ASSERT(llabs((long long)u->host_node[0].weights - (long long)u->host_node[1].weights) <=
              1000);
    CU_ASSERT_EQUAL(ig_plan_kv_sequence(p, 0).numa, -1);
    ig_plan_free(p);
    /* explicit list 0,1: node 0 fills first; a KV load larger than node 0 spills to node 1 */
    o.numa_mode = IG_NUMA_NODES;
    o.n_numa_nodes = 2;
    o.numa_nodes[0] = 0;
    o.numa_nodes[1] = 1;
    o.wl = (ig_workload){512, 1536, 32, 1}; /* 32 x 1 GiB of KV + 8.4 GiB of weights > one node */
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    u = ig_plan_get_usage(p);
    CU_ASSERT(u->host_node[0].kv > 0 && u->host_node[1].kv > 0);
    CU_ASSERT_EQUAL(ig_plan_kv_sequence(p, 0).numa, 0);
    CU_ASSERT_EQUAL(ig_plan_kv_sequence(p, 31).numa, 1);
    CU_ASSERT(ig_plan_bytes_total(&u->host_node[0]) <= m.numa_bytes[0]);
    ig_plan_free(p);
    /* the same load with local does not fit node 1: the error names the node */
    o.numa_mode = IG_NUMA_LOCAL;
    o.n_numa_nodes = 0;
    CU_ASSERT_EQUAL(ig_plan_create(&o, &m, &p, &err), IG_ERR_CAPACITY);
    CU_ASSERT(!strncmp(err.msg, "host node 1: needs ", 19));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "but has 32.0 GiB"));
}

/* ---------------- cost model ---------------- */

/* A one-layer GQA model small enough to check the cost terms by hand. */
static ig_model_config one_layer_cfg(void) {
    return (ig_model_config){.arch = IG_ARCH_LLAMA,
                             .n_layer = 1,
                             .d_model = 64,
                             .n_head = 2,
                             .n_kv_head = 1,
                             .head_dim = 32,
                             .d_ffn = 128,
                             .vocab = 100,
                             .max_pos = 1024,
                             .tied_embeddings = 1};
}

static void test_cost_by_hand(void) {
    ig_cost_hw hw = {.gemm_flops = 1e12,
                     .gemm_flops_decode = 0.5e12,
                     .dev_bw = 100e9,
                     .host_bw = 10e9,
                     .h2d_bw = 10e9,
                     .d2h_bw = 5e9,
                     .h2d_lat = 1e-3,
                     .d2h_lat = 0,
                     .disk_read_bw = 1e9,
                     .disk_write_bw = 0.5e9};
    ig_cost_times t;
    /* compute bound: 2 TFLOP at 1 TFLOPS = 2 s; 1 GB at 10 GB/s + 1 ms = 0.101 s */
    ig_cost_traffic tr = {.h2d_bytes = 1e9, .gemm_flops = 2e12};
    ig_cost_times_of(&tr, 0, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 2.0, 1e-12);
    IG_ASSERT_NEAR(t.t[IG_COST_H2D], 0.101, 1e-12);
    IG_ASSERT_NEAR(t.step, 2.0, 1e-12);
    ig_cost_times_of(&tr, 0, &hw, 0, &t);
    IG_ASSERT_NEAR(t.step, 2.101, 1e-12);
    /* transfer bound, decode rate: 0.1 TFLOP at 0.5 TFLOPS = 0.2 s; 10 GB at 10 GB/s = 1.001 s;
     * d2h 1 GB at 5 GB/s = 0.2 s; disk read 0.5 GB at 1 GB/s = 0.5 s, write 0.25 GB = 0.5 s */
    tr = (ig_cost_traffic){.h2d_bytes = 10e9,
                           .d2h_bytes = 1e9,
                           .disk_read_bytes = 0.5e9,
                           .disk_write_bytes = 0.25e9,
                           .gemm_flops = 0.1e12};
    ig_cost_times_of(&tr, 1, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 0.2, 1e-12);
    IG_ASSERT_NEAR(t.step, 1.001, 1e-12);
    ig_cost_times_of(&tr, 1, &hw, 0, &t);
    IG_ASSERT_NEAR(t.step, 1.001 + 0.2 + 0.5 + 0.5 + 0.2, 1e-12);
    /* roofline: few FLOPs but many weight bytes -> bandwidth time; attention bytes on both sides */
    tr = (ig_cost_traffic){
        .gemm_flops = 1e9, .gemm_bytes = 10e9, .attn_dev_bytes = 1e9, .attn_host_bytes = 1e9};
    ig_cost_times_of(&tr, 1, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 0.1 + 0.01 + 0.1, 1e-12);
    CU_ASSERT_EQUAL(ig_cost_transfer_s(0, 1e9, 5), 0);
    /* measured decode-kernel rates: attention priced at the slower of memory bandwidth over the
     * bytes read and the kernel's rate over the rows as f32; encoded rows at their own rate; the
     * selection's partial keys at its rate where slower than memory */
    ig_cost_hw hk = hw;
    hk.attn_bw = 5e9;
    hk.attn_enc_bw = 2e9;
    hk.select_bw = 1e9;
    tr = (ig_cost_traffic){.attn_dev_bytes = 1e9, .attn_dev_f32 = 1e9, .spec_dev_bytes = 1e8};
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 5e9 + 1e8 / 1e9, 1e-12);
    ig_cost_times_of(&tr, 1, &hw, 1, &t); /* no kernel rates: memory bandwidth */
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 100e9 + 1e8 / 100e9, 1e-12);
    tr = (ig_cost_traffic){.attn_dev_bytes = 0.25e9, .attn_dev_f32 = 2e9, .attn_enc = 1};
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 2e9 / 2e9, 1e-12);
    tr = (ig_cost_traffic){.attn_dev_bytes = 1e9, .attn_dev_f32 = 1e9, .attn_sparse = 1};
    ig_cost_times_of(&tr, 1, &hk, 1, &t); /* no scattered rate measured: the f32 one */
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 5e9, 1e-12);
    hk.attn_sparse_bw = 4e9;
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 4e9, 1e-12);
    /* the dense kernel's rows: at the f32 rate until it is measured, then at its own */
    tr = (ig_cost_traffic){.attn_dev_bytes = 1e9, .attn_dev_f32 = 1e9, .attn_dense = 1};
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 5e9, 1e-12);
    hk.attn_dense_bw = 8e9;
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 8e9, 1e-12);
    /* a scoring policy's rows (H2O): at the f32 rate until the kernel with probabilities is
     * measured, then at its own */
    tr = (ig_cost_traffic){.attn_dev_bytes = 1e9, .attn_dev_f32 = 1e9, .attn_probs = 1};
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 5e9, 1e-12);
    hk.attn_probs_bw = 3e9;
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 3e9, 1e-12);
    hk.attn_bw = 1e12; /* a kernel faster than memory: the bytes bound it */
    tr = (ig_cost_traffic){.attn_dev_bytes = 1e9, .attn_dev_f32 = 1e9};
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 100e9, 1e-12);
    hk.select_bw = 1e12;
    tr = (ig_cost_traffic){.spec_dev_bytes = 1e9};
    ig_cost_times_of(&tr, 1, &hk, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e9 / 100e9, 1e-12);

    /* through a plan: a one-layer model, weights and KV on the host, checked term by term */
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = one_layer_cfg();
    o.wl = (ig_workload){100, 11, 4, 2};
    o.pct = (ig_plan_percent){0, 100, 0, 100, 100, 0};
    o.fetch_fraction = 0.5;
    ig_machine m = {.device_bytes = (size_t)1 << 30, .n_numa = 1, .numa_bytes = {(size_t)1 << 30}};
    ig_plan *p = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    const ig_plan_layer_io *io = ig_plan_layer(p, 0);
    /* f16: norms 64 + 64, q 64x64, k 32x64, v 32x64, o 64x64, gate/up/down 3 x 128x64 */
    size_t w = 2 * (64 + 64 + 64 * 64 * 2 + 32 * 64 * 2 + 3 * 128 * 64);
    CU_ASSERT_EQUAL(io->w_total, w);
    CU_ASSERT_EQUAL(io->w_bytes[IG_TIER_HOST], w);
    CU_ASSERT_EQUAL(io->kv_row_bytes, 2 * 32 * 2);
    IG_ASSERT_NEAR(io->gemm_flops_per_token, 2.0 * (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128),
                   1e-9);
    ig_cost_layer_traffic(p, 0, 1, 105, &tr);
    /* 8 sequences fetch half of 105 rows each, plus the layer's weights */
    IG_ASSERT_NEAR(tr.h2d_bytes, (double)w + 8 * 52.5 * 128, 1e-6);
    IG_ASSERT_NEAR(tr.d2h_bytes, 8 * 128, 1e-9); /* one new row per sequence */
    IG_ASSERT_NEAR(tr.attn_dev_bytes, 8 * 52.5 * 128, 1e-6);
    /* the same rows as f32: K and V of one KV head of 32 dims, 4 bytes each */
    IG_ASSERT_NEAR(tr.attn_dev_f32, 8 * 52.5 * (2 * 32 * 4), 1e-6);
    CU_ASSERT_EQUAL(tr.attn_enc, 0);
    IG_ASSERT_NEAR(tr.gemm_bytes, 2.0 * w, 1e-9); /* read once per GPU batch */
    ig_cost_layer_traffic(p, 0, 0, 100, &tr);
    IG_ASSERT_NEAR(tr.d2h_bytes, 8 * 100 * 128, 1e-9); /* the prompt's rows stored */
    IG_ASSERT_NEAR(tr.attn_flops, 4.0 * 8 * 64 * 100 * 100, 1e-3);
    /* total = prefill + 10 decode steps, each a layer + the lm_head */
    ig_cost_result r;
    CU_ASSERT_EQUAL(ig_cost_estimate(p, &hw, &r, &err), IG_OK);
    double want = 0;
    ig_cost_layer_traffic(p, 0, 0, 100, &tr);
    ig_cost_times_of(&tr, 0, &hw, 1, &t);
    want += t.step;
    ig_cost_layer_traffic(p, -1, 0, 100, &tr);
    ig_cost_times_of(&tr, 0, &hw, 1, &t);
    want += t.step;
    for (int j = 1; j < 11; j++) {
        ig_cost_layer_traffic(p, 0, 1, 100 + j, &tr);
        ig_cost_times_of(&tr, 1, &hw, 1, &t);
        want += t.step;
        ig_cost_layer_traffic(p, -1, 1, 100 + j, &tr);
        ig_cost_times_of(&tr, 1, &hw, 1, &t);
        want += t.step;
    }
    IG_ASSERT_NEAR(r.total_s, want, 1e-12);
    IG_ASSERT_NEAR(r.throughput, 8 * 11 / want, 1e-9);
    IG_ASSERT_NEAR(r.decode_step_s, r.decode_s / 10, 1e-15);
    ig_plan_free(p);
}

/* The decode-kernel rates of a profile: taken only for a model of the shape they were measured
 * at, said so in words; a speculating policy's query and an encoded KV format in a plan's traffic.
 */
static void test_kernel_rates(void) {
    static ig_hwprof p;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_hwprof_open("a6000-pcie3", &p, &err), IG_OK);
    ig_model_config c = {.n_head = 9, .n_kv_head = 3, .head_dim = 64};
    ig_cost_hw hw;
    char buf[512];
    CU_ASSERT_EQUAL(ig_cost_hw_from_profile_for(&p, &c, &hw), 0); /* the profile has none */
    CU_ASSERT(hw.attn_bw == 0 && hw.attn_enc_bw == 0 && hw.select_bw == 0);
    ig_cost_kernel_rates_desc(&p, &c, 0, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "none in the profile"));
    p.device.attn_gbps = 17;
    p.device.attn_int4_gbps = 15;
    p.device.attn_sparse_gbps = 9;
    p.device.select_gbps = 5;
    p.device.attn_dense_gbps = 23;
    p.device.attn_probs_gbps = 11;
    snprintf(p.device.kernel_shape, sizeof p.device.kernel_shape, "9,3,64");
    CU_ASSERT_EQUAL(ig_cost_hw_from_profile_for(&p, &c, &hw), 1);
    IG_ASSERT_NEAR(hw.attn_dense_bw, 23e9, 1e-3);
    IG_ASSERT_NEAR(hw.attn_probs_bw, 11e9, 1e-3);
    IG_ASSERT_NEAR(hw.attn_bw, 17e9, 1e-3);
    IG_ASSERT_NEAR(hw.attn_enc_bw, 15e9, 1e-3);
    IG_ASSERT_NEAR(hw.attn_sparse_bw, 9e9, 1e-3);
    IG_ASSERT_NEAR(hw.select_bw, 5e9, 1e-3);
    ig_cost_kernel_rates_desc(&p, &c, 1, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "measured at shape 9,3,64"));
    c.n_kv_head = 9; /* another shape: memory bandwidth, and the record says why */
    CU_ASSERT_EQUAL(ig_cost_hw_from_profile_for(&p, &c, &hw), 0);
    CU_ASSERT(hw.attn_bw == 0 && hw.select_bw == 0 && hw.dev_bw > 0);
    ig_cost_kernel_rates_desc(&p, &c, 0, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "measured at shape 9,3,64, this model's is 9,9,64"));
    CU_ASSERT_EQUAL(ig_cost_hw_from_profile_for(&p, NULL, &hw), 1); /* no model: as they are */
    ig_cost_kernel_shape(&c, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "9,9,64");

    /* a plan: speculation projects the next layer's full query (2 x batch x d_model x n_head x
     * head_dim FLOPs); 4-bit KV rows are marked encoded, their f32 equivalent counted */
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = one_layer_cfg();
    o.wl = (ig_workload){100, 11, 4, 2};
    o.pct = (ig_plan_percent){100, 0, 0, 100, 100, 0};
    o.partial_ratio = 0.25;
    o.kv_dtype = IG_PLAN_INT4;
    ig_machine m = {.device_bytes = (size_t)1 << 30, .n_numa = 1, .numa_bytes = {(size_t)1 << 30}};
    ig_plan *pl = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &pl, &err), IG_OK);
    ig_cost_traffic tr;
    ig_cost_layer_traffic(pl, 0, 1, 200, &tr);
    IG_ASSERT_NEAR(tr.spec_flops, 2.0 * 8 * 64 * (2 * 32), 1e-9);
    /* partial keys: 8 columns of 32 in f16, one KV head, every cached token of 8 sequences */
    IG_ASSERT_NEAR(tr.spec_dev_bytes, 8.0 * 200 * 8 * 2, 1e-9);
    CU_ASSERT_EQUAL(tr.attn_enc, 1);
    IG_ASSERT_NEAR(tr.attn_dev_f32, 8.0 * 200 * 2 * 32 * 4, 1e-6);
    CU_ASSERT(tr.attn_dev_bytes < tr.attn_dev_f32 / 4);
    CU_ASSERT_EQUAL(tr.attn_sparse, 0); /* every kept row read */
    CU_ASSERT_EQUAL(tr.attn_dense, 0);  /* codes: the decoding kernel */
    ig_plan_free(pl);
    o.kv_dtype = IG_PLAN_F32; /* f32, all kept, all read, but a speculating policy: index lists */
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &pl, &err), IG_OK);
    ig_cost_layer_traffic(pl, 0, 1, 200, &tr);
    CU_ASSERT(tr.attn_dense == 0 && tr.attn_sparse == 0 && tr.attn_enc == 0);
    ig_plan_free(pl);
    o.partial_ratio = 0; /* no policy at all: the dense kernel */
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &pl, &err), IG_OK);
    ig_cost_layer_traffic(pl, 0, 1, 200, &tr);
    CU_ASSERT(tr.attn_dense == 1 && tr.attn_sparse == 0 && tr.attn_enc == 0);
    ig_plan_free(pl);
    o.partial_ratio = 0.25;
    /* a fetch below what is kept (InfiniGen's selection among every row) is scattered; a budget
     * that keeps only what it reads (H2O) is not */
    o.kv_dtype = IG_PLAN_F32;
    o.fetch_fraction = 0.2;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &pl, &err), IG_OK);
    ig_cost_layer_traffic(pl, 0, 1, 200, &tr);
    CU_ASSERT_EQUAL(tr.attn_sparse, 1);
    CU_ASSERT_EQUAL(tr.attn_enc, 0);
    CU_ASSERT_EQUAL(tr.attn_dense, 0);
    ig_plan_free(pl);
    o.kv_keep_fraction = 0.2;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &pl, &err), IG_OK);
    ig_cost_layer_traffic(pl, 0, 1, 200, &tr);
    CU_ASSERT_EQUAL(tr.attn_sparse, 0);
    CU_ASSERT_EQUAL(tr.attn_dense, 0); /* rows evicted: H2O reads its kept ones by index */
    CU_ASSERT_EQUAL(tr.attn_probs, 0);
    ig_plan_free(pl);
    o.attn_probs = 1; /* and scores them by their attention */
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &pl, &err), IG_OK);
    ig_cost_layer_traffic(pl, 0, 1, 200, &tr);
    CU_ASSERT_EQUAL(tr.attn_probs, 1);
    ig_plan_free(pl);
}

/* The decode matmul rates of a profile measured at one model's own shapes: taken only for that
 * model at that GPU batch with f32 weights, said so in words; a layer's decode matmuls at the layer
 * rate and the logits at theirs, prefill at the prefill rate (hand calculations). */
static void test_matmul_rates(void) {
    static ig_hwprof p;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_hwprof_open("a6000-pcie3", &p, &err), IG_OK);
    ig_model_config c = shape_cfg("smollm2-135m");
    char buf[512];
    ig_cost_matmul_shape(&c, 8, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "576,576,192,1536,3,49152,30,8");
    ig_model_config opt = shape_cfg("opt-6.7b");
    ig_cost_matmul_shape(&opt, 1, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "4096,4096,4096,16384,2,50272,32,1");
    ig_cost_hw hw;
    ig_cost_hw_from_profile(&p, &hw);
    CU_ASSERT_EQUAL(ig_cost_hw_matmul_for(&p, &c, 8, 1, &hw, buf, sizeof buf), 0);
    CU_ASSERT(hw.gemm_flops_layer == 0 && hw.gemm_flops_logits == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "none in the profile"));
    p.device.gemm_tflops_layer = 0.08;
    p.device.gemm_tflops_logits = 0.05;
    snprintf(p.device.matmul_shape, sizeof p.device.matmul_shape, "576,576,192,1536,3,49152,30,8");
    CU_ASSERT_EQUAL(ig_cost_hw_matmul_for(&p, &c, 8, 1, &hw, buf, sizeof buf), 1);
    IG_ASSERT_NEAR(hw.gemm_flops_layer, 8e10, 1e-3);
    IG_ASSERT_NEAR(hw.gemm_flops_logits, 5e10, 1e-3);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "layer 80 GFLOPS, logits 50 GFLOPS"));
    ig_cost_hw_from_profile(&p, &hw); /* another batch, f16 weights, another model: not taken */
    CU_ASSERT_EQUAL(ig_cost_hw_matmul_for(&p, &c, 4, 1, &hw, buf, sizeof buf), 0);
    CU_ASSERT(hw.gemm_flops_layer == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "this point's is 576,576,192,1536,3,49152,30,4"));
    CU_ASSERT_EQUAL(ig_cost_hw_matmul_for(&p, &c, 8, 0, &hw, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "f32 weights"));
    CU_ASSERT_EQUAL(ig_cost_hw_matmul_for(&p, &opt, 8, 1, &hw, NULL, 0), 0);
    CU_ASSERT(hw.gemm_flops_layer == 0 && hw.gemm_flops_logits == 0);

    /* times: 1 GFLOP of matmuls reading 1 MB of weights, nothing else */
    memset(&hw, 0, sizeof hw);
    hw.gemm_flops = 1e12;
    hw.gemm_flops_decode = 1e11;
    hw.dev_bw = 1e12;
    hw.host_bw = 1e11;
    ig_cost_traffic tr;
    memset(&tr, 0, sizeof tr);
    tr.gemm_flops = 1e9;
    tr.gemm_bytes = 1e6;
    ig_cost_times t;
    ig_cost_times_of(&tr, 1, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e-2, 1e-12); /* not measured: the decode rate */
    hw.gemm_flops_layer = 5e10;
    hw.gemm_flops_logits = 2.5e10;
    ig_cost_times_of(&tr, 1, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 2e-2, 1e-12); /* a layer at the layer rate */
    ig_cost_times_of(&tr, 0, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 1e-3, 1e-12); /* prefill: the prefill rate */
    tr.outer = 1;
    ig_cost_times_of(&tr, 1, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 4e-2, 1e-12); /* the logits at theirs */
    tr.gemm_bytes = 1e11; /* a roofline still: 100 GB at 1 TB/s outlasts the FLOPs */
    ig_cost_times_of(&tr, 1, &hw, 1, &t);
    IG_ASSERT_NEAR(t.t[IG_COST_COMPUTE], 0.1, 1e-12);
    /* a plan's outer traffic is marked, a layer's is not */
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = one_layer_cfg();
    o.wl = (ig_workload){100, 11, 4, 2};
    ig_machine m = {.device_bytes = (size_t)1 << 30, .n_numa = 1, .numa_bytes = {(size_t)1 << 30}};
    ig_plan *pl = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &pl, &err), IG_OK);
    ig_cost_layer_traffic(pl, -1, 1, 200, &tr);
    CU_ASSERT_EQUAL(tr.outer, 1);
    ig_cost_layer_traffic(pl, 0, 1, 200, &tr);
    CU_ASSERT_EQUAL(tr.outer, 0);
    ig_plan_free(pl);
}

/* OPT-6.7B, a 512 + 32 token workload at batch 1, on the a6000-pcie3 profile with its GPU memory
 * cut to gib GiB (a small GPU, so that placements matter): options, machine and rates. */
static void opt67_small_gpu(double gib, ig_plan_opts *o, ig_machine *m, ig_cost_hw *rates) {
    ig_plan_opts_init(o);
    o->model = shape_cfg("opt-6.7b");
    o->wl = (ig_workload){512, 32, 1, 1};
    static ig_hwprof hw;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_hwprof_open("a6000-pcie3", &hw, &err), IG_OK);
    hw.device.memory_gib = gib;
    ig_hwprof_to_machine(&hw, m);
    ig_cost_hw_from_profile(&hw, rates);
}

static void test_search(void) {
    ig_plan_opts o;
    ig_machine m;
    ig_cost_hw rates;
    ig_error err;
    opt67_small_gpu(16, &o, &m, &rates);
    ig_plan_search_opts so;
    ig_plan_search_opts_init(&so);
    so.step_percent = 25;
    so.max_gpu_batch = 16;
    so.max_num_gpu_batches = 4;
    so.top_k = 4;
    ig_plan_candidate top[IG_PLAN_SEARCH_TOP_MAX];
    int n = 0;
    long feas = 0, tried = 0;
    CU_ASSERT_EQUAL_FATAL(ig_plan_search(&o, &m, &rates, &so, top, &n, &feas, &tried, &err), IG_OK);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_EQUAL(tried, 5 * 3 * 15 * 15 * 2);
    CU_ASSERT(feas > 0 && feas < tried);
    for (int i = 1; i < n; i++) CU_ASSERT(top[i - 1].cost.throughput >= top[i].cost.throughput);
    /* the winner is feasible and at least as fast as hand-picked plans */
    ig_plan_opts best = o;
    best.wl = top[0].wl;
    best.pct = top[0].pct;
    ig_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&best, &m, &p, &err), IG_OK);
    ig_cost_result r;
    CU_ASSERT_EQUAL(ig_cost_estimate(p, &rates, &r, &err), IG_OK);
    IG_ASSERT_NEAR(r.throughput, top[0].cost.throughput, 1e-9 * r.throughput);
    ig_plan_free(p);
    struct {
        ig_workload wl;
        ig_plan_percent pct;
    } hand[] = {
        {{512, 32, 1, 1}, {75, 25, 100, 0, 100, 0}},
        {{512, 32, 8, 1}, {50, 50, 0, 100, 100, 0}},
        {{512, 32, 16, 4}, {25, 75, 0, 100, 100, 0}},
        {{512, 32, 4, 2}, {75, 25, 25, 75, 100, 0}},
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof hand / sizeof hand[0]; i++) {
        ig_plan_opts h = o;
        h.wl = hand[i].wl;
        h.pct = hand[i].pct;
        if (ig_plan_create(&h, &m, &p, &err) != IG_OK) continue;
        CU_ASSERT_EQUAL(ig_cost_estimate(p, &rates, &r, &err), IG_OK);
        CU_ASSERT(top[0].cost.throughput >= r.throughput);
        checked++;
        ig_plan_free(p);
    }
    CU_ASSERT(checked >= 3);
    /* deterministic */
    ig_plan_candidate again[IG_PLAN_SEARCH_TOP_MAX];
    int n2 = 0;
    CU_ASSERT_EQUAL(ig_plan_search(&o, &m, &rates, &so, again, &n2, &feas, &tried, &err), IG_OK);
    CU_ASSERT_EQUAL(n2, n);
    CU_ASSERT(!memcmp(&again[0].wl, &top[0].wl, sizeof top[0].wl));
    CU_ASSERT(!memcmp(&again[0].pct, &top[0].pct, sizeof top[0].pct));
    so.step_percent = 30;
    CU_ASSERT_EQUAL(ig_plan_search(&o, &m, &rates, &so, again, &n2, &feas, &tried, &err),
                    IG_ERR_INVALID_ARG);
}

/* Compressed weights are planned, placed and costed by their compressed bytes: OPT-6.7B does not
 * fit a 12 GiB device in f16 but does with q4_1 (20 bytes per 32 values), and with every weight in
 * host memory a decode step moves the compressed bytes over the link. */
static void test_compressed_weights(void) {
    ig_plan_opts o;
    ig_machine m;
    ig_cost_hw rates;
    ig_error err;
    opt67_small_gpu(12, &o, &m, &rates);
    ig_plan *p = NULL;
    CU_ASSERT_EQUAL(ig_plan_create(&o, &m, &p, &err), IG_ERR_CAPACITY);
    CU_ASSERT(!strncmp(err.msg, "device: needs ", 14));
    o.weight_dtype = IG_PLAN_Q4_1;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    size_t d = (size_t)o.model.d_model, f = (size_t)o.model.d_ffn;
    /* the matrix in blocks of 32 (20 bytes each) and OPT's bias in f16 */
    CU_ASSERT_EQUAL(ig_plan_tensor_bytes(p, 0, IG_WT_Q), d * (d / 32) * 20 + 2 * d);
    CU_ASSERT_EQUAL(ig_plan_tensor_bytes(p, 0, IG_WT_DOWN), d * (f / 32) * 20 + 2 * d);
    double q41 = (double)ig_plan_get_usage(p)->device.weights;
    ig_plan_free(p);
    /* every weight in host memory: the tensors and the link traffic shrink with the format */
    struct {
        ig_plan_dtype t;
        double per_value;
    } fmt[] = {{IG_PLAN_F16, 2},
               {IG_PLAN_Q4_0, 18.0 / 32},
               {IG_PLAN_Q8_0, 34.0 / 32},
               {IG_PLAN_INT4, 0.5 + 4.0 / 64},
               {IG_PLAN_INT8, 1 + 4.0 / 64}};
    o.pct = (ig_plan_percent){0, 100, 100, 0, 100, 0};
    double h2d_f16 = 0;
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        o.weight_dtype = fmt[i].t;
        CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
        /* matrices scale with the format; vectors (norms, biases) stay f16 */
        CU_ASSERT_EQUAL(ig_plan_tensor_bytes(p, 0, IG_WT_Q),
                        (size_t)((double)(d * d) * fmt[i].per_value + 0.5) + 2 * d);
        ig_cost_result r;
        CU_ASSERT_EQUAL(ig_cost_estimate(p, &rates, &r, &err), IG_OK);
        /* a decode step streams each layer's weights from the host, at their stored size (KV and
         * activations stay on the device) */
        double layer = (double)ig_plan_layer(p, 0)->w_total;
        IG_ASSERT_NEAR(r.decode_traffic.h2d_bytes, layer, 0.01 * layer);
        if (fmt[i].t == IG_PLAN_F16)
            h2d_f16 = r.decode_traffic.h2d_bytes;
        else
            CU_ASSERT(r.decode_traffic.h2d_bytes < h2d_f16 * fmt[i].per_value / 2 * 1.05);
        ig_plan_free(p);
    }
    CU_ASSERT(q41 < 12.0 * (1 << 30) * 0.5);
}

/* ---------------- CLI ---------------- */

typedef ig_test_run run_out;

static void run(run_out *r, const char *args) {
    ig_test_igen(r, NULL, args);
}

static void expect_cli_error(run_out *r, const char *args, const char *needle) {
    run(r, args);
    if (r->status != 2 || !strstr(r->err, needle))
        fprintf(stderr, "\n    igen %s -> %d: %s\n", args, r->status, r->err);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, needle));
}

static void test_cli(void) {
    run_out *r = malloc(sizeof *r);
    run(r, "plan --help");
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "usage: igen plan"));
    run(r, "profile-hw --help");
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "usage: igen profile-hw"));
    expect_cli_error(r, "plan --shape opt-13b --hardware a6000-pcie3 --percent 100,10,0,100,100,0",
                     "100 + 10 = 110 is more than 100");
    expect_cli_error(r, "plan --shape opt-13b --hardware a6000-pcie3 --percent 100,0,100",
                     "--percent: '100,0,100' is not six");
    expect_cli_error(r, "plan --shape opt-13b --hardware nosuch", "no hardware profile 'nosuch'");
    expect_cli_error(r, "plan --shape nosuch --hardware a6000-pcie3", "no model shape 'nosuch'");
    expect_cli_error(r, "plan --shape opt-13b", "--hardware NAME|FILE is required");
    expect_cli_error(r, "plan --shape opt-13b --hardware h200 --numa 4",
                     "NUMA node 4 is not in the machine (nodes: 0, 1)");
    expect_cli_error(r, "plan --shape opt-30b --hardware a6000-pcie3 --gpu-batch 64",
                     "device: needs");
    expect_cli_error(r, "plan --shape opt-13b --hardware a6000-pcie3 --policy nosuch",
                     "unknown policy 'nosuch' (policies: ");
    expect_cli_error(r, "plan --shape opt-13b --hardware a6000-pcie3 --policy h2o --set bogus=1",
                     "bogus");
    /* a pool the 2 dense layers of 40 alone would overfill: refused as the policy's init does */
    expect_cli_error(r,
                     "plan --shape opt-13b --hardware a6000-pcie3 --policy infinigen --set "
                     "pool_capacity=0.04",
                     "pool capacity 0.04 cannot hold the 2 dense layers of 40");
    char args[8192];
    snprintf(args, sizeof args, "plan --shape opt-13b --hardware '%s'", fx("unknown_key.yaml"));
    expect_cli_error(r, args, "unknown_key.yaml:11:3: link.d2h_gbs: unknown key");
    /* --json parses and carries the plan and the cost */
    run(r, "plan --shape opt-13b --hardware a6000-pcie3 --prompt-len 1920 --gen-len 128 "
           "--gpu-batch 20 --percent 100,0,0,100,100,0 --policy infinigen --json");
    CU_ASSERT_EQUAL(r->status, 0);
    json_object *j = json_tokener_parse(r->out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_object *cost, *thr, *tiers, *kv, *host;
    CU_ASSERT(json_object_object_get_ex(j, "cost", &cost));
    CU_ASSERT(json_object_object_get_ex(cost, "decode_throughput_tok_s", &thr));
    CU_ASSERT(json_object_get_double(thr) > 0);
    CU_ASSERT(json_object_object_get_ex(j, "kv_sequences", &kv));
    CU_ASSERT(json_object_object_get_ex(kv, "host", &host));
    CU_ASSERT_EQUAL(json_object_get_int(host), 20);
    CU_ASSERT(json_object_object_get_ex(j, "tiers", &tiers));
    json_object_put(j);
    /* int4's row format comes from its own parameters (its cost_terms hook), not from its name:
     * OPT-13B's head of 128 values is 256 bytes in f16; in groups of 64 with an f16 scale and min
     * per group it is 40 bytes at 2 bits, 72 at 4, 136 at 8 */
    static const struct {
        const char *args, *name;
        double row;
    } fmts[] = {{"", "f16", 256},
                {"--policy int4 --set bits=2", "2-bit, groups of 64", 40},
                {"--policy int4", "int4", 72},
                {"--policy int4 --set bits=8", "int8", 136},
                {"--policy int4 --set bits=4 --set group_size=32", "4-bit, groups of 32", 80}};
    double f16_seq = 0;
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        snprintf(args, sizeof args, "plan --shape opt-13b --hardware a6000-pcie3 %s --json",
                 fmts[i].args);
        run(r, args);
        CU_ASSERT_EQUAL(r->status, 0);
        json_object *jf = json_tokener_parse(r->out), *kd = NULL, *ks = NULL, *bps = NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(jf);
        CU_ASSERT_FATAL(json_object_object_get_ex(jf, "kv_dtype", &kd) &&
                        json_object_object_get_ex(jf, "kv_sequences", &ks) &&
                        json_object_object_get_ex(ks, "bytes_per_sequence", &bps));
        CU_ASSERT_STRING_EQUAL(json_object_get_string(kd), fmts[i].name);
        double seq = json_object_get_double(bps);
        if (i == 0) f16_seq = seq;
        CU_ASSERT(f16_seq > 0 && seq * 256 == f16_seq * fmts[i].row);
        json_object_put(jf);
    }
    /* a fetch profile made for another policy is refused, naming both */
    {
        char src[4096], tmp[] = "/tmp/igen-test-fetchprof-XXXXXX";
        snprintf(src, sizeof src, "%s/configs/policies/infinigen-smollm2-135m.yaml", IG_SOURCE_DIR);
        FILE *in = fopen(src, "r");
        int fd = mkstemp(tmp);
        CU_ASSERT_FATAL(in != NULL && fd >= 0);
        FILE *out = fdopen(fd, "w");
        CU_ASSERT_FATAL(out != NULL);
        char line[8192];
        while (fgets(line, sizeof line, in))
            fputs(strncmp(line, "policy:", 7) ? line : "policy: \"h2o\"\n", out);
        fclose(in);
        fclose(out);
        snprintf(args, sizeof args,
                 "plan --shape opt-13b --hardware a6000-pcie3 --policy infinigen --set "
                 "fetch_profile=%s",
                 tmp);
        expect_cli_error(r, args, "a fetch profile of policy 'h2o', not of 'infinigen'");
        unlink(tmp);
    }
    expect_cli_error(r, "plan --shape opt-13b --hardware a6000-pcie3 --policy int4 --set bits=3",
                     "policy int4: bits=3 (expected 8, 4 or 2)");
    expect_cli_error(
        r, "plan --shape opt-13b --hardware a6000-pcie3 --policy int4 --set group_size=48",
        "group_size=48 does not divide head_dim 128");
    /* a topology decides the host nodes: the fixture's GPU 1 hangs off node 1, so with NUMA
     * "local" the host KV lands on node 1 and nothing on node 0 */
    snprintf(args, sizeof args,
             "plan --shape opt-13b --hardware a6000-pcie3 --xml '%s/topo/two_socket_two_gpu.xml' "
             "--gpu 1 --percent 100,0,0,100,100,0 --prompt-len 1920 --gen-len 128 --gpu-batch 4 "
             "--num-gpu-batches 5 --json",
             ig_test_fixture(""));
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    j = json_tokener_parse(r->out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_object *nodes = NULL;
    CU_ASSERT_FATAL(json_object_object_get_ex(j, "tiers", &tiers) &&
                    json_object_object_get_ex(tiers, "host_nodes", &nodes) &&
                    json_object_array_length(nodes) == 2);
    for (int i = 0; i < 2; i++) {
        json_object *n = json_object_array_get_idx(nodes, (size_t)i), *kvb = NULL, *numa = NULL;
        CU_ASSERT(json_object_object_get_ex(n, "kv", &kvb) &&
                  json_object_object_get_ex(n, "numa", &numa));
        CU_ASSERT_EQUAL(json_object_get_int(numa), i);
        CU_ASSERT(i == 1 ? json_object_get_int64(kvb) > 0 : json_object_get_int64(kvb) == 0);
    }
    json_object_put(j);
    expect_cli_error(r, "plan --shape opt-13b --hardware a6000-pcie3 --xml /nonexistent.xml",
                     "/nonexistent.xml");
    /* search with --json; human output of a plan */
    run(r, "plan --shape smollm2-135m --hardware a6000-pcie3 --search --grid-step 50 "
           "--max-gpu-batch 4 --max-num-gpu-batches 2 --json");
    CU_ASSERT_EQUAL(r->status, 0);
    j = json_tokener_parse(r->out);
    json_object *s = NULL, *top = NULL;
    CU_ASSERT(j && json_object_object_get_ex(j, "search", &s) &&
              json_object_object_get_ex(s, "top", &top) && json_object_array_length(top) >= 1);
    if (j) json_object_put(j);
    run(r, "plan --shape opt-6.7b --hardware h200 --numa interleave --percent 50,50,0,100,100,0");
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "host node 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "throughput"));
    /* profile-hw writes a profile that loads */
    char out[4200];
    snprintf(out, sizeof out, "%s/hw.yaml", ig_test_tmpdir());
    snprintf(args, sizeof args, "profile-hw --quick --out '%s' --disk-dir '%s'", out,
             ig_test_tmpdir());
    run(r, args);
    if (r->status) fprintf(stderr, "\n    profile-hw: %s\n", r->err);
    CU_ASSERT_EQUAL(r->status, 0);
    static ig_hwprof hw;
    ig_error err;
    CU_ASSERT_EQUAL(ig_hwprof_load(out, &hw, &err), IG_OK);
    CU_ASSERT(hw.device.gemm_tflops > 0 && hw.link.h2d_gbps > 0 && hw.has_disk);
    CU_ASSERT(hw.disk.read_gbps > 0 && hw.host.memory_gib > 0);
    CU_ASSERT(hw.device.attn_gbps == 0 && hw.device.kernel_shape[0] == 0); /* not asked for */
    /* with a kernel shape: the decode kernels' rates, at that shape */
    snprintf(args, sizeof args,
             "profile-hw --quick --kernel-shape 9,3,64 --out '%s' --disk-dir '%s'", out,
             ig_test_tmpdir());
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_EQUAL(ig_hwprof_load(out, &hw, &err), IG_OK);
    CU_ASSERT(hw.device.attn_gbps > 0 && hw.device.attn_int4_gbps > 0 &&
              hw.device.attn_sparse_gbps > 0 && hw.device.select_gbps > 0 &&
              hw.device.attn_dense_gbps > 0);
    CU_ASSERT_STRING_EQUAL(hw.device.kernel_shape, "9,3,64");
    CU_ASSERT(hw.device.gemm_tflops_layer == 0 && hw.device.matmul_shape[0] == 0);
    /* with a matmul shape: the model's decode matmuls at its own shapes */
    snprintf(
        args, sizeof args,
        "profile-hw --quick --kernel-shape 9,3,64 --matmul-shape 576,576,192,1536,3,49152,30,2 "
        "--out '%s' --disk-dir '%s'",
        out, ig_test_tmpdir());
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_EQUAL(ig_hwprof_load(out, &hw, &err), IG_OK);
    CU_ASSERT(hw.device.gemm_tflops_layer > 0 && hw.device.gemm_tflops_logits > 0);
    CU_ASSERT_STRING_EQUAL(hw.device.matmul_shape, "576,576,192,1536,3,49152,30,2");
    CU_ASSERT(hw.device.attn_gbps > 0);
    /* igen plan of that shape uses them and says so */
    snprintf(args, sizeof args,
             "plan --shape smollm2-135m --weight-dtype f32 --hardware '%s' --gpu-batch 2 --json",
             out);
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "\"kernel_rates\":\"measured at shape 9,3,64"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "\"matmul_rates\":\"measured at the model's shapes"));
    /* f16 weights, or another GPU batch: not taken, and the record says why */
    const char *other[2][2] = {
        {"f16 --gpu-batch 2", "\"matmul_rates\":\"none: the profile's model-shape"},
        {"f32 --gpu-batch 4", "this point's is 576,576,192,1536,3,49152,30,4"}};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "plan --shape smollm2-135m --hardware '%s' --json --weight-dtype %s", out,
                 other[i][0]);
        run(r, args);
        CU_ASSERT_EQUAL(r->status, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r->out, other[i][1]));
    }
    snprintf(args, sizeof args, "plan --shape opt-6.7b --hardware '%s' --gpu-batch 2 --json", out);
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "this model's is 32,32,128"));
    const char *bad[] = {"9,3", "9,4,64", "9,3,64x", "0,1,64", "9,3,0", "340,20,64"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "profile-hw --quick --kernel-shape %s", bad[i]);
        expect_cli_error(r, args, "--kernel-shape");
    }
    const char *badm[] = {"576,576,192,1536,3,49152,8",    "576,576,192,1536,4,49152,30,8",
                          "576,576,192,1536,3,49152,30,0", "576,576,192,1536,3,49152,30,8x",
                          "0,576,192,1536,3,49152,30,8",   "65536,576,192,1536,3,1048576,30,8"};
    for (size_t i = 0; i < sizeof badm / sizeof badm[0]; i++) {
        snprintf(args, sizeof args, "profile-hw --quick --matmul-shape %s", badm[i]);
        expect_cli_error(r, args, "--matmul-shape");
    }
    /* the measured profile plans the default model's shape */
    snprintf(args, sizeof args, "plan --shape smollm2-135m --hardware '%s' --gpu-batch 2", out);
    run(r, args);
    CU_ASSERT_EQUAL(r->status, 0);
    expect_cli_error(r, "profile-hw --quick --disk-dir /nonexistent/dir", "/nonexistent/dir");
    free(r);
}

/* Fetch profiles: the interpolation the cost model uses, a file written and read back, malformed
 * files refused, and a profile changing what a plan's decode step moves. */
static void test_fetch_profile(void) {
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.fetch_fraction = 0.2;
    o.kv_keep_fraction = 1;
    IG_ASSERT_NEAR(ig_cost_fetch_fraction(&o, 1234), 0.2, 0); /* no profile: the cap */
    o.fetch_profile_n = 2;
    o.fetch_profile_ctx[0] = 100;
    o.fetch_profile_frac[0] = 0.5;
    o.fetch_profile_ctx[1] = 1000;
    o.fetch_profile_frac[1] = 0.1;
    IG_ASSERT_NEAR(ig_cost_fetch_fraction(&o, 50), 0.5, 1e-12);
    IG_ASSERT_NEAR(ig_cost_fetch_fraction(&o, 100), 0.5, 1e-12);
    IG_ASSERT_NEAR(ig_cost_fetch_fraction(&o, 550), 0.3, 1e-12);
    IG_ASSERT_NEAR(ig_cost_fetch_fraction(&o, 4000), 0.1, 1e-12);
    o.kv_keep_fraction = 0.25; /* never more than what is kept */
    IG_ASSERT_NEAR(ig_cost_fetch_fraction(&o, 100), 0.25, 1e-12);

    ig_fetch_profile fp, back;
    memset(&fp, 0, sizeof fp);
    snprintf(fp.policy, sizeof fp.policy, "infinigen");
    snprintf(fp.params, sizeof fp.params, "alpha=5");
    snprintf(fp.model, sizeof fp.model, "unit \"model\"");
    snprintf(fp.command, sizeof fp.command, "igen ppl --fetch-profile x");
    fp.n = 3;
    for (int i = 0; i < 3; i++)
        fp.pts[i] = (ig_fetch_profile_point){128.0 * (i + 1), 0.3 - 0.1 * i, 10};
    char path[4200];
    snprintf(path, sizeof path, "%s/fetch.yaml", ig_test_tmpdir());
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_fetch_profile_save(&fp, path, &err), IG_OK);
    CU_ASSERT_EQUAL_FATAL(ig_fetch_profile_load(path, &back, &err), IG_OK);
    CU_ASSERT_EQUAL(back.n, 3);
    CU_ASSERT_STRING_EQUAL(back.model, "unit \"model\"");
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(back.pts[i].ctx == fp.pts[i].ctx && back.pts[i].fraction == fp.pts[i].fraction);
    }
    IG_ASSERT_NEAR(ig_fetch_profile_at(&back, 192), 0.25, 1e-12);
    static const char *const bad[][2] = {
        {"policy: x\nfetch:\n  - {ctx: 200, fraction: 0.2}\n  - {ctx: 100, fraction: 0.1}\n",
         "must ascend"},
        {"policy: x\nfetch:\n  - {ctx: 200, fraction: 1.5}\n", "fetch[0].fraction"},
        {"policy: x\nfetch: []\n", "fetch"},
        {"fetch:\n  - {ctx: 200, fraction: 0.5}\n", "policy"},
        {"policy: x\nfetch:\n  - {ctx: 200, fractoin: 0.5}\n", "did you mean"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        FILE *f = fopen(path, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs(bad[k][0], f);
        fclose(f);
        ig_status st = ig_fetch_profile_load(path, &back, &err);
        CU_ASSERT_NOT_EQUAL(st, IG_OK);
        CU_ASSERT(st != IG_OK && strstr(err.msg, bad[k][1]) && strstr(err.msg, "fetch.yaml"));
        if (st == IG_OK || !strstr(err.msg, bad[k][1]))
            fprintf(stderr, "\n    profile %zu: '%s'\n", k, st == IG_OK ? "(loaded)" : err.msg);
    }
    remove(path);
}

/* A policy's dense layers (InfiniGen's, Quest's dense_layers): every kept row there, the cap per
 * later layer, and a measured all-layer fraction split so that the layers add up to it; the
 * estimate prices the dense layers as their own group (a step = D dense layers + L - D others). */
static void test_dense_layers(void) {
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = one_layer_cfg();
    o.model.n_layer = 10;
    o.fetch_fraction = 0.2;
    o.kv_keep_fraction = 1;
    o.dense_layers = 2;
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 0, 500), 1, 0);
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 1, 500), 1, 0);
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 2, 500), 0.2, 0); /* the cap, per layer */
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, -1, 500), 0.2, 0);
    o.fetch_profile_n = 2; /* all layers together read 0.5 at 100 tokens, 0.1 at 1000 */
    o.fetch_profile_ctx[0] = 100;
    o.fetch_profile_frac[0] = 0.5;
    o.fetch_profile_ctx[1] = 1000;
    o.fetch_profile_frac[1] = 0.1;
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 9, 100), (0.5 * 10 - 2) / 8, 1e-12);
    double sum = 0;
    for (int l = 0; l < 10; l++) sum += ig_cost_layer_fetch_fraction(&o, l, 100);
    IG_ASSERT_NEAR(sum / 10, 0.5, 1e-12);
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 5, 1000), 0, 0); /* 0.1 < 2 dense of 10 */
    o.dense_layers = 0;
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 0, 100), 0.5, 1e-12);
    /* InfiniGen's pool at 0.6 of the cache, 2 dense layers of 10 in full: the other 8 keep
     * (0.6 * 10 - 2) / 8 = 0.5 each, which caps their fetch; the dense layers read every row */
    o.dense_layers = 2;
    o.kv_keep_fraction = 0.6;
    o.fetch_profile_n = 0;
    o.fetch_fraction = 0.2;
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 1, 500), 1, 0);
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 2, 500), 0.2, 0);
    o.fetch_fraction = 0.6;
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 7, 500), 0.5, 1e-12);
    o.fetch_profile_n = 2; /* all layers 0.5 at 100: (5 - 2) / 8 = 0.375, under 0.5 */
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 9, 100), 0.375, 1e-12);
    o.kv_keep_fraction = 0.1; /* less than the dense layers hold: nothing left, never below 0 */
    IG_ASSERT_NEAR(ig_cost_layer_fetch_fraction(&o, 9, 100), 0, 0);
    o.kv_keep_fraction = 1;
    o.fetch_fraction = 0.2;
    o.dense_layers = 0;

    /* through a plan: KV behind the link, 4 layers, the first dense */
    ig_cost_hw hw = {.gemm_flops = 1e12,
                     .gemm_flops_decode = 0.5e12,
                     .dev_bw = 100e9,
                     .host_bw = 10e9,
                     .h2d_bw = 1e9,
                     .d2h_bw = 1e9};
    o.model.n_layer = 4;
    o.fetch_profile_n = 0;
    o.dense_layers = 1;
    o.wl = (ig_workload){100, 11, 4, 1};
    o.pct = (ig_plan_percent){100, 0, 0, 100, 100, 0};
    ig_machine m = {.device_bytes = (size_t)1 << 30, .n_numa = 1, .numa_bytes = {(size_t)1 << 30}};
    ig_plan *p = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
    ig_cost_traffic t0, t2;
    ig_cost_layer_traffic(p, 0, 1, 150, &t0);
    ig_cost_layer_traffic(p, 2, 1, 150, &t2);
    IG_ASSERT_NEAR(t0.h2d_bytes, 5 * t2.h2d_bytes, 1e-6 * t0.h2d_bytes); /* 1 against 0.2 */
    CU_ASSERT(t0.attn_sparse == 0 && t2.attn_sparse == 1 && t0.attn_dense == 0);
    ig_cost_result r;
    CU_ASSERT_EQUAL_FATAL(ig_cost_estimate(p, &hw, &r, &err), IG_OK);
    double want = 0; /* decode: steps j = 1 .. gen_len - 1 at context P + j, layer by layer */
    ig_cost_times tm;
    ig_cost_traffic tr;
    for (int j = 1; j < o.wl.gen_len; j++)
        for (int l = 0; l < 4; l++) {
            ig_cost_layer_traffic(p, l, 1, o.wl.prompt_len + j, &tr);
            ig_cost_times_of(&tr, 1, &hw, o.overlap, &tm);
            want += tm.step;
        }
    ig_cost_layer_traffic(p, -1, 1, o.wl.prompt_len, &tr);
    ig_cost_times_of(&tr, 1, &hw, o.overlap, &tm);
    want += (o.wl.gen_len - 1) * tm.step;
    IG_ASSERT_NEAR(r.decode_s, want, 1e-9 * want);
    /* the last step's transfers over all layers; the reported layer is the last (not dense) one */
    double h2d = 0;
    for (int l = 0; l < 4; l++) {
        ig_cost_layer_traffic(p, l, 1, o.wl.prompt_len + o.wl.gen_len - 1, &tr);
        h2d += tr.h2d_bytes;
    }
    IG_ASSERT_NEAR(r.decode_step_h2d_bytes, h2d, 1e-9 * h2d);
    CU_ASSERT(r.decode_step_h2d_bytes > 4 * r.decode_traffic.h2d_bytes); /* the dense layer's */
    ig_cost_layer_traffic(p, 3, 1, o.wl.prompt_len + o.wl.gen_len - 1, &tr);
    IG_ASSERT_NEAR(r.decode_traffic.h2d_bytes, tr.h2d_bytes, 0);
    ig_plan_free(p);
}

/* The outer tensors stay on the device at every weight placement (the engines never stream
 * them): counted in device memory, never in a step's transfers. */
static void test_outer_resident(void) {
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = one_layer_cfg();
    o.wl = (ig_workload){100, 11, 4, 1};
    ig_machine m = {.device_bytes = (size_t)1 << 30,
                    .n_numa = 1,
                    .numa_bytes = {(size_t)1 << 30},
                    .disk_bytes = (size_t)1 << 30};
    const ig_plan_percent pcts[] = {{0, 100, 100, 0, 100, 0},
                                    {0, 0, 100, 0, 100, 0},
                                    {50, 50, 100, 0, 100, 0},
                                    {100, 0, 100, 0, 100, 0}};
    for (size_t i = 0; i < sizeof pcts / sizeof pcts[0]; i++) {
        o.pct = pcts[i];
        ig_plan *p = NULL;
        ig_error err;
        CU_ASSERT_EQUAL_FATAL(ig_plan_create(&o, &m, &p, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_plan_weights(p)->outer.kind, IG_TIER_DEVICE);
        CU_ASSERT(ig_plan_get_usage(p)->device.weights >= ig_plan_outer_bytes(p));
        ig_cost_traffic tr;
        ig_cost_layer_traffic(p, -1, 1, 100, &tr);
        CU_ASSERT(tr.h2d_bytes == 0 && tr.disk_read_bytes == 0 && tr.outer == 1);
        ig_plan_free(p);
    }
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("plan", NULL, NULL);
    CU_add_test(s, "profile_roundtrip", test_profile_roundtrip);
    CU_add_test(s, "profile_errors", test_profile_errors);
    CU_add_test(s, "model_shapes", test_model_shapes);
    CU_add_test(s, "granularity", test_granularity);
    CU_add_test(s, "capacity_property", test_capacity_property);
    CU_add_test(s, "plan_errors", test_plan_errors);
    CU_add_test(s, "numa", test_numa);
    CU_add_test(s, "cost_by_hand", test_cost_by_hand);
    CU_add_test(s, "kernel_rates", test_kernel_rates);
    CU_add_test(s, "matmul_rates", test_matmul_rates);
    CU_add_test(s, "fetch_profile", test_fetch_profile);
    CU_add_test(s, "dense_layers", test_dense_layers);
    CU_add_test(s, "outer_resident", test_outer_resident);
    CU_add_test(s, "search", test_search);
    CU_add_test(s, "compressed_weights", test_compressed_weights);
    CU_add_test(s, "cli", test_cli);
}
