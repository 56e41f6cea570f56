/* Tokenizer: ids and decoded strings equal to Hugging Face `tokenizers` on the fixtures made by
 * tools/reference/make_tokenizer_fixtures.py (tiny tokenizer.json and GGUF vocabularies, the
 * SmolLM2 GGUF on tricky strings and on the whole WikiText-2 test file), and clear errors for bad
 * input. Tests needing the model or the shared data report SKIPPED when it is absent. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/model/io/gguf.h"
#include "core/base/mapfile.h"
#include "core/model/tokenizer/tokenizer.h"
#include "tests/test_util.h"

static uint64_t fnv1a64_ids(const int32_t *ids, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) { /* little-endian int32 bytes */
            h ^= (v >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

static json_object *load_json(const char *path) {
    json_object *o = json_object_from_file(path);
    if (!o) fprintf(stderr, "cannot read %s: %s\n", path, json_util_get_last_err());
    return o;
}

static json_object *jget(json_object *o, const char *key) {
    json_object *v = NULL;
    json_object_object_get_ex(o, key, &v);
    return v;
}

/* Loads a fixture tokenizer (tokenizer.json or .gguf); the GGUF stays open in *g. */
static ig_tokenizer *load_fixture(const char *file, ig_gguf **g) {
    const char *path = ig_test_fixture(file);
    ig_tokenizer *tok = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc;
    *g = NULL;
    if (strstr(file, ".gguf")) {
        rc = ig_gguf_open(path, g, &err);
        if (rc == IG_OK) rc = ig_tokenizer_load_gguf(*g, &tok, &err);
    } else {
        rc = ig_tokenizer_load_hf(path, &tok, &err);
    }
    if (rc != IG_OK) fprintf(stderr, "loading %s: %s\n", file, err.msg);
    return tok;
}

/* Compares ids with the expected JSON array; prints the first difference. */
static int ids_equal(const char *what, const char *text, const int32_t *ids, size_t n,
                     json_object *want) {
    size_t wn = json_object_array_length(want);
    size_t i = 0;
    while (i < n && i < wn && ids[i] == json_object_get_int(json_object_array_get_idx(want, i)))
        i++;
    if (i == n && n == wn) return 1;
    fprintf(stderr, "%s: \"%s\": ids differ at %zu (got %zu ids, want %zu): got %d, want %d\n",
            what, text, i, n, wn, i < n ? ids[i] : -1,
            i < wn ? json_object_get_int(json_object_array_get_idx(want, i)) : -1);
    return 0;
}

/* Runs every case of one fixture list through tok. Returns the number of failures. */
static int check_cases(const char *what, ig_tokenizer *tok, json_object *cases, int add_bos) {
    int bad = 0;
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        const char *text = json_object_get_string(jget(c, "text"));
        size_t tl = (size_t)json_object_get_string_len(jget(c, "text"));
        json_object *want = jget(c, "ids");
        const char *want_dec = json_object_get_string(jget(c, "decoded"));
        int32_t *ids = NULL;
        size_t n = 0;
        ig_error err;
        ig_error_clear(&err);
        if (ig_tokenizer_encode(tok, text, tl, add_bos, &ids, &n, &err) != IG_OK) {
            fprintf(stderr, "%s: encode \"%s\": %s\n", what, text, err.msg);
            bad++;
            continue;
        }
        if (!ids_equal(what, text, ids, n, want)) bad++;
        free(ids);

        /* decode(expected ids) == what tokenizers decodes them to */
        size_t wn = json_object_array_length(want);
        int32_t *wids = malloc((wn ? wn : 1) * sizeof *wids);
        for (size_t k = 0; k < wn; k++)
            wids[k] = json_object_get_int(json_object_array_get_idx(want, k));
        char *dec = NULL;
        if (ig_tokenizer_decode(tok, wids, wn, &dec, &err) != IG_OK) {
            fprintf(stderr, "%s: decode \"%s\": %s\n", what, text, err.msg);
            bad++;
        } else if (strcmp(dec, want_dec)) {
            fprintf(stderr, "%s: decode \"%s\": got \"%s\", want \"%s\"\n", what, text, dec,
                    want_dec);
            bad++;
        }
        free(dec);
        free(wids);

        /* round trip without BOS, where tokenizers round-trips too */
        if (json_object_get_boolean(jget(c, "roundtrip"))) {
            ids = NULL;
            dec = NULL;
            if (ig_tokenizer_encode(tok, text, tl, 0, &ids, &n, &err) != IG_OK ||
                ig_tokenizer_decode(tok, ids, n, &dec, &err) != IG_OK || strcmp(dec, text)) {
                fprintf(stderr, "%s: round trip of \"%s\" gave \"%s\"\n", what, text,
                        dec ? dec : err.msg);
                bad++;
            }
            free(ids);
            free(dec);
        }
    }
    return bad;
}

