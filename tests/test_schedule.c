/* The block schedule on the CPU backend: FlexGen's zig-zag over layers x GPU batches, activations
 * homed in host memory, and KV homed on disk. Whatever the schedule or placement, every sequence's
 * rows go through the same kernels, so the logits must not change; the bytes each placement moves
 * are counted exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/log.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "offload/disk.h"
#include "offload/link.h"
#include "policies/policy.h"
#include "tests/test_util.h"

static const char *g_fixtures[2] = {"tiny_llama", "tiny_opt"};
static ig_model *g_models[2];

static int suite_init(void) {
    for (int i = 0; i < 2; i++) {
        ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_AUTO};
        ig_error err;
        if (ig_model_load(ig_test_fixture(g_fixtures[i]), &o, &g_models[i], &err) != IG_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    return 0;
}

static int suite_clean(void) {
    for (int i = 0; i < 2; i++) ig_model_free(g_models[i]);
    return 0;
}

/* Four sequences with prompts of different lengths, then STEPS decode steps of all four. */
enum { NSEQ = 4, STEPS = 6, PROMPT = 13 };
static const int g_prompt[NSEQ] = {PROMPT, PROMPT - 4, PROMPT - 7, PROMPT - 2};

typedef struct run_cfg {
    const char *policy; /* NULL: the engine's plain cache */
    const char *const *sets;
    int n_sets;
    int gpu_batch, act_host, kv_device_slots;
    ig_kv_access access;
    ig_disk *kv_disk;
    int kv_disk_slots;
    int act_disk;
    int joint_prefill; /* all prompts in one call (else one call per prompt) */
    int xfer_threads;  /* the engine's transfer threads (0: auto, -1: none) */
    const ig_link_model *kv_link;
} run_cfg;

typedef struct run_out {
    float *logits;
    size_t n;
    ig_engine_stats es;
    ig_kv_stats kv;
    double row_bytes;     /* one encoded K (or V) row of one head */
    double decode_wall_s; /* the decode steps' wall time */
} run_out;

