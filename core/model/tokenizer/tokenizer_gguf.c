/* Builds an ig_tokenizer from GGUF tokenizer.ggml.* metadata: "gpt2" (byte-level BPE with the
 * pre-tokenizer named by tokenizer.ggml.pre) and "llama" (SentencePiece BPE by piece scores, byte
 * fallback). It reads the GGUF only through core/model/io/gguf.h and never guesses: an unknown
 * model or pre-tokenizer name is an error naming the key and the value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/tokenizer/tokenizer_internal.h"

/* GGUF token types (llama.cpp's llama_token_type). */
enum { GGUF_TOK_NORMAL = 1, GGUF_TOK_UNKNOWN = 2, GGUF_TOK_CONTROL = 3, GGUF_TOK_USER = 4 };

typedef struct gguf_pre {
    const char *name;
    int digits;            /* Digits(individual_digits) first */
    const char *const *re; /* Split(regex, Isolated) + ByteLevel(use_regex=false); NULL: GPT-2 */
    int ignore_merges;
} gguf_pre;

/* tokenizer.ggml.pre values and the tokenizer.json pre-tokenizer each stands for. */
static const gguf_pre GGUF_PRES[] = {
    {"default", 0, NULL, 0},
    {"gpt2", 0, NULL, 0},
    {"gpt-2", 0, NULL, 0},
    /* SmolLM2's and StarCoder's own tokenizer.json: Digits(individual) + ByteLevel(GPT-2 regex) */
    {"smollm", 1, NULL, 0},
    {"starcoder", 1, NULL, 0},
    /* Llama-3's tokenizer.json: Split(regex) + ByteLevel(use_regex=false), ignore_merges */
    {"llama-bpe", 0, &IG_TOK_LLAMA3_REGEX, 1},
    {"llama3", 0, &IG_TOK_LLAMA3_REGEX, 1},
    {"llama-v3", 0, &IG_TOK_LLAMA3_REGEX, 1},
    {"qwen2", 0, &IG_TOK_QWEN2_REGEX, 0},
};

static int has_key(const ig_gguf *g, const char *key) {
    return ig_gguf_find_key(g, key) >= 0;
}

static ig_status opt_id(const ig_gguf *g, const char *key, int32_t n_vocab, int32_t *out,
                        ig_error *err) {
    if (!has_key(g, key)) return IG_OK;
    int64_t v;
    IG_TRY(ig_gguf_get_i64(g, key, &v, err));
    if (v < 0 || v >= n_vocab)
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: %s = %lld is outside the vocabulary (%d tokens)", ig_gguf_path(g),
                            key, (long long)v, n_vocab);
    *out = (int32_t)v;
    return IG_OK;
}

static ig_status opt_bool(const ig_gguf *g, const char *key, int def, int *out, ig_error *err) {
    *out = def;
    if (!has_key(g, key)) return IG_OK;
    return ig_gguf_get_bool(g, key, out, err);
}

static ig_status add_norm(ig_tokenizer *t, ig_tok_norm_type type, const char *text,
                          const char *literal, ig_error *err) {
    ig_tok_norm *v = realloc(t->norms, (t->n_norms + 1) * sizeof *v);
    if (!v) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    t->norms = v;
    ig_tok_norm *nm = &t->norms[t->n_norms++];
    memset(nm, 0, sizeof *nm);
    nm->type = type;
    nm->text_len = strlen(text);
    nm->text = malloc(nm->text_len + 1);
    if (!nm->text) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    memcpy(nm->text, text, nm->text_len + 1);
    if (literal)
        IG_TRY(ig_tok_pattern_init(&nm->pattern, literal, strlen(literal), 0, "Replace", err));
    return IG_OK;
}

static ig_status add_dec(ig_tokenizer *t, const ig_tok_dec *d, ig_error *err) {
    ig_tok_dec *v = realloc(t->decs, (t->n_decs + 1) * sizeof *v);
    if (!v) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    t->decs = v;
    t->decs[t->n_decs++] = *d;
    return IG_OK;
}