static void test_fixture_tokenizers(void) {
    json_object *root = load_json(ig_test_fixture("tokenizer/cases.json"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_object *list = jget(root, "tokenizers");
    CU_ASSERT_FATAL(list && json_object_array_length(list) >= 6);
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *e = json_object_array_get_idx(list, i);
        const char *file = json_object_get_string(jget(e, "file"));
        char path[256];
        snprintf(path, sizeof path, "tokenizer/%s", file);
        ig_gguf *g = NULL;
        ig_tokenizer *tok = load_fixture(path, &g);
        CU_ASSERT_PTR_NOT_NULL(tok);
        if (!tok) {
            ig_gguf_close(g);
            continue;
        }
        int add_bos = json_object_get_boolean(jget(e, "add_bos"));
        const char *kind = json_object_get_string(jget(e, "kind"));
        CU_ASSERT_EQUAL(ig_tokenizer_get_kind(tok),
                        !strcmp(kind, "byte_bpe") ? IG_TOKENIZER_BYTE_BPE : IG_TOKENIZER_SPM_BPE);
        CU_ASSERT_EQUAL(ig_tokenizer_vocab_size(tok), json_object_get_int(jget(e, "vocab_size")));
        CU_ASSERT_EQUAL(ig_tokenizer_adds_bos(tok), add_bos);
        CU_ASSERT_EQUAL(ig_tokenizer_bos(tok), json_object_get_int(jget(e, "bos")));
        int bad = check_cases(file, tok, jget(e, "cases"), add_bos);
        CU_ASSERT_EQUAL(bad, 0);
        ig_tokenizer_free(tok);
        ig_gguf_close(g);
    }
    json_object_put(root);
}

static void test_token_bytes_and_find(void) {
    ig_gguf *g = NULL;
    ig_tokenizer *tok = load_fixture("tokenizer/bytelevel_tokenizer.json", &g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
    size_t len;
    int32_t sp = ig_tokenizer_find(tok, "\xc4\xa0"); /* "Ġ", the byte-level spelling of " " */
    CU_ASSERT(sp >= 0);
    const char *b = ig_tokenizer_token_bytes(tok, sp, &len);
    CU_ASSERT(b && len == 1 && b[0] == ' ');
    b = ig_tokenizer_token_text(tok, sp, &len);
    CU_ASSERT(b && len == 2 && !memcmp(b, "\xc4\xa0", 2));
    int32_t im = ig_tokenizer_find(tok, "<|im_start|>");
    CU_ASSERT(im >= 0 && ig_tokenizer_is_special(tok, im));
    b = ig_tokenizer_token_bytes(tok, im, &len);
    CU_ASSERT(b && len == 12 && !memcmp(b, "<|im_start|>", 12));
    CU_ASSERT(!ig_tokenizer_is_special(tok, ig_tokenizer_find(tok, "<tool>")));
    CU_ASSERT_PTR_NULL(ig_tokenizer_token_bytes(tok, -1, &len));
    CU_ASSERT_PTR_NULL(ig_tokenizer_token_bytes(tok, ig_tokenizer_vocab_size(tok), &len));
    CU_ASSERT_EQUAL(ig_tokenizer_find(tok, "no such token"), -1);
    CU_ASSERT_EQUAL(ig_tokenizer_eos(tok), ig_tokenizer_find(tok, "<|endoftext|>")); /* fallback */
    ig_tokenizer_free(tok);

    tok = load_fixture("tokenizer/spm_tokenizer.json", &g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
    b = ig_tokenizer_token_bytes(tok, ig_tokenizer_find(tok, "<0xE2>"), &len);
    CU_ASSERT(b && len == 1 && (unsigned char)b[0] == 0xE2); /* a partial UTF-8 sequence */
    int32_t w = ig_tokenizer_find(tok, "\xe2\x96\x81kalo");
    if (w >= 0) {
        b = ig_tokenizer_token_bytes(tok, w, &len);
        CU_ASSERT(b && len == 5 && !memcmp(b, " kalo", 5));
    }
    CU_ASSERT_EQUAL(ig_tokenizer_bos(tok), 1);
    CU_ASSERT_EQUAL(ig_tokenizer_eos(tok), 2);
    /* invalid input */
    int32_t *ids = NULL;
    size_t n = 0;
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_EQUAL(ig_tokenizer_encode(tok, "ab\xff", 3, 0, &ids, &n, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "UTF-8"));
    int32_t bad_id = 1000000;
    char *dec = NULL;
    CU_ASSERT_EQUAL(ig_tokenizer_decode(tok, &bad_id, 1, &dec, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(dec);
    CU_ASSERT_EQUAL(ig_tokenizer_encode(tok, "", 0, 1, &ids, &n, &err), IG_OK);
    CU_ASSERT(n == 1 && ids[0] == 1);
    free(ids);
    ig_tokenizer_free(tok);
}

static int write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(s, f);
    return fclose(f);
}

/* Loading path must fail with code and a message containing each of needles. */
static void expect_hf_error(const char *path, ig_status code, const char *n1, const char *n2) {
    ig_tokenizer *tok = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_tokenizer_load_hf(path, &tok, &err);
    CU_ASSERT_EQUAL(rc, code);
    CU_ASSERT_PTR_NULL(tok);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, n1));
    if (n2) CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, n2));
    if (rc != code || !strstr(err.msg, n1) || (n2 && !strstr(err.msg, n2)))
        fprintf(stderr, "unexpected error for %s: [%d] %s\n", path, rc, err.msg);
    ig_tokenizer_free(tok);
}

