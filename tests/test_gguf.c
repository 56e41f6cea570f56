/* core/model/io/gguf: metadata of every value type from a gguf-py-written fixture, crafted bad
 * files (each truncation point, bad magic/version, lying lengths and offsets) that must fail with a
 * message naming the file and key or tensor, and facts about the real SmolLM2 file from gguf-py. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/model/io/gguf.h"
#include "tests/test_util.h"

/* ---- a tiny GGUF writer for crafted files ---------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        IG_ASSERT(b->p);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) {
    put(b, &v, 4);
}
static void put_u64(buf *b, uint64_t v) {
    put(b, &v, 8);
}
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void patch_u32(buf *b, size_t at, uint32_t v) {
    memcpy(b->p + at, &v, 4);
}
static void patch_u64(buf *b, size_t at, uint64_t v) {
    memcpy(b->p + at, &v, 8);
}

typedef struct craft_opts {
    uint32_t version;
    const char *key2;   /* name of the second key (default llama.block_count) */
    const char *t2name; /* name of the second tensor (default output_norm.weight) */
    int alignment_kv;   /* 0: none; >0: general.alignment u32; -1: general.alignment as string */
} craft_opts;

/* Offsets of the fields the tests corrupt. */
typedef struct craft_pos {
    size_t version, n_tensors, n_kv;
    size_t arch_len, arch_value; /* general.architecture string length and bytes */
    size_t key2_type;
    size_t tok_type, tok_count; /* tokenizer.ggml.tokens array header */
    size_t tok_elem2;           /* inside the third token's bytes */
    size_t t1_ndims, t1_ne0, t1_type;
    size_t t2_name, t2_ne0, t2_offset;
    size_t data_start, t2_data;
} craft_pos;

#define T1_NAME "blk.0.attn_q.weight"
#define T2_NAME "output_norm.weight"

/* header; 3-4 KVs (string, u32, string array [, alignment]); two tensors, Q8_0 [32 x 2] and
 * F32 [32]; data padded to 32 bytes, the file ending exactly at the end of the last tensor. */
static craft_pos craft(buf *b, craft_opts o) {
    craft_pos pos;
    memset(&pos, 0, sizeof pos);
    b->n = 0;
    put(b, "GGUF", 4);
    pos.version = b->n;
    put_u32(b, o.version ? o.version : 3);
    pos.n_tensors = b->n;
    put_u64(b, 2);
    pos.n_kv = b->n;
    put_u64(b, o.alignment_kv ? 4 : 3);

    put_str(b, "general.architecture");
    put_u32(b, IG_GGUF_STRING);
    pos.arch_len = b->n;
    pos.arch_value = b->n + 8;
    put_str(b, "llama");

    put_str(b, o.key2 ? o.key2 : "llama.block_count");
    pos.key2_type = b->n;
    put_u32(b, IG_GGUF_U32);
    put_u32(b, 3);

    put_str(b, "tokenizer.ggml.tokens");
    put_u32(b, IG_GGUF_ARRAY);
    pos.tok_type = b->n;
    put_u32(b, IG_GGUF_STRING);
    pos.tok_count = b->n;
    put_u64(b, 3);
    put_str(b, "a");
    put_str(b, "bb");
    pos.tok_elem2 = b->n + 9;
    put_str(b, "ccc");

    if (o.alignment_kv > 0) {
        put_str(b, "general.alignment");
        put_u32(b, IG_GGUF_U32);
        put_u32(b, (uint32_t)o.alignment_kv);
    } else if (o.alignment_kv < 0) {
        put_str(b, "general.alignment");
        put_u32(b, IG_GGUF_STRING);
        put_str(b, "32");
    }
    uint32_t align = o.alignment_kv > 0 ? (uint32_t)o.alignment_kv : 32;

    put_str(b, T1_NAME);
    pos.t1_ndims = b->n;
    put_u32(b, 2);
    pos.t1_ne0 = b->n;
    put_u64(b, 32);
    put_u64(b, 2);
    pos.t1_type = b->n;
    put_u32(b, IG_GGML_Q8_0);
    put_u64(b, 0);

    pos.t2_name = b->n;
    put_str(b, o.t2name ? o.t2name : T2_NAME);
    put_u32(b, 1);
    pos.t2_ne0 = b->n;
    put_u64(b, 32);
    put_u32(b, IG_GGML_F32);
    pos.t2_offset = b->n;
    uint64_t t1_bytes = 2 * 34, t2_off = (t1_bytes + align - 1) / align * align;
    put_u64(b, t2_off);

    while (b->n % align) put(b, "\0", 1);
    pos.data_start = b->n;
    /* Q8_0 rows: d = 0.5 (f16 0x3800), q[j] = j - 16 (row 0) and 16 - j (row 1). */
    for (int r = 0; r < 2; r++) {
        uint16_t d = 0x3800;
        put(b, &d, 2);
        for (int j = 0; j < 32; j++) {
            int8_t q = (int8_t)(r == 0 ? j - 16 : 16 - j);
            put(b, &q, 1);
        }
    }
    while (b->n < pos.data_start + t2_off) put(b, "\0", 1);
    pos.t2_data = b->n;
    for (int j = 0; j < 32; j++) {
        float v = (float)j * 0.25f;
        put(b, &v, 4);
    }
    return pos;
}

