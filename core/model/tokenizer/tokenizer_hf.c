/* Loads a Hugging Face tokenizer.json (BPE model) into an ig_tokenizer, plus bos/eos from a
 * tokenizer_config.json beside it. Every component tokenizers would accept but igen does not
 * implement is refused with IG_ERR_UNSUPPORTED naming the JSON key: never a silent approximation.
 */
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/mapfile.h"
#include "core/model/tokenizer/tokenizer_internal.h"

typedef struct hf_ctx {
    const char *path;
    ig_error *err;
    ig_tokenizer *t;
} hf_ctx;

static ig_status bad(hf_ctx *c, ig_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static ig_status bad(hf_ctx *c, ig_status code, const char *fmt, ...) {
    char msg[IG_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ig_error_set(c->err, code, "%s: %s", c->path, msg);
}

static json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object)) return NULL;
    if (!json_object_object_get_ex(o, key, &v)) return NULL;
    return v; /* NULL too for a JSON null */
}

static const char *type_name(json_object *o) {
    return o ? json_type_to_name(json_object_get_type(o)) : "null";
}

/* Optional boolean: absent/null -> def. */
static ig_status get_bool(hf_ctx *c, json_object *o, const char *key, const char *where, int def,
                          int *out) {
    json_object *v = get(o, key);
    if (!v) {
        *out = def;
        return IG_OK;
    }
    if (!json_object_is_type(v, json_type_boolean))
        return bad(c, IG_ERR_FORMAT, "%s.%s: expected a boolean, found %s", where, key,
                   type_name(v));
    *out = json_object_get_boolean(v);
    return IG_OK;
}

static ig_status get_string(hf_ctx *c, json_object *o, const char *key, const char *where,
                            const char **s, size_t *n) {
    json_object *v = get(o, key);
    if (!v || !json_object_is_type(v, json_type_string))
        return bad(c, IG_ERR_FORMAT, "%s.%s: expected a string, found %s", where, key,
                   v ? type_name(v) : "nothing");
    *s = json_object_get_string(v);
    *n = (size_t)json_object_get_string_len(v);
    return IG_OK;
}

static const char *type_of(json_object *o) {
    json_object *ty = get(o, "type");
    return ty && json_object_is_type(ty, json_type_string) ? json_object_get_string(ty) : NULL;
}

/* A single-character string (Metaspace replacement, Strip content). */
static ig_status get_char(hf_ctx *c, json_object *o, const char *key, const char *where,
                          char out[5], uint32_t *cp) {
    const char *s = NULL;
    size_t n = 0;
    IG_TRY(get_string(c, o, key, where, &s, &n));
    uint32_t v = 0;
    size_t l = n ? ig_tok_utf8_valid_len((const unsigned char *)s, n) : 0;
    if (!l || l != n)
        return bad(c, IG_ERR_FORMAT, "%s.%s: expected one character, found '%s'", where, key, s);
    ig_tok_utf8_decode(s, &v);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    if (cp) *cp = v;
    return IG_OK;
}

/* {"String": s} or {"Regex": r} */
static ig_status get_pattern(hf_ctx *c, json_object *o, const char *where, ig_tok_pattern *p) {
    json_object *pat = get(o, "pattern");
    json_object *v;
    char what[256];
    snprintf(what, sizeof what, "%s: %s.pattern", c->path, where);
    if ((v = get(pat, "String")) && json_object_is_type(v, json_type_string))
        return ig_tok_pattern_init(p, json_object_get_string(v),
                                   (size_t)json_object_get_string_len(v), 0, what, c->err);
    if ((v = get(pat, "Regex")) && json_object_is_type(v, json_type_string))
        return ig_tok_pattern_init(p, json_object_get_string(v),
                                   (size_t)json_object_get_string_len(v), 1, what, c->err);
    return bad(c, IG_ERR_FORMAT, "%s.pattern: expected {\"String\": ...} or {\"Regex\": ...}",
               where);
}

/* ---- model ---- */