static ig_status add_pretok(ig_tokenizer *t, ig_tok_pretok *p, ig_error *err) {
    ig_tok_pretok *v = realloc(t->pretoks, (t->n_pretoks + 1) * sizeof *v);
    if (!v) {
        ig_tok_pattern_free(&p->pattern);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    t->pretoks = v;
    t->pretoks[t->n_pretoks++] = *p;
    return IG_OK;
}

static ig_status setup_gpt2(ig_tokenizer *t, const ig_gguf *g, ig_error *err) {
    const char *path = ig_gguf_path(g);
    const char *pre = "default";
    size_t pre_len = 7;
    if (has_key(g, "tokenizer.ggml.pre"))
        IG_TRY(ig_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len, err));
    const gguf_pre *sel = NULL;
    for (size_t i = 0; i < sizeof GGUF_PRES / sizeof *GGUF_PRES; i++)
        if (strlen(GGUF_PRES[i].name) == pre_len && !memcmp(GGUF_PRES[i].name, pre, pre_len))
            sel = &GGUF_PRES[i];
    if (!sel)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "%s: tokenizer.ggml.pre = '%.*s' is not a pre-tokenizer igen knows "
                            "(known: default, gpt2, gpt-2, smollm, starcoder, llama-bpe, llama3, "
                            "llama-v3, qwen2)",
                            path, (int)pre_len, pre);
    ig_tok_pretok p;
    if (sel->digits) {
        IG_TRY(ig_tok_pretok_digits(&p, 1, err));
        IG_TRY(add_pretok(t, &p, err));
    }
    if (sel->re) {
        memset(&p, 0, sizeof p);
        p.type = IG_TOK_PRE_SPLIT;
        p.behavior = IG_TOK_SPLIT_ISOLATED;
        p.has_pattern = 1;
        IG_TRY(ig_tok_pattern_init(&p.pattern, *sel->re, strlen(*sel->re), 1, "tokenizer.ggml.pre",
                                   err));
        IG_TRY(add_pretok(t, &p, err));
    }
    IG_TRY(ig_tok_pretok_bytelevel(&p, 0, sel->re == NULL, err));
    IG_TRY(add_pretok(t, &p, err));
    t->ignore_merges = sel->ignore_merges;
    t->byte_level = 1;
    t->kind = IG_TOKENIZER_BYTE_BPE;
    t->bpe_mode = IG_TOK_BPE_RANKS;
    ig_tok_dec d = {0};
    d.type = IG_TOK_DEC_BYTELEVEL;
    IG_TRY(add_dec(t, &d, err));
    t->has_decoder = 1;

    const char *key = "tokenizer.ggml.merges";
    ig_gguf_vtype et;
    uint64_t nm;
    IG_TRY(ig_gguf_get_arr_info(g, key, &et, &nm, err));
    if (et != IG_GGUF_STRING)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: %s: expected an array of strings", path, key);
    ig_tok_buf join = {0};
    for (uint64_t i = 0; i < nm; i++) {
        const char *s;
        size_t n;
        ig_status rc = ig_gguf_get_arr_str(g, key, i, &s, &n, err);
        if (rc != IG_OK) {
            ig_tok_buf_free(&join);
            return rc;
        }
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) {
            ig_tok_buf_free(&join);
            return ig_error_set(err, IG_ERR_FORMAT,
                                "%s: %s[%llu] = '%.*s': expected \"left right\"", path, key,
                                (unsigned long long)i, (int)n, s);
        }
        size_t al = (size_t)(sp - s), bl = n - al - 1;
        int32_t a = ig_tok_strmap_get(&t->vocab_map, s, al);
        int32_t b = ig_tok_strmap_get(&t->vocab_map, sp + 1, bl);
        join.n = 0;
        if (ig_tok_buf_append(&join, s, al) || ig_tok_buf_append(&join, sp + 1, bl)) {
            ig_tok_buf_free(&join);
            return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        }
        int32_t m = ig_tok_strmap_get(&t->vocab_map, join.p, join.n);
        if (a < 0 || b < 0 || m < 0) {
            ig_status r =
                ig_error_set(err, IG_ERR_FORMAT,
                             "%s: %s[%llu] = '%.*s': token '%.*s' is not in tokenizer.ggml.tokens",
                             path, key, (unsigned long long)i, (int)n, s,
                             (int)(a < 0   ? al
                                   : b < 0 ? bl
                                           : join.n),
                             a < 0   ? s
                             : b < 0 ? sp + 1
                                     : join.p);
            ig_tok_buf_free(&join);
            return r;
        }
        if (ig_tok_pairmap_put(&t->merges, a, b, (uint32_t)i, m)) {
            ig_tok_buf_free(&join);
            return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        }
    }
    ig_tok_buf_free(&join);
    return IG_OK;
}

