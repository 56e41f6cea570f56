/* GGUF v2/v3 reader: parses the header, metadata and tensor directory of a memory-mapped file once,
 * checking every length and offset against the file size (with overflow-safe arithmetic) before
 * touching the bytes. It never trusts a count enough to allocate from it unchecked. */
#include "core/model/io/gguf.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/mapfile.h"
#include "core/model/io/ggml_dequant.h"

#define GGUF_MAGIC             0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_HEADER_BYTES      24u         /* magic, version, n_tensors (u64), n_kv (u64) */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS          4
/* Arrays of arrays are legal in the format (gguf-py writes them) but nothing igen reads uses them;
 * they are walked over, up to this depth, so that the rest of the file stays readable. */
#define GGUF_MAX_ARRAY_DEPTH 8
/* Smallest encodings, used to bound counts by the bytes left before allocating from them:
 * a KV is a name length (8) + type (4) + at least one value byte; a tensor info is a name length
 * (8) + n_dims (4) + type (4) + offset (8). */
#define GGUF_MIN_KV_BYTES          13u
#define GGUF_MIN_TENSOR_INFO_BYTES 24u
/* Longest key or tensor name quoted in an error message. */
#define NAME_SHOWN_MAX 200

/* A name in the mapping (not NUL-terminated). */
typedef struct raw_name {
    const char *p;
    uint64_t len;
} raw_name;

typedef struct gguf_kv {
    raw_name key;     /* first member: the hash table reads entries as raw_name */
    const char *name; /* NUL-terminated copy in the names arena */
    ig_gguf_vtype type;
    uint64_t val_pos;        /* file offset of the value; arrays: of the first element */
    uint64_t len;            /* strings: bytes; arrays: element count */
    ig_gguf_vtype elem_type; /* arrays only */
    size_t str_index;        /* string arrays: first entry of this array in str_pos */
} gguf_kv;

struct ig_gguf {
    ig_mapfile *mf;
    const uint8_t *base;
    uint64_t size;
    char *path;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;

    size_t n_kv;
    gguf_kv *kv;
    size_t *kv_hash; /* open addressing, index + 1, 0 = empty */
    size_t kv_hash_cap;

    size_t n_tensors;
    ig_gguf_tensor *tensors;
    raw_name *tensor_raw;
    size_t *t_hash;
    size_t t_hash_cap;

    /* File offsets of the length prefix of every string of every top-level string array, so that
     * element i of a 50k-token vocabulary is found in O(1). */
    uint64_t *str_pos;
    size_t n_str_pos;

    char *names; /* one arena for all NUL-terminated key and tensor names */
};

/* ---- errors ---------------------------------------------------------------------------------- */

