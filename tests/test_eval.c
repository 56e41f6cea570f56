/* Task accuracy (core/app/eval, igen eval): prompts and targets as lm-evaluation-harness builds
 * them (hand-written expectations on tiny task files in tests/fixtures/eval/), few-shot
 * determinism, decode-step scoring checked against an independent full-prefill computation on the
 * tiny models, lm-eval's metric arithmetic, passkey generation, bad input, and an end-to-end run on
 * the default model when it is installed. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "core/app/eval/eval.h"
#include "core/model/model.h"
#include "policies/policy.h"
#include "tests/test_util.h"

static ig_model *g_llama;

static int suite_init(void) {
    ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_AUTO};
    ig_error err;
    if (ig_model_load(ig_test_fixture("tiny_llama"), &o, &g_llama, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return 0;
}

static int suite_clean(void) {
    ig_model_free(g_llama);
    return 0;
}

static const char *fixture_dir(const char *task) {
    static char buf[4200];
    snprintf(buf, sizeof buf, "%s/%s", ig_test_fixture("eval"), task);
    return buf;
}

static ig_eval_task *load(const char *task, int shots, uint64_t seed, ig_error *err) {
    ig_eval_task_opts o = {.name = task,
                           .data_dir = fixture_dir(task),
                           .shots = shots,
                           .seed = seed,
                           .max_len = ig_model_get_config(g_llama)->max_pos};
    ig_eval_task *t = NULL;
    if (ig_eval_task_load(&o, ig_model_tokenizer(g_llama), &t, err) != IG_OK) return NULL;
    return t;
}

static ig_eval_task *load_ok(const char *task, int shots, uint64_t seed) {
    ig_error err;
    ig_eval_task *t = load(task, shots, seed, &err);
    if (!t) fprintf(stderr, "\n    %s: %s\n", task, err.msg);
    CU_ASSERT_PTR_NOT_NULL(t);
    return t;
}

#define ASSERT_STR(a, b)                                                                           \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_)) fprintf(stderr, "\n    got  \"%s\"\n    want \"%s\"\n", a_, b_);       \
        CU_ASSERT_STRING_EQUAL(a_, b_);                                                            \
    } while (0)

/* ---- prompts ---- */

static void test_copa_prompts(void) {
    ig_eval_task *t = load_ok("copa", 0, 1234);
    if (!t) return;
    /* The blank line in the file is skipped: 3 items, 2 choices each. */
    CU_ASSERT_EQUAL(ig_eval_task_n_items(t), 3);
    CU_ASSERT_EQUAL(ig_eval_task_total_requests(t), 6);
    /* copa/utils.py: premise minus its period + " therefore"; choice " " + lower-cased first
     * letter; the target delimiter " " comes in front of that (two spaces, as lm-eval does). */
    ASSERT_STR(ig_eval_task_context(t, 0, 0), "The man turned on the faucet therefore");
    ASSERT_STR(ig_eval_task_continuation(t, 0, 0), "  the toilet filled with water.");
    ASSERT_STR(ig_eval_task_continuation(t, 0, 1), "  water flowed from the spout.");
    CU_ASSERT_EQUAL(ig_eval_task_gold(t, 0), 1);
    ASSERT_STR(ig_eval_task_context(t, 1, 1), "My body cast a shadow over the grass because");
    ASSERT_STR(ig_eval_task_continuation(t, 1, 0), "  the sun was rising.");
    CU_ASSERT_EQUAL(ig_eval_task_gold(t, 1), 0);
    CU_ASSERT_FALSE(ig_eval_task_has_acc_norm(t));
    /* Tokens: the continuation is encode(context + continuation) minus encode(context)'s length. */
    const ig_tokenizer *tok = ig_model_tokenizer(g_llama);
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < 2; r++) {
            int nc, nn;
            const int32_t *c = ig_eval_task_context_ids(t, i, r, &nc);
            const int32_t *n = ig_eval_task_continuation_ids(t, i, r, &nn);
            char whole[512];
            snprintf(whole, sizeof whole, "%s%s", ig_eval_task_context(t, i, r),
                     ig_eval_task_continuation(t, i, r));
            int32_t *ids = NULL, *cids = NULL;
            size_t n_ids = 0, n_cids = 0;
            CU_ASSERT_EQUAL_FATAL(
                ig_tokenizer_encode(tok, whole, strlen(whole), 0, &ids, &n_ids, NULL), IG_OK);
            const char *ctx = ig_eval_task_context(t, i, r);
            CU_ASSERT_EQUAL_FATAL(
                ig_tokenizer_encode(tok, ctx, strlen(ctx), 0, &cids, &n_cids, NULL), IG_OK);
            CU_ASSERT_EQUAL(nc, (int)n_cids);
            CU_ASSERT_EQUAL(nn, (int)(n_ids - n_cids));
            CU_ASSERT(nn > 0 && !memcmp(n, ids + n_cids, (size_t)nn * sizeof *n));
            CU_ASSERT(!memcmp(c, cids, (size_t)nc * sizeof *c));
            free(ids);
            free(cids);
        }
    ig_eval_task_free(t);
}

static void test_other_prompts(void) {
    ig_eval_task *t = load_ok("rte", 0, 1);
    if (t) {
        ASSERT_STR(ig_eval_task_context(t, 0, 0),
                   "Dana Reeve died at age 44.\nQuestion: Dana Reeve is dead. True or False?\n"
                   "Answer:");
        ASSERT_STR(ig_eval_task_continuation(t, 0, 0), " True");
        ASSERT_STR(ig_eval_task_continuation(t, 0, 1), " False");
        CU_ASSERT_EQUAL(ig_eval_task_gold(t, 0), 0);
        CU_ASSERT_EQUAL(ig_eval_task_gold(t, 1), 1);
        ig_eval_task_free(t);
    }
    t = load_ok("openbookqa", 0, 1);
    if (t) {
        CU_ASSERT_EQUAL(ig_eval_task_n_requests(t, 0), 4);
        ASSERT_STR(ig_eval_task_context(t, 0, 3), "The sun is");
        ASSERT_STR(ig_eval_task_continuation(t, 0, 1), " a big rock made of ice");
        CU_ASSERT_EQUAL(ig_eval_task_gold(t, 0), 0);
        CU_ASSERT_TRUE(ig_eval_task_has_acc_norm(t));
        ig_eval_task_free(t);
    }
    t = load_ok("piqa", 0, 1);
    if (t) {
        ASSERT_STR(ig_eval_task_context(t, 1, 0), "Question: open a jar\nAnswer:");
        ASSERT_STR(ig_eval_task_continuation(t, 1, 1), " paint the lid");
        CU_ASSERT_EQUAL(ig_eval_task_gold(t, 0), 0);
        ig_eval_task_free(t);
    }
}

/* WinoGrande's partial scoring: each option fills the blank in the context; the scored
 * continuation is the same text after the blank for both. */
