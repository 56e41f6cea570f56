/* The real default model, SmolLM2-135M-Instruct (Q4_1 GGUF), against transformers on weights
 * dequantized by gguf-py: WikiText-2 perplexity (ctx 1024, first 16 windows; the Q4_1 blocks kept
 * as stored: the first 4, against the reference's own per-window NLL) within 0.5%, and greedy
 * continuations identical. References: tools/reference/ref_ppl.py and ref_generate.py.
 * Skipped (visibly) when the model or the shared data are not installed. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "core/engine/generate.h"
#include "core/engine/ppl.h"
#include "core/base/mapfile.h"
#include "core/model/model.h"
#include "tests/test_util.h"

static ig_model *g_model;
/* the dequantized (f32) model's NLL per window, once measured */
#define MAX_WINDOWS 64
static double g_nll_f32[MAX_WINDOWS];
static int g_windows_f32, g_ctx;

static int suite_init(void) {
    const char *path = ig_test_default_model();
    if (!path) {
        ig_test_skip("the default model is not installed (run tools/setup.sh)");
        return 0;
    }
    ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_AUTO};
    ig_error err;
    if (ig_model_load(path, &o, &g_model, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return 0;
}

static int suite_clean(void) {
    ig_model_free(g_model);
    g_model = NULL;
    return 0;
}

static json_object *read_json(const char *path) {
    char *text = NULL;
    ig_error err;
    if (ig_read_file(path, &text, NULL, &err) != IG_OK) return NULL;
    json_object *o = json_tokener_parse(text);
    free(text);
    return o;
}

static double jnum(json_object *o, const char *key) {
    json_object *v;
    return json_object_object_get_ex(o, key, &v) ? json_object_get_double(v) : NAN;
}

/* Perplexity of the first `windows` windows of the reference's (all of them when 0) against the
 * reference's, from its per-window NLL when fewer; window_nll (may be NULL) receives igen's. */
static double ppl_vs_reference(ig_model *model, const char *text_name, const char *ref_name,
                               int windows, double *window_nll) {
    if (!model) return NAN;
    const char *text_path = ig_test_shared(text_name);
    if (!text_path) {
        ig_test_skip("the shared data (../shared/data) is not present");
        return NAN;
    }
    json_object *ref = read_json(ig_test_fixture(ref_name));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    int ctx = (int)jnum(ref, "ctx"), ref_windows = (int)jnum(ref, "windows");
    json_object *per_window = NULL;
    CU_ASSERT_FATAL(json_object_object_get_ex(ref, "per_window_nll", &per_window) &&
                    (int)json_object_array_length(per_window) == ref_windows &&
                    ref_windows <= MAX_WINDOWS);
    if (windows <= 0 || windows > ref_windows) windows = ref_windows;
    g_ctx = ctx;
    double want_nll = 0;
    for (int w = 0; w < windows; w++)
        want_nll += json_object_get_double(json_object_array_get_idx(per_window, w));
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_read_file(text_path, &text, &len, &err), IG_OK);
    const ig_tokenizer *tok = ig_model_tokenizer(model);
    CU_ASSERT_EQUAL_FATAL(
        ig_tokenizer_encode(tok, text, len, ig_tokenizer_adds_bos(tok), &ids, &n, &err), IG_OK);
    CU_ASSERT_EQUAL((double)n, jnum(ref, "text_tokens"));
    ig_engine_opts o = {.max_seqs = 4, .max_ctx = ctx, .max_batch_tokens = 4 * ctx, .threads = 0};
    ig_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_engine_create(model, &o, &e, &err), IG_OK);
    ig_ppl_opts po = {.ctx = ctx, .batch = 4, .max_windows = windows};
    ig_ppl_result res;
    CU_ASSERT_EQUAL_FATAL(ig_ppl_run(e, ids, (int64_t)n, &po, NULL, NULL, &res, &err), IG_OK);
    /* the reference's own ppl when every window is evaluated; its windows' NLL otherwise */
    double want =
        windows == ref_windows ? jnum(ref, "ppl") : exp(want_nll / (windows * (ctx - 1.0)));
    char desc[160];
    printf(
        "\n    %s (%s): igen ppl %.6f, transformers %.6f (%+.4f%%), %d windows of %d, %.1f s\n    ",
        text_name, ig_model_dtype_desc(model, desc, sizeof desc), res.ppl, want,
        100 * (res.ppl - want) / want, res.windows, ctx, res.seconds);
    double got = res.ppl;
    CU_ASSERT_EQUAL(res.windows, windows);
    CU_ASSERT_EQUAL(res.tokens, (int64_t)windows * (ctx - 1));
    if (windows == ref_windows) CU_ASSERT_EQUAL((double)res.tokens, jnum(ref, "tokens"));
    if (window_nll)
        for (int w = 0; w < res.windows && w < windows; w++) window_nll[w] = res.window_nll[w];
    CU_ASSERT(fabs(res.ppl - want) <= 0.005 * want);
    ig_ppl_result_free(&res);
    ig_engine_free(e);
    free(ids);
    free(text);
    json_object_put(ref);
    return got;
}

static void test_ppl_wikitext2(void) {
    double ppl = ppl_vs_reference(g_model, "wikitext-2-raw/wiki.test.raw",
                                  "ref/smollm2_wikitext2_ctx1024_w16.json", 0, g_nll_f32);
    if (!isnan(ppl)) g_windows_f32 = 16;
}