static const char *tmp_path(const char *name) {
    static char path[4300];
    snprintf(path, sizeof path, "%s/%s", ig_test_tmpdir(), name);
    return path;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    IG_ASSERT(f);
    if (n) IG_ASSERT(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* Writes the first n bytes of b, opens it, and checks that it fails with a message holding the path
 * and each given substring. Returns the status. */
static ig_status expect_open_fail(const buf *b, size_t n, const char *sub1, const char *sub2) {
    const char *path = tmp_path("crafted.gguf");
    write_bytes(path, b->p, n);
    ig_gguf *g = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_gguf_open(path, &g, &err);
    CU_ASSERT_NOT_EQUAL(rc, IG_OK);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    if (sub1) CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, sub1));
    if (sub2) CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, sub2));
    if ((sub1 && !strstr(err.msg, sub1)) || (sub2 && !strstr(err.msg, sub2)) || rc == IG_OK)
        fprintf(stderr, "\n  unexpected: rc=%d msg=%s\n", rc, err.msg);
    ig_gguf_close(g);
    remove(path);
    return rc;
}

/* ---- crafted files -----------------------------------------------------------------------------
 */

static void test_crafted_valid(void) {
    for (uint32_t version = 2; version <= 3; version++) {
        buf b = {0};
        craft(&b, (craft_opts){.version = version});
        const char *path = tmp_path("valid.gguf");
        write_bytes(path, b.p, b.n);
        free(b.p);
        ig_gguf *g = NULL;
        ig_error err;
        ig_status rc = ig_gguf_open(path, &g, &err);
        CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
        CU_ASSERT_EQUAL(ig_gguf_version(g), version);
        CU_ASSERT_STRING_EQUAL(ig_gguf_path(g), path);
        CU_ASSERT_EQUAL(ig_gguf_n_kv(g), 3);
        CU_ASSERT_EQUAL(ig_gguf_n_tensors(g), 2);
        uint32_t u;
        CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "llama.block_count", &u, &err), IG_OK);
        CU_ASSERT_EQUAL(u, 3);
        const char *s;
        size_t len;
        CU_ASSERT_EQUAL(ig_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 2, &s, &len, &err), IG_OK);
        CU_ASSERT(len == 3 && memcmp(s, "ccc", 3) == 0);
        const ig_gguf_tensor *t = ig_gguf_find_tensor(g, T1_NAME);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        float out[64];
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_F32, out, &err), IG_OK);
        int bad = 0;
        for (int j = 0; j < 32; j++) {
            bad += out[j] != 0.5f * (float)(j - 16);
            bad += out[32 + j] != 0.5f * (float)(16 - j);
        }
        CU_ASSERT_EQUAL(bad, 0);
        t = ig_gguf_find_tensor(g, T2_NAME);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_F32, out, &err), IG_OK);
        CU_ASSERT_EQUAL(out[31], 7.75f);
        /* A type mismatch names file, key, expected and found types, on one line. */
        char want[4500];
        snprintf(want, sizeof want, "%s: key 'general.architecture': expected u32, found string",
                 path);
        CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "general.architecture", &u, &err), IG_ERR_FORMAT);
        CU_ASSERT_STRING_EQUAL(err.msg, want);
        CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "no.such.key", &u, &err), IG_ERR_NOT_FOUND);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'no.such.key'"));
        ig_gguf_close(g);
        remove(path);
    }
}

/* Every proper prefix of a valid file is truncated somewhere: all must fail cleanly (ASan watches
 * for out-of-bounds reads), and the message must say where. */