static void test_winogrande_prompts(void) {
    ig_eval_task *t = load_ok("winogrande", 0, 1);
    if (!t) return;
    ASSERT_STR(ig_eval_task_context(t, 0, 0),
               "Sarah was a much better surgeon than Maria so Sarah");
    ASSERT_STR(ig_eval_task_context(t, 0, 1),
               "Sarah was a much better surgeon than Maria so Maria");
    ASSERT_STR(ig_eval_task_continuation(t, 0, 0), " always got the easier cases.");
    ASSERT_STR(ig_eval_task_continuation(t, 0, 1), " always got the easier cases.");
    CU_ASSERT_EQUAL(ig_eval_task_gold(t, 0), 1);
    CU_ASSERT_EQUAL(ig_eval_task_gold(t, 1), 0);
    ig_eval_task_free(t);
    /* Few-shot: an example is the correct option's context + " " + the rest + "\n\n". */
    t = load_ok("winogrande", 2, 7);
    if (!t) return;
    const char *c = ig_eval_task_context(t, 1, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(c, "Tom gave Ann a book because Tom liked her.\n\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c, "The ice melted in the sun since sun was hot.\n\n"));
    const char *q = "The cup did not fit in the box because cup";
    CU_ASSERT(strlen(c) > strlen(q) && !strcmp(c + strlen(c) - strlen(q), q));
    ig_eval_task_free(t);
}

static void test_lambada_prompts(void) {
    ig_eval_task *t = load_ok("lambada", 0, 1);
    if (!t) return;
    CU_ASSERT_EQUAL(ig_eval_task_n_items(t), 3);
    ASSERT_STR(ig_eval_task_context(t, 0, 0), "the cat sat on the mat and the cat sat on the");
    ASSERT_STR(ig_eval_task_continuation(t, 0, 0), " mat");
    /* Split on spaces only, as Python's split(' '): newlines stay inside the context. */
    ASSERT_STR(ig_eval_task_context(t, 1, 0), "She opened the door.\n\nHe said hello to");
    ASSERT_STR(ig_eval_task_continuation(t, 1, 0), " her");
    ig_eval_task_free(t);
    /* LAMBADA's few-shot pool is its own split: an item never sees itself as an example. */
    ig_eval_task *z = load_ok("lambada", 0, 1);
    t = load_ok("lambada", 2, 3);
    if (!t || !z) {
        ig_eval_task_free(z);
        ig_eval_task_free(t);
        return;
    }
    static const char *start[3] = {"the cat sat", "She opened", "one two"};
    for (int i = 0; i < 3; i++) {
        const char *c = ig_eval_task_context(t, i, 0), *q = ig_eval_task_context(z, i, 0);
        size_t lc = strlen(c), lq = strlen(q);
        CU_ASSERT(lc > lq && !strcmp(c + lc - lq, q));
        char *examples = strndup(c, lc - lq);
        CU_ASSERT_PTR_NULL(strstr(examples, start[i]));
        for (int j = 0; j < 3; j++)
            if (j != i) CU_ASSERT_PTR_NOT_NULL(strstr(examples, start[j]));
        free(examples);
    }
    ig_eval_task_free(z);
    ig_eval_task_free(t);
}

/* Same seed, same examples; examples are drawn per item from the pool, without repeats. */
static void test_fewshot_determinism(void) {
    ig_eval_task *a = load_ok("copa", 2, 1234), *b = load_ok("copa", 2, 1234);
    if (!a || !b) goto out;
    static const char *pool[4] = {
        "The girl ran because  she was late.\n\n", "The cup fell therefore  it broke.\n\n",
        "It rained therefore  the road got wet.\n\n", "He smiled because  he was glad.\n\n"};
    for (int i = 0; i < 3; i++) {
        const char *c = ig_eval_task_context(a, i, 0);
        ASSERT_STR(c, ig_eval_task_context(b, i, 0));
        ASSERT_STR(c, ig_eval_task_context(a, i, 1)); /* the choices share the context */
        /* Exactly two distinct pool examples, then the query. */
        int found = 0;
        size_t ex = 0;
        for (int k = 0; k < 4; k++)
            if (strstr(c, pool[k])) found++, ex += strlen(pool[k]);
        CU_ASSERT_EQUAL(found, 2);
        CU_ASSERT(ex < strlen(c));
        CU_ASSERT(strncmp(c + ex, "The", 3) == 0 || strncmp(c + ex, "My", 2) == 0);
    }
    /* Another seed changes the draw of some item. */
    int differs = 0;
    for (uint64_t s = 1; s <= 4 && !differs; s++) {
        ig_eval_task *c = load_ok("copa", 2, s);
        if (!c) break;
        for (int i = 0; i < 3; i++)
            differs |= strcmp(ig_eval_task_context(c, i, 0), ig_eval_task_context(a, i, 0)) != 0;
        ig_eval_task_free(c);
    }
    CU_ASSERT_TRUE(differs);
out:
    ig_eval_task_free(a);
    ig_eval_task_free(b);
}

/* ---- scoring ---- */

/* Independent reference: the whole context + continuation in one prefill call of a plain engine,
 * log-softmax in double of the rows that predict the continuation. */
static double ref_ll(const int32_t *ctx, int nc, const int32_t *cont, int nn, int *greedy) {
    const ig_model_config *c = ig_model_get_config(g_llama);
    ig_engine_opts o = {
        .max_seqs = 1, .max_ctx = nc + nn, .max_batch_tokens = nc + nn, .threads = 1};
    ig_engine *e = NULL;
    ig_error err;
    if (ig_engine_create(g_llama, &o, &e, &err) != IG_OK) return NAN;
    int32_t *ids = malloc((size_t)(nc + nn) * sizeof *ids);
    float *lg = malloc((size_t)c->vocab * sizeof *lg);
    memcpy(ids, ctx, (size_t)nc * sizeof *ids);
    memcpy(ids + nc, cont, (size_t)nn * sizeof *ids);
    ig_seq_tokens s = {0, ids, nc + nn - 1};
    double ll = NAN;
    *greedy = 1;
    if (ig_engine_forward(e, &s, 1, &err) == IG_OK) {
        ll = 0;
        for (int j = 0; j < nn; j++) {
            ig_engine_logits(e, nc - 1 + j, 1, lg);
            double mx = -INFINITY, z = 0;
            int am = 0;
            for (int v = 0; v < c->vocab; v++)
                if (lg[v] > mx) mx = lg[v], am = v;
            for (int v = 0; v < c->vocab; v++) z += exp((double)lg[v] - mx);
            ll += (double)lg[cont[j]] - mx - log(z);
            if (am != cont[j]) *greedy = 0;
        }
    }
    free(ids);
    free(lg);
    ig_engine_free(e);
    return ll;
}

typedef struct run_cfg {
    const char *policy;
    const char *sets[4];
    int n_sets;
    int batch, prefill;
} run_cfg;

static int run_task(const ig_eval_task *t, const run_cfg *rc, ig_eval_result *res,
                    ig_kv_stats *kv) {
    const ig_policy_ops *ops = rc->policy ? ig_policy_find(rc->policy) : NULL;
    ig_policy_params *params = NULL;
    ig_error err;
    if (ops && ig_policy_params_parse(ops, rc->sets, rc->n_sets, &params, &err) != IG_OK) {
        fprintf(stderr, "\n    %s\n", err.msg);
        return -1;
    }
    ig_engine_opts o = {.max_seqs = rc->batch,
                        .max_ctx = ig_eval_task_max_tokens(t),
                        .max_batch_tokens = 4 * ig_eval_task_max_tokens(t),
                        .threads = 2,
                        .policy = ops,
                        .policy_params = params};
    ig_engine *e = NULL;
    int r = -1;
    if (ig_engine_create(g_llama, &o, &e, &err) == IG_OK) {
        ig_eval_run_opts ro = {rc->batch, rc->prefill};
        r = ig_eval_run(e, t, &ro, NULL, NULL, res, &err) == IG_OK ? 0 : -1;
        if (kv) *kv = ig_engine_get_kv_stats(e);
    }
    if (r != 0) fprintf(stderr, "\n    %s\n", err.msg);
    ig_engine_free(e);
    ig_policy_params_free(params);
    return r;
}

/* Decode-step scoring (continuous batching over 3 slots for 6 requests) equals the log-likelihood
 * of one full prefill, and acc / acc_norm follow from those numbers. */
static void check_against_reference(const char *task, int shots, int batch) {
    ig_eval_task *t = load_ok(task, shots, 5);
    if (!t) return;
    ig_eval_result res;
    run_cfg rc = {.batch = batch};
    CU_ASSERT_EQUAL_FATAL(run_task(t, &rc, &res, NULL), 0);
    int q = 0;
    int64_t conts = 0;
    for (int i = 0; i < ig_eval_task_n_items(t); i++) {
        int n = ig_eval_task_n_requests(t, i);
        double lls[4];
        for (int r = 0; r < n; r++, q++) {
            int nc, nn, greedy;
            const int32_t *c = ig_eval_task_context_ids(t, i, r, &nc);
            const int32_t *k = ig_eval_task_continuation_ids(t, i, r, &nn);
            conts += nn;
            double want = ref_ll(c, nc, k, nn, &greedy);
            if (fabs(res.req_ll[q] - want) > 1e-3 * (1 + fabs(want)))
                fprintf(stderr, "\n    %s item %d req %d: ll %.6f, reference %.6f\n", task, i, r,
                        res.req_ll[q], want);
            IG_ASSERT_NEAR(res.req_ll[q], want, 1e-3 * (1 + fabs(want)));
            CU_ASSERT_EQUAL(res.req_greedy[q], greedy);
            lls[r] = want;
        }
        if (!strcmp(task, "lambada")) {
            CU_ASSERT_EQUAL(res.item_correct[i], res.req_greedy[q - 1]);
        } else {
            int best = 0;
            for (int r = 1; r < n; r++)
                if (lls[r] > lls[best]) best = r;
            CU_ASSERT_EQUAL(res.item_correct[i], best == ig_eval_task_gold(t, i));
        }
    }
    CU_ASSERT_EQUAL(q, ig_eval_task_total_requests(t));
    /* One decode step per continuation token (the last context token's step predicts the first),
     * and the prompt is every context token but the last. */
    CU_ASSERT_EQUAL(res.decode_tokens, conts);
    CU_ASSERT_EQUAL(res.scored_tokens, conts);
    double acc = 0;
    for (int i = 0; i < res.n; i++) acc += res.item_correct[i];
    IG_ASSERT_NEAR(res.acc, acc / res.n, 1e-12);
    ig_eval_result_free(&res);
    ig_eval_task_free(t);
}

static void test_score_copa(void) {
    check_against_reference("copa", 1, 3);
}
static void test_score_winogrande(void) {
    check_against_reference("winogrande", 0, 3);
}
static void test_score_lambada(void) {
    check_against_reference("lambada", 0, 2);
}
static void test_score_obqa(void) {
    check_against_reference("openbookqa", 0, 3);
}

/* acc_norm on OpenBookQA's four choices: the per-character argmax of the scored lls. */
static void test_acc_norm_item(void) {
    ig_eval_task *t = load_ok("openbookqa", 1, 5);
    if (!t) return;
    ig_eval_result res;
    run_cfg rc = {.batch = 4};
    CU_ASSERT_EQUAL_FATAL(run_task(t, &rc, &res, NULL), 0);
    CU_ASSERT_TRUE(res.has_acc_norm);
    const double lens[4] = {6, 22, 4, 6}; /* "a star", "a big rock made of ice", "cold", "a moon" */
    int best = 0;
    for (int r = 1; r < 4; r++)
        if (res.req_ll[r] / lens[r] > res.req_ll[best] / lens[best]) best = r;
    CU_ASSERT_EQUAL(res.item_correct_norm[0], best == 0);
    IG_ASSERT_NEAR(res.acc_norm, best == 0, 1e-12);
    ig_eval_result_free(&res);
    ig_eval_task_free(t);
}

/* With a policy the scored tokens are decode steps, so eviction changes the score; `full` does
 * not (bit-identical to no policy up to the decode/prefill rounding). */
static void test_policy_acts(void) {
    ig_eval_task *t = load_ok("copa", 1, 5);
    if (!t) return;
    ig_eval_result base, full, h2o;
    ig_kv_stats kv;
    run_cfg none = {.batch = 2};
    run_cfg rf = {.policy = "full", .batch = 2};
    run_cfg rh = {.policy = "h2o",
                  .sets = {"heavy_ratio=0.05", "recent_ratio=0.05"},
                  .n_sets = 2,
                  .batch = 2};
    CU_ASSERT_EQUAL_FATAL(run_task(t, &none, &base, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(run_task(t, &rf, &full, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(run_task(t, &rh, &h2o, &kv), 0);
    double dmax = 0;
    for (int q = 0; q < ig_eval_task_total_requests(t); q++) {
        IG_ASSERT_NEAR(full.req_ll[q], base.req_ll[q], 1e-9);
        double d = fabs(h2o.req_ll[q] - base.req_ll[q]);
        if (d > dmax) dmax = d;
    }
    CU_ASSERT(dmax > 1e-3);
    CU_ASSERT(kv.evictions > 0);
    CU_ASSERT_EQUAL(kv.decode_tokens, h2o.decode_tokens);
    ig_eval_result_free(&base);
    ig_eval_result_free(&full);
    ig_eval_result_free(&h2o);
    ig_eval_task_free(t);
}

/* --prefill P: the prompt is P tokens, the rest of the context is decoded (not scored). */
static void test_prefill_option(void) {
    ig_eval_task *t = load_ok("copa", 0, 5);
    if (!t) return;
    ig_eval_result a, b;
    run_cfg ra = {.batch = 4}, rb = {.batch = 4, .prefill = 4};
    CU_ASSERT_EQUAL_FATAL(run_task(t, &ra, &a, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(run_task(t, &rb, &b, NULL), 0);
    int64_t extra = 0;
    for (int i = 0; i < ig_eval_task_n_items(t); i++)
        for (int r = 0; r < 2; r++) {
            int nc;
            ig_eval_task_context_ids(t, i, r, &nc);
            extra += nc - 1 - 4;
        }
    CU_ASSERT_EQUAL(b.decode_tokens, a.decode_tokens + extra);
    CU_ASSERT_EQUAL(b.prompt_tokens, 6 * 4);
    for (int q = 0; q < 6; q++) IG_ASSERT_NEAR(b.req_ll[q], a.req_ll[q], 1e-3);
    ig_eval_result_free(&a);
    ig_eval_result_free(&b);
    ig_eval_task_free(t);
}

/* ---- metrics ---- */

static void test_metrics(void) {
    /* acc picks -10 (index 0); per character -10/10 = -1 < -12/20 = -0.6, so acc_norm picks 1. */
    const double ll[2] = {-10, -12}, lens[2] = {10, 20};
    CU_ASSERT_EQUAL(ig_eval_argmax(ll, NULL, 2), 0);
    CU_ASSERT_EQUAL(ig_eval_argmax(ll, lens, 2), 1);
    const double tie[3] = {-2, -1, -1};
    CU_ASSERT_EQUAL(ig_eval_argmax(tie, NULL, 3), 1); /* first of equal maxima, as numpy */
    /* {1, 0, 1, 1}: mean 0.75, sample variance 0.25, stderr 0.5 / 2. */
    const double x[4] = {1, 0, 1, 1};
    IG_ASSERT_NEAR(ig_eval_mean_stderr(x, 4), 0.25, 1e-12);
    CU_ASSERT_EQUAL(ig_eval_mean_stderr(x, 1), 0);
    const double l2[2] = {-1, -3};
    IG_ASSERT_NEAR(ig_eval_perplexity(l2, 2), exp(2.0), 1e-9);
    const double same[3] = {-2, -2, -2};
    IG_ASSERT_NEAR(ig_eval_perplexity_stderr(same, 3, 1000, 1), 0, 1e-12);
    /* Bootstrap of {-1, -3}: resampled means are -1, -2, -2, -3 with probabilities 1/4, 1/2, 1/4,
     * so the standard error of exp(-mean) is the sd of {e, e^2, e^2, e^3}. */
    double m = (exp(1) + 2 * exp(2) + exp(3)) / 4;
    double sd = sqrt((pow(exp(1) - m, 2) + 2 * pow(exp(2) - m, 2) + pow(exp(3) - m, 2)) / 4);
    double se = ig_eval_perplexity_stderr(l2, 2, 100000, 9);
    IG_ASSERT_NEAR(se, sd, 0.02 * sd);
    CU_ASSERT_EQUAL(se, ig_eval_perplexity_stderr(l2, 2, 100000, 9)); /* seeded */
    CU_ASSERT_EQUAL(ig_eval_utf8_len("h\xc3\xa9llo"), 5);
}

/* ---- passkey ---- */

static ig_eval_task *passkey(int length, const double *depths, int n_depths, int seeds,
                             uint64_t seed) {
    ig_eval_task_opts o = {.name = "passkey",
                           .seed = seed,
                           .passkey_length = length,
                           .passkey_depths = depths,
                           .passkey_n_depths = n_depths,
                           .passkey_seeds = seeds};
    ig_eval_task *t = NULL;
    ig_error err;
    if (ig_eval_task_load(&o, ig_model_tokenizer(g_llama), &t, &err) != IG_OK)
        fprintf(stderr, "\n    passkey: %s\n", err.msg);
    return t;
}

static void test_passkey(void) {
    const double depths[3] = {0, 0.5, 1};
    const int L = 2000;
    ig_eval_task *a = passkey(L, depths, 3, 4, 42), *b = passkey(L, depths, 3, 4, 42);
    ig_eval_task *c = passkey(L, depths, 3, 4, 43);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    const ig_tokenizer *tok = ig_model_tokenizer(g_llama);
    /* The filler sentence and the header, as the task defines them. */
    static const char *filler = " The grass is green. The sky is blue. The sun is yellow. Here we "
                                "go. There and back again.";
    static const char *header = "There is an important info hidden inside a lot of irrelevant "
                                "text. Find it and memorize it. I will quiz you about the "
                                "important information there.";
    int32_t *ft = NULL, *ht = NULL;
    size_t nf = 0, nh = 0;
    CU_ASSERT_EQUAL_FATAL(ig_tokenizer_encode(tok, filler, strlen(filler), 0, &ft, &nf, NULL),
                          IG_OK);
    CU_ASSERT_EQUAL_FATAL(ig_tokenizer_encode(tok, header, strlen(header), 0, &ht, &nh, NULL),
                          IG_OK);
    CU_ASSERT_EQUAL(ig_eval_task_n_items(a), 12);
    int distinct = 0, other_seed_differs = 0;
    long units = -1;
    for (int i = 0; i < 12; i++) {
        int key = ig_eval_passkey_key(a, i), pos = ig_eval_passkey_key_pos(a, i);
        CU_ASSERT(key >= 10000 && key <= 99999);
        CU_ASSERT_EQUAL(key, ig_eval_passkey_key(b, i));
        CU_ASSERT_EQUAL(pos, ig_eval_passkey_key_pos(b, i));
        ASSERT_STR(ig_eval_task_context(a, i, 0), ig_eval_task_context(b, i, 0));
        other_seed_differs |= key != ig_eval_passkey_key(c, i);
        if (i % 4 && key != ig_eval_passkey_key(a, i - 1)) distinct++;
        CU_ASSERT_EQUAL(key, ig_eval_passkey_key(a, i % 4)); /* the seed decides the key */
        int n;
        const int32_t *ids = ig_eval_task_context_ids(a, i, 0, &n);
        CU_ASSERT_EQUAL(n, L); /* exactly L tokens */
        CU_ASSERT(!memcmp(ids, ht, nh * sizeof *ht));
        char ks[128];
        snprintf(ks, sizeof ks, " The pass key is %d. Remember it. %d is the pass key.", key, key);
        int32_t *kt = NULL;
        size_t nk = 0;
        CU_ASSERT_EQUAL_FATAL(ig_tokenizer_encode(tok, ks, strlen(ks), 0, &kt, &nk, NULL), IG_OK);
        CU_ASSERT(pos + (int)nk <= n && !memcmp(ids + pos, kt, nk * sizeof *kt));
        /* Whole filler sentences before the key: round(depth x the sentences that fit). */
        if (units < 0) {
            int32_t *qt = NULL;
            size_t nq = 0;
            const char *q = " What is the pass key? The pass key is";
            CU_ASSERT_EQUAL_FATAL(ig_tokenizer_encode(tok, q, strlen(q), 0, &qt, &nq, NULL), IG_OK);
            units = (long)(L - nh - nk - nq) / (long)nf;
            free(qt);
        }
        long before = (long)(depths[i / 4] * (double)units + 0.5);
        CU_ASSERT_EQUAL(pos, (int)nh + (int)(before * (long)nf));
        if (before > 0) CU_ASSERT(!memcmp(ids + nh, ft, nf * sizeof *ft)); /* filler next */
        free(kt);
        char want[16];
        snprintf(want, sizeof want, " %d", key);
        ASSERT_STR(ig_eval_task_continuation(a, i, 0), want);
    }
    CU_ASSERT(units > 10);
    CU_ASSERT(distinct > 0);
    CU_ASSERT_TRUE(other_seed_differs);
    const char *ctx = ig_eval_task_context(a, 0, 0);
    CU_ASSERT(strlen(ctx) > 20 && !strcmp(ctx + strlen(ctx) - 15, "The pass key is"));
    free(ft);
    free(ht);
    ig_eval_task_free(a);
    ig_eval_task_free(b);
    ig_eval_task_free(c);
    /* Too short for header + key + question: refused. */
    ig_eval_task_opts o = {.name = "passkey", .passkey_length = 20, .passkey_seeds = 1};
    ig_eval_task *t = NULL;
    ig_error err;
    CU_ASSERT_EQUAL(ig_eval_task_load(&o, tok, &t, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "too short"));
}

/* Greedy generation on the tiny model: runs, generates, and the match is against the key. */
static void test_passkey_run(void) {
    const double d = 0.5;
    /* 300 tokens: past the tiny model's 128 positions (RoPE runs on), enough for the template. */
    ig_eval_task *t = passkey(300, &d, 1, 3, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    ig_eval_result res;
    run_cfg rc = {.batch = 2};
    CU_ASSERT_EQUAL_FATAL(run_task(t, &rc, &res, NULL), 0);
    CU_ASSERT_EQUAL(res.n, 3);
    CU_ASSERT(res.acc >= 0 && res.acc <= 1);
    int nn;
    ig_eval_task_continuation_ids(t, 0, 0, &nn);
    /* Each answer: the last context token's step plus (generated - 1) steps. */
    CU_ASSERT_EQUAL(res.decode_tokens, 3 * (ig_eval_task_max_tokens(t) - 300));
    CU_ASSERT_EQUAL(res.prompt_tokens, 3 * 299);
    ig_eval_result_free(&res);
    ig_eval_task_free(t);
}

/* ---- bad input ---- */

static const char *write_tmp(const char *dir, const char *name, const char *text) {
    static char path[4400];
    char d[4300];
    snprintf(d, sizeof d, "%s/%s", ig_test_tmpdir(), dir);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(path, sizeof path, "%s/%s", d, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static void expect_load_error(const char *task, const char *dir, int shots, const char *n1,
                              const char *n2) {
    ig_eval_task_opts o = {.name = task, .data_dir = dir, .shots = shots};
    ig_eval_task *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_eval_task_load(&o, ig_model_tokenizer(g_llama), &t, &err);
    CU_ASSERT(rc != IG_OK);
    CU_ASSERT_PTR_NULL(t);
    if (rc == IG_OK || !strstr(err.msg, n1) || (n2 && !strstr(err.msg, n2)))
        fprintf(stderr, "\n    %s in %s: \"%s\" lacks \"%s\" / \"%s\"\n", task, dir, err.msg, n1,
                n2 ? n2 : "");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, n1));
    if (n2) CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, n2));
    ig_eval_task_free(t);
}

static void test_bad_input(void) {
    expect_load_error("copa", "/nonexistent/copa", 0, "/nonexistent/copa", "val.jsonl");
    expect_load_error("nosuch", "/tmp", 0, "unknown task 'nosuch'", NULL);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/empty", ig_test_tmpdir());
    write_tmp("empty", "readme.txt", "x");
    expect_load_error("rte", dir, 0, "val.jsonl", "missing");
    /* A malformed line names file:line. */
    const char *p = write_tmp("bad1", "val.jsonl",
                              "{\"premise\": \"A.\", \"choice1\": \"B.\", \"choice2\": \"C.\", "
                              "\"question\": \"cause\", \"label\": 0}\n"
                              "{\"premise\": \"A.\", \"choice1\": \n");
    char want[4500];
    snprintf(want, sizeof want, "%s:2:", p);
    snprintf(dir, sizeof dir, "%s/bad1", ig_test_tmpdir());
    expect_load_error("copa", dir, 0, want, "not a JSON object");
    /* Valid JSON, wrong layout: the missing field by name. */
    p = write_tmp("bad2", "val.jsonl", "\n{\"premise\": \"A.\", \"label\": 0}\n");
    snprintf(want, sizeof want, "%s:2: missing string field \"choice1\"", p);
    snprintf(dir, sizeof dir, "%s/bad2", ig_test_tmpdir());
    expect_load_error("copa", dir, 0, want, NULL);
    p = write_tmp("bad3", "val.jsonl", "[1, 2]\n");
    snprintf(dir, sizeof dir, "%s/bad3", ig_test_tmpdir());
    expect_load_error("rte", dir, 0, ":1: not a JSON object", NULL);
    p = write_tmp("bad4", "val.jsonl", "{\"premise\": \"A.\"} trailing\n");
    snprintf(dir, sizeof dir, "%s/bad4", ig_test_tmpdir());
    expect_load_error("rte", dir, 0, ":1: not a JSON object (text after the object)", NULL);
    /* PIQA without enough labels; few-shot without a pool file; more shots than the pool. */
    write_tmp("piqa", "valid.jsonl",
              "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\"}\n"
              "{\"goal\": \"h\", \"sol1\": \"a\", \"sol2\": \"b\"}\n");
    write_tmp("piqa", "valid-labels.lst", "1\n");
    snprintf(dir, sizeof dir, "%s/piqa", ig_test_tmpdir());
    expect_load_error("piqa", dir, 0, "valid.jsonl:2: no label (the labels file has 1 lines)",
                      NULL);
    write_tmp("piqa", "valid-labels.lst", "1\n0\n1\n");
    expect_load_error("piqa", dir, 0, "3 labels for 2 documents", NULL);
    write_tmp("piqa", "valid-labels.lst", "1\nx\n");
    expect_load_error("piqa", dir, 0, "valid-labels.lst:2: not an integer label", NULL);
    expect_load_error("rte", fixture_dir("rte"), 3, "3 shots", "pool has 1");
    snprintf(dir, sizeof dir, "%s/bad1", ig_test_tmpdir());
    expect_load_error("copa", dir, 1, "train32.jsonl", "missing");
}

/* ---- needle in a haystack ---- */

static const char *NIAH_HEADER = "Some special magic numbers are hidden within the following text. "
                                 "Make sure to memorize it. I will quiz you about the numbers "
                                 "afterwards.\n";

/* A haystack with multi-byte characters, which the tiny tokenizer (384 tokens, byte-level) splits
 * over several tokens: spans and needles must not cut them. Returns a malloc'd path. */
static char *niah_haystack(void) {
    size_t cap = 64000, len = 0;
    char *text = malloc(cap);
    for (int i = 0; i < 160; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "Line %d: the caf\xc3\xa9 on street %d serves na\xc3\xafve tea "
                                "\xe2\x80\x94 \xe6\x9d\xb1\xe4\xba\xac %d; birds sing.\n",
                                i, 3 * i + 1, i * i);
    char *path = strdup(write_tmp("niah", "hay.txt", text));
    free(text);
    return path;
}

static ig_eval_task *niah(const char *task, const char *hay, const int *lengths, int n_lengths,
                          const double *depths, int n_depths, int seeds, uint64_t seed,
                          ig_error *err) {
    ig_eval_task_opts o = {.name = task,
                           .seed = seed,
                           .passkey_depths = depths,
                           .passkey_n_depths = n_depths,
                           .passkey_seeds = seeds,
                           .niah_lengths = lengths,
                           .niah_n_lengths = n_lengths,
                           .haystack = hay};
    ig_eval_task *t = NULL;
    if (ig_eval_task_load(&o, ig_model_tokenizer(g_llama), &t, err) != IG_OK) return NULL;
    return t;
}

static int32_t *encode(const char *s, size_t *n) {
    int32_t *ids = NULL;
    *n = 0;
    CU_ASSERT_EQUAL(
        ig_tokenizer_encode(ig_model_tokenizer(g_llama), s, strlen(s), 0, &ids, n, NULL), IG_OK);
    return ids;
}

static int valid_utf8(const char *s) {
    unsigned cp;
    for (size_t l; *s; s += l)
        if (!(l = ig_utf8_seq((const unsigned char *)s, &cp))) return 0;
    return 1;
}

/* Every prompt of the three tasks: exactly L tokens = header + haystack span + needles +
 * question; each needle's own tokens at its position; needle 0 at round(D x span) haystack tokens
 * (a few more where a character starts later); the haystack tokens, needles removed, are one
 * contiguous span of the file's tokens; the keys and values the task defines. */
static void test_niah_prompts(void) {
    char *hay = niah_haystack();
    size_t n_file = 0, n_hdr = 0;
    char *text = ig_test_slurp(hay, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int32_t *file = encode(text, &n_file), *hdr = encode(NIAH_HEADER, &n_hdr);
    free(text);
    static const char *tasks[3] = {"niah_single", "niah_multikey", "niah_multivalue"};
    const int lengths[2] = {640, 900};
    const double depths[4] = {0, 0.3, 0.5, 1};
    for (int k = 0; k < 3; k++) {
        ig_error err;
        ig_eval_task *t = niah(tasks[k], hay, lengths, 2, depths, 4, 3, 7, &err);
        ig_eval_task *b = niah(tasks[k], hay, lengths, 2, depths, 4, 3, 7, &err);
        ig_eval_task *c = niah(tasks[k], hay, lengths, 2, depths, 4, 3, 8, &err);
        if (!t || !b || !c) fprintf(stderr, "\n    %s: %s\n", tasks[k], err.msg);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL(ig_eval_task_n_items(t), 2 * 4 * 3);
        CU_ASSERT_PTR_NULL(ig_eval_niah_info(t, 24));
        int other_seed_differs = 0, offsets_differ = 0;
        for (int i = 0; i < 24; i++) {
            const ig_eval_niah_item *ni = ig_eval_niah_info(t, i);
            CU_ASSERT_PTR_NOT_NULL_FATAL(ni);
            int L = lengths[i / 12];
            CU_ASSERT_EQUAL(ni->length, L);
            CU_ASSERT_EQUAL(ni->depth, depths[(i / 3) % 4]);
            CU_ASSERT_EQUAL(ni->seed_index, i % 3);
            int n;
            const int32_t *ids = ig_eval_task_context_ids(t, i, 0, &n);
            CU_ASSERT_EQUAL(n, L); /* exactly L tokens */
            const char *ctx = ig_eval_task_context(t, i, 0);
            /* No multi-byte character was cut (decoding would make it U+FFFD). */
            CU_ASSERT_TRUE(valid_utf8(ctx));
            CU_ASSERT_PTR_NULL(strstr(ctx, "\xef\xbf\xbd"));
            ASSERT_STR(ctx, ig_eval_task_context(b, i, 0)); /* deterministic */
            const ig_eval_niah_item *nc = ig_eval_niah_info(c, i);
            other_seed_differs |= strcmp(nc->needles[0].key, ni->needles[0].key) ||
                                  nc->needles[0].value != ni->needles[0].value;
            /* the same seed index: the same needles at every length and depth */
            const ig_eval_niah_item *n0 = ig_eval_niah_info(t, i % 3);
            ASSERT_STR(ni->needles[0].key, n0->needles[0].key);
            CU_ASSERT_EQUAL(ni->needles[0].value, n0->needles[0].value);
            if (i % 3) offsets_differ |= ni->hay_offset != ig_eval_niah_info(t, i - 1)->hay_offset;
            /* needles by task */
            CU_ASSERT_EQUAL(ni->n_needles, k == 0 ? 1 : 4);
            int needle_tokens = 0;
            for (int j = 0; j < ni->n_needles; j++) {
                const ig_eval_needle *nd = &ni->needles[j];
                CU_ASSERT(nd->value >= 1000000 && nd->value <= 9999999);
                CU_ASSERT_EQUAL(nd->asked, j == 0 || k == 2);
                for (int m = 0; m < j; m++) {
                    CU_ASSERT_NOT_EQUAL(nd->value, ni->needles[m].value);
                    if (k == 1) CU_ASSERT_STRING_NOT_EQUAL(nd->key, ni->needles[m].key);
                    if (k == 2) CU_ASSERT_STRING_EQUAL(nd->key, ni->needles[m].key);
                }
                CU_ASSERT_PTR_NOT_NULL(strchr(nd->key, '-'));
                char nt[160];
                snprintf(nt, sizeof nt, " One of the special magic numbers for %s is: %d.", nd->key,
                         nd->value);
                CU_ASSERT_PTR_NOT_NULL(strstr(ctx, nt));
                size_t nn = 0;
                int32_t *want = encode(nt, &nn);
                CU_ASSERT_EQUAL(nd->n_tokens, (int)nn);
                CU_ASSERT(nd->pos >= (int)n_hdr && nd->pos + (int)nn <= n &&
                          !memcmp(ids + nd->pos, want, nn * sizeof *want));
                free(want);
                needle_tokens += nd->n_tokens;
            }
            CU_ASSERT_EQUAL(ni->header_tokens, (int)n_hdr);
            CU_ASSERT(!memcmp(ids, hdr, n_hdr * sizeof *hdr));
            CU_ASSERT_EQUAL(L, ni->header_tokens + ni->hay_tokens + needle_tokens +
                                   ni->question_tokens);
            /* the question asks for needle 0's key */
            char q[400];
            snprintf(q, sizeof q,
                     k == 2 ? "\nWhat are all the special magic numbers for %s mentioned in the "
                              "provided text? The special magic numbers for %s mentioned in the "
                              "provided text are"
                            : "\nWhat is the special magic number for %s mentioned in the "
                              "provided text? The special magic number for %s mentioned in the "
                              "provided text is",
                     ni->needles[0].key, ni->needles[0].key);
            size_t nq = 0;
            int32_t *qt = encode(q, &nq);
            CU_ASSERT_EQUAL(ni->question_tokens, (int)nq);
            CU_ASSERT(!memcmp(ids + L - nq, qt, nq * sizeof *qt));
            free(qt);
            /* Removing header, needles and question leaves file tokens [offset, offset + span). */
            int32_t *rest = malloc((size_t)L * sizeof *rest);
            int nr = 0;
            for (int p = (int)n_hdr; p < L - (int)nq; p++) {
                int in_needle = 0;
                for (int j = 0; j < ni->n_needles; j++)
                    in_needle |=
                        p >= ni->needles[j].pos && p < ni->needles[j].pos + ni->needles[j].n_tokens;
                if (!in_needle) rest[nr++] = ids[p];
            }
            CU_ASSERT_EQUAL(nr, ni->hay_tokens);
            CU_ASSERT(ni->hay_offset >= 0 && ni->hay_offset + ni->hay_tokens <= (int)n_file);
            CU_ASSERT(!memcmp(rest, file + ni->hay_offset, (size_t)nr * sizeof *rest));
            free(rest);
            /* needle 0's depth: the haystack tokens before it */
            int before = ni->needles[0].pos - (int)n_hdr;
            for (int j = 1; j < ni->n_needles; j++)
                if (ni->needles[j].pos < ni->needles[0].pos) before -= ni->needles[j].n_tokens;
            int want = (int)(ni->depth * ni->hay_tokens + 0.5);
            if (before < want || before > want + 3)
                fprintf(stderr, "\n    %s item %d: needle after %d haystack tokens, want %d\n",
                        tasks[k], i, before, want);
            CU_ASSERT(before >= want && before <= want + 3);
            /* the answer */
            const char *cont = ig_eval_task_continuation(t, i, 0);
            for (int j = 0; j < ni->n_needles; j++) {
                char v[16];
                snprintf(v, sizeof v, "%d", ni->needles[j].value);
                CU_ASSERT_EQUAL(strstr(cont, v) != NULL, ni->needles[j].asked);
            }
            CU_ASSERT_EQUAL(ig_eval_task_n_requests(t, i), 1);
        }
        CU_ASSERT_TRUE(other_seed_differs);
        CU_ASSERT_TRUE(offsets_differ);
        ig_eval_task_free(t);
        ig_eval_task_free(b);
        ig_eval_task_free(c);
    }
    /* the passkey task is not a niah task */
    const double half = 0.5;
    ig_eval_task *p = passkey(300, &half, 1, 1, 1);
    CU_ASSERT_PTR_NOT_NULL(p);
    if (p) CU_ASSERT_PTR_NULL(ig_eval_niah_info(p, 0));
    ig_eval_task_free(p);
    CU_ASSERT_TRUE(ig_eval_task_is_niah("niah_multikey"));
    CU_ASSERT_FALSE(ig_eval_task_is_niah("passkey"));
    CU_ASSERT_TRUE(ig_eval_task_is_generated("passkey"));
    CU_ASSERT_STRING_EQUAL(ig_eval_task_files("niah_single"), "");
    free(file);
    free(hdr);
    free(hay);
}

/* Answer matching by hand: exact match of the first digit run; RULER's fraction of values. */
static void test_niah_scoring(void) {
    const int v[4] = {1234567, 2345678, 3456789, 4567890};
    IG_ASSERT_NEAR(ig_eval_niah_score(" 1234567, 9999999 and 3456789.", v, 4), 0.5, 1e-12);
    IG_ASSERT_NEAR(ig_eval_niah_score(" 4567890, 3456789, 2345678, 1234567", v, 4), 1, 1e-12);
    IG_ASSERT_NEAR(ig_eval_niah_score(" 2345678 2345678", v, 4), 0.25, 1e-12);
    IG_ASSERT_NEAR(ig_eval_niah_score(" none", v, 4), 0, 1e-12);
    IG_ASSERT_NEAR(ig_eval_niah_score("", v, 4), 0, 1e-12);
    CU_ASSERT_TRUE(ig_eval_digits_match(" 1234567.", 1234567, 7));
    CU_ASSERT_TRUE(ig_eval_digits_match(": 1234567, and 5", 1234567, 7));
    CU_ASSERT_FALSE(ig_eval_digits_match(" 12345678", 1234567, 7));        /* a longer number */
    CU_ASSERT_FALSE(ig_eval_digits_match(" 2345678 1234567", 1234567, 7)); /* the first run */
    CU_ASSERT_FALSE(ig_eval_digits_match(" no digits", 1234567, 7));
    CU_ASSERT_TRUE(ig_eval_digits_match("key 01234", 1234, 5)); /* leading zero: 5 digits */
}

/* Greedy generation on the tiny model: per-item scores, acc the mean of them, acc_all (multivalue)
 * the all-found rate, and the depth x length grid the per-cell means. */
static void test_niah_run(void) {
    char *hay = niah_haystack();
    const int lengths[2] = {560, 620};
    const double depths[2] = {0.2, 0.8};
    static const char *tasks[2] = {"niah_multivalue", "niah_single"};
    for (int k = 0; k < 2; k++) {
        ig_error err;
        ig_eval_task *t = niah(tasks[k], hay, lengths, 2, depths, 2, 2, 3, &err);
        if (!t) fprintf(stderr, "\n    %s\n", err.msg);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        ig_eval_result res;
        run_cfg rc = {.batch = 3};
        CU_ASSERT_EQUAL_FATAL(run_task(t, &rc, &res, NULL), 0);
        CU_ASSERT_EQUAL(res.n, 8);
        CU_ASSERT_EQUAL(res.has_acc_all, k == 0);
        CU_ASSERT_EQUAL(res.n_grid, 4);
        double sum = 0, all = 0;
        for (int i = 0; i < 8; i++) {
            double sc = res.item_score[i];
            CU_ASSERT(sc >= 0 && sc <= 1);
            if (k == 0) { /* quarters */
                CU_ASSERT(fabs(sc * 4 - round(sc * 4)) < 1e-12);
            } else {
                CU_ASSERT(sc == 0 || sc == 1);
            }
            CU_ASSERT_EQUAL(res.item_correct[i], sc == 1);
            sum += sc;
            all += res.item_correct[i];
        }
        IG_ASSERT_NEAR(res.acc, sum / 8, 1e-12);
        if (k == 0) IG_ASSERT_NEAR(res.acc_all, all / 8, 1e-12);
        for (int c = 0; c < 4; c++) {
            CU_ASSERT_EQUAL(res.grid[c].length, lengths[c / 2]);
            CU_ASSERT_EQUAL(res.grid[c].depth, depths[c % 2]);
            CU_ASSERT_EQUAL(res.grid[c].n, 2);
            double m = (res.item_score[2 * c] + res.item_score[2 * c + 1]) / 2;
            IG_ASSERT_NEAR(res.grid[c].acc, m, 1e-12);
        }
        /* one generated answer per item: the last context token's step + (generated - 1) */
        int gen = ig_eval_task_max_tokens(t) - 620;
        CU_ASSERT(gen > 0);
        CU_ASSERT_EQUAL(res.decode_tokens, 8 * gen);
        CU_ASSERT_EQUAL(res.prompt_tokens, 4 * 559 + 4 * 619);
        ig_eval_result_free(&res);
        ig_eval_task_free(t);
    }
    free(hay);
}

static void expect_niah_error(const char *hay, int length, int max_len, const char *n1,
                              const char *n2) {
    ig_eval_task_opts o = {.name = "niah_single",
                           .passkey_length = length,
                           .passkey_seeds = 2,
                           .max_len = max_len,
                           .haystack = hay};
    ig_eval_task *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_eval_task_load(&o, ig_model_tokenizer(g_llama), &t, &err);
    CU_ASSERT(rc != IG_OK);
    CU_ASSERT_PTR_NULL(t);
    if (rc == IG_OK || !strstr(err.msg, n1) || (n2 && !strstr(err.msg, n2)))
        fprintf(stderr, "\n    niah: \"%s\" lacks \"%s\" / \"%s\"\n", err.msg, n1, n2 ? n2 : "");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, n1));
    if (n2) CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, n2));
    ig_eval_task_free(t);
}

/* Hostile haystacks and lengths: each refused with the file (or the option) named. */
static void test_niah_bad_input(void) {
    char *shortf = strdup(write_tmp("niah_bad", "short.txt", "Just a few words of text.\n"));
    char *empty = strdup(write_tmp("niah_bad", "empty.txt", ""));
    char *bin = strdup(write_tmp("niah_bad", "latin1.txt", "caf\xe9 au lait\n"));
    char *hay = niah_haystack();
    expect_niah_error(shortf, 400, 0, shortf, "too short for --length 400");
    expect_niah_error(empty, 400, 0, empty, "empty");
    expect_niah_error(bin, 400, 0, bin, "not UTF-8");
    expect_niah_error(NULL, 400, 0, "--haystack", NULL);
    expect_niah_error("/nonexistent/hay.txt", 400, 0, "/nonexistent/hay.txt", NULL);
    expect_niah_error(ig_test_tmpdir(), 400, 0, "folder", NULL);
    expect_niah_error(hay, 40, 0, "length 40 is too short", NULL);
    expect_niah_error(hay, 400, 128, "context length 128", NULL);
    const double bad = 1.5;
    ig_eval_task_opts o = {.name = "niah_multikey",
                           .passkey_length = 400,
                           .passkey_depths = &bad,
                           .passkey_n_depths = 1,
                           .haystack = hay};
    ig_eval_task *t = NULL;
    ig_error err;
    CU_ASSERT_EQUAL(ig_eval_task_load(&o, ig_model_tokenizer(g_llama), &t, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "depth 1.5"));
    /* the command: exit 2 and one line naming the file or the option */
    ig_test_run *r = malloc(sizeof *r);
    char env[4400], args[9000];
    snprintf(env, sizeof env, "IGEN_MODEL='%s'", ig_test_fixture("tiny_llama"));
    snprintf(args, sizeof args, "eval --task niah_single --haystack '%s' --length 100", empty);
    ig_test_igen(r, env, args);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, empty));
    snprintf(args, sizeof args, "eval --task niah_multivalue --haystack '%s' --length 100", bin);
    ig_test_igen(r, env, args);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "not UTF-8"));
    snprintf(args, sizeof args, "eval --task niah_single --haystack '%s' --length 100,4096", hay);
    ig_test_igen(r, env, args);
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "context length 128"));
    ig_test_igen(r, env, "eval --task passkey --length 100,200");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "passkey takes one length"));
    ig_test_igen(r, env, "eval --task niah_single --length 100,x");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "--length"));
    free(r);
    free(shortf);
    free(empty);
    free(bin);
    free(hay);
}

