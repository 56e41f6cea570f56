/* The engine on the CUDA backend against the CPU backend, end to end: the tiny fixture models
 * (tests/fixtures/tiny_llama, tiny_opt) and the default model when installed give the same greedy
 * tokens on CUDA and on the CPU, without a policy (the device KV cache) and with the policies full,
 * h2o, infinigen and int4 (KV home in host memory, selected rows gathered to the GPU), and with
 * decode attention on the CPU (kv_access cpu); their logits agree within a normalised bound, and
 * the KV byte accounting is identical. Both sides load the weights as f16 (the CUDA engine's device
 * type). Each case runs twice on CUDA:
 *  - with f32 GEMMs (ig_engine_opts.cuda_f32_weights: the f16 weights widened, activations kept
 *    f32), which differ from the CPU only in summation order: the greedy tokens and byte counts
 *    must be identical on every model and policy;
 *  - with f16 GEMMs (the default, tensor cores), where activations are rounded to f16: the logits
 *    must stay within LOGIT_BOUND without a policy and with full, and the default model's tokens
 *    must be identical without a policy (SmolLM2 runs no policy and infinigen). The
 *    random-weight tiny_llama has near-tied logits that f16 rounding flips, and selections
 *    (h2o, infinigen) and 4-bit bins (int4) may flip too; those cases are printed, and checked
 *    for NaN/Inf only.
 *
 * A six-layer model with random weights reaches the reuse of per-layer device buffers, which the
 * two-layer fixtures do not.
 *
 * InfiniGen's speculation runs on the CUDA backend's ops (partial scores, threshold counts, top-n)
 * in every selection of the CUDA engine, and must select what the CPU engine's host path selects
 * (the f32 cases' identical tokens and byte counts).
 *
 * Needs a GPU: without one (no driver, no device, cuBLAS cannot start) every test calls
 * ig_test_skip with the probe's reason and ctest reports the program SKIPPED (exit 77). Built as
 * test_cuda_engine_emu, the same program runs on the CUDA emulator (tests/cuda_emu) on any
 * machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/backend.h"
#include "tests/test_util.h"
#include "tests/toy_policy.h"

/* max |gpu - cpu| / max |cpu| over a step's logits, up to the first step whose tokens differ.
 * f32 GEMMs: the same f16-valued weights and f32 activations on both sides, so only summation order
 * differs (the emulator measured at most 1.5e-5, on InfiniGen over the default model).
 * f16 GEMMs: activations are rounded to f16 on the GPU (measured up to 1.7e-3). */
#define F32_BOUND   1e-4
#define LOGIT_BOUND 2e-2

#define N_SEQ 3
#define N_GEN 12

static int g_gpu = -1;
static char g_why[512];

static int need_gpu(void) {
    if (g_gpu < 0) {
        ig_backend_info bi;
        g_gpu = ig_backend_cuda_probe(g_why, sizeof g_why, &bi) > 0;
    }
    if (!g_gpu) {
        char msg[600];
        snprintf(msg, sizeof msg, "no usable GPU: %s", g_why);
        ig_test_skip(msg);
    }
    return g_gpu;
}

typedef struct gen_result {
    int32_t tokens[N_SEQ][N_GEN];
    float *logits; /* [N_GEN][N_SEQ][vocab] */
    ig_kv_stats kv;
    int backend;
    char budget[256]; /* the policy's budget in words (the toy names its backend there) */
} gen_result;