static ig_status fail(const ig_gguf *g, ig_error *err, ig_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Every message starts with the file path, so callers several layers up can print it as is. */
static ig_status fail(const ig_gguf *g, ig_error *err, ig_status code, const char *fmt, ...) {
    char msg[IG_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Names come from the file: keep the message one printable line whatever they hold. */
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return ig_error_set(err, code, "%s: %s", g->path, msg);
}

static int shown_len(uint64_t len) {
    return (int)(len < NAME_SHOWN_MAX ? len : NAME_SHOWN_MAX);
}

static const char *vtype_name(uint32_t t) {
    static const char *const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown type";
}

/* Size of a fixed-size value type, 0 for string, array and unknown types. */
static size_t vtype_size(uint32_t t) {
    switch (t) {
    case IG_GGUF_U8:
    case IG_GGUF_I8:
    case IG_GGUF_BOOL:
        return 1;
    case IG_GGUF_U16:
    case IG_GGUF_I16:
        return 2;
    case IG_GGUF_U32:
    case IG_GGUF_I32:
    case IG_GGUF_F32:
        return 4;
    case IG_GGUF_U64:
    case IG_GGUF_I64:
    case IG_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

const char *ig_ggml_type_name(ig_ggml_type t) {
    static const char *const names[] = {
        [0] = "F32",     [1] = "F16",      [2] = "Q4_0",   [3] = "Q4_1",    [6] = "Q5_0",
        [7] = "Q5_1",    [8] = "Q8_0",     [9] = "Q8_1",   [10] = "Q2_K",   [11] = "Q3_K",
        [12] = "Q4_K",   [13] = "Q5_K",    [14] = "Q6_K",  [15] = "Q8_K",   [16] = "IQ2_XXS",
        [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S",
        [22] = "IQ2_S",  [23] = "IQ4_XS",  [24] = "I8",    [25] = "I16",    [26] = "I32",
        [27] = "I64",    [28] = "F64",     [29] = "IQ1_M", [30] = "BF16",   [34] = "TQ1_0",
        [35] = "TQ2_0",  [39] = "MXFP4",   [40] = "NVFP4", [41] = "Q1_0",
    };
    if ((unsigned)t < sizeof names / sizeof names[0] && names[t]) return names[t];
    return "unknown";
}

/* ---- overflow-safe arithmetic and the bounded cursor ------------------------------------------
 */

static int add_u64(uint64_t a, uint64_t b, uint64_t *r) {
    if (a > UINT64_MAX - b) return 0;
    *r = a + b;
    return 1;
}

static int mul_u64(uint64_t a, uint64_t b, uint64_t *r) {
    if (b != 0 && a > UINT64_MAX / b) return 0;
    *r = a * b;
    return 1;
}

typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos; /* invariant: pos <= size */
} cursor;

static int has(const cursor *c, uint64_t n) {
    return n <= c->size - c->pos;
}

static uint32_t rd_u32(cursor *c) {
    uint32_t v;
    memcpy(&v, c->base + c->pos, 4);
    c->pos += 4;
    return v;
}

static uint64_t rd_u64(cursor *c) {
    uint64_t v;
    memcpy(&v, c->base + c->pos, 8);
    c->pos += 8;
    return v;
}

/* ---- hashing of names ------------------------------------------------------------------------ */

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static size_t hash_cap_for(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

/* Finds name in an open-addressing table of indices into names[]; returns the index or -1. On a
 * miss, *slot is the empty slot where it would go. */
static int64_t hash_find(const size_t *table, size_t cap, const raw_name *names, size_t stride,
                         const char *p, uint64_t n, size_t *slot) {
    size_t mask = cap - 1;
    size_t i = (size_t)hash_bytes(p, n) & mask;
    for (;;) {
        size_t e = table[i];
        if (e == 0) {
            if (slot) *slot = i;
            return -1;
        }
        const raw_name *rn = (const raw_name *)((const char *)names + (e - 1) * stride);
        if (rn->len == n && memcmp(rn->p, p, (size_t)n) == 0) return (int64_t)(e - 1);
        i = (i + 1) & mask;
    }
}

/* gguf_kv begins with its raw_name, so both tables share the lookup code. */
static const raw_name *kv_as_names(const ig_gguf *g) {
    return &g->kv[0].key;
}

/* ---- metadata parsing ------------------------------------------------------------------------ */

#define KEYF     "key '%.*s'"
#define KEYA(kv) shown_len((kv)->key.len), (kv)->key.p

static ig_status reserve_str_pos(ig_gguf *g, uint64_t extra, ig_error *err) {
    /* extra is bounded by the file size / 8 (checked by the caller), so this cannot overflow. */
    size_t need = g->n_str_pos + (size_t)extra;
    uint64_t *p = realloc(g->str_pos, (need ? need : 1) * sizeof *p);
    if (!p) return fail(g, err, IG_ERR_NOMEM, "out of memory indexing string arrays");
    g->str_pos = p;
    return IG_OK;
}

/* Walks one value of type t (for arrays: the element type, count and elements) and checks that it
 * lies inside the file. top_level: the value of a key (not an element of a nested array), whose
 * position is recorded and whose strings, if it is a string array, are indexed. */
static ig_status parse_value(ig_gguf *g, cursor *c, gguf_kv *kv, uint32_t t, int depth,
                             int top_level, ig_error *err) {
    uint64_t at = c->pos;
    size_t fixed = vtype_size(t);
    if (fixed) {
        if (!has(c, fixed))
            return fail(g, err, IG_ERR_FORMAT,
                        KEYF ": %s value at offset %" PRIu64 " runs past end of file (size %" PRIu64
                             ")",
                        KEYA(kv), vtype_name(t), at, g->size);
        if (top_level) kv->val_pos = c->pos;
        c->pos += fixed;
        return IG_OK;
    }
    if (t == IG_GGUF_STRING) {
        if (!has(c, 8))
            return fail(g, err, IG_ERR_FORMAT,
                        KEYF ": string length at offset %" PRIu64
                             " runs past end of file (size %" PRIu64 ")",
                        KEYA(kv), at, g->size);
        uint64_t len = rd_u64(c);
        if (!has(c, len))
            return fail(g, err, IG_ERR_FORMAT,
                        KEYF ": string of %" PRIu64 " bytes at offset %" PRIu64
                             " runs past end of file (size %" PRIu64 ")",
                        KEYA(kv), len, c->pos, g->size);
        if (top_level) {
            kv->val_pos = c->pos;
            kv->len = len;
        }
        c->pos += len;
        return IG_OK;
    }
    if (t != IG_GGUF_ARRAY)
        return fail(g, err, IG_ERR_FORMAT,
                    KEYF ": unknown value type %" PRIu32 " at offset %" PRIu64, KEYA(kv), t,
                    at - 4);

    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return fail(g, err, IG_ERR_FORMAT, KEYF ": arrays nested deeper than %d", KEYA(kv),
                    GGUF_MAX_ARRAY_DEPTH);
    if (!has(c, 12))
        return fail(g, err, IG_ERR_FORMAT,
                    KEYF ": array header at offset %" PRIu64 " runs past end of file (size %" PRIu64
                         ")",
                    KEYA(kv), at, g->size);
    uint32_t et = rd_u32(c);
    uint64_t n = rd_u64(c);
    if (top_level) {
        kv->elem_type = (ig_gguf_vtype)et;
        kv->len = n;
        kv->val_pos = c->pos;
    }
    size_t esz = vtype_size(et);
    if (esz) {
        uint64_t bytes;
        if (!mul_u64(n, esz, &bytes) || !has(c, bytes))
            return fail(g, err, IG_ERR_FORMAT,
                        KEYF ": array of %" PRIu64 " %s at offset %" PRIu64
                             " runs past end of file (size %" PRIu64 ")",
                        KEYA(kv), n, vtype_name(et), c->pos, g->size);
        c->pos += bytes;
        return IG_OK;
    }
    if (et != IG_GGUF_STRING && et != IG_GGUF_ARRAY)
        return fail(g, err, IG_ERR_FORMAT, KEYF ": array of unknown value type %" PRIu32, KEYA(kv),
                    et);
    /* Each string takes at least its 8-byte length (each nested array 12 bytes): bound the count
     * by the bytes left before reserving anything for it. */
    uint64_t min_bytes;
    if (!mul_u64(n, et == IG_GGUF_STRING ? 8 : 12, &min_bytes) || !has(c, min_bytes))
        return fail(g, err, IG_ERR_FORMAT,
                    KEYF ": array of %" PRIu64 " %s at offset %" PRIu64
                         " claims more bytes than the file has (size %" PRIu64 ")",
                    KEYA(kv), n, vtype_name(et), c->pos, g->size);
    if (et == IG_GGUF_STRING) {
        if (top_level) {
            IG_TRY(reserve_str_pos(g, n, err));
            kv->str_index = g->n_str_pos;
        }
        for (uint64_t i = 0; i < n; i++) {
            if (!has(c, 8))
                return fail(g, err, IG_ERR_FORMAT,
                            KEYF ": element %" PRIu64 " of %" PRIu64
                                 ": string length at offset %" PRIu64
                                 " runs past end of file (size %" PRIu64 ")",
                            KEYA(kv), i, n, c->pos, g->size);
            uint64_t spos = c->pos;
            uint64_t len = rd_u64(c);
            if (!has(c, len))
                return fail(g, err, IG_ERR_FORMAT,
                            KEYF ": element %" PRIu64 " of %" PRIu64 ": string of %" PRIu64
                                 " bytes at offset %" PRIu64 " runs past end of file (size %" PRIu64
                                 ")",
                            KEYA(kv), i, n, len, c->pos, g->size);
            c->pos += len;
            if (top_level) g->str_pos[g->n_str_pos++] = spos;
        }
        return IG_OK;
    }
    for (uint64_t i = 0; i < n; i++)
        IG_TRY(parse_value(g, c, kv, IG_GGUF_ARRAY, depth + 1, 0, err));
    return IG_OK;
}

static ig_status parse_kvs(ig_gguf *g, cursor *c, uint64_t n_kv, ig_error *err) {
    if (n_kv > (c->size - c->pos) / GGUF_MIN_KV_BYTES)
        return fail(g, err, IG_ERR_FORMAT,
                    "header claims %" PRIu64 " key/value pairs, more than the %" PRIu64
                    " bytes after the header can hold",
                    n_kv, c->size - c->pos);
    g->n_kv = (size_t)n_kv;
    g->kv = ig_calloc(g->n_kv, sizeof *g->kv, err);
    g->kv_hash_cap = hash_cap_for(g->n_kv);
    g->kv_hash = ig_calloc(g->kv_hash_cap, sizeof *g->kv_hash, err);
    if (!g->kv || !g->kv_hash) return IG_ERR_NOMEM;
    for (size_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        if (!has(c, 8))
            return fail(g, err, IG_ERR_FORMAT,
                        "key #%zu: name length at offset %" PRIu64
                        " runs past end of file (size %" PRIu64 ")",
                        i, c->pos, g->size);
        uint64_t len = rd_u64(c);
        if (!has(c, len))
            return fail(g, err, IG_ERR_FORMAT,
                        "key #%zu: name of %" PRIu64 " bytes at offset %" PRIu64
                        " runs past end of file (size %" PRIu64 ")",
                        i, len, c->pos, g->size);
        kv->key.p = (const char *)c->base + c->pos;
        kv->key.len = len;
        c->pos += len;
        if (len == 0 || memchr(kv->key.p, '\0', (size_t)len))
            return fail(g, err, IG_ERR_FORMAT, "key #%zu: name is empty or contains a NUL byte", i);
        size_t slot = 0;
        int64_t dup = hash_find(g->kv_hash, g->kv_hash_cap, kv_as_names(g), sizeof(gguf_kv),
                                kv->key.p, len, &slot);
        if (dup >= 0)
            return fail(g, err, IG_ERR_FORMAT,
                        KEYF " appears twice (entries #%" PRId64 " and #%zu)", KEYA(kv), dup, i);
        g->kv_hash[slot] = i + 1;
        if (!has(c, 4))
            return fail(g, err, IG_ERR_FORMAT,
                        KEYF ": value type at offset %" PRIu64
                             " runs past end of file (size %" PRIu64 ")",
                        KEYA(kv), c->pos, g->size);
        uint32_t t = rd_u32(c);
        kv->type = (ig_gguf_vtype)t;
        IG_TRY(parse_value(g, c, kv, t, 0, 1, err));
    }
    return IG_OK;
}

/* ---- tensor directory ------------------------------------------------------------------------ */

#define TENF     "tensor '%.*s'"
#define TENA(rn) shown_len((rn)->len), (rn)->p

static ig_status parse_tensor_infos(ig_gguf *g, cursor *c, uint64_t n_tensors, ig_error *err) {
    if (n_tensors > (c->size - c->pos) / GGUF_MIN_TENSOR_INFO_BYTES)
        return fail(g, err, IG_ERR_FORMAT,
                    "header claims %" PRIu64 " tensors, more than the %" PRIu64
                    " bytes after the metadata can describe",
                    n_tensors, c->size - c->pos);
    g->n_tensors = (size_t)n_tensors;
    g->tensors = ig_calloc(g->n_tensors, sizeof *g->tensors, err);
    g->tensor_raw = ig_calloc(g->n_tensors, sizeof *g->tensor_raw, err);
    g->t_hash_cap = hash_cap_for(g->n_tensors);
    g->t_hash = ig_calloc(g->t_hash_cap, sizeof *g->t_hash, err);
    if (!g->tensors || !g->tensor_raw || !g->t_hash) return IG_ERR_NOMEM;

    for (size_t i = 0; i < g->n_tensors; i++) {
        ig_gguf_tensor *t = &g->tensors[i];
        raw_name *rn = &g->tensor_raw[i];
        if (!has(c, 8))
            return fail(g, err, IG_ERR_FORMAT,
                        "tensor #%zu: name length at offset %" PRIu64
                        " runs past end of file (size %" PRIu64 ")",
                        i, c->pos, g->size);
        uint64_t len = rd_u64(c);
        if (!has(c, len))
            return fail(g, err, IG_ERR_FORMAT,
                        "tensor #%zu: name of %" PRIu64 " bytes at offset %" PRIu64
                        " runs past end of file (size %" PRIu64 ")",
                        i, len, c->pos, g->size);
        rn->p = (const char *)c->base + c->pos;
        rn->len = len;
        c->pos += len;
        if (len == 0 || memchr(rn->p, '\0', (size_t)len))
            return fail(g, err, IG_ERR_FORMAT, "tensor #%zu: name is empty or contains a NUL byte",
                        i);
        size_t slot = 0;
        int64_t dup =
            hash_find(g->t_hash, g->t_hash_cap, g->tensor_raw, sizeof(raw_name), rn->p, len, &slot);
        if (dup >= 0)
            return fail(g, err, IG_ERR_FORMAT,
                        TENF " appears twice (tensors #%" PRId64 " and #%zu)", TENA(rn), dup, i);
        g->t_hash[slot] = i + 1;

        if (!has(c, 4))
            return fail(g, err, IG_ERR_FORMAT,
                        TENF ": n_dims at offset %" PRIu64 " runs past end of file (size %" PRIu64
                             ")",
                        TENA(rn), c->pos, g->size);
        uint32_t n_dims = rd_u32(c);
        if (n_dims > GGUF_MAX_DIMS)
            return fail(g, err, IG_ERR_FORMAT, TENF ": n_dims is %" PRIu32 ", at most %d allowed",
                        TENA(rn), n_dims, GGUF_MAX_DIMS);
        if (!has(c, 8ull * n_dims + 4 + 8))
            return fail(g, err, IG_ERR_FORMAT,
                        TENF ": shape, type and offset at offset %" PRIu64
                             " run past end of file (size %" PRIu64 ")",
                        TENA(rn), c->pos, g->size);
        t->n_dims = (int)n_dims;
        uint64_t n_el = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) {
            uint64_t ne = d < (int)n_dims ? rd_u64(c) : 1;
            if (ne > (uint64_t)INT64_MAX || !mul_u64(n_el, ne, &n_el) || n_el > (uint64_t)INT64_MAX)
                return fail(g, err, IG_ERR_FORMAT,
                            TENF ": ne[%d] = %" PRIu64 " makes the element count overflow",
                            TENA(rn), d, ne);
            t->ne[d] = (int64_t)ne;
        }
        t->n_elements = (int64_t)n_el;
        uint32_t type = rd_u32(c);
        t->type = (ig_ggml_type)type;
        int64_t bs = ig_ggml_block_size((int)type);
        if (bs == 0)
            return fail(g, err, IG_ERR_UNSUPPORTED, TENF ": unknown ggml type %" PRIu32, TENA(rn),
                        type);
        if (t->ne[0] % bs != 0)
            return fail(g, err, IG_ERR_FORMAT,
                        TENF ": ne[0] = %" PRId64
                             " is not a multiple of the %s block size %" PRId64,
                        TENA(rn), t->ne[0], ig_ggml_type_name(t->type), bs);
        uint64_t row_bytes = (uint64_t)(t->ne[0] / bs) * ig_ggml_block_bytes((int)type);
        uint64_t n_bytes;
        if (!mul_u64(row_bytes, n_el / (uint64_t)(t->ne[0] ? t->ne[0] : 1), &n_bytes) ||
            n_bytes > SIZE_MAX)
            return fail(g, err, IG_ERR_FORMAT, TENF ": data size overflows", TENA(rn));
        if (t->ne[0] == 0) n_bytes = 0;
        t->n_bytes = (size_t)n_bytes;
        t->offset = rd_u64(c);
    }
    return IG_OK;
}

/* Places each tensor's data: the data section starts at the first multiple of the alignment after
 * the tensor infos, and every tensor must lie inside the file. */
static ig_status place_tensors(ig_gguf *g, uint64_t infos_end, ig_error *err) {
    uint64_t a = g->alignment;
    uint64_t rem = infos_end % a;
    g->data_offset = infos_end + (rem ? a - rem : 0); /* infos_end <= size < 2^63: no overflow */
    for (size_t i = 0; i < g->n_tensors; i++) {
        ig_gguf_tensor *t = &g->tensors[i];
        const raw_name *rn = &g->tensor_raw[i];
        if (t->offset % a != 0)
            return fail(g, err, IG_ERR_FORMAT,
                        TENF ": offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                        TENA(rn), t->offset, a);
        uint64_t start, end;
        if (!add_u64(g->data_offset, t->offset, &start))
            return fail(g, err, IG_ERR_FORMAT,
                        TENF ": offset %" PRIu64 " points past end of file (size %" PRIu64 ")",
                        TENA(rn), t->offset, g->size);
        if (!add_u64(start, t->n_bytes, &end) || end > g->size)
            return fail(g, err, IG_ERR_FORMAT,
                        TENF ": data [offset %" PRIu64 ", %zu bytes] extends past end of file "
                             "(size %" PRIu64 ")",
                        TENA(rn), start, t->n_bytes, g->size);
        t->data = g->base + start;
    }
    return IG_OK;
}

/* Copies all key and tensor names into one arena as C strings (the file's are not terminated). */
static ig_status copy_names(ig_gguf *g, ig_error *err) {
    size_t total = 0;
    for (size_t i = 0; i < g->n_kv; i++) total += (size_t)g->kv[i].key.len + 1;
    for (size_t i = 0; i < g->n_tensors; i++) total += (size_t)g->tensor_raw[i].len + 1;
    g->names = ig_malloc(total, err); /* total <= file size + count: no overflow */
    if (!g->names) return IG_ERR_NOMEM;
    char *p = g->names;
    for (size_t i = 0; i < g->n_kv; i++) {
        memcpy(p, g->kv[i].key.p, (size_t)g->kv[i].key.len);
        p[g->kv[i].key.len] = '\0';
        g->kv[i].name = p;
        p += g->kv[i].key.len + 1;
    }
    for (size_t i = 0; i < g->n_tensors; i++) {
        memcpy(p, g->tensor_raw[i].p, (size_t)g->tensor_raw[i].len);
        p[g->tensor_raw[i].len] = '\0';
        g->tensors[i].name = p;
        p += g->tensor_raw[i].len + 1;
    }
    return IG_OK;
}

static ig_status parse(ig_gguf *g, ig_error *err) {
    cursor c = {g->base, g->size, 0};
    if (g->size < 4)
        return fail(g, err, IG_ERR_FORMAT, "not a GGUF file: only %" PRIu64 " bytes", g->size);
    uint32_t magic = rd_u32(&c);
    if (magic != GGUF_MAGIC) {
        char shown[5];
        for (int i = 0; i < 4; i++) {
            unsigned char ch = g->base[i];
            shown[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '.';
        }
        shown[4] = '\0';
        return fail(g, err, IG_ERR_FORMAT,
                    "not a GGUF file: magic is '%s' (0x%08" PRIx32 "), expected 'GGUF'", shown,
                    magic);
    }
    if (g->size < GGUF_HEADER_BYTES)
        return fail(g, err, IG_ERR_FORMAT,
                    "header truncated: the file has %" PRIu64 " bytes, a GGUF header needs %u",
                    g->size, GGUF_HEADER_BYTES);
    g->version = rd_u32(&c);
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffffu) == 0 && g->version != 0)
            return fail(g, err, IG_ERR_UNSUPPORTED,
                        "GGUF version 0x%08" PRIx32 " looks byte-swapped: big-endian files are "
                        "not supported",
                        g->version);
        return fail(g, err, IG_ERR_UNSUPPORTED,
                    "unsupported GGUF version %" PRIu32 " (igen reads versions 2 and 3)",
                    g->version);
    }
    uint64_t n_tensors = rd_u64(&c);
    uint64_t n_kv = rd_u64(&c);
    IG_TRY(parse_kvs(g, &c, n_kv, err));

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (ig_gguf_find_key(g, "general.alignment") >= 0) {
        uint32_t a;
        IG_TRY(ig_gguf_get_u32(g, "general.alignment", &a, err));
        if (a == 0 || (a & (a - 1)) != 0)
            return fail(g, err, IG_ERR_FORMAT,
                        "key 'general.alignment': expected a power of two, found %" PRIu32, a);
        g->alignment = a;
    }
    IG_TRY(parse_tensor_infos(g, &c, n_tensors, err));
    IG_TRY(place_tensors(g, c.pos, err));
    return copy_names(g, err);
}

ig_status ig_gguf_open(const char *path, ig_gguf **out, ig_error *err) {
    *out = NULL;
    ig_gguf *g = ig_calloc(1, sizeof *g, err);
    if (!g) return IG_ERR_NOMEM;
    g->path = strdup(path);
    if (!g->path) {
        free(g);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    ig_status rc = ig_mapfile_open(path, &g->mf, err);
    if (rc == IG_OK) {
        g->base = ig_mapfile_data(g->mf);
        g->size = ig_mapfile_size(g->mf);
        rc = parse(g, err);
    }
    if (rc != IG_OK) {
        ig_gguf_close(g);
        return rc;
    }
    *out = g;
    return IG_OK;
}

void ig_gguf_close(ig_gguf *g) {
    if (!g) return;
    ig_mapfile_close(g->mf);
    free(g->kv);
    free(g->kv_hash);
    free(g->tensors);
    free(g->tensor_raw);
    free(g->t_hash);
    free(g->str_pos);
    free(g->names);
    free(g->path);
    free(g);
}

const char *ig_gguf_path(const ig_gguf *g) {
    return g->path;
}
uint32_t ig_gguf_version(const ig_gguf *g) {
    return g->version;
}

/* ---- metadata getters ------------------------------------------------------------------------ */

int64_t ig_gguf_find_key(const ig_gguf *g, const char *key) {
    if (!g->kv_hash) return -1;
    return hash_find(g->kv_hash, g->kv_hash_cap, kv_as_names(g), sizeof(gguf_kv), key, strlen(key),
                     NULL);
}

size_t ig_gguf_n_kv(const ig_gguf *g) {
    return g->n_kv;
}

const char *ig_gguf_key_name(const ig_gguf *g, int64_t idx) {
    IG_ASSERT(idx >= 0 && (size_t)idx < g->n_kv);
    return g->kv[idx].name;
}

ig_gguf_vtype ig_gguf_key_type(const ig_gguf *g, int64_t idx) {
    IG_ASSERT(idx >= 0 && (size_t)idx < g->n_kv);
    return g->kv[idx].type;
}

/* The key's entry, or an IG_ERR_NOT_FOUND error. */
static const gguf_kv *lookup(const ig_gguf *g, const char *key, ig_error *err) {
    int64_t i = ig_gguf_find_key(g, key);
    if (i < 0) {
        fail(g, err, IG_ERR_NOT_FOUND, "key '%s' not found", key);
        return NULL;
    }
    return &g->kv[i];
}

static ig_status wrong_type(const ig_gguf *g, const gguf_kv *kv, const char *expected,
                            ig_error *err) {
    if (kv->type == IG_GGUF_ARRAY)
        return fail(g, err, IG_ERR_FORMAT, KEYF ": expected %s, found array of %s", KEYA(kv),
                    expected, vtype_name(kv->elem_type));
    return fail(g, err, IG_ERR_FORMAT, KEYF ": expected %s, found %s", KEYA(kv), expected,
                vtype_name(kv->type));
}

/* Reads an integer value of any width and signedness: *is_neg tells which of the two holds it. */
static int read_int(const ig_gguf *g, const gguf_kv *kv, int *is_neg, uint64_t *u, int64_t *s) {
    const uint8_t *p = g->base + kv->val_pos;
    int64_t sv = 0;
    uint64_t uv = 0;
    switch (kv->type) {
    case IG_GGUF_U8:
        uv = p[0];
        break;
    case IG_GGUF_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        uv = v;
        break;
    }
    case IG_GGUF_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        uv = v;
        break;
    }
    case IG_GGUF_U64:
        memcpy(&uv, p, 8);
        break;
    case IG_GGUF_I8:
        sv = (int8_t)p[0];
        goto signed_value;
    case IG_GGUF_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        sv = v;
        goto signed_value;
    }
    case IG_GGUF_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        sv = v;
        goto signed_value;
    }
    case IG_GGUF_I64:
        memcpy(&sv, p, 8);
        goto signed_value;
    default:
        return 0;
    }
    *is_neg = 0;
    *u = uv;
    return 1;
signed_value:
    *is_neg = sv < 0;
    *s = sv;
    *u = sv < 0 ? 0 : (uint64_t)sv;
    return 1;
}