static ig_status setup_llama(ig_tokenizer *t, const ig_gguf *g, ig_error *err) {
    const char *path = ig_gguf_path(g);
    t->kind = IG_TOKENIZER_SPM_BPE;
    t->bpe_mode = IG_TOK_BPE_SCORES;
    t->byte_fallback = 1;
    t->scores = calloc(t->n_vocab ? (size_t)t->n_vocab : 1, sizeof *t->scores);
    if (!t->scores) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    const char *key = "tokenizer.ggml.scores";
    if (has_key(g, key)) {
        ig_gguf_vtype et;
        uint64_t n;
        IG_TRY(ig_gguf_get_arr_info(g, key, &et, &n, err));
        if (et != IG_GGUF_F32 || n != (uint64_t)t->n_vocab)
            return ig_error_set(err, IG_ERR_FORMAT,
                                "%s: %s: expected %d float32 values, found %llu of type %d", path,
                                key, t->n_vocab, (unsigned long long)n, (int)et);
        const void *data;
        IG_TRY(ig_gguf_get_arr_data(g, key, &data, err));
        memcpy(t->scores, data, (size_t)n * sizeof(float));
    }
    int add_space;
    IG_TRY(opt_bool(g, "tokenizer.ggml.add_space_prefix", 1, &add_space, err));
    /* The layout of Llama-2's tokenizer.json (and llama.cpp): "▁" before every run of text
     * (at the start and after each special token), spaces spelled "▁". */
    if (add_space) IG_TRY(add_norm(t, IG_TOK_NORM_PREPEND, "\xE2\x96\x81", NULL, err));
    IG_TRY(add_norm(t, IG_TOK_NORM_REPLACE, "\xE2\x96\x81", " ", err));
    ig_tok_dec d = {0};
    d.type = IG_TOK_DEC_REPLACE;
    IG_TRY(ig_tok_pattern_init(&d.pattern, "\xE2\x96\x81", 3, 0, "Replace", err));
    d.text = malloc(2);
    if (!d.text) {
        ig_tok_pattern_free(&d.pattern);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    memcpy(d.text, " ", 2);
    d.text_len = 1;
    IG_TRY(add_dec(t, &d, err));
    memset(&d, 0, sizeof d);
    d.type = IG_TOK_DEC_BYTEFALLBACK;
    IG_TRY(add_dec(t, &d, err));
    d.type = IG_TOK_DEC_FUSE;
    IG_TRY(add_dec(t, &d, err));
    if (add_space) {
        d.type = IG_TOK_DEC_STRIP;
        d.strip_cp = ' ';
        d.strip_start = 1;
        IG_TRY(add_dec(t, &d, err));
    }
    t->has_decoder = 1;
    t->unk_id = ig_tok_strmap_get(&t->vocab_map, "<unk>", 5);
    return opt_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk_id, err);
}