static int run(const ig_model *m, const run_cfg *rc, run_out *out) {
    const ig_model_config *c = ig_model_get_config(m);
    memset(out, 0, sizeof *out);
    ig_policy_params *params = NULL;
    const ig_policy_ops *ops = rc->policy ? ig_policy_find(rc->policy) : NULL;
    ig_error err;
    if (ops && ig_policy_params_parse(ops, rc->sets, rc->n_sets, &params, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    ig_engine_opts o = {.max_seqs = NSEQ,
                        .max_ctx = 64,
                        .max_batch_tokens = 64,
                        .threads = 2,
                        .policy = ops,
                        .policy_params = params,
                        .kv_access = rc->access,
                        .kv_device_slots = rc->kv_device_slots,
                        .gpu_batch_seqs = rc->gpu_batch,
                        .act_host_seqs = rc->act_host,
                        .act_disk = rc->act_disk ? rc->kv_disk : NULL,
                        .act_disk_seqs = rc->act_disk,
                        .kv_disk = rc->kv_disk,
                        .kv_disk_slots = rc->kv_disk_slots,
                        .xfer_threads = rc->xfer_threads,
                        .kv_link = rc->kv_link};
    ig_engine *e = NULL;
    if (ig_engine_create(m, &o, &e, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        ig_policy_params_free(params);
        return -1;
    }
    int32_t toks[NSEQ][PROMPT + STEPS];
    for (int s = 0; s < NSEQ; s++)
        for (int i = 0; i < PROMPT + STEPS; i++)
            toks[s][i] = (int32_t)((i * 37 + s * 11 + 3) % c->vocab);
    size_t V = (size_t)c->vocab;
    out->logits = malloc((NSEQ * PROMPT + NSEQ * STEPS) * V * sizeof(float));
    ig_seq_tokens seqs[NSEQ];
    for (int s = 0; s < NSEQ; s++) seqs[s] = (ig_seq_tokens){s, toks[s], g_prompt[s]};
    int ok = out->logits != NULL;
    for (int s = 0; ok && s < NSEQ; s += rc->joint_prefill ? NSEQ : 1) {
        ok = ig_engine_forward(e, seqs + s, rc->joint_prefill ? NSEQ : 1, &err) == IG_OK;
        if (ok) {
            ig_engine_logits(e, 0, ig_engine_n_rows(e), out->logits + out->n);
            out->n += (size_t)ig_engine_n_rows(e) * V;
        }
    }
    double t_dec = ig_time_s();
    for (int t = 0; ok && t < STEPS; t++) {
        ig_seq_tokens d[NSEQ];
        for (int s = 0; s < NSEQ; s++) d[s] = (ig_seq_tokens){s, toks[s] + g_prompt[s] + t, 1};
        ok = ig_engine_forward(e, d, NSEQ, &err) == IG_OK;
        if (ok) {
            ig_engine_logits(e, 0, NSEQ, out->logits + out->n);
            out->n += NSEQ * V;
        }
    }
    out->decode_wall_s = ig_time_s() - t_dec;
    out->es = ig_engine_get_stats(e);
    out->kv = ig_engine_get_kv_stats(e);
    out->row_bytes = (double)ig_engine_kv_row_bytes(e);
    ig_engine_free(e);
    ig_policy_params_free(params);
    if (!ok) {
        fprintf(stderr, "forward: %s\n", err.msg);
        free(out->logits);
        out->logits = NULL;
        return -1;
    }
    return 0;
}

/* Largest |a - b| relative to the largest |a|. */
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        if (x > d) d = x;
        if (fabs((double)a[i]) > m) m = fabs((double)a[i]);
    }
    return m > 0 ? d / m : d;
}

/* Every policy (and the plain cache), GPU batches of 1, 2, 3 (a short last batch) and 4
 * sequences. With each prompt prefilled in its own call, the decode steps' matmuls are row by row
 * (at most 16 rows: the GEMV path), so the schedule must not change a single bit. */
static void test_zigzag_identical(void) {
    static const char *policies[] = {NULL,        "full",  "h2o",      "int4",
                                     "streaming", "quest", "infinigen"};
    for (int mi = 0; mi < 2; mi++)
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
            run_cfg base = {.policy = policies[p]};
            run_out ref;
            CU_ASSERT_FATAL(run(g_models[mi], &base, &ref) == 0);
            CU_ASSERT_EQUAL(ref.es.gpu_batches, (int64_t)(NSEQ + STEPS) * 2);
            for (int gb = 1; gb <= 3; gb++) {
                run_cfg rc = base;
                rc.gpu_batch = gb;
                run_out o;
                CU_ASSERT_FATAL(run(g_models[mi], &rc, &o) == 0);
                CU_ASSERT(o.n == ref.n && memcmp(ref.logits, o.logits, o.n * sizeof(float)) == 0);
                int n_gb = (NSEQ + gb - 1) / gb;
                CU_ASSERT_EQUAL(o.es.gpu_batches, (int64_t)(NSEQ + STEPS * n_gb) * 2);
                /* the policy's traffic does not depend on the schedule */
                CU_ASSERT(o.kv.h2d_bytes == ref.kv.h2d_bytes);
                CU_ASSERT(o.kv.selected_rows == ref.kv.selected_rows);
                CU_ASSERT_EQUAL(o.kv.decode_tokens, ref.kv.decode_tokens);
                free(o.logits);
            }
            free(ref.logits);
        }
}

/* All prompts in one call: a GPU batch's prefill matmul has fewer rows than the whole block's, and
 * BLAS may sum a row in another order for another shape (as cuBLAS does on a GPU), so the logits
 * agree to rounding; the greedy tokens are the same. */