static ig_status parse_merge(hf_ctx *c, json_object *m, size_t i, const char **a, size_t *al,
                             const char **b, size_t *bl) {
    if (json_object_is_type(m, json_type_string)) {
        const char *s = json_object_get_string(m);
        size_t n = (size_t)json_object_get_string_len(m);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
            return bad(c, IG_ERR_FORMAT,
                       "model.merges[%zu]: expected \"left right\" (one space), found '%s'", i, s);
        *a = s;
        *al = (size_t)(sp - s);
        *b = sp + 1;
        *bl = n - *al - 1;
        return IG_OK;
    }
    if (json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2) {
        json_object *x = json_object_array_get_idx(m, 0), *y = json_object_array_get_idx(m, 1);
        if (json_object_is_type(x, json_type_string) && json_object_is_type(y, json_type_string)) {
            *a = json_object_get_string(x);
            *al = (size_t)json_object_get_string_len(x);
            *b = json_object_get_string(y);
            *bl = (size_t)json_object_get_string_len(y);
            return IG_OK;
        }
    }
    return bad(c, IG_ERR_FORMAT,
               "model.merges[%zu]: expected a string or a pair of strings, found %s", i,
               type_name(m));
}

static ig_status load_model(hf_ctx *c, json_object *root, json_object *model) {
    ig_tokenizer *t = c->t;
    if (!model || !json_object_is_type(model, json_type_object))
        return bad(c, IG_ERR_FORMAT, "model: expected an object, found %s",
                   model ? type_name(model) : "nothing");
    const char *ty = type_of(model);
    if (ty && strcmp(ty, "BPE"))
        return bad(c, IG_ERR_UNSUPPORTED, "model.type '%s' is not supported (only BPE)", ty);
    json_object *vocab = get(model, "vocab"), *merges = get(model, "merges");
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return bad(c, IG_ERR_FORMAT, "model.vocab: expected an object of token -> id, found %s",
                   vocab ? type_name(vocab) : "nothing");
    if (!merges || !json_object_is_type(merges, json_type_array))
        return bad(c, IG_ERR_FORMAT, "model.merges: expected an array, found %s",
                   merges ? type_name(merges) : "nothing");

    json_object *v = get(model, "dropout");
    if (v && json_object_get_double(v) != 0.0)
        return bad(c, IG_ERR_UNSUPPORTED, "model.dropout = %g: BPE dropout is not supported",
                   json_object_get_double(v));
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = get(model, keys[i]);
        if (v && (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) != 0))
            return bad(c, IG_ERR_UNSUPPORTED, "model.%s = '%s' is not supported", keys[i],
                       json_object_get_string(v));
    }
    IG_TRY(get_bool(c, model, "byte_fallback", "model", 0, &t->byte_fallback));
    IG_TRY(get_bool(c, model, "fuse_unk", "model", 0, &t->fuse_unk));
    IG_TRY(get_bool(c, model, "ignore_merges", "model", 0, &t->ignore_merges));

    /* id space: the model's ids and the added tokens' ids */
    int64_t max_id = -1;
    json_object_object_foreach(vocab, key, val) {
        if (!json_object_is_type(val, json_type_int))
            return bad(c, IG_ERR_FORMAT, "model.vocab['%s']: expected an integer id, found %s", key,
                       type_name(val));
        int64_t id = json_object_get_int64(val);
        if (id < 0 || id >= INT32_MAX)
            return bad(c, IG_ERR_FORMAT, "model.vocab['%s']: id %lld out of range", key,
                       (long long)id);
        if (id > max_id) max_id = id;
    }
    json_object *added = get(root, "added_tokens");
    if (added && !json_object_is_type(added, json_type_array))
        return bad(c, IG_ERR_FORMAT, "added_tokens: expected an array, found %s", type_name(added));
    size_t n_added = added ? json_object_array_length(added) : 0;
    for (size_t i = 0; i < n_added; i++) {
        json_object *id = get(json_object_array_get_idx(added, i), "id");
        if (!id || !json_object_is_type(id, json_type_int) || json_object_get_int64(id) < 0 ||
            json_object_get_int64(id) >= INT32_MAX)
            return bad(c, IG_ERR_FORMAT, "added_tokens[%zu].id: expected a non-negative integer",
                       i);
        if (json_object_get_int64(id) > max_id) max_id = json_object_get_int64(id);
    }
    /* The id space is sized by the largest id: bound the ids no token uses, so that one entry
     * with id 2^31-2 cannot ask for gigabytes (real files leave a few ids unused, if any). */
    int64_t n_tokens = (int64_t)json_object_object_length(vocab) + (int64_t)n_added;
    if (max_id + 1 > n_tokens + IG_TOK_MAX_UNUSED_IDS)
        return bad(c, IG_ERR_FORMAT,
                   "token id %lld with only %lld tokens in the file: more than %d ids would be "
                   "unused (model.vocab and added_tokens ids should be dense)",
                   (long long)max_id, (long long)n_tokens, IG_TOK_MAX_UNUSED_IDS);
    IG_TRY(ig_tok_set_vocab_size(t, (int32_t)(max_id + 1), c->err));

    json_object_object_foreach(vocab, key2, val2) {
        int32_t id = (int32_t)json_object_get_int64(val2);
        size_t kl = strlen(key2);
        IG_TRY(ig_tok_set_token(t, id, key2, kl, c->err));
        if (ig_tok_strmap_put(&t->vocab_map, key2, kl, id))
            return bad(c, IG_ERR_NOMEM, "out of memory");
    }

    /* merges: both halves and their join must be vocabulary tokens (as tokenizers checks) */
    size_t nm = json_object_array_length(merges);
    ig_tok_buf join = {0};
    for (size_t i = 0; i < nm; i++) {
        const char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        ig_status rc = parse_merge(c, json_object_array_get_idx(merges, i), i, &a, &al, &b, &bl);
        if (rc != IG_OK) {
            ig_tok_buf_free(&join);
            return rc;
        }
        int32_t ia = ig_tok_strmap_get(&t->vocab_map, a, al);
        int32_t ib = ig_tok_strmap_get(&t->vocab_map, b, bl);
        join.n = 0;
        if (ig_tok_buf_append(&join, a, al) || ig_tok_buf_append(&join, b, bl)) {
            ig_tok_buf_free(&join);
            return bad(c, IG_ERR_NOMEM, "out of memory");
        }
        int32_t im = ig_tok_strmap_get(&t->vocab_map, join.p, join.n);
        if (ia < 0 || ib < 0 || im < 0) {
            const char *which = ia < 0 ? a : ib < 0 ? b : join.p;
            int wl = (int)(ia < 0 ? al : ib < 0 ? bl : join.n);
            ig_status r =
                bad(c, IG_ERR_FORMAT,
                    "model.merges[%zu] ('%.*s' + '%.*s'): token '%.*s' is not in model.vocab", i,
                    (int)al, a, (int)bl, b, wl, which);
            ig_tok_buf_free(&join);
            return r;
        }
        if (ig_tok_pairmap_put(&t->merges, ia, ib, (uint32_t)i, im)) {
            ig_tok_buf_free(&join);
            return bad(c, IG_ERR_NOMEM, "out of memory");
        }
    }
    ig_tok_buf_free(&join);

    v = get(model, "unk_token");
    if (v) {
        if (!json_object_is_type(v, json_type_string))
            return bad(c, IG_ERR_FORMAT, "model.unk_token: expected a string, found %s",
                       type_name(v));
        t->unk_id = ig_tok_strmap_get(&t->vocab_map, json_object_get_string(v),
                                      (size_t)json_object_get_string_len(v));
        if (t->unk_id < 0)
            return bad(c, IG_ERR_FORMAT, "model.unk_token '%s' is not in model.vocab",
                       json_object_get_string(v));
    }

    for (size_t i = 0; i < n_added; i++) {
        json_object *o = json_object_array_get_idx(added, i);
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        ig_tok_added a = {0};
        const char *content;
        IG_TRY(get_string(c, o, "content", where, &content, &a.len));
        a.content = (char *)content;
        a.id = (int32_t)json_object_get_int64(get(o, "id"));
        int special, normalized, lstrip, rstrip, single_word;
        IG_TRY(get_bool(c, o, "special", where, 0, &special));
        IG_TRY(get_bool(c, o, "normalized", where, !special, &normalized));
        IG_TRY(get_bool(c, o, "lstrip", where, 0, &lstrip));
        IG_TRY(get_bool(c, o, "rstrip", where, 0, &rstrip));
        IG_TRY(get_bool(c, o, "single_word", where, 0, &single_word));
        a.special = (uint8_t)special;
        a.normalized = (uint8_t)normalized;
        a.lstrip = (uint8_t)lstrip;
        a.rstrip = (uint8_t)rstrip;
        a.single_word = (uint8_t)single_word;
        IG_TRY(ig_tok_add_added(t, &a, c->err));
    }
    return IG_OK;
}