ig_status ig_gguf_get_u32(const ig_gguf *g, const char *key, uint32_t *out, ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    int neg;
    uint64_t u;
    int64_t s;
    if (!read_int(g, kv, &neg, &u, &s)) return wrong_type(g, kv, "u32", err);
    if (neg)
        return fail(g, err, IG_ERR_FORMAT, KEYF ": value %" PRId64 " (%s) does not fit in u32",
                    KEYA(kv), s, vtype_name(kv->type));
    if (u > UINT32_MAX)
        return fail(g, err, IG_ERR_FORMAT, KEYF ": value %" PRIu64 " (%s) does not fit in u32",
                    KEYA(kv), u, vtype_name(kv->type));
    *out = (uint32_t)u;
    return IG_OK;
}

ig_status ig_gguf_get_i64(const ig_gguf *g, const char *key, int64_t *out, ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    int neg;
    uint64_t u;
    int64_t s;
    if (!read_int(g, kv, &neg, &u, &s)) return wrong_type(g, kv, "i64", err);
    if (neg) {
        *out = s;
        return IG_OK;
    }
    if (u > (uint64_t)INT64_MAX)
        return fail(g, err, IG_ERR_FORMAT, KEYF ": value %" PRIu64 " (%s) does not fit in i64",
                    KEYA(kv), u, vtype_name(kv->type));
    *out = (int64_t)u;
    return IG_OK;
}