static void test_truncated_everywhere(void) {
    buf b = {0};
    craft_pos pos = craft(&b, (craft_opts){0});
    int opened = 0;
    const char *path = tmp_path("trunc.gguf");
    for (size_t n = 0; n < b.n; n++) {
        write_bytes(path, b.p, n);
        ig_gguf *g = NULL;
        ig_error err;
        ig_error_clear(&err);
        ig_status rc = ig_gguf_open(path, &g, &err);
        if (rc == IG_OK) {
            opened++;
            ig_gguf_close(g);
        } else if (!strstr(err.msg, path) || err.msg[strlen(err.msg) - 1] == '\n') {
            opened += 1000; /* message must name the file and be one line */
        }
    }
    remove(path);
    CU_ASSERT_EQUAL(opened, 0);

    expect_open_fail(&b, 0, "not a GGUF file", NULL);
    expect_open_fail(&b, 10, "header truncated", NULL);
    expect_open_fail(&b, pos.arch_value + 2, "key 'general.architecture'", "past end of file");
    expect_open_fail(&b, pos.tok_elem2, "key 'tokenizer.ggml.tokens'", "element 2 of 3");
    expect_open_fail(&b, pos.t2_ne0 + 3, "tensor '" T2_NAME "'", "past end of file");
    expect_open_fail(&b, pos.t2_data + 5, "tensor '" T2_NAME "'", "extends past end of file (size");
    free(b.p);
}

/* Each byte of a valid file flipped in turn: the result either opens (and then every tensor reads)
 * or fails with a one-line message naming the file; ASan checks every access either way. */
static void test_byte_flips(void) {
    buf b = {0};
    craft(&b, (craft_opts){0});
    const char *path = tmp_path("flip.gguf");
    int bad_msgs = 0, opened = 0;
    float out[64];
    for (size_t i = 0; i < b.n; i++) {
        for (int k = 0; k < 2; k++) {
            uint8_t saved = b.p[i];
            b.p[i] ^= k ? 0xff : 0x01;
            write_bytes(path, b.p, b.n);
            b.p[i] = saved;
            ig_gguf *g = NULL;
            ig_error err;
            ig_error_clear(&err);
            if (ig_gguf_open(path, &g, &err) == IG_OK) {
                opened++;
                for (size_t t = 0; t < ig_gguf_n_tensors(g); t++) {
                    const ig_gguf_tensor *ti = ig_gguf_tensor_at(g, t);
                    if (ti->n_elements <= 64) ig_gguf_tensor_read(g, ti, IG_DTYPE_F32, out, &err);
                }
                ig_gguf_close(g);
            } else if (!strstr(err.msg, path) || strchr(err.msg, '\n')) {
                bad_msgs++;
            }
        }
    }
    remove(path);
    free(b.p);
    CU_ASSERT_EQUAL(bad_msgs, 0);
    CU_ASSERT(opened > 0); /* flips inside tensor data leave a valid file */
}

static void test_bad_header(void) {
    buf b = {0};
    craft_pos pos = craft(&b, (craft_opts){0});
    memcpy(b.p, "GGML", 4);
    expect_open_fail(&b, b.n, "not a GGUF file", "'GGML'");
    memcpy(b.p, "GGUF", 4);

    patch_u32(&b, pos.version, 1);
    CU_ASSERT_EQUAL(expect_open_fail(&b, b.n, "unsupported GGUF version 1", NULL),
                    IG_ERR_UNSUPPORTED);
    patch_u32(&b, pos.version, 4);
    expect_open_fail(&b, b.n, "unsupported GGUF version 4", NULL);
    patch_u32(&b, pos.version, 0x03000000u);
    expect_open_fail(&b, b.n, "big-endian", NULL);
    patch_u32(&b, pos.version, 3);

    patch_u64(&b, pos.n_kv, 1ull << 60);
    expect_open_fail(&b, b.n, "key/value pairs", NULL);
    patch_u64(&b, pos.n_kv, 3);
    patch_u64(&b, pos.n_tensors, UINT64_MAX);
    expect_open_fail(&b, b.n, "tensors", NULL);
    free(b.p);
}

static void test_lying_lengths(void) {
    buf b = {0};
    craft_pos pos = craft(&b, (craft_opts){0});
    /* A string that claims more bytes than the file has. */
    patch_u64(&b, pos.arch_len, 1ull << 40);
    expect_open_fail(&b, b.n, "key 'general.architecture'", "string of 1099511627776 bytes");
    patch_u64(&b, pos.arch_len, UINT64_MAX);
    expect_open_fail(&b, b.n, "key 'general.architecture'", "past end of file");
    patch_u64(&b, pos.arch_len, 5);

    /* An array count far beyond the file: must fail before allocating for it. */
    patch_u64(&b, pos.tok_count, 1ull << 61);
    expect_open_fail(&b, b.n, "key 'tokenizer.ggml.tokens'", "claims more bytes than the file");
    /* A numeric array whose byte size overflows 64 bits. */
    patch_u32(&b, pos.tok_type, IG_GGUF_U32);
    patch_u64(&b, pos.tok_count, UINT64_MAX / 2);
    expect_open_fail(&b, b.n, "key 'tokenizer.ggml.tokens'", "array of");
    patch_u32(&b, pos.tok_type, 77);
    patch_u64(&b, pos.tok_count, 3);
    expect_open_fail(&b, b.n, "key 'tokenizer.ggml.tokens'", "unknown value type");
    patch_u32(&b, pos.tok_type, IG_GGUF_STRING);
    free(b.p);
}

