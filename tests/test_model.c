/* The engine against Hugging Face transformers: tiny random OPT and Llama (GQA) models in every
 * format (safetensors f32/f16, sharded, GGUF with llama.cpp's Q/K permutation and quantized
 * tensors). Reference logits and greedy continuations come from
 * tools/reference/make_tiny_models.py. Also: storage dtypes, chunked prefill, and the engine's
 * input checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine/engine.h"
#include "core/engine/generate.h"
#include "core/engine/ppl.h"
#include "core/model/io/safetensors.h"
#include "core/base/mapfile.h"
#include "core/model/model.h"
#include "tests/test_util.h"

#define N_SEQ    4
#define N_GREEDY 32
/* f32 (and exactly-representable f16) weights, f32 compute: the bound. */
#define TOL_F32 1e-4
/* Weights rounded to a narrower storage dtype than the reference used (relative to max |logit|). */
#define TOL_F16_REL  5e-3
#define TOL_BF16_REL 4e-2

typedef struct ref_data {
    ig_safetensors *st;
    const int32_t *tokens[N_SEQ];
    int len[N_SEQ];
    const float *logits[N_SEQ];
    const int32_t *greedy[N_SEQ];
    int vocab;
} ref_data;

static int ref_open(const char *path, ref_data *r) {
    memset(r, 0, sizeof *r);
    ig_error err;
    if (ig_safetensors_open(path, &r->st, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    for (int i = 0; i < N_SEQ; i++) {
        char name[32];
        snprintf(name, sizeof name, "tokens_%d", i);
        const ig_st_tensor *t = ig_safetensors_find(r->st, name);
        snprintf(name, sizeof name, "logits_%d", i);
        const ig_st_tensor *l = ig_safetensors_find(r->st, name);
        snprintf(name, sizeof name, "greedy_%d", i);
        const ig_st_tensor *g = ig_safetensors_find(r->st, name);
        if (!t || !l || !g || t->dtype != IG_DTYPE_I32 || l->dtype != IG_DTYPE_F32 ||
            g->dtype != IG_DTYPE_I32 || l->ndim != 2 || l->shape[0] != t->shape[0] ||
            g->shape[0] != N_GREEDY) {
            fprintf(stderr, "%s: unexpected reference layout at sequence %d\n", path, i);
            ig_safetensors_close(r->st);
            return -1;
        }
        r->tokens[i] = t->data;
        r->len[i] = (int)t->shape[0];
        r->logits[i] = l->data;
        r->greedy[i] = g->data;
        r->vocab = (int)l->shape[1];
    }
    return 0;
}

static ig_model *load(const char *path, ig_dtype dtype) {
    ig_model_load_opts o = {dtype, 1, 0, IG_WMEM_AUTO};
    ig_model *m = NULL;
    ig_error err;
    if (ig_model_load(path, &o, &m, &err) != IG_OK) {
        fprintf(stderr, "load %s: %s\n", path, err.msg);
        return NULL;
    }
    return m;
}

static ig_engine *engine(const ig_model *m, int batch_tokens) {
    ig_engine_opts o = {
        .max_seqs = N_SEQ, .max_ctx = 128, .max_batch_tokens = batch_tokens, .threads = 2};
    ig_engine *e = NULL;
    ig_error err;
    if (ig_engine_create(m, &o, &e, &err) != IG_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return NULL;
    }
    return e;
}

/* Max |igen - reference| over every position of every sequence, all sequences in one batch
 * (chunks > 0: each prompt is fed in that many pieces, appending to the cache). */
static double logits_diff(ig_engine *e, const ref_data *r, int chunks, double *max_ref) {
    ig_error err;
    int V = r->vocab;
    double worst = 0, maxabs = 0;
    for (int s = 0; s < N_SEQ; s++) ig_engine_seq_reset(e, s);
    int done[N_SEQ] = {0};
    float *lg = malloc((size_t)128 * N_SEQ * (size_t)V * sizeof(float));
    for (int c = 0; c < chunks; c++) {
        ig_seq_tokens seqs[N_SEQ];
        int ns = 0;
        for (int s = 0; s < N_SEQ; s++) {
            int end = (int)((long)r->len[s] * (c + 1) / chunks);
            if (end <= done[s]) continue;
            seqs[ns++] = (ig_seq_tokens){s, r->tokens[s] + done[s], end - done[s]};
        }
        if (ns == 0) continue;
        if (ig_engine_forward(e, seqs, ns, &err) != IG_OK) {
            fprintf(stderr, "forward: %s\n", err.msg);
            free(lg);
            return INFINITY;
        }
        int64_t rows = ig_engine_n_rows(e);
        ig_engine_logits(e, 0, rows, lg);
        int64_t row = 0;
        for (int k = 0; k < ns; k++) {
            int s = seqs[k].slot;
            for (int i = 0; i < seqs[k].n_tokens; i++, row++) {
                const float *ref = r->logits[s] + (size_t)(done[s] + i) * (size_t)V;
                const float *got = lg + (size_t)row * (size_t)V;
                for (int v = 0; v < V; v++) {
                    double d = fabs((double)got[v] - (double)ref[v]);
                    if (!(d <= worst)) worst = d; /* NaN propagates as a failure */
                    if (fabs(ref[v]) > maxabs) maxabs = fabs(ref[v]);
                }
            }
            done[s] += seqs[k].n_tokens;
        }
    }
    free(lg);
    if (max_ref) *max_ref = maxabs;
    return worst;
}

static int greedy_matches(ig_engine *e, const ref_data *r) {
    ig_gen_params p = {N_GREEDY, 0.0f, 1.0f, 0, 0};
    ig_gen_result res[N_SEQ];
    ig_error err;
    const int32_t *prompts[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) prompts[s] = r->tokens[s];
    if (ig_generate(e, prompts, r->len, N_SEQ, &p, NULL, NULL, res, NULL, &err) != IG_OK) {
        fprintf(stderr, "generate: %s\n", err.msg);
        return 0;
    }
    int ok = 1;
    for (int s = 0; s < N_SEQ; s++) {
        if (res[s].n_tokens != N_GREEDY) ok = 0;
        for (int i = 0; i < res[s].n_tokens && i < N_GREEDY; i++)
            if (res[s].tokens[i] != r->greedy[s][i]) {
                fprintf(stderr, "sequence %d: greedy token %d is %d, reference %d\n", s, i,
                        res[s].tokens[i], r->greedy[s][i]);
                ok = 0;
                break;
            }
    }
    ig_gen_result_free(res, N_SEQ);
    return ok;
}

/* Logits (all positions, batched, and fed in 3 chunks) and greedy continuation vs reference. */
static void check_model(const char *model_fixture, const char *ref_fixture, ig_dtype dtype,
                        double tol_abs, double tol_rel, int check_greedy) {
    char model_path[4096], ref_path[4096];
    snprintf(model_path, sizeof model_path, "%s", ig_test_fixture(model_fixture));
    snprintf(ref_path, sizeof ref_path, "%s", ig_test_fixture(ref_fixture));
    ref_data r;
    CU_ASSERT_FATAL(ref_open(ref_path, &r) == 0);
    ig_model *m = load(model_path, dtype);
    CU_ASSERT_PTR_NOT_NULL(m);
    ig_engine *e = m ? engine(m, 128) : NULL;
    CU_ASSERT_PTR_NOT_NULL(e);
    if (e) {
        CU_ASSERT_EQUAL(ig_model_get_config(m)->vocab, r.vocab);
        double maxref = 0;
        double d1 = logits_diff(e, &r, 1, &maxref);
        double d3 = logits_diff(e, &r, 3, NULL);
        double tol = tol_abs > 0 ? tol_abs : tol_rel * maxref;
        printf("\n    %s (%s): max |logit diff| %.3g one call, %.3g in 3 chunks (bound %.3g, "
               "max |logit| %.3g)\n    ",
               model_fixture, ig_dtype_name(dtype), d1, d3, tol, maxref);
        CU_ASSERT(d1 <= tol);
        CU_ASSERT(d3 <= tol);
        if (check_greedy) CU_ASSERT(greedy_matches(e, &r));
    }
    ig_engine_free(e);
    ig_model_free(m);
    ig_safetensors_close(r.st);
}

static void test_tiny_opt(void) {
    check_model("tiny_opt", "tiny_opt/reference.safetensors", IG_DTYPE_F32, TOL_F32, 0, 1);
}
static void test_tiny_opt_sharded(void) {
    check_model("tiny_opt_sharded", "tiny_opt/reference.safetensors", IG_DTYPE_F32, TOL_F32, 0, 1);
}
static void test_tiny_llama(void) {
    check_model("tiny_llama", "tiny_llama/reference.safetensors", IG_DTYPE_F32, TOL_F32, 0, 1);
}
/* f16 checkpoint; the reference ran transformers on the same f16 weights in f32, so both f32 and
 * f16 storage are exact conversions and the f32 bound applies. */
static void test_tiny_llama_f16_file(void) {
    check_model("tiny_llama_f16", "tiny_llama_f16/reference.safetensors", IG_DTYPE_F32, TOL_F32, 0,
                1);
    check_model("tiny_llama_f16", "tiny_llama_f16/reference.safetensors", IG_DTYPE_F16, TOL_F32, 0,
                1);
}
/* GGUF with Q8_0 / F16 / F32 tensors and llama.cpp's Q/K row permutation; the reference is
 * transformers' own GGUF loader (gguf-py dequantization, its own un-permutation). */
static void test_tiny_llama_gguf(void) {
    check_model("tiny_llama.gguf", "tiny_llama.gguf.reference.safetensors", IG_DTYPE_F32, TOL_F32,
                0, 1);
}
/* f32 weights stored narrower: rounding of the weights bounds the error (relative to max |logit|).
 */
static void test_storage_dtypes(void) {
    check_model("tiny_llama", "tiny_llama/reference.safetensors", IG_DTYPE_F16, 0, TOL_F16_REL, 0);
    check_model("tiny_llama", "tiny_llama/reference.safetensors", IG_DTYPE_BF16, 0, TOL_BF16_REL,
                0);
    check_model("tiny_opt", "tiny_opt/reference.safetensors", IG_DTYPE_F16, 0, TOL_F16_REL, 0);
}

/* --weights-mem: the same logits, bit for bit, whether the matrices the file stores in a usable
 * type are read from the mapping or copied into the model's arena; map leaves them in the mapping,
 * copy moves every one, auto copies a model this small. */
static void one_forward(const ig_model *m, float *logits, int V) {
    ig_engine *e = engine(m, 128);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    int32_t toks[7] = {1, 5, 9, 2, 7, 3, 11};
    ig_seq_tokens sq = {0, toks, 7};
    ig_error err;
    CU_ASSERT_EQUAL(ig_engine_forward(e, &sq, 1, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_engine_n_rows(e), 7);
    ig_engine_logits(e, 0, 7, logits);
    (void)V;
    ig_engine_free(e);
}

static void check_weights_mem(const char *fixture, ig_dtype dtype, int keep_stored) {
    char path[4096];
    snprintf(path, sizeof path, "%s", ig_test_fixture(fixture));
    ig_model *m[3] = {NULL, NULL, NULL};
    ig_weights_mem modes[3] = {IG_WMEM_MAP, IG_WMEM_COPY, IG_WMEM_AUTO};
    float *lg[3] = {NULL, NULL, NULL};
    int V = 0;
    for (int i = 0; i < 3; i++) {
        ig_model_load_opts o = {dtype, 1, keep_stored, modes[i]};
        ig_error err;
        CU_ASSERT_EQUAL_FATAL(ig_model_load(path, &o, &m[i], &err), IG_OK);
        V = ig_model_get_config(m[i])->vocab;
        lg[i] = malloc((size_t)7 * (size_t)V * sizeof(float));
        CU_ASSERT_PTR_NOT_NULL_FATAL(lg[i]);
        one_forward(m[i], lg[i], V);
    }
    CU_ASSERT(ig_model_mapped_bytes(m[0]) > 0);
    CU_ASSERT(!ig_model_copies_mapped(m[0]));
    CU_ASSERT_EQUAL(ig_model_mapped_bytes(m[1]), 0);
    CU_ASSERT(ig_model_copies_mapped(m[1]));
    CU_ASSERT(ig_model_arena_bytes(m[1]) >=
              ig_model_arena_bytes(m[0]) + ig_model_mapped_bytes(m[0]));
    /* auto: copied when the available memory is known (a tiny model is far below half of it),
     * mapped when /proc/meminfo cannot be read */
    CU_ASSERT_EQUAL(ig_model_copies_mapped(m[2]), access("/proc/meminfo", R_OK) == 0);
    CU_ASSERT(memcmp(lg[0], lg[1], (size_t)7 * (size_t)V * sizeof(float)) == 0);
    CU_ASSERT(memcmp(lg[0], lg[2], (size_t)7 * (size_t)V * sizeof(float)) == 0);
    for (int i = 0; i < 3; i++) {
        free(lg[i]);
        ig_model_free(m[i]);
    }
}

static void test_weights_mem(void) {
    check_weights_mem("tiny_llama", IG_DTYPE_F32, 0);      /* safetensors f32, used as f32 */
    check_weights_mem("tiny_llama_f16", IG_DTYPE_F16, 0);  /* safetensors f16, used as f16 */
    check_weights_mem("tiny_llama.gguf", IG_DTYPE_F32, 1); /* GGUF Q8_0 / F16 / F32 kept */
}

static void test_engine_rejects_bad_batches(void) {
    ig_model *m = load(ig_test_fixture("tiny_llama"), IG_DTYPE_F32);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    ig_engine_opts o = {.max_seqs = 2, .max_ctx = 16, .max_batch_tokens = 16, .threads = 1};
    ig_engine *e = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_engine_create(m, &o, &e, &err), IG_OK);
    int32_t toks[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    ig_seq_tokens ok = {0, toks, 4};
    CU_ASSERT_EQUAL(ig_engine_forward(e, &ok, 1, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_engine_seq_len(e, 0), 4);

    int32_t bad_tok[1] = {384};
    ig_seq_tokens b1 = {1, bad_tok, 1};
    CU_ASSERT_EQUAL(ig_engine_forward(e, &b1, 1, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "outside the vocabulary"));
    ig_seq_tokens dup[2] = {{1, toks, 1}, {1, toks, 1}};
    CU_ASSERT_EQUAL(ig_engine_forward(e, dup, 2, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "twice"));
    ig_seq_tokens over = {0, toks, 13}; /* 4 + 13 > 16 */
    CU_ASSERT_EQUAL(ig_engine_forward(e, &over, 1, &err), IG_ERR_CAPACITY);
    ig_seq_tokens slot = {2, toks, 1};
    CU_ASSERT_EQUAL(ig_engine_forward(e, &slot, 1, &err), IG_ERR_INVALID_ARG);
    ig_seq_tokens big[2] = {{0, toks, 9}, {1, toks, 9}}; /* 18 > 16 batch tokens */
    CU_ASSERT_EQUAL(ig_engine_forward(e, big, 2, &err), IG_ERR_CAPACITY);
    /* Failed calls change no cache. */
    CU_ASSERT_EQUAL(ig_engine_seq_len(e, 0), 4);
    CU_ASSERT_EQUAL(ig_engine_seq_len(e, 1), 0);
    ig_engine_free(e);

    ig_engine_opts bad = {.max_seqs = 0, .max_ctx = 16, .max_batch_tokens = 16, .threads = 1};
    CU_ASSERT_EQUAL(ig_engine_create(m, &bad, &e, &err), IG_ERR_INVALID_ARG);
    ig_model_free(m);
}

/* The perplexity path (windowing, row bookkeeping, log-softmax) against the NLL computed here in
 * double from the reference logits of transformers. */
static void test_ppl_matches_reference_nll(void) {
    ref_data r;
    CU_ASSERT_FATAL(ref_open(ig_test_fixture("tiny_llama/reference.safetensors"), &r) == 0);
    int s = N_SEQ - 1, n = r.len[s], V = r.vocab;
    double want = 0;
    for (int i = 0; i + 1 < n; i++) {
        const float *l = r.logits[s] + (size_t)i * (size_t)V;
        double mx = l[0], sum = 0;
        for (int v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < V; v++) sum += exp((double)l[v] - mx);
        want -= (double)l[r.tokens[s][i + 1]] - mx - log(sum);
    }
    ig_model *m = load(ig_test_fixture("tiny_llama"), IG_DTYPE_F32);
    /* 16 batch tokens: the window is fed in 4 chunks. */
    ig_engine_opts o = {.max_seqs = 2, .max_ctx = 128, .max_batch_tokens = 16, .threads = 2};
    ig_engine *e = NULL;
    ig_error err;
    CU_ASSERT_FATAL(m && ig_engine_create(m, &o, &e, &err) == IG_OK);
    ig_ppl_opts po = {.ctx = n, .batch = 1};
    ig_ppl_result res;
    CU_ASSERT_EQUAL_FATAL(ig_ppl_run(e, r.tokens[s], n, &po, NULL, NULL, &res, &err), IG_OK);
    CU_ASSERT_EQUAL(res.windows, 1);
    CU_ASSERT_EQUAL(res.tokens, n - 1);
    printf("\n    nll %.6f, reference %.6f\n    ", res.nll_sum, want);
    IG_ASSERT_NEAR(res.nll_sum, want, 1e-4 * (n - 1));
    IG_ASSERT_NEAR(res.ppl, exp(want / (n - 1)), 1e-4 * res.ppl);
    /* Too little text for one window is an error, not a ppl of nothing. */
    ig_ppl_result_free(&res);
    po.ctx = n + 1;
    CU_ASSERT_EQUAL(ig_ppl_run(e, r.tokens[s], n, &po, NULL, NULL, &res, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "fewer than one window"));
    ig_engine_free(e);
    ig_model_free(m);
    ig_safetensors_close(r.st);
}

/* ---- bad input: crafted copies of the tiny Llama ---- */

static void copy_file(const char *src, const char *dst, long truncate_to) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    char buf[65536];
    size_t n;
    long total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (truncate_to >= 0 && total + (long)n > truncate_to) n = (size_t)(truncate_to - total);
        fwrite(buf, 1, n, out);
        total += (long)n;
        if (truncate_to >= 0 && total >= truncate_to) break;
    }
    fclose(in);
    fclose(out);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* A copy of tiny_llama in tmp/<name>/ with config.json text edited: every `from` replaced by `to`.
 */
static const char *crafted_dir(const char *name, const char *from, const char *to, int with_tok,
                               long truncate_weights) {
    static char dir[4096];
    char src[4096], dst[4200], cmd[8600];
    snprintf(dir, sizeof dir, "%s/%s", ig_test_tmpdir(), name);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(src, sizeof src, "%s/model.safetensors", ig_test_fixture("tiny_llama"));
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    copy_file(src, dst, truncate_weights);
    if (with_tok) {
        snprintf(src, sizeof src, "%s/tokenizer.json", ig_test_fixture("tiny_llama"));
        snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
        copy_file(src, dst, -1);
    }
    char *cfg = NULL;
    size_t len = 0;
    ig_error err;
    snprintf(src, sizeof src, "%s/config.json", ig_test_fixture("tiny_llama"));
    CU_ASSERT_EQUAL_FATAL(ig_read_file(src, &cfg, &len, &err), IG_OK);
    char *out = malloc(len * 2 + 256);
    out[0] = '\0';
    const char *p = cfg;
    const char *hit;
    while (from && (hit = strstr(p, from))) {
        strncat(out, p, (size_t)(hit - p));
        strcat(out, to);
        p = hit + strlen(from);
    }
    strcat(out, p);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    write_text(dst, out);
    free(out);
    free(cfg);
    return dir;
}

static void expect_load_error(const char *path, ig_status code, const char *s1, const char *s2) {
    ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_AUTO};
    ig_model *m = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_model_load(path, &o, &m, &err);
    CU_ASSERT_EQUAL(rc, code);
    CU_ASSERT_PTR_NULL(m);
    if (rc != code) fprintf(stderr, "\n    %s: got %d (%s)\n", path, rc, err.msg);
    if (s1 && !strstr(err.msg, s1)) fprintf(stderr, "\n    message lacks '%s': %s\n", s1, err.msg);
    if (s2 && !strstr(err.msg, s2)) fprintf(stderr, "\n    message lacks '%s': %s\n", s2, err.msg);
    CU_ASSERT(!s1 || strstr(err.msg, s1) != NULL);
    CU_ASSERT(!s2 || strstr(err.msg, s2) != NULL);
    CU_ASSERT(strchr(err.msg, '\n') == NULL); /* one line */
    ig_model_free(m);
}

static void test_bad_config(void) {
    expect_load_error(crafted_dir("unknown_arch", "\"llama\"", "\"gpt2\"", 1, -1),
                      IG_ERR_UNSUPPORTED, "model_type 'gpt2'", "config.json");
    expect_load_error(crafted_dir("missing_key", "\"hidden_size\"", "\"hidden_sz\"", 1, -1),
                      IG_ERR_FORMAT, "'hidden_size'", "config.json");
    expect_load_error(crafted_dir("wrong_type", "\"num_hidden_layers\": 2",
                                  "\"num_hidden_layers\": \"2\"", 1, -1),
                      IG_ERR_FORMAT, "num_hidden_layers", "expected an integer");
    expect_load_error(crafted_dir("not_json", "{", "[[", 1, -1), IG_ERR_FORMAT, "config.json",
                      NULL);
    expect_load_error(
        crafted_dir("bad_heads", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", 1, -1),
        IG_ERR_FORMAT, "not a multiple", NULL);
    expect_load_error(
        crafted_dir("rope_scaled", "\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"", 1, -1),
        IG_ERR_UNSUPPORTED, "rope_type 'yarn'", NULL);
}

static void test_bad_weights(void) {
    /* One KV head instead of two: k_proj in the file has twice the rows the config implies. */
    expect_load_error(
        crafted_dir("kv_shape", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 1", 1, -1),
        IG_ERR_SHAPE, "model.layers.0.self_attn.k_proj.weight",
        "expected shape [16, 64], found [32, 64]");
    /* Three layers in the config, two in the file. */
    expect_load_error(
        crafted_dir("missing_layer", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3", 1, -1),
        IG_ERR_NOT_FOUND, "model.layers.2.", "missing");
    expect_load_error(crafted_dir("truncated", NULL, NULL, 1, 4096), IG_ERR_FORMAT,
                      "model.safetensors", NULL);
    /* lm_head stored as int32 (same byte size): a float tensor was expected. */
    const char *dir = crafted_dir("int_dtype", NULL, NULL, 1, -1);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char head[256];
    CU_ASSERT_EQUAL_FATAL(fread(head, 1, sizeof head, f), sizeof head);
    static const char key[] = "\"lm_head.weight\":{\"dtype\":\"";
    char *at = memmem(head, sizeof head, key, sizeof key - 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    CU_ASSERT_FATAL(at[sizeof key - 1] == 'F');
    fseek(f, (long)(at - head) + (long)(sizeof key - 1), SEEK_SET);
    fputc('I', f); /* "F32" -> "I32" */
    fclose(f);
    expect_load_error(dir, IG_ERR_SHAPE, "'lm_head.weight'", "expected f32/f16/bf16, found i32");
    expect_load_error(crafted_dir("no_tokenizer", NULL, NULL, 0, -1), IG_ERR_NOT_FOUND, "tokenizer",
                      NULL);
}

static void test_bad_files(void) {
    char path[4300];
    /* A truncated GGUF. */
    snprintf(path, sizeof path, "%s/cut.gguf", ig_test_tmpdir());
    copy_file(ig_test_fixture("tiny_llama.gguf"), path, 100000);
    expect_load_error(path, IG_ERR_FORMAT, "cut.gguf", NULL);
    /* Not a model at all. */
    snprintf(path, sizeof path, "%s/notes.txt", ig_test_tmpdir());
    write_text(path, "hello");
    expect_load_error(path, IG_ERR_FORMAT, "notes.txt", "not a model");
    expect_load_error("/nonexistent/model.gguf", IG_ERR_NOT_FOUND, "/nonexistent/model.gguf", NULL);
    /* A directory without config.json. */
    expect_load_error(ig_test_tmpdir(), IG_ERR_NOT_FOUND, "config.json", NULL);
    /* Weights to copy that cannot fit: a sparse 1 TiB file is refused before it is read, naming
     * the option (where the available memory is known). */
    snprintf(path, sizeof path, "%s/huge.gguf", ig_test_tmpdir());
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int sparse = ftruncate(fileno(f), (off_t)1 << 40) == 0; /* a file system without: skipped */
    fclose(f);
    if (sparse && access("/proc/meminfo", R_OK) == 0) {
        ig_model_load_opts o = {IG_DTYPE_F32, 1, 0, IG_WMEM_COPY};
        ig_model *m = NULL;
        ig_error err;
        CU_ASSERT_EQUAL(ig_model_load(path, &o, &m, &err), IG_ERR_CAPACITY);
        CU_ASSERT_PTR_NULL(m);
        CU_ASSERT(strstr(err.msg, "huge.gguf") && strstr(err.msg, "--weights-mem"));
    }
    remove(path);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("tiny_models", NULL, NULL);
    CU_add_test(s, "opt", test_tiny_opt);
    CU_add_test(s, "opt_sharded", test_tiny_opt_sharded);
    CU_add_test(s, "llama_gqa", test_tiny_llama);
    CU_add_test(s, "llama_f16_checkpoint", test_tiny_llama_f16_file);
    CU_add_test(s, "llama_gguf", test_tiny_llama_gguf);
    CU_add_test(s, "storage_dtypes", test_storage_dtypes);
    CU_add_test(s, "weights_mem", test_weights_mem);
    CU_pSuite e = CU_add_suite("engine", NULL, NULL);
    CU_add_test(e, "rejects_bad_batches", test_engine_rejects_bad_batches);
    CU_add_test(e, "ppl_matches_reference_nll", test_ppl_matches_reference_nll);
    CU_pSuite b = CU_add_suite("bad_input", NULL, NULL);
    CU_add_test(b, "config", test_bad_config);
    CU_add_test(b, "weights", test_bad_weights);
    CU_add_test(b, "files", test_bad_files);
}