/* ---- the command ---- */

static int json_num(json_object *o, const char *k, double *v) {
    json_object *x;
    if (!json_object_object_get_ex(o, k, &x)) return -1;
    *v = json_object_get_double(x);
    return 0;
}

static void test_cli(void) {
    ig_test_run *r = malloc(sizeof *r);
    char env[4400], args[9000];
    snprintf(env, sizeof env, "IGEN_MODEL='%s'", ig_test_fixture("tiny_llama"));
    ig_test_igen(r, env, "eval --help");
    CU_ASSERT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "usage: igen eval"));
    ig_test_igen(r, env, "eval");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "--task NAME is required"));
    ig_test_igen(r, env, "eval --task copa --data /nonexistent/dir");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "/nonexistent/dir"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "val.jsonl train32.jsonl"));
    CU_ASSERT_PTR_NULL(strchr(r->err, '\n') ? strchr(strchr(r->err, '\n') + 1, '\n') : NULL);
    ig_test_igen(r, env, "eval --task passkey --depth 2");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "--depth"));
    ig_test_igen(r, env, "eval --task passkey --length 4096");
    CU_ASSERT_EQUAL(r->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "context length 128"));
    snprintf(args, sizeof args, "eval --task copa --data '%s' --json --quiet --batch 3",
             fixture_dir("copa"));
    ig_test_igen(r, env, args);
    CU_ASSERT_EQUAL(r->status, 0);
    json_object *o = json_tokener_parse(r->out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    double n = 0, acc = -1, se = -1;
    CU_ASSERT_EQUAL(json_num(o, "n", &n), 0);
    CU_ASSERT_EQUAL(json_num(o, "acc", &acc), 0);
    CU_ASSERT_EQUAL(json_num(o, "acc_stderr", &se), 0);
    CU_ASSERT_EQUAL(n, 3);
    /* 0/1 items: sample stderr = sqrt(p (1 - p) / (n - 1)). */
    IG_ASSERT_NEAR(se, sqrt(acc * (1 - acc) / (n - 1)), 1e-9);
    json_object *pol;
    CU_ASSERT(json_object_object_get_ex(o, "policy", &pol) &&
              !strcmp(json_object_get_string(pol), "none"));
    json_object_put(o);
    free(r);
}