static void test_zigzag_joint_prefill(void) {
    static const char *policies[] = {NULL, "full", "h2o", "infinigen"};
    for (int mi = 0; mi < 2; mi++)
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
            run_cfg base = {.policy = policies[p], .joint_prefill = 1};
            run_out ref, o;
            CU_ASSERT_FATAL(run(g_models[mi], &base, &ref) == 0);
            run_cfg rc = base;
            rc.gpu_batch = 1;
            CU_ASSERT_FATAL(run(g_models[mi], &rc, &o) == 0);
            double d = rel_diff(ref.logits, o.logits, o.n);
            CU_ASSERT(d <= 1e-5);
            size_t V = (size_t)ig_model_get_config(g_models[mi])->vocab;
            for (size_t r = 0; r < o.n / V; r++) {
                size_t a = 0, b = 0;
                for (size_t v = 1; v < V; v++) {
                    if (ref.logits[r * V + v] > ref.logits[r * V + a]) a = v;
                    if (o.logits[r * V + v] > o.logits[r * V + b]) b = v;
                }
                CU_ASSERT_EQUAL(a, b);
            }
            printf("\n    %s %s: joint prefill, GPU batches of 1 vs 4: max rel diff %.2g",
                   g_fixtures[mi], policies[p] ? policies[p] : "plain", d);
            free(ref.logits);
            free(o.logits);
        }
    printf("\n    ");
}

/* With the copy access (a GPU run's gather into a working set on the transfer thread), GPU batches
 * keep their own prefetches in flight: the same logits, bit for bit, and the same bytes. */
static void test_zigzag_copy_prefetch(void) {
    static const char *policies[] = {"full", "infinigen", "h2o"};
    for (size_t p = 0; p < 3; p++) {
        run_cfg base = {.policy = policies[p], .access = IG_KV_ACCESS_COPY};
        run_out ref, o;
        CU_ASSERT_FATAL(run(g_models[0], &base, &ref) == 0);
        run_cfg rc = base;
        rc.gpu_batch = 1;
        CU_ASSERT_FATAL(run(g_models[0], &rc, &o) == 0);
        CU_ASSERT(o.n == ref.n && memcmp(ref.logits, o.logits, o.n * sizeof(float)) == 0);
        CU_ASSERT(o.kv.h2d_bytes == ref.kv.h2d_bytes && o.kv.h2d_bytes > 0);
        free(ref.logits);
        free(o.logits);
    }
}

/* Activations of the last k slots homed in host memory: identical logits, and exactly
 * (n_layer + 1) stores and loads of their rows per forward call. */
