/* Hugging Face safetensors reader: one file, or the shards named by model.safetensors.index.json,
 * each memory-mapped once. The JSON header is untrusted: lengths, dtypes, shapes and data offsets
 * are all checked against the file before a tensor pointer is handed out. */
#include "core/model/io/safetensors.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/base/mapfile.h"

/* The reference implementation refuses headers above 100 MB; so does igen (json-c takes an int). */
#define ST_MAX_HEADER_BYTES 100000000ull
#define ST_INDEX_NAME       "model.safetensors.index.json"
#define ST_SINGLE_NAME      "model.safetensors"

struct ig_safetensors {
    ig_mapfile **shards; /* each file mapped once; tensors point into these */
    size_t n_shards;
    ig_st_tensor *tensors;
    size_t n_tensors, cap_tensors;
    size_t *hash; /* open addressing over tensors, index + 1, 0 = empty */
    size_t hash_cap;
    char **meta; /* __metadata__ of the first file: key, value, key, value, ... */
    size_t n_meta;
};

static ig_status fail(ig_error *err, ig_status code, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Every message starts with the file it is about. */
static ig_status fail(ig_error *err, ig_status code, const char *file, const char *fmt, ...) {
    char msg[IG_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Names come from the file: keep the message one printable line whatever they hold. */
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return ig_error_set(err, code, "%s: %s", file, msg);
}

static const struct {
    const char *name;
    ig_dtype dtype;
} st_dtypes[] = {
    {"F32", IG_DTYPE_F32}, {"F16", IG_DTYPE_F16}, {"BF16", IG_DTYPE_BF16}, {"I32", IG_DTYPE_I32},
    {"I64", IG_DTYPE_I64}, {"U8", IG_DTYPE_U8},   {"I8", IG_DTYPE_I8},     {"F64", IG_DTYPE_F64},
};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* Parses a JSON document of len bytes (not NUL-terminated); trailing whitespace (the padding that
 * writers add to align the data section) is allowed, anything else is not. */
static ig_status parse_json(const char *file, const char *what, const char *text, size_t len,
                            json_object **out, ig_error *err) {
    *out = NULL;
    if (len > ST_MAX_HEADER_BYTES)
        return fail(err, IG_ERR_UNSUPPORTED, file, "%s of %zu bytes exceeds the %llu-byte limit",
                    what, len, ST_MAX_HEADER_BYTES);
    json_tokener *tok = json_tokener_new();
    if (!tok) return ig_error_set(err, IG_ERR_NOMEM, "out of memory parsing JSON");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
    json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!obj) {
        if (jerr == json_tokener_continue)
            return fail(err, IG_ERR_FORMAT, file, "%s is not valid JSON: it ends early (%zu bytes)",
                        what, len);
        return fail(err, IG_ERR_FORMAT, file, "%s is not valid JSON: %s at byte %zu", what,
                    json_tokener_error_desc(jerr), end);
    }
    for (size_t i = end; i < len; i++) {
        char ch = text[i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
            json_object_put(obj);
            return fail(err, IG_ERR_FORMAT, file, "%s is not valid JSON: trailing data at byte %zu",
                        what, i);
        }
    }
    if (!json_object_is_type(obj, json_type_object)) {
        json_object_put(obj);
        return fail(err, IG_ERR_FORMAT, file, "%s is not a JSON object", what);
    }
    *out = obj;
    return IG_OK;
}

/* A non-negative JSON integer, or -1. */
static int64_t json_nonneg(json_object *o) {
    if (!o || !json_object_is_type(o, json_type_int)) return -1;
    int64_t v = json_object_get_int64(o);
    return v < 0 ? -1 : v;
}

static void format_shape(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static ig_status push_tensor(ig_safetensors *st, ig_st_tensor **out, ig_error *err) {
    if (st->n_tensors == st->cap_tensors) {
        size_t cap = st->cap_tensors ? 2 * st->cap_tensors : 64;
        ig_st_tensor *p = realloc(st->tensors, cap * sizeof *p);
        if (!p) return ig_error_set(err, IG_ERR_NOMEM, "out of memory listing tensors");
        st->tensors = p;
        st->cap_tensors = cap;
    }
    *out = &st->tensors[st->n_tensors];
    memset(*out, 0, sizeof **out);
    return IG_OK;
}

/* One header entry: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}. */
static ig_status parse_entry(ig_safetensors *st, const char *file, const char *name, json_object *e,
                             const uint8_t *data, uint64_t data_size, ig_error *err) {
    if (!json_object_is_type(e, json_type_object))
        return fail(err, IG_ERR_FORMAT, file, "tensor '%s': header entry is not a JSON object",
                    name);
    json_object *jd = NULL, *js = NULL, *jo = NULL;
    json_object_object_get_ex(e, "dtype", &jd);
    json_object_object_get_ex(e, "shape", &js);
    json_object_object_get_ex(e, "data_offsets", &jo);
    if (!jd || !json_object_is_type(jd, json_type_string))
        return fail(err, IG_ERR_FORMAT, file, "tensor '%s': \"dtype\" missing or not a string",
                    name);
    const char *dname = json_object_get_string(jd);
    int dtype = -1;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(dname, st_dtypes[i].name)) dtype = (int)st_dtypes[i].dtype;
    if (dtype < 0)
        return fail(err, IG_ERR_UNSUPPORTED, file,
                    "tensor '%s': dtype '%s' is not supported (F32, F16, BF16, I32, I64, U8, I8, "
                    "F64 are)",
                    name, dname);

    if (!js || !json_object_is_type(js, json_type_array))
        return fail(err, IG_ERR_FORMAT, file, "tensor '%s': \"shape\" missing or not an array",
                    name);
    size_t ndim = json_object_array_length(js);
    if (ndim > IG_ST_MAX_DIMS)
        return fail(err, IG_ERR_UNSUPPORTED, file,
                    "tensor '%s': shape has %zu dimensions, at most %d supported", name, ndim,
                    IG_ST_MAX_DIMS);
    int64_t shape[IG_ST_MAX_DIMS];
    uint64_t n_el = 1;
    for (size_t d = 0; d < ndim; d++) {
        int64_t v = json_nonneg(json_object_array_get_idx(js, d));
        if (v < 0)
            return fail(err, IG_ERR_FORMAT, file,
                        "tensor '%s': shape[%zu] is not a non-negative integer", name, d);
        shape[d] = v;
        if (v != 0 && n_el > (uint64_t)INT64_MAX / (uint64_t)v)
            return fail(err, IG_ERR_FORMAT, file, "tensor '%s': element count overflows", name);
        n_el *= (uint64_t)v;
    }
    uint64_t esz = ig_dtype_size((ig_dtype)dtype);
    char shape_str[256];
    format_shape(shape_str, sizeof shape_str, shape, (int)ndim);

    if (!jo || !json_object_is_type(jo, json_type_array) || json_object_array_length(jo) != 2)
        return fail(err, IG_ERR_FORMAT, file,
                    "tensor '%s': \"data_offsets\" missing or not a [begin, end] pair", name);
    int64_t b = json_nonneg(json_object_array_get_idx(jo, 0));
    int64_t e_ = json_nonneg(json_object_array_get_idx(jo, 1));
    if (b < 0 || e_ < 0)
        return fail(err, IG_ERR_FORMAT, file,
                    "tensor '%s': \"data_offsets\" must be non-negative integers", name);
    uint64_t begin = (uint64_t)b, end = (uint64_t)e_;
    if (begin > end)
        return fail(err, IG_ERR_FORMAT, file,
                    "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] are reversed", name,
                    begin, end);
    if (end > data_size)
        return fail(err, IG_ERR_FORMAT, file,
                    "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                    "] extend past the end of the data section (%" PRIu64 " bytes)",
                    name, begin, end, data_size);
    /* n_el * esz cannot overflow once end - begin is known to fit: compare by division. */
    if (n_el > (end - begin) / esz || n_el * esz != end - begin)
        return fail(err, IG_ERR_FORMAT, file,
                    "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                    " bytes, but shape %s of %s needs %s%" PRIu64,
                    name, begin, end, end - begin, shape_str, dname,
                    n_el > (end - begin) / esz ? "more than " : "",
                    n_el > (end - begin) / esz ? end - begin : n_el * esz);

    ig_st_tensor *t = NULL;
    IG_TRY(push_tensor(st, &t, err));
    t->name = strdup(name);
    if (!t->name) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    st->n_tensors++; /* counted only once it owns its name, so close() frees exactly these */
    t->dtype = (ig_dtype)dtype;
    t->ndim = (int)ndim;
    for (size_t d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->n_elements = (int64_t)n_el;
    t->n_bytes = (size_t)(end - begin);
    t->data = data + begin;
    t->file = file;
    return IG_OK;
}

static ig_status parse_metadata(ig_safetensors *st, const char *file, json_object *m,
                                ig_error *err) {
    if (!json_object_is_type(m, json_type_object))
        return fail(err, IG_ERR_FORMAT, file, "\"__metadata__\" is not a JSON object");
    size_t n = (size_t)json_object_object_length(m);
    st->meta = calloc(2 * n + 1, sizeof *st->meta);
    if (!st->meta) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    struct json_object_iterator it = json_object_iter_begin(m), end = json_object_iter_end(m);
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        const char *k = json_object_iter_peek_name(&it);
        json_object *v = json_object_iter_peek_value(&it);
        if (!json_object_is_type(v, json_type_string))
            return fail(err, IG_ERR_FORMAT, file, "\"__metadata__\" key '%s': expected a string",
                        k);
        char *kc = strdup(k), *vc = strdup(json_object_get_string(v));
        st->meta[2 * st->n_meta] = kc;
        st->meta[2 * st->n_meta + 1] = vc;
        st->n_meta++;
        if (!kc || !vc) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    return IG_OK;
}

/* Maps one .safetensors file and appends its tensors. */
static ig_status load_file(ig_safetensors *st, const char *path, int first, ig_error *err) {
    ig_mapfile **grown = realloc(st->shards, (st->n_shards + 1) * sizeof *grown);
    if (!grown) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    st->shards = grown;
    ig_mapfile *mf;
    IG_TRY(ig_mapfile_open(path, &mf, err));
    st->shards[st->n_shards++] = mf;
    const char *file = ig_mapfile_path(mf); /* lives as long as the mapping: tensors point here */
    const uint8_t *base = ig_mapfile_data(mf);
    uint64_t size = ig_mapfile_size(mf);

    if (size < 8)
        return fail(err, IG_ERR_FORMAT, file,
                    "file of %" PRIu64 " bytes is too small for a safetensors header length", size);
    uint64_t hlen;
    memcpy(&hlen, base, 8); /* little-endian u64; igen targets little-endian hosts */
    if (hlen > size - 8)
        return fail(err, IG_ERR_FORMAT, file,
                    "header length %" PRIu64 " runs past end of file (size %" PRIu64 ")", hlen,
                    size);
    json_object *root;
    IG_TRY(parse_json(file, "header", (const char *)base + 8, (size_t)hlen, &root, err));
    const uint8_t *data = base + 8 + hlen;
    uint64_t data_size = size - 8 - hlen;

    ig_status rc = IG_OK;
    struct json_object_iterator it = json_object_iter_begin(root), end = json_object_iter_end(root);
    for (; rc == IG_OK && !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        const char *name = json_object_iter_peek_name(&it);
        json_object *v = json_object_iter_peek_value(&it);
        if (!strcmp(name, "__metadata__")) {
            if (first) rc = parse_metadata(st, file, v, err);
            continue;
        }
        rc = parse_entry(st, file, name, v, data, data_size, err);
    }
    json_object_put(root);
    return rc;
}

/* Indexes all tensors by name; a name seen twice (across shards) is an error naming both files. */
static ig_status build_hash(ig_safetensors *st, ig_error *err) {
    size_t cap = 16;
    while (cap < 2 * st->n_tensors) cap *= 2;
    st->hash = calloc(cap, sizeof *st->hash);
    if (!st->hash) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    st->hash_cap = cap;
    for (size_t i = 0; i < st->n_tensors; i++) {
        size_t h = (size_t)hash_str(st->tensors[i].name) & (cap - 1);
        while (st->hash[h]) {
            const ig_st_tensor *o = &st->tensors[st->hash[h] - 1];
            if (!strcmp(o->name, st->tensors[i].name))
                return fail(err, IG_ERR_FORMAT, st->tensors[i].file,
                            "tensor '%s' is also in %s (duplicate tensor names)",
                            st->tensors[i].name, o->file);
            h = (h + 1) & (cap - 1);
        }
        st->hash[h] = i + 1;
    }
    return IG_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}. Every
 * shard is mapped once, in name order; every mapped tensor must be where the index says. */
static ig_status load_index(ig_safetensors *st, const char *index_path, ig_error *err) {
    char *text;
    size_t len;
    IG_TRY(ig_read_file(index_path, &text, &len, err));
    json_object *root;
    ig_status rc = parse_json(index_path, "index", text, len, &root, err);
    free(text);
    if (rc != IG_OK) return rc;

    char *dir = strdup(index_path);
    const char **shard_names = NULL; /* borrowed from root */
    size_t n_names = 0;
    if (!dir) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");

    json_object *wm = NULL;
    if (!json_object_object_get_ex(root, "weight_map", &wm) ||
        !json_object_is_type(wm, json_type_object)) {
        rc = fail(err, IG_ERR_FORMAT, index_path, "\"weight_map\" missing or not a JSON object");
        goto done;
    }
    size_t n_map = (size_t)json_object_object_length(wm);
    shard_names = calloc(n_map + 1, sizeof *shard_names);
    if (!shard_names) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    struct json_object_iterator it = json_object_iter_begin(wm), end = json_object_iter_end(wm);
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        json_object *v = json_object_iter_peek_value(&it);
        if (!json_object_is_type(v, json_type_string) || !json_object_get_string_len(v)) {
            rc = fail(err, IG_ERR_FORMAT, index_path,
                      "weight_map: tensor '%s': expected a shard file name",
                      json_object_iter_peek_name(&it));
            goto done;
        }
        const char *s = json_object_get_string(v);
        size_t k = 0;
        while (k < n_names && strcmp(shard_names[k], s)) k++; /* a handful of shards */
        if (k == n_names) shard_names[n_names++] = s;
    }
    if (n_names == 0) {
        rc = fail(err, IG_ERR_FORMAT, index_path, "weight_map is empty");
        goto done;
    }
    /* Name order is shard order (model-00001-of-00004, ...): the first shard, whose __metadata__ is
     * kept, does not depend on which tensor the map happens to list first. */
    qsort(shard_names, n_names, sizeof *shard_names, cmp_str);
    for (size_t k = 0; k < n_names; k++) {
        char *p = join_path(dir, shard_names[k]);
        if (!p) {
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
            goto done;
        }
        rc = load_file(st, p, k == 0, err);
        free(p);
        if (rc != IG_OK) {
            ig_error_prefix(err, "%s: shard '%s': ", index_path, shard_names[k]);
            goto done;
        }
    }
    rc = build_hash(st, err);
    if (rc != IG_OK) goto done;
    /* Check the map against what the shards hold. */
    it = json_object_iter_begin(wm);
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        const char *name = json_object_iter_peek_name(&it);
        const char *s = json_object_get_string(json_object_iter_peek_value(&it));
        const ig_st_tensor *t = ig_safetensors_find(st, name);
        if (!t) {
            rc = fail(err, IG_ERR_FORMAT, index_path,
                      "weight_map: tensor '%s' is mapped to '%s', which does not hold it", name, s);
            goto done;
        }
        size_t k = 0;
        while (k < n_names && strcmp(shard_names[k], s)) k++;
        if (t->file != ig_mapfile_path(st->shards[k])) {
            rc =
                fail(err, IG_ERR_FORMAT, index_path,
                     "weight_map: tensor '%s' is mapped to '%s' but found in %s", name, s, t->file);
            goto done;
        }
    }