/* --percent: the same task scored with the weights and the KV home in host memory gives the same
 * numbers (placement moves bytes, it does not change what is computed), and says it offloaded. */
static void test_placement(void) {
    ig_test_run *r = malloc(sizeof *r);
    char env[4400], args[9000];
    snprintf(env, sizeof env, "IGEN_MODEL='%s'", ig_test_fixture("tiny_llama"));
    const char *place[2] = {"", "--percent 0,100,0,100,100,0"};
    double ppl[2] = {-1, -2}, acc[2] = {-1, -2};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "eval --task lambada --data '%s' --json --quiet --policy full %s",
                 fixture_dir("lambada"), place[i]);
        ig_test_igen(r, env, args);
        CU_ASSERT_EQUAL(r->status, 0);
        if (r->status) fprintf(stderr, "\n    %s\n", r->err);
        json_object *o = json_tokener_parse(r->out), *off;
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        CU_ASSERT_EQUAL(json_num(o, "ppl", &ppl[i]), 0);
        CU_ASSERT_EQUAL(json_num(o, "acc", &acc[i]), 0);
        CU_ASSERT(json_object_object_get_ex(o, "offload", &off) &&
                  json_object_get_boolean(off) == (i == 1));
        json_object_put(o);
    }
    CU_ASSERT(ppl[0] > 0 && ppl[0] == ppl[1]);
    CU_ASSERT_EQUAL(acc[0], acc[1]);
    /* KV off the device needs a policy, said in one line */
    snprintf(args, sizeof args, "eval --task lambada --data '%s' --percent 0,100,0,100,100,0",
             fixture_dir("lambada"));
    ig_test_igen(r, env, args);
    CU_ASSERT_NOT_EQUAL(r->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "needs a KV policy"));
    free(r);
}