/* ---- normalizer / pre-tokenizer / decoder ---- */

static ig_status add_norm(hf_ctx *c, json_object *o, const char *where) {
    ig_tokenizer *t = c->t;
    if (!o) return IG_OK;
    const char *ty = type_of(o);
    if (!ty) return bad(c, IG_ERR_FORMAT, "%s: expected an object with a \"type\"", where);
    if (!strcmp(ty, "Sequence")) {
        json_object *list = get(o, "normalizers");
        if (!list || !json_object_is_type(list, json_type_array))
            return bad(c, IG_ERR_FORMAT, "%s.normalizers: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            char w[256];
            snprintf(w, sizeof w, "%s.normalizers[%zu]", where, i);
            IG_TRY(add_norm(c, json_object_array_get_idx(list, i), w));
        }
        return IG_OK;
    }
    ig_tok_norm nm = {0};
    const char *s = NULL;
    size_t n = 0;
    if (!strcmp(ty, "Prepend")) {
        nm.type = IG_TOK_NORM_PREPEND;
        IG_TRY(get_string(c, o, "prepend", where, &s, &n));
    } else if (!strcmp(ty, "Replace")) {
        nm.type = IG_TOK_NORM_REPLACE;
        IG_TRY(get_string(c, o, "content", where, &s, &n));
    } else {
        return bad(
            c, IG_ERR_UNSUPPORTED,
            "%s: normalizer type '%s' is not supported (supported: Prepend, Replace, Sequence)",
            where, ty);
    }
    ig_tok_norm *v = realloc(t->norms, (t->n_norms + 1) * sizeof *v);
    if (!v) return bad(c, IG_ERR_NOMEM, "out of memory");
    t->norms = v;
    nm.text = malloc(n + 1);
    if (!nm.text) return bad(c, IG_ERR_NOMEM, "out of memory");
    memcpy(nm.text, s, n);
    nm.text[n] = '\0';
    nm.text_len = n;
    t->norms[t->n_norms++] = nm; /* owned from here on, freed with the tokenizer */
    if (nm.type == IG_TOK_NORM_REPLACE)
        IG_TRY(get_pattern(c, o, where, &t->norms[t->n_norms - 1].pattern));
    return IG_OK;
}