/* Regression inputs that once crashed, hung or exhausted memory (tests/fixtures/tokenizer/hostile).
 */
static void test_hostile(void) {
    char path[4300];
    snprintf(path, sizeof path, "%s", ig_test_fixture("tokenizer/hostile/prepend_raw_byte.json"));
    expect_hf_error(path, IG_ERR_FORMAT, "prepend_raw_byte.json:1:", "invalid utf-8");
    snprintf(path, sizeof path, "%s", ig_test_fixture("tokenizer/hostile/sparse_id.json"));
    expect_hf_error(path, IG_ERR_FORMAT, "token id 2147483646 with only 1 tokens",
                    "more than 65536 ids would be unused");

    /* ByteFallback then a regex Replace: loads, and decodes as HF does (the lone byte becomes
     * U+FFFD, which the regex '.' replaces like any character) */
    snprintf(path, sizeof path, "%s",
             ig_test_fixture("tokenizer/hostile/bytefallback_then_regex.json"));
    ig_tokenizer *tok = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_tokenizer_load_hf(path, &tok, &err);
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    int32_t ids[] = {0, 1};
    char *text = NULL;
    rc = ig_tokenizer_decode(tok, ids, 2, &text, &err);
    CU_ASSERT_EQUAL(rc, IG_OK);
    CU_ASSERT(text && !strcmp(text, "xx"));
    free(text);
    ig_tokenizer_free(tok);

    /* a pre-tokenizer regex that backtracks exponentially: bounded, an error naming the cause */
    snprintf(path, sizeof path, "%s", ig_test_fixture("tokenizer/hostile/redos_split.json"));
    tok = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_tokenizer_load_hf(path, &tok, &err), IG_OK);
    char aab[64];
    memset(aab, 'a', 40);
    aab[40] = 'b';
    int32_t *out = NULL;
    size_t n_out = 0;
    rc = ig_tokenizer_encode(tok, aab, 41, 0, &out, &n_out, &err);
    CU_ASSERT_EQUAL(rc, IG_ERR_CAPACITY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "match steps"));
    free(out);
    ig_tokenizer_free(tok);
}