/* Prompts of different lengths, prefilled together, then N_GEN greedy steps for all sequences. */
static int generate(const ig_model *m, ig_backend_kind backend, int f32, const char *policy,
                    const char *const *sets, int n_sets, ig_kv_access access, gen_result *out) {
    const ig_model_config *c = ig_model_get_config(m);
    static const int plen[N_SEQ] = {7, 19, 12};
    ig_policy_params *params = NULL;
    const ig_policy_ops *ops = policy ? ig_policy_find(policy) : NULL;
    ig_error err;
    ig_error_clear(&err);
    if (policy && (!ops || ig_policy_params_parse(ops, sets, n_sets, &params, &err) != IG_OK)) {
        fprintf(stderr, "policy %s: %s\n", policy, err.msg);
        return -1;
    }
    ig_engine_opts o = {.max_seqs = N_SEQ,
                        .max_ctx = 64,
                        .max_batch_tokens = 64,
                        .threads = 2,
                        .backend = backend,
                        .cuda_f32_weights = f32,
                        .policy = ops,
                        .policy_params = params,
                        .kv_access = access};
    ig_engine *e = NULL;
    if (ig_engine_create(m, &o, &e, &err) != IG_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        ig_policy_params_free(params);
        return -1;
    }
    out->backend = ig_engine_backend(e);
    int32_t prompts[N_SEQ][32];
    for (int s = 0; s < N_SEQ; s++)
        for (int i = 0; i < plen[s]; i++)
            prompts[s][i] = (int32_t)((s * 131 + i * 17 + 3) % c->vocab);
    size_t V = (size_t)c->vocab;
    out->logits = malloc((size_t)N_GEN * N_SEQ * V * sizeof(float));
    ig_seq_tokens seqs[N_SEQ];
    int rc = out->logits ? 0 : -1;
    int64_t last[N_SEQ], row = 0;
    for (int s = 0; s < N_SEQ; s++) {
        seqs[s] = (ig_seq_tokens){s, prompts[s], plen[s]};
        row += plen[s];
        last[s] = row - 1;
    }
    for (int step = 0; step < N_GEN && rc == 0; step++) {
        if (ig_engine_forward(e, seqs, N_SEQ, &err) != IG_OK) {
            fprintf(stderr, "forward: %s\n", err.msg);
            rc = -1;
            break;
        }
        float *lg = out->logits + (size_t)step * N_SEQ * V;
        if (step == 0)
            ig_engine_logits_rows(e, last, N_SEQ, lg);
        else
            ig_engine_logits(e, 0, N_SEQ, lg);
        for (int s = 0; s < N_SEQ; s++) {
            out->tokens[s][step] = ig_sample_argmax(lg + (size_t)s * V, c->vocab);
            seqs[s] = (ig_seq_tokens){s, &out->tokens[s][step], 1};
        }
    }
    out->kv = ig_engine_get_kv_stats(e);
    ig_policy_budget_info bi;
    ig_engine_policy_budget(e, &bi);
    snprintf(out->budget, sizeof out->budget, "%s", bi.budget);
    ig_engine_free(e);
    ig_policy_params_free(params);
    return rc;
}

static void compare1(const char *model, const ig_model *m, const char *policy,
                     const char *const *sets, int n_sets, ig_kv_access access, int f32,
                     int f16_same) {
    gen_result cpu, gpu;
    memset(&cpu, 0, sizeof cpu);
    memset(&gpu, 0, sizeof gpu);
    int a = generate(m, IG_BACKEND_CPU, 0, policy, sets, n_sets, access, &cpu);
    int b = generate(m, IG_BACKEND_CUDA, f32, policy, sets, n_sets, access, &gpu);
    CU_ASSERT_EQUAL(a, 0);
    CU_ASSERT_EQUAL(b, 0);
    CU_ASSERT_EQUAL(gpu.backend, IG_BACKEND_CUDA);
    if (a == 0 && b == 0 && policy && !strcmp(policy, "toy-random")) {
        /* its top-k ran on each engine's own backend table */
        CU_ASSERT_PTR_NOT_NULL(strstr(cpu.budget, "top-k on the cpu backend"));
        CU_ASSERT_PTR_NOT_NULL(strstr(gpu.budget, "top-k on the cuda backend"));
    }
    int ig = policy && !strcmp(policy, "infinigen"), qu = policy && !strcmp(policy, "quest");
    if (a == 0 && b == 0 && (ig || qu)) {
        /* InfiniGen's speculation (partial query, scores, counts, top-n) and Quest's page scores
         * and top pages ran through each engine's own backend table in every selection: the same
         * policy code on both */
        for (int side = 0; side < 2; side++) {
            const char *bud = side ? gpu.budget : cpu.budget;
            const char *what = ig ? "top-n" : "top pages";
            char fmt[160], head[64];
            snprintf(head, sizeof head, "%s on the %s backend in ", what, side ? "cuda" : "cpu");
            snprintf(fmt, sizeof fmt, "%s%%lld of %%lld", head);
            const char *on = strstr(bud, head);
            long long dev = -1, all = -2;
            CU_ASSERT_PTR_NOT_NULL(on);
            if (on) CU_ASSERT_EQUAL(sscanf(on, fmt, &dev, &all), 2);
            CU_ASSERT(dev == all && all > 0);
        }
    }
    if (a == 0 && b == 0) {
        size_t V = (size_t)ig_model_get_config(m)->vocab;
        int same = !memcmp(cpu.tokens, gpu.tokens, sizeof cpu.tokens);
        double worst = 0;
        int finite = 1;
        for (int step = 0; step < N_GEN; step++) {
            double dmax = 0, cmax = 0;
            for (size_t i = 0; i < N_SEQ * V; i++) {
                size_t k = (size_t)step * N_SEQ * V + i;
                if (!isfinite(gpu.logits[k])) finite = 0;
                double d = fabs((double)gpu.logits[k] - cpu.logits[k]);
                if (d > dmax) dmax = d;
                if (fabs(cpu.logits[k]) > cmax) cmax = fabs(cpu.logits[k]);
            }
            double rel = dmax / (cmax > 1e-30 ? cmax : 1e-30);
            if (rel > worst) worst = rel;
            /* once the tokens differ the contexts differ: compare up to there */
            int diverged = 0;
            for (int s = 0; s < N_SEQ; s++)
                if (cpu.tokens[s][step] != gpu.tokens[s][step]) diverged = 1;
            if (diverged) break;
        }
        /* selections (h2o, infinigen) and 4-bit bins (int4) are discrete: f16-rounded activations
         * may flip one, which moves logits by more than rounding */
        int discrete = policy && strcmp(policy, "full") != 0;
        fprintf(stderr, "  %s, %s%s, %s GEMMs: tokens %s, logits max rel err %.2e\n", model,
                policy ? policy : "no policy", access == IG_KV_ACCESS_CPU ? " (cpu attention)" : "",
                f32 ? "f32" : "f16", same ? "equal" : "DIFFER", worst);
        CU_ASSERT(finite);
        if (f32) {
            CU_ASSERT(same);
            CU_ASSERT(worst <= F32_BOUND);
        } else if (!discrete) {
            CU_ASSERT(worst <= LOGIT_BOUND);
            if (f16_same) CU_ASSERT(same);
        }
        /* the same code counts the bytes: identical traffic (same selections) */
        if (same && f32) {
            CU_ASSERT_EQUAL(cpu.kv.decode_tokens, gpu.kv.decode_tokens);
            CU_ASSERT(cpu.kv.h2d_bytes == gpu.kv.h2d_bytes);
            CU_ASSERT(cpu.kv.d2h_bytes == gpu.kv.d2h_bytes);
            CU_ASSERT(cpu.kv.selected_rows == gpu.kv.selected_rows);
        }
    }
    free(cpu.logits);
    free(gpu.logits);
}