static ig_status load(ig_tokenizer *t, const ig_gguf *g, ig_error *err) {
    const char *path = ig_gguf_path(g);
    const char *model;
    size_t model_len;
    /* Checked here, so that the message does not depend on the reader's wording. */
    const char *required[2] = {"tokenizer.ggml.model", "tokenizer.ggml.tokens"};
    for (int i = 0; i < 2; i++)
        if (!has_key(g, required[i]))
            return ig_error_set(err, IG_ERR_NOT_FOUND,
                                "%s: no %s: this GGUF carries no tokenizer (or not one igen reads)",
                                path, required[i]);
    IG_TRY(ig_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len, err));
    int is_gpt2 = model_len == 4 && !memcmp(model, "gpt2", 4);
    int is_llama = model_len == 5 && !memcmp(model, "llama", 5);
    if (!is_gpt2 && !is_llama)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "%s: tokenizer.ggml.model = '%.*s' is not supported (gpt2, llama)",
                            path, (int)model_len, model);

    const char *key = "tokenizer.ggml.tokens";
    ig_gguf_vtype et;
    uint64_t n;
    IG_TRY(ig_gguf_get_arr_info(g, key, &et, &n, err));
    if (et != IG_GGUF_STRING)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: %s: expected an array of strings", path, key);
    if (n == 0 || n >= INT32_MAX)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: %s: %llu tokens", path, key,
                            (unsigned long long)n);
    IG_TRY(ig_tok_set_vocab_size(t, (int32_t)n, err));
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t l;
        IG_TRY(ig_gguf_get_arr_str(g, key, i, &s, &l, err));
        if (ig_tok_utf8_check(s, l) != l)
            return ig_error_set(err, IG_ERR_FORMAT, "%s: %s[%llu] is not valid UTF-8", path, key,
                                (unsigned long long)i);
        IG_TRY(ig_tok_set_token(t, (int32_t)i, s, l, err));
        if (ig_tok_strmap_put(&t->vocab_map, s, l, (int32_t)i))
            return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }

    key = "tokenizer.ggml.token_type";
    if (has_key(g, key)) {
        uint64_t nt;
        IG_TRY(ig_gguf_get_arr_info(g, key, &et, &nt, err));
        if ((et != IG_GGUF_I32 && et != IG_GGUF_U32) || nt != n)
            return ig_error_set(err, IG_ERR_FORMAT,
                                "%s: %s: expected %llu int32 values, found %llu", path, key,
                                (unsigned long long)n, (unsigned long long)nt);
        const void *data;
        IG_TRY(ig_gguf_get_arr_data(g, key, &data, err));
        for (uint64_t i = 0; i < n; i++) {
            int32_t ty;
            memcpy(&ty, (const char *)data + i * 4, 4);
            /* Matched whole in the text as llama.cpp does: control and user-defined tokens, and
             * <unk> of SentencePiece vocabularies (a special added token in their tokenizer.json).
             */
            if (ty == GGUF_TOK_CONTROL || ty == GGUF_TOK_USER ||
                (is_llama && ty == GGUF_TOK_UNKNOWN)) {
                ig_tok_added a = {0};
                a.id = (int32_t)i;
                a.content = t->text_pool.p + t->text_off[i];
                a.len = t->text_len[i];
                a.special = ty != GGUF_TOK_USER;
                /* copy: the pool may move while adding */
                char *copy = malloc(a.len + 1);
                if (!copy) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
                memcpy(copy, a.content, a.len);
                a.content = copy;
                ig_status rc = ig_tok_add_added(t, &a, err);
                free(copy);
                IG_TRY(rc);
            }
        }
    }

    if (is_gpt2)
        IG_TRY(setup_gpt2(t, g, err));
    else
        IG_TRY(setup_llama(t, g, err));
    IG_TRY(opt_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err));
    IG_TRY(opt_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err));
    /* Absent flag: llama.cpp and transformers add BOS for SentencePiece vocabularies only. */
    IG_TRY(opt_bool(g, "tokenizer.ggml.add_bos_token", is_llama, &t->adds_bos, err));
    return ig_tok_finish(t, path, err);
}

ig_status ig_tokenizer_load_gguf(const ig_gguf *g, ig_tokenizer **out, ig_error *err) {
    *out = NULL;
    ig_tokenizer *t = ig_tok_alloc(err);
    if (!t) return IG_ERR_NOMEM;
    ig_status rc = load(t, g, err);
    if (rc != IG_OK) {
        ig_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return IG_OK;
}