static ig_status parse_prepend_scheme(hf_ctx *c, json_object *o, const char *where,
                                      ig_tok_prepend_scheme *out) {
    json_object *ps = get(o, "prepend_scheme");
    *out = IG_TOK_PREPEND_ALWAYS;
    if (ps) {
        const char *s = json_object_get_string(ps);
        if (!strcmp(s, "always"))
            *out = IG_TOK_PREPEND_ALWAYS;
        else if (!strcmp(s, "first"))
            *out = IG_TOK_PREPEND_FIRST;
        else if (!strcmp(s, "never"))
            *out = IG_TOK_PREPEND_NEVER;
        else
            return bad(c, IG_ERR_FORMAT,
                       "%s.prepend_scheme: expected always/first/never, found '%s'", where, s);
    }
    json_object *aps = get(o, "add_prefix_space"); /* legacy spelling */
    if (aps && json_object_is_type(aps, json_type_boolean) && !json_object_get_boolean(aps)) {
        if (ps && *out != IG_TOK_PREPEND_NEVER)
            return bad(c, IG_ERR_FORMAT, "%s: add_prefix_space does not match prepend_scheme",
                       where);
        *out = IG_TOK_PREPEND_NEVER;
    }
    return IG_OK;
}

static ig_status push_pretok(hf_ctx *c, ig_tok_pretok *p) {
    ig_tokenizer *t = c->t;
    ig_tok_pretok *v = realloc(t->pretoks, (t->n_pretoks + 1) * sizeof *v);
    if (!v) {
        ig_tok_pattern_free(&p->pattern);
        return bad(c, IG_ERR_NOMEM, "out of memory");
    }
    t->pretoks = v;
    t->pretoks[t->n_pretoks++] = *p;
    return IG_OK;
}