/* f32 GEMMs: the same tokens and bytes, logits within F32_BOUND. f16 GEMMs (the default): logits
 * within LOGIT_BOUND where nothing discrete depends on them, and the same tokens where f16_same. */
static void compare(const char *model, const ig_model *m, const char *policy,
                    const char *const *sets, int n_sets, ig_kv_access access, int f16_same) {
    compare1(model, m, policy, sets, n_sets, access, 1, 0);
    compare1(model, m, policy, sets, n_sets, access, 0, f16_same);
}

static const char *k_h2o[] = {"heavy_ratio=0.3", "recent_ratio=0.2"};
static const char *k_inf[] = {"alpha=4", "dense_layers=0"};
static const char *k_inf_pool[] = {"alpha=4", "dense_layers=0", "pool_capacity=0.5"};
static const char *k_toy[] = {"fraction=0.4"};
static const char *k_quest[] = {"page_size=4", "budget_ratio=0.4", "dense_layers=1"};

static void all_policies(const char *name, const ig_model *m) {
    /* tests/toy_policy.c computes its selection through the run's backend table: on the CUDA
     * engine the GPU's top-k, on the CPU engine the CPU's, from the same code */
    ig_error err;
    if (!ig_policy_find(ig_toy_random_policy.name))
        CU_ASSERT_EQUAL_FATAL(ig_policy_register(&ig_toy_random_policy, &err), IG_OK);
    compare(name, m, NULL, NULL, 0, IG_KV_ACCESS_AUTO, 0);
    compare(name, m, "full", NULL, 0, IG_KV_ACCESS_AUTO, 0);
    compare(name, m, "full", NULL, 0, IG_KV_ACCESS_CPU, 0);
    compare(name, m, "h2o", k_h2o, 2, IG_KV_ACCESS_AUTO, 0);
    compare(name, m, "infinigen", k_inf, 2, IG_KV_ACCESS_AUTO, 0);
    /* its memory-limited pool (evictions, the pool's counters) through the table too; f32 only */
    compare1(name, m, "infinigen", k_inf_pool, 3, IG_KV_ACCESS_AUTO, 1, 0);
    compare(name, m, "int4", NULL, 0, IG_KV_ACCESS_AUTO, 0);
    compare(name, m, "quest", k_quest, 3, IG_KV_ACCESS_AUTO, 0);
    compare(name, m, "toy-random", k_toy, 1, IG_KV_ACCESS_AUTO, 0);
}