done:
    free(shard_names);
    free(dir);
    json_object_put(root);
    return rc;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

ig_status ig_safetensors_open(const char *path, ig_safetensors **out, ig_error *err) {
    *out = NULL;
    ig_safetensors *st = ig_calloc(1, sizeof *st, err);
    if (!st) return IG_ERR_NOMEM;
    ig_status rc;
    char *picked = NULL;
    if (ig_path_is_dir(path)) {
        picked = join_path(path, ST_SINGLE_NAME);
        if (picked && !ig_path_exists(picked)) {
            free(picked);
            picked = join_path(path, ST_INDEX_NAME);
            if (picked && !ig_path_exists(picked)) {
                free(picked);
                free(st);
                return ig_error_set(err, IG_ERR_NOT_FOUND, "%s: directory holds neither %s nor %s",
                                    path, ST_SINGLE_NAME, ST_INDEX_NAME);
            }
        }
        if (!picked) {
            free(st);
            return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        }
        path = picked;
    }
    if (ends_with(path, ".json")) {
        rc = load_index(st, path, err);
    } else {
        rc = load_file(st, path, 1, err);
        if (rc == IG_OK) rc = build_hash(st, err);
    }
    free(picked);
    if (rc != IG_OK) {
        ig_safetensors_close(st);
        return rc;
    }
    *out = st;
    return IG_OK;
}

void ig_safetensors_close(ig_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n_tensors; i++) free((char *)st->tensors[i].name);
    free(st->tensors);
    for (size_t i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
    free(st->meta);
    free(st->hash);
    for (size_t i = 0; i < st->n_shards; i++) ig_mapfile_close(st->shards[i]);
    free(st->shards);
    free(st);
}

size_t ig_safetensors_n_tensors(const ig_safetensors *st) {
    return st->n_tensors;
}

const ig_st_tensor *ig_safetensors_tensor_at(const ig_safetensors *st, size_t i) {
    return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const ig_st_tensor *ig_safetensors_find(const ig_safetensors *st, const char *name) {
    if (!st->hash) return NULL;
    size_t h = (size_t)hash_str(name) & (st->hash_cap - 1);
    while (st->hash[h]) {
        const ig_st_tensor *t = &st->tensors[st->hash[h] - 1];
        if (!strcmp(t->name, name)) return t;
        h = (h + 1) & (st->hash_cap - 1);
    }
    return NULL;
}

const char *ig_safetensors_metadata(const ig_safetensors *st, const char *key) {
    for (size_t i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta[2 * i], key)) return st->meta[2 * i + 1];
    return NULL;
}