static ig_status add_pretok(hf_ctx *c, json_object *o, const char *where) {
    ig_tokenizer *t = c->t;
    if (!o) return IG_OK;
    const char *ty = type_of(o);
    if (!ty) return bad(c, IG_ERR_FORMAT, "%s: expected an object with a \"type\"", where);
    if (t->n_pretoks && t->pretoks[t->n_pretoks - 1].type == IG_TOK_PRE_BYTELEVEL)
        return bad(c, IG_ERR_UNSUPPORTED,
                   "%s: a pre-tokenizer after ByteLevel is not supported (ByteLevel must be last)",
                   where);
    ig_tok_pretok p = {0};
    if (!strcmp(ty, "Sequence")) {
        json_object *list = get(o, "pretokenizers");
        if (!list || !json_object_is_type(list, json_type_array))
            return bad(c, IG_ERR_FORMAT, "%s.pretokenizers: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            char w[256];
            snprintf(w, sizeof w, "%s.pretokenizers[%zu]", where, i);
            IG_TRY(add_pretok(c, json_object_array_get_idx(list, i), w));
        }
        return IG_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        int aps, use_regex;
        IG_TRY(get_bool(c, o, "add_prefix_space", where, 1, &aps));
        IG_TRY(get_bool(c, o, "use_regex", where, 1, &use_regex));
        IG_TRY(ig_tok_pretok_bytelevel(&p, aps, use_regex, c->err));
        t->byte_level = 1;
        return push_pretok(c, &p);
    }
    if (!strcmp(ty, "Digits")) {
        int individual;
        IG_TRY(get_bool(c, o, "individual_digits", where, 0, &individual));
        IG_TRY(ig_tok_pretok_digits(&p, individual, c->err));
        return push_pretok(c, &p);
    }
    if (!strcmp(ty, "Split")) {
        p.type = IG_TOK_PRE_SPLIT;
        const char *beh = NULL;
        size_t bl = 0;
        IG_TRY(get_string(c, o, "behavior", where, &beh, &bl));
        if (!strcmp(beh, "Removed"))
            p.behavior = IG_TOK_SPLIT_REMOVED;
        else if (!strcmp(beh, "Isolated"))
            p.behavior = IG_TOK_SPLIT_ISOLATED;
        else if (!strcmp(beh, "MergedWithPrevious"))
            p.behavior = IG_TOK_SPLIT_MERGED_PREV;
        else if (!strcmp(beh, "MergedWithNext"))
            p.behavior = IG_TOK_SPLIT_MERGED_NEXT;
        else if (!strcmp(beh, "Contiguous"))
            p.behavior = IG_TOK_SPLIT_CONTIGUOUS;
        else
            return bad(c, IG_ERR_FORMAT, "%s.behavior: unknown value '%s'", where, beh);
        IG_TRY(get_bool(c, o, "invert", where, 0, &p.invert));
        p.has_pattern = 1;
        IG_TRY(get_pattern(c, o, where, &p.pattern));
        return push_pretok(c, &p);
    }
    if (!strcmp(ty, "Metaspace")) {
        p.type = IG_TOK_PRE_METASPACE;
        IG_TRY(get_char(c, o, "replacement", where, p.replacement, NULL));
        IG_TRY(parse_prepend_scheme(c, o, where, &p.prepend));
        IG_TRY(get_bool(c, o, "split", where, 1, &p.split));
        if (p.split) {
            char what[256];
            snprintf(what, sizeof what, "%s: %s", c->path, where);
            IG_TRY(ig_tok_pattern_init(&p.pattern, p.replacement, strlen(p.replacement), 0, what,
                                       c->err));
            p.has_pattern = 1;
        }
        return push_pretok(c, &p);
    }
    return bad(c, IG_ERR_UNSUPPORTED,
               "%s: pre-tokenizer type '%s' is not supported (supported: ByteLevel, Digits, Split, "
               "Metaspace, Sequence)",
               where, ty);
}