ig_status ig_gguf_get_f32(const ig_gguf *g, const char *key, float *out, ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    const uint8_t *p = g->base + kv->val_pos;
    if (kv->type == IG_GGUF_F32) {
        memcpy(out, p, 4);
        return IG_OK;
    }
    if (kv->type == IG_GGUF_F64) { /* some converters write f64 hyperparameters */
        double v;
        memcpy(&v, p, 8);
        if (isfinite(v) && fabs(v) > FLT_MAX)
            return fail(g, err, IG_ERR_FORMAT, KEYF ": value %g (f64) does not fit in f32",
                        KEYA(kv), v);
        *out = (float)v;
        return IG_OK;
    }
    return wrong_type(g, kv, "f32", err);
}

ig_status ig_gguf_get_bool(const ig_gguf *g, const char *key, int *out, ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    if (kv->type != IG_GGUF_BOOL) return wrong_type(g, kv, "bool", err);
    *out = g->base[kv->val_pos] != 0;
    return IG_OK;
}

ig_status ig_gguf_get_str(const ig_gguf *g, const char *key, const char **out, size_t *len,
                          ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    if (kv->type != IG_GGUF_STRING) return wrong_type(g, kv, "string", err);
    *out = (const char *)g->base + kv->val_pos;
    *len = (size_t)kv->len;
    return IG_OK;
}