static void test_bad_tensors(void) {
    buf b = {0};
    craft_pos pos = craft(&b, (craft_opts){0});

    patch_u64(&b, pos.t2_offset, 1u << 20);
    expect_open_fail(&b, b.n, "tensor '" T2_NAME "': data [offset ", "extends past end of file");
    patch_u64(&b, pos.t2_offset, UINT64_MAX - 31);
    expect_open_fail(&b, b.n, "tensor '" T2_NAME "'", "past end of file");
    patch_u64(&b, pos.t2_offset, 33);
    expect_open_fail(&b, b.n, "tensor '" T2_NAME "'", "not a multiple of the alignment 32");
    patch_u64(&b, pos.t2_offset, 96);

    patch_u32(&b, pos.t1_type, 99);
    CU_ASSERT_EQUAL(expect_open_fail(&b, b.n, "tensor '" T1_NAME "'", "unknown ggml type 99"),
                    IG_ERR_UNSUPPORTED);
    patch_u32(&b, pos.t1_type, 4); /* a number ggml retired (Q4_2) */
    expect_open_fail(&b, b.n, "tensor '" T1_NAME "'", "unknown ggml type 4");
    patch_u32(&b, pos.t1_type, IG_GGML_Q8_0);

    patch_u32(&b, pos.t1_ndims, 5);
    expect_open_fail(&b, b.n, "tensor '" T1_NAME "'", "n_dims is 5");
    patch_u32(&b, pos.t1_ndims, 0xffffffffu);
    expect_open_fail(&b, b.n, "tensor '" T1_NAME "'", "n_dims is 4294967295");
    patch_u32(&b, pos.t1_ndims, 2);

    patch_u64(&b, pos.t1_ne0, 16);
    expect_open_fail(&b, b.n, "tensor '" T1_NAME "'", "not a multiple of the Q8_0 block size 32");
    patch_u64(&b, pos.t1_ne0, 1ull << 62);
    patch_u64(&b, pos.t1_ne0 + 8, 1ull << 62);
    expect_open_fail(&b, b.n, "tensor '" T1_NAME "'", "overflow");
    patch_u64(&b, pos.t1_ne0, 1ull << 40);
    patch_u64(&b, pos.t1_ne0 + 8, 1);
    expect_open_fail(&b, b.n, "tensor '" T1_NAME "'", "extends past end of file");
    free(b.p);

    b = (buf){0};
    craft(&b, (craft_opts){.t2name = T1_NAME});
    expect_open_fail(&b, b.n, "tensor '" T1_NAME "' appears twice", NULL);
    free(b.p);
    b = (buf){0};
    craft(&b, (craft_opts){.key2 = "general.architecture"});
    expect_open_fail(&b, b.n, "key 'general.architecture' appears twice", NULL);
    free(b.p);
    /* Control characters from the file never break the one-line message. */
    b = (buf){0};
    craft_pos pos2 = craft(&b, (craft_opts){.key2 = "bad\nkey"});
    patch_u32(&b, pos2.key2_type, 99);
    expect_open_fail(&b, b.n, "key 'bad?key': unknown value type 99", NULL);
    free(b.p);
}

static void test_alignment_key(void) {
    buf b = {0};
    craft(&b, (craft_opts){.alignment_kv = 64});
    const char *path = tmp_path("align.gguf");
    write_bytes(path, b.p, b.n);
    ig_gguf *g = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_gguf_open(path, &g, &err), IG_OK);
    const ig_gguf_tensor *t = ig_gguf_find_tensor(g, T2_NAME);
    CU_ASSERT_EQUAL(t->offset, 128);
    CU_ASSERT_EQUAL((uintptr_t)t->data % 64, 0);
    ig_gguf_close(g);
    remove(path);
    free(b.p);

    b = (buf){0};
    craft(&b, (craft_opts){.alignment_kv = 48});
    expect_open_fail(&b, b.n, "key 'general.alignment'", "power of two, found 48");
    free(b.p);
    b = (buf){0};
    craft(&b, (craft_opts){.alignment_kv = -1});
    expect_open_fail(&b, b.n, "key 'general.alignment': expected u32, found string", NULL);
    free(b.p);
}