static ig_status push_dec(hf_ctx *c, ig_tok_dec *d) {
    ig_tokenizer *t = c->t;
    ig_tok_dec *v = realloc(t->decs, (t->n_decs + 1) * sizeof *v);
    if (!v) {
        ig_tok_pattern_free(&d->pattern);
        free(d->text);
        return bad(c, IG_ERR_NOMEM, "out of memory");
    }
    t->decs = v;
    t->decs[t->n_decs++] = *d;
    return IG_OK;
}

static ig_status add_dec(hf_ctx *c, json_object *o, const char *where) {
    if (!o) return IG_OK;
    const char *ty = type_of(o);
    if (!ty) return bad(c, IG_ERR_FORMAT, "%s: expected an object with a \"type\"", where);
    ig_tok_dec d = {0};
    if (!strcmp(ty, "Sequence")) {
        json_object *list = get(o, "decoders");
        if (!list || !json_object_is_type(list, json_type_array))
            return bad(c, IG_ERR_FORMAT, "%s.decoders: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            char w[256];
            snprintf(w, sizeof w, "%s.decoders[%zu]", where, i);
            IG_TRY(add_dec(c, json_object_array_get_idx(list, i), w));
        }
        return IG_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        d.type = IG_TOK_DEC_BYTELEVEL;
    } else if (!strcmp(ty, "ByteFallback")) {
        d.type = IG_TOK_DEC_BYTEFALLBACK;
    } else if (!strcmp(ty, "Fuse")) {
        d.type = IG_TOK_DEC_FUSE;
    } else if (!strcmp(ty, "Metaspace")) {
        d.type = IG_TOK_DEC_METASPACE;
        IG_TRY(get_char(c, o, "replacement", where, d.replacement, NULL));
        IG_TRY(parse_prepend_scheme(c, o, where, &d.prepend));
    } else if (!strcmp(ty, "Strip")) {
        d.type = IG_TOK_DEC_STRIP;
        IG_TRY(get_char(c, o, "content", where, NULL, &d.strip_cp));
        json_object *st = get(o, "start"), *sp = get(o, "stop");
        d.strip_start = st ? (size_t)json_object_get_int64(st) : 0;
        d.strip_stop = sp ? (size_t)json_object_get_int64(sp) : 0;
    } else if (!strcmp(ty, "Replace")) {
        d.type = IG_TOK_DEC_REPLACE;
        const char *s = NULL;
        size_t n = 0;
        IG_TRY(get_string(c, o, "content", where, &s, &n));
        IG_TRY(get_pattern(c, o, where, &d.pattern));
        d.text = malloc(n + 1);
        if (!d.text) {
            ig_tok_pattern_free(&d.pattern);
            return bad(c, IG_ERR_NOMEM, "out of memory");
        }
        memcpy(d.text, s, n);
        d.text[n] = '\0';
        d.text_len = n;
    } else {
        return bad(
            c, IG_ERR_UNSUPPORTED,
            "%s: decoder type '%s' is not supported (supported: ByteLevel, Metaspace, Replace, "
            "ByteFallback, Fuse, Strip, Sequence)",
            where, ty);
    }
    return push_dec(c, &d);
}