/* The GGUF's Q4_1 matrices kept as stored (computed from the blocks by the quantized kernels): the
 * same weights as the dequantized f32 model, so the same perplexity to 1e-4 relative over the same
 * windows (only the summation order differs), and transformers' within 0.5% as above. The first 4
 * windows of the 16: the kernels are the same in every window, and a quarter of the time. */
#define STORED_WINDOWS 4
static void test_ppl_stored_q4_1(void) {
    if (!g_model) return;
    ig_model_load_opts o = {.dtype = IG_DTYPE_F32, .quiet = 1, .keep_stored = 1};
    ig_model *m = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_model_load(ig_test_default_model(), &o, &m, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_model_dtype(m), IG_DTYPE_Q4_1);
    CU_ASSERT(ig_model_weight_bytes(m) * 5 < ig_model_weight_bytes(g_model));
    double ppl = ppl_vs_reference(m, "wikitext-2-raw/wiki.test.raw",
                                  "ref/smollm2_wikitext2_ctx1024_w16.json", STORED_WINDOWS, NULL);
    if (!isnan(ppl) && g_windows_f32 >= STORED_WINDOWS) {
        double nll = 0;
        for (int w = 0; w < STORED_WINDOWS; w++) nll += g_nll_f32[w];
        double ppl_f32 = exp(nll / (STORED_WINDOWS * (g_ctx - 1.0)));
        printf("stored vs dequantized, first %d windows: %.7f vs %.7f (%+.2e relative)\n    ",
               STORED_WINDOWS, ppl, ppl_f32, (ppl - ppl_f32) / ppl_f32);
        CU_ASSERT(fabs(ppl - ppl_f32) <= 1e-4 * ppl_f32);
    } else if (!isnan(ppl)) {
        printf("(not compared with the dequantized model: its test did not run first)\n    ");
    }
    ig_model_free(m);
}

/* Greedy continuations of the reference prompts: the prompt ids (our tokenizer) and every generated
 * id must equal transformers'. Both prompts run as one batch of two different lengths. */
static void test_greedy(void) {
    if (!g_model) return;
    json_object *ref = read_json(ig_test_fixture("ref/smollm2_greedy.json"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    json_object *results = NULL;
    CU_ASSERT_FATAL(json_object_object_get_ex(ref, "results", &results));
    int n = (int)json_object_array_length(results), n_new = (int)jnum(ref, "n_new");
    CU_ASSERT_FATAL(n >= 1 && n <= 8 && n_new > 0);
    const ig_tokenizer *tok = ig_model_tokenizer(g_model);
    int32_t *prompts[8] = {0};
    int n_prompt[8] = {0};
    ig_error err;
    for (int i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(results, i), *p = NULL, *pi = NULL;
        CU_ASSERT_FATAL(json_object_object_get_ex(r, "prompt", &p) &&
                        json_object_object_get_ex(r, "prompt_ids", &pi));
        const char *text = json_object_get_string(p);
        size_t len = 0;
        CU_ASSERT_EQUAL_FATAL(
            ig_tokenizer_encode(tok, text, strlen(text), 0, &prompts[i], &len, &err), IG_OK);
        n_prompt[i] = (int)len;
        CU_ASSERT_EQUAL(len, json_object_array_length(pi));
        for (size_t k = 0; k < len && k < json_object_array_length(pi); k++)
            CU_ASSERT_EQUAL(prompts[i][k], json_object_get_int(json_object_array_get_idx(pi, k)));
    }
    ig_engine_opts o = {.max_seqs = n, .max_ctx = 256, .max_batch_tokens = 256, .threads = 0};
    ig_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_engine_create(g_model, &o, &e, &err), IG_OK);
    ig_gen_params gp = {n_new, 0.0f, 1.0f, 0, 0};
    ig_gen_result res[8];
    CU_ASSERT_EQUAL_FATAL(ig_generate(e, (const int32_t *const *)prompts, n_prompt, n, &gp, NULL,
                                      NULL, res, NULL, &err),
                          IG_OK);
    for (int i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(results, i), *g = NULL;
        CU_ASSERT_FATAL(json_object_object_get_ex(r, "greedy_ids", &g));
        CU_ASSERT_EQUAL(res[i].n_tokens, (int)json_object_array_length(g));
        int first_diff = -1;
        for (int k = 0; k < res[i].n_tokens && k < (int)json_object_array_length(g); k++)
            if (res[i].tokens[k] != json_object_get_int(json_object_array_get_idx(g, k))) {
                first_diff = k;
                break;
            }
        if (first_diff >= 0)
            fprintf(stderr, "\n    prompt %d: first differing token at %d\n", i, first_diff);
        CU_ASSERT_EQUAL(first_diff, -1);
    }
    ig_gen_result_free(res, n);
    ig_engine_free(e);
    for (int i = 0; i < n; i++) free(prompts[i]);
    json_object_put(ref);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("smollm2", suite_init, suite_clean);
    CU_add_test(s, "greedy", test_greedy);
    CU_add_test(s, "ppl_wikitext2_ctx1024", test_ppl_wikitext2);
    CU_add_test(s, "ppl_stored_q4_1", test_ppl_stored_q4_1);
}