ig_status ig_gguf_get_arr_info(const ig_gguf *g, const char *key, ig_gguf_vtype *elem_type,
                               uint64_t *n, ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    if (kv->type != IG_GGUF_ARRAY) return wrong_type(g, kv, "array", err);
    if (elem_type) *elem_type = kv->elem_type;
    if (n) *n = kv->len;
    return IG_OK;
}

ig_status ig_gguf_get_arr_str(const ig_gguf *g, const char *key, uint64_t i, const char **out,
                              size_t *len, ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    if (kv->type != IG_GGUF_ARRAY || kv->elem_type != IG_GGUF_STRING)
        return wrong_type(g, kv, "array of string", err);
    if (i >= kv->len)
        return fail(g, err, IG_ERR_INVALID_ARG,
                    KEYF ": index %" PRIu64 " out of range (array of %" PRIu64 ")", KEYA(kv), i,
                    kv->len);
    uint64_t pos = g->str_pos[kv->str_index + (size_t)i];
    uint64_t n;
    memcpy(&n, g->base + pos, 8);
    *out = (const char *)g->base + pos + 8;
    *len = (size_t)n;
    return IG_OK;
}

ig_status ig_gguf_get_arr_data(const ig_gguf *g, const char *key, const void **out, ig_error *err) {
    const gguf_kv *kv = lookup(g, key, err);
    if (!kv) return IG_ERR_NOT_FOUND;
    if (kv->type != IG_GGUF_ARRAY || vtype_size(kv->elem_type) == 0)
        return wrong_type(g, kv, "numeric array", err);
    *out = g->base + kv->val_pos;
    return IG_OK;
}