/* BOS from the post-processor: the special tokens a TemplateProcessing puts before $A. */
static ig_status load_post(hf_ctx *c, json_object *o, const char *where) {
    ig_tokenizer *t = c->t;
    if (!o) return IG_OK;
    const char *ty = type_of(o);
    if (!ty) return bad(c, IG_ERR_FORMAT, "%s: expected an object with a \"type\"", where);
    if (!strcmp(ty, "ByteLevel")) return IG_OK; /* offsets only */
    if (!strcmp(ty, "Sequence")) {
        json_object *list = get(o, "processors");
        if (!list || !json_object_is_type(list, json_type_array))
            return bad(c, IG_ERR_FORMAT, "%s.processors: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            char w[256];
            snprintf(w, sizeof w, "%s.processors[%zu]", where, i);
            IG_TRY(load_post(c, json_object_array_get_idx(list, i), w));
        }
        return IG_OK;
    }
    if (strcmp(ty, "TemplateProcessing"))
        return bad(c, IG_ERR_UNSUPPORTED,
                   "%s: post-processor type '%s' is not supported (supported: TemplateProcessing, "
                   "ByteLevel, Sequence)",
                   where, ty);
    json_object *single = get(o, "single"), *specials = get(o, "special_tokens");
    if (!single || !json_object_is_type(single, json_type_array))
        return bad(c, IG_ERR_FORMAT, "%s.single: expected an array", where);
    size_t n = json_object_array_length(single);
    for (size_t i = 0; i < n; i++) {
        json_object *item = json_object_array_get_idx(single, i);
        if (get(item, "Sequence")) break; /* $A: what follows would be an EOS */
        json_object *sp = get(item, "SpecialToken");
        json_object *name = get(sp, "id");
        if (!name)
            return bad(c, IG_ERR_FORMAT, "%s.single[%zu]: expected SpecialToken or Sequence", where,
                       i);
        json_object *ent = get(specials, json_object_get_string(name));
        json_object *idl = get(ent, "ids");
        if (!idl || !json_object_is_type(idl, json_type_array) ||
            json_object_array_length(idl) != 1)
            return bad(c, IG_ERR_UNSUPPORTED, "%s.special_tokens['%s']: expected exactly one id",
                       where, json_object_get_string(name));
        int64_t id = json_object_get_int64(json_object_array_get_idx(idl, 0));
        if (id < 0 || id >= t->n_vocab || !t->present[id]) /* a hole: no token has it */
            return bad(c, IG_ERR_FORMAT,
                       "%s.special_tokens['%s']: id %lld is not in the vocabulary", where,
                       json_object_get_string(name), (long long)id);
        if (t->adds_bos)
            return bad(c, IG_ERR_UNSUPPORTED, "%s.single: more than one token before the sequence",
                       where);
        t->adds_bos = 1;
        t->bos = (int32_t)id;
    }
    return IG_OK;
}