static void test_act_host(void) {
    for (int mi = 0; mi < 2; mi++) {
        const ig_model_config *c = ig_model_get_config(g_models[mi]);
        run_cfg base = {.policy = NULL};
        run_out ref;
        CU_ASSERT_FATAL(run(g_models[mi], &base, &ref) == 0);
        CU_ASSERT(ref.es.act_h2d_bytes == 0 && ref.es.act_d2h_bytes == 0);
        for (int k = 1; k <= NSEQ; k += 3)
            for (int gb = 0; gb <= 2; gb += 2) {
                run_cfg rc = {.policy = "full", .act_host = k, .gpu_batch = gb};
                run_out o;
                CU_ASSERT_FATAL(run(g_models[mi], &rc, &o) == 0);
                CU_ASSERT(rel_diff(ref.logits, o.logits, o.n) <= 1e-5);
                double rows = 0; /* prefill rows of the host sequences + one per decode step */
                for (int s = NSEQ - k; s < NSEQ; s++) rows += g_prompt[s] + STEPS;
                double want = rows * (c->n_layer + 1) * c->d_model * sizeof(float);
                CU_ASSERT(o.es.act_d2h_bytes == want);
                CU_ASSERT(o.es.act_h2d_bytes == want);
                free(o.logits);
            }
        free(ref.logits);
    }
    /* one sequence's activations in host memory, one's on disk (through the host) */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/actdisk", ig_test_tmpdir());
    mkdir(dir, 0700);
    const ig_model_config *c = ig_model_get_config(g_models[0]);
    run_cfg base = {.policy = NULL};
    run_out ref, o;
    CU_ASSERT_FATAL(run(g_models[0], &base, &ref) == 0);
    ig_disk *d = NULL;
    ig_error err;
    CU_ASSERT_FATAL(ig_disk_create(dir, 0, 1, &d, &err) == IG_OK);
    run_cfg rc = {.policy = NULL, .act_host = 1, .act_disk = 1, .kv_disk = d, .gpu_batch = 2};
    CU_ASSERT_FATAL(run(g_models[0], &rc, &o) == 0);
    CU_ASSERT(o.n == ref.n && memcmp(ref.logits, o.logits, o.n * sizeof(float)) == 0);
    double per_row = (c->n_layer + 1) * c->d_model * sizeof(float);
    double rows2 = g_prompt[2] + STEPS, rows3 = g_prompt[3] + STEPS;
    CU_ASSERT(o.es.act_d2h_bytes == (rows2 + rows3) * per_row);
    CU_ASSERT(o.es.act_disk_write_bytes == rows3 * per_row);
    CU_ASSERT(o.es.act_disk_read_bytes == rows3 * per_row);
    CU_ASSERT(ig_disk_bytes_written(d) == rows3 * per_row);
    free(ref.logits);
    free(o.logits);
    ig_disk_free(d);
    ig_engine *e = NULL;
    ig_engine_opts bad = {.max_seqs = 2, .max_ctx = 8, .max_batch_tokens = 8, .act_host_seqs = 3};
    CU_ASSERT_NOT_EQUAL(ig_engine_create(g_models[0], &bad, &e, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "act_host_seqs 3"));
    bad.act_host_seqs = 0;
    bad.act_disk_seqs = 1;
    CU_ASSERT_NOT_EQUAL(ig_engine_create(g_models[0], &bad, &e, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "need a disk tier"));
}

/* KV of the last k sequences homed on disk: the same logits as the same run with every row in
 * memory (both read through a working set), rows written once per stored token and read back for
 * every attention, and nothing left in the disk directory afterwards. */