/* ---- the gguf-py fixture --------------------------------------------------------------------- */

static ig_gguf *open_fixture(void) {
    ig_gguf *g = NULL;
    ig_error err;
    if (ig_gguf_open(ig_test_fixture("io/quants.gguf"), &g, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    return g;
}

static void test_fixture_scalars(void) {
    ig_gguf *g = open_fixture();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    ig_error err;
    CU_ASSERT_EQUAL(ig_gguf_version(g), 3);
    CU_ASSERT_EQUAL(ig_gguf_n_kv(g), 25);
    for (size_t i = 0; i < ig_gguf_n_kv(g); i++)
        CU_ASSERT_EQUAL(ig_gguf_find_key(g, ig_gguf_key_name(g, (int64_t)i)), (int64_t)i);
    CU_ASSERT_EQUAL(ig_gguf_find_key(g, "test"), -1);
    CU_ASSERT_EQUAL(ig_gguf_key_type(g, ig_gguf_find_key(g, "test.u16")), IG_GGUF_U16);
    CU_ASSERT_EQUAL(ig_gguf_key_type(g, ig_gguf_find_key(g, "test.arr_str")), IG_GGUF_ARRAY);

    uint32_t u = 0;
    int64_t i = 0;
    float f = 0;
    int bl = 0;
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "general.alignment", &u, &err), IG_OK);
    CU_ASSERT_EQUAL(u, 64);
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "test.u8", &u, &err), IG_OK);
    CU_ASSERT_EQUAL(u, 200);
    CU_ASSERT_EQUAL(ig_gguf_get_i64(g, "test.i8", &i, &err), IG_OK);
    CU_ASSERT_EQUAL(i, -100);
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "test.u16", &u, &err), IG_OK);
    CU_ASSERT_EQUAL(u, 60000);
    CU_ASSERT_EQUAL(ig_gguf_get_i64(g, "test.i16", &i, &err), IG_OK);
    CU_ASSERT_EQUAL(i, -30000);
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "test.u32", &u, &err), IG_OK);
    CU_ASSERT_EQUAL(u, 4000000000u);
    CU_ASSERT_EQUAL(ig_gguf_get_i64(g, "test.u32", &i, &err), IG_OK);
    CU_ASSERT_EQUAL(i, 4000000000);
    CU_ASSERT_EQUAL(ig_gguf_get_i64(g, "test.i32", &i, &err), IG_OK);
    CU_ASSERT_EQUAL(i, -2000000000);
    CU_ASSERT_EQUAL(ig_gguf_get_f32(g, "test.f32", &f, &err), IG_OK);
    CU_ASSERT_EQUAL(f, 3.25f);
    CU_ASSERT_EQUAL(ig_gguf_get_bool(g, "test.bool", &bl, &err), IG_OK);
    CU_ASSERT_EQUAL(bl, 1);
    CU_ASSERT_EQUAL(ig_gguf_get_i64(g, "test.i64", &i, &err), IG_OK);
    CU_ASSERT_EQUAL(i, -(INT64_C(1) << 62));
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "test.small_i64_as_u32", &u, &err), IG_OK);
    CU_ASSERT_EQUAL(u, 7);
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "test.i64_fits_u32", &u, &err), IG_OK);
    CU_ASSERT_EQUAL(u, 123456);
    const char *s;
    size_t len;
    CU_ASSERT_EQUAL(ig_gguf_get_str(g, "test.string", &s, &len, &err), IG_OK);
    CU_ASSERT(len == strlen("h\xc3\xa9llo w\xc3\xb6rld") &&
              !memcmp(s, "h\xc3\xa9llo w\xc3\xb6rld", len));
    CU_ASSERT_EQUAL(ig_gguf_get_str(g, "general.architecture", &s, &len, &err), IG_OK);
    CU_ASSERT(len == 9 && !memcmp(s, "igen-test", 9));

    /* Values that do not fit, and wrong types: errors naming the key. */
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "test.negative", &u, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.msg, "key 'test.negative': value -1 (i32) does not fit in u32"));
    CU_ASSERT_EQUAL(ig_gguf_get_i64(g, "test.u64", &i, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "key 'test.u64': value 9223372036854775813 (u64)"));
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "test.i64", &u, &err), IG_ERR_FORMAT);
    CU_ASSERT_EQUAL(ig_gguf_get_f32(g, "test.f64", &f, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'test.f64'"));
    CU_ASSERT_EQUAL(ig_gguf_get_f32(g, "test.u8", &f, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "key 'test.u8': expected f32, found u8"));
    CU_ASSERT_EQUAL(ig_gguf_get_bool(g, "test.u8", &bl, &err), IG_ERR_FORMAT);
    CU_ASSERT_EQUAL(ig_gguf_get_str(g, "test.arr_str", &s, &len, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.msg, "key 'test.arr_str': expected string, found array of string"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "quants.gguf: "));
    ig_gguf_close(g);
}

static void test_fixture_arrays(void) {
    ig_gguf *g = open_fixture();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    ig_error err;
    ig_gguf_vtype et;
    uint64_t n;
    const void *data;

    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.arr_i32", &et, &n, &err), IG_OK);
    CU_ASSERT(et == IG_GGUF_I32 && n == 4);
    CU_ASSERT_EQUAL_FATAL(ig_gguf_get_arr_data(g, "test.arr_i32", &data, &err), IG_OK);
    int32_t iv[4];
    memcpy(iv, data, sizeof iv);
    CU_ASSERT(iv[0] == 1 && iv[1] == -2 && iv[2] == 3 && iv[3] == -4);

    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.arr_f32", &et, &n, &err), IG_OK);
    CU_ASSERT(et == IG_GGUF_F32 && n == 3);
    CU_ASSERT_EQUAL_FATAL(ig_gguf_get_arr_data(g, "test.arr_f32", &data, &err), IG_OK);
    float fv[3];
    memcpy(fv, data, sizeof fv);
    CU_ASSERT(fv[0] == 0.5f && fv[1] == -1.5f && fv[2] == 2.25f);

    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.arr_bool", &et, &n, &err), IG_OK);
    CU_ASSERT(et == IG_GGUF_BOOL && n == 3);
    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.arr_u64", &et, &n, &err), IG_OK);
    CU_ASSERT(et == IG_GGUF_U64 && n == 2);
    CU_ASSERT_EQUAL_FATAL(ig_gguf_get_arr_data(g, "test.arr_u64", &data, &err), IG_OK);
    uint64_t uv[2];
    memcpy(uv, data, sizeof uv);
    CU_ASSERT(uv[0] == 1 && uv[1] == UINT64_MAX);
    CU_ASSERT_EQUAL_FATAL(ig_gguf_get_arr_data(g, "test.arr_u8", &data, &err), IG_OK);
    CU_ASSERT(memcmp(data, "\x00\xff\x07", 3) == 0);

    static const char *const strs[] = {"a", "bc", "", "d\303\251f"}; /* "déf" in UTF-8 */
    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.arr_str", &et, &n, &err), IG_OK);
    CU_ASSERT(et == IG_GGUF_STRING && n == 4);
    for (uint64_t k = 0; k < 4; k++) {
        const char *s;
        size_t len;
        CU_ASSERT_EQUAL(ig_gguf_get_arr_str(g, "test.arr_str", k, &s, &len, &err), IG_OK);
        CU_ASSERT(len == strlen(strs[k]) && !memcmp(s, strs[k], len));
    }
    const char *s;
    size_t len;
    CU_ASSERT_EQUAL(ig_gguf_get_arr_str(g, "test.arr_str", 4, &s, &len, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "key 'test.arr_str': index 4 out of range"));
    CU_ASSERT_EQUAL(ig_gguf_get_arr_str(g, "test.arr_i32", 0, &s, &len, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.msg, "key 'test.arr_i32': expected array of string, found array of i32"));
    CU_ASSERT_EQUAL(ig_gguf_get_arr_data(g, "test.arr_str", &data, &err), IG_ERR_FORMAT);
    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.u8", &et, &n, &err), IG_ERR_FORMAT);

    /* Arrays of arrays are walked over (the keys after them still parse) but not readable. */
    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.arr_nested", &et, &n, &err), IG_OK);
    CU_ASSERT(et == IG_GGUF_ARRAY && n == 2);
    CU_ASSERT_EQUAL(ig_gguf_get_arr_data(g, "test.arr_nested", &data, &err), IG_ERR_FORMAT);
    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "test.tensor_names", &et, &n, &err), IG_OK);
    CU_ASSERT_EQUAL(n, 13);
    ig_gguf_close(g);
}