static ig_status parse_json(const char *path, const char *buf, size_t len, json_object **out,
                            ig_error *err) {
    json_tokener *tk = json_tokener_new();
    if (!tk) return ig_error_set(err, IG_ERR_NOMEM, "%s: out of memory", path);
    /* as serde_json: no trailing commas, and strings must be UTF-8 (json-c does not check it
     * otherwise, and the tokenizer's regexes are matched on the assumption) */
    json_tokener_set_flags(tk, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(tk, buf, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tk);
    size_t off = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    if (!o || je != json_tokener_success || off < len) {
        /* trailing whitespace after a complete document is fine */
        if (o && je == json_tokener_success) {
            size_t k = off;
            while (k < len && (buf[k] == ' ' || buf[k] == '\n' || buf[k] == '\r' || buf[k] == '\t'))
                k++;
            if (k == len) {
                *out = o;
                return IG_OK;
            }
            off = k;
        }
        if (o) json_object_put(o);
        size_t line = 1, col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
            if (buf[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return ig_error_set(err, IG_ERR_FORMAT, "%s:%zu:%zu: malformed JSON: %s", path, line, col,
                            je == json_tokener_success    ? "unexpected data after the document"
                            : je == json_tokener_continue ? "unexpected end of file"
                                                          : json_tokener_error_desc(je));
    }
    *out = o;
    return IG_OK;
}

/* tokenizer_config.json beside tokenizer.json: bos_token / eos_token, as strings or
 * {"content": ...}. Absent file or keys leave things as they are. */
static ig_status load_config(hf_ctx *c, const char *dir) {
    ig_tokenizer *t = c->t;
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!ig_path_exists(path)) return IG_OK;
    char *buf = NULL;
    size_t len = 0;
    IG_TRY(ig_read_file(path, &buf, &len, c->err));
    json_object *root = NULL;
    ig_status rc = parse_json(path, buf, len, &root, c->err);
    free(buf);
    if (rc != IG_OK) return rc;
    const char *keys[2] = {"bos_token", "eos_token"};
    int32_t *dst[2] = {&t->bos, &t->eos};
    for (int k = 0; k < 2; k++) {
        json_object *v = get(root, keys[k]);
        if (v && json_object_is_type(v, json_type_object)) v = get(v, "content");
        if (!v || !json_object_is_type(v, json_type_string)) continue;
        int32_t id = ig_tokenizer_find(t, json_object_get_string(v));
        if (id < 0) {
            rc = ig_error_set(c->err, IG_ERR_FORMAT, "%s: %s '%s' is not in the vocabulary of %s",
                              path, keys[k], json_object_get_string(v), c->path);
            break;
        }
        if (k == 0 && t->adds_bos && id != t->bos)
            continue; /* the template's BOS is what is added */
        *dst[k] = id;
    }
    json_object_put(root);
    return rc;
}

ig_status ig_tokenizer_load_hf(const char *tokenizer_json_path, ig_tokenizer **out, ig_error *err) {
    *out = NULL;
    char path[4200], dir[4096];
    if (strlen(tokenizer_json_path) >= sizeof dir)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "tokenizer path too long: %.64s...",
                            tokenizer_json_path);
    if (ig_path_is_dir(tokenizer_json_path)) {
        snprintf(path, sizeof path, "%s/tokenizer.json", tokenizer_json_path);
        snprintf(dir, sizeof dir, "%s", tokenizer_json_path);
    } else {
        snprintf(path, sizeof path, "%s", tokenizer_json_path);
        snprintf(dir, sizeof dir, "%s", tokenizer_json_path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, ".");
    }
    if (!ig_path_exists(path))
        return ig_error_set(err, IG_ERR_NOT_FOUND,
                            "%s: no such file (expected a Hugging Face tokenizer.json)", path);
    char *buf = NULL;
    size_t len = 0;
    IG_TRY(ig_read_file(path, &buf, &len, err));
    json_object *root = NULL;
    ig_status rc = parse_json(path, buf, len, &root, err);
    free(buf);
    if (rc != IG_OK) return rc;
    hf_ctx c = {path, err, NULL};
    if (!json_object_is_type(root, json_type_object)) {
        rc = bad(&c, IG_ERR_FORMAT, "expected a JSON object at the top, found %s", type_name(root));
        json_object_put(root);
        return rc;
    }
    c.t = ig_tok_alloc(err);
    if (!c.t) {
        json_object_put(root);
        return IG_ERR_NOMEM;
    }
    ig_tokenizer *t = c.t;
    rc = add_pretok(&c, get(root, "pre_tokenizer"), "pre_tokenizer");
    if (rc == IG_OK) rc = add_norm(&c, get(root, "normalizer"), "normalizer");
    if (rc == IG_OK) rc = load_model(&c, root, get(root, "model"));
    if (rc == IG_OK) {
        json_object *dec = get(root, "decoder");
        t->has_decoder = dec != NULL;
        rc = add_dec(&c, dec, "decoder");
    }
    if (rc == IG_OK) rc = load_post(&c, get(root, "post_processor"), "post_processor");
    json_object_put(root);
    if (rc == IG_OK) {
        t->bpe_mode = IG_TOK_BPE_RANKS;
        t->kind = t->byte_level ? IG_TOKENIZER_BYTE_BPE : IG_TOKENIZER_SPM_BPE;
        rc = ig_tok_finish(t, path, err);
    }
    if (rc == IG_OK) rc = load_config(&c, dir);
    if (rc == IG_OK && t->eos < 0) {
        /* No tokenizer_config.json: the usual end-of-sequence spellings, if they are special. */
        const char *names[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "<eos>"};
        for (size_t i = 0; i < sizeof names / sizeof *names && t->eos < 0; i++) {
            int32_t id = ig_tok_strmap_get(&t->added_map, names[i], strlen(names[i]));
            if (id >= 0 && ig_tokenizer_is_special(t, id)) t->eos = id;
        }
    }
    if (rc != IG_OK) {
        ig_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return IG_OK;
}