static void fixture(const char *name) {
    if (!need_gpu()) return;
    ig_model_load_opts lo = {IG_DTYPE_F16, 1, 0, IG_WMEM_AUTO};
    ig_model *m = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_model_load(ig_test_fixture(name), &lo, &m, &err), IG_OK);
    all_policies(name, m);
    ig_model_free(m);
}

static void test_tiny_llama(void) {
    fixture("tiny_llama");
}
static void test_tiny_opt(void) {
    fixture("tiny_opt");
}

/* Six layers (random weights, GQA): enough for the engine's per-layer device buffers to be reused
 * (layer 2 takes layer 0's), which the two-layer fixtures never reach; small enough for the eager
 * interleaving run (tests/CMakeLists.txt), which leaves out the default model. */
static void test_deep_dummy(void) {
    if (!need_gpu()) return;
    ig_model_config c = {.arch = IG_ARCH_LLAMA,
                         .n_layer = 6,
                         .d_model = 64,
                         .n_head = 4,
                         .n_kv_head = 2,
                         .head_dim = 16,
                         .d_ffn = 128,
                         .vocab = 384,
                         .max_pos = 128,
                         .norm_eps = 1e-5f,
                         .rope_theta = 10000,
                         .rot_dim = 16,
                         .bos = -1,
                         .eos = -1};
    ig_model *m = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_model_create_dummy(&c, IG_DTYPE_F16, 11, "deep", &m, &err), IG_OK);
    all_policies("dummy 6 layers", m);
    ig_model_free(m);
}

static void test_default_model(void) {
    if (!need_gpu()) return;
    if (getenv("IG_TEST_SMALL_MODELS_ONLY")) {
        /* the sanitizer build (tests/CMakeLists.txt): its 30 layers run the host code the small
         * models run; the Release build runs it */
        ig_test_skip(
            "the default model's case is left to the Release build (IG_TEST_SMALL_MODELS_ONLY)");
        return;
    }
    const char *path = ig_test_default_model();
    if (!path) {
        ig_test_skip("the default model is not installed (tools/setup.sh)");
        return;
    }
    ig_model_load_opts lo = {IG_DTYPE_F16, 1, 0, IG_WMEM_AUTO};
    ig_model *m = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_model_load(path, &lo, &m, &err), IG_OK);
    /* no policy (the device KV cache) and InfiniGen (host home, the speculation on the GPU's ops,
     * GQA group 3); `full` runs on the fixtures and the six-layer model (a third of this test's
     * time on the emulator, no path the others miss) */
    compare("default", m, NULL, NULL, 0, IG_KV_ACCESS_AUTO, 1);
    compare("default", m, "infinigen", k_inf, 2, IG_KV_ACCESS_AUTO, 0);
    ig_model_free(m);
}

/* Compressed weights (tiny_llama quantized at load, and with ggml's Q4_1 blocks): the CUDA engine
 * keeps the blocks on the device (ig_cuda_qlinear) and must match the CPU engine, which reads the
 * same blocks (ig_cpu_linear): with f32 GEMMs the same tokens, bytes and logits to F32_BOUND. */
static void test_tiny_llama_quantized(void) {
    if (!need_gpu()) return;
    const ig_dtype types[] = {IG_DTYPE_Q8G64, IG_DTYPE_Q4G64, IG_DTYPE_Q4_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        ig_model_load_opts lo = {types[i], 1, 0, IG_WMEM_AUTO};
        ig_model *m = NULL;
        ig_error err;
        CU_ASSERT_EQUAL_FATAL(ig_model_load(ig_test_fixture("tiny_llama"), &lo, &m, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_model_dtype(m), types[i]);
        char name[64];
        snprintf(name, sizeof name, "tiny_llama %s", ig_dtype_name(types[i]));
        compare1(name, m, NULL, NULL, 0, IG_KV_ACCESS_AUTO, 1, 0);
        compare1(name, m, "full", NULL, 0, IG_KV_ACCESS_AUTO, 1, 0);
        compare1(name, m, NULL, NULL, 0, IG_KV_ACCESS_AUTO, 0, 0); /* f16 prefill GEMM: bounded */
        ig_model_free(m);
    }
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("cuda_engine", NULL, NULL);
    CU_add_test(s, "tiny llama: CUDA == CPU (greedy, policies)", test_tiny_llama);
    CU_add_test(s, "tiny opt: CUDA == CPU (greedy, policies)", test_tiny_opt);
    CU_add_test(s, "six layers, dummy weights: CUDA == CPU", test_deep_dummy);
    CU_add_test(s, "default model: CUDA == CPU", test_default_model);
    CU_add_test(s, "tiny llama, compressed weights: CUDA == CPU", test_tiny_llama_quantized);
}