static void test_errors(void) {
    char path[4300];
    snprintf(path, sizeof path, "%s/missing/tokenizer.json", ig_test_tmpdir());
    expect_hf_error(path, IG_ERR_NOT_FOUND, "missing/tokenizer.json", "no such file");

    snprintf(path, sizeof path, "%s/malformed.json", ig_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(
        write_file(path, "{\"model\": {\"type\": \"BPE\",\n  \"vocab\": {\"a\": 0,}}}"), 0);
    expect_hf_error(path, IG_ERR_FORMAT, "malformed.json:2:", "malformed JSON");

    snprintf(path, sizeof path, "%s/truncated.json", ig_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(write_file(path, "{\"model\": {\"type\": \"BPE\""), 0);
    expect_hf_error(path, IG_ERR_FORMAT, "truncated.json", "malformed JSON");

    snprintf(path, sizeof path, "%s/badmerge.json", ig_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(
        write_file(path,
                   "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                   " \"merges\": [\"a b\", \"a zz\"]}}"),
        0);
    expect_hf_error(path, IG_ERR_FORMAT, "model.merges[1]", "'zz' is not in model.vocab");

    snprintf(path, sizeof path, "%s/badmerge2.json", ig_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(
        write_file(path, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1},"
                         " \"merges\": [[\"a\", \"b\"]]}}"),
        0);
    expect_hf_error(path, IG_ERR_FORMAT, "model.merges[0]", "'ab' is not in model.vocab");

    snprintf(path, sizeof path, "%s/unigram.json", ig_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(write_file(path, "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}"),
                          0);
    expect_hf_error(path, IG_ERR_UNSUPPORTED, "model.type 'Unigram'", NULL);

    snprintf(path, sizeof path, "%s/nfkc.json", ig_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(
        write_file(path, "{\"normalizer\": {\"type\": \"NFKC\"}, \"model\": {\"type\": \"BPE\", "
                         "\"vocab\": {\"a\": 0}, \"merges\": []}}"),
        0);
    expect_hf_error(path, IG_ERR_UNSUPPORTED, "normalizer type 'NFKC'", NULL);

    snprintf(path, sizeof path, "%s/noregex.json", ig_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(
        write_file(path,
                   "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"},"
                   " \"behavior\": \"Isolated\"}, \"model\": {\"type\": \"BPE\", "
                   "\"vocab\": {\"a\": 0}, \"merges\": []}}"),
        0);
    expect_hf_error(path, IG_ERR_FORMAT, "pre_tokenizer.pattern", "does not compile");

    /* GGUF without tokenizer.ggml.tokens, and with an unknown pre-tokenizer */
    const char *ggufs[2] = {"tokenizer/no_tokens.gguf", "tokenizer/bad_pre.gguf"};
    const char *needles[2] = {"tokenizer.ggml.tokens", "tokenizer.ggml.pre = 'no-such-pre'"};
    ig_status codes[2] = {IG_ERR_NOT_FOUND, IG_ERR_UNSUPPORTED};
    for (int i = 0; i < 2; i++) {
        ig_gguf *g = NULL;
        ig_tokenizer *tok = NULL;
        ig_error err;
        ig_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(ig_gguf_open(ig_test_fixture(ggufs[i]), &g, &err), IG_OK);
        ig_status rc = ig_tokenizer_load_gguf(g, &tok, &err);
        CU_ASSERT_EQUAL(rc, codes[i]);
        CU_ASSERT_PTR_NULL(tok);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needles[i]));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ggufs[i] + strlen("tokenizer/")));
        if (!strstr(err.msg, needles[i])) fprintf(stderr, "unexpected error: %s\n", err.msg);
        ig_gguf_close(g);
    }
}

/* The SmolLM2 GGUF tokenizer: the model is needed. */
static ig_tokenizer *load_smollm2(ig_gguf **g) {
    const char *model = ig_test_default_model();
    *g = NULL;
    if (!model) {
        ig_test_skip("default model not installed (tools/setup.sh, or set IGEN_MODEL)");
        return NULL;
    }
    ig_error err;
    ig_error_clear(&err);
    ig_tokenizer *tok = NULL;
    if (ig_gguf_open(model, g, &err) != IG_OK || ig_tokenizer_load_gguf(*g, &tok, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        CU_FAIL("cannot load the SmolLM2 tokenizer");
        return NULL;
    }
    return tok;
}

static void test_smollm2_tricky(void) {
    ig_gguf *g;
    ig_tokenizer *tok = load_smollm2(&g);
    if (!tok) {
        ig_gguf_close(g);
        return;
    }
    json_object *root = load_json(ig_test_fixture("tokenizer/smollm2_wikitext2_test.json"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_EQUAL(ig_tokenizer_get_kind(tok), IG_TOKENIZER_BYTE_BPE);
    CU_ASSERT_EQUAL(ig_tokenizer_vocab_size(tok), 49152);
    CU_ASSERT_EQUAL(ig_tokenizer_bos(tok), 1);
    CU_ASSERT_EQUAL(ig_tokenizer_eos(tok), 2);
    CU_ASSERT_EQUAL(ig_tokenizer_adds_bos(tok), 0);
    CU_ASSERT_EQUAL(check_cases("SmolLM2", tok, jget(root, "cases"), 0), 0);
    json_object_put(root);
    ig_tokenizer_free(tok);
    ig_gguf_close(g);
}

static void test_smollm2_wikitext(void) {
    const char *data = ig_test_shared("wikitext-2-raw/wiki.test.raw");
    if (!data) {
        ig_test_skip("shared data wikitext-2-raw/wiki.test.raw not found (IGEN_SHARED_DATA)");
        return;
    }
    ig_gguf *g;
    ig_tokenizer *tok = load_smollm2(&g);
    if (!tok) {
        ig_gguf_close(g);
        return;
    }
    json_object *root = load_json(ig_test_fixture("tokenizer/smollm2_wikitext2_test.json"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_object *wt = jget(root, "wikitext");
    char *text = NULL;
    size_t len = 0;
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(ig_read_file(data, &text, &len, &err), IG_OK);
    CU_ASSERT_EQUAL(len, (size_t)json_object_get_int64(jget(wt, "bytes")));

    int32_t *ids = NULL;
    size_t n = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ig_status rc = ig_tokenizer_encode(tok, text, len, 0, &ids, &n, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    printf("\n  WikiText-2 test: %zu bytes -> %zu tokens in %.3f s (%.1f MB/s)\n", len, n, dt,
           (double)len / dt / 1e6);

    size_t want_n = (size_t)json_object_get_int64(jget(wt, "count"));
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a64_ids(ids, n));
    CU_ASSERT_EQUAL(n, want_n);
    CU_ASSERT_STRING_EQUAL(hash, json_object_get_string(jget(wt, "fnv1a64")));
    json_object *first = jget(wt, "first_ids");
    size_t nf = json_object_array_length(first);
    CU_ASSERT(ids_equal("WikiText-2 (first ids)", "wiki.test.raw", ids, n < nf ? n : nf, first) ||
              n < nf);
    if (n != want_n || strcmp(hash, json_object_get_string(jget(wt, "fnv1a64")))) {
        /* locate the first difference by block hashes */
        size_t bs = (size_t)json_object_get_int64(jget(wt, "block_size"));
        json_object *blocks = jget(wt, "block_fnv1a64");
        size_t k = 0;
        for (; k < json_object_array_length(blocks) && k * bs < n; k++) {
            size_t m = n - k * bs < bs ? n - k * bs : bs;
            char bh[32];
            snprintf(bh, sizeof bh, "%016llx", (unsigned long long)fnv1a64_ids(ids + k * bs, m));
            if (strcmp(bh, json_object_get_string(json_object_array_get_idx(blocks, k)))) break;
        }
        fprintf(stderr,
                "WikiText-2: got %zu tokens hash %s, want %zu hash %s; first difference "
                "among ids [%zu, %zu)\n",
                n, hash, want_n, json_object_get_string(jget(wt, "fnv1a64")), k * bs, (k + 1) * bs);
    }

    /* the whole file decodes back to itself */
    char *dec = NULL;
    CU_ASSERT_EQUAL(ig_tokenizer_decode(tok, ids, n, &dec, &err), IG_OK);
    CU_ASSERT(dec && strlen(dec) == len && !memcmp(dec, text, len));
    free(dec);
    free(ids);
    free(text);
    json_object_put(root);
    ig_tokenizer_free(tok);
    ig_gguf_close(g);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("tokenizer", NULL, NULL);
    CU_add_test(s, "fixture_tokenizers", test_fixture_tokenizers);
    CU_add_test(s, "token_bytes_and_find", test_token_bytes_and_find);
    CU_add_test(s, "errors", test_errors);
    CU_add_test(s, "hostile", test_hostile);
    CU_pSuite m = CU_add_suite("smollm2", NULL, NULL);
    CU_add_test(m, "tricky_strings", test_smollm2_tricky);
    CU_add_test(m, "wikitext2_test", test_smollm2_wikitext);
}