/* The default model on the real COPA data: with and without a policy. */
static void test_default_model(void) {
    const char *model = ig_test_default_model();
    const char *data = ig_test_shared("tasks/copa");
    if (!model || !data) {
        ig_test_skip("the default model or ../shared/data/tasks/copa is not installed");
        return;
    }
    ig_test_run *r = malloc(sizeof *r);
    char env[4400], args[9000];
    snprintf(env, sizeof env, "IGEN_MODEL='%s' OMP_WAIT_POLICY=passive", model);
    const char *pols[2] = {"", "--policy h2o"};
    for (int p = 0; p < 2; p++) {
        snprintf(args, sizeof args, "eval --task copa --limit 8 --data '%s' --json --quiet %s",
                 data, pols[p]);
        ig_test_igen(r, env, args);
        CU_ASSERT_EQUAL(r->status, 0);
        if (r->status) fprintf(stderr, "\n    %s\n", r->err);
        json_object *o = json_tokener_parse(r->out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        double n = 0, acc = -1, ev = -1, dec = 0;
        json_num(o, "n", &n);
        json_num(o, "acc", &acc);
        json_num(o, "kv_evictions", &ev);
        json_num(o, "decode_tokens", &dec);
        CU_ASSERT_EQUAL(n, 8);
        CU_ASSERT(acc >= 0 && acc <= 1 && fabs(acc * 8 - round(acc * 8)) < 1e-9);
        CU_ASSERT(dec >= 16); /* at least one decode step per choice */
        if (p == 1) CU_ASSERT(ev > 0);
        json_object_put(o);
    }
    free(r);
}

/* The default model on WikiText-2: niah_multikey's JSON with its grid, the command documented in
 * docs/eval.md at a small size. */
static void test_niah_default_model(void) {
    const char *model = ig_test_default_model();
    const char *hay0 = ig_test_shared("wikitext-2-raw/wiki.test.raw");
    if (!model || !hay0) {
        ig_test_skip("the default model or ../shared/data/wikitext-2-raw is not installed");
        return;
    }
    char *hay = strdup(hay0);
    ig_test_run *r = malloc(sizeof *r);
    char env[4400], args[9000];
    snprintf(env, sizeof env, "IGEN_MODEL='%s' OMP_WAIT_POLICY=passive", model);
    snprintf(args, sizeof args,
             "eval --task niah_multikey --haystack '%s' --length 256,320 --depth 0.2,0.8 --seeds 1 "
             "--json --quiet",
             hay);
    ig_test_igen(r, env, args);
    CU_ASSERT_EQUAL(r->status, 0);
    if (r->status) fprintf(stderr, "\n    %s\n", r->err);
    json_object *o = json_tokener_parse(r->out), *grid = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    double n = 0, acc = -1;
    json_num(o, "n", &n);
    json_num(o, "acc", &acc);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT(acc >= 0 && acc <= 1);
    CU_ASSERT_FATAL(json_object_object_get_ex(o, "grid", &grid));
    CU_ASSERT_EQUAL_FATAL(json_object_array_length(grid), 4);
    double sum = 0;
    for (int c = 0; c < 4; c++) {
        json_object *cell = json_object_array_get_idx(grid, (size_t)c);
        double l = 0, d = -1, cn = 0, ca = -1;
        CU_ASSERT_EQUAL(json_num(cell, "length", &l), 0);
        CU_ASSERT_EQUAL(json_num(cell, "depth", &d), 0);
        CU_ASSERT_EQUAL(json_num(cell, "n", &cn), 0);
        CU_ASSERT_EQUAL(json_num(cell, "acc", &ca), 0);
        CU_ASSERT_EQUAL(l, c < 2 ? 256 : 320);
        IG_ASSERT_NEAR(d, c % 2 ? 0.8 : 0.2, 1e-12);
        CU_ASSERT_EQUAL(cn, 1);
        sum += ca;
    }
    IG_ASSERT_NEAR(acc, sum / 4, 1e-12);
    json_object_put(o);
    free(r);
    free(hay);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("eval", suite_init, suite_clean);
    CU_add_test(s, "copa_prompts", test_copa_prompts);
    CU_add_test(s, "placement", test_placement);
    CU_add_test(s, "other_prompts", test_other_prompts);
    CU_add_test(s, "winogrande_prompts", test_winogrande_prompts);
    CU_add_test(s, "lambada_prompts", test_lambada_prompts);
    CU_add_test(s, "fewshot_determinism", test_fewshot_determinism);
    CU_add_test(s, "score_copa", test_score_copa);
    CU_add_test(s, "score_winogrande", test_score_winogrande);
    CU_add_test(s, "score_lambada", test_score_lambada);
    CU_add_test(s, "score_obqa", test_score_obqa);
    CU_add_test(s, "acc_norm_item", test_acc_norm_item);
    CU_add_test(s, "policy_acts", test_policy_acts);
    CU_add_test(s, "prefill_option", test_prefill_option);
    CU_add_test(s, "metrics", test_metrics);
    CU_add_test(s, "passkey", test_passkey);
    CU_add_test(s, "passkey_run", test_passkey_run);
    CU_add_test(s, "niah_prompts", test_niah_prompts);
    CU_add_test(s, "niah_scoring", test_niah_scoring);
    CU_add_test(s, "niah_run", test_niah_run);
    CU_add_test(s, "niah_bad_input", test_niah_bad_input);
    CU_add_test(s, "bad_input", test_bad_input);
    CU_add_test(s, "cli", test_cli);
    CU_add_test(s, "default_model", test_default_model);
    CU_add_test(s, "niah_default_model", test_niah_default_model);
}