static void test_fixture_tensors(void) {
    ig_gguf *g = open_fixture();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    ig_error err;
    CU_ASSERT_EQUAL(ig_gguf_n_tensors(g), 26);
    for (size_t i = 0; i < ig_gguf_n_tensors(g); i++) {
        const ig_gguf_tensor *t = ig_gguf_tensor_at(g, i);
        CU_ASSERT_PTR_EQUAL(ig_gguf_find_tensor(g, t->name), t);
        CU_ASSERT_EQUAL(t->offset % 64, 0); /* general.alignment = 64 in this file */
        CU_ASSERT_EQUAL((uintptr_t)t->data % 64, 0);
    }
    CU_ASSERT_PTR_NULL(ig_gguf_tensor_at(g, 26));
    CU_ASSERT_PTR_NULL(ig_gguf_find_tensor(g, "q8_"));
    const ig_gguf_tensor *t = ig_gguf_find_tensor(g, "q8_0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->type, IG_GGML_Q8_0);
    CU_ASSERT_EQUAL(t->n_dims, 3);
    CU_ASSERT(t->ne[0] == 64 && t->ne[1] == 3 && t->ne[2] == 2 && t->ne[3] == 1);
    CU_ASSERT_EQUAL(t->n_elements, 384);
    CU_ASSERT_EQUAL(t->n_bytes, 12 * 34);
    CU_ASSERT_STRING_EQUAL(ig_ggml_type_name(t->type), "Q8_0");
    t = ig_gguf_find_tensor(g, "q6_k");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(t->type == IG_GGML_Q6_K && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 2);
    CU_ASSERT_EQUAL(t->n_bytes, 2 * 210);
    CU_ASSERT_STRING_EQUAL(ig_ggml_type_name(IG_GGML_BF16), "BF16");
    CU_ASSERT_STRING_EQUAL(ig_ggml_type_name((ig_ggml_type)5), "unknown");
    /* Integer destinations are refused. */
    int32_t dummy[384];
    CU_ASSERT_EQUAL(
        ig_gguf_tensor_read(g, ig_gguf_find_tensor(g, "q8_0"), IG_DTYPE_I32, dummy, &err),
        IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "tensor 'q8_0'"));
    ig_gguf_close(g);
}