static void test_kv_disk(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/kvdisk", ig_test_tmpdir());
    mkdir(dir, 0700);
    static const char *policies[] = {"full", "h2o", "int4", "infinigen"};
    for (size_t p = 0; p < 4; p++) {
        const ig_model_config *c = ig_model_get_config(g_models[0]);
        run_cfg base = {.policy = policies[p], .access = IG_KV_ACCESS_COPY};
        run_out ref;
        CU_ASSERT_FATAL(run(g_models[0], &base, &ref) == 0);
        CU_ASSERT(ref.kv.disk_read_bytes == 0 && ref.kv.disk_write_bytes == 0);
        for (int k = 1; k <= NSEQ; k += NSEQ - 1)
            for (int gb = 0; gb <= 1; gb++) {
                ig_disk *d = NULL;
                ig_error err;
                CU_ASSERT_FATAL(ig_disk_create(dir, 0, 2, &d, &err) == IG_OK);
                run_cfg rc = base;
                rc.access = IG_KV_ACCESS_AUTO; /* the engine picks copy for disk rows */
                rc.kv_disk = d;
                rc.kv_disk_slots = k;
                rc.gpu_batch = gb;
                run_out o;
                CU_ASSERT_FATAL(run(g_models[0], &rc, &o) == 0);
                CU_ASSERT(o.n == ref.n && memcmp(o.logits, ref.logits, o.n * sizeof(float)) == 0);
                CU_ASSERT(o.kv.h2d_bytes == ref.kv.h2d_bytes);
                /* every stored row is written once; with a dense policy every row is read back */
                double row = o.row_bytes;
                double stored = 0;
                for (int s = NSEQ - k; s < NSEQ; s++) stored += g_prompt[s] + STEPS;
                if (strcmp(policies[p], "h2o") != 0) /* h2o evicts: fewer rows than tokens */
                    CU_ASSERT(o.kv.disk_write_bytes ==
                              2 * stored * c->n_layer * c->n_kv_head * row);
                CU_ASSERT(o.kv.disk_write_bytes > 0 && o.kv.disk_read_bytes > 0);
                if (!strcmp(policies[p], "full")) {
                    double read = 0; /* decode step t reads the g_prompt + t rows before it */
                    for (int s = NSEQ - k; s < NSEQ; s++)
                        for (int t = 0; t < STEPS; t++) read += g_prompt[s] + t;
                    CU_ASSERT(o.kv.disk_read_bytes == 2 * read * c->n_layer * c->n_kv_head * row);
                }
                free(o.logits);
                ig_disk_free(d);
            }
        free(ref.logits);
    }
    DIR *dd = opendir(dir);
    int n_left = 0;
    for (struct dirent *de; dd && (de = readdir(dd));)
        if (de->d_name[0] != '.') n_left++;
    if (dd) closedir(dd);
    CU_ASSERT_EQUAL(n_left, 0);
    /* KV on disk needs a disk tier, and cannot be read in place */
    ig_engine *e = NULL;
    ig_error err;
    ig_engine_opts bad = {.max_seqs = 2,
                          .max_ctx = 8,
                          .max_batch_tokens = 8,
                          .policy = ig_policy_find("full"),
                          .kv_disk_slots = 1};
    CU_ASSERT_NOT_EQUAL(ig_engine_create(g_models[0], &bad, &e, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kv_disk_slots 1 needs a disk tier"));
    /* a tier too small for the KV file fails at create, naming the need, and leaves nothing */
    ig_disk *d = NULL;
    CU_ASSERT_FATAL(ig_disk_create(dir, 4096, 1, &d, &err) == IG_OK);
    ig_engine_opts small = bad;
    small.kv_disk = d;
    small.max_ctx = small.max_batch_tokens = 64;
    CU_ASSERT_NOT_EQUAL(ig_engine_create(g_models[0], &small, &e, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "KV cache of 1 sequences on disk"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "MiB are left"));
    CU_ASSERT_EQUAL(ig_disk_used(d), 0);
    ig_disk_free(d);
}

/* Decode stores on the transfer thread (copy access): the compute thread takes the entries and
 * tells the policy, a job per GPU batch and layer writes the bytes (pwrite for KV on disk). The
 * same run with the stores inline must give the same logits, bit for bit, and the same bytes. */
static void test_async_store(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/kvstore", ig_test_tmpdir());
    mkdir(dir, 0700);
    static const char *policies[] = {"full", "h2o", "int4", "infinigen", "quest"};
    for (int mi = 0; mi < 2; mi++)
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++)
            for (int gb = 0; gb <= 2; gb += 2)
                for (int disk = 0; disk <= 1; disk++) {
                    const ig_model_config *c = ig_model_get_config(g_models[mi]);
                    run_out o[2];
                    for (int t = 0; t < 2; t++) {
                        ig_disk *d = NULL;
                        ig_error err;
                        if (disk) CU_ASSERT_FATAL(ig_disk_create(dir, 0, 2, &d, &err) == IG_OK);
                        run_cfg rc = {.policy = policies[p],
                                      .access = IG_KV_ACCESS_COPY,
                                      .gpu_batch = gb,
                                      .kv_disk = d,
                                      .kv_disk_slots = disk ? 2 : 0,
                                      .xfer_threads = t ? 1 : -1};
                        CU_ASSERT_FATAL(run(g_models[mi], &rc, &o[t]) == 0);
                        ig_disk_free(d);
                    }
                    const ig_kv_stats *a = &o[0].kv, *b = &o[1].kv;
                    CU_ASSERT(o[0].n == o[1].n &&
                              memcmp(o[0].logits, o[1].logits, o[0].n * sizeof(float)) == 0);
                    CU_ASSERT(a->h2d_bytes == b->h2d_bytes && a->h2d_bytes > 0);
                    CU_ASSERT(a->d2h_bytes == b->d2h_bytes && a->d2h_bytes > 0);
                    CU_ASSERT(a->prefill_d2h_bytes == b->prefill_d2h_bytes);
                    CU_ASSERT(a->disk_read_bytes == b->disk_read_bytes);
                    CU_ASSERT(a->disk_write_bytes == b->disk_write_bytes);
                    CU_ASSERT((a->disk_write_bytes > 0) == disk);
                    CU_ASSERT(a->selected_rows == b->selected_rows);
                    CU_ASSERT_EQUAL(a->evictions, b->evictions);
                    /* inline: no store job; threaded: one per decode step, layer and GPU batch */
                    int n_gb = gb ? NSEQ / gb : 1;
                    CU_ASSERT_EQUAL(a->store_jobs, 0);
                    CU_ASSERT_EQUAL(b->store_jobs, (int64_t)STEPS * c->n_layer * n_gb);
                    free(o[0].logits);
                    free(o[1].logits);
                }
}

/* The link model on KV rows: each layer's fetch and store of the host-homed slots lasts at least
 * the modelled time of the bytes the stats count, so the transfer time is bounded below by
 * (h2d + d2h bytes) / bandwidth whatever the machine's load (a lower bound only: a busy machine
 * makes it longer, never shorter). Timing must not change what is computed: the logits and the
 * bytes equal the run without the model, bit for bit, in place (where only the wait is added)
 * and with copies. */
static void test_kv_link(void) {
    static const char *policies[] = {"full", "h2o", "int4", "infinigen", "quest"};
    ig_link_model link = {1, {0.01, 0.01}, {0, 0}}; /* 10 MB/s: far slower than any memcpy */
    for (int mi = 0; mi < 2; mi++)
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++)
            for (int acc = 0; acc < 2; acc++)
                for (int dev = 0; dev <= 2; dev += 2) {
                    if (acc == 0 && !strcmp(policies[p], "int4")) continue; /* encoded rows */
                    run_out o[2];
                    for (int t = 0; t < 2; t++) {
                        run_cfg rc = {.policy = policies[p],
                                      .access = acc ? IG_KV_ACCESS_COPY : IG_KV_ACCESS_INPLACE,
                                      .kv_device_slots = dev,
                                      .xfer_threads = t ? 0 : -1,
                                      .kv_link = t ? &link : NULL};
                        CU_ASSERT_FATAL(run(g_models[mi], &rc, &o[t]) == 0);
                    }
                    const ig_kv_stats *a = &o[0].kv, *b = &o[1].kv;
                    int same = o[0].n == o[1].n &&
                               memcmp(o[0].logits, o[1].logits, o[0].n * sizeof(float)) == 0;
                    if (!same)
                        fprintf(stderr, "\n    %s %s acc %d dev %d: logits differ (%g) ",
                                g_fixtures[mi], policies[p], acc, dev,
                                o[0].n == o[1].n ? rel_diff(o[0].logits, o[1].logits, o[0].n) : -1);
                    CU_ASSERT(same);
                    CU_ASSERT(a->h2d_bytes == b->h2d_bytes && a->h2d_bytes > 0);
                    CU_ASSERT(a->d2h_bytes == b->d2h_bytes && a->d2h_bytes > 0);
                    CU_ASSERT(a->selected_rows == b->selected_rows);
                    /* the jobs' link times are sums of differences of clock readings: equal to
                     * the modelled total up to rounding (clock readings near 1e5 s: ~1e-11 s each)
                     * when no copy is slower than the link */
                    double modelled =
                        (b->h2d_bytes + b->d2h_bytes) / (link.gbps[0] * 1e9) * (1 - 1e-6);
                    if (!(b->transfer_s >= modelled))
                        fprintf(stderr,
                                "\n    %s acc %d dev %d: transfer %.12f s < modelled %.12f s ",
                                policies[p], acc, dev, b->transfer_s, modelled);
                    CU_ASSERT(b->transfer_s >= modelled);
                    /* and the steps waited for them: the link's transfers follow one another and
                     * each step ends after its last (the transfer thread only records when a job's
                     * bytes are there; the compute thread waits until then) */
                    if (!(o[1].decode_wall_s >= modelled))
                        fprintf(stderr, "\n    %s acc %d dev %d: decode %.6f s < modelled %.6f s ",
                                policies[p], acc, dev, o[1].decode_wall_s, modelled);
                    CU_ASSERT(o[1].decode_wall_s >= modelled);
                    /* the stores went through the transfer thread the link model starts */
                    CU_ASSERT(b->store_jobs > 0);
                    free(o[0].logits);
                    free(o[1].logits);
                }
}