/* ---- tensors --------------------------------------------------------------------------------- */

size_t ig_gguf_n_tensors(const ig_gguf *g) {
    return g->n_tensors;
}

const ig_gguf_tensor *ig_gguf_tensor_at(const ig_gguf *g, size_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const ig_gguf_tensor *ig_gguf_find_tensor(const ig_gguf *g, const char *name) {
    if (!g->t_hash) return NULL;
    int64_t i = hash_find(g->t_hash, g->t_hash_cap, g->tensor_raw, sizeof(raw_name), name,
                          strlen(name), NULL);
    return i < 0 ? NULL : &g->tensors[i];
}

/* Elements dequantized per step when narrowing to f16/bf16: a multiple of every block size, small
 * enough for a per-thread stack buffer. */
#define READ_CHUNK_ELEMS 4096

ig_status ig_gguf_tensor_read(const ig_gguf *g, const ig_gguf_tensor *t, ig_dtype dst_type,
                              void *dst, ig_error *err) {
    IG_ASSERT(t >= g->tensors && t < g->tensors + g->n_tensors);
    if (!ig_dtype_is_float_storage(dst_type))
        return fail(g, err, IG_ERR_INVALID_ARG,
                    "tensor '%s': cannot read into %s (f32, f16 or bf16 only)", t->name,
                    ig_dtype_name(dst_type));
    if (!ig_ggml_can_dequantize((int)t->type))
        return fail(g, err, IG_ERR_UNSUPPORTED, "tensor '%s': igen cannot dequantize type %s",
                    t->name, ig_ggml_type_name(t->type));
    if ((t->type == IG_GGML_F32 && dst_type == IG_DTYPE_F32) ||
        (t->type == IG_GGML_F16 && dst_type == IG_DTYPE_F16) ||
        (t->type == IG_GGML_BF16 && dst_type == IG_DTYPE_BF16)) {
        if (t->n_bytes) memcpy(dst, t->data, t->n_bytes);
        return IG_OK;
    }
    if (dst_type == IG_DTYPE_F32) {
        if (ig_dequantize_f32((int)t->type, t->data, dst, t->n_elements) != 0)
            return fail(g, err, IG_ERR_INTERNAL, "tensor '%s': dequantization failed", t->name);
        return IG_OK;
    }
    /* Narrowing: dequantize a chunk to f32 on the stack, then convert, so a large tensor needs no
     * f32 copy of itself. */
    const int64_t bs = ig_ggml_block_size((int)t->type);
    const size_t bb = ig_ggml_block_bytes((int)t->type);
    const int64_t n = t->n_elements;
    const int64_t n_chunks = (n + READ_CHUNK_ELEMS - 1) / READ_CHUNK_ELEMS;
    const uint8_t *src = t->data;
    uint8_t *out = dst;
    const size_t dsz = ig_dtype_size(dst_type);
    int failed = 0;
#pragma omp parallel for schedule(static) reduction(| : failed) if (n_chunks > 4)
    for (int64_t ci = 0; ci < n_chunks; ci++) {
        float buf[READ_CHUNK_ELEMS];
        int64_t start = ci * READ_CHUNK_ELEMS;
        int64_t len = n - start < READ_CHUNK_ELEMS ? n - start : READ_CHUNK_ELEMS;
        failed |= ig_dequantize_f32((int)t->type, src + (size_t)(start / bs) * bb, buf, len) != 0;
        ig_convert(dst_type, out + (size_t)start * dsz, IG_DTYPE_F32, buf, (size_t)len);
    }
    if (failed) return fail(g, err, IG_ERR_INTERNAL, "tensor '%s': dequantization failed", t->name);
    return IG_OK;
}