/* ---- the real model -------------------------------------------------------------------------- */

static json_object *load_json(const char *path) {
    json_object *o = json_object_from_file(path);
    if (!o) fprintf(stderr, "cannot read %s\n", path);
    return o;
}

static void test_smollm2(void) {
    const char *model = ig_test_default_model();
    if (!model) {
        ig_test_skip("default model not installed (tools/setup.sh, or set IGEN_MODEL)");
        return;
    }
    json_object *exp = load_json(ig_test_fixture("io/smollm2_expected.json"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(exp);
    ig_gguf *g = NULL;
    ig_error err;
    if (ig_gguf_open(model, &g, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        json_object_put(exp);
        CU_FAIL_FATAL("cannot open the model");
    }
    json_object *v;
    const char *s;
    size_t len;
    CU_ASSERT_EQUAL(ig_gguf_get_str(g, "general.architecture", &s, &len, &err), IG_OK);
    CU_ASSERT(len == 5 && !memcmp(s, "llama", 5));
    json_object_object_get_ex(exp, "general.architecture", &v);
    CU_ASSERT(len == (size_t)json_object_get_string_len(v) &&
              !memcmp(s, json_object_get_string(v), len));
    uint32_t u;
    CU_ASSERT_EQUAL(ig_gguf_get_u32(g, "llama.block_count", &u, &err), IG_OK);
    CU_ASSERT_EQUAL(u, 30);
    json_object_object_get_ex(exp, "n_tensors", &v);
    CU_ASSERT_EQUAL(ig_gguf_n_tensors(g), 272);
    CU_ASSERT_EQUAL(ig_gguf_n_tensors(g), (size_t)json_object_get_int64(v));
    json_object_object_get_ex(exp, "n_kv", &v);
    CU_ASSERT_EQUAL(ig_gguf_n_kv(g), (size_t)json_object_get_int64(v));
    ig_gguf_vtype et;
    uint64_t n;
    CU_ASSERT_EQUAL(ig_gguf_get_arr_info(g, "tokenizer.ggml.tokens", &et, &n, &err), IG_OK);
    json_object_object_get_ex(exp, "n_vocab_tokens", &v);
    CU_ASSERT_EQUAL(n, (uint64_t)json_object_get_int64(v));
    CU_ASSERT_EQUAL(ig_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 100, &s, &len, &err), IG_OK);
    json_object_object_get_ex(exp, "token_100", &v);
    CU_ASSERT(len == (size_t)json_object_get_string_len(v) &&
              !memcmp(s, json_object_get_string(v), len));

    const ig_gguf_tensor *emb = ig_gguf_find_tensor(g, "token_embd.weight");
    CU_ASSERT_PTR_NOT_NULL_FATAL(emb);
    CU_ASSERT_EQUAL(emb->type, IG_GGML_Q8_0);
    CU_ASSERT(emb->n_dims == 2 && emb->ne[0] == 576 && emb->ne[1] == 49152);

    json_object *tens;
    json_object_object_get_ex(exp, "tensors", &tens);
    json_object_object_foreach(tens, name, te) {
        const ig_gguf_tensor *t = ig_gguf_find_tensor(g, name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        json_object_object_get_ex(te, "type", &v);
        CU_ASSERT_STRING_EQUAL(ig_ggml_type_name(t->type), json_object_get_string(v));
        json_object_object_get_ex(te, "ne", &v);
        for (int d = 0; d < 4; d++) {
            int64_t want = d < (int)json_object_array_length(v)
                               ? json_object_get_int64(json_object_array_get_idx(v, (size_t)d))
                               : 1;
            CU_ASSERT_EQUAL(t->ne[d], want);
        }
        json_object_object_get_ex(te, "n_bytes", &v);
        CU_ASSERT_EQUAL(t->n_bytes, (size_t)json_object_get_int64(v));

        float *out = malloc((size_t)t->n_elements * sizeof *out);
        uint16_t *half = malloc((size_t)t->n_elements * sizeof *half);
        CU_ASSERT_FATAL(out && half);
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_F32, out, &err), IG_OK);
        /* Bit-exact: the order-defined checksum sum((i+1) * bits[i]) mod 2^64. */
        uint64_t chk = 0;
        double sum = 0;
        for (int64_t i = 0; i < t->n_elements; i++) {
            uint32_t bits;
            memcpy(&bits, &out[i], 4);
            chk += (uint64_t)bits * (uint64_t)(i + 1);
            sum += out[i];
        }
        json_object_object_get_ex(te, "checksum_bits_weighted", &v);
        uint64_t want_chk = strtoull(json_object_get_string(v), NULL, 10);
        CU_ASSERT_EQUAL(chk, want_chk);
        json_object_object_get_ex(te, "sum", &v);
        IG_ASSERT_NEAR(sum, json_object_get_double(v), 1e-6 * (1 + fabs(sum)) + 1e-3);
        json_object *idx, *bits;
        json_object_object_get_ex(te, "indices", &idx);
        json_object_object_get_ex(te, "bits", &bits);
        int mism = 0;
        for (size_t k = 0; k < json_object_array_length(idx); k++) {
            int64_t i = json_object_get_int64(json_object_array_get_idx(idx, k));
            uint32_t b;
            memcpy(&b, &out[i], 4);
            mism += b != (uint32_t)json_object_get_int64(json_object_array_get_idx(bits, k));
        }
        CU_ASSERT_EQUAL(mism, 0);
        /* Narrowed reads equal the f32 result converted with the engine's own rounding. */
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_F16, half, &err), IG_OK);
        int bad16 = 0;
        for (int64_t i = 0; i < t->n_elements; i++) bad16 += half[i] != ig_f32_to_f16(out[i]);
        CU_ASSERT_EQUAL(bad16, 0);
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_BF16, half, &err), IG_OK);
        int bad_bf = 0;
        for (int64_t i = 0; i < t->n_elements; i++) bad_bf += half[i] != ig_f32_to_bf16(out[i]);
        CU_ASSERT_EQUAL(bad_bf, 0);
        free(out);
        free(half);
    }
    json_object_put(exp);
    ig_gguf_close(g);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("gguf_crafted", NULL, NULL);
    CU_add_test(s, "valid_v2_v3", test_crafted_valid);
    CU_add_test(s, "truncated_everywhere", test_truncated_everywhere);
    CU_add_test(s, "byte_flips", test_byte_flips);
    CU_add_test(s, "bad_header", test_bad_header);
    CU_add_test(s, "lying_lengths", test_lying_lengths);
    CU_add_test(s, "bad_tensors", test_bad_tensors);
    CU_add_test(s, "alignment_key", test_alignment_key);
    s = CU_add_suite("gguf_fixture", NULL, NULL);
    CU_add_test(s, "scalars", test_fixture_scalars);
    CU_add_test(s, "arrays", test_fixture_arrays);
    CU_add_test(s, "tensors", test_fixture_tensors);
    s = CU_add_suite("gguf_model", NULL, NULL);
    CU_add_test(s, "smollm2", test_smollm2);
}