/* A disk read that fails in the middle of a decode step (the KV file cut short behind the
 * engine's back): the call fails naming the file, nothing is left queued, and later calls fail
 * the same way instead of tripping an assertion. */
static void test_kv_disk_error(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/kvdiskerr", ig_test_tmpdir());
    mkdir(dir, 0700);
    ig_disk *d = NULL;
    ig_error err;
    CU_ASSERT_FATAL(ig_disk_create(dir, 0, 1, &d, &err) == IG_OK);
    const ig_model *m = g_models[0];
    const ig_model_config *c = ig_model_get_config(m);
    ig_engine_opts o = {.max_seqs = 2,
                        .max_ctx = 32,
                        .max_batch_tokens = 32,
                        .threads = 2,
                        .policy = ig_policy_find("full"),
                        .kv_access = IG_KV_ACCESS_COPY,
                        .xfer_threads = 1,
                        .kv_disk = d,
                        .kv_disk_slots = 2};
    ig_engine *e = NULL;
    CU_ASSERT_FATAL(ig_engine_create(m, &o, &e, &err) == IG_OK);
    int32_t toks[12];
    for (int i = 0; i < 12; i++) toks[i] = (int32_t)((i * 7 + 1) % c->vocab);
    ig_seq_tokens q[2] = {{0, toks, 8}, {1, toks + 1, 8}};
    CU_ASSERT(ig_engine_forward(e, &q[0], 1, &err) == IG_OK);
    CU_ASSERT(ig_engine_forward(e, &q[1], 1, &err) == IG_OK);
    char path[4200];
    snprintf(path, sizeof path, "%s/kv-cache", ig_disk_dir(d));
    CU_ASSERT_FATAL(truncate(path, 0) == 0);
    for (int k = 0; k < 2; k++) {
        ig_seq_tokens dq[2] = {{0, toks + 8 + k, 1}, {1, toks + 9 + k, 1}};
        CU_ASSERT_EQUAL(ig_engine_forward(e, dq, 2, &err), IG_ERR_IO);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kv-cache"));
    }
    ig_engine_free(e);
    ig_disk_free(d);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("schedule", suite_init, suite_clean);
    CU_add_test(s, "zigzag_identical", test_zigzag_identical);
    CU_add_test(s, "zigzag_joint_prefill", test_zigzag_joint_prefill);
    CU_add_test(s, "zigzag_copy_prefetch", test_zigzag_copy_prefetch);
    CU_add_test(s, "act_host", test_act_host);
    CU_add_test(s, "kv_disk", test_kv_disk);
    CU_add_test(s, "kv_disk_error", test_kv_disk_error);
    CU_add_test(s, "async_store", test_async_store);
    CU_add_test(s, "kv_link", test_kv_link);
}
